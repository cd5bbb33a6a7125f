//! The fold engine: one fold's steps, and a memory's buffer, with no I/O.
//!
//! A fold has two steps around the summarizer's call:
//!
//! - **begin** ([`Fold::begin`]): the previous summary's prose and the
//!   ledger's candidates, found once, and the allowance left to the
//!   summarizer's own text; [`Fold::request`] is what the summarizer gets;
//! - **complete** ([`Fold::complete`]): the summarizer's text checked by the
//!   policy (trimmed, not empty), given its ledger section and cut to its
//!   limit.
//!
//! The compactor's plan runs these steps over the folded part of a history;
//! every memory runs them over the front of its [`Buffer`]. A memory's fold
//! is [`Buffer::begin`] (choose the units, note the epoch), the call, then
//! [`Buffer::land`] (commit or discard). The sync memories run the three in a
//! row; the async ones release their lock around the call through
//! [`fold_unlocked`], which the tiered memory's worker runs too.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use crate::count::TokenCounter;
use crate::error::{BoxError, Error, Result};
use crate::fold::ledger::{self, Entries, Kept, LedgerEntry};
use crate::fold::policy::{Fitted, FoldPolicy};
use crate::fold::units;
use crate::memory::State;
use crate::message::Message;
use crate::summarize::SummaryRequest;

/// A fold begun: the previous summaries' prose, the ledger's candidate
/// entries (each counted once), and the allowance left to the summarizer's
/// text.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fold<'a> {
    /// The previous summaries' prose (their ledgers taken out), if any.
    pub prose: Option<Cow<'a, str>>,
    /// The ledger's candidates, newest first, with their tokens.
    pub entries: Entries,
    /// Tokens the summarizer's own text may take.
    pub allowance: usize,
}

impl<'a> Fold<'a> {
    /// Begins a fold of `folded` onto the summary bodies `previous` (oldest
    /// first) with `allowance` tokens of summary text.
    pub(crate) fn begin<'m, C: TokenCounter + ?Sized>(
        policy: &FoldPolicy,
        previous: &[Cow<'a, str>],
        folded: impl DoubleEndedIterator<Item = &'m Message>,
        allowance: usize,
        counter: &C,
    ) -> Self {
        policy.begin(previous, folded, allowance, counter)
    }

    /// The summarizer's request for `messages` (less the indices in `skip`,
    /// sorted), on `previous` (the prose this fold began with when `None`).
    pub(crate) fn request<'m>(
        &'m self,
        previous: Option<Cow<'m, str>>,
        messages: &'m [Message],
        skip: Vec<usize>,
        counter: Option<&'m (dyn TokenCounter + Sync)>,
    ) -> SummaryRequest<'m> {
        let previous = previous.or_else(|| self.prose.as_deref().map(Cow::Borrowed));
        SummaryRequest::skipping(previous, messages, skip, self.allowance)
            .with_ledger(Cow::Borrowed(&self.entries.texts))
            .with_counter(counter)
    }

    /// The summary message for the summarizer's answer: checked (trimmed,
    /// not blank), its ledger section added (less the entries `held` says,
    /// by their place, the turns kept beside it hold verbatim), the whole
    /// cut to `limit` tokens, counted exactly.
    ///
    /// # Errors
    ///
    /// [`Error::EmptySummary`] for a blank answer.
    pub(crate) fn complete<C: TokenCounter + ?Sized>(
        &self,
        policy: &FoldPolicy,
        text: String,
        held: &dyn Fn(usize) -> bool,
        limit: usize,
        counter: &C,
    ) -> Result<Fitted> {
        let text = policy.accept(text)?;
        let texts: Vec<&str> = self.entries.texts.iter().map(|t| &**t).collect();
        Ok(policy.finish(&text, &texts, &self.entries.tokens, held, limit, counter, true))
    }

    /// The same fold, owning its prose.
    pub(crate) fn into_owned(self) -> Fold<'static> {
        Fold {
            prose: self.prose.map(|p| Cow::Owned(p.into_owned())),
            entries: self.entries,
            allowance: self.allowance,
        }
    }
}

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
/// epoch it began in, and the entries its folded messages bring.
#[derive(Debug)]
pub(crate) struct Ticket {
    n: usize,
    epoch: u64,
    fresh: Kept,
}

/// A memory's new summary, and what its ledger becomes: this fold's
/// entries, then the memory's (less those found again), less those the
/// summary had no room for, at most `cap` of them.
#[derive(Debug)]
pub(crate) struct Completed {
    fitted: Fitted,
    /// The memory's entries this fold found again (their indices, ascending).
    again: Vec<usize>,
    /// The most entries the memory keeps ([`FoldPolicy::enough`]).
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
/// The ledger is the summary's section read once, with each entry's tokens
/// (and the identifiers its prose holds, which a later summary may drop):
/// a fold adds the entries of the messages it folds, found then, once each,
/// and no fold reads or counts the section again.
///
/// Every change is complete before the method returns, and nothing in it can
/// panic or wait: a memory behind a lock can always be used again.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    pub state: State,
    /// Tokens of each buffered message, counted once when it was added;
    /// empty when the memory does not count.
    tokens: Vec<usize>,
    /// Sum of `tokens`.
    total: usize,
    /// Indices of the buffered messages that make tool calls, kept as the
    /// buffer changes so that no add reads the whole buffer.
    callers: Vec<usize>,
    /// The summary's ledger, newest first, kept rendered.
    ledger: Kept,
    /// Bytes of the summary that are its prose (its section follows).
    prose_len: usize,
    /// Bumped by `clear`: a fold that began before it is discarded.
    epoch: u64,
    /// Whether a fold is in flight.
    folding: bool,
}

impl Buffer {
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
        let mut buffer = Buffer {
            total: tokens.iter().fold(0usize, |sum, &t| sum.saturating_add(t)),
            tokens,
            callers: units::callers(&state.buffer),
            state,
            ledger: Kept::default(),
            prose_len: 0,
            epoch: 0,
            folding: false,
        };
        buffer.read_ledger(policy, counter);
        buffer
    }

    /// Reads the summary's ledger (and its prose's identifiers) into the
    /// memory's own, counted by `counter`.
    pub(crate) fn read_ledger<C: TokenCounter + ?Sized>(&mut self, policy: &FoldPolicy, counter: &C) {
        let (prose, listed) = ledger::split(&self.state.summary);
        self.prose_len = prose.len();
        let mut texts: Vec<LedgerEntry> = listed.into_iter().map(LedgerEntry::from).collect();
        for found in ledger::identifiers(prose, &policy.ledger_patterns)
            .into_iter()
            .rev()
        {
            if !texts.iter().any(|t| ledger::same(t, &found)) {
                texts.push(found);
            }
        }
        self.ledger = Kept::new(Entries::counted(texts, counter));
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

    /// Drops the first `n` buffered messages (and their counts).
    pub(crate) fn drop_front(&mut self, n: usize) {
        let n = n.min(self.state.buffer.len());
        self.state.buffer.drain(..n);
        self.callers.retain(|&c| c >= n);
        self.callers.iter_mut().for_each(|c| *c -= n);
        let counted = n.min(self.tokens.len());
        let gone = self.tokens.drain(..counted).fold(0usize, usize::saturating_add);
        self.total = self.total.saturating_sub(gone);
    }

    /// Forgets the summary and the buffer (pinned system messages stay); a
    /// fold in flight will be discarded when it lands.
    pub(crate) fn clear(&mut self) {
        self.state.clear();
        self.tokens.clear();
        self.callers.clear();
        self.ledger = Kept::default();
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
    /// `limit` tokens (whole units, aligned, the latest kept).
    pub(crate) fn evict_count(&self, limit: usize) -> usize {
        let cost = |i: usize| self.tokens.get(i).copied().unwrap_or(0);
        units::evict_count(&self.state.buffer, &self.callers, cost, limit)
    }

    /// How many messages the next fold of at most `limits` (messages,
    /// tokens) takes from the front (see [`units::chunk`]).
    pub(crate) fn chunk(&self, limits: (usize, usize)) -> usize {
        let cost = |i: usize| self.tokens.get(i).copied().unwrap_or(0);
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
        if n == 0 {
            return None;
        }
        let folded = &self.state.buffer[..n.min(self.state.buffer.len())];
        let policy = rules.policy;
        let prose = &self.state.summary[..self.prose_len];
        let fresh = match policy.ledger {
            true => {
                let allowance = rules.allowance;
                let texts = ledger::candidates(
                    folded.iter(),
                    "",
                    &[],
                    &policy.ledger_patterns,
                    policy.enough(allowance),
                    allowance.saturating_mul(8),
                    // A memory folds each message once: nothing to remember.
                    false,
                );
                Kept::new(Entries::keyed(texts, rules.counter))
            }
            false => Kept::default(),
        };
        let told = match policy.ledger {
            // The section's share, from the entries' counts (a repeated
            // entry counted twice: the summarizer is told a little less).
            true => {
                let (n, sum) = (fresh.len() + self.ledger.len(), fresh.total + self.ledger.total);
                let tokens = fresh
                    .entries
                    .tokens
                    .iter()
                    .chain(&self.ledger.entries.tokens)
                    .copied();
                policy.told(tokens, (n, sum), rules.allowance, rules.counter)
            }
            false => rules.allowance,
        };
        let previous = (!prose.is_empty()).then_some(Cow::Borrowed(prose));
        let listed = match policy.ledger {
            true => Cow::Borrowed(&self.ledger.entries.texts[..]),
            false => Cow::Borrowed(&[][..]),
        };
        let request = SummaryRequest::skipping(previous, folded, Vec::new(), told)
            .with_ledger(listed)
            .with_counter(rules.counter.shared());
        let ticket = Ticket {
            n,
            epoch: self.epoch,
            fresh,
        };
        Some((ticket, request))
    }

    /// The indices of the memory's entries that `fresh` finds again
    /// (ascending).
    fn again(&self, fresh: &Entries) -> Vec<usize> {
        let ledger = &self.ledger.entries;
        let mut again = Vec::new();
        for (key, text) in fresh.keys.iter().zip(&fresh.texts) {
            if !self.ledger.has_key(*key) {
                continue;
            }
            // Blocks without the key are passed whole, in a loop the
            // compiler vectorizes.
            for (b, block) in ledger.keys.chunks(16).enumerate() {
                if block.iter().fold(false, |any, k| any | (k == key)) {
                    let at = (0..block.len()).map(|i| b * 16 + i);
                    again.extend(
                        at.filter(|&i| ledger.keys[i] == *key && ledger::same(text, &ledger.texts[i])),
                    );
                }
            }
        }
        again.sort_unstable();
        again.dedup();
        again
    }

    /// The ledger a fold works on: `fresh` entries first, then the memory's
    /// less those at `again`, as texts and tokens.
    fn merged<'s>(&'s self, fresh: &'s Entries, again: &[usize]) -> (Vec<&'s str>, Vec<usize>) {
        let ledger = &self.ledger.entries;
        let mut texts = Vec::with_capacity(fresh.len() + ledger.len());
        let mut tokens = Vec::with_capacity(texts.capacity());
        texts.extend(fresh.texts.iter().map(|t| &**t));
        tokens.extend_from_slice(&fresh.tokens);
        let mut skip = again.iter().copied().peekable();
        for (i, (t, &n)) in ledger.texts.iter().zip(&ledger.tokens).enumerate() {
            if skip.next_if_eq(&i).is_none() {
                texts.push(&**t);
                tokens.push(n);
            }
        }
        (texts, tokens)
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
        let (fresh, counter) = (&ticket.fresh, rules.counter);
        let frame = policy.frame(&text, limit, counter);
        let (fitted, again) = match policy.ledger {
            false => {
                let fitted = policy.finish_framed(&text, &[], &[], &|_| false, frame, counter, rules.exact);
                (fitted, Vec::new())
            }
            true => {
                let again = self.again(&fresh.entries);
                let kept =
                    policy.finish_kept(&text, fresh, &self.ledger, &again, frame, counter, rules.exact);
                let fitted = kept.unwrap_or_else(|| {
                    let (texts, tokens) = self.merged(&fresh.entries, &again);
                    policy.finish_framed(&text, &texts, &tokens, &|_| false, frame, counter, rules.exact)
                });
                (fitted, again)
            }
        };
        Ok(Completed {
            fitted,
            again,
            cap: policy.enough(rules.allowance),
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
            Ok(Completed { fitted, again, cap }) => {
                let edit = ledger::Edit {
                    again: &again,
                    dropped: &fitted.dropped,
                    cap,
                };
                self.ledger.fold(ticket.fresh, edit);
                self.state.summary = fitted.body;
                self.prose_len = fitted.prose_len;
                self.drop_front(ticket.n);
                Landed::Folded {
                    n: ticket.n,
                    tokens: fitted.tokens,
                }
            }
            Err(error) => Landed::Failed { n: ticket.n, error },
        }
    }
}

/// What holds a [`Buffer`] behind a lock.
pub(crate) trait Holds {
    /// The buffer.
    fn buffer(&mut self) -> &mut Buffer;

    /// Called under the lock when a fold ends (landed or abandoned): the
    /// tasks to wake.
    fn fold_ended(&mut self) -> Vec<Waker> {
        Vec::new()
    }
}

impl Holds for Buffer {
    fn buffer(&mut self) -> &mut Buffer {
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
            held.buffer().folding = false;
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
        if held.buffer().folding {
            return Step::Busy;
        }
        let n = due(&mut held);
        match held.buffer().begin_unlocked(n, rules) {
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
        let summary = held.buffer().complete(&ticket, answer, rules);
        let landed = held.buffer().land(ticket, summary);
        let waiters = held.fold_ended();
        (after(&mut held, landed), waiters)
    };
    waiters.into_iter().for_each(Waker::wake);
    Step::Landed(result)
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::count::Heuristic;
    use crate::message::ToolCall;

    fn rules(policy: &FoldPolicy) -> Rules<'_, Heuristic> {
        Rules {
            policy,
            counter: &Heuristic,
            allowance: 100,
            exact: true,
        }
    }

    fn buffer(messages: Vec<Message>) -> Buffer {
        Buffer::new(State::new("", messages), &Heuristic, true, &FoldPolicy::new())
    }

    #[test]
    fn the_buffer_keeps_its_counts_and_callers_as_it_changes() {
        let call = Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]);
        let mut b = buffer(vec![Message::user("one"), call.clone()]);
        b.push(Message::tool("r", "c1"), Some(5));
        b.push(call, Some(7));
        assert_eq!(b.callers, [1, 3]);
        let total: usize = b.tokens().iter().sum();
        assert_eq!(b.total(), total);
        b.drop_front(2);
        assert_eq!(b.callers, [1]);
        assert_eq!(b.tokens(), &[5, 7]);
        assert_eq!(b.total(), 12);
        b.replace(0, Message::tool("cleared", "c1"), 2);
        assert_eq!(b.total(), 9);
        b.clear();
        assert_eq!((b.messages().len(), b.total(), b.callers.len()), (0, 0, 0));
    }

    #[test]
    fn a_fold_begun_before_a_clear_is_discarded() {
        let policy = FoldPolicy::new();
        let mut b = buffer(vec![Message::user("old turn"), Message::user("new turn")]);
        let (ticket, request) = b.begin(1, rules(&policy)).unwrap();
        assert_eq!(request.messages().count(), 1);
        drop(request);
        let summary = b.complete(&ticket, Ok("the old turn".to_owned()), rules(&policy));
        b.clear();
        b.push(Message::user("after the clear"), Some(3));
        assert!(matches!(b.land(ticket, summary), Landed::Stale));
        assert_eq!(b.messages().len(), 1);
        assert!(b.state.summary.is_empty());
    }

    /// The ledger a fold lands is the fold's (its entries, then the
    /// memory's not found again) less what the summary dropped, at most
    /// `cap`: checked against that rule computed plainly, with entries found
    /// again, dropped for room, and a cap that binds.
    #[test]
    fn a_landed_ledger_is_the_merged_one_less_the_dropped() {
        let listed: Vec<String> = (0..40).map(|i| format!("- /srv/old/file-{i:02}.csv")).collect();
        let summary = format!(
            "Earlier work.{}{}",
            "\n\nExact identifiers (kept verbatim):\n",
            listed.join("\n")
        );
        for (allowance, ledger_percent) in [(60, 100), (100, 33), (400, 100), (30, 10)] {
            let policy = FoldPolicy::new().ledger_percent(ledger_percent);
            let folded =
                Message::user("read /srv/old/file-03.csv and /srv/new/a.csv, then /srv/old/file-17.csv");
            let mut b = Buffer::new(
                State::new(summary.clone(), vec![folded, Message::user("next")]),
                &Heuristic,
                true,
                &policy,
            );
            let rules = Rules {
                allowance,
                ..rules(&policy)
            };
            let (ticket, _) = b.begin(1, rules).unwrap();
            let completed = b.complete(&ticket, Ok("Short.".to_owned()), rules).unwrap();
            let again = b.again(&ticket.fresh.entries);
            let (texts, _) = b.merged(&ticket.fresh.entries, &again);
            let texts: Vec<String> = texts.into_iter().map(str::to_owned).collect();
            let expected: Vec<String> = (0..texts.len())
                .filter(|i| !completed.fitted.dropped.contains(i))
                .map(|i| texts[i].clone())
                .take(completed.cap)
                .collect();
            assert!(matches!(
                b.land(ticket, Ok(completed)),
                Landed::Folded { n: 1, .. }
            ));
            assert_eq!(
                b.ledger.entries.texts, expected,
                "allowance {allowance}, {ledger_percent}%"
            );
            // Found again, an identifier is kept once at most, newest first.
            assert!(
                b.ledger
                    .entries
                    .texts
                    .iter()
                    .filter(|t| t.ends_with("file-03.csv"))
                    .count()
                    <= 1
            );
            assert!(b.ledger.len() == 0 || b.ledger.entries.texts[0] == "/srv/old/file-17.csv");
            assert!(b.ledger.len() <= expected.len().max(1));
        }
    }

    use crate::fold::policy::tests::{POOL, counter};

    proptest::proptest! {
        /// The memory's fold through the ledger it keeps gives the summary
        /// `finish` gives over the merged candidates, whenever it gives one,
        /// and the kept ledger after it is the rule's: the fold's entries,
        /// then the kept ones not found again, less the dropped, at most
        /// the cap, rendered as a section lists them, its sums kept. The
        /// kept ledger may repeat an identifier (a restored summary's).
        #[test]
        fn the_kept_ledger_folds_as_finish_does(
            kept_at in proptest::collection::vec(0usize..POOL.len(), 0..30),
            fresh_at in proptest::collection::vec(0usize..POOL.len(), 0..20),
            prose in proptest::sample::select(vec![
                "Short.", "fixed summary", "We read /srv/a.csv and PROJ-12 today.",
                "The order 42 shipped; see file-0.txt.", "Words only, nothing else at all here.",
                "Été: /données/été.csv, https://例え.jp/パス and 名前: 東京-1.txt.",
                "A long prose about /srv/b.csv and v1.2.3 and PROJ-12 and deadbeef12 and much \
                 more besides, word after word after word, until it must be cut short.",
            ]),
            allowance in 1usize..200,
            percent in proptest::sample::select(vec![10u8, 33, 100]),
            exact in proptest::bool::ANY,
            max in proptest::option::of(0usize..100),
            cap in 0usize..40,
            kind in 0u8..3,
        ) {
            let counter = counter(kind);
            let mut policy = FoldPolicy::new().ledger_percent(percent);
            if let Some(max) = max {
                policy = policy.max_summary_tokens(max);
            }
            let owned = |at: &[usize]| at.iter().map(|&i| POOL[i].to_owned()).collect::<Vec<_>>();
            let mut kept = Kept::new(Entries::counted(owned(&kept_at), &counter));
            // A fold's own entries are each listed once.
            let mut texts: Vec<String> = Vec::new();
            for t in owned(&fresh_at) {
                if !texts.iter().any(|x| ledger::same(x, &t)) {
                    texts.push(t);
                }
            }
            let fresh = Kept::new(Entries::counted(texts, &counter));
            let b = Buffer {
                ledger: kept.clone(),
                ..Buffer::default()
            };
            let again = b.again(&fresh.entries);
            let (texts, tokens) = b.merged(&fresh.entries, &again);
            let limit = policy.overhead(&counter).saturating_add(allowance);
            let reference = policy.finish(prose, &texts, &tokens, &|_| false, limit, &counter, exact);
            let frame = policy.frame(prose, limit, &counter);
            if let Some(fast) = policy.finish_kept(prose, &fresh, &kept, &again, frame, &counter, exact) {
                proptest::prop_assert_eq!(&fast.body, &reference.body);
                proptest::prop_assert_eq!(fast.tokens, reference.tokens);
                proptest::prop_assert_eq!(fast.prose_len, reference.prose_len);
                proptest::prop_assert_eq!(&fast.listed, &reference.listed);
                proptest::prop_assert_eq!(&fast.dropped, &reference.dropped);
                proptest::prop_assert_eq!(fast.truncated, reference.truncated);
            }
            let expected: Vec<String> = (0..texts.len())
                .filter(|i| !reference.dropped.contains(i))
                .map(|i| texts[i].to_owned())
                .take(cap)
                .collect();
            kept.fold(fresh, ledger::Edit { again: &again, dropped: &reference.dropped, cap });
            proptest::prop_assert_eq!(&kept.entries.texts, &expected);
            let rebuilt = Kept::new(kept.entries.clone());
            proptest::prop_assert_eq!(kept, rebuilt);
        }
    }

    #[test]
    fn a_failed_or_blank_answer_changes_nothing() {
        let policy = FoldPolicy::new();
        let mut b = buffer(vec![Message::user("a"), Message::user("b")]);
        for answer in [Err::<String, BoxError>("down".into()), Ok("  ".to_owned())] {
            let (ticket, _) = b.begin(1, rules(&policy)).unwrap();
            let summary = b.complete(&ticket, answer, rules(&policy));
            assert!(matches!(b.land(ticket, summary), Landed::Failed { n: 1, .. }));
            assert_eq!(b.messages().len(), 2);
        }
        assert!(b.begin(0, rules(&policy)).is_none());
    }

    #[test]
    fn a_cancelled_unlocked_fold_ends_and_the_next_one_runs() {
        let policy = FoldPolicy::new();
        let cell = Mutex::new(buffer(vec![Message::user("a"), Message::user("b")]));
        let mut cx = Context::from_waker(Waker::noop());
        {
            let never = |_| std::future::pending::<Option<std::result::Result<String, BoxError>>>();
            let mut fold = pin!(fold_unlocked(&cell, rules(&policy), |_| 1, never, |_, l| l));
            assert!(fold.as_mut().poll(&mut cx).is_pending());
            assert!(lock(&cell).folding());
            // A second fold meanwhile is told one is in flight.
            let busy = pin!(fold_unlocked(&cell, rules(&policy), |_| 1, never, |_, l| l)).poll(&mut cx);
            assert!(matches!(busy, Poll::Ready(Step::Busy)));
        }
        assert!(!lock(&cell).folding(), "dropping the future ends the fold");
        let answer = |_| async { Some(Ok::<_, BoxError>("a was said".to_owned())) };
        let done = pin!(fold_unlocked(&cell, rules(&policy), |_| 1, answer, |_, l| l)).poll(&mut cx);
        assert!(matches!(
            done,
            Poll::Ready(Step::Landed(Landed::Folded { n: 1, .. }))
        ));
        let held = lock(&cell);
        assert_eq!(held.messages().len(), 1);
        assert!(held.state.summary.starts_with("a was said"));
    }
}
