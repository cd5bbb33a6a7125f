//! Summarizers from Python: a callable `f(request) -> str` called from Rust
//! (sync), or a coroutine function awaited by Python between the fold's
//! steps (async, through [`Bridge`]); `Extractive` by name.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use chatfold::memory::State;
use chatfold::{AsyncSummarizer, BoxError, Extractive, Summarizer, SummaryRequest};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::PyFailure;
use crate::json;

/// What the summarizer is asked: the previous summary, the folded
/// messages, the transcript and the allowance.
#[pyclass(module = "chatfold", name = "SummaryRequest", frozen)]
#[derive(Debug)]
pub struct Request {
    inner: SummaryRequest<'static>,
}

impl Request {
    pub fn new(inner: SummaryRequest<'static>) -> Self {
        Request { inner }
    }

    /// The request itself.
    pub fn inner(&self) -> &SummaryRequest<'static> {
        &self.inner
    }
}

#[pymethods]
impl Request {
    /// The running summary the folded messages add to (`None`: the first fold).
    #[getter]
    fn previous_summary(&self) -> Option<&str> {
        self.inner.previous_summary()
    }

    /// The folded messages, oldest first, as OpenAI-style dicts.
    #[getter]
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for m in self.inner.messages() {
            list.append(json::to_py(py, &m.to_json())?)?;
        }
        Ok(list)
    }

    /// The folded messages as rollmem writes them in saved state.
    fn _state_messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = State::new("", self.inner.messages().cloned().collect());
        json::to_py(py, &state.to_json()["buffer"])
    }

    /// The folded messages as `role: text` lines (chatcram's transcript).
    fn _rendered(&self, py: Python<'_>) -> String {
        py.detach(|| {
            let lines: Vec<String> = self
                .inner
                .messages()
                .map(|m| format!("{}: {}", m.role.as_str(), m.text()))
                .collect();
            lines.join("\n")
        })
    }

    /// The previous summary and the messages as one text to summarize.
    #[getter]
    fn transcript(&self) -> String {
        self.inner.transcript()
    }

    /// Tokens the summary's text may take; a longer one is cut to fit.
    #[getter]
    fn allowance(&self) -> usize {
        self.inner.allowance()
    }

    /// Exact identifiers the summary's ledger will list (no need to repeat them).
    #[getter]
    fn ledger(&self) -> Vec<String> {
        self.inner.ledger().to_vec()
    }

    fn __len__(&self) -> usize {
        self.inner.messages().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "SummaryRequest(messages={}, allowance={}, previous_summary={})",
            self.inner.messages().len(),
            self.inner.allowance(),
            self.inner.previous_summary().is_some()
        )
    }
}

/// A synchronous summarizer: a Python callable, or Extractive.
#[derive(Debug)]
pub enum Sync {
    Extractive(Extractive),
    OpenAi(chatfold::summarize::OpenAiSummarizer),
    Anthropic(chatfold::summarize::AnthropicSummarizer),
    Callable(Py<PyAny>),
}

impl Sync {
    /// `summarize` as a summarizer: `None` or `"extractive"` for Extractive,
    /// else a callable.
    pub fn from_py(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        match spec {
            None => Ok(Sync::Extractive(Extractive::new())),
            Some(obj) if obj.is_none() => Ok(Sync::Extractive(Extractive::new())),
            Some(obj) => match obj.extract::<String>() {
                Ok(name) if name == "extractive" => Ok(Sync::Extractive(Extractive::new())),
                Ok(name) => Err(PyTypeError::new_err(format!(
                    "unknown summarizer {name:?} (known: \"extractive\")"
                ))),
                Err(_) => {
                    if let Ok(s) = obj.cast::<crate::http::PyOpenAi>() {
                        return Ok(Sync::OpenAi(s.get().inner.clone()));
                    }
                    if let Ok(s) = obj.cast::<crate::http::PyAnthropic>() {
                        return Ok(Sync::Anthropic(s.get().inner.clone()));
                    }
                    match obj.is_callable() {
                        true => Ok(Sync::Callable(obj.clone().unbind())),
                        false => Err(PyTypeError::new_err(
                            "summarize must be a callable or \"extractive\"",
                        )),
                    }
                }
            },
        }
    }
}

/// Calls `f(request)` and reads its answer as a string.
pub fn call_python(
    py: Python<'_>,
    f: &Py<PyAny>,
    request: SummaryRequest<'static>,
) -> Result<String, BoxError> {
    let answer = Py::new(py, Request::new(request))
        .and_then(|r| f.call1(py, (r,)))
        .and_then(|a| text_of(py, a.bind(py)));
    answer.map_err(|e| Box::new(PyFailure(e)) as BoxError)
}

/// A summarizer's answer as text: a `str`, else a `TypeError`.
pub fn text_of(_py: Python<'_>, answer: &Bound<'_, PyAny>) -> PyResult<String> {
    answer.extract::<String>().map_err(|_| {
        let kind = answer
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        PyTypeError::new_err(format!("a summarizer must return a str, not {kind}"))
    })
}

impl Summarizer for Sync {
    type Error = BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, BoxError> {
        match self {
            Sync::Extractive(e) => e.summarize(request).map_err(Into::into),
            Sync::OpenAi(s) => Summarizer::summarize(s, request).map_err(Into::into),
            Sync::Anthropic(s) => Summarizer::summarize(s, request).map_err(Into::into),
            Sync::Callable(f) => Python::attach(|py| call_python(py, f, request.clone().into_owned())),
        }
    }
}

/// The exchange between one stepped future and the Python code that drives
/// it: the request the fold is waiting on, and the answer once Python has it.
#[derive(Debug, Default)]
pub struct Slot {
    pub request: Option<SummaryRequest<'static>>,
    pub answer: Option<Result<String, BoxError>>,
}

thread_local! {
    /// The slot of the step being polled on this thread.
    pub static CURRENT: RefCell<Option<Arc<Mutex<Slot>>>> = const { RefCell::new(None) };
}

/// The async summarizer of the stepped futures: its call leaves the
/// request in the slot of the step polling it and waits, `Pending`, until
/// Python (which awaited the summarizer) has put the answer there. No
/// Python coroutine is driven from Rust.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bridge;

/// One call through the [`Bridge`].
#[derive(Debug)]
pub struct Asked {
    request: Option<SummaryRequest<'static>>,
    slot: Option<Arc<Mutex<Slot>>>,
}

impl Future for Asked {
    type Output = Result<String, BoxError>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.slot.is_none() {
            this.slot = CURRENT.with(|c| c.borrow().clone());
        }
        let Some(slot) = &this.slot else {
            return Poll::Ready(Err("chatfold: a fold was polled outside a step".into()));
        };
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
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
    ) -> impl Future<Output = Result<String, BoxError>> + Send {
        Asked {
            request: Some(request.into_owned()),
            slot: None,
        }
    }
}
