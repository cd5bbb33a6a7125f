//! A fold's candidate entries, ranked by salience.

use std::borrow::Cow;
use std::sync::Arc;

use super::found::{Found, Mark, with_keys};
use super::json::Set;
use super::memo::{Firsts, RECALL, Reading, Readings, Recall, readings};
use super::read::{newest_first, ranked, reading_pieces};
use super::{Candidates, Carried, LedgerEntry, LedgerPattern, Tier, holds, is_loose, key_of, value_of};
use crate::message::{Content, Message, Part, Role};

/// An entry's rank: its tier, then its shape's strength (0 to 3, see
/// [`super::spans::KEYED`]): a rarer, surer shape first within a tier.
pub(super) fn rank_of(tier: Tier, strength: u8) -> u8 {
    (tier as u8) << 2 | strength.min(3)
}

/// The tier a rank holds.
pub(super) fn tier_of(rank: u8) -> Tier {
    match rank >> 2 {
        0 => Tier::Tool,
        1 => Tier::Call,
        2 => Tier::Repeated,
        _ => Tier::User,
    }
}

/// The turn an earlier ledger's entries are gathered under: any folded
/// turn that names one again raises it.
const EARLIER: u32 = u32::MAX;

/// The turn an earlier summary's prose is read under (its identifiers
/// were never told apart from the ledger's).
const PROSE: u32 = u32::MAX - 1;

/// A message's pieces to read, each with its tier: the user's words, the
/// model's text and calls, a tool's results (in a user message too).
fn tiered_pieces(m: &Message) -> Tiered<'_> {
    let tier = Tier::of(&m.role);
    // Most messages are a text alone: one piece, nothing gathered.
    if let (Some(Content::Text(text)), true) = (&m.content, m.tool_calls.is_empty()) {
        return Tiered::One(Some((Cow::Borrowed(text), tier)));
    }
    let results = m.role == Role::User && m.parts().iter().any(Part::is_result);
    let mut pieces: Vec<(Cow<'_, str>, Tier)> = Vec::new();
    match results {
        // A user message that carries tool results: each part its own.
        true => {
            for part in m.parts().iter().rev() {
                let tier = if part.is_result() { Tier::Tool } else { Tier::User };
                pieces.extend(part.prose().into_iter().rev().map(|p| (Cow::Borrowed(p), tier)));
            }
        }
        false => pieces.extend(reading_pieces(m).map(|p| (p, tier))),
    }
    Tiered::Many(pieces.into_iter())
}

/// What [`tiered_pieces`] gives: a message's one text, or its pieces in turn.
enum Tiered<'m> {
    One(Option<(Cow<'m, str>, Tier)>),
    Many(std::vec::IntoIter<(Cow<'m, str>, Tier)>),
}

impl<'m> Iterator for Tiered<'m> {
    type Item = (Cow<'m, str>, Tier);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Tiered::One(piece) => piece.take(),
            Tiered::Many(pieces) => pieces.next(),
        }
    }
}

/// The candidate entries for a fold: from the folded messages (the user's
/// first, then the others, newest first each), then the previous ledger
/// (each entry with its tier), then identifiers in the previous prose;
/// deduplicated, the first place kept, an entry found in two turns raised
/// to [`Tier::Repeated`] at least (a tool's result naming its call's
/// argument is the same turn); each with its [`key_of`] and
/// whether it is loose; then ranked ([`rank`]): highest tier first, then
/// the surer shape, then the newest.
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
    folded: impl DoubleEndedIterator<Item = &'m Message> + Clone,
    previous_prose: &str,
    previous_ledger: &[Carried],
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
    let mut all = in_reading_order(folded, &mut read_from);
    // The older part of a piece cut at `max_bytes`, read if reading goes on.
    let mut older: Option<(Cow<'m, str>, Mark)> = None;
    // This thread's readings (see `Reading`); the one whose pieces these
    // are so far, followed instead of read; the one this reading writes.
    let mut readings = match memo {
        true => readings(None),
        false => Readings::default(),
    };
    // (The kept readings are found by `key`: the limits and first piece.)
    let mut key = 0;
    let mut follow: Option<u64> = None;
    let mut fresh: Option<Reading> = None;
    // Whether this reading is written (its first piece was seen before).
    let mut record = false;
    // Pieces taken.
    let mut k = 0;
    while let Some((whole, mark)) = older.take().or_else(|| all.next()) {
        let found = match follow.and_then(|r| readings.kept.get(r)) {
            Some(reading) => reading.found_after(k),
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
        // The newest end of a piece longer than what is left to read.
        let left = limit - read;
        let piece: &str = if whole.len() > left {
            let at = newest_end(&whole, left);
            older = Some((
                match &whole {
                    Cow::Borrowed(w) => Cow::Borrowed(&w[..at]),
                    Cow::Owned(w) => Cow::Owned(w[..at].to_owned()),
                },
                mark,
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
            let same = |r: &Reading| {
                r.enough == enough
                    && r.max_bytes == max_bytes
                    && r.piece(0) == Some(piece)
                    && r.mark(0) == Some(mark)
            };
            key = Readings::key(piece, mark, enough, max_bytes);
            follow = readings.kept.get(key).filter(|r| same(r)).map(|_| key);
            record = follow.is_some() || readings.sighted(key);
            if follow.is_none() {
                g = Gathering::new(enough);
            }
        } else if let Some(reading) = (follow.and_then(|r| readings.kept.get(r)))
            .filter(|reading| reading.piece(k) != Some(piece) || reading.mark(k) != Some(mark))
        {
            // Another piece: what the reading found before it, then read on.
            (g, fresh) = replay(reading, k, enough);
            follow = None;
        }
        k += 1;
        if follow.is_some() {
            continue;
        }
        // (The newest end of a piece is the same text each time too.)
        g.read(piece, extra, enough, mark, memo);
        if record {
            let reading = fresh.get_or_insert_with(|| Reading::new(enough, max_bytes));
            match Reading::fits(reading.text.len().saturating_add(piece.len())) {
                true => reading.push(piece, mark, g.out.texts.len()),
                // Too long a reading to keep.
                false => (fresh, record) = (None, false),
            }
        }
    }
    if let Some(reading) = follow.and_then(|r| readings.kept.get(r)) {
        if k == reading.ends.len()
            && reading.prose == previous_prose
            && same_ledger(&reading.ledger, previous_ledger)
        {
            // The same reading: what it found, ranked.
            let found = Arc::clone(&reading.ranked);
            let _ = self::readings(Some(readings));
            return found;
        }
        // The same pieces, fewer of them, or another summary before them.
        (g, fresh) = replay(reading, k, enough);
    }
    if k == 0 {
        // (No piece read: sized for the previous ledger now.)
        g = Gathering::new(enough);
    }
    g.add_previous(previous_prose, previous_ledger, extra);
    drop(all);
    let structural: Set<&str> = (read_from.iter())
        .flat_map(|m| m.call_ids().chain(m.answered_ids()))
        .collect();
    let ranked = Arc::new(rank(&g.out, &structural));
    if let Some(reading) = fresh {
        let found = g.out.texts.len();
        keep(
            &mut readings,
            (key, reading, found),
            (previous_prose, previous_ledger),
            &ranked,
        );
    }
    if memo {
        let _ = self::readings(Some(readings));
    }
    ranked
}

/// The pieces of the `folded` messages in the order they are read: newest
/// first, the user's before the others' (what the user said leaves last),
/// each marked with its tier and its turn (0 the newest: a user's message
/// that is not a tool's result opens one); each message is noted in
/// `read_from` as it is reached.
fn in_reading_order<'m, 'r>(
    folded: impl DoubleEndedIterator<Item = &'m Message> + Clone + 'r,
    read_from: &'r mut Vec<&'m Message>,
) -> impl Iterator<Item = (Cow<'m, str>, Mark)> + 'r {
    let opens = |m: &Message| m.role == Role::User && !m.is_response();
    let turns = move |opened: &mut u32, m: &'m Message| {
        let turn = *opened;
        *opened += u32::from(opens(m));
        Some((m, turn))
    };
    let users = (folded.clone().rev())
        .filter(|m| m.role == Role::User)
        .scan(0u32, turns);
    let others = folded
        .rev()
        .scan(0u32, turns)
        .filter(|(m, _)| m.role != Role::User);
    users
        .chain(others)
        .inspect(move |(m, _)| read_from.push(m))
        .flat_map(|(m, turn)| tiered_pieces(m).map(move |(piece, tier)| (piece, (tier, turn))))
}

/// Where the newest `left` bytes of `whole` start: at a word boundary, so
/// that no identifier is read in part, and not inside digit or capital
/// groups (a phone number's, an IBAN's).
fn newest_end(whole: &str, left: usize) -> usize {
    let mut from = whole.len() - left;
    while !whole.is_char_boundary(from) {
        from += 1;
    }
    let bytes = whole.as_bytes();
    let grouped = |b: u8| b.is_ascii_digit() || b.is_ascii_uppercase();
    (whole[from..].char_indices())
        .map(|(i, _)| from + i)
        .find(|&i| {
            bytes[i].is_ascii_whitespace()
                && !(i > 0 && grouped(bytes[i - 1]) && bytes.get(i + 1).is_some_and(|&b| grouped(b)))
                || !bytes[i].is_ascii() && whole[i..].starts_with(char::is_whitespace)
        })
        .unwrap_or(whole.len())
}

/// Keeps `reading` (of `key`), which found `found` entries (`ranked`,
/// once ranked) after the previous summary `previous` (its prose and
/// ledger), among this thread's readings, by their memo's rule.
fn keep(
    readings: &mut Readings,
    (key, mut reading, found): (u64, Reading, usize),
    (prose, ledger): (&str, &[Carried]),
    ranked: &Arc<Candidates>,
) {
    reading.prose = prose.to_owned();
    reading.ledger = ledger.iter().map(|c| (c.text.to_string(), c.tier)).collect();
    reading.ranked = Arc::clone(ranked);
    reading.found = found;
    drop(readings.kept.put(key, reading));
}

/// Whether a kept reading's earlier ledger is `ledger`.
fn same_ledger(kept: &[(String, Tier)], ledger: &[Carried]) -> bool {
    kept.len() == ledger.len()
        && kept
            .iter()
            .zip(ledger)
            .all(|(a, b)| a.0 == *b.text && a.1 == b.tier)
}

/// What the first `k` pieces of `reading` gather (each piece's finds are
/// remembered: a lookup each), and a reading of them to go on with.
fn replay(reading: &Reading, k: usize, enough: usize) -> (Gathering, Option<Reading>) {
    let mut g = Gathering::new(enough);
    for j in 0..k {
        let (Some(piece), Some(mark)) = (reading.piece(j), reading.mark(j)) else {
            break;
        };
        g.read(piece, &[], enough, mark, true);
    }
    (g, Some(reading.prefix(k)))
}

/// The strength of an entry an earlier fold listed (its tier is its own).
const PREVIOUS: u8 = 2;

/// `found` ranked for the ledger's room: structural ids (the folded calls'
/// own) and fragments of a longer entry left out, then the highest rank
/// first, in the order gathered within a rank (the user's newest first,
/// then the others', then the earlier ledger's).
fn rank(found: &Candidates, structural: &Set<&str>) -> Candidates {
    let n = found.texts.len();
    let values: Vec<&str> = found.texts.iter().map(|e| value_of(e)).collect();
    // The values by length, with which bytes (mod 64) each holds: a part
    // of another is shorter, and holds no byte that the other lacks, which
    // rules out most pairs at one look.
    let mut by_length: Vec<(usize, u64, usize)> = (values.iter().enumerate())
        .map(|(j, v)| (v.len(), v.bytes().fold(0u64, |bits, b| bits | 1 << (b & 63)), j))
        .collect();
    by_length.sort_unstable_by_key(|&(len, _, _)| len);
    // (Two entries an earlier fold listed were told apart then: an entry
    // only it names is compared with the fresh ones alone.)
    let carried = |i: usize| found.from[i] == EARLIER;
    let fresh: Vec<(usize, u64, usize)> = by_length.iter().copied().filter(|e| !carried(e.2)).collect();
    let mut fragment = vec![false; n];
    for &(len, mine, i) in &by_length {
        let among = if carried(i) { &fresh } else { &by_length };
        let longer = &among[among.partition_point(|e| e.0 <= len)..];
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
        from: order.iter().map(|&i| found.from[i]).collect(),
    }
}

/// [`candidates`]' entries so far, one per identifier (`key: value` and a
/// bare `value` are the same one), and where each key's first is.
pub(super) struct Gathering {
    pub(super) out: Candidates,
    pub(super) firsts: Firsts,
}

impl Gathering {
    /// Adds what the previous summary holds: what an earlier fold listed
    /// keeps its tier, and ranks as a strong shape does; what its prose
    /// holds was kept by the summarizer: named again.
    fn add_previous(&mut self, prose: &str, ledger: &[Carried], extra: &[LedgerPattern]) {
        for c in ledger {
            self.add(&c.text, c.key, c.loose, rank_of(c.tier, PREVIOUS), EARLIER);
        }
        for (_, entry, strength) in ranked(prose, extra).into_iter().rev() {
            let rank = rank_of(Tier::Repeated, strength);
            self.add(&entry, key_of(&entry), is_loose(&entry), rank, PROSE);
        }
    }

    /// Room for `enough` entries.
    pub(super) fn new(enough: usize) -> Self {
        let likely = enough.min(1 << 12);
        Gathering {
            out: Candidates {
                texts: Vec::with_capacity(likely),
                keys: Vec::with_capacity(likely),
                loose: Vec::with_capacity(likely),
                ranks: Vec::with_capacity(likely),
                from: Vec::with_capacity(likely),
            },
            firsts: Firsts::new(enough),
        }
    }

    /// Adds `entry`, of `key`, found in turn `from`, unless its identifier
    /// is listed: then its rank is raised to `rank` if that is higher, and
    /// to [`Tier::Repeated`] if it was found in another turn.
    fn add(&mut self, entry: &LedgerEntry, key: u64, loose: bool, rank: u8, from: u32) {
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
                let mut raised = out.ranks[at].max(rank);
                if out.from[at] != from && tier_of(raised) < Tier::Repeated {
                    raised = rank_of(Tier::Repeated, raised & 3);
                }
                out.ranks[at] = raised;
                out.from[at] = from;
                return;
            }
        }
        self.firsts.note(key, out.texts.len());
        out.texts.push(entry.clone());
        out.keys.push(key);
        out.loose.push(loose);
        out.ranks.push(rank);
        out.from.push(from);
    }

    /// Adds the entries of `piece`, read at `mark`, until `enough`: found
    /// once per process when `memo` says so ([`Recall`]).
    fn read(&mut self, piece: &str, extra: &[LedgerPattern], enough: usize, mark: Mark, memo: bool) {
        let scan = || with_keys(newest_first(piece, extra));
        match memo && piece.len() >= Recall::MIN {
            true => RECALL.with(piece, |seen| {
                self.take(seen.found.get_or_init(scan), enough, mark)
            }),
            false => self.take(&scan(), enough, mark),
        }
    }

    /// Adds a piece's entries, in order, until `enough` (a line's taken
    /// whole), read at `mark`.
    fn take(&mut self, found: &[Found], enough: usize, (tier, from): Mark) {
        let mut line = None;
        for f in found {
            if line != Some(f.line) && self.out.texts.len() >= enough {
                break;
            }
            line = Some(f.line);
            self.add(&f.entry, f.key, f.loose, rank_of(tier, f.rank), from);
        }
    }
}
