//! `chatfold::testing` itself: the rule checks catch a result broken in
//! each rule's way (mutation tests), accept what the library produces, and
//! the faulty summarizers do what they say.

mod common;

use std::borrow::Cow;
use std::time::{Duration, Instant};

use chatfold::memory::{Memory, Remember, RollingMemory, Settings, State, WindowMemory};
use chatfold::testing::{
    Fault, Faulty, Gate, Histories, Oddity, Recording, Rule, Violations, check_compaction, check_memory_step,
    check_summarizer_calls, compact_checked, histories, render,
};
use chatfold::{AsyncSummarizer, Compaction, Compactor, Message, SummaryRequest, ToolCall};
use proptest::prelude::*;

/// A long history with system messages, a tool unit in the middle and
/// alternating turns, and a compaction of it that keeps the rules.
fn history() -> Vec<Message> {
    let mut h = vec![
        Message::system("You are terse."),
        Message::developer("Answer in English."),
    ];
    for i in 0..12 {
        h.push(Message::user(format!(
            "question number {i} about the deploy pipeline"
        )));
        h.push(Message::assistant(format!(
            "answer number {i}: look at the logs first"
        )));
    }
    h.push(Message::assistant_tool_calls(vec![ToolCall::new(
        "c1", "logs", "{}",
    )]));
    h.push(Message::tool("error: disk full on node seven", "c1"));
    for i in 12..16 {
        h.push(Message::user(format!("question number {i} about the disk")));
        h.push(Message::assistant(format!("answer number {i}: free some space")));
    }
    h
}

fn compacted<'a>(compactor: &Compactor, h: &'a [Message]) -> Compaction<'a> {
    let result = compact_checked(compactor, h, "The user asked about the deploy.")
        .unwrap_or_else(|v| panic!("{v}"))
        .expect("a result");
    assert!(result.summarized);
    result
}

/// `result` with its messages replaced, the counts kept exact.
fn with_messages<'a>(
    compactor: &Compactor,
    result: &Compaction<'a>,
    messages: Vec<Message>,
) -> Compaction<'a> {
    let mut broken = result.clone();
    broken.tokens_after = chatfold::TokenCounter::count_messages(&compactor.counter, &messages);
    broken.over_budget = broken.tokens_after > compactor.budget;
    broken.messages = Cow::Owned(messages);
    broken
}

/// Where the summary is in a result.
fn summary_index(compactor: &Compactor, result: &Compaction<'_>) -> usize {
    result
        .messages
        .iter()
        .position(|m| compactor.policy.is_summary(m))
        .expect("a summary")
}

fn broken_rules(h: &[Message], result: &Compaction<'_>, compactor: &Compactor) -> Vec<Rule> {
    match check_compaction(h, result, compactor) {
        Ok(()) => vec![],
        Err(v) => {
            assert!(!v.to_string().is_empty());
            v.rules()
        }
    }
}

#[test]
fn a_valid_result_passes() {
    let h = history();
    let compactor = Compactor::new(150);
    let result = compacted(&compactor, &h);
    assert_eq!(check_compaction(&h, &result, &compactor), Ok(()));
}

#[test]
fn a_split_unit_is_reported() {
    let h = history();
    let compactor = Compactor::new(1_000);
    let mut result = compacted(&Compactor::new(150), &h);
    // Rebuild a result over `h` whose kept part opens with the tool result.
    let call = h.iter().position(|m| !m.tool_calls.is_empty()).unwrap();
    let summary = result
        .messages
        .iter()
        .find(|m| compactor.policy.is_summary(m))
        .unwrap()
        .clone();
    let mut out = vec![h[0].clone(), h[1].clone(), summary];
    out.extend_from_slice(&h[call + 1..]);
    result = with_messages(&compactor, &result, out);
    let rules = broken_rules(&h, &result, &compactor);
    assert!(rules.contains(&Rule::UnitBoundary), "{rules:?}");
    let violations = check_compaction(&h, &result, &compactor).unwrap_err();
    let v = violations
        .0
        .iter()
        .find(|v| v.rule == Rule::UnitBoundary)
        .unwrap();
    assert_eq!(v.indices, [call + 1]);
}

#[test]
fn an_assistant_first_cut_is_reported() {
    let h = history();
    let compactor = Compactor::new(150).fold_to(150);
    let result = compacted(&compactor, &h);
    let s = summary_index(&compactor, &result);
    let kept = result.messages.len() - s - 1;
    // Keep one message more: the assistant answer before the kept user turn.
    let cut = h.len() - kept - 1;
    assert_eq!(h[cut].role, chatfold::Role::Assistant);
    let mut out = result.messages[..=s].to_vec();
    out.extend_from_slice(&h[cut..]);
    // A budget the longer result fits, so that only the alignment is wrong.
    let roomy = Compactor::new(chatfold::TokenCounter::count_messages(&compactor.counter, &out));
    let broken = with_messages(&roomy, &result, out);
    assert_eq!(broken_rules(&h, &broken, &roomy), [Rule::AlignedCut]);
}

#[test]
fn two_summaries_are_reported() {
    let h = history();
    let compactor = Compactor::new(150);
    let result = compacted(&compactor, &h);
    let mut out = result.messages.to_vec();
    let s = out.iter().position(|m| compactor.policy.is_summary(m)).unwrap();
    out.insert(s, out[s].clone());
    let broken = with_messages(&compactor, &result, out);
    assert!(broken_rules(&h, &broken, &compactor).contains(&Rule::OneSummary));
}

#[test]
fn an_over_budget_result_is_reported() {
    let h = history();
    let compactor = Compactor::new(150);
    let result = compacted(&compactor, &h);
    let mut out = result.messages.to_vec();
    let s = out.iter().position(|m| compactor.policy.is_summary(m)).unwrap();
    out[s] = compactor
        .policy
        .summary_message(&"a far longer summary ".repeat(100));
    let broken = with_messages(&compactor, &result, out);
    assert_eq!(broken_rules(&h, &broken, &compactor), [Rule::Budget]);

    // And counts that lie.
    let mut lying = result.clone();
    lying.tokens_after -= 1;
    assert_eq!(broken_rules(&h, &lying, &compactor), [Rule::Counts]);
}

#[test]
fn a_reordered_or_lost_system_message_is_reported() {
    let h = history();
    let compactor = Compactor::new(150);
    let result = compacted(&compactor, &h);
    let mut out = result.messages.to_vec();
    out.swap(0, 1);
    let broken = with_messages(&compactor, &result, out.clone());
    assert_eq!(broken_rules(&h, &broken, &compactor), [Rule::PinnedKept]);
    out.remove(0);
    let broken = with_messages(&compactor, &result, out);
    let violations = check_compaction(&h, &broken, &compactor).unwrap_err();
    assert_eq!(violations.rules(), [Rule::PinnedKept]);
    assert_eq!(
        violations.0[0].indices,
        [1],
        "the developer message is the one lost"
    );
}

#[test]
fn a_dropped_latest_unit_and_a_changed_short_history_are_reported() {
    let h = history();
    let compactor = Compactor::new(150);
    let result = compacted(&compactor, &h);
    let s = summary_index(&compactor, &result);
    let broken = with_messages(&compactor, &result, result.messages[..=s].to_vec());
    assert!(broken_rules(&h, &broken, &compactor).contains(&Rule::LatestUnitKept));

    let short = &h[..4];
    let roomy = Compactor::new(10_000);
    let unchanged = roomy.compact(short, &chatfold::Extractive::new()).unwrap();
    assert_eq!(check_compaction(short, &unchanged, &roomy), Ok(()));
    let copied = with_messages(&roomy, &unchanged, short.to_vec());
    assert_eq!(broken_rules(short, &copied, &roomy), [Rule::UnderBudgetUnchanged]);
}

#[test]
fn the_summarizer_contract_is_checked() {
    let h = history();
    let compactor = Compactor::new(150);
    let recording =
        Recording::new(|_: &SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("short".to_owned()));
    let result = compactor.compact(&h, &recording).unwrap();
    let mut calls = recording.calls();
    assert_eq!(check_summarizer_calls(&h, &result, &compactor, &calls), Ok(()));
    calls[0].messages.remove(3);
    let violations = check_summarizer_calls(&h, &result, &compactor, &calls).unwrap_err();
    assert_eq!(violations.rules(), [Rule::SummarizerContract]);
    calls.push(calls[0].clone());
    assert!(check_summarizer_calls(&h, &result, &compactor, &calls).is_err());
}

#[test]
fn memory_steps_that_lose_or_split_are_reported() {
    let before = State::new("", vec![Message::user("a"), Message::assistant("b")]);
    let added = Message::user("c");
    let mut after = before.clone();
    after.buffer.push(added.clone());
    assert_eq!(check_memory_step(&before, &added, &after, false), Ok(()));
    assert_eq!(check_memory_step(&before, &added, &after, true), Ok(()));

    // A lost message in the middle.
    let lost = State::new("summary", vec![Message::user("a"), added.clone()]);
    let v = check_memory_step(&before, &added, &lost, false).unwrap_err();
    assert_eq!(v.rules(), [Rule::NothingLost]);
    assert_eq!(v.0[0].indices, [1]);
    // The new message lost.
    let dropped = State::new("summary", vec![Message::assistant("b")]);
    assert!(
        check_memory_step(&before, &added, &dropped, false)
            .unwrap_err()
            .has(Rule::NothingLost)
    );
    // A failed add that evicted anyway, or changed the summary.
    let evicted = State::new("", vec![Message::assistant("b"), added.clone()]);
    assert!(
        check_memory_step(&before, &added, &evicted, true)
            .unwrap_err()
            .has(Rule::NothingLost)
    );

    // An eviction that leaves a tool result without its call.
    let tools = State::new(
        "",
        vec![
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]),
            Message::tool("r", "c1"),
        ],
    );
    let split = State::new("s", vec![Message::tool("r", "c1"), added.clone()]);
    assert_eq!(
        check_memory_step(&tools, &added, &split, false)
            .unwrap_err()
            .rules(),
        [Rule::UnitBoundary]
    );
}

#[test]
fn faulty_fails_every_nth_call_and_steers_through_clones() {
    let folded = [Message::user("x")];
    let request = SummaryRequest::new(None, &folded, 10);
    let every_third = Faulty::failing_every(3);
    let outcomes: Vec<bool> = (0..6)
        .map(|_| chatfold::Summarizer::summarize(&every_third, &request).is_ok())
        .collect();
    assert_eq!(outcomes, [true, true, false, true, true, false]);

    let faulty = Faulty::new();
    let handle = faulty.clone();
    handle.set(Fault::Empty);
    assert_eq!(
        chatfold::Summarizer::summarize(&faulty, &request).unwrap().trim(),
        ""
    );
    handle.set(Fault::Oversized);
    assert!(chatfold::Summarizer::summarize(&faulty, &request).unwrap().len() > 10_000);
    assert_eq!(handle.calls(), 2);
}

#[tokio::test(flavor = "current_thread")]
async fn slow_and_gated_summarizers_wait_without_blocking() {
    let folded = [Message::user("x")];
    let slow = Faulty::new().slow(Duration::from_millis(200));
    let start = Instant::now();
    let (answer, ticked) = tokio::join!(
        AsyncSummarizer::summarize(&slow, SummaryRequest::new(None, &folded, 10).into_owned()),
        tokio::time::sleep(Duration::from_millis(50))
    );
    let () = ticked;
    assert_eq!(answer.unwrap(), "1 messages folded");
    assert!(start.elapsed() >= Duration::from_millis(200));

    let gate = Gate::new();
    let call = AsyncSummarizer::summarize(&gate, SummaryRequest::new(None, &folded, 10).into_owned());
    assert!(
        tokio::time::timeout(Duration::from_millis(50), call)
            .await
            .is_err(),
        "pending while closed"
    );
    let waiting = AsyncSummarizer::summarize(&gate, SummaryRequest::new(None, &folded, 10).into_owned());
    let open_later = async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(gate.waiting() >= 1, "the call waits at the gate");
        gate.open();
    };
    let (answer, ()) = tokio::join!(waiting, open_later);
    assert_eq!(answer.unwrap(), "1 messages folded");
}

#[test]
fn histories_can_be_tuned() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let plain = Histories::new()
        .max_turns(30)
        .tool_weight(0)
        .without(Oddity::CustomRoles)
        .without(Oddity::Orphans)
        .without(Oddity::Unicode)
        .strategy();
    for _ in 0..50 {
        let h = plain.new_tree(&mut runner).unwrap().current();
        assert!(
            h.iter()
                .all(|m| m.tool_calls.is_empty() && m.tool_call_id.is_none())
        );
        assert!(h.iter().all(|m| m.text().is_ascii()));
        assert!(h.len() < 30);
    }
    let mut some_tools = false;
    for _ in 0..50 {
        let h = histories(30).new_tree(&mut runner).unwrap().current();
        some_tools |= h.iter().any(|m| !m.tool_calls.is_empty());
    }
    assert!(some_tools);
}

proptest! {
    #![proptest_config(common::cases(48))]

    /// The memories keep `check_memory_step` on every add, with a summarizer
    /// that fails every third call.
    #[test]
    fn every_memory_step_keeps_the_rules(turns in prop::collection::vec(Histories::new().turn(), 1..30), max in 10usize..80) {
        let words = |t: &str| t.split_whitespace().count();
        let mut rolling = RollingMemory::new(Settings::new(max).summarizer(Faulty::failing_every(3)).counter(words)).unwrap();
        let mut window = WindowMemory::new(6).unwrap();
        for message in render(&turns) {
            let before = rolling.to_state();
            let failed = rolling.add_message(message.clone()).is_err();
            check_memory_step(&before, &message, &rolling.to_state(), failed).map_err(|v| TestCaseError::fail(v.to_string()))?;
            let before = window.to_state();
            window.add_message(message.clone()).unwrap();
            check_memory_step(&before, &message, &window.to_state(), false).map_err(|v| TestCaseError::fail(v.to_string()))?;
        }
    }
}

#[test]
fn violations_read_as_a_list() {
    let v = Violations(vec![
        chatfold::testing::Violation {
            rule: Rule::UnitBoundary,
            indices: vec![4],
            detail: "split".into(),
        },
        chatfold::testing::Violation {
            rule: Rule::Counts,
            indices: vec![],
            detail: "off by one".into(),
        },
    ]);
    assert_eq!(
        v.to_string(),
        "rule 3 (kept part is a verbatim suffix cut at a unit boundary) at [4]: split\nexact counts: off by one"
    );
    assert_eq!(Rule::Budget.number(), Some(6));
}
