//! Stateful memories: per-conversation state on top of the compactor's units.
//!
//! Four strategies, sharing one [`Message`] type and one saved-state format
//! ([`State`], compatible with Python rollmem's JSON):
//!
//! | strategy | keeps | summarizer calls |
//! |---|---|---|
//! | [`RollingMemory`] / [`AsyncRollingMemory`] | recent turns verbatim; older ones folded into a running summary once the buffer passes `max_tokens` | once full, one on almost every add (rollmem's behaviour); with [`low_water`](Settings::low_water), one per several adds |
//! | [`BufferMemory`] | everything, verbatim | none |
//! | [`WindowMemory`] | the last `max_messages` messages, whole units, aligned | none |
//! | [`SummaryMemory`] / [`AsyncSummaryMemory`] | only a running summary; every turn folded on arrival | one per add |
//! | [`TieredMemory`] | pinned system messages, a running summary, recent turns; folded in chunks by a background worker, the prompt within a hard limit | one per chunk, never in an add |
//!
//! # Which strategy should you use?
//!
//! - **[`RollingMemory`]** is the default: recent turns stay exact, older ones
//!   survive as a summary, and the summarizer runs only once the buffer is full.
//! - **[`WindowMemory`]** when older turns may simply be forgotten and no
//!   summarizer should run: the context stays at a fixed number of messages.
//! - **[`BufferMemory`]** for short conversations, or when something else (a
//!   [`Compactor`](crate::Compactor) before each request) bounds the context.
//! - **[`SummaryMemory`]** when only the gist matters and each turn may cost a
//!   summarizer call.
//! - The `Async` variants when the summarizer is async (an LLM over HTTP):
//!   their methods take `&self`, so one memory can be shared between tasks.
//! - **[`TieredMemory`]** for an agent loop that must never wait for the
//!   summarizer (sawtooth-memory's model): adds only append, a worker you
//!   spawn folds in the background, and the prompt never passes a hard limit,
//!   whatever the summarizer does.
//!
//! Every memory reads through [`Memory`] (`messages()`, `context()`,
//! `summary()`, `buffer()`, `to_state()`), and adds through [`Remember`] (sync)
//! or [`AsyncRemember`] (async). Eviction cuts through the same function as
//! the compactor (tool calls kept with their results, no assistant turn or
//! tool result at the head of the buffer when avoidable, the latest unit
//! always kept); nothing is hoisted in a buffer, so a system message there is
//! an ordinary opening, as in rollmem. The summary is rendered, checked and
//! cut by the memory's [`FoldPolicy`], as the compactor's is.
//!
//! # Examples
//!
//! ```
//! use chatfold::memory::{Memory, Remember, RollingMemory, Settings, State, WindowMemory};
//! use chatfold::Extractive;
//!
//! let mut memory = RollingMemory::new(Settings::new(60).summarizer(Extractive::new()))?;
//! for i in 0..20 {
//!     memory.add_user(format!("Message {i} about the trip to Korea."))?;
//!     memory.add_assistant(format!("Noted, item {i}."))?;
//! }
//! assert!(!memory.summary().is_empty());
//! assert_eq!(memory.messages()[0].role, chatfold::Role::System); // the summary, first
//!
//! // Saved state is rollmem's JSON, and loads in any strategy.
//! let saved = memory.to_state().to_json_string();
//! let window = WindowMemory::from_state(State::from_json_str(&saved)?, 4)?;
//! assert_eq!(window.buffer(), memory.buffer());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Cow;
use std::future::Future;

use std::sync::Mutex;

use crate::count::{Heuristic, TokenCounter};
use crate::error::{BoxError, ConfigError, Result};
use crate::fold::policy::{DEFAULT_POLICY, FoldPolicy};
use crate::memory::tracked::{Landed, Rules, Step, Tracked, fold_unlocked};
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer, SummaryRequest};

mod buffer;
mod rolling;
mod state;
mod summary;
mod tiered;
mod tracked;
mod window;

pub use buffer::BufferMemory;
pub use rolling::{AsyncRollingMemory, RollingMemory};
pub use state::{STATE_VERSION, State};
pub use summary::{AsyncSummaryMemory, SUMMARY_ALLOWANCE, SummaryMemory};
pub use tiered::{Stats, TieredMemory, TieredOptions, TieredSettings, Worker};
pub use window::WindowMemory;

/// The `add_user`, `add_assistant`, `add_system` and `add_tool` helpers
/// over `add_message`, written once for [`Remember`], [`AsyncRemember`] and
/// [`TieredMemory`]: `adders!(RECEIVER -> OUTPUT)`, with `pub` first for
/// inherent methods.
macro_rules! adders {
    (&mut self -> $out:ty) => {
        adders!(@each [] [mut] $out);
    };
    (&self -> $out:ty) => {
        adders!(@each [] [] $out);
    };
    (pub &self -> $out:ty) => {
        adders!(@each [pub] [] $out);
    };
    (@each [$($vis:tt)*] [$($mut:tt)*] $out:ty) => {
        /// Adds a `user` message. See [`add_message`](Self::add_message).
        $($vis)* fn add_user(&$($mut)* self, content: impl Into<String>) -> $out {
            self.add_message(Message::user(content))
        }

        /// Adds an `assistant` message. See [`add_message`](Self::add_message).
        $($vis)* fn add_assistant(&$($mut)* self, content: impl Into<String>) -> $out {
            self.add_message(Message::assistant(content))
        }

        /// Adds a `system` message to the buffer, where it is an ordinary
        /// turn. See [`add_message`](Self::add_message).
        $($vis)* fn add_system(&$($mut)* self, content: impl Into<String>) -> $out {
            self.add_message(Message::system(content))
        }

        /// Adds a `tool` result for the call `call_id`. See [`add_message`](Self::add_message).
        $($vis)* fn add_tool(&$($mut)* self, content: impl Into<String>, call_id: impl Into<String>) -> $out {
            self.add_message(Message::tool(content, call_id))
        }
    };
}
pub(crate) use adders;

/// Reading a memory: what every strategy offers.
///
/// Sync memories hand out borrows; async ones (behind a lock) copy only the
/// part asked for.
pub trait Memory {
    /// The state: borrowed from a sync memory, a snapshot of an async one.
    fn state(&self) -> Cow<'_, State>;

    /// The fold policy the summary is rendered with.
    fn policy(&self) -> &FoldPolicy {
        &DEFAULT_POLICY
    }

    /// The pinned system messages, then the summary (if any) as rendered by
    /// the [`policy`](Self::policy), then the buffer.
    fn messages(&self) -> Vec<Message> {
        self.state().messages(self.policy())
    }

    /// [`messages`](Self::messages) as one string of `role: content` lines.
    fn context(&self) -> String {
        let lines: Vec<String> = self.messages().iter().map(ToString::to_string).collect();
        lines.join("\n")
    }

    /// The running summary (`""`: none).
    fn summary(&self) -> Cow<'_, str> {
        match self.state() {
            Cow::Borrowed(state) => Cow::Borrowed(&state.summary),
            Cow::Owned(state) => Cow::Owned(state.summary),
        }
    }

    /// The messages kept verbatim.
    fn buffer(&self) -> Cow<'_, [Message]> {
        match self.state() {
            Cow::Borrowed(state) => Cow::Borrowed(&state.buffer),
            Cow::Owned(state) => Cow::Owned(state.buffer),
        }
    }

    /// A copy of the state, to save.
    fn to_state(&self) -> State {
        self.state().into_owned()
    }
}

/// Adding to a synchronous memory.
///
/// An add that fails (its fold's summarizer failed) still keeps the new
/// message, in the buffer: the caller handed it over, and it must not be lost.
/// Everything else (the summary, the rest of the buffer) is as it was, and the
/// next add folds again.
///
/// A summarizer that panics is not caught: the panic unwinds through the add,
/// and the memory is left as after an error (the new message kept, nothing
/// evicted, the summary unchanged), usable again.
pub trait Remember: Memory {
    /// Adds a message, folding or trimming as the strategy does.
    ///
    /// # Errors
    ///
    /// [`Error::Summarize`](crate::Error::Summarize) or [`Error::EmptySummary`](crate::Error::EmptySummary) when a fold's summarizer
    /// fails; the memory is unchanged and the next add retries the fold.
    fn add_message(&mut self, message: Message) -> Result<()>;

    /// Forgets everything: summary and buffer.
    fn clear(&mut self);

    adders!(&mut self -> Result<()>);
}

/// Adding to an asynchronous memory, through `&self`: one memory can be
/// shared between tasks.
pub trait AsyncRemember: Memory {
    /// Adds a message, folding as the strategy does.
    ///
    /// The message is in the buffer as soon as the future first runs; if a
    /// fold is already in flight, this call leaves the fold to it and returns.
    ///
    /// # Errors
    ///
    /// [`Error::Summarize`](crate::Error::Summarize) or [`Error::EmptySummary`](crate::Error::EmptySummary) when this call's fold
    /// failed; the message stays in the buffer and the next add retries the fold.
    fn add_message(&self, message: Message) -> impl Future<Output = Result<()>> + Send;

    /// Forgets everything; a fold in flight is discarded when it completes.
    fn clear(&self);

    adders!(&self -> impl Future<Output = Result<()>> + Send);
}

/// The summarizer of a memory that has none: what leaves the buffer is
/// dropped.
///
/// It has no values, so it is never called; it is the summarizer type of
/// [`Settings`] until [`Settings::summarizer`] sets one.
#[derive(Clone, Copy, Debug)]
pub enum Discard {}

impl Summarizer for Discard {
    type Error = BoxError;

    fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, BoxError> {
        match *self {}
    }
}

impl AsyncSummarizer for Discard {
    type Error = BoxError;

    fn summarize(&self, _: SummaryRequest<'_>) -> impl Future<Output = Result<String, BoxError>> + Send {
        let never = *self;
        async move { match never {} }
    }
}

/// How a rolling memory is set up: the buffer's budget, the summarizer (none
/// by default: evicted turns are dropped), the counter and the fold policy.
///
/// Built like [`Compactor`](crate::Compactor): `new` with the budget, then
/// by-value setters. Restoring a memory with
/// [`from_state`](RollingMemory::from_state) takes the same settings, so the
/// buffer is counted once, with the counter it will be kept with.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
/// use chatfold::{Extractive, FoldPolicy};
///
/// let settings = Settings::new(2_000)
///     .summarizer(Extractive::new())
///     .policy(FoldPolicy::new().max_summary_tokens(300));
/// assert_eq!(settings.max_tokens, 2_000);
/// let mut memory = RollingMemory::new(settings)?;
/// memory.add_user("Hi!")?;
/// assert_eq!(memory.buffer().len(), 1);
///
/// // No summarizer: what leaves the buffer is dropped.
/// let window_like = RollingMemory::new(Settings::new(50))?;
/// assert_eq!(window_like.max_tokens(), 50);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Settings<S = Discard, C = Heuristic> {
    /// The buffer's budget in tokens.
    pub max_tokens: usize,
    /// Where a fold brings the buffer down to once it passes `max_tokens`:
    /// `None` (the default) half of `max_tokens`, as the compactor's
    /// [fold target](crate::Compactor::fold_to), so the summarizer runs once
    /// per several turns and the context keeps its prefix (the summary
    /// message, the buffer's first turns) between folds, which providers
    /// bill at a tenth. `max_tokens` is rollmem's behaviour: a full buffer
    /// folds on almost every add, rewriting the prompt each time.
    pub low_water_tokens: Option<usize>,
    /// Folds what leaves the buffer into the summary; `None`: it is dropped.
    pub summarizer: Option<S>,
    /// Counts tokens.
    pub counter: C,
    /// What the summary is; its `max_summary_tokens` is the summarizer's
    /// allowance (default: `max_tokens`).
    pub policy: FoldPolicy,
    /// The messages every fold (or eviction) leaves in the buffer,
    /// verbatim, at its front, in their order, counted against
    /// `max_tokens`; none by default. [`Pin::FirstUser`](crate::Pin::FirstUser)
    /// keeps an agent's task across folds.
    pub pins: Vec<crate::fold::Pin>,
}

impl Settings {
    /// Settings for a buffer of `max_tokens`, no summarizer, counting with
    /// [`Heuristic`], the default [`FoldPolicy`].
    pub const fn new(max_tokens: usize) -> Self {
        Settings {
            max_tokens,
            low_water_tokens: None,
            summarizer: None,
            counter: Heuristic,
            policy: FoldPolicy::new(),
            pins: Vec::new(),
        }
    }
}

impl<S, C> Settings<S, C> {
    /// Fold with `summarizer`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::Settings;
    /// use chatfold::Extractive;
    ///
    /// let settings = Settings::new(500).summarizer(Extractive::new());
    /// assert!(settings.summarizer.is_some());
    /// ```
    pub fn summarizer<T>(self, summarizer: T) -> Settings<T, C> {
        Settings {
            max_tokens: self.max_tokens,
            low_water_tokens: self.low_water_tokens,
            summarizer: Some(summarizer),
            counter: self.counter,
            policy: self.policy,
            pins: self.pins,
        }
    }

    /// Count with `counter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::Settings;
    /// use chatfold::TokenCounter;
    ///
    /// let settings = Settings::new(500).counter(|text: &str| text.split_whitespace().count());
    /// assert_eq!(settings.counter.count("two words"), 2);
    /// ```
    pub fn counter<D: TokenCounter>(self, counter: D) -> Settings<S, D> {
        Settings {
            max_tokens: self.max_tokens,
            low_water_tokens: self.low_water_tokens,
            summarizer: self.summarizer,
            counter,
            policy: self.policy,
            pins: self.pins,
        }
    }

    /// Render, recognise and cut the summary by `policy` (checked when the
    /// memory is built).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::Settings;
    /// use chatfold::FoldPolicy;
    ///
    /// let settings = Settings::new(500).policy(FoldPolicy::new().max_summary_tokens(120));
    /// assert_eq!(settings.policy.max_summary_tokens, Some(120));
    /// ```
    pub fn policy(mut self, policy: FoldPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Leave the message `pin` names in the buffer through every fold (see
    /// [`pins`](Self::pins)).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
    /// use chatfold::{Extractive, Message, Pin};
    ///
    /// let mut memory = RollingMemory::new(Settings::new(120).pin(Pin::FirstUser).summarizer(Extractive::new()))?;
    /// memory.add_user("Task: audit the IAM roles of account 4471-2209-8812.")?;
    /// for i in 0..40 {
    ///     memory.add_assistant(format!("Checked role number {i}: fine."))?;
    /// }
    /// assert!(!memory.summary().is_empty());
    /// assert_eq!(memory.buffer()[0], Message::user("Task: audit the IAM roles of account 4471-2209-8812."));
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn pin(mut self, pin: crate::fold::Pin) -> Self {
        self.pins.push(pin);
        self
    }

    /// Once the buffer passes `max_tokens`, fold it down to `tokens`
    /// (checked when the memory is built: at least 1, at most `max_tokens`):
    /// an LLM summarizer then runs once per several turns instead of on
    /// almost every one.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
    ///
    /// let calls = std::cell::Cell::new(0);
    /// let summarize = |_: &chatfold::SummaryRequest<'_>| {
    ///     calls.set(calls.get() + 1);
    ///     Ok::<_, std::convert::Infallible>("earlier turns".to_owned())
    /// };
    /// let mut memory = RollingMemory::new(Settings::new(100).low_water(50).summarizer(summarize))?;
    /// for i in 0..60 {
    ///     memory.add_user(format!("turn number {i} of the conversation"))?;
    /// }
    /// assert!(calls.get() <= 12); // with low_water(100): one fold on almost every add
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn low_water(mut self, tokens: usize) -> Self {
        self.low_water_tokens = Some(tokens);
        self
    }

    /// The buffer's tokens after a fold: `low_water_tokens`, else half of
    /// `max_tokens` (as [`Compactor::effective_fold_to`](crate::Compactor::effective_fold_to)).
    pub(crate) fn fold_to(&self) -> usize {
        let half = crate::Compactor::new(self.max_tokens).effective_fold_to();
        self.low_water_tokens.unwrap_or(half.max(1))
    }

    /// The summarizer's allowance: the policy's cap, else `max_tokens`.
    pub(crate) fn allowance(&self) -> usize {
        self.policy.max_summary_tokens.unwrap_or(self.max_tokens)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        check_positive("max_tokens", self.max_tokens)?;
        if let Some(low) = self.low_water_tokens {
            check_positive("low_water_tokens", low)?;
            ConfigError::at_most("low_water_tokens", low, self.max_tokens, Some("max_tokens"))?;
        }
        self.policy.validate()
    }
}

/// Folds the first `due(buffer)` messages of the memory behind `cell` into
/// its summary, one summarizer call at a time, until nothing more is due.
///
/// When a fold is already in flight this returns at once: the fold in
/// flight looks again when it lands, so it picks up what was added
/// meanwhile. A cleared memory discards the fold's result and stops.
pub(crate) async fn settle<S, C>(
    cell: &Mutex<Tracked>,
    summarizer: &S,
    rules: Rules<'_, C>,
    due: impl Fn(&mut Tracked) -> usize,
) -> Result<()>
where
    S: AsyncSummarizer + ?Sized,
    C: TokenCounter + ?Sized,
{
    loop {
        let call = |request| async move { Some(summarizer.summarize(request).await.map_err(Into::into)) };
        match fold_unlocked(cell, rules, &due, call, |_, landed| landed).await {
            Step::Landed(Landed::Folded { .. }) => {}
            Step::Landed(Landed::Failed { error, .. }) => return Err(error),
            Step::Landed(Landed::Stale) | Step::Idle | Step::Busy | Step::Abandoned => return Ok(()),
        }
    }
}

/// [`Memory`] for a memory whose state is a `cell: Mutex<Tracked>`: each
/// read copies only the part asked for. `policy` finds its fold policy.
macro_rules! locked_memory {
    ($memory:ident, |$m:ident| $policy:expr) => {
        impl<S, C> Memory for $memory<S, C> {
            fn state(&self) -> Cow<'_, State> {
                Cow::Owned(lock(&self.cell).state.clone())
            }

            fn policy(&self) -> &FoldPolicy {
                let $m = self;
                $policy
            }

            fn summary(&self) -> Cow<'_, str> {
                Cow::Owned(lock(&self.cell).state.summary.clone())
            }

            fn buffer(&self) -> Cow<'_, [Message]> {
                Cow::Owned(lock(&self.cell).state.buffer.clone())
            }
        }
    };
}
pub(crate) use locked_memory;

pub(crate) fn check_positive(name: &'static str, value: usize) -> Result<()> {
    ConfigError::at_least(name, value, 1, None)
}
