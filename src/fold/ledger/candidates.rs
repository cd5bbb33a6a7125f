//! A fold's candidate entries, ranked by salience.

use std::borrow::Cow;
use std::sync::Arc;

use super::json::Set;
use super::memo::{Firsts, RECALL, Reading, Readings, Recall, readings};
use super::read::{Hit, newest_first, ranked, reading_pieces};
use super::{Candidates, LedgerEntry, LedgerPattern, holds, is_loose, key_of, value_of};
use crate::message::{Message, Role};

/// The rank a user's own words add: what the user said matters most.
const SAID_BY_USER: u8 = 1;

/// The candidate entries for a fold: from the folded messages (newest
/// first), then the previous ledger, then identifiers in the previous prose;
/// deduplicated, the first (newest) place kept; each with its [`key_of`]
/// and whether it is loose; then ranked ([`rank`]).
/// Reading stops once `enough` entries are found or `max_bytes` of text
/// were read, or, when fewer than a quarter of `enough` were found in those
/// (the room would go unused: the identifiers of a long history's opening
/// turns, under turns of prose), 8 times as much.
/// With `remember` (and no `extra` patterns), each piece's entries are
/// found once per process ([`Recall`]), and a reading that meets the
/// pieces of one of this thread's kept readings takes its entries
/// ([`Reading`]), shared: a fold that takes them counts no reference on
/// each entry.
pub(crate) fn candidates<'m>(
    folded: impl DoubleEndedIterator<Item = &'m Message>,
    previous_prose: &str,
    previous_ledger: &[&str],
    extra: &[LedgerPattern],
    enough: usize,
    max_bytes: usize,
    remember: bool,
) -> Arc<Candidates> {
    let memo = remember && extra.is_empty();
    // (A reading that follows another to its end gathers nothing: sized
    // when a piece is read.)
    let mut g = Gathering::new(if memo { 0 } else { enough });
    let (mut read, mut limit, mut extended) = (0usize, max_bytes, false);
    // The messages read (their calls' ids are structural).
    let mut read_from: Vec<&'m Message> = Vec::new();
    let mut all = folded.rev().inspect(|m| read_from.push(m)).flat_map(|m| {
        let bonus = if m.role == Role::User { SAID_BY_USER } else { 0 };
        reading_pieces(m).map(move |piece| (piece, bonus))
    });
    // The older part of a piece cut at `max_bytes`, read if reading goes on.
    let mut older: Option<(Cow<'m, str>, u8)> = None;
    // This thread's readings (see `Reading`); the one whose pieces these
    // are so far, followed instead of read; the one this reading writes.
    let mut readings = match memo {
        true => readings(None),
        false => Readings::default(),
    };
    let mut follow: Option<usize> = None;
    let mut fresh: Option<Reading> = None;
    // Whether this reading is written (its first piece was seen before).
    let mut record = false;
    // Pieces taken.
    let mut k = 0;
    while let Some((whole, bonus)) = older.take().or_else(|| all.next()) {
        let found = match follow {
            Some(r) => readings.kept[r].found_after(k),
            None => g.out.texts.len(),
        };
        if found >= enough {
            break;
        }
        if read >= limit {
            // Too few found for the room: 8 times as far (once).
            if !extended && found.saturating_mul(4) < enough {
                (limit, extended) = (max_bytes.saturating_mul(8), true);
            } else {
                break;
            }
        }
        // The newest end of a piece longer than what is left to read,
        // from a word boundary so that no identifier is read in part.
        let left = limit - read;
        let piece: &str = if whole.len() > left {
            let mut from = whole.len() - left;
            while !whole.is_char_boundary(from) {
                from += 1;
            }
            let at = whole[from..]
                .find(char::is_whitespace)
                .map_or(whole.len(), |at| from + at);
            older = Some((
                match &whole {
                    Cow::Borrowed(w) => Cow::Borrowed(&w[..at]),
                    Cow::Owned(w) => Cow::Owned(w[..at].to_owned()),
                },
                bonus,
            ));
            &whole[at..]
        } else {
            &whole
        };
        // A piece cut short is the last one read, until the limit moves.
        read = match older.is_none() {
            true => read.saturating_add(piece.len()),
            false => limit,
        };
        if memo && k == 0 {
            let same =
                |r: &Reading| r.enough == enough && r.max_bytes == max_bytes && r.piece(0) == Some(piece);
            follow = readings.kept.iter().position(same);
            record = follow.is_some() || readings.sighted(piece, enough, max_bytes);
            if follow.is_none() {
                g = Gathering::new(enough);
            }
        } else if let Some(r) = follow.filter(|&r| readings.kept[r].piece(k) != Some(piece)) {
            // Another piece: what the reading found before it, then read on.
            (g, fresh) = readings.kept[r].up_to(k, enough);
            follow = None;
        }
        k += 1;
        if follow.is_some() {
            continue;
        }
        // (The newest end of a piece is the same text each time too.)
        let scan = || with_keys(newest_first(piece, extra));
        match memo && piece.len() >= Recall::MIN {
            true => RECALL.with(piece, |seen| g.take(seen.found.get_or_init(scan), enough, bonus)),
            false => g.take(&scan(), enough, bonus),
        }
        if record {
            let reading = fresh.get_or_insert_with(|| Reading::new(enough, max_bytes));
            match reading.text.len().saturating_add(piece.len()) <= Reading::BYTES {
                true => reading.push(piece, g.out.texts.len()),
                // Too long a reading to keep.
                false => (fresh, record) = (None, false),
            }
        }
    }
    if let Some(r) = follow {
        let reading = &readings.kept[r];
        if k == reading.ends.len() && reading.prose == previous_prose && reading.ledger == previous_ledger {
            // The same reading: what it found, ranked.
            let found = Arc::clone(&reading.ranked);
            let reading = readings.kept.remove(r);
            readings.kept.insert(0, reading);
            let _ = self::readings(Some(readings));
            return found;
        }
        // The same pieces, fewer of them, or another summary before them.
        (g, fresh) = reading.up_to(k, enough);
    }
    if k == 0 {
        // (No piece read: sized for the previous ledger now.)
        g = Gathering::new(enough);
    }
    // What an earlier fold listed was chosen once: it ranks as a strong
    // shape does.
    for &entry in previous_ledger {
        g.add(&entry.into(), key_of(entry), is_loose(entry), PREVIOUS);
    }
    for (_, entry, rank) in ranked(previous_prose, extra).into_iter().rev() {
        g.add(&entry, key_of(&entry), is_loose(&entry), rank);
    }
    drop(all);
    let structural: Set<&str> = (read_from.iter())
        .flat_map(|m| m.call_ids().chain(m.answered_ids()))
        .collect();
    let ranked = Arc::new(rank(&g.out, &structural));
    // (Kept within its bound whole: its text, the previous summary, and
    // about what an entry's place takes, its text shared.)
    let size = |r: &Reading| {
        let ledger: usize = previous_ledger.iter().map(|e| e.len()).sum();
        (r.text.len())
            .saturating_add(previous_prose.len())
            .saturating_add(ledger)
            .saturating_add(g.out.texts.len().saturating_mul(32))
    };
    if let Some(mut reading) = fresh.filter(|r| size(r) <= Reading::BYTES) {
        reading.prose = previous_prose.to_owned();
        reading.ledger = previous_ledger.iter().map(|&e| e.to_owned()).collect();
        reading.found = g.out;
        reading.ranked = Arc::clone(&ranked);
        readings.kept.insert(0, reading);
        readings.kept.truncate(Reading::KEPT);
    }
    if memo {
        let _ = self::readings(Some(readings));
    }
    ranked
}

/// The rank of an entry an earlier fold listed.
const PREVIOUS: u8 = 2;

/// `found` ranked for the ledger's room: structural ids (the folded calls'
/// own) and fragments of a longer entry left out, then the highest rank
/// first, newest first within a rank (the order it was gathered in).
fn rank(found: &Candidates, structural: &Set<&str>) -> Candidates {
    let n = found.texts.len();
    let values: Vec<&str> = found.texts.iter().map(|e| value_of(e)).collect();
    // The values by length, with which bytes (mod 64) each holds: a part
    // of another is shorter, and holds no byte that the other lacks, which
    // rules out most pairs at one look.
    let mut by_length: Vec<(usize, u64, usize)> = (values.iter().enumerate())
        .map(|(j, v)| (v.len(), v.bytes().fold(0u64, |bits, b| bits | 1 << (b & 63)), j))
        .collect();
    by_length.sort_unstable();
    let mut fragment = vec![false; n];
    for &(len, mine, i) in &by_length {
        let longer = &by_length[by_length.partition_point(|e| e.0 <= len)..];
        fragment[i] = (longer.iter())
            .any(|&(_, bits, j)| mine & !bits == 0 && holds(values[j].as_bytes(), values[i].as_bytes()));
    }
    let mut order: Vec<usize> = (0..n)
        .filter(|&i| !structural.contains(values[i]) && !fragment[i])
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(found.ranks[i]));
    Candidates {
        texts: order.iter().map(|&i| found.texts[i].clone()).collect(),
        keys: order.iter().map(|&i| found.keys[i]).collect(),
        loose: order.iter().map(|&i| found.loose[i]).collect(),
        ranks: order.iter().map(|&i| found.ranks[i]).collect(),
    }
}

/// [`candidates`]' entries so far, one per identifier (`key: value` and a
/// bare `value` are the same one), and where each key's first is.
pub(super) struct Gathering {
    pub(super) out: Candidates,
    pub(super) firsts: Firsts,
}

impl Gathering {
    /// Room for `enough` entries.
    pub(super) fn new(enough: usize) -> Self {
        let likely = enough.min(1 << 12);
        Gathering {
            out: Candidates {
                texts: Vec::with_capacity(likely),
                keys: Vec::with_capacity(likely),
                loose: Vec::with_capacity(likely),
                ranks: Vec::with_capacity(likely),
            },
            firsts: Firsts::new(enough),
        }
    }

    /// Adds `entry`, of `key`, unless its identifier is listed (then its
    /// rank is raised to `rank` if that is higher).
    fn add(&mut self, entry: &LedgerEntry, key: u64, loose: bool, rank: u8) {
        let out = &mut self.out;
        if let Some(first) = self.firsts.first(key, &out.keys) {
            // Listed already (most often as the same text), unless two
            // identifiers share the hash.
            let at = match out.texts[first] == **entry {
                true => Some(first),
                false => {
                    let value = value_of(entry);
                    let listed = |e: &LedgerEntry| value_of(e) == value;
                    (listed(&out.texts[first]).then_some(first)).or_else(|| out.texts.iter().position(listed))
                }
            };
            if let Some(at) = at {
                out.ranks[at] = out.ranks[at].max(rank);
                return;
            }
        }
        self.firsts.note(key, out.texts.len());
        out.texts.push(entry.clone());
        out.keys.push(key);
        out.loose.push(loose);
        out.ranks.push(rank);
    }

    /// Adds a piece's entries, in order, until `enough` (a line's taken
    /// whole).
    fn take(&mut self, found: &[Found], enough: usize, bonus: u8) {
        let mut line = None;
        for f in found {
            if line != Some(f.line) && self.out.texts.len() >= enough {
                break;
            }
            line = Some(f.line);
            self.add(&f.entry, f.key, f.loose, f.rank.saturating_add(bonus));
        }
    }
}

/// An identifier found in a piece, with what is known of it once found.
#[derive(Clone, Debug)]
pub(super) struct Found {
    /// Its line.
    line: usize,
    entry: LedgerEntry,
    /// Its [`key_of`].
    key: u64,
    /// Whether it is loose ([`is_loose`]).
    loose: bool,
    /// Its rank (see [`super::read::KEYED`]).
    rank: u8,
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
