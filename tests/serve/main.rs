//! `chatfold serve` end to end: the built binary in front of a fake
//! upstream, both on loopback, driven by an HTTP client.
#![cfg(feature = "cli")]

mod fuzz;
mod proxy;
#[path = "../common/redis_server.rs"]
mod redis_server;
mod upstream;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chatfold::{History, TokenCounter};
use proxy::{Proxy, post, send};
use serde_json::{Value, json};
use tokio::sync::Notify;
use upstream::{Reply, Seen, Upstream};

const SUMMARY_PREFIX: &str = "Summary of earlier conversation:";

/// An upstream that answers every request with a small chat completion.
async fn ok_upstream() -> Upstream {
    Upstream::start(|_| Reply::json(json!({"id": "x", "object": "chat.completion", "choices": []}))).await
}

/// An OpenAI body: a system prompt, then `turns` rounds of a question, a
/// tool call, its result and an answer.
fn openai_body(turns: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": "You are an SRE assistant."})];
    for i in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Check the logs of host-{i} in cluster prod-eu, please.")}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{i}"), "type": "function",
            "function": {"name": "read_logs", "arguments": format!("{{\"host\": \"host-{i}\"}}")}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("call_{i}"),
            "content": format!("host-{i}: 3 errors in the last hour, see ticket OPS-{}", 1000 + i)}));
        messages.push(
            json!({"role": "assistant", "content": format!("Host {i} logged 3 errors (OPS-{}).", 1000 + i)}),
        );
    }
    messages.push(json!({"role": "user", "content": "Which host should I look at first?"}));
    json!({"model": "gpt-4o", "temperature": 0.2, "messages": messages})
}

/// An Anthropic body of the same conversation: `system` at the top, tool
/// use and results as blocks.
fn anthropic_body(turns: usize) -> Value {
    let mut messages = Vec::new();
    for i in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Check the logs of host-{i} in cluster prod-eu, please.")}));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": "Reading them."},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "read_logs", "input": {"host": format!("host-{i}")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"),
             "content": format!("host-{i}: 3 errors in the last hour, see ticket OPS-{}", 1000 + i)}]}));
        messages.push(
            json!({"role": "assistant", "content": format!("Host {i} logged 3 errors (OPS-{}).", 1000 + i)}),
        );
    }
    messages.push(json!({"role": "user", "content": "Which host should I look at first?"}));
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": "You are an SRE assistant.", "messages": messages})
}

/// The body's history's tokens (o200k, OpenAI's chat accounting).
fn tokens(body: &Value) -> usize {
    let history = History::from_json_value(body.clone()).unwrap();
    chatfold::Tiktoken::o200k_base()
        .unwrap()
        .count_messages(&history.messages)
}

/// Panics unless `body` is a request OpenAI accepts as far as tool pairs
/// go, with exactly one summary.
fn check_openai(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    let summaries = messages
        .iter()
        .filter(|m| {
            m["content"]
                .as_str()
                .is_some_and(|t| t.starts_with(SUMMARY_PREFIX))
        })
        .count();
    assert_eq!(summaries, 1, "{body}");
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        match m["role"].as_str().unwrap() {
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap();
                assert!(open.iter().any(|o| o == id), "a result without its call: {id}");
                open.retain(|o| o != id);
            }
            role => {
                assert!(
                    open.is_empty(),
                    "calls without results before a {role} turn: {open:?}"
                );
                for call in m["tool_calls"].as_array().into_iter().flatten() {
                    open.push(call["id"].as_str().unwrap().to_owned());
                }
            }
        }
    }
    assert!(open.is_empty(), "calls never answered: {open:?}");
}

/// Panics unless `body` is a request Anthropic accepts as far as the first
/// turn and tool pairs go, with its summary in `system`.
fn check_anthropic(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user", "{body}");
    let system = body["system"].to_string();
    assert!(system.contains(SUMMARY_PREFIX) || messages[0].to_string().contains(SUMMARY_PREFIX));
    let blocks = |m: &Value, kind: &str, id: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == kind)
            .map(|b| b[id].as_str().unwrap().to_owned())
            .collect()
    };
    for (i, m) in messages.iter().enumerate() {
        let results = blocks(m, "tool_result", "tool_use_id");
        if !results.is_empty() {
            assert!(i > 0, "a tool result opens the request");
            assert_eq!(blocks(&messages[i - 1], "tool_use", "id"), results, "{body}");
        }
        let uses = blocks(m, "tool_use", "id");
        if !uses.is_empty() {
            assert_eq!(blocks(&messages[i + 1], "tool_result", "tool_use_id"), uses);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_fits_passes_byte_for_byte_with_its_headers() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "1000"]);
    // Odd spacing, key order and escapes: no re-serialization would keep them.
    let body = "{ \"messages\" :[{\"content\":\"h\\u00e9llo\",  \"role\":\"user\"}],\n\"model\":\"gpt-4o\", \"x_extra\": [1.50]}";
    let answer = post(
        &proxy.url("/v1/chat/completions?trace=1"),
        &[
            ("authorization", "Bearer sk-tenant-a"),
            ("openai-organization", "org-1"),
            ("x-chatfold-budget", "900"),
            ("content-type", "application/json"),
        ],
        body,
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("x-chatfold-summarized"), Some("false"));
    assert_eq!(answer.header("x-chatfold-cache"), Some("none"));
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, body.as_bytes());
    assert_eq!(seen[0].path, "/v1/chat/completions?trace=1");
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-tenant-a");
    assert_eq!(seen[0].headers["openai-organization"], "org-1");
    assert_eq!(seen[0].headers["host"], up.addr.to_string().as_str());
    assert!(!seen[0].headers.contains_key("x-chatfold-budget"));
    // The log line names the route and model, never the key.
    let log = proxy.stderr_with("POST chat_completions").join("\n");
    assert!(
        log.contains("POST chat_completions model=\"gpt-4o\" status=200"),
        "{log}"
    );
    assert!(!log.contains("sk-tenant-a"));
}

#[tokio::test(flavor = "multi_thread")]
async fn other_paths_and_methods_are_forwarded_as_they_are() {
    let up = Upstream::start(|seen| Reply::Full(200, vec![], format!("{} {}", seen.method, seen.path))).await;
    let proxy = Proxy::start(&["--upstream", &format!("{}/v1", up.url()), "--budget", "10"]);
    let answer = post(&proxy.url("/v1/embeddings"), &[], "not even json").await;
    assert_eq!(
        (answer.status, &answer.body[..]),
        (200, &b"POST /v1/embeddings"[..])
    );
    let models = send("GET", &proxy.url("/v1/models"), &[], "").await;
    assert_eq!(models.status(), 200);
    assert_eq!(up.seen()[0].body, "not even json");
    assert_eq!(up.seen()[1].path, "/v1/models");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_body_over_budget_is_compacted_into_a_valid_request() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    let body = openai_body(30);
    assert!(tokens(&body) > 1_500);
    let answer = post(&proxy.url("/v1/chat/completions"), &[], body.to_string()).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    assert_eq!(answer.header("x-chatfold-summarized"), Some("true"));
    assert_eq!(answer.header("x-chatfold-cache"), Some("miss"));
    let after: usize = answer.header("x-chatfold-tokens-after").unwrap().parse().unwrap();
    let before: usize = answer
        .header("x-chatfold-tokens-before")
        .unwrap()
        .parse()
        .unwrap();
    // Every message counted: the count before is the history's.
    assert!(after <= 400, "{before} -> {after}");
    assert_eq!(before, tokens(&body));
    let sent = up.seen()[0].json();
    check_openai(&sent);
    assert_eq!(tokens(&sent), after);
    assert_eq!(
        sent["messages"][0], body["messages"][0],
        "the system prompt first, verbatim"
    );
    assert_eq!(
        sent["messages"].as_array().unwrap().last(),
        body["messages"].as_array().unwrap().last()
    );
    assert_eq!(
        (&sent["model"], &sent["temperature"]),
        (&body["model"], &body["temperature"])
    );
    assert_eq!(
        up.seen()[0].headers["content-length"],
        up.seen()[0].body.len().to_string().as_str()
    );
    // The same transcript again: the summary is reused.
    let again = post(&proxy.url("/v1/chat/completions"), &[], body.to_string()).await;
    assert_eq!(again.header("x-chatfold-cache"), Some("hit"));
    assert_eq!(up.seen()[1].body, up.seen()[0].body);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_anthropic_body_over_budget_is_compacted_into_a_valid_request() {
    let up = Upstream::start(|_| Reply::json(json!({"type": "message", "content": []}))).await;
    let proxy = Proxy::start(&[
        "--anthropic-upstream",
        &up.url(),
        "--model-window",
        "claude-*=1424",
    ]);
    let body = anthropic_body(30);
    let answer = post(
        &proxy.url("/v1/messages"),
        &[("x-api-key", "sk-ant-1"), ("anthropic-version", "2023-06-01")],
        body.to_string(),
    )
    .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let sent = up.seen()[0].json();
    check_anthropic(&sent);
    // The window less max_tokens.
    assert!(tokens(&sent) <= 400, "{}", tokens(&sent));
    assert_eq!(sent["system"].to_string().matches(SUMMARY_PREFIX).count(), 1);
    assert!(sent["system"].to_string().contains("You are an SRE assistant."));
    assert_eq!(sent["max_tokens"], 1024);
    assert_eq!(up.seen()[0].headers["x-api-key"], "sk-ant-1");
}

#[tokio::test(flavor = "multi_thread")]
async fn bodies_that_cannot_be_read_over_budget_get_400_in_each_apis_shape() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "50"]);
    let broken = format!("{{\"model\": \"gpt-4o\", \"messages\": [{}", "x".repeat(200));
    let openai = post(&proxy.url("/v1/chat/completions"), &[], broken.clone()).await;
    assert_eq!(openai.status, 400);
    let error = &openai.json()["error"];
    assert_eq!(error["type"], "invalid_request_error");
    assert!(
        error["message"].as_str().unwrap().contains("not valid JSON"),
        "{error}"
    );
    let anthropic = post(&proxy.url("/v1/messages"), &[], broken).await;
    assert_eq!(anthropic.status, 400);
    assert_eq!(anthropic.json()["type"], "error");
    assert_eq!(anthropic.json()["error"]["type"], "invalid_request_error");
    // A malformed tool block: the message and field are named.
    let mut body = anthropic_body(5);
    body["messages"][2]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("tool_use_id");
    let answer = post(&proxy.url("/v1/messages"), &[], body.to_string()).await;
    assert_eq!(answer.status, 400);
    let message = answer.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("message 2") && message.contains("tool_use_id"),
        "{message}"
    );
    // A small body chatfold cannot read still goes upstream: it fits.
    let small = post(&proxy.url("/v1/chat/completions"), &[], "{\"messages\": 7}").await;
    assert_eq!(small.status, 200);
    assert_eq!(up.seen().len(), 1);
    // A bad budget header is the client's error.
    let bad = post(
        &proxy.url("/v1/chat/completions"),
        &[("x-chatfold-budget", "lots")],
        "{}",
    )
    .await;
    assert_eq!(bad.status, 400);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_over_the_size_limit_gets_413_before_it_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "1000"]);
    // A 40 MiB body is announced, and not one byte of it sent.
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        40 << 20
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&reply).contains("request_too_large") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed without an answer: {}",
            String::from_utf8_lossy(&reply)
        );
        reply.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&reply).starts_with("HTTP/1.1 413"));
    drop(stream);
    // A client that writes its whole body before it reads (as Python's
    // urllib does) still reads the 413: the proxy reads the body on and
    // discards it, then closes.
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let len = 40 << 20;
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..len / chunk.len() {
        stream
            .write_all(&chunk)
            .await
            .expect("the proxy stopped reading the body before its end");
    }
    let mut reply = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(30), stream.read_to_end(&mut reply))
        .await
        .expect("the proxy neither answered nor closed")
        .expect("the answer could not be read");
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    assert!(reply.contains("\"type\":\"request_too_large\""), "{reply}");
    // Without a length, the limit holds as the body streams in.
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "1000", "--max-body", "1000"]);
    let answer = post(&proxy.url("/v1/messages"), &[], "x".repeat(5_000)).await;
    assert_eq!(answer.status, 413);
    assert_eq!(answer.json()["error"]["type"], "request_too_large");
    assert!(up.seen().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn upstream_statuses_headers_and_errors_pass_through() {
    let up = Upstream::start(|seen| match seen.path.as_str() {
        "/v1/chat/completions" => Reply::Full(
            429,
            vec![
                ("retry-after", "7".to_owned()),
                ("x-ratelimit-remaining-requests", "0".to_owned()),
            ],
            "{\"error\": {\"message\": \"slow down\"}}".to_owned(),
        ),
        "/v1/messages" => Reply::Full(500, vec![], "upstream broke".to_owned()),
        _ => Reply::Hang,
    })
    .await;
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "1000",
        "--upstream-timeout",
        "1",
    ]);
    let limited = post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(1).to_string(),
    )
    .await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after"), Some("7"));
    assert_eq!(limited.header("x-ratelimit-remaining-requests"), Some("0"));
    assert_eq!(&limited.body[..], b"{\"error\": {\"message\": \"slow down\"}}");
    let broken = post(&proxy.url("/v1/messages"), &[], anthropic_body(1).to_string()).await;
    assert_eq!((broken.status, &broken.body[..]), (500, &b"upstream broke"[..]));
    let late = post(&proxy.url("/v1/responses"), &[], "{}").await;
    assert_eq!(late.status, 504);
    assert_eq!(late.json()["error"]["type"], "server_error");
    // An upstream that is not there: 502.
    drop(up);
    let gone = Proxy::start(&["--upstream", "http://127.0.0.1:9", "--budget", "10"]);
    let answer = post(&gone.url("/v1/messages"), &[], "{}").await;
    assert_eq!(answer.status, 502);
    assert_eq!(answer.json()["type"], "error");
}

/// An upstream sending server-sent events held at `gate` after the first.
async fn events_upstream(gate: Arc<Notify>) -> Upstream {
    Upstream::start(move |_| Reply::Events {
        first: "data: {\"n\": 1}\n\n".to_owned(),
        rest: vec!["data: {\"n\": 2}\n\n".to_owned(), "data: [DONE]\n\n".to_owned()],
        gate: Arc::clone(&gate),
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn events_reach_the_client_as_the_upstream_sends_them() {
    use http_body_util::BodyExt as _;
    let gate = Arc::new(Notify::new());
    let up = events_upstream(Arc::clone(&gate)).await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    let response = send(
        "POST",
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(30).to_string(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(response.headers()["x-chatfold-summarized"], "true");
    let mut body = response.into_body();
    // The first event arrives while the upstream still holds the rest.
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"data: {\"n\": 1}\n\n");
    gate.notify_one();
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"data: {\"n\": 2}\n\ndata: [DONE]\n\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_summarizer_still_serves_with_the_extractive_fallback() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-url",
        "http://127.0.0.1:9/v1",
        "--summarize-model",
        "m",
        "--summarize-retries",
        "0",
    ]);
    let answer = post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(30).to_string(),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert!(
        answer
            .header("x-chatfold-fallback")
            .unwrap()
            .starts_with("extractive")
    );
    check_openai(&up.seen()[0].json());
    let metrics = send("GET", &proxy.url("/metrics"), &[], "").await;
    let text = String::from_utf8(
        http_body_util::BodyExt::collect(metrics.into_body())
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(text.contains("chatfold_summarizer_failures_total 1"), "{text}");
    assert!(text.contains("chatfold_fallbacks_total 1"), "{text}");
}

/// `n` identical chat requests of one tenant, all at once; their answers.
async fn at_once(proxy: &Proxy, n: usize, body: &str) -> Vec<proxy::Answer> {
    let requests: Vec<_> = (0..n)
        .map(|_| {
            let (url, body) = (proxy.url("/v1/chat/completions"), body.to_owned());
            tokio::spawn(async move { post(&url, &[("authorization", "Bearer sk-a")], body).await })
        })
        .collect();
    let mut answers = Vec::with_capacity(n);
    for request in requests {
        answers.push(request.await.unwrap());
    }
    answers
}

/// A `--summarize-cmd` that takes `secs` and counts its calls in a file of
/// its own, removed when this is dropped.
struct Counting {
    file: std::path::PathBuf,
    command: String,
}

impl Counting {
    fn new(name: &str, secs: u32) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let file = std::env::temp_dir().join(format!("chatfold-serve-{}-{name}-{n}", std::process::id()));
        let command = format!(
            "cat > /dev/null; sleep {secs}; echo call >> '{}'; echo 'The user checked the logs of many hosts.'",
            file.display()
        );
        Counting { file, command }
    }

    /// The proxy's arguments: `up`, a budget of 400, this summarizer, `more`.
    fn args<'a>(&'a self, up: &'a str, more: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "--upstream",
            up,
            "--budget",
            "400",
            "--summarize-cmd",
            &self.command,
        ];
        args.extend_from_slice(more);
        args
    }

    fn calls(&self) -> usize {
        std::fs::read_to_string(&self.file).map_or(0, |t| t.lines().count())
    }
}

impl Drop for Counting {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.file);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fold_threads_bound_the_folds_at_once() {
    let up = ok_upstream().await;
    let log = std::env::temp_dir().join(format!("chatfold-serve-{}-turns", std::process::id()));
    let _ = std::fs::remove_file(&log);
    // Each call notes when it starts and ends, and takes a while between.
    let noting = format!(
        "echo start >> '{0}'; cat > /dev/null; sleep 0.5; echo end >> '{0}'; echo 'The user checked the logs.'",
        log.display()
    );
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-cmd",
        &noting,
        "--fold-threads",
        "1",
        "--quiet",
    ]);
    // Two conversations, sent at once: each needs a fold of its own.
    let requests: Vec<_> = ["prod-eu", "prod-us"]
        .into_iter()
        .map(|cluster| {
            let url = proxy.url("/v1/chat/completions");
            let body = openai_body(30).to_string().replace("prod-eu", cluster);
            tokio::spawn(async move { post(&url, &[], body).await })
        })
        .collect();
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("x-chatfold-fallback"), None);
    }
    // One fold at a time: the second call starts after the first ends.
    let turns = std::fs::read_to_string(&log).unwrap();
    assert_eq!(turns, "start\nend\nstart\nend\n");
    let _ = std::fs::remove_file(&log);
    // None is no number of threads.
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_chatfold"))
        .args(["serve", "--upstream", &up.url(), "--fold-threads", "0"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--fold-threads"));
}

#[tokio::test(flavor = "multi_thread")]
async fn two_tenants_with_the_same_transcript_never_share_a_summary() {
    let (up, counting) = (ok_upstream().await, Counting::new("tenants", 0));
    let url = up.url();
    let proxy = Proxy::start(&counting.args(&url, &[]));
    let body = openai_body(30).to_string();
    let ask = |key: &'static str| {
        let (url, body) = (proxy.url("/v1/chat/completions"), body.clone());
        async move { post(&url, &[("authorization", key)], body).await }
    };
    assert_eq!(ask("Bearer sk-a").await.header("x-chatfold-cache"), Some("miss"));
    assert_eq!(ask("Bearer sk-a").await.header("x-chatfold-cache"), Some("hit"));
    assert_eq!(counting.calls(), 1);
    assert_eq!(ask("Bearer sk-b").await.header("x-chatfold-cache"), Some("miss"));
    assert_eq!(counting.calls(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_identical_requests_make_one_summarizer_call() {
    let (up, counting) = (ok_upstream().await, Counting::new("flight", 1));
    let url = up.url();
    let proxy = Proxy::start(&counting.args(&url, &["--quiet"]));
    for answer in at_once(&proxy, 32, &openai_body(30).to_string()).await {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.header("x-chatfold-summarized"), Some("true"));
    }
    assert_eq!(counting.calls(), 1);
    let bodies: Vec<_> = up.seen().into_iter().map(|s: Seen| s.body).collect();
    assert_eq!(bodies.len(), 32);
    assert!(bodies.iter().all(|b| *b == bodies[0]));
}

#[tokio::test(flavor = "multi_thread")]
async fn health_and_metrics_are_the_proxys_own() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(30).to_string(),
    )
    .await;
    post(
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(1).to_string(),
    )
    .await;
    let health = send("GET", &proxy.url("/healthz"), &[], "").await;
    assert_eq!(health.status(), 200);
    let metrics = send("GET", &proxy.url("/metrics"), &[], "").await;
    let text = String::from_utf8(
        http_body_util::BodyExt::collect(metrics.into_body())
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    for line in [
        "chatfold_requests_total{route=\"chat_completions\",status=\"200\"} 2",
        "chatfold_requests_total{route=\"healthz\",status=\"200\"} 1",
        "chatfold_compacted_requests_total 1",
        "chatfold_summarizer_calls_total 1",
        "chatfold_cache_misses_total 1",
        "chatfold_added_latency_seconds_count 3",
        "# TYPE chatfold_added_latency_seconds histogram",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    assert_eq!(up.seen().len(), 2, "health and metrics never go upstream");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_lets_an_in_flight_stream_finish_and_refuses_new_requests() {
    use http_body_util::BodyExt as _;
    let gate = Arc::new(Notify::new());
    let up = events_upstream(Arc::clone(&gate)).await;
    let mut proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400"]);
    let response = send(
        "POST",
        &proxy.url("/v1/chat/completions"),
        &[],
        openai_body(2).to_string(),
    )
    .await;
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"data: {\"n\": 1}\n\n");
    proxy.terminate();
    // Once the proxy says it is shutting down, it accepts no connection.
    proxy.stderr_with("shutting down");
    assert!(tokio::net::TcpStream::connect(proxy.addr).await.is_err());
    gate.notify_one();
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(&rest[..], b"data: {\"n\": 2}\n\ndata: [DONE]\n\n");
    assert!(tokio::task::spawn_blocking(move || proxy.wait()).await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn two_proxies_share_a_fold_through_redis_and_keep_serving_when_it_dies() {
    let Some(mut redis) = redis_server::Server::start() else {
        return;
    };
    let (up, counting) = (ok_upstream().await, Counting::new("fleet", 1));
    let (url, redis_url) = (up.url(), redis.url());
    let more = [
        "--cache-redis",
        &redis_url,
        "--cache-secret",
        "the fleet's secret",
        "--quiet",
    ];
    let args = counting.args(&url, &more);
    let (a, b) = (Proxy::start(&args), Proxy::start(&args));
    let body = openai_body(30).to_string();
    let ask = |proxy: &Proxy, body: &str| {
        let (url, body) = (proxy.url("/v1/chat/completions"), body.to_owned());
        tokio::spawn(async move { post(&url, &[("authorization", "Bearer sk-a")], body).await })
    };
    // Both proxies get the same request at once: one fold between them.
    let requests: Vec<_> = (0..8).flat_map(|_| [ask(&a, &body), ask(&b, &body)]).collect();
    for request in requests {
        let answer = request.await.unwrap();
        assert_eq!(
            (answer.status, answer.header("x-chatfold-summarized")),
            (200, Some("true"))
        );
    }
    assert_eq!(counting.calls(), 1);
    // A third proxy, its own cache empty, finds the summary in Redis.
    let c = Proxy::start(&args);
    let answer = ask(&c, &body).await.unwrap();
    assert_eq!(answer.header("x-chatfold-cache"), Some("hit"));
    assert_eq!(counting.calls(), 1);
    // Without Redis, a new fold is still served.
    redis.kill();
    let longer = openai_body(40).to_string();
    let answer = ask(&a, &longer).await.unwrap();
    assert_eq!(
        (answer.status, answer.header("x-chatfold-summarized")),
        (200, Some("true"))
    );
    check_openai(&up.seen().last().unwrap().json());
}

#[tokio::test(flavor = "multi_thread")]
async fn budgets_come_from_the_header_the_model_rules_and_the_default() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "100000",
        "--model-budget",
        "gpt-4o-mini*=300",
        "--model-window",
        "small-*=1300",
    ]);
    let summarized = |answer: &proxy::Answer| answer.header("x-chatfold-summarized").map(str::to_owned);
    let chat = |body: Value, headers: &'static [(&'static str, &'static str)]| {
        let url = proxy.url("/v1/chat/completions");
        async move { post(&url, headers, body.to_string()).await }
    };
    let mut body = openai_body(30);
    assert_eq!(
        summarized(&chat(body.clone(), &[]).await).as_deref(),
        Some("false")
    );
    let asked = chat(body.clone(), &[("x-chatfold-budget", "500")]).await;
    assert_eq!(summarized(&asked).as_deref(), Some("true"));
    assert!(
        asked
            .header("x-chatfold-tokens-after")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            <= 500
    );
    body["model"] = json!("gpt-4o-mini-2024-07-18");
    let ruled = chat(body.clone(), &[]).await;
    assert!(
        ruled
            .header("x-chatfold-tokens-after")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            <= 300
    );
    // A window less the reply's reserve.
    body["model"] = json!("small-model");
    body["max_completion_tokens"] = json!(1000);
    let windowed = chat(body.clone(), &[]).await;
    assert!(
        windowed
            .header("x-chatfold-tokens-after")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            <= 300
    );
    // The tools' schemas take room of the window too.
    let schema = json!({"type": "object", "properties": {"query": {"type": "string", "description": "words ".repeat(100)}}});
    let tools = json!([{"type": "function", "function": {"name": "search", "parameters": schema}}]);
    let tools_tokens = chatfold::Tiktoken::o200k_base()
        .unwrap()
        .count(&tools.to_string());
    assert!(tools_tokens > 100, "{tools_tokens}");
    body["max_completion_tokens"] = json!(1000 - tools_tokens);
    body["tools"] = tools;
    let schemas = chat(body.clone(), &[]).await;
    let after = schemas
        .header("x-chatfold-tokens-after")
        .unwrap()
        .parse::<usize>()
        .unwrap();
    assert!(after <= 300, "{after}");
    assert_eq!(up.seen().last().unwrap().json()["tools"], body["tools"]);
    body["max_completion_tokens"] = json!(5000);
    let full = chat(body, &[]).await;
    assert_eq!(full.status, 400, "the reserve fills the window");
}

#[tokio::test(flavor = "multi_thread")]
async fn timeouts_too_long_for_the_clock_are_long_ones() {
    // 1e19 s is a valid duration, but no clock adds it to now: each
    // request is still answered, upstream or not.
    let up = ok_upstream().await;
    let long = [
        "--read-timeout",
        "1e19",
        "--connect-timeout",
        "1e19",
        "--upstream-timeout",
        "1e19",
    ];
    let proxy = Proxy::start(&[&["--upstream", &up.url(), "--budget", "100"], &long[..]].concat());
    let fits = openai_body(1).to_string();
    assert_eq!(
        post(&proxy.url("/v1/chat/completions"), &[], fits.clone())
            .await
            .status,
        200
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nowhere = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let proxy = Proxy::start(&[&["--upstream", &nowhere, "--budget", "100"], &long[..]].concat());
    let failed = post(&proxy.url("/v1/chat/completions"), &[], fits).await;
    assert_eq!(failed.status, 502);
    let error: Value = serde_json::from_slice(&failed.body).unwrap();
    assert_eq!(error["error"]["type"], "server_error", "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_too_slow_to_send_its_body_gets_408() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "100", "--read-timeout", "1"]);
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"messages\": [";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).await.unwrap();
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("\"type\":\"error\""), "{reply}");
    assert!(up.seen().is_empty());
    // A streamed body on a forwarded route: the same time-out, not the
    // upstream's.
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--read-timeout",
        "1",
        "--upstream-timeout",
        "30",
        "--budget",
        "100",
    ]);
    let mut stream = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
    let head = "POST /v1/files HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n0123456789";
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut reply)).await;
    assert!(read.is_ok(), "no answer before the upstream's time-out");
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(reply.contains("stalled"), "{reply}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_openai_base_with_a_path_holds_the_version_and_chat_without_it_is_compacted() {
    let up = ok_upstream().await;
    // Gemini's OpenAI base, say: the client's `/v1` is left out.
    let base = format!("{}/v1beta/openai/", up.url());
    let proxy = Proxy::start(&[
        "--openai-upstream",
        &base,
        "--anthropic-upstream",
        &up.url(),
        "--budget",
        "400",
    ]);
    let fits = openai_body(1).to_string();
    assert_eq!(
        post(&proxy.url("/v1/chat/completions"), &[], fits.clone())
            .await
            .status,
        200
    );
    assert_eq!(post(&proxy.url("/v1/models"), &[], "").await.status, 200);
    // A client whose own base has no version posts `/chat/completions`:
    // compacted all the same.
    let over = post(&proxy.url("/chat/completions"), &[], openai_body(30).to_string()).await;
    assert_eq!(over.header("x-chatfold-summarized"), Some("true"));
    // Anthropic's base takes the path whole.
    let anthropic = post(&proxy.url("/v1/messages"), &[], anthropic_body(1).to_string()).await;
    assert_eq!(anthropic.status, 200);
    let paths: Vec<String> = up.seen().into_iter().map(|s: Seen| s.path).collect();
    assert_eq!(
        paths,
        [
            "/v1beta/openai/chat/completions",
            "/v1beta/openai/models",
            "/v1beta/openai/chat/completions",
            "/v1/messages",
        ]
    );
    check_openai(&up.seen()[2].json());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_whose_system_alone_is_over_budget_is_said_to_be() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "300"]);
    let body = json!({
        "model": "claude-x",
        "max_tokens": 10,
        "system": "Rules. ".repeat(300),
        "messages": [{"role": "user", "content": "hello"}],
    })
    .to_string();
    let answer = post(&proxy.url("/v1/messages"), &[], body.clone()).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("x-chatfold-over-budget"), Some("true"));
    // Nothing could be folded: the client's bytes went.
    assert_eq!(up.seen()[0].body, body.as_bytes());
}

/// Whether the process `pid` has ended (gone, or a zombie no one reaps).
fn ended(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_shutdown_timeout_holds_and_ends_the_summarize_command_in_flight() {
    let up = ok_upstream().await;
    let pids = std::env::temp_dir().join(format!("chatfold-serve-{}-pids", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    // The shell and what it started, each recorded: both must end.
    let slow = format!(
        "echo $$ > '{0}'; sleep 60 & echo $! >> '{0}'; cat > /dev/null; wait; echo late",
        pids.display()
    );
    let mut proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-cmd",
        &slow,
        "--shutdown-timeout",
        "1",
        "--quiet",
    ]);
    let url = proxy.url("/v1/chat/completions");
    let request = tokio::spawn(async move { post(&url, &[], openai_body(30).to_string()).await });
    let started = Instant::now();
    let recorded = loop {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        let recorded: Vec<String> = text.lines().map(str::to_owned).collect();
        if recorded.len() == 2 {
            break recorded;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the command did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        recorded.iter().all(|pid| !ended(pid)),
        "running before the shutdown"
    );
    let start = Instant::now();
    proxy.terminate();
    let _ = tokio::task::spawn_blocking(move || proxy.wait()).await.unwrap();
    // The summarizer would take 60 s; the process is gone soon after the
    // second the shutdown allows.
    assert!(start.elapsed() < Duration::from_secs(15), "{:?}", start.elapsed());
    // Killed with the proxy, not left running its minute.
    let gone = Instant::now();
    while !recorded.iter().all(|pid| ended(pid)) {
        assert!(
            gone.elapsed() < Duration::from_secs(5),
            "{recorded:?} outlived the proxy"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    request.abort();
    let _ = std::fs::remove_file(&pids);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_retrying_http_summarizer_is_still_called_once_for_identical_requests() {
    let up = ok_upstream().await;
    // A summarizer that is down: every attempt answers 503 at once.
    let down = Upstream::start(|_| {
        Reply::Full(
            503,
            vec![("content-type", "application/json".to_owned())],
            "{}".to_owned(),
        )
    })
    .await;
    let summarizer = format!("{}/v1", down.url());
    let proxy = Proxy::start(&[
        "--upstream",
        &up.url(),
        "--budget",
        "400",
        "--summarize-url",
        &summarizer,
        "--summarize-model",
        "m",
        // One attempt may take 0.2 s, but the call retries three times with
        // its backoff between: the waiters wait for the whole call.
        "--summarize-timeout",
        "0.2",
        "--summarize-retries",
        "3",
        "--quiet",
    ]);
    for answer in at_once(&proxy, 4, &openai_body(30).to_string()).await {
        assert_eq!(answer.status, 200);
        assert!(answer.header("x-chatfold-fallback").is_some());
    }
    // One call: its four attempts, not four calls of four.
    assert_eq!(down.seen().len(), 4);
}

/// Responses items: `turns` rounds of a question, a call, its output and an
/// answer, then a question.
fn responses_items(turns: usize) -> Vec<Value> {
    let mut items = Vec::new();
    for i in 0..turns {
        items.push(
            json!({"role": "user", "content": format!("Check the logs of host-{i} in prod-eu, please.")}),
        );
        items.push(
            json!({"type": "function_call", "call_id": format!("call_{i}"), "name": "read_logs",
                          "arguments": format!("{{\"host\": \"host-{i}\"}}")}),
        );
        items.push(
            json!({"type": "function_call_output", "call_id": format!("call_{i}"),
                          "output": format!("host-{i}: 3 errors, see ticket OPS-{}", 1000 + i)}),
        );
        items.push(json!({"role": "assistant", "content": format!("Host {i} logged 3 errors.")}));
    }
    items.push(json!({"role": "user", "content": "Which host first?"}));
    items
}

#[tokio::test(flavor = "multi_thread")]
async fn responses_compact_is_forwarded_or_answered_as_the_mode_says() {
    let up = Upstream::start(|seen| match seen.path.as_str() {
        "/v1/responses/compact" => {
            Reply::Full(404, vec![], "{\"error\": {\"message\": \"not found\"}}".into())
        }
        _ => Reply::json(json!({"id": "resp_1", "object": "response", "output": []})),
    })
    .await;
    let body = json!({"model": "m", "instructions": "Be brief.", "input": responses_items(20)}).to_string();
    let compact = |mode: &str| {
        let args = [
            "--upstream",
            &up.url(),
            "--budget",
            "400",
            "--responses-compaction",
            mode,
        ];
        Proxy::start(&args)
    };
    // never: the upstream's 404, as it came.
    let never = compact("never");
    let answer = post(&never.url("/v1/responses/compact"), &[], body.clone()).await;
    assert_eq!(answer.status, 404);
    assert_eq!(up.seen().len(), 1);
    // always: chatfold's answer, the upstream not asked.
    let always = compact("always");
    let answer = post(
        &always.url("/v1/responses/compact"),
        &[("authorization", "Bearer k1")],
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", String::from_utf8_lossy(&answer.body));
    assert_eq!(up.seen().len(), 1);
    let compacted = answer.json();
    assert_eq!(compacted["object"], "response.compaction");
    // OpenAI's order: the kept items, then the one compaction item.
    let output = compacted["output"].as_array().unwrap();
    let (item, kept) = output.split_last().unwrap();
    assert_eq!(item["type"], "compaction");
    assert!(kept.iter().all(|item| item["type"] != "compaction"));
    // The kept calls keep their outputs.
    let ids = |kind: &str| -> Vec<&Value> {
        output
            .iter()
            .filter(|i| i["type"] == kind)
            .map(|i| &i["call_id"])
            .collect()
    };
    assert_eq!(ids("function_call"), ids("function_call_output"));
    // Sent back, the item is the summary upstream; under another key, a 400.
    let mut next = output.clone();
    next.push(json!({"role": "user", "content": "And then?"}));
    let body = json!({"model": "m", "input": next}).to_string();
    let answer = post(
        &always.url("/v1/responses"),
        &[("authorization", "Bearer k1")],
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 200);
    let sent = up.seen().last().unwrap().json();
    assert!(
        sent["input"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with(SUMMARY_PREFIX)
    );
    assert!(!sent.to_string().contains("\"compaction\""));
    // A client that keeps the items from the compaction item on, and one
    // that puts it before the kept items, send the same conversation.
    for mut next in [vec![item.clone()], [vec![item.clone()], kept.to_vec()].concat()] {
        next.push(json!({"role": "user", "content": "And then?"}));
        let again = json!({"model": "m", "input": next}).to_string();
        let answer = post(
            &always.url("/v1/responses"),
            &[("authorization", "Bearer k1")],
            again,
        )
        .await;
        assert_eq!(answer.status, 200);
        assert_eq!(up.seen().last().unwrap().json()["input"], sent["input"]);
    }
    let answer = post(
        &always.url("/v1/responses"),
        &[("authorization", "Bearer k2")],
        body,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["type"], "invalid_request_error");
}
