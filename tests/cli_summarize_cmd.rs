//! The `chatfold` binary with `--summarize-cmd`: what the command is given,
//! its deadline and failures, and the summary cache and chunked folds.
#![cfg(feature = "cli")]

mod common;

use std::process::{Command, Stdio};

use common::cli::{messages, run, stderr};
use serde_json::Value;

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
fn cache_dir_makes_a_repeated_transcript_cost_one_summarizer_call() {
    let dir = std::env::temp_dir().join(format!("chatfold-cli-cache-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let calls = dir.join("calls");
    let cmd = format!("echo call >> {}; echo 'The SRE session so far.'", calls.display());
    let cache = dir.join("cache");
    // One run with the cache, its report written to `report`.
    let compact = |report: &str| {
        let report = dir.join(report);
        let args = [
            "compact",
            "--budget",
            "2000",
            "--summarize-cmd",
            cmd.as_str(),
            "--cache-dir",
            cache.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
            "examples/history.json",
        ];
        run(&args, b"")
    };
    let first = compact("r1.json");
    assert!(first.status.success(), "{}", stderr(&first));
    let second = compact("r2.json");
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
