//! Running the `chatfold` binary as a user would, for the CLI test targets.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use chatfold::Message;

pub const SAMPLE: &str = include_str!("../../examples/history.json");

pub fn run(args: &[&str], stdin: &[u8]) -> Output {
    run_with(args, stdin, &[])
}

/// Runs the binary with `env` set and no API keys from the test's own environment.
pub fn run_with(args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> Output {
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

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn messages(out: &Output) -> Vec<Message> {
    chatfold::History::from_json_str(std::str::from_utf8(&out.stdout).unwrap())
        .map(|h| h.messages)
        .unwrap()
}

/// A fresh folder for one test's files.
pub fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("chatfold-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
