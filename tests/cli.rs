//! The `chatfold` binary, run as a user would run it.
#![cfg(feature = "cli")]

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use chatfold::{Compactor, Extractive, Heuristic, Message, Tiktoken, TokenCounter};
use common::fake_llm::{FakeLlm, Reply};
use proptest::prelude::*;
use serde_json::{Value, json};

const SAMPLE: &str = include_str!("../examples/history.json");

fn run(args: &[&str], stdin: &[u8]) -> Output {
    run_with(args, stdin, &[])
}

/// Runs the binary with `env` set and no API keys from the test's own environment.
fn run_with(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_chatfold"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn messages(out: &Output) -> Vec<Message> {
    chatfold::History::from_json_str(std::str::from_utf8(&out.stdout).unwrap())
        .map(|h| h.messages)
        .unwrap()
}

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
fn summarize_command_gets_the_transcript_and_the_allowance() {
    let out = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            "echo \"allowance=$CHATFOLD_MAX_SUMMARY_TOKENS\"; grep -c '^user:'",
            "examples/history.json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let output = messages(&out);
    let summary = output
        .iter()
        .find(|m| m.text().starts_with(chatfold::DEFAULT_SUMMARY_PREFIX))
        .unwrap();
    let body = summary
        .text()
        .strip_prefix(chatfold::DEFAULT_SUMMARY_PREFIX)
        .unwrap()
        .to_owned();
    // The command's own text, before the ledger section.
    let prose = body.split("\n\n").next().unwrap();
    let (allowance, users) = prose.split_once('\n').unwrap();
    assert!(
        allowance
            .strip_prefix("allowance=")
            .unwrap()
            .parse::<usize>()
            .unwrap()
            > 100
    );
    assert!(users.parse::<usize>().unwrap() > 10, "{body}");
}

#[test]
fn a_process_the_command_leaves_holding_its_input_ends_at_the_deadline() {
    // A transcript larger than a pipe holds, so that its writer waits on a
    // reader that never reads: a process the command started with its
    // input, which would mark a file after 2 s. The command answers at
    // once; the deadline ends that process too, so the mark never comes.
    let turns: Vec<serde_json::Value> = (0..240)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": format!("turn {i} {}", "words and more words ".repeat(50))})
        })
        .collect();
    let input = serde_json::to_vec(&turns).unwrap();
    let dir = std::env::temp_dir().join(format!("chatfold-cli-group-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mark = dir.join("mark");
    let _ = std::fs::remove_file(&mark);
    let cmd = format!(
        "exec 3<&0; (sleep 2; touch '{}') <&3 3<&- & echo summary",
        mark.display()
    );
    let started = std::time::Instant::now();
    let out = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            &cmd,
            "--summarize-timeout",
            "0.5",
        ],
        &input,
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).trim_end(),
        "error: summarizer failed: summarize command timed out after 0.5 s"
    );
    // Past the time the mark would have come.
    std::thread::sleep(std::time::Duration::from_secs(3).saturating_sub(started.elapsed()));
    assert!(
        !mark.exists(),
        "the process the command started outlived its deadline"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_interrupt_ends_the_summarize_command_too() {
    // The command (in a process group of its own) says it started, and
    // what it started would mark a file 2 s later; an interrupt to
    // chatfold while it waits must end them with it.
    let dir = std::env::temp_dir().join(format!("chatfold-cli-sigint-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (started, mark) = (dir.join("started"), dir.join("mark"));
    let _ = std::fs::remove_file(&started);
    let _ = std::fs::remove_file(&mark);
    let cmd = format!(
        "touch '{}'; (sleep 2; touch '{}') & sleep 10; echo summary",
        started.display(),
        mark.display()
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_chatfold"));
    command
        .args([
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            &cmd,
            "examples/history.json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // As a terminal starts it: a run in a shell's background (`cmd &`)
    // inherits an ignored interrupt, which chatfold rightly leaves ignored.
    // SAFETY: `signal` is async-signal-safe, as the time between fork and
    // exec asks.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let begun = std::time::Instant::now();
    while !started.exists() {
        assert!(begun.elapsed().as_secs() < 30, "the command never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let status = child.wait().unwrap();
    assert!(!status.success(), "chatfold went on after the interrupt");
    // Past the time the mark would have come.
    std::thread::sleep(std::time::Duration::from_secs(3).saturating_sub(begun.elapsed()));
    assert!(!mark.exists(), "the command outlived the interrupt");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_timeout_too_long_for_the_clock_is_a_long_one() {
    // 1e19 s is a valid duration, but no clock adds it to now.
    let ok = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            "echo summary",
            "--summarize-timeout",
            "1e19",
            "examples/history.json",
        ],
        b"",
    );
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    // An HTTP summarizer with nothing listening: its error, not a panic.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    let failed = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--summarize-url",
            &url,
            "--summarize-model",
            "m",
            "--summarize-retries",
            "0",
            "--summarize-timeout",
            "1e19",
            "examples/history.json",
        ],
        b"",
    );
    assert_eq!(failed.status.code(), Some(3), "{}", stderr(&failed));
    assert!(
        stderr(&failed).contains("connection failed"),
        "{}",
        stderr(&failed)
    );
}

#[test]
fn summarize_command_failures_exit_3() {
    let cases = [
        (
            "echo 'model overloaded' >&2; exit 7",
            "--summarize-timeout",
            "10",
            "error: summarizer failed: summarize command exited with status 7: model overloaded",
        ),
        (
            "cat > /dev/null",
            "--summarize-timeout",
            "10",
            "error: summarizer returned an empty summary",
        ),
        (
            "sleep 10",
            "--summarize-timeout",
            "0.3",
            "error: summarizer failed: summarize command timed out after 0.3 s",
        ),
        // Its stdout, or both its pipes, closed while it runs on: still
        // waited for, to the deadline, or to its end.
        (
            "exec >&-; sleep 10",
            "--summarize-timeout",
            "0.3",
            "error: summarizer failed: summarize command timed out after 0.3 s",
        ),
        (
            "exec >&- 2>&-; sleep 10",
            "--summarize-timeout",
            "0.3",
            "error: summarizer failed: summarize command timed out after 0.3 s",
        ),
        (
            "exec >&- 2>&-; sleep 0.2; exit 4",
            "--summarize-timeout",
            "10",
            "error: summarizer failed: summarize command exited with status 4",
        ),
        // It fails, and what it started holds its output open: its failure.
        (
            "sleep 30 & exit 5",
            "--summarize-timeout",
            "0.3",
            "error: summarizer failed: summarize command exited with status 5",
        ),
        // It exits, and a process it started holds its output open past
        // the deadline.
        (
            "sleep 30 & echo summary",
            "--summarize-timeout",
            "0.3",
            "error: summarizer failed: summarize command timed out after 0.3 s",
        ),
        (
            "exec >&-; sleep 0.2; echo 'gone' >&2; exit 5",
            "--summarize-timeout",
            "10",
            "error: summarizer failed: summarize command exited with status 5: gone",
        ),
    ];
    for (cmd, flag, secs, expected) in cases {
        let out = run(
            &[
                "compact",
                "--budget",
                "2000",
                "--summarize-cmd",
                cmd,
                flag,
                secs,
                "examples/history.json",
            ],
            b"",
        );
        assert_eq!(out.status.code(), Some(3), "{cmd}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        assert_eq!(stderr(&out).trim_end(), expected);
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

/// `compact --budget 2000 --report FILE` on the sample, in a scratch folder
/// named for `name`: the folder, the run and the report's text.
fn sample_report(name: &str) -> (std::path::PathBuf, Output, String) {
    let dir = scratch(name);
    let path = dir.join("report.json");
    let out = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--report",
            path.to_str().unwrap(),
            "examples/history.json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&path).unwrap();
    (dir, out, text)
}

#[test]
fn report_lists_every_index_once() {
    let (dir, out, text) = sample_report("report");
    let report: Value = serde_json::from_str(&text).unwrap();
    let input = chatfold::History::from_json_str(SAMPLE)
        .map(|h| h.messages)
        .unwrap();
    assert_eq!(report["budget"], 2000);
    assert_eq!(
        report["tokens_before"],
        Tiktoken::o200k_base().unwrap().count_messages(&input)
    );
    assert_eq!(
        report["tokens_after"],
        Tiktoken::o200k_base().unwrap().count_messages(&messages(&out))
    );
    assert_eq!(report["summarized"], true);
    assert_eq!(report["over_budget"], false);
    let mut all: Vec<u64> = ["kept", "hoisted", "folded", "previous_summary"]
        .iter()
        .flat_map(|k| report[k].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()))
        .collect();
    all.sort_unstable();
    assert_eq!(all, (0..input.len() as u64).collect::<Vec<_>>());
    let pinned: Vec<usize> = (0..input.len()).filter(|&i| input[i].role.is_pinned()).collect();
    assert_eq!(report["hoisted"], json!(pinned));
    std::fs::remove_dir_all(&dir).unwrap();
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

/// `compact` on the sample with an HTTP summarizer at `server`, and `extra` flags.
fn compact_with_llm(server: &FakeLlm, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let url = server.url();
    let mut args = vec![
        "compact",
        "--budget",
        "2000",
        "--summarize-url",
        &url,
        "--summarize-model",
        "test-model",
    ];
    args.extend_from_slice(extra);
    args.push("examples/history.json");
    run_with(&args, b"", env)
}

#[test]
fn summarize_url_puts_the_models_summary_in_the_output() {
    let server = FakeLlm::start(vec![Reply::openai("The user set up a deploy pipeline.")]);
    let out = compact_with_llm(&server, &[], &[("OPENAI_API_KEY", "sk-cli-test-0001")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = messages(&out)
        .into_iter()
        .find(|m| m.text().starts_with(chatfold::DEFAULT_SUMMARY_PREFIX))
        .unwrap();
    assert!(
        summary.text().contains("The user set up a deploy pipeline."),
        "{}",
        summary.text()
    );
    let sent = &server.received()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-cli-test-0001"));
    assert_eq!(sent.body["model"], "test-model");
    assert!(sent.body["max_tokens"].as_u64().unwrap() > 100);

    // Anthropic, with the key from a variable named on the command line; a
    // local URL needs no key otherwise.
    let server = FakeLlm::start(vec![Reply::anthropic("Claude's summary.")]);
    let out = compact_with_llm(
        &server,
        &["--summarize-provider", "anthropic", "--api-key-env", "MY_KEY"],
        &[("MY_KEY", "ak-cli-test-0002")],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Claude's summary."));
    let sent = &server.received()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("ak-cli-test-0002"));

    let server = FakeLlm::start(vec![Reply::openai("keyless")]);
    let out = compact_with_llm(&server, &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(server.received()[0].header("authorization"), None);
}

#[test]
fn summarize_url_failures_exit_3_with_the_status_and_message() {
    let key = "sk-cli-secret-9876";
    let unauthorized = Reply::status(
        401,
        json!({"error": {"message": format!("Incorrect API key provided: {key}")}}),
    );
    let slow = Reply::Late(std::time::Duration::from_secs(5), Box::new(Reply::openai("late")));
    let cases: [(Reply, &[&str], &str); 4] = [
        (
            unauthorized,
            &[],
            "error: summarizer failed: openai: HTTP 401: Incorrect API key provided: <redacted>",
        ),
        (
            Reply::status(500, json!({"error": {"message": "boom"}})),
            &["--summarize-retries", "0"],
            "error: summarizer failed: openai: HTTP 500: boom",
        ),
        (
            Reply::openai(""),
            &[],
            "error: summarizer failed: openai: the answer has no text",
        ),
        (
            slow,
            &["--summarize-timeout", "0.3", "--summarize-retries", "0"],
            "error: summarizer failed: openai: timed out: no answer within 0.3 s",
        ),
    ];
    for (reply, extra, expected) in cases {
        let server = FakeLlm::start(vec![reply]);
        let out = compact_with_llm(&server, extra, &[("OPENAI_API_KEY", key)]);
        assert_eq!(out.status.code(), Some(3), "{expected}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        let err = stderr(&out);
        assert!(err.starts_with(expected), "{err}");
        assert!(!err.contains(key), "{err}");
    }
}

/// Every URL here is under `.invalid` (never resolved) or on loopback, so
/// even a broken key rule cannot send anything beyond this machine; the
/// rule for the providers' own hosts is unit-tested in `summarizers.rs`.
#[test]
fn summarize_url_usage_errors_exit_2() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 9] = [
        (
            // The OpenAI key is not sent to a third party.
            &[
                "--summarize-url",
                "https://llm.invalid/api/v1",
                "--summarize-model",
                "m",
            ],
            &[("OPENAI_API_KEY", "sk-not-for-them")],
            "error: https://llm.invalid: name the variable that holds its API key with --api-key-env",
        ),
        (
            // Nor to a look-alike of its own host.
            &[
                "--summarize-url",
                "https://openai.com.evil.invalid/v1",
                "--summarize-model",
                "m",
            ],
            &[("OPENAI_API_KEY", "sk-not-for-them")],
            "error: https://openai.com.evil.invalid: name the variable",
        ),
        (
            // Nor to the host after a userinfo that looks like its own.
            &[
                "--summarize-url",
                "https://api.openai.com@evil.invalid/v1",
                "--summarize-model",
                "m",
            ],
            &[("OPENAI_API_KEY", "sk-not-for-them")],
            "error: https://evil.invalid: name the variable",
        ),
        (
            &[
                "--summarize-url",
                "https://llm.invalid/v1",
                "--summarize-model",
                "m",
                "--summarize-provider",
                "anthropic",
            ],
            &[("ANTHROPIC_API_KEY", "sk-not-for-them")],
            "error: https://llm.invalid: name the variable that holds its API key with --api-key-env (ANTHROPIC_API_KEY is only sent to anthropic.com",
        ),
        (
            &[
                "--summarize-url",
                "http://localhost:1/v1",
                "--summarize-model",
                "m",
                "--api-key-env",
                "UNSET_VAR_X",
            ],
            &[],
            "error: --api-key-env: UNSET_VAR_X is not set",
        ),
        (
            &[
                "--summarize-url",
                "ftp://llm.invalid/v1",
                "--summarize-model",
                "m",
            ],
            &[],
            "error: --summarize-url \"ftp://llm.invalid/v1\" is not an http:// or https:// URL",
        ),
        (
            &[
                "--summarize-url",
                "https://llm.invalid\\@127.0.0.1:1/v1",
                "--summarize-model",
                "m",
            ],
            &[("OPENAI_API_KEY", "sk-not-for-them")],
            "error: --summarize-url \"https://llm.invalid\\\\@127.0.0.1:1/v1\" is not an http:// or https:// URL",
        ),
        (
            &["--summarize-url", "http://localhost:1/v1"],
            &[],
            "error: the following required arguments",
        ),
        (
            &[
                "--summarize-url",
                "http://localhost:1/v1",
                "--summarize-model",
                "m",
                "--summarize-cmd",
                "cat",
            ],
            &[],
            "error: the argument '--summarize-url <URL>' cannot be used with '--summarize-cmd <CMD>'",
        ),
    ];
    for (flags, env, expected) in cases {
        let mut args = vec!["compact", "--budget", "2000"];
        args.extend_from_slice(flags);
        args.push("examples/history.json");
        let out = run_with(&args, b"", env);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        assert!(stderr(&out).starts_with(expected), "{flags:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("sk-not-for-them"));
    }
}

#[test]
fn summarize_url_retries_are_reported_on_stderr() {
    let limited = Reply::Answer(429, vec![("retry-after", "0.1".to_owned())], "{}".to_owned());
    let server = FakeLlm::start(vec![limited, Reply::openai("after a retry")]);
    let out = compact_with_llm(&server, &[], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.starts_with("warning: openai: HTTP 429"), "{err}");
    assert!(err.contains("retry 1 of 3"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("after a retry"));
}

#[test]
fn cache_dir_makes_a_repeated_transcript_cost_one_summarizer_call() {
    let dir = std::env::temp_dir().join(format!("chatfold-cli-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let calls = dir.join("calls");
    let cmd = format!("echo call >> {}; echo 'The SRE session so far.'", calls.display());
    let cache = dir.join("cache");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            cmd.as_str(),
            "--cache-dir",
        ];
        a.push(cache.to_str().unwrap());
        a.extend_from_slice(extra);
        a.push("examples/history.json");
        a.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let first = run(
        &args(&["--report", dir.join("r1.json").to_str().unwrap()])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        b"",
    );
    assert!(first.status.success(), "{}", stderr(&first));
    let second = run(
        &args(&["--report", dir.join("r2.json").to_str().unwrap()])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        b"",
    );
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(first.stdout, second.stdout);
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 1);
    let report: Value = serde_json::from_slice(&std::fs::read(dir.join("r2.json")).unwrap()).unwrap();
    assert_eq!(report["reused"], report["cut"]);
    assert_eq!(report["folds"], 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn max_fold_input_tokens_folds_in_several_calls() {
    let dir = std::env::temp_dir().join(format!("chatfold-cli-chunks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let calls = dir.join("calls");
    let cmd = format!("echo call >> {}; echo 'Folded.'", calls.display());
    let report = dir.join("report.json");
    let out = run(
        &[
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            &cmd,
            "--max-fold-input-tokens",
            "1500",
            "--report",
            report.to_str().unwrap(),
            "examples/history.json",
        ],
        b"",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let n = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert!(n >= 2, "{n} calls");
    let report: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(report["folds"], n);
    std::fs::remove_dir_all(&dir).unwrap();
}

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

/// A fresh folder for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("chatfold-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

#[test]
fn the_report_keeps_index_lists_on_one_line() {
    let (dir, _, text) = sample_report("report-lines");
    let messages = chatfold::History::from_json_str(SAMPLE).unwrap().messages.len();
    let fields = [
        "budget",
        "tokens_before",
        "tokens_before_exact",
        "tokens_after",
        "summarized",
        "over_budget",
        "summary_truncated",
        "summary_allowance",
        "prose_allowance",
        "cut",
        "reason",
        "kept",
        "hoisted",
        "folded",
        "previous_summary",
        "cleared",
        "ledger",
        "ledger_dropped",
        "reused",
        "folds",
    ];
    assert_eq!(text.lines().count(), fields.len() + 2, "{text}");
    assert!(text.lines().count() * 3 < messages, "{text}");
    let report: Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = report.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, fields);
    assert!(report["folded"].as_array().unwrap().len() > 10);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> usize {
    let at = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix:?} not in {text:?}"))
        + prefix.len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// One long system message: no budget of 20 tokens can hold it.
fn unreachable_input() -> String {
    json!([
        {"role": "system", "content": "policy ".repeat(200)},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "again"}
    ])
    .to_string()
}

#[test]
fn the_over_budget_warning_and_the_report_give_one_count() {
    let dir = scratch("one-count");
    let path = dir.join("report.json");
    let input = unreachable_input();
    let out = run(
        &["compact", "--budget", "20", "--report", path.to_str().unwrap()],
        input.as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let warned = number_after(&stderr(&out), "warning: the result takes ");
    let report: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(report["over_budget"], true);
    assert_eq!(report["tokens_after"], warned);
    assert_eq!(
        Tiktoken::o200k_base().unwrap().count_messages(&messages(&out)),
        warned
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The library's strict error counts the result it refused: the same
/// figure as the `tokens_after` of the result it gives without `--strict`
/// (the history, unchanged, since a summary would not make it smaller).
#[test]
fn the_strict_error_gives_the_same_count_as_the_warning() {
    let input = unreachable_input();
    let out = run(&["compact", "--budget", "20"], input.as_bytes());
    let warned = number_after(&stderr(&out), "warning: the result takes ");
    let out = run(&["compact", "--budget", "20", "--strict"], input.as_bytes());
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert_eq!(
        number_after(&stderr(&out), "the result needs "),
        warned,
        "{}",
        stderr(&out)
    );
}

#[test]
fn explain_names_both_summary_sizes() {
    let out = run(&["explain", "--budget", "2000", "examples/history.json"], b"");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let told = number_after(&text, "the summarizer is told at most ");
    let message = number_after(
        &text,
        "the summary message's text, ledger included, takes at most ",
    );
    assert!(told > 0 && told <= message, "{text}");
    assert!(
        text.contains(&format!(
            "one summary message of at most {message} tokens of text"
        )),
        "{text}"
    );
    assert!(text.contains("hoisted (kept before the summary)"), "{text}");
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

#[test]
fn an_empty_history_over_a_tiny_budget_is_told_why() {
    let out = run(&["compact", "--budget", "1"], b"[]");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
    let warning = stderr(&out);
    assert!(
        warning.starts_with("warning: the result takes 3 tokens, over the budget of 1"),
        "{warning}"
    );
    assert!(
        warning.contains("no messages") && warning.contains("reply priming"),
        "{warning}"
    );
    assert!(!warning.contains("latest turn"), "{warning}");
    // With messages the reason is theirs.
    let out = run(&["compact", "--budget", "20"], unreachable_input().as_bytes());
    assert!(stderr(&out).contains("the system messages and the latest turn do not fit"));
}
