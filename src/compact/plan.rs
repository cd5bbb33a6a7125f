//! A plan: what a compaction will keep, hoist and fold, decided before any
//! summarizer runs, and the summarizer calls that carry it out.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::OnceLock;

use super::Compactor;
use super::report::{Compaction, Counts, CutReason, Listed, Prefix, Report, Tokens};
#[cfg(feature = "cache")]
use crate::cache::Link;
use crate::count::TokenCounter;
use crate::error::{Error, Result};
use crate::fold::engine::Fold;
use crate::fold::ledger;
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer, SummaryRequest};

/// A decision about a history, before any summarizer runs.
///
/// Made by [`Compactor::plan`]; [`folded`](Plan::folded) is what to summarize
/// and [`apply`](Plan::apply) builds the result from the summary.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Fate, Message};
///
/// let history: Vec<Message> = (0..30).map(|i| Message::user(format!("message {i}"))).collect();
/// let compactor = Compactor::new(80);
/// let plan = compactor.plan(&history)?;
/// let request = plan.folded().expect("over budget: something to fold");
/// assert_eq!(request.messages().next(), Some(&history[0]));
/// assert_eq!(plan.report().fate(0), Some(Fate::Folded));
/// let result = plan.apply("Thirty numbered messages.")?;
/// assert!(result.tokens_after <= 80);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Plan<'a, 'c, C> {
    pub(super) messages: Cow<'a, [Message]>,
    /// The caller's messages (`messages` is a copy when tool results were
    /// cleared): what a fold is recorded on.
    pub(super) source: &'a [Message],
    pub(super) compactor: &'c Compactor<C>,
    pub(super) report: Report,
    pub(super) tokens_before: Tokens,
    /// Tokens of everything in the output but the summary.
    pub(super) fixed_tokens: usize,
    pub(super) summary_limit: usize,
    pub(super) fold: OnceLock<Fold<'static>>,
    /// A cached summary of the messages before `reuse.at`.
    pub(super) reuse: Option<Reuse>,
    /// A recorded fold's summary message, replayed as it was rendered.
    pub(super) frozen: Option<Message>,
    /// The folded part, one range per summarizer call (none when a cached
    /// summary covers it all).
    pub(super) chunks: Vec<Range<usize>>,
    /// With a cache: the links of the prefixes the plan looked up (the
    /// cut's among them), ascending.
    #[cfg(feature = "cache")]
    pub(super) chains: Vec<(usize, Link)>,
    /// With a cache: every pinned message (rule 11), before the cut or
    /// not; the prefixes' links mark them.
    #[cfg(feature = "cache")]
    pub(super) pins: Vec<usize>,
}

/// A cached summary of a prefix of the history.
#[derive(Clone, Debug)]
pub(super) struct Reuse {
    pub(super) at: usize,
    pub(super) text: String,
}

impl<'a, 'c, C> Plan<'a, 'c, C> {
    /// The plan that keeps everything: `tokens` counted (all of them, as
    /// `tokens_before`).
    pub(super) fn whole(
        messages: &'a [Message],
        compactor: &'c Compactor<C>,
        tokens_before: Tokens,
        tokens: usize,
    ) -> Self {
        Plan {
            messages: Cow::Borrowed(messages),
            source: messages,
            compactor,
            report: Report {
                len: messages.len(),
                cut: 0,
                reason: CutReason::Fits,
                aligned_from: None,
                allowance: 0,
                prose_allowance: 0,
                hoisted: Vec::new(),
                pinned: Vec::new(),
                previous: Vec::new(),
                counts: Counts::new(0),
                ledger: Listed::default(),
                cleared: Vec::new(),
                reused: None,
                folds: 0,
                prefix: Prefix::Unchanged,
            },
            tokens_before,
            fixed_tokens: tokens,
            summary_limit: 0,
            fold: OnceLock::new(),
            reuse: None,
            frozen: None,
            chunks: Vec::new(),
            #[cfg(feature = "cache")]
            chains: Vec::new(),
            #[cfg(feature = "cache")]
            pins: Vec::new(),
        }
    }
}

impl<'a, C: TokenCounter> Plan<'a, '_, C> {
    /// Whether the plan folds anything (and so needs a summary): something
    /// before the cut that is neither hoisted nor pinned.
    pub fn folds(&self) -> bool {
        self.report.cut > self.report.hoisted.len() + self.report.pinned.len()
    }

    /// Whether the output differs from the input: something is folded, or
    /// tool results are cleared.
    pub fn changes(&self) -> bool {
        self.folds() || matches!(self.messages, Cow::Owned(_))
    }

    /// What to summarize: the previous summary and the folded messages, with
    /// the allowance. `None` when nothing is folded. The messages are
    /// borrowed; nothing is copied.
    ///
    /// This is the whole folded part in one request, for callers that drive
    /// the plan themselves; [`Compactor::compact`] also folds it in chunks
    /// ([`Compactor::max_fold_input_tokens`]) and reuses a cached summary
    /// ([`cached_summary`](Self::cached_summary), [`Compactor::cache`]).
    pub fn folded(&self) -> Option<SummaryRequest<'_>> {
        if !self.folds() || self.frozen.is_some() {
            return None;
        }
        let (before_cut, skip) = self.folded_part();
        Some(
            self.fold()
                .request(None, before_cut, skip, self.compactor.counter.shared()),
        )
    }

    /// The messages before the cut, and the (sorted) indices among them that
    /// are not folded: hoisted and pinned messages, previous summaries.
    fn folded_part(&self) -> (&[Message], Vec<usize>) {
        let cut = self.report.cut;
        (&self.messages[..cut], self.report.not_folded(0..cut))
    }

    /// The most the summary message may take to list the ledger's entries
    /// its limit (the fold target's room) leaves out: up to halfway between
    /// the target and the budget, so that the turns after the fold still
    /// have room.
    fn ceiling(&self) -> usize {
        let compactor = self.compactor;
        let target = compactor.effective_fold_to().min(compactor.budget);
        let ceiling = (target + (compactor.budget - target) / 2).saturating_sub(self.fixed_tokens);
        ceiling.max(self.summary_limit)
    }

    /// The fold begun (the previous summaries' prose, the ledger's
    /// candidates, the summarizer's allowance), found once.
    fn fold(&self) -> &Fold<'static> {
        self.fold.get_or_init(|| {
            let compactor = self.compactor;
            let policy = &compactor.policy;
            let previous: Vec<Cow<'_, str>> = self
                .report
                .previous
                .iter()
                .filter_map(|&i| policy.summary_text(&self.messages[i]))
                .collect();
            let (before_cut, skip) = self.folded_part();
            let folded = SummaryRequest::skipping(None, before_cut, skip, 0);
            Fold::begin(
                policy,
                &previous,
                folded.messages(),
                (self.report.allowance, self.ceiling() - self.summary_limit),
                &compactor.counter,
            )
            .into_owned()
        })
    }

    /// The summary a cache holds for exactly the folded part, when it holds
    /// one: pass it to [`apply`](Self::apply) and call no summarizer.
    pub fn cached_summary(&self) -> Option<&str> {
        self.reuse
            .as_ref()
            .filter(|r| self.folds() && r.at == self.report.cut)
            .map(|r| r.text.as_str())
    }

    /// The summarizer calls this plan makes, one per chunk, each extending
    /// the previous one's summary (what `compact` and `compact_async` run).
    pub(super) fn folding(&self) -> Folding<'_, 'a, C> {
        Folding {
            plan: self,
            next: 0,
            summary: None,
        }
    }

    /// Keeps `summary` in the cache as the summary of `messages[..at]`.
    fn remember(&self, at: usize, summary: &str) {
        #[cfg(feature = "cache")]
        if let Some(cache) = &self.compactor.cache {
            let looked_up = self.chains.binary_search_by_key(&at, |&(p, _)| p);
            // A chunk's end, not looked up: hashed now.
            let link = match looked_up {
                Ok(i) => Some(self.chains[i].1),
                Err(_) => self
                    .compactor
                    .chain_start(&cache.namespace)
                    .links(&self.messages[..at.min(self.messages.len())], &[at], &self.pins)
                    .first()
                    .map(|&(_, link)| link),
            };
            if let Some(link) = link {
                cache.store.put(&link.key(), link.value(at, summary));
            }
        }
        #[cfg(not(feature = "cache"))]
        let _ = (at, summary);
    }

    /// Carries the plan out with a synchronous summarizer: each chunk of the
    /// folded part summarized (none when a cached summary covers it), then
    /// [`apply`](Self::apply). [`Compactor::compact`] is `plan` then this;
    /// a caller that looks at the plan first (to refuse, or explain) calls
    /// it directly and plans once.
    ///
    /// # Errors
    ///
    /// [`Error::Summarize`] when the summarizer fails, and those of
    /// [`apply`](Self::apply).
    pub fn compact<S>(self, summarizer: &S) -> Result<Compaction<'a>>
    where
        S: Summarizer + ?Sized,
    {
        let mut folding = self.folding();
        while let Some(request) = folding.next_request() {
            let summary = summarizer
                .summarize(&request)
                .map_err(|e| Error::Summarize(e.into()))?;
            folding.answer(summary)?;
        }
        let summary = folding.finish();
        self.apply(summary)
    }

    /// [`compact`](Self::compact) with an asynchronous summarizer. Dropping
    /// the future changes nothing.
    ///
    /// # Errors
    ///
    /// As [`compact`](Self::compact).
    pub async fn compact_async<S>(self, summarizer: &S) -> Result<Compaction<'a>>
    where
        S: AsyncSummarizer + ?Sized,
    {
        let mut folding = self.folding();
        while let Some(request) = folding.next_request() {
            let summary = summarizer
                .summarize(request)
                .await
                .map_err(|e| Error::Summarize(e.into()))?;
            folding.answer(summary)?;
        }
        let summary = folding.finish();
        self.apply(summary)
    }

    /// What the plan does with each message, and why.
    pub fn report(&self) -> &Report {
        &self.report
    }

    /// The summary message for `body`, of `tokens`, in the role its place
    /// allows, and its tokens: an Anthropic request that would open on a
    /// response gets the summary as a leading user turn instead.
    fn summary_message(&self, body: &str, tokens: usize) -> (Message, usize) {
        let policy = &self.compactor.policy;
        let mut message = policy.summary_message(body);
        let next = self.report.pinned.first().copied().unwrap_or(self.report.cut);
        let role = policy.summary_role_before(self.messages.get(next));
        if message.role == role {
            return (message, tokens);
        }
        message.role = role;
        let tokens = self.compactor.counter.count_message(&message);
        (message, tokens)
    }

    /// Builds the result around `summary` (ignored when nothing is folded).
    /// A summary over its allowance is cut to fit.
    ///
    /// # Errors
    ///
    /// [`Error::EmptySummary`] when the summary is empty or blank;
    /// [`Error::BudgetUnreachable`] in strict mode if the result is over budget.
    pub fn apply(self, summary: impl Into<String>) -> Result<Compaction<'a>> {
        let compactor = self.compactor;
        if !self.folds() {
            self.record(None, None);
            let prefix_tokens = self.prefix_tokens(&self.messages, 0);
            return Ok(Compaction {
                messages: self.messages,
                summarized: false,
                tokens_before: self.tokens_before,
                tokens_after: self.fixed_tokens,
                over_budget: self.fixed_tokens > compactor.budget,
                summary_truncated: false,
                prefix_tokens,
                report: self.report,
            });
        }
        if let Some(message) = &self.frozen {
            let tokens_after = self.fixed_tokens.saturating_add(self.summary_limit);
            let out = self.output(message.clone());
            let prefix_tokens = self.prefix_tokens(&out, self.summary_limit);
            return Ok(Compaction {
                messages: Cow::Owned(out),
                summarized: true,
                tokens_before: self.tokens_before,
                tokens_after,
                over_budget: tokens_after > compactor.budget,
                summary_truncated: false,
                prefix_tokens,
                report: self.report,
            });
        }
        let summary = summary.into();
        let fold = self.fold();
        // Identifiers the kept turns hold verbatim need no entry.
        let kept =
            (!fold.entries.texts.is_empty()).then(|| ledger::Said::new(&self.messages[self.report.cut..]));
        let entries = &fold.entries;
        let held = |i: usize| {
            (kept.as_ref())
                .is_some_and(|k| k.holds_keyed(&entries.texts[i], entries.keys[i], entries.loose[i]))
        };
        let fitted = fold.complete(
            &compactor.policy,
            summary.clone(),
            &held,
            (self.summary_limit, self.ceiling()),
            &compactor.counter,
        )?;
        let (message, summary_tokens) = self.summary_message(&fitted.body, fitted.tokens);
        let summary_truncated = fitted.truncated;
        let prose_allowance = fold.allowance;
        let tokens_after = self.fixed_tokens.saturating_add(summary_tokens);
        let over_budget = tokens_after > compactor.budget;
        if over_budget && compactor.strict {
            return Err(Error::BudgetUnreachable {
                budget: compactor.budget,
                required: tokens_after,
            });
        }
        self.record(Some(&message), Some(summary));
        let out = self.output(message);
        let prefix_tokens = self.prefix_tokens(&out, summary_tokens);
        // The report shares the candidates (the plan is done with them).
        let candidates = self.fold.into_inner().map(|f| f.entries).unwrap_or_default();
        let mut report = self.report;
        report.prose_allowance = prose_allowance;
        report.ledger = Listed::new(candidates, fitted.listed, fitted.dropped);
        Ok(Compaction {
            messages: Cow::Owned(out),
            summarized: true,
            tokens_before: self.tokens_before,
            tokens_after,
            over_budget,
            summary_truncated,
            prefix_tokens,
            report,
        })
    }

    /// The output around the summary `message`: the hoisted messages, the
    /// summary, the pinned ones from before the cut, the kept part.
    fn output(&self, message: Message) -> Vec<Message> {
        let (report, cut) = (&self.report, self.report.cut);
        let before = report.hoisted.len() + report.pinned.len();
        let mut out = Vec::with_capacity(before + 1 + self.messages.len() - cut);
        out.extend(report.hoisted.iter().map(|&i| self.messages[i].clone()));
        out.push(message);
        out.extend(report.pinned.iter().map(|&i| self.messages[i].clone()));
        out.extend_from_slice(&self.messages[cut..]);
        out
    }

    /// Records a new fold (or a clearing) in the cache, for clients that
    /// resend their whole transcript (rule 10).
    fn record(&self, message: Option<&Message>, summary: Option<String>) {
        #[cfg(feature = "cache")]
        if self.report.prefix == Prefix::Rewritten && self.compactor.cache.is_some() {
            let cut = self.report.cut;
            let cleared = (self.report.cleared.iter())
                .filter(|&&i| i >= cut)
                .map(|&i| (i, self.messages[i].clone()))
                .collect();
            let cut = if message.is_some() { cut } else { 0 };
            self.compactor
                .record(self.source, (cut, message.cloned(), summary, cleared), &self.pins);
        }
        #[cfg(not(feature = "cache"))]
        let _ = (message, summary);
    }

    /// Tokens of the output's prefix that the client's previous request
    /// sent too (see [`Compaction::prefix_tokens`]); `summary_tokens`: the
    /// summary message's, which `out` holds after the hoisted messages
    /// when the plan folds.
    fn prefix_tokens(&self, out: &[Message], summary_tokens: usize) -> usize {
        let report = &self.report;
        let counter = &self.compactor.counter;
        let folds = self.folds();
        // Output message `k`'s tokens, as counted for the plan.
        let (hoisted, pinned) = (report.hoisted.len(), report.pinned.len());
        let tokens = |k: usize| {
            let at = match (folds, k.cmp(&hoisted)) {
                (false, _) => Some(k),
                (true, std::cmp::Ordering::Less) => report.hoisted.get(k).copied(),
                (true, std::cmp::Ordering::Equal) => return summary_tokens,
                (true, std::cmp::Ordering::Greater) => match report.pinned.get(k - hoisted - 1) {
                    Some(&i) => Some(i),
                    None => Some(report.cut + k - hoisted - pinned - 1),
                },
            };
            match at
                .filter(|i| !report.cleared.contains(i))
                .and_then(|i| report.tokens(i))
            {
                Some(t) => t,
                None => counter.count_message(&out[k]),
            }
        };
        let kept = match report.prefix {
            // A new fold: only the messages before the first it changed.
            Prefix::Rewritten => (out.iter().zip(self.source)).take_while(|(a, b)| a == b).count(),
            // Everything before the latest exchange: the newest unit, and
            // the model's answer before it.
            Prefix::Unchanged | Prefix::Replayed => {
                let callers = crate::fold::units::callers(out);
                let newest = (crate::fold::units::Backward::new(out, &callers, 0))
                    .next()
                    .map_or(0, |unit| unit.start);
                let answered = newest
                    .checked_sub(1)
                    .filter(|&k| out[k].role == crate::message::Role::Assistant && !out[k].makes_calls());
                answered.unwrap_or(newest)
            }
        };
        (0..kept).map(tokens).fold(0, usize::saturating_add)
    }
}

/// A plan's summarizer calls, in order: each chunk of the folded part with
/// the summary so far as the previous summary.
pub(super) struct Folding<'p, 'a, C> {
    pub(super) plan: &'p Plan<'a, 'p, C>,
    pub(super) next: usize,
    /// The latest chunk's summary.
    pub(super) summary: Option<String>,
}

impl<C: TokenCounter> Folding<'_, '_, C> {
    /// The next call, if any, past the chunks that hold no conversation
    /// (only hoisted messages and previous summaries): those make no call,
    /// the summary so far carries over them, so that no summarizer is ever
    /// sent an empty conversation.
    pub(super) fn next_request(&mut self) -> Option<SummaryRequest<'_>> {
        let plan = self.plan;
        let report = &plan.report;
        let empty = |chunk: &Range<usize>| report.not_folded(chunk.clone()).len() == chunk.len();
        while let Some(chunk) = plan.chunks.get(self.next).filter(|c| empty(c)) {
            let carried = match (&self.summary, &plan.reuse) {
                (Some(text), _) | (None, Some(Reuse { text, .. })) => Some(text.clone()),
                (None, None) => plan.fold().prose.as_deref().map(str::to_owned),
            };
            match carried.filter(|text| !text.trim().is_empty()) {
                Some(text) => self.summary = Some(text),
                // Nothing to carry: the summarizer is asked after all.
                None => break,
            }
            plan.remember(chunk.end, self.summary.as_deref().unwrap_or_default());
            self.next += 1;
        }
        self.request()
    }

    /// The next call, if any.
    pub(super) fn request(&self) -> Option<SummaryRequest<'_>> {
        let plan = self.plan;
        let chunk = plan.chunks.get(self.next)?.clone();
        let fold = plan.fold();
        let previous = match (&self.summary, &plan.reuse) {
            (Some(text), _) | (None, Some(Reuse { text, .. })) => Some(Cow::Borrowed(text.as_str())),
            (None, None) => None,
        };
        let skip = plan.report.not_folded(chunk.clone());
        Some(fold.request(
            previous,
            &plan.messages[chunk],
            skip,
            plan.compactor.counter.shared(),
        ))
    }

    /// Takes the answer to the latest request.
    pub(super) fn answer(&mut self, summary: String) -> Result<()> {
        let text = self.plan.compactor.policy.accept(summary)?;
        if let Some(chunk) = self.plan.chunks.get(self.next) {
            self.plan.remember(chunk.end, &text);
        }
        self.summary = Some(text);
        self.next += 1;
        Ok(())
    }

    /// The summary of the whole folded part.
    pub(super) fn finish(self) -> String {
        match (self.summary, &self.plan.reuse) {
            (Some(text), _) => text,
            (None, Some(reuse)) => reuse.text.clone(),
            (None, None) => String::new(),
        }
    }
}
