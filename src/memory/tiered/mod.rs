//! The tiered memory (sawtooth's model): folds run in a worker, never in an add.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};

use super::{Memory, State, adders};
use crate::count::{Heuristic, TokenCounter};
use crate::error::Result;
use crate::fold::clear::ClearToolResults;
use crate::fold::policy::FoldPolicy;
use crate::memory::tracked::{Holds, Rules, Tracked, lock};
use crate::message::Message;
use crate::summarize::AsyncSummarizer;

mod settings;
mod view;
mod worker;

pub use settings::{Stats, TieredOptions, TieredSettings};
use view::Shown;
pub use worker::Worker;
use worker::{Step, work};

/// How many prompt sizes [`Stats::profile`] remembers.
const PROFILE_LEN: usize = 256;

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
/// the oldest whole units into the summary (at most `chunk_size` messages
/// per summarizer call, if set), until L1 is down to its
/// [fold target](TieredSettings::low_water) (half the soft limit by
/// default), and ends when the memory is dropped. Between those folds the
/// prompt only grows at its end. Turns added meanwhile land after the folded part.
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
/// let summarize = async |request: SummaryRequest<'_>| {
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

struct Core<S, C> {
    settings: TieredSettings<C>,
    summarizer: S,
    tiers: Mutex<Tiers>,
}

/// Everything behind the lock. Each change under it is complete before the
/// lock is released, and nothing that can panic or wait runs under it.
#[derive(Debug, Default)]
struct Tiers {
    /// L0 (`state.system`), the summary and the working buffer L1.
    tracked: Tracked,
    system_tokens: usize,
    /// Tokens of the rendered summary message (0 without a summary).
    summary_tokens: usize,
    /// An add asked the worker to fold.
    signalled: bool,
    /// Adds to let pass before the next retry (backoff).
    wait_adds: usize,
    /// L1 passed the soft limit and is not yet down to the fold target.
    draining: bool,
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

impl Holds for Tiers {
    fn tracked(&mut self) -> &mut Tracked {
        &mut self.tracked
    }

    fn fold_ended(&mut self) -> Vec<Waker> {
        std::mem::take(&mut self.waiters)
    }
}

impl Tiers {
    /// Replaces old, large tool results in the buffer with placeholders, each
    /// counted again.
    fn clear_tool_results<C: TokenCounter>(&mut self, clearing: &ClearToolResults, counter: &C) {
        let Some((cleared, indices)) = clearing.clear(self.tracked.messages(), counter) else {
            return;
        };
        let mut indices = indices.iter().copied().peekable();
        for (i, message) in cleared.into_iter().enumerate() {
            if indices.next_if_eq(&i).is_some() {
                let tokens = counter.count_message(&message);
                self.tracked.replace(i, message, tokens);
                self.stats.results_cleared += 1;
            }
        }
    }

    /// Whether L1 is to be folded: past the soft limit, or not yet down to
    /// the fold target since it passed it.
    fn due<C>(&self, settings: &TieredSettings<C>) -> bool {
        let total = self.tracked.total();
        total > settings.soft_limit_tokens || (self.draining && total > settings.fold_to())
    }

    /// How many messages the next fold takes (see `units::chunk`); 0 when
    /// no fold is due or nothing can be folded.
    fn chunk<C>(&mut self, settings: &TieredSettings<C>) -> usize {
        let n = match self.due(settings) {
            true => self
                .tracked
                .chunk((settings.chunk_size, settings.chunk_tokens.unwrap_or(usize::MAX))),
            false => 0,
        };
        // A drain ends at the target, or where nothing more can be folded.
        self.draining = n > 0;
        n
    }

    fn folds_pending<C>(&self, settings: &TieredSettings<C>) -> usize {
        if !self.due(settings) {
            return 0;
        }
        let over = self.tracked.evict_count(settings.fold_to());
        over.div_ceil(settings.chunk_size)
    }
}

impl<S, C> Core<S, C> {
    fn lock(&self) -> MutexGuard<'_, Tiers> {
        lock(&self.tiers)
    }

    /// How folds are checked and cut.
    fn rules(&self) -> Rules<'_, C> {
        let settings = &self.settings;
        Rules {
            policy: &settings.policy,
            counter: &settings.counter,
            allowance: settings.allowance(),
            exact: true,
        }
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
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a soft limit, chunk size or failure count
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
        let system_tokens = state
            .system
            .iter()
            .fold(0usize, |t, m| t.saturating_add(counter.count_message(m)));
        let summary_tokens = match state.summary.as_str() {
            "" => 0,
            summary => counter.count_message(&settings.policy.summary_message(summary)),
        };
        let mut tracked = Tracked::new(state, counter, true, &settings.policy);
        tracked.pin(settings.pins.clone());
        let tiers = Tiers {
            tracked,
            system_tokens,
            summary_tokens,
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
        tiers.tracked.push(message, Some(tokens));
        // A fold in flight looks again when it ends: no wake-up needed then.
        let mut wake = None;
        if tiers.due(settings) && !tiers.tracked.folding() {
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

    adders!(pub &self -> ());

    /// Forgets the summary and the working buffer (L0 stays); a fold in
    /// flight is discarded when it completes.
    pub fn clear(&self) {
        let mut tiers = self.core.lock();
        tiers.tracked.clear();
        tiers.summary_tokens = 0;
        tiers.wait_adds = 0;
        tiers.draining = false;
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
            buffer_tokens: tiers.tracked.total(),
            buffer_messages: tiers.tracked.messages().len(),
            view_tokens: view.tokens,
            hidden_messages: view.start,
            folds_done: c.folds_done,
            folds_failed: c.folds_failed,
            consecutive_failures: c.consecutive_failures,
            folds_pending: tiers.folds_pending(settings),
            fold_in_flight: tiers.tracked.folding(),
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
    /// is down to its fold target, ignoring the backoff; waits first for a fold
    /// already in flight. For scripts, tests and programs without a spawned
    /// worker: `pollster::block_on(memory.fold_now())`.
    ///
    /// # Errors
    ///
    /// The error of a fold that failed ([`Error::Summarize`](crate::Error::Summarize),
    /// [`Error::EmptySummary`](crate::Error::EmptySummary)); it is recorded in [`stats`](Self::stats)
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
                        if tiers.tracked.folding() {
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
        Cow::Owned(self.core.lock().tracked.state.clone())
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
        let state = &tiers.tracked.state;
        let mut out = Vec::with_capacity(state.system.len() + 1 + state.buffer.len() - view.start);
        out.extend(state.system.iter().cloned());
        let policy = &self.core.settings.policy;
        let next = state.buffer.get(view.start);
        match view.summary {
            Shown::Hidden => {}
            Shown::Whole => out.push(policy.summary_message_before(&state.summary, next)),
            Shown::Cut(mut message) => {
                message.role = policy.summary_role_before(next);
                out.push(message);
            }
        }
        out.extend(state.buffer[view.start..].iter().cloned());
        out
    }

    fn summary(&self) -> Cow<'_, str> {
        Cow::Owned(self.core.lock().tracked.state.summary.clone())
    }

    fn buffer(&self) -> Cow<'_, [Message]> {
        Cow::Owned(self.core.lock().tracked.state.buffer.clone())
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
