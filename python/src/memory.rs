//! The memories: sync ones behind a lock (taken with the GIL released, so a
//! Python summarizer called under it can take the GIL), async ones and the
//! tiered memory stepped from Python (see `step`).

use std::sync::{Arc, Mutex, MutexGuard};

use chatfold::memory::{
    AsyncRemember, AsyncRollingMemory, AsyncSummaryMemory, BufferMemory, Memory as _, Remember,
    RollingMemory, Settings, State, SummaryMemory, TieredMemory, TieredSettings, WindowMemory,
};
use chatfold::{FoldPolicy, History, Message};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;

use crate::counter::{Counter, Mode, Shared};
use crate::errors::IntoPy;
use crate::fork::detach;
use crate::json;
use crate::policy;
use crate::step::{Finish, Step};
use crate::sync::Sync;
use chatfold::summarize::Bridge;

/// One message dict as a message.
pub fn message(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Message> {
    let value = json::to_value(obj, &mut String::from("message"))?;
    let mut history = History::from_json_value(Value::Array(vec![value])).py(py)?;
    Ok(history.messages.remove(0))
}

fn state(py: Python<'_>, obj: Option<&Bound<'_, PyAny>>) -> PyResult<State> {
    match obj {
        None => Ok(State::default()),
        Some(o) if o.is_none() => Ok(State::default()),
        Some(o) => State::from_json(json::to_value(o, &mut String::from("state"))?).py(py),
    }
}

fn messages<'py>(py: Python<'py>, list: &[Message]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for m in list {
        out.append(json::to_py(py, &m.to_json())?)?;
    }
    Ok(out)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn fold_policy(
    role: Option<String>,
    prefix: Option<String>,
    max: Option<usize>,
    ledger: bool,
    allow_empty_summary: bool,
) -> FoldPolicy {
    policy::build(role, prefix, None, max, ledger).allow_empty_summary(allow_empty_summary)
}

enum Kind {
    Rolling(RollingMemory<Sync, Shared>),
    Buffer(BufferMemory),
    Window(WindowMemory),
    Summary(SummaryMemory<Sync, Shared>),
}

macro_rules! each {
    ($kind:expr, $m:ident => $body:expr) => {
        match $kind {
            Kind::Rolling($m) => $body,
            Kind::Buffer($m) => $body,
            Kind::Window($m) => $body,
            Kind::Summary($m) => $body,
        }
    };
}

/// A synchronous memory (rolling, buffer, window or summary).
#[pyclass(module = "chatfold._chatfold", frozen)]
pub struct SyncMemory {
    inner: Mutex<Kind>,
    counter: Shared,
}

/// The `pin` option: names, comma-separated (`"first-user"`).
fn pins(py: Python<'_>, pin: Option<&str>) -> PyResult<Vec<chatfold::Pin>> {
    chatfold::Pin::parse_list(pin.unwrap_or_default())
        .map_err(|e| crate::errors::to_py(py, chatfold::Error::InvalidConfig(e)))
}

#[pymethods]
impl SyncMemory {
    #[new]
    #[pyo3(signature = (kind, *, max_tokens=2000, max_messages=20, summarize=None, tokenizer=None, counting="chat",
        low_water=None, max_summary_tokens=None, ledger=true, summary_role=None, summary_prefix=None, state=None,
        allow_empty_summary=false, pin=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        kind: &str,
        max_tokens: usize,
        max_messages: usize,
        summarize: Option<&Bound<'_, PyAny>>,
        tokenizer: Option<&Bound<'_, PyAny>>,
        counting: &str,
        low_water: Option<usize>,
        max_summary_tokens: Option<usize>,
        ledger: bool,
        summary_role: Option<String>,
        summary_prefix: Option<String>,
        state: Option<&Bound<'_, PyAny>>,
        allow_empty_summary: bool,
        pin: Option<&str>,
    ) -> PyResult<Self> {
        let pins = pins(py, pin)?;
        let counter = Shared(Arc::new(Counter::from_py(py, tokenizer, Mode::parse(counting)?)?));
        let policy = fold_policy(
            summary_role,
            summary_prefix,
            max_summary_tokens,
            ledger,
            allow_empty_summary,
        );
        let restored = self::state(py, state)?;
        let inner = match kind {
            "rolling" => {
                let mut settings = Settings::new(max_tokens)
                    .summarizer(Sync::from_py(summarize)?)
                    .counter(counter.clone())
                    .policy(policy);
                if summarize.is_none_or(|s| s.is_none()) {
                    settings.summarizer = None;
                }
                if let Some(low) = low_water {
                    settings = settings.low_water(low);
                }
                settings.pins = pins;
                Kind::Rolling(detach(py, move || RollingMemory::from_state(restored, settings)).py(py)?)
            }
            "buffer" => Kind::Buffer(BufferMemory::from_state(restored)),
            "window" => Kind::Window(WindowMemory::from_state(restored, max_messages).py(py)?),
            "summary" => {
                let summarizer = Sync::from_py(summarize)?;
                let memory = SummaryMemory::from_state(restored, summarizer)
                    .policy(policy)
                    .counter(counter.clone());
                Kind::Summary(memory)
            }
            other => return Err(PyValueError::new_err(format!("unknown memory kind {other:?}"))),
        };
        // A Python tokenizer's exception while the restored buffer was counted.
        counter.check()?;
        Ok(SyncMemory {
            inner: Mutex::new(inner),
            counter,
        })
    }

    /// Adds a message dict.
    fn add_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let message = self::message(py, message)?;
        let done = detach(py, || each!(&mut *lock(&self.inner), m => m.add_message(message)));
        self.counter.check()?;
        done.py(py)
    }

    /// Forgets the summary and the buffer.
    fn clear(&self, py: Python<'_>) {
        detach(py, || each!(&mut *lock(&self.inner), m => m.clear()));
    }

    /// The summary (as a system turn) then the buffer, as dicts.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = detach(py, || each!(&*lock(&self.inner), m => m.messages()));
        messages(py, &list)
    }

    /// `messages()` as one string of `role: content` lines.
    fn context(&self, py: Python<'_>) -> String {
        detach(py, || each!(&*lock(&self.inner), m => m.context()))
    }

    /// The running summary (`""`: none).
    #[getter]
    fn summary(&self, py: Python<'_>) -> String {
        detach(py, || each!(&*lock(&self.inner), m => m.summary().into_owned()))
    }

    /// The messages kept verbatim, as dicts.
    #[getter]
    fn buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = detach(py, || each!(&*lock(&self.inner), m => m.buffer().into_owned()));
        messages(py, &list)
    }

    /// Tokens in the buffer (rolling memories; 0 for the others).
    #[getter]
    fn buffer_tokens(&self, py: Python<'_>) -> usize {
        detach(py, || match &*lock(&self.inner) {
            Kind::Rolling(m) => m.buffer_tokens(),
            _ => 0,
        })
    }

    /// The state, rollmem's JSON as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = detach(py, || each!(&*lock(&self.inner), m => m.to_state()));
        json::to_py(py, &state.to_json())
    }
}

enum AsyncKind {
    Rolling(AsyncRollingMemory<Bridge, Shared>),
    Summary(AsyncSummaryMemory<Bridge, Shared>),
}

/// An async memory (rolling or summary): adds are steps Python drives,
/// awaiting the summarizer between the fold's steps.
#[pyclass(module = "chatfold._chatfold", frozen)]
pub struct AsyncMemory {
    inner: Arc<AsyncKind>,
    counter: Shared,
}

macro_rules! each_async {
    ($kind:expr, $m:ident => $body:expr) => {
        match $kind {
            AsyncKind::Rolling($m) => $body,
            AsyncKind::Summary($m) => $body,
        }
    };
}

#[pymethods]
impl AsyncMemory {
    #[new]
    #[pyo3(signature = (kind, *, max_tokens=2000, summarizes=true, tokenizer=None, counting="chat",
        low_water=None, max_summary_tokens=None, ledger=true, summary_role=None, summary_prefix=None, state=None,
        allow_empty_summary=false, pin=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        kind: &str,
        max_tokens: usize,
        summarizes: bool,
        tokenizer: Option<&Bound<'_, PyAny>>,
        counting: &str,
        low_water: Option<usize>,
        max_summary_tokens: Option<usize>,
        ledger: bool,
        summary_role: Option<String>,
        summary_prefix: Option<String>,
        state: Option<&Bound<'_, PyAny>>,
        allow_empty_summary: bool,
        pin: Option<&str>,
    ) -> PyResult<Self> {
        let pins = pins(py, pin)?;
        let counter = Shared(Arc::new(Counter::from_py(py, tokenizer, Mode::parse(counting)?)?));
        let policy = fold_policy(
            summary_role,
            summary_prefix,
            max_summary_tokens,
            ledger,
            allow_empty_summary,
        );
        let restored = self::state(py, state)?;
        let inner = match kind {
            "rolling" => {
                let mut settings = Settings::new(max_tokens)
                    .summarizer(Bridge)
                    .counter(counter.clone())
                    .policy(policy);
                if !summarizes {
                    settings.summarizer = None;
                }
                if let Some(low) = low_water {
                    settings = settings.low_water(low);
                }
                settings.pins = pins;
                AsyncKind::Rolling(detach(py, || AsyncRollingMemory::from_state(restored, settings)).py(py)?)
            }
            "summary" => AsyncKind::Summary(
                AsyncSummaryMemory::from_state(restored, Bridge)
                    .policy(policy)
                    .counter(counter.clone()),
            ),
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown async memory kind {other:?}"
                )));
            }
        };
        counter.check()?;
        Ok(AsyncMemory {
            inner: Arc::new(inner),
            counter,
        })
    }

    /// Starts adding a message dict: the step Python drives.
    fn _begin_add(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<Step> {
        let message = self::message(py, message)?;
        let memory = Arc::clone(&self.inner);
        let counter = self.counter.clone();
        let future = async move {
            each_async!(&*memory, m => m.add_message(message).await)?;
            let finish: Finish = Box::new(move |py: Python<'_>| {
                counter.check()?;
                Ok(py.None())
            });
            Ok(finish)
        };
        Ok(Step::new(Box::pin(future)))
    }

    /// Forgets the summary and the buffer; a fold in flight is discarded.
    fn clear(&self) {
        each_async!(&*self.inner, m => m.clear());
    }

    /// The summary (as a system turn) then the buffer, as dicts.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = each_async!(&*self.inner, m => m.messages());
        messages(py, &list)
    }

    /// `messages()` as one string of `role: content` lines.
    fn context(&self) -> String {
        each_async!(&*self.inner, m => m.context())
    }

    /// The running summary.
    #[getter]
    fn summary(&self) -> String {
        each_async!(&*self.inner, m => m.summary().into_owned())
    }

    /// The messages kept verbatim, as dicts.
    #[getter]
    fn buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = each_async!(&*self.inner, m => m.buffer().into_owned());
        messages(py, &list)
    }

    /// The state, rollmem's JSON as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = each_async!(&*self.inner, m => m.to_state());
        json::to_py(py, &state.to_json())
    }
}

/// The tiered memory: adds only append; its worker (a step an asyncio task
/// drives) folds in the background; the prompt stays within the hard limit.
#[pyclass(module = "chatfold._chatfold", frozen)]
pub struct Tiered {
    inner: Arc<TieredMemory<Bridge, Shared>>,
    worker: Mutex<Option<Step>>,
    counter: Shared,
}

#[pymethods]
impl Tiered {
    #[new]
    #[pyo3(signature = (soft_limit, hard_limit, *, system=None, tokenizer=None, low_water=None, chunk_size=None, chunk_tokens=None,
        fallback_truncate=false, max_failures=3, max_summary_tokens=None, ledger=true, summary_prefix=None, state=None,
        allow_empty_summary=false, pin=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        soft_limit: usize,
        hard_limit: usize,
        system: Option<&Bound<'_, PyAny>>,
        tokenizer: Option<&Bound<'_, PyAny>>,
        low_water: Option<usize>,
        chunk_size: Option<usize>,
        chunk_tokens: Option<usize>,
        fallback_truncate: bool,
        max_failures: usize,
        max_summary_tokens: Option<usize>,
        ledger: bool,
        summary_prefix: Option<String>,
        state: Option<&Bound<'_, PyAny>>,
        allow_empty_summary: bool,
        pin: Option<&str>,
    ) -> PyResult<Self> {
        let pins = pins(py, pin)?;
        let counter = Shared(Arc::new(Counter::from_py(py, tokenizer, Mode::Chat)?));
        let mut restored = self::state(py, state)?;
        if let Some(list) = system.filter(|s| !s.is_none()) {
            for item in list.try_iter()? {
                restored.system.push(message(py, &item?)?);
            }
        }
        let mut settings = TieredSettings::new(soft_limit, hard_limit)
            .fallback_truncate(fallback_truncate)
            .max_failures(max_failures)
            .policy(fold_policy(
                None,
                summary_prefix,
                max_summary_tokens,
                ledger,
                allow_empty_summary,
            ))
            .counter(counter.clone());
        if let Some(t) = chunk_tokens {
            settings = settings.chunk_tokens(t);
        }
        if let Some(n) = chunk_size {
            settings = settings.chunk_size(n);
        }
        if let Some(low) = low_water {
            settings = settings.low_water(low);
        }
        settings.options.pins = pins;
        let (memory, worker) = detach(py, || TieredMemory::from_state(restored, settings, Bridge)).py(py)?;
        counter.check()?;
        let future = async move {
            worker.await;
            let finish: Finish = Box::new(|py: Python<'_>| Ok(py.None()));
            Ok(finish)
        };
        Ok(Tiered {
            inner: Arc::new(memory),
            worker: Mutex::new(Some(Step::new(Box::pin(future)))),
            counter,
        })
    }

    /// The worker's step (once): an asyncio task drives it.
    fn _take_worker(&self) -> Option<Step> {
        lock(&self.worker).take()
    }

    /// Folds what is due now, as a step Python drives (see `fold_now`).
    fn _begin_fold_now(&self) -> Step {
        let memory = Arc::clone(&self.inner);
        let future = async move {
            memory.fold_now().await?;
            let finish: Finish = Box::new(|py: Python<'_>| Ok(py.None()));
            Ok(finish)
        };
        Step::new(Box::pin(future))
    }

    /// Adds a message dict; never waits for a summarizer.
    fn add_message(&self, py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let message = self::message(py, message)?;
        self.inner.add_message(message);
        self.counter.check()
    }

    /// Forgets the summary and the buffer (the pinned system messages stay).
    fn clear(&self) {
        self.inner.clear();
    }

    /// The prompt: pinned system messages, the summary, the recent turns,
    /// never more than the hard limit.
    fn messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = detach(py, || self.inner.messages());
        messages(py, &list)
    }

    /// `messages()` as one string of `role: content` lines.
    fn context(&self, py: Python<'_>) -> String {
        detach(py, || self.inner.context())
    }

    /// The running summary.
    #[getter]
    fn summary(&self) -> String {
        self.inner.summary().into_owned()
    }

    /// The working buffer, as dicts.
    #[getter]
    fn buffer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = self.inner.buffer().into_owned();
        messages(py, &list)
    }

    /// Tokens per tier, folds done, failed and pending, messages dropped, the last error.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("system_tokens", s.system_tokens)?;
        d.set_item("summary_tokens", s.summary_tokens)?;
        d.set_item("buffer_tokens", s.buffer_tokens)?;
        d.set_item("buffer_messages", s.buffer_messages)?;
        d.set_item("view_tokens", s.view_tokens)?;
        d.set_item("hidden_messages", s.hidden_messages)?;
        d.set_item("folds_done", s.folds_done)?;
        d.set_item("folds_failed", s.folds_failed)?;
        d.set_item("consecutive_failures", s.consecutive_failures)?;
        d.set_item("folds_pending", s.folds_pending)?;
        d.set_item("fold_in_flight", s.fold_in_flight)?;
        d.set_item("messages_folded", s.messages_folded)?;
        d.set_item("messages_dropped", s.messages_dropped)?;
        d.set_item("results_cleared", s.results_cleared)?;
        d.set_item("last_error", s.last_error)?;
        Ok(d)
    }

    /// The state, rollmem's JSON (with the pinned `system` messages) as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json::to_py(py, &self.inner.to_state().to_json())
    }
}
