//! The planner: what a compaction keeps, hoists and folds, in four phases.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::plan::Reuse;
use super::{Compactor, Counts, CutReason, Plan, Prefix, Tokens};
use crate::count::TokenCounter;
use crate::error::{Error, Result};
use crate::fold::pins::{self, Past};
use crate::fold::units::{self, Stop};
use crate::message::Message;

impl<C: TokenCounter> Compactor<C> {
    /// Decides what to keep, hoist and fold, without calling anything.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bad configuration;
    /// [`Error::BudgetUnreachable`] in strict mode when the budget cannot be met.
    pub fn plan<'a, 'c>(&'c self, messages: &'a [Message]) -> Result<Plan<'a, 'c, C>> {
        self.validate()?;
        let plan = self.decide(messages, Prior::LookUp)?;
        // Tool results are cleared at a fold, in one batch: never while the
        // history fits, nor while a recorded fold is replayed.
        let Some(clearing) = &self.clear_tool_results else {
            return Ok(plan);
        };
        if plan.report.reason == CutReason::Fits || plan.frozen.is_some() {
            return Ok(plan);
        }
        let prior = plan.reuse.filter(|_| plan.report.reason != CutReason::NoGain);
        let Some((cleared, indices)) = clearing.clear(messages, &self.counter) else {
            return self.decide(messages, Prior::Found(prior));
        };
        // The plan is made on the cleared history, which it then owns.
        let Plan {
            mut report,
            tokens_before,
            fixed_tokens,
            summary_limit,
            reuse,
            chunks,
            #[cfg(feature = "cache")]
            chains,
            #[cfg(feature = "cache")]
            pins,
            ..
        } = self.decide(&cleared, Prior::Found(prior))?;
        report.cleared = indices;
        report.prefix = Prefix::Rewritten;
        Ok(Plan {
            messages: Cow::<'a, [Message]>::Owned(cleared),
            source: messages,
            compactor: self,
            report,
            tokens_before,
            fixed_tokens,
            summary_limit,
            fold: OnceLock::new(),
            reuse,
            frozen: None,
            chunks,
            #[cfg(feature = "cache")]
            chains,
            #[cfg(feature = "cache")]
            pins,
        })
    }

    /// [`plan`](Self::plan) on the history as it is (after any clearing), in
    /// four phases: scan the headers, prove the history over budget, walk
    /// back over the kept part, decide the summary's allowance.
    fn decide<'a, 'c>(&'c self, messages: &'a [Message], prior: Prior) -> Result<Plan<'a, 'c, C>> {
        let counter = &self.counter;
        let n = messages.len();
        let mut counts = Counts::new(n);
        let mut count = |i: usize| counts.get_or_count(i, || counter.count_message(&messages[i]));

        let headers = self.scan_headers(messages)?;
        let (total, counted_all) = self.prove_over_budget(messages, headers.at_least, &mut count);
        let before = match counted_all {
            true => Tokens::Exact(total),
            false => Tokens::AtLeast(total),
        };
        let mut plan = Plan::whole(messages, self, before, total);
        if total <= self.budget {
            plan.report.counts = counts;
            return Ok(plan);
        }

        // A fold the cache recorded is replayed while it fits (rule 10);
        // when it no longer does, the next fold extends its summary.
        #[cfg_attr(not(feature = "cache"), allow(unused_mut))]
        let mut prior = match prior {
            Prior::Found(reuse) => reuse,
            Prior::LookUp => None,
        };
        #[cfg(feature = "cache")]
        if let (Some(cache), true) = (&self.cache, headers.summaries.is_empty()) {
            let marks = (&headers.callers[..], &headers.pins[..]);
            if let Some((_, step)) = self.recorded(messages, marks, &mut count, cache) {
                match self.replay(
                    messages,
                    (&headers.pinned_at, &headers.callers, &headers.pins),
                    step,
                    before,
                    &mut count,
                ) {
                    Ok(mut replayed) => {
                        replayed.report.counts = counts;
                        return Ok(replayed);
                    }
                    Err(reuse) => prior = reuse,
                }
            }
        }

        // Only what follows the last previous summary is a candidate to keep.
        let after = headers.summaries.last().map_or(0, |i| i + 1);
        let pinned = (headers.pinned_at.iter().chain(&headers.pins))
            .fold(0usize, |sum, &i| sum.saturating_add(count(i)));
        let fixed = counter.reply_priming().saturating_add(pinned);
        if !headers.pins.is_empty() && fixed > self.budget {
            return Err(Error::PinnedOverBudget {
                budget: self.budget,
                pinned: fixed,
            });
        }
        let min_summary = self
            .policy
            .overhead(counter)
            .saturating_add(self.policy.min_summary_tokens);
        let room = match self.budget_as_trigger {
            // Only `keep_recent` bounds the kept part.
            true => usize::MAX,
            // A fold takes the history down to its target (rule 10).
            false => (self.effective_fold_to())
                .saturating_sub(fixed)
                .saturating_sub(min_summary),
        };

        let walk = self.walk_kept(messages, &headers, after, room, &mut count);
        let start = self.place_cut(&mut plan, &headers, &walk, prior);
        plan.report.prefix = Prefix::Rewritten;
        // Alignment only ever drops units, so the kept part is re-summed.
        let kept_loose: usize = (start..n)
            .filter(|&i| !headers.fixed(messages, i))
            .fold(0, |sum, i| sum.saturating_add(count(i)));
        // Before the cut: hoisted system messages, pinned ones, previous
        // summaries, the rest folded.
        plan.report.hoisted = headers.pinned_at.into_iter().take_while(|&i| i < start).collect();
        plan.report.pinned = headers.pins.iter().copied().take_while(|&i| i < start).collect();
        plan.report.previous = headers.summaries;
        #[cfg(feature = "cache")]
        {
            plan.pins = headers.pins;
        }
        plan.fixed_tokens = fixed.saturating_add(kept_loose);
        let reachable = fixed
            .saturating_add(walk.latest_loose)
            .saturating_add(min_summary)
            <= self.budget;
        if let Some(total) = self.decide_allowance(&mut plan, reachable, &mut count)? {
            // Compacting would not make the history smaller: it stays whole.
            let mut whole = Plan::whole(messages, self, Tokens::Exact(total), total);
            whole.report.reason = CutReason::NoGain;
            plan = whole;
        }
        plan.report.counts = counts;
        Ok(plan)
    }

    /// Where the plan cuts: where the walk stopped, and why; with a cache,
    /// the summary it extends: `prior`, a recorded fold's, or else the
    /// newest cached summary of a prefix up to the cut.
    #[cfg_attr(not(feature = "cache"), allow(unused_variables))]
    fn place_cut(
        &self,
        plan: &mut Plan<'_, '_, C>,
        headers: &Headers,
        walk: &Walk,
        prior: Option<Reuse>,
    ) -> usize {
        let start = walk.cut.start;
        plan.report.cut = start;
        plan.report.aligned_from = walk.cut.aligned_from;
        plan.report.reason = match (walk.cut.stop, walk.refused) {
            (Stop::Start, _) => CutReason::Start,
            (Stop::Limit, Some(Refusal::Room)) => CutReason::Budget,
            (Stop::Limit, _) => CutReason::KeepRecent,
        };
        #[cfg(feature = "cache")]
        if let Some(cache) = self.cache.as_ref().filter(|_| headers.summaries.is_empty()) {
            let messages = plan.messages.as_ref();
            let (reuse, chains) = match prior.filter(|r| r.at <= start) {
                Some(prior) => (Some(prior), Vec::new()),
                None => self.reuse(messages, (&headers.callers, &headers.pins), start, cache),
            };
            plan.report.reused = reuse.as_ref().map(|r| r.at);
            plan.reuse = reuse;
            plan.chains = chains;
        }
        start
    }

    /// Phase 1: one pass over the headers finds previous summaries, system
    /// messages (always part of the output), tool calls, and a lower bound
    /// on the tokens that may prove the history over budget without
    /// counting it; then the pinned messages are resolved (rule 11).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a pin on an index past the end.
    fn scan_headers(&self, messages: &[Message]) -> Result<Headers> {
        let mut headers = Headers {
            summaries: Vec::new(),
            pinned_at: Vec::new(),
            pins: Vec::new(),
            callers: Vec::new(),
            listed: false,
            at_least: self.counter.reply_priming(),
        };
        // A summary placed as a user turn (Anthropic) leads the turns.
        let mut first_turn = true;
        // The callers are listed for pins and a cache; else the walk back
        // finds those it needs (`Headers::units`).
        #[cfg(feature = "cache")]
        let list_callers = !self.pins.is_empty() || self.cache.is_some();
        #[cfg(not(feature = "cache"))]
        let list_callers = !self.pins.is_empty();
        headers.listed = list_callers;
        for (i, m) in messages.iter().enumerate() {
            let leading = first_turn;
            first_turn = first_turn && m.role.is_pinned();
            // (A later user turn is never a summary: its text is not read.)
            if (leading || m.role != crate::message::Role::User) && self.policy.is_summary(m) {
                headers.summaries.push(i);
            } else if m.role.is_pinned() {
                headers.pinned_at.push(i);
            }
            if list_callers && m.makes_calls() {
                headers.callers.push(i);
            }
            if headers.at_least <= self.budget {
                headers.at_least = headers
                    .at_least
                    .saturating_add(self.counter.count_message_at_least(m));
            }
        }
        let summary = |i: usize| headers.summaries.binary_search(&i).is_ok();
        headers.pins = pins::resolve(messages, &self.pins, &headers.callers, summary, Past::Refused)
            .map_err(Error::InvalidConfig)?;
        Ok(headers)
    }

    /// Phase 2: the history's tokens, or as many as prove it over budget
    /// (the lower bound, or counts from the end), and whether every message
    /// was counted.
    fn prove_over_budget(
        &self,
        messages: &[Message],
        at_least: usize,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> (usize, bool) {
        if !self.count_all && at_least > self.budget {
            return (at_least, false);
        }
        let mut total = self.counter.reply_priming();
        for i in (0..messages.len()).rev() {
            total = total.saturating_add(count(i));
            if total > self.budget && !self.count_all {
                return (total, false);
            }
        }
        (total, true)
    }

    /// Phase 3: the walk back over whole units after `after`, adding up all
    /// kept tokens (for `keep_recent`) and the non-pinned ones (for the
    /// `room` beside the pinned messages and the summary). The latest unit
    /// is kept whatever it costs; an older one may be refused by the lower
    /// bound without counting it (a long tool result, say), else by exact
    /// counts as soon as they pass a limit.
    fn walk_kept(
        &self,
        messages: &[Message],
        headers: &Headers,
        after: usize,
        room: usize,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Walk {
        let limits = Limits {
            room,
            keep_recent: self.effective_keep_recent(),
        };
        let (mut kept, mut units_kept) = (KeptTokens::default(), 0usize);
        let (mut latest_loose, mut refused) = (0, None);
        let units = headers.units(messages, after);
        let fixed = |i: usize| headers.fixed(messages, i);
        let cut = units::cut(messages, units, units::Pinned::LookPast, |unit| {
            let limits = (units_kept > 0).then_some(limits);
            let at_least = &mut |i| self.counter.count_message_at_least(&messages[i]);
            let added = match limits {
                Some(_) => kept
                    .add(&fixed, unit.clone(), limits, at_least)
                    .and_then(|_| kept.add(&fixed, unit, limits, &mut *count)),
                None => kept.add(&fixed, unit, limits, &mut *count),
            };
            match added {
                Ok(next) => {
                    if units_kept == 0 {
                        latest_loose = next.loose;
                    }
                    units_kept += 1;
                    kept = next;
                    true
                }
                Err(why) => {
                    refused = Some(why);
                    false
                }
            }
        });
        Walk {
            cut,
            latest_loose,
            refused,
        }
    }

    /// Phase 4: when the plan folds, the summary's allowance (all the room
    /// left beside the kept part, or the minimum when even the latest unit
    /// leaves none) and the chunks it is folded in; the strict mode's
    /// refusals. When the budget is unreachable and the largest summary
    /// would take as many tokens as the folded part, folding gains nothing:
    /// `Some` of the history's exact tokens, and it stays whole.
    fn decide_allowance(
        &self,
        plan: &mut Plan<'_, '_, C>,
        reachable: bool,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Result<Option<usize>> {
        let summary_overhead = self.policy.overhead(&self.counter);
        let unreachable = |required| {
            Err(Error::BudgetUnreachable {
                budget: self.budget,
                required,
            })
        };
        if !plan.folds() {
            // Nothing can be folded: the history stays as it is, over budget.
            plan.tokens_before = Tokens::Exact(plan.fixed_tokens);
            return match self.strict {
                true => unreachable(plan.fixed_tokens),
                false => Ok(None),
            };
        }
        let least = summary_overhead.saturating_add(self.policy.min_summary_tokens);
        let room = match reachable {
            // Up to the fold target, or the least summary within the budget.
            true => (self.effective_fold_to())
                .max(plan.fixed_tokens.saturating_add(least))
                .min(self.budget)
                .saturating_sub(plan.fixed_tokens),
            false => least,
        };
        plan.report.allowance = self.policy.cap(room.saturating_sub(summary_overhead));
        plan.summary_limit = summary_overhead.saturating_add(plan.report.allowance);
        let (hoisted, pinned) = (&plan.report.hoisted, &plan.report.pinned);
        // Tokens of the folded part, counted until they pass `stop`.
        let mut folded = |stop: usize| {
            let mut folded = 0usize;
            for i in (0..plan.report.cut).rev() {
                if hoisted.binary_search(&i).is_err() && pinned.binary_search(&i).is_err() {
                    folded = folded.saturating_add(count(i));
                    if folded > stop {
                        break;
                    }
                }
            }
            folded
        };
        if self.budget_as_trigger {
            // The summary may take the room left, or what it folds up to
            // the budget (counted no further: rule 9); while the budget is
            // reachable, no more than the budget leaves it (rule 6).
            let least = plan.report.allowance.max(self.policy.min_summary_tokens);
            let mut allowance = folded(self.budget).min(self.budget).max(least);
            if reachable {
                let left = (self.budget)
                    .saturating_sub(plan.fixed_tokens)
                    .saturating_sub(summary_overhead);
                allowance = allowance.min(left.max(least));
            }
            let allowance = self.policy.cap(allowance);
            plan.report.allowance = allowance;
            plan.summary_limit = summary_overhead.saturating_add(allowance);
        } else if !reachable {
            // Over budget whatever the summary: fold only if that shrinks
            // the history. Counting the folded part stops once it passes the
            // summary's limit (rule 9: a cost of the budget's size).
            let folded = folded(plan.summary_limit);
            if plan.summary_limit >= folded {
                let total = plan.fixed_tokens.saturating_add(folded);
                return match self.strict {
                    true => unreachable(total),
                    false => Ok(Some(total)),
                };
            }
        }
        // Strict mode refuses before any summarizer runs when even an empty
        // summary cannot fit; otherwise a short enough summary may still
        // make it, and `apply` decides.
        let least = plan.fixed_tokens.saturating_add(summary_overhead);
        if self.strict && least > self.budget {
            return unreachable(least);
        }
        let from = plan.reuse.as_ref().map_or(0, |r| r.at);
        let (messages, allowance) = (plan.messages.as_ref(), plan.report.allowance);
        let pinned = &plan.report.pinned;
        plan.chunks = self.chunks(messages, pinned, from..plan.report.cut, allowance, count);
        plan.report.folds = plan.chunks.len();
        Ok(None)
    }
}

/// What one pass over the messages' headers finds (phase 1).
struct Headers {
    /// Previous chatfold summaries.
    summaries: Vec<usize>,
    /// System and developer messages that are not summaries (hoisted).
    pinned_at: Vec<usize>,
    /// The messages the compactor's pins name (rule 11), ascending.
    pins: Vec<usize>,
    /// Messages with tool calls, listed when pins or a cache need them
    /// (`listed`).
    callers: Vec<usize>,
    listed: bool,
    /// A lower bound on the history's tokens, summed while at most the budget.
    at_least: usize,
}

impl Headers {
    /// The units of `messages[after..]`, newest first, through the listed
    /// callers or reading back to them.
    fn units<'m>(&'m self, messages: &'m [Message], after: usize) -> units::Backward<'m> {
        match self.listed {
            true => units::Backward::new(messages, &self.callers, after),
            false => units::Backward::reading(messages, after),
        }
    }

    /// Whether message `i` is in every output whatever the cut: a system
    /// message or a pinned one (counted beside the kept part).
    fn fixed(&self, messages: &[Message], i: usize) -> bool {
        messages[i].role.is_pinned() || self.pins.binary_search(&i).is_ok()
    }
}

/// The kept part the walk back found (phase 3).
struct Walk {
    cut: units::Cut,
    /// Tokens of the latest unit's messages that are not pinned.
    latest_loose: usize,
    /// Why the walk stopped at an older unit, if one refused it.
    refused: Option<Refusal>,
}

/// Why an older unit is not kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    /// It leaves too little room beside the pinned messages for the summary.
    Room,
    /// It passes `keep_recent`.
    KeepRecent,
}

/// The limits an older unit must stay within.
#[derive(Clone, Copy)]
struct Limits {
    room: usize,
    keep_recent: usize,
}

/// Tokens of the kept part: all of them (against `keep_recent`) and the
/// non-pinned ones (against the room beside pinned messages and the summary).
#[derive(Clone, Copy, Default)]
struct KeptTokens {
    all: usize,
    loose: usize,
}

impl KeptTokens {
    /// The kept part with `unit` added, its messages' tokens by `tokens`,
    /// newest first (those `fixed` says are in every output not loose);
    /// with `limits`, refused as soon as one is passed.
    fn add(
        self,
        fixed: &dyn Fn(usize) -> bool,
        unit: std::ops::Range<usize>,
        limits: Option<Limits>,
        tokens: &mut dyn FnMut(usize) -> usize,
    ) -> std::result::Result<KeptTokens, Refusal> {
        let mut next = self;
        for i in unit.rev() {
            let t = tokens(i);
            next.all = next.all.saturating_add(t);
            if !fixed(i) {
                next.loose = next.loose.saturating_add(t);
            }
            if let Some(limits) = limits {
                if next.loose > limits.room {
                    return Err(Refusal::Room);
                }
                if next.all > limits.keep_recent {
                    return Err(Refusal::KeepRecent);
                }
            }
        }
        Ok(next)
    }
}

/// What the planner knows of a fold the cache recorded.
#[derive(Debug)]
enum Prior {
    /// Nothing yet: look it up (with a cache).
    LookUp,
    /// Looked up already (on the history before clearing): the summary the
    /// next fold extends, if any.
    Found(Option<Reuse>),
}
