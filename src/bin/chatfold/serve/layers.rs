//! The layers around the handlers, outermost first:
//!
//! - [`observe`]: the metrics and the log line of each request, read from
//!   what the handlers leave in the response's extensions ([`Dispatched`],
//!   the fold step's [`Outcome`]);
//! - [`own_errors`]: the proxy's own errors answered in the shape of the
//!   API the client speaks, tower-http's 413 among them;
//! - [`Drained`]: a client's body that is dropped unread is read on and
//!   discarded, up to a bound, so that a client that writes its whole body
//!   before it reads still reads the answer (a 413, say);
//! - tower-http's body limit and body time-out (in `serve::run`).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt as _};

use super::App;
use super::errors::ApiError;
use super::fold::Outcome;
use super::route::{Dispatched, Route};
use super::upstream::{Body, plain};

/// What the server runs, and what each layer here is and wraps: a
/// service of the client's requests that always answers.
pub(crate) trait Handler:
    Service<Request<Incoming>, Response = Response<Body>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<T> Handler for T where
    T: Service<Request<Incoming>, Response = Response<Body>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static
{
}

/// A layer made of a function of the inner service.
#[derive(Clone)]
pub(crate) struct LayerFn<F>(pub(crate) F);

impl<F: Fn(S) -> T, S, T> Layer<S> for LayerFn<F> {
    type Service = T;

    fn layer(&self, inner: S) -> T {
        (self.0)(inner)
    }
}

/// The outermost layer: the request's route put in its extensions; when
/// the answer is ready, the metrics counted and the log line written.
pub(crate) fn observe(app: Arc<App>, inner: impl Handler) -> impl Handler {
    tower::service_fn(move |mut request: Request<Incoming>| {
        let (app, inner) = (Arc::clone(&app), inner.clone());
        async move {
            let start = Instant::now();
            let route = Route::of(request.method(), request.uri().path());
            request.extensions_mut().insert(route);
            let method = request.method().clone();
            let response = inner.oneshot(request).await?;
            let done = response
                .extensions()
                .get::<Dispatched>()
                .map_or_else(Instant::now, |d| d.0);
            let added = done.saturating_duration_since(start);
            let outcome = response.extensions().get::<Outcome>();
            let metrics = &app.metrics;
            metrics.answered(route.name(), response.status().as_u16(), added);
            if let Some(outcome) = outcome {
                metrics.folded(outcome);
            }
            if app.config.log {
                log_line(&method, route, response.status(), outcome, added);
            }
            Ok(response)
        }
    })
}

/// The layer that answers the proxy's own errors in the shape of the API
/// the client speaks (`x-chatfold-error: true` on each), and gives
/// tower-http's 413 for a declared length over the limit the same shape.
pub(crate) fn own_errors<S, B>(max_body: u64, inner: S) -> impl Handler
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = ApiError> + Clone + Send + 'static,
    S::Future: Send,
    B: hyper::body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<chatfold::BoxError>,
{
    tower::service_fn(move |request: Request<Incoming>| {
        let inner = inner.clone();
        async move {
            let shape = Route::shape(&request);
            let response = match inner.oneshot(request).await {
                Ok(response) => response,
                Err(e) => return Ok(own_error(&e, shape)),
            };
            let ours = response.extensions().get::<Dispatched>().is_none();
            if ours && response.status() == StatusCode::PAYLOAD_TOO_LARGE {
                return Ok(own_error(&ApiError::too_large(max_body), shape));
            }
            Ok(response.map(|body| {
                use http_body_util::BodyExt as _;
                body.map_err(Into::into).boxed()
            }))
        }
    })
}

/// The proxy's answer for `e`, in the API's shape; a 413 closes the
/// connection (after the client's body is drained, see [`Drained`]).
fn own_error(e: &ApiError, shape: chatfold::Format) -> Response<Body> {
    let mut response = plain(e.status, "application/json", e.body(shape).into());
    if let Some(at) = e.dispatched {
        response.extensions_mut().insert(Dispatched(at));
    }
    let headers = response.headers_mut();
    headers.insert("x-chatfold-error", HeaderValue::from_static("true"));
    if e.status == StatusCode::PAYLOAD_TOO_LARGE {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// The most of a client's body read and discarded after the proxy stopped
/// reading it.
const DRAIN_BYTES: usize = 64 << 20;

/// A client's body that, dropped before its end, is read on and discarded
/// for up to [`DRAIN_BYTES`] and the read time-out, then dropped: the
/// connection then closes. Not for a client that waits for `100 Continue`:
/// it has sent nothing, and gets the answer instead.
pub(crate) struct Drained {
    body: Option<Incoming>,
    /// Whether the body ended, or must not be drained.
    done: bool,
    within: Duration,
}

impl Drained {
    /// `request`'s body, drained within `within` if it is dropped unread.
    pub(crate) fn request(request: Request<Incoming>, within: Duration) -> Request<Drained> {
        let waits = request
            .headers()
            .get(header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        request.map(|body| Drained {
            done: waits || body.is_end_stream(),
            body: Some(body),
            within,
        })
    }
}

impl hyper::body::Body for Drained {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let frame = Pin::new(body).poll_frame(cx);
        if matches!(frame, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.done = true;
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(Incoming::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.as_ref().map(Incoming::size_hint).unwrap_or_default()
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        let (Some(mut body), false) = (self.body.take(), self.done) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let within = self.within;
        runtime.spawn(async move {
            use http_body_util::BodyExt as _;
            let drain = async {
                let mut read = 0usize;
                while let Some(Ok(frame)) = body.frame().await {
                    read = read.saturating_add(frame.data_ref().map_or(0, Bytes::len));
                    if read > DRAIN_BYTES {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(within, drain).await;
        });
    }
}

/// One line on stderr: route, model, status, tokens, cache, added latency
/// (never a body, a path's query or a key).
fn log_line(method: &Method, route: Route, status: StatusCode, outcome: Option<&Outcome>, added: Duration) {
    let model = outcome.and_then(|f| f.model.as_deref()).unwrap_or("-");
    let model: String = model.chars().take(80).collect();
    let tokens = match outcome.and_then(|f| f.tokens) {
        Some((before, after)) => format!("{before}->{after}"),
        None => "-".to_owned(),
    };
    let cache = outcome.map_or("-", |f| f.cache);
    let fallback = if outcome.is_some_and(|f| f.fallback.is_some()) {
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
