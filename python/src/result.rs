//! What a compaction gives Python: the `Compaction` object, and the
//! compaction with its lifetime taken out on the way there.

use chatfold::{Compaction, Fate, Message, Report};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// A compaction's outcome.
#[pyclass(module = "chatfold", name = "Compaction", frozen)]
#[derive(Debug)]
pub struct CompactionResult {
    /// The compacted messages (a body dict when a body came in).
    #[pyo3(get)]
    messages: Py<PyAny>,
    /// Whether a summary was made.
    #[pyo3(get)]
    summarized: bool,
    /// Tokens of the input (a lower bound when `tokens_before_exact` is false).
    #[pyo3(get)]
    tokens_before: usize,
    /// Whether `tokens_before` is exact.
    #[pyo3(get)]
    tokens_before_exact: bool,
    /// Tokens of the output.
    #[pyo3(get)]
    tokens_after: usize,
    /// Whether the output is over the budget (unreachable).
    #[pyo3(get)]
    over_budget: bool,
    /// Whether the summary was cut to fit.
    #[pyo3(get)]
    summary_truncated: bool,
    /// Tokens at the output's start that the previous request sent too (a
    /// provider's cache can serve them): before a new fold's first change,
    /// else everything before the latest exchange.
    #[pyo3(get)]
    prefix_tokens: usize,
    /// What happened to each message, and the ledger (made into a dict
    /// when first asked for).
    report: Report,
    report_dict: std::sync::OnceLock<Py<PyDict>>,
}

#[pymethods]
impl CompactionResult {
    /// What happened to each message, and the ledger, as a dict.
    #[getter(report)]
    fn report_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if let Some(d) = self.report_dict.get() {
            return Ok(d.bind(py).clone());
        }
        let d = report(py, &self.report)?.unbind();
        Ok(self.report_dict.get_or_init(|| d).bind(py).clone())
    }

    fn __repr__(&self) -> String {
        format!(
            "Compaction(summarized={}, tokens_before={}, tokens_after={}, over_budget={})",
            py_bool(self.summarized),
            self.tokens_before,
            self.tokens_after,
            py_bool(self.over_budget)
        )
    }
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// A compaction with the lifetime taken out: what Python gets back.
pub struct Owned {
    messages: Option<Vec<Message>>,
    summarized: bool,
    tokens_before: chatfold::Tokens,
    tokens_after: usize,
    over_budget: bool,
    summary_truncated: bool,
    prefix_tokens: usize,
    report: Report,
}

/// An [`Owned`] of `messages` and the rest of `$c`'s fields (a
/// `Compaction` or a `ViewCompaction`: they report alike).
macro_rules! owned {
    ($c:expr, $messages:expr) => {
        Owned {
            messages: $messages,
            summarized: $c.summarized,
            tokens_before: $c.tokens_before,
            tokens_after: $c.tokens_after,
            over_budget: $c.over_budget,
            summary_truncated: $c.summary_truncated,
            prefix_tokens: $c.prefix_tokens,
            report: $c.report,
        }
    };
}

impl Owned {
    /// `c`, its messages kept only when they changed.
    pub fn new(c: Compaction<'_>) -> Self {
        let changed = matches!(c.messages, std::borrow::Cow::Owned(_));
        let messages = changed.then(|| c.messages.into_owned());
        owned!(c, messages)
    }

    /// A compaction of a plain history read in place (its messages are
    /// the caller's objects, laid out by the binding).
    pub fn laid(c: chatfold::ViewCompaction) -> Self {
        owned!(c, None)
    }

    /// The compacted messages, when they changed.
    pub fn changed(&self) -> Option<&[Message]> {
        self.messages.as_deref()
    }

    /// The result with `messages` as its messages.
    pub fn result(self, messages: Py<PyAny>) -> CompactionResult {
        CompactionResult {
            messages,
            summarized: self.summarized,
            tokens_before: self.tokens_before.get(),
            tokens_before_exact: self.tokens_before.exact().is_some(),
            tokens_after: self.tokens_after,
            over_budget: self.over_budget,
            summary_truncated: self.summary_truncated,
            prefix_tokens: self.prefix_tokens,
            report: self.report,
            report_dict: std::sync::OnceLock::new(),
        }
    }
}

/// The report as a dict.
fn report<'py>(py: Python<'py>, r: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    // One string object per fate, shared by the list's items.
    let names = [
        pyo3::intern!(py, "kept"),
        pyo3::intern!(py, "hoisted"),
        pyo3::intern!(py, "folded"),
        pyo3::intern!(py, "previous_summary"),
        pyo3::intern!(py, "pinned"),
        pyo3::intern!(py, "other"),
    ];
    let fate = |f: Fate| match f {
        Fate::Kept => names[0],
        Fate::Hoisted => names[1],
        Fate::Folded => names[2],
        Fate::PreviousSummary => names[3],
        Fate::Pinned => names[4],
        _ => names[5],
    };
    let fates: Vec<_> = r.fates().map(fate).collect();
    d.set_item("fates", PyList::new(py, fates)?)?;
    d.set_item("cut", r.cut())?;
    d.set_item("reason", format!("{:?}", r.reason()).to_lowercase())?;
    d.set_item("aligned_from", r.aligned_from())?;
    d.set_item("folds", r.folds())?;
    d.set_item("allowance", r.allowance())?;
    d.set_item("prose_allowance", r.prose_allowance())?;
    d.set_item("ledger", texts(r.ledger()))?;
    d.set_item("ledger_dropped", texts(r.ledger_dropped()))?;
    d.set_item("cleared", r.cleared().to_vec())?;
    d.set_item("reused", r.reused())?;
    d.set_item("prefix", prefix(r.prefix()))?;
    Ok(d)
}

/// Whether the prompt's start was kept, as Python reads it.
fn prefix(p: chatfold::Prefix) -> &'static str {
    match p {
        chatfold::Prefix::Unchanged => "unchanged",
        chatfold::Prefix::Replayed => "replayed",
        _ => "rewritten",
    }
}

/// Ledger entries as the texts Python reads.
fn texts(entries: &[chatfold::LedgerEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.as_str()).collect()
}
