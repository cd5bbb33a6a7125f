//! A Rust future stepped from Python (the core's [`Stepped`]): `poll` runs
//! it (the GIL released) until it finishes or a fold waits on its
//! summarizer; Python awaits the summarizer and hands the answer back with
//! `answer` or `fail`, then polls again. Dropping the future (`cancel`)
//! ends a fold in flight with the state as it was.

use chatfold::summarize::{Operation, Polled, Stepped};
use pyo3::prelude::*;

use crate::errors::{self, PyFailure};
use crate::fork::detach;
use crate::summarizer::Request;

/// What a finished future makes into a Python value, under the GIL.
pub type Finish = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

/// A future the bindings step.
pub type Boxed = Operation<Finish>;

/// One operation in progress (an add, a compaction, the tiered worker).
#[pyclass(module = "chatfold._chatfold", frozen)]
pub struct Step(Stepped<Finish>);

impl Step {
    pub fn new(future: Boxed) -> Self {
        Step(Stepped::new(future))
    }
}

#[pymethods]
impl Step {
    /// Runs the operation until it finishes (`None`, see `done`) or waits
    /// on the summarizer (the request to answer); `None` too when it waits
    /// for something else (the tiered worker, idle).
    fn poll(&self, py: Python<'_>) -> Option<Request> {
        match detach(py, || self.0.poll()) {
            Polled::Asked(request) => Some(Request::new(request)),
            _ => None,
        }
    }

    /// Whether the operation has finished (its `result` is ready).
    fn done(&self) -> bool {
        self.0.is_done()
    }

    /// Whether the operation asked to be polled again since the last look.
    fn woken(&self) -> bool {
        self.0.woken()
    }

    /// The summarizer's answer to the request `poll` returned.
    fn answer(&self, py: Python<'_>, answer: &Bound<'_, PyAny>) {
        let text =
            crate::summarizer::text_of(py, answer).map_err(|e| Box::new(PyFailure(e)) as chatfold::BoxError);
        self.0.answer(text);
    }

    /// The summarizer raised `error`: the fold fails, and `result` raises it.
    fn fail(&self, error: &Bound<'_, PyAny>) {
        self.0
            .answer(Err(Box::new(PyFailure(PyErr::from_value(error.clone())))));
    }

    /// Abandons the operation (the task was cancelled): a fold in flight
    /// ends with nothing changed.
    fn cancel(&self, py: Python<'_>) {
        detach(py, || self.0.cancel());
    }

    /// The operation's value, or its error raised.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.0.take_outcome() {
            Some(Ok(finish)) => finish(py),
            Some(Err(e)) => Err(errors::to_py(py, e)),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err(
                "the operation has not finished",
            )),
        }
    }
}
