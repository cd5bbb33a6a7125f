//! The wire format: OpenAI Chat Completions JSON, read and written losslessly.

mod common;

use chatfold::{Content, Message, Role};
use proptest::prelude::*;
use serde_json::{Value, json};

fn round_trip(value: Value) -> Value {
    let messages = chatfold::History::from_json_value(value)
        .map(|h| h.messages)
        .unwrap();
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
    let messages = chatfold::History::from_json_value(input)
        .map(|h| h.messages)
        .unwrap();
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
    let once = serde_json::to_string(
        &chatfold::History::from_json_str(text)
            .map(|h| h.messages)
            .unwrap(),
    )
    .unwrap();
    let twice = serde_json::to_string(
        &chatfold::History::from_json_str(&once)
            .map(|h| h.messages)
            .unwrap(),
    )
    .unwrap();
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
        prop_assert_eq!(chatfold::History::from_json_str(&json).map(|h| h.messages).unwrap(), h);
    }
}

/// Every way in names the message at fault: text, value, reader and serde.
#[test]
fn every_entry_point_names_the_bad_message() {
    let text =
        r#"{"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": 7}]}"#;
    let value: serde_json::Value = serde_json::from_str(text).unwrap();
    let errors = [
        chatfold::History::from_json_str(text).unwrap_err(),
        chatfold::History::from_json_value(value.clone()).unwrap_err(),
        chatfold::History::from_reader(text.as_bytes()).unwrap_err(),
    ];
    for e in &errors {
        assert!(
            matches!(e, chatfold::Error::InvalidMessage { index: 1, .. }),
            "{e}"
        );
    }
    let serde = serde_json::from_value::<chatfold::History>(value).unwrap_err();
    assert!(serde.to_string().starts_with("message 1:"), "{serde}");

    // What goes in comes out, body fields in their places.
    let good = r#"{"model":"m","messages":[{"role":"user","content":"a"}],"stream":false}"#;
    let history: chatfold::History = serde_json::from_str(good).unwrap();
    assert_eq!(serde_json::to_string(&history).unwrap(), good);
    assert_eq!(history.field("stream"), Some(&serde_json::json!(false)));
    assert_eq!(history.field("messages"), None);
    let bare = chatfold::History::from(history.messages.clone());
    assert_eq!(
        bare.to_json(),
        serde_json::json!([{"role": "user", "content": "a"}])
    );
    assert_eq!(
        history.to_json_with(&[]).to_string(),
        r#"{"model":"m","messages":[],"stream":false}"#
    );
}
