//! The proxy as a user runs it: the built `chatfold serve` on a free
//! loopback port, its stderr collected, stopped when dropped; and a client.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

pub struct Proxy {
    pub addr: SocketAddr,
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    /// `chatfold serve --listen 127.0.0.1:0 ARGS`, once it listens.
    pub fn start(args: &[&str]) -> Proxy {
        let mut child = Command::new(env!("CARGO_BIN_EXE_chatfold"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("CHATFOLD_CACHE_SECRET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut early = Vec::new();
        let addr = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("the proxy did not start: {early:?}");
            };
            if let Some(addr) = line.strip_prefix("chatfold serve: listening on http://") {
                break addr.parse().unwrap();
            }
            early.push(line);
        };
        let stderr = Arc::new(Mutex::new(early));
        let collected = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                collected.lock().unwrap().push(line);
            }
        });
        Proxy { addr, child, stderr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Its stderr once a line contains `text` (waiting for the line to be
    /// read, up to a minute).
    pub fn stderr_with(&self, text: &str) -> Vec<String> {
        for _ in 0..6_000 {
            let lines = self.stderr();
            if lines.iter().any(|l| l.contains(text)) {
                return lines;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("no line with {text:?} in {:?}", self.stderr());
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for it to exit; whether it exited successfully.
    pub fn wait(&mut self) -> bool {
        self.child.wait().unwrap().success()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response, read whole.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| panic!("not JSON: {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// A token count the proxy's header `name` says (`x-chatfold-tokens-after`).
    pub fn tokens(&self, name: &str) -> usize {
        self.header(name)
            .unwrap_or_else(|| panic!("no {name}"))
            .parse()
            .unwrap()
    }
}

/// The proxy's `/metrics`, as text.
pub async fn metrics(proxy: &Proxy) -> String {
    let response = send("GET", &proxy.url("/metrics"), &[], "").await;
    String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends a request; its response, headers only.
pub async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Response<Incoming> {
    let mut request = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    client()
        .request(request.body(Full::new(body.into())).unwrap())
        .await
        .unwrap()
}

/// POSTs `body` to `url`; the response, read whole.
pub async fn post(url: &str, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Answer {
    let response = send("POST", url, headers, body).await;
    let (parts, body) = response.into_parts();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}
