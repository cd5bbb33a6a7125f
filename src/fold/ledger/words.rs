//! A piece's words and the filters that say at one look which words it
//! may hold: what [`Said`](super::Said) searches, remembered with each piece.

use std::hash::BuildHasherDefault;

use super::shape::word_spans;
use crate::quick::Quick;

/// Where a piece's words ([`word_spans`]) are, their [`word_hash`]es,
/// and a filter of them.
#[derive(Default)]
pub(crate) struct Words {
    pub(super) spans: Vec<(usize, usize)>,
    pub(super) hashes: Vec<u64>,
    pub(super) filter: Filter,
}

impl Words {
    pub(super) fn of(piece: &str) -> Self {
        let spans = word_spans(piece);
        let hashes: Vec<u64> = (spans.iter())
            .map(|&(start, end)| word_hash(&piece[start..end]))
            .collect();
        let mut filter = Filter::default();
        hashes.iter().for_each(|&hash| filter.add(hash));
        Words {
            spans,
            hashes,
            filter,
        }
    }
}

/// A Bloom filter of 16 bits a word, two a word: about one word in 70 not
/// among those added may be held, however many they are.
pub(super) struct Wide {
    bits: Vec<u64>,
    /// The number of bits less one (a power of two, less one).
    mask: u64,
}

impl Wide {
    /// A filter of `hashes` ([`word_hash`]es), `n` of them.
    pub(super) fn of(hashes: impl Iterator<Item = u64>, n: usize) -> Self {
        let size = n.saturating_mul(16).clamp(1 << 10, 1 << 30).next_power_of_two();
        let (mut bits, mask) = (vec![0u64; size / 64], size as u64 - 1);
        hashes.for_each(|hash| set_bits(&mut bits, bits_of(hash, mask)));
        Wide { bits, mask }
    }

    pub(super) fn may_hold(&self, hash: u64) -> bool {
        has_bits(&self.bits, bits_of(hash, self.mask))
    }
}

/// The two bits of a word's `hash` in a filter of `mask + 1` bits (a
/// power of two), from its two halves.
fn bits_of(hash: u64, mask: u64) -> [u64; 2] {
    [hash & mask, (hash >> 32) & mask]
}

fn set_bits(words: &mut [u64], bits: [u64; 2]) {
    bits.iter()
        .for_each(|&bit| words[(bit / 64) as usize] |= 1 << (bit % 64));
}

fn has_bits(words: &[u64], bits: [u64; 2]) -> bool {
    bits.iter()
        .all(|&bit| words[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
}

/// The hash a word's [`Filter`] bits come from: [`key_of`]'s, so that an
/// entry's key is its hash when the entry is one word.
pub(super) fn word_hash(word: &str) -> u64 {
    use std::hash::BuildHasher;
    BuildHasherDefault::<Quick>::default().hash_one(word)
}

/// A Bloom filter of 512 bits, two a word: whether a word may be among
/// those added, or is surely not.
#[derive(Clone, Copy, Default)]
pub(super) struct Filter([u64; 8]);

impl Filter {
    /// The two bits of a word's `hash` ([`word_hash`]).
    pub(super) fn bits(hash: u64) -> [u64; 2] {
        bits_of(hash, 511)
    }

    fn add(&mut self, hash: u64) {
        set_bits(&mut self.0, Filter::bits(hash));
    }

    pub(super) fn may_hold(&self, bits: [u64; 2]) -> bool {
        has_bits(&self.0, bits)
    }

    pub(super) fn union(&mut self, other: &Filter) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a |= b);
    }

    /// Whether more than half the bits are set (then one word in four
    /// that is not among those added would pass).
    pub(super) fn crowded(&self) -> bool {
        self.0.iter().map(|w| w.count_ones()).sum::<u32>() > 256
    }
}
