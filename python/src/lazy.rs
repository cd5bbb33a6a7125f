//! A plain history (a list of `{"role": str, "content": str}` dicts)
//! compacted where Python holds it: the core's `Compactor::compact_view`
//! reads the roles and texts in place, and the result is laid out from the
//! caller's own dicts (as chatcram returns them), with the summary the one
//! new dict. This module only converts.

use std::ops::Range;

use chatfold::{BoxError, Compactor, ViewRequest};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::counter::Shared;
use crate::errors::{IntoPy, PyFailure};
use crate::result::Owned;
use crate::summarizer::{Lazy, Request, text_of};

/// A plain message of the caller's: its role and content strings.
pub struct Plain<'py> {
    pub role: Bound<'py, PyString>,
    pub content: Bound<'py, PyString>,
}

/// The items of `list` when every one is a plain message (a `dict` of
/// exactly the keys `role` and `content`, both `str`); `None` otherwise.
///
/// # Errors
///
/// The exception a key lookup raised.
pub fn plain_items<'py>(list: &Bound<'py, PyList>) -> PyResult<Option<Vec<Plain<'py>>>> {
    let py = list.py();
    let (role_key, content_key) = (pyo3::intern!(py, "role"), pyo3::intern!(py, "content"));
    let mut out = Vec::with_capacity(list.len());
    for item in list.iter() {
        let Ok(dict) = item.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        if dict.len() != 2 {
            return Ok(None);
        }
        let (Some(role), Some(content)) = (dict.get_item(role_key)?, dict.get_item(content_key)?) else {
            return Ok(None);
        };
        let (Ok(role), Ok(content)) = (
            role.cast_into_exact::<PyString>(),
            content.cast_into_exact::<PyString>(),
        ) else {
            return Ok(None);
        };
        out.push(Plain { role, content });
    }
    Ok(Some(out))
}

/// The roles chatfold knows, interned, and as written.
type Known<'py> = [(&'py Bound<'py, PyString>, &'static str); 5];

fn known(py: Python<'_>) -> Known<'_> {
    [
        (pyo3::intern!(py, "user"), "user"),
        (pyo3::intern!(py, "assistant"), "assistant"),
        (pyo3::intern!(py, "system"), "system"),
        (pyo3::intern!(py, "tool"), "tool"),
        (pyo3::intern!(py, "developer"), "developer"),
    ]
}

/// The role of `item` as written: a known one found by identity (a role
/// written as a literal is the interned string), any other read.
fn role_of<'a>(known: &Known<'_>, item: &'a Plain<'_>) -> PyResult<&'a str> {
    match known.iter().find(|(k, _)| item.role.is(*k)) {
        Some((_, text)) => Ok(text),
        None => item.role.to_str(),
    }
}

/// `items` as the core reads them: each one's role and text, borrowed.
pub fn pairs<'a>(py: Python<'_>, items: &'a [Plain<'_>]) -> PyResult<Vec<(&'a str, &'a str)>> {
    let known = known(py);
    items
        .iter()
        .map(|p| Ok((role_of(&known, p)?, p.content.to_str()?)))
        .collect()
}

/// The history as the core reads it: each message's role and text.
type Pairs<'a> = [(&'a str, &'a str)];

thread_local! {
    /// The buffer transcripts are written in, kept between calls.
    static BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The largest buffer kept between calls (bytes): a larger one is freed.
const KEPT_BUFFER: usize = 64 << 20;

/// What a compaction in place gives back: the result's messages and the
/// compaction (its messages not converted).
pub struct Done {
    pub messages: Py<PyAny>,
    pub compaction: Owned,
}

/// The caller's dicts the summarizer cannot fold: those outside the folded
/// runs, taken before the summarizer (Python code) runs.
struct Outside<'py> {
    /// Those before the last folded run, with their indices.
    head: Vec<(usize, Bound<'py, PyAny>)>,
    /// Those from the end of the last folded run on.
    from: usize,
    tail: Bound<'py, PyList>,
}

impl<'py> Outside<'py> {
    fn of(list: &Bound<'py, PyList>, runs: &[Range<usize>]) -> PyResult<Self> {
        let from = runs.last().map_or(0, |r| r.end);
        let mut head = Vec::new();
        let mut at = 0;
        for run in runs {
            for i in at..run.start {
                head.push((i, list.get_item(i)?));
            }
            at = run.end;
        }
        Ok(Outside {
            head,
            from,
            tail: list.get_slice(from, list.len()),
        })
    }

    fn get(&self, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match i.checked_sub(self.from) {
            Some(k) => self.tail.get_item(k),
            None => self
                .head
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, o)| o.clone())
                .ok_or_else(|| {
                    pyo3::exceptions::PyRuntimeError::new_err(
                        "chatfold: a kept message was folded (a bug; nothing was changed)",
                    )
                }),
        }
    }
}

/// Compacts the plain history `messages` in place with the Python callable
/// `summarize`; `None` when that does not apply (not a plain list, or the
/// core asks for the history read whole).
pub fn compact(
    py: Python<'_>,
    compactor: &Compactor<Shared>,
    messages: &Bound<'_, PyAny>,
    summarize: &Py<PyAny>,
) -> PyResult<Option<Done>> {
    let Ok(list) = messages.cast::<PyList>() else {
        return Ok(None);
    };
    let Some(items) = plain_items(list)? else {
        return Ok(None);
    };
    let pairs = pairs(py, &items)?;
    let mut outside = None;
    let done = compactor.compact_view(pairs.as_slice(), |request: ViewRequest<'_, Pairs<'_>>| {
        let taken = Outside::of(list, request.runs()).map_err(boxed)?;
        outside = Some(taken);
        ask(py, summarize, lazy(py, list, &request)).map_err(boxed)
    });
    let Some(done) = done.py(py)? else {
        return Ok(None);
    };
    let messages = match (&done.summary, outside) {
        (Some(summary), Some(outside)) => {
            let out = PyList::empty(py);
            for &i in &done.hoisted {
                out.append(outside.get(i)?)?;
            }
            out.append(crate::json::to_py(py, &summary.to_json())?)?;
            for i in done.kept.clone() {
                out.append(outside.get(i)?)?;
            }
            out
        }
        // Nothing folded: the caller's dicts, in a new list.
        _ => PyList::new(py, list.iter())?,
    };
    Ok(Some(Done {
        messages: messages.into_any().unbind(),
        compaction: Owned::laid(done),
    }))
}

fn boxed(e: PyErr) -> BoxError {
    Box::new(PyFailure(e))
}

/// The Python request for `request`: its transcript written once, the
/// caller's dicts read when asked for.
fn lazy(py: Python<'_>, list: &Bound<'_, PyList>, request: &ViewRequest<'_, Pairs<'_>>) -> Lazy {
    Lazy {
        previous: request.previous_summary().map(str::to_owned),
        allowance: request.allowance(),
        ledger: request.ledger().iter().map(|e| e.as_str().to_owned()).collect(),
        list: list.clone().unbind(),
        folded: request.runs().to_vec(),
        rendered: transcript(py, request),
        whole: std::sync::OnceLock::new(),
    }
}

/// The transcript of `request`, written into this thread's buffer (a
/// fresh one each time would cost as much in page faults as the writing).
fn transcript(py: Python<'_>, request: &ViewRequest<'_, Pairs<'_>>) -> Py<PyString> {
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        buffer.clear();
        request.transcript_into(&mut buffer);
        let text = PyString::new(py, &buffer).unbind();
        if buffer.capacity() > KEPT_BUFFER {
            *buffer = String::new();
        }
        text
    })
}

/// The Python summarizer's answer to the lazy request.
fn ask(py: Python<'_>, summarize: &Py<PyAny>, lazy: Lazy) -> PyResult<String> {
    let answer = Py::new(py, Request::lazy(lazy))?.into_any();
    let answer = summarize.call1(py, (answer,))?;
    text_of(py, answer.bind(py))
}
