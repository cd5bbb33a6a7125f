//! The exact-identifier ledger (sawtooth's L1.5): identifiers found in the
//! folded turns, kept verbatim in a section after the summary's prose.
//!
//! How it is laid out:
//!
//! - [`rules`]: the table of well-known structured forms (URLs, emails,
//!   dates, phone numbers, IBANs ...), one row each with its pattern, check
//!   and examples;
//! - [`shape`]: everything else, recognised by its shape and context;
//!   [`lists`] holds the word lists those two read;
//! - [`read`]: a text's identifiers (JSON read as JSON, in both formats),
//!   newest first; [`json`] the JSON side of it;
//! - [`candidates`]: a fold's entries, ranked by salience (their
//!   [`Tier`], then their shape, then the newest); [`said`] what
//!   kept turns or a summary hold verbatim already;
//! - [`memo`]: what is remembered between folds (the texts read, this
//!   thread's readings, its last kept turns), each a `Memo` within one
//!   byte budget by one rule; `memo::remembered` reads them all.

use std::sync::Arc;

use regex::Regex;

mod candidates;
mod entries;
mod found;
mod json;
mod lists;
mod memo;
mod read;
mod rules;
mod said;
mod shape;
mod spans;
mod words;

#[cfg(test)]
mod tests;

pub(crate) use candidates::candidates;
pub(crate) use entries::{Candidates, Carried, Entries, key_of};
pub(crate) use read::identifiers;
pub(crate) use said::Said;

/// Compiles the rule table, if not yet (see [`FoldPolicy::prepare`]).
///
/// [`FoldPolicy::prepare`]: crate::FoldPolicy::prepare
pub(crate) fn prepare() {
    rules::table();
}

/// One ledger entry: an identifier as the folded turns say it
/// (`/srv/app/config.toml`, `ORD-2024-00123`; in JSON, as its string
/// reads unescaped), or a JSON `key: value`
/// (`connection_id: conn_994a82`). It reads as the `str` it holds and
/// compares equal to one; a clone shares the text (the memo of texts read,
/// a [`SummaryRequest`](crate::SummaryRequest) and a
/// [`Report`](crate::Report) hold the same entry, not copies of it).
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Message, SummaryRequest};
///
/// let mut history = vec![Message::user("Deploy build 4f9c2a1e77 to /srv/app/current, please.")];
/// history.extend((0..40).map(|i| Message::user(format!("Turn {i}: something else entirely."))));
/// let summarize = |_: &SummaryRequest<'_>| Ok::<_, std::convert::Infallible>("Deploy asked.".to_owned());
/// let result = Compactor::new(300).compact(&history, &summarize)?;
/// let entries = result.report.ledger();
/// assert!(entries.iter().any(|e| e == "/srv/app/current"));
/// assert!(entries.iter().any(|e| e.starts_with("4f9c")));
/// # Ok::<(), chatfold::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LedgerEntry(Arc<str>);

impl LedgerEntry {
    /// The entry's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for LedgerEntry {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for LedgerEntry {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for LedgerEntry {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for LedgerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for LedgerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for LedgerEntry {
    fn from(text: &str) -> Self {
        LedgerEntry(text.into())
    }
}

impl From<String> for LedgerEntry {
    fn from(text: String) -> Self {
        LedgerEntry(text.into())
    }
}

impl From<LedgerEntry> for String {
    fn from(entry: LedgerEntry) -> Self {
        entry.0.as_ref().to_owned()
    }
}

impl PartialEq<str> for LedgerEntry {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for LedgerEntry {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for LedgerEntry {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<LedgerEntry> for str {
    fn eq(&self, other: &LedgerEntry) -> bool {
        *self == *other.0
    }
}

impl PartialEq<LedgerEntry> for &str {
    fn eq(&self, other: &LedgerEntry) -> bool {
        **self == *other.0
    }
}

impl PartialEq<LedgerEntry> for String {
    fn eq(&self, other: &LedgerEntry) -> bool {
        **self == *other.0
    }
}

impl serde::Serialize for LedgerEntry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Whether an entry is loose: its value is not one hot word, and is
/// searched for in a text rather than looked up among its words.
pub(crate) fn is_loose(entry: &str) -> bool {
    // One word the ledger reads: no space in it, and a byte that makes it hot.
    let is_lone_word =
        |v: &str| !v.bytes().any(|b| b.is_ascii_whitespace()) && crate::fold::hot::has_ledger_word(v);
    let value = value_of(entry);
    !is_lone_word(value)
}

/// Who gave an identifier, the ledger's first key: a fold lists the
/// entries of a higher tier first, and an entry keeps its tier across folds
/// (the rendered section marks the tiers, see [`render`]). A mention in a
/// later turn raises an entry to [`Repeated`](Tier::Repeated) at least.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Tier {
    /// Found in a tool's result (or a message of a custom role).
    Tool,
    /// Written by the model: its text, or the arguments of a call it made.
    Call,
    /// Named in two turns or more, or read from an earlier summary that
    /// marked no tier.
    #[default]
    Repeated,
    /// Stated by the user (or in the application's instructions).
    User,
}

impl Tier {
    /// The tiers, highest first.
    pub(crate) const ALL: [Tier; 4] = [Tier::User, Tier::Repeated, Tier::Call, Tier::Tool];

    /// The line that opens the tier's entries in a section.
    pub(crate) fn heading(self) -> &'static str {
        match self {
            Tier::User => "Given by the user:",
            Tier::Repeated => "Named again later:",
            Tier::Call => "Used by the assistant:",
            Tier::Tool => "From tool results:",
        }
    }

    /// The tier whose heading `line` is.
    fn of_heading(line: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.heading() == line)
    }

    /// The tier of what a message of `role` says (its call arguments
    /// included): the user's and the application's instructions (a system
    /// or developer message a memory folds) first; a tool result inside a
    /// user message is a tool's.
    pub(crate) fn of(role: &crate::message::Role) -> Tier {
        use crate::message::Role;
        match role {
            Role::User | Role::System | Role::Developer => Tier::User,
            Role::Assistant => Tier::Call,
            _ => Tier::Tool,
        }
    }

    /// The tokens of the tier's heading line.
    pub(crate) fn heading_tokens<C: crate::count::TokenCounter + ?Sized>(self, counter: &C) -> usize {
        counter.count(self.heading()).saturating_add(1)
    }
}

/// Appends the section's lines for `entries` (highest tier first) to `out`:
/// each tier's heading, then `- ` and each of its entries, a line each.
pub(crate) fn push_lines(out: &mut String, entries: &[&str], tiers: &[Tier]) {
    let mut last = None;
    for (i, (entry, &tier)) in entries.iter().zip(tiers).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if last != Some(tier) {
            out.push_str(tier.heading());
            out.push('\n');
            last = Some(tier);
        }
        out.push_str("- ");
        out.push_str(entry);
    }
}

/// An entry's tokens: its text and a line's framing.
pub(crate) fn entry_tokens<C: crate::count::TokenCounter + ?Sized>(text: &str, counter: &C) -> usize {
    counter.count(text).saturating_add(2)
}

/// The heading of the ledger section in a summary.
pub const LEDGER_HEADING: &str = "Exact identifiers (kept verbatim):";

/// What a section opens with, in a rendered summary.
pub(crate) const SECTION_START: &str = "\n\nExact identifiers (kept verbatim):\n";

/// A user's own identifier pattern: every match is a ledger entry.
#[derive(Clone, Debug)]
pub struct LedgerPattern(Regex);

impl LedgerPattern {
    /// The pattern's source.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    pub(crate) fn new(pattern: &str) -> Result<Self, regex::Error> {
        Regex::new(pattern).map(LedgerPattern)
    }
}

impl PartialEq for LedgerPattern {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for LedgerPattern {}

pub(crate) fn value_of(entry: &str) -> &str {
    let bytes = entry.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b':', &bytes[from..]) {
        let at = from + i;
        if bytes.get(at + 1) == Some(&b' ') {
            return &entry[at + 2..];
        }
        from = at + 1;
    }
    entry
}

/// Whether two entries name the same identifier (`key: value` and a bare
/// `value` do).
pub(crate) fn same(a: &str, b: &str) -> bool {
    value_of(a) == value_of(b)
}

/// Whether `entry` already stands verbatim in `prose`, as it would be
/// listed. (A `key: value` entry whose value alone is in the prose is still
/// listed: read back from prose, a value matches no pattern of its own.)
pub(crate) fn covered(entry: &str, prose: &str) -> bool {
    holds(prose.as_bytes(), entry.as_bytes())
}

/// Whether `needle` stands in `haystack`: its first byte found by
/// `memchr`, the rest compared there. For the ledger's short texts this
/// costs less than building a searcher (as `memmem::find` does per call).
pub(crate) fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    let Some((&first, _)) = needle.split_first() else {
        return true;
    };
    let Some(last_start) = haystack.len().checked_sub(needle.len()) else {
        return false;
    };
    memchr::memchr_iter(first, &haystack[..=last_start]).any(|at| &haystack[at..at + needle.len()] == needle)
}

/// `prose` followed by the ledger section listing `entries` (none:
/// `prose`), each of its `tiers`, highest first:
///
/// ```text
/// Exact identifiers (kept verbatim):
/// Given by the user:
/// - ORD-2024-00123
/// From tool results:
/// - build 7f3a9c2
/// ```
pub(crate) fn render(prose: &str, entries: &[&str], tiers: &[Tier]) -> String {
    if entries.is_empty() {
        return prose.to_owned();
    }
    let mut out = String::with_capacity(
        prose.len() + SECTION_START.len() + entries.iter().map(|e| e.len() + 3).sum::<usize>() + 80,
    );
    out.push_str(prose);
    out.push_str(SECTION_START);
    push_lines(&mut out, entries, tiers);
    out
}

/// A summary's text split into its prose and its ledger entries, each with
/// its tier (entries under no tier's heading, as an earlier version wrote
/// them: [`Tier::Repeated`]); a text without a section is all prose.
pub(crate) fn split(body: &str) -> (&str, Vec<(&str, Tier)>) {
    match body.rfind(SECTION_START) {
        Some(at) => {
            let mut tier = Tier::default();
            let mut entries = Vec::new();
            for line in body[at + SECTION_START.len()..].lines() {
                match line.strip_prefix("- ") {
                    Some("") => {}
                    Some(entry) => entries.push((entry, tier)),
                    None => tier = Tier::of_heading(line).unwrap_or(tier),
                }
            }
            (&body[..at], entries)
        }
        None => (body, Vec::new()),
    }
}

/// A summarizer's text with any copy of the ledger heading neutralised, so
/// that its own text is never read back as a ledger.
pub(crate) fn neutralise(text: String) -> String {
    if text.contains(LEDGER_HEADING) {
        text.replace(LEDGER_HEADING, "Exact identifiers:")
    } else {
        text
    }
}
