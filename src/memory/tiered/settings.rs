//! A tiered memory's settings, and what it reports about itself.

use std::ops::{Deref, DerefMut};

use crate::count::{Heuristic, TokenCounter};
use crate::error::{ConfigError, Result};
use crate::fold::clear::ClearToolResults;
use crate::fold::policy::FoldPolicy;
use crate::memory::check_positive;

/// How a [`TieredMemory`](super::TieredMemory) is set up (sawtooth's
/// `ContextManagerConfig`): the [`TieredOptions`] (limits, chunking,
/// failures, clearing, the fold policy) and the counter beside them.
///
/// Built like textwrap's `Options`: [`new`](Self::new) with the two limits,
/// then by-value setters that cannot fail; the memory checks the whole when
/// it is built. The options read through it as fields (`settings.chunk_size`).
///
/// # Examples
///
/// ```
/// use chatfold::memory::TieredSettings;
///
/// let s = TieredSettings::new(3_000, 6_000);
/// assert_eq!((s.soft_limit_tokens, s.hard_limit_tokens), (3_000, 6_000));
/// assert_eq!(s.chunk_size, usize::MAX); // a fold down to the target in one call
/// assert_eq!(s.chunk_tokens, None);
/// assert!(!s.fallback_truncate);
/// assert_eq!(s.max_failures, 3);
/// assert_eq!(s.allowance(), 1_500); // half the room between the limits
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TieredSettings<C = Heuristic> {
    /// Everything but the counter.
    pub options: TieredOptions,
    /// Counts tokens.
    pub counter: C,
}

/// A tiered memory's settings that do not depend on its counter (see
/// [`TieredSettings`], which reads as them).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TieredOptions {
    /// Tokens of working buffer (L1) past which folding starts.
    pub soft_limit_tokens: usize,
    /// Where folding brings the working buffer down to once it passes the
    /// soft limit: `None` (the default) half the soft limit, so the summary
    /// message and the buffer's first turns stay the prompt's prefix for
    /// several turns between folds (providers bill a repeated prefix at a
    /// tenth). The soft limit itself is sawtooth's behaviour: a chunk folded
    /// every few adds, each one rewriting the summary.
    pub low_water_tokens: Option<usize>,
    /// The most tokens [`TieredMemory::messages`](crate::memory::Memory::messages) ever returns (when the
    /// system messages and the latest unit fit in it).
    pub hard_limit_tokens: usize,
    /// The most messages one fold takes (whole units; at least one unit,
    /// more when alignment needs it); by default no limit.
    pub chunk_size: usize,
    /// The most tokens one fold takes, if set (at least one unit).
    pub chunk_tokens: Option<usize>,
    /// Whether, after `max_failures` consecutive failed folds, the chunk that
    /// failed is dropped from the state (counted in [`Stats`]). Off: nothing
    /// is ever dropped, the view stays within the hard limit regardless.
    pub fallback_truncate: bool,
    /// Consecutive failures before `fallback_truncate` drops a chunk.
    pub max_failures: usize,
    /// Old, large tool results to replace with a placeholder before each
    /// fold (none by default). The placeholder names the result's first
    /// identifiers, which reach the ledger when it is folded.
    pub clear_tool_results: Option<ClearToolResults>,
    /// What the summary is. Its `max_summary_tokens` is the summarizer's
    /// allowance; by default half the room between the two limits.
    pub policy: FoldPolicy,
    /// The messages every fold leaves in the working buffer, verbatim, at
    /// its front (the task: [`Pin::FirstUser`](crate::Pin::FirstUser));
    /// none by default. The hard limit still wins: while folds are pending
    /// or failing, a view held to it may leave them out.
    pub pins: Vec<crate::fold::Pin>,
}

impl<C> Deref for TieredSettings<C> {
    type Target = TieredOptions;

    fn deref(&self) -> &TieredOptions {
        &self.options
    }
}

impl<C> DerefMut for TieredSettings<C> {
    fn deref_mut(&mut self) -> &mut TieredOptions {
        &mut self.options
    }
}

impl Default for TieredSettings {
    /// sawtooth's defaults: a soft limit of 3 000 tokens, a hard one of 6 000.
    fn default() -> Self {
        TieredSettings::new(3_000, 6_000)
    }
}

impl TieredSettings {
    /// Settings with these limits, no chunk limit (a fold down to the
    /// target is one summarizer call; sawtooth's chunks are 10 messages), no fallback
    /// truncation, [`Heuristic`] counting and the default [`FoldPolicy`].
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    ///
    /// const SETTINGS: TieredSettings = TieredSettings::new(1_000, 4_000);
    /// assert_eq!(SETTINGS.hard_limit_tokens, 4_000);
    /// ```
    pub const fn new(soft_limit_tokens: usize, hard_limit_tokens: usize) -> Self {
        TieredSettings {
            options: TieredOptions {
                soft_limit_tokens,
                hard_limit_tokens,
                low_water_tokens: None,
                chunk_size: usize::MAX,
                chunk_tokens: None,
                fallback_truncate: false,
                max_failures: 3,
                clear_tool_results: None,
                policy: FoldPolicy::new(),
                pins: Vec::new(),
            },
            counter: Heuristic,
        }
    }
}

impl<C> TieredSettings<C> {
    /// Leave the message `pin` names in the working buffer through every
    /// fold (see [`pins`](TieredOptions::pins)).
    pub fn pin(mut self, pin: crate::fold::Pin) -> Self {
        self.options.pins.push(pin);
        self
    }

    /// Once the working buffer passes the soft limit, fold it down to
    /// `tokens` (checked when the memory is built: at least 1, at most the
    /// soft limit).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    ///
    /// assert_eq!(TieredSettings::new(1_000, 4_000).fold_to(), 500); // the default: half
    /// assert_eq!(TieredSettings::new(1_000, 4_000).low_water(1_000).fold_to(), 1_000); // sawtooth's
    /// ```
    pub fn low_water(mut self, tokens: usize) -> Self {
        self.options.low_water_tokens = Some(tokens);
        self
    }

    /// Fold at most `messages` messages at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    ///
    /// assert_eq!(TieredSettings::new(100, 400).chunk_size(4).chunk_size, 4);
    /// ```
    pub fn chunk_size(mut self, messages: usize) -> Self {
        self.options.chunk_size = messages;
        self
    }

    /// Fold at most `tokens` tokens at a time.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    ///
    /// assert_eq!(TieredSettings::new(100, 400).chunk_tokens(60).chunk_tokens, Some(60));
    /// ```
    pub fn chunk_tokens(mut self, tokens: usize) -> Self {
        self.options.chunk_tokens = Some(tokens);
        self
    }

    /// Drop a chunk after `max_failures` consecutive failed folds.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    ///
    /// assert!(TieredSettings::new(100, 400).fallback_truncate(true).fallback_truncate);
    /// ```
    pub fn fallback_truncate(mut self, on: bool) -> Self {
        self.options.fallback_truncate = on;
        self
    }

    /// Consecutive failures before a fallback truncation.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    ///
    /// assert_eq!(TieredSettings::new(100, 400).max_failures(5).max_failures, 5);
    /// ```
    pub fn max_failures(mut self, failures: usize) -> Self {
        self.options.max_failures = failures;
        self
    }

    /// Count with `counter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::TieredSettings;
    /// use chatfold::TokenCounter;
    ///
    /// let words = TieredSettings::new(100, 400).counter(|text: &str| text.split_whitespace().count());
    /// assert_eq!(words.counter.count("three small words"), 3);
    /// assert_eq!(words.soft_limit_tokens, 100); // the rest as it was
    /// ```
    pub fn counter<D: TokenCounter>(self, counter: D) -> TieredSettings<D> {
        TieredSettings {
            options: self.options,
            counter,
        }
    }

    /// Before each fold, replace old, large tool results as `clearing` says.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::ClearToolResults;
    /// use chatfold::memory::TieredSettings;
    ///
    /// let s = TieredSettings::new(100, 400).clear_tool_results(ClearToolResults::new().keep_recent(2));
    /// assert!(s.clear_tool_results.is_some());
    /// ```
    pub fn clear_tool_results(mut self, clearing: ClearToolResults) -> Self {
        self.options.clear_tool_results = Some(clearing);
        self
    }

    /// Render, recognise and cut the summary by `policy`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    /// use chatfold::memory::TieredSettings;
    ///
    /// let s = TieredSettings::new(100, 400).policy(FoldPolicy::new().max_summary_tokens(80));
    /// assert_eq!(s.allowance(), 80);
    /// ```
    pub fn policy(mut self, policy: FoldPolicy) -> Self {
        self.options.policy = policy;
        self
    }
}

impl TieredOptions {
    /// The working buffer's tokens after a fold: `low_water_tokens`, else
    /// half the soft limit.
    pub fn fold_to(&self) -> usize {
        self.low_water_tokens
            .unwrap_or((self.soft_limit_tokens / 2).max(1))
    }

    /// The summarizer's allowance in tokens: the policy's
    /// `max_summary_tokens`, else half the room between the limits.
    pub fn allowance(&self) -> usize {
        let room = self.hard_limit_tokens.saturating_sub(self.soft_limit_tokens) / 2;
        self.policy.max_summary_tokens.unwrap_or(room.max(1))
    }

    pub(super) fn validate(&self) -> Result<()> {
        check_positive("soft_limit_tokens", self.soft_limit_tokens)?;
        check_positive("chunk_size", self.chunk_size)?;
        check_positive("max_failures", self.max_failures)?;
        if let Some(tokens) = self.chunk_tokens {
            check_positive("chunk_tokens", tokens)?;
        }
        if let Some(low) = self.low_water_tokens {
            check_positive("low_water_tokens", low)?;
            ConfigError::at_most(
                "low_water_tokens",
                low,
                self.soft_limit_tokens,
                Some("soft_limit_tokens"),
            )?;
        }
        ConfigError::at_least(
            "hard_limit_tokens",
            self.hard_limit_tokens,
            self.soft_limit_tokens,
            Some("soft_limit_tokens"),
        )?;
        self.policy.validate()
    }
}

/// What a [`TieredMemory`](super::TieredMemory) reports about itself (sawtooth's `get_stats()`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Tokens of the pinned system messages (L0).
    pub system_tokens: usize,
    /// Tokens of the summary message (L2 and the ledger, L1.5); 0 without one.
    pub summary_tokens: usize,
    /// Tokens of the whole working buffer (L1) in the state.
    pub buffer_tokens: usize,
    /// Messages in the working buffer.
    pub buffer_messages: usize,
    /// Tokens of [`TieredMemory::messages`](crate::memory::Memory::messages) now, reply priming included.
    pub view_tokens: usize,
    /// Buffered messages left out of the view to keep it within the hard limit.
    pub hidden_messages: usize,
    /// Folds that succeeded.
    pub folds_done: u64,
    /// Folds that failed (summarizer error or empty summary).
    pub folds_failed: u64,
    /// Failures since the last success.
    pub consecutive_failures: usize,
    /// Folds still needed to bring the buffer down to its fold target
    /// ([`TieredOptions::fold_to`]; estimated from `chunk_size`).
    pub folds_pending: usize,
    /// Whether a fold is running now.
    pub fold_in_flight: bool,
    /// Messages folded into the summary.
    pub messages_folded: u64,
    /// Messages dropped by fallback truncation.
    pub messages_dropped: u64,
    /// Tool results replaced by a placeholder
    /// ([`clear_tool_results`](TieredSettings::clear_tool_results)).
    pub results_cleared: u64,
    /// The last fold error and its causes, as text (`summarizer failed: ...`).
    pub last_error: Option<String>,
    /// The view's tokens after each of the last 256 adds, oldest first: the
    /// sawtooth profile.
    pub profile: Vec<usize>,
}
