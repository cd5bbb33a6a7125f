//! The HTTP summarizers (OpenAI-compatible and Anthropic), by name from
//! Python: passed as `summarize`, they run in Rust with the GIL released.

use std::time::Duration;

use chatfold::Summarizer;
use chatfold::summarize::{AnthropicSummarizer, OpenAiSummarizer};
use pyo3::prelude::*;

use crate::errors::IntoPy;
use crate::fork::detach;
use crate::summarizer::Request;

/// Applies the settings both summarizers share.
macro_rules! configure {
    ($s:expr, $key:expr, $timeout:expr, $retries:expr) => {{
        let mut s = $s;
        if let Some(key) = $key {
            s = s.api_key(key);
        }
        if let Some(t) = $timeout {
            s = s.timeout(Duration::from_secs_f64(t));
        }
        if let Some(r) = $retries {
            s = s.retries(r);
        }
        s
    }};
}

/// An OpenAI-compatible Chat Completions summarizer (OpenAI, Ollama, vLLM,
/// Gemini, OpenRouter): `base_url` like `https://api.openai.com/v1`.
#[pyclass(module = "chatfold", name = "OpenAISummarizer", frozen)]
pub struct PyOpenAi {
    pub inner: OpenAiSummarizer,
}

#[pymethods]
impl PyOpenAi {
    #[new]
    #[pyo3(signature = (base_url, model, *, api_key=None, timeout=None, retries=None))]
    fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Option<f64>,
        retries: Option<u32>,
    ) -> Self {
        PyOpenAi {
            inner: configure!(OpenAiSummarizer::new(base_url, model), api_key, timeout, retries),
        }
    }

    /// Summarizes `request` (blocking, the GIL released).
    fn __call__(&self, py: Python<'_>, request: &Request) -> PyResult<String> {
        let request = request.inner(py)?;
        let out = detach(py, || {
            self.inner
                .summarize(request)
                .map_err(|e| chatfold::Error::Summarize(e.into()))
        });
        out.py(py)
    }
}

/// An Anthropic Messages summarizer: `base_url` like `https://api.anthropic.com`.
#[pyclass(module = "chatfold", name = "AnthropicSummarizer", frozen)]
pub struct PyAnthropic {
    pub inner: AnthropicSummarizer,
}

#[pymethods]
impl PyAnthropic {
    #[new]
    #[pyo3(signature = (base_url, model, *, api_key=None, timeout=None, retries=None))]
    fn new(
        base_url: &str,
        model: &str,
        api_key: Option<String>,
        timeout: Option<f64>,
        retries: Option<u32>,
    ) -> Self {
        PyAnthropic {
            inner: configure!(
                AnthropicSummarizer::new(base_url, model),
                api_key,
                timeout,
                retries
            ),
        }
    }

    /// Summarizes `request` (blocking, the GIL released).
    fn __call__(&self, py: Python<'_>, request: &Request) -> PyResult<String> {
        let request = request.inner(py)?;
        let out = detach(py, || {
            self.inner
                .summarize(request)
                .map_err(|e| chatfold::Error::Summarize(e.into()))
        });
        out.py(py)
    }
}
