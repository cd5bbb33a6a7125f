//! The `chatfold._chatfold` extension module: thin PyO3 classes over the
//! chatfold crate; the Pythonic API (async methods, the compat modules) is
//! in the `chatfold` package's Python files.

// Unsafe code only in `utf8` (a `str`'s UTF-8 borrowed, a plain history's
// strings read without reference counts) and `lazy`, which uses them.
#![deny(unsafe_code)]

use pyo3::prelude::*;

mod compactor;
mod counter;
mod errors;
mod fork;
mod http;
mod json;
mod lazy;
mod memory;
mod policy;
mod result;
mod step;
mod summarizer;
mod sync;

use fork::detach;

/// Counts `messages` (dicts) with the tokenizer `tokenizer` names.
#[pyfunction]
#[pyo3(signature = (messages, tokenizer="o200k_base"))]
fn count_tokens(py: Python<'_>, messages: &Bound<'_, PyAny>, tokenizer: &str) -> PyResult<usize> {
    use chatfold::TokenCounter;
    use errors::IntoPy;
    let name = pyo3::types::PyString::new(py, tokenizer).into_any();
    let counter = counter::Counter::from_py(py, Some(&name), counter::Mode::Chat)?;
    let value = json::to_value(messages, &mut String::from("messages"))?;
    let history = detach(py, || chatfold::History::from_json_value(value)).py(py)?;
    Ok(detach(py, || counter.count_messages(&history.messages)))
}

/// Tokens in `text` by the tokenizer `tokenizer` names (no message framing).
#[pyfunction]
#[pyo3(signature = (text, tokenizer="o200k_base"))]
fn count_text(py: Python<'_>, text: &str, tokenizer: &str) -> PyResult<usize> {
    use chatfold::TokenCounter;
    use errors::IntoPy;
    let counter = tokenizer.parse::<chatfold::NamedCounter>().py(py)?;
    Ok(detach(py, || counter.count(text)))
}

#[pymodule]
fn _chatfold(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<compactor::PyCompactor>()?;
    m.add_class::<compactor::PyAim>()?;
    m.add_class::<result::CompactionResult>()?;
    m.add_class::<summarizer::Request>()?;
    m.add_class::<http::PyOpenAi>()?;
    m.add_class::<http::PyAnthropic>()?;
    m.add_class::<step::Step>()?;
    m.add_class::<memory::SyncMemory>()?;
    m.add_class::<memory::AsyncMemory>()?;
    m.add_class::<memory::Tiered>()?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_text, m)?)?;
    m.add_function(wrap_pyfunction!(fork::before_fork, m)?)?;
    m.add_function(wrap_pyfunction!(fork::after_fork, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
