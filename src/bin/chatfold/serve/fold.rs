//! A chat request's body through the compactor (on a blocking thread):
//! its budget, its tenant's cache, the summarizer with its single flight,
//! and the extractive summary when the summarizer fails.

use std::sync::atomic::{AtomicBool, Ordering};

use chatfold::{Error, Format, History, Summarizer, SummaryRequest, TokenCounter};
use hyper::StatusCode;
use serde_json::Value;

use super::App;
use super::errors::ApiError;
use super::flight::{self, Had};
use super::metrics::bump;
use crate::body;

/// What the compaction step decided for a request.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    /// The compacted body; `None`: forward the client's bytes.
    pub(crate) body: Option<Vec<u8>>,
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
}

/// The reply's reserve a window-sized budget leaves room for.
const RESERVES: [&str; 3] = ["max_tokens", "max_completion_tokens", "max_output_tokens"];

/// Fields besides the messages that the model reads (tool and output
/// schemas): a window-sized budget leaves room for them too.
const SCHEMAS: [&str; 4] = ["tools", "functions", "tool_choice", "response_format"];

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

/// A chat body read, with its budget.
struct Read {
    history: History,
    budget: usize,
    /// What to say when nothing is compacted.
    pass: Folded,
}

/// Reads a chat body of `format` and finds its budget (`asked`: the
/// request's own, `x-chatfold-budget`); or the answer when there is
/// nothing to compact (no budget applies, or the body cannot be read).
fn read(
    app: &App,
    format: Format,
    bytes: &[u8],
    asked: Option<usize>,
) -> Result<Read, Result<Folded, ApiError>> {
    // A body is in memory whole: read in place when it is UTF-8 (the
    // reader's errors, at the same places, say where it is not).
    let parsed =
        std::str::from_utf8(bytes).map_or_else(|_| History::from_reader(bytes), History::from_json_str);
    let history = match parsed.and_then(|h| body::in_format(h, Some(format))) {
        Ok(history) => history,
        Err(e) => return Err(unreadable(app, bytes, asked, e)),
    };
    let model = history.field("model").and_then(Value::as_str).map(str::to_owned);
    let reserve = || reserve(|f| history.field(f), &app.base.counter);
    let budget = asked.or_else(|| app.config.budget(model.as_deref(), reserve));
    let pass = Folded {
        model,
        cache: "none",
        ..Folded::default()
    };
    match budget {
        None => Err(Ok(pass)),
        Some(0) => Err(Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the request's max_tokens leaves no room for its messages in the model's window",
        ))),
        Some(budget) => Ok(Read {
            history,
            budget,
            pass,
        }),
    }
}

/// What to forward for a body that fits (or that cannot be compacted),
/// decided without a cache or a summarizer, so on any thread; `None` when
/// it must be compacted ([`fold`]).
pub(crate) fn without_folding(
    app: &App,
    format: Format,
    bytes: &[u8],
    asked: Option<usize>,
) -> Option<Result<Folded, ApiError>> {
    let Read {
        history,
        budget,
        pass,
    } = match read(app, format, bytes, asked) {
        Ok(read) => read,
        Err(answer) => return Some(answer),
    };
    let mut compactor = app.base.clone();
    compactor.budget = budget;
    match body::plan(&mut compactor, &history) {
        Err(failure) => Some(Err(refused(failure))),
        Ok(plan) if !plan.folds() => Some(unchanged(plan, pass)),
        Ok(_) => None,
    }
}

/// The plan that folds nothing, as an answer: the client's bytes go.
fn unchanged(plan: chatfold::Plan<'_, '_, chatfold::NamedCounter>, pass: Folded) -> Result<Folded, ApiError> {
    let result = plan.apply("").map_err(failed)?;
    Ok(Folded {
        tokens: Some((result.tokens_before.get(), result.tokens_after)),
        // Nothing could be folded, and what must stay does not fit.
        over_budget: result.over_budget,
        ..pass
    })
}

/// Decides what to forward for a chat request of `format`: `bytes` as they
/// came when they fit (or no budget applies), else the body compacted,
/// with the tenant's cache and the summarizer (so on a blocking thread).
///
/// `asked` is the request's own budget (`x-chatfold-budget`), `tenant` its
/// tenant (see `tenant::tenant`).
pub(crate) fn fold(
    app: &App,
    format: Format,
    bytes: &[u8],
    asked: Option<usize>,
    tenant: &str,
) -> Result<Folded, ApiError> {
    let Read {
        history,
        budget,
        pass,
    } = match read(app, format, bytes, asked) {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let namespace = format!("{tenant} {}", app.summarizer_name);
    let mut compactor = app.compactor(budget, &namespace);
    let plan = body::plan(&mut compactor, &history).map_err(refused)?;
    if !plan.folds() {
        return unchanged(plan, pass);
    }
    let guarded = Guarded {
        app,
        namespace: &namespace,
        called: AtomicBool::new(false),
    };
    let (result, fallback) = match plan.compact(&guarded) {
        Ok(result) => (result, None),
        Err(e @ (Error::Summarize(_) | Error::EmptySummary)) => {
            bump(&app.metrics.fallbacks);
            // The client hears what failed; the operator, on stderr, why
            // (the summarizer's own words may name its host or command).
            let why = e.to_string();
            eprintln!(
                "warning: {}; the extractive summary stands in",
                crate::Failure::from(e).message
            );
            let mut compactor = app.compactor(budget, &format!("{tenant} extractive"));
            let plan = body::plan(&mut compactor, &history).map_err(refused)?;
            (plan.compact(&app.fallback).map_err(failed)?, Some(why))
        }
        Err(e) => return Err(failed(e)),
    };
    let hit = !guarded.called.load(Ordering::Relaxed) && fallback.is_none();
    bump(if hit {
        &app.metrics.cache_hits
    } else {
        &app.metrics.cache_misses
    });
    let written = body::written(&history, &result, false).map_err(refused)?;
    let metrics = &app.metrics;
    bump(&metrics.compacted);
    let before = result.tokens_before.get() as u64;
    metrics.tokens_before.fetch_add(before, Ordering::Relaxed);
    metrics
        .tokens_after
        .fetch_add(result.tokens_after as u64, Ordering::Relaxed);
    Ok(Folded {
        body: Some(written),
        tokens: Some((result.tokens_before.get(), result.tokens_after)),
        over_budget: result.over_budget,
        cache: if hit { "hit" } else { "miss" },
        fallback,
        ..pass
    })
}

/// A body chatfold cannot read: forwarded when it surely fits (its bytes
/// are no more than the budget: a token takes at least a byte, and JSON's
/// framing outweighs a message's overhead) or no budget applies, else 400.
fn unreadable(app: &App, bytes: &[u8], asked: Option<usize>, e: Error) -> Result<Folded, ApiError> {
    let lenient: Option<Value> = serde_json::from_slice(bytes).ok();
    let field = |name: &str| lenient.as_ref()?.get(name);
    let model = field("model").and_then(Value::as_str).map(str::to_owned);
    let budget = asked.or_else(|| {
        app.config
            .budget(model.as_deref(), || reserve(field, &app.base.counter))
    });
    match budget {
        Some(budget) if bytes.len() > budget => Err(ApiError::unreadable(e)),
        _ => Ok(Folded {
            model,
            cache: "none",
            ..Folded::default()
        }),
    }
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

/// The configured summarizer, one call per fold at a time, counted.
struct Guarded<'a> {
    app: &'a App,
    namespace: &'a str,
    /// Whether any summary was asked for (no: the cache had it).
    called: AtomicBool,
}

impl Summarizer for Guarded<'_> {
    type Error = chatfold::BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        self.called.store(true, Ordering::Relaxed);
        let app = self.app;
        let key = flight::key(&app.secret, self.namespace, request);
        let (answer, had) = app.flights.run(key, || {
            bump(&app.metrics.summarizer_calls);
            let answer = app.summarizer.summarize(request);
            if answer.is_err() {
                bump(&app.metrics.summarizer_failures);
            }
            answer
        });
        if had == Had::Waited {
            bump(&app.metrics.flight_waits);
        }
        answer
    }
}
