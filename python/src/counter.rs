//! Token counters from Python: a built-in tokenizer by name (counted in
//! Rust, never calling back into Python) or a Python callable.

use std::sync::Mutex;

use chatfold::summarize::PlainLine;
use chatfold::{Message, NamedCounter, TokenCounter};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::errors::IntoPy;

/// Where the counts come from.
#[derive(Debug)]
enum Kind {
    /// A built-in tokenizer (`heuristic`, `o200k_base`, `cl100k_base`, a model).
    Named(NamedCounter),
    /// Whitespace-separated words (rollmem's default counter).
    Words,
    /// A Python callable `count(text) -> int`.
    Callable(Py<PyAny>),
}

/// How a message is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// OpenAI's chat accounting (chatfold's): framing, role, content, calls.
    Chat,
    /// The count of rollmem's `Message.token_text()` (content, each tool
    /// call's `name(arguments)`, the `tool_call_id`, newline-joined), so
    /// that `chatfold.compat.rollmem` measures as rollmem does.
    TokenText,
    /// The count of `"{role}: {content}"`, as chatcram measures.
    Rendered,
}

impl Mode {
    /// The mode `name` names (`"chat"`, `"token_text"`, `"rendered"`).
    pub fn parse(name: &str) -> PyResult<Self> {
        match name {
            "chat" => Ok(Mode::Chat),
            "token_text" => Ok(Mode::TokenText),
            "rendered" => Ok(Mode::Rendered),
            other => Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown counting {other:?}"
            ))),
        }
    }
}

/// A counter for the bindings: a tokenizer, and how it measures a message.
#[derive(Debug)]
pub struct Counter {
    kind: Kind,
    mode: Mode,
    /// The first exception a callable raised; counting goes on with 0 and
    /// the caller raises it when the call returns.
    failed: Mutex<Option<PyErr>>,
}

impl Counter {
    /// The counter `spec` names: `None` (the heuristic), a name, or a callable.
    pub fn from_py(py: Python<'_>, spec: Option<&Bound<'_, PyAny>>, mode: Mode) -> PyResult<Self> {
        let kind = match spec {
            None => Kind::Named(NamedCounter::Heuristic),
            Some(obj) if obj.is_none() => Kind::Named(NamedCounter::Heuristic),
            Some(obj) => match obj.extract::<String>() {
                Ok(name) if name == "words" => Kind::Words,
                Ok(name) => Kind::Named(name.parse::<NamedCounter>().py(py)?),
                Err(_) if obj.is_callable() => Kind::Callable(obj.clone().unbind()),
                Err(_) => {
                    return Err(PyTypeError::new_err(
                        "tokenizer must be a name (\"heuristic\", \"o200k_base\", \"cl100k_base\", a model) or a callable",
                    ));
                }
            },
        };
        Ok(Counter {
            kind,
            mode,
            failed: Mutex::new(None),
        })
    }

    /// Whether counting calls a Python callable.
    pub fn calls_python(&self) -> bool {
        matches!(self.kind, Kind::Callable(_))
    }

    /// The exception a callable raised since the last check, if any.
    pub fn take_failure(&self) -> Option<PyErr> {
        self.failed.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn call(&self, f: &Py<PyAny>, text: &str) -> usize {
        Python::attach(
            |py| match f.call1(py, (text,)).and_then(|n| n.extract::<usize>(py)) {
                Ok(n) => n,
                Err(e) => {
                    let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
                    failed.get_or_insert(e);
                    0
                }
            },
        )
    }
}

/// rollmem's `Message.token_text()`.
pub fn token_text(message: &Message) -> String {
    let mut parts: Vec<String> = Vec::new();
    let content = message.text();
    if !content.is_empty() {
        parts.push(content.into_owned());
    }
    for call in &message.tool_calls {
        parts.push(format!("{}({})", call.name, call.arguments));
    }
    if let Some(id) = &message.tool_call_id {
        parts.push(id.clone());
    }
    parts.join("\n")
}

impl TokenCounter for Counter {
    fn count(&self, text: &str) -> usize {
        match &self.kind {
            Kind::Named(n) => n.count(text),
            Kind::Words => text.split_whitespace().count(),
            Kind::Callable(f) => self.call(f, text),
        }
    }

    fn count_message(&self, message: &Message) -> usize {
        match (&self.kind, self.mode) {
            (_, Mode::TokenText) => self.count(&token_text(message)),
            (_, Mode::Rendered) => self.count(&PlainLine::of(message).to_string()),
            (Kind::Named(n), Mode::Chat) => n.count_message(message),
            (_, Mode::Chat) => {
                // The trait's accounting, over this counter's `count`.
                struct Via<'a>(&'a Counter);
                impl TokenCounter for Via<'_> {
                    fn count(&self, text: &str) -> usize {
                        self.0.count(text)
                    }
                }
                Via(self).count_message(message)
            }
        }
    }

    fn count_message_at_least(&self, message: &Message) -> usize {
        match (&self.kind, self.mode) {
            (Kind::Named(n), Mode::Chat) => n.count_message_at_least(message),
            _ => 0,
        }
    }

    fn reply_priming(&self) -> usize {
        match (&self.kind, self.mode) {
            (Kind::Named(n), Mode::Chat) => n.reply_priming(),
            (_, Mode::Chat) => 3,
            _ => 0,
        }
    }

    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        Some(self)
    }
}

/// A [`Counter`] shared by the objects that count with it (a compactor and
/// its copies for each call).
#[derive(Clone, Debug)]
pub struct Shared(pub std::sync::Arc<Counter>);

impl TokenCounter for Shared {
    fn count(&self, text: &str) -> usize {
        self.0.count(text)
    }

    fn count_message(&self, message: &Message) -> usize {
        self.0.count_message(message)
    }

    fn count_message_at_least(&self, message: &Message) -> usize {
        self.0.count_message_at_least(message)
    }

    fn reply_priming(&self) -> usize {
        self.0.reply_priming()
    }

    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        Some(&*self.0)
    }
}

impl Shared {
    /// The exception a callable counter raised, if any: raise it.
    pub fn check(&self) -> PyResult<()> {
        match self.0.take_failure() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
