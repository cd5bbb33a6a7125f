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
        let content = self.content.as_ref().map(|c| match c {
            Content::Text(s) => Value::String(s.clone()),
            Content::Parts(parts) => Value::Array(parts.iter().map(|p| p.0.clone()).collect()),
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
                map.into_iter().for_each(|(key, value)| fields.put(key, value));
                Message::from_fields(fields)
            }
            other => Err(FieldError::wrong("", "an object", &other)),
        }
    }

    /// The message a JSON object's fields make.
    fn from_fields(fields: Fields) -> std::result::Result<Self, FieldError> {
        let Fields {
            role,
            content,
            name,
            tool_calls,
            tool_call_id,
            id,
            rest: mut map,
        } = fields;
        let role = match role {
            Some(Value::String(s)) => Role::from(s),
            Some(other) => return Err(FieldError::wrong("role", "a string", &other)),
            None => return Err(FieldError::missing("role", "a string")),
        };
        let mut m = Message::new(role, "");
        m.content = match content {
            Some(Value::String(s)) => Some(Content::Text(s)),
            Some(Value::Array(parts)) => Some(Content::Parts(parts.into_iter().map(Part).collect())),
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

/// A message object's fields as read: the known ones apart, the others in
/// order (a repeated key: the last one wins, as in a JSON value).
#[derive(Default)]
struct Fields {
    role: Option<Value>,
    content: Option<Value>,
    name: Option<Value>,
    tool_calls: Option<Value>,
    tool_call_id: Option<Value>,
    id: Option<Value>,
    rest: Map<String, Value>,
}

impl Fields {
    /// Sets field `key`.
    fn put(&mut self, key: String, value: Value) {
        match self.slot(&key) {
            Some(slot) => *slot = Some(value),
            None => {
                self.rest.insert(key, value);
            }
        }
    }

    /// The slot of a known field, `None` for any other.
    fn slot(&mut self, key: &str) -> Option<&mut Option<Value>> {
        Some(match key {
            "role" => &mut self.role,
            "content" => &mut self.content,
            "name" => &mut self.name,
            "tool_calls" => &mut self.tool_calls,
            "tool_call_id" => &mut self.tool_call_id,
            "id" => &mut self.id,
            _ => return None,
        })
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
            match key {
                Key::Borrowed(k) => match fields.slot(k) {
                    Some(slot) => *slot = Some(value),
                    None => {
                        fields.rest.insert(k.to_owned(), value);
                    }
                },
                Key::Owned(k) => fields.put(k, value),
            }
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
