//! A stream of server-sent events from the upstream, each event's JSON
//! rewritten as it passes: what the Responses compaction item and
//! Anthropic's compaction block and context-management report add to a
//! streamed answer. Events that are not JSON pass as they came.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Frame;
use serde_json::{Map, Value};

use super::upstream::Body;

/// What is done to each event of a stream.
pub(crate) trait Rewrite: Send + Sync + Unpin + 'static {
    /// Writes to `out` the events to send for one upstream event: its
    /// name (`event:`), and its data read as a JSON object.
    fn rewrite(&mut self, name: Option<&str>, data: Map<String, Value>, out: &mut Vec<u8>);
}

/// The upstream's events, each rewritten by `R`.
#[derive(Debug)]
pub(crate) struct Events<R> {
    inner: Body,
    rewrite: R,
    /// Bytes of an event not yet whole.
    pending: Vec<u8>,
    /// Whether the upstream's body ended.
    ended: bool,
}

impl<R: Rewrite> Events<R> {
    /// `inner`'s events, rewritten by `rewrite`.
    pub(crate) fn new(inner: Body, rewrite: R) -> Self {
        Events {
            inner,
            rewrite,
            pending: Vec::new(),
            ended: false,
        }
    }

    /// The length of the first whole event in `pending`, with its blank line.
    fn whole(&self) -> Option<usize> {
        let lf = memchr::memmem::find(&self.pending, b"\n\n").map(|at| at + 2);
        let crlf = memchr::memmem::find(&self.pending, b"\r\n\r\n").map(|at| at + 4);
        match (lf, crlf) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One whole event, rewritten when its data is a JSON object.
    fn rewritten(&mut self, event: &[u8]) -> Vec<u8> {
        let Ok(text) = std::str::from_utf8(event) else {
            return event.to_vec();
        };
        let mut name = None;
        let mut data = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("event:") {
                name = Some(rest.trim().to_owned());
            } else if let Some(rest) = line.strip_prefix("data:") {
                data = Some(rest.trim_start().to_owned());
            }
        }
        let Some(Ok(Value::Object(value))) = data.map(|d| serde_json::from_str::<Value>(&d)) else {
            return event.to_vec();
        };
        let mut out = Vec::new();
        self.rewrite.rewrite(name.as_deref(), value, &mut out);
        out
    }
}

/// An event as server-sent events write it.
pub(crate) fn write_event(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(name) = name {
        out.extend_from_slice(format!("event: {name}\n").as_bytes());
    }
    out.extend_from_slice(format!("data: {data}\n\n").as_bytes());
}

impl<R: Rewrite> hyper::body::Body for Events<R> {
    type Data = Bytes;
    type Error = chatfold::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            if let Some(len) = self.whole() {
                let event: Vec<u8> = self.pending.drain(..len).collect();
                let rewritten = self.rewritten(&event);
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rewritten)))));
            }
            if self.ended {
                if self.pending.is_empty() {
                    return Poll::Ready(None);
                }
                let rest = std::mem::take(&mut self.pending);
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(rest)))));
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => self.pending.extend_from_slice(&data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => self.ended = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
