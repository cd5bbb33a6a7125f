//! Rolling memory: a running summary plus a recent-message buffer.

use std::borrow::Cow;
use std::future::Future;

use super::shared::{Inner, Shared};
use super::{Memory, Remember, RememberAsync, State, check_positive, evict_count, fold_request, new_summary};
use crate::count::{Heuristic, TokenCounter};
use crate::error::{BoxError, Error, Result};
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer, SummaryRequest};

/// The summarizer of a memory that has none: evicted turns are dropped.
///
/// It has no values, so it is never called.
#[derive(Clone, Copy, Debug)]
pub enum Discard {}

impl Summarizer for Discard {
    type Error = BoxError;

    fn summarize(&self, _: &SummaryRequest<'_>) -> Result<String, BoxError> {
        match *self {}
    }
}

impl AsyncSummarizer for Discard {
    type Error = BoxError;

    fn summarize(&self, _: SummaryRequest<'static>) -> impl Future<Output = Result<String, BoxError>> + Send {
        let never = *self;
        async move { match never {} }
    }
}

/// How many messages to evict so the buffer's tokens fit `max_tokens`.
fn over_budget(inner: &Inner, max_tokens: usize) -> usize {
    if inner.total <= max_tokens {
        return 0;
    }
    evict_count(&inner.state.buffer, |i| inner.tokens[i], max_tokens)
}

/// Keeps recent turns verbatim and folds older ones into a running summary
/// (rollmem's `RollingMemory`, LangChain's `ConversationSummaryBufferMemory`).
///
/// When the buffer passes `max_tokens`, its oldest whole units are folded into
/// the summary with one summarizer call (previous summary + evicted turns, the
/// summarizer told `max_tokens` as its allowance), and only then removed.
/// Without a summarizer they are dropped. The buffer is left opening with a
/// user turn when it can be, and the latest unit stays even over budget.
///
/// Each message is counted once, when it is added (or restored), and the
/// buffer's total is kept running: an add costs the same at the ten-thousandth
/// turn as at the first.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{Memory, Remember, RollingMemory};
/// use chatfold::SummaryRequest;
///
/// let summarize = |request: &SummaryRequest<'_>| {
///     let mut summary = request.previous_summary().unwrap_or("").to_owned();
///     for m in request.messages() {
///         summary.push_str(&format!(" [{}]", m.text()));
///     }
///     Ok::<_, std::convert::Infallible>(summary.trim().to_owned())
/// };
/// let mut memory = RollingMemory::new(30, summarize)?;
/// memory.add_user("Hi, I'm planning a trip to Korea.")?;
/// memory.add_assistant("Great! When are you going?")?;
/// memory.add_user("In May, for two weeks.")?;
/// assert_eq!(memory.summary(), "[Hi, I'm planning a trip to Korea.] [Great! When are you going?]");
/// assert_eq!(memory.buffer().len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RollingMemory<S = Discard, C = Heuristic> {
    inner: Inner,
    config: Config<S, C>,
}

/// What both rolling memories are configured with.
#[derive(Debug)]
struct Config<S, C> {
    max_tokens: usize,
    summarizer: Option<S>,
    counter: C,
}

impl<S> Config<S, Heuristic> {
    fn new(max_tokens: usize, summarizer: Option<S>) -> Result<Self> {
        check_positive("max_tokens", max_tokens)?;
        Ok(Config {
            max_tokens,
            summarizer,
            counter: Heuristic,
        })
    }
}

impl<S, C: TokenCounter> Config<S, C> {
    /// `state`, each buffered message counted once.
    fn inner(&self, state: State) -> Inner {
        let tokens = state
            .buffer
            .iter()
            .map(|m| self.counter.count_message(m))
            .collect();
        Inner::new(state, tokens)
    }
}

impl<S, C> Config<S, C> {
    fn with_counter<D>(self, counter: D) -> Config<S, D> {
        Config {
            max_tokens: self.max_tokens,
            summarizer: self.summarizer,
            counter,
        }
    }
}

impl<S: Summarizer> RollingMemory<S> {
    /// An empty memory keeping `max_tokens` of buffer, folding with `summarizer`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn new(max_tokens: usize, summarizer: S) -> Result<Self> {
        RollingMemory::from_state(State::default(), max_tokens, Some(summarizer))
    }
}

impl RollingMemory {
    /// An empty memory that drops what leaves the buffer.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn without_summarizer(max_tokens: usize) -> Result<Self> {
        RollingMemory::from_state(State::default(), max_tokens, None)
    }
}

impl<S> RollingMemory<S> {
    /// A memory holding `state` as it is: nothing is summarized or dropped
    /// until the next add.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn from_state(state: State, max_tokens: usize, summarizer: Option<S>) -> Result<Self> {
        let config = Config::new(max_tokens, summarizer)?;
        Ok(RollingMemory {
            inner: config.inner(state),
            config,
        })
    }
}

impl<S, C> RollingMemory<S, C> {
    /// Counts with `counter` instead (the buffer is counted again, once).
    pub fn counter<D: TokenCounter>(self, counter: D) -> RollingMemory<S, D> {
        let config = self.config.with_counter(counter);
        RollingMemory {
            inner: config.inner(self.inner.state),
            config,
        }
    }

    /// The buffer's budget.
    pub fn max_tokens(&self) -> usize {
        self.config.max_tokens
    }

    /// Tokens in the buffer now.
    pub fn buffer_tokens(&self) -> usize {
        self.inner.total
    }
}

impl<S, C> Memory for RollingMemory<S, C> {
    fn state(&self) -> Cow<'_, State> {
        Cow::Borrowed(&self.inner.state)
    }
}

impl<S: Summarizer, C: TokenCounter> Remember for RollingMemory<S, C> {
    /// Adds a message, then folds the oldest units if the buffer is over budget.
    ///
    /// # Errors
    ///
    /// When the summarizer fails (or returns an empty summary) the message
    /// stays in the buffer, nothing is evicted, the summary is unchanged, and
    /// the next add folds again.
    fn add_message(&mut self, message: Message) -> Result<()> {
        let Config {
            max_tokens,
            summarizer,
            counter,
        } = &self.config;
        let tokens = counter.count_message(&message);
        self.inner.push(message, Some(tokens));
        let n = over_budget(&self.inner, *max_tokens);
        if n == 0 {
            return Ok(());
        }
        if let Some(summarizer) = summarizer {
            let state = &self.inner.state;
            let request = fold_request(&state.summary, &state.buffer[..n], *max_tokens);
            let text = summarizer
                .summarize(&request)
                .map_err(|e| Error::Summarize(e.into()))?;
            self.inner.state.summary = new_summary(text)?;
        }
        self.inner.drop_front(n);
        Ok(())
    }

    fn clear(&mut self) {
        self.inner.clear();
    }
}

/// [`RollingMemory`] for async summarizers, used through `&self`.
///
/// Share it between tasks (it is `Send + Sync`); it needs no runtime. At most
/// one fold is in flight per memory. An add that finds a fold in flight puts
/// its message in the buffer and returns at once, leaving the fold to the one
/// in flight, which looks again when it completes: adds never wait on a
/// summarizer they did not start, and no second call races the first.
/// Messages added meanwhile land after the folded part. A summarizer error or
/// a dropped (cancelled) future leaves the summary and buffer as they were;
/// `clear()` during a fold discards that fold's result.
///
/// A sync summarizer works too, through [`Ready`](crate::Ready).
///
/// # Examples
///
/// ```
/// use chatfold::memory::{AsyncRollingMemory, Memory, RememberAsync};
/// use chatfold::SummaryRequest;
///
/// let summarize = |request: SummaryRequest<'static>| async move {
///     Ok::<_, std::convert::Infallible>(format!("{} older turns", request.messages().len()))
/// };
/// let memory = AsyncRollingMemory::new(20, summarize)?;
/// pollster::block_on(async {
///     for i in 0..5 {
///         memory.add_user(format!("turn number {i}")).await?;
///     }
///     Ok::<(), chatfold::Error>(())
/// })?;
/// assert_eq!(memory.summary(), "1 older turns");
/// assert_eq!(memory.buffer().len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AsyncRollingMemory<S = Discard, C = Heuristic> {
    shared: Shared,
    config: Config<S, C>,
}

impl<S: AsyncSummarizer> AsyncRollingMemory<S> {
    /// An empty memory keeping `max_tokens` of buffer, folding with `summarizer`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn new(max_tokens: usize, summarizer: S) -> Result<Self> {
        AsyncRollingMemory::from_state(State::default(), max_tokens, Some(summarizer))
    }
}

impl AsyncRollingMemory {
    /// An empty memory that drops what leaves the buffer.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn without_summarizer(max_tokens: usize) -> Result<Self> {
        AsyncRollingMemory::from_state(State::default(), max_tokens, None)
    }
}

impl<S> AsyncRollingMemory<S> {
    /// A memory holding `state` as it is: nothing is summarized or dropped
    /// until the next add.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `max_tokens` is 0.
    pub fn from_state(state: State, max_tokens: usize, summarizer: Option<S>) -> Result<Self> {
        let config = Config::new(max_tokens, summarizer)?;
        Ok(AsyncRollingMemory {
            shared: Shared::new(config.inner(state)),
            config,
        })
    }
}

impl<S, C> AsyncRollingMemory<S, C> {
    /// Counts with `counter` instead (the buffer is counted again, once).
    pub fn counter<D: TokenCounter>(self, counter: D) -> AsyncRollingMemory<S, D> {
        let state = std::mem::take(&mut self.shared.lock().state);
        let config = self.config.with_counter(counter);
        AsyncRollingMemory {
            shared: Shared::new(config.inner(state)),
            config,
        }
    }

    /// The buffer's budget.
    pub fn max_tokens(&self) -> usize {
        self.config.max_tokens
    }

    /// Tokens in the buffer now.
    pub fn buffer_tokens(&self) -> usize {
        self.shared.lock().total
    }
}

impl<S, C> Memory for AsyncRollingMemory<S, C> {
    fn state(&self) -> Cow<'_, State> {
        Cow::Owned(self.shared.lock().state.clone())
    }
}

impl<S, C> RememberAsync for AsyncRollingMemory<S, C>
where
    S: AsyncSummarizer + Sync,
    C: TokenCounter + Sync,
{
    async fn add_message(&self, message: Message) -> Result<()> {
        let tokens = self.config.counter.count_message(&message);
        self.shared.lock().push(message, Some(tokens));
        let max = self.config.max_tokens;
        self.shared
            .settle(self.config.summarizer.as_ref(), max, |inner| {
                over_budget(inner, max)
            })
            .await
    }

    fn clear(&self) {
        self.shared.lock().clear();
    }
}
