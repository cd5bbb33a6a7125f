//! The compactor: plan (pure), summarize, apply.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::cache::{Chain, SummaryCache};
use crate::count::{Heuristic, TokenCounter};
use crate::error::{ConfigError, Error, Result};
use crate::fold::clear::ClearToolResults;
use crate::fold::policy::FoldPolicy;
use crate::fold::units::{self, Stop};
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer};

mod plan;
mod report;

pub use plan::Plan;
use plan::Reuse;
use report::Counts;
pub use report::{Compaction, CutReason, Fate, Report};

/// Keeps a history inside a token budget: system messages and the most recent
/// turns verbatim, the older middle folded into one summary message.
///
/// The compactor is its own configuration, in the style of textwrap's
/// `Options`: public fields, [`Compactor::new`] with the budget, and by-value
/// setters. It holds no state between calls; one compactor serves any number
/// of histories and threads.
///
/// What it guarantees, for every history:
///
/// 1. A history within the budget comes back unchanged (borrowed, not copied),
///    and the summarizer is not called.
/// 2. `system` and `developer` messages are never folded: those before the cut
///    are kept verbatim, in order, ahead of the summary; those after it stay
///    in place. A previous chatfold summary is the one exception (7).
/// 3. The kept part is a verbatim suffix of the history, cut between units: a
///    tool call travels with all its results.
/// 4. The kept part does not open with an assistant turn or a tool result when
///    a later cut would open with a user turn.
/// 5. The latest unit is always kept, even alone over the budget.
/// 6. The result fits the budget whenever system messages, the latest unit and
///    a minimal summary ([`FoldPolicy::min_summary_tokens`]) fit;
///    the summarizer is told its allowance and a longer summary is cut. When
///    the budget cannot be met the result says so ([`Compaction::over_budget`]),
///    or, in [`strict`](Self::strict) mode, it is an error.
/// 7. There is one summary message, rendered by the [`FoldPolicy`] (a
///    `summary_role` message starting with `summary_prefix`). The next
///    compaction recognises it and passes it to the summarizer as the
///    previous summary, so feeding results back keeps exactly one, running
///    summary.
/// 8. A failing summarizer, or an empty summary, is an error; the caller's
///    messages are only borrowed and stay as they were.
/// 9. Cost grows with the budget, not the history: messages are counted from
///    the end until the history is known to be over budget (or not at all when
///    the counter's [lower bound](TokenCounter::count_message_at_least), read
///    from lengths, already proves it), the kept part is counted once, and the
///    folded middle is never counted (unless [`count_all`](Self::count_all)
///    asks for exact totals). One pass over the message headers is the only
///    work that touches the whole history. Two settings trade this for
///    something else, and say so: a [`cache`](Self::cache) hashes the
///    messages before the cut (and counts up to `keep_recent_max`), and
///    [`max_fold_input_tokens`](Self::max_fold_input_tokens) counts the folded
///    part to cut it in chunks.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Extractive, Message};
///
/// let compactor = Compactor::new(60).keep_recent(30);
/// assert_eq!(compactor.effective_keep_recent(), 30);
///
/// let mut history = vec![Message::system("You are terse.")];
/// for i in 0..20 {
///     history.push(Message::user(format!("Question {i}: what is {i} squared?")));
///     history.push(Message::assistant(format!("{}.", i * i)));
/// }
/// let result = compactor.compact(&history, &Extractive::new())?;
/// assert!(result.summarized);
/// assert!(result.tokens_after <= 60);
/// assert_eq!(result.messages[0], history[0]); // system prompt kept
/// assert!(result.messages[1].text().starts_with("Summary of earlier conversation:"));
/// assert_eq!(result.messages.last(), history.last()); // latest turn kept
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Compactor<C = Heuristic> {
    /// The most tokens the compacted history may take (OpenAI chat accounting
    /// with [`counter`](Self::counter): framing and reply priming included).
    pub budget: usize,
    /// How many tokens of the most recent turns to keep verbatim at most;
    /// `None`: half the budget.
    pub keep_recent: Option<usize>,
    /// Counts tokens.
    pub counter: C,
    /// What the summary is: its role, prefix and size limits.
    pub policy: FoldPolicy,
    /// Whether an unreachable budget is an error rather than a flagged result.
    pub strict: bool,
    /// Whether to count every message, for an exact `tokens_before` and a
    /// full report, at a cost linear in the history.
    pub count_all: bool,
    /// Old, large tool results to replace with a placeholder before
    /// planning; `None` (the default): none.
    pub clear_tool_results: Option<ClearToolResults>,
    /// With a [`cache`](Self::cache): the most tokens of recent turns the
    /// compactor may keep to land on a cut it has a summary for, instead of
    /// folding again at [`keep_recent`](Self::keep_recent). `None` (the
    /// default): exactly `keep_recent`.
    pub keep_recent_max: Option<usize>,
    /// The most tokens one summarizer call may take, its folded messages and
    /// the previous summary together (the summary's share is at most half):
    /// a longer middle is folded in chunks of whole units, one call each,
    /// each extending the previous chunk's summary. A single unit larger than
    /// that is one chunk of its own. `None` (the default): one
    /// call, whatever the middle's size.
    pub max_fold_input_tokens: Option<usize>,
    cache: Option<Cache>,
}

/// A summary cache and the namespace its keys are made in.
#[derive(Clone)]
struct Cache {
    store: Arc<dyn SummaryCache>,
    namespace: String,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// How many unit boundaries before the cut are asked for a cached summary
/// of the prefix they end, newest first, when none is found at the cut.
const REUSE_PROBES: usize = 64;

impl Compactor<Heuristic> {
    /// A compactor for `budget` tokens, **counting with [`Heuristic`]**
    /// (four characters a token), not with a model's tokenizer.
    ///
    /// The CLI counts with `o200k_base` unless told otherwise, so
    /// `chatfold compact --budget 8000` and `Compactor::new(8000)` measure
    /// the same history differently. For a model's exact counts, choose the
    /// counter: `.counter(Tiktoken::o200k_base()?)`, or by name from a config
    /// file, `.counter("gpt-4o".parse::<NamedCounter>()?)`
    /// ([`NamedCounter`](crate::NamedCounter)). `new` stays on the heuristic
    /// because it needs no feature, no vocabulary (building o200k takes
    /// 0.17 s and 52 MB) and cannot fail, and because no exact tokenizer
    /// exists offline for most models that are not OpenAI's.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, FoldPolicy, Message, TokenCounter};
    ///
    /// let history = [Message::user("Ünïcödé and código: 東京 in 2024")];
    /// let c = Compactor::new(8000);
    /// # #[cfg(feature = "tiktoken")] {
    /// let exact = c.clone().counter(chatfold::Tiktoken::o200k_base()?);
    /// assert_ne!(c.counter.count_messages(&history), exact.counter.count_messages(&history));
    /// # }
    ///
    /// assert_eq!(c.budget, 8000);
    /// assert_eq!(c.keep_recent, None);
    /// assert_eq!(c.effective_keep_recent(), 4000);
    /// assert_eq!(c.policy, FoldPolicy::new());
    /// assert!(!c.strict && !c.count_all);
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub const fn new(budget: usize) -> Self {
        Compactor {
            budget,
            keep_recent: None,
            counter: Heuristic,
            policy: FoldPolicy::new(),
            strict: false,
            count_all: false,
            clear_tool_results: None,
            keep_recent_max: None,
            max_fold_input_tokens: None,
            cache: None,
        }
    }
}

impl<C> Compactor<C> {
    /// Keep at most `tokens` of recent turns verbatim.
    pub fn keep_recent(mut self, tokens: usize) -> Self {
        self.keep_recent = Some(tokens);
        self
    }

    /// Count with `counter` instead.
    pub fn counter<D: TokenCounter>(self, counter: D) -> Compactor<D> {
        Compactor {
            budget: self.budget,
            keep_recent: self.keep_recent,
            counter,
            policy: self.policy,
            strict: self.strict,
            count_all: self.count_all,
            clear_tool_results: self.clear_tool_results,
            keep_recent_max: self.keep_recent_max,
            max_fold_input_tokens: self.max_fold_input_tokens,
            cache: self.cache,
        }
    }

    /// Render, recognise and cut summaries by `policy`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, FoldPolicy};
    ///
    /// let c = Compactor::new(500).policy(FoldPolicy::new().summary_prefix("[ARCHIVE]\n"));
    /// assert!(c.policy.is_summary(&c.policy.summary_message("earlier turns")));
    /// ```
    pub fn policy(mut self, policy: FoldPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Make an unreachable budget an error.
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Count every message (exact `tokens_before`, linear cost).
    pub fn count_all(mut self, count_all: bool) -> Self {
        self.count_all = count_all;
        self
    }

    /// Before planning, replace old, large tool results as `clearing` says.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{ClearToolResults, Compactor, Extractive, Message, ToolCall};
    ///
    /// let mut history = vec![Message::user("Check the logs of each host.")];
    /// for i in 0..6 {
    ///     history.push(Message::assistant_tool_calls(vec![ToolCall::new(format!("c{i}"), "read_logs", "{}")]));
    ///     history.push(Message::tool(format!("host-{i} ok. ").repeat(300), format!("c{i}")));
    /// }
    /// history.push(Message::user("Any errors?"));
    /// let compactor = Compactor::new(2_000).clear_tool_results(ClearToolResults::new().keep_recent(2));
    /// let result = compactor.compact(&history, &Extractive::new())?;
    /// assert!(!result.summarized, "clearing alone made it fit");
    /// assert_eq!(result.report.cleared(), [2, 4, 6, 8]);
    /// assert!(result.messages[2].text().starts_with("[tool result cleared: read_logs (call c0)"));
    /// assert_eq!(result.messages[12], history[12]); // the newest two stay verbatim
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear_tool_results(mut self, clearing: ClearToolResults) -> Self {
        self.clear_tool_results = Some(clearing);
        self
    }

    /// Reuse summaries across compactions: look for the longest folded
    /// prefix `cache` has a summary for (among the 64 unit boundaries before
    /// the cut) and fold only the rest, with that summary as the previous
    /// one; when the cut lands on a cached prefix, call no summarizer at all. Keys are made from the folded
    /// messages, the [`FoldPolicy`] and `namespace`: name the summarizer
    /// there (its model and prompt), so that no other summarizer's text is
    /// reused.
    ///
    /// Built for clients that send their whole transcript every time: with
    /// [`keep_recent_max`](Self::keep_recent_max) above `keep_recent`, cuts
    /// move in steps, and most requests land on the previous one's cut.
    /// Checking the cache hashes the messages before the cut (a cost linear
    /// in the history, paid only with a cache); a history holding a previous
    /// chatfold summary rolls that forward instead, as without a cache.
    pub fn cache(mut self, cache: Arc<dyn SummaryCache>, namespace: impl Into<String>) -> Self {
        self.cache = Some(Cache {
            store: cache,
            namespace: namespace.into(),
        });
        self
    }

    /// Keep up to `tokens` of recent turns to reuse a cached cut (see
    /// [`keep_recent_max`](Self::keep_recent_max)).
    pub fn keep_recent_max(mut self, tokens: usize) -> Self {
        self.keep_recent_max = Some(tokens);
        self
    }

    /// Fold at most `tokens` of messages per summarizer call (see
    /// [`max_fold_input_tokens`](Self::max_fold_input_tokens)).
    pub fn max_fold_input_tokens(mut self, tokens: usize) -> Self {
        self.max_fold_input_tokens = Some(tokens);
        self
    }

    /// `keep_recent`, or half the budget when it is unset.
    pub fn effective_keep_recent(&self) -> usize {
        self.keep_recent.unwrap_or(self.budget / 2)
    }

    fn validate(&self) -> Result<()> {
        let keep_recent = self.effective_keep_recent();
        ConfigError::at_least("budget", self.budget, 1, None)?;
        ConfigError::at_most("keep_recent", keep_recent, self.budget, Some("budget"))?;
        if let Some(max) = self.keep_recent_max {
            ConfigError::at_least("keep_recent_max", max, keep_recent, Some("keep_recent"))?;
        }
        if let Some(tokens) = self.max_fold_input_tokens {
            ConfigError::at_least("max_fold_input_tokens", tokens, 1, None)?;
        }
        self.policy.validate()
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// Decides what to keep, hoist and fold, without calling anything.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a bad configuration;
    /// [`Error::BudgetUnreachable`] in strict mode when the budget cannot be met.
    pub fn plan<'a, 'c>(&'c self, messages: &'a [Message]) -> Result<Plan<'a, 'c, C>> {
        self.validate()?;
        let Some(clearing) = &self.clear_tool_results else {
            return self.decide(messages);
        };
        let Some((cleared, indices)) = clearing.clear(messages, &self.counter) else {
            return self.decide(messages);
        };
        // The plan is made on the cleared history, which it then owns.
        let Plan {
            mut report,
            tokens_before,
            fixed_tokens,
            summary_limit,
            reuse,
            chunks,
            chains,
            ..
        } = self.decide(&cleared)?;
        report.cleared = indices;
        Ok(Plan {
            messages: Cow::<'a, [Message]>::Owned(cleared),
            compactor: self,
            report,
            tokens_before,
            fixed_tokens,
            summary_limit,
            fold: OnceLock::new(),
            reuse,
            chunks,
            chains,
        })
    }

    /// [`plan`](Self::plan) on the history as it is (after any clearing), in
    /// four phases: scan the headers, prove the history over budget, walk
    /// back over the kept part, decide the summary's allowance.
    fn decide<'a, 'c>(&'c self, messages: &'a [Message]) -> Result<Plan<'a, 'c, C>> {
        let counter = &self.counter;
        let n = messages.len();
        let mut counts = Counts::new(n);
        let mut count = |i: usize| counts.get_or_count(i, || counter.count_message(&messages[i]));

        let headers = self.scan_headers(messages);
        let (total, counted_all) = self.prove_over_budget(messages, headers.at_least, &mut count);
        let mut plan = Plan::whole(messages, self, counted_all.then_some(total), total);
        if total <= self.budget {
            plan.report.counts = counts;
            return Ok(plan);
        }

        // Only what follows the last previous summary is a candidate to keep.
        let after = headers.summaries.last().map_or(0, |i| i + 1);
        let pinned = headers
            .pinned_at
            .iter()
            .fold(0usize, |sum, &i| sum.saturating_add(count(i)));
        let fixed = counter.reply_priming().saturating_add(pinned);
        let min_summary = self
            .policy
            .overhead(counter)
            .saturating_add(self.policy.min_summary_tokens);
        let room = self.budget.saturating_sub(fixed).saturating_sub(min_summary);

        let walk = self.walk_kept(messages, &headers.callers, after, room, &mut count);
        let mut start = walk.cut.start;
        plan.report.cut = start;
        plan.report.aligned_from = walk.cut.aligned_from;
        plan.report.reason = match (walk.cut.stop, walk.refused) {
            (Stop::Start, _) => CutReason::Start,
            (Stop::Limit, Some(Refusal::Room)) => CutReason::Budget,
            (Stop::Limit, _) => CutReason::KeepRecent,
        };
        // With a cache, a cut it has a summary for may be kept instead, and
        // otherwise the longest cached prefix is extended.
        if let Some(cache) = self.cache.as_ref().filter(|_| headers.summaries.is_empty()) {
            let (reused_at, reuse, chains) =
                self.reuse(messages, &headers.callers, after, start, room, &mut count, cache);
            if reused_at != start {
                start = reused_at;
                plan.report.cut = start;
                plan.report.aligned_from = None;
                plan.report.reason = CutReason::Reused;
            }
            plan.report.reused = reuse.as_ref().map(|r| r.at);
            plan.reuse = reuse;
            plan.chains = chains;
        }
        // Before the cut: hoisted pinned messages, previous summaries, the rest folded.
        plan.report.hoisted = headers.pinned_at.into_iter().take_while(|&i| i < start).collect();
        plan.report.previous = headers.summaries;
        // Alignment only ever drops units, so the kept part is re-summed.
        let kept_loose: usize = (start..n)
            .filter(|&i| !messages[i].role.is_pinned())
            .fold(0, |sum, i| sum.saturating_add(count(i)));
        plan.fixed_tokens = fixed.saturating_add(kept_loose);
        let reachable = fixed
            .saturating_add(walk.latest_loose)
            .saturating_add(min_summary)
            <= self.budget;
        self.decide_allowance(&mut plan, reachable, &mut count)?;
        plan.report.counts = counts;
        Ok(plan)
    }

    /// Phase 1: one pass over the headers finds previous summaries, pinned
    /// messages (always part of the output), tool calls, and a lower bound
    /// on the tokens that may prove the history over budget without
    /// counting it.
    fn scan_headers(&self, messages: &[Message]) -> Headers {
        let mut headers = Headers {
            summaries: Vec::new(),
            pinned_at: Vec::new(),
            callers: Vec::new(),
            at_least: self.counter.reply_priming(),
        };
        for (i, m) in messages.iter().enumerate() {
            if self.policy.is_summary(m) {
                headers.summaries.push(i);
            } else if m.role.is_pinned() {
                headers.pinned_at.push(i);
            }
            if m.makes_calls() {
                headers.callers.push(i);
            }
            if headers.at_least <= self.budget {
                headers.at_least = headers
                    .at_least
                    .saturating_add(self.counter.count_message_at_least(m));
            }
        }
        headers
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
        callers: &[usize],
        after: usize,
        room: usize,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Walk {
        let limits = Limits {
            room,
            keep_recent: self.effective_keep_recent(),
        };
        let (mut kept, mut units_kept) = (Kept::default(), 0usize);
        let (mut latest_loose, mut refused) = (0, None);
        let units = units::Backward::new(messages, callers, after);
        let cut = units::cut(messages, units, units::Pinned::LookPast, |unit| {
            let limits = (units_kept > 0).then_some(limits);
            let at_least = &mut |i| self.counter.count_message_at_least(&messages[i]);
            let added = match limits {
                Some(_) => kept
                    .add(messages, unit.clone(), limits, at_least)
                    .and_then(|_| kept.add(messages, unit, limits, &mut *count)),
                None => kept.add(messages, unit, limits, &mut *count),
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
    /// refusals.
    fn decide_allowance(
        &self,
        plan: &mut Plan<'_, '_, C>,
        reachable: bool,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Result<()> {
        let summary_overhead = self.policy.overhead(&self.counter);
        if !plan.folds() {
            // Nothing can be folded: the history stays as it is, over budget.
            return match self.strict {
                true => Err(Error::BudgetUnreachable {
                    budget: self.budget,
                    required: plan.fixed_tokens,
                }),
                false => Ok(()),
            };
        }
        // Strict mode fails here only when even an empty summary cannot fit;
        // otherwise a short enough summary may still make it, and `apply` decides.
        let least = plan.fixed_tokens.saturating_add(summary_overhead);
        if self.strict && least > self.budget {
            return Err(Error::BudgetUnreachable {
                budget: self.budget,
                required: least,
            });
        }
        let room = match reachable {
            true => self.budget.saturating_sub(plan.fixed_tokens),
            false => summary_overhead.saturating_add(self.policy.min_summary_tokens),
        };
        plan.report.allowance = self.policy.cap(room.saturating_sub(summary_overhead));
        plan.summary_limit = summary_overhead.saturating_add(plan.report.allowance);
        let from = plan.reuse.as_ref().map_or(0, |r| r.at);
        let (messages, allowance) = (plan.messages.as_ref(), plan.report.allowance);
        plan.chunks = self.chunks(messages, from..plan.report.cut, allowance, count);
        plan.report.folds = plan.chunks.len();
        Ok(())
    }

    /// Where a cache lets the cut be, the cached summary it reuses, and the
    /// hash chain over the messages before the (first) cut, one link per
    /// message.
    ///
    /// The cut may move back from `start` to a user-led unit boundary whose
    /// kept part stays within `keep_recent_max` and `room`, when the cache
    /// has a summary of exactly the prefix before it; otherwise it stays, and
    /// the newest of [`REUSE_PROBES`] boundaries before it with a cached
    /// summary is extended.
    #[allow(clippy::too_many_arguments)]
    fn reuse(
        &self,
        messages: &[Message],
        callers: &[usize],
        after: usize,
        start: usize,
        room: usize,
        count: &mut dyn FnMut(usize) -> usize,
        cache: &Cache,
    ) -> (usize, Option<Reuse>, Vec<Chain>) {
        let mut chains = Vec::with_capacity(start + 1);
        chains.push(Chain::start(&format!(
            "{:?}\u{0}{}",
            self.policy, cache.namespace
        )));
        for m in &messages[..start] {
            let last = chains[chains.len() - 1];
            chains.push(last.then(m));
        }
        // The first of `cuts` the cache has a summary for that `fits` (one
        // round trip).
        let first_cached = |cuts: &[usize], fits: &dyn Fn(usize, &str) -> bool| {
            let keys: Vec<String> = cuts.iter().map(|&at| chains[at].key()).collect();
            let values = cache.store.get_many(&keys);
            cuts.iter().zip(values).find_map(|(&at, value)| {
                let text = chains[at].read(at, &value?)?;
                fits(at, &text).then_some(Reuse { at, text })
            })
        };
        // Cuts that keep more, up to keep_recent_max: the cut itself first.
        let limit = self
            .keep_recent_max
            .unwrap_or(0)
            .max(self.effective_keep_recent());
        // Tokens of messages[range]: all of them, and the non-pinned ones.
        let mut tokens = |range: Range<usize>| {
            range.fold((0usize, 0usize), |(all, loose), i| {
                let t = count(i);
                let pinned = messages[i].role.is_pinned();
                (
                    all.saturating_add(t),
                    if pinned { loose } else { loose.saturating_add(t) },
                )
            })
        };
        let (mut all, mut loose) = tokens(start..messages.len());
        let mut steps = vec![start];
        // Room each step leaves for the summary.
        let mut rooms = vec![usize::MAX];
        let mut older = units::Backward::new(messages, callers, after)
            .map(|unit| unit.start)
            .skip_while(|&b| b >= start)
            .peekable();
        let mut end = start;
        while let Some(&b) = older.peek() {
            let (unit_all, unit_loose) = tokens(b..end);
            all = all.saturating_add(unit_all);
            loose = loose.saturating_add(unit_loose);
            if all > limit || loose > room {
                break;
            }
            if units::is_aligned(messages, b, units::Pinned::LookPast) {
                steps.push(b);
                rooms.push(
                    room.saturating_sub(loose)
                        .saturating_add(self.policy.min_summary_tokens),
                );
            }
            end = b;
            older.next();
        }
        // A step back is taken only when its cached summary fits beside the
        // longer kept part, uncut (at the cut itself, it is cut as any summary).
        let fits = |at: usize, text: &str| {
            let k = steps.iter().position(|&s| s == at).unwrap_or(0);
            self.counter.count(text) <= rooms[k]
        };
        if let Some(reuse) = first_cached(&steps, &fits) {
            return (reuse.at, Some(reuse), chains);
        }
        // No cached cut: extend the newest cached prefix before the cut.
        let probes: Vec<usize> = units::Backward::new(messages, callers, 0)
            .map(|unit| unit.start)
            .skip_while(|&b| b >= start)
            .take(REUSE_PROBES)
            .collect();
        let reuse = first_cached(&probes, &|_, _| true);
        (start, reuse, chains)
    }

    /// The folded part `region` in chunks of whole units, each at most
    /// `max_fold_input_tokens` with room for the previous summary
    /// (`allowance`); one chunk without that limit, none when empty. Chunk
    /// ends are chosen as the tiered memory's folds are ([`units::chunk`]).
    fn chunks(
        &self,
        messages: &[Message],
        region: Range<usize>,
        allowance: usize,
        count: &mut dyn FnMut(usize) -> usize,
    ) -> Vec<Range<usize>> {
        if region.is_empty() {
            return Vec::new();
        }
        let Some(max) = self.max_fold_input_tokens else {
            return vec![region];
        };
        // Room for the previous summary too, but never more than half the
        // window: a large allowance must not make every unit a call.
        let per_call = max.saturating_sub(allowance.min(max / 2)).max(1);
        let folded = |i: usize| !messages[i].role.is_pinned() && !self.policy.is_summary(&messages[i]);
        let cost: Vec<usize> = region
            .clone()
            .map(|i| if folded(i) { count(i) } else { 0 })
            .collect();
        // `sums[k]`: tokens of the region's first `k` messages.
        let sums: Vec<usize> = std::iter::once(0)
            .chain(cost.iter().scan(0usize, |sum, &t| {
                *sum = sum.saturating_add(t);
                Some(*sum)
            }))
            .collect();
        let tokens = |range: Range<usize>| sums[range.end] - sums[range.start];
        // Unit starts of the region, oldest first.
        let region_callers: Vec<usize> = units::callers(&messages[region.clone()]);
        let mut starts: Vec<usize> = units::Backward::new(&messages[region.clone()], &region_callers, 0)
            .map(|unit| unit.start)
            .collect();
        starts.reverse();
        let len = region.len();
        let mut ends = Vec::new();
        let mut lo = 0;
        while lo < len {
            if tokens(lo..len) <= per_call {
                ends.push(len);
                break;
            }
            // A window of whole units just past the limit: the chunk is
            // chosen among the units it can hold, at a cost bounded by it.
            let first = starts.partition_point(|&b| b <= lo);
            let over = starts[first..].iter().position(|&b| tokens(lo..b) > per_call);
            let hi = over
                .and_then(|k| starts.get(first + k + 1).copied())
                .unwrap_or(len);
            let window = &messages[region.start + lo..region.start + hi];
            let k = units::chunk(
                window,
                &units::callers(window),
                |i| cost[lo + i],
                (usize::MAX, per_call),
            );
            lo = if k == 0 { hi } else { lo + k };
            ends.push(lo);
        }
        // A chunk with nothing to fold (only pinned messages) joins the next
        // one, or the one before when it is last.
        let mut chunks: Vec<Range<usize>> = Vec::new();
        let mut from = 0;
        for end in ends {
            if tokens(from..end) == 0 && end < len {
                continue;
            }
            match chunks.last_mut() {
                Some(last) if tokens(from..end) == 0 => last.end = region.start + end,
                _ => chunks.push(region.start + from..region.start + end),
            }
            from = end;
        }
        chunks
    }

    /// Compacts `messages` with a synchronous summarizer: [`plan`](Self::plan),
    /// summarize [`Plan::folded`], [`Plan::apply`].
    ///
    /// # Errors
    ///
    /// Those of [`plan`](Self::plan) and [`Plan::apply`], and
    /// [`Error::Summarize`] when the summarizer fails. `messages` is only
    /// borrowed: on error nothing has changed.
    ///
    /// # Panics
    ///
    /// Only if the summarizer (or the counter) panics: chatfold does not catch
    /// it, and it unwinds through this call. `messages` is untouched then too.
    pub fn compact<'a, S>(&self, messages: &'a [Message], summarizer: &S) -> Result<Compaction<'a>>
    where
        S: Summarizer + ?Sized,
    {
        let plan = self.plan(messages)?;
        let mut folding = plan.folding();
        while let Some(request) = folding.request() {
            let summary = summarizer
                .summarize(&request)
                .map_err(|e| Error::Summarize(e.into()))?;
            folding.answer(summary)?;
        }
        let summary = folding.finish();
        plan.apply(summary)
    }

    /// Compacts `messages` with an asynchronous summarizer, as
    /// [`compact`](Self::compact) does. Dropping the future cancels the
    /// compaction and changes nothing.
    ///
    /// # Errors
    ///
    /// As [`compact`](Self::compact).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, Message, SummaryRequest};
    ///
    /// let history: Vec<Message> = (0..50).map(|i| Message::user(format!("turn {i}"))).collect();
    /// let summarizer = |request: SummaryRequest<'static>| async move {
    ///     Ok::<_, std::convert::Infallible>(format!("{} turns happened", request.messages().len()))
    /// };
    /// let result = pollster::block_on(Compactor::new(100).compact_async(&history, &summarizer))?;
    /// assert!(result.summarized && result.tokens_after <= 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn compact_async<'a, S>(
        &self,
        messages: &'a [Message],
        summarizer: &S,
    ) -> Result<Compaction<'a>>
    where
        S: AsyncSummarizer + ?Sized,
    {
        let plan = self.plan(messages)?;
        let mut folding = plan.folding();
        while let Some(request) = folding.request() {
            let summary = summarizer
                .summarize(request)
                .await
                .map_err(|e| Error::Summarize(e.into()))?;
            folding.answer(summary)?;
        }
        let summary = folding.finish();
        plan.apply(summary)
    }
}

/// What one pass over the messages' headers finds (phase 1).
struct Headers {
    /// Previous chatfold summaries.
    summaries: Vec<usize>,
    /// Pinned messages (system, developer) that are not summaries.
    pinned_at: Vec<usize>,
    /// Messages with tool calls.
    callers: Vec<usize>,
    /// A lower bound on the history's tokens, summed while at most the budget.
    at_least: usize,
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
struct Kept {
    all: usize,
    loose: usize,
}

impl Kept {
    /// The kept part with `unit` added, its messages' tokens by `tokens`,
    /// newest first; with `limits`, refused as soon as one is passed.
    fn add(
        self,
        messages: &[Message],
        unit: std::ops::Range<usize>,
        limits: Option<Limits>,
        tokens: &mut dyn FnMut(usize) -> usize,
    ) -> std::result::Result<Kept, Refusal> {
        let mut next = self;
        for i in unit.rev() {
            let t = tokens(i);
            next.all = next.all.saturating_add(t);
            if !messages[i].role.is_pinned() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_are_caught_before_anything_runs() {
        let h = [Message::user("x")];
        let bad = [
            Compactor::new(0),
            Compactor::new(10).keep_recent(11),
            Compactor::new(10).policy(FoldPolicy::new().summary_prefix(" ")),
            Compactor::new(10).policy(FoldPolicy::new().summary_role("tool")),
            Compactor::new(10).policy(FoldPolicy::new().summary_role(crate::Role::Assistant)),
        ];
        for c in bad {
            assert!(matches!(c.plan(&h), Err(Error::InvalidConfig { .. })), "{c:?}");
        }
    }
}
