//! A memory's state as its folds see it: each buffered message's tokens,
//! the messages that make tool calls, the summary's ledger read once, and
//! the fold in flight.
//!
//! A memory's fold is [`Tracked::begin`] (choose the units, note the epoch),
//! the summarizer's call, then [`Tracked::land`] (commit or discard). The
//! sync memories run the three in a row; the async ones release their lock
//! around the call through [`fold_unlocked`], which the tiered memory's
//! worker runs too. The summary itself is checked and cut by the floor's
//! [`FoldPolicy`], as the compactor's are.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use crate::count::TokenCounter;
use crate::error::{BoxError, Error, Result};
use crate::fold::ledger::{self, Entries, Tier};
use crate::fold::pins::{self, Past, Pin};
use crate::fold::policy::{Fitted, FoldPolicy, Listing};
use crate::fold::request::SummaryRequest;
use crate::fold::units;
use crate::memory::State;
use crate::message::Message;

/// How a memory's folds are checked and cut: its policy, its counter, the
/// summarizer's allowance, and whether the summary is counted whole
/// (`exact`) or as its prose and its entries, each counted once.
#[derive(Debug)]
pub(crate) struct Rules<'a, C: ?Sized> {
    pub policy: &'a FoldPolicy,
    pub counter: &'a C,
    pub allowance: usize,
    pub exact: bool,
}

impl<C: ?Sized> Clone for Rules<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: ?Sized> Copy for Rules<'_, C> {}

impl<'a, C: ?Sized> Rules<'a, C> {
    /// The rules of a memory that folds on almost every add: the summary
    /// counted as its text and its entries (`exact: false`).
    pub(crate) fn summed(policy: &'a FoldPolicy, counter: &'a C, allowance: usize) -> Self {
        Rules {
            policy,
            counter,
            allowance,
            exact: false,
        }
    }
}

/// A memory's fold in flight: how many messages it takes from the front, the
/// epoch it began in, and the ledger's candidates: its folded messages'
/// entries and the memory's, ranked together.
#[derive(Debug)]
pub(crate) struct Ticket {
    n: usize,
    /// The pinned messages among the first `n`, which stay.
    kept: Vec<usize>,
    epoch: u64,
    candidates: Entries,
}

/// A memory's new summary, and what its ledger becomes: the candidates,
/// less those the summary had no room for, at most `cap` of them.
#[derive(Debug)]
pub(crate) struct Completed {
    fitted: Fitted,
    /// The most entries the memory keeps ([`FoldPolicy::max_entries`]).
    cap: usize,
}

/// What landing a fold did.
#[derive(Debug)]
pub(crate) enum Landed {
    /// The summary was replaced and the first `n` messages dropped; the
    /// summary message takes `tokens`.
    Folded { n: usize, tokens: usize },
    /// The memory was cleared while the summarizer ran: the clear wins.
    Stale,
    /// The summarizer failed (or answered blank); nothing changed.
    Failed { n: usize, error: Error },
}

/// A memory's state with each buffered message's tokens (when it counts
/// them), the messages that make tool calls, its ledger, and its fold in
/// flight.
///
/// The ledger is the summary's section read once, with each entry's tier
/// and tokens (and the identifiers its prose holds, which a later summary
/// may drop): a fold ranks the entries of the messages it folds, found
/// then, with the memory's, and counts only the new ones.
///
/// Every change is complete before the method returns, and nothing in it can
/// panic or wait: a memory behind a lock can always be used again.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    pub state: State,
    /// Tokens of each buffered message, counted once when it was added;
    /// empty when the memory does not count.
    tokens: Vec<usize>,
    /// Sum of `tokens`.
    total: usize,
    /// Indices of the buffered messages that make tool calls, kept as the
    /// buffer changes so that no add reads the whole buffer.
    callers: Vec<usize>,
    /// The summary's ledger, as its section lists it.
    ledger: Entries,
    /// Bytes of the summary that are its prose (its section follows).
    prose_len: usize,
    /// Bumped by `clear`: a fold that began before it is discarded.
    epoch: u64,
    /// Whether a fold is in flight.
    folding: bool,
    /// The messages a fold leaves in the buffer wherever they stand.
    pins: Vec<Pin>,
}

impl Tracked {
    /// `state`, each buffered message counted once by `counter` when
    /// `count` says so, its summary's ledger read with `policy`'s patterns.
    pub(crate) fn new<C: TokenCounter + ?Sized>(
        state: State,
        counter: &C,
        count: bool,
        policy: &FoldPolicy,
    ) -> Self {
        let tokens: Vec<usize> = match count {
            true => state.buffer.iter().map(|m| counter.count_message(m)).collect(),
            false => Vec::new(),
        };
        let mut tracked = Tracked {
            total: tokens.iter().fold(0usize, |sum, &t| sum.saturating_add(t)),
            tokens,
            callers: units::callers(&state.buffer),
            state,
            ledger: Entries::default(),
            prose_len: 0,
            epoch: 0,
            folding: false,
            pins: Vec::new(),
        };
        tracked.read_ledger(policy, counter);
        tracked
    }

    /// Reads the summary's ledger (and its prose's identifiers) into the
    /// memory's own, counted by `counter`.
    pub(crate) fn read_ledger<C: TokenCounter + ?Sized>(&mut self, policy: &FoldPolicy, counter: &C) {
        let (prose, mut listed) = ledger::split(&self.state.summary);
        self.prose_len = prose.len();
        let found = ledger::identifiers(prose, &policy.ledger_patterns);
        for found in found.iter().rev() {
            if !listed.iter().any(|(t, _)| ledger::same(t, found)) {
                // Kept by the summarizer's prose: named again.
                listed.push((found, Tier::Repeated));
            }
        }
        self.ledger = Entries::counted(&listed, counter);
    }

    /// Appends `message`, of `tokens` when the memory counts.
    pub(crate) fn push(&mut self, message: Message, tokens: Option<usize>) {
        if message.makes_calls() {
            self.callers.push(self.state.buffer.len());
        }
        self.state.buffer.push(message);
        if let Some(t) = tokens {
            self.tokens.push(t);
            self.total = self.total.saturating_add(t);
        }
    }

    /// Keeps the messages `pins` name in the buffer through every fold and
    /// eviction (DESIGN rule 11), at its front, in their order.
    pub(crate) fn pin(&mut self, pins: Vec<Pin>) {
        self.pins = pins;
    }

    /// The buffered messages the pins name now, ascending.
    fn pinned(&self) -> Vec<usize> {
        let (buffer, callers) = (&self.state.buffer, &self.callers);
        pins::resolve(buffer, &self.pins, callers, |_| false, Past::Ignored).unwrap_or_default()
    }

    /// The pinned messages among the first `n`.
    fn pinned_before(&self, n: usize) -> Vec<usize> {
        let mut pinned = self.pinned();
        pinned.retain(|&i| i < n);
        pinned
    }

    /// Drops the first `n` buffered messages (and their counts), but the
    /// pinned ones.
    pub(crate) fn drop_front(&mut self, n: usize) {
        let kept = self.pinned_before(n);
        self.drop_front_keeping(n, &kept);
    }

    /// Drops the first `n` buffered messages (and their counts) but those at
    /// `kept` (ascending), which then open the buffer.
    fn drop_front_keeping(&mut self, n: usize, kept: &[usize]) {
        let n = n.min(self.state.buffer.len());
        let stay: Vec<(Message, Option<usize>)> = (kept.iter().filter(|&&i| i < n))
            .map(|&i| (self.state.buffer[i].clone(), self.tokens.get(i).copied()))
            .collect();
        self.state.buffer.drain(..n);
        self.callers.retain(|&c| c >= n);
        self.callers.iter_mut().for_each(|c| *c -= n);
        let counted = n.min(self.tokens.len());
        let gone = self.tokens.drain(..counted).fold(0usize, usize::saturating_add);
        self.total = self.total.saturating_sub(gone);
        if stay.is_empty() {
            return;
        }
        self.callers.iter_mut().for_each(|c| *c += stay.len());
        let callers: Vec<usize> = (0..stay.len()).filter(|&k| stay[k].0.makes_calls()).collect();
        self.callers.splice(0..0, callers);
        // Counted when the memory counts (every message or none).
        let counts: Vec<usize> = stay.iter().filter_map(|(_, t)| *t).collect();
        self.total = counts.iter().fold(self.total, |t, &x| t.saturating_add(x));
        self.tokens.splice(0..0, counts);
        self.state.buffer.splice(0..0, stay.into_iter().map(|(m, _)| m));
    }

    /// Forgets the summary and the buffer (pinned system messages stay); a
    /// fold in flight will be discarded when it lands.
    pub(crate) fn clear(&mut self) {
        self.state.clear();
        self.tokens.clear();
        self.callers.clear();
        self.ledger = Entries::default();
        self.prose_len = 0;
        self.total = 0;
        self.epoch = self.epoch.wrapping_add(1);
    }

    /// Replaces message `i` (counted again as `tokens`).
    pub(crate) fn replace(&mut self, i: usize, message: Message, tokens: usize) {
        if let Some(old) = self.tokens.get_mut(i) {
            self.total = self.total.saturating_sub(*old).saturating_add(tokens);
            *old = tokens;
        }
        if let Some(slot) = self.state.buffer.get_mut(i) {
            *slot = message;
        }
    }

    /// The buffered messages.
    pub(crate) fn messages(&self) -> &[Message] {
        &self.state.buffer
    }

    /// Tokens of the buffer (0 when the memory does not count).
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Tokens of each buffered message.
    pub(crate) fn tokens(&self) -> &[usize] {
        &self.tokens
    }

    /// Whether a fold is in flight.
    pub(crate) fn folding(&self) -> bool {
        self.folding
    }

    /// How many messages must leave the front so that the rest costs at most
    /// `limit` tokens (whole units, aligned, the latest kept); the pinned
    /// ones among them stay, and count against `limit`.
    pub(crate) fn evict_count(&self, limit: usize) -> usize {
        let pinned = self.pinned();
        let (cost, limit) = self.costs(&pinned, limit);
        units::evict_count(&self.state.buffer, &self.callers, cost, limit)
    }

    /// As [`evict_count`](Self::evict_count), with no message pinned: what
    /// leaves a view held to a hard limit.
    pub(crate) fn evict_count_unpinned(&self, limit: usize) -> usize {
        let cost = |i: usize| self.tokens.get(i).copied().unwrap_or(0);
        units::evict_count(&self.state.buffer, &self.callers, cost, limit)
    }

    /// Each message's cost and what is left of `limit` once the `pinned`
    /// messages, which stay whatever the cut, have taken theirs.
    fn costs<'p>(&'p self, pinned: &'p [usize], limit: usize) -> (impl Fn(usize) -> usize + 'p, usize) {
        let tokens = |i: usize| self.tokens.get(i).copied().unwrap_or(0);
        let fixed = pinned.iter().fold(0usize, |t, &i| t.saturating_add(tokens(i)));
        let cost = move |i: usize| match pinned.binary_search(&i) {
            Ok(_) => 0,
            Err(_) => tokens(i),
        };
        (cost, limit.saturating_sub(fixed))
    }

    /// How many messages the next fold of at most `limits` (messages,
    /// tokens) takes from the front (see [`units::chunk`]); the pinned ones
    /// among them stay.
    pub(crate) fn chunk(&self, limits: (usize, usize)) -> usize {
        let pinned = self.pinned();
        let (cost, _) = self.costs(&pinned, 0);
        units::chunk(&self.state.buffer, &self.callers, cost, limits)
    }

    /// Begins folding the first `n` messages onto the summary: the ticket
    /// and the summarizer's request, borrowing the buffer (its ledger is the
    /// memory's, before this fold's entries join it). `None` when `n` is 0.
    /// For a memory used through `&mut self`, which lands the fold before
    /// anything else can change it.
    pub(crate) fn begin<'s, C: TokenCounter + ?Sized>(
        &'s self,
        n: usize,
        rules: Rules<'s, C>,
    ) -> Option<(Ticket, SummaryRequest<'s>)> {
        let n = n.min(self.state.buffer.len());
        let kept = self.pinned_before(n);
        if n == kept.len() {
            // Nothing to fold (or only pinned messages).
            return None;
        }
        let folded = &self.state.buffer[..n];
        let policy = rules.policy;
        let prose = &self.state.summary[..self.prose_len];
        let candidates = match policy.ledger {
            true => {
                let allowance = rules.allowance;
                let found = ledger::candidates(
                    (0..n)
                        .filter(|i| kept.binary_search(i).is_err())
                        .map(|i| &folded[i]),
                    "",
                    &self.ledger.listed(),
                    &policy.ledger_patterns,
                    policy.max_entries(allowance),
                    allowance.saturating_mul(8),
                    // A memory folds each message once: nothing to remember.
                    false,
                );
                self.ledger.ranked(&found, rules.counter)
            }
            false => Entries::default(),
        };
        let told = match policy.ledger {
            true => {
                let sum = candidates.tokens.iter().map(|&t| t as u128).sum();
                let (tokens, tiers) = (&candidates.tokens, &candidates.tiers);
                policy.told_allowance(tokens, tiers, (tokens.len(), sum), rules.allowance, rules.counter)
            }
            false => rules.allowance,
        };
        let previous = (!prose.is_empty()).then_some(Cow::Borrowed(prose));
        let listed = Cow::Owned(candidates.texts.clone());
        let request = SummaryRequest::skipping(previous, folded, kept.clone(), told)
            .with_ledger(listed)
            .with_counter(rules.counter.shared());
        let ticket = Ticket {
            n,
            kept,
            epoch: self.epoch,
            candidates,
        };
        Some((ticket, request))
    }

    /// The summarizer's answer as the new summary: checked (trimmed, not
    /// blank), the ledger (this fold's entries, then the memory's) listed in
    /// what the prose leaves, within the summary's allowance.
    pub(crate) fn complete<C: TokenCounter + ?Sized>(
        &self,
        ticket: &Ticket,
        answer: std::result::Result<String, BoxError>,
        rules: Rules<'_, C>,
    ) -> Result<Completed> {
        let policy = rules.policy;
        let text = policy.accept(answer.map_err(Error::Summarize)?)?;
        let limit = policy.overhead(rules.counter).saturating_add(rules.allowance);
        let (candidates, counter) = (&ticket.candidates, rules.counter);
        let frame = policy.frame(&text, (limit, limit), counter);
        let texts: Vec<&str> = candidates.texts.iter().map(|t| &**t).collect();
        let listing = Listing {
            texts: &texts,
            tokens: &candidates.tokens,
            tiers: &candidates.tiers,
        };
        let fitted = policy.fit_framed(&text, listing, &|_| false, frame, counter, rules.exact);
        Ok(Completed {
            fitted,
            cap: policy.max_entries(rules.allowance),
        })
    }

    /// Begins a fold that runs while the lock is released: as
    /// [`begin`](Self::begin), the request owned, and the fold marked in
    /// flight. `None` when one is in flight already or `n` is 0.
    fn begin_unlocked<C: TokenCounter + ?Sized>(
        &mut self,
        n: usize,
        rules: Rules<'_, C>,
    ) -> Option<(Ticket, SummaryRequest<'static>)> {
        if self.folding {
            return None;
        }
        let (ticket, request) = self.begin(n, rules)?;
        let request = request.into_owned();
        self.folding = true;
        Some((ticket, request))
    }

    /// Lands a fold: its summary (made by [`complete`](Self::complete))
    /// replaces the old one, its ledger the memory's, and the folded
    /// messages leave, unless the memory was cleared meanwhile. Adds only
    /// append, so the first `n` messages are still the folded ones.
    pub(crate) fn land(&mut self, ticket: Ticket, summary: Result<Completed>) -> Landed {
        self.folding = false;
        if ticket.epoch != self.epoch {
            return Landed::Stale;
        }
        match summary {
            Ok(Completed { fitted, cap }) => {
                self.ledger = ticket.candidates.without(&fitted.dropped, cap);
                self.state.summary = fitted.body;
                self.prose_len = fitted.prose_len;
                self.drop_front_keeping(ticket.n, &ticket.kept);
                Landed::Folded {
                    n: ticket.n,
                    tokens: fitted.tokens,
                }
            }
            Err(error) => Landed::Failed { n: ticket.n, error },
        }
    }
}

/// What holds a [`Tracked`] behind a lock.
pub(crate) trait Holds {
    /// The buffer.
    fn tracked(&mut self) -> &mut Tracked;

    /// Called under the lock when a fold ends (landed or abandoned): the
    /// tasks to wake.
    fn fold_ended(&mut self) -> Vec<Waker> {
        Vec::new()
    }
}

impl Holds for Tracked {
    fn tracked(&mut self) -> &mut Tracked {
        self
    }
}

/// `mutex`'s contents, even if a thread panicked while holding it: every
/// change under the lock is complete before anything that could panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Ends the fold if its future is dropped (cancelled) mid-flight, leaving
/// the state as it was.
struct InFlight<'a, T: Holds> {
    cell: &'a Mutex<T>,
}

impl<T: Holds> Drop for InFlight<'_, T> {
    fn drop(&mut self) {
        let waiters = {
            let mut held = lock(self.cell);
            held.tracked().folding = false;
            held.fold_ended()
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

/// What one unlocked fold did.
#[derive(Debug)]
pub(crate) enum Step<R> {
    /// Nothing to fold.
    Idle,
    /// Another fold is in flight.
    Busy,
    /// The call gave up (`None`): the fold was abandoned, nothing changed.
    Abandoned,
    /// The fold landed; `R` is what the caller made of it under the lock.
    Landed(R),
}

/// One fold of a memory behind `cell`, the lock released around the
/// summarizer's call: under the lock, `due` says how many messages to fold
/// (it may prepare the buffer first); `call` makes the summarizer's call
/// (`None`: give up); the answer is checked and cut without the lock; under
/// the lock again the fold lands and `after` books it. A dropped future
/// leaves the state as it was. Every memory that folds through `&self` runs
/// this.
pub(crate) async fn fold_unlocked<T, C, F, R>(
    cell: &Mutex<T>,
    rules: Rules<'_, C>,
    due: impl FnOnce(&mut T) -> usize,
    call: impl FnOnce(SummaryRequest<'static>) -> F,
    after: impl FnOnce(&mut T, Landed) -> R,
) -> Step<R>
where
    T: Holds,
    C: TokenCounter + ?Sized,
    F: Future<Output = Option<std::result::Result<String, BoxError>>>,
{
    let (ticket, request) = {
        let mut held = lock(cell);
        if held.tracked().folding {
            return Step::Busy;
        }
        let n = due(&mut held);
        match held.tracked().begin_unlocked(n, rules) {
            Some(begun) => begun,
            None => return Step::Idle,
        }
    };
    let guard = InFlight { cell };
    let Some(answer) = call(request).await else {
        return Step::Abandoned; // the guard ends the fold
    };
    std::mem::forget(guard);
    let (result, waiters) = {
        // Checked, cut and counted under the lock: the ledger is the
        // memory's, and an add waits for a summary's worth of work at most.
        let mut held = lock(cell);
        let summary = held.tracked().complete(&ticket, answer, rules);
        let landed = held.tracked().land(ticket, summary);
        let waiters = held.fold_ended();
        (after(&mut held, landed), waiters)
    };
    waiters.into_iter().for_each(Waker::wake);
    Step::Landed(result)
}

#[cfg(test)]
mod tests;
