//! The memo of texts read (process-wide, bounded) and this thread's
//! readings of candidates.

use std::hash::BuildHasherDefault;
use std::sync::{Arc, OnceLock};

use super::Candidates;
use super::Tier;
use super::found::{Found, Mark};
use super::words::Words;
use crate::quick::{Quick, memo_lock};

thread_local! {
    /// This thread's readings of candidates lately (see [`Reading`]),
    /// newest first.
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

/// A thread's readings of [`candidates`] (see [`Reading`]), newest first,
/// and the first pieces of the latest readings not kept: a reading is
/// kept when its first piece was seen before with the same limits (a
/// compactor whose cut stays where it was), so that a compactor whose cut
/// moves on each request (and whose readings would never be followed)
/// pays no copy of what it read.
#[derive(Default)]
pub(super) struct Readings {
    pub(super) kept: Vec<Reading>,
    /// A hash of each first piece and its limits, the latest
    /// [`Readings::SIGHTED`] of them.
    pub(super) sighted: [u64; Readings::SIGHTED],
    pub(super) next: usize,
}

impl Readings {
    pub(super) const SIGHTED: usize = 8;

    /// Whether a reading of first piece `piece` with these limits was
    /// seen lately; noted if not. (A hash, to choose what to keep: what a
    /// kept reading gives is always compared whole.)
    pub(super) fn sighted(&mut self, piece: &str, enough: usize, max_bytes: usize) -> bool {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut hasher = BuildHasherDefault::<Quick>::default().build_hasher();
        (enough, max_bytes).hash(&mut hasher);
        match piece.len() >= Recall::MIN {
            true => RECALL.key(piece).hash(&mut hasher),
            false => piece.hash(&mut hasher),
        }
        let sighting = hasher.finish();
        if self.sighted.contains(&sighting) {
            return true;
        }
        self.sighted[self.next] = sighting;
        self.next = (self.next + 1) % Readings::SIGHTED;
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
    /// What it found, ranked (shared with the folds that take it).
    pub(super) ranked: std::sync::Arc<Candidates>,
}

impl Reading {
    /// Readings a thread keeps.
    pub(super) const KEPT: usize = 4;
    /// The most a kept reading holds: the text read (a fold of 4 000
    /// tokens reads 32 KiB, 256 KiB when it must read 8 times as far), the
    /// previous summary, and its entries' places.
    pub(super) const BYTES: usize = 1 << 18;

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
/// made to stand for another). Bounded: a shard that holds more than
/// [`Recall::SHARD_BYTES`] of text is emptied, a bucket keeps its newest
/// [`Recall::PER_BUCKET`].
pub(super) struct Recall {
    /// The hash's seed, random per process.
    pub(super) key: OnceLock<u64>,
    shards: [std::sync::Mutex<Shard>; Recall::SHARDS],
}

/// One of [`Recall`]'s shards.
#[derive(Default)]
pub(super) struct Shard {
    /// By the texts' keyed hash (the map's own hash of it the fast one).
    pub(super) buckets: Option<std::collections::HashMap<u64, Vec<Arc<Seen>>, BuildHasherDefault<Quick>>>,
    pub(super) bytes: usize,
}

/// A piece read, what was found in it, and where its words are (each
/// found when first asked for).
pub(super) struct Seen {
    pub(super) text: Box<str>,
    pub(super) found: OnceLock<Vec<Found>>,
    pub(super) words: OnceLock<Arc<Words>>,
}

thread_local! {
    /// The pieces this thread's last [`Said::new`] held, in order.
    static SAID_LAST: std::cell::RefCell<Vec<Option<Arc<Seen>>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// This thread's [`SAID_LAST`], taken out (put back with `Some`).
pub(super) fn said_last(back: Option<Vec<Option<Arc<Seen>>>>) -> Vec<Option<Arc<Seen>>> {
    swap_local(&SAID_LAST, back)
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
/// the shards let it go: at most [`Front::BYTES`] of text and
/// [`Front::PIECES`] pieces a thread, then it is emptied. A piece longer
/// than that bound, or one the shards do not keep, is not held.
#[derive(Default)]
pub(super) struct Front {
    pub(super) pieces: std::collections::HashMap<u64, Arc<Seen>, BuildHasherDefault<Quick>>,
    pub(super) bytes: usize,
}

impl Front {
    /// Pieces held at most.
    pub(super) const PIECES: usize = 4096;
    /// Bytes of text held at most.
    pub(super) const BYTES: usize = 1 << 20;

    /// The piece `text` of key `key`, held, else from `shared` (then held,
    /// unless it is not to be: `Err`).
    pub(super) fn find(
        &mut self,
        key: u64,
        text: &str,
        shared: impl Fn() -> Arc<Seen>,
    ) -> Result<&Arc<Seen>, Arc<Seen>> {
        if self.pieces.get(&key).is_none_or(|seen| *seen.text != *text) {
            let seen = shared();
            // (The shards keep no copy of a text longer than a shard.)
            if seen.text.is_empty() || seen.text.len() > Front::BYTES {
                return Err(seen);
            }
            if let Some(old) = self.pieces.remove(&key) {
                self.bytes -= old.text.len();
            }
            if self.bytes + seen.text.len() > Front::BYTES || self.pieces.len() >= Front::PIECES {
                self.pieces.clear();
                self.bytes = 0;
            }
            self.bytes += seen.text.len();
            return Ok(self.pieces.entry(key).insert_entry(seen).into_mut());
        }
        self.pieces.get(&key).ok_or_else(shared)
    }
}

impl Recall {
    /// Shorter pieces are read each time (they cost little to read).
    pub(super) const MIN: usize = 8;
    pub(super) const SHARDS: usize = 8;
    /// Bytes of text a shard holds at most.
    pub(super) const SHARD_BYTES: usize = 4 << 20;
    /// Texts one bucket holds at most.
    pub(super) const PER_BUCKET: usize = 4;

    pub(super) const fn new() -> Self {
        Recall {
            key: OnceLock::new(),
            shards: [const {
                std::sync::Mutex::new(Shard {
                    buckets: None,
                    bytes: 0,
                })
            }; Recall::SHARDS],
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
            (shard.buckets.as_ref())
                .and_then(|b| b.get(&key))
                .and_then(|bucket| bucket.iter().find(|s| *s.text == *text).cloned())
        });
        if let Some(seen) = seen {
            return seen;
        }
        // A text longer than a shard is read each time (not kept, not copied).
        let kept = text.len() <= Recall::SHARD_BYTES;
        let seen = Arc::new(Seen {
            text: if kept { text.into() } else { Box::default() },
            found: OnceLock::new(),
            words: OnceLock::new(),
        });
        if !kept {
            return seen;
        }
        let Some(mut guard) = memo_lock(shard) else {
            return seen;
        };
        let shard = &mut *guard;
        // An emptied shard's pieces are dropped after the lock is released.
        let emptied =
            (shard.bytes.saturating_add(text.len()) > Recall::SHARD_BYTES).then(|| std::mem::take(shard));
        shard.bytes += text.len();
        let bucket = shard
            .buckets
            .get_or_insert_with(Default::default)
            .entry(key)
            .or_default();
        if bucket.len() >= Recall::PER_BUCKET {
            let oldest = bucket.remove(0);
            shard.bytes -= oldest.text.len();
        }
        bucket.push(Arc::clone(&seen));
        drop(guard);
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
