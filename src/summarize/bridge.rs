//! An async operation stepped from another language's event loop.
//!
//! A binding (Python's, Node's) runs a compaction or a memory's add as a
//! Rust future, but the summarizer is the host's own coroutine or promise,
//! which Rust cannot drive. [`Stepped`] holds the future; the host calls
//! [`Stepped::poll`], which runs it until it finishes or a fold asks
//! [`Bridge`] (the future's summarizer) for a summary. The host awaits its
//! summarizer with that request, hands the text back with
//! [`Stepped::answer`], and polls again. No runtime, no thread: the host's
//! loop is the executor, and the future's work runs on whichever thread
//! polls it (a binding can poll off its main thread).
//!
//! # Examples
//!
//! ```
//! use chatfold::summarize::{Bridge, Polled, Stepped};
//! use chatfold::{Compactor, Message};
//!
//! let history: Vec<Message> = (0..40)
//!     .map(|i| Message::user(format!("Turn {i}: the meeting moved to room {i}.")))
//!     .collect();
//! let compactor = Compactor::new(120);
//! let step = Stepped::new(Box::pin(async move {
//!     compactor.compact_async(&history, &Bridge).await.map(|c| c.messages.len())
//! }));
//! loop {
//!     match step.poll() {
//!         // The host's summarizer would be awaited here.
//!         Polled::Asked(request) => step.answer(Ok(format!("{} turns about rooms.", request.messages().count()))),
//!         Polled::Finished => break,
//!         _ => unreachable!("nothing else is awaited"),
//!     }
//! }
//! let kept = step.take_outcome().expect("finished")?;
//! assert!(kept < 40);
//! # Ok::<(), chatfold::Error>(())
//! ```

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use crate::error::{BoxError, Result};
use crate::summarize::{AsyncSummarizer, SummaryRequest};

/// A future a host steps: an operation whose summarizer is [`Bridge`].
pub type Operation<T> = Pin<Box<dyn Future<Output = Result<T>> + Send>>;

/// An [`Operation`] that stays on the thread that made it (its counter
/// calls into a host's runtime, say): stepped by [`Stepped::local`].
pub type LocalOperation<T> = Pin<Box<dyn Future<Output = Result<T>>>>;

/// What one [`Stepped::poll`] came to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Polled {
    /// A fold waits on this request: answer it, then poll again.
    Asked(SummaryRequest<'static>),
    /// The operation has finished: its outcome is ready.
    Finished,
    /// The operation waits on something else (another fold in flight, an
    /// idle worker); poll again later, or once [`Stepped::woken`] says so.
    Waiting,
}

/// The exchange between a stepped future and its host: the request the
/// fold waits on, and the host's answer.
#[derive(Debug, Default)]
struct Slot {
    request: Option<SummaryRequest<'static>>,
    answer: Option<std::result::Result<String, BoxError>>,
}

thread_local! {
    /// The slot of the operation being polled on this thread.
    static CURRENT: RefCell<Option<Arc<Mutex<Slot>>>> = const { RefCell::new(None) };
}

/// Set when the future asks to be polled again.
#[derive(Debug, Default)]
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One operation in progress, stepped by its host (see the module docs).
///
/// `F` is the operation's future: [`Send`] by default, so that any thread
/// may poll it; one made by [`Stepped::local`] is polled where it was made.
pub struct Stepped<T, F: ?Sized = dyn Future<Output = Result<T>> + Send> {
    future: Mutex<Option<Pin<Box<F>>>>,
    slot: Arc<Mutex<Slot>>,
    outcome: Mutex<Option<Result<T>>>,
    flag: Arc<Flag>,
}

impl<T, F: Future<Output = Result<T>> + ?Sized> std::fmt::Debug for Stepped<T, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stepped")
            .field("done", &self.is_done())
            .finish_non_exhaustive()
    }
}

impl<T> Stepped<T> {
    /// The operation `future`, not started.
    pub fn new(future: Operation<T>) -> Self {
        Stepped::from_future(future)
    }
}

impl<T> Stepped<T, dyn Future<Output = Result<T>>> {
    /// The operation `future`, not started, to be polled on this thread.
    pub fn local(future: LocalOperation<T>) -> Self {
        Stepped::from_future(future)
    }
}

impl<T, F: Future<Output = Result<T>> + ?Sized> Stepped<T, F> {
    fn from_future(future: Pin<Box<F>>) -> Self {
        Stepped {
            future: Mutex::new(Some(future)),
            slot: Arc::default(),
            outcome: Mutex::new(None),
            flag: Arc::default(),
        }
    }

    /// Runs the operation until it finishes or waits (see [`Polled`]).
    pub fn poll(&self) -> Polled {
        let waker = Waker::from(self.flag.clone());
        let finished = {
            let mut future = guard(&self.future);
            let Some(f) = future.as_mut() else {
                return if self.is_done() {
                    Polled::Finished
                } else {
                    Polled::Waiting
                };
            };
            CURRENT.with(|c| *c.borrow_mut() = Some(self.slot.clone()));
            let polled = f.as_mut().poll(&mut Context::from_waker(&waker));
            CURRENT.with(|c| *c.borrow_mut() = None);
            match polled {
                Poll::Ready(out) => {
                    *future = None;
                    Some(out)
                }
                Poll::Pending => None,
            }
        };
        if let Some(out) = finished {
            *guard(&self.outcome) = Some(out);
            return Polled::Finished;
        }
        match guard(&self.slot).request.take() {
            Some(request) => Polled::Asked(request),
            None => Polled::Waiting,
        }
    }

    /// The host's answer to the last [`Polled::Asked`]: the summary, or the
    /// summarizer's error (the fold then fails and changes nothing).
    pub fn answer(&self, answer: std::result::Result<String, BoxError>) {
        guard(&self.slot).answer = Some(answer);
    }

    /// Whether the operation asked to be polled again since the last look.
    pub fn woken(&self) -> bool {
        self.flag.0.swap(false, Ordering::AcqRel)
    }

    /// Abandons the operation: a fold in flight ends with nothing changed.
    pub fn cancel(&self) {
        let future = guard(&self.future).take();
        drop(future);
    }

    /// Whether the operation has finished and its outcome waits to be taken.
    pub fn is_done(&self) -> bool {
        guard(&self.outcome).is_some()
    }

    /// The operation's outcome, once: `None` before it finishes (or after
    /// it was taken).
    pub fn take_outcome(&self) -> Option<Result<T>> {
        guard(&self.outcome).take()
    }
}

/// The summarizer of stepped operations: its call leaves the request in the
/// slot of the operation polling it and waits until the host answers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bridge;

/// One call through the [`Bridge`].
#[derive(Debug)]
struct Asked {
    request: Option<SummaryRequest<'static>>,
    slot: Option<Arc<Mutex<Slot>>>,
}

impl Future for Asked {
    type Output = std::result::Result<String, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.slot.is_none() {
            this.slot = CURRENT.with(|c| c.borrow().clone());
        }
        let Some(slot) = &this.slot else {
            return Poll::Ready(Err(
                "chatfold: a fold summarized through Bridge was polled outside Stepped".into(),
            ));
        };
        let mut slot = guard(slot);
        if let Some(request) = this.request.take() {
            slot.request = Some(request);
            slot.answer = None;
            return Poll::Pending;
        }
        match slot.answer.take() {
            Some(answer) => Poll::Ready(answer),
            None => Poll::Pending,
        }
    }
}

impl AsyncSummarizer for Bridge {
    type Error = BoxError;

    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = std::result::Result<String, BoxError>> + Send {
        Asked {
            request: Some(request.into_owned()),
            slot: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compactor, Error, Message};

    fn history() -> Vec<Message> {
        (0..40)
            .map(|i| Message::user(format!("Turn {i}: room {i}.")))
            .collect()
    }

    fn compaction(history: Vec<Message>) -> Stepped<usize> {
        let compactor = Compactor::new(120);
        Stepped::new(Box::pin(async move {
            compactor
                .compact_async(&history, &Bridge)
                .await
                .map(|c| c.messages.len())
        }))
    }

    #[test]
    fn an_error_answered_fails_the_fold() {
        let step = compaction(history());
        assert!(matches!(step.poll(), Polled::Asked(_)));
        step.answer(Err("the model is down".into()));
        assert!(matches!(step.poll(), Polled::Finished));
        assert!(step.is_done());
        assert!(matches!(step.take_outcome(), Some(Err(Error::Summarize(_)))));
        assert!(step.take_outcome().is_none());
    }

    #[test]
    fn a_cancelled_operation_never_finishes() {
        let step = compaction(history());
        assert!(matches!(step.poll(), Polled::Asked(_)));
        step.cancel();
        assert!(matches!(step.poll(), Polled::Waiting));
        assert!(!step.is_done() && step.take_outcome().is_none());
    }

    #[test]
    fn the_bridge_outside_a_step_is_an_error_not_a_hang() {
        let compactor = Compactor::new(120);
        let history = history();
        let mut future = Box::pin(compactor.compact_async(&history, &Bridge));
        let waker = Waker::from(Arc::new(Flag::default()));
        let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
        assert!(matches!(polled, Poll::Ready(Err(Error::Summarize(_)))));
    }

    /// A counter that lives on one thread (it counts through an `Rc`).
    #[derive(Clone)]
    struct Local(std::rc::Rc<std::cell::Cell<usize>>);

    impl crate::TokenCounter for Local {
        fn count(&self, text: &str) -> usize {
            self.0.set(self.0.get() + 1);
            text.len().div_ceil(4)
        }
    }

    #[test]
    fn a_local_operation_counts_on_its_thread_between_answers() {
        let calls = std::rc::Rc::new(std::cell::Cell::new(0));
        let compactor = Compactor::new(120).counter(Local(calls.clone()));
        let history = history();
        let step = Stepped::local(Box::pin(async move {
            let done = compactor.compact_async(&history, &Bridge).await?;
            Ok(done.messages.len())
        }));
        let Polled::Asked(request) = step.poll() else {
            panic!("a fold asks its summarizer");
        };
        assert!(!request.messages().collect::<Vec<_>>().is_empty());
        let counted = calls.get();
        assert!(counted > 0);
        step.answer(Ok("rooms 0 to 30".into()));
        assert!(matches!(step.poll(), Polled::Finished));
        // The summary is counted after the answer, on this thread.
        assert!(calls.get() > counted);
        assert!(matches!(step.take_outcome(), Some(Ok(n)) if n < 40));
    }
}
