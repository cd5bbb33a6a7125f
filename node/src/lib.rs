//! The native half of the `chatfold` npm package: chatfold's compactor over
//! Node-API. JavaScript's half (`index.js`) gives it the package's API:
//! camelCase, promises, `Error` subclasses. Messages and results cross as
//! JSON text (V8 parses and writes it faster than it builds objects through
//! Node-API; the core reads it into its `History` and writes it back in the
//! shape it came in); a summarizer written in JavaScript answers through the core's
//! [`Stepped`] operations, polled on the JavaScript thread (`poll`) or on
//! libuv's thread pool (`pollAsync`), so large histories are read and
//! planned off the JavaScript thread.

use std::sync::Arc;

mod local;
mod memory;

use chatfold::summarize::{Bridge, Named, Polled, Prompt, Stepped, SummarizerSpec};
use chatfold::{
    Aim, Compaction, Compactor, Error, Fate, Format, History, Measure, NamedCounter, Pin, Prefix, Recipe,
    Summarizer, SummaryRequest,
};
use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::{Value, json};

/// A chatfold error as a JavaScript error: its reason is `chatfold:` and a
/// JSON object (`kind`, `message`, and `index`, `field` where the error has
/// them), which `index.js` turns into the matching `Error` subclass.
fn js_error(error: Error) -> napi::Error {
    let mut info = json!({ "kind": kind(&error), "message": error.to_string() });
    if let Error::InvalidMessage { index, problem } = &error {
        info["index"] = json!(index);
        info["field"] = json!(problem.field());
    }
    napi::Error::new(Status::GenericFailure, format!("chatfold:{info}"))
}

/// The JavaScript class name for `error`'s kind.
fn kind(error: &Error) -> &'static str {
    match error {
        // A tokenizer that cannot be had is a setting that cannot work.
        Error::InvalidConfig(_) | Error::Tokenizer(_) => "InvalidConfig",
        Error::InvalidMessage { .. } => "InvalidMessage",
        Error::InvalidInput(_) => "InvalidInput",
        Error::InvalidState(_) => "InvalidState",
        Error::Summarize(_) | Error::EmptySummary => "SummarizerError",
        Error::BudgetUnreachable { .. } | Error::PinnedOverBudget { .. } => "BudgetUnreachable",
        _ => "ChatfoldError",
    }
}

/// A chatfold result as Node-API's.
pub(crate) trait OrJs<T> {
    fn js(self) -> napi::Result<T>;
}

impl<T> OrJs<T> for chatfold::Result<T> {
    fn js(self) -> napi::Result<T> {
        self.map_err(js_error)
    }
}

/// The options of `new Compactor(budget, options)`, as `index.js` passes them.
#[napi(object)]
pub struct CompactorOptions {
    pub keep_recent: Option<u32>,
    pub fold_to: Option<u32>,
    pub tokenizer: Option<String>,
    pub format: Option<String>,
    pub strict: Option<bool>,
    pub summary_role: Option<String>,
    pub summary_prefix: Option<String>,
    pub min_summary_tokens: Option<u32>,
    pub max_summary_tokens: Option<u32>,
    pub ledger: Option<bool>,
    pub max_fold_input_tokens: Option<u32>,
    pub reuse: Option<bool>,
    /// Pins by name (`first-user,last-user,3`).
    pub pin: Option<String>,
}

/// A summarizer named from JavaScript: the built-in one, or an HTTP one
/// that runs in Rust (on the thread pool for `compactNamedAsync`).
#[napi(object)]
pub struct NamedSummarizer {
    /// `"extractive"`, `"openai"` or `"anthropic"`.
    pub kind: String,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
}

/// The library's summarizer `spec` names.
fn summarizer_named(given: NamedSummarizer) -> napi::Result<Named> {
    let mut spec = SummarizerSpec::new(given.kind);
    spec.base_url = given.base_url;
    spec.model = given.model;
    spec.api_key = given.api_key;
    Named::new(&spec).map_err(Error::InvalidConfig).js()
}

/// The summaries a compactor with `reuse` keeps: at most this many...
const REUSE_ENTRIES: usize = 256;
/// ...and this many bytes of them.
const REUSE_BYTES: usize = 32 << 20;

/// The compactor under `Compactor` (see `index.js`).
#[napi]
pub struct NativeCompactor {
    inner: Arc<Compactor<NamedCounter>>,
    format: Option<Format>,
}

/// A history read from JavaScript, with what is needed to write it back.
struct Input {
    history: History,
}

impl Input {
    fn read(json: &str, format: Option<Format>) -> chatfold::Result<Self> {
        let history = History::from_json_str(json)?;
        let history = match format {
            Some(f) => history.into_format(f)?,
            None => history,
        };
        Ok(Input { history })
    }

    /// The compactor for this input: its summary placed for its format,
    /// and the messages a caller's predicate pinned (their indices) beside
    /// its own pins.
    fn compactor(&self, c: &Compactor<NamedCounter>, pinned: Option<&[u32]>) -> Compactor<NamedCounter> {
        let mut c = c.clone();
        c.policy.placement = self.history.placement();
        let pinned = pinned.unwrap_or_default().iter().map(|&i| Pin::Index(i as usize));
        c.pins.extend(pinned);
        c
    }

    /// The result JavaScript gets, as JSON: `messages` null when nothing changed.
    fn result(&self, c: &Compaction<'_>) -> String {
        let changed = matches!(c.messages, std::borrow::Cow::Owned(_));
        let messages = if changed {
            self.history.to_json_with(&c.messages)
        } else {
            Value::Null
        };
        let r = &c.report;
        let fates: Vec<&str> = r
            .fates()
            .map(|f| match f {
                Fate::Kept => "kept",
                Fate::Hoisted => "hoisted",
                Fate::Folded => "folded",
                Fate::PreviousSummary => "previousSummary",
                Fate::Pinned => "pinned",
                _ => "other",
            })
            .collect();
        let value = json!({
            "messages": messages,
            "summarized": c.summarized,
            "tokensBefore": c.tokens_before.get(),
            "tokensBeforeExact": c.tokens_before.exact().is_some(),
            "tokensAfter": c.tokens_after,
            "overBudget": c.over_budget,
            "summaryTruncated": c.summary_truncated,
            "prefixTokens": c.prefix_tokens,
            "report": {
                "fates": fates,
                "cut": r.cut(),
                "reason": format!("{:?}", r.reason()).to_lowercase(),
                "alignedFrom": r.aligned_from(),
                "folds": r.folds(),
                "allowance": r.allowance(),
                "proseAllowance": r.prose_allowance(),
                "ledger": r.ledger().iter().map(|e| e.as_str()).collect::<Vec<_>>(),
                "ledgerDropped": r.ledger_dropped().iter().map(|e| e.as_str()).collect::<Vec<_>>(),
                "cleared": r.cleared(),
                "reused": r.reused(),
                "prefix": match r.prefix() {
                    Prefix::Unchanged => "unchanged",
                    Prefix::Replayed => "replayed",
                    _ => "rewritten",
                },
            },
        });
        value.to_string()
    }
}

fn parse_format(format: Option<&str>) -> napi::Result<Option<Format>> {
    format.map(|f| f.parse::<Format>().js()).transpose()
}

#[napi]
impl NativeCompactor {
    /// A compactor of `budget` tokens.
    #[napi(constructor)]
    pub fn new(budget: u32, options: Option<CompactorOptions>) -> napi::Result<Self> {
        let o = options.unwrap_or(CompactorOptions {
            keep_recent: None,
            fold_to: None,
            tokenizer: None,
            format: None,
            strict: None,
            summary_role: None,
            summary_prefix: None,
            min_summary_tokens: None,
            max_summary_tokens: None,
            ledger: None,
            max_fold_input_tokens: None,
            reuse: None,
            pin: None,
        });
        let counter: NamedCounter = o.tokenizer.as_deref().unwrap_or("o200k_base").parse().js()?;
        let mut policy = chatfold::FoldPolicy::new().ledger(o.ledger.unwrap_or(true));
        if let Some(role) = o.summary_role {
            policy = policy.summary_role(role.as_str());
        }
        if let Some(prefix) = o.summary_prefix {
            policy = policy.summary_prefix(prefix);
        }
        if let Some(n) = o.min_summary_tokens {
            policy = policy.min_summary_tokens(n as usize);
        }
        if let Some(n) = o.max_summary_tokens {
            policy = policy.max_summary_tokens(n as usize);
        }
        let mut inner = Compactor::new(budget as usize)
            .counter(counter)
            .policy(policy)
            .strict(o.strict.unwrap_or(false));
        if let Some(k) = o.keep_recent {
            inner = inner.keep_recent(k as usize);
        }
        if let Some(n) = o.max_fold_input_tokens {
            inner = inner.max_fold_input_tokens(n as usize);
        }
        if let Some(n) = o.fold_to {
            inner = inner.fold_to(n as usize);
        }
        inner.pins = Pin::parse_list(o.pin.as_deref().unwrap_or_default())
            .map_err(chatfold::Error::InvalidConfig)
            .js()?;
        if o.reuse.unwrap_or(false) {
            // Summaries of a folded prefix, kept for the next compaction of
            // the same history (a client that resends its whole transcript).
            let cache = chatfold::cache::MemoryCache::new(REUSE_ENTRIES, REUSE_BYTES);
            inner = inner.cache(Arc::new(cache), "chatfold-node");
        }
        // Checked now, so a bad setting fails at construction.
        inner.check().js()?;
        Ok(NativeCompactor {
            inner: Arc::new(inner),
            format: parse_format(o.format.as_deref())?,
        })
    }

    /// The budget in tokens.
    #[napi(getter)]
    pub fn budget(&self) -> u32 {
        self.inner.budget as u32
    }

    /// Tokens of recent turns kept verbatim (the default: a quarter of the fold target).
    #[napi(getter)]
    pub fn keep_recent(&self) -> u32 {
        self.inner.effective_keep_recent() as u32
    }

    /// Where a history over the budget is folded down to (the default: half the budget).
    #[napi(getter)]
    pub fn fold_to(&self) -> u32 {
        self.inner.effective_fold_to() as u32
    }

    /// Tokens of `messages` as the budget measures them.
    #[napi]
    pub fn count(&self, messages: String) -> napi::Result<u32> {
        use chatfold::TokenCounter;
        let input = Input::read(&messages, self.format).js()?;
        Ok(self.inner.counter.count_messages(&input.history.messages) as u32)
    }

    /// Compacts `messages` with a named summarizer, here and now; `pinned`:
    /// the indices of messages a caller's predicate pinned.
    #[napi]
    pub fn compact_named(
        &self,
        messages: String,
        summarizer: NamedSummarizer,
        pinned: Option<Vec<u32>>,
    ) -> napi::Result<String> {
        let named = summarizer_named(summarizer)?;
        let input = Input::read(&messages, self.format).js()?;
        let compaction = input
            .compactor(&self.inner, pinned.as_deref())
            .compact(&input.history.messages, &named)
            .js()?;
        Ok(input.result(&compaction))
    }

    /// [`compact_named`](Self::compact_named) on the thread pool.
    #[napi]
    pub fn compact_named_async(
        &self,
        messages: String,
        summarizer: NamedSummarizer,
        pinned: Option<Vec<u32>>,
    ) -> napi::Result<AsyncTask<NamedTask>> {
        Ok(AsyncTask::new(NamedTask {
            compactor: self.inner.clone(),
            format: self.format,
            messages: Some(messages),
            named: Some(summarizer_named(summarizer)?),
            pinned,
        }))
    }

    /// A compaction whose summarizer JavaScript answers: stepped by `index.js`.
    #[napi]
    pub fn begin(&self, messages: String, pinned: Option<Vec<u32>>) -> NativeStep {
        let compactor = self.inner.clone();
        let format = self.format;
        let step = Stepped::new(Box::pin(async move {
            let input = Input::read(&messages, format)?;
            let compactor = input.compactor(&compactor, pinned.as_deref());
            let compaction = compactor.compact_async(&input.history.messages, &Bridge).await?;
            Ok(input.result(&compaction))
        }));
        NativeStep(Arc::new(step))
    }
}

/// A framework's size as the recipe's JSON says it: `["tokens", n]`,
/// `["messages", n]` or `["fraction", f]`.
fn measure(v: &Value) -> napi::Result<Measure> {
    let bad = || {
        let e = chatfold::error::ConfigError::NotAllowed {
            setting: "measure",
            value: v.to_string(),
            why: "a size is [\"tokens\", n], [\"messages\", n] or [\"fraction\", f]",
        };
        js_error(Error::InvalidConfig(e))
    };
    let whole = v[1].as_u64().map(|n| n as usize);
    match (v[0].as_str(), whole, v[1].as_f64()) {
        (Some("tokens"), Some(n), _) => Ok(Measure::Tokens(n)),
        (Some("messages"), Some(n), _) => Ok(Measure::Messages(n)),
        (Some("fraction"), _, Some(f)) => Ok(Measure::Fraction(f)),
        _ => Err(bad()),
    }
}

/// The recipe in `json`: `{"keep", "triggers", "window", "maxSummaryTokens"}`.
fn recipe(json: &str) -> napi::Result<Recipe> {
    let v: Value =
        serde_json::from_str(json).map_err(|e| napi::Error::from_reason(format!("recipe: {e}")))?;
    let mut recipe = Recipe::new(measure(&v["keep"])?);
    for t in v["triggers"].as_array().into_iter().flatten() {
        recipe = recipe.trigger(measure(t)?);
    }
    recipe.window = v["window"].as_u64().map(|w| w as usize);
    recipe.max_summary_tokens = v["maxSummaryTokens"].as_u64().map(|m| m as usize);
    Ok(recipe)
}

#[napi]
impl NativeCompactor {
    /// What a framework's trigger and keep (`recipe`, JSON) make of a request
    /// of `messages` the caller measured at `total` tokens, `fixed` of them
    /// outside the messages.
    #[napi]
    pub fn aim(
        &self,
        messages: String,
        recipe_json: String,
        total: u32,
        fixed: u32,
    ) -> napi::Result<NativeAim> {
        let recipe = recipe(&recipe_json)?;
        let input = Input::read(&messages, self.format).js()?;
        let aim = (self.inner)
            .aim(&recipe, &input.history.messages, (total as usize, fixed as usize))
            .js()?;
        Ok(NativeAim {
            aim,
            base: self.inner.clone(),
            format: self.format,
        })
    }
}

/// What a recipe makes of one request, and its next tries.
#[napi]
pub struct NativeAim {
    aim: Aim,
    base: Arc<Compactor<NamedCounter>>,
    format: Option<Format>,
}

#[napi]
impl NativeAim {
    /// The caller's limit (`null` when only a message count triggers).
    #[napi(getter)]
    pub fn limit(&self) -> Option<u32> {
        self.aim.limit.map(|l| l as u32)
    }

    /// This try's budget.
    #[napi(getter)]
    pub fn budget(&self) -> u32 {
        self.aim.budget as u32
    }

    /// This try's `keepRecent`.
    #[napi(getter)]
    pub fn keep_recent(&self) -> u32 {
        self.aim.keep_recent as u32
    }

    /// The next try's budget after a result measured at `measured`; `null` when done.
    #[napi]
    pub fn next(&mut self, measured: u32) -> Option<u32> {
        self.aim.next(measured as usize).map(|b| b as u32)
    }

    /// The compactor of this try (the base's settings, folding to the budget).
    #[napi]
    pub fn compactor(&self) -> NativeCompactor {
        NativeCompactor {
            inner: Arc::new(self.aim.compactor(&self.base)),
            format: self.format,
        }
    }
}

/// A named-summarizer compaction run on libuv's thread pool.
pub struct NamedTask {
    compactor: Arc<Compactor<NamedCounter>>,
    format: Option<Format>,
    messages: Option<String>,
    named: Option<Named>,
    pinned: Option<Vec<u32>>,
}

impl Task for NamedTask {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        let (Some(messages), Some(named)) = (self.messages.take(), self.named.take()) else {
            return Err(napi::Error::from_reason("a compaction task ran twice"));
        };
        let input = Input::read(&messages, self.format).js()?;
        let compaction = input
            .compactor(&self.compactor, self.pinned.as_deref())
            .compact(&input.history.messages, &named)
            .js()?;
        Ok(input.result(&compaction))
    }

    fn resolve(&mut self, _: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }
}

/// A request for JavaScript's summarizer, as JSON.
fn request_json(request: &SummaryRequest<'_>) -> String {
    let (system, user) = Prompt::default().render(request);
    json!({
        "previousSummary": request.previous_summary(),
        "messages": request.messages().map(|m| m.to_json()).collect::<Vec<_>>(),
        "transcript": request.transcript(),
        "allowance": request.allowance(),
        "ledger": request.ledger().iter().map(|e| e.as_str()).collect::<Vec<_>>(),
        "prompt": { "system": system, "user": user },
    })
    .to_string()
}

/// An operation in progress (a compaction, a memory's add, the tiered
/// worker), stepped from JavaScript; its outcome is JSON text.
#[napi]
pub struct NativeStep(pub(crate) Arc<Stepped<String>>);

fn polled(step: &Stepped<String>) -> Option<String> {
    match step.poll() {
        Polled::Asked(request) => Some(request_json(&request)),
        _ => None,
    }
}

#[napi]
impl NativeStep {
    /// Runs the compaction here until it finishes (`null`; see `done`) or
    /// its summarizer is asked (the request).
    #[napi]
    pub fn poll(&self) -> Option<String> {
        polled(&self.0)
    }

    /// [`poll`](Self::poll) on libuv's thread pool.
    #[napi]
    pub fn poll_async(&self) -> AsyncTask<PollTask> {
        AsyncTask::new(PollTask(self.0.clone()))
    }

    /// Whether the operation has finished (its `result` is ready).
    #[napi]
    pub fn done(&self) -> bool {
        self.0.is_done()
    }

    /// Whether the operation asked to be polled again since the last look
    /// (the tiered worker, woken by an add).
    #[napi]
    pub fn woken(&self) -> bool {
        self.0.woken()
    }

    /// The summarizer's answer to the last request.
    #[napi]
    pub fn answer(&self, text: String) {
        self.0.answer(Ok(text));
    }

    /// The summarizer threw: the fold fails and changes nothing.
    #[napi]
    pub fn fail(&self, message: String) {
        self.0.answer(Err(message.into()));
    }

    /// Abandons the compaction.
    #[napi]
    pub fn cancel(&self) {
        self.0.cancel();
    }

    /// The compaction's result, or its error thrown.
    #[napi]
    pub fn result(&self) -> napi::Result<String> {
        match self.0.take_outcome() {
            Some(outcome) => outcome.js(),
            None => Err(napi::Error::from_reason("the compaction has not finished")),
        }
    }
}

/// One poll on the thread pool.
pub struct PollTask(Arc<Stepped<String>>);

impl Task for PollTask {
    type Output = Option<String>;
    type JsValue = Option<String>;

    fn compute(&mut self) -> napi::Result<Option<String>> {
        Ok(polled(&self.0))
    }

    fn resolve(&mut self, _: Env, output: Option<String>) -> napi::Result<Option<String>> {
        Ok(output)
    }
}

/// Tokens of `messages` with `tokenizer` (`"o200k_base"` by default).
#[napi]
pub fn count_tokens(messages: String, tokenizer: Option<String>) -> napi::Result<u32> {
    use chatfold::TokenCounter;
    let counter: NamedCounter = tokenizer.as_deref().unwrap_or("o200k_base").parse().js()?;
    let history = History::from_json_str(&messages).js()?;
    Ok(counter.count_messages(&history.messages) as u32)
}

/// The crate's version.
#[napi]
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// A named summarizer's answer to a request (JSON text, as `poll` gave it),
/// on the thread pool: how the memories use the built-in and HTTP
/// summarizers, which answer their steps from JavaScript.
#[napi]
pub fn summarize_named(
    summarizer: NamedSummarizer,
    request: String,
) -> napi::Result<AsyncTask<SummarizeTask>> {
    Ok(AsyncTask::new(SummarizeTask {
        named: summarizer_named(summarizer)?,
        request,
    }))
}

/// One named summarizer's call on the thread pool.
pub struct SummarizeTask {
    named: Named,
    request: String,
}

impl Task for SummarizeTask {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<String> {
        let value: Value =
            serde_json::from_str(&self.request).map_err(|e| napi::Error::from_reason(e.to_string()))?;
        let messages = History::from_json_value(value["messages"].clone()).js()?.messages;
        let previous = value["previousSummary"].as_str();
        let allowance = value["allowance"].as_u64().unwrap_or(0) as usize;
        let request = SummaryRequest::new(previous, &messages, allowance);
        self.named
            .summarize(&request)
            .map_err(|e| js_error(Error::Summarize(e)))
    }

    fn resolve(&mut self, _: Env, output: String) -> napi::Result<String> {
        Ok(output)
    }
}
