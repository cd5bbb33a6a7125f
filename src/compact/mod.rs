//! The compactor: plan (pure), summarize, apply.

#[cfg(feature = "cache")]
use std::fmt;
#[cfg(feature = "cache")]
use std::sync::Arc;

#[cfg(feature = "cache")]
use crate::cache::SummaryCache;
use crate::count::{Heuristic, TokenCounter};
use crate::error::{ConfigError, Result};
use crate::fold::clear::ClearToolResults;
use crate::fold::pins::Pin;
use crate::fold::policy::FoldPolicy;
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer};

mod chunks;
mod plan;
mod planner;
mod recipe;
mod report;
#[cfg(feature = "cache")]
mod reuse;
#[cfg(feature = "cache")]
mod step;
mod view;

pub use plan::Plan;
#[cfg(feature = "cache")]
use plan::Reuse;
pub use recipe::{Aim, Measure, Recipe};
use report::Counts;
pub use report::{Compaction, CutReason, Fate, Prefix, Report, Tokens};
pub use view::{View, ViewCompaction, ViewRequest};

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
///    messages before the cut (and counts the budget's worth of latest
///    turns to find the last fold), and
///    [`max_fold_input_tokens`](Self::max_fold_input_tokens) counts the folded
///    part to cut it in chunks.
/// 10. Fold in steps; between folds the prefix stands. A history is folded
///     only when it passes the budget, and then down to the
///     [fold target](Self::fold_to), so that the turns after it are appended
///     as they come. A history that extends the last output comes out as that
///     output plus the new messages, byte for byte, until the budget is
///     passed again: for a client that sends back what chatfold returned,
///     because a history within the budget is unchanged (1); for a client
///     that resends its whole transcript, because the [`cache`](Self::cache)
///     records each fold (its cut, the summary message as rendered, the tool
///     results cleared) and replays it. The summary message is rendered once,
///     at its fold. [`Report::prefix_kept`] says which a compaction was.
/// 11. Pinned messages stay: every message a [`pin`](Self::pin) names is in
///     the output, verbatim; one that stood in the folded part follows the
///     summary, in its order, ahead of the kept turns. Pins count against the
///     budget; when they and the system messages alone do not fit, it is an
///     error ([`Error::PinnedOverBudget`](crate::Error::PinnedOverBudget)).
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
    /// `None`: a quarter of the [fold target](Self::effective_fold_to).
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
    /// The fold target (the low-water mark): a history over the
    /// [`budget`](Self::budget) is folded down to this many tokens, so that
    /// the turns that follow are appended to an unchanged prefix until the
    /// budget is reached again. `None` (the default): half the budget
    /// ([`effective_fold_to`](Self::effective_fold_to)); the budget itself
    /// folds only as far as needed, on every request (no room to grow, so
    /// the prefix changes on nearly every request).
    ///
    /// Providers bill a repeated prompt prefix at a tenth of its price, so
    /// folding in steps is what makes compaction cheaper than sending
    /// everything: see BENCHMARKS.md for the cost measured at several targets.
    ///
    /// The target bounds the prose and the kept turns; the summary's ledger
    /// may take the context past it, up to halfway between the target and
    /// the budget, for the exact identifiers the target's room leaves out
    /// (highest tier first).
    pub fold_to: Option<usize>,
    /// The most tokens one summarizer call may take, its folded messages and
    /// the previous summary together (the summary's share is at most half):
    /// a longer middle is folded in chunks of whole units, one call each,
    /// each extending the previous chunk's summary. A single unit larger than
    /// that is one chunk of its own. `None` (the default): one
    /// call, whatever the middle's size.
    pub max_fold_input_tokens: Option<usize>,
    /// Whether the budget only decides *whether* to compact, as chatcram's
    /// does: the kept part is then [`keep_recent`](Self::keep_recent) alone
    /// (the latest unit at least), whatever room it leaves, and the older
    /// part is folded even when the summary saves nothing, the summary
    /// allowed the room left or what it folds up to the budget, whichever
    /// is more (at least [`FoldPolicy::min_summary_tokens`]). `false` (the
    /// default): the budget bounds the kept part and
    /// the summary, and a history that no summary makes smaller stays whole
    /// ([`CutReason::NoGain`]).
    pub budget_as_trigger: bool,
    /// The messages kept verbatim wherever they stand (rule 11); empty (the
    /// default): none but the system messages.
    pub pins: Vec<Pin>,
    #[cfg(feature = "cache")]
    cache: Option<Cache>,
}

/// A summary cache and the namespace its keys are made in.
#[cfg(feature = "cache")]
#[derive(Clone)]
struct Cache {
    store: Arc<dyn SummaryCache>,
    namespace: String,
}

#[cfg(feature = "cache")]
impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

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
    /// assert_eq!(c.fold_to, None);
    /// assert_eq!(c.effective_fold_to(), 4000);
    /// assert_eq!(c.effective_keep_recent(), 1000);
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
            budget_as_trigger: false,
            clear_tool_results: None,
            fold_to: None,
            max_fold_input_tokens: None,
            pins: Vec::new(),
            #[cfg(feature = "cache")]
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
            fold_to: self.fold_to,
            max_fold_input_tokens: self.max_fold_input_tokens,
            budget_as_trigger: self.budget_as_trigger,
            pins: self.pins,
            #[cfg(feature = "cache")]
            cache: self.cache,
        }
    }

    /// This configuration counted with `counter` (a copy: `self` stays).
    fn recounted<D: TokenCounter>(&self, counter: D) -> Compactor<D> {
        Compactor {
            budget: self.budget,
            keep_recent: self.keep_recent,
            counter,
            policy: self.policy.clone(),
            strict: self.strict,
            count_all: self.count_all,
            clear_tool_results: self.clear_tool_results.clone(),
            fold_to: self.fold_to,
            max_fold_input_tokens: self.max_fold_input_tokens,
            budget_as_trigger: self.budget_as_trigger,
            pins: self.pins.clone(),
            #[cfg(feature = "cache")]
            cache: self.cache.clone(),
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

    /// Let the budget only decide whether to compact (see
    /// [`budget_as_trigger`](Self::budget_as_trigger)).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, CutReason, Message};
    ///
    /// // The latest turn alone passes the budget; the rest is short.
    /// let history = [Message::user("Hi."), Message::assistant("Hello."), Message::user("word ".repeat(80))];
    /// let summarize = |_: &chatfold::SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("Greetings.".to_owned());
    /// let kept = Compactor::new(40).compact(&history, &summarize)?;
    /// assert!(!kept.summarized);
    /// assert_eq!(kept.report.reason(), CutReason::NoGain);
    /// let folded = Compactor::new(40).budget_as_trigger(true).compact(&history, &summarize)?;
    /// assert!(folded.summarized && folded.over_budget);
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn budget_as_trigger(mut self, trigger: bool) -> Self {
        self.budget_as_trigger = trigger;
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
    /// Built for clients that send their whole transcript every time: each
    /// fold is recorded (its cut, the summary message as rendered, the tool
    /// results it cleared), and a later history that extends the folded one
    /// comes out as that fold replayed, the same summary message followed by
    /// everything after the cut, while that fits the budget (rule 10). A
    /// history that changed before the cut starts a new chain. Checking the
    /// cache hashes the messages before the cut (a cost linear in the
    /// history, paid only with a cache); a history holding a previous
    /// chatfold summary rolls that forward instead, as without a cache.
    #[cfg(feature = "cache")]
    pub fn cache(mut self, cache: Arc<dyn SummaryCache>, namespace: impl Into<String>) -> Self {
        self.cache = Some(Cache {
            store: cache,
            namespace: namespace.into(),
        });
        self
    }

    /// Fold a history over the budget down to `tokens` (see
    /// [`fold_to`](Self::fold_to)).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, Extractive, Message};
    ///
    /// let compactor = Compactor::new(400).fold_to(200);
    /// let mut history: Vec<Message> = (0..80).map(|i| Message::user(format!("turn number {i}"))).collect();
    /// let folded = compactor.compact(&history, &Extractive::new())?.messages.into_owned();
    /// assert!(compactor.counter.count_messages(&folded) <= 200);
    /// // The next turns are appended to the same prefix until the budget is passed.
    /// let mut next = folded.clone();
    /// next.push(Message::user("one more turn"));
    /// let again = compactor.compact(&next, &Extractive::new())?;
    /// assert!(!again.summarized);
    /// assert_eq!(again.messages[..folded.len()], folded[..]);
    /// # use chatfold::TokenCounter;
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn fold_to(mut self, tokens: usize) -> Self {
        self.fold_to = Some(tokens);
        self
    }

    /// Keep the message `pin` names verbatim wherever it stands (rule 11),
    /// beside any pinned already.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, Extractive, Message, Pin, ToolCall};
    ///
    /// // An agent loop: the question, then a long run of tool calls.
    /// let mut history = vec![Message::system("You are an SRE agent."), Message::user("Why is checkout slow?")];
    /// for i in 0..30 {
    ///     history.push(Message::assistant_tool_calls(vec![ToolCall::new(format!("c{i}"), "query", "{}")]));
    ///     history.push(Message::tool(format!("p99 latency sample {i}: 840 ms on db-7"), format!("c{i}")));
    /// }
    /// let compactor = Compactor::new(400).pin(Pin::LastUser);
    /// let result = compactor.compact(&history, &Extractive::new())?;
    /// assert!(result.summarized && !result.over_budget);
    /// // The system prompt, the summary, then the question, verbatim.
    /// assert_eq!(result.messages[2], history[1]);
    /// assert_eq!(result.report.fate(1), Some(chatfold::Fate::Pinned));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pin(mut self, pin: Pin) -> Self {
        self.pins.push(pin);
        self
    }

    /// Fold at most `tokens` of messages per summarizer call (see
    /// [`max_fold_input_tokens`](Self::max_fold_input_tokens)).
    pub fn max_fold_input_tokens(mut self, tokens: usize) -> Self {
        self.max_fold_input_tokens = Some(tokens);
        self
    }

    /// `keep_recent`, or a quarter of the [fold
    /// target](Self::effective_fold_to) when it is unset, so that the
    /// summary, which keeps what tells the most from the whole folded
    /// span, has three quarters of it.
    pub fn effective_keep_recent(&self) -> usize {
        self.keep_recent.unwrap_or(self.effective_fold_to() / 4)
    }

    /// `fold_to`, or half the budget when it is unset
    /// ([`DEFAULT_FOLD_TO_PERCENT`](Self::DEFAULT_FOLD_TO_PERCENT)); never
    /// more than the budget.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::Compactor;
    ///
    /// assert_eq!(Compactor::new(4_000).effective_fold_to(), 2_000);
    /// assert_eq!(Compactor::new(4_000).fold_to(3_000).effective_fold_to(), 3_000);
    /// assert_eq!(Compactor::new(4_000).effective_keep_recent(), 500);
    /// ```
    pub fn effective_fold_to(&self) -> usize {
        let default = self.budget / 100 * Self::DEFAULT_FOLD_TO_PERCENT
            + self.budget % 100 * Self::DEFAULT_FOLD_TO_PERCENT / 100;
        self.fold_to.unwrap_or(default).min(self.budget)
    }

    /// The default fold target, in percent of the budget. Chosen by the cost
    /// benchmark (`benches/peers/cost.py`, BENCHMARKS.md): a 200-turn session
    /// with tool calls at a budget of 4 000 tokens.
    pub const DEFAULT_FOLD_TO_PERCENT: usize = 50;

    /// Checks the settings, as every compaction does first: a front end
    /// that takes them from a user calls this to refuse bad ones early.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) naming the setting.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::Compactor;
    ///
    /// assert!(Compactor::new(100).keep_recent(500).check().is_err());
    /// assert!(Compactor::new(100).fold_to(50).check().is_ok());
    /// ```
    pub fn check(&self) -> Result<()> {
        self.validate()
    }

    fn validate(&self) -> Result<()> {
        let keep_recent = self.effective_keep_recent();
        ConfigError::at_least("budget", self.budget, 1, None)?;
        ConfigError::at_most("keep_recent", keep_recent, self.budget, Some("budget"))?;
        if let Some(target) = self.fold_to {
            ConfigError::at_least("fold_to", target, 1, None)?;
            ConfigError::at_most("fold_to", target, self.budget, Some("budget"))?;
        }
        if let Some(tokens) = self.max_fold_input_tokens {
            ConfigError::at_least("max_fold_input_tokens", tokens, 1, None)?;
        }
        self.policy.validate()
    }
}

impl<C: TokenCounter> Compactor<C> {
    /// Compacts `messages` with a synchronous summarizer: [`plan`](Self::plan),
    /// summarize [`Plan::folded`], [`Plan::apply`].
    ///
    /// # Errors
    ///
    /// Those of [`plan`](Self::plan) and [`Plan::apply`], and
    /// [`Error::Summarize`](crate::Error::Summarize) when the summarizer fails. `messages` is only
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
        self.plan(messages)?.compact(summarizer)
    }

    /// Compacts `messages` with an asynchronous summarizer, as
    /// [`compact`](Self::compact) does. Dropping the future cancels the
    /// compaction and changes nothing.
    ///
    /// The summarizer's requests borrow `messages`: a summarizer type (an
    /// HTTP summarizer, [`Ready`](crate::Ready)), an async closure or an
    /// `async fn` reads them in place, and this costs what
    /// [`compact`](Self::compact) does.
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
    /// let summarizer = async |request: SummaryRequest<'_>| {
    ///     // await an LLM call here
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
        self.plan(messages)?.compact_async(summarizer).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

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
