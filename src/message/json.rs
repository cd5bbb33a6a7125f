//! A message as JSON: written in the usual field order, read field by field
//! with the unknown ones kept, so that it comes back out as it went in.

use std::fmt;

use serde::de::Error as _;
use serde_json::{Map, Value};

use super::{Content, Message, Part, Role, ToolCall};
use crate::error::FieldError;

impl Message {
    /// The message as JSON: the modelled fields in the usual order (each
    /// from its typed field, or as kept in [`extra`](Message::extra) when the
    /// typed field is unset), then every other field of `extra`.
    pub fn to_json(&self) -> Value {
        if let Some(item) = self.item() {
            return (*item.0).clone();
        }
        let content = self.content.as_ref().map(|c| match c {
            Content::Text(s) => Value::String(s.clone()),
            Content::Parts(parts) => Value::Array(parts.iter().map(|p| (*p.0).clone()).collect()),
            Content::Item(item) => (*item.0).clone(),
        });
        let calls = (!self.tool_calls.is_empty())
            .then(|| Value::Array(self.tool_calls.iter().map(ToolCall::to_json).collect()));
        let string = |s: &Option<String>| s.as_ref().map(|s| Value::String(s.clone()));
        let known = [
            ("role", Some(Value::String(self.role.as_str().to_owned()))),
            ("content", content),
            ("name", string(&self.name)),
            ("tool_calls", calls),
            ("tool_call_id", string(&self.tool_call_id)),
            ("id", string(&self.id)),
        ];
        let mut map = Map::new();
        for (key, value) in known {
            if let Some(value) = value.or_else(|| self.extra().get(key).cloned()) {
                map.insert(key.to_owned(), value);
            }
        }
        for (k, v) in self.extra() {
            if !map.contains_key(k) {
                map.insert(k.clone(), v.clone());
            }
        }
        Value::Object(map)
    }

    /// The message as rollmem writes it in saved state: as [`to_json`](Message::to_json),
    /// with tool calls in rollmem's flat shape and `content` always present
    /// (`null` when absent), which Python rollmem requires.
    pub(crate) fn to_state_json(&self) -> Value {
        let mut value = self.to_json();
        if value.get("content").is_none() {
            value["content"] = Value::Null;
        }
        if !self.tool_calls.is_empty() {
            let flat = self.tool_calls.iter().map(ToolCall::to_flat_json).collect();
            value["tool_calls"] = Value::Array(flat);
        }
        value
    }

    pub(crate) fn parse(value: Value) -> std::result::Result<Self, FieldError> {
        match value {
            Value::Object(map) => {
                let mut fields = Fields::default();
                map.into_iter().for_each(|(key, value)| fields.put(&key, value));
                Message::from_fields(fields)
            }
            other => Err(FieldError::wrong("", "an object", &other)),
        }
    }

    /// The message a JSON object's fields make.
    fn from_fields(fields: Fields) -> std::result::Result<Self, FieldError> {
        let kind = fields.rest.get("type").and_then(Value::as_str);
        // A typed Responses message, or a typed object with no role: an item.
        if kind == Some("message") || kind.is_some() && fields.known[0].is_none() {
            return Message::from_item(fields.into_object());
        }
        let Fields {
            known: [role, content, name, tool_calls, tool_call_id, id],
            rest: mut map,
            ..
        } = fields;
        let role = match role {
            Some(Value::String(s)) => Role::from(s),
            Some(other) => return Err(FieldError::wrong("role", "a string", &other)),
            None => return Err(FieldError::missing("role", "a string")),
        };
        let mut m = Message::new(role, "");
        m.content = match content {
            Some(Value::String(s)) => Some(Content::Text(s)),
            Some(Value::Array(parts)) => {
                Some(Content::Parts(parts.into_iter().map(Part::from_json).collect()))
            }
            Some(Value::Null) => {
                map.insert("content".into(), Value::Null);
                None
            }
            None => None,
            Some(other) => {
                return Err(FieldError::wrong(
                    "content",
                    "a string, an array of parts or null",
                    &other,
                ));
            }
        };
        m.name = optional_string(&mut map, "name", name)?;
        match tool_calls {
            Some(Value::Array(calls)) if !calls.is_empty() => {
                m.tool_calls = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| ToolCall::from_json(c).map_err(|e| e.within(&format!("tool_calls[{i}]"))))
                    .collect::<std::result::Result<_, _>>()?;
            }
            Some(empty @ (Value::Array(_) | Value::Null)) => {
                map.insert("tool_calls".into(), empty);
            }
            Some(other) => return Err(FieldError::wrong("tool_calls", "an array", &other)),
            None => {}
        }
        m.tool_call_id = optional_string(&mut map, "tool_call_id", tool_call_id)?;
        m.id = optional_string(&mut map, "id", id)?;
        if !map.is_empty() {
            m.extra = Some(Box::new(map));
        }
        Ok(m)
    }
}

impl Message {
    /// A Responses API item as a message that keeps it whole
    /// ([`Content::Item`]): a `message` item has its own role (which it
    /// must have); a `*_output` item is a `tool` message; anything else an
    /// `assistant` one. A `call_id`, where there is one, must be a string.
    fn from_item(item: Map<String, Value>) -> std::result::Result<Self, FieldError> {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("message");
        if let Some(call) = item.get("call_id").filter(|v| !v.is_string()) {
            return Err(FieldError::wrong("call_id", "a string", call));
        }
        let role = match (kind, item.get("role")) {
            ("message", Some(Value::String(role))) => Role::from(role.as_str()),
            ("message", Some(other)) => return Err(FieldError::wrong("role", "a string", other)),
            ("message", None) => return Err(FieldError::missing("role", "a string")),
            (kind, _) if kind.ends_with("_output") => Role::Tool,
            _ => Role::Assistant,
        };
        let mut m = Message::new(role, "");
        m.content = Some(Content::Item(Part::from_json(Value::Object(item))));
        Ok(m)
    }
}

/// A message object's fields as read: the known ones apart, the others in
/// order (a repeated key: the last one wins, at the first one's place, as
/// in a JSON value), and where each known one stood, so that an object that
/// is not a chat message (a Responses item) is put back together as it came.
#[derive(Default)]
struct Fields {
    /// `role`, `content`, `name`, `tool_calls`, `tool_call_id`, `id`: [`KNOWN`].
    known: [Option<Value>; 6],
    /// Each known field's place among all the fields.
    at: [u32; 6],
    rest: Map<String, Value>,
}

/// The fields a chat message models.
const KNOWN: [&str; 6] = ["role", "content", "name", "tool_calls", "tool_call_id", "id"];

impl Fields {
    /// Sets field `key`.
    fn put(&mut self, key: &str, value: Value) {
        match KNOWN.iter().position(|k| *k == key) {
            Some(i) => self.set(i, value),
            None => {
                self.rest.insert(key.to_owned(), value);
            }
        }
    }

    /// Sets known field `i`.
    fn set(&mut self, i: usize, value: Value) {
        if self.known[i].is_none() {
            let before = self.rest.len() + self.known.iter().filter(|v| v.is_some()).count();
            self.at[i] = u32::try_from(before).unwrap_or(u32::MAX);
        }
        self.known[i] = Some(value);
    }

    /// The object, its fields in the order they came.
    fn into_object(self) -> Map<String, Value> {
        let mut known: Vec<(u32, &str, Value)> = (self.known.into_iter().zip(self.at).zip(KNOWN))
            .filter_map(|((value, at), key)| Some((at, key, value?)))
            .collect();
        known.sort_by_key(|&(at, _, _)| at);
        let mut known = known.into_iter().peekable();
        let mut rest = self.rest.into_iter();
        let mut out = Map::new();
        for place in 0u32.. {
            let next = match known.next_if(|&(at, _, _)| at == place) {
                Some((_, key, value)) => Some((key.to_owned(), value)),
                None => rest.next(),
            };
            let Some((key, value)) = next.or_else(|| known.next().map(|(_, k, v)| (k.to_owned(), v))) else {
                break;
            };
            out.insert(key, value);
        }
        out
    }
}

/// A string as read from JSON: borrowed from the text where it has no
/// escapes (a message object's known field without a copy of its name, a
/// ledger's JSON strings).
pub(crate) enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    /// The string.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// The visitor of [`Key`].
pub(crate) struct KeyVisitor;

impl<'de> serde::de::Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
        Ok(Key::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Key<'de>, E> {
        Ok(Key::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Key<'de>, E> {
        Ok(Key::Owned(v))
    }
}

/// A message read straight from JSON, its object's fields taken as they
/// come (no JSON object is built for it), checked; any other value is no
/// message.
pub(crate) struct Read(pub std::result::Result<Message, FieldError>);

impl<'de> serde::Deserialize<'de> for Read {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(ReadVisitor)
    }
}

/// The visitor of [`Read`]: an object field by field, any other value whole.
struct ReadVisitor;

impl ReadVisitor {
    fn other<E>(value: Value) -> std::result::Result<Read, E> {
        Ok(Read(Err(FieldError::wrong("", "an object", &value))))
    }
}

impl<'de> serde::de::Visitor<'de> for ReadVisitor {
    type Value = Read;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Read, A::Error> {
        let mut fields = Fields::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            let value = map.next_value::<Value>()?;
            fields.put(key.as_str(), value);
        }
        Ok(Read(Message::from_fields(fields)))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> std::result::Result<Read, A::Error> {
        use serde::Deserialize as _;
        Self::other(Value::deserialize(serde::de::value::SeqAccessDeserializer::new(
            seq,
        ))?)
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Read, E> {
        Self::other(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Read, E> {
        Self::other(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Read, E> {
        Self::other(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> std::result::Result<Read, E> {
        Self::other(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Read, E> {
        Self::other(Value::from(v))
    }

    fn visit_unit<E>(self) -> std::result::Result<Read, E> {
        Self::other(Value::Null)
    }

    fn visit_none<E>(self) -> std::result::Result<Read, E> {
        Self::other(Value::Null)
    }
}

/// Field `key` (its `value`, if it was there) as an optional string; a
/// `null` goes to `map` so that it is written back.
fn optional_string(
    map: &mut Map<String, Value>,
    key: &str,
    value: Option<Value>,
) -> std::result::Result<Option<String>, FieldError> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(Value::Null) => {
            map.insert(key.into(), Value::Null);
            Ok(None)
        }
        Some(other) => Err(FieldError::wrong(key, "a string", &other)),
    }
}

impl serde::Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let Read(read) = Read::deserialize(deserializer)?;
        read.map_err(D::Error::custom)
    }
}
