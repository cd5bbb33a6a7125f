//! Reading histories from JSON: an array of messages, or a request body
//! holding one, streamed message by message.

use std::cell::RefCell;
use std::fmt;
use std::io::Read;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::{Error, FormatMark, InputError, JsonError, Result};
use crate::message::{Message, Role};

mod breakpoints;
mod convert;
mod format;
mod stream;

pub use breakpoints::{Breakpoints, MAX_BREAKPOINTS};

pub use crate::fold::policy::Placement;
pub use format::Format;
use format::System;

/// A history as read from JSON: a bare array of messages, or a Chat
/// Completions request body (an object with a `messages` array), whose other
/// fields are kept.
///
/// The one way in: [`from_reader`](Self::from_reader) (a file, a request
/// body, standard input), [`from_json_str`](Self::from_json_str),
/// [`from_json_value`](Self::from_json_value), or serde (`History` is
/// `Deserialize`; a single [`Message`] is too). Every error names the index of
/// the message at fault. The one way out: [`to_json`](Self::to_json), or
/// [`to_json_with`](Self::to_json_with) for a compaction's messages in the
/// body they came in.
///
/// Messages are read one at a time: no JSON tree of the whole input is built,
/// so reading takes little more memory than the messages themselves.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Extractive, History};
///
/// let history = History::from_json_str(r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}"#)?;
/// assert_eq!(history.messages.len(), 1);
/// assert_eq!(history.field("model"), Some(&serde_json::json!("gpt-4o")));
///
/// let result = Compactor::new(100).compact(&history.messages, &Extractive::new())?;
/// assert_eq!(history.to_json_with(&result.messages).to_string(), r#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"temperature":0}"#);
///
/// let err = History::from_json_str(r#"[{"role": "user"}, {"content": "x"}]"#).unwrap_err();
/// assert!(matches!(err, chatfold::Error::InvalidMessage { index: 1, .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct History {
    /// The messages; in Anthropic's format, the top-level `system` first, as
    /// system messages.
    pub messages: Vec<Message>,
    /// The request body's fields, in order, `messages` (and Anthropic's
    /// `system`) among them as a `null` that marks its place; `None` for a
    /// bare array.
    body: Option<Map<String, Value>>,
    format: Format,
    /// What in the input's structure said its format, if anything did.
    mark: Option<FormatMark>,
    /// Whether anything said it: the structure, or the model's name.
    known: bool,
    /// How Anthropic's `system` (or the Responses API's `instructions`) was
    /// written.
    system: System,
    /// A Responses body whose `input` is a string: one user message.
    text_input: bool,
}

/// The body's field that holds the messages.
const MESSAGES: &str = "messages";
/// Anthropic's top-level system prompt.
const SYSTEM: &str = "system";
/// The Responses API's field of items.
const INPUT: &str = "input";
/// The Responses API's system prompt.
const INSTRUCTIONS: &str = "instructions";

impl From<Vec<Message>> for History {
    /// A bare array of `messages`, in OpenAI's format.
    fn from(messages: Vec<Message>) -> Self {
        History::bare(messages)
    }
}

impl History {
    /// Reads a history from a JSON string.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the text is not JSON, or neither an array
    /// nor an object with a `messages` array; [`Error::InvalidMessage`] with
    /// the index of the first malformed message.
    pub fn from_json_str(json: &str) -> Result<Self> {
        parse_str(json)?.settle()
    }

    /// Reads a history from a JSON value.
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Self::from_json_str).
    pub fn from_json_value(value: Value) -> Result<Self> {
        let failure = RefCell::new(None);
        let parsed = Top { failure: &failure }.deserialize(value);
        outcome(parsed, failure)?.settle()
    }

    /// Reads a history from JSON bytes (a file, standard input), which must
    /// be UTF-8.
    ///
    /// A bare array is read a buffer (1 MB) at a time, the messages that end
    /// in it parsed together (a buffer's worth cut near quarter-MB shares
    /// and parsed on up to four threads, as many as the machine runs at
    /// once), in about the time of
    /// [`from_json_str`](Self::from_json_str) on the same bytes, without
    /// holding the whole input (only when it reports an error does it read
    /// the rest, to check it); a request body is read whole. Errors are the
    /// same, at the same line and column, as `from_json_str` on the same
    /// bytes.
    ///
    /// # Errors
    ///
    /// As [`from_json_str`](Self::from_json_str), and [`Error::InvalidInput`]
    /// when reading fails or the bytes are not UTF-8.
    pub fn from_reader(reader: impl Read) -> Result<Self> {
        stream::read(reader)?.settle()
    }

    /// A bare array, in OpenAI's format.
    fn bare(messages: Vec<Message>) -> Self {
        History {
            messages,
            body: None,
            format: Format::OpenAi,
            mark: None,
            known: false,
            system: System::Absent,
            text_input: false,
        }
    }

    /// The format the marks in what was read say ([`Format`]), Anthropic's
    /// `system` lifted into leading system messages.
    fn settle(mut self) -> Result<Self> {
        if let Some((format, mark)) = format::detect(self.body.as_ref(), &self.messages)? {
            (self.format, self.mark, self.known) = (format, Some(mark), true);
        } else if let Some((format, _)) = format::hint(self.body.as_ref()) {
            (self.format, self.known) = (format, true);
        }
        let lifted = match (self.format, &mut self.body) {
            (Format::Anthropic, body) => {
                format::check_blocks(&self.messages)?;
                match body {
                    Some(body) => format::lift_system(body)?,
                    None => return Ok(self),
                }
            }
            (Format::Responses, Some(body)) => format::lift_instructions(body)?,
            _ => return Ok(self),
        };
        let (form, mut system) = lifted;
        self.system = form;
        system.append(&mut self.messages);
        self.messages = system;
        Ok(self)
    }

    /// The history read as `format`: as it is when it is in that format, or
    /// has no mark of either (plain user and assistant text reads the same
    /// in both).
    ///
    /// # Errors
    ///
    /// [`InputError::WrongFormat`] when the body's marks say the other one.
    pub fn into_format(mut self, format: Format) -> Result<Self> {
        if self.format == format {
            self.known = true;
            return Ok(self);
        }
        if let Some(mark) = &self.mark {
            return Err(Error::InvalidInput(InputError::WrongFormat {
                expected: format,
                found: self.format,
                mark: mark.clone(),
            }));
        }
        // Only a model's name, or nothing, said the format: nothing was
        // lifted (a top-level `system` is a mark of the structure).
        (self.format, self.known) = (format, true);
        Ok(self)
    }

    /// Whether the history was read from a request body (an object with
    /// `messages`), not a bare array.
    pub fn is_body(&self) -> bool {
        self.body.is_some()
    }

    /// Whether the input said its format: by its structure (a top-level
    /// `system`, a block, a tool message ...) or its `model`'s name, or
    /// [`into_format`](Self::into_format) was told. When not, [`format`](Self::format)
    /// is OpenAI's, and a summary written into a body may be in the wrong
    /// place for a Claude request.
    pub fn format_known(&self) -> bool {
        self.known
    }

    /// Where a compaction's summary must go for this history to stay a
    /// valid request once written back ([`to_json_with`](Self::to_json_with)):
    /// give it to the compactor's (or the memory's) [`FoldPolicy`](crate::FoldPolicy).
    /// An Anthropic body takes it in `system`, or as a leading user turn when
    /// the kept part opens on an assistant turn; a bare Anthropic array, as
    /// a leading user turn; OpenAI's, as a `system` message.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Compactor, Extractive, FoldPolicy, History, Placement};
    ///
    /// let mut turns = vec![serde_json::json!({"role": "user", "content": "Plan day one."})];
    /// for i in 0..30 {
    ///     turns.push(serde_json::json!({"role": "assistant", "content": [
    ///         {"type": "tool_use", "id": format!("t{i}"), "name": "search", "input": {"q": i}}]}));
    ///     turns.push(serde_json::json!({"role": "user", "content": [
    ///         {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": format!("result {i}")}]}));
    /// }
    /// let history = History::from_json_value(serde_json::json!({"system": "Be brief.", "messages": turns}))?;
    /// assert_eq!(history.placement(), Placement::AnthropicBody);
    ///
    /// let policy = FoldPolicy::new().placement(history.placement());
    /// let result = Compactor::new(150).policy(policy).compact(&history.messages, &Extractive::new())?;
    /// let request = history.to_json_with(&result.messages);
    /// // Only tool exchanges are left to keep: the summary leads as a user turn.
    /// assert_eq!(request["messages"][0]["role"], "user");
    /// assert!(request["messages"][0]["content"].as_str().unwrap().starts_with("Summary of earlier conversation:"));
    /// assert_eq!(request["messages"][1]["role"], "assistant");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn placement(&self) -> Placement {
        match (self.format, self.body.is_some()) {
            (Format::OpenAi | Format::Responses, _) => Placement::Fixed,
            (Format::Anthropic, true) => Placement::AnthropicBody,
            (Format::Anthropic, false) => Placement::AnthropicArray,
        }
    }

    /// The format the history was read in: Anthropic's when the body has a
    /// top-level `system` or any Anthropic block, the Responses API's when it
    /// has an `input` or any item, else OpenAI's.
    pub fn format(&self) -> Format {
        self.format
    }

    /// A field of the request body other than `messages` (`model`,
    /// `temperature` ...; Anthropic's `system`, and the Responses API's
    /// `input` and `instructions`, are in the messages); `None` for a bare
    /// array.
    pub fn field(&self, name: &str) -> Option<&Value> {
        let lifted = match self.format {
            Format::OpenAi => [MESSAGES, MESSAGES],
            Format::Anthropic => [MESSAGES, SYSTEM],
            Format::Responses => [INPUT, INSTRUCTIONS],
        };
        self.body
            .as_ref()
            .filter(|_| !lifted.contains(&name))
            .and_then(|body| body.get(name))
    }

    /// The history as JSON: its messages as an array, or in the body they
    /// came in with every other field in its place.
    pub fn to_json(&self) -> Value {
        self.to_json_with(&self.messages)
    }

    /// The history's JSON with `messages` in place of its own: how a
    /// compaction's result is written back into the request it came from.
    pub fn to_json_with(&self, messages: &[Message]) -> Value {
        let (list_key, system_key) = match self.format {
            Format::OpenAi => (MESSAGES, None),
            Format::Anthropic => (MESSAGES, Some(SYSTEM)),
            Format::Responses => (INPUT, Some(INSTRUCTIONS)),
        };
        let lifted = match (&self.body, self.format) {
            // The leading system messages (the caller's and the summary) go
            // back into `system`.
            (Some(_), Format::Anthropic) => messages.iter().take_while(|m| m.role == Role::System).count(),
            // The instructions: the first message, when it is the one they
            // were read into.
            (Some(_), Format::Responses) => {
                usize::from(self.system == System::Text && messages.first() == self.messages.first())
            }
            _ => 0,
        };
        let (system, messages) = messages.split_at(lifted);
        let mut list = Some(match messages {
            // A string `input` stays one while it is the same one message.
            [only] if self.text_input && self.messages.last() == Some(only) => {
                Value::String(only.text().into_owned())
            }
            _ => Value::Array(messages.iter().map(Message::to_json).collect()),
        });
        let Some(body) = &self.body else {
            return list.unwrap_or_default();
        };
        let mut system = match self.format {
            Format::Anthropic => format::system_value(self.system, system),
            _ => system.first().map(|m| Value::String(m.text().into_owned())),
        };
        let mut out: Map<String, Value> = body
            .iter()
            .filter_map(|(k, v)| {
                let v = match k.as_str() {
                    key if key == list_key => list.take().unwrap_or_default(),
                    // Written back as it came (`null`) when it held nothing.
                    key if Some(key) == system_key => match system.take() {
                        Some(system) => system,
                        None if self.system == System::Absent => v.clone(),
                        None => return None,
                    },
                    _ => v.clone(),
                };
                Some((k.clone(), v))
            })
            .collect();
        if let (Some(system), Some(key)) = (system, system_key) {
            out.insert(key.to_owned(), system);
        }
        Value::Object(out)
    }
}

impl serde::Serialize for History {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// As [`History::from_json_str`]: an error names the message's index.
impl<'de> serde::Deserialize<'de> for History {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let history = Top {
            failure: &RefCell::new(None),
        }
        .deserialize(deserializer)?;
        history.settle().map_err(de::Error::custom)
    }
}

/// Reads a history from a JSON string, as it is (no format settled).
fn parse_str(json: &str) -> Result<History> {
    read(&mut serde_json::Deserializer::from_str(json))
}

fn read<'de, R: serde_json::de::Read<'de>>(de: &mut serde_json::Deserializer<R>) -> Result<History> {
    let failure = RefCell::new(None);
    let parsed = Top { failure: &failure }
        .deserialize(&mut *de)
        .and_then(|history| de.end().map(|()| history));
    outcome(parsed, failure)
}

/// The error recorded while parsing, or serde_json's own.
fn outcome(
    parsed: std::result::Result<History, serde_json::Error>,
    failure: RefCell<Option<Error>>,
) -> Result<History> {
    match (parsed, failure.into_inner()) {
        (_, Some(error)) => Err(error),
        (Ok(history), None) => Ok(history),
        (Err(e), None) => Err(Error::InvalidInput(InputError::Json(JsonError::from_serde(&e)))),
    }
}

/// The top level: an array, or a body object.
struct Top<'f> {
    failure: &'f RefCell<Option<Error>>,
}

impl Top<'_> {
    fn wrong<E: de::Error>(&self, found: &'static str) -> E {
        fail(
            self.failure,
            Error::InvalidInput(InputError::NotAHistory { found }),
        )
    }
}

/// Records `error` for `read` to return, and stops the deserializer.
fn fail<E: de::Error>(slot: &RefCell<Option<Error>>, error: Error) -> E {
    let text = error.to_string();
    *slot.borrow_mut() = Some(error);
    E::custom(text)
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = History;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<History, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// The `visit_*` methods for JSON scalars: each is the wrong type here.
macro_rules! refuse_scalars {
    () => {
        fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
            Err(self.wrong("null"))
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
            Err(self.wrong("a boolean"))
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
            Err(self.wrong("a number"))
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
            Err(self.wrong("a number"))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
            Err(self.wrong("a number"))
        }
        fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
            Err(self.wrong("a string"))
        }
    };
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = History;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<History, A::Error> {
        let messages = Elements {
            failure: self.failure,
        }
        .visit_seq(seq)?;
        Ok(History::bare(messages))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<History, A::Error> {
        let mut body = Map::new();
        let (mut messages, mut input) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            let nested = |field| Nested {
                failure: self.failure,
                field,
            };
            match key.as_str() {
                MESSAGES => messages = Some(map.next_value_seed(nested(MESSAGES))?),
                INPUT => input = Some(map.next_value_seed(nested(INPUT))?),
                _ => {
                    let value = map.next_value::<Value>()?;
                    body.insert(key, value);
                    continue;
                }
            }
            body.insert(key, Value::Null);
        }
        let (messages, text_input) = match (messages, input) {
            (Some(List::Messages(messages)), None) => (messages, false),
            (None, Some(List::Messages(items))) => (items, false),
            (None, Some(List::Text(text))) => (vec![Message::user(text)], true),
            (Some(_), Some(_)) => return Err(self.wrong("an object with both \"messages\" and \"input\"")),
            _ => return Err(self.wrong("an object without \"messages\"")),
        };
        Ok(History {
            body: Some(body),
            text_input,
            ..History::bare(messages)
        })
    }

    refuse_scalars!();
}

/// The `messages` field of a body (an array), or the Responses API's
/// `input` (an array of items, or a string).
struct Nested<'f> {
    failure: &'f RefCell<Option<Error>>,
    field: &'static str,
}

/// What a body's list field holds.
enum List {
    Messages(Vec<Message>),
    /// A string `input`.
    Text(String),
}

impl<'de> DeserializeSeed<'de> for Nested<'_> {
    type Value = List;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> std::result::Result<List, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nested<'_> {
    type Value = List;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> std::result::Result<List, A::Error> {
        Elements {
            failure: self.failure,
        }
        .visit_seq(seq)
        .map(List::Messages)
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> std::result::Result<List, A::Error> {
        Err(self.wrong("an object"))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> std::result::Result<List, E> {
        match self.field {
            INPUT => Ok(List::Text(text.to_owned())),
            _ => Err(self.wrong("a string")),
        }
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<List, E> {
        Err(self.wrong("null"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<List, E> {
        Err(self.wrong("a boolean"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<List, E> {
        Err(self.wrong("a number"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<List, E> {
        Err(self.wrong("a number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<List, E> {
        Err(self.wrong("a number"))
    }
}

impl Nested<'_> {
    fn wrong<E: de::Error>(&self, found: &'static str) -> E {
        let error = match self.field {
            INPUT => InputError::InputNotList { found },
            _ => InputError::MessagesNotArray { found },
        };
        fail(self.failure, Error::InvalidInput(error))
    }
}

/// The elements of a message array, each read field by field into a
/// [`Message`] (no JSON object is built for it).
struct Elements<'f> {
    failure: &'f RefCell<Option<Error>>,
}

impl Elements<'_> {
    fn visit_seq<'de, A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Vec<Message>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(crate::message::Read(read)) = seq.next_element()? {
            match read {
                Ok(m) => out.push(m),
                Err(problem) => {
                    let error = Error::InvalidMessage {
                        index: out.len(),
                        problem,
                    };
                    return Err(fail(self.failure, error));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_split_across_reads_is_fine_and_bad_bytes_are_caught() {
        struct Chunks(Vec<Vec<u8>>);
        impl Read for Chunks {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if self.0.is_empty() {
                    return Ok(0);
                }
                let chunk = self.0.remove(0);
                buf[..chunk.len()].copy_from_slice(&chunk);
                Ok(chunk.len())
            }
        }
        let text = "[{\"role\":\"user\",\"content\":\"日本\"}]".as_bytes().to_vec();
        let cut = text.iter().position(|&b| b >= 0x80).unwrap() + 1;
        let split = Chunks(vec![text[..cut].to_vec(), text[cut..].to_vec()]);
        assert_eq!(History::from_reader(split).unwrap().messages[0].text(), "日本");
        let bad = Chunks(vec![b"[{\"role\":\"user\",\"content\":\"\xff\"}]".to_vec()]);
        let err = History::from_reader(bad).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidInput(InputError::NotUtf8 {
                    byte: 27,
                    line: 1,
                    column: 28
                })
            ),
            "{err}"
        );
    }
}
