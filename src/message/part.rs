//! A part of a message: a content part or an Anthropic block, or a whole
//! item of OpenAI's Responses API; what each says, and which calls it makes
//! or answers, read in one place.

use serde_json::Value;

/// One part of an array content (`{"type": "text", "text": ...}`, an image, audio ...),
/// an Anthropic content block, or a whole Responses API item
/// ([`Content::Item`](super::Content::Item)).
///
/// Parts are kept as the JSON object they came as, so parts chatfold does not
/// know about are written back unchanged. Only their text is read.
///
/// # Examples
///
/// ```
/// use chatfold::Part;
///
/// let part = Part::text("hello");
/// assert_eq!(part.as_text(), Some("hello"));
/// assert_eq!(part.kind(), Some("text"));
/// ```
#[derive(Clone, Debug, PartialEq)]
///
/// (The object is boxed: a part is as small as a pointer, and so is the
/// [`Content`](super::Content) that holds one, which keeps a [`Message`]
/// small for scans over long histories.)
///
/// [`Message`]: super::Message
pub struct Part(pub(super) Box<Value>);

/// Keys of a Responses item whose strings are not text a model reads: what
/// kind of thing it is and where it stands, opaque ciphertext, and inline
/// data (images and files count as the other formats count them: nothing).
/// A message item's `role` counts once, as every message's role does.
const NOT_TEXT: [&str; 6] = [
    "type",
    "status",
    "role",
    "encrypted_content",
    "image_url",
    "file_data",
];

impl Part {
    /// A `{"type": "text", "text": ...}` part.
    pub fn text(text: impl Into<String>) -> Self {
        let mut map = serde_json::Map::new();
        map.insert("type".into(), Value::String("text".into()));
        map.insert("text".into(), Value::String(text.into()));
        Part(Box::new(Value::Object(map)))
    }

    /// A part from any JSON value, kept as it is.
    pub fn from_json(value: Value) -> Self {
        Part(Box::new(value))
    }

    /// The part's `type`, if it has one.
    pub fn kind(&self) -> Option<&str> {
        self.0.get("type").and_then(Value::as_str)
    }

    /// The part's text: its `text` field when that is a string, else `None`
    /// (images, audio and files carry no text and count no tokens).
    pub fn as_text(&self) -> Option<&str> {
        self.0.get("text").and_then(Value::as_str)
    }

    /// The part as JSON.
    pub fn as_json(&self) -> &Value {
        &self.0
    }

    /// A string field.
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    /// Whether the part is a Responses item that calls a tool which another
    /// item answers: a `*_call` with a `call_id` (`function_call`,
    /// `custom_tool_call`, `computer_call`, `local_shell_call` ...).
    fn is_item_call(&self) -> bool {
        self.kind().is_some_and(|k| k.ends_with("_call")) && self.get("call_id").is_some()
    }

    /// The id of the tool call the part makes: an Anthropic `tool_use`
    /// block's `id`, a Responses `*_call` item's `call_id`.
    pub(crate) fn call_id(&self) -> Option<&str> {
        match self.kind()? {
            "tool_use" => self.get("id"),
            _ if self.is_item_call() => self.get("call_id"),
            _ => None,
        }
    }

    /// The id of the tool call the part answers: a `tool_result` block's
    /// `tool_use_id`, a Responses `*_call_output` item's `call_id`.
    pub(crate) fn answered_id(&self) -> Option<&str> {
        match self.kind()? {
            "tool_result" => self.get("tool_use_id"),
            k if k.ends_with("_call_output") => self.get("call_id"),
            _ => None,
        }
    }

    /// The tool a call part names (`name`; a call without one, such as a
    /// `computer_call`, by its kind).
    pub(crate) fn call_name(&self) -> Option<&str> {
        self.call_id()?;
        self.get("name").or_else(|| self.kind())
    }

    /// Whether the part is a Responses `reasoning` item, which belongs with
    /// the item after it.
    pub(crate) fn is_reasoning(&self) -> bool {
        self.kind() == Some("reasoning")
    }

    /// Whether the part is Anthropic's `thinking` or `redacted_thinking`
    /// block.
    pub(crate) fn is_thinking(&self) -> bool {
        matches!(self.kind(), Some("thinking" | "redacted_thinking"))
    }

    /// Whether the part is a Responses `message` item (typed, or the
    /// `{role, content}` shorthand).
    fn is_message_item(&self) -> bool {
        match self.kind() {
            Some(kind) => kind == "message",
            None => self.0.get("role").is_some(),
        }
    }

    /// The texts of a Responses item's `content`: the string, or its parts'
    /// `text` (and a refusal's `refusal`).
    fn content_texts(&self) -> Vec<&str> {
        match self.0.get("content") {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").or_else(|| p.get("refusal")).and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// What the part says as a message's text: its `text`, or a Responses
    /// message item's content. Tool calls, results and reasoning are not
    /// text (a transcript shows them apart).
    pub(crate) fn message_texts(&self) -> Vec<&str> {
        if self.is_message_item() {
            return self.content_texts();
        }
        self.as_text().into_iter().collect()
    }

    /// The texts in the part that count as tokens, borrowed: its `text`;
    /// for Anthropic's blocks, a `thinking` block's thinking, a tool call's
    /// id and name (`tool_use`, `server_tool_use`), and a `tool_result`'s
    /// `tool_use_id` and content (a string, or its blocks' texts). A tool
    /// call's `input`, an object, is counted as JSON by
    /// [`TokenCounter::count_message`](crate::TokenCounter::count_message).
    /// For a Responses item, every string in it but its `type`, `status`,
    /// encrypted content and inline images and files: a `function_call`'s
    /// `call_id`, `name` and `arguments`, an output's `output`, a message's
    /// texts, a reasoning item's summary.
    pub(crate) fn text_pieces(&self) -> Vec<&str> {
        if self.is_item() {
            let mut pieces = Vec::new();
            strings_but(&self.0, &mut pieces);
            return pieces;
        }
        let mut pieces = self.prose();
        match self.kind() {
            Some("tool_use" | "server_tool_use" | "mcp_tool_use") => {
                pieces.extend([self.get("id"), self.get("name")].into_iter().flatten())
            }
            Some("tool_result") => pieces.extend(self.get("tool_use_id")),
            _ => {}
        }
        pieces
    }

    /// Whether the part is a whole Responses item rather than a content part
    /// or block: a message item, a `*_call`, `*_call_output`, reasoning or
    /// compaction item, or an item reference.
    fn is_item(&self) -> bool {
        self.is_message_item()
            || self.is_item_call()
            || self.answered_id().is_some() && self.kind() != Some("tool_result")
            || matches!(self.kind(), Some("reasoning" | "compaction" | "item_reference"))
    }

    /// What the part says, without ids: its `text`, a `thinking` block's
    /// thinking, a `tool_result`'s content; a Responses message's texts, a
    /// call's arguments (`input` of a custom tool), an output's text, a
    /// reasoning item's summary. What the ledger reads.
    pub(crate) fn prose(&self) -> Vec<&str> {
        if self.is_message_item() {
            return self.content_texts();
        }
        let mut prose: Vec<&str> = self.as_text().into_iter().collect();
        match self.kind() {
            Some("thinking") => prose.extend(self.get("thinking")),
            Some("reasoning") => prose.extend(self.reasoning_texts()),
            _ if self.is_item_call() => prose.extend(self.get("arguments").or_else(|| self.get("input"))),
            _ => prose.extend(self.result_texts()),
        }
        prose
    }

    /// A reasoning item's readable texts: its summary (and any plain
    /// `content`); never its encrypted content.
    pub(crate) fn reasoning_texts(&self) -> Vec<&str> {
        let texts = |key: &str| {
            self.0
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
        };
        texts("summary").chain(texts("content")).collect()
    }

    /// A tool result's content as texts: a `tool_result` block's content (the
    /// string, or its text blocks' texts), a Responses output item's
    /// `output` (likewise); none for any other part.
    pub(crate) fn result_texts(&self) -> Vec<&str> {
        let key = match self.kind() {
            Some("tool_result") => "content",
            _ if self.answered_id().is_some() => "output",
            _ => return Vec::new(),
        };
        match self.0.get(key) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the part is a tool result (a `tool_result` block, a Responses
    /// output item).
    pub(crate) fn is_result(&self) -> bool {
        self.answered_id().is_some()
    }

    /// Replaces a tool result's content with `text`.
    pub(crate) fn set_result_content(&mut self, text: String) {
        let key = if self.kind() == Some("tool_result") {
            "content"
        } else {
            "output"
        };
        if let Value::Object(map) = &mut *self.0 {
            map.insert(key.to_owned(), Value::String(text));
        }
    }

    /// Empties the input of the call this part makes: a `tool_use` block's
    /// `input` becomes `{}`, a `*_call` item's `arguments` `"{}"`.
    pub(crate) fn clear_call_input(&mut self) {
        if self.call_id().is_none() {
            return;
        }
        if let Value::Object(map) = &mut *self.0 {
            if map.contains_key("input") {
                map.insert("input".to_owned(), Value::Object(serde_json::Map::new()));
            }
            if map.contains_key("arguments") {
                map.insert("arguments".to_owned(), Value::String("{}".to_owned()));
            }
        }
    }

    /// A tool call block's `input` (Anthropic's `tool_use` and its kin).
    pub(crate) fn tool_input(&self) -> Option<&Value> {
        matches!(self.kind(), Some("tool_use" | "server_tool_use" | "mcp_tool_use"))
            .then(|| self.0.get("input"))
            .flatten()
    }

    /// A call's arguments as a transcript shows them: a block's `input` as
    /// JSON, an item's `arguments` (or a custom tool's `input`) as written.
    pub(crate) fn shown_arguments(&self) -> String {
        match self.tool_input() {
            Some(input) => input.to_string(),
            None => self
                .get("arguments")
                .or_else(|| self.get("input"))
                .unwrap_or("")
                .to_owned(),
        }
    }
}

/// Every string in `value` but those under the keys of [`NOT_TEXT`].
fn strings_but<'v>(value: &'v Value, out: &mut Vec<&'v str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_but(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                if !NOT_TEXT.contains(&key.as_str()) {
                    strings_but(v, out);
                }
            }
        }
        _ => {}
    }
}
