//! The `chatfold` binary, run as a user would run it: compacting, counting,
//! explaining, its help, and its exit codes for bad input and usage.
#![cfg(feature = "cli")]

mod common;

use std::process::{Command, Stdio};

use chatfold::{Compactor, Extractive, Heuristic, Tiktoken, TokenCounter};
use common::cli::{SAMPLE, messages, run, stderr};
use proptest::prelude::*;
use serde_json::{Value, json};

#[test]
fn compacts_the_sample_history_within_budget() {
    let out = run(&["compact", "--budget", "2000", "examples/history.json"], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let input = chatfold::History::from_json_str(SAMPLE)
        .map(|h| h.messages)
        .unwrap();
    let output = messages(&out);
    let o200k = Tiktoken::o200k_base().unwrap();
    assert!(o200k.count_messages(&input) > 2000);
    assert!(o200k.count_messages(&output) <= 2000);
    assert_eq!(output[0], input[0]);
    assert_eq!(output.last(), input.last());
    let summaries = output
        .iter()
        .filter(|m| m.text().starts_with(chatfold::DEFAULT_SUMMARY_PREFIX))
        .count();
    assert_eq!(summaries, 1);
}

#[test]
fn under_budget_input_comes_back_byte_for_byte() {
    let input = b"[ {\"role\":\"user\",  \"content\":\"hi\"} ]\n";
    let out = run(&["compact", "--budget", "100"], input);
    assert!(out.status.success());
    assert_eq!(out.stdout, input);
}

#[test]
fn request_bodies_keep_every_other_field() {
    let mut body = json!({
        "model": "gpt-4o",
        "temperature": 0.2,
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}],
        "x_vendor": {"trace": true},
        "messages": serde_json::from_str::<Value>(SAMPLE).unwrap(),
    });
    let out = run(&["compact", "--budget", "1500"], body.to_string().as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    let mut got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got_messages = got.as_object_mut().unwrap().remove("messages").unwrap();
    body.as_object_mut().unwrap().remove("messages");
    assert_eq!(got, body);
    let got_messages = chatfold::History::from_json_value(got_messages)
        .map(|h| h.messages)
        .unwrap();
    assert!(Tiktoken::o200k_base().unwrap().count_messages(&got_messages) <= 1500);
}

#[test]
fn bad_input_exits_1_with_nothing_on_stdout() {
    let cases: [(&[u8], &str); 9] = [
        (b"not json", "error: invalid input: not valid JSON"),
        (
            b"42",
            "error: invalid input: expected an array of messages or an object",
        ),
        (
            b"{\"model\": \"m\"}",
            "error: invalid input: expected an array of messages or an object",
        ),
        (
            b"{\"messages\": {}}",
            "error: invalid input: \"messages\" must be an array",
        ),
        (
            b"[{\"role\":\"user\",\"content\":\"a\"},{\"content\":\"b\"}]",
            "error: message 1: role is missing",
        ),
        (
            b"[{\"role\": 3, \"content\": \"a\"}]",
            "error: message 0: role must be a string, not a number",
        ),
        (
            b"[{\"role\": \"user\", \"content\": 7}]",
            "error: message 0: content must be a string",
        ),
        (
            b"[{\"role\": \"assistant\", \"tool_calls\": 1}]",
            "error: message 0: tool_calls must be an array",
        ),
        (
            b"[{\"role\": \"user\", \"content\": \"\xff\xfe\"}]",
            "error: invalid input: not valid UTF-8",
        ),
    ];
    for (input, expected) in cases {
        let out = run(&["compact", "--budget", "100"], input);
        assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(input));
        assert!(out.stdout.is_empty());
        assert!(
            stderr(&out).starts_with(expected),
            "{} -> {}",
            String::from_utf8_lossy(input),
            stderr(&out)
        );
    }
    let out = run(&["compact", "--budget", "100", "/no/such/file.json"], b"");
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("error: cannot read /no/such/file.json"));
}

#[test]
fn bad_usage_exits_2() {
    let cases: [(&[&str], &str); 5] = [
        (
            &["compact", "--budget", "0"],
            "error: invalid configuration: budget (0) must be at least 1",
        ),
        (
            &["compact", "--budget", "abc"],
            "error: invalid value 'abc' for '--budget",
        ),
        (
            &["compact", "--budget", "10", "--keep-recent", "11"],
            "error: invalid configuration: keep_recent (11) must be at most 10",
        ),
        (
            &["compact", "--budget", "10", "--tokenizer", "nope"],
            "error: tokenizer: unknown tokenizer or model \"nope\"",
        ),
        (&["frobnicate"], "error: unrecognized subcommand"),
    ];
    for (args, expected) in cases {
        let out = run(args, b"[]");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        assert!(stderr(&out).starts_with(expected), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn strict_unreachable_budget_exits_4() {
    let input = json!([
        {"role": "system", "content": "policy ".repeat(200)},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "again"}
    ]);
    let out = run(
        &["compact", "--budget", "50", "--strict"],
        input.to_string().as_bytes(),
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).starts_with("error: budget of 50 tokens is unreachable"));
    // Without --strict it is written, with a warning.
    let out = run(&["compact", "--budget", "50"], input.to_string().as_bytes());
    assert!(out.status.success());
    assert!(stderr(&out).starts_with("warning: the result takes"));
}

#[test]
fn count_matches_the_library() {
    let input = chatfold::History::from_json_str(SAMPLE)
        .map(|h| h.messages)
        .unwrap();
    for (tokenizer, expected) in [
        (
            "o200k_base",
            Tiktoken::o200k_base().unwrap().count_messages(&input),
        ),
        ("gpt-4", Tiktoken::cl100k_base().unwrap().count_messages(&input)),
        ("heuristic", Heuristic.count_messages(&input)),
    ] {
        let out = run(&["count", "--tokenizer", tokenizer], SAMPLE.as_bytes());
        assert!(out.status.success());
        assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{expected}\n"));
    }
    // A history long enough to be counted on several threads: the same sum.
    let long: Vec<chatfold::Message> = (0..20_000)
        .map(|i| {
            let mut m = input[i % input.len()].clone();
            m.content = Some(chatfold::Content::Text(format!("{i} {}", m.text())));
            m
        })
        .collect();
    let json = serde_json::to_vec(&long).unwrap();
    let out = run(&["count"], &json);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = Tiktoken::o200k_base().unwrap().count_messages(&long);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{expected}\n"));
}

#[test]
fn explain_shows_every_message_and_the_cut() {
    let out = run(&["explain", "--budget", "2000", "examples/history.json"], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("budget 2000 tokens; history "), "{text}");
    assert!(text.contains("over budget"));
    assert!(text.contains("kept part starts at message"));
    let rows = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert_eq!(
        rows,
        chatfold::History::from_json_str(SAMPLE)
            .map(|h| h.messages)
            .unwrap()
            .len()
    );
    assert!(text.contains("    0  system"));
    assert!(text.contains("hoisted"));
    assert!(text.contains("folded"));
    let out = run(&["explain", "--budget", "100000"], SAMPLE.as_bytes());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("fits, nothing to do")
    );
}

proptest! {
    #![proptest_config(common::cases(24))]

    /// The binary gives what the library gives, so the library's rules hold
    /// for the CLI's output too.
    #[test]
    fn binary_output_equals_library_output(h in common::history(30), budget in 20usize..400) {
        let input = serde_json::to_string(&h).unwrap();
        let budget_arg = budget.to_string();
        let out = run(&["compact", "--budget", &budget_arg, "--tokenizer", "heuristic"], input.as_bytes());
        prop_assert!(out.status.success(), "{}", stderr(&out));
        let expected = Compactor::new(budget).compact(&h, &Extractive::new()).unwrap();
        prop_assert_eq!(messages(&out), expected.messages.into_owned());
    }
}

#[test]
fn help_says_what_the_command_does() {
    let top = String::from_utf8(run(&["--help"], b"").stdout).unwrap();
    assert!(top.contains("Anthropic Messages"), "{top}");
    assert!(top.contains("5  cannot write the output or the report"), "{top}");
    let compact = String::from_utf8(run(&["compact", "--help"], b"").stdout).unwrap();
    assert!(compact.contains("--budget <BUDGET> [INPUT]"), "{compact}");
    assert!(compact.contains("- (or nothing) for standard input"), "{compact}");
    assert!(compact.contains("--summary-role <ROLE>"), "{compact}");
    assert!(!compact.contains("OpenAI's when it says neither"), "{compact}");
    assert!(compact.contains("refuses it (exit 2)"), "{compact}");
}

#[test]
fn a_dash_reads_standard_input_everywhere() {
    let input = b"[ {\"role\":\"user\",  \"content\":\"hi\"} ]\n";
    let out = run(&["compact", "--budget", "100", "-"], input);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, input);
    let out = run(&["count", "-"], SAMPLE.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, run(&["count"], SAMPLE.as_bytes()).stdout);
    let out = run(&["explain", "--budget", "2000", "-"], SAMPLE.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("kept part starts at message")
    );
}

#[test]
fn unwritable_output_or_report_exits_5() {
    let out = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--report",
            "/no/such/dir/report.json",
            "examples/history.json",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).starts_with("error: cannot write report /no/such/dir/report.json"),
        "{}",
        stderr(&out)
    );
    // A full disk under stdout.
    if std::path::Path::new("/dev/full").exists() {
        for args in [
            &["count", "examples/history.json"][..],
            &["compact", "--budget", "2000", "examples/history.json"],
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_chatfold"))
                .args(args)
                .stdin(Stdio::null())
                .stdout(std::fs::File::create("/dev/full").unwrap())
                .stderr(Stdio::piped())
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(5), "{args:?}: {}", stderr(&out));
            assert!(
                stderr(&out).starts_with("error: cannot write output"),
                "{}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn a_trailing_tool_result_without_its_call_is_warned_of() {
    let openai = br#"[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"call_9","content":"42"}]"#;
    let out = run(&["compact", "--budget", "100"], openai);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, openai);
    assert!(
        stderr(&out).starts_with(
            "warning: message 1 is the result of tool call \"call_9\", which is not in the history"
        ),
        "{}",
        stderr(&out)
    );
    let anthropic =
        br#"[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"42"}]}]"#;
    let out = run(&["compact", "--budget", "100"], anthropic);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("warning: message 0 is the result of tool call \"toolu_9\""),
        "{}",
        stderr(&out)
    );
    let out = run(&["explain", "--budget", "100"], anthropic);
    assert!(stderr(&out).starts_with("warning: message 0"), "{}", stderr(&out));
    // Answered calls say nothing.
    let answered = br#"[{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"call_9","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_9","content":"42"}]"#;
    let out = run(&["compact", "--budget", "100"], answered);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

/// `--pin first-user,last-user`: the task and the question stand verbatim
/// right after the summary; a pin that is no pin is a usage error; pins
/// that alone pass the budget exit as an unreachable budget, saying so.
#[test]
fn pins_keep_the_task_and_the_question_after_the_summary() {
    use chatfold::Message;
    let mut history = vec![Message::user(
        "Task: migrate the orders table to Postgres 17 without downtime.",
    )];
    history.push(Message::user("What is the plan for the cut-over?"));
    for i in 0..40 {
        let id = format!("call_{i}");
        history.push(Message::assistant_tool_calls(vec![chatfold::ToolCall::new(
            &id,
            "run_sql",
            format!("{{\"batch\": {i}}}"),
        )]));
        history.push(Message::tool(
            format!("batch {i}: copied 10000 rows of orders into orders_new"),
            &id,
        ));
    }
    let input = serde_json::to_string(&history).unwrap();
    let out = run(
        &["compact", "--budget", "500", "--pin", "first-user,last-user"],
        input.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let messages = messages(&out);
    assert!(messages[0].text().starts_with("Summary of earlier conversation:"));
    assert_eq!(messages[1..3], history[..2]);
    let out = run(&["compact", "--budget", "500", "--pin", "task"], input.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("pin cannot be task"), "{}", stderr(&out));
    let out = run(
        &["compact", "--budget", "30", "--pin", "first-user", "--pin", "1"],
        input.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("pinned"), "{}", stderr(&out));
}
