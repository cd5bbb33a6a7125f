//! `chatfold.Compactor`: the stateless compactor over Python messages.

use std::sync::Arc;

use chatfold::{Compactor, Format, History, Message};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::counter::{Counter, Mode, Shared};
use crate::errors::IntoPy;
use crate::fork::detach;
use crate::json;
use crate::policy;
use crate::result::{CompactionResult, Owned};
use crate::step::{Finish, Step};
use crate::summarizer::Sync;
use chatfold::summarize::Bridge;

/// The input read: the history, and whether it was a body.
pub struct Input {
    history: History,
    original: Py<PyAny>,
}

/// A list of plain `{"role": str, "content": str}` dicts, read without the
/// JSON value in between (`None` when any message has more).
fn plain(list: &Bound<'_, PyAny>) -> PyResult<Option<Vec<Message>>> {
    let Ok(list) = list.cast::<PyList>() else {
        return Ok(None);
    };
    let Some(items) = crate::lazy::plain_items(list)? else {
        return Ok(None);
    };
    let message = |p: &crate::lazy::Plain<'_>| Ok(Message::new(p.role.to_str()?, p.content.to_str()?));
    items.iter().map(message).collect::<PyResult<_>>().map(Some)
}

fn read(py: Python<'_>, messages: &Bound<'_, PyAny>, format: Option<Format>) -> PyResult<Input> {
    if format.is_none() {
        if let Some(list) = plain(messages)? {
            return Ok(Input {
                history: History::from(list),
                original: messages.clone().unbind(),
            });
        }
    }
    let value = json::to_value(messages, &mut String::from("messages"))?;
    let history = detach(py, || {
        let history = History::from_json_value(value)?;
        match format {
            Some(f) => history.into_format(f),
            None => Ok(history),
        }
    });
    Ok(Input {
        history: history.py(py)?,
        original: messages.clone().unbind(),
    })
}

/// The Python result of `owned`, a compaction of `input`: the caller's own
/// objects when nothing changed, else the new messages (in a body when a
/// body came in).
fn into_py(owned: Owned, py: Python<'_>, input: Input) -> PyResult<CompactionResult> {
    let messages = match owned.changed() {
        // Unchanged: the caller's own objects, in a new list.
        None => match input.original.bind(py).cast::<PyList>() {
            Ok(list) => PyList::new(py, list.iter())?.into_any().unbind(),
            Err(_) => json::to_py(py, &input.history.to_json())?.unbind(),
        },
        Some(out) => match input.history.is_body() {
            true => json::to_py(py, &input.history.to_json_with(out))?.unbind(),
            false => {
                let list = PyList::empty(py);
                for m in out {
                    list.append(json::to_py(py, &m.to_json())?)?;
                }
                list.into_any().unbind()
            }
        },
    };
    Ok(owned.result(messages))
}

fn parse_format(format: Option<&str>) -> PyResult<Option<Format>> {
    format
        .map(|f| {
            f.parse::<Format>().map_err(|_| {
                PyValueError::new_err(format!(
                    "unknown format {f:?} (\"openai\", \"anthropic\" or \"responses\")"
                ))
            })
        })
        .transpose()
}

/// Keeps a chat history inside a token budget: system messages and recent
/// turns verbatim, the older middle folded into one summary message.
#[pyclass(module = "chatfold._chatfold", name = "Compactor", subclass, frozen)]
pub struct PyCompactor {
    inner: Compactor<Shared>,
    counter: Shared,
    format: Option<Format>,
}

impl PyCompactor {
    /// Whether a plain list may be read lazily (see `lazy`): no format
    /// forced, a built-in counter, the ledger off, no chunks, no clearing.
    fn lazy_applies(&self) -> bool {
        let c = &self.inner;
        self.format.is_none()
            && !self.counter.0.calls_python()
            && !c.policy.ledger
            && c.max_fold_input_tokens.is_none()
            && c.clear_tool_results.is_none()
    }

    /// The compactor for `input` (its summary placed for its format).
    fn for_input(&self, input: &Input) -> Compactor<Shared> {
        let mut c = self.inner.clone();
        c.policy.placement = input.history.placement();
        c
    }
}

#[pymethods]
impl PyCompactor {
    #[new]
    #[pyo3(signature = (budget, keep_recent=None, *, tokenizer=None, format=None, strict=false,
        summary_role=None, summary_prefix=None, min_summary_tokens=None, max_summary_tokens=None,
        ledger=true, max_fold_input_tokens=None, counting="chat", budget_as_trigger=false,
        allow_response_role=false, fold_to=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        budget: usize,
        keep_recent: Option<usize>,
        tokenizer: Option<&Bound<'_, PyAny>>,
        format: Option<&str>,
        strict: bool,
        summary_role: Option<String>,
        summary_prefix: Option<String>,
        min_summary_tokens: Option<usize>,
        max_summary_tokens: Option<usize>,
        ledger: bool,
        max_fold_input_tokens: Option<usize>,
        counting: &str,
        budget_as_trigger: bool,
        allow_response_role: bool,
        fold_to: Option<usize>,
    ) -> PyResult<Self> {
        let default = pyo3::types::PyString::new(py, "o200k_base").into_any();
        let counter = Shared(Arc::new(Counter::from_py(
            py,
            Some(tokenizer.unwrap_or(&default)),
            Mode::parse(counting)?,
        )?));
        let policy = policy::build(
            summary_role,
            summary_prefix,
            min_summary_tokens,
            max_summary_tokens,
            ledger,
        )
        .allow_response_role(allow_response_role);
        let mut inner = Compactor::new(budget)
            .counter(counter.clone())
            .policy(policy)
            .strict(strict)
            .budget_as_trigger(budget_as_trigger);
        if let Some(k) = keep_recent {
            inner = inner.keep_recent(k);
        }
        if let Some(n) = max_fold_input_tokens {
            inner = inner.max_fold_input_tokens(n);
        }
        if let Some(n) = fold_to {
            inner = inner.fold_to(n);
        }
        // Checked now, so a bad setting fails at construction.
        detach(py, || inner.plan(&[]).map(|_| ())).py(py)?;
        Ok(PyCompactor {
            inner,
            counter,
            format: parse_format(format)?,
        })
    }

    /// The budget in tokens.
    #[getter]
    fn budget(&self) -> usize {
        self.inner.budget
    }

    /// Tokens of recent turns kept verbatim (the default: half the fold target).
    #[getter]
    fn keep_recent(&self) -> usize {
        self.inner.effective_keep_recent()
    }

    /// Where a history over the budget is folded down to (the default: half the budget).
    #[getter]
    fn fold_to(&self) -> usize {
        self.inner.effective_fold_to()
    }

    /// Tokens of `messages` as the budget measures them.
    fn count(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<usize> {
        use chatfold::TokenCounter;
        let input = read(py, messages, self.format)?;
        let n = detach(py, || self.counter.count_messages(&input.history.messages));
        self.counter.check()?;
        Ok(n)
    }

    /// Compacts `messages` (a list of message dicts, or a request body),
    /// summarizing with `summarize` (a callable `f(request) -> str`;
    /// `None` or `"extractive"`: the built-in extractive summarizer).
    #[pyo3(signature = (messages, summarize=None))]
    fn compact(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        summarize: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<CompactionResult> {
        let summarizer = Sync::from_py(summarize)?;
        if let Sync::Callable(f) = &summarizer {
            if self.lazy_applies() {
                if let Some(done) = crate::lazy::compact(py, &self.inner, messages, f)? {
                    return Ok(done.compaction.result(done.messages));
                }
            }
        }
        let input = read(py, messages, self.format)?;
        let compactor = self.for_input(&input);
        let done = detach(py, || {
            compactor
                .compact(&input.history.messages, &summarizer)
                .map(Owned::new)
        });
        self.counter.check()?;
        into_py(done.py(py)?, py, input)
    }

    /// The async compaction as a step Python drives (see `compact_async`).
    fn _begin_compact(&self, py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Step> {
        let input = read(py, messages, self.format)?;
        let compactor = self.for_input(&input);
        let counter = self.counter.clone();
        let future = async move {
            let owned = compactor
                .compact_async(&input.history.messages, &Bridge)
                .await
                .map(Owned::new)?;
            let finish: Finish = Box::new(move |py: Python<'_>| {
                counter.check()?;
                Ok(into_py(owned, py, input)?.into_pyobject(py)?.into_any().unbind())
            });
            Ok(finish)
        };
        Ok(Step::new(Box::pin(future)))
    }
}
