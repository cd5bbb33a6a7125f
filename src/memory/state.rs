//! The saved state every memory shares (rollmem's JSON).

use serde_json::{Map, Value};

use crate::error::{Error, FieldError, JsonError, Result, StateError};
use crate::fold::policy::FoldPolicy;
use crate::message::Message;

/// The saved-state version chatfold writes.
pub const STATE_VERSION: u64 = 2;

/// A memory's state: the running summary and the verbatim buffer, and the
/// system messages a [`TieredMemory`](super::TieredMemory) pins ahead of them.
///
/// Saved as rollmem's JSON, `{"version": 2, "summary": "...", "buffer": [...]}`
/// (tool calls in rollmem's flat shape, so Python rollmem loads it too);
/// version 1 (no tool fields) is read as well. State saved by any strategy
/// loads in any other.
///
/// Pinned system messages (L0) are written as one more top-level array,
/// `"system": [...]`, and only when there are any. rollmem reads `version`,
/// `summary` and `buffer` and ignores other keys, so such a state still loads
/// there (without L0); every chatfold strategy keeps it and shows it first.
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
    /// System messages pinned ahead of the summary, never folded (a tiered
    /// memory's L0; empty for the other strategies unless loaded).
    pub system: Vec<Message>,
    /// The running summary (`""`: none yet).
    pub summary: String,
    /// The messages kept verbatim, oldest first.
    pub buffer: Vec<Message>,
}

impl State {
    /// A state with this summary and buffer.
    pub fn new(summary: impl Into<String>, buffer: Vec<Message>) -> Self {
        State {
            system: Vec::new(),
            summary: summary.into(),
            buffer,
        }
    }

    /// Forgets the summary and the buffer; pinned system messages stay.
    pub(crate) fn clear(&mut self) {
        self.summary.clear();
        self.buffer.clear();
    }

    /// The messages to send: the pinned system messages, the summary (if
    /// any) rendered by `policy`, so a [`Compactor`](crate::Compactor) with
    /// the same policy recognises it, then the buffer.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::memory::State;
    /// use chatfold::{FoldPolicy, Message};
    ///
    /// let state = State::new("Met Ann.", vec![Message::user("hi")]);
    /// let messages = state.messages(&FoldPolicy::new());
    /// assert_eq!(messages[0].text(), "Summary of earlier conversation:\nMet Ann.");
    /// assert_eq!(messages[1], Message::user("hi"));
    /// ```
    pub fn messages(&self, policy: &FoldPolicy) -> Vec<Message> {
        let mut out = Vec::with_capacity(self.system.len() + self.buffer.len() + 1);
        out.extend(self.system.iter().cloned());
        if !self.summary.is_empty() {
            out.push(policy.summary_message_before(&self.summary, self.buffer.first()));
        }
        out.extend(self.buffer.iter().cloned());
        out
    }

    /// The state as JSON.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("version".into(), Value::from(STATE_VERSION));
        map.insert("summary".into(), Value::String(self.summary.clone()));
        let buffer = self.buffer.iter().map(Message::to_state_json).collect();
        map.insert("buffer".into(), Value::Array(buffer));
        if !self.system.is_empty() {
            let system = self.system.iter().map(Message::to_state_json).collect();
            map.insert("system".into(), Value::Array(system));
        }
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
        let invalid = |field: FieldError| Error::InvalidState(StateError::Field(field));
        let Value::Object(mut map) = value else {
            return Err(invalid(FieldError::wrong("", "an object", &value)));
        };
        match map.get("version").and_then(Value::as_u64) {
            Some(1 | 2) => {}
            _ => {
                let found = map.get("version").map(Value::to_string);
                return Err(Error::InvalidState(StateError::Version { found }));
            }
        }
        let summary = match map.remove("summary") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s,
            Some(other) => return Err(invalid(FieldError::wrong("summary", "a string", &other))),
        };
        let mut messages = |key: &str| match map.remove(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| Message::parse(v).map_err(|e| invalid(e.within(&format!("{key}[{i}]")))))
                .collect::<Result<_>>(),
            Some(other) => Err(invalid(FieldError::wrong(key, "an array", &other))),
        };
        let buffer = messages("buffer")?;
        let system = messages("system")?;
        Ok(State {
            system,
            summary,
            buffer,
        })
    }

    /// Reads a state from a JSON string.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidState`] when the text is not JSON, and as [`from_json`](Self::from_json).
    pub fn from_json_str(json: &str) -> Result<Self> {
        let value = serde_json::from_str(json)
            .map_err(|e| Error::InvalidState(StateError::Json(JsonError::from_serde(&e))))?;
        State::from_json(value)
    }
}
