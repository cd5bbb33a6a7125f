use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use super::*;
use crate::count::Heuristic;
use crate::message::ToolCall;

fn rules(policy: &FoldPolicy) -> Rules<'_, Heuristic> {
    Rules {
        policy,
        counter: &Heuristic,
        allowance: 100,
        exact: true,
    }
}

fn buffer(messages: Vec<Message>) -> Tracked {
    Tracked::new(State::new("", messages), &Heuristic, true, &FoldPolicy::new())
}

#[test]
fn the_buffer_keeps_its_counts_and_callers_as_it_changes() {
    let call = Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]);
    let mut b = buffer(vec![Message::user("one"), call.clone()]);
    b.push(Message::tool("r", "c1"), Some(5));
    b.push(call, Some(7));
    assert_eq!(b.callers, [1, 3]);
    let total: usize = b.tokens().iter().sum();
    assert_eq!(b.total(), total);
    b.drop_front(2);
    assert_eq!(b.callers, [1]);
    assert_eq!(b.tokens(), &[5, 7]);
    assert_eq!(b.total(), 12);
    b.replace(0, Message::tool("cleared", "c1"), 2);
    assert_eq!(b.total(), 9);
    b.clear();
    assert_eq!((b.messages().len(), b.total(), b.callers.len()), (0, 0, 0));
}

#[test]
fn a_fold_begun_before_a_clear_is_discarded() {
    let policy = FoldPolicy::new();
    let mut b = buffer(vec![Message::user("old turn"), Message::user("new turn")]);
    let (ticket, request) = b.begin(1, rules(&policy)).unwrap();
    assert_eq!(request.messages().count(), 1);
    drop(request);
    let summary = b.complete(&ticket, Ok("the old turn".to_owned()), rules(&policy));
    b.clear();
    b.push(Message::user("after the clear"), Some(3));
    assert!(matches!(b.land(ticket, summary), Landed::Stale));
    assert_eq!(b.messages().len(), 1);
    assert!(b.state.summary.is_empty());
}

/// The ledger a fold lands is its candidates (the folded turns' entries
/// ranked with the memory's) less what the summary dropped, at most
/// `cap`, with entries found again, dropped for room, and a cap that
/// binds; what the user said again leads, under its tier.
#[test]
fn a_landed_ledger_is_the_merged_one_less_the_dropped() {
    let listed: Vec<String> = (0..40).map(|i| format!("- /srv/old/file-{i:02}.csv")).collect();
    let summary = format!(
        "Earlier work.{}{}",
        "\n\nExact identifiers (kept verbatim):\n",
        listed.join("\n")
    );
    for (allowance, ledger_percent) in [(60, 100), (100, 33), (400, 100), (30, 10)] {
        let policy = FoldPolicy::new().ledger_percent(ledger_percent);
        let folded = Message::user("read /srv/old/file-03.csv and /srv/new/a.csv, then /srv/old/file-17.csv");
        let mut b = Tracked::new(
            State::new(summary.clone(), vec![folded, Message::user("next")]),
            &Heuristic,
            true,
            &policy,
        );
        let rules = Rules {
            allowance,
            ..rules(&policy)
        };
        let (ticket, _) = b.begin(1, rules).unwrap();
        let completed = b.complete(&ticket, Ok("Short.".to_owned()), rules).unwrap();
        let texts: Vec<String> = ticket.candidates.texts.iter().map(|t| t.to_string()).collect();
        let expected: Vec<String> = (0..texts.len())
            .filter(|i| !completed.fitted.dropped.contains(i))
            .map(|i| texts[i].clone())
            .take(completed.cap)
            .collect();
        assert!(matches!(
            b.land(ticket, Ok(completed)),
            Landed::Folded { n: 1, .. }
        ));
        assert_eq!(
            b.ledger.texts, expected,
            "allowance {allowance}, {ledger_percent}%"
        );
        // Found again, an identifier is kept once at most, newest first.
        assert!(
            b.ledger
                .texts
                .iter()
                .filter(|t| t.ends_with("file-03.csv"))
                .count()
                <= 1
        );
        assert!(b.ledger.len() == 0 || b.ledger.texts[0] == "/srv/old/file-17.csv");
        assert!(b.ledger.len() == 0 || b.ledger.tiers[0] == Tier::User);
        // Past the user's, the older entries in the order they were listed.
        let old: Vec<&str> = (b.ledger.texts.iter().zip(&b.ledger.tiers))
            .filter(|(_, t)| **t == Tier::Repeated)
            .map(|(e, _)| &**e)
            .collect();
        let mut sorted = old.clone();
        sorted.sort();
        assert_eq!(old, sorted);
        assert!(b.ledger.len() <= expected.len().max(1));
    }
}

#[test]
fn a_failed_or_blank_answer_changes_nothing() {
    let policy = FoldPolicy::new();
    let mut b = buffer(vec![Message::user("a"), Message::user("b")]);
    for answer in [Err::<String, BoxError>("down".into()), Ok("  ".to_owned())] {
        let (ticket, _) = b.begin(1, rules(&policy)).unwrap();
        let summary = b.complete(&ticket, answer, rules(&policy));
        assert!(matches!(b.land(ticket, summary), Landed::Failed { n: 1, .. }));
        assert_eq!(b.messages().len(), 2);
    }
    assert!(b.begin(0, rules(&policy)).is_none());
}

#[test]
fn a_cancelled_unlocked_fold_ends_and_the_next_one_runs() {
    let policy = FoldPolicy::new();
    let cell = Mutex::new(buffer(vec![Message::user("a"), Message::user("b")]));
    let mut cx = Context::from_waker(Waker::noop());
    {
        let never = |_| std::future::pending::<Option<std::result::Result<String, BoxError>>>();
        let mut fold = pin!(fold_unlocked(&cell, rules(&policy), |_| 1, never, |_, l| l));
        assert!(fold.as_mut().poll(&mut cx).is_pending());
        assert!(lock(&cell).folding());
        // A second fold meanwhile is told one is in flight.
        let busy = pin!(fold_unlocked(&cell, rules(&policy), |_| 1, never, |_, l| l)).poll(&mut cx);
        assert!(matches!(busy, Poll::Ready(Step::Busy)));
    }
    assert!(!lock(&cell).folding(), "dropping the future ends the fold");
    let answer = |_| async { Some(Ok::<_, BoxError>("a was said".to_owned())) };
    let done = pin!(fold_unlocked(&cell, rules(&policy), |_| 1, answer, |_, l| l)).poll(&mut cx);
    assert!(matches!(
        done,
        Poll::Ready(Step::Landed(Landed::Folded { n: 1, .. }))
    ));
    let held = lock(&cell);
    assert_eq!(held.messages().len(), 1);
    assert!(held.state.summary.starts_with("a was said"));
}
