//! The memory strategies: rollmem's promises, one test each (the
//! asynchronous ones, saved states and the model-based property tests are
//! in `memory_async.rs`, `memory_state.rs` and `memory_model.rs`).

mod common;

use std::cell::{Cell, RefCell};
use std::convert::Infallible;

use chatfold::memory::{
    BufferMemory, Memory, Remember, RollingMemory, Settings, State, SummaryMemory, WindowMemory,
};
use chatfold::{Error, Message, SummaryRequest};
use common::memory::{appending, call, texts, words};

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
