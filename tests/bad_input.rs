//! The bad-input catalogue: every malformed shape we know of, and the exact
//! error it gets (or, for legal but odd input, the documented behaviour).
//! README.md has the same table.

mod common;

use std::convert::Infallible;

use chatfold::memory::State;
use chatfold::{
    Compactor, Error, Extractive, Heuristic, History, Message, SummaryRequest, TokenCounter, ToolCall,
};

fn history_error(json: &str) -> String {
    History::from_json_str(json).unwrap_err().to_string()
}

#[test]
fn malformed_histories_get_exact_errors() {
    let cases: &[(&str, &str)] = &[
        (
            "",
            "invalid input: not valid JSON: EOF while parsing a value at line 1 column 0",
        ),
        (
            "nope",
            "invalid input: not valid JSON: expected ident at line 1 column 2",
        ),
        (
            "[",
            "invalid input: not valid JSON: EOF while parsing a list at line 1 column 1",
        ),
        (
            "[] []",
            "invalid input: not valid JSON: trailing characters at line 1 column 4",
        ),
        (
            "42",
            "invalid input: expected an array of messages or an object with a \"messages\" array, not a number",
        ),
        (
            "\"hi\"",
            "invalid input: expected an array of messages or an object with a \"messages\" array, not a string",
        ),
        (
            "null",
            "invalid input: expected an array of messages or an object with a \"messages\" array, not null",
        ),
        (
            "true",
            "invalid input: expected an array of messages or an object with a \"messages\" array, not a boolean",
        ),
        (
            r#"{"model": "m"}"#,
            "invalid input: expected an array of messages or an object with a \"messages\" array, not an object without \"messages\"",
        ),
        (
            r#"{"messages": {}}"#,
            "invalid input: \"messages\" must be an array, not an object",
        ),
        (
            r#"{"messages": "hi"}"#,
            "invalid input: \"messages\" must be an array, not a string",
        ),
        ("[1]", "message 0: a message must be an object, not a number"),
        (
            r#"[{"role": "user", "content": "a"}, []]"#,
            "message 1: a message must be an object, not an array",
        ),
        (r#"[{"content": "x"}]"#, "message 0: message has no role"),
        (
            r#"[{"role": null}]"#,
            "message 0: role must be a string, not null",
        ),
        (
            r#"[{"role": 5}]"#,
            "message 0: role must be a string, not a number",
        ),
        (
            r#"[{"role": "user", "content": 7}]"#,
            "message 0: content must be a string, an array of parts or null, not a number",
        ),
        (
            r#"[{"role": "user", "content": {"text": "x"}}]"#,
            "message 0: content must be a string, an array of parts or null, not an object",
        ),
        (
            r#"[{"role": "user", "content": true}]"#,
            "message 0: content must be a string, an array of parts or null, not a boolean",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": {}}]"#,
            "message 0: tool_calls must be an array, not an object",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": ["c1"]}]"#,
            "message 0: tool_calls[0]: a tool call must be an object, not a string",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]"#,
            "message 0: tool_calls[0]: tool call has no id",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": 1, "function": {"name": "f"}}]}]"#,
            "message 0: tool_calls[0]: tool call id must be a string, not a number",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]"#,
            "message 0: tool_calls[0]: tool call c has no name",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}]"#,
            "message 0: tool_calls[0]: tool call function must be an object, not a string",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]}]"#,
            "message 0: tool_calls[0]: tool call c arguments must be a string, not an object",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "name": "f", "arguments": 3}]}]"#,
            "message 0: tool_calls[0]: tool call c arguments must be a string, not a number",
        ),
        (
            r#"[{"role": "tool", "content": "x", "tool_call_id": 7}]"#,
            "message 0: tool_call_id must be a string, not a number",
        ),
        (
            r#"[{"role": "user", "content": "x", "name": ["a"]}]"#,
            "message 0: name must be a string, not an array",
        ),
        (
            r#"[{"role": "user", "content": "x", "id": {}}]"#,
            "message 0: id must be a string, not an object",
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
        let err = history_error(&json);
        assert!(
            err.starts_with("invalid input: not valid JSON: recursion limit exceeded"),
            "{err}"
        );
    }
}

#[test]
fn invalid_utf8_is_an_error() {
    let bytes: &[u8] = b"[{\"role\": \"user\", \"content\": \"caf\xe9\"}]";
    let err = History::from_reader(bytes).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: input is not valid UTF-8 (byte 33)"
    );
    // A character cut off at the very end.
    let err = History::from_reader(&b"[\"\xe6\x97"[..]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid input: input is not valid UTF-8"),
        "{err}"
    );
}

#[test]
fn malformed_states_get_exact_errors() {
    let cases = [
        (
            r#"{"version": 3, "summary": "", "buffer": []}"#,
            "invalid state: unsupported version 3 (chatfold reads versions 1 and 2)",
        ),
        (
            r#"{"version": 2, "buffer": "x"}"#,
            "invalid state: buffer must be an array, not a string",
        ),
        (
            r#"{"version": 2, "buffer": [7]}"#,
            "invalid state: buffer message 0: a message must be an object, not a number",
        ),
        (
            r#"{"version": 2, "summary": []}"#,
            "invalid state: summary must be a string, not an array",
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(State::from_json_str(json).unwrap_err().to_string(), expected);
    }
}

#[test]
fn bad_configuration_is_refused_before_anything_runs() {
    let h = [Message::user("x")];
    let never = |_: &SummaryRequest<'_>| -> Result<String, Infallible> { unreachable!("not called") };
    let cases = [
        (
            Compactor::new(0),
            "invalid configuration: budget must be at least 1 token",
        ),
        (
            Compactor::new(10).keep_recent(11),
            "invalid configuration: keep_recent (11) must not exceed the budget (10)",
        ),
        (
            Compactor::new(10).policy(chatfold::FoldPolicy::new().summary_prefix("")),
            "invalid configuration: summary_prefix must not be empty: it marks the summary for the next compaction",
        ),
        (
            Compactor::new(10).policy(chatfold::FoldPolicy::new().summary_role("tool")),
            "invalid configuration: summary_role cannot be tool: a summary must not open the history as a response",
        ),
    ];
    for (compactor, expected) in cases {
        assert_eq!(compactor.compact(&h, &never).unwrap_err().to_string(), expected);
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
        Err(e) => Err(format!(
            "invalid input: input is not valid UTF-8 (byte {})",
            e.valid_up_to()
        )),
        Ok(text) => History::from_json_str(text)
            .map(|h| h.messages)
            .map_err(|e| e.to_string()),
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
