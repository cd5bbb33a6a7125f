//! The Responses API's compaction, answered for any model: chatfold's own
//! `compaction` items (sealed: authenticated with the server's secret and
//! bound to the tenant), put back as the items they stand for before a
//! request goes upstream; `context_management` taken out of a request and
//! its compaction item added to the response (a JSON body, or the events of
//! a stream); and the answer to `POST /v1/responses/compact`.
//!
//! A compaction item stands for everything before it, as OpenAI's does: a
//! request whose newest compaction item is chatfold's goes upstream as the
//! items that item holds, then the items after it. `/v1/responses/compact`
//! answers in OpenAI's order, the items it keeps first and its compaction
//! item last, which holds the kept items too: a client that sends back the
//! whole output and one that sends only the items from the compaction item
//! on send the same conversation; one that puts the item before the kept
//! items (chatfold's order before) has them read once.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hyper::StatusCode;
use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::events::{Rewrite, write_event};

/// How `encrypted_content` of chatfold's compaction items begins.
const MARK: &str = "chatfold.v1.";
/// How `encrypted_content` of chatfold's Anthropic compaction blocks begins.
const BLOCK_MARK: &str = "chatfold.b1.";
/// What a block's tag covers before its payload, so that no item's seal
/// opens a block.
const BLOCK_DOMAIN: &[u8] = b"anthropic compaction block\0";

/// The context the items' key is derived under from the server's secret.
const KEY_CONTEXT: &str = "chatfold serve 2026-12 compaction item";

/// Seals and opens chatfold's compaction items.
#[derive(Debug)]
pub(crate) struct Seal {
    /// Derived from the server's secret.
    key: [u8; 32],
}

impl Seal {
    /// The seal of the server with `secret`.
    pub(crate) fn new(secret: &[u8; 32]) -> Self {
        Seal {
            key: blake3::derive_key(KEY_CONTEXT, secret),
        }
    }

    /// The tag of `payload` for `tenant`.
    fn tag(&self, tenant: &str, payload: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.key);
        h.update(&(tenant.len() as u64).to_le_bytes());
        h.update(tenant.as_bytes());
        h.update(payload);
        h.finalize()
    }

    /// A compaction item of `tenant`'s standing for `items`.
    pub(crate) fn item(&self, tenant: &str, items: &[Value]) -> Value {
        let payload = Value::Array(items.to_vec()).to_string();
        let tag = self.tag(tenant, payload.as_bytes());
        let id: String = tag.as_bytes()[..12].iter().map(|b| format!("{b:02x}")).collect();
        json!({
            "id": format!("cmp_chatfold_{id}"),
            "type": "compaction",
            "encrypted_content": format!("{MARK}{}.{}", B64.encode(&payload), B64.encode(tag.as_bytes())),
            "created_by": "chatfold",
        })
    }

    /// The items a compaction item's `content` stands for, when chatfold
    /// sealed it for `tenant`; a 400 when it is forged, altered or
    /// another tenant's. `None`: not chatfold's.
    fn open(&self, tenant: &str, content: &str) -> Option<Result<Vec<Value>, ApiError>> {
        let sealed = content.strip_prefix(MARK)?;
        Some(self.opened(tenant, sealed, b"").ok_or_else(Seal::refused))
    }

    /// The payload of `sealed` (`payload.tag`, both base64) when its tag is
    /// this server's for `tenant` and `domain`, read as `T`.
    fn opened<T: serde::de::DeserializeOwned>(&self, tenant: &str, sealed: &str, domain: &[u8]) -> Option<T> {
        let (payload, tag) = sealed.split_once('.')?;
        let payload = B64.decode(payload).ok()?;
        let tag: [u8; 32] = B64.decode(tag).ok()?.try_into().ok()?;
        let covered = [domain, &payload].concat();
        // blake3::Hash compares in constant time.
        (self.tag(tenant, &covered) == blake3::Hash::from(tag)).then_some(())?;
        serde_json::from_slice(&payload).ok()
    }

    /// The 400 for a compaction item or block this server did not seal for
    /// this tenant.
    pub(crate) fn refused() -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "a compaction item or block in the request was not made by this server for this API key: \
             it was altered, forged, or sealed for another tenant",
        )
    }

    /// The `encrypted_content` of an Anthropic compaction block of
    /// `tenant`'s standing for `payload`.
    pub(crate) fn seal_block(&self, tenant: &str, payload: &Value) -> String {
        let payload = payload.to_string();
        let covered = [BLOCK_DOMAIN, payload.as_bytes()].concat();
        let tag = self.tag(tenant, &covered);
        format!(
            "{BLOCK_MARK}{}.{}",
            B64.encode(&payload),
            B64.encode(tag.as_bytes())
        )
    }

    /// The payload a compaction block's `encrypted_content` holds, when
    /// chatfold sealed it for `tenant`; a 400 when it is forged, altered or
    /// another tenant's. `None`: not chatfold's.
    pub(crate) fn open_block(&self, tenant: &str, content: &str) -> Option<Result<Value, ApiError>> {
        let sealed = content.strip_prefix(BLOCK_MARK)?;
        Some(
            self.opened(tenant, sealed, BLOCK_DOMAIN)
                .ok_or_else(Seal::refused),
        )
    }
}

/// A Responses request made ready for chatfold and the upstream.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    /// The body to use instead of the client's, when it changed.
    pub(crate) body: Option<Vec<u8>>,
    /// The `compact_threshold` of a `context_management` chatfold answers
    /// (`usize::MAX` without one: the budget alone decides); `None`: none.
    pub(crate) threshold: Option<usize>,
}

/// What a request may hold that `prepare` acts on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules {
    /// Whether chatfold answers `context_management` itself.
    pub(crate) answer_context_management: bool,
    /// Whether the upstream reads OpenAI's own compaction items.
    pub(crate) upstream_reads_openai_items: bool,
    /// Whether a string `input` becomes one user message (`/compact`).
    pub(crate) input_as_items: bool,
}

/// Readies a Responses body: chatfold's compaction items put back as the
/// items they stand for (the items before the newest one dropped, as it
/// stands for them), another server's refused when the upstream cannot
/// read them, and `context_management` taken out when chatfold answers it.
pub(crate) fn prepare(bytes: &[u8], seal: &Seal, tenant: &str, rules: Rules) -> Result<Prepared, ApiError> {
    let stringy = rules.input_as_items && memchr::memmem::find(bytes, b"\"input\"").is_some();
    if memchr::memmem::find(bytes, b"compaction").is_none() && !stringy {
        return Ok(Prepared::default());
    }
    // A body chatfold cannot read is the compaction step's to refuse.
    let Ok(Value::Object(mut body)) = serde_json::from_slice::<Value>(bytes) else {
        return Ok(Prepared::default());
    };
    let mut changed = false;
    let mut threshold = None;
    if rules.answer_context_management {
        threshold = take_context_management(&mut body);
        changed |= threshold.is_some();
    }
    if rules.input_as_items {
        if let Some(Value::String(text)) = body.get("input") {
            let item = json!({"role": "user", "content": text});
            body.insert("input".to_owned(), Value::Array(vec![item]));
            changed = true;
        }
    }
    if let Some(Value::Array(items)) = body.get_mut("input") {
        changed |= expand(items, seal, tenant, rules.upstream_reads_openai_items)?;
    }
    let body = changed.then(|| Value::Object(body).to_string().into_bytes());
    Ok(Prepared { body, threshold })
}

/// Takes the `compaction` entry out of `context_management` (the field
/// too when nothing else is left in it): its threshold, when it had one.
fn take_context_management(body: &mut Map<String, Value>) -> Option<usize> {
    let Some(Value::Array(entries)) = body.get_mut("context_management") else {
        return None;
    };
    let at = entries
        .iter()
        .position(|e| e.get("type").and_then(Value::as_str) == Some("compaction"))?;
    let entry = entries.remove(at);
    if entries.is_empty() {
        body.remove("context_management");
    }
    let threshold = entry.get("compact_threshold").and_then(Value::as_u64);
    Some(threshold.map_or(usize::MAX, |t| usize::try_from(t).unwrap_or(usize::MAX)))
}

/// Puts chatfold's newest compaction item back as its items, dropping what
/// came before it; whether `items` changed.
fn expand(items: &mut Vec<Value>, seal: &Seal, tenant: &str, openai_reads: bool) -> Result<bool, ApiError> {
    let mut newest: Option<(usize, Option<Vec<Value>>)> = None;
    let mut ours = false;
    for (at, item) in items.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        let content = item
            .get("encrypted_content")
            .and_then(Value::as_str)
            .unwrap_or("");
        match seal.open(tenant, content) {
            Some(opened) => {
                newest = Some((at, Some(opened?)));
                ours = true;
            }
            None if openai_reads => newest = Some((at, None)),
            None => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "the input holds a compaction item that chatfold did not make (OpenAI's encrypted \
                     compaction): only OpenAI can read it, and this request goes to another upstream; \
                     send the items it replaced, or compact through chatfold (/v1/responses/compact)",
                ));
            }
        }
    }
    let Some((at, opened)) = newest.filter(|_| ours) else {
        return Ok(false);
    };
    match opened {
        Some(opened) => {
            let after = items.split_off(at + 1);
            let repeated = overlap(&opened, &after);
            *items = opened;
            items.extend(after.into_iter().skip(repeated));
        }
        // OpenAI's is the newest: it stands for what came before, chatfold's too.
        None => drop(items.drain(..at)),
    }
    Ok(true)
}

/// How many of `after`'s first items end `opened` too (the kept items a
/// client sent again after the compaction item that holds them).
fn overlap(opened: &[Value], after: &[Value]) -> usize {
    let Some(first) = after.first() else {
        return 0;
    };
    // Where the first item after could stand in `opened`, the earliest
    // first: the longest overlap.
    (0..opened.len())
        .filter(|&at| opened[at] == *first)
        .map(|at| opened.len() - at)
        .find(|&k| k <= after.len() && opened[opened.len() - k..] == after[..k])
        .unwrap_or(0)
}

/// `output` with chatfold's compaction `item` first, in a Responses API
/// response body; `None` when the body is not one.
pub(crate) fn with_item_in_output(body: &[u8], item: &Value) -> Option<Vec<u8>> {
    let mut response: Value = serde_json::from_slice(body).ok()?;
    let output = response.get_mut("output")?.as_array_mut()?;
    output.insert(0, item.clone());
    Some(response.to_string().into_bytes())
}

/// The answer to `/v1/responses/compact`, in OpenAI's order: `output` (the
/// `kept` items, then chatfold's compaction item, which holds them too)
/// and the usage.
pub(crate) fn compacted_response(item: Value, kept: Vec<Value>, tokens: (usize, usize)) -> Value {
    let (before, after) = tokens;
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = item.get("id").and_then(Value::as_str).unwrap_or("cmp_chatfold");
    let mut output = kept;
    output.push(item.clone());
    json!({
        "id": format!("resp_{id}"),
        "object": "response.compaction",
        "created_at": created,
        "output": output,
        "usage": {
            "input_tokens": before,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": after,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": before + after,
        },
    })
}

/// An item as the API's output writes it: a `{role, content}` shorthand
/// message gets its `type`, and its text its part (`input_text`, or
/// `output_text` for the assistant's).
pub(crate) fn typed(mut item: Value) -> Value {
    let Some(fields) = item.as_object_mut() else {
        return item;
    };
    if fields.contains_key("type") || !fields.contains_key("role") {
        return item;
    }
    fields.insert("type".to_owned(), "message".into());
    let part = match fields.get("role").and_then(Value::as_str) {
        Some("assistant") => "output_text",
        _ => "input_text",
    };
    if let Some(Value::String(text)) = fields.get_mut("content") {
        let text = std::mem::take(text);
        let mut content = json!({"type": part, "text": text});
        if part == "output_text" {
            content["annotations"] = json!([]);
        }
        fields.insert("content".to_owned(), json!([content]));
    }
    item
}

/// A streamed Responses answer (server-sent events) with chatfold's
/// compaction item as its first output item: announced right after
/// `response.created`, in every later snapshot of the response, the other
/// items' `output_index` one further on, and the events numbered on.
#[derive(Debug)]
pub(crate) struct WithItem {
    item: Value,
    /// Whether the item was announced.
    announced: bool,
}

impl WithItem {
    /// A stream's events with `item` added.
    pub(crate) fn new(item: Value) -> Self {
        WithItem {
            item,
            announced: false,
        }
    }

    /// The item's `output_item.added` and `output_item.done` events,
    /// numbered from `sequence`.
    fn announce(&mut self, sequence: u64) -> Vec<u8> {
        self.announced = true;
        let mut out = Vec::new();
        for (n, kind) in ["response.output_item.added", "response.output_item.done"]
            .into_iter()
            .enumerate()
        {
            let event = json!({"type": kind, "output_index": 0, "item": self.item, "sequence_number": sequence + n as u64});
            write_event(&mut out, Some(kind), &event);
        }
        out
    }

    /// An event after the item's: output indexes and numbers moved on,
    /// the item in the response's snapshot.
    fn shift(&self, value: &mut Map<String, Value>) {
        if let Some(n) = value.get("output_index").and_then(Value::as_u64) {
            value.insert("output_index".to_owned(), (n + 1).into());
        }
        if let Some(n) = value.get("sequence_number").and_then(Value::as_u64) {
            value.insert("sequence_number".to_owned(), (n + 2).into());
        }
        if let Some(output) = value.get_mut("response").and_then(|r| r.get_mut("output")) {
            if let Some(output) = output.as_array_mut() {
                output.insert(0, self.item.clone());
            }
        }
    }
}

impl Rewrite for WithItem {
    /// The event, and the item's own events after `response.created` (or
    /// before the first event that names an output index).
    fn rewrite(&mut self, name: Option<&str>, mut value: Map<String, Value>, out: &mut Vec<u8>) {
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
        let before = !self.announced && kind != "response.created" && value.contains_key("output_index");
        let sequence = value.get("sequence_number").and_then(Value::as_u64);
        if before {
            out.extend(self.announce(sequence.unwrap_or(0)));
        }
        if self.announced {
            self.shift(&mut value);
        }
        write_event(out, name, &Value::Object(value));
        if !self.announced && kind == "response.created" {
            out.extend(self.announce(sequence.map_or(0, |n| n + 1)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use hyper::body::Body as _;

    use super::*;

    fn rules() -> Rules {
        Rules {
            answer_context_management: true,
            upstream_reads_openai_items: false,
            input_as_items: false,
        }
    }

    fn input(prepared: &Prepared) -> Vec<Value> {
        let body: Value = serde_json::from_slice(prepared.body.as_ref().unwrap()).unwrap();
        body["input"].as_array().unwrap().clone()
    }

    #[test]
    fn an_item_opens_for_its_tenant_only_and_unaltered() {
        let seal = Seal::new(&[7; 32]);
        let summary = json!({"role": "system", "content": "Summary of earlier conversation: x"});
        let item = seal.item("tenant-a", std::slice::from_ref(&summary));
        let body = |item: &Value| {
            json!({"model": "m", "input": [{"role": "user", "content": "old"}, item, {"role": "user", "content": "new"}]})
                .to_string()
        };
        let prepared = prepare(body(&item).as_bytes(), &seal, "tenant-a", rules()).unwrap();
        assert_eq!(
            input(&prepared),
            vec![summary.clone(), json!({"role": "user", "content": "new"})]
        );
        // Another tenant, another server, an altered payload: refused.
        assert!(prepare(body(&item).as_bytes(), &seal, "tenant-b", rules()).is_err());
        assert!(prepare(body(&item).as_bytes(), &Seal::new(&[8; 32]), "tenant-a", rules()).is_err());
        let content = item["encrypted_content"].as_str().unwrap();
        let (payload, tag) = content.strip_prefix(MARK).unwrap().split_once('.').unwrap();
        let mut bytes = B64.decode(payload).unwrap();
        bytes[5] ^= 1;
        let altered =
            json!({"type": "compaction", "encrypted_content": format!("{MARK}{}.{tag}", B64.encode(&bytes))});
        let refused = prepare(body(&altered).as_bytes(), &seal, "tenant-a", rules()).unwrap_err();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn openai_items_pass_to_openai_only() {
        let seal = Seal::new(&[7; 32]);
        let body =
            json!({"model": "m", "input": [{"type": "compaction", "encrypted_content": "gAAAA-openai"}]})
                .to_string();
        assert!(prepare(body.as_bytes(), &seal, "t", rules()).is_err());
        let to_openai = Rules {
            upstream_reads_openai_items: true,
            ..rules()
        };
        assert!(
            prepare(body.as_bytes(), &seal, "t", to_openai)
                .unwrap()
                .body
                .is_none()
        );
    }

    #[test]
    fn context_management_is_taken_out() {
        let seal = Seal::new(&[7; 32]);
        let body = json!({"model": "m", "input": "hi", "context_management": [{"type": "compaction", "compact_threshold": 900}]});
        let prepared = prepare(body.to_string().as_bytes(), &seal, "t", rules()).unwrap();
        assert_eq!(prepared.threshold, Some(900));
        let sent: Value = serde_json::from_slice(&prepared.body.unwrap()).unwrap();
        assert_eq!(sent, json!({"model": "m", "input": "hi"}));
        let passed = Rules {
            answer_context_management: false,
            ..rules()
        };
        assert!(
            prepare(body.to_string().as_bytes(), &seal, "t", passed)
                .unwrap()
                .body
                .is_none()
        );
    }

    #[test]
    fn a_stream_gets_the_item_first() {
        let events = [
            json!({"type": "response.created", "sequence_number": 0, "response": {"output": []}}),
            json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": {"type": "message"}}),
            json!({"type": "response.completed", "sequence_number": 2, "response": {"output": [{"type": "message"}]}}),
        ];
        let mut body = String::new();
        for e in &events {
            body.push_str(&format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()));
        }
        let item = json!({"type": "compaction", "id": "cmp_x"});
        let mut stream = super::super::events::Events::new(
            super::super::upstream::full(body),
            WithItem::new(item.clone()),
        );
        let mut out = Vec::new();
        // Drive the body by hand (no runtime needed for a Full body).
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut stream).poll_frame(&mut cx) {
            out.extend_from_slice(&frame.into_data().unwrap());
        }
        let text = String::from_utf8(out).unwrap();
        let datas: Vec<Value> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let kinds: Vec<&str> = datas.iter().map(|d| d["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.output_item.added",
                "response.output_item.done",
                "response.output_item.added",
                "response.completed"
            ]
        );
        let numbers: Vec<u64> = datas
            .iter()
            .map(|d| d["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, [0, 1, 2, 3, 4]);
        assert_eq!(datas[1]["item"], item);
        assert_eq!(datas[3]["output_index"], 1);
        assert_eq!(datas[4]["response"]["output"][0], item);
    }
}
