//! The memories under `RollingMemory` and `TieredMemory` (see `index.js`):
//! the rolling memory's adds and the tiered memory's worker are the core's
//! [`Stepped`] operations, which JavaScript drives, awaiting its summarizer
//! between the fold's steps. State is the crate's JSON (rollmem's), as text.

use std::sync::{Arc, Mutex, MutexGuard};

use chatfold::memory::{
    AsyncRemember as _, AsyncRollingMemory, Memory as _, Settings, State, TieredMemory, TieredSettings,
};
use chatfold::summarize::{Bridge, Stepped};
use chatfold::{FoldPolicy, History, Message, NamedCounter};
use napi_derive::napi;
use serde_json::json;

use crate::{NativeStep, OrJs};

/// The options of both memories, as `index.js` passes them.
#[napi(object)]
pub struct MemoryOptions {
    pub tokenizer: Option<String>,
    pub low_water: Option<u32>,
    pub max_summary_tokens: Option<u32>,
    pub ledger: Option<bool>,
    pub summary_prefix: Option<String>,
    pub chunk_size: Option<u32>,
    pub chunk_tokens: Option<u32>,
    pub fallback_truncate: Option<bool>,
    pub max_failures: Option<u32>,
    /// JSON text: the state to restore.
    pub state: Option<String>,
    /// JSON text: the pinned system messages of a tiered memory.
    pub system: Option<String>,
    /// The messages every fold leaves in the buffer, by name (`first-user`).
    pub pin: Option<String>,
}

struct Read {
    counter: NamedCounter,
    policy: FoldPolicy,
    state: State,
    pins: Vec<chatfold::Pin>,
}

fn read(o: &MemoryOptions) -> napi::Result<Read> {
    let counter: NamedCounter = o.tokenizer.as_deref().unwrap_or("o200k_base").parse().js()?;
    let mut policy = FoldPolicy::new().ledger(o.ledger.unwrap_or(true));
    if let Some(prefix) = &o.summary_prefix {
        policy = policy.summary_prefix(prefix.clone());
    }
    if let Some(n) = o.max_summary_tokens {
        policy = policy.max_summary_tokens(n as usize);
    }
    let state = match &o.state {
        Some(text) => State::from_json_str(text).js()?,
        None => State::default(),
    };
    let pins = chatfold::Pin::parse_list(o.pin.as_deref().unwrap_or_default())
        .map_err(chatfold::Error::InvalidConfig)
        .js()?;
    Ok(Read {
        counter,
        policy,
        state,
        pins,
    })
}

/// One message from its JSON text.
fn message(json: &str) -> napi::Result<Message> {
    let mut history = History::from_json_str(&format!("[{json}]")).js()?;
    Ok(history.messages.remove(0))
}

/// Messages as JSON text.
fn messages(list: &[Message]) -> String {
    serde_json::Value::Array(list.iter().map(Message::to_json).collect()).to_string()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The rolling memory: recent turns verbatim, older ones folded into a
/// running summary once the buffer passes `maxTokens`.
#[napi]
pub struct NativeRollingMemory(Arc<AsyncRollingMemory<Bridge, NamedCounter>>);

#[napi]
impl NativeRollingMemory {
    #[napi(constructor)]
    pub fn new(max_tokens: u32, options: MemoryOptions) -> napi::Result<Self> {
        let r = read(&options)?;
        let mut settings = Settings::new(max_tokens as usize)
            .summarizer(Bridge)
            .counter(r.counter)
            .policy(r.policy);
        if let Some(low) = options.low_water {
            settings = settings.low_water(low as usize);
        }
        settings.pins = r.pins;
        Ok(NativeRollingMemory(Arc::new(
            AsyncRollingMemory::from_state(r.state, settings).js()?,
        )))
    }

    /// Adds a message (JSON text): the operation JavaScript drives.
    #[napi]
    pub fn begin_add(&self, message: String) -> napi::Result<NativeStep> {
        let message = self::message(&message)?;
        let memory = Arc::clone(&self.0);
        Ok(NativeStep(Arc::new(Stepped::new(Box::pin(async move {
            memory.add_message(message).await?;
            Ok(String::from("null"))
        })))))
    }

    /// Forgets the summary and the buffer; a fold in flight is discarded.
    #[napi]
    pub fn clear(&self) {
        self.0.clear();
    }

    /// The summary (as a system turn) then the buffer, as JSON text.
    #[napi]
    pub fn messages(&self) -> String {
        messages(&self.0.messages())
    }

    /// The running summary.
    #[napi]
    pub fn summary(&self) -> String {
        self.0.summary().into_owned()
    }

    /// The messages kept verbatim, as JSON text.
    #[napi]
    pub fn buffer(&self) -> String {
        messages(&self.0.buffer())
    }

    /// The state (rollmem's JSON) as text.
    #[napi]
    pub fn state(&self) -> String {
        self.0.to_state().to_json().to_string()
    }
}

/// The tiered memory: adds only append; its worker, which JavaScript drives
/// on the event loop, folds in the background; the prompt stays within the
/// hard limit.
#[napi]
pub struct NativeTieredMemory {
    inner: Arc<TieredMemory<Bridge, NamedCounter>>,
    worker: Mutex<Option<NativeStep>>,
}

#[napi]
impl NativeTieredMemory {
    #[napi(constructor)]
    pub fn new(soft_limit: u32, hard_limit: u32, options: MemoryOptions) -> napi::Result<Self> {
        let mut r = read(&options)?;
        if let Some(system) = &options.system {
            r.state
                .system
                .extend(History::from_json_str(system).js()?.messages);
        }
        let mut settings = TieredSettings::new(soft_limit as usize, hard_limit as usize)
            .fallback_truncate(options.fallback_truncate.unwrap_or(false))
            .policy(r.policy)
            .counter(r.counter);
        if let Some(n) = options.chunk_size {
            settings = settings.chunk_size(n as usize);
        }
        if let Some(low) = options.low_water {
            settings = settings.low_water(low as usize);
        }
        if let Some(n) = options.chunk_tokens {
            settings = settings.chunk_tokens(n as usize);
        }
        if let Some(n) = options.max_failures {
            settings = settings.max_failures(n as usize);
        }
        settings.options.pins = r.pins;
        let (memory, worker) = TieredMemory::from_state(r.state, settings, Bridge).js()?;
        let step = Stepped::new(Box::pin(async move {
            worker.await;
            Ok(String::from("null"))
        }));
        Ok(NativeTieredMemory {
            inner: Arc::new(memory),
            worker: Mutex::new(Some(NativeStep(Arc::new(step)))),
        })
    }

    /// The worker (once): JavaScript drives it.
    #[napi]
    pub fn take_worker(&self) -> Option<NativeStep> {
        lock(&self.worker).take()
    }

    /// Folds what is due now: an operation JavaScript drives.
    #[napi]
    pub fn begin_fold_now(&self) -> NativeStep {
        let memory = Arc::clone(&self.inner);
        NativeStep(Arc::new(Stepped::new(Box::pin(async move {
            memory.fold_now().await?;
            Ok(String::from("null"))
        }))))
    }

    /// Adds a message (JSON text); never waits for a summarizer.
    #[napi]
    pub fn add(&self, message: String) -> napi::Result<()> {
        self.inner.add_message(self::message(&message)?);
        Ok(())
    }

    /// Forgets the summary and the buffer (the pinned system messages stay).
    #[napi]
    pub fn clear(&self) {
        self.inner.clear();
    }

    /// The prompt as JSON text: pinned system messages, the summary, the
    /// recent turns, never more than the hard limit.
    #[napi]
    pub fn messages(&self) -> String {
        messages(&self.inner.messages())
    }

    /// The running summary.
    #[napi]
    pub fn summary(&self) -> String {
        self.inner.summary().into_owned()
    }

    /// The working buffer, as JSON text.
    #[napi]
    pub fn buffer(&self) -> String {
        messages(&self.inner.buffer())
    }

    /// Tokens per tier, folds done, failed and pending, the last error, as JSON text.
    #[napi]
    pub fn stats(&self) -> String {
        let s = self.inner.stats();
        json!({
            "systemTokens": s.system_tokens,
            "summaryTokens": s.summary_tokens,
            "bufferTokens": s.buffer_tokens,
            "bufferMessages": s.buffer_messages,
            "viewTokens": s.view_tokens,
            "hiddenMessages": s.hidden_messages,
            "foldsDone": s.folds_done,
            "foldsFailed": s.folds_failed,
            "consecutiveFailures": s.consecutive_failures,
            "foldsPending": s.folds_pending,
            "foldInFlight": s.fold_in_flight,
            "messagesFolded": s.messages_folded,
            "messagesDropped": s.messages_dropped,
            "resultsCleared": s.results_cleared,
            "lastError": s.last_error,
        })
        .to_string()
    }

    /// The state (rollmem's JSON, with the pinned `system` messages) as text.
    #[napi]
    pub fn state(&self) -> String {
        self.inner.to_state().to_json().to_string()
    }
}
