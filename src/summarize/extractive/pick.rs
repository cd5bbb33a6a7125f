//! Picking: which candidate lines fit the allowance, sampled across the span, and the text they make.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::distinct::distinct;
use super::gather::{Candidate, SPAN, Section};
use super::text::spoken;
use crate::quick::Quick;

/// Which candidates each section keeps, within `allowance`; and those it
/// could have kept (no line that says again what a better one says).
pub(super) fn choose(
    candidates: &[Candidate],
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> (Vec<usize>, Vec<usize>) {
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
    let mut eligible: Vec<usize> = by_section.into_values().flatten().collect();
    eligible.sort_unstable();
    (chosen, eligible)
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
/// whole measures within `allowance`, and the lines written; empty when
/// no line fits.
pub(super) fn fit(
    candidates: &[Candidate],
    mut chosen: Vec<usize>,
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> (String, Vec<usize>) {
    // No turn written twice (a line carried and found again, say). (The
    // quick hash: with SipHash this took 5% of a rolling memory's add.)
    let mut seen: std::collections::HashSet<&str, BuildHasherDefault<Quick>> = Default::default();
    chosen.retain(|&k| seen.insert(candidates[k].text.as_str()));
    loop {
        if chosen.is_empty() {
            return (String::new(), chosen);
        }
        let text = render(candidates, &chosen);
        if measure(&text) <= allowance {
            return (text, chosen);
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
        // A line's anchor, unless the line above said it.
        let mut above: Option<&str> = None;
        for c in lines {
            out.push('\n');
            let anchor = c.anchor.as_deref();
            if let Some(anchor) = anchor.filter(|&a| above != Some(a)) {
                out.push('[');
                out.push_str(anchor);
                out.push_str("] ");
            }
            above = anchor;
            out.push_str(&c.text);
        }
    }
    out
}

/// Room the written lines leave (they were chosen as if each carried its
/// anchor, and most share the one above) filled with the best of the
/// lines left out (`eligible`, those [`choose`] could have kept), while
/// they fit, in a few rounds; `text`, the lines `chosen` written, when
/// none does.
pub(super) fn top_up(
    candidates: &[Candidate],
    eligible: &[usize],
    (mut text, mut chosen): (String, Vec<usize>),
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> String {
    /// Lines tried that do not fit, at most, a round.
    const MISSES: usize = 32;
    /// Rounds at most.
    const ROUNDS: usize = 4;
    if text.is_empty() {
        return text;
    }
    let mut taken = chosen.clone();
    taken.sort_unstable();
    let mut rest: Vec<usize> = (eligible.iter().copied())
        .filter(|k| taken.binary_search(k).is_err() && candidates[*k].section != Section::Started)
        .collect();
    rest.sort_by(|a, b| candidates[*b].score.cmp(&candidates[*a].score).then(a.cmp(b)));
    for _ in 0..ROUNDS {
        // (What the lines add up to, as well as what the whole measures:
        // a counter need not add up.)
        let used = measure(&text).max(written_cost(candidates, &chosen, measure));
        let mut left = allowance.saturating_sub(used);
        let mut misses = 0;
        let before = chosen.len();
        rest.retain(|&k| {
            if misses >= MISSES || left < 4 {
                return true;
            }
            let cost = candidates[k].cost(measure);
            match cost <= left {
                true => {
                    left -= cost;
                    chosen.push(k);
                    false
                }
                false => {
                    misses += 1;
                    true
                }
            }
        });
        if chosen.len() == before {
            break;
        }
        chosen.sort_unstable_by_key(|&k| (candidates[k].place, k));
        match fit(candidates, chosen.clone(), allowance, measure) {
            (again, kept) if !again.is_empty() => (text, chosen) = (again, kept),
            _ => break,
        }
    }
    text
}

/// What the lines `chosen` (in order) add up to, written as [`render`]
/// writes them: headings, lines, and the anchors written.
fn written_cost(candidates: &[Candidate], chosen: &[usize], measure: &dyn Fn(&str) -> usize) -> usize {
    let mut total = 0usize;
    for section in Section::WRITTEN {
        let mut above: Option<&str> = None;
        let mut any = false;
        for c in chosen
            .iter()
            .map(|&k| &candidates[k])
            .filter(|c| c.section == section)
        {
            any = true;
            let anchor = c.anchor.as_deref();
            total = total.saturating_add(c.line_cost(measure));
            if anchor.is_some() && anchor != above {
                total = total.saturating_add(c.anchor_cost(measure));
            }
            above = anchor;
        }
        if any {
            total = total.saturating_add(measure(section.heading()).saturating_add(1));
        }
    }
    total
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
