//! Summarizers from Python: a callable `f(request) -> str` called from Rust
//! (sync), or a coroutine function awaited by Python between the fold's
//! steps (async, through the core's `Bridge`); `Extractive` by name.

use std::sync::OnceLock;

use chatfold::memory::State;
use chatfold::summarize::{PlainLine, Prompt};
use chatfold::{BoxError, Extractive, Summarizer, SummaryRequest};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::errors::{IntoPy, PyFailure};
use crate::fork::detach;
use crate::json;

/// What the summarizer is asked: the previous summary, the folded
/// messages, the transcript and the allowance.
#[pyclass(module = "chatfold", name = "SummaryRequest", frozen)]
#[derive(Debug)]
pub struct Request {
    inner: Body,
}

/// A request's folded part: chatfold's messages, or the caller's dicts of a
/// plain history read lazily (see `lazy`).
#[derive(Debug)]
enum Body {
    Whole(SummaryRequest<'static>),
    Lazy(Lazy),
}

/// The folded part of a plain history read lazily: the runs of the
/// caller's dicts the plan folded, and their transcript, written once. The dicts are read from the
/// caller's list when asked for (nothing proportional to the history is
/// copied for a summarizer that reads only the transcript).
#[derive(Debug)]
pub struct Lazy {
    pub previous: Option<String>,
    pub allowance: usize,
    pub ledger: Vec<String>,
    /// The caller's list, and the runs of it that are folded, in order.
    pub list: Py<PyList>,
    pub folded: Vec<std::ops::Range<usize>>,
    /// The folded messages as `role: content` lines.
    pub rendered: Py<PyString>,
    /// The request over chatfold's messages, made when asked for.
    pub whole: OnceLock<SummaryRequest<'static>>,
}

impl Lazy {
    /// The folded messages as copies of the caller's dicts, oldest first.
    fn folded<'py>(&self, py: Python<'py>) -> impl Iterator<Item = PyResult<Bound<'py, PyDict>>> {
        let list = self.list.bind(py).clone();
        let len = list.len();
        (self.folded.iter())
            .flat_map(move |run| run.start.min(len)..run.end.min(len))
            .map(move |i| {
                list.get_item(i)?
                    .cast_into::<PyDict>()
                    .map_err(PyErr::from)?
                    .copy()
            })
    }

    /// The request over chatfold's messages (read from the dicts once).
    fn whole(&self, py: Python<'_>) -> PyResult<&SummaryRequest<'static>> {
        if let Some(w) = self.whole.get() {
            return Ok(w);
        }
        let mut messages = Vec::new();
        for (i, item) in self.folded(py).enumerate() {
            let value = json::to_value(item?.as_any(), &mut format!("messages[{i}]"))?;
            let list = serde_json::Value::Array(vec![value]);
            let history = chatfold::History::from_json_value(list).py(py)?;
            messages.extend(history.messages);
        }
        let request = SummaryRequest::new(self.previous.as_deref(), &messages, self.allowance).into_owned();
        Ok(self.whole.get_or_init(|| request))
    }
}

impl Request {
    pub fn new(inner: SummaryRequest<'static>) -> Self {
        Request {
            inner: Body::Whole(inner),
        }
    }

    /// A request over a lazily read plain history's folded part.
    pub fn lazy(lazy: Lazy) -> Self {
        Request {
            inner: Body::Lazy(lazy),
        }
    }

    /// The request as chatfold's (made from the dicts for a lazy one).
    pub fn inner(&self, py: Python<'_>) -> PyResult<&SummaryRequest<'static>> {
        match &self.inner {
            Body::Whole(r) => Ok(r),
            Body::Lazy(l) => l.whole(py),
        }
    }
}

#[pymethods]
impl Request {
    /// The running summary the folded messages add to (`None`: the first fold).
    #[getter]
    fn previous_summary(&self) -> Option<&str> {
        match &self.inner {
            Body::Whole(r) => r.previous_summary(),
            Body::Lazy(l) => l.previous.as_deref(),
        }
    }

    /// The folded messages, oldest first, as OpenAI-style dicts.
    #[getter]
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        match &self.inner {
            Body::Whole(r) => {
                for m in r.messages() {
                    list.append(json::to_py(py, &m.to_json())?)?;
                }
            }
            Body::Lazy(l) => {
                for item in l.folded(py) {
                    list.append(item?)?;
                }
            }
        }
        Ok(list)
    }

    /// The folded messages as rollmem writes them in saved state.
    fn _state_messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = State::new("", self.inner(py)?.messages().cloned().collect());
        json::to_py(py, &state.to_json()["buffer"])
    }

    /// The folded messages as `role: text` lines (chatcram's transcript),
    /// after the line `first` when one is given.
    #[pyo3(signature = (first=None))]
    fn _rendered(&self, py: Python<'_>, first: Option<&str>) -> PyResult<Py<PyString>> {
        let lines = match &self.inner {
            Body::Lazy(l) if first.is_none() => return Ok(l.rendered.clone_ref(py)),
            Body::Lazy(l) => l.rendered.bind(py).to_str()?.to_owned(),
            Body::Whole(r) => detach(py, || {
                let lines: Vec<String> = r.messages().map(|m| PlainLine::of(m).to_string()).collect();
                lines.join("\n")
            }),
        };
        Ok(match first {
            Some(first) if lines.is_empty() => PyString::new(py, first),
            Some(first) => PyString::new(py, &format!("{first}\n{lines}")),
            None => PyString::new(py, &lines),
        }
        .unbind())
    }

    /// chatfold's built-in extractive summary of this request (no model):
    /// what `summarize="extractive"` answers, for Python code that drives
    /// the summarizer itself (the tiered worker, the sawtooth compat module).
    fn _extractive(&self, py: Python<'_>) -> PyResult<String> {
        let request = self.inner(py)?;
        match Extractive::new().summarize(request) {
            Ok(text) => Ok(text),
            Err(never) => match never {},
        }
    }

    /// The instructions chatfold's HTTP summarizers send for this request,
    /// as `(system, user)`: the default prompt, or the templates given (each
    /// with the slots `{allowance}`, `{words}`, `{previous}`,
    /// `{transcript}` and `{ledger}`). Lets a model of any framework
    /// summarize as the HTTP summarizers do.
    #[pyo3(signature = (system=None, user=None))]
    fn prompt(&self, py: Python<'_>, system: Option<&str>, user: Option<&str>) -> PyResult<(String, String)> {
        let prompt = match (system, user) {
            (None, None) => Prompt::default(),
            (system, user) => {
                let default = Prompt::default();
                Prompt::new(system.unwrap_or(default.system()), user.unwrap_or(default.user())).py(py)?
            }
        };
        Ok(prompt.render(self.inner(py)?))
    }

    /// The previous summary and the messages as one text to summarize.
    #[getter]
    fn transcript(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.inner(py)?.transcript())
    }

    /// Tokens the summary's text may take; a longer one is cut to fit.
    #[getter]
    fn allowance(&self) -> usize {
        match &self.inner {
            Body::Whole(r) => r.allowance(),
            Body::Lazy(l) => l.allowance,
        }
    }

    /// Exact identifiers the summary's ledger will list (no need to repeat them).
    #[getter]
    fn ledger(&self) -> Vec<String> {
        match &self.inner {
            Body::Whole(r) => r.ledger().iter().map(|e| e.as_str().to_owned()).collect(),
            Body::Lazy(l) => l.ledger.clone(),
        }
    }

    fn __len__(&self) -> usize {
        match &self.inner {
            Body::Whole(r) => r.messages().len(),
            Body::Lazy(l) => l.folded.iter().map(ExactSizeIterator::len).sum(),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "SummaryRequest(messages={}, allowance={}, previous_summary={})",
            self.__len__(),
            self.allowance(),
            self.previous_summary().is_some()
        )
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
