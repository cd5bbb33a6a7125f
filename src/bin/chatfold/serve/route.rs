//! Where a request goes, and the marks the handlers leave on a response for
//! the layers around them.

use std::time::Instant;

use chatfold::Format;
use hyper::{Method, Request};

/// Where a request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A chat request of this format, compacted when over budget.
    Chat(Format),
    /// `POST /v1/responses/compact`: compaction, answered for any model.
    Compact,
    /// `GET /healthz`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// Anything else: forwarded as it is.
    Other,
}

impl Route {
    /// The route of a request to `path`.
    pub(crate) fn of(method: &Method, path: &str) -> Route {
        match (method, path) {
            // With or without the version: a client whose base URL has none.
            (&Method::POST, "/v1/chat/completions" | "/chat/completions") => Route::Chat(Format::OpenAi),
            (&Method::POST, "/v1/messages") => Route::Chat(Format::Anthropic),
            (&Method::POST, "/v1/responses" | "/responses") => Route::Chat(Format::Responses),
            (&Method::POST, "/v1/responses/compact" | "/responses/compact") => Route::Compact,
            (&Method::GET, "/healthz") => Route::Health,
            (&Method::GET, "/metrics") => Route::Metrics,
            _ => Route::Other,
        }
    }

    /// A request's route, as the outermost layer found it.
    pub(crate) fn from<B>(request: &Request<B>) -> Route {
        match request.extensions().get::<Route>() {
            Some(&route) => route,
            None => Route::of(request.method(), request.uri().path()),
        }
    }

    /// The route's name in metrics and logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Route::Chat(Format::Anthropic) => "messages",
            Route::Chat(Format::Responses) => "responses",
            Route::Chat(_) => "chat_completions",
            Route::Compact => "responses_compact",
            Route::Health => "healthz",
            Route::Metrics => "metrics",
            Route::Other => "other",
        }
    }

    /// Whose error shape (and upstream) a request gets: its chat route's
    /// format; else Anthropic's on `/v1/messages...` or with an
    /// `anthropic-version` header, else OpenAI's.
    pub(crate) fn shape<B>(request: &Request<B>) -> Format {
        if let Route::Chat(format) = Route::from(request) {
            return format;
        }
        if request.uri().path().starts_with("/v1/messages")
            || request.headers().contains_key("anthropic-version")
        {
            Format::Anthropic
        } else {
            Format::OpenAi
        }
    }
}

/// Put in a response's extensions by the handler that forwarded its
/// request: when it was dispatched upstream. A response without it is the
/// proxy's own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dispatched(pub(crate) Instant);
