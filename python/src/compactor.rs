//! `chatfold.Compactor`: the stateless compactor over Python messages.

use std::sync::Arc;

use chatfold::{Aim, Compactor, Format, History, Measure, Message, Pin, Recipe, View};
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
use crate::sync::Sync;
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
    let pairs = crate::lazy::pairs(list.py(), &items)?;
    Ok(Some(pairs.as_slice().messages()))
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
    /// The caller's pin predicates, called with each message dict.
    predicates: Vec<Py<PyAny>>,
}

impl PyCompactor {
    /// Whether a plain list may be compacted in place (see `lazy`; the
    /// core decides the rest): no format forced, a built-in counter, no
    /// pin predicate (its pins are found over the messages read whole).
    fn lazy_applies(&self) -> bool {
        self.format.is_none() && !self.counter.0.calls_python() && self.predicates.is_empty()
    }

    /// The compactor for `input` (its summary placed for its format), with
    /// the messages the caller's predicates pin.
    fn for_input(&self, py: Python<'_>, input: &Input) -> PyResult<Compactor<Shared>> {
        let mut c = self.inner.clone();
        c.policy.placement = input.history.placement();
        if !self.predicates.is_empty() {
            for (i, m) in input.history.messages.iter().enumerate() {
                let message = json::to_py(py, &m.to_json())?;
                for f in &self.predicates {
                    if f.bind(py).call1((&message,))?.is_truthy()? {
                        c.pins.push(Pin::Index(i));
                        break;
                    }
                }
            }
        }
        Ok(c)
    }
}

/// The summaries a compactor with `reuse` keeps: at most this many...
const REUSE_ENTRIES: usize = 256;
/// ...and this many bytes of them.
const REUSE_BYTES: usize = 32 << 20;

/// The `pin` option read: names (`"first-user,last-user"`), indices, and
/// predicates (callables), alone or in a list.
fn pins(pin: Option<&Bound<'_, PyAny>>) -> PyResult<(Vec<Pin>, Vec<Py<PyAny>>)> {
    let Some(pin) = pin.filter(|p| !p.is_none()) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let items: Vec<Bound<'_, PyAny>> = match pin.cast::<PyList>() {
        Ok(list) => list.iter().collect(),
        Err(_) => vec![pin.clone()],
    };
    let (mut named, mut predicates) = (Vec::new(), Vec::new());
    let py = pin.py();
    let bad = |what: &Bound<'_, PyAny>| {
        let why = "a pin is \"first-user\", \"last-user\", an index or a callable";
        not_allowed(py, "pin", what.to_string(), why)
    };
    for item in items {
        if let Ok(text) = item.extract::<String>() {
            let parsed = Pin::parse_list(&text)
                .map_err(|e| crate::errors::to_py(py, chatfold::Error::InvalidConfig(e)))?;
            named.extend(parsed);
        } else if item.is_instance_of::<pyo3::types::PyBool>() {
            return Err(bad(&item));
        } else if let Ok(i) = item.extract::<usize>() {
            named.push(Pin::Index(i));
        } else if item.is_callable() {
            predicates.push(item.unbind());
        } else {
            return Err(bad(&item));
        }
    }
    Ok((named, predicates))
}

/// A framework's size, `("tokens", n)`, `("messages", n)` or `("fraction", f)`.
fn measure(py: Python<'_>, (kind, value): (String, f64)) -> PyResult<Measure> {
    let whole = |v: f64| (v >= 0.0 && v.fract() == 0.0).then_some(v as usize);
    match (kind.as_str(), whole(value)) {
        ("tokens", Some(n)) => Ok(Measure::Tokens(n)),
        ("messages", Some(n)) => Ok(Measure::Messages(n)),
        ("fraction", _) => Ok(Measure::Fraction(value)),
        _ => Err(not_allowed(
            py,
            "measure",
            format!("({kind:?}, {value})"),
            "a size is (\"tokens\", n), (\"messages\", n) or (\"fraction\", f)",
        )),
    }
}

/// `InvalidConfig` for `setting`, which cannot be `value`.
fn not_allowed(py: Python<'_>, setting: &'static str, value: String, why: &'static str) -> PyErr {
    let e = chatfold::error::ConfigError::NotAllowed { setting, value, why };
    crate::errors::to_py(py, chatfold::Error::InvalidConfig(e))
}

/// What a budget recipe makes of one request (`Compactor.aim`): the limit
/// the caller's measure must find the result under, the budget and
/// `keep_recent` of this try, and the next try's.
#[pyclass(module = "chatfold._chatfold", name = "Aim")]
pub struct PyAim {
    aim: Aim,
    base: Compactor<Shared>,
    counter: Shared,
    format: Option<Format>,
}

#[pymethods]
impl PyAim {
    /// The caller's limit (`None` when only a message count triggers).
    #[getter]
    fn limit(&self) -> Option<usize> {
        self.aim.limit
    }

    /// This try's budget.
    #[getter]
    fn budget(&self) -> usize {
        self.aim.budget
    }

    /// This try's `keep_recent`.
    #[getter]
    fn keep_recent(&self) -> usize {
        self.aim.keep_recent
    }

    /// The compactor of this try (the base's settings, folding to the budget).
    fn compactor(&self) -> PyCompactor {
        PyCompactor {
            inner: self.aim.compactor(&self.base),
            counter: self.counter.clone(),
            format: self.format,
            predicates: Vec::new(),
        }
    }

    /// The next try's budget after a result the caller measured at
    /// `measured`; `None` when done.
    fn next(&mut self, measured: usize) -> Option<usize> {
        self.aim.next(measured)
    }
}

#[pymethods]
impl PyCompactor {
    #[new]
    #[pyo3(signature = (budget, keep_recent=None, *, tokenizer=None, format=None, strict=false,
        summary_role=None, summary_prefix=None, min_summary_tokens=None, max_summary_tokens=None,
        ledger=true, max_fold_input_tokens=None, counting="chat", budget_as_trigger=false,
        allow_response_role=false, fold_to=None, pin=None, reuse=false, redis=None, namespace=None))]
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
        pin: Option<&Bound<'_, PyAny>>,
        reuse: bool,
        redis: Option<String>,
        namespace: Option<String>,
    ) -> PyResult<Self> {
        let (named, predicates) = pins(pin)?;
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
        inner.pins = named;
        // Summaries kept for the next compaction of the same history: in
        // this process, or in Redis for every process that shares it.
        let namespace = namespace.unwrap_or_else(|| "chatfold-python".to_owned());
        if let Some(url) = redis {
            let cache = chatfold::cache::RedisCache::new(&url).py(py)?;
            inner = inner.cache(Arc::new(cache), namespace);
        } else if reuse {
            let cache = chatfold::cache::MemoryCache::new(REUSE_ENTRIES, REUSE_BYTES);
            inner = inner.cache(Arc::new(cache), namespace);
        }
        // Checked now, so a bad setting fails at construction.
        inner.check().py(py)?;
        Ok(PyCompactor {
            inner,
            counter,
            format: parse_format(format)?,
            predicates,
        })
    }

    /// What a framework's summarization settings make of a request of
    /// `messages` (see the crate's `Compactor::aim`): `keep` and each of
    /// `trigger` as `("tokens", n)`, `("messages", n)` or `("fraction", f)`
    /// (of `window`); `measured`: the caller's count of the request and of
    /// the request with no messages.
    #[pyo3(signature = (messages, *, keep, measured, trigger=Vec::new(), window=None, max_summary_tokens=None))]
    #[allow(clippy::too_many_arguments)]
    fn aim(
        &self,
        py: Python<'_>,
        messages: &Bound<'_, PyAny>,
        keep: (String, f64),
        measured: (usize, usize),
        trigger: Vec<(String, f64)>,
        window: Option<usize>,
        max_summary_tokens: Option<usize>,
    ) -> PyResult<PyAim> {
        let mut recipe = Recipe::new(measure(py, keep)?);
        for t in trigger {
            recipe = recipe.trigger(measure(py, t)?);
        }
        recipe.window = window;
        recipe.max_summary_tokens = max_summary_tokens;
        let input = read(py, messages, self.format)?;
        let aim = detach(py, || self.inner.aim(&recipe, &input.history.messages, measured));
        self.counter.check()?;
        Ok(PyAim {
            aim: aim.py(py)?,
            base: self.inner.clone(),
            counter: self.counter.clone(),
            format: self.format,
        })
    }

    /// The budget in tokens.
    #[getter]
    fn budget(&self) -> usize {
        self.inner.budget
    }

    /// Tokens of recent turns kept verbatim (the default: a quarter of the fold target).
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
        let compactor = self.for_input(py, &input)?;
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
        let compactor = self.for_input(py, &input)?;
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
