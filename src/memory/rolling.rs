//! Rolling memory: a running summary plus a recent-message buffer.

use std::borrow::Cow;
use std::sync::Mutex;

use super::{AsyncRemember, Discard, Memory, Remember, Settings, State, settle};
use crate::count::{Heuristic, TokenCounter};
use crate::error::Result;
use crate::fold::policy::FoldPolicy;
use crate::memory::tracked::{Landed, Rules, Tracked, lock};
use crate::message::Message;
use crate::summarize::{AsyncSummarizer, Summarizer};

impl<S, C: TokenCounter> Settings<S, C> {
    /// `state`, each buffered message counted once.
    fn buffer(&self, state: State) -> Tracked {
        let mut tracked = Tracked::new(state, &self.counter, true, &self.policy);
        tracked.pin(self.pins.clone());
        tracked
    }

    /// How this memory's folds are checked and cut.
    fn rules(&self) -> Rules<'_, C> {
        Rules::summed(&self.policy, &self.counter, self.allowance())
    }
}

/// Keeps recent turns verbatim and folds older ones into a running summary
/// (rollmem's `RollingMemory`, LangChain's `ConversationSummaryBufferMemory`).
///
/// When the buffer passes `max_tokens`, its oldest whole units are folded into
/// the summary with one summarizer call (previous summary + evicted turns, the
/// summarizer told its allowance: the policy's `max_summary_tokens`, else
/// `max_tokens`), and only then removed; with a
/// [`low_water`](Settings::low_water) mark, down to the mark. A longer
/// summary is cut to the allowance at a word boundary, so `messages()` stays
/// within `max_tokens` plus the summary's cap. The summary's size is its
/// text's count plus its ledger entries' counts, each entry counted once
/// when it entered: with a counter that is not additive (BPE), the whole can
/// count a few tokens differently from that sum. Without a summarizer
/// evicted turns are dropped. The buffer is left opening with a user turn
/// when it can be, and the latest unit stays even over budget.
///
/// Each message is counted once, when it is added (or restored), and the
/// buffer's total is kept running: an add costs the same at the ten-thousandth
/// turn as at the first.
///
/// # Examples
///
/// ```
/// use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
/// use chatfold::SummaryRequest;
///
/// let summarize = |request: &SummaryRequest<'_>| {
///     let mut summary = request.previous_summary().unwrap_or("").to_owned();
///     for m in request.messages() {
///         summary.push_str(&format!(" [{}]", m.text()));
///     }
///     Ok::<_, std::convert::Infallible>(summary.trim().to_owned())
/// };
/// let mut memory = RollingMemory::new(Settings::new(30).summarizer(summarize))?;
/// memory.add_user("Hi, I'm planning a trip to Korea.")?;
/// memory.add_assistant("Great! When are you going?")?;
/// memory.add_user("In May, for two weeks.")?;
/// assert_eq!(memory.summary(), "[Hi, I'm planning a trip to Korea.] [Great! When are you going?]");
/// assert_eq!(memory.buffer().len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct RollingMemory<S = Discard, C = Heuristic> {
    tracked: Tracked,
    settings: Settings<S, C>,
}

impl<S, C: TokenCounter> RollingMemory<S, C> {
    /// An empty memory.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) when `max_tokens` is 0 or the policy is invalid.
    pub fn new(settings: Settings<S, C>) -> Result<Self> {
        RollingMemory::from_state(State::default(), settings)
    }

    /// A memory holding `state` as it is: each buffered message is counted
    /// once, and nothing is summarized or dropped until the next add.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn from_state(state: State, settings: Settings<S, C>) -> Result<Self> {
        settings.validate()?;
        Ok(RollingMemory {
            tracked: settings.buffer(state),
            settings,
        })
    }
}

impl<S, C> RollingMemory<S, C> {
    /// The buffer's budget.
    pub fn max_tokens(&self) -> usize {
        self.settings.max_tokens
    }

    /// Tokens in the buffer now.
    pub fn buffer_tokens(&self) -> usize {
        self.tracked.total()
    }
}

impl<S, C> Memory for RollingMemory<S, C> {
    fn state(&self) -> Cow<'_, State> {
        Cow::Borrowed(&self.tracked.state)
    }

    fn policy(&self) -> &FoldPolicy {
        &self.settings.policy
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
        let settings = &self.settings;
        let tokens = settings.counter.count_message(&message);
        self.tracked.push(message, Some(tokens));
        if self.tracked.total() <= settings.max_tokens {
            return Ok(());
        }
        let n = self.tracked.evict_count(settings.fold_to());
        let Some(summarizer) = &settings.summarizer else {
            self.tracked.drop_front(n);
            return Ok(());
        };
        let rules = settings.rules();
        let Some((ticket, request)) = self.tracked.begin(n, rules) else {
            return Ok(());
        };
        let answer = summarizer.summarize(&request).map_err(|e| e.into());
        drop(request);
        let summary = self.tracked.complete(&ticket, answer, rules);
        match self.tracked.land(ticket, summary) {
            Landed::Failed { error, .. } => Err(error),
            Landed::Folded { .. } | Landed::Stale => Ok(()),
        }
    }

    fn clear(&mut self) {
        self.tracked.clear();
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
/// use chatfold::memory::{AsyncRollingMemory, Memory, AsyncRemember, Settings};
/// use chatfold::SummaryRequest;
///
/// let summarize = async |request: SummaryRequest<'_>| {
///     Ok::<_, std::convert::Infallible>(format!("{} older turns", request.messages().len()))
/// };
/// let memory = AsyncRollingMemory::new(Settings::new(20).summarizer(summarize))?;
/// pollster::block_on(async {
///     for i in 0..5 {
///         memory.add_user(format!("turn number {i}")).await?;
///     }
///     Ok::<(), chatfold::Error>(())
/// })?;
/// // Past 20 tokens, folded down to 10 (half): one call for two turns.
/// assert_eq!(memory.summary(), "2 older turns");
/// assert_eq!(memory.buffer().len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct AsyncRollingMemory<S = Discard, C = Heuristic> {
    cell: Mutex<Tracked>,
    settings: Settings<S, C>,
}

impl<S, C: TokenCounter> AsyncRollingMemory<S, C> {
    /// An empty memory.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) when `max_tokens` is 0 or the policy is invalid.
    pub fn new(settings: Settings<S, C>) -> Result<Self> {
        AsyncRollingMemory::from_state(State::default(), settings)
    }

    /// A memory holding `state` as it is: each buffered message is counted
    /// once, and nothing is summarized or dropped until the next add.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn from_state(state: State, settings: Settings<S, C>) -> Result<Self> {
        settings.validate()?;
        Ok(AsyncRollingMemory {
            cell: Mutex::new(settings.buffer(state)),
            settings,
        })
    }
}

impl<S, C> AsyncRollingMemory<S, C> {
    /// The buffer's budget.
    pub fn max_tokens(&self) -> usize {
        self.settings.max_tokens
    }

    /// Tokens in the buffer now.
    pub fn buffer_tokens(&self) -> usize {
        lock(&self.cell).total()
    }
}

super::locked_memory!(AsyncRollingMemory, |m| &m.settings.policy);

impl<S, C> AsyncRemember for AsyncRollingMemory<S, C>
where
    S: AsyncSummarizer + Sync,
    C: TokenCounter + Sync,
{
    async fn add_message(&self, message: Message) -> Result<()> {
        let settings = &self.settings;
        let tokens = settings.counter.count_message(&message);
        lock(&self.cell).push(message, Some(tokens));
        let (max, to) = (settings.max_tokens, settings.fold_to());
        let due = |buffer: &mut Tracked| {
            if buffer.total() <= max {
                0
            } else {
                buffer.evict_count(to)
            }
        };
        let Some(summarizer) = &settings.summarizer else {
            let mut buffer = lock(&self.cell);
            let n = due(&mut buffer);
            buffer.drop_front(n);
            return Ok(());
        };
        settle(&self.cell, summarizer, settings.rules(), due).await
    }

    fn clear(&self) {
        lock(&self.cell).clear();
    }
}
