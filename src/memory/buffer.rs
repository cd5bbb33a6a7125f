//! Buffer-only memory.

use std::borrow::Cow;

use super::{Memory, Remember, State};
use crate::error::Result;
use crate::message::Message;

/// Keeps every message verbatim: no summary, no eviction (rollmem's
/// `BufferMemory`, LangChain's `ConversationBufferMemory`).
///
/// The context grows with the conversation; bound it with a
/// [`Compactor`](crate::Compactor) before each request if needed. Loading a
/// state that carries a summary keeps it, shown first by `messages()`.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{BufferMemory, Memory, Remember};
///
/// let mut memory = BufferMemory::new();
/// memory.add_user("Hi, I'm planning a trip to Korea.")?;
/// memory.add_assistant("Great! When are you going?")?;
/// assert_eq!(memory.messages().len(), 2);
/// assert_eq!(memory.context(), "user: Hi, I'm planning a trip to Korea.\nassistant: Great! When are you going?");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct BufferMemory {
    state: State,
}

impl BufferMemory {
    /// An empty memory.
    pub fn new() -> Self {
        BufferMemory::default()
    }

    /// A memory holding `state`, as it is.
    pub fn from_state(state: State) -> Self {
        BufferMemory { state }
    }
}

impl Memory for BufferMemory {
    fn state(&self) -> Cow<'_, State> {
        Cow::Borrowed(&self.state)
    }
}

impl Remember for BufferMemory {
    fn add_message(&mut self, message: Message) -> Result<()> {
        self.state.buffer.push(message);
        Ok(())
    }

    fn clear(&mut self) {
        self.state.clear();
    }
}
