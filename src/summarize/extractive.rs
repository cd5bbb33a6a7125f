//! The extractive summarizer: no model, no network.
//!
//! A digest in sections, each line a sentence taken from the folded turns
//! (or carried from the previous summary):
//!
//! - `Started with:` the first user turn of the fold, or the previous
//!   summary's own `Started with:` lines (its first line, for a summary
//!   written otherwise), so that a summary rolled forward many times still
//!   says how the conversation began;
//! - `Decided:` sentences that decide or conclude ("we will", "decided",
//!   "let's", "going with", "use X" ...) and people's imperative requests;
//! - `Discussed:` what else people said;
//! - `Tools:` each call's name and arguments with the first sentence of its
//!   result (or the line that says what failed);
//! - `Open questions:` people's questions that no later answer in the fold
//!   takes up (by their words);
//! - `Recently:` the last two turns of the fold.
//!
//! Every candidate line gets a score (role, first or last of the span,
//! markers, tool errors). When a section has more lines than its share of
//! the allowance, the span is cut into as many equal stretches as lines fit
//! and the best line of each stretch is kept, so old, middle and new turns
//! are all represented; the room left is then filled by score. Sections are
//! served in order of importance (`Started with`, open questions,
//! decisions, tools, recent turns, the rest), and lines are written in
//! their original order within each section.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;

use crate::count::{Heuristic, TokenCounter};
use crate::message::Role;
use crate::summarize::{Summarizer, SummaryRequest};

/// A deterministic summarizer that needs no model: a digest, in sections,
/// of sentences taken from the whole folded span.
///
/// It keeps how the conversation started (rolled forward from the previous
/// summary), the decisions, the tool outcomes (errors first), the questions
/// still open and the last turns; when they do not all fit the allowance,
/// it samples each section evenly across the span rather than keeping only
/// the newest lines. The output always fits the allowance as measured
/// (whole lines, and never a cut word), unless not even one word does.
///
/// It is what the CLI uses by default, so chatfold works offline. It
/// measures with the caller's counter when the request carries one
/// ([`SummaryRequest::count`]), else with its own ([`Heuristic`] unless
/// given one).
///
/// Its cost grows with the folded text (each turn's first few thousand
/// characters are read), and the counting with the summary's size.
///
/// # Examples
///
/// ```
/// use chatfold::{Extractive, Message, Summarizer, SummaryRequest, ToolCall};
///
/// let folded = [
///     Message::user("Deploy v2 to staging on the blue cluster, and keep green idle. Then report back."),
///     Message::assistant_tool_calls(vec![ToolCall::new("c1", "deploy", r#"{"v":"2"}"#)]),
///     Message::tool("ok: deployed in 41s", "c1"),
///     Message::assistant("Deployed. We will keep green idle until Friday."),
///     Message::user("Should we tell the on-call team about the Friday freeze?"),
/// ];
/// let summary = Extractive::new().summarize(&SummaryRequest::new(None, &folded, 200))?;
/// assert_eq!(
///     summary,
///     "Started with:\n\
///      user: Deploy v2 to staging on the blue cluster, and keep green idle.\n\
///      Tools:\n\
///      deploy({\"v\":\"2\"}) → ok: deployed in 41s\n\
///      Open questions:\n\
///      user: Should we tell the on-call team about the Friday freeze?\n\
///      Recently:\n\
///      assistant: We will keep green idle until Friday."
/// );
/// // The allowance is a ceiling: with less room, fewer whole lines.
/// let short = Extractive::new().summarize(&SummaryRequest::new(None, &folded, 40))?;
/// assert!(chatfold::Heuristic.count(&short) <= 40 && short.starts_with("Started with:"));
/// # use chatfold::TokenCounter;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Extractive<C = Heuristic> {
    counter: C,
}

/// Longest line the extractive summarizer writes, in characters.
const LINE_CHARS: usize = 200;
/// Longest arguments shown for a tool call, in characters.
const ARGS_CHARS: usize = 80;
/// How much of a message is read, in bytes: its opening, where people say
/// what they want.
const WINDOW: usize = 4000;
/// Sentences read from a message at most.
const SENTENCES: usize = 16;
/// Lines kept in `Started with:` at most.
const STARTED_LINES: usize = 2;
/// Turns shown under `Recently:`.
const RECENT_TURNS: usize = 2;
/// Keywords kept for a question, to see whether an answer takes it up.
const QUESTION_WORDS: usize = 16;

impl Extractive {
    /// An extractive summarizer measuring with [`Heuristic`].
    pub const fn new() -> Self {
        Extractive { counter: Heuristic }
    }
}

impl<C: TokenCounter> Extractive<C> {
    /// An extractive summarizer measuring with `counter` (when the request
    /// carries no counter of the caller's).
    pub const fn with_counter(counter: C) -> Self {
        Extractive { counter }
    }
}

impl<C: TokenCounter> Summarizer for Extractive<C> {
    type Error = std::convert::Infallible;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        let measure = |text: &str| request.count(text).unwrap_or_else(|| self.counter.count(text));
        Ok(digest(request, &measure))
    }
}

/// The sections of a summary, in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Section {
    Started,
    Decided,
    Discussed,
    Tools,
    Open,
    Recently,
}

impl Section {
    const WRITTEN: [Section; 6] = [
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
    const SERVED: [(Section, usize); 6] = [
        (Section::Started, 25),
        (Section::Open, 15),
        (Section::Decided, 30),
        (Section::Tools, 15),
        (Section::Recently, 15),
        (Section::Discussed, 20),
    ];

    fn heading(self) -> &'static str {
        match self {
            Section::Started => "Started with:",
            Section::Decided => "Decided:",
            Section::Discussed => "Discussed:",
            Section::Tools => "Tools:",
            Section::Open => "Open questions:",
            Section::Recently => "Recently:",
        }
    }

    fn of_heading(line: &str) -> Option<Section> {
        Section::WRITTEN.into_iter().find(|s| s.heading() == line)
    }
}

/// Where a line sits in the span summarized, out of [`SPAN`]: the previous
/// summary stands for the first third of it, the folded turns for the rest.
type Place = u64;
const SPAN: Place = 1 << 30;

/// A line the summary may keep.
struct Candidate {
    section: Section,
    place: Place,
    /// The message it comes from (`None`: the previous summary), to keep a
    /// turn from being written twice.
    message: Option<usize>,
    score: i32,
    text: String,
    /// Tokens, with its newline; counted when first needed.
    cost: Cell<Option<usize>>,
}

impl Candidate {
    fn cost(&self, measure: &dyn Fn(&str) -> usize) -> usize {
        if let Some(cost) = self.cost.get() {
            return cost;
        }
        let cost = measure(&self.text).saturating_add(1);
        self.cost.set(Some(cost));
        cost
    }
}

/// An open question, and how much of it later answers took up.
struct Question {
    candidate: Option<usize>,
    words: Vec<String>,
    /// Which of `words` an answer used, as bits.
    hit: u32,
    /// Answers before it.
    after: usize,
}

impl Question {
    /// Whether later answers took it up; `answers`, how many there were in all.
    fn answered(&self, answers: usize) -> bool {
        if self.words.is_empty() {
            return answers > self.after;
        }
        // Three in five of its words.
        (self.hit.count_ones() as usize) * 5 >= self.words.len() * 3
    }
}

/// What the walk over the previous summary and the folded turns collects.
#[derive(Default)]
struct Gathered {
    candidates: Vec<Candidate>,
    questions: Vec<Question>,
    /// Keyword → the questions holding it (index into `questions`, bit).
    asked: HashMap<String, Vec<(usize, u32)>>,
    /// Answers read.
    answers: usize,
}

impl Gathered {
    fn push(
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

    fn ask(&mut self, candidate: usize, text: &str) {
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
        });
    }

    /// An answer's text: the questions before it whose words it uses.
    fn answer(&mut self, text: &str) {
        self.answers += 1;
        if self.asked.is_empty() {
            return;
        }
        for word in words(text) {
            // A word's bit, once set, stays set: the questions holding it
            // need no second visit, so each (question, word) is visited once.
            if let Some(holders) = self.asked.get_mut(word.as_str()) {
                for (q, bit) in holders.drain(..) {
                    self.questions[q].hit |= bit;
                }
            }
        }
    }
}

/// The summary of `request`, measured with `measure`.
fn digest(request: &SummaryRequest<'_>, measure: &dyn Fn(&str) -> usize) -> String {
    let mut g = Gathered::default();
    let previous = request.previous_summary().filter(|p| !p.trim().is_empty());
    let carried_start = previous.is_some_and(|p| carry(p, &mut g));
    let n = request.messages().len();
    let place = |i: usize| match previous {
        None => (i as u128 * SPAN as u128 / n.max(1) as u128) as Place,
        Some(_) => SPAN / 3 + (i as u128 * (2 * SPAN / 3) as u128 / n.max(1) as u128) as Place,
    };
    walk(request, &mut g, carried_start, &place);
    let allowance = request.allowance();
    let chosen = choose(&g.candidates, allowance, measure);
    let text = fit(&g.candidates, chosen, allowance, measure);
    if !text.is_empty() {
        return text;
    }
    fallback(&g.candidates, n, allowance, measure)
}

/// Reads the previous summary into candidates; whether it had
/// `Started with:` lines (the fold's first request is then not the start).
fn carry(previous: &str, g: &mut Gathered) -> bool {
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
                let (role, said) = line.split_once(": ").unwrap_or(("", line));
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
    started > 0 && structured
}

/// A call made in the fold and not yet answered.
struct Pending {
    name: String,
    args: String,
    index: usize,
    /// Calls made before it in the fold: the order they were made in.
    seq: usize,
}

/// Walks the folded turns once, oldest first, into candidates.
fn walk(request: &SummaryRequest<'_>, g: &mut Gathered, carried_start: bool, place: &dyn Fn(usize) -> Place) {
    let n = request.messages().len();
    let mut started = carried_start;
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let mut calls = 0usize;
    let mut recent: Vec<usize> = Vec::new();
    for (i, m) in request.messages().enumerate() {
        let edge = i == 0 || i + 1 == n;
        // Calls, OpenAI's and Anthropic's.
        for call in &m.tool_calls {
            calls += 1;
            pending.insert(
                call.id.clone(),
                Pending {
                    name: call.name.clone(),
                    args: clip(&call.arguments, ARGS_CHARS).into_owned(),
                    index: i,
                    seq: calls,
                },
            );
        }
        for part in m.parts() {
            if let Some(input) = part.tool_input() {
                calls += 1;
                let field = |key: &str| part.as_json().get(key).and_then(serde_json::Value::as_str);
                pending.insert(
                    field("id").unwrap_or("").to_owned(),
                    Pending {
                        name: field("name").unwrap_or("tool").to_owned(),
                        args: clip(&input.to_string(), ARGS_CHARS).into_owned(),
                        index: i,
                        seq: calls,
                    },
                );
            }
        }
        // Results.
        let mut results: Vec<(Option<&str>, String, bool)> = Vec::new();
        if m.role == Role::Tool {
            let flagged = m.extra().get("is_error").and_then(serde_json::Value::as_bool) == Some(true);
            results.push((m.tool_call_id.as_deref(), window(&m.text()).to_owned(), flagged));
        }
        for part in m.parts().iter().filter(|p| p.kind() == Some("tool_result")) {
            let id = part
                .as_json()
                .get("tool_use_id")
                .and_then(serde_json::Value::as_str);
            let flagged = part
                .as_json()
                .get("is_error")
                .and_then(serde_json::Value::as_bool)
                == Some(true);
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
            results.push((id, text, flagged));
        }
        for (id, text, flagged) in results {
            let call = id.and_then(|id| pending.remove(id));
            let failed = flagged || is_error(&text);
            let outcome = if failed { failure(&text) } else { opening(&text) };
            let mut line = match &call {
                Some(c) => format!("{}({})", c.name, c.args),
                None => format!("tool [{}]", id.unwrap_or("?")),
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
            let score = if failed { 8 } else { 1 } + if edge { 2 } else { 0 };
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
        let text = m.text();
        let text = window(&text);
        if text.trim().is_empty() {
            continue;
        }
        let role = m.role.as_str();
        let said: Vec<&str> = sentences(text).take(SENTENCES).collect();
        let line = |s: &str| format!("{role}: {}", clip(s, LINE_CHARS));
        let base = match m.role {
            Role::User => 3,
            _ => 2,
        } + if edge { 3 } else { 0 };
        let at = place(i);
        let c = if m.role == Role::User && !started {
            started = true;
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
            g.answer(text);
        }
        recent.push(c);
        if recent.len() > RECENT_TURNS {
            recent.remove(0);
        }
    }
    // Calls never answered in the fold.
    let mut unanswered: Vec<Pending> = pending.into_values().collect();
    unanswered.sort_by_key(|call| call.seq);
    for call in unanswered {
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

/// Which candidates each section keeps, within `allowance`.
fn choose(candidates: &[Candidate], allowance: usize, measure: &dyn Fn(&str) -> usize) -> Vec<usize> {
    let mut by_section: HashMap<Section, Vec<usize>> = HashMap::new();
    for (k, c) in candidates.iter().enumerate() {
        by_section.entry(c.section).or_default().push(k);
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

/// Chooses among `members` (a section's candidates, in order) what fits in
/// `room` tokens with the heading (`heading` tokens): all when they fit,
/// else the best of each of as many equal stretches of the span as lines
/// fit, then the best of the rest while they fit. The chosen, in order, and
/// the tokens they take.
fn sample(
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
fn fit(
    candidates: &[Candidate],
    mut chosen: Vec<usize>,
    allowance: usize,
    measure: &dyn Fn(&str) -> usize,
) -> String {
    // No turn written twice (a line carried and found again, say).
    let mut seen = std::collections::HashSet::new();
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
fn render(candidates: &[Candidate], chosen: &[usize]) -> String {
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
fn fallback(candidates: &[Candidate], n: usize, allowance: usize, measure: &dyn Fn(&str) -> usize) -> String {
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
            Some(_) => c
                .text
                .split_once(": ")
                .map_or(c.text.as_str(), |(_, t)| t)
                .to_owned(),
            None => c.text.clone(),
        },
        None => format!("{n} earlier messages without text."),
    };
    words_within(&line, allowance, measure)
}

/// The longest run of `line`'s first words that measures within
/// `allowance`, and at least its first word.
fn words_within(line: &str, allowance: usize, measure: &dyn Fn(&str) -> usize) -> String {
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

/// The first `WINDOW` bytes of `text`, at a character boundary.
fn window(text: &str) -> &str {
    if text.len() <= WINDOW {
        return text;
    }
    let mut end = WINDOW;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A line is made of whole sentences until it has at least this many characters.
const LINE_MIN_CHARS: usize = 60;

/// The opening of `text`: its first sentences (or lines), joined by spaces,
/// until they reach [`LINE_MIN_CHARS`].
fn opening(text: &str) -> String {
    let said: Vec<&str> = sentences(window(text)).take(SENTENCES).collect();
    opening_of(&said)
}

/// The opening of the sentences `said`.
fn opening_of(said: &[&str]) -> String {
    let mut out = String::new();
    for sentence in said {
        if out.chars().count() >= LINE_MIN_CHARS {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(sentence);
    }
    out
}

/// What a failed tool result says: its first line that names the error,
/// else its opening.
fn failure(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| is_error(l))
        .map_or_else(|| opening(text), str::to_owned)
}

/// Words that say a tool failed.
const ERROR_MARKERS: &[&str] = &[
    "error",
    "failed",
    "failure",
    "fatal",
    "exception",
    "traceback",
    "panicked",
    "denied",
    "refused",
    "timed out",
    "timeout",
    "not found",
    "no such",
    "exit code 1",
    "exit status 1",
    "cannot",
    "unable to",
];

fn is_error(text: &str) -> bool {
    markers(ERROR_MARKERS.iter().copied(), &ERRORS).is_some_and(|set| set.is_match(&text.to_lowercase()))
}

/// One set of `words`, each to match at the start of a word (lower-cased
/// text): one pass over a line finds them all. Built once per process.
fn markers<'w>(
    words: impl Iterator<Item = &'w str>,
    cell: &'static std::sync::OnceLock<Option<regex::RegexSet>>,
) -> Option<&'static regex::RegexSet> {
    cell.get_or_init(|| {
        regex::RegexSet::new(words.map(|w| format!(r"(?:^|[^[:alnum:]]){}", regex::escape(w)))).ok()
    })
    .as_ref()
}

static ERRORS: std::sync::OnceLock<Option<regex::RegexSet>> = std::sync::OnceLock::new();
static DECISIONS: std::sync::OnceLock<Option<regex::RegexSet>> = std::sync::OnceLock::new();

/// Phrases that decide or conclude, and how strongly.
const DECISION_MARKERS: &[(&str, i32)] = &[
    ("decided", 5),
    ("we decide", 5),
    ("decision", 4),
    ("agreed", 5),
    ("we agree", 5),
    ("going with", 5),
    ("go with", 4),
    ("settled on", 5),
    ("we will", 4),
    ("we'll", 4),
    ("i will", 3),
    ("i'll", 3),
    ("let's", 4),
    ("let us", 4),
    ("lets ", 3),
    ("we should", 3),
    ("conclusion", 4),
    ("concluded", 4),
    ("in the end", 3),
    ("chose", 4),
    ("choose", 3),
    ("opted", 4),
    ("the plan is", 4),
    ("plan:", 3),
    ("will use", 4),
    ("switch to", 3),
    ("switched to", 3),
    ("instead of", 2),
    ("from now on", 4),
    ("must", 2),
];

/// Verbs that open a request.
const IMPERATIVES: &[&str] = &[
    "add",
    "allow",
    "avoid",
    "book",
    "build",
    "change",
    "check",
    "create",
    "delete",
    "deploy",
    "disable",
    "do",
    "don't",
    "drop",
    "enable",
    "ensure",
    "find",
    "fix",
    "implement",
    "install",
    "keep",
    "make",
    "merge",
    "migrate",
    "move",
    "never",
    "pin",
    "please",
    "put",
    "refactor",
    "release",
    "remove",
    "rename",
    "replace",
    "revert",
    "rewrite",
    "roll",
    "run",
    "send",
    "set",
    "ship",
    "show",
    "skip",
    "start",
    "stop",
    "switch",
    "test",
    "try",
    "update",
    "upgrade",
    "use",
    "write",
];

/// How strongly sentence `s` (said in `role`) decides something, if it does.
fn decision(s: &str, role: &Role) -> Option<i32> {
    let lower = s.to_lowercase();
    let marked_strength = markers(DECISION_MARKERS.iter().map(|&(m, _)| m), &DECISIONS).and_then(|set| {
        set.matches(&lower)
            .into_iter()
            .filter_map(|i| DECISION_MARKERS.get(i).map(|&(_, k)| k))
            .max()
    });
    if marked_strength.is_some() {
        return marked_strength;
    }
    let first = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .find(|w| !w.is_empty() && !matches!(*w, "ok" | "okay" | "now" | "so" | "then" | "and"))?;
    // "Use X", from anyone; other imperatives, from people.
    let verb = IMPERATIVES.binary_search(&first).is_ok();
    match (first, role) {
        ("use", _) => Some(2),
        (_, Role::User) if verb => Some(1),
        _ => None,
    }
}

fn is_question(s: &str) -> bool {
    s.ends_with('?') || s.ends_with('？')
}

/// Words too common to tell whether an answer takes up a question.
const STOPWORDS: &[&str] = &[
    "about", "after", "also", "been", "before", "being", "both", "could", "does", "doing", "each", "from",
    "have", "here", "into", "just", "like", "make", "more", "most", "much", "need", "only", "other", "over",
    "should", "some", "such", "than", "that", "their", "them", "then", "there", "these", "they", "this",
    "those", "user", "very", "want", "were", "what", "when", "where", "which", "while", "will", "with",
    "would", "your",
];

/// The words of `text`, lower-cased, of four characters or more.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_lowercase)
}

/// A question's telling words: no stop words, no repeats, the first few.
fn keywords(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in words(text) {
        if out.len() == QUESTION_WORDS {
            break;
        }
        if STOPWORDS.binary_search(&w.as_str()).is_err() && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// The sentences of `text`: ended by `.`, `!` or `?` before white space, by
/// `。`, `！` or `？`, or by a line break; trimmed, empty ones skipped.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            if rest.trim().is_empty() {
                return None;
            }
            let mut chars = rest.char_indices().peekable();
            let mut end = rest.len();
            while let Some((i, c)) = chars.next() {
                let after = i + c.len_utf8();
                let ends = match c {
                    '\n' | '。' | '！' | '？' => true,
                    '.' | '!' | '?' => chars.peek().is_none_or(|&(_, n)| n.is_whitespace()),
                    _ => false,
                };
                if ends {
                    end = after;
                    break;
                }
            }
            let sentence = rest[..end].trim();
            rest = &rest[end..];
            if !sentence.is_empty() {
                return Some(sentence);
            }
        }
    })
}

/// `text` cut to about `max` characters (at a word's end when one is near),
/// with an ellipsis when cut.
fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((i, _)) => {
            let head = &text[..i];
            // Back to the last space, unless that loses more than a fifth.
            let cut = head
                .rfind(char::is_whitespace)
                .filter(|&at| head[..at].chars().count() >= max * 4 / 5)
                .map_or(head, |at| &head[..at]);
            Cow::Owned(format!("{}…", cut.trim_end()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;
    use crate::message::Message;

    fn summarize(folded: &[Message], allowance: usize) -> String {
        Extractive::new()
            .summarize(&SummaryRequest::new(None, folded, allowance))
            .unwrap()
    }

    #[test]
    fn word_lists_are_sorted_for_binary_search() {
        assert!(IMPERATIVES.windows(2).all(|w| w[0] < w[1]));
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn sentences_split_where_people_end_them() {
        fn split(t: &str) -> Vec<&str> {
            sentences(t).collect()
        }
        assert_eq!(split("One. Two."), ["One.", "Two."]);
        assert_eq!(split("v1.2 is out! Yes"), ["v1.2 is out!", "Yes"]);
        assert_eq!(split("line one\n\nline two"), ["line one", "line two"]);
        assert_eq!(split("你好。再见"), ["你好。", "再见"]);
        assert!(split("  \n ").is_empty());
    }

    #[test]
    fn openings_take_sentences_until_long_enough() {
        assert_eq!(
            opening("Hi. I need help with a failing deploy of the ledger service, again. Thanks!"),
            "Hi. I need help with a failing deploy of the ledger service, again."
        );
        assert_eq!(opening("Short one."), "Short one.");
        assert_eq!(opening(""), "");
    }

    #[test]
    fn decisions_and_requests_are_recognised() {
        assert!(decision("We decided to keep Postgres.", &Role::Assistant).is_some());
        assert!(decision("OK, let's ship it on Monday.", &Role::User).is_some());
        assert!(decision("Use the blue cluster.", &Role::Assistant).is_some());
        assert!(decision("Add a retry to the uploader.", &Role::User).is_some());
        assert!(decision("Add a retry to the uploader.", &Role::Assistant).is_none());
        assert!(decision("The logs are clean.", &Role::User).is_none());
        assert!(decision("It was undecided.", &Role::User).is_none());
    }

    #[test]
    fn clips_end_at_words() {
        let long = "word ".repeat(100);
        let clipped = clip(&long, 42);
        assert_eq!(clipped, format!("{}…", "word ".repeat(8).trim_end()));
        assert_eq!(clip(&"x".repeat(300), 200).chars().count(), 201);
        assert_eq!(clip("short", 200), "short");
    }

    #[test]
    fn sections_come_in_order_and_questions_answered_are_not_open() {
        let folded = [
            Message::user("Migrate the billing service to the new queue."),
            Message::assistant("Which queue, Kafka or SQS?"),
            Message::user("Which region hosts the queue?"),
            Message::assistant("The queue lives in the Frankfurt region."),
            Message::user("We decided on SQS. Is the Zanzibar export still nightly?"),
            Message::assistant_tool_calls(vec![ToolCall::new("c1", "logs", "{}")]),
            Message::tool("ERROR config: unknown field `ttl`", "c1"),
            Message::assistant("The config has an unknown field."),
        ];
        let summary = summarize(&folded, 1000);
        assert_eq!(
            summary,
            "Started with:\n\
             user: Migrate the billing service to the new queue.\n\
             Discussed:\n\
             assistant: Which queue, Kafka or SQS?\n\
             user: Which region hosts the queue?\n\
             assistant: The queue lives in the Frankfurt region.\n\
             Tools:\n\
             logs({}) failed: ERROR config: unknown field `ttl`\n\
             Open questions:\n\
             user: Is the Zanzibar export still nightly?\n\
             Recently:\n\
             assistant: The config has an unknown field."
        );
    }

    #[test]
    fn the_callers_counter_is_used_when_the_request_carries_one() {
        let folded: Vec<Message> = (0..40)
            .map(|i| Message::user(format!("Message number {i} says something long enough to count.")))
            .collect();
        let words = |t: &str| t.split_whitespace().count();
        let request = SummaryRequest::new(None, &folded, 30).with_counter(Some(&words));
        let summary = Extractive::new().summarize(&request).unwrap();
        assert!(words(&summary) <= 30, "{summary}");
        // Heuristic would allow fewer lines: the caller's counter decided.
        assert!(Heuristic.count(&summary) > 30, "{summary}");
        let own = Extractive::new()
            .summarize(&SummaryRequest::new(None, &folded, 30))
            .unwrap();
        assert!(Heuristic.count(&own) <= 30, "{own}");
        assert_ne!(own, summary);
    }

    #[test]
    fn a_tight_allowance_samples_the_whole_span() {
        let folded: Vec<Message> = (0..300)
            .map(|i| Message::user(format!("We decided item {i} goes in.")))
            .collect();
        let one = |_: &str| 1;
        let request = SummaryRequest::new(None, &folded, 12);
        let summary = Extractive::with_counter(one).summarize(&request).unwrap();
        // One token per line: headings and nine lines.
        let items: Vec<usize> = summary
            .lines()
            .filter_map(|l| l.strip_prefix("user: We decided item "))
            .filter_map(|l| l.split(' ').next()?.parse().ok())
            .collect();
        assert!(items.iter().any(|&i| i < 100), "{summary}");
        assert!(items.iter().any(|&i| (100..200).contains(&i)), "{summary}");
        assert!(items.iter().any(|&i| i >= 200), "{summary}");
        assert!(summary.lines().count() <= 12);
    }

    #[test]
    fn previous_summaries_roll_forward() {
        let folded = [Message::user("new fact, told plainly")];
        // A summary written otherwise: its first line is the start.
        let request = SummaryRequest::new(Some("old fact A\nold fact B"), &folded, 1000);
        let summary = Extractive::new().summarize(&request).unwrap();
        assert_eq!(
            summary,
            "Started with:\nold fact A\nuser: new fact, told plainly\nDiscussed:\nold fact B"
        );
        // One of ours: its start stays the start.
        let request = SummaryRequest::new(Some(&summary), &folded, 1000);
        let again = Extractive::new().summarize(&request).unwrap();
        assert!(again.starts_with("Started with:\nold fact A\n"), "{again}");
        assert_eq!(again.matches("new fact").count(), 1, "{again}");
    }

    #[test]
    fn long_lines_are_clipped_and_empty_turns_skipped() {
        let folded = [Message::user("x".repeat(1000)), Message::assistant("   ")];
        let summary = summarize(&folded, 10_000);
        assert_eq!(
            summary.chars().count(),
            "Started with:\nuser: ".len() + LINE_CHARS + 1
        );
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn turns_without_text_still_give_a_summary() {
        let folded = [Message::assistant(""), Message::user("  ")];
        assert_eq!(summarize(&folded, 100), "2 earlier messages without text.");
        assert_eq!(summarize(&folded, 3), "2 earlier");
    }

    #[test]
    fn tiny_allowances_keep_whole_words() {
        let folded = [Message::user("a long enough sentence here")];
        assert_eq!(summarize(&folded, 0), "a");
        assert_eq!(summarize(&folded, 3), "a long");
        assert_eq!(summarize(&folded, 7), "a long enough sentence here");
    }
}
