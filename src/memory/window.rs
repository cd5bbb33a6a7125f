//! Sliding-window memory.

use std::borrow::Cow;

use super::{Memory, Remember, State, check_positive};
use crate::error::Result;
use crate::fold::units::{self, evict_count};
use crate::message::Message;

/// Keeps the last `max_messages` messages, dropping older ones with no
/// summary (rollmem's `WindowMemory`, LangChain's `ConversationBufferWindowMemory`).
///
/// Trimming drops whole units (a tool call with all its results) and leaves
/// the buffer opening with a user turn when it can; so the buffer can hold
/// more than `max_messages` when the latest unit alone is larger, and fewer
/// after an alignment.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{Memory, Remember, WindowMemory};
///
/// let mut memory = WindowMemory::new(4)?;
/// for i in 0..10 {
///     memory.add_user(format!("question {i}"))?;
///     memory.add_assistant(format!("answer {i}"))?;
/// }
/// let texts: Vec<String> = memory.buffer().iter().map(|m| m.text().into_owned()).collect();
/// assert_eq!(texts, ["question 8", "answer 8", "question 9", "answer 9"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct WindowMemory {
    state: State,
    max_messages: usize,
}

impl WindowMemory {
    /// An empty memory keeping at most `max_messages` messages.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) when `max_messages` is 0.
    pub fn new(max_messages: usize) -> Result<Self> {
        WindowMemory::from_state(State::default(), max_messages)
    }

    /// A memory holding `state` as it is (the window applies again on the next add).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn from_state(state: State, max_messages: usize) -> Result<Self> {
        check_positive("max_messages", max_messages)?;
        Ok(WindowMemory { state, max_messages })
    }

    /// The window's size.
    pub fn max_messages(&self) -> usize {
        self.max_messages
    }
}

impl Memory for WindowMemory {
    fn state(&self) -> Cow<'_, State> {
        Cow::Borrowed(&self.state)
    }
}

impl Remember for WindowMemory {
    fn add_message(&mut self, message: Message) -> Result<()> {
        self.state.buffer.push(message);
        if self.state.buffer.len() > self.max_messages {
            let buffer = &self.state.buffer;
            let n = evict_count(buffer, &units::callers(buffer), |_| 1, self.max_messages);
            self.state.buffer.drain(..n);
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.state.clear();
    }
}
