//! The `chatfold` binary's report file, `explain` output and over-budget
//! warnings: what each says, and that they give the same counts.
#![cfg(feature = "cli")]

mod common;

use std::process::Output;

use chatfold::{Tiktoken, TokenCounter};
use common::cli::{SAMPLE, messages, run, scratch, stderr};
use serde_json::{Value, json};

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
