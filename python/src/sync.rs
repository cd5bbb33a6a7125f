//! The synchronous summarizer a Python compaction or memory takes: a
//! callable, the extractive one, or an HTTP one the library built.

use chatfold::{BoxError, Extractive, Summarizer, SummaryRequest};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::summarizer::call_python;

/// A synchronous summarizer: a Python callable, or Extractive.
#[derive(Debug)]
pub enum Sync {
    Extractive(Extractive),
    /// An HTTP summarizer the library built from its name.
    Named(chatfold::summarize::Named),
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
                        return Ok(Sync::Named(s.get().inner.clone()));
                    }
                    if let Ok(s) = obj.cast::<crate::http::PyAnthropic>() {
                        return Ok(Sync::Named(s.get().inner.clone()));
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

impl Summarizer for Sync {
    type Error = BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, BoxError> {
        match self {
            Sync::Extractive(e) => e.summarize(request).map_err(Into::into),
            Sync::Named(s) => s.summarize(request),
            Sync::Callable(f) => Python::attach(|py| call_python(py, f, request.clone().into_owned())),
        }
    }
}
