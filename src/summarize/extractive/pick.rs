//! Picking: which candidate lines fit the allowance, sampled across the span, and the text they make.

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::gather::{Candidate, SPAN, Section};
use super::text::{lower, spoken};
use crate::quick::Quick;

/// Which candidates each section keeps, within `allowance`.
pub(super) fn choose(
    candidates: &[Candidate],
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> Vec<usize> {
    let mut by_section: HashMap<Section, Vec<usize>> = HashMap::new();
    for (k, c) in candidates.iter().enumerate() {
        by_section.entry(c.section).or_default().push(k);
    }
    for (section, members) in by_section.iter_mut() {
        // (Decisions and questions that differ in a word differ.)
        if *section == Section::Discussed {
            *members = distinct(candidates, members);
        }
    }
    let headings: HashMap<Section, usize> = Section::WRITTEN
        .into_iter()
        .map(|s| (s, measure(s.heading()).saturating_add(1)))
        .collect();
    let mut kept: HashMap<Section, (Vec<usize>, usize)> = HashMap::new();
    let mut left = allowance;
    // First round: each its share (the start may take all it needs for one line).
    for (section, share) in Section::SERVED {
        let Some(members) = by_section.get(&section) else {
            continue;
        };
        let mut room = (allowance.saturating_mul(share) / 100).min(left);
        if section == Section::Started {
            let first = members
                .iter()
                .map(|&k| candidates[k].cost(measure))
                .next()
                .unwrap_or(0);
            room = room.max(headings[&section].saturating_add(first)).min(left);
        }
        let (picked, spent) = sample(candidates, members, room, headings[&section], measure);
        left -= spent;
        kept.insert(section, (picked, spent));
    }
    // Then what is left, in the same order: up to twice each share, then all.
    for grown in [2, usize::MAX] {
        for (section, share) in Section::SERVED {
            let Some(members) = by_section.get(&section) else {
                continue;
            };
            let Some((picked, spent)) = kept.get(&section) else {
                continue;
            };
            if picked.len() == members.len() || left == 0 {
                continue;
            }
            let cap = allowance.saturating_mul(share).saturating_mul(grown) / 100;
            let room = spent.saturating_add(left).min(cap.max(*spent));
            if room == *spent {
                continue;
            }
            let (again, spent_again) = sample(candidates, members, room, headings[&section], measure);
            if spent_again >= *spent && again.len() >= picked.len() {
                left = left + spent - spent_again;
                kept.insert(section, (again, spent_again));
            }
        }
    }
    let mut chosen: Vec<usize> = kept.into_values().flat_map(|(picked, _)| picked).collect();
    // In the order of the span (a call never answered is listed last).
    chosen.sort_unstable_by_key(|&k| (candidates[k].place, k));
    chosen
}

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
fn distinct(candidates: &[Candidate], members: &[usize]) -> Vec<usize> {
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

/// Chooses among `members` (a section's candidates, in order) what fits in
/// `room` tokens with the heading (`heading` tokens): all when they fit,
/// else the best of each of as many equal stretches of the span as lines
/// fit, then the best of the rest while they fit. The chosen, in order, and
/// the tokens they take.
pub(super) fn sample(
    candidates: &[Candidate],
    members: &[usize],
    room: usize,
    heading: usize,
    measure: &dyn Fn(&str) -> usize,
) -> (Vec<usize>, usize) {
    if members.is_empty() || room <= heading {
        return (Vec::new(), 0);
    }
    let lines_room = room - heading;
    // Everything, when it fits (counting stops once it is over).
    let mut total = 0usize;
    let mut counted = 0usize;
    for &k in members {
        total = total.saturating_add(candidates[k].cost(measure));
        counted += 1;
        if total > lines_room {
            break;
        }
    }
    if total <= lines_room {
        return (members.to_vec(), heading + total);
    }
    let average = total.div_ceil(counted).max(1);
    let stretches = (lines_room / average).clamp(1, members.len());
    // The best of each stretch (ties: the earlier).
    let mut best: Vec<Option<usize>> = vec![None; stretches];
    for &k in members {
        let c = &candidates[k];
        let s = ((c.place as u128 * stretches as u128) / SPAN as u128) as usize;
        let slot = &mut best[s.min(stretches - 1)];
        if slot.is_none_or(|b| candidates[b].score < c.score) {
            *slot = Some(k);
        }
    }
    let mut firsts: Vec<usize> = best.into_iter().flatten().collect();
    let by_score = |a: &usize, b: &usize| candidates[*b].score.cmp(&candidates[*a].score).then(a.cmp(b));
    firsts.sort_by(by_score);
    let mut picked = Vec::new();
    let mut spent = 0usize;
    let mut misses = 0usize;
    let take = |k: usize, picked: &mut Vec<usize>, spent: &mut usize| {
        let cost = candidates[k].cost(measure);
        if spent.saturating_add(cost) <= lines_room {
            *spent += cost;
            picked.push(k);
            true
        } else {
            false
        }
    };
    for &k in &firsts {
        if !take(k, &mut picked, &mut spent) {
            misses += 1;
        }
    }
    // The rest by score, while they fit (giving up after a few misses).
    let mut taken = firsts.clone();
    taken.sort_unstable();
    let mut rest: Vec<usize> = members
        .iter()
        .copied()
        .filter(|k| taken.binary_search(k).is_err())
        .collect();
    rest.sort_by(by_score);
    for k in rest {
        if misses > 2 * stretches + 8 || spent >= lines_room {
            break;
        }
        if !take(k, &mut picked, &mut spent) {
            misses += 1;
        }
    }
    if picked.is_empty() {
        return (Vec::new(), 0);
    }
    picked.sort_unstable();
    (picked, heading + spent)
}

/// The chosen lines written out, less the least important ones until the
/// whole measures within `allowance`; empty when no line fits.
pub(super) fn fit(
    candidates: &[Candidate],
    mut chosen: Vec<usize>,
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> String {
    // No turn written twice (a line carried and found again, say). (The
    // quick hash: with SipHash this took 5% of a rolling memory's add.)
    let mut seen: std::collections::HashSet<&str, BuildHasherDefault<Quick>> = Default::default();
    chosen.retain(|&k| seen.insert(candidates[k].text.as_str()));
    loop {
        if chosen.is_empty() {
            return String::new();
        }
        let text = render(candidates, &chosen);
        if measure(&text) <= allowance {
            return text;
        }
        // Drop the least important: the last section served, lowest score, newest.
        let rank = |section: Section| {
            Section::SERVED
                .iter()
                .position(|(s, _)| *s == section)
                .unwrap_or(0)
        };
        let worst = chosen
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| {
                let (a, b) = (&candidates[**a], &candidates[**b]);
                rank(a.section)
                    .cmp(&rank(b.section))
                    .then(b.score.cmp(&a.score))
                    .then(a.place.cmp(&b.place))
            })
            .map(|(at, _)| at);
        if let Some(at) = worst {
            chosen.remove(at);
        }
    }
}

/// The candidates `chosen` (in order) under their headings.
pub(super) fn render(candidates: &[Candidate], chosen: &[usize]) -> String {
    let mut out = String::new();
    for section in Section::WRITTEN {
        let mut lines = chosen
            .iter()
            .map(|&k| &candidates[k])
            .filter(|c| c.section == section)
            .peekable();
        if lines.peek().is_none() {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(section.heading());
        for c in lines {
            out.push('\n');
            out.push_str(&c.text);
        }
    }
    out
}

/// When no line fits with its heading: the most important line's words,
/// as many as fit (at least one); or a count of the turns when there is no
/// line at all.
pub(super) fn fallback(
    candidates: &[Candidate],
    n: usize,
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> String {
    let rank = |section: Section| {
        Section::SERVED
            .iter()
            .position(|(s, _)| *s == section)
            .unwrap_or(0)
    };
    let best = candidates
        .iter()
        .min_by(|a, b| rank(a.section).cmp(&rank(b.section)).then(b.score.cmp(&a.score)));
    let line = match best {
        // Without its role: the words matter more at this size.
        Some(c) => match c.message {
            Some(_) => spoken(&c.text).to_owned(),
            None => c.text.clone(),
        },
        None => format!("{n} earlier messages without text."),
    };
    words_within(&line, allowance, measure)
}

/// The longest run of `line`'s first words that measures within
/// `allowance`, and at least its first word.
pub(super) fn words_within(line: &str, allowance: usize, measure: &dyn Fn(&str) -> usize) -> String {
    let ends: Vec<usize> = line
        .char_indices()
        .filter(|&(i, c)| c.is_whitespace() && i > 0 && !line[..i].ends_with(char::is_whitespace))
        .map(|(i, _)| i)
        .chain(std::iter::once(line.len()))
        .collect();
    // Counts grow with the prefix for any sensible counter: search the ends.
    let (mut lo, mut hi) = (0usize, ends.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if measure(&line[..ends[mid]]) <= allowance {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let end = ends[lo.saturating_sub(1)];
    line[..end].trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::gather::Place;
    use super::*;

    #[allow(clippy::manual_contains)]
    /// The first way of telling the distinct lines (a search of each line's
    /// words for each word of another's), kept as the reference: `members` (the candidates of `Discussed:`, in order) less the lines that
    /// say again what a better one says (the best first, ties the earlier):
    /// two thirds of their words the same, and every word of theirs that names
    /// something exact (a digit, `.`, `/`, `:`, `@` or `\\` in it) in the
    /// better one too.
    /// `The cache dashboard looks steady.` ten times, each with another name,
    /// is one line; two requests about different files are two.
    fn reference(candidates: &[Candidate], members: &[usize]) -> Vec<usize> {
        /// Lines of fewer words are too short to call the same.
        const WORDS: usize = 4;
        let words = |k: usize| {
            let text = &candidates[k].text;
            // Without the speaker (`assistant: `).
            let said = spoken(text);
            let mut words: Vec<String> = said
                .split_whitespace()
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase())
                .filter(|w| !w.is_empty())
                .collect();
            words.sort_unstable();
            words.dedup();
            words
        };
        let exact = |w: &str| w.contains(|c: char| c.is_ascii_digit() || "./:@\\".contains(c));
        let mut order = members.to_vec();
        order.sort_by(|a, b| candidates[*b].score.cmp(&candidates[*a].score).then(a.cmp(b)));
        let mut kept: Vec<(usize, Vec<String>)> = Vec::with_capacity(order.len());
        for k in order {
            let mine = words(k);
            let again = mine.len() >= WORDS
                && kept.iter().any(|(_, theirs)| {
                    let shared = mine.iter().filter(|w| theirs.binary_search(w).is_ok()).count();
                    let all = mine.len() + theirs.len() - shared;
                    // Two in three of their words in common, and no name of its own.
                    3 * shared >= 2 * all && mine.iter().all(|w| !exact(w) || theirs.binary_search(w).is_ok())
                });
            if !again {
                kept.push((k, mine));
            }
        }
        let mut kept: Vec<usize> = kept.into_iter().map(|(k, _)| k).collect();
        kept.sort_unstable();
        kept
    }

    fn line(words: &[&str], speaker: bool) -> String {
        let said = words.join(" ");
        match speaker {
            true => format!("assistant: {said}"),
            false => said,
        }
    }

    proptest::proptest! {
        /// Lines told apart by numbered words are the lines told apart by
        /// their words, whatever their words, scores and repeats (drawn
        /// from few words, so that many lines share most of theirs).
        #[test]
        fn numbered_words_tell_the_same_lines_apart(
            lines in proptest::collection::vec(
                (
                    proptest::collection::vec(
                        proptest::sample::select(vec![
                            "the", "The", "cache", "queue", "steady,", "latency", "band", "is",
                            "/srv/a.log", "/srv/b.log", "v1.2", "ÉTÉ", "été", "--", "a@b.io", "x",
                        ]),
                        0..12,
                    ),
                    0i32..4,
                    proptest::bool::ANY,
                ),
                0..40,
            ),
            common in 0..20usize,
            budget in 0..200usize,
        ) {
            let candidates: Vec<Candidate> = lines
                .iter()
                .enumerate()
                .map(|(i, (words, score, speaker))| Candidate {
                    section: Section::Discussed,
                    place: i as Place,
                    message: Some(i),
                    score: *score,
                    text: line(words, *speaker),
                    cost: std::cell::Cell::new(None),
                })
                .collect();
            let members: Vec<usize> = (0..candidates.len()).collect();
            // All the words as bits, none, or some.
            let exact = reference(&candidates, &members);
            proptest::prop_assert_eq!(&join(&candidates, &members, common, usize::MAX), &exact);
            // Out of budget, the lines not compared are kept: only repeats
            // come back, and fewer the more it reads.
            let short = join(&candidates, &members, common, budget);
            let less = join(&candidates, &members, common, budget / 2);
            proptest::prop_assert!(exact.iter().all(|k| short.binary_search(k).is_ok()));
            proptest::prop_assert!(short.iter().all(|k| less.binary_search(k).is_ok()));
            proptest::prop_assert_eq!(join(&candidates, &members, common, 0), members.clone());
        }
    }
}
