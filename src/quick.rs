//! A fast seeded hash for short texts, shared by the ledger's sets and
//! memo and the token counter's memo of short texts; and how those memos
//! take their locks.

use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};

/// A fast hash for short texts (identifiers, words), eight bytes a step
/// (FxHash's), for sets and keys that stay in the process (nothing keyed
/// by it is stored or shared): every equal hash is checked by comparing.
pub(crate) struct Quick(pub(crate) u64);

impl Default for Quick {
    /// Seeded per process: the words hashed come from the caller's text,
    /// so that no text can be written to make them collide.
    fn default() -> Self {
        static SEED: OnceLock<u64> = OnceLock::new();
        Quick(*SEED.get_or_init(|| {
            use std::hash::BuildHasher;
            std::hash::RandomState::new().hash_one(0x5eed_u64)
        }))
    }
}

impl Quick {
    const K: u64 = 0x517c_c1b7_2722_0a95;

    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(Quick::K);
    }
}

impl std::hash::Hasher for Quick {
    fn finish(&self) -> u64 {
        // The multiply leaves the high bits mixed; tables index by the low.
        self.0.rotate_left(26)
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
}

/// A memo's lock, if it can be had soon; `None` if not. A memo is a cache:
/// a caller that cannot have its lock reads afresh (and keeps nothing)
/// rather than wait. That bounds the wait on a shard being emptied, and
/// keeps a forked child working, whose parent's other threads may have held
/// a lock at the fork (never to release it in the child, as Python's
/// `multiprocessing` forks a process that uses chatfold from threads).
pub(crate) fn memo_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    // A memo's lock is held for a lookup or an insert: a few spins are
    // enough but for a lock that is not coming back.
    const SPINS: usize = 64;
    const YIELDS: usize = 8;
    for attempt in 0..SPINS + YIELDS {
        match mutex.try_lock() {
            Ok(guard) => return Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) if attempt < SPINS => std::hint::spin_loop(),
            Err(TryLockError::WouldBlock) => std::thread::yield_now(),
        }
    }
    None
}
