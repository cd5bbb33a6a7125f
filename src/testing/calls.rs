//! The summarizer's side of the rules: a summarizer that records its
//! calls, and the check that the calls a compaction made are the ones its
//! plan asks for.

use std::sync::Mutex;

use super::rules::{Found, Rule, Violations, check_compaction, cuts_of, is_pinned, pinned, unreachable};
use crate::compact::{Compaction, Compactor};
use crate::count::TokenCounter;
use crate::error::Error;
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer, SummaryRequest};

/// One call a [`Recording`] summarizer received.
#[derive(Clone, Debug, PartialEq)]
pub struct SummarizerCall {
    /// The previous summary it was given.
    pub previous: Option<String>,
    /// The folded messages.
    pub messages: Vec<Message>,
    /// The allowance.
    pub allowance: usize,
}

impl SummarizerCall {
    fn of(request: &SummaryRequest<'_>) -> Self {
        SummarizerCall {
            previous: request.previous_summary().map(str::to_owned),
            messages: request.messages().cloned().collect(),
            allowance: request.allowance(),
        }
    }
}

/// A summarizer that records every request, then answers through `inner`
/// (sync or async).
#[derive(Debug, Default)]
pub struct Recording<S> {
    inner: S,
    calls: Mutex<Vec<SummarizerCall>>,
}

impl<S> Recording<S> {
    /// Records, then asks `inner`.
    pub fn new(inner: S) -> Self {
        Recording {
            inner,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// The calls so far, oldest first.
    pub fn calls(&self) -> Vec<SummarizerCall> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    fn record(&self, request: &SummaryRequest<'_>) {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(SummarizerCall::of(request));
        }
    }
}

impl<S: Summarizer> Summarizer for Recording<S> {
    type Error = S::Error;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, S::Error> {
        self.record(request);
        self.inner.summarize(request)
    }
}

impl<S: AsyncSummarizer + Sync> AsyncSummarizer for Recording<S> {
    type Error = S::Error;

    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl std::future::Future<Output = Result<String, S::Error>> + Send {
        self.record(&request);
        self.inner.summarize(request)
    }
}

/// Checks the summarizer's side of a compaction: one call when (and only
/// when) it summarized turns of conversation (none when it folds only
/// previous summaries), with exactly the folded turns (the non-pinned
/// messages before the cut that are not previous summaries), the previous
/// summary when there was one, and an allowance of at least the policy's
/// minimum when the result is within budget.
///
/// # Errors
///
/// Every rule broken ([`Rule::SummarizerContract`], [`Rule::UnitBoundary`]
/// when the cut cannot be found).
pub fn check_summarizer_calls<C>(
    input: &[Message],
    result: &Compaction<'_>,
    compactor: &Compactor<C>,
    calls: &[SummarizerCall],
) -> Result<(), Violations> {
    let c = compactor;
    let mut found = Found::default();
    if !result.summarized {
        found.check(calls.is_empty(), Rule::SummarizerContract, [], || {
            format!(
                "{} summarizer calls for a result that is not summarized",
                calls.len()
            )
        });
        return found.done();
    }
    let out: &[Message] = &result.messages;
    let Some(s) = out.iter().position(|m| c.policy.is_summary(m)) else {
        return found.done();
    };
    let pins = pinned(c, input);
    // Every reading of the cut folds the same messages.
    let Some(&(cut, _)) = cuts_of(input, out, s, &pins).first() else {
        found.check(false, Rule::UnitBoundary, [], || {
            "the kept part is not a suffix".to_owned()
        });
        return found.done();
    };
    let folded: Vec<usize> = (0..cut)
        .filter(|&i| !is_pinned(&input[i]) && !c.policy.is_summary(&input[i]) && !pins.contains(&i))
        .collect();
    // A fold of nothing but previous summaries makes no call.
    let wanted = usize::from(!folded.is_empty());
    found.check(calls.len() == wanted, Rule::SummarizerContract, [], || {
        format!(
            "{} summarizer calls for one compaction that folds {} turns",
            calls.len(),
            folded.len()
        )
    });
    let Some(call) = calls.first() else {
        return found.done();
    };
    let expected: Vec<&Message> = folded.iter().map(|&i| &input[i]).collect();
    let got: Vec<&Message> = call.messages.iter().collect();
    found.check(got == expected, Rule::SummarizerContract, folded.clone(), || {
        format!(
            "the summarizer got {} messages, {} were folded",
            got.len(),
            expected.len()
        )
    });
    let had_previous = input[..cut].iter().any(|m| c.policy.is_summary(m));
    found.check(
        call.previous.is_some() == had_previous,
        Rule::SummarizerContract,
        [],
        || {
            format!(
                "previous summary given: {}, one folded: {had_previous}",
                call.previous.is_some()
            )
        },
    );
    if !result.over_budget {
        found.check(
            call.allowance >= c.policy.min_summary_tokens,
            Rule::SummarizerContract,
            [],
            || {
                format!(
                    "allowance {} below the minimum {}",
                    call.allowance, c.policy.min_summary_tokens
                )
            },
        );
    }
    found.done()
}

/// Compacts `input` with a summarizer that answers `summary`, and checks
/// the outcome against every rule: a result with [`check_compaction`] and
/// [`check_summarizer_calls`]; an error only where a rule allows one
/// (`BudgetUnreachable` in strict mode when the budget is unreachable,
/// `EmptySummary` for a blank summary), with the input unchanged.
///
/// Returns the result, or `None` after an allowed error.
///
/// # Errors
///
/// Every rule broken.
pub fn compact_checked<'a, C: TokenCounter>(
    compactor: &Compactor<C>,
    input: &'a [Message],
    summary: &str,
) -> Result<Option<Compaction<'a>>, Violations> {
    let before = input.to_vec();
    let recording =
        Recording::new(|_: &SummaryRequest<'_>| Ok::<_, std::convert::Infallible>(summary.to_owned()));
    let outcome = compactor.compact(input, &recording);
    let calls = recording.calls();
    let mut found = Found::default();
    found.check(input == &before[..], Rule::NothingLost, [], || {
        "the input changed".to_owned()
    });
    match outcome {
        Ok(result) => {
            let checks = [
                check_compaction(input, &result, compactor),
                check_summarizer_calls(input, &result, compactor, &calls),
            ];
            for check in checks {
                if let Err(Violations(v)) = check {
                    found.0.extend(v);
                }
            }
            found.done().map(|()| Some(result))
        }
        Err(Error::BudgetUnreachable { budget, required }) => {
            found.check(compactor.strict, Rule::Budget, [], || {
                "BudgetUnreachable without strict mode".to_owned()
            });
            found.check(
                budget == compactor.budget && required > budget,
                Rule::Budget,
                [],
                || format!("BudgetUnreachable reports budget {budget}, required {required}"),
            );
            found.check(unreachable(compactor, input), Rule::Budget, [], || {
                "BudgetUnreachable though the budget was reachable".to_owned()
            });
            found.done().map(|()| None)
        }
        Err(Error::PinnedOverBudget {
            budget,
            pinned: tokens,
        }) => {
            let pins = pinned(compactor, input);
            let c = &compactor.counter;
            let fixed = (0..input.len())
                .filter(|&i| {
                    pins.contains(&i) || (is_pinned(&input[i]) && !compactor.policy.is_summary(&input[i]))
                })
                .fold(c.reply_priming(), |t, i| {
                    t.saturating_add(c.count_message(&input[i]))
                });
            found.check(
                !pins.is_empty() && budget == compactor.budget && tokens == fixed && fixed > budget,
                Rule::PinsKept,
                pins,
                || format!("PinnedOverBudget says {tokens} tokens over {budget}; the pinned and system messages take {fixed}"),
            );
            found.done().map(|()| None)
        }
        Err(Error::EmptySummary) => {
            found.check(summary.trim().is_empty(), Rule::NothingLost, [], || {
                format!("EmptySummary for the summary {summary:?}")
            });
            found.check(calls.len() == 1, Rule::SummarizerContract, [], || {
                format!("EmptySummary after {} summarizer calls", calls.len())
            });
            found.done().map(|()| None)
        }
        Err(e) => {
            found.check(false, Rule::NothingLost, [], || {
                format!("an error no rule allows: {e}")
            });
            found.done().map(|()| None)
        }
    }
}
