//! chatfold's errors as the Python exceptions of `chatfold.errors`, and a
//! Python exception carried through Rust (a summarizer's or a counter's)
//! raised again as itself.

use std::fmt;

use chatfold::Error;
use pyo3::prelude::*;

/// A Python exception inside a chatfold error's source chain.
#[derive(Debug)]
pub struct PyFailure(pub PyErr);

impl fmt::Display for PyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for PyFailure {}

/// The exception class `name` of `chatfold.errors`, raised with `message`
/// and the attributes in `attrs`.
fn raise(py: Python<'_>, name: &str, message: String, attrs: &[(&str, Py<PyAny>)]) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let class = py.import("chatfold.errors")?.getattr(name)?;
        let exc = class.call1((message,))?;
        for (k, v) in attrs {
            exc.setattr(*k, v)?;
        }
        Ok(PyErr::from_value(exc))
    })();
    made.unwrap_or_else(|e| e)
}

/// Adds chatfold's context to a Python exception that came back through
/// Rust (PEP 678 notes where the interpreter has them).
fn with_note(py: Python<'_>, err: PyErr, note: &str) -> PyErr {
    let value = err.value(py);
    if value.hasattr("add_note").unwrap_or(false) {
        let _ = value.call_method1("add_note", (note,));
    }
    err
}

/// The Python exception for a chatfold error: a summarizer's own exception
/// as itself; otherwise the class of `chatfold.errors` for its kind.
pub fn to_py(py: Python<'_>, error: Error) -> PyErr {
    let message = error.to_string();
    let int = |n: usize| {
        n.into_pyobject(py)
            .map(|o| o.into_any().unbind())
            .unwrap_or_else(|_| py.None())
    };
    match error {
        Error::Summarize(source) => match source.downcast::<PyFailure>() {
            Ok(failure) => with_note(
                py,
                failure.0,
                "chatfold: the summarizer raised this; nothing was changed",
            ),
            Err(other) => raise(
                py,
                "SummarizerError",
                format!("summarizer failed: {}", chain(&*other)),
                &[],
            ),
        },
        Error::EmptySummary => raise(py, "SummarizerError", message, &[]),
        Error::InvalidConfig(e) => {
            let setting = e
                .setting()
                .into_pyobject(py)
                .map(|o| o.into_any().unbind())
                .unwrap_or_else(|_| py.None());
            raise(py, "InvalidConfig", message, &[("setting", setting)])
        }
        Error::InvalidMessage { index, problem } => {
            let field = problem
                .field()
                .into_pyobject(py)
                .map(|o| o.into_any().unbind())
                .unwrap_or_else(|_| py.None());
            raise(
                py,
                "InvalidMessage",
                message,
                &[("index", int(index)), ("field", field)],
            )
        }
        Error::InvalidState(_) => raise(py, "InvalidState", message, &[]),
        Error::InvalidInput(_) => raise(py, "InvalidInput", message, &[]),
        Error::BudgetUnreachable { budget, required } => raise(
            py,
            "BudgetUnreachable",
            message,
            &[("budget", int(budget)), ("required", int(required))],
        ),
        Error::PinnedOverBudget { budget, pinned } => raise(
            py,
            "BudgetUnreachable",
            message,
            &[("budget", int(budget)), ("required", int(pinned))],
        ),
        Error::Tokenizer(_) => raise(py, "InvalidConfig", message, &[]),
        other => raise(py, "ChatfoldError", other.to_string(), &[]),
    }
}

/// `error` and its sources, `: `-separated.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        out.push_str(": ");
        out.push_str(&e.to_string());
        next = e.source();
    }
    out
}

/// Maps a chatfold result into Python.
pub trait IntoPy<T> {
    /// The value, or the error as a Python exception.
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for chatfold::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
