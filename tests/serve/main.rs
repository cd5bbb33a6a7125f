//! `chatfold serve` end to end: the built binary in front of a fake
//! upstream, both on loopback, driven by an HTTP client.
#![cfg(feature = "cli")]

mod fuzz;
mod lifecycle;
mod proxy;
#[path = "../common/redis_server.rs"]
mod redis_server;
mod routing;
mod summarizer;
mod upstream;

use chatfold::{History, TokenCounter};
use proxy::{Proxy, post, send};
use serde_json::{Value, json};
use upstream::{Reply, Upstream};

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
    let (after, before) = (
        answer.tokens("x-chatfold-tokens-after"),
        answer.tokens("x-chatfold-tokens-before"),
    );
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
