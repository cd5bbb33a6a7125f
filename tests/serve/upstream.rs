//! A fake upstream API on loopback (tokio and hyper): it records every
//! request and answers as the test's script says: JSON, server-sent events
//! held at a gate, or nothing at all.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming};
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::{Notify, mpsc};

/// A request the upstream received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the upstream got JSON")
    }
}

/// How the upstream answers one request.
pub enum Reply {
    /// A status, headers and a body.
    Full(u16, Vec<(&'static str, String)>, String),
    /// `text/event-stream`: the first chunk at once, the rest once the gate
    /// is opened.
    Events {
        first: String,
        rest: Vec<String>,
        gate: Arc<Notify>,
    },
    /// Never answers.
    Hang,
}

impl Reply {
    pub fn json(value: serde_json::Value) -> Reply {
        Reply::Full(
            200,
            vec![("content-type", "application/json".to_owned())],
            value.to_string(),
        )
    }
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// The upstream, stopped when dropped.
pub struct Upstream {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    /// Starts on a free loopback port, answering with `script`.
    pub async fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Script = Arc::new(script);
        let recorded = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (script, recorded) = (Arc::clone(&script), Arc::clone(&recorded));
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                        let (script, recorded) = (Arc::clone(&script), Arc::clone(&recorded));
                        async move { Ok::<_, Infallible>(answer(request, &script, &recorded).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Upstream { addr, seen, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(
    request: Request<Incoming>,
    script: &Script,
    recorded: &Mutex<Vec<Seen>>,
) -> Response<Chunks> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let seen = Seen {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or("/".to_owned(), |p| p.to_string()),
        headers: parts.headers,
        body,
    };
    recorded.lock().unwrap().push(seen.clone());
    let (tx, rx) = mpsc::channel(16);
    let mut response = Response::new(Chunks(rx));
    match script(&seen) {
        Reply::Full(status, headers, body) => {
            *response.status_mut() = status.try_into().unwrap();
            for (k, v) in headers {
                response.headers_mut().insert(k, v.parse().unwrap());
            }
            tx.send(Bytes::from(body)).await.unwrap();
        }
        Reply::Events { first, rest, gate } => {
            response
                .headers_mut()
                .insert("content-type", "text/event-stream".parse().unwrap());
            tx.send(Bytes::from(first)).await.unwrap();
            tokio::spawn(async move {
                gate.notified().await;
                for chunk in rest {
                    if tx.send(Bytes::from(chunk)).await.is_err() {
                        return;
                    }
                }
            });
        }
        Reply::Hang => {
            std::future::pending::<()>().await;
        }
    }
    response
}

/// A body fed through a channel, one frame per message.
pub struct Chunks(mpsc::Receiver<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}
