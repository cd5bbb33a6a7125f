//! Telling repeated lines apart: `Discussed:` lines that say again what a better one says,
//! found by an exact similarity join.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::gather::Candidate;
use super::text::{lower, spoken};
use crate::quick::Quick;

/// `members` (the candidates of `Discussed:`, in order) less the lines that
/// say again what a better one says (the best first, ties the earlier):
/// two thirds of their words the same, and every word of theirs that names
/// something exact (a digit, `.`, `/`, `:`, `@` or `\\`) in the better one
/// too.
/// `The cache dashboard looks steady.` ten times, each with another name,
/// is one line; two requests about different files are two.
///
/// A similarity join, exact: each word is numbered by how rare it is among
/// the members (the rarest first), each line is its sorted numbers, and a
/// line is compared only with the kept lines that share a word of its
/// first ones. Two lines with two thirds of all their words in common
/// share at least `2/3` of the longer's words, so that the first `m -
/// ceil(2m/3) + 1` of a line of `m` words and the first ones of the other
/// meet (a prefix filter); the rarest words first keep those lists short.
/// The first word two lines meet at is the first they share, so only the
/// words after it can make up the rest (a positional filter), and the most
/// common words, which make up most of a line, are compared as bits.
/// A fold of thousands of turns, or a rolling summary read again at each
/// fold, costs about a line's words a line, not a pass over all the pairs.
///
/// On text made of a few dozen words over and over, every line meets most
/// of the kept ones, and the join is quadratic again. So it reads at most
/// [`MEETINGS`] index entries a member: past that, the lines not yet
/// compared are all kept (with no repeat among them left out). Prose stays
/// far below it (88 a member on 43 000 lines of crate documentation).
pub(super) fn distinct(candidates: &[Candidate], members: &[usize]) -> Vec<usize> {
    let budget = members.len().saturating_mul(MEETINGS).saturating_add(1 << 16);
    join(candidates, members, COMMON, budget)
}

/// Index entries [`distinct`] reads a member, at most (in all, not each).
const MEETINGS: usize = 256;

/// [`distinct`], with the `common` (at most [`COMMON`]) most common words
/// as bits, comparing lines until `budget` index entries have been read.
fn join(candidates: &[Candidate], members: &[usize], common: usize, budget: usize) -> Vec<usize> {
    /// Lines of fewer words are too short to call the same.
    const WORDS: usize = 4;
    let words = NumberedWords::new(candidates, members);
    let ranking = Ranking::new(&words.seen, common);
    // The best first, ties the earlier.
    let mut order: Vec<usize> = (0..members.len()).collect();
    let score = |i: usize| candidates[members[i]].score;
    order.sort_by(|&a, &b| score(b).cmp(&score(a)).then(a.cmp(&b)));
    let mut kept = Kept::new(order.len(), words.seen.len(), budget);
    for (step, i) in order.into_iter().enumerate() {
        // Out of budget: the rest, kept as they are (and met by none).
        if kept.left == 0 {
            kept.lines.push((members[i], Line::default()));
            continue;
        }
        let (line, exact) = ranking.line(words.of(i));
        let step = step as u32 + 1;
        if line.all.len() >= WORDS && kept.repeats(&line, &exact, step) {
            continue;
        }
        kept.keep(members[i], line);
    }
    let mut kept: Vec<usize> = kept.lines.into_iter().map(|(k, _)| k).collect();
    kept.sort_unstable();
    kept
}

/// The words of [`join`]'s members (without the speaker, `assistant: `),
/// numbered in the order met.
struct NumberedWords {
    /// Each member's words, sorted and each once, and whether each names
    /// something exact. (All in one list: member `i`'s are
    /// `flat[ends[i - 1]..ends[i]]`.)
    flat: Vec<(u32, bool)>,
    /// Where each member's words end in `flat`.
    ends: Vec<usize>,
    /// How many members have each word.
    seen: Vec<u32>,
}

impl NumberedWords {
    /// The words of `members` (the candidates of `Discussed:`, in order).
    fn new(candidates: &[Candidate], members: &[usize]) -> Self {
        // (The words come from the caller's text: the hash is seeded.)
        // (A word already in lower case is its line's text, not a copy.)
        let mut numbers: HashMap<Cow<'_, str>, u32, BuildHasherDefault<Quick>> = HashMap::default();
        let mut seen: Vec<u32> = Vec::new();
        let mut flat: Vec<(u32, bool)> = Vec::new();
        let mut ends: Vec<usize> = Vec::with_capacity(members.len());
        for &k in members {
            let said = spoken(&candidates[k].text);
            let from = flat.len();
            for word in said.split_whitespace() {
                let word = bare(word);
                if word.is_empty() {
                    continue;
                }
                // (Most words are lowercase already: no copy to look them up.)
                let lower = lower(word);
                let named = lower.bytes().any(crate::fold::hot::is_mark);
                let n = match numbers.get(&*lower) {
                    Some(&n) => n,
                    None => {
                        let n = numbers.len() as u32;
                        numbers.insert(lower, n);
                        seen.push(0);
                        n
                    }
                };
                flat.push((n, named));
            }
            // Sorted, each once.
            flat[from..].sort_unstable();
            let mut end = from;
            for r in from..flat.len() {
                if end == from || flat[r] != flat[end - 1] {
                    flat[end] = flat[r];
                    end += 1;
                }
            }
            flat.truncate(end);
            for &(n, _) in &flat[from..] {
                seen[n as usize] += 1;
            }
            ends.push(end);
        }
        NumberedWords { flat, ends, seen }
    }

    /// Member `i`'s words.
    fn of(&self, i: usize) -> &[(u32, bool)] {
        &self.flat[if i == 0 { 0 } else { self.ends[i - 1] }..self.ends[i]]
    }
}

/// `word` without the punctuation around it.
fn bare(word: &str) -> &str {
    // (Most words start and end with a letter or digit: nothing to trim.)
    let bytes = word.as_bytes();
    let alnum = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    match alnum(bytes.first()) && alnum(bytes.last()) {
        true => word,
        false => word.trim_matches(|c: char| !c.is_alphanumeric()),
    }
}

/// Each word's rank among [`join`]'s members: the rarest first (ties by
/// first met).
struct Ranking {
    rank: Vec<u32>,
    /// The first rank of the most common words, which a [`Line`] also
    /// holds as bits.
    common: u32,
}

impl Ranking {
    /// The ranks of the words `seen` (by how many members have each), the
    /// `common` (at most [`COMMON`]) most common as bits.
    fn new(seen: &[u32], common: usize) -> Self {
        let mut by_rarity: Vec<u32> = (0..seen.len() as u32).collect();
        by_rarity.sort_unstable_by_key(|&n| (seen[n as usize], n));
        let mut rank = vec![0u32; seen.len()];
        for (r, &n) in by_rarity.iter().enumerate() {
            rank[n as usize] = r as u32;
        }
        // The most common words (the highest ranks) are also bits, so that
        // lines made mostly of them compare in a few instructions.
        let common = (seen.len() as u32).saturating_sub(common.min(COMMON) as u32);
        Ranking { rank, common }
    }

    /// A member's `words` as a line, and the ranks of those that name
    /// something exact.
    fn line(&self, words: &[(u32, bool)]) -> (Line, Vec<u32>) {
        let rank = &self.rank;
        let mut all: Vec<u32> = words.iter().map(|&(n, _)| rank[n as usize]).collect();
        all.sort_unstable();
        let rare = all.partition_point(|&r| r < self.common);
        let mut bits = [0u64; COMMON / 64];
        for &r in &all[rare..] {
            let b = (r - self.common) as usize;
            bits[b / 64] |= 1 << (b % 64);
        }
        let exact: Vec<u32> = (words.iter())
            .filter(|&&(_, named)| named)
            .map(|&(n, _)| rank[n as usize])
            .collect();
        (Line { all, rare, bits }, exact)
    }
}

/// The lines [`join`] keeps, and its index of them.
struct Kept {
    /// Each kept line: its candidate and its words.
    lines: Vec<(usize, Line)>,
    /// By word (of their first ones), the kept lines that have it, with
    /// its place among their words and their count.
    having: Vec<Vec<[u32; 3]>>,
    /// The last line each kept one was compared with (its step, from 1).
    asked: Vec<u32>,
    /// Index entries left to read.
    left: usize,
}

impl Kept {
    /// None kept yet, with room for `lines` lines and `words` words, and
    /// `budget` index entries to read.
    fn new(lines: usize, words: usize, budget: usize) -> Self {
        Kept {
            lines: Vec::with_capacity(lines),
            having: vec![Vec::new(); words],
            asked: Vec::new(),
            left: budget,
        }
    }

    /// Whether `line` (the `step`th compared; `exact`, its words that name
    /// something exact) says again what a kept line says. `false` when the
    /// budget runs out first.
    fn repeats(&mut self, line: &Line, exact: &[u32], step: u32) -> bool {
        let mine = &line.all;
        let m = mine.len();
        for (p, &w) in mine[..prefix(m).min(m)].iter().enumerate() {
            let entries = &self.having[w as usize];
            if entries.len() > self.left {
                self.left = 0;
                return false;
            }
            self.left -= entries.len();
            for &[j, q, t] in entries {
                let (j, q, t) = (j as usize, q as usize, t as usize);
                // Two in three of all their words in common (`3 shared
                // >= 2 (m + t - shared)`), and no name of its own. The
                // first time two lines meet is at the first word they
                // share (an earlier one would be in both prefixes):
                // only the words after it can add to it. At a later
                // meeting fewer words are left: a pair too short at
                // one was too short at the first too.
                let need = (2 * (m + t)).div_ceil(5);
                if 5 * m.min(t) < 2 * (m + t) || 1 + (m - p - 1).min(t - q - 1) < need {
                    continue;
                }
                if std::mem::replace(&mut self.asked[j], step) == step {
                    continue;
                }
                let other = &self.lines[j].1;
                if line.shares(p, other, q, need) && exact.iter().all(|w| other.all.binary_search(w).is_ok())
                {
                    return true;
                }
            }
        }
        false
    }

    /// Keeps `line`, candidate `k`'s, and while the budget lasts indexes
    /// it by its first words. (Compared in part, or the last compared, it
    /// is met by none.)
    fn keep(&mut self, k: usize, line: Line) {
        if self.left > 0 {
            let t = line.all.len();
            for (q, &w) in line.all[..prefix(t).min(t)].iter().enumerate() {
                self.having[w as usize].push([self.lines.len() as u32, q as u32, t as u32]);
            }
            self.asked.push(0);
        }
        self.lines.push((k, line));
    }
}

/// How many of the first words of a line of `m` words meet another's (see
/// [`distinct`]).
fn prefix(m: usize) -> usize {
    m - (2 * m).div_ceil(3) + 1
}

/// How many of the most common words a line of [`distinct`] holds as bits.
const COMMON: usize = 256;

/// A line's words for [`distinct`]: their numbers, sorted (the rarest
/// first), how many are rare, and the common ones as bits (number less
/// the first common one).
#[derive(Default)]
struct Line {
    all: Vec<u32>,
    rare: usize,
    bits: [u64; COMMON / 64],
}

impl Line {
    /// Whether this line and `other`, which first meet at its `p`th word
    /// and their `q`th (the first word they share), have `need` words in
    /// common: the common words they share, as bits, and, when that first
    /// word is rare, it and the rare words after it (else they share no
    /// rare word).
    fn shares(&self, p: usize, other: &Line, q: usize, need: usize) -> bool {
        let both = self.bits.iter().zip(&other.bits);
        let bits = both.map(|(a, b)| (a & b).count_ones() as usize).sum::<usize>();
        match p < self.rare {
            true => share(
                &self.all[p + 1..self.rare],
                &other.all[(q + 1).min(other.rare)..other.rare],
                need.saturating_sub(bits + 1),
            ),
            false => bits >= need,
        }
    }
}

/// Whether two sorted lists of distinct numbers have `need` or more in
/// common: merged until found, or until what is left of the shorter
/// cannot make up the rest.
fn share(a: &[u32], b: &[u32], need: usize) -> bool {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while n < need && n + (a.len() - i).min(b.len() - j) >= need {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => (i, j, n) = (i + 1, j + 1, n + 1),
        }
    }
    n >= need
}

#[cfg(test)]
mod tests;
