//! The message model: OpenAI Chat Completions JSON, read and written losslessly.

use std::borrow::Cow;
use std::fmt;

use serde_json::{Map, Value};

use crate::error::FieldError;

mod json;
mod part;

pub(crate) use json::{Key, KeyVisitor, Read};
pub use part::Part;

/// The author of a message.
///
/// Any string is a valid role; the five that chat APIs define are variants,
/// everything else is kept in [`Role::Other`] and written back as it came.
///
/// # Examples
///
/// ```
/// use chatfold::Role;
///
/// assert_eq!(Role::from("assistant"), Role::Assistant);
/// assert_eq!(Role::from("critic").as_str(), "critic");
/// assert!(Role::Developer.is_pinned());
/// // A known name is always its variant: `Other` never holds "user".
/// assert!(matches!(Role::from(String::from("user")), Role::User));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// `system`: instructions; never folded.
    System,
    /// `developer`: OpenAI's newer name for system instructions; never folded.
    Developer,
    /// `user`.
    User,
    /// `assistant`.
    Assistant,
    /// `tool`: the result of a tool call.
    Tool,
    /// Any other role, kept verbatim.
    Other(CustomRole),
}

/// A role none of [`Role`]'s variants names, as written. Made only by
/// [`Role::from`], so it never holds `"user"` or another known name, and
/// roles compare by their names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CustomRole(String);

impl CustomRole {
    /// The role's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Role {
    /// The role as it is written in JSON.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(custom) => custom.as_str(),
        }
    }

    /// True for `assistant` and `tool`: roles that answer, which must not
    /// open a history (nor a summary's place in it).
    pub(crate) fn is_response(&self) -> bool {
        matches!(self, Role::Assistant | Role::Tool)
    }

    /// True for `system` and `developer`: roles whose messages are never folded.
    pub fn is_pinned(&self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

impl From<&str> for Role {
    fn from(s: &str) -> Self {
        match s {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            other => Role::Other(CustomRole(other.to_owned())),
        }
    }
}

impl From<String> for Role {
    fn from(s: String) -> Self {
        match Role::from(s.as_str()) {
            Role::Other(_) => Role::Other(CustomRole(s)),
            known => known,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message's content: a string or an array of parts; or, for an item of
/// OpenAI's Responses API, the whole item.
///
/// A `null` or absent content is `None` in [`Message::content`].
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// An array of parts (text, images, audio ...).
    Parts(Vec<Part>),
    /// A Responses API input item, kept whole and written back byte for
    /// byte: a typed `message`, a `function_call` or its
    /// `function_call_output` (and the other `*_call` / `*_call_output`
    /// kinds), `reasoning`, `compaction`, `item_reference`, or a type
    /// chatfold does not know. The message's role says what it is to the
    /// fold: a message item's own role; `tool` for an output; `assistant`
    /// for anything else. Made by reading JSON (an object with a `type`
    /// and no `role`, or of type `message`):
    ///
    /// ```
    /// use chatfold::Message;
    ///
    /// let call: Message = serde_json::from_str(r#"{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}"#)?;
    /// assert_eq!(call.call_ids().collect::<Vec<_>>(), ["c1"]);
    /// let output: Message = serde_json::from_str(r#"{"type": "function_call_output", "call_id": "c1", "output": "42"}"#)?;
    /// assert_eq!(output.role, chatfold::Role::Tool);
    /// assert_eq!(output.answered_ids().collect::<Vec<_>>(), ["c1"]);
    /// // Written back as it came.
    /// assert_eq!(output.to_json().to_string(), r#"{"type":"function_call_output","call_id":"c1","output":"42"}"#);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    Item(Part),
}

/// A tool (function) call requested by an assistant message.
///
/// Read from OpenAI's shape `{"id", "type": "function", "function": {"name",
/// "arguments"}}`, from the `custom` tool shape (`{"custom": {"name", "input"}}`)
/// and from rollmem's flat shape `{"id", "name", "arguments"}`; written in
/// OpenAI's shape. Unknown fields are kept.
///
/// # Examples
///
/// ```
/// use chatfold::ToolCall;
///
/// let call = ToolCall::new("call_1", "get_weather", r#"{"city":"Seoul"}"#);
/// assert_eq!(call.name, "get_weather");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call's id; a `tool` message answers it through `tool_call_id`.
    pub id: String,
    /// The call's `type`: `function` unless it came as something else.
    pub kind: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as text (usually JSON).
    pub arguments: String,
    /// Unknown fields of the call object, kept verbatim.
    pub extra: Map<String, Value>,
    /// Unknown fields of the inner `function` (or `custom`) object, kept verbatim.
    pub function_extra: Map<String, Value>,
}

impl ToolCall {
    /// A `function` call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        ToolCall {
            id: id.into(),
            kind: "function".into(),
            name: name.into(),
            arguments: arguments.into(),
            extra: Map::new(),
            function_extra: Map::new(),
        }
    }

    /// The key of the inner object (`function`, or `custom` for custom tools)
    /// and the key of the arguments in it.
    fn payload_keys(&self) -> (&str, &'static str) {
        if self.kind == "custom" {
            ("custom", "input")
        } else {
            ("function", "arguments")
        }
    }

    fn from_json(value: Value) -> std::result::Result<Self, FieldError> {
        const STRING: &str = "a string";
        let Value::Object(mut map) = value else {
            return Err(FieldError::wrong("", "an object", &value));
        };
        let id = match map.remove("id") {
            Some(Value::String(s)) => s,
            Some(other) => return Err(FieldError::wrong("id", STRING, &other)),
            None => return Err(FieldError::missing("id", STRING)),
        };
        let kind = match map.remove("type") {
            None | Some(Value::Null) => "function".to_owned(),
            Some(Value::String(s)) => s,
            Some(other) => return Err(FieldError::wrong("type", STRING, &other)),
        };
        let mut call = ToolCall::new(id, "", "");
        call.kind = kind;
        let (payload_key, args_key) = call.payload_keys();
        let (mut inner, args_key, path) = match map.remove(payload_key) {
            Some(Value::Object(inner)) => (inner, args_key.to_owned(), format!("{payload_key}.")),
            Some(other) => return Err(FieldError::wrong(payload_key, "an object", &other)),
            // rollmem's flat shape: name and arguments beside the id.
            None => (std::mem::take(&mut map), "arguments".to_owned(), String::new()),
        };
        let at = |key: &str| format!("{path}{key}");
        call.name = match inner.remove("name") {
            Some(Value::String(s)) => s,
            Some(other) => return Err(FieldError::wrong(at("name"), STRING, &other)),
            None => return Err(FieldError::missing(at("name"), STRING)),
        };
        call.arguments = match inner.remove(&args_key) {
            Some(Value::String(s)) => s,
            None | Some(Value::Null) => String::new(),
            Some(other) => return Err(FieldError::wrong(at(&args_key), STRING, &other)),
        };
        if map.is_empty() {
            // Flat shape: whatever is left beside name and arguments is call-level.
            call.extra = inner;
        } else {
            call.extra = map;
            call.function_extra = inner;
        }
        Ok(call)
    }

    /// rollmem's flat shape: `{"id", "name", "arguments"}`, plus `type` when
    /// it is not `function` and any unknown fields.
    fn to_flat_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("id".into(), Value::String(self.id.clone()));
        map.insert("name".into(), Value::String(self.name.clone()));
        map.insert("arguments".into(), Value::String(self.arguments.clone()));
        if self.kind != "function" {
            map.insert("type".into(), Value::String(self.kind.clone()));
        }
        for (k, v) in self.function_extra.iter().chain(&self.extra) {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(map)
    }

    fn to_json(&self) -> Value {
        let (payload_key, args_key) = self.payload_keys();
        let mut inner = Map::new();
        inner.insert("name".into(), Value::String(self.name.clone()));
        inner.insert(args_key.into(), Value::String(self.arguments.clone()));
        for (k, v) in &self.function_extra {
            inner.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let mut map = Map::new();
        map.insert("id".into(), Value::String(self.id.clone()));
        map.insert("type".into(), Value::String(self.kind.clone()));
        map.insert(payload_key.into(), Value::Object(inner));
        for (k, v) in &self.extra {
            map.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(map)
    }
}

/// One chat message, in the OpenAI Chat Completions shape.
///
/// Read and written losslessly: fields chatfold does not model are kept (see
/// [`extra`](Message::extra)) and written back; so are the `null` or empty
/// forms of modelled fields (`"content": null`, `"tool_calls": []`), so that a
/// message comes back out as it went in. rollmem's `id` is a field, its opaque
/// `metadata` is kept among the others and read through
/// [`metadata`](Message::metadata).
///
/// # Examples
///
/// ```
/// use chatfold::{Message, Role, ToolCall};
///
/// let ask = Message::user("What's the weather in Seoul?");
/// let call = Message::assistant_tool_calls(vec![ToolCall::new("c1", "weather", "{}")]);
/// let result = Message::tool("sunny, 23C", "c1");
/// assert_eq!(ask.role, Role::User);
/// assert_eq!(result.tool_call_id.as_deref(), Some("c1"));
///
/// let json = serde_json::to_string(&call)?;
/// let back: Message = serde_json::from_str(&json)?;
/// assert_eq!(back, call);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// The content; `None` when it is `null` or absent.
    pub content: Option<Content>,
    /// The optional participant `name`.
    pub name: Option<String>,
    /// Tool calls requested by an assistant message.
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// An optional message id (rollmem).
    pub id: Option<String>,
    /// Every other field, kept verbatim; boxed and absent when there is none,
    /// which keeps the message small for scans over long histories.
    extra: Option<Box<Map<String, Value>>>,
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        self.role == other.role
            && self.content == other.content
            && self.name == other.name
            && self.tool_calls == other.tool_calls
            && self.tool_call_id == other.tool_call_id
            && self.id == other.id
            && self.extra() == other.extra()
    }
}

impl Message {
    /// A message with any role and text content.
    pub fn new(role: impl Into<Role>, content: impl Into<String>) -> Self {
        Message {
            role: role.into(),
            content: Some(Content::Text(content.into())),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            id: None,
            extra: None,
        }
    }

    /// A `system` message.
    pub fn system(content: impl Into<String>) -> Self {
        Message::new(Role::System, content)
    }

    /// A `developer` message.
    pub fn developer(content: impl Into<String>) -> Self {
        Message::new(Role::Developer, content)
    }

    /// A `user` message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::new(Role::User, content)
    }

    /// An `assistant` message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message::new(Role::Assistant, content)
    }

    /// An `assistant` message that requests tool calls, with no content.
    pub fn assistant_tool_calls(calls: Vec<ToolCall>) -> Self {
        let mut m = Message::new(Role::Assistant, "");
        m.content = None;
        m.tool_calls = calls;
        m
    }

    /// A `tool` message: the result of the call `call_id`.
    pub fn tool(content: impl Into<String>, call_id: impl Into<String>) -> Self {
        let mut m = Message::new(Role::Tool, content);
        m.tool_call_id = Some(call_id.into());
        m
    }

    /// The same message with a participant `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The same message with an `id`.
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The same message with array content.
    pub fn with_parts(mut self, parts: Vec<Part>) -> Self {
        self.content = Some(Content::Parts(parts));
        self
    }

    /// The same message with opaque `metadata` (rollmem's field), written
    /// back as it is.
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.extra_mut().insert("metadata".into(), metadata);
        self
    }

    /// The message's `metadata` (rollmem's field), if it has one that is not `null`.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::Message;
    /// use serde_json::json;
    ///
    /// let m = Message::user("hi").with_metadata(json!({"latency_ms": 812}));
    /// assert_eq!(m.metadata().unwrap()["latency_ms"], 812);
    /// assert_eq!(m.to_json(), json!({"role": "user", "content": "hi", "metadata": {"latency_ms": 812}}));
    /// ```
    pub fn metadata(&self) -> Option<&Value> {
        self.extra().get("metadata").filter(|v| !v.is_null())
    }

    /// Every field chatfold does not model, and the `null` or empty forms of
    /// modelled ones, in the order they came: written back after the known fields.
    pub fn extra(&self) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.extra
            .as_deref()
            .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// The fields of [`extra`](Self::extra), to change.
    pub fn extra_mut(&mut self) -> &mut Map<String, Value> {
        self.extra.get_or_insert_with(Box::default)
    }

    /// The content as plain text: the string, the text parts joined by
    /// newlines, or `""` for no content.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Message, Part};
    ///
    /// let m = Message::user("").with_parts(vec![Part::text("a"), Part::text("b")]);
    /// assert_eq!(m.text(), "a\nb");
    /// ```
    pub fn text(&self) -> Cow<'_, str> {
        match &self.content {
            None => Cow::Borrowed(""),
            Some(Content::Text(s)) => Cow::Borrowed(s),
            Some(Content::Parts(parts)) => {
                join_lines(parts.iter().filter_map(Part::as_text)).unwrap_or(Cow::Borrowed(""))
            }
            Some(Content::Item(item)) => join_lines(item.message_texts()).unwrap_or(Cow::Borrowed("")),
        }
    }

    /// The ids of the tool calls the message makes: its
    /// [`tool_calls`](Message::tool_calls), and each `tool_use` block in its
    /// content (Anthropic's form).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Message, Part, ToolCall};
    ///
    /// let openai = Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]);
    /// assert_eq!(openai.call_ids().collect::<Vec<_>>(), ["c1"]);
    /// let block = serde_json::json!({"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}});
    /// let anthropic = Message::assistant("").with_parts(vec![Part::text("Looking."), Part::from_json(block)]);
    /// assert_eq!(anthropic.call_ids().collect::<Vec<_>>(), ["toolu_1"]);
    /// ```
    pub fn call_ids(&self) -> impl Iterator<Item = &str> {
        let blocks = self.parts().iter().filter_map(Part::call_id);
        self.tool_calls.iter().map(|c| c.id.as_str()).chain(blocks)
    }

    /// The ids of the tool calls the message answers: the `tool_call_id` of
    /// a `tool` message, and each `tool_result` block's `tool_use_id`
    /// (Anthropic's form, in a user message).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Message, Part};
    ///
    /// assert_eq!(Message::tool("42", "c1").answered_ids().collect::<Vec<_>>(), ["c1"]);
    /// let block = |id: &str| Part::from_json(serde_json::json!({"type": "tool_result", "tool_use_id": id, "content": "42"}));
    /// let results = Message::user("").with_parts(vec![block("toolu_1"), block("toolu_2")]);
    /// assert_eq!(results.answered_ids().collect::<Vec<_>>(), ["toolu_1", "toolu_2"]);
    /// ```
    pub fn answered_ids(&self) -> impl Iterator<Item = &str> {
        let id = self.tool_call_id.as_deref().filter(|_| self.role == Role::Tool);
        let blocks = self.parts().iter().filter_map(Part::answered_id);
        id.into_iter().chain(blocks)
    }

    /// The name of the tool the message calls with `id`, if it makes that call.
    pub(crate) fn call_name(&self, id: &str) -> Option<&str> {
        let openai = self
            .tool_calls
            .iter()
            .find(|c| c.id == id)
            .map(|c| c.name.as_str());
        openai.or_else(|| {
            self.parts()
                .iter()
                .find(|p| p.call_id() == Some(id))
                .and_then(Part::call_name)
        })
    }

    /// Empties the input of its call `id` (its `arguments`, `"{}"`; a
    /// block's or an item's `input` or `arguments`).
    pub(crate) fn clear_call_input(&mut self, id: &str) {
        for call in self.tool_calls.iter_mut().filter(|c| c.id == id) {
            call.arguments = "{}".to_owned();
        }
        match &mut self.content {
            Some(Content::Parts(parts)) => {
                (parts.iter_mut().filter(|p| p.call_id() == Some(id))).for_each(Part::clear_call_input)
            }
            Some(Content::Item(item)) if item.call_id() == Some(id) => item.clear_call_input(),
            _ => {}
        }
    }

    /// Whether the message makes a tool call ([`call_ids`](Self::call_ids)).
    pub fn makes_calls(&self) -> bool {
        !self.tool_calls.is_empty() || self.parts().iter().any(|p| p.call_id().is_some())
    }

    /// Whether the message must not open a history: an assistant turn, or a
    /// tool result (a `tool` message, any message with a `tool_call_id`, or
    /// one holding `tool_result` blocks), which needs its call before it.
    pub fn is_response(&self) -> bool {
        self.role.is_response() || self.tool_call_id.is_some() || self.parts().iter().any(Part::is_result)
    }

    /// Whether the message belongs with the one after it, kept or folded
    /// together: a Responses `reasoning` item.
    pub(crate) fn leads_in(&self) -> bool {
        matches!(&self.content, Some(Content::Item(item)) if item.is_reasoning())
    }

    /// The content's parts (Anthropic's blocks, OpenAI's content parts; a
    /// Responses item as one part); empty for text or no content.
    pub fn parts(&self) -> &[Part] {
        match &self.content {
            Some(Content::Parts(parts)) => parts,
            Some(Content::Item(item)) => std::slice::from_ref(item),
            _ => &[],
        }
    }

    /// The Responses item the message is, if it is one.
    pub fn item(&self) -> Option<&Part> {
        match &self.content {
            Some(Content::Item(item)) => Some(item),
            _ => None,
        }
    }

    /// Every piece of text that counts toward the message's tokens, except the
    /// role and the name: the content's text (each part separately, with the
    /// texts of Anthropic's thinking, tool call and tool result blocks), each
    /// tool call's id, name and arguments, and `tool_call_id`.
    pub fn text_pieces(&self) -> impl Iterator<Item = &str> {
        let (text, parts): (Option<&str>, &[Part]) = match &self.content {
            None => (None, &[]),
            Some(Content::Text(s)) => (Some(s), &[]),
            Some(Content::Parts(_) | Content::Item(_)) => (None, self.parts()),
        };
        let calls = self
            .tool_calls
            .iter()
            .flat_map(|c| [c.id.as_str(), c.name.as_str(), c.arguments.as_str()]);
        text.into_iter()
            .chain(parts.iter().flat_map(Part::text_pieces))
            .chain(calls)
            .chain(self.tool_call_id.as_deref())
    }
}

/// `pieces` joined by newlines, borrowed when there is one; `None` for none.
/// How texts become one text everywhere: a message's parts, summary pieces.
pub(crate) fn join_lines<'a, T: Into<Cow<'a, str>>>(
    pieces: impl IntoIterator<Item = T>,
) -> Option<Cow<'a, str>> {
    let mut pieces = pieces.into_iter().map(Into::into);
    let first = pieces.next()?;
    let Some(second) = pieces.next() else {
        return Some(first);
    };
    let mut text = first.into_owned();
    for piece in std::iter::once(second).chain(pieces) {
        text.push('\n');
        text.push_str(&piece);
    }
    Some(Cow::Owned(text))
}

/// `role: text`, with tool calls and the answered call id shown:
/// the line format of transcripts and of memories' `context()`.
impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.role.as_str())?;
        if let Some(name) = &self.name {
            write!(f, " ({name})")?;
        }
        if let Some(id) = &self.tool_call_id {
            write!(f, " [{id}]")?;
        }
        let text = self.text();
        write!(f, ": {text}")?;
        let mut gap = if text.is_empty() { "" } else { " " };
        for call in &self.tool_calls {
            write!(
                f,
                "{gap}[tool call {}: {}({})]",
                call.id, call.name, call.arguments
            )?;
            gap = " ";
        }
        // Anthropic's tool calls and results (blocks in the content), and
        // Responses items' (the item itself).
        for part in self.parts() {
            let get = |key: &str| part.as_json().get(key).and_then(Value::as_str).unwrap_or("");
            if part.tool_input().is_some() || part.call_id().is_some() {
                let id = part.call_id().unwrap_or_else(|| get("id"));
                let name = part.call_name().unwrap_or_else(|| get("name"));
                write!(f, "{gap}[tool call {id}: {name}({})]", part.shown_arguments())?;
            } else if let Some(id) = part.answered_id() {
                write!(f, "{gap}[tool result {id}: {}]", part.result_texts().join(" "))?;
            } else if part.is_reasoning() {
                write!(f, "{gap}[reasoning: {}]", part.reasoning_texts().join(" "))?;
            } else {
                continue;
            }
            gap = " ";
        }
        Ok(())
    }
}
