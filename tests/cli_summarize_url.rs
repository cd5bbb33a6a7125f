//! The `chatfold` binary with `--summarize-url`: an HTTP summarizer, its
//! API keys, failures, usage errors and retries.
#![cfg(feature = "cli")]

mod common;

use std::process::Output;

use common::cli::{messages, run_with, stderr};
use common::fake_llm::{FakeLlm, Reply};
use serde_json::json;

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
