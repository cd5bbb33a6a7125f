//! A chat request's body through the compactor (on a blocking thread):
//! its budget, its tenant's cache, the summarizer with its single flight,
//! and the extractive summary when the summarizer fails. The step knows
//! nothing of HTTP besides its errors' statuses, and counts nothing: what
//! it did is its [`Outcome`], which the metrics and the log read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chatfold::cache::SummaryCache;
use chatfold::{
    Compactor, Error, Extractive, Format, History, NamedCounter, Pin, Summarizer, SummaryRequest,
    TokenCounter,
};
use hyper::StatusCode;
use serde_json::Value;

use super::config::Budgets;
use super::errors::ApiError;
use super::fleet::Had;
use super::flight::{self, Flights};
use crate::summarizers::Chosen;
use crate::{body, io};

/// What the fold step works with: the compactor every request's is cloned
/// from, the summarizer and its stand-in, the cache, the folds in flight.
pub(crate) struct Folding {
    /// The compactor every request's is cloned from (its budget, fold
    /// target and cache set per request).
    pub(crate) base: Compactor<NamedCounter>,
    /// The fold target, for each request's budget.
    pub(crate) fold_to: Option<crate::flags::FoldTo>,
    /// Whether a summary block gets a cache breakpoint.
    pub(crate) breakpoints: chatfold::Breakpoints,
    /// How a request's budget is found.
    pub(crate) budgets: Budgets,
    /// The configured summarizer.
    pub(crate) summarizer: Chosen,
    /// Its name in cache namespaces.
    pub(crate) summarizer_name: String,
    /// What stands in when it fails.
    pub(crate) fallback: Extractive<NamedCounter>,
    /// Summaries: in process, and Redis when given.
    pub(crate) cache: Arc<dyn SummaryCache>,
    /// The server's secret (fold keys).
    pub(crate) secret: [u8; 32],
    /// Seals and opens chatfold's compaction items (from the secret).
    pub(crate) seal: super::compaction::Seal,
    /// The folds in flight.
    pub(crate) flights: Flights,
}

impl Folding {
    /// The base compactor for `budget`, with its fold target, and the
    /// request's own pins when it names them (`x-chatfold-pin`).
    fn at(&self, budget: usize, pins: Option<&[Pin]>) -> Compactor<NamedCounter> {
        let mut compactor = self.base.clone();
        compactor.budget = budget;
        compactor.fold_to = self.fold_to.map(|f| f.tokens(budget));
        if let Some(pins) = pins {
            compactor.pins = pins.to_vec();
        }
        compactor
    }

    /// The compactor for a body that folds: `budget`, the request's pins,
    /// the tenant's cache under `namespace`, and every message counted, so
    /// that the tokens before (headers, log, metrics) are exact (a history
    /// that comes back every turn is counted from `Tiktoken`'s remembered
    /// counts).
    fn compactor(&self, budget: usize, pins: Option<&[Pin]>, namespace: &str) -> Compactor<NamedCounter> {
        let mut compactor = self.at(budget, pins);
        compactor.count_all = true;
        compactor.cache(Arc::clone(&self.cache), namespace)
    }
}

/// What the compaction step decided for a request: the body to forward,
/// and what it did.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    /// The compacted body; `None`: forward the client's bytes.
    pub(crate) body: Option<Vec<u8>>,
    /// What the step did.
    pub(crate) outcome: Outcome,
}

/// What the compaction step did, for the proxy's headers, its log line
/// and its metrics.
#[derive(Clone, Debug, Default)]
pub(crate) struct Outcome {
    /// Whether the body was compacted.
    pub(crate) summarized: bool,
    /// The body's `model`, when it has one.
    pub(crate) model: Option<String>,
    /// Tokens of the history before and after, when it was counted.
    pub(crate) tokens: Option<(usize, usize)>,
    /// Whether the result is still over the budget (the system messages
    /// and the latest turn alone do not fit).
    pub(crate) over_budget: bool,
    /// `hit`, `miss` or `none` (nothing summarized).
    pub(crate) cache: &'static str,
    /// What failed when the extractive summary stood in (the library's
    /// words, without the summarizer's own).
    pub(crate) fallback: Option<String>,
    /// The configured summarizer's calls made for it.
    pub(crate) calls: Calls,
    /// What the history's prefix went through, and the tokens of it that
    /// the client's previous request sent too (when it was counted).
    pub(crate) prefix: Option<(chatfold::Prefix, usize)>,
}

/// The configured summarizer's calls for one request.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Calls {
    /// Calls made.
    pub(crate) made: u64,
    /// Of which failed.
    pub(crate) failed: u64,
    /// Summaries waited for while the same fold was in flight.
    pub(crate) waited: u64,
}

/// The reply's reserve a window-sized budget leaves room for.
const RESERVES: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// Fields besides the messages that the model reads (tool and output
/// schemas): a window-sized budget leaves room for them too.
const SCHEMAS: [&str; 5] = ["tools", "functions", "tool_choice", "response_format", "text"];

/// The room a window-sized budget leaves besides the messages, in a body's
/// fields read with `field`: the reply's reserve, and the schemas' tokens
/// (their JSON counted by `counter`).
fn reserve<'v>(field: impl Fn(&str) -> Option<&'v Value>, counter: &impl TokenCounter) -> Option<u64> {
    let reply = RESERVES.iter().find_map(|name| field(name)?.as_u64());
    let schemas: u64 = (SCHEMAS.iter().filter_map(|name| field(name)))
        .map(|schema| counter.count(&schema.to_string()) as u64)
        .sum();
    (reply.is_some() || schemas > 0).then(|| reply.unwrap_or(0).saturating_add(schemas))
}

/// What bounds a request's budget, and what it pins.
#[derive(Clone, Debug, Default)]
pub(crate) struct Limits {
    /// The request's own budget (`x-chatfold-budget`), before the
    /// configured ones.
    pub(crate) asked: Option<usize>,
    /// A bound on whichever budget applies, and the budget when none does
    /// (a `context_management` threshold).
    pub(crate) cap: Option<usize>,
    /// The request's own pins (`x-chatfold-pin`), instead of the
    /// configured ones.
    pub(crate) pins: Option<Vec<Pin>>,
}

/// A chat body read, with its budget.
struct Read {
    history: History,
    budget: usize,
    /// What to say when nothing is compacted.
    pass: Outcome,
}

impl Folding {
    /// Reads a chat body of `format` and finds its budget (`asked`: the
    /// request's own, `x-chatfold-budget`); or the answer when there is
    /// nothing to compact (no budget applies, or the body cannot be read).
    fn read(
        &self,
        format: Format,
        bytes: &[u8],
        limits: &Limits,
    ) -> Result<Read, Box<Result<Folded, ApiError>>> {
        let Limits { asked, cap, .. } = *limits;
        // A body is in memory whole: read in place when it is UTF-8 (the
        // reader's errors, at the same places, say where it is not).
        let parsed =
            std::str::from_utf8(bytes).map_or_else(|_| History::from_reader(bytes), History::from_json_str);
        let history = match parsed.and_then(|h| io::in_format(h, Some(format))) {
            Ok(history) => history,
            Err(e) => return Err(Box::new(self.unreadable(bytes, asked, e))),
        };
        let model = history.field("model").and_then(Value::as_str).map(str::to_owned);
        let reserve = || reserve(|f| history.field(f), &self.base.counter);
        // The upstream holds the history before `previous_response_id`: the
        // input is only its continuation, and is not chatfold's to fold.
        let continued = history
            .field("previous_response_id")
            .is_some_and(|id| !id.is_null());
        let budget = (!continued)
            .then(|| {
                let budget = asked.or_else(|| self.budgets.budget(model.as_deref(), reserve));
                match (budget, cap) {
                    (Some(budget), Some(cap)) => Some(budget.min(cap)),
                    (budget, cap) => budget.or(cap),
                }
            })
            .flatten();
        let pass = Outcome {
            model,
            cache: "none",
            ..Outcome::default()
        };
        match budget {
            None => Err(Box::new(Ok(Folded {
                body: None,
                outcome: pass,
            }))),
            Some(0) => Err(Box::new(Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "the request's max_tokens leaves no room for its messages in the model's window",
            )))),
            Some(budget) => Ok(Read {
                history,
                budget,
                pass,
            }),
        }
    }

    /// What to forward for a body that fits (or that cannot be compacted),
    /// decided without a cache or a summarizer, so on any thread; `None`
    /// when it must be compacted ([`fold`](Self::fold)).
    pub(crate) fn without_folding(
        &self,
        format: Format,
        bytes: &[u8],
        limits: Limits,
    ) -> Option<Result<Folded, ApiError>> {
        let read = match self.read(format, bytes, &limits) {
            Ok(read) => read,
            Err(answer) => return Some(*answer),
        };
        let mut compactor = self.at(read.budget, limits.pins.as_deref());
        match body::plan(&mut compactor, &read.history) {
            Err(failure) => Some(Err(refused(failure))),
            Ok(plan) if !plan.changes() => Some(unchanged(plan, read.pass)),
            Ok(_) => None,
        }
    }

    /// Decides what to forward for a chat request of `format`: `bytes` as
    /// they came when they fit (or no budget applies), else the body
    /// compacted, with the tenant's cache and the summarizer (so on a
    /// blocking thread).
    ///
    /// `limits` holds the request's own budget, `tenant` its tenant (see
    /// `tenant::tenant`).
    pub(crate) fn fold(
        &self,
        format: Format,
        bytes: &[u8],
        limits: Limits,
        tenant: &str,
    ) -> Result<Folded, ApiError> {
        let Read {
            history,
            budget,
            pass,
        } = match self.read(format, bytes, &limits) {
            Ok(read) => read,
            Err(answer) => return *answer,
        };
        let namespace = format!("{tenant} {}", self.summarizer_name);
        let pins = limits.pins.as_deref();
        let mut compactor = self.compactor(budget, pins, &namespace);
        let plan = body::plan(&mut compactor, &history).map_err(refused)?;
        if !plan.changes() {
            return unchanged(plan, pass);
        }
        let guarded = Guarded {
            folding: self,
            namespace: &namespace,
            calls: Default::default(),
        };
        let (result, fallback) = match plan.compact(&guarded) {
            Ok(result) => (result, None),
            Err(e @ (Error::Summarize(_) | Error::EmptySummary)) => {
                // The client hears what failed; the operator, on stderr, why
                // (the summarizer's own words may name its host or command).
                let why = e.to_string();
                eprintln!(
                    "warning: {}; the extractive summary stands in",
                    crate::Failure::from(e).message
                );
                let mut compactor = self.compactor(budget, pins, &format!("{tenant} extractive"));
                let plan = body::plan(&mut compactor, &history).map_err(refused)?;
                (plan.compact(&self.fallback).map_err(failed)?, Some(why))
            }
            Err(e) => return Err(failed(e)),
        };
        let calls = guarded.calls();
        let hit = calls.made + calls.waited == 0 && fallback.is_none();
        let written = body::written(&history, &result, self.breakpoints, false).map_err(refused)?;
        Ok(Folded {
            body: Some(written),
            outcome: Outcome {
                summarized: result.summarized,
                prefix: Some((result.report.prefix(), result.prefix_tokens)),
                tokens: Some((result.tokens_before.get(), result.tokens_after)),
                over_budget: result.over_budget,
                cache: if hit { "hit" } else { "miss" },
                fallback,
                calls,
                ..pass
            },
        })
    }

    /// The answer to `/v1/responses/compact` for a Responses body (its
    /// `input` a list): the items folded as far as the budget says, or to
    /// half their tokens when they fit it (a compaction the client asked
    /// for): the items kept as they came, then chatfold's compaction item,
    /// standing for what was replaced and the kept items.
    /// `asked` holds the request's own budget and pins.
    pub(crate) fn compact_all(
        &self,
        bytes: &[u8],
        asked: Limits,
        tenant: &str,
    ) -> Result<(Value, Outcome), ApiError> {
        let mut limits = Limits {
            cap: Some(usize::MAX),
            ..asked
        };
        let mut folded = self.fold(Format::Responses, bytes, limits.clone(), tenant)?;
        if folded.body.is_none() {
            let Some((before, _)) = folded.outcome.tokens else {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "chatfold compacts the input items it is sent, not a stored response (previous_response_id)",
                ));
            };
            limits.cap = Some((before / 2).max(1));
            folded = self.fold(Format::Responses, bytes, limits, tenant)?;
        }
        let items = |bytes: &[u8]| -> Vec<Value> {
            let body: Option<Value> = serde_json::from_slice(bytes).ok();
            body.and_then(|mut b| b.get_mut("input").map(Value::take))
                .and_then(|input| match input {
                    Value::Array(items) => Some(items),
                    _ => None,
                })
                .unwrap_or_default()
        };
        let sent = items(bytes);
        let mut written = folded.body.as_deref().map_or_else(|| sent.clone(), items);
        let kept = (written.iter().rev())
            .zip(sent.iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let kept: Vec<Value> = (written.split_off(written.len() - kept).into_iter())
            .map(super::compaction::typed)
            .collect();
        written.extend(kept.iter().cloned());
        let item = self.seal.item(tenant, &written);
        let tokens = folded.outcome.tokens.unwrap_or_default();
        let answer = super::compaction::compacted_response(item, kept, tokens);
        Ok((answer, folded.outcome))
    }

    /// A body chatfold cannot read: forwarded when it surely fits (its
    /// bytes are no more than the budget: a token takes at least a byte,
    /// and JSON's framing outweighs a message's overhead) or no budget
    /// applies, else 400.
    fn unreadable(&self, bytes: &[u8], asked: Option<usize>, e: Error) -> Result<Folded, ApiError> {
        let lenient: Option<Value> = serde_json::from_slice(bytes).ok();
        let field = |name: &str| lenient.as_ref()?.get(name);
        let model = field("model").and_then(Value::as_str).map(str::to_owned);
        let budget = asked.or_else(|| {
            self.budgets
                .budget(model.as_deref(), || reserve(field, &self.base.counter))
        });
        match budget {
            Some(budget) if bytes.len() > budget => Err(ApiError::unreadable(e)),
            _ => Ok(Folded {
                body: None,
                outcome: Outcome {
                    model,
                    cache: "none",
                    ..Outcome::default()
                },
            }),
        }
    }
}

/// The plan that folds nothing, as an answer: the client's bytes go.
fn unchanged(plan: chatfold::Plan<'_, '_, NamedCounter>, pass: Outcome) -> Result<Folded, ApiError> {
    let result = plan.apply("").map_err(failed)?;
    Ok(Folded {
        body: None,
        outcome: Outcome {
            tokens: Some((result.tokens_before.get(), result.tokens_after)),
            prefix: Some((result.report.prefix(), result.prefix_tokens)),
            // Nothing could be folded, and what must stay does not fit.
            over_budget: result.over_budget,
            ..pass
        },
    })
}

/// A request the compactor refuses: the client's to fix.
fn refused(failure: crate::Failure) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        format!("chatfold cannot compact this request: {}", failure.message),
    )
}

/// A compaction that failed where the client is not at fault.
fn failed(e: Error) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!(
            "chatfold could not compact this request: {}",
            crate::Failure::from(e).message
        ),
    )
}

/// The configured summarizer, one call per fold at a time, its calls
/// counted for the request's [`Outcome`].
struct Guarded<'a> {
    folding: &'a Folding,
    namespace: &'a str,
    /// Made, failed, waited.
    calls: [AtomicU64; 3],
}

impl Guarded<'_> {
    /// The calls made so far.
    fn calls(&self) -> Calls {
        let [made, failed, waited] = self.calls.each_ref().map(|c| c.load(Ordering::Relaxed));
        Calls { made, failed, waited }
    }
}

impl Summarizer for Guarded<'_> {
    type Error = chatfold::BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        let folding = self.folding;
        let [made, failed, waited] = &self.calls;
        let key = flight::key(&folding.secret, self.namespace, request);
        let (answer, had) = folding.flights.run(key, || {
            made.fetch_add(1, Ordering::Relaxed);
            let answer = folding.summarizer.summarize(request);
            if answer.is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
            answer
        });
        if had == Had::Waited {
            waited.fetch_add(1, Ordering::Relaxed);
        }
        answer
    }
}
