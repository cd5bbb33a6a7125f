//! The worker: one fold at a time, in the background or through `fold_now`.

use std::fmt;
use std::future::{Future, poll_fn};
use std::panic::{self, AssertUnwindSafe};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{Core, TieredSettings, Tiers};
use crate::count::TokenCounter;
use crate::error::{BoxError, Error};
use crate::memory::tracked::{self, Landed, fold_unlocked};
use crate::summarize::AsyncSummarizer;

/// The most adds a retry waits for after consecutive failures.
const MAX_BACKOFF_ADDS: usize = 64;

/// Folds a [`TieredMemory`](super::TieredMemory)'s working buffer in the background.
///
/// A future: spawn it once, on any runtime (`tokio::spawn(worker)`,
/// `smol::spawn(worker).detach()`, ...). It ends when its memory is dropped,
/// abandoning a summarizer call in flight.
pub struct Worker {
    pub(super) future: Pin<Box<dyn Future<Output = ()> + Send>>,
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

/// What one fold step did.
pub(super) enum Step {
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

impl<S: AsyncSummarizer, C: TokenCounter> Core<S, C> {
    /// Folds one chunk, if one is due. `in_worker`: give up when the memory
    /// is dropped, and take a panicking summarizer for a failed one (there is
    /// no caller for the panic to reach).
    pub(super) async fn fold_step(&self, in_worker: bool) -> Step {
        let settings = &self.settings;
        let due = |tiers: &mut Tiers| {
            // Once a drain, as it starts.
            let starts = !tiers.draining && tiers.tracked.total() > settings.soft_limit_tokens;
            if let (Some(clearing), true) = (&settings.clear_tool_results, starts) {
                tiers.clear_tool_results(clearing, &settings.counter);
            }
            tiers.chunk(settings)
        };
        let call = |request| async move {
            let mut call = pin!(self.summarizer.summarize(request));
            poll_fn(|cx| {
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
            .await
        };
        let after = |tiers: &mut Tiers, landed| match landed {
            Landed::Folded { n, tokens } => {
                tiers.summary_tokens = tokens;
                let stats = &mut tiers.stats;
                stats.folds_done += 1;
                stats.messages_folded += n as u64;
                stats.consecutive_failures = 0;
                tiers.wait_adds = 0;
                Step::Folded
            }
            Landed::Stale => Step::Folded, // cleared while the summarizer ran: the clear wins
            Landed::Failed { n, error } => {
                tiers.failed(&error, n, settings);
                Step::Failed(error)
            }
        };
        match fold_unlocked(&self.tiers, self.rules(), due, call, after).await {
            tracked::Step::Idle => Step::Idle,
            tracked::Step::Busy => Step::Busy,
            tracked::Step::Abandoned => Step::Closed,
            tracked::Step::Landed(step) => step,
        }
    }
}

impl Tiers {
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
            self.tracked.drop_front(n);
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

/// The worker's loop: wait for a signal, fold until idle or failing, again.
pub(super) async fn work<S: AsyncSummarizer, C: TokenCounter>(core: Arc<Core<S, C>>) {
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
