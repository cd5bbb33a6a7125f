//! A text's identifiers, newest first: the rule table and shape over its
//! hot spans, JSON read as JSON.

use std::borrow::Cow;

use super::json::{Set, json_entries, json_matched, parse_json, strings_in};
use super::spans::{Hit, KEYED, matched, usable};
use super::{LedgerEntry, LedgerPattern};
use crate::message::Message;

/// The identifiers in one text, in order: when the text is one JSON value,
/// its [`whole_json`] entries; else those of the rule table and of shape,
/// in order of position, then the matches of `extra` patterns (each whole
/// match an entry).
pub(crate) fn identifiers(text: &str, extra: &[LedgerPattern]) -> Vec<LedgerEntry> {
    ranked(text, extra)
        .into_iter()
        .map(|(_, entry, _)| entry)
        .collect()
}

/// [`identifiers`] with their ranks.
pub(super) fn ranked(text: &str, extra: &[LedgerPattern]) -> Vec<Hit> {
    if let Some(found) = whole_json(text, extra) {
        return found;
    }
    let mut out = Vec::new();
    matched(text, &|_| false, &mut out);
    extra_matched(text, extra, &mut out);
    out
}

/// The identifiers of `text` read as the one JSON object or array it is
/// (`None` when it is not one): its `key: value` entries first, then the
/// identifiers in its strings as they read unescaped (those equal to one
/// of its values left out), then the `extra` patterns' matches in its text.
fn whole_json(text: &str, extra: &[LedgerPattern]) -> Option<Vec<Hit>> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) || text.len() > 1 << 20 {
        return None;
    }
    let value = parse_json(text)?;
    let (mut keyed, mut values) = (Vec::new(), Set::default());
    json_entries(&value, &mut keyed, &mut values);
    let mut out: Vec<Hit> = keyed.into_iter().map(|e| (0, e, KEYED)).collect();
    let mut found = Vec::new();
    match json_matched(&value, &values) {
        Some(unescaped) => out.extend(unescaped),
        None => matched(text, &|found| values.contains(found), &mut found),
    }
    extra_matched(text, extra, &mut found);
    out.extend(found);
    Some(out)
}

/// Adds the matches of the user's `extra` patterns in `text` (each whole
/// match an entry), with where each starts, to `out`.
fn extra_matched(text: &str, extra: &[LedgerPattern], out: &mut Vec<Hit>) {
    for pattern in extra {
        out.extend(
            (pattern.0.find_iter(text))
                .filter(|m| usable(m.as_str()))
                .map(|m| (m.start(), m.as_str().into(), KEYED)),
        );
    }
}

/// A line of a text that is a JSON value, as [`by_line_from_end`] reads it.
struct JsonLine {
    line: usize,
    /// Its `key: value` entries, and the values they name.
    entries: Vec<LedgerEntry>,
    values: Set<String>,
    /// When its strings have escapes, what the patterns find in them.
    unescaped: Option<Vec<Hit>>,
}

/// The identifiers of a text that is not JSON, newest (last) line first,
/// each with its line: what [`identifiers`] finds in each line read alone,
/// from the last line, in one pass of the patterns over the whole text (no
/// match spans lines). A line that is a JSON value gives its `key: value`
/// entries first, and its matches equal to one of its values are left out;
/// one whose strings have escapes is read string by string, unescaped.
pub(super) fn by_line_from_end(text: &str, extra: &[LedgerPattern]) -> Vec<Hit> {
    let bytes = text.as_bytes();
    // The line of each position asked for, in order: newlines counted on.
    let lines = || {
        let mut cursor = (0, 0);
        move |at: usize| {
            let (from, line) = cursor;
            cursor = (at, line + memchr::memchr_iter(b'\n', &bytes[from..at]).count());
            cursor.1
        }
    };
    let mut line_of = lines();
    // Lines that parse as JSON (a brace or bracket opens them), in order.
    let mut json: Vec<JsonLine> = Vec::new();
    // The line the last brace was on (each line is looked at once), and
    // how far newlines were looked for.
    let (mut decided, mut start, mut from) = (None, 0, 0);
    for at in memchr::memchr2_iter(b'{', b'[', bytes) {
        start = memchr::memrchr(b'\n', &bytes[from..at]).map_or(start, |i| from + i + 1);
        from = at;
        if decided == Some(start) {
            continue;
        }
        decided = Some(start);
        if !text[start..at].trim_start().is_empty() {
            continue;
        }
        let end = memchr::memchr(b'\n', &bytes[at..]).map_or(bytes.len(), |i| at + i);
        let line = &text[start..end];
        if line.len() > 1 << 20 {
            continue;
        }
        if let Some(value) = parse_json(line) {
            let (mut entries, mut values) = (Vec::new(), Set::default());
            json_entries(&value, &mut entries, &mut values);
            let unescaped = json_matched(&value, &values);
            json.push(JsonLine {
                line: line_of(start),
                entries,
                values,
                unescaped,
            });
        }
    }
    let mut found: Vec<Hit> = Vec::new();
    for j in &json {
        found.extend(j.entries.iter().map(|e| (j.line, e.clone(), KEYED)));
    }
    let mut matches = Vec::new();
    matched(text, &|_| false, &mut matches);
    let mut line_of = lines();
    // The JSON line at or after the match's (matches come in order).
    let mut next = 0;
    for (at, entry, rank) in matches {
        let n = line_of(at);
        while json.get(next).is_some_and(|j| j.line < n) {
            next += 1;
        }
        // A JSON line's matches equal to one of its values are left out
        // (its extra patterns' are not), and all of one read unescaped.
        let json_line = json.get(next).filter(|j| j.line == n);
        if !json_line.is_some_and(|j| j.unescaped.is_some() || j.values.contains(entry.as_str())) {
            found.push((n, entry, rank));
        }
    }
    let any_json = !json.is_empty();
    for j in json {
        found.extend(
            j.unescaped
                .into_iter()
                .flatten()
                .map(|(_, e, rank)| (j.line, e, rank)),
        );
    }
    // The user's patterns read each line alone, as they may match across
    // lines or anchor at one.
    if !extra.is_empty() {
        for (n, line) in text.lines().enumerate() {
            let mut extras = Vec::new();
            extra_matched(line, extra, &mut extras);
            found.extend(extras.into_iter().map(|(_, e, rank)| (n, e, rank)));
        }
    }
    // Each line's JSON entries, its matches (its strings', when read
    // unescaped), the extra patterns' (a stable
    // sort keeps each group's order; matches alone are in order), all
    // reversed: newest first.
    if any_json || !extra.is_empty() {
        found.sort_by_key(|&(line, _, _)| line);
    }
    found.reverse();
    found
}

/// The pieces of a message that say what it says (what [`Said`] reads):
/// the content's text
/// (with Anthropic's blocks: thinking, a tool result's content, and the
/// strings in a tool call's `input`), each tool call's arguments, newest
/// (last) first.
pub(super) fn pieces(message: &Message) -> impl Iterator<Item = &str> {
    prose_pieces(message, true)
}

/// A message's pieces of text, newest first; with `inputs`, the strings of
/// its tool call blocks' `input`s too.
fn prose_pieces(message: &Message, inputs: bool) -> impl Iterator<Item = &str> {
    use crate::message::{Content, Part};
    // Most messages are a text alone: one piece, without an iterator chain.
    if let (Some(Content::Text(text)), true) = (&message.content, message.tool_calls.is_empty()) {
        return Pieces::One(Some(text.as_str()));
    }
    let calls = message.tool_calls.iter().map(|c| c.arguments.as_str());
    let (text, mut parts): (Option<&str>, Vec<&str>) = match &message.content {
        None => (None, Vec::new()),
        Some(Content::Text(s)) => (Some(s.as_str()), Vec::new()),
        Some(Content::Parts(parts)) => (None, parts.iter().flat_map(|p| p.prose()).collect()),
        Some(Content::Item(item)) => (None, item.prose()),
    };
    if inputs {
        for input in message.parts().iter().filter_map(Part::tool_input) {
            strings_in(input, &mut parts);
        }
    }
    Pieces::Many(calls.rev().chain(parts.into_iter().rev()).chain(text))
}

/// What [`pieces`] gives: a message's one text, or its pieces in turn.
enum Pieces<'m, I> {
    One(Option<&'m str>),
    Many(I),
}

impl<'m, I: Iterator<Item = &'m str>> Iterator for Pieces<'m, I> {
    type Item = &'m str;

    fn next(&mut self) -> Option<&'m str> {
        match self {
            Pieces::One(text) => text.take(),
            Pieces::Many(pieces) => pieces.next(),
        }
    }
}

/// The identifiers of one piece, newest first, each with its line: a JSON
/// piece's whole (its keys name its values) as one line, any other's line
/// by line from the end.
pub(super) fn newest_first(piece: &str, extra: &[LedgerPattern]) -> Vec<Hit> {
    // Nothing is found outside a hot word, nor a JSON key without a brace
    // or bracket: most short pieces of prose are read at once.
    if extra.is_empty()
        && !crate::fold::hot::has_ledger_word(piece)
        && memchr::memchr2(b'{', b'[', piece.as_bytes()).is_none()
    {
        return Vec::new();
    }
    match whole_json(piece, extra) {
        Some(found) => found.into_iter().rev().map(|(_, e, rank)| (0, e, rank)).collect(),
        None => by_line_from_end(piece, extra),
    }
}

/// The pieces of a message to read identifiers from, newest (last) first:
/// each tool call's arguments, the content's text (with Anthropic's blocks:
/// thinking, a tool result's content), and each tool call block's `input`
/// as its JSON text, so that its keys name its values as OpenAI's
/// arguments' do.
pub(super) fn reading_pieces(message: &Message) -> impl Iterator<Item = Cow<'_, str>> {
    use crate::message::Part;
    let inputs: Vec<Cow<'_, str>> = (message.parts().iter())
        .filter_map(Part::tool_input)
        .filter_map(|input| serde_json::to_string(input).ok())
        .map(Cow::Owned)
        .collect();
    inputs
        .into_iter()
        .rev()
        .chain(prose_pieces(message, false).map(Cow::Borrowed))
}
