//! The wire format: OpenAI Chat Completions JSON, read and written losslessly.

mod common;

use chatfold::{Content, Message, Role, parse_messages};
use proptest::prelude::*;
use serde_json::{Value, json};

fn round_trip(value: Value) -> Value {
    let messages = chatfold::messages_from_json(value).unwrap();
    serde_json::to_value(&messages).unwrap()
}

#[test]
fn every_known_shape_round_trips_unchanged() {
    let input = json!([
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use metric units.", "name": "ops"},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this image?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "BBBB", "format": "wav"}},
            {"type": "future_part", "anything": [1, 2, {"x": null}]}
        ]},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":1}"}},
            {"id": "call_2", "type": "function", "function": {"name": "lookup", "arguments": "{}", "strict": true}, "index": 1}
        ], "refusal": null, "audio": {"id": "audio_1"}},
        {"role": "tool", "tool_call_id": "call_1", "content": "one"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "two"}]},
        {"role": "assistant", "tool_calls": [
            {"id": "ct_1", "type": "custom", "custom": {"name": "grep", "input": "TODO"}}
        ]},
        {"role": "assistant", "content": "done", "tool_calls": []},
        {"role": "critic", "content": "custom roles are kept", "id": "m-9", "metadata": {"score": 0.5}},
        {"role": "user", "content": "nulls stay", "name": null, "tool_call_id": null, "metadata": null},
        {"role": "user", "content": "unicode: 日本語 🙂 \u{0000} \"quotes\"", "x_unknown": {"deep": [true]}}
    ]);
    assert_eq!(round_trip(input.clone()), input);
}

#[test]
fn rollmem_flat_tool_calls_are_read_and_written_in_openai_shape() {
    let input = json!([
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Seoul\"}"}]},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "metadata": {}}
    ]);
    let messages = chatfold::messages_from_json(input).unwrap();
    assert_eq!(messages[0].tool_calls[0].name, "get_weather");
    assert_eq!(messages[0].tool_calls[0].arguments, "{\"city\": \"Seoul\"}");
    let out = serde_json::to_value(&messages).unwrap();
    assert_eq!(
        out[0]["tool_calls"][0],
        json!({"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Seoul\"}"}})
    );
    assert_eq!(out[1]["metadata"], json!({}));
}

/// Found by fuzzing: numbers in unknown fields must survive any number of
/// trips through chatfold (serde_json's exact float parsing is on). An integer
/// too long for 64 bits is read as the nearest float, once.
#[test]
fn numbers_in_unknown_fields_round_trip_exactly() {
    let input = json!([{"role": "user", "content": "x", "metadata": {"p": 0.1, "n": -0.0, "big": 18446744073709551615u64}}]);
    assert_eq!(round_trip(input.clone()), input);
    let text = r#"[{"role":"user","content":"x","score":800000000000000300000000000000000000000000000000000000000000000000052}]"#;
    let once = serde_json::to_string(&parse_messages(text).unwrap()).unwrap();
    let twice = serde_json::to_string(&parse_messages(&once).unwrap()).unwrap();
    assert_eq!(once, twice);
    assert_eq!(
        once,
        r#"[{"role":"user","content":"x","score":8.000000000000003e+68}]"#
    );
}

#[test]
fn serde_derive_users_get_the_same_format() {
    #[derive(serde::Deserialize, serde::Serialize)]
    struct Request {
        model: String,
        messages: Vec<Message>,
    }
    let body = r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi", "x": 1}]}"#;
    let request: Request = serde_json::from_str(body).unwrap();
    assert_eq!(request.messages[0].role, Role::User);
    assert_eq!(request.messages[0].content, Some(Content::Text("hi".into())));
    let again: Value = serde_json::to_value(&request).unwrap();
    assert_eq!(again, serde_json::from_str::<Value>(body).unwrap());
    let err = serde_json::from_str::<Request>(r#"{"model": "m", "messages": [{"role": 1}]}"#)
        .err()
        .unwrap();
    assert!(
        err.to_string().starts_with("role must be a string, not a number"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(common::cases(256))]

    /// Generated histories survive a trip through JSON unchanged.
    #[test]
    fn generated_histories_round_trip(h in common::history(30)) {
        let json = serde_json::to_string(&h).unwrap();
        prop_assert_eq!(parse_messages(&json).unwrap(), h);
    }
}
