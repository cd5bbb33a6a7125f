//! Arbitrary bodies on both chat routes: the proxy never falls over, and
//! every answer is the upstream's or a well-formed error of the route's
//! API; generated histories over budget go upstream as valid requests.

use chatfold::testing::{Form, Histories, Oddity};
use chatfold::{History, Message};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

use crate::proxy::{Proxy, post, send};
use crate::upstream::{Reply, Upstream};

/// `cases`, or `PROPTEST_CASES` when set.
fn cases(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    Config::with_cases(cases)
}

/// Keys a chat body's objects have, and some others.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "role",
            "content",
            "tool_calls",
            "tool_call_id",
            "type",
            "text",
            "id",
            "name",
            "input",
            "tool_use_id",
            "function",
            "arguments",
            "system",
            "messages",
            "model",
            "max_tokens",
        ])
        .prop_map(str::to_owned),
        "[a-z_]{1,8}",
    ]
}

/// Any JSON, leaning towards the words and shapes of chat bodies.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "user",
            "assistant",
            "tool",
            "system",
            "developer",
            "text",
            "tool_use",
            "tool_result",
            "function"
        ])
        .prop_map(Value::from),
        "\\PC{0,40}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// A body with a `messages` array of message-like objects (and maybe a
/// `system`), or any JSON at all, or any bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let message = prop::collection::vec((key(), json_value()), 0..5)
        .prop_map(|fields| Value::Object(fields.into_iter().collect()));
    let chat = (
        prop::collection::vec(message, 0..30),
        prop::option::of(json_value()),
    )
        .prop_map(|(messages, system)| {
            let mut body = json!({"model": "gpt-4o", "messages": messages});
            if let Some(system) = system {
                body["system"] = system;
            }
            body.to_string().into_bytes()
        });
    prop_oneof![
        4 => chat,
        2 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..2_000),
    ]
}

/// Whether `answer` is a well-formed error of the route's API.
fn well_formed_error(path: &str, answer: &crate::proxy::Answer) -> bool {
    let Ok(body) = serde_json::from_slice::<Value>(&answer.body) else {
        return false;
    };
    let error = if path == "/v1/messages" {
        if body["type"] != "error" {
            return false;
        }
        &body["error"]
    } else {
        &body["error"]
    };
    answer.header("x-chatfold-error") == Some("true")
        && (400..600).contains(&answer.status)
        && error["type"].is_string()
        && error["message"].is_string()
}

#[test]
fn arbitrary_bodies_get_the_upstreams_answer_or_a_well_formed_error() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let up = runtime.block_on(Upstream::start(|_| {
        Reply::Full(200, vec![("x-upstream", "1".to_owned())], "{}".to_owned())
    }));
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "40", "--quiet"]);
    let mut runner = TestRunner::new(cases(64));
    let routes = prop::sample::select(vec!["/v1/chat/completions", "/v1/messages"]);
    runner
        .run(&(routes, body()), |(path, bytes)| {
            let before = up.seen().len();
            let answer = runtime.block_on(post(&proxy.url(path), &[], bytes));
            if answer.header("x-upstream") == Some("1") {
                prop_assert_eq!(answer.status, 200);
                prop_assert_eq!(up.seen().len(), before + 1);
            } else {
                prop_assert!(
                    well_formed_error(path, &answer),
                    "{} {:?}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                );
                prop_assert_eq!(up.seen().len(), before, "an error is not forwarded");
            }
            Ok(())
        })
        .unwrap();
    let health = runtime.block_on(send("GET", &proxy.url("/healthz"), &[], ""));
    assert_eq!(health.status(), 200, "the proxy still stands");
}

/// Panics unless every tool result follows its call (OpenAI's check), and
/// there is one summary.
fn valid_openai(body: &Value) -> Result<(), TestCaseError> {
    let messages = body["messages"].as_array().unwrap();
    let summaries = messages
        .iter()
        .filter(|m| m.to_string().contains("Summary of earlier conversation:"))
        .count();
    prop_assert_eq!(summaries, 1);
    let mut open: Vec<&str> = Vec::new();
    for m in messages {
        if m["role"] == "tool" {
            let id = m["tool_call_id"].as_str().unwrap();
            prop_assert!(open.contains(&id), "a result without its call: {}", id);
            open.retain(|o| *o != id);
        } else {
            prop_assert!(open.is_empty(), "calls left unanswered: {:?}", open);
            for call in m["tool_calls"].as_array().into_iter().flatten() {
                open.push(call["id"].as_str().unwrap());
            }
        }
    }
    prop_assert!(open.is_empty());
    Ok(())
}

#[test]
fn generated_histories_over_budget_go_upstream_as_valid_requests() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let up = runtime.block_on(Upstream::start(|_| Reply::json(json!({}))));
    let proxy = Proxy::start(&["--upstream", &up.url(), "--budget", "300", "--quiet"]);
    // Valid requests in: every call answered in place, standard roles.
    let histories = [Form::OpenAi, Form::Anthropic].map(|form| {
        Histories::new()
            .form(form)
            .max_turns(30)
            .without(Oddity::Orphans)
            .without(Oddity::Interleaved)
            .without(Oddity::CustomRoles)
            .without(Oddity::PinnedMidway)
            .without(Oddity::Empty)
            .strategy()
    });
    let [openai, anthropic] = histories;
    let mut runner = TestRunner::new(cases(24));
    runner
        .run(&openai, |messages: Vec<Message>| {
            let mut body = json!({"model": "gpt-4o"});
            body["messages"] = History::from(messages).to_json();
            let answer = runtime.block_on(post(&proxy.url("/v1/chat/completions"), &[], body.to_string()));
            prop_assert_eq!(answer.status, 200, "{:?}", String::from_utf8_lossy(&answer.body));
            let sent = up.seen().pop().unwrap().json();
            if answer.header("x-chatfold-summarized") == Some("true") {
                valid_openai(&sent)?;
                let after: usize = answer.header("x-chatfold-tokens-after").unwrap().parse().unwrap();
                prop_assert!(after <= 300 || answer.header("x-chatfold-over-budget") == Some("true"));
            } else {
                prop_assert_eq!(sent, body);
            }
            Ok(())
        })
        .unwrap();
    runner
        .run(&anthropic, |messages: Vec<Message>| {
            let mut body = json!({"model": "claude-test", "max_tokens": 100, "system": "Be brief."});
            body["messages"] = History::from(messages).to_json();
            let answer = runtime.block_on(post(&proxy.url("/v1/messages"), &[], body.to_string()));
            // A generated history may open on an assistant turn, which
            // chatfold reads as Anthropic's all the same.
            prop_assert!(
                answer.status == 200 || well_formed_error("/v1/messages", &answer),
                "{:?}",
                String::from_utf8_lossy(&answer.body)
            );
            if answer.header("x-chatfold-summarized") == Some("true") {
                let sent = up.seen().pop().unwrap().json();
                prop_assert_eq!(&sent["messages"][0]["role"], "user");
                prop_assert!(sent.to_string().contains("Summary of earlier conversation:"));
            }
            Ok(())
        })
        .unwrap();
}
