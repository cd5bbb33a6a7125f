//! Memory state: moved between every pair of strategies, checked on load,
//! compatible with Python rollmem's, and the committed fixture kept current.

mod common;

use std::cell::RefCell;
use std::convert::Infallible;

use chatfold::memory::{
    AsyncRollingMemory, AsyncSummaryMemory, BufferMemory, Memory, Remember, RollingMemory, Settings, State,
    SummaryMemory, WindowMemory,
};
use chatfold::{Message, Ready, Role, SummaryRequest, ToolCall};
use common::memory::{appending, call, texts};

fn sample_state() -> State {
    let mut m = call(&["c1", "c2"]);
    m.id = Some("msg-1".into());
    let m = m.with_metadata(serde_json::json!({"k": [1, 2]}));
    State::new(
        "The user is planning a trip.",
        vec![
            Message::user("What's the weather?"),
            m,
            Message::tool("sunny", "c1"),
            Message::tool("warm", "c2"),
            Message::new(Role::from("critic"), "fine"),
        ],
    )
}

#[test]
fn state_moves_between_every_pair_of_strategies() {
    let json = sample_state().to_json_string();
    let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("x".to_owned());
    let async_summarize = Ready(summarize);
    let load = |json: &str| State::from_json_str(json).unwrap();
    let saved: Vec<State> = vec![
        RollingMemory::from_state(load(&json), Settings::new(1000).summarizer(summarize))
            .unwrap()
            .to_state(),
        AsyncRollingMemory::from_state(load(&json), Settings::new(1000).summarizer(async_summarize))
            .unwrap()
            .to_state(),
        BufferMemory::from_state(load(&json)).to_state(),
        WindowMemory::from_state(load(&json), 2).unwrap().to_state(),
        SummaryMemory::from_state(load(&json), summarize).to_state(),
        AsyncSummaryMemory::from_state(load(&json), async_summarize).to_state(),
    ];
    for (i, a) in saved.iter().enumerate() {
        // Restoring never calls the summarizer and never drops turns, whatever the budget.
        assert_eq!(a, &load(&json), "strategy {i} changed the state on restore");
        for b in &saved {
            assert_eq!(State::from_json_str(&a.to_json_string()).unwrap(), *b);
        }
    }
}

#[test]
fn state_versions_and_shapes_are_checked() {
    let cases = [
        (r#"{"summary": "", "buffer": []}"#, "state version None"),
        (
            r#"{"version": "2", "buffer": []}"#,
            r#"state version Some("\"2\"")"#,
        ),
        (r#"{"version": 7}"#, r#"state version Some("7")"#),
        (
            r#"{"version": 2, "buffer": {}}"#,
            "state: buffer an object (an array)",
        ),
        (
            r#"{"version": 2, "summary": 5}"#,
            "state: summary a number (a string)",
        ),
        (
            r#"{"version": 2, "buffer": [{"role": "user"}, {"content": "x"}]}"#,
            "state: buffer[1].role missing (a string)",
        ),
        (r#"[1]"#, "state:  an array (an object)"),
        ("{", "state json 1:1"),
    ];
    for (json, expected) in cases {
        assert_eq!(
            common::shape(&State::from_json_str(json).unwrap_err()),
            expected,
            "{json}"
        );
    }
    let empty = State::from_json_str(r#"{"version": 2}"#).unwrap();
    assert_eq!(empty, State::default());
}

#[test]
fn python_rollmem_states_load_in_every_strategy() {
    let fixtures: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/rollmem_states.json")).unwrap();
    let agent = State::from_json(fixtures["agent"].clone()).unwrap();
    let calls: Vec<&ToolCall> = agent.buffer.iter().flat_map(|m| &m.tool_calls).collect();
    assert_eq!(
        calls.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["logs", "diff"]
    );
    assert_eq!(calls[0].arguments, r#"{"job": 42}"#);
    let with_id = agent
        .buffer
        .iter()
        .find(|m| m.id.as_deref() == Some("msg-7"))
        .unwrap();
    assert_eq!(with_id.metadata().unwrap()["latency_ms"], 812);
    assert!(agent.buffer.iter().any(|m| m.role == Role::from("critic")));

    let trip = State::from_json(fixtures["trip"].clone()).unwrap();
    assert!(!trip.summary.is_empty());
    let v1 = State::from_json(fixtures["version1"].clone()).unwrap();
    assert_eq!(v1.summary, "Old summary.");
    assert_eq!(texts(&v1.buffer), ["hello", "hi"]);

    // Loaded in a rolling memory, the rollmem state keeps rolling.
    let calls = RefCell::new(Vec::new());
    let mut memory =
        RollingMemory::from_state(agent.clone(), Settings::new(20).summarizer(appending(&calls))).unwrap();
    assert_eq!(memory.to_state(), agent, "restore changed nothing");
    memory.add_user("what now?").unwrap();
    assert_eq!(calls.borrow().len(), 1);
    assert_eq!(memory.messages().last().unwrap().text(), "what now?");
}

/// The state chatfold saves is committed as a fixture, for
/// `tests/fixtures/rollmem_states.py` to load in Python rollmem; this keeps
/// the fixture equal to what chatfold writes today.
#[test]
fn chatfold_state_fixture_is_current() {
    let mut first = call(&["c1"]);
    first.content = Some(chatfold::Content::Text(String::new()));
    let state = State::new(
        "Asked about Seoul weather.",
        vec![
            Message::user("And Busan?"),
            first,
            Message::tool("20C", "c1").with_id("t-1"),
        ],
    );
    let expected: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/chatfold_state.json")).unwrap();
    assert_eq!(state.to_json(), expected);
}
