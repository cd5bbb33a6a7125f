//! DESIGN.md's rule 11 as property tests: a pinned message is in every
//! output, verbatim, after the summary, in its order, and pins count against
//! the budget; with every other rule checked alongside by the oracle.

mod common;

use std::convert::Infallible;
#[cfg(feature = "cache")]
use std::sync::Arc;

use chatfold::testing::{Form, Histories};
use chatfold::{Compactor, Error, Heuristic, Message, Pin, Role, SummaryRequest, TokenCounter};
use common::*;
use proptest::prelude::*;

/// Some pins: the task, the question, an index, a predicate.
fn pins() -> impl Strategy<Value = Vec<Pin>> {
    prop::collection::vec(
        prop_oneof![
            Just(Pin::FirstUser),
            Just(Pin::LastUser),
            (0usize..40).prop_map(Pin::Index),
            Just(Pin::matching(|_, m: &Message| m.text().contains('7'))),
        ],
        0..4,
    )
}

fn pinned(mut c: Compactor, pins: Vec<Pin>, len: usize) -> Compactor {
    // An index past the end is an error of its own (tested below).
    for pin in pins {
        if !matches!(pin, Pin::Index(i) if i >= len) {
            c = c.pin(pin);
        }
    }
    c
}

fn summarize(_: &SummaryRequest<'_>) -> Result<String, Infallible> {
    Ok("the earlier turns".to_owned())
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn rules_hold_with_pins(
        h in history(40),
        pins in pins(),
        budget in 1usize..600,
        strict in any::<bool>(),
    ) {
        let c = pinned(Compactor::new(budget).strict(strict), pins, h.len());
        check_rules(&c, &h, "summary of the earlier turns");
    }

    #[test]
    fn rules_hold_with_pins_over_anthropic_tool_blocks(
        h in Histories::new().max_turns(40).form(Form::Anthropic).strategy(),
        pins in pins(),
        budget in 1usize..600,
    ) {
        let c = pinned(Compactor::new(budget), pins, h.len());
        check_rules(&c, &h, "summary of the earlier turns");
    }

    /// An agent loop fed back its outputs: the task and the latest question
    /// stand verbatim after the one summary in every request.
    #[test]
    fn the_task_and_the_question_survive_every_fold(
        rounds in prop::collection::vec((1usize..6, 0usize..200), 2..12),
        budget in 300usize..900,
    ) {
        let c = Compactor::new(budget).pin(Pin::FirstUser).pin(Pin::LastUser);
        let task = Message::user("Task: find why checkout p99 went from 180 ms to 840 ms.");
        let mut h = vec![Message::system("You are an SRE agent."), task.clone()];
        for (round, (calls, size)) in rounds.into_iter().enumerate() {
            let question = Message::user(format!("Question {round}: what changed on db-{round}?"));
            h.push(question.clone());
            for k in 0..calls {
                let id = format!("call-{round}-{k}");
                h.push(Message::assistant_tool_calls(vec![chatfold::ToolCall::new(&id, "query", "{}")]));
                h.push(Message::tool(format!("rows {k}: {}", "x".repeat(size)), &id));
            }
            let Some(out) = check_rules(&c, &h, "the investigation so far") else { continue };
            let s = out.iter().position(|m| c.policy.is_summary(m));
            for wanted in [&task, &question] {
                let at = out.iter().position(|m| m == wanted);
                prop_assert!(at.is_some(), "lost {:?}", wanted.text());
                prop_assert!(s.is_none_or(|s| at.unwrap() > s));
            }
            h = out;
        }
    }

    /// Pins that alone pass the budget are an error that says so; the
    /// input is unchanged.
    #[test]
    fn pins_over_the_budget_are_an_error(h in history(30), budget in 1usize..200) {
        let c = Compactor::new(budget).pin(Pin::matching(|_, m: &Message| m.role == Role::User));
        let before = h.clone();
        match chatfold::testing::compact_checked(&c, &h, "s") {
            Ok(_) => {}
            Err(violations) => prop_assert!(false, "{violations}"),
        }
        prop_assert_eq!(&h, &before);
    }
}

#[test]
fn an_index_past_the_end_is_a_config_error() {
    let h: Vec<Message> = (0..30)
        .map(|i| Message::user(format!("turn {i} with some words")))
        .collect();
    let err = Compactor::new(50)
        .pin(Pin::Index(30))
        .compact(&h, &summarize)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
    assert!(err.to_string().contains("pin (30) must be at most 29"), "{err}");
}

#[test]
fn a_pin_over_the_budget_names_the_pins() {
    let mut h = vec![Message::user("task ".repeat(400))];
    h.extend((0..20).map(|i| Message::assistant(format!("step {i}"))));
    let err = Compactor::new(100)
        .pin(Pin::FirstUser)
        .compact(&h, &summarize)
        .unwrap_err();
    let Error::PinnedOverBudget { budget, pinned } = err else {
        panic!("{err}")
    };
    assert_eq!(budget, 100);
    assert!(pinned > 400, "{pinned}");
    assert!(err_text(&h).contains("pinned"), "{}", err_text(&h));
}

fn err_text(h: &[Message]) -> String {
    Compactor::new(100)
        .pin(Pin::FirstUser)
        .compact(h, &summarize)
        .unwrap_err()
        .to_string()
}

/// A client that resends its whole transcript, with a cache: the pinned
/// task stays after the summary, and between folds each request extends the
/// previous one byte for byte (rule 10 with rule 11).
#[cfg(feature = "cache")]
#[test]
fn a_replayed_fold_keeps_its_pins_and_its_prefix() {
    let cache = Arc::new(chatfold::cache::MemoryCache::new(256, 1 << 20));
    let c = Compactor::new(400).pin(Pin::FirstUser).cache(cache, "pins");
    let task = Message::user("Task: rename the payments bucket to pay-eu-2026.");
    let mut h = vec![task.clone()];
    let mut previous: Option<Vec<Message>> = None;
    let (mut folds, mut extended) = (0, 0);
    for i in 0..60 {
        h.push(Message::assistant(format!(
            "Step {i}: renamed objects batch {i} of the bucket."
        )));
        h.push(Message::user(format!("Go on with batch {}.", i + 1)));
        let out = c.compact(&h, &summarize).unwrap();
        assert!(!out.over_budget);
        if out.summarized {
            let s = out.messages.iter().position(|m| c.policy.is_summary(m)).unwrap();
            assert_eq!(out.messages[s + 1], task, "the task follows the summary");
            assert_eq!(out.report.fate(0), Some(chatfold::Fate::Pinned));
        }
        if out.report.prefix_kept() {
            if let Some(prev) = &previous {
                assert_eq!(
                    &out.messages[..prev.len()],
                    &prev[..],
                    "request {i} rewrote the prefix"
                );
                extended += 1;
            }
        } else {
            folds += 1;
        }
        previous = Some(out.messages.into_owned());
    }
    assert!(
        folds >= 2 && extended > folds * 3,
        "{folds} folds, {extended} extended"
    );
    let counted = c.counter.count_messages(previous.as_deref().unwrap());
    assert!(counted <= 400, "{counted}");
}

/// The memories keep a pinned task across folds: at the buffer's front,
/// verbatim, while everything after it folds.
#[test]
fn the_memories_keep_a_pinned_task_across_folds() {
    use chatfold::memory::{
        Memory, Remember, RollingMemory, Settings, SummaryMemory, TieredMemory, TieredSettings,
    };
    use chatfold::{Extractive, ToolCall};

    let task = Message::user("Task: rotate the TLS certificates of edge-17 before 2026-12-31.");
    let turns = |i: usize| {
        let id = format!("call-{i}");
        [
            Message::assistant_tool_calls(vec![ToolCall::new(
                &id,
                "inspect",
                format!("{{\"host\": \"edge-{i}\"}}"),
            )]),
            Message::tool(
                format!("host edge-{i}: certificate valid until 2027-0{}-01", i % 9 + 1),
                &id,
            ),
            Message::user(format!("Next host after edge-{i}, please.")),
        ]
    };

    let mut rolling = RollingMemory::new(
        Settings::new(200)
            .pin(Pin::FirstUser)
            .summarizer(Extractive::new()),
    )
    .unwrap();
    let mut summary = SummaryMemory::new(Extractive::new()).pins(vec![Pin::FirstUser]);
    let (tiered, _) = TieredMemory::new(
        [],
        TieredSettings::new(200, 800).pin(Pin::FirstUser),
        chatfold::Ready(Extractive::new()),
    )
    .unwrap();
    rolling.add_message(task.clone()).unwrap();
    summary.add_message(task.clone()).unwrap();
    tiered.add_message(task.clone());
    for i in 0..40 {
        for m in turns(i) {
            rolling.add_message(m.clone()).unwrap();
            summary.add_message(m.clone()).unwrap();
            tiered.add_message(m);
        }
        pollster::block_on(tiered.fold_now()).unwrap();
        for (name, buffer) in [
            ("rolling", rolling.buffer().into_owned()),
            ("summary", summary.buffer().into_owned()),
            ("tiered", tiered.buffer().into_owned()),
        ] {
            assert_eq!(buffer.first(), Some(&task), "{name} lost the task at turn {i}");
            assert_eq!(buffer.iter().filter(|m| **m == task).count(), 1, "{name}");
        }
        let tokens = Heuristic.count_messages(&rolling.buffer());
        assert!(tokens <= 200, "rolling buffer at {tokens}");
    }
    for (name, summary) in [
        ("rolling", rolling.summary()),
        ("summary", summary.summary()),
        ("tiered", tiered.summary()),
    ] {
        assert!(summary.contains("edge-"), "{name} folded nothing: {summary:?}");
        assert!(
            !summary.contains("rotate the TLS"),
            "{name} folded the pinned task"
        );
    }
    // Saved and restored, the task is still the buffer's front.
    let restored = RollingMemory::from_state(
        rolling.to_state(),
        Settings::new(200)
            .pin(Pin::FirstUser)
            .summarizer(Extractive::new()),
    )
    .unwrap();
    assert_eq!(restored.buffer()[0], task);
}
