//! Summary-only memory.

use std::borrow::Cow;
use std::sync::Mutex;

use super::{AsyncRemember, Memory, Remember, State, settle};
use crate::count::{Heuristic, TokenCounter};
use crate::error::Result;
use crate::fold::policy::FoldPolicy;
use crate::memory::tracked::{Landed, Rules, Tracked, lock};
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer};

/// The allowance summary-only memories give their summarizer, in tokens.
pub const SUMMARY_ALLOWANCE: usize = 1_000;

/// Keeps only a running summary: every turn is folded into it on arrival, one
/// summarizer call per add (rollmem's `SummaryMemory`, LangChain's
/// `ConversationSummaryMemory`).
///
/// If the summarizer fails, the turn stays in the buffer (shown by
/// `messages()`) and is folded with the next successful call. A state with a
/// buffer (saved by another strategy) is folded on the next add. The
/// summarizer is told an allowance of the policy's `max_summary_tokens`, else
/// [`SUMMARY_ALLOWANCE`] tokens, and a longer summary is cut to it (counted
/// with [`Heuristic`] unless [`counter`](Self::counter) says otherwise).
///
/// # Examples
///
/// ```
/// use chatfold::memory::{Memory, Remember, SummaryMemory};
/// use chatfold::SummaryRequest;
///
/// let summarize = |request: &SummaryRequest<'_>| {
///     let turns = request.messages().count();
///     let before: usize = request.previous_summary().map_or(0, |s| s.split(' ').next().unwrap().parse().unwrap());
///     Ok::<_, std::convert::Infallible>(format!("{} turns so far", before + turns))
/// };
/// let mut memory = SummaryMemory::new(summarize);
/// memory.add_user("Hi, I'm planning a trip to Korea.")?;
/// memory.add_assistant("Great! When are you going?")?;
/// assert_eq!(memory.summary(), "2 turns so far");
/// assert!(memory.buffer().is_empty());
/// assert_eq!(memory.messages().len(), 1); // the summary, as a system turn
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SummaryMemory<S, C = Heuristic> {
    tracked: Tracked,
    summarizer: S,
    checks: Checks<C>,
}

/// How the summary memories check and cut their summary.
#[derive(Clone, Debug)]
struct Checks<C> {
    policy: FoldPolicy,
    counter: C,
}

impl<C: TokenCounter> Checks<C> {
    fn allowance(&self) -> usize {
        self.policy.max_summary_tokens.unwrap_or(SUMMARY_ALLOWANCE)
    }

    fn rules(&self) -> Rules<'_, C> {
        Rules::summed(&self.policy, &self.counter, self.allowance())
    }
}

impl<S: Summarizer> SummaryMemory<S> {
    /// An empty memory folding with `summarizer`.
    pub fn new(summarizer: S) -> Self {
        SummaryMemory::from_state(State::default(), summarizer)
    }

    /// A memory holding `state` as it is (its buffer is folded on the next add).
    pub fn from_state(state: State, summarizer: S) -> Self {
        let checks = Checks {
            policy: FoldPolicy::new(),
            counter: Heuristic,
        };
        SummaryMemory {
            tracked: Tracked::new(state, &Heuristic, false, &checks.policy),
            summarizer,
            checks,
        }
    }
}

impl<S, C: TokenCounter> SummaryMemory<S, C> {
    /// Render, recognise and cut the summary by `policy`. An invalid policy
    /// (an empty prefix, a role that answers) makes every add an
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig), the memory unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    /// use chatfold::memory::{Memory, SummaryMemory};
    ///
    /// let memory = SummaryMemory::new(chatfold::Extractive::new()).policy(FoldPolicy::new().summary_prefix("[NOTES]\n"));
    /// assert_eq!(Memory::policy(&memory).summary_prefix, "[NOTES]\n");
    /// ```
    pub fn policy(mut self, policy: FoldPolicy) -> Self {
        self.checks.policy = policy;
        self.reread();
        self
    }

    /// Leave the messages `pins` name in the buffer, verbatim, through every
    /// fold (the task: [`Pin::FirstUser`](crate::Pin::FirstUser)).
    pub fn pins(mut self, pins: Vec<crate::fold::Pin>) -> Self {
        self.tracked.pin(pins);
        self
    }

    /// Cut the summary to its allowance counting with `counter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::{Memory, Remember, SummaryMemory};
    ///
    /// let mut memory = SummaryMemory::new(chatfold::Extractive::new()).counter(|text: &str| text.len());
    /// memory.add_user("Book the 9:40 train to Busan.")?;
    /// assert!(!memory.summary().is_empty());
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn counter<D: TokenCounter>(self, counter: D) -> SummaryMemory<S, D> {
        let mut memory = SummaryMemory {
            tracked: self.tracked,
            summarizer: self.summarizer,
            checks: Checks {
                policy: self.checks.policy,
                counter,
            },
        };
        memory.reread();
        memory
    }

    /// The summary's ledger read again, with the policy's patterns and
    /// counted by the counter the memory has now.
    fn reread(&mut self) {
        let checks = &self.checks;
        self.tracked.read_ledger(&checks.policy, &checks.counter);
    }
}

impl<S, C> Memory for SummaryMemory<S, C> {
    fn state(&self) -> Cow<'_, State> {
        Cow::Borrowed(&self.tracked.state)
    }

    fn policy(&self) -> &FoldPolicy {
        &self.checks.policy
    }
}

impl<S: Summarizer, C: TokenCounter> Remember for SummaryMemory<S, C> {
    /// Adds a message and folds the buffer into the summary.
    ///
    /// # Errors
    ///
    /// When the summarizer fails (or returns an empty summary) the message
    /// stays in the buffer and the summary is unchanged.
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for an invalid
    /// [`policy`](Self::policy): nothing is added.
    fn add_message(&mut self, message: Message) -> Result<()> {
        self.checks.policy.validate()?;
        self.tracked.push(message, None);
        let rules = self.checks.rules();
        let n = self.tracked.messages().len();
        let Some((ticket, request)) = self.tracked.begin(n, rules) else {
            return Ok(());
        };
        let answer = self.summarizer.summarize(&request).map_err(|e| e.into());
        drop(request);
        let summary = self.tracked.complete(&ticket, answer, rules);
        match self.tracked.land(ticket, summary) {
            Landed::Failed { error, .. } => Err(error),
            Landed::Folded { .. } | Landed::Stale => Ok(()),
        }
    }

    fn clear(&mut self) {
        self.tracked.clear();
    }
}

/// [`SummaryMemory`] for async summarizers, used through `&self`, with the
/// concurrency guarantees of [`AsyncRollingMemory`](super::AsyncRollingMemory):
/// one fold in flight, adds meanwhile kept and folded next, nothing changed
/// by a failure or a cancellation, `clear()` winning over a fold in flight.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{AsyncSummaryMemory, Memory, AsyncRemember};
/// use chatfold::SummaryRequest;
///
/// let summarize = async |request: SummaryRequest<'_>| {
///     let last = request.messages().last().map(|m| m.text().into_owned()).unwrap_or_default();
///     Ok::<_, std::convert::Infallible>(format!("last said: {last}"))
/// };
/// let memory = AsyncSummaryMemory::new(summarize);
/// pollster::block_on(memory.add_user("Book the 9:40 train."))?;
/// assert_eq!(memory.summary(), "last said: Book the 9:40 train.");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AsyncSummaryMemory<S, C = Heuristic> {
    cell: Mutex<Tracked>,
    summarizer: S,
    checks: Checks<C>,
}

impl<S: AsyncSummarizer> AsyncSummaryMemory<S> {
    /// An empty memory folding with `summarizer`.
    pub fn new(summarizer: S) -> Self {
        AsyncSummaryMemory::from_state(State::default(), summarizer)
    }

    /// A memory holding `state` as it is (its buffer is folded on the next add).
    pub fn from_state(state: State, summarizer: S) -> Self {
        let checks = Checks {
            policy: FoldPolicy::new(),
            counter: Heuristic,
        };
        AsyncSummaryMemory {
            cell: Mutex::new(Tracked::new(state, &Heuristic, false, &checks.policy)),
            summarizer,
            checks,
        }
    }
}

impl<S, C: TokenCounter> AsyncSummaryMemory<S, C> {
    /// Render, recognise and cut the summary by `policy`. An invalid policy
    /// (an empty prefix, a role that answers) makes every add an
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig), the memory unchanged.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::FoldPolicy;
    /// use chatfold::memory::{AsyncSummaryMemory, Memory};
    ///
    /// let memory = AsyncSummaryMemory::new(chatfold::Ready(chatfold::Extractive::new()))
    ///     .policy(FoldPolicy::new().summary_prefix("[NOTES]\n"));
    /// assert_eq!(Memory::policy(&memory).summary_prefix, "[NOTES]\n");
    /// ```
    pub fn policy(mut self, policy: FoldPolicy) -> Self {
        self.checks.policy = policy;
        self.reread();
        self
    }

    /// Leave the messages `pins` name in the buffer, verbatim, through every
    /// fold (the task: [`Pin::FirstUser`](crate::Pin::FirstUser)).
    pub fn pins(mut self, pins: Vec<crate::fold::Pin>) -> Self {
        self.cell
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pin(pins);
        self
    }

    /// Cut the summary to its allowance counting with `counter`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::{AsyncRemember, AsyncSummaryMemory, Memory};
    ///
    /// let memory = AsyncSummaryMemory::new(chatfold::Ready(chatfold::Extractive::new())).counter(|text: &str| text.len());
    /// pollster::block_on(memory.add_user("Book the 9:40 train to Busan."))?;
    /// assert!(!memory.summary().is_empty());
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn counter<D: TokenCounter>(self, counter: D) -> AsyncSummaryMemory<S, D> {
        let mut memory = AsyncSummaryMemory {
            cell: self.cell,
            summarizer: self.summarizer,
            checks: Checks {
                policy: self.checks.policy,
                counter,
            },
        };
        memory.reread();
        memory
    }

    /// The summary's ledger read again, with the policy's patterns and
    /// counted by the counter the memory has now.
    fn reread(&mut self) {
        let checks = &self.checks;
        lock(&self.cell).read_ledger(&checks.policy, &checks.counter);
    }
}

super::locked_memory!(AsyncSummaryMemory, |m| &m.checks.policy);

impl<S: AsyncSummarizer + Sync, C: TokenCounter + Sync> AsyncRemember for AsyncSummaryMemory<S, C> {
    async fn add_message(&self, message: Message) -> Result<()> {
        self.checks.policy.validate()?;
        lock(&self.cell).push(message, None);
        let everything = |buffer: &mut Tracked| buffer.messages().len();
        settle(&self.cell, &self.summarizer, self.checks.rules(), everything).await
    }

    fn clear(&self) {
        lock(&self.cell).clear();
    }
}
