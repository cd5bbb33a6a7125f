//! The lazy reading of a plain history: a list of `{"role": str,
//! "content": str}` dicts compacted without turning every dict into a
//! message.
//!
//! The planner reads every message's role but the text only of the latest
//! ones (rule 9: counting stops once the history is over budget, then
//! counts back from the end) and of the messages that may be a previous
//! summary; with the ledger off and one summarizer call, nothing else reads
//! the folded middle. So the folded middle is read as stand-ins (the role,
//! no content), the latest messages (a tail of at least eight bytes of text
//! per token of budget) and every pinned or summary-like message in full,
//! and the counter watches for a stand-in being counted: then the history
//! is read whole and planned again, so the result is always the one the
//! whole reading gives. The plan's report says which messages it folded;
//! their transcript is written in one pass from the caller's strings (held,
//! and read in place), and the kept and hoisted messages come back as the
//! caller's own dicts (as chatcram returns them).

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use chatfold::summarize::PlainLine;
use chatfold::{Compactor, Fate, FoldPolicy, Message, Placement, Role, TokenCounter};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::counter::Shared;
use crate::errors::{IntoPy, PyFailure};
use crate::result::Owned;
use crate::summarizer::{Lazy, Request, text_of};

/// The bindings' counter, noticing a stand-in (a message read without its
/// text) being counted.
#[derive(Debug)]
struct Watch {
    inner: Shared,
    missed: AtomicBool,
}

impl Watch {
    fn missed(&self) -> bool {
        self.missed.load(Ordering::Relaxed)
    }
}

impl TokenCounter for Watch {
    fn count(&self, text: &str) -> usize {
        self.inner.count(text)
    }

    fn count_message(&self, message: &Message) -> usize {
        // A plain history's messages all have content: no content is a stand-in.
        if message.content.is_none() {
            self.missed.store(true, Ordering::Relaxed);
            return 0;
        }
        self.inner.count_message(message)
    }

    fn count_message_at_least(&self, message: &Message) -> usize {
        // A stand-in's lower bound is below its message's: still a lower bound.
        self.inner.count_message_at_least(message)
    }

    fn reply_priming(&self) -> usize {
        self.inner.reply_priming()
    }

    fn shared(&self) -> Option<&(dyn TokenCounter + Sync)> {
        Some(self)
    }
}

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

/// A plain history read lazily: what the planner sees, and where each of
/// its messages comes from.
struct Read {
    /// The tail and the pinned or summary-like messages in full; each run
    /// of other messages before the tail as one stand-in.
    messages: Vec<Message>,
    /// The input indices each of `messages` stands for (one for a message
    /// read in full, a run for a stand-in).
    from: Vec<Range<usize>>,
}

impl Read {
    /// The input index of the planner's index `i` (its first; `n` past the
    /// end).
    fn input(&self, i: usize, n: usize) -> usize {
        self.from.get(i).map_or(n, |r| r.start)
    }

    /// Where the plan `report` put the `n` input messages.
    fn placed(&self, report: &chatfold::Report, n: usize) -> Placed {
        Placed {
            cut: self.input(report.cut(), n),
            hoisted: report.indices(Fate::Hoisted).map(|i| self.input(i, n)).collect(),
            folded: report
                .indices(Fate::Folded)
                .map(|i| self.from[i].clone())
                .collect(),
        }
    }
}

/// Where a plan put a plain history's messages, as input indices: the
/// cut, the hoisted messages (in the output), and the runs it folded.
struct Placed {
    cut: usize,
    hoisted: Vec<usize>,
    folded: Vec<Range<usize>>,
}

/// The roles chatfold knows, as interned strings, and as written.
type Known<'py> = [(&'py Bound<'py, PyString>, Role, &'static str); 5];

/// The roles chatfold knows.
fn known(py: Python<'_>) -> Known<'_> {
    [
        (pyo3::intern!(py, "user"), Role::User, "user"),
        (pyo3::intern!(py, "assistant"), Role::Assistant, "assistant"),
        (pyo3::intern!(py, "system"), Role::System, "system"),
        (pyo3::intern!(py, "tool"), Role::Tool, "tool"),
        (pyo3::intern!(py, "developer"), Role::Developer, "developer"),
    ]
}

/// The role of `item`, and its text as written.
fn role_of<'a>(known: &Known<'_>, item: &'a Plain<'_>) -> PyResult<(Role, &'a str)> {
    Ok(match known.iter().find(|(k, _, _)| item.role.is(*k)) {
        Some((_, role, text)) => (role.clone(), text),
        None => {
            let text = item.role.to_str()?;
            (Role::from(text), text)
        }
    })
}

/// A message read without its content.
fn stand_in() -> Message {
    let mut m = Message::new(Role::User, String::new());
    m.content = None;
    m
}

/// `items` (whose contents are `texts`) read lazily with a tail of
/// `tail_bytes` bytes of text.
fn read(
    known: &Known<'_>,
    items: &[Plain<'_>],
    texts: &[&str],
    tail_bytes: usize,
    summary: &FoldPolicy,
) -> PyResult<Read> {
    let prefix = &*summary.summary_prefix;
    let n = items.len();
    let (mut bytes, mut tail) = (0usize, n);
    while tail > 0 && bytes < tail_bytes {
        tail -= 1;
        bytes = bytes.saturating_add(texts[tail].len());
    }
    let full = |i: usize| -> PyResult<Message> { Ok(Message::new(role_of(known, &items[i])?.0, texts[i])) };
    let (mut messages, mut from) = (Vec::new(), Vec::<Range<usize>>::new());
    let mut run = 0;
    for (i, item) in items[..tail].iter().enumerate() {
        // Pinned messages (always in the output) and any that may be a
        // previous summary (in a history planned with `Placement::Fixed`:
        // the summary's role, its text starting with the prefix) are read
        // in full.
        let role = role_of(known, item)?.0;
        if !(role.is_pinned() || (role == summary.summary_role && texts[i].starts_with(prefix))) {
            continue;
        }
        if run < i {
            messages.push(stand_in());
            from.push(run..i);
        }
        messages.push(full(i)?);
        from.push(i..i + 1);
        run = i + 1;
    }
    if run < tail {
        messages.push(stand_in());
        from.push(run..tail);
    }
    for i in tail..n {
        messages.push(full(i)?);
        from.push(i..i + 1);
    }
    Ok(Read { messages, from })
}

thread_local! {
    /// The buffer transcripts are written in, kept between calls.
    static BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The largest buffer kept between calls (bytes): a larger one is freed.
const KEPT_BUFFER: usize = 64 << 20;

/// What a lazy compaction gives back: the result's messages and the
/// compaction (its messages not converted).
pub struct Done {
    pub messages: Py<PyAny>,
    pub compaction: Owned,
}

/// Compacts the plain history `messages` lazily with the Python callable
/// `summarize`; `None` when the lazy reading does not apply (not a plain
/// list, or the planner needed a message read as a stand-in): the caller
/// reads the history whole.
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
    let texts: Vec<&str> = items
        .iter()
        .map(|p| p.content.to_str())
        .collect::<PyResult<_>>()?;
    let known = known(py);
    let compactor = watching(compactor);
    let tail_bytes = compactor.budget.saturating_mul(8);
    let read = read(&known, &items, &texts, tail_bytes, &compactor.policy)?;
    let plan = compactor.plan(&read.messages);
    // A stand-in counted: the plan (or its refusal) may not be the whole
    // reading's. Likewise a plan of several chunks (their sizes are counted).
    if compactor.counter.missed() {
        return Ok(None);
    }
    let plan = plan.py(py)?;
    if plan.report().folds() > 1 {
        return Ok(None);
    }
    let Some(request) = plan.folded() else {
        // Nothing folded: the history as it is.
        let done = plan.apply(String::new());
        return match compactor.counter.missed() {
            true => Ok(None),
            false => Ok(Some(Done {
                messages: PyList::new(py, list.iter())?.into_any().unbind(),
                compaction: Owned::new(done.py(py)?).mapped(read.from),
            })),
        };
    };
    let asked = Asked::of(&request);
    drop(request);
    let n = items.len();
    let Placed { cut, hoisted, folded } = read.placed(plan.report(), n);
    if folded.is_empty() {
        // Only previous summaries before the cut: the compactor carries
        // their text without a summarizer call, as the whole reading does.
        return Ok(None);
    }
    let rendered = transcript(py, &known, &items, &texts, &folded)?;
    // The caller's objects, taken before the summarizer (Python code) runs.
    let kept = list.get_slice(cut, n);
    let hoisted_objects: Vec<Bound<'_, PyAny>> = hoisted
        .iter()
        .map(|&i| list.get_item(i))
        .collect::<PyResult<_>>()?;
    let lazy = Lazy {
        previous: asked.0,
        allowance: asked.1,
        ledger: asked.2,
        list: list.clone().unbind(),
        folded,
        rendered,
        whole: std::sync::OnceLock::new(),
    };
    let done = plan.apply(ask(py, summarize, lazy)?).py(py)?;
    if compactor.counter.missed() || done.messages.len() != hoisted.len() + 1 + (n - cut) {
        return Err(pyo3::exceptions::PyRuntimeError::new_err(
            "chatfold: the lazy reading of the history was inconsistent (a bug; nothing was changed)",
        ));
    }
    let summary = crate::json::to_py(py, &done.messages[hoisted.len()].to_json())?;
    let messages = joined(hoisted_objects, summary, &kept)?;
    Ok(Some(Done {
        messages: messages.into_any().unbind(),
        compaction: Owned::new(done).mapped(read.from),
    }))
}

/// The result's list: the caller's hoisted dicts, the summary, the
/// caller's kept dicts.
fn joined<'py>(
    hoisted: Vec<Bound<'py, PyAny>>,
    summary: Bound<'py, PyAny>,
    kept: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::new(summary.py(), hoisted)?;
    out.append(summary)?;
    kept.iter().try_for_each(|k| out.append(k))?;
    Ok(out)
}

/// What the plan's request asks besides the messages: the previous
/// summary, the allowance, the ledger's entries (owned, for the Python
/// request).
struct Asked(Option<String>, usize, Vec<String>);

impl Asked {
    fn of(request: &chatfold::SummaryRequest<'_>) -> Self {
        Asked(
            request.previous_summary().map(str::to_owned),
            request.allowance(),
            request.ledger().iter().map(|e| e.as_str().to_owned()).collect(),
        )
    }
}

/// `compactor` planning a plain history as the lazy reading sees it: the
/// summary in place, its counter watching for a stand-in.
fn watching(compactor: &Compactor<Shared>) -> Compactor<Watch> {
    let mut compactor = compactor.clone();
    compactor.policy.placement = Placement::Fixed;
    let inner = compactor.counter.clone();
    compactor.counter(Watch {
        inner,
        missed: AtomicBool::new(false),
    })
}

/// The transcript of the `folded` runs of `items` (whose contents are
/// `texts`), in one pass over the caller's strings, written into this
/// thread's buffer (a fresh one each time would cost as much in page
/// faults as the writing).
fn transcript(
    py: Python<'_>,
    known: &Known<'_>,
    items: &[Plain<'_>],
    texts: &[&str],
    folded: &[Range<usize>],
) -> PyResult<Py<PyString>> {
    BUFFER.with(|buffer| {
        let mut buffer = buffer.borrow_mut();
        buffer.clear();
        for i in folded.iter().flat_map(Range::clone) {
            if !buffer.is_empty() {
                buffer.push('\n');
            }
            let role = role_of(known, &items[i])?.1;
            PlainLine::new(role, texts[i]).push_to(&mut buffer);
        }
        let text = PyString::new(py, &buffer).unbind();
        if buffer.capacity() > KEPT_BUFFER {
            *buffer = String::new();
        }
        Ok(text)
    })
}

/// The Python summarizer's answer to the lazy request.
fn ask(py: Python<'_>, summarize: &Py<PyAny>, lazy: Lazy) -> PyResult<String> {
    let answer = Py::new(py, Request::lazy(lazy))
        .and_then(|r| summarize.call1(py, (r,)))
        .and_then(|a| text_of(py, a.bind(py)));
    answer
        .map_err(|e| chatfold::Error::Summarize(Box::new(PyFailure(e))))
        .py(py)
}
