use super::*;

/// One thread, whatever the batch.
const ONE: Split = Split {
    most: 1,
    least: 1,
    machine: Some(1),
};

/// Messages whose strings hold what a guessed end of a batch looks for
/// (`}`, `,`, `{`, `"role"`), escaped quotes, nested objects and
/// characters outside ASCII.
const POOL: &[&str] = &[
    r#"{"role":"user","content":"hi"}"#,
    r#"{"role":"user","content":"a}, {\"role\":\"x\"} b"}"#,
    r#"{"role":"assistant","content":"x}, {y"}"#,
    r#"{ "role" : "user", "content" : "}\",{\"role\"" }"#,
    r#"{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":{}}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}"#,
    r#"{"role":"tool","tool_call_id":"c1","content":"ok, {\"n\": 1}"}"#,
    r#"{"content":"key order","role":"user"}"#,
    r#"{"role":"user","content":[{"type":"text","text":"日本 }, {"}]}"#,
    r#"{"role":"user","content":"h\u00e9llo"}"#,
];

/// [`POOL`], and messages nested near serde_json's limit (one inside
/// it in an array, one past it).
fn pool() -> Vec<String> {
    let deep = |n: usize| {
        format!(
            r#"{{"role":"user","content":"deep","extra":{}1{}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        )
    };
    let mut pool: Vec<String> = POOL.iter().map(|m| m.to_string()).collect();
    pool.extend([deep(DEEP + 5), deep(130)]);
    pool
}

/// Arrays of [`pool`]'s messages, with whitespace of every kind
/// between, some of them broken (a byte dropped, doubled or replaced).
fn arrays() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let seps = prop::sample::select(vec![",", ", ", " ,\n\t", ",\r\n  "]);
    let items = prop::collection::vec((prop::sample::select(pool()), seps), 0..40);
    let damage = prop::option::weighted(0.3, (any::<prop::sample::Index>(), 0u8..3, any::<u8>()));
    (items, damage).prop_map(|(items, damage)| {
        let mut text = b"[".to_vec();
        for (i, (message, sep)) in items.iter().enumerate() {
            if i > 0 {
                text.extend_from_slice(sep.as_bytes());
            }
            text.extend_from_slice(message.as_bytes());
        }
        text.push(b']');
        if let Some((at, how, byte)) = damage {
            let at = at.index(text.len());
            match how {
                0 => drop(text.remove(at)),
                1 => text.insert(at, text[at]),
                _ => text[at] = byte,
            }
        }
        text
    })
}

proptest::proptest! {
    /// A batch parsed on several threads (its pieces cut at guessed
    /// message ends, inside strings too) reads as one thread does: the
    /// same messages in the same order, or the same error.
    #[test]
    fn batches_parsed_on_several_threads_read_as_on_one(
        bytes in arrays(),
        most in 2usize..=4,
        least in 1usize..64,
        chunk in proptest::sample::select(vec![7usize, 64, 300, CHUNK]),
    ) {
        let read = |chunk, split| {
            read_in(bytes.as_slice(), chunk, split)
                .map(|h| h.messages)
                .map_err(|e| e.to_string())
        };
        let split = Split { most, least, machine: Some(most) };
        proptest::prop_assert_eq!(read(chunk, split), read(CHUNK, ONE));
    }
}

/// An input of a few MB, its batches shared among four threads (the
/// machine's when it asks), reads as the whole text does, and so does
/// the same input broken in a later piece.
#[test]
fn a_long_input_reads_as_the_whole_text_does() {
    let messages: Vec<&str> = POOL.iter().cycle().take(60_000).copied().collect();
    let text = format!("[{}]", messages.join(",\n"));
    assert!(text.len() > 2 * CHUNK);
    let four = Split {
        machine: Some(4),
        ..Split::machine()
    };
    let whole = History::from_json_str(&text).unwrap().messages;
    assert_eq!(whole.len(), 60_000);
    assert_eq!(read_in(text.as_bytes(), CHUNK, four).unwrap().messages, whole);
    assert_eq!(read(text.as_bytes()).unwrap().messages, whole);
    // The first buffer's batch is cut in four pieces, and they parse.
    let mut input = Input::over(&text[..CHUNK], four);
    let end = ends(&input.text.as_bytes()[1..]).unwrap() + 1;
    assert_eq!(four.parts(end - 1), 4);
    let mut read = Vec::new();
    assert_eq!(input.parse_parts(end, 4, &mut read), Some(()));
    assert_eq!(read, whole[..read.len()]);
    // Broken three quarters of the way into the second buffer.
    let mut broken = text.clone().into_bytes();
    let at = CHUNK + CHUNK * 3 / 4;
    let at = at + broken[at..].iter().position(|&b| b == b':').unwrap();
    broken[at] = b';';
    let expected = History::from_json_str(std::str::from_utf8(&broken).unwrap()).map_err(|e| e.to_string());
    assert!(expected.is_err());
    let got = read_in(broken.as_slice(), CHUNK, four)
        .map(|h| h.messages)
        .map_err(|e| e.to_string());
    assert_eq!(got.map(|m| m.len()), expected.map(|h| h.messages.len()));
}

impl Input<&[u8]> {
    /// An input whose text read so far is `text`, read past the `[`
    /// that opens it, nothing more to come.
    fn over(text: &str, split: Split) -> Self {
        Input {
            reader: &b""[..],
            text: text.to_owned(),
            at: 1,
            raw: Vec::new(),
            line: 1,
            column: 0,
            offset: 0,
            eof: true,
            broken: false,
            chunk: CHUNK,
            batches: true,
            split,
        }
    }
}

/// A batch whose second cut is guessed inside a string: its messages
/// are the whole text's all the same, the text is put back, and the
/// input's later batches are parsed whole.
#[test]
fn a_batch_cut_inside_a_string_is_parsed_whole() {
    let plain = r#"{"role":"user","content":"ok"}"#;
    let tricky = r#"{"content":"a}, {b}, {c}, {d}, {e}, {f}, {g}, {h}, {i}","role":"user"}"#;
    let text = format!("[{plain}, {plain}, {tricky}, {plain}]");
    let split = Split {
        most: 3,
        least: 1,
        machine: Some(3),
    };
    let end = text.len() - 1;
    assert_eq!(split.parts(end - 1), 3);
    // The first cut is right, the second is guessed inside `tricky`.
    let mut read = Vec::new();
    let mut input = Input::over(&text, split);
    assert_eq!(input.parse_parts(end, 3, &mut read), None);
    assert_eq!(
        read.len(),
        1,
        "the first piece parsed: its message, for the batch to drop"
    );
    let mut read = Vec::new();
    let mut input = Input::over(&text, split);
    assert_eq!(input.batch(&mut read), Some(()));
    // (A batch ends where a message ends that another follows.)
    assert_eq!(read, History::from_json_str(&text).unwrap().messages[..3]);
    assert_eq!(input.text, text);
    assert_eq!(input.split.most, 1);
}

/// The pieces of a batch that parse are its messages, in order; a
/// piece cut inside a string fails, and the batch is parsed whole.
#[test]
fn a_batch_in_pieces_is_its_messages_in_order() {
    let messages: Vec<String> = (0..12)
        .map(|i| format!(r#"{{"role":"user","content":"m{i} }}, {{"}}"#))
        .collect();
    let text = format!("[{}]", messages.join(", "));
    let mut input = Input::over(&text, ONE);
    let end = text.len() - 1;
    let whole = History::from_json_str(&text).unwrap().messages;
    for parts in 2..=5 {
        let mut read = Vec::new();
        assert_eq!(
            input.parse_parts(end, parts, &mut read),
            Some(()),
            "{parts} parts"
        );
        assert_eq!(read, whole);
        assert_eq!(input.text, text, "the text is put back");
    }
    // Every `{` is in a string but the messages': a guess that finds
    // only those (no message opens with `"role"` after its share) fails.
    let inside = r#"[{"content":"a}, {b}, {c}, {d}, {e}, {f}, {g"},{"role":"user","content":"z"}]"#;
    input.text = inside.to_owned();
    let mut read = Vec::new();
    assert_eq!(input.parse_parts(inside.len() - 1, 2, &mut read), None);
    assert_eq!(input.text, inside, "the text is put back");
}

#[test]
fn a_batch_ends_at_the_last_message_another_follows() {
    assert_eq!(ends(br#"{"a":1}, {"b":2}"#), Some(7));
    assert_eq!(ends(b"{\"a\":{}}\n,\t{\"b\":2},{"), Some(18));
    assert_eq!(ends(br#"{"a":1}"#), None);
    assert_eq!(ends(br#"{"a":[1, {}]}]"#), None);
    // Inside a string: a wrong guess, which parsing refuses.
    assert_eq!(ends(br#"{"content":"x}, {y"}, {"#), Some(20));
    assert_eq!(ends(br#"{"content":"x}, {y"}]"#), Some(14));
    // A message that opens with "role" wins over a nested object after it.
    let nested = br#"{"role":"a"}, {"role":"b","tool_calls":[{"id":"1"},{"id":"2"#;
    assert_eq!(ends(nested), Some(12));
    let text = br#"[{"role":"user","content":"z"}, {"role":"user","content":"x}, {y"}]"#;
    let history = read_in(&text[..], CHUNK, Split::machine()).unwrap();
    let texts: Vec<String> = history.messages.iter().map(|m| m.text().into_owned()).collect();
    assert_eq!(texts, ["z", "x}, {y"]);
}

/// Chunks of a few bytes (messages, characters and separators cut
/// everywhere, the buffer drained and grown on every read) read as one
/// chunk does, which `tests/bad_input.rs` checks against reading whole.
#[test]
fn tiny_chunks_read_as_the_whole_input_does() {
    let good = "[ {\"role\":\"user\",\"content\":\"h\\u00e9llo 日本\"},\n {\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\n\t{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"} ]";
    let deep = format!(
        "[{{\"role\":\"user\",\"content\":\"x\",\"extra\":{}1{}}}]",
        "[".repeat(130),
        "]".repeat(130)
    );
    // A guessed end of a batch inside a string: parsing it fails, and
    // the messages are read one at a time.
    let braces = r#"[{"role":"user","content":"a}, {b"},{"role":"user","content":"}\",{"},{"role":"assistant","content":"ok"}]"#;
    let mut inputs: Vec<Vec<u8>> = vec![
        good.as_bytes().to_vec(),
        deep.into_bytes(),
        braces.as_bytes().to_vec(),
    ];
    for k in (0..good.len()).step_by(3) {
        inputs.push(good.as_bytes()[..k].to_vec());
        let mut spliced = good.as_bytes().to_vec();
        spliced.insert(k, b'x');
        inputs.push(spliced);
        let mut broken = good.as_bytes().to_vec();
        broken[k] = 0xff;
        inputs.push(broken);
    }
    for bytes in &inputs {
        let read = |chunk| {
            read_in(bytes.as_slice(), chunk, ONE)
                .map(|h| h.messages)
                .map_err(|e| e.to_string())
        };
        let one_chunk = read(CHUNK);
        if let Ok(text) = std::str::from_utf8(bytes) {
            let whole = History::from_json_str(text).map(|h| h.messages);
            assert_eq!(one_chunk, whole.map_err(|e| e.to_string()), "{text}");
        }
        for chunk in 1..=9 {
            assert_eq!(
                read(chunk),
                one_chunk,
                "chunk {chunk}: {}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}
