//! What the ledger remembers between folds, each memo a [`Memo`]: the
//! texts read and what was found in them (process-wide, in front of them
//! this thread's), this thread's readings of candidates and the pieces of
//! its last [`Said`](super::said::Said). [`remembered`] reads them all.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::{Arc, OnceLock};

use super::Candidates;
use super::Tier;
use super::found::{Found, Mark};
use super::words::Words;
use crate::quick::{Quick, memo_lock};

/// Values by a 64-bit key, within one byte budget by one rule ([`put`]):
/// a value that weighs more than a quarter of the budget is not kept, and
/// one that would pass the budget empties the memo first. Every memo of
/// the ledger is one.
///
/// [`put`]: Memo::put
pub(super) struct Memo<V> {
    map: Option<Map<V>>,
    bytes: usize,
    budget: usize,
}

type Map<V> = HashMap<u64, V, BuildHasherDefault<Quick>>;

/// What a value held in a [`Memo`] weighs, in bytes: what it holds, and
/// its place in the memo.
pub(super) trait Weighed {
    fn weight(&self) -> usize;
}

/// The bytes a value's place in a memo is counted at, besides what it holds.
const PLACE: usize = 64;

impl<V: Weighed> Memo<V> {
    pub(super) const fn new(budget: usize) -> Self {
        Memo {
            map: None,
            bytes: 0,
            budget,
        }
    }

    /// Whether a value of `weight` may be kept in a memo of `budget`.
    pub(super) const fn fits(budget: usize, weight: usize) -> bool {
        weight <= budget / 4
    }

    pub(super) fn get(&self, key: u64) -> Option<&V> {
        self.map.as_ref()?.get(&key)
    }

    /// The value of `key`, taken out.
    pub(super) fn take(&mut self, key: u64) -> Option<V> {
        let value = self.map.as_mut()?.remove(&key)?;
        self.bytes -= value.weight();
        Some(value)
    }

    /// Keeps `value` under `key`, in place of what it held, by the rule
    /// (see [`Memo`]); what an emptying let go is given back, to be dropped
    /// where the caller chooses (outside a lock).
    pub(super) fn put(&mut self, key: u64, value: V) -> Option<Map<V>> {
        let weight = value.weight();
        drop(self.take(key));
        if !Memo::<V>::fits(self.budget, weight) {
            return None;
        }
        let emptied = (self.bytes + weight > self.budget).then(|| {
            self.bytes = 0;
            self.map.take()
        });
        self.bytes += weight;
        self.map.get_or_insert_with(Default::default).insert(key, value);
        emptied.flatten()
    }

    /// The bytes held, and the budget.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn held(&self) -> (usize, usize) {
        (self.bytes, self.budget)
    }
}

impl Weighed for Arc<Seen> {
    fn weight(&self) -> usize {
        self.text.len() + PLACE
    }
}

/// What a key of [`RECALL`]'s shards holds: the texts of that key, newest
/// last.
#[derive(Default)]
pub(super) struct Bucket(Vec<Arc<Seen>>);

impl Weighed for Bucket {
    fn weight(&self) -> usize {
        self.0.iter().map(Weighed::weight).sum()
    }
}

impl Weighed for Reading {
    fn weight(&self) -> usize {
        let ledger: usize = self.ledger.iter().map(|e| e.0.len()).sum();
        (self.text.len() + self.prose.len() + ledger + PLACE)
            // About what an entry's place takes, its text shared.
            .saturating_add(self.found.saturating_mul(32))
    }
}

/// The pieces of a thread's last `Said`, in order.
#[derive(Default)]
pub(super) struct LastSaid(pub(super) Vec<Option<Arc<Seen>>>);

impl Weighed for LastSaid {
    fn weight(&self) -> usize {
        let texts: usize = self.0.iter().flatten().map(|s| s.text.len()).sum();
        texts + self.0.len() * 8 + PLACE
    }
}

/// A sighting (see [`Readings::sighted`]): its key is all it is.
pub(super) struct Sighting;

impl Weighed for Sighting {
    fn weight(&self) -> usize {
        PLACE
    }
}

/// The budgets: a shard of [`RECALL`]'s, a thread's [`FRONT`], its
/// readings, its sightings, its last `Said`.
const SHARD_BYTES: usize = 4 << 20;
const FRONT_BYTES: usize = 1 << 20;
const READINGS_BYTES: usize = 1 << 20;
const SIGHTINGS_BYTES: usize = 8 * PLACE;
const SAID_BYTES: usize = 4 << 20;

/// What the ledger remembers, the one place to read it: each memo's name,
/// the bytes it holds and its budget (this thread's memos, and the
/// process's shards).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn remembered() -> Vec<(&'static str, usize, usize)> {
    let local = |name, held: Option<(usize, usize)>| held.map(|(bytes, budget)| (name, bytes, budget));
    let mut out: Vec<_> = [
        local(
            "front",
            FRONT
                .try_with(|f| f.try_borrow().ok().map(|f| f.held()))
                .ok()
                .flatten(),
        ),
        local(
            "readings",
            READINGS
                .try_with(|r| r.try_borrow().ok().map(|r| r.kept.held()))
                .ok()
                .flatten(),
        ),
        local(
            "sightings",
            READINGS
                .try_with(|r| r.try_borrow().ok().map(|r| r.sighted.held()))
                .ok()
                .flatten(),
        ),
        local(
            "said",
            SAID_LAST
                .try_with(|s| s.try_borrow().ok().map(|s| s.held()))
                .ok()
                .flatten(),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    for shard in &RECALL.shards {
        if let Some(shard) = memo_lock(shard) {
            let (bytes, budget) = shard.held();
            out.push(("recall shard", bytes, budget));
        }
    }
    out
}

thread_local! {
    /// This thread's readings of candidates lately (see [`Reading`]).
    static READINGS: std::cell::RefCell<Readings> = std::cell::RefCell::default();
}

/// This thread's readings, taken out (put back with `Some`).
pub(super) fn readings(back: Option<Readings>) -> Readings {
    swap_local(&READINGS, back)
}

/// The value of this thread's `cell`, taken out (the cell holds `back`
/// then, or the default): the default while the thread ends, or while the
/// value is out.
fn swap_local<T: Default>(cell: &'static std::thread::LocalKey<std::cell::RefCell<T>>, back: Option<T>) -> T {
    (cell.try_with(|value| {
        let mut value = value.try_borrow_mut().ok()?;
        Some(match back {
            Some(back) => std::mem::replace(&mut *value, back),
            None => std::mem::take(&mut *value),
        })
    }))
    .ok()
    .flatten()
    .unwrap_or_default()
}

/// A thread's readings of [`candidates`] (see [`Reading`]), by a key of
/// their limits and first piece ([`Readings::key`]), and the first pieces
/// of the latest readings not kept: a reading is kept when its first piece
/// was seen before with the same limits (a compactor whose cut stays where
/// it was), so that a compactor whose cut moves on each request (and whose
/// readings would never be followed) pays no copy of what it read.
pub(super) struct Readings {
    pub(super) kept: Memo<Reading>,
    /// A hash of each first piece and its limits, lately.
    pub(super) sighted: Memo<Sighting>,
}

impl Default for Readings {
    fn default() -> Self {
        Readings {
            kept: Memo::new(READINGS_BYTES),
            sighted: Memo::new(SIGHTINGS_BYTES),
        }
    }
}

impl Readings {
    /// The key of a reading with these limits whose first piece is
    /// `piece`, read at `mark` (a hash, to find a kept reading: what it
    /// gives is always compared whole).
    pub(super) fn key(piece: &str, mark: Mark, enough: usize, max_bytes: usize) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut hasher = BuildHasherDefault::<Quick>::default().build_hasher();
        (enough, max_bytes, mark.1).hash(&mut hasher);
        (mark.0 as u8).hash(&mut hasher);
        match piece.len() >= Recall::MIN {
            true => RECALL.key(piece).hash(&mut hasher),
            false => piece.hash(&mut hasher),
        }
        hasher.finish()
    }

    /// Whether a reading of this `key` was seen lately; noted if not.
    pub(super) fn sighted(&mut self, key: u64) -> bool {
        if self.sighted.get(key).is_some() {
            return true;
        }
        drop(self.sighted.put(key, Sighting));
        false
    }
}

/// One reading of [`candidates`]: its limits, the pieces it read (their
/// text, whole), how many entries it had found after each, and what it
/// found in all. A stateless compactor folds the same turns request after
/// request (until the cut moves), and a reading that meets the same
/// pieces in the same order, with the same limits and the same previous
/// summary, finds the same entries: it follows this one, comparing each
/// piece whole (so the entries are always what reading it would find),
/// and takes its entries instead of reading and merging each piece's.
/// A reading that parts from it takes the entries found before the piece
/// that differs and reads on.
#[derive(Default)]
pub(super) struct Reading {
    pub(super) enough: usize,
    pub(super) max_bytes: usize,
    /// The pieces read, joined: piece `k` ends at `ends[k]`.
    pub(super) text: String,
    pub(super) ends: Vec<usize>,
    /// Where each piece was read: its tier and its turn.
    pub(super) marks: Vec<Mark>,
    /// Entries found after each piece.
    pub(super) counts: Vec<usize>,
    pub(super) prose: String,
    pub(super) ledger: Vec<(String, Tier)>,
    /// What it found, ranked (shared with the folds that take it), and
    /// how many entries it gathered.
    pub(super) ranked: std::sync::Arc<Candidates>,
    pub(super) found: usize,
}

impl Reading {
    /// Whether a reading of `bytes` (its text so far) may still be kept: a
    /// fold of 4 000 tokens reads 32 KiB, 256 KiB when it must read 8 times
    /// as far.
    pub(super) fn fits(bytes: usize) -> bool {
        Memo::<Reading>::fits(READINGS_BYTES, bytes)
    }

    pub(super) fn new(enough: usize, max_bytes: usize) -> Self {
        Reading {
            enough,
            max_bytes,
            ..Reading::default()
        }
    }

    /// Piece `k`, if it read that many.
    pub(super) fn piece(&self, k: usize) -> Option<&str> {
        let end = *self.ends.get(k)?;
        let start = k.checked_sub(1).map_or(0, |j| self.ends[j]);
        self.text.get(start..end)
    }

    /// Where piece `k` was read, if it read that many.
    pub(super) fn mark(&self, k: usize) -> Option<Mark> {
        self.marks.get(k).copied()
    }

    /// Entries found after the first `k` pieces.
    pub(super) fn found_after(&self, k: usize) -> usize {
        k.checked_sub(1).map_or(0, |j| self.counts[j])
    }

    /// Adds piece `piece`, read at `mark`, after which `found` entries
    /// were found.
    pub(super) fn push(&mut self, piece: &str, mark: Mark, found: usize) {
        self.text.push_str(piece);
        self.ends.push(self.text.len());
        self.marks.push(mark);
        self.counts.push(found);
    }

    /// A reading of the first `k` pieces, to go on with.
    pub(super) fn prefix(&self, k: usize) -> Reading {
        let end = k.checked_sub(1).map_or(0, |j| self.ends[j]);
        Reading {
            enough: self.enough,
            max_bytes: self.max_bytes,
            text: self.text[..end].to_owned(),
            ends: self.ends[..k].to_vec(),
            marks: self.marks[..k].to_vec(),
            counts: self.counts[..k].to_vec(),
            ..Reading::default()
        }
    }
}

/// Where the first of [`candidates`]' entries with each key is.
// (One lives on the stack for one call: its size costs nothing, a box would
// cost an allocation.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Firsts {
    /// For a ledger of a few hundred entries at most: a bit for each key's
    /// low bits. An entry whose bit is clear is new (most are), with no
    /// search and no table to fill; one whose bit is set is looked for
    /// among the keys.
    Bits([u64; 64]),
    /// For a larger one, by key.
    Map(std::collections::HashMap<u64, usize, BuildHasherDefault<Quick>>),
}

impl Firsts {
    /// Entries at most for [`Firsts::Bits`]: a search among the keys stays
    /// shorter than a table's upkeep.
    pub(super) const FEW: usize = 512;

    pub(super) fn new(enough: usize) -> Self {
        match enough <= Firsts::FEW {
            true => Firsts::Bits([0; 64]),
            false => Firsts::Map(std::collections::HashMap::with_capacity_and_hasher(
                enough.min(1 << 12),
                Default::default(),
            )),
        }
    }

    /// The index of the first entry with `key`, if any (`keys` the entries').
    pub(super) fn first(&self, key: u64, keys: &[u64]) -> Option<usize> {
        match self {
            Firsts::Bits(bits) => {
                let bit = key as usize % 4096;
                (bits[bit / 64] & 1 << (bit % 64) != 0)
                    .then(|| keys.iter().position(|&k| k == key))
                    .flatten()
            }
            Firsts::Map(map) => map.get(&key).copied(),
        }
    }

    /// Notes that entry `index` has `key` (the first with it is kept).
    pub(super) fn note(&mut self, key: u64, index: usize) {
        match self {
            Firsts::Bits(bits) => {
                let bit = key as usize % 4096;
                bits[bit / 64] |= 1 << (bit % 64);
            }
            Firsts::Map(map) => {
                map.entry(key).or_insert(index);
            }
        }
    }
}

/// The pieces read lately, process-wide: a stateless compactor reads the
/// same history again on every request, and finds each piece's identifiers
/// once (see [`Recall`]).
pub(super) static RECALL: Recall = Recall::new();

/// The identifiers found lately in pieces of [`Recall::MIN`] bytes or
/// more, each with the piece's text: a lookup finds its bucket by a keyed
/// hash of the piece's length and a few samples of its bytes, and compares
/// the whole text, so a hit is always the same text (a copy costs less to
/// compare than a hash of the whole costs to compute, and no text can be
/// made to stand for another). Each shard is a [`Memo`] of
/// [`SHARD_BYTES`], a bucket keeps its newest [`Recall::PER_BUCKET`].
pub(super) struct Recall {
    /// The hash's seed, random per process.
    pub(super) key: OnceLock<u64>,
    shards: [std::sync::Mutex<Memo<Bucket>>; Recall::SHARDS],
}

/// A piece read, what was found in it, and where its words are (each
/// found when first asked for).
pub(super) struct Seen {
    pub(super) text: Box<str>,
    pub(super) found: OnceLock<Vec<Found>>,
    pub(super) words: OnceLock<Arc<Words>>,
}

thread_local! {
    /// The pieces this thread's last `Said` held, in order (one value, of
    /// key 0).
    static SAID_LAST: std::cell::RefCell<Memo<LastSaid>> = const { std::cell::RefCell::new(Memo::new(SAID_BYTES)) };
}

/// This thread's last `Said`'s pieces, taken out (put back with `Some`:
/// kept by the memo's rule).
pub(super) fn said_last(back: Option<LastSaid>) -> LastSaid {
    let cell = SAID_LAST.try_with(|memo| {
        let mut memo = memo.try_borrow_mut().ok()?;
        let last = memo.take(0).unwrap_or_default();
        if let Some(back) = back {
            drop(memo.put(0, back));
        }
        Some(last)
    });
    cell.ok().flatten().unwrap_or_default()
}

thread_local! {
    /// This thread's pieces read lately (see [`Front`]).
    pub(super) static FRONT: std::cell::RefCell<Front> = std::cell::RefCell::default();
}

/// The pieces a thread read lately, in front of [`Recall`]'s shards: by
/// the piece's key (a later piece of the same key takes its place), each
/// hit compared whole as in the shards. A lookup here takes no lock and
/// changes no count of references, which cost more than the rest of a
/// lookup. It holds what the shards hold, shared, and keeps it alive after
/// the shards let it go, in a [`Memo`] of [`FRONT_BYTES`]. A piece the
/// shards do not keep is not held.
pub(super) struct Front(Memo<Arc<Seen>>);

impl Default for Front {
    fn default() -> Self {
        Front(Memo::new(FRONT_BYTES))
    }
}

impl Front {
    /// The piece `text` of key `key`, held, else from `shared` (then held,
    /// unless it is not to be: `Err`).
    pub(super) fn find(
        &mut self,
        key: u64,
        text: &str,
        shared: impl Fn() -> Arc<Seen>,
    ) -> Result<&Arc<Seen>, Arc<Seen>> {
        if self.0.get(key).is_none_or(|seen| *seen.text != *text) {
            let seen = shared();
            // (The shards keep no copy of a text too long for them.)
            if seen.text.is_empty() || !Memo::<Arc<Seen>>::fits(FRONT_BYTES, seen.weight()) {
                return Err(seen);
            }
            drop(self.0.put(key, seen));
        }
        self.0.get(key).ok_or_else(shared)
    }

    #[cfg_attr(not(test), allow(dead_code))]
    fn held(&self) -> (usize, usize) {
        self.0.held()
    }
}

impl Recall {
    /// Shorter pieces are read each time (they cost little to read).
    pub(super) const MIN: usize = 8;
    pub(super) const SHARDS: usize = 8;
    /// Texts one bucket holds at most.
    pub(super) const PER_BUCKET: usize = 4;

    pub(super) const fn new() -> Self {
        Recall {
            key: OnceLock::new(),
            shards: [const { std::sync::Mutex::new(Memo::new(SHARD_BYTES)) }; Recall::SHARDS],
        }
    }

    /// Calls `f` with the remembered piece `text` (of [`Recall::MIN`]
    /// bytes or more), remembered now if it was not: from this thread's
    /// [`Front`] when it holds it (no lock, no count of references
    /// changed), else from the shared shards.
    pub(super) fn with<R>(&self, text: &str, mut f: impl FnMut(&Seen) -> R) -> R {
        let key = self.key(text);
        // (Not while this thread's front is in use or gone: the shards.)
        let front = FRONT.try_with(|front| {
            let mut front = front.try_borrow_mut().ok()?;
            Some(match front.find(key, text, || self.get(key, text)) {
                Ok(seen) => f(seen),
                Err(seen) => f(&seen),
            })
        });
        match front {
            Ok(Some(r)) => r,
            _ => f(&self.get(key, text)),
        }
    }

    /// The remembered piece `text` (of [`Recall::MIN`] bytes or more),
    /// remembered now if it was not: as [`with`](Self::with) finds it.
    pub(super) fn shared(&self, text: &str) -> Arc<Seen> {
        let key = self.key(text);
        let front = FRONT.try_with(|front| {
            let mut front = front.try_borrow_mut().ok()?;
            Some(match front.find(key, text, || self.get(key, text)) {
                Ok(seen) => Arc::clone(seen),
                Err(seen) => seen,
            })
        });
        match front {
            Ok(Some(seen)) => seen,
            _ => self.get(key, text),
        }
    }

    /// The keyed hash `text` is remembered by: its length and a few samples
    /// of its bytes.
    pub(super) fn key(&self, text: &str) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let bytes = text.as_bytes();
        // A fast hash, seeded: a bucket holds few texts and every hit is
        // compared whole, so a collision costs a lookup, never a wrong text.
        let seed = *self
            .key
            .get_or_init(|| std::hash::RandomState::new().hash_one(0u8));
        let mut hasher = Quick(seed);
        bytes.len().hash(&mut hasher);
        // Eight 8-byte samples, evenly spread, the last ending the text.
        let last = bytes.len() - 8;
        let step = last / 7;
        for i in 0..7 {
            hasher.write_u64(sample(bytes, i * step));
        }
        hasher.write_u64(sample(bytes, last));
        hasher.finish()
    }

    /// The remembered piece `text`, of [`key`](Self::key) `key`, from the
    /// shards, remembered now if it was not.
    pub(super) fn get(&self, key: u64, text: &str) -> Arc<Seen> {
        let shard = &self.shards[(key >> 32) as usize % Recall::SHARDS];
        // (A shard whose lock cannot be had soon is passed by: see
        // `memo_lock`.)
        let seen = memo_lock(shard).and_then(|shard| {
            (shard.get(key)).and_then(|bucket| bucket.0.iter().find(|s| *s.text == *text).cloned())
        });
        if let Some(seen) = seen {
            return seen;
        }
        // A text too long for a shard is read each time (not kept, not copied).
        let kept = Memo::<Bucket>::fits(SHARD_BYTES, text.len() + PLACE);
        let seen = Arc::new(Seen {
            text: if kept { text.into() } else { Box::default() },
            found: OnceLock::new(),
            words: OnceLock::new(),
        });
        if !kept {
            return seen;
        }
        let Some(mut shard) = memo_lock(shard) else {
            return seen;
        };
        let mut bucket = shard.take(key).unwrap_or_default();
        if bucket.0.len() >= Recall::PER_BUCKET {
            bucket.0.remove(0);
        }
        bucket.0.push(Arc::clone(&seen));
        // An emptied shard's pieces are dropped after the lock is released.
        let emptied = shard.put(key, bucket);
        drop(shard);
        drop(emptied);
        seen
    }
}

/// The 8 bytes of `bytes` at `at`, as a number.
fn sample(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Bytes(usize);

    impl Weighed for Bytes {
        fn weight(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn a_memo_keeps_within_its_budget_by_one_rule() {
        let mut memo = Memo::new(1000);
        // More than a quarter of the budget: not kept.
        assert!(memo.put(1, Bytes(251)).is_none());
        assert!(memo.get(1).is_none() && memo.held() == (0, 1000));
        for key in 0..4 {
            assert!(memo.put(key, Bytes(250)).is_none());
        }
        assert_eq!(memo.held(), (1000, 1000));
        // A value in place of another is weighed anew.
        assert!(memo.put(3, Bytes(100)).is_none());
        assert_eq!(memo.held(), (850, 1000));
        // One that would pass the budget empties the memo first, and the
        // values let go are given back.
        let emptied = memo.put(9, Bytes(200)).expect("emptied");
        assert_eq!(emptied.len(), 4);
        assert_eq!(memo.held(), (200, 1000));
        assert!(memo.get(0).is_none() && memo.get(9).is_some());
        assert_eq!(memo.take(9).map(|b| b.0), Some(200));
        assert_eq!(memo.held(), (0, 1000));
    }

    #[test]
    fn every_memo_stays_within_its_budget_while_histories_are_folded() {
        use crate::{Compactor, Message};
        for round in 0..40 {
            let history: Vec<Message> = (0..120)
                .map(|i| {
                    let id = format!("ORD-{}{i:04}", round * 7 + i % 5);
                    Message::user(format!(
                        "turn {i}: ship {id} to /srv/data/{round}/file-{i}.csv {}",
                        "word ".repeat(i % 40)
                    ))
                })
                .collect();
            let summary =
                |_: &crate::SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("earlier".to_owned());
            Compactor::new(600).compact(&history, &summary).unwrap();
            Compactor::new(600)
                .compact(&history[..100 + round % 20], &summary)
                .unwrap();
        }
        let held = remembered();
        assert!(
            held.iter().any(|(name, bytes, _)| *name == "front" && *bytes > 0),
            "{held:?}"
        );
        for (name, bytes, budget) in held {
            assert!(bytes <= budget, "{name}: {bytes} of {budget}");
        }
    }
}
