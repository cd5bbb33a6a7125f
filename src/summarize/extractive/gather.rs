//! Gathering: the previous summary and the folded turns read into candidate lines.

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::BuildHasherDefault;
use std::ops::ControlFlow;

use super::text::{
    clip, decision, error_line, is_error, is_question, keywords, opening, opening_of, sentences, speech,
    telling, window,
};
use super::{ARGS_CHARS, LINE_CHARS, RECENT_TURNS, SENTENCES, STARTED_LINES, WINDOW};
use crate::message::{Message, Part, Role};
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
    pub(super) text: String,
    /// Tokens, with its newline; counted when first needed.
    pub(super) cost: Cell<Option<usize>>,
}

impl Candidate {
    pub(super) fn cost(&self, measure: &dyn Fn(&str) -> usize) -> usize {
        if let Some(cost) = self.cost.get() {
            return cost;
        }
        let cost = measure(&self.text).saturating_add(1);
        self.cost.set(Some(cost));
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
            text,
            cost: Cell::new(None),
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

/// Reads the previous summary into candidates; whether it had
/// `Started with:` lines (the fold's first request is then not the start).
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
    for (j, line) in lines.iter().enumerate() {
        if let Some(s) = Section::of_heading(line) {
            section = Some(s);
            continue;
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
        match section {
            Section::Started if started < STARTED_LINES => {
                started += 1;
                g.push(Section::Started, place, None, 100 - started as i32, text);
            }
            Section::Started => {
                g.push(Section::Discussed, place, None, 3, text);
            }
            Section::Open => {
                let c = g.push(Section::Open, place, None, 4, text);
                let line = g.candidates[c].text.clone();
                g.ask(c, &line);
            }
            Section::Decided => {
                // As strong as when it was first written.
                let (role, said) = speech(line).unwrap_or(("", line));
                let score = 2 + decision(said, &Role::from(role)).unwrap_or(2);
                g.push(Section::Decided, place, None, score, text);
            }
            Section::Tools => {
                let score = if is_error(line) { 6 } else { 1 };
                g.push(Section::Tools, place, None, score, text);
            }
            _ => {
                let score = if line.chars().count() < 24 { 0 } else { 2 };
                g.push(Section::Discussed, place, None, score, text);
            }
        }
    }
    // (Its questions have no reply in the fold: they were asked before it.)
    g.awaiting = g.questions.len();
    started > 0 && structured
}

/// A call made in the fold and not yet answered.
pub(super) struct Pending {
    pub(super) name: String,
    pub(super) args: String,
    pub(super) index: usize,
    /// Calls made before it in the fold: the order they were made in.
    pub(super) seq: usize,
}

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
        let Some(c) = turn_line(g, m, i, edge, &mut started, place) else {
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
            g.candidates[c].section = Section::Discussed;
            g.candidates[c].score -= 4;
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
}

/// The calls made in the fold and not yet answered, by id.
#[derive(Default)]
struct Calls {
    pending: HashMap<String, Pending>,
    /// Calls made so far.
    made: usize,
}

impl Calls {
    /// Notes the calls turn `m` (the `i`th) makes, OpenAI's and Anthropic's.
    /// (Not by [`Message::call_ids`]: it reads `tool_use` blocks only, and
    /// skips those without an id.)
    fn note(&mut self, m: &Message, i: usize) {
        for call in &m.tool_calls {
            self.made += 1;
            self.pending.insert(
                call.id.clone(),
                Pending {
                    name: call.name.clone(),
                    args: clip(&call.arguments, ARGS_CHARS).into_owned(),
                    index: i,
                    seq: self.made,
                },
            );
        }
        for part in m.parts() {
            if part.tool_input().is_some() || part.call_id().is_some() {
                self.made += 1;
                self.pending.insert(
                    part.call_id()
                        .or_else(|| string_field(part, "id"))
                        .unwrap_or("")
                        .to_owned(),
                    Pending {
                        name: part
                            .call_name()
                            .or_else(|| string_field(part, "name"))
                            .unwrap_or("tool")
                            .to_owned(),
                        args: clip(&part.shown_arguments(), ARGS_CHARS).into_owned(),
                        index: i,
                        seq: self.made,
                    },
                );
            }
        }
    }

    /// The calls never answered, in the order they were made.
    fn unanswered(self) -> Vec<Pending> {
        let mut unanswered: Vec<Pending> = self.pending.into_values().collect();
        unanswered.sort_by_key(|call| call.seq);
        unanswered
    }
}

/// A tool result in a turn.
struct ToolResult<'m> {
    /// The id of the call it answers.
    id: Option<&'m str>,
    /// Its text, about its first [`WINDOW`] bytes.
    text: String,
    /// Whether it is flagged as an error (`is_error`).
    flagged: bool,
}

/// The tool results in turn `m`: a `tool` message's, and each
/// `tool_result` block's (Anthropic's form). (Not by
/// [`Message::answered_ids`]: it skips a result without an id, which is
/// still a line here, `tool [?]`.)
fn tool_results(m: &Message) -> Vec<ToolResult<'_>> {
    let mut results = Vec::new();
    if m.role == Role::Tool && m.item().is_none() {
        let flagged = is_flagged(m.extra().get("is_error"));
        results.push(ToolResult {
            id: m.tool_call_id.as_deref(),
            text: window(&m.text()).to_owned(),
            flagged,
        });
    }
    for part in m.parts().iter().filter(|p| p.is_result()) {
        let id = part.answered_id();
        let flagged = is_flagged(part.as_json().get("is_error"));
        let texts = part.result_texts();
        let mut text = String::new();
        for t in texts {
            if text.len() >= WINDOW {
                break;
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(window(t));
        }
        results.push(ToolResult { id, text, flagged });
    }
    results
}

/// A part's `key` field, when it is a string.
fn string_field<'p>(part: &'p Part, key: &str) -> Option<&'p str> {
    part.as_json().get(key).and_then(serde_json::Value::as_str)
}

/// Whether an `is_error` field says so.
fn is_flagged(is_error: Option<&serde_json::Value>) -> bool {
    is_error.and_then(serde_json::Value::as_bool) == Some(true)
}

/// The line under `Tools:` for `result` (not yet clipped), naming `call`
/// when it answers one made in the fold; and whether it reports an error.
fn tool_line(call: Option<&Pending>, result: &ToolResult<'_>) -> (String, bool) {
    // The call failed when its result is flagged or opens with an
    // error; a result that only reports one further on (a search's
    // matches, a log) is shown by that line, under no `failed`.
    let error = error_line(&result.text);
    let failed = result.flagged || error.is_some_and(|(_, opens)| opens);
    let reports = result.flagged || error.is_some();
    let outcome = error.map_or_else(|| opening(&result.text), |(line, _)| line.to_owned());
    let mut line = match call {
        Some(c) => format!("{}({})", c.name, c.args),
        None => format!("tool [{}]", result.id.unwrap_or("?")),
    };
    match (failed, outcome.is_empty()) {
        (true, _) => {
            let _ = write!(line, " failed: {outcome}");
        }
        (false, true) => line.push_str(" → (no text)"),
        (false, false) => {
            let _ = write!(line, " → {outcome}");
        }
    }
    (line, reports)
}

/// The candidate for what turn `m` says (the `i`th, no tool result;
/// `edge` when first or last): the start when it is the first request and
/// none has `started` the summary, else its question (a request's), its
/// decision or its opening. An answer is also read for the questions it
/// takes up. `None` for a turn without text.
fn turn_line(
    g: &mut Gathered,
    m: &Message,
    i: usize,
    edge: bool,
    started: &mut bool,
    place: &dyn Fn(usize) -> Place,
) -> Option<usize> {
    let text = m.text();
    let text = window(&text);
    if text.trim().is_empty() {
        return None;
    }
    let role = m.role.as_str();
    let said: Vec<&str> = sentences(text).take(SENTENCES).collect();
    let line = |s: &str| format!("{role}: {}", clip(s, LINE_CHARS));
    let base = match m.role {
        Role::User => 3,
        _ => 2,
    } + if edge { 3 } else { 0 };
    let at = place(i);
    let c = if m.role == Role::User && !*started {
        *started = true;
        g.push(Section::Started, at, Some(i), 99, line(&opening_of(&said)))
    } else if let Some(q) = (m.role == Role::User)
        .then(|| said.iter().find(|s| is_question(s)))
        .flatten()
    {
        let c = g.push(Section::Open, at, Some(i), base + 3, line(q));
        g.ask(c, q);
        c
    } else if let Some((s, strength)) = said.iter().find_map(|s| decision(s, &m.role).map(|k| (s, k))) {
        g.push(Section::Decided, at, Some(i), base + strength, line(s))
    } else {
        let opening = opening_of(&said);
        let score = base - if opening.chars().count() < 16 { 2 } else { 0 };
        g.push(Section::Discussed, at, Some(i), score, line(&opening))
    };
    if m.role != Role::User {
        g.answer(text, !m.makes_calls());
    }
    Some(c)
}

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
