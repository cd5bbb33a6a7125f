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

use super::App;
use super::errors::ApiError;
use super::fold::{Folded, Outcome};
use super::route::{Dispatched, Route};
use super::tenant::tenant;
use super::upstream::{self, Body, full, plain};

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

/// A chat request: read whole (within the limits), compacted when over
/// budget, forwarded.
async fn chat<B>(app: &Arc<App>, request: Request<B>, format: Format) -> Result<Response<Body>, ApiError>
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let asked = asked_budget(&parts)?;
    let bytes = match tokio::time::timeout(app.config.read_timeout, body.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) => return Err(unread(app, &*e.into())),
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            ));
        }
    };
    // A small body that fits is decided here; compacting (the cache, the
    // summarizer) runs on a blocking thread.
    let folding = &app.folding;
    let decided = (bytes.len() <= INLINE)
        .then(|| folding.without_folding(format, &bytes, asked))
        .flatten();
    let Folded { body, outcome } = match decided {
        Some(decided) => decided?,
        None => {
            let tenant = tenant(&folding.secret, &parts.headers);
            let (folding, bytes) = (Arc::clone(folding), bytes.clone());
            tokio::task::spawn_blocking(move || folding.fold(format, &bytes, asked, &tenant))
                .await
                .map_err(|_| {
                    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the compaction step failed")
                })??
        }
    };
    let (body, rewritten) = match body {
        Some(compacted) => {
            let len = compacted.len();
            (full(compacted), Some(len))
        }
        None => (full(bytes), None),
    };
    let upstream = match format {
        Format::Anthropic => &app.config.anthropic,
        _ => &app.config.openai,
    };
    let mut response = forward(app, parts, (body, true), rewritten, upstream).await?;
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
