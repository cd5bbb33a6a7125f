//! Every error variant and every kind of detail, built through the public
//! API where one leads to it: walking the chain (Display, then each
//! source's Display) says every cause once.

use std::fmt;

mod common;

use chatfold::error::{ConfigError, InputError, StateError, TokenizerError};
use chatfold::memory::State;
use chatfold::summarize::Prompt;
use chatfold::{Compactor, Error, FoldPolicy, Format, History, NamedCounter, SummaryRequest};

/// The texts of `e`'s chain: its Display, then each source's.
fn chain(e: &(dyn std::error::Error + 'static)) -> Vec<String> {
    let mut texts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        texts.push(s.to_string());
        source = s.source();
    }
    texts
}

/// `e`'s chain has `links` texts, none empty, and none says a later one.
fn says_each_cause_once(name: &str, e: &Error, links: usize) {
    let texts = chain(e);
    assert_eq!(texts.len(), links, "{name}: {texts:?}");
    for (i, text) in texts.iter().enumerate() {
        assert!(!text.trim().is_empty(), "{name}: an empty link in {texts:?}");
        for cause in &texts[i + 1..] {
            assert!(
                !text.contains(cause.as_str()),
                "{name}: {text:?} repeats its cause {cause:?}"
            );
        }
    }
}

/// A summarizer's error with a cause of its own.
#[derive(Debug)]
struct Upstream(std::io::Error);

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the model's endpoint did not answer")
    }
}

impl std::error::Error for Upstream {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// A reader that fails.
struct Broken;

impl std::io::Read for Broken {
    fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
        Err(std::io::Error::other("the disk went away"))
    }
}

fn input(json: &str) -> Error {
    History::from_json_str(json).unwrap_err()
}

fn state(json: &str) -> Error {
    State::from_json_str(json).unwrap_err()
}

#[test]
fn every_error_says_each_cause_once() {
    let ok = |_: &SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("a summary".to_owned());
    let mut cases: Vec<(&str, Error, usize)> = vec![
        // Error::InvalidConfig, each kind.
        ("too small", Compactor::new(0).plan(&[]).unwrap_err(), 1),
        ("too large", Compactor::new(100).keep_recent(500).plan(&[]).unwrap_err(), 1),
        (
            "empty",
            Compactor::new(100)
                .policy(FoldPolicy::new().summary_prefix(" "))
                .plan(&[])
                .unwrap_err(),
            1,
        ),
        (
            "not allowed",
            Compactor::new(100)
                .policy(FoldPolicy::new().summary_role("tool"))
                .plan(&[])
                .unwrap_err(),
            1,
        ),
        ("not allowed (format)", "yaml".parse::<Format>().unwrap_err(), 1),
        ("unknown slot", Prompt::new("{nope}", "{transcript}").unwrap_err(), 1),
        ("missing slot", Prompt::new("Summarize.", "Please.").unwrap_err(), 1),
        ("invalid", FoldPolicy::new().ledger_pattern("ORD#[0-9").unwrap_err(), 2),
        // Error::InvalidMessage.
        ("message field", input(r#"[{"role": "user"}, {"role": 7}]"#), 1),
        // Error::InvalidInput, each kind.
        ("json", input("[{"), 1),
        ("not utf-8", History::from_reader(&b"[\"\xff\"]"[..]).unwrap_err(), 1),
        ("io", History::from_reader(Broken).unwrap_err(), 2),
        ("not a history", input("7"), 1),
        ("messages not an array", input(r#"{"messages": 7}"#), 1),
        ("body field", input(r#"{"model": "claude-x", "system": [{"type": "text", "text": 5}], "messages": []}"#), 1),
        (
            "mixed formats",
            input(
                r#"{"messages": [
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                    {"role": "tool", "tool_call_id": "c1", "content": "x"}
                ]}"#,
            ),
            1,
        ),
        (
            "wrong format",
            History::from_json_str(r#"{"messages": [{"role": "tool", "tool_call_id": "c1", "content": "x"}]}"#)
                .unwrap()
                .into_format(Format::Anthropic)
                .unwrap_err(),
            1,
        ),
        // Error::InvalidState, each kind.
        ("state json", state("{"), 1),
        ("state version", state(r#"{"version": 9, "summary": "", "buffer": []}"#), 1),
        ("state field", state(r#"{"version": 2, "summary": 5, "buffer": []}"#), 1),
        // Error::Summarize, with a cause of its own.
        (
            "summarize",
            Compactor::new(200)
                .compact(&common::conversation(30), &|_: &SummaryRequest<'_>| {
                    Err(Upstream(std::io::Error::other("connection reset by peer")))
                })
                .unwrap_err(),
            3,
        ),
        (
            "empty summary",
            Compactor::new(200)
                .compact(&common::conversation(30), &|_: &SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("  ".to_owned()))
                .unwrap_err(),
            1,
        ),
        (
            "budget unreachable",
            Compactor::new(20).strict(true).compact(&common::conversation(30), &ok).unwrap_err(),
            1,
        ),
        // Error::Conversion (Error::Tokenizer's kinds below).
        (
            "conversion",
            History::from_json_str(
                r#"{"model": "claude-x", "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "yes"}]}
                ]}"#,
            )
            .unwrap()
            .convert(Format::OpenAi)
            .unwrap_err(),
            1,
        ),
    ];
    #[cfg(feature = "tiktoken")]
    cases.extend([
        (
            "unknown tokenizer",
            "no-such-model".parse::<NamedCounter>().unwrap_err(),
            1,
        ),
        (
            "not a chat encoding",
            "text-davinci-003".parse::<NamedCounter>().unwrap_err(),
            1,
        ),
    ]);
    // Without tiktoken, every name but `heuristic` needs it.
    #[cfg(not(feature = "tiktoken"))]
    cases.extend([
        (
            "unknown tokenizer",
            Error::Tokenizer(TokenizerError::Unknown {
                name: "no-such-model".to_owned(),
            }),
            1,
        ),
        (
            "needs tiktoken",
            "o200k_base".parse::<NamedCounter>().unwrap_err(),
            1,
        ),
    ]);
    #[cfg(feature = "redis")]
    cases.push((
        "invalid (redis url)",
        chatfold::cache::RedisCache::new("http://x").unwrap_err(),
        2,
    ));

    for (name, e, links) in &cases {
        says_each_cause_once(name, e, *links);
    }

    // Each case is the kind it is named for.
    let kind = |e: &Error| match e {
        Error::InvalidConfig(c) => match c {
            ConfigError::TooSmall { .. } => "too small",
            ConfigError::TooLarge { .. } => "too large",
            ConfigError::Empty { .. } => "empty",
            ConfigError::NotAllowed {
                setting: "format", ..
            } => "not allowed (format)",
            ConfigError::NotAllowed { .. } => "not allowed",
            ConfigError::UnknownSlot { .. } => "unknown slot",
            ConfigError::MissingSlot { .. } => "missing slot",
            ConfigError::Invalid {
                setting: "redis_url", ..
            } => "invalid (redis url)",
            ConfigError::Invalid { .. } => "invalid",
            _ => "another config error",
        },
        Error::InvalidMessage { .. } => "message field",
        Error::InvalidInput(i) => match i {
            InputError::Json(_) => "json",
            InputError::NotUtf8 { .. } => "not utf-8",
            InputError::Io(_) => "io",
            InputError::NotAHistory { .. } => "not a history",
            InputError::MessagesNotArray { .. } => "messages not an array",
            InputError::Field(_) => "body field",
            InputError::MixedFormats { .. } => "mixed formats",
            InputError::WrongFormat { .. } => "wrong format",
            _ => "another input error",
        },
        Error::InvalidState(s) => match s {
            StateError::Json(_) => "state json",
            StateError::Version { .. } => "state version",
            StateError::Field(_) => "state field",
            _ => "another state error",
        },
        Error::Summarize(_) => "summarize",
        Error::EmptySummary => "empty summary",
        Error::BudgetUnreachable { .. } => "budget unreachable",
        Error::Tokenizer(t) => match t {
            TokenizerError::Unknown { .. } => "unknown tokenizer",
            TokenizerError::NotChat { .. } => "not a chat encoding",
            TokenizerError::NeedsTiktoken { .. } => "needs tiktoken",
            _ => "another tokenizer error",
        },
        Error::Conversion(_) => "conversion",
        _ => "another error",
    };
    for (name, e, _) in &cases {
        assert_eq!(kind(e), *name, "{e:?}");
    }
}

#[test]
fn a_display_that_repeats_its_source_is_caught() {
    /// What `ConfigError::Invalid` used to print: its cause in Display too.
    #[derive(Debug)]
    struct Twice(std::io::Error);
    impl fmt::Display for Twice {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "cannot read: {}", self.0)
        }
    }
    impl std::error::Error for Twice {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let e = Error::Summarize(Box::new(Twice(std::io::Error::other("gone"))));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        says_each_cause_once("twice", &e, 3)
    }));
    assert!(caught.is_err());
}

#[test]
fn the_detail_is_in_display_and_its_cause_is_the_source() {
    let e = History::from_reader(Broken).unwrap_err();
    assert_eq!(e.to_string(), "invalid input: cannot read the input");
    assert_eq!(chain(&e)[1], "the disk went away");
    let e = FoldPolicy::new().ledger_pattern("(").unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"invalid configuration: ledger_pattern "(" is not valid"#
    );
    assert!(std::error::Error::source(&e).is_some());
}
