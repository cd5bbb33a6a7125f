//! The HTTP summarizers (OpenAI-compatible and Anthropic), by name from
//! Python: passed as `summarize`, they run in Rust with the GIL released.
//! Built by the library's [`Named`] from their spec.

use std::time::Duration;

use chatfold::Summarizer;
use chatfold::summarize::{Named, SummarizerSpec};
use pyo3::prelude::*;

use crate::errors::IntoPy;
use crate::fork::detach;
use crate::summarizer::Request;

/// The library's summarizer of `kind` for these arguments.
fn named(
    py: Python<'_>,
    kind: &str,
    (base_url, model): (&str, &str),
    api_key: Option<String>,
    timeout: Option<f64>,
    retries: Option<u32>,
) -> PyResult<Named> {
    let mut spec = SummarizerSpec::http(kind, base_url, model);
    spec.api_key = api_key;
    spec.timeout = timeout
        .filter(|t| *t > 0.0)
        .and_then(|t| Duration::try_from_secs_f64(t).ok());
    spec.retries = retries;
    Named::new(&spec).map_err(|e| crate::errors::to_py(py, chatfold::Error::InvalidConfig(e)))
}

/// Summarizes `request` with `inner` (blocking, the GIL released).
fn call(py: Python<'_>, inner: &Named, request: &Request) -> PyResult<String> {
    let request = request.inner(py)?;
    let out = detach(py, || {
        inner.summarize(request).map_err(chatfold::Error::Summarize)
    });
    out.py(py)
}

/// An OpenAI-compatible Chat Completions summarizer (OpenAI, Ollama, vLLM,
/// Gemini, OpenRouter): `base_url` like `https://api.openai.com/v1`.
#[pyclass(module = "chatfold", name = "OpenAISummarizer", frozen)]
pub struct PyOpenAi {
    pub inner: Named,
}

#[pymethods]
impl PyOpenAi {
    #[new]
    #[pyo3(signature = (base_url, model, *, api_key=None, timeout=None, retries=None))]
    fn new(
        py: Python<'_>,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Option<f64>,
        retries: Option<u32>,
    ) -> PyResult<Self> {
        let inner = named(py, "openai", (base_url, model), api_key, timeout, retries)?;
        Ok(PyOpenAi { inner })
    }

    /// Summarizes `request` (blocking, the GIL released).
    fn __call__(&self, py: Python<'_>, request: &Request) -> PyResult<String> {
        call(py, &self.inner, request)
    }
}

/// An Anthropic Messages summarizer: `base_url` like `https://api.anthropic.com`.
#[pyclass(module = "chatfold", name = "AnthropicSummarizer", frozen)]
pub struct PyAnthropic {
    pub inner: Named,
}

#[pymethods]
impl PyAnthropic {
    #[new]
    #[pyo3(signature = (base_url, model, *, api_key=None, timeout=None, retries=None))]
    fn new(
        py: Python<'_>,
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Option<f64>,
        retries: Option<u32>,
    ) -> PyResult<Self> {
        let inner = named(py, "anthropic", (base_url, model), api_key, timeout, retries)?;
        Ok(PyAnthropic { inner })
    }

    /// Summarizes `request` (blocking, the GIL released).
    fn __call__(&self, py: Python<'_>, request: &Request) -> PyResult<String> {
        call(py, &self.inner, request)
    }
}
