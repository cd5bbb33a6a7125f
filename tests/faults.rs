//! Fault injection: summarizers that fail, return nothing, return far too
//! much, panic, stall past a deadline, or are cancelled. After every fault the
//! caller's messages and the memory are as documented, and the next call
//! succeeds once the summarizer recovers.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use chatfold::memory::{
    AsyncRemember, AsyncRollingMemory, AsyncSummaryMemory, Memory, Remember, RollingMemory, Settings, State,
    SummaryMemory,
};
use chatfold::testing::{Fault, Faulty, Gate};
use chatfold::{Compactor, Error, Message, SummaryRequest};

fn history() -> Vec<Message> {
    let mut h = vec![Message::system("Be brief.")];
    for i in 0..40 {
        h.push(Message::user(format!("question {i} about the deploy")));
        h.push(Message::assistant(format!("answer {i}: check the logs")));
    }
    h
}

#[test]
fn compaction_faults_leave_the_history_as_it_was() {
    let summarizer = Faulty::new();
    let fault = &summarizer;
    let compactor = Compactor::new(150);
    let h = history();
    let before = h.clone();
    for f in [Fault::Fail, Fault::Empty, Fault::Panic] {
        fault.set(f);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            compactor.compact(&h, &summarizer).map(|r| r.tokens_after)
        }));
        match (f, outcome) {
            (Fault::Fail, Ok(Err(Error::Summarize(e)))) => {
                assert!(e.to_string().starts_with("injected fault"), "{e}")
            }
            (Fault::Empty, Ok(Err(Error::EmptySummary))) => {}
            // A panicking summarizer unwinds through chatfold: the history is only borrowed.
            (Fault::Panic, Err(_)) => {}
            (f, other) => panic!(
                "{f:?}: unexpected {:?}",
                other.map(|r| r.map_err(|e| e.to_string()))
            ),
        }
        assert_eq!(h, before, "{f:?} changed the history");
        fault.set(Fault::None);
        assert!(
            compactor.compact(&h, &summarizer).unwrap().summarized,
            "no recovery after {f:?}"
        );
    }
    // Far over its allowance: cut to fit, and said so.
    fault.set(Fault::Oversized);
    let r = compactor.compact(&h, &summarizer).unwrap();
    assert!(r.summary_truncated && !r.over_budget && r.tokens_after <= 150);
}

#[test]
fn memory_faults_keep_the_new_turn_and_change_nothing_else() {
    let fault = Faulty::new();
    // Folding on every add past the limit (rollmem's), so each fault meets a fold.
    let mut memory = RollingMemory::new(Settings::new(40).low_water(40).summarizer(fault.clone())).unwrap();
    for i in 0..6 {
        memory.add_user(format!("warm-up turn number {i}")).unwrap();
    }
    for f in [Fault::Fail, Fault::Empty, Fault::Panic] {
        let before = memory.to_state();
        fault.set(f);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            memory.add_user("the turn that triggers a fold")
        }));
        assert!(!matches!(outcome, Ok(Ok(()))), "{f:?} did not surface");
        let after = memory.to_state();
        assert_eq!(after.summary, before.summary, "{f:?} changed the summary");
        assert_eq!(
            &after.buffer[..before.buffer.len()],
            &before.buffer[..],
            "{f:?} evicted turns"
        );
        assert_eq!(
            after.buffer.len(),
            before.buffer.len() + 1,
            "{f:?} lost the new turn"
        );
        fault.set(Fault::None);
        memory.add_user("next").unwrap();
        assert!(memory.buffer_tokens() <= 40, "no recovery after {f:?}");
    }
    let mut memory = SummaryMemory::new(fault.clone());
    fault.set(Fault::Panic);
    assert!(catch_unwind(AssertUnwindSafe(|| memory.add_user("a"))).is_err());
    assert_eq!(memory.to_state(), State::new("", vec![Message::user("a")]));
    fault.set(Fault::None);
    memory.add_user("b").unwrap();
    assert_eq!(memory.summary(), "2 messages folded");
}

fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn async_faults_and_deadlines_leave_the_memory_as_it_was() {
    let gate = Gate::new();
    let memory =
        AsyncRollingMemory::new(Settings::new(9).summarizer(gate.clone()).counter(|_: &str| 1)).unwrap();
    pollster::block_on(memory.add_user("first")).unwrap();

    // A caller's deadline passes while the summarizer stalls: the future is dropped.
    {
        let mut add = pin!(memory.add_user("second"));
        for _ in 0..3 {
            assert!(poll_once(add.as_mut()).is_pending());
        }
    }
    let stalled = memory.to_state();
    assert_eq!(stalled.summary, "");
    assert_eq!(stalled.buffer.len(), 2);

    gate.open();
    for (fault, f) in [
        (Fault::Fail, "fail"),
        (Fault::Panic, "panic"),
        (Fault::Empty, "empty"),
    ] {
        gate.faulty().set(fault);
        let before = memory.to_state();
        let outcome = catch_unwind(AssertUnwindSafe(|| pollster::block_on(memory.add_user(f))));
        assert!(!matches!(outcome, Ok(Ok(()))), "{f} did not surface");
        let after = memory.to_state();
        assert_eq!(after.summary, before.summary, "{f} changed the summary");
        assert_eq!(
            after.buffer.len(),
            before.buffer.len() + 1,
            "{f} lost or evicted turns"
        );
    }
    // Recovered: the next add folds everything pending.
    gate.faulty().set(Fault::None);
    pollster::block_on(memory.add_user("recovered")).unwrap();
    assert_eq!(memory.summary(), "5 messages folded");
    assert_eq!(memory.buffer().len(), 1);

    let summary_memory =
        AsyncSummaryMemory::new(move |_: SummaryRequest<'_>| async { Err::<String, _>("down") });
    assert!(pollster::block_on(summary_memory.add_user("kept")).is_err());
    assert_eq!(summary_memory.buffer().len(), 1);
}

/// Several threads add to one memory while its summarizer is slow and fails
/// every fourth call: at the end every message is there exactly once, in the
/// order each thread added its own.
#[test]
fn concurrent_adds_with_a_slow_flaky_summarizer_lose_nothing() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 600;
    // Adds from the test's own thread after the others.
    const LAST: usize = 16;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let summarizer = move |r: SummaryRequest<'_>| {
        // A closure's future cannot borrow its argument: it owns a copy.
        let r = r.into_owned();
        let call = c.fetch_add(1, Ordering::SeqCst);
        async move {
            std::thread::sleep(std::time::Duration::from_micros(200));
            if call % 4 == 3 {
                return Err("flaky");
            }
            let mut tags: Vec<String> = r.previous_summary().map(str::to_owned).into_iter().collect();
            tags.extend(r.messages().map(|m| m.id.clone().unwrap()));
            Ok(tags.join(" "))
        }
    };
    let memory = Arc::new(
        AsyncRollingMemory::new(
            Settings::new(60)
                .low_water(60)
                .summarizer(summarizer)
                .counter(|_: &str| 1),
        )
        .unwrap(),
    );
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let memory = memory.clone();
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let m = Message::user(format!("t{t} #{i}")).with_id(format!("{t}:{i}"));
                    let _ = pollster::block_on(memory.add_message(m));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    // How often the threads' adds folded depends on how they were
    // scheduled; alone, each add past the limit folds (or fails to).
    let before = calls.load(Ordering::SeqCst);
    for i in 0..LAST {
        let m = Message::user(format!("last #{i}")).with_id(format!("{THREADS}:{i}"));
        let _ = pollster::block_on(memory.add_message(m));
    }
    assert_eq!(calls.load(Ordering::SeqCst) - before, LAST);
    // The summary's prose (its ledger lists the turns' `#N` too).
    let summary = memory.summary();
    let prose = summary.split(chatfold::LEDGER_HEADING).next().unwrap_or_default();
    let mut seen: Vec<String> = prose.split_whitespace().map(str::to_owned).collect();
    seen.extend(memory.buffer().iter().map(|m| m.id.clone().unwrap()));
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seen.len(), "a message appears twice");
    for t in 0..=THREADS {
        let mine: Vec<usize> = seen
            .iter()
            .filter_map(|s| s.strip_prefix(&format!("{t}:")))
            .map(|i| i.parse().unwrap())
            .collect();
        let added = if t == THREADS { LAST } else { PER_THREAD };
        assert_eq!(
            mine,
            (0..added).collect::<Vec<_>>(),
            "thread {t} lost or reordered messages"
        );
    }
}
