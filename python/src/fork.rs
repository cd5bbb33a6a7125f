//! Forking while chatfold works: `os.fork` copies one thread, and a lock or
//! a one-time build (the ledger's patterns, an encoder, a remembered
//! piece's identifiers) that another thread held at that moment stays held
//! in the child forever, so the child's first use of it hangs. The work
//! that runs without the GIL, where another thread can fork, goes through
//! [`detach`]; `os.fork`'s hooks ([`before_fork`], [`after_fork`]) wait for
//! such work to end and let no new work start until the fork is done.

use std::cell::{Cell, RefCell};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// Work under way without the GIL, and whether a fork waits for it.
struct Gate {
    inside: usize,
    forking: bool,
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    inside: 0,
    forking: false,
});
/// Signalled when work ends or a fork is done.
static TURN: Condvar = Condvar::new();

/// A fork waits this long at most for work under way (one that waits on
/// the forking thread itself would wait forever); then it forks anyway.
const PATIENCE: Duration = Duration::from_secs(10);

thread_local! {
    /// This thread's work under way, nested (a summarizer's callback may
    /// call chatfold again, and must not wait for itself).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// The gate, held by the forking thread from `before_fork` to
    /// `after_fork`, so that no thread holds it in the child.
    static HELD: RefCell<Option<MutexGuard<'static, Gate>>> = const { RefCell::new(None) };
}

fn gate() -> MutexGuard<'static, Gate> {
    GATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Work under way on this thread, while it lives.
struct Inside;

impl Inside {
    fn enter() -> Inside {
        if DEPTH.get() == 0 {
            let mut g = gate();
            while g.forking {
                g = TURN.wait(g).unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            g.inside += 1;
        }
        DEPTH.set(DEPTH.get() + 1);
        Inside
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get() - 1);
        if DEPTH.get() == 0 {
            gate().inside -= 1;
            TURN.notify_all();
        }
    }
}

/// `f` without the GIL ([`Python::detach`]), as work a fork waits for.
pub(crate) fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    py.detach(|| {
        let _inside = Inside::enter();
        f()
    })
}

/// `os.fork`'s hook before: waits (without the GIL) for the work under way
/// on other threads to end, at most [`PATIENCE`], and holds the gate.
#[pyfunction]
pub(crate) fn before_fork(py: Python<'_>) {
    py.detach(|| {
        let mine = usize::from(DEPTH.get() > 0);
        let deadline = Instant::now() + PATIENCE;
        let mut g = gate();
        g.forking = true;
        while g.inside > mine {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            g = TURN
                .wait_timeout(g, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        }
        HELD.set(Some(g));
    });
}

/// `os.fork`'s hook after, in the parent and in the child: work may start
/// again. In the child, only this thread's work is under way.
#[pyfunction]
#[pyo3(signature = (child=false))]
pub(crate) fn after_fork(child: bool) {
    let mut g = HELD.take().unwrap_or_else(gate);
    if child {
        g.inside = usize::from(DEPTH.get() > 0);
    }
    g.forking = false;
    drop(g);
    TURN.notify_all();
}
