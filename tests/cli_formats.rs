//! The `chatfold` binary on request bodies of each API format (Anthropic,
//! Responses, unmarked) and the summary message's role.
#![cfg(feature = "cli")]

mod common;

use common::cli::{messages, run, scratch, stderr};
use common::fake_llm::{FakeLlm, Reply};
use serde_json::{Value, json};

/// `--format anthropic` on a Claude request body: the summary joins the
/// caller's `system` blocks, the conversation opens with a user turn, and
/// every other field comes back as it was.
#[test]
fn an_anthropic_body_is_compacted_in_its_own_format() {
    let body = include_str!("../examples/anthropic_request.json");
    let out = run(
        &[
            "compact",
            "--budget",
            "200",
            "--keep-recent",
            "80",
            "--format",
            "anthropic",
            "--summarize-cmd",
            "echo Day one planned.",
        ],
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent: serde_json::Value = serde_json::from_str(body).unwrap();
    let system = got["system"].as_array().unwrap();
    assert_eq!(system[..2], sent["system"].as_array().unwrap()[..]);
    assert_eq!(system.len(), 3);
    let summary = system[2]["text"].as_str().unwrap();
    assert!(summary.contains("\nDay one planned."), "{summary}");
    // The request uses cache_control: the summary block gets a breakpoint.
    assert_eq!(
        system[2]["cache_control"],
        serde_json::json!({"type": "ephemeral"})
    );
    assert_eq!(got["messages"][0]["role"], "user");
    assert_eq!(got["tools"], sent["tools"]);
    assert_eq!(
        got["messages"].as_array().unwrap().last(),
        sent["messages"].as_array().unwrap().last()
    );

    // Asked for the wrong format, or given a malformed body: exit 1, and
    // the message says where.
    let out = run(
        &["compact", "--budget", "200", "--format", "openai"],
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("anthropic"), "{}", stderr(&out));
    let bad = br#"{"system": "s", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "text", "text": "t"}, {"type": "tool_use", "id": 7}]}]}"#;
    let out = run(&["compact", "--budget", "200"], bad);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("message 1: content[1].id"),
        "{}",
        stderr(&out)
    );
    let out = run(
        &["compact", "--budget", "200", "--format", "claude"],
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

/// A Responses API body: items kept whole, `instructions` where it was, the
/// summary a system item at the head of `input`, every call with its output.
#[test]
fn a_responses_body_is_compacted_in_its_own_format() {
    let body = include_str!("../examples/responses_request.json");
    let out = run(
        &["compact", "--budget", "300", "--keep-recent", "150"],
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sent: serde_json::Value = serde_json::from_str(body).unwrap();
    for field in ["model", "instructions", "tools", "include", "store"] {
        assert_eq!(got[field], sent[field], "{field}");
    }
    let (got, sent) = (
        got["input"].as_array().unwrap(),
        sent["input"].as_array().unwrap(),
    );
    assert_eq!(got[0]["role"], "system");
    assert!(got[0]["content"].as_str().unwrap().contains("ORD-58213"));
    assert!(got.len() < sent.len());
    assert_eq!(got[1..], sent[sent.len() - (got.len() - 1)..]);

    // Asked for another format: exit 1, naming the mark.
    let out = run(
        &["compact", "--budget", "300", "--format", "openai"],
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("`input`"), "{}", stderr(&out));
    let out = run(
        &["compact", "--budget", "300", "--format", "responses"],
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A body that says nothing of its format (plain text turns, an unknown
/// model) cannot take a summary without `--format`: where it goes differs.
#[test]
fn an_unmarked_body_needs_a_format_to_take_a_summary() {
    let turns: Vec<serde_json::Value> = (0..40)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("turn {i} about Seoul")})
        })
        .collect();
    let body = serde_json::json!({"model": "llama3", "messages": turns}).to_string();
    let args = [
        "compact",
        "--budget",
        "80",
        "--fold-to",
        "80",
        "--tokenizer",
        "heuristic",
    ];
    let out = run(&args, body.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--format"), "{}", stderr(&out));
    let out = run(&[&args[..], &["--format", "anthropic"]].concat(), body.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        got["system"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Summary of earlier conversation:")
    );
    let out = run(&[&args[..], &["--format", "openai"]].concat(), body.as_bytes());
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["messages"][0]["role"], "system");
    // Small enough to fit: nothing to place, nothing to ask.
    let out = run(&["compact", "--budget", "100000"], body.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// A body with plain text turns and an unknown model: its format is unknown.
fn unmarked_body() -> String {
    let turns: Vec<Value> = (0..40)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("turn {i} about Seoul")})
        })
        .collect();
    json!({"model": "llama3", "messages": turns}).to_string()
}

/// The refusal comes from the plan: no summarizer (a paid call, perhaps)
/// runs for a result that would be refused.
#[test]
fn an_unmarked_body_is_refused_before_any_summarizer_runs() {
    let dir = scratch("refuse-first");
    let marker = dir.join("called");
    let cmd = format!("touch {}; echo summary", marker.display());
    let body = unmarked_body();
    let args = ["compact", "--budget", "80", "--tokenizer", "heuristic"];
    let out = run(&[&args[..], &["--summarize-cmd", &cmd]].concat(), body.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("pass --format"), "{}", stderr(&out));
    assert!(!marker.exists(), "the summarize command ran");

    let server = FakeLlm::start(vec![Reply::openai("a paid summary")]);
    let url = server.url();
    let http = ["--summarize-url", url.as_str(), "--summarize-model", "m"];
    let out = run(&[&args[..], &http[..]].concat(), body.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(server.received().is_empty(), "the LLM was called");

    // Told the format, the same command runs once.
    let out = run(
        &[&args[..], &["--summarize-cmd", &cmd, "--format", "openai"]].concat(),
        body.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(marker.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn summary_role_names_the_summary_messages_role() {
    let out = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--summary-role",
            "developer",
            "examples/history.json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = messages(&out)
        .into_iter()
        .find(|m| m.text().starts_with(chatfold::DEFAULT_SUMMARY_PREFIX))
        .unwrap();
    assert_eq!(summary.role, chatfold::Role::Developer);
    for (command, role) in [("compact", "assistant"), ("explain", "tool")] {
        let out = run(
            &[
                command,
                "--budget",
                "2000",
                "--summary-role",
                role,
                "examples/history.json",
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(2), "{command} {role}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        assert!(
            stderr(&out).starts_with("error: invalid configuration: summary_role"),
            "{}",
            stderr(&out)
        );
    }
}

/// An agent's Anthropic body whose last user turns all carry tool results:
/// the summary leads as a user turn, so the request opens with one (as
/// Anthropic, Bedrock and Vertex require), and `system` is left as it was.
/// A bare Anthropic array, with no `system` to hold it, gets the same.
#[test]
fn anthropic_requests_never_open_on_an_assistant_turn() {
    let mut messages = vec![json!({"role": "user", "content": "Fix the build, please."})];
    for k in 0..15 {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("toolu_{k}"), "name": "run", "input": {"cmd": format!("make step{k}")}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{k}"), "content": format!("step {k}: compiled module {k}")}
        ]}));
    }
    let body = json!({"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "You run tools.", "messages": messages});
    let bare = Value::Array(messages.clone());
    for (input, extra) in [(body, None), (bare, Some("--format=anthropic"))] {
        let mut args = vec!["compact", "--budget", "200"];
        args.extend(extra);
        let out = run(&args, input.to_string().as_bytes());
        assert!(out.status.success(), "{}", stderr(&out));
        let written: Value = serde_json::from_slice(&out.stdout).unwrap();
        let list = written.get("messages").unwrap_or(&written);
        assert_eq!(list[0]["role"], "user", "{written}");
        let first = list[0]["content"].as_str().unwrap();
        assert!(first.starts_with(chatfold::DEFAULT_SUMMARY_PREFIX), "{first}");
        assert_eq!(list[1]["role"], "assistant");
        if extra.is_none() {
            assert_eq!(written["system"], "You run tools.");
        }
        // Sent back one turn longer, the summary is recognised and rolled.
        let mut again = written.clone();
        let more = json!({"role": "user", "content": "And now the tests?"});
        match again.get_mut("messages") {
            Some(list) => list.as_array_mut().unwrap().push(more),
            None => again.as_array_mut().unwrap().push(more),
        }
        let out = run(&args, again.to_string().as_bytes());
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            text.matches(chatfold::DEFAULT_SUMMARY_PREFIX.trim_end()).count(),
            1,
            "{text}"
        );
    }
}
