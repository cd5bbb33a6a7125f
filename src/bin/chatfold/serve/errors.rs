//! The proxy's own answers, in the shape of the API the client speaks:
//! OpenAI's `{"error": {"message", "type", "param", "code"}}` or
//! Anthropic's `{"type": "error", "error": {"type", "message"}}`.

use std::time::Instant;

use hyper::StatusCode;
use serde_json::json;

use chatfold::{Error, Format};

/// An error the proxy answers itself.
#[derive(Debug)]
pub(crate) struct ApiError {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// What went wrong, for the client (never a body's text or a key).
    pub(crate) message: String,
    /// The field at fault (OpenAI's `param`), when one is.
    pub(crate) param: Option<String>,
    /// When the request was dispatched upstream, for an error of the way
    /// there (unreachable, no answer in time).
    pub(crate) dispatched: Option<Instant>,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            param: None,
            dispatched: None,
        }
    }

    /// The error, for a request dispatched upstream `at`.
    pub(crate) fn dispatched(self, at: Instant) -> Self {
        ApiError {
            dispatched: Some(at),
            ..self
        }
    }

    /// The 413 for a body over `max_body` bytes.
    pub(crate) fn too_large(max_body: u64) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is larger than this proxy's limit of {max_body} bytes"),
        )
    }

    /// A 400 for a body chatfold must compact but cannot read, naming the
    /// message and field as the CLI does.
    pub(crate) fn unreadable(e: Error) -> Self {
        let param = match &e {
            Error::InvalidMessage { index, problem } => {
                Some(format!("messages[{index}].{}", problem.field()))
            }
            _ => None,
        };
        let failure = crate::Failure::from(e);
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("chatfold cannot compact this request: {}", failure.message),
            param,
            dispatched: None,
        }
    }

    /// The body, in `format`'s shape.
    pub(crate) fn body(&self, format: Format) -> Vec<u8> {
        let status = self.status.as_u16();
        let value = match format {
            Format::Anthropic => {
                let kind = match status {
                    400 | 408 => "invalid_request_error",
                    401 => "authentication_error",
                    404 => "not_found_error",
                    413 => "request_too_large",
                    429 => "rate_limit_error",
                    504 => "timeout_error",
                    _ => "api_error",
                };
                json!({"type": "error", "error": {"type": kind, "message": self.message}})
            }
            _ => {
                let (kind, code) = match status {
                    413 => ("invalid_request_error", Some("request_too_large")),
                    400..=499 => ("invalid_request_error", None),
                    504 => ("server_error", Some("upstream_timeout")),
                    _ => ("server_error", None),
                };
                json!({"error": {"message": self.message, "type": kind, "param": self.param, "code": code}})
            }
        };
        value.to_string().into_bytes()
    }
}
