//! The memory strategies: rollmem's promises, one test each, and a
//! model-based property test of "nothing lost, nothing duplicated".

mod common;

use std::cell::{Cell, RefCell};
use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use chatfold::memory::{
    AsyncRemember, AsyncRollingMemory, AsyncSummaryMemory, BufferMemory, Memory, Remember, RollingMemory,
    Settings, State, SummaryMemory, WindowMemory,
};
use chatfold::{Error, Message, Ready, Role, SummaryRequest, ToolCall};
use proptest::prelude::*;

/// Every word counts one token; framing adds none (keeps the arithmetic readable).
fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.text().into_owned()).collect()
}

/// A summarizer that appends the folded texts to the previous summary, and
/// records each call.
fn appending(
    calls: &RefCell<Vec<Vec<String>>>,
) -> impl Fn(&SummaryRequest<'_>) -> Result<String, Infallible> + '_ {
    move |r| {
        let folded: Vec<String> = r.messages().map(|m| m.text().into_owned()).collect();
        calls.borrow_mut().push(folded.clone());
        let mut parts: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        parts.extend(folded.into_iter().filter(|t| !t.is_empty()));
        Ok(parts.join(" | "))
    }
}

fn call(ids: &[&str]) -> Message {
    Message::assistant_tool_calls(ids.iter().map(|id| ToolCall::new(*id, "f", "{}")).collect())
}

#[test]
fn tool_units_are_evicted_whole() {
    let calls = RefCell::new(Vec::new());
    // Costs (3 framing + role + words; a call adds 1 + its id, name, arguments):
    // "check both" 6, the call 12, each result 7, the interleaved question 6,
    // the orphan 7, "next topic" 6. The tool unit (call, results, question) is 32.
    let mut memory = RollingMemory::new(
        Settings::new(40)
            .low_water(40)
            .summarizer(appending(&calls))
            .counter(words),
    )
    .unwrap();
    memory.add_user("check both").unwrap();
    memory.add_message(call(&["a", "b"])).unwrap();
    memory.add_tool("result a", "a").unwrap();
    memory.add_user("interleaved question").unwrap();
    memory.add_tool("result b", "b").unwrap();
    assert!(calls.borrow().is_empty());
    memory.add_tool("orphan result", "nobody").unwrap();
    assert_eq!(calls.borrow().as_slice(), [vec!["check both"]]);
    memory.add_user("next topic").unwrap();
    // The unit went whole, in one call; the orphan went with it so the
    // buffer opens with a user turn.
    assert_eq!(
        calls.borrow()[1],
        [
            "",
            "result a",
            "interleaved question",
            "result b",
            "orphan result"
        ]
    );
    assert_eq!(texts(&memory.buffer()), ["next topic"]);
}

/// Adds `u…` texts as user turns and the others as assistant turns.
fn add_turns(memory: &mut impl Remember, turns: &[&str]) {
    for t in turns {
        let m = if t.starts_with('u') {
            Message::user(*t)
        } else {
            Message::assistant(*t)
        };
        memory.add_message(m).unwrap();
    }
}

#[test]
fn alignment_cascades_over_response_like_units() {
    let calls = RefCell::new(Vec::new());
    let mut memory = RollingMemory::new(
        Settings::new(20)
            .summarizer(appending(&calls))
            .counter(|_: &str| 1),
    )
    .unwrap();
    // Each message costs 3 + 1 + 1 = 5; 20 keeps 4 messages.
    add_turns(&mut memory, &["u1", "a1", "a2", "a3"]);
    memory.add_user("u2").unwrap();
    assert_eq!(
        texts(&memory.buffer()),
        ["u2"],
        "the cut moved past a1..a3 to the user turn"
    );
    assert_eq!(
        calls.borrow().len(),
        1,
        "one summarizer call for the four evicted messages"
    );
    assert_eq!(calls.borrow()[0], ["u1", "a1", "a2", "a3"]);
}

#[test]
fn alignment_is_skipped_when_every_head_is_response_like() {
    let mut memory = RollingMemory::new(Settings::new(10).counter(|_: &str| 1)).unwrap();
    add_turns(&mut memory, &["u1", "a1", "a2", "a3"]);
    // 10 tokens keep two messages; both candidates open with an assistant turn.
    assert_eq!(texts(&memory.buffer()), ["a2", "a3"]);
    assert_eq!(memory.summary(), "", "no summarizer: evicted turns are dropped");
}

#[test]
fn latest_unit_is_kept_over_budget() {
    let mut memory = RollingMemory::new(Settings::new(5).counter(words)).unwrap();
    memory.add_user("small").unwrap();
    memory.add_message(call(&["x"])).unwrap();
    memory
        .add_tool("a very long tool result with many many words in it", "x")
        .unwrap();
    assert_eq!(
        memory.buffer().len(),
        2,
        "the call and its result stay, over budget"
    );
    assert!(memory.buffer_tokens() > 5);
}

#[test]
fn failing_summarizer_loses_nothing_and_retries() {
    let fail = Cell::new(true);
    let summarize = |r: &SummaryRequest<'_>| {
        if fail.get() {
            return Err("model down");
        }
        Ok(format!("{} folded", r.messages().count()))
    };
    // Each message costs 5: two are over a budget of 9.
    let mut memory = RollingMemory::new(Settings::new(9).summarizer(summarize).counter(|_: &str| 1)).unwrap();
    memory.add_user("one").unwrap();
    let before = memory.to_state();
    let err = memory.add_user("two").unwrap_err();
    assert!(matches!(err, Error::Summarize(_)));
    assert_eq!(memory.summary(), before.summary);
    assert_eq!(
        texts(&memory.buffer()),
        ["one", "two"],
        "nothing evicted, the new turn kept"
    );
    fail.set(false);
    memory.add_user("three").unwrap();
    assert_eq!(memory.summary(), "2 folded");
    assert_eq!(texts(&memory.buffer()), ["three"]);
}

#[test]
fn empty_summary_is_an_error_and_loses_nothing() {
    let mut memory = RollingMemory::new(
        Settings::new(5).summarizer(|_: &SummaryRequest<'_>| Ok::<_, Infallible>("  ".to_owned())),
    )
    .unwrap();
    memory.add_user("one").unwrap();
    assert!(matches!(memory.add_user("two"), Err(Error::EmptySummary)));
    assert_eq!(texts(&memory.buffer()), ["one", "two"]);
}

/// With a low-water mark a full rolling memory folds once per several adds,
/// each fold taking the buffer down to the mark; without, on almost every
/// add (rollmem's behaviour).
#[test]
fn a_low_water_mark_batches_the_folds() {
    let calls = |low: Option<usize>| {
        let n = Cell::new(0usize);
        let summarize = |_: &SummaryRequest<'_>| {
            n.set(n.get() + 1);
            Ok::<_, Infallible>("older turns".to_owned())
        };
        let settings = Settings::new(120).summarizer(summarize).counter(words);
        let settings = match low {
            Some(low) => settings.low_water(low),
            None => settings,
        };
        let mut memory = RollingMemory::new(settings).unwrap();
        for i in 0..60 {
            memory
                .add_user(format!("turn {i} about the trip to Busan"))
                .unwrap();
            assert!(memory.buffer_tokens() <= 120);
        }
        n.get()
    };
    let (every, batched) = (calls(Some(120)), calls(Some(60)));
    assert!(every >= 40, "{every}");
    assert!(batched * 4 <= every, "{batched} against {every}");
    // The default folds in steps too: down to half of max_tokens.
    assert_eq!(calls(None), batched);
    assert!(matches!(
        RollingMemory::new(Settings::new(100).low_water(101)),
        Err(Error::InvalidConfig(_))
    ));
}

/// A summary memory's setters cannot fail: an invalid policy is refused by
/// the first add, which adds nothing and calls no summarizer.
#[test]
fn summary_memory_refuses_an_invalid_policy_when_used() {
    let summarize = |_: &SummaryRequest<'_>| -> Result<String, Infallible> { panic!("not called") };
    let mut memory = SummaryMemory::new(summarize).policy(chatfold::FoldPolicy::new().summary_prefix(" "));
    let err = memory.add_user("hello").unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
    assert!(memory.buffer().is_empty() && memory.summary().is_empty());
}

#[test]
fn summary_memory_keeps_a_failed_turn_for_the_next_fold() {
    let fail = Cell::new(false);
    let calls = RefCell::new(Vec::new());
    let summarize = |r: &SummaryRequest<'_>| {
        calls
            .borrow_mut()
            .push(texts(&r.messages().cloned().collect::<Vec<_>>()));
        if fail.get() {
            Err("down")
        } else {
            Ok(format!("{} turns", r.messages().count()))
        }
    };
    let mut memory = SummaryMemory::new(summarize);
    memory.add_user("a").unwrap();
    fail.set(true);
    assert!(memory.add_user("b").is_err());
    assert_eq!(texts(&memory.buffer()), ["b"]);
    assert_eq!(memory.messages().len(), 2, "summary and the unfolded turn");
    fail.set(false);
    memory.add_user("c").unwrap();
    assert_eq!(calls.borrow().last().unwrap(), &["b", "c"]);
    assert!(memory.buffer().is_empty());
}

#[test]
fn window_keeps_whole_units() {
    let mut memory = WindowMemory::new(3).unwrap();
    memory.add_user("q").unwrap();
    memory.add_message(call(&["a", "b"])).unwrap();
    memory.add_tool("ra", "a").unwrap();
    memory.add_tool("rb", "b").unwrap();
    // The unit (call + 2 results) is 3 messages: it alone fills the window.
    assert_eq!(memory.buffer().len(), 3);
    assert_eq!(memory.buffer()[0].tool_calls.len(), 2);
    memory.add_user("next").unwrap();
    assert_eq!(
        texts(&memory.buffer()),
        ["next"],
        "the unit goes whole; alignment drops the rest"
    );
    assert!(matches!(WindowMemory::new(0), Err(Error::InvalidConfig { .. })));
}

#[test]
fn context_renders_summary_and_tool_calls() {
    let state = State::new("met Ann", vec![call(&["c1"]), Message::tool("sunny", "c1")]);
    let memory = BufferMemory::from_state(state);
    assert_eq!(
        memory.context(),
        "system: Summary of earlier conversation:\nmet Ann\nassistant: [tool call c1: f({})]\ntool [c1]: sunny"
    );
}

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

/// rollmem re-counts the whole buffer on every add; chatfold counts each
/// message once.
#[test]
fn each_message_is_counted_once() {
    let counted = Cell::new(0usize);
    // Counts how often a message's content is counted (not its role, nor
    // the summary, which is counted once per fold to cut it to its cap).
    let counter = |text: &str| {
        if text.starts_with("message number") {
            counted.set(counted.get() + 1);
        }
        text.split_whitespace().count()
    };
    let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("s".to_owned());
    let mut memory = RollingMemory::new(Settings::new(4_000).summarizer(summarize).counter(counter)).unwrap();
    let baseline = counted.get();
    let mut messages_added = 0;
    for i in 0..10_000 {
        memory
            .add_user(format!("message number {i} with a few words"))
            .unwrap();
        messages_added += 1;
    }
    assert_eq!(counted.get() - baseline, messages_added);
}

/// A future that stays pending until its gate opens.
struct Gate(Arc<AtomicBool>);

impl Future for Gate {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// An async summarizer that waits on a gate, counts its calls, and can fail.
#[derive(Clone)]
struct Gated {
    open: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
    fail: Arc<AtomicBool>,
}

impl Gated {
    fn new() -> Self {
        Gated {
            open: Arc::new(AtomicBool::new(false)),
            calls: Arc::new(AtomicUsize::new(0)),
            fail: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl chatfold::AsyncSummarizer for Gated {
    type Error = &'static str;
    fn summarize(&self, r: SummaryRequest<'_>) -> impl Future<Output = Result<String, &'static str>> + Send {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (gate, fail) = (Gate(self.open.clone()), self.fail.load(Ordering::SeqCst));
        async move {
            gate.await;
            if fail {
                return Err("down");
            }
            let mut parts: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
            parts.extend(r.messages().map(|m| m.text().into_owned()));
            Ok(parts.join(" | "))
        }
    }
}

fn one_per_message() -> impl Fn(&str) -> usize + Sync {
    |_: &str| 1
}

/// A memory of 9 tokens (each message costs 5: two are over) holding "u1",
/// whose summarizer waits on a gate.
fn gated_memory_with_u1() -> (Gated, AsyncRollingMemory<Gated, impl Fn(&str) -> usize + Sync>) {
    let s = Gated::new();
    let memory =
        AsyncRollingMemory::new(Settings::new(9).summarizer(s.clone()).counter(one_per_message())).unwrap();
    pollster::block_on(memory.add_user("u1")).unwrap();
    (s, memory)
}

#[test]
fn adds_during_an_in_flight_fold_are_kept_and_land_after_it() {
    let (s, memory) = gated_memory_with_u1();
    let mut first = pin!(memory.add_user("u2"));
    assert!(
        poll_once(first.as_mut()).is_pending(),
        "the fold waits on the summarizer"
    );
    // Meanwhile: adds return at once, leaving the fold to the one in flight.
    for t in ["u3", "u4"] {
        let mut add = pin!(memory.add_user(t));
        assert!(poll_once(add.as_mut()).is_ready());
    }
    assert_eq!(s.calls.load(Ordering::SeqCst), 1, "at most one fold in flight");
    assert_eq!(texts(&memory.buffer()), ["u1", "u2", "u3", "u4"]);
    s.open.store(true, Ordering::SeqCst);
    assert!(matches!(poll_once(first.as_mut()), Poll::Ready(Ok(()))));
    // The fold in flight folded u1, then looked again and folded what came meanwhile.
    assert_eq!(texts(&memory.buffer()), ["u4"]);
    assert_eq!(memory.summary(), "u1 | u2 | u3");
}

#[test]
fn clear_during_a_fold_discards_its_result() {
    let (s, memory) = gated_memory_with_u1();
    let mut add = pin!(memory.add_user("u2"));
    assert!(poll_once(add.as_mut()).is_pending());
    memory.clear();
    pollster::block_on(memory.add_user("after clear")).unwrap();
    s.open.store(true, Ordering::SeqCst);
    assert!(matches!(poll_once(add.as_mut()), Poll::Ready(Ok(()))));
    assert_eq!(memory.summary(), "");
    assert_eq!(texts(&memory.buffer()), ["after clear"]);
}

#[test]
fn cancelled_fold_leaves_the_state_and_the_next_add_folds() {
    let (s, memory) = gated_memory_with_u1();
    {
        let mut add = pin!(memory.add_user("u2"));
        assert!(poll_once(add.as_mut()).is_pending());
    } // dropped mid-fold
    assert_eq!(memory.summary(), "");
    assert_eq!(texts(&memory.buffer()), ["u1", "u2"]);
    s.open.store(true, Ordering::SeqCst);
    pollster::block_on(memory.add_user("u3")).unwrap();
    assert_eq!(memory.summary(), "u1 | u2");
    assert_eq!(texts(&memory.buffer()), ["u3"]);
}

#[test]
fn async_failure_keeps_everything() {
    let s = Gated::new();
    s.open.store(true, Ordering::SeqCst);
    s.fail.store(true, Ordering::SeqCst);
    let memory = AsyncSummaryMemory::new(s.clone());
    let err = pollster::block_on(memory.add_user("a")).unwrap_err();
    assert!(
        matches!(&err, chatfold::Error::Summarize(cause) if cause.to_string() == "down"),
        "{err}"
    );
    assert_eq!(texts(&memory.buffer()), ["a"]);
    s.fail.store(false, Ordering::SeqCst);
    pollster::block_on(memory.add_user("b")).unwrap();
    assert_eq!(memory.summary(), "a | b");
    assert!(memory.buffer().is_empty());
}

#[test]
fn async_memories_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<AsyncRollingMemory<Gated>>();
    check::<AsyncSummaryMemory<Gated>>();
}

/// One operation of the model-based test.
#[derive(Clone, Debug)]
enum Op {
    Add(common::Turn),
    Clear,
    SaveRestore,
    SetFailing(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => common::item().prop_map(Op::Add),
        1 => Just(Op::Clear),
        2 => Just(Op::SaveRestore),
        2 => any::<bool>().prop_map(Op::SetFailing),
    ]
}

/// Messages carry a unique tag; the summary lists the tags folded, in order.
fn tag_all(items: Vec<Message>, next: &mut usize) -> Vec<Message> {
    items
        .into_iter()
        .map(|mut m| {
            *next += 1;
            m.id = Some(format!("m{next}"));
            m
        })
        .collect()
}

/// The summaries here list every folded tag: they must never be cut.
fn lossless<S, C>(settings: Settings<S, C>) -> Settings<S, C> {
    settings.policy(chatfold::FoldPolicy::new().max_summary_tokens(usize::MAX))
}

/// The tags a tagging summarizer listed: its prose, before any ledger section.
fn tags_in(summary: &str) -> Vec<String> {
    let prose = summary
        .split(&format!("\n\n{}", chatfold::LEDGER_HEADING))
        .next()
        .unwrap_or("");
    prose.split_whitespace().map(str::to_owned).collect()
}

fn tags(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone().unwrap()).collect()
}

fn tagging_summarizer(
    failing: &Cell<bool>,
) -> impl Fn(&SummaryRequest<'_>) -> Result<String, &'static str> + '_ {
    move |r| {
        if failing.get() {
            return Err("down");
        }
        let mut out: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        out.extend(r.messages().map(|m| m.id.clone().unwrap()));
        Ok(out.join(" "))
    }
}

/// What was added since the last clear, and for each tool result whether the
/// call it answers was in the buffer when it arrived (if not, it arrived as an
/// orphan, and may stay one).
#[derive(Default)]
struct Added {
    all: Vec<Message>,
    joined: Vec<bool>,
}

impl Added {
    fn push(&mut self, m: &Message, buffer: &[Message]) {
        let joined = m
            .tool_call_id
            .as_deref()
            .is_some_and(|id| buffer.iter().any(|c| c.tool_calls.iter().any(|t| t.id == id)));
        self.all.push(m.clone());
        self.joined.push(joined);
    }

    fn clear(&mut self) {
        *self = Added::default();
    }

    /// Summary + buffer account for every message, once, in order (or, for a
    /// lossy memory, the buffer is a suffix); no result that joined its call
    /// is in the buffer without it.
    fn check(&self, summary: &str, buffer: &[Message], lossless: bool) {
        let mut seen = tags_in(summary);
        seen.extend(tags(buffer));
        if lossless {
            assert_eq!(
                seen,
                tags(&self.all),
                "summary + buffer must be every message since the last clear"
            );
        } else {
            assert!(
                tags(&self.all).ends_with(&tags(buffer)),
                "the buffer is a suffix of what was added"
            );
        }
        for (j, m) in buffer.iter().enumerate() {
            let Some(id) = m.tool_call_id.as_deref() else {
                continue;
            };
            let pos = self.all.iter().position(|a| a.id == m.id).unwrap();
            if self.joined[pos] {
                let has_call = buffer[..j]
                    .iter()
                    .any(|c| c.tool_calls.iter().any(|t| t.id == id));
                assert!(has_call, "result {id} kept without its call");
            }
        }
    }
}

proptest! {
    #![proptest_config(common::cases(128))]

    #[test]
    fn rolling_memory_loses_nothing(ops in prop::collection::vec(op(), 1..60), max in 5usize..80, low in 0usize..=100) {
        let failing = Cell::new(false);
        // A low-water mark (0: none, rollmem's behaviour) changes how much
        // one fold takes, never what is kept.
        let settings = |max: usize| match low {
            0 => Settings::new(max),
            pct => Settings::new(max).low_water((max * pct / 100).max(1)),
        };
        let new = |state: State| RollingMemory::from_state(state, lossless(settings(max).summarizer(tagging_summarizer(&failing)).counter(words))).unwrap();
        let mut memory = new(State::default());
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            let mut added_ok = false;
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        let before = memory.to_state();
                        added.push(&m, &memory.buffer());
                        added_ok = memory.add_message(m).is_ok();
                        if !added_ok {
                            prop_assert!(failing.get());
                            prop_assert_eq!(&memory.summary(), &before.summary);
                            prop_assert_eq!(&memory.buffer()[..before.buffer.len()], &before.buffer[..]);
                        }
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = new(State::from_json_str(&json).unwrap());
                }
                Op::SetFailing(f) => failing.set(f),
            }
            added.check(&memory.summary(), &memory.buffer(), true);
            if added_ok {
                // Within budget, unless the latest unit alone is over it.
                let buffer = memory.buffer();
                let kept: usize = buffer.iter().map(|m| chatfold::TokenCounter::count_message(&words, m)).sum();
                prop_assert_eq!(kept, memory.buffer_tokens());
                prop_assert!(kept <= max || common::last_unit_start(&buffer) == 0,
                    "buffer over budget ({} > {}) with more than its latest unit", kept, max);
            }
        }
    }

    #[test]
    fn async_rolling_memory_loses_nothing(ops in prop::collection::vec(op(), 1..40), max in 5usize..80) {
        let failing = Arc::new(AtomicBool::new(false));
        let f = failing.clone();
        let summarize = move |r: SummaryRequest<'_>| {
            // A closure's future cannot borrow its argument: it owns a copy.
            let r = r.into_owned();
            let fail = f.load(Ordering::SeqCst);
            async move {
                if fail { return Err("down"); }
                let mut out: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
                out.extend(r.messages().map(|m| m.id.clone().unwrap()));
                Ok(out.join(" "))
            }
        };
        let new = |state: State| AsyncRollingMemory::from_state(state, lossless(Settings::new(max).summarizer(summarize.clone()).counter(words))).unwrap();
        let mut memory = new(State::default());
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        let _ = pollster::block_on(memory.add_message(m));
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = new(State::from_json_str(&json).unwrap());
                }
                Op::SetFailing(on) => failing.store(on, Ordering::SeqCst),
            }
            added.check(&memory.summary(), &memory.buffer(), true);
        }
    }

    #[test]
    fn summary_memory_loses_nothing(ops in prop::collection::vec(op(), 1..40)) {
        let failing = Cell::new(false);
        let mut memory = SummaryMemory::new(tagging_summarizer(&failing));
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            let mut added_ok = false;
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        let result = memory.add_message(m);
                        prop_assert_eq!(result.is_err(), failing.get());
                        added_ok = result.is_ok();
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = SummaryMemory::from_state(State::from_json_str(&json).unwrap(), tagging_summarizer(&failing));
                }
                Op::SetFailing(f) => failing.set(f),
            }
            added.check(&memory.summary(), &memory.buffer(), true);
            if added_ok { prop_assert!(memory.buffer().is_empty()); }
        }
    }

    #[test]
    fn window_memory_keeps_a_bounded_suffix(ops in prop::collection::vec(op(), 1..60), max in 1usize..12) {
        let mut memory = WindowMemory::new(max).unwrap();
        let (mut added, mut next) = (Added::default(), 0usize);
        for op in ops {
            match op {
                Op::Add(item) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        memory.add_message(m).unwrap();
                    }
                }
                Op::Clear => { memory.clear(); added.clear(); }
                Op::SaveRestore => {
                    let json = memory.to_state().to_json_string();
                    memory = WindowMemory::from_state(State::from_json_str(&json).unwrap(), max).unwrap();
                }
                Op::SetFailing(_) => {}
            }
            let buffer = memory.buffer();
            added.check("", &buffer, false);
            prop_assert!(buffer.len() <= max || common::last_unit_start(&buffer) == 0,
                "{} messages in a window of {max}", buffer.len());
        }
    }
}

/// An operation on a tiered memory: the common ones, or a fold run inline.
#[derive(Clone, Debug)]
enum TieredOp {
    Base(Op),
    Fold,
}

fn tiered_op() -> impl Strategy<Value = TieredOp> {
    prop_oneof![
        6 => op().prop_map(TieredOp::Base),
        1 => Just(TieredOp::Fold),
    ]
}

/// A tagging async summarizer that fails while `failing` is set, recording
/// the tags of the last chunk it was given.
fn tiered_summarizer(
    failing: Arc<AtomicBool>,
    last_chunk: Arc<std::sync::Mutex<Vec<String>>>,
) -> impl Fn(SummaryRequest<'_>) -> std::future::Ready<Result<String, &'static str>> + Clone + Send + Sync + 'static
{
    move |r| {
        *last_chunk.lock().unwrap() = tags(&r.messages().cloned().collect::<Vec<_>>());
        if failing.load(Ordering::SeqCst) {
            return std::future::ready(Err("down"));
        }
        let mut out: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
        out.extend(r.messages().map(|m| m.id.clone().unwrap()));
        std::future::ready(Ok(out.join(" ")))
    }
}

proptest! {
    #![proptest_config(common::cases(128))]

    /// Every message added is in the summary's input, the summary or the
    /// buffer, exactly once and in order (less what a fallback truncation
    /// dropped, counted); tool results stay with their calls; the view is
    /// within the hard limit whenever L0 and the latest unit fit in it.
    #[test]
    fn tiered_memory_loses_nothing_and_keeps_the_hard_limit(
        ops in prop::collection::vec(tiered_op(), 1..60),
        soft in 5usize..60,
        extra in 0usize..60,
        chunk in 1usize..6,
        fallback in any::<bool>(),
        max_failures in 1usize..3,
        system in prop::collection::vec("[a-z]{1,6}( [a-z]{1,6}){0,4}", 0..2),
    ) {
        use chatfold::memory::{TieredMemory, TieredSettings};
        use chatfold::TokenCounter;
        let failing = Arc::new(AtomicBool::new(false));
        let last_chunk = Arc::new(std::sync::Mutex::new(Vec::new()));
        let summarize = tiered_summarizer(failing.clone(), last_chunk.clone());
        let hard = soft + extra;
        let settings = TieredSettings::new(soft, hard)
            .chunk_size(chunk)
            .fallback_truncate(fallback)
            .max_failures(max_failures)
            .counter(words)
            .policy(chatfold::FoldPolicy::new().max_summary_tokens(usize::MAX));
        let l0: Vec<Message> = system.iter().map(Message::system).collect();
        let (mut memory, _) = TieredMemory::new(l0.clone(), settings.clone(), summarize.clone()).unwrap();
        let (mut added, mut next, mut dropped) = (Added::default(), 0usize, Vec::<String>::new());
        for op in ops {
            match op {
                TieredOp::Base(Op::Add(item)) => {
                    for m in tag_all(common::render(&[item]), &mut next) {
                        added.push(&m, &memory.buffer());
                        memory.add_message(m);
                    }
                }
                TieredOp::Base(Op::Clear) => { memory.clear(); added.clear(); dropped.clear(); }
                TieredOp::Base(Op::SaveRestore) => {
                    let json = memory.to_state().to_json_string();
                    let state = State::from_json_str(&json).unwrap();
                    prop_assert_eq!(&state.system, &l0);
                    memory = TieredMemory::from_state(state, settings.clone(), summarize.clone()).unwrap().0;
                }
                TieredOp::Base(Op::SetFailing(on)) => failing.store(on, Ordering::SeqCst),
                TieredOp::Fold => {
                    let before = memory.stats();
                    let result = pollster::block_on(memory.fold_now());
                    prop_assert_eq!(result.is_err(), failing.load(Ordering::SeqCst) && before.folds_pending > 0);
                    let before = before.messages_dropped;
                    let lost = memory.stats().messages_dropped - before;
                    prop_assert!(fallback || lost == 0, "dropped without fallback_truncate");
                    if lost > 0 {
                        let chunk = last_chunk.lock().unwrap().clone();
                        prop_assert_eq!(chunk.len() as u64, lost);
                        dropped.extend(chunk);
                    }
                    if result.is_ok() {
                        prop_assert!(memory.stats().buffer_tokens <= soft || common::last_unit_start(&memory.buffer()) == 0
                            || memory.stats().folds_pending == 0);
                    }
                }
            }
            // Nothing lost: summary + buffer = what was added, less what was dropped.
            let kept: Vec<Message> = added.all.iter().filter(|m| !dropped.contains(m.id.as_ref().unwrap())).cloned().collect();
            let model = Added { joined: added.all.iter().zip(&added.joined).filter(|(m, _)| !dropped.contains(m.id.as_ref().unwrap())).map(|(_, j)| *j).collect(), all: kept };
            model.check(&memory.summary(), &memory.buffer(), true);
            // The view: within the hard limit whenever L0 and the latest unit fit.
            let view = memory.messages();
            let view_tokens = words.reply_priming() + view.iter().map(|m| words.count_message(m)).sum::<usize>();
            prop_assert_eq!(view_tokens, memory.stats().view_tokens);
            prop_assert_eq!(&view[..l0.len()], &l0[..]);
            let buffer = memory.buffer();
            let latest = &buffer[common::last_unit_start(&buffer)..];
            let floor = words.reply_priming()
                + l0.iter().chain(latest).map(|m| words.count_message(m)).sum::<usize>();
            prop_assert!(view_tokens <= hard || floor > hard, "view of {} tokens over the hard limit {}", view_tokens, hard);
            // The view is a suffix of the buffer, after L0 and at most one summary.
            let shown = &view[l0.len()..];
            let summaries = shown.iter().filter(|m| memory.policy().is_summary(m)).count();
            prop_assert!(summaries <= 1);
            prop_assert!(buffer.ends_with(&shown[summaries..]));
        }
    }
}

/// In a buffer nothing is hoisted: a system message is an ordinary opening
/// (rollmem's rule), not looked past as the compactor does.
#[test]
fn a_system_message_at_the_head_of_a_buffer_opens_it() {
    let mut window = WindowMemory::new(4).unwrap();
    for m in [
        Message::user("u1"),
        Message::system("s"),
        Message::assistant("a1"),
        Message::user("u2"),
        Message::assistant("a2"),
    ] {
        window.add_message(m).unwrap();
    }
    assert_eq!(texts(&window.buffer()), ["s", "a1", "u2", "a2"]);

    let calls = RefCell::new(Vec::new());
    let one = |_: &str| 1;
    let per = chatfold::TokenCounter::count_message(&one, &Message::user("u1"));
    let mut rolling = RollingMemory::new(
        Settings::new(2 * per)
            .low_water(2 * per)
            .summarizer(appending(&calls))
            .counter(one),
    )
    .unwrap();
    for m in [
        Message::user("u1"),
        Message::system("s"),
        Message::assistant("a1"),
    ] {
        rolling.add_message(m).unwrap();
    }
    // Two messages fit: the fold takes u1 only, and the system message opens
    // the buffer (looked past, it would have been folded with u1).
    assert_eq!(calls.borrow().concat(), ["u1"]);
    assert_eq!(texts(&rolling.buffer()), ["s", "a1"]);
}
