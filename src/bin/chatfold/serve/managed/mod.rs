//! Anthropic's context management on `/v1/messages`, answered for any
//! upstream: `context_management.edits` read and taken out of a request,
//! its clearing edits (`clear_thinking_20251015`, `clear_tool_uses_20250919`)
//! applied by the library's clearing, its compaction (`compact_20260112`)
//! a fold; chatfold's `compaction` blocks (sealed: authenticated with the
//! server's secret and bound to the tenant) put back as what they stand for;
//! and the answer given its compaction block and `context_management`
//! report, in a JSON body or the events of a stream.
//!
//! A compaction block stands for everything before it, as Anthropic's does:
//! its sealed payload holds the messages chatfold sent upstream for the
//! request that folded (the summary among them, or in the system blocks it
//! adds), so that the next request goes upstream as those messages, then
//! whatever follows the block.

use chatfold::{ClearInputs, ClearThinking, ClearToolResults, History, NamedCounter, TokenCounter};
use hyper::StatusCode;
use serde_json::{Map, Value, json};

use super::compaction::Seal;
use super::errors::ApiError;
use super::events::{Rewrite, write_event};

/// The beta values of the features chatfold answers, taken out of
/// `anthropic-beta` when it answers them.
pub(crate) const BETAS: [&str; 2] = ["compact-2026-01-12", "context-management-2025-06-27"];

/// The compaction threshold when `compact_20260112` names none (Anthropic's default).
const DEFAULT_TRIGGER: usize = 150_000;
/// The clearing threshold when `clear_tool_uses_20250919` names none.
const DEFAULT_CLEAR_TRIGGER: usize = 100_000;
/// Tool uses kept when `clear_tool_uses_20250919` names no `keep`.
const DEFAULT_KEEP: usize = 3;

/// What a request may hold that [`prepare`] acts on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// Whether chatfold answers `context_management` itself.
    pub(crate) answer: bool,
    /// Whether the upstream is Anthropic's own API, which reads its own
    /// compaction blocks.
    pub(crate) upstream_is_anthropic: bool,
}

/// A Messages request made ready for chatfold and the upstream.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    /// The body to use instead of the client's, when it changed.
    pub(crate) body: Option<Vec<u8>>,
    /// The compaction threshold of a `compact_20260112` chatfold answers.
    pub(crate) threshold: Option<usize>,
    /// Whether a compaction answers alone (`pause_after_compaction`): the
    /// compaction block, with the stop reason `compaction`.
    pub(crate) pause: bool,
    /// The clearing edits applied, as Anthropic reports them.
    pub(crate) applied: Vec<Value>,
    /// Whether chatfold answered the field (its beta values then leave the header).
    pub(crate) answered: bool,
    /// The system blocks of the request as the client sent them (after a
    /// block of chatfold's was put back): what a compaction block's
    /// payload is measured against.
    pub(crate) system_blocks: usize,
}

/// The edits a request asked for that chatfold answers.
#[derive(Debug, Default)]
struct Asked {
    compact: Option<usize>,
    pause: bool,
    tools: Option<ClearTools>,
    thinking: Option<usize>,
}

/// `clear_tool_uses_20250919`'s parameters.
#[derive(Debug)]
struct ClearTools {
    /// Input tokens, or tool uses, past which clearing starts.
    trigger: Trigger,
    keep: usize,
    clear_at_least: Option<usize>,
    exclude: Vec<String>,
    /// Whether the cleared uses' inputs are cleared too (all, or these tools').
    inputs: ClearInputs,
}

#[derive(Debug)]
enum Trigger {
    InputTokens(usize),
    ToolUses(usize),
}

/// A 400 for a `context_management` edit chatfold cannot read.
fn bad(what: &str) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, format!("context_management: {what}"))
}

/// `{"type": kind, "value": N}` read, when its type is `kind`.
fn sized(value: Option<&Value>, kinds: &[&str], field: &str) -> Result<Option<(String, usize)>, ApiError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let kind = value.get("type").and_then(Value::as_str).unwrap_or_default();
    let n = value.get("value").and_then(Value::as_u64);
    match (kinds.contains(&kind), n) {
        (true, Some(n)) => Ok(Some((kind.to_owned(), usize::try_from(n).unwrap_or(usize::MAX)))),
        _ => Err(bad(&format!(
            "{field} must be {{\"type\": {}, \"value\": N}}",
            kinds.join(" or ")
        ))),
    }
}

/// The names in a list of strings.
fn names(value: Option<&Value>) -> Vec<String> {
    (value.and_then(Value::as_array).into_iter().flatten())
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// Takes the edits chatfold answers out of `context_management` (the field
/// too when nothing is left in it).
fn take_edits(body: &mut Map<String, Value>) -> Result<Option<Asked>, ApiError> {
    let Some(Value::Object(field)) = body.get_mut("context_management") else {
        return Ok(None);
    };
    let Some(Value::Array(edits)) = field.get_mut("edits") else {
        return Ok(None);
    };
    let mut asked = Asked::default();
    let mut left = Vec::new();
    for edit in std::mem::take(edits) {
        match edit.get("type").and_then(Value::as_str) {
            Some("compact_20260112") => {
                let trigger = sized(edit.get("trigger"), &["input_tokens"], "trigger")?;
                asked.compact = Some(trigger.map_or(DEFAULT_TRIGGER, |(_, n)| n));
                asked.pause = edit.get("pause_after_compaction").and_then(Value::as_bool) == Some(true);
            }
            Some("clear_thinking_20251015") => {
                asked.thinking = Some(match edit.get("keep") {
                    None | Some(Value::Null) => 1,
                    Some(Value::String(all)) if all == "all" => usize::MAX,
                    Some(keep) if keep.get("type").and_then(Value::as_str) == Some("all") => usize::MAX,
                    keep => match sized(keep, &["thinking_turns"], "keep")? {
                        Some((_, n)) if n > 0 => n,
                        _ => return Err(bad("keep must keep at least one thinking turn")),
                    },
                });
            }
            Some("clear_tool_uses_20250919") => {
                let trigger = match sized(edit.get("trigger"), &["input_tokens", "tool_uses"], "trigger")? {
                    Some((kind, n)) if kind == "tool_uses" => Trigger::ToolUses(n),
                    Some((_, n)) => Trigger::InputTokens(n),
                    None => Trigger::InputTokens(DEFAULT_CLEAR_TRIGGER),
                };
                let keep = sized(edit.get("keep"), &["tool_uses"], "keep")?.map_or(DEFAULT_KEEP, |(_, n)| n);
                let at_least = sized(edit.get("clear_at_least"), &["input_tokens"], "clear_at_least")?;
                let inputs = match edit.get("clear_tool_inputs") {
                    Some(Value::Bool(true)) => ClearInputs::All,
                    Some(Value::Array(_)) => ClearInputs::Of(names(edit.get("clear_tool_inputs"))),
                    _ => ClearInputs::None,
                };
                asked.tools = Some(ClearTools {
                    trigger,
                    keep,
                    clear_at_least: at_least.map(|(_, n)| n),
                    exclude: names(edit.get("exclude_tools")),
                    inputs,
                });
            }
            _ => left.push(edit),
        }
    }
    if left.is_empty() {
        body.remove("context_management");
    } else if let Some(Value::Object(field)) = body.get_mut("context_management") {
        field.insert("edits".to_owned(), Value::Array(left));
    }
    Ok(Some(asked))
}

/// Readies a Messages body: chatfold's newest compaction block put back as
/// what it stands for (everything before it dropped), another server's
/// refused when the upstream cannot read it, and, when chatfold answers
/// them, the edits of `context_management` taken out and the clearing
/// ones applied (`counter` measures their triggers).
pub(crate) fn prepare(
    bytes: &[u8],
    seal: &Seal,
    tenant: &str,
    rules: Rules,
    counter: &NamedCounter,
) -> Result<Prepared, ApiError> {
    let mentions = |word: &[u8]| memchr::memmem::find(bytes, word).is_some();
    if !mentions(b"compaction") && !mentions(b"context_management") {
        return Ok(Prepared::default());
    }
    // A body chatfold cannot read is the compaction step's to refuse.
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(bytes) else {
        return Ok(Prepared::default());
    };
    let mut changed = expand(&mut body, seal, tenant, rules.upstream_is_anthropic)?;
    let mut prepared = Prepared {
        system_blocks: system_blocks(&body).len(),
        ..Prepared::default()
    };
    if rules.answer {
        if let Some(asked) = take_edits(&mut body)? {
            prepared.answered = true;
            prepared.threshold = asked.compact;
            prepared.pause = asked.pause;
            prepared.applied = clear(&mut body, &asked, counter)?;
            changed = true;
        }
    }
    prepared.body = changed.then(|| Value::Object(body).to_string().into_bytes());
    Ok(prepared)
}

/// The system prompt's blocks (a string is one text block).
fn system_blocks(body: &Map<String, Value>) -> Vec<Value> {
    match body.get("system") {
        Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
        Some(Value::Array(blocks)) => blocks.clone(),
        _ => Vec::new(),
    }
}

/// Applies the clearing edits `asked` names to `body`'s messages, thinking
/// first (as Anthropic orders them): what each cleared, as Anthropic
/// reports it.
fn clear(
    body: &mut Map<String, Value>,
    asked: &Asked,
    counter: &NamedCounter,
) -> Result<Vec<Value>, ApiError> {
    let mut applied = Vec::new();
    if asked.thinking.is_none() && asked.tools.is_none() {
        return Ok(applied);
    }
    let mut history = History::from_json_value(Value::Object(body.clone()))
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e.to_string()))?;
    let tokens = |messages: &[chatfold::Message]| counter.count_messages(messages);
    let mut changed = false;
    if let Some(keep) = asked.thinking {
        let before = tokens(&history.messages);
        let (turns, cleared) = match ClearThinking::new(keep).clear(&history.messages) {
            Some((messages, turns)) => {
                history.messages = messages;
                changed = true;
                (turns, before.saturating_sub(tokens(&history.messages)))
            }
            None => (0, 0),
        };
        applied.push(json!({"type": "clear_thinking_20251015", "cleared_thinking_turns": turns, "cleared_input_tokens": cleared}));
    }
    if let Some(tools) = &asked.tools {
        let before = tokens(&history.messages);
        let uses: usize = history.messages.iter().map(|m| m.call_ids().count()).sum();
        let over = match tools.trigger {
            Trigger::InputTokens(n) => before > n,
            Trigger::ToolUses(n) => uses > n,
        };
        let clearing = tools.exclude.iter().fold(
            (ClearToolResults::new().keep_recent(tools.keep).min_tokens(0))
                .clear_inputs(tools.inputs.clone()),
            |c, name| c.exclude(name.clone()),
        );
        let mut report = (0, 0);
        if let Some((messages, indices)) = over.then(|| clearing.clear(&history.messages, counter)).flatten()
        {
            let cleared = before.saturating_sub(tokens(&messages));
            if tools.clear_at_least.is_none_or(|least| cleared >= least) {
                let results: usize = indices.iter().map(|&i| results_in(&messages[i])).sum();
                history.messages = messages;
                changed = true;
                report = (results, cleared);
            }
        }
        applied.push(json!({"type": "clear_tool_uses_20250919", "cleared_tool_uses": report.0, "cleared_input_tokens": report.1}));
    }
    if changed {
        if let Value::Object(written) = history.to_json() {
            *body = written;
        }
    }
    Ok(applied)
}

/// How many tool results `message` holds.
fn results_in(message: &chatfold::Message) -> usize {
    message.answered_ids().count().max(1)
}

/// Where each compaction block is: its message and its place in it.
fn compaction_blocks(messages: &[Value]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        let blocks = message
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten();
        for (b, block) in blocks.enumerate() {
            if block.get("type").and_then(Value::as_str) == Some("compaction") {
                found.push((m, b));
            }
        }
    }
    found
}

/// Puts chatfold's newest compaction block back as the messages (and
/// system blocks) it stands for, dropping everything before it; a failed
/// compaction's block (no content) dropped; another server's block refused
/// unless the upstream is Anthropic's. Whether `body` changed.
fn expand(
    body: &mut Map<String, Value>,
    seal: &Seal,
    tenant: &str,
    anthropic: bool,
) -> Result<bool, ApiError> {
    let Some(Value::Array(messages)) = body.get("messages") else {
        return Ok(false);
    };
    let blocks = compaction_blocks(messages);
    let Some(&(m, b)) = blocks.last() else {
        return Ok(false);
    };
    let block = &messages[m]["content"][b];
    let sealed = block.get("encrypted_content").and_then(Value::as_str);
    let opened = sealed.and_then(|s| seal.open_block(tenant, s));
    let Some(opened) = opened else {
        if anthropic {
            return Ok(false);
        }
        if block.get("content").is_some_and(|c| !c.is_null()) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "the messages hold a compaction block that chatfold did not make (Anthropic's): only \
                 Anthropic can read it, and this request goes to another upstream; send the messages it \
                 replaced, or compact through chatfold",
            ));
        }
        // A failed compaction's block is a no-op: dropped.
        let Some(Value::Array(messages)) = body.get_mut("messages") else {
            return Ok(false);
        };
        drop_block(messages, m, b);
        return Ok(true);
    };
    let payload = opened?;
    if block.get("content").and_then(Value::as_str) != payload.get("summary").and_then(Value::as_str) {
        return Err(Seal::refused());
    }
    let cache = block.get("cache_control").cloned();
    let Some(Value::Array(messages)) = body.remove("messages") else {
        return Ok(false);
    };
    let mut out: Vec<Value> = payload
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let (Some(cache), Some(last)) = (cache, out.last_mut()) {
        mark_cache(last, cache);
    }
    let mut messages = messages.into_iter().skip(m);
    if let Some(mut opened_in) = messages.next() {
        // The blocks after the compaction block, in its message.
        if let Some(Value::Array(blocks)) = opened_in.get_mut("content") {
            let rest: Vec<Value> = blocks.drain(b + 1..).collect();
            if !rest.is_empty() {
                opened_in["content"] = Value::Array(rest);
                out.push(opened_in);
            }
        }
    }
    out.extend(messages);
    body.insert("messages".to_owned(), Value::Array(out));
    let added = payload
        .get("system")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !added.is_empty() {
        let mut system = system_blocks(body);
        system.extend(added);
        body.insert("system".to_owned(), Value::Array(system));
    }
    Ok(true)
}

/// `messages` without block `b` of message `m` (the message too when it
/// held nothing else).
fn drop_block(messages: &mut Vec<Value>, m: usize, b: usize) {
    if let Some(Value::Array(blocks)) = messages[m].get_mut("content") {
        blocks.remove(b);
        if blocks.is_empty() {
            messages.remove(m);
        }
    }
}

/// `cache` (a `cache_control`) on the last block of `message`.
fn mark_cache(message: &mut Value, cache: Value) {
    if let Some(Value::String(text)) = message.get("content") {
        message["content"] = json!([{"type": "text", "text": text}]);
    }
    if let Some(last) = message
        .get_mut("content")
        .and_then(Value::as_array_mut)
        .and_then(|b| b.last_mut())
    {
        last["cache_control"] = cache;
    }
}

/// chatfold's compaction block for `tenant`, standing for the body `sent`
/// upstream: its messages, and the system blocks after the client's first
/// `client_blocks` (the summary, when it went there). `prefix` begins the
/// summary's text.
pub(crate) fn block(
    seal: &Seal,
    tenant: &str,
    sent: &[u8],
    client_blocks: usize,
    prefix: &str,
) -> Option<Value> {
    let body: Map<String, Value> = serde_json::from_slice(sent).ok()?;
    let system: Vec<Value> = system_blocks(&body).into_iter().skip(client_blocks).collect();
    let messages = body.get("messages")?.as_array()?.clone();
    let texts = (system.iter())
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .chain(messages.iter().flat_map(texts_of));
    let summary = texts.into_iter().find(|t| t.starts_with(prefix))?.to_owned();
    let payload = json!({"summary": summary, "system": system, "messages": messages});
    Some(json!({
        "type": "compaction",
        "content": summary,
        "encrypted_content": seal.seal_block(tenant, &payload),
    }))
}

/// The texts of a message: its string content, or its text blocks'.
fn texts_of(message: &Value) -> Vec<&str> {
    match message.get("content") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// A Messages answer's JSON with chatfold's compaction `block` first in its
/// content and the `applied` edits in its `context_management`; `None`
/// when the body is not one.
pub(crate) fn decorated(body: &[u8], block: Option<&Value>, applied: &[Value]) -> Option<Vec<u8>> {
    let mut answer: Value = serde_json::from_slice(body).ok()?;
    let fields = answer.as_object_mut()?;
    if let Some(block) = block {
        fields
            .get_mut("content")?
            .as_array_mut()?
            .insert(0, block.clone());
    }
    if !applied.is_empty() {
        fields.insert("context_management".to_owned(), json!({"applied_edits": applied}));
    }
    Some(answer.to_string().into_bytes())
}

/// The answer to a request that compacted with `pause_after_compaction`,
/// made by chatfold (the upstream is not called): the compaction `block`
/// alone, stopped for `compaction`; as a JSON body, or as the events of a
/// stream when the request asked for one.
pub(crate) fn paused(block: &Value, model: &str, streamed: bool) -> Vec<u8> {
    let message = json!({"id": "msg_chatfold_compaction", "type": "message", "role": "assistant", "model": model,
        "content": [block], "stop_reason": "compaction", "stop_sequence": null,
        "usage": {"input_tokens": 0, "output_tokens": 0}});
    if !streamed {
        return message.to_string().into_bytes();
    }
    let mut out = Vec::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    write_event(
        &mut out,
        Some("message_start"),
        &json!({"type": "message_start", "message": start}),
    );
    let mut decorated = Decorated::new(Some(block.clone()), Vec::new());
    decorated.announce(&mut out);
    let delta = json!({"type": "message_delta", "delta": {"stop_reason": "compaction", "stop_sequence": null},
        "usage": {"output_tokens": 0}});
    write_event(&mut out, Some("message_delta"), &delta);
    write_event(&mut out, Some("message_stop"), &json!({"type": "message_stop"}));
    out
}

/// A streamed Messages answer with chatfold's compaction block as its
/// first content block (announced right after `message_start`, the other
/// blocks' `index` one further on) and the applied edits on its
/// `message_delta`.
#[derive(Debug)]
pub(crate) struct Decorated {
    block: Option<Value>,
    applied: Vec<Value>,
    announced: bool,
}

impl Decorated {
    /// A stream's events with `block` and `applied` added.
    pub(crate) fn new(block: Option<Value>, applied: Vec<Value>) -> Self {
        Decorated {
            block,
            applied,
            announced: false,
        }
    }

    /// The block's `content_block_start`, its one `compaction_delta` and
    /// its `content_block_stop`, at index 0.
    fn announce(&mut self, out: &mut Vec<u8>) {
        self.announced = true;
        let Some(block) = &self.block else { return };
        let start = json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "compaction", "content": null, "encrypted_content": null}});
        let delta = json!({"type": "content_block_delta", "index": 0, "delta": {
            "type": "compaction_delta", "content": block["content"], "encrypted_content": block["encrypted_content"]}});
        let stop = json!({"type": "content_block_stop", "index": 0});
        for (name, event) in [
            ("content_block_start", start),
            ("content_block_delta", delta),
            ("content_block_stop", stop),
        ] {
            write_event(out, Some(name), &event);
        }
    }
}

impl Rewrite for Decorated {
    fn rewrite(&mut self, name: Option<&str>, mut value: Map<String, Value>, out: &mut Vec<u8>) {
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
        if !self.announced && kind != "message_start" && kind != "ping" {
            self.announce(out);
        }
        if self.block.is_some() && self.announced {
            if let Some(n) = value.get("index").and_then(Value::as_u64) {
                value.insert("index".to_owned(), (n + 1).into());
            }
        }
        if kind == "message_delta" && !self.applied.is_empty() {
            value.insert(
                "context_management".to_owned(),
                json!({"applied_edits": self.applied}),
            );
        }
        write_event(out, name, &Value::Object(value));
        if kind == "message_start" && !self.announced {
            self.announce(out);
        }
    }
}

/// `anthropic-beta`'s values less those chatfold answered; `None` when
/// none is left.
pub(crate) fn betas_left(header: &str) -> Option<String> {
    let left: Vec<&str> = (header.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty() && !BETAS.contains(v))
        .collect();
    (!left.is_empty()).then(|| left.join(","))
}

/// Whether an upstream's 400 body says it rejected context management (the
/// field, its beta, or a block it cannot read).
pub(crate) fn rejects_context_management(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body).to_lowercase();
    [
        "context_management",
        "context-management",
        "compact",
        "compaction",
        "anthropic-beta",
        "beta",
    ]
    .iter()
    .any(|word| text.contains(word))
}

#[cfg(test)]
mod tests;
