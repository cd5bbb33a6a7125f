//! Summarizers that misbehave on purpose.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::summarize::{AsyncSummarizer, Summarizer, SummaryRequest};

/// What a [`Faulty`] summarizer does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Answers `"N messages folded"` (with the previous summary before it).
    None,
    /// Fails with a [`FaultError`].
    Fail,
    /// Answers blank text.
    Empty,
    /// Answers far more than the allowance (a hundred times, at least 10 000 words).
    Oversized,
    /// Panics.
    Panic,
}

/// The error a [`Faulty`] summarizer fails with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultError {
    /// Which call failed (1 for the first).
    pub call: usize,
}

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "injected fault: summarizer call {} failed", self.call)
    }
}

impl std::error::Error for FaultError {}

/// A summarizer, sync and async, whose fault is switched while a test runs,
/// or that fails every Nth call; the async one can also take its time.
///
/// Clones share their fault and their call count: keep one to steer the
/// one a memory owns.
///
/// # Examples
///
/// ```
/// use chatfold::testing::{Fault, Faulty};
/// use chatfold::{Compactor, Error, Message};
///
/// let history: Vec<Message> = (0..40).map(|i| Message::user(format!("turn {i}"))).collect();
/// let summarizer = Faulty::new();
/// summarizer.set(Fault::Fail);
/// assert!(matches!(Compactor::new(60).compact(&history, &summarizer), Err(Error::Summarize(_))));
/// summarizer.set(Fault::None);
/// assert!(Compactor::new(60).compact(&history, &summarizer)?.summarized);
/// assert_eq!(summarizer.calls(), 2);
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Faulty {
    fault: Arc<Mutex<Fault>>,
    every: Option<usize>,
    delay: Duration,
    calls: Arc<AtomicUsize>,
}

impl Default for Faulty {
    fn default() -> Self {
        Faulty::new()
    }
}

impl Faulty {
    /// A summarizer that answers well until told otherwise.
    pub fn new() -> Self {
        Faulty {
            fault: Arc::new(Mutex::new(Fault::None)),
            every: None,
            delay: Duration::ZERO,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// A summarizer whose every `n`th call fails (the `n`th, the `2n`th ...);
    /// the others do what [`set`](Self::set) says.
    pub fn failing_every(n: usize) -> Self {
        Faulty {
            every: Some(n.max(1)),
            ..Faulty::new()
        }
    }

    /// The async summarizer answers `delay` after it is first polled
    /// (a timer thread; no runtime needed). The sync one ignores it.
    #[must_use]
    pub fn slow(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// What the next calls do.
    pub fn set(&self, fault: Fault) {
        if let Ok(mut f) = self.fault.lock() {
            *f = fault;
        }
    }

    /// How many calls it received.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn answer(&self, request: &SummaryRequest<'_>) -> Result<String, FaultError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.every.is_some_and(|n| call % n == 0) {
            return Err(FaultError { call });
        }
        let fault = self.fault.lock().map(|f| *f).unwrap_or(Fault::Fail);
        match fault {
            Fault::None => {
                let n = request.messages().len();
                Ok(match request.previous_summary() {
                    Some(previous) => format!("{previous} {n} messages folded"),
                    None => format!("{n} messages folded"),
                })
            }
            Fault::Fail => Err(FaultError { call }),
            Fault::Empty => Ok(" \n".to_owned()),
            Fault::Oversized => {
                Ok("far too long ".repeat(request.allowance().saturating_mul(100).max(10_000) / 3))
            }
            #[allow(clippy::panic)]
            Fault::Panic => panic!("injected fault: summarizer call {call} panicked"),
        }
    }
}

impl Summarizer for Faulty {
    type Error = FaultError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, FaultError> {
        self.answer(request)
    }
}

impl AsyncSummarizer for Faulty {
    type Error = FaultError;

    /// Answers (as the sync call does) once its delay has passed.
    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = Result<String, FaultError>> + Send {
        let answer = self.answer(&request);
        let delay = Delay::new(self.delay);
        async move {
            delay.await;
            answer
        }
    }
}

/// A future ready `after` its first poll: a gate a thread of its own opens.
struct Delay {
    after: Duration,
    gate: Option<Arc<Mutex<GateState>>>,
    slot: Option<usize>,
}

impl Delay {
    fn new(after: Duration) -> Self {
        Delay {
            after,
            gate: None,
            slot: None,
        }
    }
}

impl Future for Delay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.after.is_zero() {
            return Poll::Ready(());
        }
        let after = self.after;
        let gate = Arc::clone(self.gate.get_or_insert_with(|| {
            let gate = Arc::new(Mutex::new(GateState::default()));
            let timer = Arc::clone(&gate);
            std::thread::spawn(move || {
                std::thread::sleep(after);
                GateState::open(&timer);
            });
            gate
        }));
        GateState::wait(&gate, cx, &mut self.slot)
    }
}

/// An async summarizer whose calls stay pending until the gate opens: for
/// deadlines, cancellation, and adds made while a fold is in flight. Once
/// open, calls answer through its [`Faulty`]. Clones share the gate.
///
/// # Examples
///
/// ```
/// use std::pin::pin;
/// use std::task::{Context, Waker};
/// use chatfold::testing::Gate;
/// use chatfold::{AsyncSummarizer, Message, SummaryRequest};
///
/// let gate = Gate::new();
/// let folded = [Message::user("hi")];
/// let mut call = pin!(gate.summarize(SummaryRequest::new(None, &folded, 50).into_owned()));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(call.as_mut().poll(&mut cx).is_pending());
/// assert_eq!(gate.waiting(), 1);
/// gate.open();
/// assert!(call.as_mut().poll(&mut cx).is_ready());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Gate {
    faulty: Faulty,
    state: Arc<Mutex<GateState>>,
}

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    waiting: Vec<Waker>,
}

impl GateState {
    /// Opens the gate and wakes whoever waits.
    fn open(state: &Mutex<GateState>) {
        if let Ok(mut s) = state.lock() {
            s.open = true;
            for waker in s.waiting.drain(..) {
                waker.wake();
            }
        }
    }

    /// Ready once open; until then the waker is kept (in `slot`, one per waiter).
    fn wait(state: &Mutex<GateState>, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()> {
        let Ok(mut s) = state.lock() else {
            return Poll::Ready(());
        };
        if s.open {
            return Poll::Ready(());
        }
        match *slot {
            Some(i) if i < s.waiting.len() => s.waiting[i] = cx.waker().clone(),
            _ => {
                *slot = Some(s.waiting.len());
                s.waiting.push(cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Gate {
    /// A closed gate in front of a well-behaved [`Faulty`].
    pub fn new() -> Self {
        Gate::default()
    }

    /// The summarizer behind the gate, to set its fault.
    pub fn faulty(&self) -> &Faulty {
        &self.faulty
    }

    /// Lets every pending and later call through.
    pub fn open(&self) {
        GateState::open(&self.state);
    }

    /// Holds later calls again.
    pub fn close(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.open = false;
        }
    }

    /// How many polls are waiting at the gate.
    pub fn waiting(&self) -> usize {
        self.state.lock().map(|s| s.waiting.len()).unwrap_or(0)
    }
}

impl AsyncSummarizer for Gate {
    type Error = FaultError;

    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = Result<String, FaultError>> + Send {
        let (state, faulty) = (Arc::clone(&self.state), self.faulty.clone());
        let mut slot = None;
        std::future::poll_fn(move |cx| {
            GateState::wait(&state, cx, &mut slot).map(|()| faulty.answer(&request))
        })
    }
}
