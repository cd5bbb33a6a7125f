//! Converting a history between OpenAI's and Anthropic's formats where
//! nothing is lost: text, images, tool calls and their results. Anything
//! else is an error naming the message and the block.

use serde_json::{Value, json};

use super::{Format, History, System};
use crate::error::{ConfigError, ConversionError, Error, Result};
use crate::message::{Content, Message, Part, Role, ToolCall};

impl History {
    /// The same history in `to`'s format: text, images (base64 or by URL),
    /// tool calls and tool results are converted; a body's other fields are
    /// kept as they are (tool definitions too: their shapes differ, convert
    /// them yourself). An absent content and `"content": null` convert
    /// alike; in OpenAI's format a tool call message without text comes back
    /// with `"content": null`. A bare array with a system prompt becomes a body
    /// (`{"system": ..., "messages": [...]}`) in Anthropic's format, the only
    /// place it has for one.
    ///
    /// # Errors
    ///
    /// [`Error::Conversion`] naming the message and the field or block
    /// that has no lossless form in `to`'s format: thinking blocks,
    /// documents, `cache_control`, a tool result with an image or marked
    /// `is_error`, a message `name`, a system message after the
    /// conversation has started (for Anthropic), tool call arguments that
    /// are not a JSON object, and any field either format does not share.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Format, History};
    ///
    /// let openai = History::from_json_str(r#"[
    ///     {"role": "system", "content": "Be brief."},
    ///     {"role": "user", "content": "Weather in Seoul?"},
    ///     {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Seoul\"}"}}]},
    ///     {"role": "tool", "tool_call_id": "c1", "content": "18C, clear"}
    /// ]"#)?;
    /// let claude = openai.clone().convert(Format::Anthropic)?;
    /// assert_eq!(claude.messages[2].call_ids().collect::<Vec<_>>(), ["c1"]);
    /// assert_eq!(claude.messages[3].answered_ids().collect::<Vec<_>>(), ["c1"]);
    /// assert_eq!(claude.convert(Format::OpenAi)?.messages, openai.messages);
    /// # Ok::<(), chatfold::Error>(())
    /// ```
    pub fn convert(self, to: Format) -> Result<History> {
        if self.format == to {
            return Ok(self);
        }
        let messages = match to {
            Format::Anthropic => to_anthropic(&self.messages)?,
            Format::OpenAi => to_openai(&self.messages)?,
            Format::Responses => {
                return Err(Error::InvalidConfig(ConfigError::NotAllowed {
                    setting: "format",
                    value: to.to_string(),
                    why: "histories convert between openai and anthropic",
                }));
            }
        };
        let mut body = self.body;
        if body.is_none()
            && to == Format::Anthropic
            && messages.first().is_some_and(|m| m.role == Role::System)
        {
            // A bare array has no place for Anthropic's system prompt: a body does.
            let mut map = serde_json::Map::new();
            map.insert("system".to_owned(), Value::Null);
            map.insert("messages".to_owned(), Value::Null);
            body = Some(map);
        }
        if let Some(body) = &mut body {
            match to {
                // Anthropic's `system` is written back from the leading system messages.
                Format::Anthropic if !body.contains_key("system") => {
                    body.insert("system".to_owned(), Value::Null);
                }
                Format::OpenAi => {
                    body.shift_remove("system");
                }
                _ => {}
            }
        }
        Ok(History {
            messages,
            body,
            format: to,
            mark: None,
            known: true,
            system: match to {
                Format::Anthropic => System::Blocks,
                Format::OpenAi | Format::Responses => System::Absent,
            },
            text_input: false,
        })
    }
}

fn unconvertible(message: usize, field: impl Into<String>, what: impl Into<String>, to: Format) -> Error {
    Error::Conversion(ConversionError::new(message, field.into(), what.into(), to))
}

/// Fields beyond the ones both formats share make a message unconvertible.
fn check_shared(index: usize, m: &Message, to: Format) -> Result<()> {
    if let Some(item) = m.item() {
        let kind = item.kind().unwrap_or("message");
        return Err(unconvertible(
            index,
            "type",
            format!("a Responses `{kind}` item"),
            to,
        ));
    }
    if m.name.is_some() {
        return Err(unconvertible(index, "name", "a message name", to));
    }
    if m.id.is_some() {
        return Err(unconvertible(index, "id", "a message id", to));
    }
    if m.tool_call_id.is_some() && m.role != Role::Tool {
        return Err(unconvertible(
            index,
            "tool_call_id",
            "a call id on a message that is not a tool result",
            to,
        ));
    }
    // An explicit `"content": null` or `"tool_calls": []` is kept there.
    match m
        .extra()
        .keys()
        .find(|k| !matches!(k.as_str(), "content" | "tool_calls"))
    {
        Some(key) => Err(unconvertible(
            index,
            key.clone(),
            "a field the other format lacks",
            to,
        )),
        None => Ok(()),
    }
}

/// A block's keys must be these, and no others.
fn only_keys(index: usize, k: usize, block: &Value, keys: &[&str], to: Format) -> Result<()> {
    let extra = block
        .as_object()
        .and_then(|map| map.keys().find(|key| !keys.contains(&key.as_str())));
    match extra {
        Some(key) => Err(unconvertible(
            index,
            format!("content[{k}].{key}"),
            "a field the other format lacks",
            to,
        )),
        None => Ok(()),
    }
}

fn to_anthropic(messages: &[Message]) -> Result<Vec<Message>> {
    const TO: Format = Format::Anthropic;
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    let mut started = false;
    for (index, m) in messages.iter().enumerate() {
        check_shared(index, m, TO)?;
        match m.role {
            Role::System if !started && matches!(m.content, Some(Content::Text(_))) => {
                out.push(Message::system(m.text().into_owned()));
            }
            Role::System if !started => {
                return Err(unconvertible(
                    index,
                    "content",
                    "a system message that is not text",
                    TO,
                ));
            }
            Role::System => {
                return Err(unconvertible(
                    index,
                    "role",
                    "a system message after the conversation started",
                    TO,
                ));
            }
            Role::Developer => return Err(unconvertible(index, "role", "the role `developer`", TO)),
            Role::Tool => {
                started = true;
                let block = anthropic_tool_result(index, m)?;
                // Results of one turn share one user message, as Anthropic wants.
                match out.last_mut() {
                    Some(last) if last.role == Role::User && last.answered_ids().next().is_some() => {
                        if let Some(Content::Parts(parts)) = &mut last.content {
                            parts.push(block);
                        }
                    }
                    _ => out.push(Message::user("").with_parts(vec![block])),
                }
            }
            Role::User | Role::Assistant => {
                started = true;
                let mut blocks = match &m.content {
                    None if m.tool_calls.is_empty() => {
                        return Err(unconvertible(index, "content", "a message without content", TO));
                    }
                    None => Vec::new(),
                    Some(Content::Text(text)) if m.tool_calls.is_empty() => {
                        out.push(Message::new(m.role.clone(), text.clone()));
                        continue;
                    }
                    Some(Content::Text(text)) if text.is_empty() => Vec::new(),
                    Some(Content::Text(text)) => vec![Part::text(text.clone())],
                    Some(Content::Parts(parts)) => parts
                        .iter()
                        .enumerate()
                        .map(|(k, p)| openai_part(index, k, p).map(Part::from_json))
                        .collect::<Result<_>>()?,
                    Some(Content::Item(_)) => {
                        return Err(unconvertible(index, "type", "a Responses item", TO));
                    }
                };
                for (k, call) in m.tool_calls.iter().enumerate() {
                    blocks.push(anthropic_tool_use(index, k, call)?);
                }
                out.push(Message::new(m.role.clone(), "").with_parts(blocks));
            }
            Role::Other(_) => return Err(unconvertible(index, "role", format!("the role `{}`", m.role), TO)),
        }
    }
    Ok(out)
}

/// Tool message `index` (`m`) as an Anthropic `tool_result` block.
fn anthropic_tool_result(index: usize, m: &Message) -> Result<Part> {
    const TO: Format = Format::Anthropic;
    let id = (m.tool_call_id.clone())
        .ok_or_else(|| unconvertible(index, "tool_call_id", "a tool result without its call id", TO))?;
    let content = match &m.content {
        Some(Content::Text(text)) => Value::String(text.clone()),
        Some(Content::Parts(parts)) => Value::Array(
            parts
                .iter()
                .enumerate()
                .map(|(k, p)| text_block(index, k, p, TO))
                .collect::<Result<_>>()?,
        ),
        None => Value::String(String::new()),
        Some(Content::Item(_)) => return Err(unconvertible(index, "type", "a Responses item", TO)),
    };
    Ok(Part::from_json(
        json!({"type": "tool_result", "tool_use_id": id, "content": content}),
    ))
}

/// Tool call `k` of message `index` as an Anthropic `tool_use` block: its
/// arguments a JSON object, and no field Anthropic's block lacks.
fn anthropic_tool_use(index: usize, k: usize, call: &ToolCall) -> Result<Part> {
    const TO: Format = Format::Anthropic;
    let input: Value = serde_json::from_str(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .ok_or_else(|| {
            unconvertible(
                index,
                format!("tool_calls[{k}].function.arguments"),
                "arguments that are not a JSON object",
                TO,
            )
        })?;
    if call.kind != "function" || !call.extra.is_empty() || !call.function_extra.is_empty() {
        return Err(unconvertible(
            index,
            format!("tool_calls[{k}]"),
            "a tool call with fields the other format lacks",
            TO,
        ));
    }
    Ok(Part::from_json(
        json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}),
    ))
}

/// An OpenAI content part as an Anthropic block: text, or an image.
fn openai_part(index: usize, k: usize, part: &Part) -> Result<Value> {
    const TO: Format = Format::Anthropic;
    let block = part.as_json();
    match part.kind() {
        Some("text") => {
            only_keys(index, k, block, &["type", "text"], TO)?;
            Ok(block.clone())
        }
        Some("image_url") => {
            only_keys(index, k, block, &["type", "image_url"], TO)?;
            let url = block["image_url"]["url"].as_str().unwrap_or_default();
            if block["image_url"].as_object().is_some_and(|m| m.len() > 1) {
                return Err(unconvertible(
                    index,
                    format!("content[{k}].image_url"),
                    "image options the other format lacks",
                    TO,
                ));
            }
            let source = match url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
            {
                Some((media_type, data)) => json!({"type": "base64", "media_type": media_type, "data": data}),
                None => json!({"type": "url", "url": url}),
            };
            Ok(json!({"type": "image", "source": source}))
        }
        other => Err(unconvertible(
            index,
            format!("content[{k}]"),
            format!("a `{}` part", other.unwrap_or("untyped")),
            TO,
        )),
    }
}

/// A text part (the only kind a tool result converts with).
fn text_block(index: usize, k: usize, part: &Part, to: Format) -> Result<Value> {
    match part.kind() {
        Some("text") => {
            only_keys(index, k, part.as_json(), &["type", "text"], to)?;
            Ok(part.as_json().clone())
        }
        other => Err(unconvertible(
            index,
            format!("content[{k}]"),
            format!("a `{}` block in a tool result", other.unwrap_or("untyped")),
            to,
        )),
    }
}

/// Block `k` of message `index`, an Anthropic image, as an OpenAI
/// `image_url` part (a base64 source as a data URL).
fn openai_image(index: usize, k: usize, block: &Value) -> Result<Part> {
    const TO: Format = Format::OpenAi;
    only_keys(index, k, block, &["type", "source"], TO)?;
    let source = &block["source"];
    let url = match source["type"].as_str() {
        Some("base64") => format!(
            "data:{};base64,{}",
            source["media_type"].as_str().unwrap_or_default(),
            source["data"].as_str().unwrap_or_default()
        ),
        Some("url") => source["url"].as_str().unwrap_or_default().to_owned(),
        _ => {
            return Err(unconvertible(
                index,
                format!("content[{k}].source"),
                "an image source the other format lacks",
                TO,
            ));
        }
    };
    Ok(Part::from_json(
        json!({"type": "image_url", "image_url": {"url": url}}),
    ))
}

/// Block `k` of message `index`, an Anthropic `tool_result`, as an OpenAI
/// tool message.
fn openai_tool_result(index: usize, k: usize, block: &Value) -> Result<Message> {
    const TO: Format = Format::OpenAi;
    only_keys(index, k, block, &["type", "tool_use_id", "content"], TO)?;
    let mut result = match &block["content"] {
        Value::String(text) => Message::tool(text.clone(), ""),
        Value::Array(items) => {
            let parts = items
                .iter()
                .enumerate()
                .map(|(j, item)| {
                    text_block(index, j, &Part::from_json(item.clone()), TO).map(Part::from_json)
                })
                .collect::<Result<Vec<_>>>()?;
            Message::tool("", "").with_parts(parts)
        }
        Value::Null => Message::tool("", ""),
        _ => {
            return Err(unconvertible(
                index,
                format!("content[{k}].content"),
                "a tool result that is neither text nor blocks",
                TO,
            ));
        }
    };
    result.tool_call_id = block["tool_use_id"].as_str().map(str::to_owned);
    Ok(result)
}

fn to_openai(messages: &[Message]) -> Result<Vec<Message>> {
    const TO: Format = Format::OpenAi;
    let mut out = Vec::with_capacity(messages.len());
    for (index, m) in messages.iter().enumerate() {
        check_shared(index, m, TO)?;
        let parts: &[Part] = match &m.content {
            Some(Content::Parts(parts)) => parts,
            _ => {
                out.push(m.clone());
                continue;
            }
        };
        if m.role == Role::System {
            // A lifted system block: its text, if it is plain.
            let [part] = parts else {
                return Err(unconvertible(
                    index,
                    "content",
                    "a system message of several blocks",
                    TO,
                ));
            };
            text_block(index, 0, part, TO)?;
            out.push(Message::system(part.as_text().unwrap_or_default()));
            continue;
        }
        let (mut content, mut calls) = (Vec::new(), Vec::new());
        for (k, part) in parts.iter().enumerate() {
            let block = part.as_json();
            match part.kind() {
                Some("text") => {
                    only_keys(index, k, block, &["type", "text"], TO)?;
                    content.push(part.clone());
                }
                Some("image") => content.push(openai_image(index, k, block)?),
                Some("tool_use") if m.role == Role::Assistant => {
                    only_keys(index, k, block, &["type", "id", "name", "input"], TO)?;
                    let get = |key: &str| block[key].as_str().unwrap_or_default().to_owned();
                    calls.push(ToolCall::new(get("id"), get("name"), block["input"].to_string()));
                }
                Some("tool_result") => out.push(openai_tool_result(index, k, block)?),
                other => {
                    return Err(unconvertible(
                        index,
                        format!("content[{k}]"),
                        format!("a `{}` block", other.unwrap_or("untyped")),
                        TO,
                    ));
                }
            }
        }
        if content.is_empty() && calls.is_empty() {
            continue;
        }
        let mut converted = Message::new(m.role.clone(), "");
        converted.content = match content.as_slice() {
            [] => None,
            [only] if only.kind() == Some("text") => {
                Some(Content::Text(only.as_text().unwrap_or_default().to_owned()))
            }
            _ => Some(Content::Parts(content)),
        };
        if converted.content.is_none() {
            // OpenAI's tool call messages say `"content": null`.
            converted.extra_mut().insert("content".to_owned(), Value::Null);
        }
        converted.tool_calls = calls;
        out.push(converted);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_has_no_lossless_form_is_named() {
        let claude = History::from_json_str(include_str!("../../examples/anthropic_request.json")).unwrap();
        let err = claude.convert(Format::OpenAi).unwrap_err();
        let Error::Conversion(e) = &err else {
            panic!("{err}")
        };
        // The first system block carries cache_control.
        assert_eq!((e.message(), e.field()), (0, "content[0].cache_control"), "{err}");

        let body = json!({"system": "s", "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "x"}, {"type": "text", "text": "a"}]}
        ]});
        let err = History::from_json_value(body)
            .unwrap()
            .convert(Format::OpenAi)
            .unwrap_err();
        let Error::Conversion(e) = &err else {
            panic!("{err}")
        };
        assert_eq!((e.message(), e.field()), (2, "content[0]"), "{err}");

        let openai = json!([{"role": "user", "content": "q"}, {"role": "system", "content": "late"}]);
        let err = History::from_json_value(openai)
            .unwrap()
            .convert(Format::Anthropic)
            .unwrap_err();
        assert!(matches!(&err, Error::Conversion(e) if e.message() == 1), "{err}");
    }

    #[test]
    fn text_images_calls_and_results_go_both_ways() {
        let openai = json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}}, {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}}]},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "two"},
            {"role": "assistant", "content": "Done."}
        ]});
        let history = History::from_json_value(openai.clone()).unwrap();
        let claude = history.clone().convert(Format::Anthropic).unwrap();
        let body = claude.to_json();
        assert_eq!(body["system"], json!([{"type": "text", "text": "Be brief."}]));
        assert_eq!(
            body["messages"][0]["content"][1]["source"],
            json!({"type": "base64", "media_type": "image/png", "data": "iVBOR"})
        );
        assert_eq!(
            body["messages"][1]["content"][1],
            json!({"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}})
        );
        // Both results in one user message.
        assert_eq!(body["messages"][2]["content"].as_array().unwrap().len(), 2);
        // Read back as a Claude body, and converted back: the same messages.
        let again = History::from_json_value(body).unwrap();
        assert_eq!(again.format(), Format::Anthropic);
        let back = again.convert(Format::OpenAi).unwrap();
        assert_eq!(back.messages, history.messages);
        assert_eq!(back.to_json(), openai);
    }
}
