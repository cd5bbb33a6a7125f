//! The previous summary read back into candidate lines, weighed as the turns' lines are.

use std::rc::Rc;

use super::gather::{DECIDES, Gathered, OPEN_BONUS, PHATIC, Place, SPAN, Section};
use super::markers::{decision, is_error};
use super::stamp::unanchored;
use super::text::{clip, exact, speech};
use super::{LINE_CHARS, STARTED_LINES};
use crate::message::Role;

/// Reads the previous summary into candidates, each weighed as a turn's
/// line is, so that old lines and new compete on the same terms; whether
/// it had `Started with:` lines (the fold's first request is then not the
/// start). A line keeps its anchor, written before it or before a line
/// above it in its section.
pub(super) fn carry(previous: &str, g: &mut Gathered) -> bool {
    let lines: Vec<&str> = previous
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let structured = lines.iter().any(|l| Section::of_heading(l).is_some());
    let total = lines.len().max(1);
    let mut section = None;
    let mut started = 0usize;
    // (The last anchor met: the time the fold's first turns go on from.)
    let mut latest = None;
    g.anchor = None;
    for (j, line) in lines.iter().enumerate() {
        if let Some(s) = Section::of_heading(line) {
            section = Some(s);
            g.anchor = None;
            continue;
        }
        let (anchor, line) = unanchored(line);
        if let Some(anchor) = anchor {
            g.anchor = Some(Rc::from(anchor));
            latest = g.anchor.clone();
        }
        let place = (j as u128 * (SPAN / 3) as u128 / total as u128) as Place;
        let text = clip(line, LINE_CHARS).into_owned();
        let section = match section {
            // A summary written otherwise: its first line is its gist.
            None if !structured && started == 0 => Section::Started,
            None => Section::Discussed,
            Some(Section::Recently) => Section::Discussed,
            Some(s) => s,
        };
        let (role, said) = speech(line).unwrap_or(("", line));
        let weight = g.rarity.weigh(said, false);
        match section {
            Section::Started if started < STARTED_LINES => {
                started += 1;
                g.push(Section::Started, place, None, 100 - started as i32, text);
            }
            Section::Open => {
                let c = g.push(Section::Open, place, None, weight.score + OPEN_BONUS, text);
                g.candidates[c].bonus = OPEN_BONUS;
                g.candidates[c].exact = exact(said);
                let line = g.candidates[c].text.clone();
                g.ask(c, &line);
            }
            Section::Decided if !weight.phatic => {
                // As strong as when it was first written.
                let strength = decision(said, &Role::from(role)).unwrap_or(2);
                let c = g.push(
                    Section::Decided,
                    place,
                    None,
                    weight.score + DECIDES * strength,
                    text,
                );
                g.candidates[c].bonus = DECIDES * strength;
                g.candidates[c].exact = exact(said);
            }
            Section::Tools => {
                let score = if is_error(line) { 6 } else { 1 };
                g.push(Section::Tools, place, None, score, text);
            }
            _ => {
                let score = if weight.phatic { PHATIC } else { weight.score };
                g.push(Section::Discussed, place, None, score, text);
            }
        }
    }
    // (Its questions have no reply in the fold: they were asked before it.)
    g.awaiting = g.questions.len();
    g.anchor = latest;
    started > 0 && structured
}
