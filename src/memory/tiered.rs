//! The tiered memory (sawtooth's model): folds run in a worker, never in an add.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::{self, AssertUnwindSafe};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::{Memory, State, check_positive, fold_request, new_summary};
use crate::clear::ClearToolResults;
use crate::count::{Heuristic, TokenCounter};
use crate::error::{BoxError, ConfigError, Error, Result};
use crate::message::Message;
use crate::policy::FoldPolicy;
use crate::summarize::AsyncSummarizer;
use crate::units;

/// How many prompt sizes [`Stats::profile`] remembers.
const PROFILE_LEN: usize = 256;

/// The most adds a retry waits for after consecutive failures.
const MAX_BACKOFF_ADDS: usize = 64;

/// How a [`TieredMemory`] is set up (sawtooth's `ContextManagerConfig`).
///
/// # Examples
///
/// ```
/// use chatfold::memory::TieredSettings;
///
/// let s = TieredSettings::new(3_000, 6_000);
/// assert_eq!((s.soft_limit_tokens, s.hard_limit_tokens), (3_000, 6_000));
/// assert_eq!(s.chunk_size, 10);
/// assert_eq!(s.chunk_tokens, None);
/// assert!(!s.fallback_truncate);
/// assert_eq!(s.max_failures, 3);
/// assert_eq!(s.allowance(), 1_500); // half the room between the limits
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TieredSettings<C = Heuristic> {
    /// Tokens of working buffer (L1) past which folding starts.
    pub soft_limit_tokens: usize,
    /// The most tokens [`TieredMemory::messages`] ever returns (when the
    /// system messages and the latest unit fit in it).
    pub hard_limit_tokens: usize,
    /// The most messages one fold takes (whole units; at least one unit,
    /// more when alignment needs it).
    pub chunk_size: usize,
    /// The most tokens one fold takes, if set (at least one unit).
    pub chunk_tokens: Option<usize>,
    /// Whether, after `max_failures` consecutive failed folds, the chunk that
    /// failed is dropped from the state (counted in [`Stats`]). Off: nothing
    /// is ever dropped, the view stays within the hard limit regardless.
    pub fallback_truncate: bool,
    /// Consecutive failures before `fallback_truncate` drops a chunk.
    pub max_failures: usize,
    /// Old, large tool results to replace with a placeholder before each
    /// fold (none by default). The placeholder names the result's first
    /// identifiers, which reach the ledger when it is folded.
    pub clear_tool_results: Option<ClearToolResults>,
    /// Counts tokens.
    pub counter: C,
    /// What the summary is. Its `max_summary_tokens` is the summarizer's
    /// allowance; by default half the room between the two limits.
    pub policy: FoldPolicy,
}

impl Default for TieredSettings {
    /// sawtooth's defaults: a soft limit of 3 000 tokens, a hard one of 6 000.
    fn default() -> Self {
        TieredSettings::new(3_000, 6_000)
    }
}

impl TieredSettings {
    /// Settings with these limits, chunks of 10 messages, no fallback
    /// truncation, [`Heuristic`] counting and the default [`FoldPolicy`].
    pub const fn new(soft_limit_tokens: usize, hard_limit_tokens: usize) -> Self {
        TieredSettings {
            soft_limit_tokens,
            hard_limit_tokens,
            chunk_size: 10,
            chunk_tokens: None,
            fallback_truncate: false,
            max_failures: 3,
            clear_tool_results: None,
            counter: Heuristic,
            policy: FoldPolicy::new(),
        }
    }
}

impl<C> TieredSettings<C> {
    /// Fold at most `messages` messages at a time.
    pub fn chunk_size(mut self, messages: usize) -> Self {
        self.chunk_size = messages;
        self
    }

    /// Fold at most `tokens` tokens at a time.
    pub fn chunk_tokens(mut self, tokens: usize) -> Self {
        self.chunk_tokens = Some(tokens);
        self
    }

    /// Drop a chunk after `max_failures` consecutive failed folds.
    pub fn fallback_truncate(mut self, on: bool) -> Self {
        self.fallback_truncate = on;
        self
    }

    /// Consecutive failures before a fallback truncation.
    pub fn max_failures(mut self, failures: usize) -> Self {
        self.max_failures = failures;
        self
    }

    /// Count with `counter`.
    pub fn counter<D: TokenCounter>(self, counter: D) -> TieredSettings<D> {
        TieredSettings {
            soft_limit_tokens: self.soft_limit_tokens,
            hard_limit_tokens: self.hard_limit_tokens,
            chunk_size: self.chunk_size,
            chunk_tokens: self.chunk_tokens,
            fallback_truncate: self.fallback_truncate,
            max_failures: self.max_failures,
            clear_tool_results: self.clear_tool_results,
            counter,
            policy: self.policy,
        }
    }

    /// Before each fold, replace old, large tool results as `clearing` says.
    pub fn clear_tool_results(mut self, clearing: ClearToolResults) -> Self {
        self.clear_tool_results = Some(clearing);
        self
    }

    /// Render, recognise and cut the summary by `policy`.
    pub fn policy(mut self, policy: FoldPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The summarizer's allowance in tokens: the policy's
    /// `max_summary_tokens`, else half the room between the limits.
    pub fn allowance(&self) -> usize {
        let room = self.hard_limit_tokens.saturating_sub(self.soft_limit_tokens) / 2;
        self.policy.max_summary_tokens.unwrap_or(room.max(1))
    }

    fn validate(&self) -> Result<()> {
        check_positive("soft_limit_tokens", self.soft_limit_tokens)?;
        check_positive("chunk_size", self.chunk_size)?;
        check_positive("max_failures", self.max_failures)?;
        if let Some(tokens) = self.chunk_tokens {
            check_positive("chunk_tokens", tokens)?;
        }
        ConfigError::at_least(
            "hard_limit_tokens",
            self.hard_limit_tokens,
            self.soft_limit_tokens,
            Some("soft_limit_tokens"),
        )?;
        self.policy.validate()
    }
}

/// What a [`TieredMemory`] reports about itself (sawtooth's `get_stats()`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Tokens of the pinned system messages (L0).
    pub system_tokens: usize,
    /// Tokens of the summary message (L2 and the ledger, L1.5); 0 without one.
    pub summary_tokens: usize,
    /// Tokens of the whole working buffer (L1) in the state.
    pub buffer_tokens: usize,
    /// Messages in the working buffer.
    pub buffer_messages: usize,
    /// Tokens of [`TieredMemory::messages`] now, reply priming included.
    pub view_tokens: usize,
    /// Buffered messages left out of the view to keep it within the hard limit.
    pub hidden_messages: usize,
    /// Folds that succeeded.
    pub folds_done: u64,
    /// Folds that failed (summarizer error or empty summary).
    pub folds_failed: u64,
    /// Failures since the last success.
    pub consecutive_failures: usize,
    /// Folds still needed to bring the buffer under the soft limit (estimated
    /// from `chunk_size`).
    pub folds_pending: usize,
    /// Whether a fold is running now.
    pub fold_in_flight: bool,
    /// Messages folded into the summary.
    pub messages_folded: u64,
    /// Messages dropped by fallback truncation.
    pub messages_dropped: u64,
    /// Tool results replaced by a placeholder
    /// ([`clear_tool_results`](TieredSettings::clear_tool_results)).
    pub results_cleared: u64,
    /// The last fold error and its causes, as text (`summarizer failed: ...`).
    pub last_error: Option<String>,
    /// The view's tokens after each of the last 256 adds, oldest first: the
    /// sawtooth profile.
    pub profile: Vec<usize>,
}

/// An agent memory that never waits for its summarizer (sawtooth-memory's
/// `ContextManager`), in four tiers:
///
/// - **L0**, system messages given at construction: never folded, not counted
///   against the soft limit;
/// - **L2**, the running summary, and **L1.5**, the exact-identifier ledger:
///   one summary message, rendered by the [`FoldPolicy`];
/// - **L1**, the working buffer of recent turns, verbatim.
///
/// [`add_message`](Self::add_message) only appends. When L1 passes the soft
/// limit it signals the [`Worker`], a future you spawn once on any runtime
/// (the `(client, connection)` pattern of tokio-postgres); the worker folds
/// the oldest whole units into the summary, `chunk_size` messages per
/// summarizer call, until L1 is under the soft limit again, and ends when the
/// memory is dropped. Turns added meanwhile land after the folded part.
///
/// [`messages`](Self::messages) is never over the hard limit when L0 and the
/// latest unit fit in it: while folds are pending or failing, the oldest units
/// leave the *view*, not the state, and come back into the summary when the
/// summarizer recovers.
///
/// Summarizer failures never reach the agent loop (a panic in the worker's
/// summarizer call counts as a failure too): they are counted in
/// [`stats`](Self::stats), and the fold is retried on a later add, waiting for
/// twice as many adds after each consecutive failure (1, 2, 4, … up to 64):
/// backoff with no timer. [`fold_now`](Self::fold_now) retries at once. With
/// [`fallback_truncate`](TieredSettings::fallback_truncate), the chunk that
/// failed `max_failures` times in a row is dropped and counted.
/// [`clear`](Self::clear) during a fold discards that fold's result.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{Memory, TieredMemory, TieredSettings};
/// use chatfold::{Message, SummaryRequest};
///
/// let summarize = |request: SummaryRequest<'static>| async move {
///     Ok::<_, std::convert::Infallible>(format!("{} earlier turns", request.messages().len()))
/// };
/// let settings = TieredSettings::new(40, 80).chunk_size(4);
/// let (memory, worker) = TieredMemory::new([Message::system("You are terse.")], settings, summarize)?;
/// // Spawn `worker` on your runtime: tokio::spawn(worker). Here, without one:
/// drop(worker);
/// for i in 0..20 {
///     memory.add_user(format!("question number {i}"));
/// }
/// assert!(memory.stats().folds_pending > 0);
/// pollster::block_on(memory.fold_now())?; // run the pending folds inline
///
/// let stats = memory.stats();
/// assert!(stats.buffer_tokens <= 40 && stats.view_tokens <= 80);
/// let messages = memory.messages();
/// assert_eq!(messages[0].text(), "You are terse.");
/// assert!(memory.policy().is_summary(&messages[1]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TieredMemory<S, C = Heuristic> {
    core: Arc<Core<S, C>>,
}

/// Folds a [`TieredMemory`]'s working buffer in the background.
///
/// A future: spawn it once, on any runtime (`tokio::spawn(worker)`,
/// `smol::spawn(worker).detach()`, ...). It ends when its memory is dropped,
/// abandoning a summarizer call in flight.
pub struct Worker {
    future: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Future for Worker {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.future.as_mut().poll(cx)
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker").finish_non_exhaustive()
    }
}

struct Core<S, C> {
    settings: TieredSettings<C>,
    summarizer: S,
    tiers: Mutex<Tiers>,
}

/// Everything behind the lock. Each change under it is complete before the
/// lock is released, and nothing that can panic or wait runs under it.
#[derive(Debug, Default)]
struct Tiers {
    system: Vec<Message>,
    system_tokens: usize,
    summary: String,
    /// Tokens of the rendered summary message (0 without a summary).
    summary_tokens: usize,
    buffer: Vec<Message>,
    /// Indices of the buffered messages that carry tool calls, kept as the
    /// buffer changes so that no add reads the whole buffer.
    callers: Vec<usize>,
    /// Tokens of each buffered message, counted once when it was added.
    tokens: Vec<usize>,
    total: usize,
    /// Bumped by `clear`: a fold that started before it is discarded.
    epoch: u64,
    folding: bool,
    /// An add asked the worker to fold.
    signalled: bool,
    /// Adds to let pass before the next retry (backoff).
    wait_adds: usize,
    closed: bool,
    worker: Option<Waker>,
    /// `fold_now` calls waiting for another fold to finish.
    waiters: Vec<Waker>,
    stats: Counters,
    profile: VecDeque<usize>,
}

#[derive(Debug, Default)]
struct Counters {
    folds_done: u64,
    folds_failed: u64,
    consecutive_failures: usize,
    messages_folded: u64,
    messages_dropped: u64,
    results_cleared: u64,
    last_error: Option<String>,
}

/// What the view of the buffer is: where it starts, its tokens, and how the
/// summary is shown.
struct View {
    start: usize,
    tokens: usize,
    summary: Shown,
}

/// The summary in the view.
enum Shown {
    /// No summary, or none fits beside the latest unit.
    Hidden,
    /// The summary as it is.
    Whole,
    /// Cut to what fits beside the latest unit.
    Cut(Message),
}

impl Tiers {
    fn push(&mut self, message: Message, tokens: usize) {
        if message.makes_calls() {
            self.callers.push(self.buffer.len());
        }
        self.buffer.push(message);
        self.tokens.push(tokens);
        self.total = self.total.saturating_add(tokens);
    }

    fn drop_front(&mut self, n: usize) {
        self.buffer.drain(..n);
        self.callers.retain(|&c| c >= n);
        self.callers.iter_mut().for_each(|c| *c -= n);
        let gone = self.tokens.drain(..n).fold(0usize, usize::saturating_add);
        self.total = self.total.saturating_sub(gone);
    }

    /// Replaces old, large tool results in the buffer with placeholders, each
    /// counted again.
    fn clear_tool_results<C: TokenCounter>(&mut self, clearing: &ClearToolResults, counter: &C) {
        let Some((cleared, indices)) = clearing.clear(&self.buffer, counter) else {
            return;
        };
        self.buffer = cleared;
        for &i in &indices {
            let tokens = counter.count_message(&self.buffer[i]);
            self.total = self.total.saturating_sub(self.tokens[i]).saturating_add(tokens);
            self.tokens[i] = tokens;
        }
        self.stats.results_cleared += indices.len() as u64;
    }

    /// How many messages the next fold takes (see [`units::chunk`]); 0 when
    /// the buffer is within the soft limit or nothing can be folded.
    fn chunk<C>(&self, settings: &TieredSettings<C>) -> usize {
        if self.total <= settings.soft_limit_tokens {
            return 0;
        }
        let limits = (settings.chunk_size, settings.chunk_tokens.unwrap_or(usize::MAX));
        units::chunk(&self.buffer, &self.callers, |i| self.tokens[i], limits)
    }

    fn folds_pending<C>(&self, settings: &TieredSettings<C>) -> usize {
        if self.total <= settings.soft_limit_tokens {
            return 0;
        }
        let over = units::evict_count(
            &self.buffer,
            &self.callers,
            |i| self.tokens[i],
            settings.soft_limit_tokens,
        );
        over.div_ceil(settings.chunk_size)
    }

    /// The view within the hard limit. Reads only the messages it shows;
    /// renders the summary only when it must be cut to fit.
    fn view<C: TokenCounter>(&self, settings: &TieredSettings<C>) -> View {
        let hard = settings.hard_limit_tokens;
        let fixed = settings
            .counter
            .reply_priming()
            .saturating_add(self.system_tokens);
        let full = fixed
            .saturating_add(self.summary_tokens)
            .saturating_add(self.total);
        let whole = if self.summary.is_empty() {
            Shown::Hidden
        } else {
            Shown::Whole
        };
        if full <= hard {
            return View {
                start: 0,
                tokens: full,
                summary: whole,
            };
        }
        let room = hard.saturating_sub(fixed).saturating_sub(self.summary_tokens);
        let start = units::evict_count(&self.buffer, &self.callers, |i| self.tokens[i], room);
        let kept = self.tokens[start..]
            .iter()
            .fold(0usize, |t, &x| t.saturating_add(x));
        let base = fixed.saturating_add(kept);
        if base.saturating_add(self.summary_tokens) <= hard {
            return View {
                start,
                tokens: base.saturating_add(self.summary_tokens),
                summary: whole,
            };
        }
        // The latest unit leaves less room than the summary takes: show as
        // much of the summary as fits beside it, or none.
        let left = hard.saturating_sub(base);
        let policy = &settings.policy;
        let fitted = (!self.summary.is_empty() && left > policy.overhead(&settings.counter))
            .then(|| policy.refit(&self.summary, left, &settings.counter))
            .filter(|fitted| fitted.tokens <= left);
        match fitted {
            Some(fitted) => View {
                start,
                tokens: base.saturating_add(fitted.tokens),
                summary: Shown::Cut(fitted.message),
            },
            None => View {
                start,
                tokens: base,
                summary: Shown::Hidden,
            },
        }
    }
}

/// What one fold step did.
enum Step {
    /// Nothing to fold.
    Idle,
    /// Another fold is in flight.
    Busy,
    /// A chunk was folded (or its result discarded by a `clear`).
    Folded,
    /// The summarizer failed.
    Failed(Error),
    /// The memory was dropped during the fold.
    Closed,
}

impl<S, C> Core<S, C> {
    fn lock(&self) -> MutexGuard<'_, Tiers> {
        self.tiers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<S: AsyncSummarizer, C: TokenCounter> Core<S, C> {
    /// Folds one chunk, if one is due. `in_worker`: give up when the memory
    /// is dropped, and take a panicking summarizer for a failed one (there is
    /// no caller for the panic to reach).
    async fn fold_step(&self, in_worker: bool) -> Step {
        let settings = &self.settings;
        let allowance = settings.allowance();
        let (policy, counter) = (&settings.policy, &settings.counter);
        let (request, entries, n, epoch) = {
            let mut tiers = self.lock();
            if tiers.folding {
                return Step::Busy;
            }
            if let (Some(clearing), true) = (
                &settings.clear_tool_results,
                tiers.total > settings.soft_limit_tokens,
            ) {
                tiers.clear_tool_results(clearing, counter);
            }
            let n = tiers.chunk(settings);
            if n == 0 {
                return Step::Idle;
            }
            tiers.folding = true;
            let (request, entries) =
                fold_request(policy, &tiers.summary, &tiers.buffer[..n], allowance, counter);
            (request.into_owned(), entries, n, tiers.epoch)
        };
        let guard = InFlight { core: self };
        let mut call = pin!(self.summarizer.summarize(request));
        let result = poll_fn(|cx| {
            let mut poll = || call.as_mut().poll(cx).map_err(Into::<BoxError>::into);
            let polled = if in_worker {
                panic::catch_unwind(AssertUnwindSafe(poll))
                    .unwrap_or_else(|panic| Poll::Ready(Err(panicked(&*panic))))
            } else {
                poll()
            };
            if let Poll::Ready(result) = polled {
                return Poll::Ready(Some(result));
            }
            if in_worker {
                let mut tiers = self.lock();
                if tiers.closed {
                    return Poll::Ready(None);
                }
                tiers.worker = Some(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
        let Some(result) = result else {
            return Step::Closed; // the guard ends the fold
        };
        // Checked, cut and counted before taking the lock: adds never wait on it.
        let summary = result
            .map_err(Error::Summarize)
            .and_then(|text| new_summary(policy, text, &entries, allowance, counter))
            .map(|text| {
                let tokens = settings
                    .counter
                    .count_message(&settings.policy.summary_message(&text));
                (text, tokens)
            });
        std::mem::forget(guard);
        let mut tiers = self.lock();
        let waiters = tiers.end_fold();
        let step = if tiers.epoch != epoch {
            Step::Folded // cleared while the summarizer ran: the clear wins
        } else {
            match summary {
                Ok((text, tokens)) => {
                    tiers.summary = text;
                    tiers.summary_tokens = tokens;
                    tiers.drop_front(n);
                    let stats = &mut tiers.stats;
                    stats.folds_done += 1;
                    stats.messages_folded += n as u64;
                    stats.consecutive_failures = 0;
                    tiers.wait_adds = 0;
                    Step::Folded
                }
                Err(e) => {
                    tiers.failed(&e, n, settings);
                    Step::Failed(e)
                }
            }
        };
        drop(tiers);
        waiters.into_iter().for_each(Waker::wake);
        step
    }
}

impl Tiers {
    /// Marks the fold done; returns the `fold_now` calls to wake.
    fn end_fold(&mut self) -> Vec<Waker> {
        self.folding = false;
        std::mem::take(&mut self.waiters)
    }

    /// Records a failed fold of the first `n` messages: backoff, and the
    /// fallback truncation when it is due.
    fn failed<C>(&mut self, error: &Error, n: usize, settings: &TieredSettings<C>) {
        let stats = &mut self.stats;
        stats.folds_failed += 1;
        stats.consecutive_failures += 1;
        stats.last_error = Some(crate::error::with_sources(error));
        let failures = stats.consecutive_failures;
        if settings.fallback_truncate && failures >= settings.max_failures {
            stats.messages_dropped += n as u64;
            stats.consecutive_failures = 0;
            self.drop_front(n);
            self.wait_adds = 0;
        } else {
            let shift = u32::try_from(failures.saturating_sub(1))
                .unwrap_or(u32::MAX)
                .min(6);
            self.wait_adds = (1usize << shift).min(MAX_BACKOFF_ADDS) - 1;
        }
    }
}

/// A summarizer's panic as a fold error.
fn panicked(payload: &(dyn std::any::Any + Send)) -> BoxError {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message");
    format!("summarizer panicked: {message}").into()
}

/// Ends the fold if its future is dropped mid-flight (the memory dropped, or
/// a `fold_now` cancelled), leaving the state as it was.
struct InFlight<'a, S, C> {
    core: &'a Core<S, C>,
}

impl<S, C> Drop for InFlight<'_, S, C> {
    fn drop(&mut self) {
        let waiters = self.core.lock().end_fold();
        waiters.into_iter().for_each(Waker::wake);
    }
}

impl<S, C> TieredMemory<S, C>
where
    S: AsyncSummarizer + Send + Sync + 'static,
    C: TokenCounter + Send + Sync + 'static,
{
    /// A memory with the system messages `system` (L0) and an empty working
    /// buffer, and the worker that folds it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] for a soft limit, chunk size or failure count
    /// of 0, a hard limit below the soft one, or an invalid policy.
    pub fn new(
        system: impl IntoIterator<Item = Message>,
        settings: TieredSettings<C>,
        summarizer: S,
    ) -> Result<(Self, Worker)> {
        let state = State {
            system: system.into_iter().collect(),
            ..State::default()
        };
        TieredMemory::from_state(state, settings, summarizer)
    }

    /// A memory holding `state` as it is (its `system` messages as L0), and
    /// its worker. Each message is counted once; nothing is folded or
    /// dropped until the next add.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn from_state(state: State, settings: TieredSettings<C>, summarizer: S) -> Result<(Self, Worker)> {
        settings.validate()?;
        let counter = &settings.counter;
        let count_all = |messages: &[Message]| {
            messages
                .iter()
                .fold(0usize, |t, m| t.saturating_add(counter.count_message(m)))
        };
        let tokens: Vec<usize> = state.buffer.iter().map(|m| counter.count_message(m)).collect();
        let summary_tokens = if state.summary.is_empty() {
            0
        } else {
            counter.count_message(&settings.policy.summary_message(&state.summary))
        };
        let tiers = Tiers {
            system_tokens: count_all(&state.system),
            system: state.system,
            summary: state.summary,
            summary_tokens,
            callers: units::callers(&state.buffer),
            buffer: state.buffer,
            total: tokens.iter().fold(0usize, |t, &x| t.saturating_add(x)),
            tokens,
            ..Tiers::default()
        };
        let core = Arc::new(Core {
            settings,
            summarizer,
            tiers: Mutex::new(tiers),
        });
        let worker = Worker {
            future: Box::pin(work(Arc::clone(&core))),
        };
        Ok((TieredMemory { core }, worker))
    }
}

/// The worker's loop: wait for a signal, fold until idle or failing, again.
async fn work<S: AsyncSummarizer, C: TokenCounter>(core: Arc<Core<S, C>>) {
    loop {
        let open = poll_fn(|cx| {
            let mut tiers = core.lock();
            if tiers.closed {
                Poll::Ready(false)
            } else if std::mem::take(&mut tiers.signalled) {
                Poll::Ready(true)
            } else {
                tiers.worker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
        if !open {
            return;
        }
        loop {
            match core.fold_step(true).await {
                Step::Folded => continue,
                Step::Idle | Step::Busy | Step::Failed(_) => break,
                Step::Closed => return,
            }
        }
    }
}

impl<S, C: TokenCounter> TieredMemory<S, C> {
    /// Appends a message to the working buffer; never waits for a summarizer.
    ///
    /// When the buffer passes the soft limit and no fold is in flight, the
    /// worker is signalled (after a failed fold, only once the backoff's adds
    /// have passed). Its cost follows the view, not the buffer: a count of
    /// the new message, and, while the buffer is over the hard limit, a walk
    /// back over the messages the view shows.
    pub fn add_message(&self, message: Message) {
        let core = &*self.core;
        let settings = &core.settings;
        let tokens = settings.counter.count_message(&message);
        let mut tiers = core.lock();
        tiers.push(message, tokens);
        // A fold in flight looks again when it ends: no wake-up needed then.
        let mut wake = None;
        if tiers.total > settings.soft_limit_tokens && !tiers.folding {
            if tiers.wait_adds > 0 {
                tiers.wait_adds -= 1;
            } else {
                tiers.signalled = true;
                wake = tiers.worker.take();
            }
        }
        let view = tiers.view(settings).tokens;
        if tiers.profile.len() == PROFILE_LEN {
            tiers.profile.pop_front();
        }
        tiers.profile.push_back(view);
        drop(tiers);
        if let Some(waker) = wake {
            waker.wake();
        }
    }

    /// Adds a `user` message.
    pub fn add_user(&self, content: impl Into<String>) {
        self.add_message(Message::user(content));
    }

    /// Adds an `assistant` message.
    pub fn add_assistant(&self, content: impl Into<String>) {
        self.add_message(Message::assistant(content));
    }

    /// Adds a `system` message to the working buffer (L1; it is folded like
    /// any other turn: pinned system messages are given at construction).
    pub fn add_system(&self, content: impl Into<String>) {
        self.add_message(Message::system(content));
    }

    /// Adds a `tool` result for the call `call_id`.
    pub fn add_tool(&self, content: impl Into<String>, call_id: impl Into<String>) {
        self.add_message(Message::tool(content, call_id));
    }

    /// Forgets the summary and the working buffer (L0 stays); a fold in
    /// flight is discarded when it completes.
    pub fn clear(&self) {
        let mut tiers = self.core.lock();
        tiers.summary.clear();
        tiers.summary_tokens = 0;
        tiers.buffer.clear();
        tiers.callers.clear();
        tiers.tokens.clear();
        tiers.total = 0;
        tiers.epoch = tiers.epoch.wrapping_add(1);
        tiers.wait_adds = 0;
        tiers.stats.consecutive_failures = 0;
    }

    /// How the memory stands now.
    pub fn stats(&self) -> Stats {
        let settings = &self.core.settings;
        let tiers = self.core.lock();
        let view = tiers.view(settings);
        let c = &tiers.stats;
        Stats {
            system_tokens: tiers.system_tokens,
            summary_tokens: tiers.summary_tokens,
            buffer_tokens: tiers.total,
            buffer_messages: tiers.buffer.len(),
            view_tokens: view.tokens,
            hidden_messages: view.start,
            folds_done: c.folds_done,
            folds_failed: c.folds_failed,
            consecutive_failures: c.consecutive_failures,
            folds_pending: tiers.folds_pending(settings),
            fold_in_flight: tiers.folding,
            messages_folded: c.messages_folded,
            messages_dropped: c.messages_dropped,
            results_cleared: c.results_cleared,
            last_error: c.last_error.clone(),
            profile: tiers.profile.iter().copied().collect(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &TieredSettings<C> {
        &self.core.settings
    }
}

impl<S: AsyncSummarizer, C: TokenCounter> TieredMemory<S, C> {
    /// Runs the pending folds on the calling task, until the working buffer
    /// is under the soft limit, ignoring the backoff; waits first for a fold
    /// already in flight. For scripts, tests and programs without a spawned
    /// worker: `pollster::block_on(memory.fold_now())`.
    ///
    /// # Errors
    ///
    /// The error of a fold that failed ([`Error::Summarize`],
    /// [`Error::EmptySummary`]); it is recorded in [`stats`](Self::stats)
    /// as well, and the state is as it was before that fold.
    pub async fn fold_now(&self) -> Result<()> {
        let core = &*self.core;
        loop {
            match core.fold_step(false).await {
                Step::Folded => {}
                Step::Idle | Step::Closed => return Ok(()),
                Step::Failed(e) => return Err(e),
                Step::Busy => {
                    poll_fn(|cx| {
                        let mut tiers = core.lock();
                        if tiers.folding {
                            tiers.waiters.push(cx.waker().clone());
                            Poll::Pending
                        } else {
                            Poll::Ready(())
                        }
                    })
                    .await;
                }
            }
        }
    }
}

impl<S, C: TokenCounter> Memory for TieredMemory<S, C> {
    fn state(&self) -> Cow<'_, State> {
        let tiers = self.core.lock();
        let mut state = State::new(tiers.summary.clone(), tiers.buffer.clone());
        state.system = tiers.system.clone();
        Cow::Owned(state)
    }

    fn policy(&self) -> &FoldPolicy {
        &self.core.settings.policy
    }

    /// The prompt (sawtooth's `build_prompt()`): L0, the summary message,
    /// then the working buffer, within the hard limit whenever L0 and the
    /// latest unit fit: the oldest units are left out of the view while
    /// folds are pending or failing.
    fn messages(&self) -> Vec<Message> {
        let tiers = self.core.lock();
        let view = tiers.view(&self.core.settings);
        let mut out = Vec::with_capacity(tiers.system.len() + 1 + tiers.buffer.len() - view.start);
        out.extend(tiers.system.iter().cloned());
        match view.summary {
            Shown::Hidden => {}
            Shown::Whole => out.push(self.core.settings.policy.summary_message(&tiers.summary)),
            Shown::Cut(message) => out.push(message),
        }
        out.extend(tiers.buffer[view.start..].iter().cloned());
        out
    }

    fn summary(&self) -> Cow<'_, str> {
        Cow::Owned(self.core.lock().summary.clone())
    }

    fn buffer(&self) -> Cow<'_, [Message]> {
        Cow::Owned(self.core.lock().buffer.clone())
    }
}

impl<S, C> Drop for TieredMemory<S, C> {
    /// Ends the worker.
    fn drop(&mut self) {
        let worker = {
            let mut tiers = self.core.lock();
            tiers.closed = true;
            tiers.worker.take()
        };
        if let Some(waker) = worker {
            waker.wake();
        }
    }
}

impl<S, C: fmt::Debug> fmt::Debug for TieredMemory<S, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TieredMemory")
            .field("settings", &self.core.settings)
            .field("tiers", &*self.core.lock())
            .finish_non_exhaustive()
    }
}
