//! Stateful memories: per-conversation state on top of the compactor's units.
//!
//! Four strategies, sharing one [`Message`] type and one saved-state format
//! ([`State`], compatible with Python rollmem's JSON):
//!
//! | strategy | keeps | summarizer calls |
//! |---|---|---|
//! | [`RollingMemory`] / [`AsyncRollingMemory`] | recent turns verbatim; older ones folded into a running summary once the buffer passes `max_tokens` | one per fold, once the buffer is full |
//! | [`BufferMemory`] | everything, verbatim | none |
//! | [`WindowMemory`] | the last `max_messages` messages, whole units, aligned | none |
//! | [`SummaryMemory`] / [`AsyncSummaryMemory`] | only a running summary; every turn folded on arrival | one per add |
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
//!
//! Every memory reads through [`Memory`] (`messages()`, `context()`,
//! `summary()`, `buffer()`, `to_state()`), and adds through [`Remember`] (sync)
//! or [`RememberAsync`] (async). The cuts (tool calls kept with their results,
//! no assistant turn or tool result at the head of the buffer when avoidable,
//! the latest unit always kept) are the compactor's, written once.
//!
//! # Examples
//!
//! ```
//! use chatfold::memory::{Memory, Remember, RollingMemory, State, WindowMemory};
//! use chatfold::Extractive;
//!
//! let mut memory = RollingMemory::new(60, Extractive::new())?;
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

use serde_json::{Map, Value};

use crate::compact::DEFAULT_SUMMARY_PREFIX;
use crate::error::{Error, Result};
use crate::message::{Message, kind_of};
use crate::summarize::SummaryRequest;
use crate::units;

mod buffer;
mod rolling;
mod shared;
mod summary;
mod window;

pub use buffer::BufferMemory;
pub use rolling::{AsyncRollingMemory, Discard, RollingMemory};
pub use summary::{AsyncSummaryMemory, SUMMARY_ALLOWANCE, SummaryMemory};
pub use window::WindowMemory;

/// The saved-state version chatfold writes.
pub const STATE_VERSION: u64 = 2;

/// A memory's state: the running summary and the verbatim buffer.
///
/// Saved as rollmem's JSON, `{"version": 2, "summary": "...", "buffer": [...]}`
/// (tool calls in rollmem's flat shape, so Python rollmem loads it too);
/// version 1 (no tool fields) is read as well. State saved by any strategy
/// loads in any other.
///
/// # Examples
///
/// ```
/// use chatfold::memory::State;
///
/// let state = State::from_json_str(r#"{"version": 1, "summary": "met Ann", "buffer": [{"role": "user", "content": "hi"}]}"#)?;
/// assert_eq!(state.summary, "met Ann");
/// assert_eq!(state.buffer.len(), 1);
///
/// let err = State::from_json_str(r#"{"version": 3, "summary": "", "buffer": []}"#).unwrap_err();
/// assert_eq!(err.to_string(), "invalid state: unsupported version 3 (chatfold reads versions 1 and 2)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct State {
    /// The running summary (`""`: none yet).
    pub summary: String,
    /// The messages kept verbatim, oldest first.
    pub buffer: Vec<Message>,
}

impl State {
    /// A state with this summary and buffer.
    pub fn new(summary: impl Into<String>, buffer: Vec<Message>) -> Self {
        State {
            summary: summary.into(),
            buffer,
        }
    }

    /// The messages to send: the summary (if any) as a system turn starting
    /// with [`DEFAULT_SUMMARY_PREFIX`], so a [`Compactor`](crate::Compactor)
    /// recognises it, then the buffer.
    pub fn messages(&self) -> Vec<Message> {
        let mut out = Vec::with_capacity(self.buffer.len() + 1);
        if !self.summary.is_empty() {
            out.push(Message::system(format!(
                "{DEFAULT_SUMMARY_PREFIX}{}",
                self.summary
            )));
        }
        out.extend(self.buffer.iter().cloned());
        out
    }

    /// [`messages`](Self::messages) as one string: a `role: content` line per
    /// message, tool calls shown.
    pub fn context(&self) -> String {
        let lines: Vec<String> = self.messages().iter().map(ToString::to_string).collect();
        lines.join("\n")
    }

    /// The state as JSON.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("version".into(), Value::from(STATE_VERSION));
        map.insert("summary".into(), Value::String(self.summary.clone()));
        let buffer = self.buffer.iter().map(Message::to_state_json).collect();
        map.insert("buffer".into(), Value::Array(buffer));
        Value::Object(map)
    }

    /// The state as a JSON string.
    pub fn to_json_string(&self) -> String {
        self.to_json().to_string()
    }

    /// Reads a state from JSON.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] for an unknown version, a summary that is not a
    /// string, a buffer that is not an array, or a malformed message in it.
    pub fn from_json(value: Value) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidState { reason };
        let Value::Object(mut map) = value else {
            return Err(invalid(format!("expected an object, not {}", kind_of(&value))));
        };
        match map.get("version").and_then(Value::as_u64) {
            Some(1 | 2) => {}
            _ => {
                let version = map.get("version").map_or("missing".to_owned(), Value::to_string);
                return Err(invalid(format!(
                    "unsupported version {version} (chatfold reads versions 1 and 2)"
                )));
            }
        }
        let summary = match map.remove("summary") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(invalid(format!(
                    "summary must be a string, not {}",
                    kind_of(&other)
                )));
            }
        };
        let buffer = match map.remove("buffer") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| Message::parse(v).map_err(|e| invalid(format!("buffer message {i}: {e}"))))
                .collect::<Result<_>>()?,
            Some(other) => {
                return Err(invalid(format!(
                    "buffer must be an array, not {}",
                    kind_of(&other)
                )));
            }
        };
        Ok(State { summary, buffer })
    }

    /// Reads a state from a JSON string.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] when the text is not JSON, and as [`from_json`](Self::from_json).
    pub fn from_json_str(json: &str) -> Result<Self> {
        let value = serde_json::from_str(json).map_err(|e| Error::InvalidState {
            reason: format!("not valid JSON: {e}"),
        })?;
        State::from_json(value)
    }
}

/// Reading a memory: what every strategy offers.
pub trait Memory {
    /// The state: borrowed from a sync memory, a snapshot of an async one.
    fn state(&self) -> Cow<'_, State>;

    /// The summary (if any) as a leading system turn, then the buffer.
    fn messages(&self) -> Vec<Message> {
        self.state().messages()
    }

    /// [`messages`](Self::messages) as one string of `role: content` lines.
    fn context(&self) -> String {
        self.state().context()
    }

    /// The running summary (`""`: none).
    fn summary(&self) -> String {
        self.state().into_owned().summary
    }

    /// The messages kept verbatim.
    fn buffer(&self) -> Vec<Message> {
        self.state().into_owned().buffer
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
    /// [`Error::Summarize`] or [`Error::EmptySummary`] when a fold's summarizer
    /// fails; the memory is unchanged and the next add retries the fold.
    fn add_message(&mut self, message: Message) -> Result<()>;

    /// Forgets everything: summary and buffer.
    fn clear(&mut self);

    /// Adds a `user` message. See [`add_message`](Self::add_message).
    ///
    /// # Errors
    ///
    /// As [`add_message`](Self::add_message).
    fn add_user(&mut self, content: impl Into<String>) -> Result<()> {
        self.add_message(Message::user(content))
    }

    /// Adds an `assistant` message. See [`add_message`](Self::add_message).
    ///
    /// # Errors
    ///
    /// As [`add_message`](Self::add_message).
    fn add_assistant(&mut self, content: impl Into<String>) -> Result<()> {
        self.add_message(Message::assistant(content))
    }

    /// Adds a `system` message. See [`add_message`](Self::add_message).
    ///
    /// # Errors
    ///
    /// As [`add_message`](Self::add_message).
    fn add_system(&mut self, content: impl Into<String>) -> Result<()> {
        self.add_message(Message::system(content))
    }

    /// Adds a `tool` result for the call `call_id`. See [`add_message`](Self::add_message).
    ///
    /// # Errors
    ///
    /// As [`add_message`](Self::add_message).
    fn add_tool(&mut self, content: impl Into<String>, call_id: impl Into<String>) -> Result<()> {
        self.add_message(Message::tool(content, call_id))
    }
}

/// Adding to an asynchronous memory, through `&self`: one memory can be
/// shared between tasks.
pub trait RememberAsync: Memory {
    /// Adds a message, folding as the strategy does.
    ///
    /// The message is in the buffer as soon as the future first runs; if a
    /// fold is already in flight, this call leaves the fold to it and returns.
    ///
    /// # Errors
    ///
    /// [`Error::Summarize`] or [`Error::EmptySummary`] when this call's fold
    /// failed; the message stays in the buffer and the next add retries the fold.
    fn add_message(&self, message: Message) -> impl Future<Output = Result<()>> + Send;

    /// Forgets everything; a fold in flight is discarded when it completes.
    fn clear(&self);

    /// Adds a `user` message. See [`add_message`](Self::add_message).
    fn add_user(&self, content: impl Into<String>) -> impl Future<Output = Result<()>> + Send {
        self.add_message(Message::user(content))
    }

    /// Adds an `assistant` message. See [`add_message`](Self::add_message).
    fn add_assistant(&self, content: impl Into<String>) -> impl Future<Output = Result<()>> + Send {
        self.add_message(Message::assistant(content))
    }

    /// Adds a `system` message. See [`add_message`](Self::add_message).
    fn add_system(&self, content: impl Into<String>) -> impl Future<Output = Result<()>> + Send {
        self.add_message(Message::system(content))
    }

    /// Adds a `tool` result for the call `call_id`. See [`add_message`](Self::add_message).
    fn add_tool(
        &self,
        content: impl Into<String>,
        call_id: impl Into<String>,
    ) -> impl Future<Output = Result<()>> + Send {
        self.add_message(Message::tool(content, call_id))
    }
}

/// How many messages at the front of `buffer` must go so that the rest costs
/// at most `limit`: whole units, the latest always kept, aligned. `cost(i)` is
/// message `i`'s cost.
pub(crate) fn evict_count(buffer: &[Message], cost: impl Fn(usize) -> usize, limit: usize) -> usize {
    let callers = units::callers(buffer);
    let mut kept = 0usize;
    let cut = units::cut(buffer, units::Backward::new(buffer, &callers, 0), |unit| {
        kept = unit.map(&cost).fold(kept, usize::saturating_add);
        kept <= limit
    });
    cut.start
}

/// The summarizer request for folding `evicted` onto `summary`.
pub(crate) fn fold_request<'a>(
    summary: &'a str,
    evicted: &'a [Message],
    allowance: usize,
) -> SummaryRequest<'a> {
    let previous = (!summary.is_empty()).then_some(summary);
    SummaryRequest::new(previous, evicted, allowance)
}

/// A summarizer's answer as the new summary: trimmed, and an error if empty.
pub(crate) fn new_summary(text: String) -> Result<String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(Error::EmptySummary);
    }
    Ok(if trimmed.len() == text.len() {
        text
    } else {
        trimmed.to_owned()
    })
}

pub(crate) fn check_positive(name: &str, value: usize) -> Result<()> {
    if value == 0 {
        return Err(Error::config(format!("{name} must be at least 1")));
    }
    Ok(())
}
