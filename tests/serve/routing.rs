//! What the proxy does per request: budgets from headers and model rules,
//! time-outs, upstream bases with paths, and the Responses compact route.

use std::time::Duration;

use chatfold::TokenCounter;
use serde_json::{Value, json};

use crate::proxy::{self, Proxy, post};
use crate::upstream::{Reply, Seen, Upstream};
use crate::{SUMMARY_PREFIX, anthropic_body, check_openai, ok_upstream, openai_body};

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
    assert!(asked.tokens("x-chatfold-tokens-after") <= 500);
    body["model"] = json!("gpt-4o-mini-2024-07-18");
    let ruled = chat(body.clone(), &[]).await;
    assert!(ruled.tokens("x-chatfold-tokens-after") <= 300);
    // A window less the reply's reserve.
    body["model"] = json!("small-model");
    body["max_completion_tokens"] = json!(1000);
    let windowed = chat(body.clone(), &[]).await;
    assert!(windowed.tokens("x-chatfold-tokens-after") <= 300);
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
    let after = schemas.tokens("x-chatfold-tokens-after");
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

/// `--pin` keeps the task after the summary in every compacted request;
/// `x-chatfold-pin` replaces it for one request; a bad one is a 400 in the
/// API's shape; pins over the budget are a 400 that says so.
#[tokio::test(flavor = "multi_thread")]
async fn pins_come_from_the_flag_and_the_header() {
    let up = ok_upstream().await;
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "400", "--pin", "first-user"]);
    let url = proxy.url("/v1/chat/completions");
    let body = openai_body(30);
    let task = body["messages"][1].clone();
    let question = body["messages"].as_array().unwrap().last().unwrap().clone();
    let sent = |headers: &'static [(&'static str, &'static str)]| {
        let (url, body) = (url.clone(), body.to_string());
        async move { post(&url, headers, body).await }
    };
    let after_summary = |body: &Value| -> Vec<Value> {
        let messages = body["messages"].as_array().unwrap();
        let s = messages
            .iter()
            .position(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(SUMMARY_PREFIX))
            })
            .unwrap();
        messages[s + 1..].to_vec()
    };
    let answer = sent(&[]).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let forwarded = up.seen().last().unwrap().json();
    check_openai(&forwarded);
    assert_eq!(
        after_summary(&forwarded)[0],
        task,
        "the pinned task follows the summary"
    );
    // The header replaces the flag's pins for one request.
    let answer = sent(&[("x-chatfold-pin", "last-user")]).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let forwarded = up.seen().last().unwrap().json();
    assert!(!after_summary(&forwarded).contains(&task));
    assert!(after_summary(&forwarded).contains(&question));
    let answer = sent(&[("x-chatfold-pin", "first-user,the-task")]).await;
    assert_eq!(answer.status, 400);
    let error = answer.json();
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-chatfold-pin"),
        "{error}"
    );
    // Every user message pinned: over the budget of 400.
    let all: &'static str = Box::leak(
        (1..=30)
            .map(|i| (i * 4 - 3).to_string())
            .collect::<Vec<_>>()
            .join(",")
            .into_boxed_str(),
    );
    let headers: &'static [(&'static str, &'static str)] = Box::leak(Box::new([("x-chatfold-pin", all)]));
    let answer = sent(headers).await;
    assert_eq!(answer.status, 400, "{:?}", answer.body);
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("pinned"),
        "{:?}",
        answer.body
    );
}
