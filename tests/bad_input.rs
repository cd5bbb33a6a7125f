//! The bad-input catalogue: every malformed shape we know of, and the exact
//! error it gets (or, for legal but odd input, the documented behaviour).
//! README.md has the same table.

mod common;

use std::convert::Infallible;

use chatfold::memory::State;
use chatfold::{
    Compactor, Error, Extractive, Heuristic, History, Message, SummaryRequest, TokenCounter, ToolCall,
};

/// The error's structure (`common::shape`): its wording is free to change.
fn history_error(json: &str) -> String {
    common::shape(&History::from_json_str(json).unwrap_err())
}

#[test]
fn malformed_histories_get_exact_errors() {
    let cases: &[(&str, &str)] = &[
        ("", "json 1:0"),
        ("nope", "json 1:2"),
        ("[", "json 1:1"),
        ("[] []", "json 1:4"),
        ("42", "not a history: a number"),
        ("\"hi\"", "not a history: a string"),
        ("null", "not a history: null"),
        ("true", "not a history: a boolean"),
        (
            r#"{"model": "m"}"#,
            "not a history: an object without \"messages\"",
        ),
        (r#"{"messages": {}}"#, "messages: an object"),
        (r#"{"messages": "hi"}"#, "messages: a string"),
        ("[1]", "message 0:  a number (an object)"),
        (
            r#"[{"role": "user", "content": "a"}, []]"#,
            "message 1:  an array (an object)",
        ),
        (r#"[{"content": "x"}]"#, "message 0: role missing (a string)"),
        (r#"[{"role": null}]"#, "message 0: role null (a string)"),
        (r#"[{"role": 5}]"#, "message 0: role a number (a string)"),
        (
            r#"[{"role": "user", "content": 7}]"#,
            "message 0: content a number (a string, an array of parts or null)",
        ),
        (
            r#"[{"role": "user", "content": {"text": "x"}}]"#,
            "message 0: content an object (a string, an array of parts or null)",
        ),
        (
            r#"[{"role": "user", "content": true}]"#,
            "message 0: content a boolean (a string, an array of parts or null)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": {}}]"#,
            "message 0: tool_calls an object (an array)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": ["c1"]}]"#,
            "message 0: tool_calls[0] a string (an object)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]"#,
            "message 0: tool_calls[0].id missing (a string)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]"#,
            "message 0: tool_calls[0].id a number (a string)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]"#,
            "message 0: tool_calls[0].function.name missing (a string)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}]"#,
            "message 0: tool_calls[0].function a string (an object)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}]"#,
            "message 0: tool_calls[0].function.arguments an object (a string)",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "name": "f", "arguments": 3}]}]"#,
            "message 0: tool_calls[0].arguments a number (a string)",
        ),
        (
            r#"[{"role": "tool", "content": "x", "tool_call_id": 7}]"#,
            "message 0: tool_call_id a number (a string)",
        ),
        (
            r#"[{"role": "user", "content": "x", "name": ["a"]}]"#,
            "message 0: name an array (a string)",
        ),
        (
            r#"[{"role": "user", "content": "x", "id": {}}]"#,
            "message 0: id an object (a string)",
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(history_error(json), *expected, "{json}");
    }
}

#[test]
fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
    for depth in [200, 100_000] {
        let json = format!(
            r#"[{{"role": "user", "content": "x", "deep": {}{}}}]"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let err = History::from_json_str(&json).unwrap_err();
        let chatfold::Error::InvalidInput(chatfold::error::InputError::Json(json)) = &err else {
            panic!("{err}");
        };
        assert!(json.message().contains("recursion limit"), "{err}");
    }
}

#[test]
fn invalid_utf8_is_an_error() {
    let bytes: &[u8] = b"[{\"role\": \"user\", \"content\": \"caf\xe9\"}]";
    let err = History::from_reader(bytes).unwrap_err();
    assert_eq!(common::shape(&err), "utf8 33 at 1:34");
    // A character cut off at the very end.
    let err = History::from_reader(&b"[\"\xe6\x97"[..]).unwrap_err();
    assert_eq!(common::shape(&err), "utf8 2 at 1:3");
}

#[test]
fn malformed_states_get_exact_errors() {
    let cases = [
        (
            r#"{"version": 3, "summary": "", "buffer": []}"#,
            "state version Some(\"3\")",
        ),
        (
            r#"{"version": 2, "buffer": "x"}"#,
            "state: buffer a string (an array)",
        ),
        (
            r#"{"version": 2, "buffer": [7]}"#,
            "state: buffer[0] a number (an object)",
        ),
        (
            r#"{"version": 2, "summary": []}"#,
            "state: summary an array (a string)",
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(common::shape(&State::from_json_str(json).unwrap_err()), expected);
    }
}

#[test]
fn bad_configuration_is_refused_before_anything_runs() {
    let h = [Message::user("x")];
    let never = |_: &SummaryRequest<'_>| -> Result<String, Infallible> { unreachable!("not called") };
    let cases = [
        (
            Compactor::new(0),
            "config TooSmall { setting: \"budget\", value: 0, min: 1, limit: None }",
        ),
        (
            Compactor::new(10).keep_recent(11),
            "config TooLarge { setting: \"keep_recent\", value: 11, max: 10, limit: Some(\"budget\") }",
        ),
        (
            Compactor::new(10).policy(chatfold::FoldPolicy::new().summary_prefix("")),
            "config Empty { setting: \"summary_prefix\" }",
        ),
        (
            Compactor::new(10).policy(chatfold::FoldPolicy::new().summary_role("tool")),
            "config NotAllowed { setting: \"summary_role\", value: \"tool\", why: \"a summary must not open the history as a response\" }",
        ),
    ];
    for (compactor, expected) in cases {
        assert_eq!(
            common::shape(&compactor.compact(&h, &never).unwrap_err()),
            expected
        );
    }
    assert!(matches!(
        chatfold::memory::RollingMemory::new(
            chatfold::memory::Settings::new(0).summarizer(Extractive::new())
        ),
        Err(Error::InvalidConfig { .. })
    ));
}

/// Legal but odd: a result whose call never appears is an orphan, its own
/// unit, and not the opening of the kept part when a user turn can be.
#[test]
fn orphan_results_are_their_own_units() {
    let mut h = vec![Message::user("x ".repeat(300))];
    h.push(Message::tool("a result nobody asked for", "ghost"));
    h.push(Message::user("latest"));
    let r = Compactor::new(60).compact(&h, &Extractive::new()).unwrap();
    assert_eq!(r.messages.last(), h.last());
    assert!(
        r.messages
            .iter()
            .all(|m| m.tool_call_id.as_deref() != Some("ghost")),
        "orphan left at the head"
    );
}

/// Legal but odd: a reused call id; each result answers the nearest earlier call.
#[test]
fn duplicate_call_ids_pair_with_the_nearest_call() {
    let call = |text: &str| {
        let mut m = Message::assistant_tool_calls(vec![ToolCall::new("dup", "f", "{}")]);
        m.content = Some(chatfold::Content::Text(text.into()));
        m
    };
    let h = vec![
        Message::user("u1 ".repeat(100)),
        call("first"),
        Message::tool("r1", "dup"),
        Message::user("u2"),
        call("second"),
        Message::tool("r2", "dup"),
    ];
    let r = Compactor::new(70)
        .fold_to(70)
        .keep_recent(30)
        .compact(&h, &Extractive::new())
        .unwrap();
    // The second exchange stays whole; the first is folded whole.
    assert_eq!(&r.messages[r.messages.len() - 3..], &h[3..]);
}

/// A 50 MB message: parsed, counted, kept (as the latest) and flagged, or folded.
#[test]
fn enormous_single_message() {
    let big = "word ".repeat(10_000_000);
    let json = serde_json::to_string(&vec![Message::user("hello"), Message::user(big.clone())]).unwrap();
    let h = History::from_json_str(&json).unwrap().messages;
    assert_eq!(h[1].text().len(), big.len());
    let r = Compactor::new(1_000).compact(&h, &Extractive::new()).unwrap();
    assert!(r.over_budget && r.messages.last() == h.last());
    let h = vec![Message::user(big), Message::user("latest")];
    let r = Compactor::new(1_000).compact(&h, &Extractive::new()).unwrap();
    assert!(r.summarized && !r.over_budget && r.tokens_after <= 1_000);
}

/// Budgets of 1 and `usize::MAX`, and counters that answer 0 or `usize::MAX`
/// for everything: no overflow, no panic, and the flags tell the truth.
#[test]
fn extreme_budgets_and_counters() {
    let h: Vec<Message> = (0..50).map(|i| Message::user(format!("message {i}"))).collect();
    let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("s".to_owned());
    let zero = |_: &str| 0usize;
    let huge = |_: &str| usize::MAX;
    for budget in [1, 2, 3, 100, usize::MAX] {
        let r = Compactor::new(budget).compact(&h, &summarize).unwrap();
        assert_eq!(r.over_budget, r.tokens_after > budget);
        assert_eq!(r.tokens_after, Heuristic.count_messages(&r.messages));
        let strict = Compactor::new(budget).strict(true).compact(&h, &summarize);
        assert_eq!(strict.is_err(), r.over_budget);

        let r = Compactor::new(budget)
            .counter(zero)
            .compact(&h, &summarize)
            .unwrap();
        assert_eq!(r.over_budget, r.tokens_after > budget);

        let r = Compactor::new(budget)
            .counter(huge)
            .compact(&h, &summarize)
            .unwrap();
        assert_eq!(r.tokens_after, usize::MAX);
        assert_eq!(r.over_budget, budget < usize::MAX);
        assert_eq!(r.messages.last(), h.last());
    }
}

/// Reads `bytes` in pieces of the given sizes (cycling).
struct Pieces<'a> {
    bytes: &'a [u8],
    sizes: Vec<usize>,
    k: usize,
}

impl std::io::Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let size = self.sizes[self.k % self.sizes.len()].max(1);
        self.k += 1;
        let n = size.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// What reading `bytes` whole gives: the UTF-8 check, then `from_json_str`.
fn whole(bytes: &[u8]) -> Result<Vec<Message>, String> {
    match std::str::from_utf8(bytes) {
        Err(e) => {
            let before = &bytes[..e.valid_up_to()];
            let line_start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            Err(Error::InvalidInput(chatfold::error::InputError::NotUtf8 {
                byte: e.valid_up_to() as u64,
                line: 1 + before.iter().filter(|&&b| b == b'\n').count(),
                column: before.len() - line_start + 1,
            })
            .to_string())
        }
        Ok(text) => History::from_json_str(text)
            .map(|h| h.messages)
            .map_err(|e| e.to_string()),
    }
}

#[test]
fn bad_utf8_says_its_line_and_column_whole_and_in_tiny_chunks() {
    // The bad byte is the 13th on line 3 (byte 51 of the input).
    let mut bytes = b"[\n  {\"role\": \"user\", \"content\": \"hi\"},\n  {\"role\": \"".to_vec();
    let byte = bytes.len() as u64;
    bytes.extend_from_slice(b"\xff\"}\n]\n");
    let expected = |e: &Error| match e {
        Error::InvalidInput(chatfold::error::InputError::NotUtf8 {
            byte: b,
            line,
            column,
        }) => {
            assert_eq!((*b, *line, *column), (byte, 3, 13), "{e}");
        }
        other => panic!("{other:?}"),
    };
    expected(&History::from_reader(&bytes[..]).unwrap_err());
    for size in [1, 2, 3, 5, 7] {
        let pieces = Pieces {
            bytes: &bytes,
            sizes: vec![size],
            k: 0,
        };
        let err = History::from_reader(pieces).unwrap_err();
        expected(&err);
        assert_eq!(
            err.to_string(),
            "invalid input: not valid UTF-8 at line 3 column 13 (byte 51)"
        );
    }
    // A body is read whole: the same place.
    let mut body = b"{\"model\": \"m\",\n \"messages\": [\n{\"role\": \"".to_vec();
    let at = body.len() as u64;
    body.extend_from_slice(b"\xc3(\"}]}");
    for size in [1, 4, 1 << 20] {
        let pieces = Pieces {
            bytes: &body,
            sizes: vec![size],
            k: 0,
        };
        match History::from_reader(pieces).unwrap_err() {
            Error::InvalidInput(chatfold::error::InputError::NotUtf8 { byte, line, column }) => {
                assert_eq!((byte, line, column), (at, 3, 11));
            }
            other => panic!("{other:?}"),
        }
    }
}

proptest::proptest! {
    #![proptest_config(common::cases(256))]

    /// The streaming reader gives what reading the whole input gives, on
    /// histories cut, spliced or broken anywhere, read in pieces of any size.
    #[test]
    fn from_reader_agrees_with_from_json_str(
        h in chatfold::testing::histories(12),
        edit in 0usize..9,
        at in 0.0f64..1.0,
        junk in proptest::sample::select(vec![",", "]", "[", "{", "}", "\"", " ", "\n", "x", "0", "\u{e9}", ",]", "]]", "null"]),
        sizes in proptest::collection::vec(1usize..64, 1..4),
        pretty in proptest::bool::ANY,
    ) {
        let json = if pretty { serde_json::to_string_pretty(&h).unwrap() } else { serde_json::to_string(&h).unwrap() };
        let mut bytes = json.into_bytes();
        let k = ((bytes.len() as f64) * at) as usize;
        match edit {
            0 => {}
            1 => bytes.truncate(k),
            2 => { bytes.splice(k..k, junk.bytes()); }
            3 => if k < bytes.len() { bytes[k] = 0xff },
            4 => bytes.extend_from_slice(junk.as_bytes()),
            5 => { bytes.splice(0..0, b"  \n\t".iter().copied()); }
            6 => if k < bytes.len() { bytes.remove(k); },
            7 => if k < bytes.len() { bytes.splice(k..k + 1, junk.bytes()); },
            _ => { let mut deep = b"[".repeat(130); deep.extend_from_slice(&bytes); bytes = deep; }
        }
        let streamed = History::from_reader(Pieces { bytes: &bytes, sizes, k: 0 })
            .map(|h| h.messages)
            .map_err(|e| e.to_string());
        proptest::prop_assert_eq!(streamed, whole(&bytes), "{}", String::from_utf8_lossy(&bytes));
    }
}
