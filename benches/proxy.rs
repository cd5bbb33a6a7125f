//! `chatfold serve`'s added latency: the same requests straight to a fake
//! upstream and through the proxy (and, when told where, through LiteLLM's
//! proxy), alternating, at 1, 16 and 64 concurrent connections.
//!
//! `cargo bench --bench proxy --features cli` (a release build of the
//! proxy, started from this bench). Two requests on each of the chat,
//! Responses and Anthropic Messages routes: a small pass-through request,
//! and a 100 000-token history over an 8 000-token budget whose summary is
//! cached (the first request folds; every timed one is a hit); on the
//! Messages route the same two with Anthropic's `context_management`
//! (`compact_20260112`) answered by chatfold. Printed: p50 and p99 per
//! target, the added latency (through a proxy less direct), requests per
//! second, and the proxies' peak memory.
//!
//! LiteLLM: set `CHATFOLD_BENCH_LITELLM` to its `litellm` command (from
//! `pip install 'litellm[proxy]'` in a virtual environment that also has
//! the chatfold Python package); the bench starts it with one worker in
//! front of the same fake upstream, plain and with `chatfold.litellm`'s
//! hook. `CHATFOLD_BENCH_REQUESTS` scales the number of requests (default 1).

#[path = "support/history.rs"]
mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chatfold::{History, TokenCounter};
use http_body_util::{BodyExt as _, Full};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// The key every request carries: LiteLLM's master key (it refuses to start
/// without one); the fake upstream and chatfold pass it on.
const KEY: &str = "sk-bench-4f9c2a7e1b8d4c6a9e3f5b7d1a2c4e6f";

const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}"#;

/// The fake upstream: reads each body whole, answers a small completion.
async fn upstream() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(|request: Request<hyper::body::Incoming>| async move {
                        let _ = request.into_body().collect().await;
                        let mut response = Response::new(Full::new(Bytes::from_static(ANSWER.as_bytes())));
                        response
                            .headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, Infallible>(response)
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// A proxy process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Peak resident memory (VmHWM), in MiB.
    fn peak_mib(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.0.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }
}

/// A free loopback port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `url` answers 200.
async fn wait_ready(client: &Client<HttpConnector, Full<Bytes>>, url: &str, what: &str) {
    for _ in 0..1_200 {
        let request = Request::get(url).body(Full::new(Bytes::new())).unwrap();
        if let Ok(r) = client.request(request).await {
            if r.status() == 200 {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} did not start");
}

/// `chatfold serve` in front of `up`.
fn chatfold(up: SocketAddr) -> (Proc, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_chatfold"))
        .args(["serve", "--quiet", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--upstream", &format!("http://{up}"), "--budget", "8000"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Proc(child), format!("http://127.0.0.1:{port}"))
}

/// LiteLLM's proxy (one worker) in front of `up`, routing `gpt-4o` to it;
/// with `hook`, chatfold's (`chatfold.litellm.ChatfoldHook`, an 8 000-token
/// budget) in its callbacks.
fn litellm(command: &str, up: SocketAddr, hook: bool) -> (Proc, String) {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("chatfold-bench-litellm-{}-{hook}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    let mut yaml = format!(
        "model_list:\n  - model_name: gpt-4o\n    litellm_params:\n      model: openai/gpt-4o\n      api_base: http://{up}/v1\n      api_key: sk-bench\n"
    );
    if hook {
        let module = "from chatfold.litellm import ChatfoldHook\nchatfold_hook = ChatfoldHook(budget=8000)\n";
        std::fs::write(dir.join("custom_callbacks.py"), module).unwrap();
        yaml.push_str("litellm_settings:\n  callbacks: custom_callbacks.chatfold_hook\n");
    }
    std::fs::write(&config, yaml).unwrap();
    let child = Command::new(command)
        .args([
            "--config",
            config.to_str().unwrap(),
            "--port",
            &port.to_string(),
            "--num_workers",
            "1",
        ])
        .current_dir(&dir)
        .env("LITELLM_MASTER_KEY", KEY)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_LOG", "ERROR")
        .env("LITELLM_TELEMETRY", "False")
        .env("NO_DOCS", "True")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (Proc(child), format!("http://127.0.0.1:{port}"))
}

/// Latencies of `total` POSTs of `body` to `url`, `connections` at a time;
/// and the wall time.
async fn load(url: &str, body: Bytes, connections: usize, total: usize) -> (Vec<Duration>, Duration) {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(connections)
        .build_http();
    let per = total.div_ceil(connections);
    let start = Instant::now();
    let tasks: Vec<_> = (0..connections)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.to_owned(), body.clone());
            tokio::spawn(async move {
                let mut times = Vec::with_capacity(per);
                for _ in 0..per {
                    let request = Request::post(&url)
                        .header("content-type", "application/json")
                        .header("authorization", format!("Bearer {KEY}"))
                        .body(Full::new(body.clone()))
                        .unwrap();
                    let t = Instant::now();
                    let response = client.request(request).await.unwrap();
                    assert_eq!(response.status(), 200, "{url}");
                    let _ = response.into_body().collect().await.unwrap();
                    times.push(t.elapsed());
                }
                times
            })
        })
        .collect();
    let mut times = Vec::with_capacity(per * connections);
    for task in tasks {
        times.extend(task.await.unwrap());
    }
    (times, start.elapsed())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Latencies and throughput of one target, over every round.
#[derive(Default)]
struct Runs {
    times: Vec<Duration>,
    wall: Duration,
}

impl Runs {
    fn p(&mut self, p: f64) -> Duration {
        self.times.sort_unstable();
        percentile(&self.times, p)
    }

    fn rps(&self) -> f64 {
        self.times.len() as f64 / self.wall.as_secs_f64()
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The 100 000-token history as a chat request body, and as a Responses
/// one (its messages as `{role, content}` items, calls and outputs as
/// `function_call` and `function_call_output` items).
/// The chat, Responses and Anthropic Messages bodies of a 100 000-token history.
fn big_bodies() -> (Bytes, Bytes, serde_json::Value) {
    let counter = chatfold::Tiktoken::o200k_base().unwrap();
    let mut messages = support::history(3_000, 42);
    let mut tokens = 0;
    let keep = messages
        .iter()
        .position(|m| {
            tokens += counter.count_message(m);
            tokens > 100_000
        })
        .unwrap_or(messages.len());
    messages.truncate(keep);
    let mut items = Vec::new();
    for m in &messages {
        let text = m.text();
        if let Some(id) = &m.tool_call_id {
            items.push(serde_json::json!({"type": "function_call_output", "call_id": id, "output": text}));
            continue;
        }
        if !text.is_empty() {
            items.push(serde_json::json!({"role": m.role.as_str(), "content": text}));
        }
        for call in &m.tool_calls {
            items.push(serde_json::json!({"type": "function_call", "call_id": call.id,
                                          "name": call.name, "arguments": call.arguments}));
        }
    }
    let responses = serde_json::json!({"model": "gpt-5", "input": items});
    let history = History::from(messages);
    let mut body = serde_json::json!({"model": "gpt-4o"});
    body["messages"] = history.to_json();
    // The same turns as Anthropic text turns (its tool results as user turns).
    let turns: Vec<serde_json::Value> = (history.messages.iter())
        .map(|m| {
            (
                if m.role == chatfold::Role::Assistant {
                    "assistant"
                } else {
                    "user"
                },
                m.text(),
            )
        })
        .filter(|(_, text)| !text.is_empty())
        .map(|(role, text)| serde_json::json!({"role": role, "content": text}))
        .collect();
    let anthropic = serde_json::json!({"model": "claude", "max_tokens": 64, "messages": turns});
    (
        Bytes::from(body.to_string()),
        Bytes::from(responses.to_string()),
        anthropic,
    )
}

/// `body` (an Anthropic Messages body) with `context_management` asking
/// for Anthropic's compaction.
fn compacting(body: &serde_json::Value) -> Bytes {
    let mut body = body.clone();
    body["context_management"] = serde_json::json!({"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]});
    Bytes::from(body.to_string())
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let scale: f64 = std::env::var("CHATFOLD_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.0);
    let up = upstream().await;
    let direct = format!("http://{up}");
    let (proxy, proxy_url) = chatfold(up);
    let probe: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    wait_ready(&probe, &format!("{proxy_url}/healthz"), "chatfold serve").await;
    let litellm_command = std::env::var("CHATFOLD_BENCH_LITELLM").ok();
    let hooked = litellm_command.as_deref().map(|cmd| litellm(cmd, up, true));
    let litellm = litellm_command.as_deref().map(|cmd| litellm(cmd, up, false));
    for (_, url) in litellm.iter().chain(&hooked) {
        wait_ready(&probe, &format!("{url}/health/liveliness"), "LiteLLM").await;
    }
    let small = Bytes::from_static(br#"{"model":"gpt-4o","messages":[{"role":"user","content":"Say hi."}]}"#);
    let small_responses = Bytes::from_static(br#"{"model":"gpt-5","input":"Say hi."}"#);
    let (big, big_responses, big_anthropic) = big_bodies();
    let small_anthropic = serde_json::json!({"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "Say hi."}]});
    let (small_messages, small_managed) = (
        Bytes::from(small_anthropic.to_string()),
        compacting(&small_anthropic),
    );
    let (big_messages, big_managed) = (Bytes::from(big_anthropic.to_string()), compacting(&big_anthropic));
    // The first big request folds; the rest find its summary cached.
    for (path, body) in [
        ("/v1/chat/completions", &big),
        ("/v1/responses", &big_responses),
        ("/v1/messages", &big_messages),
        ("/v1/messages", &big_managed),
    ] {
        let (times, _) = load(&format!("{proxy_url}{path}"), body.clone(), 1, 1).await;
        println!(
            "big body to {path}: {} bytes; its first request (a fold): {:.1} ms",
            body.len(),
            ms(times[0])
        );
    }
    println!();
    println!(
        "| request | connections | target | p50 ms | p99 ms | added p50 ms | added p99 ms | requests/s |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|");
    let many = (3_000.0 * scale) as usize;
    let few = (300.0 * scale) as usize;
    let cases: [(&str, &str, &Bytes, usize, bool); 8] = [
        ("pass-through", "/v1/chat/completions", &small, many, true),
        ("100k-token, cache hit", "/v1/chat/completions", &big, few, true),
        (
            "Responses pass-through",
            "/v1/responses",
            &small_responses,
            many,
            false,
        ),
        (
            "Responses 100k-token, cache hit",
            "/v1/responses",
            &big_responses,
            few,
            false,
        ),
        (
            "Messages pass-through",
            "/v1/messages",
            &small_messages,
            many,
            false,
        ),
        (
            "Messages + context_management, pass-through",
            "/v1/messages",
            &small_managed,
            many,
            false,
        ),
        (
            "Messages 100k-token, cache hit",
            "/v1/messages",
            &big_messages,
            few,
            false,
        ),
        (
            "Messages 100k-token + context_management, cache hit",
            "/v1/messages",
            &big_managed,
            few,
            false,
        ),
    ];
    for (name, path, body, total, with_litellm) in cases {
        for connections in [1, 16, 64] {
            let total = total.max(connections * 4);
            let mut targets: Vec<(&str, String, Runs)> = vec![
                ("direct", format!("{direct}{path}"), Runs::default()),
                ("chatfold", format!("{proxy_url}{path}"), Runs::default()),
            ];
            if let (Some((_, url)), true) = (&litellm, with_litellm) {
                targets.push(("LiteLLM", format!("{url}/v1/chat/completions"), Runs::default()));
            }
            if let (Some((_, url)), true) = (&hooked, with_litellm) {
                targets.push((
                    "LiteLLM + chatfold hook",
                    format!("{url}/v1/chat/completions"),
                    Runs::default(),
                ));
            }
            // Warm every connection, then three rounds, alternating.
            for (_, url, _) in &targets {
                let _ = load(url, (*body).clone(), connections, connections).await;
            }
            for _ in 0..3 {
                for (_, url, runs) in targets.iter_mut() {
                    let (times, wall) = load(url, (*body).clone(), connections, total / 3).await;
                    runs.times.extend(times);
                    runs.wall += wall;
                }
            }
            let (base50, base99) = (targets[0].2.p(0.5), targets[0].2.p(0.99));
            for (label, _, runs) in targets.iter_mut() {
                let (p50, p99) = (runs.p(0.5), runs.p(0.99));
                let added = |p: Duration, base: Duration| ms(p) - ms(base);
                println!(
                    "| {name} | {connections} | {label} | {:.3} | {:.3} | {} | {} | {:.0} |",
                    ms(p50),
                    ms(p99),
                    if *label == "direct" {
                        "".to_owned()
                    } else {
                        format!("{:.3}", added(p50, base50))
                    },
                    if *label == "direct" {
                        "".to_owned()
                    } else {
                        format!("{:.3}", added(p99, base99))
                    },
                    runs.rps()
                );
            }
        }
    }
    println!();
    println!("peak memory: chatfold serve {:.1} MiB", proxy.peak_mib());
    if let Some((litellm, _)) = &litellm {
        println!("peak memory: LiteLLM {:.1} MiB", litellm.peak_mib());
    }
    if let Some((hooked, _)) = &hooked {
        println!(
            "peak memory: LiteLLM with chatfold's hook {:.1} MiB",
            hooked.peak_mib()
        );
    }
}
