//! The layout of the vocabulary tables that `build.rs` writes and
//! `src/count/bpe.rs` reads; compiled into both, so they agree.
//!
//! A table is three little-endian arrays: every token's bytes in rank
//! order (`.bytes`), the end offset of each rank's bytes in it (`.ends`,
//! `u32`), and an open-addressing hash table (`.slots`, `u32`, linear
//! probing) whose slot holds `tag << RANK_BITS | (rank + 1)`, 0 when empty.

/// Bits of a slot that hold `rank + 1`.
pub(crate) const RANK_BITS: u32 = 18;
/// Mask of those bits.
pub(crate) const RANK_MASK: u32 = (1 << RANK_BITS) - 1;

/// The hash of a token's bytes (FxHash's multiply over 8-byte words, then
/// a final mix so the high bits, used for the slot, depend on every byte).
pub(crate) fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut w = 0u64;
        for (i, &b) in rest.iter().enumerate() {
            w |= u64::from(b) << (8 * i);
        }
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    h ^= h >> 31;
    h.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The first slot to probe, in a table of `1 << bits` slots.
pub(crate) fn home(hash: u64, bits: u32) -> usize {
    (hash >> (64 - bits)) as usize
}

/// The hash bits a slot keeps beside the rank, to skip most mismatches
/// without reading the token's bytes.
pub(crate) fn tag(hash: u64) -> u32 {
    (hash as u32) >> RANK_BITS
}
