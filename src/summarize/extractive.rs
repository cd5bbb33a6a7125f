//! The extractive summarizer: no model, no network.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::count::{Heuristic, TokenCounter};
use crate::message::Message;
use crate::summarize::{Summarizer, SummaryRequest};

/// A deterministic summarizer that needs no model: the opening sentence of
/// each folded turn, in order.
///
/// When they do not all fit the allowance, what people said (and the previous
/// summary) goes first, then tool calls and results; within each, the newest
/// lines win.
///
/// It is what the CLI uses by default, so chatfold works offline. It measures
/// with its own counter ([`Heuristic`] unless given one); pass the compactor's
/// counter for summaries that fill the allowance exactly.
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
/// ];
/// let summary = Extractive::new().summarize(&SummaryRequest::new(None, &folded, 100))?;
/// assert_eq!(
///     summary,
///     "user: Deploy v2 to staging on the blue cluster, and keep green idle.\nassistant: called deploy({\"v\":\"2\"})\ntool [c1]: ok: deployed in 41s"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Extractive<C = Heuristic> {
    counter: C,
}

/// Longest line the extractive summarizer writes for one message, in characters.
const LINE_CHARS: usize = 200;

impl Extractive {
    /// An extractive summarizer measuring with [`Heuristic`].
    pub const fn new() -> Self {
        Extractive { counter: Heuristic }
    }
}

impl<C: TokenCounter> Extractive<C> {
    /// An extractive summarizer measuring with `counter`.
    pub const fn with_counter(counter: C) -> Self {
        Extractive { counter }
    }
}

impl<C: TokenCounter> Summarizer for Extractive<C> {
    type Error = std::convert::Infallible;

    /// Lines are made and counted newest first, and only until the allowance
    /// is spent; the folded turns are still walked once for each tier (what
    /// people said, then tool calls and results), so the cost grows with the
    /// number of folded turns, and the counting with the summary's size.
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        let previous: Vec<&str> = request
            .previous_summary()
            .into_iter()
            .flat_map(str::lines)
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        // Candidates newest first, numbered by their place in the summary.
        let total = previous.len() + request.messages().len();
        let candidates = || {
            let turns = request.messages().rev().map(|m| (Tier::of(m), Some(m), None));
            let older = previous
                .iter()
                .rev()
                .map(|l| (Tier::Conversation, None, Some(*l)));
            turns
                .chain(older)
                .enumerate()
                .map(move |(k, c)| (total - 1 - k, c))
        };
        let line = |m: Option<&Message>, text: Option<&str>| match (m, text) {
            (Some(m), _) => line_for(m),
            (None, text) => text.map(|t| Cow::Owned(t.to_owned())),
        };
        let mut kept: std::collections::BTreeMap<usize, Cow<'_, str>> = std::collections::BTreeMap::new();
        let mut spent = 0usize;
        for tier in [Tier::Conversation, Tier::Tools] {
            for (place, (t, m, text)) in candidates() {
                if t != tier {
                    continue;
                }
                let Some(line) = line(m, text) else { continue };
                // Each line costs its newline too.
                let cost = self.counter.count(&line).saturating_add(1);
                if spent.saturating_add(cost) > request.allowance().saturating_add(1) {
                    break;
                }
                spent += cost;
                kept.insert(place, line);
            }
        }
        if kept.is_empty() {
            // Not even the newest line fits: give it anyway; the compactor cuts it to fit.
            match candidates().find_map(|(_, (_, m, text))| line(m, text)) {
                Some(newest) => return Ok(newest.into_owned()),
                None => {
                    let n = request.messages().len();
                    return Ok(format!("{n} earlier messages without text."));
                }
            }
        }
        let kept: Vec<Cow<'_, str>> = kept.into_values().collect();
        Ok(kept.join("\n"))
    }
}

/// Which lines the extractive summarizer keeps first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    /// What people said, and the previous summary.
    Conversation,
    /// Tool calls and tool results: details, kept when there is room.
    Tools,
}

impl Tier {
    fn of(m: &Message) -> Tier {
        let result = m.role == crate::message::Role::Tool || m.answered_ids().next().is_some();
        if result || (m.text().trim().is_empty() && m.makes_calls()) {
            Tier::Tools
        } else {
            Tier::Conversation
        }
    }
}

/// One summary line for a folded message, or `None` when it says nothing.
fn line_for<'x>(m: &Message) -> Option<Cow<'x, str>> {
    let text = m.text();
    let mut line = String::new();
    line.push_str(&opening(&text));
    for call in &m.tool_calls {
        if !line.is_empty() {
            line.push_str("; ");
        }
        let _ = write!(line, "called {}({})", call.name, call.arguments);
    }
    // Anthropic's tool calls and results, as blocks.
    for part in m.parts() {
        let name = |key: &str| {
            part.as_json()
                .get(key)
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
        };
        let piece = match (part.tool_input(), part.kind()) {
            (Some(input), _) => format!("called {}({input})", name("name")),
            (None, Some("tool_result")) => opening(&part.result_texts().join("\n")),
            _ => continue,
        };
        if !line.is_empty() && !piece.is_empty() {
            line.push_str("; ");
        }
        line.push_str(&piece);
    }
    if line.is_empty() {
        return None;
    }
    let mut out = m.role.as_str().to_owned();
    if let Some(id) = &m.tool_call_id {
        let _ = write!(out, " [{id}]");
    }
    out.push_str(": ");
    out.push_str(&clip(&line, LINE_CHARS));
    Some(Cow::Owned(out))
}

/// A line is made of whole sentences until it has at least this many characters.
const LINE_MIN_CHARS: usize = 60;

/// The opening of `text`: its first sentences (or lines), joined by spaces,
/// until they reach [`LINE_MIN_CHARS`].
fn opening(text: &str) -> String {
    let mut out = String::new();
    for sentence in sentences(text) {
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

/// `text` cut to `max` characters, with an ellipsis when cut.
fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((i, _)) => Cow::Owned(format!("{}…", text[..i].trim_end())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn newest_lines_win_when_space_is_short() {
        let folded: Vec<Message> = (0..10)
            .map(|i| Message::user(format!("message number {i}")))
            .collect();
        let one_token_per_line = |_: &str| 1;
        let summarizer = Extractive::with_counter(one_token_per_line);
        // 3 lines: 1 + (1 + newline) * 2 = 5 tokens
        let summary = summarizer
            .summarize(&SummaryRequest::new(None, &folded, 5))
            .unwrap();
        assert_eq!(
            summary,
            "user: message number 7\nuser: message number 8\nuser: message number 9"
        );
    }

    #[test]
    fn previous_summary_comes_first_and_goes_first() {
        let folded = [Message::user("new fact")];
        let request = SummaryRequest::new(Some("old fact A\nold fact B"), &folded, 1000);
        let summary = Extractive::new().summarize(&request).unwrap();
        assert_eq!(summary, "old fact A\nold fact B\nuser: new fact");
        let one = |_: &str| 1;
        let request = SummaryRequest::new(Some("old fact A\nold fact B"), &folded, 3);
        let summary = Extractive::with_counter(one).summarize(&request).unwrap();
        assert_eq!(summary, "old fact B\nuser: new fact");
    }

    #[test]
    fn long_lines_are_clipped_and_empty_turns_skipped() {
        let folded = [Message::user("x".repeat(1000)), Message::assistant("   ")];
        let summary = Extractive::new()
            .summarize(&SummaryRequest::new(None, &folded, 10_000))
            .unwrap();
        assert_eq!(summary.chars().count(), "user: ".len() + LINE_CHARS + 1);
        assert!(summary.ends_with('…'));
    }

    #[test]
    fn conversation_is_kept_before_tool_details() {
        let folded = [
            Message::user("Why did the deploy fail?"),
            Message::assistant_tool_calls(vec![crate::ToolCall::new("c1", "logs", "{}")]),
            Message::tool("ERROR config: unknown field", "c1"),
            Message::assistant("The config has an unknown field."),
        ];
        let one = |_: &str| 1;
        let summary = Extractive::with_counter(one)
            .summarize(&SummaryRequest::new(None, &folded, 3))
            .unwrap();
        assert_eq!(
            summary,
            "user: Why did the deploy fail?\nassistant: The config has an unknown field."
        );
        let summary = Extractive::with_counter(one)
            .summarize(&SummaryRequest::new(None, &folded, 5))
            .unwrap();
        assert_eq!(
            summary,
            "user: Why did the deploy fail?\ntool [c1]: ERROR config: unknown field\nassistant: The config has an unknown field."
        );
    }

    #[test]
    fn turns_without_text_still_give_a_summary() {
        let folded = [Message::assistant(""), Message::user("  ")];
        let summary = Extractive::new()
            .summarize(&SummaryRequest::new(None, &folded, 100))
            .unwrap();
        assert_eq!(summary, "2 earlier messages without text.");
    }

    #[test]
    fn nothing_fits_still_gives_the_newest_line() {
        let folded = [Message::user("a long enough sentence here")];
        let summary = Extractive::new()
            .summarize(&SummaryRequest::new(None, &folded, 0))
            .unwrap();
        assert_eq!(summary, "user: a long enough sentence here");
    }
}
