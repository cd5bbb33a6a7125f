//! The asynchronous memories: adds, clears and cancellations during an
//! in-flight fold, failures, and `Send + Sync`.

mod common;

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use chatfold::SummaryRequest;
use chatfold::memory::{AsyncRemember, AsyncRollingMemory, AsyncSummaryMemory, Memory, Settings};
use common::memory::texts;

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
