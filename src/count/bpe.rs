//! An exact byte-pair counter over the vocabulary tables `build.rs`
//! prepares: the same pre-split and the same merges as tiktoken, with
//! nothing to build at run time but the pre-split regex.

use std::collections::BinaryHeap;

use regex::Regex;

use crate::quick::{Quick, memo_lock};

use super::table;

/// One encoding: its vocabulary and its pre-split.
#[derive(Debug)]
pub(crate) struct Encoding {
    vocab: Vocab,
    /// The pre-split on ASCII, without a regex (see [`ascii`](super::ascii)).
    ascii: Option<super::ascii::Split>,
    /// The pre-split anchored at the text's start, built when a piece is
    /// first not ASCII (or the encoding has no pre-split on ASCII): it
    /// covers every character (letters, marks, numbers, whitespace, and a
    /// class for all else), so each piece starts where the last ended, and
    /// an anchored search finds it with no reverse pass for its start and a
    /// smaller automaton to build.
    next: std::sync::OnceLock<Option<Regex>>,
    /// The pre-split itself, built only should a piece not start where the
    /// last ended (which the pattern rules out).
    split: std::sync::OnceLock<Option<Regex>>,
    source: &'static str,
    /// Counts of the longer texts counted lately.
    memo: Memo,
}

/// The counts of texts of [`Memo::MIN`] bytes or more counted lately: a
/// stateless server counts the same history again on every request, and a
/// lookup costs a hundredth of counting a long text (and less than counting
/// a short one of many pieces, such as a ledger's identifiers). A longer
/// text is known by a 128-bit hash keyed at random for the process (so that
/// no text can be made to collide with another); a text of at most
/// [`Memo::SHORT`] bytes is kept whole, found by a fast seeded hash and
/// compared, which costs a fraction of the keyed hash (a collision only
/// counts it again). Bounded: a shard that fills is emptied.
#[derive(Debug)]
struct Memo {
    /// The 128-bit SipHash's key, random for the process.
    keys: [u64; 2],
    /// Counts by key; the keys are a keyed hash already, so the map's own
    /// hash of them is the fast one.
    shards: [std::sync::Mutex<Keyed>; Memo::SHARDS],
    short: [std::sync::Mutex<Shorts>; Memo::SHARDS],
}

/// Longer texts' counts, by their 128-bit keyed hash.
type Keyed = std::collections::HashMap<u128, usize, std::hash::BuildHasherDefault<Quick>>;

/// Short texts and their counts, by the texts' [`Quick`] hash.
type Shorts = std::collections::HashMap<u64, (Box<str>, usize), std::hash::BuildHasherDefault<Quick>>;

impl Memo {
    /// Texts shorter than this are counted each time.
    const MIN: usize = 16;
    /// Texts up to this long are kept whole.
    const SHORT: usize = 64;
    const SHARDS: usize = 8;
    /// Counts a shard holds at most.
    const PER_SHARD: usize = 8 << 10;
    /// Short texts a shard holds at most (each kept whole: at most 64 bytes
    /// and its allocation, a few MB in all).
    const SHORT_PER_SHARD: usize = 4 << 10;

    fn new() -> Self {
        Memo {
            keys: [0u8, 1].map(|i| std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), i)),
            shards: Default::default(),
            short: Default::default(),
        }
    }

    /// The count of `text`, from memory or from `count`.
    fn get_or(&self, text: &str, count: impl FnOnce() -> usize) -> usize {
        if text.len() < Memo::MIN {
            return count();
        }
        if text.len() <= Memo::SHORT {
            return self.short_or(text, count);
        }
        let mut hasher = siphasher::sip128::SipHasher13::new_with_keys(self.keys[0], self.keys[1]);
        std::hash::Hasher::write(&mut hasher, text.as_bytes());
        let key = siphasher::sip128::Hasher128::finish128(&hasher).as_u128();
        let shard = &self.shards[(key as usize) % Memo::SHARDS];
        // (A shard whose lock cannot be had soon is passed by: see
        // `memo_lock`.)
        if let Some(n) = memo_lock(shard).and_then(|map| map.get(&key).copied()) {
            return n;
        }
        let n = count();
        keep(shard, Memo::PER_SHARD, key, n);
        n
    }

    /// [`get_or`](Self::get_or) for a short text, kept whole.
    fn short_or(&self, text: &str, count: impl FnOnce() -> usize) -> usize {
        use std::hash::BuildHasher;
        let key = std::hash::BuildHasherDefault::<Quick>::default().hash_one(text);
        let shard = &self.short[(key >> 32) as usize % Memo::SHARDS];
        let remembered = memo_lock(shard).and_then(|map| match map.get(&key) {
            Some((kept, n)) if **kept == *text => Some(*n),
            _ => None,
        });
        if let Some(n) = remembered {
            return n;
        }
        let n = count();
        keep(shard, Memo::SHORT_PER_SHARD, key, (text.into(), n));
        n
    }
}

/// Keeps `value` at `key` in a memo's `shard`, emptied first when it holds
/// `most` (and nothing kept when its lock cannot be had soon).
fn keep<K: std::hash::Hash + Eq, V>(
    shard: &std::sync::Mutex<std::collections::HashMap<K, V, std::hash::BuildHasherDefault<Quick>>>,
    most: usize,
    key: K,
    value: V,
) {
    if let Some(mut map) = memo_lock(shard) {
        if map.len() >= most {
            map.clear();
        }
        map.insert(key, value);
    }
}

/// tiktoken's `o200k_base` pre-split without its one look-ahead,
/// `\s+(?!\S)`, which [`Encoding::count`] applies to the `\s+` matches.
pub(crate) const O200K_SPLIT: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"|\s*[\r\n]+",
    r"|\s+",
);

/// tiktoken-rs's `cl100k_base` pre-split, likewise (its possessive
/// quantifiers change no match here, so they are plain ones).
pub(crate) const CL100K_SPLIT: &str = concat!(
    r"'(?i:[sdmt]|ll|ve|re)",
    r"|[^\r\n\p{L}\p{N}]?\p{L}+",
    r"|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*",
    r"|\s+$",
    r"|\s*[\r\n]",
    r"|\s+",
);

impl Encoding {
    /// The encoding over the tables of `vocab` and the pre-split `split`.
    pub(crate) fn new(vocab: Vocab, split: &'static str) -> Self {
        let ascii: Option<super::ascii::Split> = match split {
            O200K_SPLIT => Some(super::ascii::o200k),
            CL100K_SPLIT => Some(super::ascii::cl100k),
            _ => None,
        };
        Encoding {
            vocab,
            ascii,
            next: std::sync::OnceLock::new(),
            split: std::sync::OnceLock::new(),
            source: split,
            memo: Memo::new(),
        }
    }

    /// Where the piece that starts at `at` ends: found on ASCII by the
    /// encoding's pre-split there, else by the anchored regex (built now if
    /// not yet); `None` if no piece starts there.
    fn piece_end(&self, text: &str, at: usize) -> Option<usize> {
        if let Some(end) = self.ascii.and_then(|piece| piece(text.as_bytes(), at)) {
            return Some(end);
        }
        let next = (self.next).get_or_init(|| Regex::new(&format!("^(?:{})", self.source)).ok());
        match next {
            Some(next) => next.find(&text[at..]).map(|m| at + m.end()),
            // (The pattern is a constant, which builds: see the tests.)
            None => Some(text.len()),
        }
    }

    /// Tokens in `text`, as tiktoken's `encode_ordinary(text).len()`
    /// (remembered for a longer text: see [`Memo`]).
    pub(crate) fn count(&self, text: &str) -> usize {
        self.memo.get_or(text, || self.count_afresh(text))
    }

    /// [`count`](Self::count), counted now.
    fn count_afresh(&self, text: &str) -> usize {
        let mut total = 0usize;
        let mut at = 0;
        while at < text.len() {
            // The piece at `at` (the pattern looks behind nothing, so it
            // matches in `text[at..]` as in `text`); should none start there,
            // the next one after it.
            let found = match self.piece_end(text, at) {
                Some(end) => at..end,
                None => {
                    let split = self.split.get_or_init(|| Regex::new(self.source).ok());
                    match split.as_ref().and_then(|s| s.find_at(text, at)) {
                        Some(m) => m.range(),
                        None => break,
                    }
                }
            };
            let piece = &text[found.clone()];
            let mut end = found.end;
            // The pattern's `\s+(?!\S)`: a run of whitespace (no line break,
            // or `\s*[\r\n]` would have matched) followed by more text gives
            // its last character to what follows.
            if end < text.len()
                && piece.chars().next_back().is_some_and(char::is_whitespace)
                && !piece.contains(['\r', '\n'])
            {
                if let Some((last, _)) = piece.char_indices().next_back() {
                    if last > 0 {
                        end = found.start + last;
                    }
                }
            }
            let piece = text.as_bytes().get(found.start..end).unwrap_or_default();
            total = total.saturating_add(self.vocab.count(piece));
            at = end;
        }
        total
    }
}

/// A vocabulary laid out as src/count/table.rs says, in static memory.
#[derive(Debug)]
pub(crate) struct Vocab {
    bytes: &'static [u8],
    ends: &'static [u8],
    slots: &'static [u8],
    bits: u32,
}

/// The rank of a pair that is no token.
const NONE: u32 = u32::MAX;

fn word(data: &[u8], i: usize) -> u32 {
    match data.get(i * 4..i * 4 + 4) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => 0,
    }
}

impl Vocab {
    /// The tables `build.rs` wrote: token bytes, end offsets, slots.
    pub(crate) fn new(bytes: &'static [u8], ends: &'static [u8], slots: &'static [u8]) -> Self {
        let count = slots.len() / 4;
        // `count` is a power of two; a table of one slot is never written.
        let bits = count.max(2).trailing_zeros();
        Vocab {
            bytes,
            ends,
            slots,
            bits,
        }
    }

    fn token(&self, rank: usize) -> &[u8] {
        let start = match rank {
            0 => 0,
            r => word(self.ends, r - 1) as usize,
        };
        let end = word(self.ends, rank) as usize;
        self.bytes.get(start..end).unwrap_or_default()
    }

    /// The rank of the token `bytes`, or [`NONE`].
    fn rank(&self, bytes: &[u8]) -> u32 {
        let hash = table::hash(bytes);
        let tag = table::tag(hash);
        let mask = (1usize << self.bits) - 1;
        let mut i = table::home(hash, self.bits);
        // The table is at most half full: some slot is empty.
        for _ in 0..=mask {
            let slot = word(self.slots, i);
            if slot == 0 {
                return NONE;
            }
            if slot >> table::RANK_BITS == tag {
                let rank = (slot & table::RANK_MASK) - 1;
                if self.token(rank as usize) == bytes {
                    return rank;
                }
            }
            i = (i + 1) & mask;
        }
        NONE
    }

    /// Tokens in one pre-split piece, as tiktoken's `byte_pair_encode`
    /// (and the same merges: short pieces as its `_byte_pair_merge`, long
    /// ones as its `_byte_pair_merge_large`).
    fn count(&self, piece: &[u8]) -> usize {
        if piece.len() <= 1 || self.rank(piece) != NONE {
            return piece.len().min(1);
        }
        if piece.len() < 100 {
            self.merge_short(piece)
        } else {
            self.merge_long(piece)
        }
    }

    /// Merges the lowest-ranked adjacent pair (the leftmost of equals)
    /// until no pair is a token; O(n²), fast for short pieces.
    fn merge_short(&self, piece: &[u8]) -> usize {
        // (start, rank of the pair starting here)
        let mut parts: Vec<(usize, u32)> = Vec::with_capacity(piece.len() + 1);
        let mut min = (NONE, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank < min.0 {
                min = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, NONE));
        parts.push((piece.len(), NONE));
        let pair = |parts: &[(usize, u32)], i: usize| match (parts.get(i), parts.get(i + 3)) {
            (Some(&(start, _)), Some(&(end, _))) => self.rank(&piece[start..end]),
            _ => NONE,
        };
        while min.0 != NONE {
            let i = min.1;
            if i > 0 {
                parts[i - 1].1 = pair(&parts, i - 1);
            }
            parts[i].1 = pair(&parts, i);
            parts.remove(i + 1);
            min = (NONE, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min.0 {
                    min = (rank, i);
                }
            }
        }
        parts.len() - 1
    }

    /// The same merges through a heap: O(n log n) for long pieces.
    fn merge_long(&self, piece: &[u8]) -> usize {
        #[derive(Clone, Copy)]
        struct Part {
            prev: usize,
            end: usize,
            next_end: usize,
            next_rank: u32,
        }
        /// Pops the lowest rank, then the leftmost start.
        #[derive(PartialEq, Eq)]
        struct Merge {
            rank: u32,
            start: usize,
        }
        impl Ord for Merge {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                (other.rank, other.start).cmp(&(self.rank, self.start))
            }
        }
        impl PartialOrd for Merge {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }

        let len = piece.len();
        let mut parts: Vec<Part> = (0..len)
            .map(|i| Part {
                prev: i.wrapping_sub(1),
                end: i + 1,
                next_end: i + 2,
                next_rank: NONE,
            })
            .collect();
        let mut heap = BinaryHeap::with_capacity(len);
        for i in 0..len - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank != NONE {
                heap.push(Merge { rank, start: i });
                parts[i].next_rank = rank;
            }
        }
        // The pair starting at `start` now ends at `next_end`.
        let offer = |parts: &mut [Part], heap: &mut BinaryHeap<Merge>, start: usize, next_end| {
            parts[start].next_end = next_end;
            parts[start].next_rank = NONE;
            if next_end <= len {
                let rank = self.rank(&piece[start..next_end]);
                if rank != NONE {
                    heap.push(Merge { rank, start });
                    parts[start].next_rank = rank;
                }
            }
        };
        while let Some(Merge { rank, start }) = heap.pop() {
            if rank != parts[start].next_rank {
                continue; // outdated
            }
            let right = parts[start].end;
            let right_end = parts[start].next_end;
            let right_next_end = parts[right].next_end;
            parts[start].end = right_end;
            offer(&mut parts, &mut heap, start, right_next_end);
            if right_end < len {
                parts[right_end].prev = start;
            }
            if start > 0 {
                let prev = parts[start].prev;
                offer(&mut parts, &mut heap, prev, right_end);
            }
            parts[right].next_rank = NONE;
        }
        let mut tokens = 0;
        let mut i = 0;
        while i < len {
            tokens += 1;
            i = parts[i].end;
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_gives_back_what_was_counted_and_stays_bounded() {
        let memo = Memo::new();
        let counted = std::cell::Cell::new(0);
        let count = |n: usize| {
            counted.set(counted.get() + 1);
            n
        };
        let long = "x".repeat(Memo::MIN);
        assert_eq!(memo.get_or(&long, || count(7)), 7);
        assert_eq!(memo.get_or(&long, || count(99)), 7, "remembered");
        assert_eq!(memo.get_or("short", || count(3)), 3);
        assert_eq!(
            memo.get_or("short", || count(4)),
            4,
            "short texts are counted each time"
        );
        assert_eq!(memo.get_or(&format!("{long}y"), || count(8)), 8, "another text");
        assert_eq!(counted.get(), 4);
        // Texts kept whole and texts known by their hash, on either side of
        // the length that parts them, each remembered as itself.
        let longer = "y".repeat(Memo::SHORT + 1);
        assert_eq!(memo.get_or(&long[1..].repeat(4), || count(5)), 5);
        assert_eq!(memo.get_or(&longer, || count(6)), 6);
        assert_eq!(memo.get_or(&long[1..].repeat(4), || count(50)), 5, "kept whole");
        assert_eq!(memo.get_or(&longer, || count(60)), 6, "by its hash");
        assert_eq!(counted.get(), 6);
        for i in 0..Memo::SHARDS * Memo::PER_SHARD * 2 {
            memo.get_or(&format!("{long}{i}"), || i);
            memo.get_or(&format!("{longer}{i}"), || i);
        }
        let held: usize = memo.shards.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(held <= Memo::SHARDS * Memo::PER_SHARD);
        let short: usize = memo.short.iter().map(|s| s.lock().unwrap().len()).sum();
        assert!(short > 0 && short <= Memo::SHARDS * Memo::SHORT_PER_SHARD);
    }

    /// A memo whose every lock is held, as in a child forked while another
    /// thread of its parent held one: texts are counted, and nothing waits.
    #[test]
    fn a_memo_whose_locks_are_held_still_counts() {
        let memo = std::sync::Arc::new(Memo::new());
        let long = "x".repeat(Memo::SHORT + 1);
        assert_eq!(memo.get_or(&long, || 7), 7);
        let held: Vec<_> = (memo.shards.iter().map(|s| s.lock().unwrap())).collect();
        let short: Vec<_> = (memo.short.iter().map(|s| s.lock().unwrap())).collect();
        let (sent, answers) = std::sync::mpsc::channel();
        let other = std::sync::Arc::clone(&memo);
        std::thread::spawn(move || {
            let counts = [other.get_or(&long, || 8), other.get_or("a short text", || 9)];
            let _ = sent.send(counts);
        });
        let counts = answers.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(counts, Ok([8, 9]), "counted afresh, without waiting");
        drop((held, short));
    }

    /// Another short text at a text's key (a collision, planted): the text
    /// is counted, and its own count kept, never the other's returned.
    #[test]
    fn a_short_text_that_collides_is_counted_again() {
        use std::hash::BuildHasher;
        let memo = Memo::new();
        let text = "/srv/data/file-000.csv";
        let key = std::hash::BuildHasherDefault::<Quick>::default().hash_one(text);
        let shard = (key >> 32) as usize % Memo::SHARDS;
        memo.short[shard]
            .lock()
            .unwrap()
            .insert(key, ("/srv/data/other.csv".into(), 999));
        let counted = std::cell::Cell::new(0);
        let count = |n: usize| {
            counted.set(counted.get() + 1);
            n
        };
        assert_eq!(memo.get_or(text, || count(7)), 7);
        assert_eq!(memo.get_or(text, || count(8)), 7, "its own count, kept");
        assert_eq!(counted.get(), 1);
    }

    /// The anchored pre-split finds a piece at the start of any text: every
    /// character opens one (so the unanchored fallback is never needed).
    #[test]
    fn every_character_opens_a_piece() {
        for split in [O200K_SPLIT, CL100K_SPLIT] {
            let next = Regex::new(&format!("^(?:{split})")).unwrap();
            let chars = (0u32..0x3_0000)
                .chain([0xE_0001, 0xF_0000, 0x10_FFFD, 0x10_FFFF])
                .filter_map(char::from_u32);
            for c in chars {
                for text in [
                    c.to_string(),
                    format!("{c}a"),
                    format!("{c} "),
                    format!("{c}\u{301}"),
                ] {
                    let found = next.find(&text).map(|m| m.start());
                    assert_eq!(found, Some(0), "{:?} in {split:?}", c);
                }
            }
        }
    }
}
