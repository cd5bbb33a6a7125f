//! Clearing, sealed blocks and betas, on bodies.

use super::*;

fn counter() -> NamedCounter {
    "heuristic".parse().unwrap()
}

fn body(messages: Value, edits: Value) -> Vec<u8> {
    json!({"model": "m", "max_tokens": 100, "system": "Be brief.", "messages": messages,
        "context_management": {"edits": edits}})
    .to_string()
    .into_bytes()
}

fn tool_turns(n: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Check every host."})];
    for i in 0..n {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("host {i} next"), "signature": "c2ln"},
            {"type": "tool_use", "id": format!("t{i}"), "name": if i == 0 { "memory" } else { "read_logs" }, "input": {"host": i}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": format!("host-{i}: ").repeat(50)}]}));
    }
    Value::Array(messages)
}

const ANSWER: Rules = Rules {
    answer: true,
    upstream_is_anthropic: false,
};

#[test]
fn clearing_follows_anthropics_parameters_and_reports_them() {
    let edits = json!([
        {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 3},
         "keep": {"type": "tool_uses", "value": 2}, "exclude_tools": ["memory"], "clear_tool_inputs": true}]);
    let seal = Seal::new(&[1; 32]);
    let prepared = prepare(&body(tool_turns(6), edits), &seal, "t", ANSWER, &counter()).unwrap();
    assert!(prepared.answered && prepared.threshold.is_none());
    let sent: Value = serde_json::from_slice(prepared.body.as_ref().unwrap()).unwrap();
    assert!(sent.get("context_management").is_none());
    let text = sent["messages"].to_string();
    assert_eq!(
        text.matches("\"thinking\":").count(),
        2,
        "two turns keep their thinking"
    );
    // Results 1 to 3 cleared: the excluded tool's and the newest two stay.
    assert_eq!(text.matches("tool result cleared").count(), 3);
    assert!(
        sent["messages"][2]["content"][0]["content"]
            .as_str()
            .unwrap()
            .starts_with("host-0")
    );
    assert_eq!(
        sent["messages"][3]["content"][0]["input"],
        json!({}),
        "a cleared use's input is cleared"
    );
    assert_eq!(
        sent["messages"][11]["content"][1]["input"],
        json!({"host": 5}),
        "kept: thinking, then the use"
    );
    assert_eq!(prepared.applied[0]["cleared_thinking_turns"], 4);
    assert_eq!(prepared.applied[1]["cleared_tool_uses"], 3);
    assert!(prepared.applied[1]["cleared_input_tokens"].as_u64().unwrap() > 100);
}

#[test]
fn clearing_waits_for_its_trigger_and_its_least() {
    let edits = json!([{"type": "clear_tool_uses_20250919", "clear_at_least": {"type": "input_tokens", "value": 1000000}}]);
    let seal = Seal::new(&[1; 32]);
    let prepared = prepare(&body(tool_turns(6), edits), &seal, "t", ANSWER, &counter()).unwrap();
    assert_eq!(prepared.applied[0]["cleared_tool_uses"], 0);
    let sent: Value = serde_json::from_slice(prepared.body.as_ref().unwrap()).unwrap();
    assert!(!sent["messages"].to_string().contains("cleared"));
    let bad = json!([{"type": "clear_tool_uses_20250919", "keep": {"type": "turns", "value": 2}}]);
    assert!(prepare(&body(tool_turns(1), bad), &seal, "t", ANSWER, &counter()).is_err());
}

#[test]
fn a_block_opens_for_its_tenant_only_unaltered() {
    let seal = Seal::new(&[3; 32]);
    let sent = json!({"model": "m", "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Summary of earlier conversation: old turns"}],
        "messages": [{"role": "user", "content": "kept question"}]});
    let block = block(
        &seal,
        "a",
        sent.to_string().as_bytes(),
        1,
        "Summary of earlier conversation:",
    )
    .unwrap();
    assert_eq!(block["content"], "Summary of earlier conversation: old turns");
    let later = |block: &Value| {
        json!({"model": "m", "system": "Be brief.", "messages": [
            {"role": "user", "content": "old"}, {"role": "assistant", "content": [block, {"type": "text", "text": "answer"}]},
            {"role": "user", "content": "next"}]})
        .to_string()
    };
    let rules = Rules {
        answer: false,
        upstream_is_anthropic: false,
    };
    let prepared = prepare(later(&block).as_bytes(), &seal, "a", rules, &counter()).unwrap();
    let back: Value = serde_json::from_slice(prepared.body.as_ref().unwrap()).unwrap();
    assert_eq!(
        back["messages"],
        json!([{"role": "user", "content": "kept question"},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]}, {"role": "user", "content": "next"}])
    );
    assert_eq!(
        back["system"][1]["text"],
        "Summary of earlier conversation: old turns"
    );
    assert!(
        prepare(later(&block).as_bytes(), &seal, "b", rules, &counter()).is_err(),
        "another tenant's"
    );
    let mut altered = block.clone();
    altered["content"] = json!("Summary of earlier conversation: forged");
    assert!(prepare(later(&altered).as_bytes(), &seal, "a", rules, &counter()).is_err());
    let theirs =
        json!({"type": "compaction", "content": "Anthropic's summary", "encrypted_content": "opaque"});
    assert!(prepare(later(&theirs).as_bytes(), &seal, "a", rules, &counter()).is_err());
    let to_anthropic = Rules {
        answer: false,
        upstream_is_anthropic: true,
    };
    assert!(
        prepare(later(&theirs).as_bytes(), &seal, "a", to_anthropic, &counter())
            .unwrap()
            .body
            .is_none()
    );
}

#[test]
fn betas_chatfold_answers_leave_the_header() {
    assert_eq!(
        betas_left("compact-2026-01-12, files-api-2025-04-14").as_deref(),
        Some("files-api-2025-04-14")
    );
    assert_eq!(
        betas_left("context-management-2025-06-27,compact-2026-01-12"),
        None
    );
}
