//! A fake LLM endpoint on loopback: it answers each request with the next
//! scripted reply (the last one repeats) and records what it was sent.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// What the server does with one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A status, extra headers and a body.
    Answer(u16, Vec<(&'static str, String)>, String),
    /// Waits, then replies.
    Late(Duration, Box<Reply>),
    /// Sends the headers and half the body, then closes the connection.
    CutOff,
    /// Sends the headers and half the body, then waits before closing.
    Stall(Duration),
}

impl Reply {
    /// A 200 with a JSON body.
    pub fn json(body: Value) -> Reply {
        Reply::Answer(200, vec![], body.to_string())
    }

    /// A status with a JSON body.
    pub fn status(status: u16, body: Value) -> Reply {
        Reply::Answer(status, vec![], body.to_string())
    }

    /// An OpenAI Chat Completions answer with `text`.
    pub fn openai(text: &str) -> Reply {
        Reply::json(serde_json::json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        }))
    }

    /// An Anthropic Messages answer with `text`.
    pub fn anthropic(text: &str) -> Reply {
        Reply::json(serde_json::json!({
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
        }))
    }
}

/// One request the server received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The server; it stops when dropped.
pub struct FakeLlm {
    port: u16,
    received: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
}

impl FakeLlm {
    pub fn start(replies: Vec<Reply>) -> FakeLlm {
        assert!(!replies.is_empty());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, halt) = (Arc::clone(&received), Arc::clone(&stop));
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                if halt.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let reply = replies[n.min(replies.len() - 1)].clone();
                let log = Arc::clone(&log);
                std::thread::spawn(move || serve(stream, reply, &log));
            }
        });
        FakeLlm { port, received, stop }
    }

    /// The base URL, as a provider's docs give it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(stream: TcpStream, reply: Reply, log: &Mutex<Vec<Received>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or_default().to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    );
    let mut headers = Vec::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    log.lock().unwrap().push(Received {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    respond(stream, reply);
}

fn respond(mut stream: TcpStream, reply: Reply) {
    match reply {
        Reply::Late(delay, reply) => {
            std::thread::sleep(delay);
            respond(stream, *reply);
        }
        Reply::Answer(status, headers, body) => {
            let mut head = format!(
                "HTTP/1.1 {status} Fake\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(body.as_bytes());
            let _ = stream.flush();
        }
        Reply::CutOff | Reply::Stall(_) => {
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n{\"choices\": [{\"mess",
            );
            let _ = stream.flush();
            if let Reply::Stall(delay) = reply {
                std::thread::sleep(delay);
            }
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}
