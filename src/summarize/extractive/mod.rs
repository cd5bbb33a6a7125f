//! The extractive summarizer: no model, no network.
//!
//! A digest in sections, each line a sentence taken from the folded turns
//! (or carried from the previous summary):
//!
//! - `Started with:` the first user turn of the fold that tells something
//!   (its opening, or its most informative sentence when the opening is
//!   small talk), or the previous summary's own `Started with:` lines (its
//!   first line, for a summary written otherwise), so that a summary
//!   rolled forward many times still says how the conversation began;
//! - `Decided:` sentences that decide or conclude ("we will", "decided",
//!   "let's", "going with", "use X" ...) and people's imperative requests
//!   (those that differ only in the names in backticks they hold, one line
//!   that lists the names: `` `socket` / `open` / `openat` ``), when they
//!   tell something: a marker alone makes no decision;
//! - `Discussed:` what else people said, once (a line with two thirds of
//!   its words in a better one's, and no path, number or other name of its
//!   own, is left out);
//! - `Tools:` each call's name and arguments with the first sentence of its
//!   result, or the first line that names an error (a marker's word inside
//!   an identifier, `statement_timeout_ms`, names none), after `failed:`
//!   when the result is flagged as an error or opens with that line, after
//!   `→` when the tool ran and its output reports an error further on (a
//!   search's matches, a log);
//! - `Open questions:` people's questions that no later answer in the fold
//!   takes up: its reply (the first answer after it that makes no tool
//!   call, unless that one only asks back) uses one of its words (in any
//!   form: `takes` for `take`) or names, or later answers use three in
//!   five of them;
//! - `Recently:` the last two turns of the fold.
//!
//! Sentences are ranked by what they tell, per token: the rarity of each of
//! their distinct content words in the span (the inverse frequency among
//! its turns and the previous summary's lines: `ln(1 + texts / holding)`),
//! more for names (capitalised words that do not open the sentence),
//! numbers and dates, more for a sentence that speaks of the speaker (`I`,
//! `my`, `we`: facts, plans, decisions of their own) or answers the turn
//! before (one that asked something), all divided by the sentence's length
//! in tokens plus a line's overhead. Each turn gives its most informative
//! sentence (a decision's marker adds to it), and, in a turn of three
//! sentences or more, the next when it tells seven tenths as much. A
//! sentence of common words only (greetings, thanks, agreement, "keep it
//! up"; words in a tenth of the turns or more, as the speakers' names),
//! with no number or date, is small talk: it takes no room but among the
//! last turns. Over a span of a few dozen lines, a decision or open
//! question that tells less than four in five lines said (its marker or
//! question aside) and names nothing exact (a file, a version, a ticket)
//! is one more line said.
//! The previous summary's lines are weighed the same way, so old facts and
//! new compete on the same terms (tool lines and the start keep fixed
//! scores: errors first).
//!
//! When a section has more lines than its share of the allowance, the span
//! is cut into as many equal stretches as lines fit and the best line of
//! each stretch is kept, so old, middle and new turns are all represented;
//! the room left is then filled by score. Sections are served in order of
//! importance (`Started with`, open questions, decisions, tools, recent
//! turns, the rest), and lines are written in their original order within
//! each section.
//!
//! Time anchors: a turn that opens with a date (a bracketed stamp that
//! holds one, `[1:56 pm on 8 May, 2023]`, or an ISO date or timestamp)
//! anchors it and the turns after it, until the next (the stamp itself is
//! not read as what was said). A line is written after its anchor,
//! `[8 May, 2023] user: ...`, unless the line above it in its section has
//! the same one; lines carried from a previous summary keep theirs. Lines
//! are chosen as if each paid for its anchor; the room that sharing them
//! leaves is filled again with the best lines left out.
//!
//! How it is laid out:
//!
//! - [`gather`]: the walk over the folded turns into candidate lines, and
//!   their sections; [`previous`] reads the previous summary back,
//!   [`tools`] the calls and their results, [`merge`] joins decisions that
//!   differ only in names;
//! - [`rarity`]: how rare each word is in the span, and how much a
//!   sentence tells by it;
//! - [`pick`]: which lines fit the allowance, and the text they make;
//!   [`distinct`] leaves out the lines said again;
//! - [`text`]: windows, sentences, clipping; [`markers`] the phrases that
//!   mark errors, decisions and questions; [`keywords`] a question's
//!   words; [`words`] the common words; [`stamp`] the time anchors.

use crate::count::{Heuristic, TokenCounter};
use crate::summarize::{Summarizer, SummaryRequest};

/// A deterministic summarizer that needs no model: a digest, in sections,
/// of sentences taken from the whole folded span.
///
/// It keeps how the conversation started (rolled forward from the previous
/// summary), the decisions, the tool outcomes (errors first), the questions
/// still open, what people said that tells the most per token (rare words,
/// names, numbers, dates; not small talk), each with the date its session
/// opened with when the conversation carries dates, and the last turns;
/// when they do not all fit the allowance, it samples each section evenly
/// across the span rather than keeping only the newest lines. The output always fits the allowance as measured
/// (whole lines, and never a cut word), unless not even one word does.
///
/// It is what the CLI uses by default, so chatfold works offline. It
/// measures with the caller's counter when the request carries one
/// ([`SummaryRequest::count`]), else with its own ([`Heuristic`] unless
/// given one).
///
/// Its cost grows with the folded text (each turn's first few thousand
/// characters are read, twice: once to count how rare each word is), and
/// the counting with the summary's size. Telling
/// repeated `Discussed:` lines apart has a budget, a few hundred index reads
/// a line, which prose stays far below; on text made of a few dozen words
/// over and over it runs out, and the lines not yet compared are all kept
/// as candidates, so that the cost stays linear.
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

mod distinct;
mod gather;
mod keywords;
mod markers;
mod merge;
mod pick;
mod previous;
mod rarity;
mod stamp;
mod text;
mod tools;
mod words;

#[cfg(test)]
mod tests;

use gather::{Gathered, Place, SPAN, walk};
use merge::merge_names;
use pick::{choose, fallback, fit, top_up};
use previous::carry;
use stamp::unanchored;

/// Reads how rare each word is in the span: each line of the previous
/// summary and each turn (not tool results), without its time stamp; and
/// the turns' sentences, to weigh them with one look-up a word.
fn read_rarity(request: &SummaryRequest<'_>, previous: Option<&str>, g: &mut Gathered) {
    for line in previous.into_iter().flat_map(str::lines) {
        let line = line.trim();
        if line.is_empty() || gather::Section::of_heading(line).is_some() {
            continue;
        }
        g.rarity.read(text::spoken(unanchored(line).1));
    }
    for m in request.messages() {
        if m.role == crate::message::Role::Tool {
            g.rarity.read_turn(None::<std::iter::Empty<&str>>);
            continue;
        }
        let t = m.text();
        let t = text::window(&t);
        let t = stamp::stamp(t).map_or(t, |(_, end)| &t[end..]);
        match t.trim().is_empty() {
            true => g.rarity.read_turn(None::<std::iter::Empty<&str>>),
            false => g.rarity.read_turn(Some(text::sentences(t).take(SENTENCES))),
        }
    }
}

/// The summary of `request`, measured with `measure`.
fn digest(request: &SummaryRequest<'_>, measure: &dyn Fn(&str) -> usize) -> String {
    let mut g = Gathered::default();
    let previous = request.previous_summary().filter(|p| !p.trim().is_empty());
    read_rarity(request, previous, &mut g);
    let carried_start = previous.is_some_and(|p| carry(p, &mut g));
    let n = request.messages().len();
    let place = |i: usize| match previous {
        None => (i as u128 * SPAN as u128 / n.max(1) as u128) as Place,
        Some(_) => SPAN / 3 + (i as u128 * (2 * SPAN / 3) as u128 / n.max(1) as u128) as Place,
    };
    walk(request, &mut g, carried_start, &place);
    merge_names(&mut g.candidates);
    let allowance = request.allowance();
    let (chosen, eligible) = choose(&g.candidates, allowance, measure);
    let written = fit(&g.candidates, chosen, allowance, measure);
    let text = top_up(&g.candidates, &eligible, written, allowance, measure);
    if !text.is_empty() {
        return text;
    }
    fallback(&g.candidates, n, allowance, measure)
}
