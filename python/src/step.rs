//! A Rust future stepped from Python: `poll` runs it (the GIL released)
//! until it finishes or a fold waits on its summarizer; Python awaits the
//! summarizer and hands the answer back with `answer` or `fail`, then polls
//! again. Dropping the future (`cancel`) ends a fold in flight with the
//! state as it was.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Wake, Waker};

use pyo3::prelude::*;

use crate::errors::{self, PyFailure};
use crate::fork::detach;
use crate::summarizer::{CURRENT, Request, Slot};

/// What a finished future makes into a Python value, under the GIL.
pub type Finish = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// A future the bindings step.
pub type Boxed = Pin<Box<dyn Future<Output = chatfold::Result<Finish>> + Send>>;

/// Set when the future asks to be polled again (the tiered worker's signal).
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

/// One operation in progress (an add, a compaction, the tiered worker).
#[pyclass(module = "chatfold._chatfold", frozen)]
pub struct Step {
    future: Mutex<Option<Boxed>>,
    slot: Arc<Mutex<Slot>>,
    outcome: Mutex<Option<chatfold::Result<Finish>>>,
    flag: Arc<Flag>,
}

impl Step {
    pub fn new(future: Boxed) -> Self {
        Step {
            future: Mutex::new(Some(future)),
            slot: Arc::default(),
            outcome: Mutex::new(None),
            flag: Arc::default(),
        }
    }
}

fn guard<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[pymethods]
impl Step {
    /// Runs the operation until it finishes (`None`, see `done`) or waits
    /// on the summarizer (the request to answer); `None` too when it waits
    /// for something else (the tiered worker, idle).
    fn poll(&self, py: Python<'_>) -> PyResult<Option<Request>> {
        let slot = self.slot.clone();
        let waker = Waker::from(self.flag.clone());
        let finished = detach(py, || {
            let mut future = guard(&self.future);
            let f = future.as_mut()?;
            CURRENT.with(|c| *c.borrow_mut() = Some(slot));
            let polled = f.as_mut().poll(&mut Context::from_waker(&waker));
            CURRENT.with(|c| *c.borrow_mut() = None);
            match polled {
                Poll::Ready(out) => {
                    *future = None;
                    Some(out)
                }
                Poll::Pending => None,
            }
        });
        if let Some(out) = finished {
            *guard(&self.outcome) = Some(out);
            return Ok(None);
        }
        Ok(guard(&self.slot).request.take().map(Request::new))
    }

    /// Whether the operation has finished (its `result` is ready).
    fn done(&self) -> bool {
        guard(&self.outcome).is_some()
    }

    /// Whether the operation asked to be polled again since the last look.
    fn woken(&self) -> bool {
        self.flag.0.swap(false, Ordering::AcqRel)
    }

    /// The summarizer's answer to the request `poll` returned.
    fn answer(&self, py: Python<'_>, answer: &Bound<'_, PyAny>) {
        let text =
            crate::summarizer::text_of(py, answer).map_err(|e| Box::new(PyFailure(e)) as chatfold::BoxError);
        guard(&self.slot).answer = Some(text);
    }

    /// The summarizer raised `error`: the fold fails, and `result` raises it.
    fn fail(&self, error: &Bound<'_, PyAny>) {
        let err = PyErr::from_value(error.clone());
        guard(&self.slot).answer = Some(Err(Box::new(PyFailure(err))));
    }

    /// Abandons the operation (the task was cancelled): a fold in flight
    /// ends with nothing changed.
    fn cancel(&self, py: Python<'_>) {
        let future = guard(&self.future).take();
        detach(py, move || drop(future));
    }

    /// The operation's value, or its error raised.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match guard(&self.outcome).take() {
            Some(Ok(finish)) => finish(py),
            Some(Err(e)) => Err(errors::to_py(py, e)),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err(
                "the operation has not finished",
            )),
        }
    }
}
