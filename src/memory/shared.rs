//! The state behind the async memories, and their one-fold-at-a-time engine.

use std::sync::{Mutex, MutexGuard, PoisonError};

use super::{State, fold_request, new_summary};
use crate::count::TokenCounter;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::policy::FoldPolicy;
use crate::summarize::AsyncSummarizer;

/// A memory's state with per-message token counts (empty when unused).
#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub state: State,
    /// Tokens of each buffered message, counted once when it was added.
    pub tokens: Vec<usize>,
    /// Sum of `tokens`.
    pub total: usize,
    /// Bumped by `clear`: a fold that started before it is discarded.
    epoch: u64,
    /// Whether a fold is in flight.
    folding: bool,
}

impl Inner {
    pub(crate) fn new(state: State, tokens: Vec<usize>) -> Self {
        let total = tokens.iter().fold(0usize, |sum, t| sum.saturating_add(*t));
        Inner {
            state,
            tokens,
            total,
            epoch: 0,
            folding: false,
        }
    }

    pub(crate) fn push(&mut self, message: Message, tokens: Option<usize>) {
        self.state.buffer.push(message);
        if let Some(t) = tokens {
            self.tokens.push(t);
            self.total = self.total.saturating_add(t);
        }
    }

    /// Drops the first `n` buffered messages (and their counts).
    pub(crate) fn drop_front(&mut self, n: usize) {
        self.state.buffer.drain(..n);
        let n = n.min(self.tokens.len());
        let gone = self
            .tokens
            .drain(..n)
            .fold(0usize, |sum, t| sum.saturating_add(t));
        self.total = self.total.saturating_sub(gone);
    }

    pub(crate) fn clear(&mut self) {
        self.state.clear();
        self.tokens.clear();
        self.total = 0;
        self.epoch = self.epoch.wrapping_add(1);
    }
}

/// [`Inner`] behind a mutex, for memories used through `&self`.
///
/// The lock is only held for bookkeeping, never across a summarizer call, so
/// adds and reads go on while a fold is in flight.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    inner: Mutex<Inner>,
}

impl Shared {
    pub(crate) fn new(inner: Inner) -> Self {
        Shared {
            inner: Mutex::new(inner),
        }
    }

    /// The state, even if a thread panicked while holding the lock: every
    /// change under the lock is complete before anything that could panic.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Folds the first `evict(inner)` messages into the summary, one
    /// summarizer call at a time, until nothing more is to be evicted.
    ///
    /// When a fold is already in flight this returns at once: the fold in
    /// flight looks again when it completes, so it picks up what was added
    /// meanwhile. Without a summarizer, evicted messages are dropped.
    /// `fold` is the memory's policy, counter and summary allowance: the new
    /// summary is checked, given its ledger and cut by them.
    pub(crate) async fn settle<S, C>(
        &self,
        summarizer: Option<&S>,
        fold: (&FoldPolicy, &C, usize),
        evict: impl Fn(&Inner) -> usize,
    ) -> Result<()>
    where
        S: AsyncSummarizer + ?Sized,
        C: TokenCounter + ?Sized,
    {
        let (policy, counter, allowance) = fold;
        let Some(summarizer) = summarizer else {
            let mut inner = self.lock();
            let n = evict(&inner);
            inner.drop_front(n);
            return Ok(());
        };
        loop {
            let (request, entries, n, epoch) = {
                let mut inner = self.lock();
                if inner.folding {
                    return Ok(());
                }
                let n = evict(&inner);
                if n == 0 {
                    return Ok(());
                }
                inner.folding = true;
                let evicted = &inner.state.buffer[..n];
                let (request, entries) =
                    fold_request(policy, &inner.state.summary, evicted, allowance, counter);
                (request.into_owned(), entries, n, inner.epoch)
            };
            let guard = InFlight { shared: self };
            let result = summarizer.summarize(request).await;
            // Checked and cut before taking the lock: adds never wait on it.
            let summary = result
                .map_err(|e| Error::Summarize(e.into()))
                .and_then(|text| new_summary(policy, text, &entries, allowance, counter));
            let mut inner = self.lock();
            inner.folding = false;
            std::mem::forget(guard);
            if inner.epoch != epoch {
                // Cleared while the summarizer ran: the clear wins.
                return Ok(());
            }
            let summary = summary?;
            // Adds only append, so the first `n` messages are still the folded ones.
            inner.state.summary = summary;
            inner.drop_front(n);
        }
    }
}

/// Marks the fold done if its future is dropped (cancelled) mid-flight,
/// leaving the state as it was.
struct InFlight<'a> {
    shared: &'a Shared,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.shared.lock().folding = false;
    }
}
