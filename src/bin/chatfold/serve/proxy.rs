//! The handlers: each request routed, read (within the limits), compacted
//! when a chat request is over budget, and forwarded; the upstream's
//! response streamed back as it comes, with the proxy's headers. The
//! plumbing around them (limits, time-outs, error shapes, metrics, the log)
//! is in `layers`.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use chatfold::{BoxError, Format};
use http_body_util::BodyExt as _;
use hyper::header::HeaderValue;
use hyper::http::request::Parts;
use hyper::{Request, Response, StatusCode, Version};

use super::compaction::{self, Rules};
use super::errors::ApiError;
use super::events::{Events, Rewrite};
use super::fold::{Folded, Limits, Outcome};
use super::managed;
use super::route::{Dispatched, Route};
use super::tenant::tenant;
use super::upstream::{self, Body, full, plain};
use super::{App, CompactionMode, ManagedMode};

/// The largest chat body read and counted on the runtime's own threads
/// (when it fits, nothing else is done with it).
const INLINE: usize = 64 << 10;

/// Answers one request: routes it to its handler.
pub(crate) async fn handle<B>(app: Arc<App>, request: Request<B>) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    match Route::from(&request) {
        Route::Health => Ok(plain(StatusCode::OK, "text/plain", "ok\n".into())),
        Route::Metrics => Ok(plain(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            app.metrics.render().into(),
        )),
        Route::Chat(format) => chat(&app, request, format).await,
        Route::Compact => compact(&app, request).await,
        Route::Other => other(&app, request).await,
    }
}

/// The error for a client's body that could not be read: over the limit
/// (tower-http's), stalled (its time-out), or broken.
fn unread(app: &App, e: &(dyn std::error::Error + 'static)) -> ApiError {
    if caused_by::<http_body_util::LengthLimitError>(e) {
        ApiError::too_large(app.config.max_body)
    } else if caused_by::<tower_http::timeout::TimeoutError>(e) {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body stalled for {} s",
                app.config.read_timeout.as_secs_f64()
            ),
        )
    } else {
        ApiError::new(StatusCode::BAD_REQUEST, "cannot read the request body")
    }
}

/// A client's body, read whole within the limits.
async fn read_whole<B>(app: &App, body: B) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    match tokio::time::timeout(app.config.read_timeout, body.collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) => Err(unread(app, &*e.into())),
        Err(_) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time",
        )),
    }
}

/// What a Responses request may hold that chatfold acts on, with this
/// proxy's settings.
fn rules(app: &App, input_as_items: bool) -> Rules {
    let openai = app.config.openai.is_openai();
    Rules {
        answer_context_management: match app.config.compaction {
            CompactionMode::Always => true,
            CompactionMode::Never => false,
            CompactionMode::On404 => !openai,
        },
        upstream_reads_openai_items: openai || app.config.compaction == CompactionMode::Never,
        input_as_items,
    }
}

/// A chat request: read whole (within the limits), compacted when over
/// budget, forwarded. A Responses request's compaction items are put back
/// as what they stand for first, and its `context_management` answered
/// (see `compaction`); an Anthropic request's compaction blocks and
/// `context_management` likewise (see `managed`), once more without the
/// field when the upstream rejects it (`--anthropic-context-management
/// on-reject`).
async fn chat<B>(app: &Arc<App>, request: Request<B>, format: Format) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let bytes = read_whole(app, body).await?;
    let retried = format == Format::Anthropic
        && app.config.managed == ManagedMode::OnReject
        && memchr::memmem::find(&bytes, b"context_management").is_some();
    if !retried {
        return exchange(app, parts, bytes, format, None).await;
    }
    let again = (
        parts.method.clone(),
        parts.uri.clone(),
        parts.version,
        parts.headers.clone(),
    );
    let first = exchange(app, parts, bytes.clone(), format, Some(false)).await?;
    if first.status() != StatusCode::BAD_REQUEST {
        return Ok(first);
    }
    let (head, body) = first.into_parts();
    let read = tokio::time::timeout(app.config.upstream_timeout, body.collect()).await;
    let said = match read {
        Ok(Ok(collected)) => collected.to_bytes(),
        _ => return Ok(Response::from_parts(head, full(Bytes::new()))),
    };
    if !managed::rejects_context_management(&said) {
        return Ok(Response::from_parts(head, full(said)));
    }
    // Rejected: once more, chatfold answering.
    let mut request = Request::builder().method(again.0).uri(again.1).version(again.2);
    if let Some(headers) = request.headers_mut() {
        *headers = again.3;
    }
    let (parts, ()) = request
        .body(())
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "the request cannot be sent again"))?
        .into_parts();
    exchange(app, parts, bytes, format, Some(true)).await
}

/// What a chat request's body asks chatfold to act on before folding.
#[derive(Debug, Default)]
struct Asked {
    /// The body to use instead of the client's, when it changed.
    body: Option<Vec<u8>>,
    /// A compaction threshold chatfold answers.
    threshold: Option<usize>,
    /// Anthropic's clearing edits applied, as Anthropic reports them.
    applied: Vec<serde_json::Value>,
    /// Whether chatfold answered Anthropic's `context_management`.
    answered: bool,
    /// The client's system blocks (a compaction block's payload is measured against them).
    system_blocks: usize,
    /// Whether a compaction answers alone (`pause_after_compaction`).
    pause: bool,
}

/// One exchange with the upstream for a chat request read whole: its
/// compaction items or blocks and context management readied, the body
/// folded when over budget, the answer given what chatfold added.
/// `answer`: whether chatfold answers Anthropic's `context_management`
/// (`None`: as the mode says).
async fn exchange(
    app: &Arc<App>,
    mut parts: Parts,
    mut bytes: Bytes,
    format: Format,
    answer: Option<bool>,
) -> Result<Response<Body>, ApiError> {
    let (asked, pins) = (asked_budget(&parts)?, asked_pins(&parts)?);
    let folding = &app.folding;
    // The tenant (a keyed hash of the credential): a Responses body's items
    // and an Anthropic body's blocks are sealed for it; a chat body needs
    // it only to fold.
    let sealed_for = (format != Format::OpenAi).then(|| tenant(&folding.secret, &parts.headers));
    let prepared = match (&sealed_for, format) {
        (Some(tenant), Format::Responses) => {
            let p = compaction::prepare(&bytes, &folding.seal, tenant, rules(app, false))?;
            Asked {
                body: p.body,
                threshold: p.threshold,
                ..Asked::default()
            }
        }
        (Some(tenant), Format::Anthropic) => {
            let rules = managed_rules(app, answer);
            let p = managed::prepare(&bytes, &folding.seal, tenant, rules, &folding.base.counter)?;
            Asked {
                body: p.body,
                threshold: p.threshold,
                applied: p.applied,
                answered: p.answered,
                system_blocks: p.system_blocks,
                pause: p.pause,
            }
        }
        _ => Asked::default(),
    };
    if prepared.answered {
        answered_betas(&mut parts.headers);
    }
    let changed = prepared.body.is_some();
    if let Some(body) = prepared.body {
        bytes = Bytes::from(body);
    }
    let limits = Limits {
        asked,
        cap: prepared.threshold,
        pins,
    };
    // A small body that fits is decided here; compacting (the cache, the
    // summarizer) runs on a blocking thread.
    let decided = (bytes.len() <= INLINE)
        .then(|| folding.without_folding(format, &bytes, limits.clone()))
        .flatten();
    let Folded { body, outcome } = match decided {
        Some(decided) => decided?,
        None => {
            let tenant = (sealed_for.clone()).unwrap_or_else(|| tenant(&folding.secret, &parts.headers));
            let (folding, bytes) = (Arc::clone(folding), bytes.clone());
            tokio::task::spawn_blocking(move || folding.fold(format, &bytes, limits, &tenant))
                .await
                .map_err(|_| {
                    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the compaction step failed")
                })??
        }
    };
    // context_management answered, and the body folded: the response gets
    // the compaction item (Responses) or block (Anthropic) that stands for
    // what went upstream.
    let folded = (prepared.threshold.is_some() && outcome.summarized)
        .then(|| body.as_deref().zip(sealed_for.as_deref()))
        .flatten();
    let item = folded
        .filter(|_| format == Format::Responses)
        .map(|(sent, tenant)| compaction_item(app, tenant, sent));
    let prefix = &folding.base.policy.summary_prefix;
    let block = folded
        .filter(|_| format == Format::Anthropic)
        .and_then(|(sent, tenant)| {
            managed::block(&folding.seal, tenant, sent, prepared.system_blocks, prefix)
        });
    if let (Some(block), true) = (&block, prepared.pause) {
        // pause_after_compaction: the block alone, stopped for `compaction`.
        let sent: serde_json::Value = body
            .as_deref()
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or_default();
        let model = sent
            .get("model")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let streamed = sent.get("stream").and_then(serde_json::Value::as_bool) == Some(true);
        let kind = if streamed {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut response = plain(
            StatusCode::OK,
            kind,
            managed::paused(block, model, streamed).into(),
        );
        ours(response.headers_mut(), &outcome);
        response.extensions_mut().insert(outcome);
        return Ok(response);
    }
    let (body, rewritten) = match body {
        Some(compacted) => {
            let len = compacted.len();
            (full(compacted), Some(len))
        }
        None => {
            let len = bytes.len();
            (full(bytes), changed.then_some(len))
        }
    };
    let upstream = match format {
        Format::Anthropic => &app.config.anthropic,
        _ => &app.config.openai,
    };
    let mut response = forward(app, parts, (body, true), rewritten, upstream).await?;
    if let Some(item) = item {
        // The Responses answer gets the item first in its output.
        let body = |bytes: &[u8]| compaction::with_item_in_output(bytes, &item);
        let events = compaction::WithItem::new(item.clone());
        response = decorated(app, response, Format::Responses, body, events).await;
    }
    if block.is_some() || !prepared.applied.is_empty() {
        // The Messages answer gets the block first in its content, the
        // clearing in its context_management.
        let applied = prepared.applied;
        let body = |bytes: &[u8]| managed::decorated(bytes, block.as_ref(), &applied);
        let events = managed::Decorated::new(block.clone(), applied.clone());
        response = decorated(app, response, Format::Anthropic, body, events).await;
    }
    ours(response.headers_mut(), &outcome);
    response.extensions_mut().insert(outcome);
    Ok(response)
}

/// What an Anthropic request may hold that `managed::prepare` acts on, with
/// this proxy's settings; `answer` overrides the mode.
fn managed_rules(app: &App, answer: Option<bool>) -> managed::Rules {
    let anthropic = app.config.anthropic.is_anthropic();
    let answer = answer.unwrap_or(match app.config.managed {
        ManagedMode::Auto => !anthropic,
        ManagedMode::Always => true,
        ManagedMode::Never | ManagedMode::OnReject => false,
    });
    managed::Rules {
        answer,
        upstream_is_anthropic: anthropic,
    }
}

/// `anthropic-beta` less the values of the features chatfold answered.
fn answered_betas(headers: &mut hyper::HeaderMap) {
    let Some(value) = headers.get("anthropic-beta").and_then(|v| v.to_str().ok()) else {
        return;
    };
    match managed::betas_left(value).and_then(|left| HeaderValue::from_str(&left).ok()) {
        Some(left) => {
            headers.insert("anthropic-beta", left);
        }
        None => {
            headers.remove("anthropic-beta");
        }
    }
}

/// chatfold's compaction item for `tenant`, standing for the input items
/// of the body `sent` upstream.
fn compaction_item(app: &App, tenant: &str, sent: &[u8]) -> serde_json::Value {
    let body: Option<serde_json::Value> = serde_json::from_slice(sent).ok();
    let items = body
        .as_ref()
        .and_then(|b| b.get("input"))
        .and_then(serde_json::Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    app.folding.seal.item(tenant, items)
}

/// The upstream's successful answer with what chatfold adds to it: in a
/// JSON body by `body` (its bytes rewritten, `None`: not the expected
/// shape), in the events of a stream by `events`. An answer in another
/// shape (an error, an encoded body) goes as it came.
async fn decorated<R: Rewrite>(
    app: &App,
    response: Response<Body>,
    format: Format,
    body: impl FnOnce(&[u8]) -> Option<Vec<u8>>,
    events: R,
) -> Response<Body> {
    let headers = response.headers();
    if !response.status().is_success() || headers.contains_key(hyper::header::CONTENT_ENCODING) {
        return response;
    }
    let streamed = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|kind| kind.starts_with("text/event-stream"));
    let (mut parts, answer) = response.into_parts();
    if streamed {
        return Response::from_parts(parts, Events::new(answer, events).boxed());
    }
    let read = tokio::time::timeout(app.config.upstream_timeout, answer.collect()).await;
    let Ok(Ok(collected)) = read else {
        parts.status = StatusCode::BAD_GATEWAY;
        parts.headers.remove(hyper::header::CONTENT_LENGTH);
        let error = ApiError::new(StatusCode::BAD_GATEWAY, "the upstream's answer broke off");
        return Response::from_parts(parts, full(error.body(format)));
    };
    let bytes = collected.to_bytes();
    let rewritten = body(&bytes).map_or_else(|| full(bytes), full);
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    Response::from_parts(parts, rewritten)
}

/// `POST /v1/responses/compact`: forwarded, or answered by chatfold for
/// any model (`--responses-compaction`), in OpenAI's shape.
async fn compact<B>(app: &Arc<App>, request: Request<B>) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let asked = Limits {
        asked: asked_budget(&parts)?,
        pins: asked_pins(&parts)?,
        cap: None,
    };
    let bytes = read_whole(app, body).await?;
    let folding = &app.folding;
    let tenant = tenant(&folding.secret, &parts.headers);
    let mode = app.config.compaction;
    let prepared = compaction::prepare(&bytes, &folding.seal, &tenant, rules(app, true))?;
    let bytes = prepared.body.map_or(bytes, Bytes::from);
    if mode != CompactionMode::Always {
        let len = bytes.len();
        let upstream = &app.config.openai;
        let response = forward(app, parts, (full(bytes.clone()), true), Some(len), upstream).await?;
        if mode == CompactionMode::Never || response.status() != StatusCode::NOT_FOUND {
            return Ok(response);
        }
    }
    let folding = Arc::clone(folding);
    let (answer, outcome) = tokio::task::spawn_blocking(move || folding.compact_all(&bytes, asked, &tenant))
        .await
        .map_err(|_| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the compaction step failed"))??;
    let mut response = plain(StatusCode::OK, "application/json", answer.to_string().into());
    ours(response.headers_mut(), &outcome);
    response.extensions_mut().insert(outcome);
    Ok(response)
}

/// Any other request: forwarded as it is, its body streamed.
async fn other<B>(app: &Arc<App>, request: Request<B>) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    let upstream = match Route::shape(&request) {
        Format::Anthropic => &app.config.anthropic,
        _ => &app.config.openai,
    };
    let (parts, body) = request.into_parts();
    let body = body.map_err(Into::into).boxed();
    forward(app, parts, (body, false), None, upstream).await
}

/// `x-chatfold-budget`, when the request sets it: a positive number.
fn asked_budget(parts: &Parts) -> Result<Option<usize>, ApiError> {
    let Some(value) = parts.headers.get("x-chatfold-budget") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "x-chatfold-budget must be a positive number of tokens",
            )
        })
}

/// `x-chatfold-pin`, when the request sets it: the messages to keep after
/// the summary, as `--pin` names them (`first-user,last-user`; `none` for
/// none of the configured ones).
fn asked_pins(parts: &Parts) -> Result<Option<Vec<chatfold::Pin>>, ApiError> {
    let Some(value) = parts.headers.get("x-chatfold-pin") else {
        return Ok(None);
    };
    let bad = |why: String| ApiError::new(StatusCode::BAD_REQUEST, format!("x-chatfold-pin: {why}"));
    let text = value.to_str().map_err(|_| bad("not text".to_owned()))?;
    if text.trim() == "none" {
        return Ok(Some(Vec::new()));
    }
    chatfold::Pin::parse_list(text)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// Sends the request upstream (its body `buffered` whole by the proxy, or
/// streamed); its response (status, headers less hop-by-hop ones, body
/// streamed), marked with when it was dispatched.
async fn forward(
    app: &App,
    mut parts: Parts,
    (body, buffered): (Body, bool),
    rewritten: Option<usize>,
    upstream: &super::config::Upstream,
) -> Result<Response<Body>, ApiError> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    parts.uri = upstream
        .uri(path)
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "the request's path cannot be forwarded"))?;
    parts.version = Version::HTTP_11;
    upstream::request_headers(&mut parts.headers, rewritten, buffered);
    let request = Request::from_parts(parts, body);
    let dispatched = Instant::now();
    let timeout = app.config.upstream_timeout;
    match tokio::time::timeout(timeout, app.client.request(request)).await {
        Ok(Ok(response)) => {
            let (mut parts, body) = response.into_parts();
            upstream::strip_hop_by_hop(&mut parts.headers);
            parts.extensions.insert(Dispatched(dispatched));
            Ok(Response::from_parts(parts, body.map_err(Into::into).boxed()))
        }
        // The client's streamed body failed on the way.
        Ok(Err(e)) if caused_by::<http_body_util::LengthLimitError>(&e) => Err(unread(app, &e)),
        Ok(Err(e)) if caused_by::<tower_http::timeout::TimeoutError>(&e) => Err(unread(app, &e)),
        Ok(Err(e)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("cannot reach the upstream: {}", describe(&e)),
        )
        .dispatched(dispatched)),
        Err(_) => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("the upstream did not answer within {} s", timeout.as_secs_f64()),
        )
        .dispatched(dispatched)),
    }
}

/// Whether a forwarding failed because of a `T` (the client's streamed
/// body past the size limit, or stalled).
fn caused_by<T: std::error::Error + 'static>(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(e);
    while let Some(s) = source {
        if s.is::<T>() {
            return true;
        }
        source = s.source();
    }
    false
}

/// An error and its sources, in one line.
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The proxy's response headers: what the compaction did.
fn ours(headers: &mut hyper::HeaderMap, folded: &Outcome) {
    if let Some((before, after)) = folded.tokens {
        headers.insert("x-chatfold-tokens-before", before.into());
        headers.insert("x-chatfold-tokens-after", after.into());
    }
    if let Some((prefix, tokens)) = folded.prefix {
        let kept = if prefix == chatfold::Prefix::Rewritten {
            "rewritten"
        } else {
            "kept"
        };
        headers.insert("x-chatfold-prefix", HeaderValue::from_static(kept));
        headers.insert("x-chatfold-prefix-tokens", tokens.into());
    }
    let summarized = if folded.summarized { "true" } else { "false" };
    headers.insert("x-chatfold-summarized", HeaderValue::from_static(summarized));
    headers.insert("x-chatfold-cache", HeaderValue::from_static(folded.cache));
    if folded.over_budget {
        headers.insert("x-chatfold-over-budget", HeaderValue::from_static("true"));
    }
    if let Some(why) = &folded.fallback {
        let printable: String = why
            .chars()
            .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
            .take(300)
            .collect();
        if let Ok(value) = HeaderValue::from_str(&format!("extractive; {printable}")) {
            headers.insert("x-chatfold-fallback", value);
        }
    }
}
