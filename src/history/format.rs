//! The three request formats: which one a body is in, and the system
//! prompt outside the messages (Anthropic's top-level `system`, the
//! Responses API's `instructions`), read into leading system messages and
//! written back from them.

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

use crate::error::{ConfigError, Error, FieldError, FormatMark, InputError, Result};
use crate::message::{Content, Message, Part, Role};

#[cfg(doc)]
use super::History;

/// The shape of a request body.
///
/// Both formats read into the same [`Message`]s. Anthropic's content blocks
/// are kept as [`Part`]s, byte for byte as JSON values (`cache_control`,
/// thinking signatures, unknown block types), and its top-level `system`
/// becomes leading system messages, one per block, written back into
/// `system` with the summary appended as one more text block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// OpenAI Chat Completions: system, tool and developer messages inside
    /// `messages`, `tool_calls`, `tool_call_id`.
    #[default]
    OpenAi,
    /// Anthropic Messages: a top-level `system`, content blocks, tool calls
    /// as `tool_use` blocks and their results as `tool_result` blocks in
    /// user messages.
    Anthropic,
    /// OpenAI's Responses API: an `input` list of items (messages,
    /// `function_call` and `function_call_output`, `reasoning` ...), each
    /// read into a [`Message`] that keeps it whole
    /// ([`Content::Item`](crate::Content::Item)); `instructions` is the
    /// system prompt. The summary goes into `input` as a system message
    /// item.
    Responses,
}

impl FromStr for Format {
    type Err = Error;

    /// `openai`, `anthropic` or `responses`.
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "openai" => Ok(Format::OpenAi),
            "anthropic" => Ok(Format::Anthropic),
            "responses" => Ok(Format::Responses),
            _ => Err(Error::InvalidConfig(ConfigError::NotAllowed {
                setting: "format",
                value: name.to_owned(),
                why: "the formats are openai, anthropic and responses",
            })),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::OpenAi => "openai",
            Format::Anthropic => "anthropic",
            Format::Responses => "responses",
        })
    }
}

/// How a body wrote its `system` field, to write it back the same way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum System {
    /// No `system` field.
    #[default]
    Absent,
    /// A string.
    Text,
    /// An array of text blocks.
    Blocks,
}

/// Block types only Anthropic's format has (and any `*_tool_result`).
const ANTHROPIC_BLOCKS: [&str; 12] = [
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "server_tool_use",
    "mcp_tool_use",
    "document",
    "image",
    "search_result",
    "container_upload",
    "mid_conv_system",
    "tool_reference",
];

/// Part types only OpenAI's format has.
const OPENAI_PARTS: [&str; 4] = ["image_url", "input_audio", "file", "refusal"];

/// The first mark of Anthropic's format in the message at `index`.
fn anthropic_mark(index: usize, m: &Message) -> Option<FormatMark> {
    let Some(Content::Parts(parts)) = &m.content else {
        return None;
    };
    let kind = parts
        .iter()
        .filter_map(Part::kind)
        .find(|k| ANTHROPIC_BLOCKS.contains(k) || k.ends_with("_tool_result"))?;
    Some(FormatMark::new(Some(index), format!("a `{kind}` block")))
}

/// The first mark of OpenAI's format in the message at `index`. A system or
/// developer message marks it only when `roles` (the Responses API has
/// them too).
fn openai_mark(index: usize, m: &Message, roles: bool) -> Option<FormatMark> {
    let what = match () {
        () if m.item().is_some() => return None,
        () if m.role == Role::Tool || roles && m.role.is_pinned() => format!("the role `{}`", m.role),
        () if !m.tool_calls.is_empty() => "`tool_calls`".to_owned(),
        () if m.tool_call_id.is_some() => "`tool_call_id`".to_owned(),
        () => {
            let Some(Content::Parts(parts)) = &m.content else {
                return None;
            };
            let kind = parts
                .iter()
                .filter_map(Part::kind)
                .find(|k| OPENAI_PARTS.contains(k))?;
            format!("a `{kind}` part")
        }
    };
    Some(FormatMark::new(Some(index), what))
}

/// The first mark of the Responses API's format in the message at `index`:
/// an item.
fn responses_mark(index: usize, m: &Message) -> Option<FormatMark> {
    let kind = m.item()?.kind().unwrap_or("message");
    Some(FormatMark::new(Some(index), format!("a `{kind}` item")))
}

/// Which format a body (or bare array) is in, by its marks: a top-level
/// `system` or an Anthropic block says Anthropic; a top-level `input` or a
/// Responses item says the Responses API; a system, developer or tool
/// message, tool calls or an OpenAI part type say OpenAI. None is OpenAI's
/// (plain user and assistant text reads the same in all three); two is an
/// error naming one mark of each.
pub(super) fn detect(
    body: Option<&Map<String, Value>>,
    messages: &[Message],
) -> Result<Option<(Format, FormatMark)>> {
    let top = |key: &str| {
        body.filter(|b| b.contains_key(key))
            .map(|_| FormatMark::new(None, format!("the top-level `{key}`")))
    };
    let first = |mark: fn(usize, &Message) -> Option<FormatMark>| {
        messages.iter().enumerate().find_map(|(i, m)| mark(i, m))
    };
    let anthropic = top("system").or_else(|| first(anthropic_mark));
    let responses = top("input").or_else(|| first(responses_mark));
    let roles = responses.is_none();
    let openai = messages
        .iter()
        .enumerate()
        .find_map(|(i, m)| openai_mark(i, m, roles));
    let mut marks = [
        (Format::Anthropic, anthropic),
        (Format::Responses, responses),
        (Format::OpenAi, openai),
    ]
    .into_iter()
    .filter_map(|(format, mark)| Some((format, mark?)));
    match (marks.next(), marks.next()) {
        (Some(first), Some(second)) => Err(Error::InvalidInput(InputError::MixedFormats { first, second })),
        (one, _) => Ok(one),
    }
}

/// Checks the blocks that make units in Anthropic's format: every block is
/// an object with a string `type`; a `tool_use` has a string `id` and
/// `name`; a `tool_result` a string `tool_use_id`. Other blocks are kept as
/// they came, unread.
pub(super) fn check_blocks(messages: &[Message]) -> Result<()> {
    for (index, m) in messages.iter().enumerate() {
        let Some(Content::Parts(parts)) = &m.content else {
            continue;
        };
        for (k, part) in parts.iter().enumerate() {
            let block = part.as_json();
            let at = |key: &str| format!("content[{k}]{}{key}", if key.is_empty() { "" } else { "." });
            let wrong = |problem: FieldError| Err(Error::InvalidMessage { index, problem });
            let required: &[&str] = match block.get("type") {
                Some(Value::String(kind)) if kind == "tool_use" => &["id", "name"],
                Some(Value::String(kind)) if kind == "tool_result" => &["tool_use_id"],
                Some(Value::String(_)) => &[],
                Some(other) => return wrong(FieldError::wrong(at("type"), "a string", other)),
                None if block.is_object() => return wrong(FieldError::missing(at("type"), "a string")),
                None => return wrong(FieldError::wrong(at(""), "an object", block)),
            };
            for key in required {
                match block.get(*key) {
                    Some(Value::String(_)) => {}
                    Some(other) => return wrong(FieldError::wrong(at(key), "a string", other)),
                    None => return wrong(FieldError::missing(at(key), "a string")),
                }
            }
        }
    }
    Ok(())
}

/// What a body's `model` suggests, when its structure says nothing: a
/// `claude-` model is Anthropic's, a `gpt-`, `o1`, `o3`, `o4` or `chatgpt-`
/// model OpenAI's. A hint only: an OpenAI-compatible proxy may serve
/// Claude models in OpenAI's format, so [`History::into_format`] may
/// overrule it.
pub(super) fn hint(body: Option<&Map<String, Value>>) -> Option<(Format, FormatMark)> {
    let model = body?.get("model")?.as_str()?;
    let format = if model.starts_with("claude-") {
        Format::Anthropic
    } else if ["gpt-", "o1", "o3", "o4", "chatgpt-"]
        .iter()
        .any(|p| model.starts_with(p))
    {
        Format::OpenAi
    } else {
        return None;
    };
    Some((format, FormatMark::new(None, format!("the model `{model}`"))))
}

/// Takes `system` out of `body` (leaving a `null` to mark its place) as
/// leading system messages: one for a string, one per block for an array.
pub(super) fn lift_system(body: &mut Map<String, Value>) -> Result<(System, Vec<Message>)> {
    let invalid = |field: FieldError| Error::InvalidInput(InputError::Field(field));
    let Some(system) = body.get_mut("system") else {
        return Ok((System::Absent, Vec::new()));
    };
    let lifted = match system.take() {
        Value::String(text) => (System::Text, vec![Message::system(text)]),
        Value::Array(blocks) => {
            let mut messages = Vec::with_capacity(blocks.len());
            for (i, block) in blocks.into_iter().enumerate() {
                match block.get("text") {
                    Some(Value::String(_)) => {}
                    Some(other) => {
                        return Err(invalid(FieldError::wrong(
                            format!("system[{i}].text"),
                            "a string",
                            other,
                        )));
                    }
                    None if block.is_object() => {
                        return Err(invalid(FieldError::missing(
                            format!("system[{i}].text"),
                            "a string",
                        )));
                    }
                    None => {
                        return Err(invalid(FieldError::wrong(
                            format!("system[{i}]"),
                            "a text block",
                            &block,
                        )));
                    }
                }
                messages.push(Message::system("").with_parts(vec![Part::from_json(block)]));
            }
            (System::Blocks, messages)
        }
        Value::Null => (System::Absent, Vec::new()),
        other => {
            return Err(invalid(FieldError::wrong(
                "system",
                "a string or an array of text blocks",
                &other,
            )));
        }
    };
    Ok(lifted)
}

/// Takes the Responses API's `instructions` out of `body` (leaving a `null`
/// to mark its place) as a leading system message.
pub(super) fn lift_instructions(body: &mut Map<String, Value>) -> Result<(System, Vec<Message>)> {
    let Some(instructions) = body.get_mut("instructions") else {
        return Ok((System::Absent, Vec::new()));
    };
    match instructions.take() {
        Value::String(text) => Ok((System::Text, vec![Message::system(text)])),
        Value::Null => Ok((System::Absent, Vec::new())),
        other => Err(Error::InvalidInput(InputError::Field(FieldError::wrong(
            "instructions",
            "a string",
            &other,
        )))),
    }
}

/// The `system` field for the leading system messages of `messages` (none:
/// `None`), in the body's form where it can be: a string stays a string
/// while it is one plain text; otherwise text blocks, each message's own
/// block as it came, a new text (the summary) as a plain text block.
pub(super) fn system_value(form: System, system: &[Message]) -> Option<Value> {
    if system.is_empty() {
        return None;
    }
    if let ([only], System::Text) = (system, form) {
        if let Some(Content::Text(text)) = &only.content {
            return Some(Value::String(text.clone()));
        }
    }
    let blocks = system.iter().flat_map(|m| match &m.content {
        Some(Content::Parts(parts)) => parts.iter().map(|p| p.as_json().clone()).collect(),
        _ => vec![Part::text(m.text()).as_json().clone()],
    });
    Some(Value::Array(blocks.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_read_and_print() {
        for format in [Format::OpenAi, Format::Anthropic] {
            assert_eq!(format.to_string().parse::<Format>().unwrap(), format);
        }
        assert!("claude".parse::<Format>().is_err());
    }
}
