//! Merging: `Decided:` lines that differ only in the names in backticks they hold, as one line
//! that lists the names.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use super::LINE_CHARS;
use super::gather::{Candidate, Section};
use super::text::{clip, speech};
use crate::quick::Quick;

/// `Decided:` lines that say the same but for the names in backticks
/// they hold, as one line that lists the names: `POSIX guarantees that
/// `socket` / `open` / `openat` will use ...`, not three lines. A line
/// has one such place (a name in backticks, or several joined by ` / `,
/// as a line merged before and carried from the previous summary), and
/// the lines merged are the same before it and after it. The merged line
/// takes the first one's place, with the best score of them, clipped as
/// any line is; the others go. (A word's difference elsewhere still
/// matters: such lines stay apart.)
pub(super) fn merge_names(candidates: &mut Vec<Candidate>) {
    let mut groups: HashMap<(&str, &str), Vec<usize>, BuildHasherDefault<Quick>> = HashMap::default();
    let mut names: Vec<Vec<&str>> = vec![Vec::new(); candidates.len()];
    for (k, c) in candidates.iter().enumerate() {
        if c.section != Section::Decided {
            continue;
        }
        if let Some((start, end, held)) = names_place(&c.text) {
            groups
                .entry((&c.text[..start], &c.text[end..]))
                .or_default()
                .push(k);
            names[k] = held;
        }
    }
    let mut merged: Vec<(usize, String, i32)> = Vec::new();
    let mut gone = vec![false; candidates.len()];
    for ((before, after), members) in groups {
        if members.len() < 2 {
            continue;
        }
        let mut all: Vec<&str> = Vec::new();
        for &k in &members {
            for &name in &names[k] {
                if !all.contains(&name) {
                    all.push(name);
                }
            }
        }
        let listed: Vec<String> = all.iter().map(|n| format!("`{n}`")).collect();
        let text = format!("{before}{}{after}", listed.join(" / "));
        // Clipped as the lines were: what is said, after the speaker.
        let text = match speech(&text) {
            Some((role, said)) => format!("{role}: {}", clip(said, LINE_CHARS)),
            None => clip(&text, LINE_CHARS).into_owned(),
        };
        let first = members[0];
        let score = members.iter().map(|&k| candidates[k].score).max().unwrap_or(0);
        members[1..].iter().for_each(|&k| gone[k] = true);
        merged.push((first, text, score));
    }
    for (k, text, score) in merged {
        let c = &mut candidates[k];
        (c.text, c.score) = (text, score);
        c.cost.set(None);
    }
    let mut k = 0;
    candidates.retain(|_| {
        k += 1;
        !gone[k - 1]
    });
}

/// The one place of names in backticks in `line` (see [`merge_names`]):
/// where it starts and ends, and the names; `None` for a line with no
/// such place, or more than one.
fn names_place(line: &str) -> Option<(usize, usize, Vec<&str>)> {
    // Each name in backticks: where its backticks are.
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(open) = line[from..].find('`').map(|i| from + i) {
        let Some(close) = line[open + 1..].find('`').map(|i| open + 1 + i) else {
            break;
        };
        let name = &line[open + 1..close];
        if name.is_empty() || name.contains('\n') {
            return None;
        }
        spans.push((open, close + 1));
        from = close + 1;
    }
    let (&(start, _), &(_, end)) = (spans.first()?, spans.last()?);
    // One place: the names, each after the last and ` / `.
    let joined = spans.windows(2).all(|w| &line[w[0].1..w[1].0] == " / ");
    joined.then(|| {
        (
            start,
            end,
            spans.iter().map(|&(s, e)| &line[s + 1..e - 1]).collect(),
        )
    })
}
