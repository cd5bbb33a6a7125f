//! The Responses API's input as a format: items read whole and written back
//! byte for byte, units that keep calls with their outputs and reasoning
//! with what it led to, `instructions` as the system prompt.

use std::convert::Infallible;

use chatfold::error::InputError;
use chatfold::testing::{Form, Histories};
use chatfold::{Compactor, Error, Extractive, Format, History, Message, Role, SummaryRequest};
use proptest::prelude::*;
use serde_json::{Value, json};

fn summarize(_: &SummaryRequest<'_>) -> Result<String, Infallible> {
    Ok("They looked up the orders.".to_owned())
}

/// A Responses body around `items`.
fn body(items: &[Message]) -> String {
    let input: Vec<Value> = items.iter().map(Message::to_json).collect();
    json!({"model": "gpt-5", "instructions": "Be brief.", "input": input, "store": false, "tools": []})
        .to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Nothing folded: the body comes back byte for byte, bare or in a body.
    #[test]
    fn items_round_trip_byte_for_byte(h in Histories::new().max_turns(30).form(Form::Responses).strategy()) {
        let bare = serde_json::to_string(&h.iter().map(Message::to_json).collect::<Vec<_>>()).unwrap();
        for text in [bare, body(&h)] {
            let history = History::from_json_str(&text).unwrap();
            let result = Compactor::new(1_000_000).compact(&history.messages, &summarize).unwrap();
            prop_assert!(!result.summarized);
            prop_assert_eq!(history.to_json_with(&result.messages).to_string(), text);
        }
    }

    /// Folded: every output item still follows its call, every call kept
    /// has its outputs, no reasoning item is left without what followed it,
    /// and the items kept are the ones that came, unchanged.
    #[test]
    fn compacted_items_stay_valid(
        h in Histories::new().max_turns(40).form(Form::Responses).without(chatfold::testing::Oddity::Orphans).strategy(),
        budget in 60usize..600,
    ) {
        let text = body(&h);
        let history = History::from_json_str(&text).unwrap();
        let result = Compactor::new(budget).keep_recent(1).compact(&history.messages, &Extractive::new()).unwrap();
        let out = history.to_json_with(&result.messages);
        prop_assert_eq!(&out["instructions"], &json!("Be brief."));
        let items = out["input"].as_array().unwrap();
        let originals: Vec<Value> = h.iter().map(Message::to_json).collect();
        let mut calls = std::collections::HashSet::new();
        let mut answered = std::collections::HashSet::new();
        for (k, item) in items.iter().enumerate() {
            let kind = item["type"].as_str();
            if kind == Some("function_call") {
                calls.insert(item["call_id"].as_str().unwrap());
            }
            if kind == Some("function_call_output") {
                let id = item["call_id"].as_str().unwrap();
                prop_assert!(calls.contains(id), "output {} before or without its call", id);
                answered.insert(id);
            }
            if kind == Some("reasoning") {
                prop_assert!(k + 1 < items.len(), "a reasoning item ends the input");
            }
            let summary = item["role"] == "system" && item["content"].as_str().is_some_and(|c| c.starts_with("Summary"));
            prop_assert!(summary || originals.contains(item), "an item changed: {}", item);
        }
        let unanswered: Vec<_> = originals.iter()
            .filter(|o| o["type"] == "function_call")
            .filter_map(|o| o["call_id"].as_str())
            .filter(|id| calls.contains(id) && !answered.contains(id))
            .filter(|id| originals.iter().any(|o| o["type"] == "function_call_output" && o["call_id"] == *id))
            .collect();
        prop_assert!(unanswered.is_empty(), "calls kept without their outputs: {:?}", unanswered);
    }
}

#[test]
fn the_format_is_told_by_items_or_input_and_named() {
    let bare = r#"[{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]"#;
    let history = History::from_json_str(bare).unwrap();
    assert_eq!(history.format(), Format::Responses);
    assert!(history.messages[1].item().is_some());
    assert_eq!(history.messages[1].call_ids().collect::<Vec<_>>(), ["c1"]);
    let body = History::from_json_str(r#"{"model": "m", "input": "Hello"}"#).unwrap();
    assert_eq!(body.format(), Format::Responses);
    assert_eq!(body.messages, [Message::user("Hello")]);
    assert_eq!(body.to_json().to_string(), r#"{"model":"m","input":"Hello"}"#);
    assert_eq!("responses".parse::<Format>().unwrap(), Format::Responses);
    // Plain text reads the same in all three formats: a Responses reading is allowed.
    let plain = History::from_json_str(r#"[{"role": "user", "content": "hi"}]"#).unwrap();
    assert_eq!(
        plain.into_format(Format::Responses).unwrap().format(),
        Format::Responses
    );
}

#[test]
fn system_and_developer_items_are_not_marks_of_chat_completions() {
    let items = r#"[{"role": "developer", "content": "Be terse."}, {"type": "function_call_output", "call_id": "c", "output": "x"}]"#;
    assert_eq!(History::from_json_str(items).unwrap().format(), Format::Responses);
}

#[test]
fn mixed_formats_name_a_mark_of_each() {
    let mixed = r#"[{"role": "tool", "tool_call_id": "c", "content": "x"}, {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]"#;
    let err = History::from_json_str(mixed).unwrap_err();
    let Error::InvalidInput(InputError::MixedFormats { first, second }) = &err else {
        panic!("{err}");
    };
    assert_eq!((first.0, second.0), (Format::Responses, Format::OpenAi));
    assert!(err.to_string().contains("a `function_call` item"), "{err}");
    let chat = History::from_json_str(r#"[{"role": "tool", "tool_call_id": "c", "content": "x"}]"#).unwrap();
    assert!(matches!(
        chat.into_format(Format::Responses),
        Err(Error::InvalidInput(InputError::WrongFormat { .. }))
    ));
}

#[test]
fn bad_items_are_errors_with_their_index() {
    let cases = [
        (r#"{"input": 7}"#, None),
        (
            r#"{"input": [{"role": "user", "content": "a"}, {"type": "message", "content": []}]}"#,
            Some(1),
        ),
        (
            r#"[{"type": "function_call_output", "call_id": 5, "output": "x"}]"#,
            Some(0),
        ),
        (r#"{"input": [], "instructions": 3}"#, None),
        (r#"{"input": "a", "messages": []}"#, None),
    ];
    for (text, index) in cases {
        let err = History::from_json_str(text).unwrap_err();
        match (index, &err) {
            (Some(i), Error::InvalidMessage { index, .. }) => assert_eq!(*index, i, "{text}: {err}"),
            (None, Error::InvalidInput(_)) => {}
            _ => panic!("{text}: {err}"),
        }
    }
    let err = History::from_json_str(r#"{"input": 7}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid input: \"input\" must be a string or an array of items, not a number"
    );
}

#[test]
fn instructions_are_the_system_prompt_and_go_back_where_they_were() {
    let text = r#"{"instructions": "Be brief.", "input": [{"role": "user", "content": "hi"}], "model": "m"}"#;
    let history = History::from_json_str(text).unwrap();
    assert_eq!(history.messages[0], Message::system("Be brief."));
    assert_eq!(history.field("instructions"), None);
    assert_eq!(history.field("model"), Some(&json!("m")));
    assert_eq!(
        history.to_json().to_string(),
        text.replace(": ", ":").replace(", ", ",")
    );
    let null = r#"{"instructions":null,"input":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(History::from_json_str(null).unwrap().to_json().to_string(), null);
}

/// Items with a reasoning item before a pair of parallel calls.
fn turns(n: usize) -> Vec<Value> {
    let mut items = Vec::new();
    for i in 0..n {
        items.push(json!({"role": "user", "content": format!("Where is order ORD-{i:04}? Check both systems please.")}));
        items.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [{"type": "summary_text", "text": "Two lookups."}], "encrypted_content": format!("SECRET-CIPHERTEXT-{i}")}));
        for k in ["a", "b"] {
            items.push(json!({"type": "function_call", "call_id": format!("c{i}{k}"), "name": "lookup", "arguments": format!("{{\"order\":\"ORD-{i:04}\",\"system\":\"{k}\"}}")}));
        }
        for k in ["a", "b"] {
            items.push(json!({"type": "function_call_output", "call_id": format!("c{i}{k}"), "output": format!("ORD-{i:04} in system {k}: shipped with tracking TRK{i:04}{k}")}));
        }
        items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("ORD-{i:04} has shipped.")}]}));
    }
    items
}

#[test]
fn a_fold_takes_reasoning_with_its_calls_and_never_shows_ciphertext() {
    let mut items = turns(12);
    items.push(json!({"role": "user", "content": "And the next one?"}));
    let history = History::from_json_value(json!({"input": items})).unwrap();
    let seen = std::sync::Mutex::new(String::new());
    let summarize = |request: &SummaryRequest<'_>| {
        *seen.lock().unwrap() = request.transcript();
        Ok::<_, Infallible>("Orders looked up.".to_owned())
    };
    let c = Compactor::new(900).keep_recent(250);
    let result = c.compact(&history.messages, &summarize).unwrap();
    assert!(result.summarized && !result.over_budget);
    let transcript = seen.into_inner().unwrap();
    assert!(
        transcript.contains("[tool call c0a: lookup({\"order\":\"ORD-0000\",\"system\":\"a\"})]"),
        "{transcript}"
    );
    assert!(
        transcript.contains("[tool result c0b: ORD-0000 in system b"),
        "{transcript}"
    );
    assert!(transcript.contains("[reasoning: Two lookups.]"), "{transcript}");
    assert!(!transcript.contains("SECRET-CIPHERTEXT"), "{transcript}");
    // The kept part opens on a user message, the summary before it.
    assert_eq!(result.messages[0].role, Role::System);
    assert_eq!(
        result.messages[1].role,
        Role::User,
        "{:#?}",
        result
            .messages
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    );
    let kept = &result.messages[1..];
    for (k, _) in kept.iter().enumerate().filter(|(_, m)| m.leads_reasoning()) {
        assert!(
            kept[k + 1].call_ids().next().is_some(),
            "reasoning at {k} without its calls"
        );
    }
    assert!(
        kept.iter().any(Reasoning::leads_reasoning),
        "no reasoning kept: {kept:#?}"
    );
}

/// Whether a message is a reasoning item (for the test above).
trait Reasoning {
    fn leads_reasoning(&self) -> bool;
}

impl Reasoning for Message {
    fn leads_reasoning(&self) -> bool {
        self.item().is_some_and(|item| item.kind() == Some("reasoning"))
    }
}

#[cfg(feature = "tiktoken")]
#[test]
fn items_count_their_words_but_not_their_ciphertext() {
    use chatfold::TokenCounter;

    let counter = chatfold::Tiktoken::o200k_base().unwrap();
    let call = |args: &str| {
        History::from_json_value(
            json!([{"type": "function_call", "call_id": "c", "name": "f", "arguments": args}]),
        )
        .unwrap()
        .messages
        .remove(0)
    };
    let short = counter.count_message(&call("{}"));
    let long = counter.count_message(&call(&format!("{{\"q\": \"{}\"}}", "word ".repeat(50))));
    assert!(long >= short + 50, "{short} {long}");
    let reasoning = |cipher: usize| {
        let item = json!([{"type": "reasoning", "summary": [], "encrypted_content": "x".repeat(cipher)}]);
        counter.count_message(&History::from_json_value(item).unwrap().messages[0])
    };
    assert_eq!(reasoning(10), reasoning(10_000));
}

#[test]
fn conversion_to_and_from_responses_is_refused() {
    let items = History::from_json_value(json!(turns(1))).unwrap();
    assert!(matches!(items.convert(Format::OpenAi), Err(Error::Conversion(_))));
    let chat = History::from_json_str(r#"[{"role": "user", "content": "hi"}]"#).unwrap();
    assert!(matches!(
        chat.convert(Format::Responses),
        Err(Error::InvalidConfig(_))
    ));
}
