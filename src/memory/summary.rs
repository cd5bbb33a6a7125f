//! Summary-only memory.

use std::borrow::Cow;

use super::shared::{Inner, Shared};
use super::{Memory, Remember, RememberAsync, State, fold_request, new_summary};
use crate::error::{Error, Result};
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
/// summarizer is told an allowance of [`SUMMARY_ALLOWANCE`] tokens.
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
pub struct SummaryMemory<S> {
    state: State,
    summarizer: S,
}

impl<S: Summarizer> SummaryMemory<S> {
    /// An empty memory folding with `summarizer`.
    pub fn new(summarizer: S) -> Self {
        SummaryMemory::from_state(State::default(), summarizer)
    }

    /// A memory holding `state` as it is (its buffer is folded on the next add).
    pub fn from_state(state: State, summarizer: S) -> Self {
        SummaryMemory { state, summarizer }
    }
}

impl<S> Memory for SummaryMemory<S> {
    fn state(&self) -> Cow<'_, State> {
        Cow::Borrowed(&self.state)
    }
}

impl<S: Summarizer> Remember for SummaryMemory<S> {
    /// Adds a message and folds the buffer into the summary.
    ///
    /// # Errors
    ///
    /// When the summarizer fails (or returns an empty summary) the message
    /// stays in the buffer and the summary is unchanged.
    fn add_message(&mut self, message: Message) -> Result<()> {
        self.state.buffer.push(message);
        let request = fold_request(&self.state.summary, &self.state.buffer, SUMMARY_ALLOWANCE);
        let text = self
            .summarizer
            .summarize(&request)
            .map_err(|e| Error::Summarize(e.into()))?;
        self.state.summary = new_summary(text)?;
        self.state.buffer.clear();
        Ok(())
    }

    fn clear(&mut self) {
        self.state = State::default();
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
/// use chatfold::memory::{AsyncSummaryMemory, Memory, RememberAsync};
/// use chatfold::SummaryRequest;
///
/// let summarize = |request: SummaryRequest<'static>| async move {
///     let last = request.messages().last().map(|m| m.text().into_owned()).unwrap_or_default();
///     Ok::<_, std::convert::Infallible>(format!("last said: {last}"))
/// };
/// let memory = AsyncSummaryMemory::new(summarize);
/// pollster::block_on(memory.add_user("Book the 9:40 train."))?;
/// assert_eq!(memory.summary(), "last said: Book the 9:40 train.");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AsyncSummaryMemory<S> {
    shared: Shared,
    summarizer: S,
}

impl<S: AsyncSummarizer> AsyncSummaryMemory<S> {
    /// An empty memory folding with `summarizer`.
    pub fn new(summarizer: S) -> Self {
        AsyncSummaryMemory::from_state(State::default(), summarizer)
    }

    /// A memory holding `state` as it is (its buffer is folded on the next add).
    pub fn from_state(state: State, summarizer: S) -> Self {
        AsyncSummaryMemory {
            shared: Shared::new(Inner::new(state, Vec::new())),
            summarizer,
        }
    }
}

impl<S> Memory for AsyncSummaryMemory<S> {
    fn state(&self) -> Cow<'_, State> {
        Cow::Owned(self.shared.lock().state.clone())
    }
}

impl<S: AsyncSummarizer + Sync> RememberAsync for AsyncSummaryMemory<S> {
    async fn add_message(&self, message: Message) -> Result<()> {
        self.shared.lock().push(message, None);
        let everything = |inner: &Inner| inner.state.buffer.len();
        self.shared
            .settle(Some(&self.summarizer), SUMMARY_ALLOWANCE, everything)
            .await
    }

    fn clear(&self) {
        self.shared.lock().clear();
    }
}
