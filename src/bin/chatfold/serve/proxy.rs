//! The handler: each request routed, read (within the limits), compacted
//! when a chat request is over budget, and forwarded; the upstream's
//! response streamed back as it comes, with the proxy's headers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chatfold::Format;
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::http::request::Parts;
use hyper::{Method, Request, Response, StatusCode, Version};

use super::App;
use super::errors::ApiError;
use super::fold::{Folded, fold, without_folding};
use super::tenant::tenant;
use super::upstream::{self, Body, full};

/// The largest chat body read and counted on the runtime's own threads
/// (when it fits, nothing else is done with it).
const INLINE: usize = 64 << 10;

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    /// A chat request of this format, compacted when over budget.
    Chat(Format),
    /// `GET /healthz`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// Anything else: forwarded as it is.
    Other,
}

impl Route {
    fn of(method: &Method, path: &str) -> Route {
        match (method, path) {
            // With or without the version: a client whose base URL has none.
            (&Method::POST, "/v1/chat/completions" | "/chat/completions") => Route::Chat(Format::OpenAi),
            (&Method::POST, "/v1/messages") => Route::Chat(Format::Anthropic),
            (&Method::GET, "/healthz") => Route::Health,
            (&Method::GET, "/metrics") => Route::Metrics,
            _ => Route::Other,
        }
    }

    /// The route's name in metrics and logs.
    fn name(self) -> &'static str {
        match self {
            Route::Chat(Format::Anthropic) => "messages",
            Route::Chat(_) => "chat_completions",
            Route::Health => "healthz",
            Route::Metrics => "metrics",
            Route::Other => "other",
        }
    }
}

/// What a request's log line and metrics say besides its route and status.
struct Note {
    /// When the request was forwarded, or answered by the proxy.
    done: Instant,
    /// What the compaction step decided, for a chat request.
    folded: Option<Folded>,
}

impl Note {
    /// A request the proxy answered itself, now.
    fn now() -> Note {
        Note {
            done: Instant::now(),
            folded: None,
        }
    }
}

/// Answers one request.
pub(crate) async fn handle(app: Arc<App>, request: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let start = Instant::now();
    let route = Route::of(request.method(), request.uri().path());
    let method = request.method().clone();
    let shape = match route {
        Route::Chat(format) => format,
        _ => shape(&request),
    };
    let own =
        |body: String, content_type| Ok((Ok(plain(StatusCode::OK, content_type, body.into())), Note::now()));
    let outcome = match route {
        Route::Health => own("ok\n".to_owned(), "text/plain"),
        Route::Metrics => own(app.metrics.render(), "text/plain; version=0.0.4"),
        Route::Chat(format) => chat(&app, request, format, start).await,
        Route::Other => other(&app, request).await,
    };
    let (answer, note) = outcome.unwrap_or_else(|e| (Err(e), Note::now()));
    let response = answer.unwrap_or_else(|e| own_error(&e, shape));
    let added = note.done.saturating_duration_since(start);
    app.metrics
        .answered(route.name(), response.status().as_u16(), added);
    if app.config.log {
        log_line(&method, route, response.status(), note.folded.as_ref(), added);
    }
    Ok(response)
}

/// A response, or an error the proxy answers itself.
type Answer = Result<Response<Body>, ApiError>;

/// The proxy's answer for `e`, in the API's shape.
fn own_error(e: &ApiError, shape: Format) -> Response<Body> {
    let mut response = plain(e.status, "application/json", e.body(shape).into());
    response
        .headers_mut()
        .insert("x-chatfold-error", HeaderValue::from_static("true"));
    response
}

/// Whose error shape (and upstream) a request that is not a chat route's
/// gets: Anthropic's on `/v1/messages...` or with an `anthropic-version`
/// header, else OpenAI's.
fn shape<B>(request: &Request<B>) -> Format {
    if request.uri().path().starts_with("/v1/messages") || request.headers().contains_key("anthropic-version")
    {
        Format::Anthropic
    } else {
        Format::OpenAi
    }
}

/// A response of the proxy's own.
fn plain(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Body> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// 413 when the declared length is over the limit.
fn check_length(app: &App, parts: &Parts) -> Result<(), ApiError> {
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    match declared {
        Some(len) if len > app.config.max_body => Err(too_large(app)),
        _ => Ok(()),
    }
}

fn too_large(app: &App) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than this proxy's limit of {} bytes",
            app.config.max_body
        ),
    )
}

/// A chat request: read whole (within the limits), compacted when over
/// budget, forwarded.
async fn chat(
    app: &Arc<App>,
    request: Request<Incoming>,
    format: Format,
    start: Instant,
) -> Result<(Answer, Note), ApiError> {
    let (parts, body) = request.into_parts();
    check_length(app, &parts)?;
    let asked = asked_budget(&parts)?;
    let limit = usize::try_from(app.config.max_body).unwrap_or(usize::MAX);
    let left = app.config.read_timeout.saturating_sub(start.elapsed());
    let bytes = match tokio::time::timeout(left, Limited::new(body, limit).collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
            return Err(too_large(app));
        }
        Ok(Err(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "cannot read the request body",
            ));
        }
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            ));
        }
    };
    // A small body that fits is decided here; compacting (the cache, the
    // summarizer) runs on a blocking thread.
    let decided = (bytes.len() <= INLINE)
        .then(|| without_folding(app, format, &bytes, asked))
        .flatten();
    let folded = match decided {
        Some(decided) => decided?,
        None => {
            let tenant = tenant(&app.secret, &parts.headers);
            let (app, bytes) = (Arc::clone(app), bytes.clone());
            tokio::task::spawn_blocking(move || fold(&app, format, &bytes, asked, &tenant))
                .await
                .map_err(|_| {
                    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the compaction step failed")
                })??
        }
    };
    let (body, rewritten) = match &folded.body {
        Some(compacted) => (full(compacted.clone()), Some(compacted.len())),
        None => (full(bytes), None),
    };
    let upstream = match format {
        Format::Anthropic => &app.config.anthropic,
        _ => &app.config.openai,
    };
    let (answer, done) = forward(app, parts, (body, true), rewritten, upstream).await;
    let answer = answer.map(|mut response| {
        ours(response.headers_mut(), &folded);
        response
    });
    Ok((
        answer,
        Note {
            done,
            folded: Some(folded),
        },
    ))
}

/// Any other request: forwarded as it is, its body streamed.
async fn other(app: &Arc<App>, request: Request<Incoming>) -> Result<(Answer, Note), ApiError> {
    let upstream = match shape(&request) {
        Format::Anthropic => &app.config.anthropic,
        _ => &app.config.openai,
    };
    let (parts, body) = request.into_parts();
    check_length(app, &parts)?;
    let limit = usize::try_from(app.config.max_body).unwrap_or(usize::MAX);
    let body = Limited::new(body, limit).boxed();
    let body = upstream::Idle::new(body, app.config.read_timeout).boxed();
    let (answer, done) = forward(app, parts, (body, false), None, upstream).await;
    Ok((answer, Note { done, folded: None }))
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
/// streamed), and when it was dispatched.
async fn forward(
    app: &App,
    mut parts: Parts,
    (body, buffered): (Body, bool),
    rewritten: Option<usize>,
    upstream: &super::config::Upstream,
) -> (Answer, Instant) {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri = match upstream.uri(path) {
        Ok(uri) => uri,
        Err(_) => {
            return (
                Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "the request's path cannot be forwarded",
                )),
                Instant::now(),
            );
        }
    };
    parts.uri = uri;
    parts.version = Version::HTTP_11;
    upstream::request_headers(&mut parts.headers, rewritten, buffered);
    let request = Request::from_parts(parts, body);
    let dispatched = Instant::now();
    let answer = match tokio::time::timeout(app.config.upstream_timeout, app.client.request(request)).await {
        Ok(Ok(response)) => {
            let (mut parts, body) = response.into_parts();
            upstream::strip_hop_by_hop(&mut parts.headers);
            Ok(Response::from_parts(parts, body.map_err(Into::into).boxed()))
        }
        Ok(Err(e)) if caused_by::<http_body_util::LengthLimitError>(&e) => Err(too_large(app)),
        Ok(Err(e)) if caused_by::<upstream::Stalled>(&e) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body stalled for {} s",
                app.config.read_timeout.as_secs_f64()
            ),
        )),
        Ok(Err(e)) => Err(ApiError::new(
            StatusCode::BAD_GATEWAY,
            format!("cannot reach the upstream: {}", describe(&e)),
        )),
        Err(_) => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the upstream did not answer within {} s",
                app.config.upstream_timeout.as_secs_f64()
            ),
        )),
    };
    (answer, dispatched)
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
fn ours(headers: &mut hyper::HeaderMap, folded: &Folded) {
    if let Some((before, after)) = folded.tokens {
        headers.insert("x-chatfold-tokens-before", before.into());
        headers.insert("x-chatfold-tokens-after", after.into());
    }
    let summarized = if folded.body.is_some() { "true" } else { "false" };
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

/// One line on stderr: route, model, status, tokens, cache, added latency
/// (never a body, a path's query or a key).
fn log_line(method: &Method, route: Route, status: StatusCode, folded: Option<&Folded>, added: Duration) {
    let model = folded.and_then(|f| f.model.as_deref()).unwrap_or("-");
    let model: String = model.chars().take(80).collect();
    let tokens = match folded.and_then(|f| f.tokens) {
        Some((before, after)) => format!("{before}->{after}"),
        None => "-".to_owned(),
    };
    let cache = folded.map_or("-", |f| f.cache);
    let fallback = if folded.is_some_and(|f| f.fallback.is_some()) {
        " fallback"
    } else {
        ""
    };
    eprintln!(
        "chatfold serve: {method} {} model={model:?} status={} tokens={tokens} cache={cache}{fallback} added_ms={:.3}",
        route.name(),
        status.as_u16(),
        added.as_secs_f64() * 1e3
    );
}
