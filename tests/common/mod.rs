//! What the test binaries share: the fake LLM endpoint, the case counts,
//! and the public `chatfold::testing` module under the names the tests use.
#![allow(dead_code, unused_imports)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod fake_llm;
pub mod memory;
pub mod redis_server;

use chatfold::testing::compact_checked;
pub use chatfold::testing::{
    Histories, Turn, histories as history, identifier, is_boundary, last_unit_start, render,
};
use chatfold::{Compactor, Message, TokenCounter};
use proptest::prelude::*;

/// One turn of a generated history, every oddity on.
pub fn item() -> impl Strategy<Value = Turn> {
    Histories::new().turn()
}

/// Compacts `h` with a summarizer answering `summary`, panicking with every
/// broken rule; the output, or `None` after an error a rule allows.
pub fn check_rules<C: TokenCounter>(c: &Compactor<C>, h: &[Message], summary: &str) -> Option<Vec<Message>> {
    match compact_checked(c, h, summary) {
        Ok(result) => result.map(|r| r.messages.into_owned()),
        Err(violations) => panic!("{violations}"),
    }
}

/// `cases` property-test cases, or `PROPTEST_CASES` when set (for long local runs).
pub fn cases(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config::with_cases(cases)
}

/// A conversation of `turns` user/assistant pairs with some substance.
pub fn conversation(turns: usize) -> Vec<Message> {
    let mut h = vec![Message::system("You are a helpful assistant.")];
    for i in 0..turns {
        h.push(Message::user(format!(
            "Question {i}: how do I configure the thing number {i} in the service?"
        )));
        h.push(Message::assistant(format!(
            "Answer {i}: set option_{i} in config.toml, restart, and check the logs for errors about it."
        )));
    }
    h
}

/// An error's structure, not its wording: the variant and the fields a
/// caller would match on (which message, which field, which line).
#[allow(dead_code)]
pub fn shape(e: &chatfold::Error) -> String {
    use chatfold::Error;
    use chatfold::error::{FieldError, InputError, StateError};
    let field = |f: &FieldError| match f.found() {
        None => format!("{} missing ({})", f.field(), f.expected()),
        Some(found) => format!("{} {found} ({})", f.field(), f.expected()),
    };
    match e {
        Error::InvalidInput(InputError::Json(j)) => format!("json {}:{}", j.line(), j.column()),
        Error::InvalidInput(InputError::NotUtf8 { byte, line, column }) => {
            format!("utf8 {byte} at {line}:{column}")
        }
        Error::InvalidInput(InputError::NotAHistory { found }) => format!("not a history: {found}"),
        Error::InvalidInput(InputError::MessagesNotArray { found }) => format!("messages: {found}"),
        Error::InvalidMessage { index, problem } => format!("message {index}: {}", field(problem)),
        Error::InvalidState(StateError::Json(j)) => format!("state json {}:{}", j.line(), j.column()),
        Error::InvalidState(StateError::Version { found }) => format!("state version {found:?}"),
        Error::InvalidState(StateError::Field(f)) => format!("state: {}", field(f)),
        Error::InvalidConfig(c) => format!("config {c:?}"),
        other => format!("{other:?}"),
    }
}
