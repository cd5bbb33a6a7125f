//! A plain history compacted where the caller holds it: each message's
//! role and text borrowed through [`View`], not copied into [`Message`]s.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use super::report::Counts;
use super::{Compaction, Compactor, Fate, Report};
use crate::count::TokenCounter;
use crate::error::{BoxError, Error, Result};
use crate::fold::ledger::LedgerEntry;
use crate::fold::policy::Placement;
use crate::message::{Message, Role};
use crate::summarize::PlainLine;

/// A plain history the caller holds: each message a role and a text,
/// borrowed in place.
///
/// The planner reads every message's role but the text only of the latest
/// ones (rule 9: counting stops once the history is over budget, then counts
/// back from the end) and of the messages that may be a previous summary;
/// with the ledger off and one summarizer call, nothing else reads the
/// folded middle. So [`Compactor::compact_view`] plans over stand-ins (one
/// message without content for each run of the folded middle), the latest
/// messages (a tail of at least eight bytes of text per token of budget) and
/// every hoisted or summary-like message in full, and watches its counter
/// for a stand-in being counted. The folded middle is read once, by the
/// summarizer, through [`ViewRequest`]; the output is laid out as input
/// indices around the one new message, the summary ([`ViewCompaction`]).
///
/// When the configuration reads the folded text itself (the ledger, chunks,
/// cleared tool results, pins, a cache), or the plan counted a stand-in, the
/// answer is `None`: compact [`View::messages`] instead, which gives the
/// same result. Bindings (Python's plain lists) use this to hand the caller
/// back its own objects without building a message for each.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, FoldPolicy, SummaryRequest, View};
///
/// let history: Vec<(String, String)> = (0..40)
///     .map(|i| (["user", "assistant"][i % 2].to_string(), format!("turn {i}: {}", "words ".repeat(30))))
///     .collect();
/// let compactor = Compactor::new(400).policy(FoldPolicy::new().ledger(false));
/// let done = compactor
///     .compact_view(history.as_slice(), |request| {
///         Ok::<_, std::convert::Infallible>(format!("{} earlier turns", request.len()))
///     })?
///     .expect("a plain history, no ledger: read in place");
/// assert!(done.summarized);
/// assert_eq!(done.kept.end, history.len());
/// assert!(done.tokens_after <= 400);
///
/// // The same history read whole gives the same result.
/// let messages = history.as_slice().messages();
/// let whole = compactor.compact(&messages, &|r: &SummaryRequest<'_>| {
///     Ok::<_, std::convert::Infallible>(format!("{} earlier turns", r.messages().len()))
/// })?;
/// assert_eq!(whole.messages.len(), done.hoisted.len() + 1 + done.kept.len());
/// assert_eq!(whole.messages[done.hoisted.len()], done.summary.unwrap());
/// # Ok::<(), chatfold::Error>(())
/// ```
pub trait View {
    /// The number of messages.
    fn len(&self) -> usize;

    /// Whether there are no messages.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The role of message `index`, as written (`"user"`, `"critic"`).
    fn role(&self, index: usize) -> &str;

    /// The text of message `index`.
    fn text(&self, index: usize) -> &str;

    /// Every message, read whole.
    fn messages(&self) -> Vec<Message> {
        (0..self.len())
            .map(|i| Message::new(self.role(i), self.text(i)))
            .collect()
    }
}

impl<R: AsRef<str>, T: AsRef<str>> View for [(R, T)] {
    fn len(&self) -> usize {
        <[(R, T)]>::len(self)
    }

    fn role(&self, index: usize) -> &str {
        self[index].0.as_ref()
    }

    fn text(&self, index: usize) -> &str {
        self[index].1.as_ref()
    }
}

/// What a fold over a [`View`] asks its summarizer: the runs of input
/// messages it folds, read from the view when asked, with the previous
/// summary and the allowance.
#[derive(Debug)]
pub struct ViewRequest<'a, V: ?Sized> {
    view: &'a V,
    runs: &'a [Range<usize>],
    previous: Option<&'a str>,
    allowance: usize,
    ledger: &'a [LedgerEntry],
}

impl<'a, V: View + ?Sized> ViewRequest<'a, V> {
    /// The input indices folded, as ascending runs.
    pub fn runs(&self) -> &'a [Range<usize>] {
        self.runs
    }

    /// The number of messages folded.
    pub fn len(&self) -> usize {
        self.runs.iter().map(Range::len).sum()
    }

    /// Whether nothing is folded (never, for a request made).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text of the summary being extended, if any.
    pub fn previous_summary(&self) -> Option<&'a str> {
        self.previous
    }

    /// The most tokens the summary may take.
    pub fn allowance(&self) -> usize {
        self.allowance
    }

    /// The identifiers the summary's ledger will list (empty: the ledger
    /// is off on this path).
    pub fn ledger(&self) -> &'a [LedgerEntry] {
        self.ledger
    }

    /// The folded messages, read from the view.
    pub fn messages(&self) -> Vec<Message> {
        self.indices()
            .map(|i| Message::new(self.view.role(i), self.view.text(i)))
            .collect()
    }

    /// The folded messages' transcript, one `role: text` line each (as
    /// [`SummaryRequest::transcript`](crate::SummaryRequest::transcript)
    /// writes a plain history's), appended to `out`.
    pub fn transcript_into(&self, out: &mut String) {
        for (k, i) in self.indices().enumerate() {
            if k > 0 {
                out.push('\n');
            }
            PlainLine::new(self.view.role(i), self.view.text(i)).push_to(out);
        }
    }

    fn indices(&self) -> impl Iterator<Item = usize> + 'a {
        self.runs.iter().flat_map(Range::clone)
    }
}

/// A compaction over a [`View`], laid out as input indices: the output is
/// the messages `hoisted`, then `summary`, then the messages in `kept`.
#[derive(Debug)]
#[non_exhaustive]
pub struct ViewCompaction {
    /// The input messages before the summary (system and developer ones
    /// from the folded part), ascending.
    pub hoisted: Vec<usize>,
    /// The summary message (`None` when nothing was folded).
    pub summary: Option<Message>,
    /// The input messages kept verbatim after the summary (every message
    /// when nothing was folded).
    pub kept: Range<usize>,
    /// Whether a summary was made.
    pub summarized: bool,
    /// Tokens of the input (see [`Compaction::tokens_before`]).
    pub tokens_before: super::Tokens,
    /// Tokens of the output.
    pub tokens_after: usize,
    /// Whether the output is over the budget.
    pub over_budget: bool,
    /// Whether the summary was cut to fit.
    pub summary_truncated: bool,
    /// See [`Compaction::prefix_tokens`].
    pub prefix_tokens: usize,
    /// What happened to each input message.
    pub report: Report,
}

impl<C: TokenCounter> Compactor<C> {
    /// Compacts the plain history `view` in place, summarizing with
    /// `summarize` (called at most once); see [`View`].
    ///
    /// `Ok(None)` when this compactor or this history needs the messages
    /// read whole: compact [`View::messages`] instead, which the result
    /// here always equals.
    ///
    /// # Errors
    ///
    /// As [`Compactor::compact`]; the summarizer's error as
    /// [`Error::Summarize`].
    pub fn compact_view<V, F, E>(&self, view: &V, summarize: F) -> Result<Option<ViewCompaction>>
    where
        V: View + ?Sized,
        F: FnOnce(ViewRequest<'_, V>) -> std::result::Result<String, E>,
        E: Into<BoxError>,
    {
        if !self.reads_in_place() {
            return Ok(None);
        }
        self.validate()?;
        let compactor = self.watching();
        let read = Read::of(view, self.budget.saturating_mul(8), &self.policy);
        let plan = compactor.plan(&read.messages);
        // A stand-in counted: the plan (or its refusal) may not be the
        // whole reading's.
        if compactor.counter.missed() {
            return Ok(None);
        }
        let plan = plan?;
        let n = view.len();
        let report = plan.report();
        let (cut, hoisted) = (read.input(report.cut(), n), read.inputs(report, Fate::Hoisted));
        let runs: Vec<Range<usize>> = report
            .indices(Fate::Folded)
            .map(|i| read.from[i].clone())
            .collect();
        if runs.is_empty() && report.cut() > hoisted.len() {
            // Only previous summaries before the cut: the whole reading
            // carries their text without a summarizer call.
            return Ok(None);
        }
        let summary = match plan.folded() {
            None => String::new(),
            Some(request) => {
                let asked = ViewRequest {
                    view,
                    runs: &runs,
                    previous: request.previous_summary(),
                    allowance: request.allowance(),
                    ledger: request.ledger(),
                };
                summarize(asked).map_err(|e| Error::Summarize(e.into()))?
            }
        };
        let done = plan.apply(summary)?;
        // The output holds no stand-in, so laying it out counts none; were
        // one counted, the whole reading would be the answer.
        if compactor.counter.missed() {
            return Ok(None);
        }
        Ok(Some(read.laid(done, n, cut, hoisted)))
    }

    /// Whether nothing in this configuration reads the folded messages'
    /// text before the summarizer does.
    fn reads_in_place(&self) -> bool {
        #[cfg(feature = "cache")]
        if self.cache.is_some() {
            return false;
        }
        !self.policy.ledger
            && self.max_fold_input_tokens.is_none()
            && self.clear_tool_results.is_none()
            && self.pins.is_empty()
    }

    /// This compactor planning a history read in place: the summary where
    /// it stands, the counter watching for a stand-in.
    fn watching(&self) -> Compactor<Watch<'_, C>> {
        let mut compactor = self.recounted(Watch {
            inner: &self.counter,
            missed: AtomicBool::new(false),
        });
        compactor.policy.placement = Placement::Fixed;
        compactor
    }
}

/// A counter noticing a stand-in (a message read without its text) being
/// counted.
#[derive(Debug)]
struct Watch<'c, C> {
    inner: &'c C,
    missed: AtomicBool,
}

impl<C> Watch<'_, C> {
    fn missed(&self) -> bool {
        self.missed.load(Ordering::Relaxed)
    }
}

impl<C: TokenCounter> TokenCounter for Watch<'_, C> {
    fn count(&self, text: &str) -> usize {
        self.inner.count(text)
    }

    fn count_message(&self, message: &Message) -> usize {
        // A view's messages all have text: no content is a stand-in.
        if message.content.is_none() {
            self.missed.store(true, Ordering::Relaxed);
            return 0;
        }
        self.inner.count_message(message)
    }

    fn count_message_at_least(&self, message: &Message) -> usize {
        // A stand-in's lower bound is below its message's: still a lower bound.
        self.inner.count_message_at_least(message)
    }

    fn reply_priming(&self) -> usize {
        self.inner.reply_priming()
    }
}

/// A view as the planner reads it, and where each of its messages comes from.
struct Read {
    /// The tail and the hoisted or summary-like messages in full; each run
    /// of other messages before the tail as one stand-in.
    messages: Vec<Message>,
    /// The input indices each of `messages` stands for (one for a message
    /// read in full, a run for a stand-in).
    from: Vec<Range<usize>>,
}

impl Read {
    /// `view` read with a tail of at least `tail_bytes` bytes of text.
    fn of<V: View + ?Sized>(view: &V, tail_bytes: usize, policy: &crate::FoldPolicy) -> Read {
        let n = view.len();
        let (mut bytes, mut tail) = (0usize, n);
        while tail > 0 && bytes < tail_bytes {
            tail -= 1;
            bytes = bytes.saturating_add(view.text(tail).len());
        }
        let full = |i: usize| Message::new(view.role(i), view.text(i));
        let (mut messages, mut from) = (Vec::new(), Vec::new());
        let mut run = 0;
        for i in 0..tail {
            // Messages always in the output (system, developer) and any
            // that may be a previous summary (the summary's role, its text
            // starting with the prefix) are read in full.
            let role = Role::from(view.role(i));
            let summary_like =
                role == policy.summary_role && view.text(i).starts_with(&*policy.summary_prefix);
            if !(role.is_pinned() || summary_like) {
                continue;
            }
            if run < i {
                messages.push(stand_in());
                from.push(run..i);
            }
            messages.push(full(i));
            from.push(i..i + 1);
            run = i + 1;
        }
        if run < tail {
            messages.push(stand_in());
            from.push(run..tail);
        }
        for i in tail..n {
            messages.push(full(i));
            from.push(i..i + 1);
        }
        Read { messages, from }
    }

    /// The input index of the planner's index `i` (its first; `n` past the
    /// end).
    fn input(&self, i: usize, n: usize) -> usize {
        self.from.get(i).map_or(n, |r| r.start)
    }

    /// The input indices of the planned messages of `fate`.
    fn inputs(&self, report: &Report, fate: Fate) -> Vec<usize> {
        report.indices(fate).map(|i| self.from[i].start).collect()
    }

    /// The compaction `done` of the read messages, laid out over the `n`
    /// input messages.
    fn laid(&self, done: Compaction<'_>, n: usize, cut: usize, hoisted: Vec<usize>) -> ViewCompaction {
        let summary = done.summarized.then(|| done.messages[hoisted.len()].clone());
        let kept = match summary {
            Some(_) => cut..n,
            None => 0..n,
        };
        ViewCompaction {
            hoisted: if summary.is_some() { hoisted } else { Vec::new() },
            summary,
            kept,
            summarized: done.summarized,
            tokens_before: done.tokens_before,
            tokens_after: done.tokens_after,
            over_budget: done.over_budget,
            summary_truncated: done.summary_truncated,
            prefix_tokens: done.prefix_tokens,
            report: self.spread(done.report, n),
        }
    }

    /// `report` of the read messages, as a report of the `n` input messages.
    fn spread(&self, report: Report, n: usize) -> Report {
        let at = |i: &usize| self.from[*i].start;
        let mut counts = Counts::new(n);
        for (j, from) in self.from.iter().enumerate().rev() {
            if let (1, Some(t)) = (from.len(), report.counts.get(j)) {
                counts.get_or_count(from.start, || t);
            }
        }
        Report {
            len: n,
            cut: self.input(report.cut, n),
            aligned_from: report.aligned_from.map(|i| self.input(i, n)),
            hoisted: report.hoisted.iter().map(at).collect(),
            pinned: report.pinned.iter().map(at).collect(),
            previous: report.previous.iter().map(at).collect(),
            cleared: report.cleared.iter().map(at).collect(),
            counts,
            ..report
        }
    }
}

/// A message read without its content.
fn stand_in() -> Message {
    let mut m = Message::new(Role::User, String::new());
    m.content = None;
    m
}
