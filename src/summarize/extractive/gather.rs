//! Gathering: the folded turns read into candidate lines, the sections they go to, and what
//! the walk collects.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::ops::ControlFlow;
use std::rc::Rc;

use super::keywords::{keywords, telling};
use super::markers::{decision, is_question};
use super::rarity::Rarity;
use super::stamp::stamp;
use super::text::{LINE_MIN_CHARS, clip, exact, opening_of, sentences, window};
use super::tools::{Calls, tool_line, tool_results};
use super::{LINE_CHARS, RECENT_TURNS, SENTENCES};
use crate::message::{Message, Role};
use crate::quick::Quick;
use crate::summarize::SummaryRequest;

/// The sections of a summary, in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Section {
    Started,
    Decided,
    Discussed,
    Tools,
    Open,
    Recently,
}

impl Section {
    pub(super) const WRITTEN: [Section; 6] = [
        Section::Started,
        Section::Decided,
        Section::Discussed,
        Section::Tools,
        Section::Open,
        Section::Recently,
    ];

    /// Served first to last, with each one's share of the allowance in
    /// percent: on the first round; up to twice as much on the second; on
    /// the third, what is left.
    pub(super) const SERVED: [(Section, usize); 6] = [
        (Section::Started, 25),
        (Section::Open, 15),
        (Section::Decided, 30),
        (Section::Tools, 15),
        (Section::Recently, 15),
        (Section::Discussed, 20),
    ];

    pub(super) fn heading(self) -> &'static str {
        match self {
            Section::Started => "Started with:",
            Section::Decided => "Decided:",
            Section::Discussed => "Discussed:",
            Section::Tools => "Tools:",
            Section::Open => "Open questions:",
            Section::Recently => "Recently:",
        }
    }

    pub(super) fn of_heading(line: &str) -> Option<Section> {
        Section::WRITTEN.into_iter().find(|s| s.heading() == line)
    }
}

/// Where a line sits in the span summarized, out of [`SPAN`]: the previous
/// summary stands for the first third of it, the folded turns for the rest.
pub(super) type Place = u64;
pub(super) const SPAN: Place = 1 << 30;

/// A line the summary may keep.
pub(super) struct Candidate {
    pub(super) section: Section,
    pub(super) place: Place,
    /// The message it comes from (`None`: the previous summary), to keep a
    /// turn from being written twice.
    pub(super) message: Option<usize>,
    pub(super) score: i32,
    /// What its score holds for its section, not for what it tells (an
    /// open question's, a decision's): lost when it is moved to
    /// `Discussed:`.
    pub(super) bonus: i32,
    /// It names something exact (see [`exact`]): a decision or question
    /// about it keeps its section however little else it tells.
    pub(super) exact: bool,
    pub(super) text: String,
    /// When it was said: the time anchor of its turn (the date its session
    /// opened with), if the conversation carries any.
    pub(super) anchor: Option<Rc<str>>,
    /// Tokens, with its newline; counted when first needed.
    pub(super) cost: Cell<Option<usize>>,
    /// Tokens its anchor takes when written before it (`[8 May, 2023] `);
    /// counted when first needed.
    pub(super) anchor_cost: Cell<Option<usize>>,
}

impl Candidate {
    /// Tokens it takes, as if its anchor were written before it.
    pub(super) fn cost(&self, measure: &dyn Fn(&str) -> usize) -> usize {
        self.line_cost(measure).saturating_add(self.anchor_cost(measure))
    }

    /// Tokens it takes without its anchor, with its newline.
    pub(super) fn line_cost(&self, measure: &dyn Fn(&str) -> usize) -> usize {
        if let Some(cost) = self.cost.get() {
            return cost;
        }
        // (Measured with it: a newline joins the token before it, as
        // `.\n` does in o200k, so that the lines add up to the whole.)
        let mut line = String::with_capacity(self.text.len() + 1);
        line.push_str(&self.text);
        line.push('\n');
        let cost = measure(&line);
        self.cost.set(Some(cost));
        cost
    }

    /// Tokens its anchor takes, written before it (none without one).
    pub(super) fn anchor_cost(&self, measure: &dyn Fn(&str) -> usize) -> usize {
        let Some(anchor) = &self.anchor else { return 0 };
        if let Some(cost) = self.anchor_cost.get() {
            return cost;
        }
        // (Without the space after it, which joins the word that follows.)
        let cost = measure(&format!("[{anchor}]"));
        self.anchor_cost.set(Some(cost));
        cost
    }
}

/// An open question, and how much of it later answers took up.
pub(super) struct Question {
    pub(super) candidate: Option<usize>,
    pub(super) words: Vec<String>,
    /// Which of `words` an answer used, as bits.
    pub(super) hit: u32,
    /// Answers before it.
    pub(super) after: usize,
    /// Whether its reply (the first answer after it that makes no tool
    /// call; none if that one only asks back) used one of its words.
    pub(super) replied: bool,
}

impl Question {
    /// Whether later answers took it up; `answers`, how many there were in all.
    pub(super) fn answered(&self, answers: usize) -> bool {
        if self.words.is_empty() {
            return answers > self.after;
        }
        // Its reply took it up, or later answers three in five of its words.
        self.replied || (self.hit.count_ones() as usize) * 5 >= self.words.len() * 3
    }
}

/// What the walk over the previous summary and the folded turns collects.
#[derive(Default)]
pub(super) struct Gathered {
    pub(super) candidates: Vec<Candidate>,
    pub(super) questions: Vec<Question>,
    /// Keyword → the questions holding it (index into `questions`, bit).
    pub(super) asked: HashMap<String, Vec<(usize, u32)>, BuildHasherDefault<Quick>>,
    /// Answers read.
    pub(super) answers: usize,
    /// The questions from here on wait for their reply.
    pub(super) awaiting: usize,
    /// How rare each word is in the span: what lines are weighed by.
    pub(super) rarity: Rarity,
    /// The time anchor of the lines pushed now.
    pub(super) anchor: Option<Rc<str>>,
}

impl Gathered {
    pub(super) fn push(
        &mut self,
        section: Section,
        place: Place,
        message: Option<usize>,
        score: i32,
        text: String,
    ) -> usize {
        self.candidates.push(Candidate {
            section,
            place,
            message,
            score,
            bonus: 0,
            exact: false,
            text,
            anchor: self.anchor.clone(),
            cost: Cell::new(None),
            anchor_cost: Cell::new(None),
        });
        self.candidates.len() - 1
    }

    pub(super) fn ask(&mut self, candidate: usize, text: &str) {
        let words = keywords(text);
        let q = self.questions.len();
        for (bit, word) in words.iter().enumerate() {
            self.asked.entry(word.clone()).or_default().push((q, 1 << bit));
        }
        self.questions.push(Question {
            candidate: Some(candidate),
            words,
            hit: 0,
            after: self.answers,
            replied: false,
        });
    }

    /// An answer's text: the questions before it whose words it uses. One
    /// that makes no tool call (`closes`) is the reply to the questions
    /// still waiting for theirs, unless it only asks back.
    pub(super) fn answer(&mut self, text: &str, closes: bool) {
        self.answers += 1;
        let waiting = self.awaiting..self.questions.len();
        let replying = closes && !waiting.is_empty() && !sentences(text).all(is_question);
        if closes {
            self.awaiting = self.questions.len();
        }
        if self.asked.is_empty() && !replying {
            return;
        }
        let (asked, questions) = (&mut self.asked, &mut self.questions);
        telling(text, false, |word| {
            // A word's bit, once set, stays set: the questions holding it
            // need no second visit, so each (question, word) is visited
            // once (until a later question asks it again).
            if let Some(holders) = asked.remove(word) {
                for (q, bit) in holders {
                    questions[q].hit |= bit;
                }
            }
            // (Its own words: an earlier answer may have used them.)
            if replying {
                for q in &mut questions[waiting.clone()] {
                    q.replied |= q.words.iter().any(|w| w == word);
                }
            }
            match asked.is_empty() && !replying {
                true => ControlFlow::Break(()),
                false => ControlFlow::Continue(()),
            }
        });
    }
}

/// Lines a turn gives at most: its most informative sentence, and the
/// next when it tells nearly as much (seven tenths) in a turn of three
/// sentences or more.
const TURN_LINES: usize = 2;

/// The score of a line that tells nothing (small talk): it is kept only
/// among the last turns.
pub(super) const PHATIC: i32 = i32::MIN / 4;
/// What an open question gains over a line said (lost when answered).
pub(super) const OPEN_BONUS: i32 = 30;
/// What a decision gains, per unit of its marker's strength.
pub(super) const DECIDES: i32 = 5;

/// Walks the folded turns once, oldest first, into candidates.
pub(super) fn walk(
    request: &SummaryRequest<'_>,
    g: &mut Gathered,
    carried_start: bool,
    place: &dyn Fn(usize) -> Place,
) {
    let n = request.messages().len();
    let mut started = carried_start;
    let mut calls = Calls::default();
    let mut recent: Vec<usize> = Vec::new();
    // Whether the last turn asked something: the next one answers it.
    let mut asked = false;
    for (i, m) in request.messages().enumerate() {
        let edge = i == 0 || i + 1 == n;
        calls.note(m, i);
        // Results.
        for result in tool_results(m) {
            let call = result.id.and_then(|id| calls.pending.remove(id));
            let (line, reports) = tool_line(call.as_ref(), &result);
            let score = if reports { 8 } else { 1 } + if edge { 2 } else { 0 };
            g.push(
                Section::Tools,
                place(i),
                Some(i),
                score,
                clip(&line, LINE_CHARS).into_owned(),
            );
        }
        // What people said.
        if m.role == Role::Tool {
            continue;
        }
        let Some(c) = turn_line(g, m, i, edge, &mut started, place, &mut asked) else {
            continue;
        };
        recent.push(c);
        if recent.len() > RECENT_TURNS {
            recent.remove(0);
        }
    }
    // Calls never answered in the fold.
    for call in calls.unanswered() {
        let line = clip(&format!("called {}({})", call.name, call.args), LINE_CHARS).into_owned();
        g.push(Section::Tools, place(call.index), Some(call.index), 1, line);
    }
    // Questions answered: what was asked is still worth a line, a lesser one.
    for q in &g.questions {
        if let Some(c) = q.candidate.filter(|_| q.answered(g.answers)) {
            let c = &mut g.candidates[c];
            c.section = Section::Discussed;
            c.score -= std::mem::take(&mut c.bonus);
        }
    }
    // The last turns, unless they start the summary or stay open.
    for c in recent {
        let candidate = &mut g.candidates[c];
        if matches!(candidate.section, Section::Decided | Section::Discussed) {
            candidate.section = Section::Recently;
            candidate.score = 50;
        }
    }
    // Small talk takes no room (but among the last turns).
    g.candidates.retain(|c| c.score > PHATIC);
    worth_keeping(&mut g.candidates);
}

/// Lines of a span long enough to tell typical lines from the rest.
const TYPICAL_AMONG: usize = 24;

/// What share of the lines said, in percent, a decision or an open
/// question must tell more than to keep its own section.
const WORTH_PERCENTILE: usize = 80;

/// A decision or an open question that tells less than the best lines
/// said (the [`WORTH_PERCENTILE`]th percentile of the scores of what was
/// said, decided and asked, less what a decision's marker or a question
/// adds), and names nothing exact (a file, a version, a ticket: see
/// [`exact`]), is no decision or question worth its own room: "let's
/// cherish the lessons he taught" is one more line said, on what it
/// tells. (Only over spans of [`TYPICAL_AMONG`] lines or more.)
fn worth_keeping(candidates: &mut [Candidate]) {
    let said = |c: &Candidate| matches!(c.section, Section::Decided | Section::Discussed | Section::Open);
    let mut scores: Vec<i32> = (candidates.iter())
        .filter(|c| said(c))
        .map(|c| c.score - c.bonus)
        .collect();
    if scores.len() < TYPICAL_AMONG {
        return;
    }
    let at = (scores.len() * WORTH_PERCENTILE / 100).min(scores.len() - 1);
    let best = *scores.select_nth_unstable(at).1;
    for c in candidates.iter_mut() {
        let section = matches!(c.section, Section::Decided | Section::Open);
        if section && !c.exact && c.score - c.bonus < best {
            c.section = Section::Discussed;
            c.score -= std::mem::take(&mut c.bonus);
        }
    }
}

/// The candidates for what turn `m` says (the `i`th, no tool result;
/// `edge` when first or last), and the one that stands for it: the start
/// when it is the first request and none has `started` the summary (its
/// opening, unless that is small talk and a later sentence is not), else
/// its question (a request's, unless small talk), else its most
/// informative sentence ([`Rarity::weigh`], more for a decision), with
/// its second most informative when that tells nearly as much. A turn of
/// small talk gives a line scored [`PHATIC`]. A turn that opens with a
/// time stamp sets the anchor, and is read without it. An answer is also
/// read for the questions it takes up; `asked` says whether the last turn
/// asked something (this one answers it), and then whether this one does.
/// `None` for a turn without text.
fn turn_line(
    g: &mut Gathered,
    m: &Message,
    i: usize,
    edge: bool,
    started: &mut bool,
    place: &dyn Fn(usize) -> Place,
    asked: &mut bool,
) -> Option<usize> {
    let text = m.text();
    let mut text = window(&text);
    if let Some((anchor, end)) = stamp(text) {
        g.anchor = Some(Rc::from(anchor));
        text = &text[end..];
    }
    if text.trim().is_empty() {
        return None;
    }
    let role = m.role.as_str();
    let said: Vec<&str> = sentences(text).take(SENTENCES).collect();
    let replying = std::mem::replace(asked, said.iter().any(|s| is_question(s)));
    let weights = match g.rarity.turn(i, replying) {
        Some(weights) if weights.len() == said.len() => weights,
        _ => said.iter().map(|s| g.rarity.weigh(s, replying)).collect(),
    };
    let line = |s: &str| format!("{role}: {}", clip(s, LINE_CHARS));
    let edge_bonus = if edge { 5 } else { 0 };
    let at = place(i);
    let decides: Vec<Option<i32>> = (said.iter().zip(&weights))
        .map(|(s, w)| {
            (!w.phatic && !is_question(s))
                .then(|| decision(s, &m.role))
                .flatten()
        })
        .collect();
    let worth = |k: usize| weights[k].score + DECIDES * decides[k].unwrap_or(0);
    // The most informative (ties: the earlier), and the next.
    let mut order: Vec<usize> = (0..said.len()).filter(|&k| !weights[k].phatic).collect();
    order.sort_by(|&a, &b| worth(b).cmp(&worth(a)).then(a.cmp(&b)));
    let c = if m.role == Role::User && !*started && !order.is_empty() {
        *started = true;
        let mut opened = 0;
        let mut length = 0;
        while opened < said.len() && length < LINE_MIN_CHARS {
            length += said[opened].chars().count() + 1;
            opened += 1;
        }
        let small_talk = weights[..opened].iter().all(|w| w.phatic);
        let opening = match order.first() {
            Some(&best) if small_talk => said[best].to_owned(),
            _ => opening_of(&said),
        };
        // (A first request of small talk only starts nothing: the next one
        // that tells something does.)
        g.push(Section::Started, at, Some(i), 99, line(&opening))
    } else if let Some(q) = (m.role == Role::User)
        .then(|| (0..said.len()).find(|&k| is_question(said[k]) && !weights[k].phatic))
        .flatten()
    {
        let c = g.push(
            Section::Open,
            at,
            Some(i),
            weights[q].score + OPEN_BONUS + edge_bonus,
            line(said[q]),
        );
        g.candidates[c].bonus = OPEN_BONUS;
        g.candidates[c].exact = exact(said[q]);
        g.ask(c, said[q]);
        // What else it tells, when it tells more than it asks.
        if let Some(&k) = order.iter().find(|&&k| !is_question(said[k])) {
            if worth(k) > weights[q].score {
                push_said(g, at, i, worth(k) + edge_bonus, decides[k], line(said[k]));
            }
        }
        c
    } else if let Some(&best) = order.first() {
        // Its best, and the next when it tells nearly as much (in the
        // order said).
        let mut pair: Vec<usize> = (order.iter().copied())
            .take(TURN_LINES)
            .filter(|&k| k == best || (said.len() >= 3 && worth(k) * 10 >= worth(best) * 7))
            .collect();
        pair.sort_unstable();
        let mut main = 0;
        for k in pair {
            let c = push_said(g, at, i, worth(k) + edge_bonus, decides[k], line(said[k]));
            if k == best {
                main = c;
            }
        }
        main
    } else {
        g.push(Section::Discussed, at, Some(i), PHATIC, line(&opening_of(&said)))
    };
    if m.role != Role::User {
        g.answer(text, !m.makes_calls());
    }
    Some(c)
}

/// Pushes a sentence of turn `i` as a decision (when `decides`) or as
/// what was discussed.
fn push_said(g: &mut Gathered, at: Place, i: usize, score: i32, decides: Option<i32>, line: String) -> usize {
    let section = match decides {
        Some(_) => Section::Decided,
        None => Section::Discussed,
    };
    let c = g.push(section, at, Some(i), score, line);
    let candidate = &mut g.candidates[c];
    candidate.bonus = DECIDES * decides.unwrap_or(0);
    candidate.exact = exact(&candidate.text);
    c
}
