//! What is known of an identifier once found in a piece, and where a
//! piece was read: what the memo keeps and the candidates' gathering takes.

use super::spans::Hit;
use super::{LedgerEntry, Tier, is_loose, key_of};

/// Where a piece was read: its tier, and its turn's index.
pub(super) type Mark = (Tier, u32);

/// An identifier found in a piece, with what is known of it once found.
#[derive(Clone, Debug)]
pub(super) struct Found {
    /// Its line.
    pub(super) line: usize,
    pub(super) entry: LedgerEntry,
    /// Its [`key_of`].
    pub(super) key: u64,
    /// Whether it is loose ([`is_loose`]).
    pub(super) loose: bool,
    /// Its shape's strength (see [`super::spans::KEYED`]).
    pub(super) rank: u8,
}

/// `found` with each entry's [`key_of`] and looseness.
pub(super) fn with_keys(found: Vec<Hit>) -> Vec<Found> {
    if found.is_empty() {
        return Vec::new();
    }
    found
        .into_iter()
        .map(|(line, entry, rank)| Found {
            line,
            rank,
            key: key_of(&entry),
            loose: is_loose(&entry),
            entry,
        })
        .collect()
}
