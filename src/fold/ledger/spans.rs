//! The identifiers of a text's spans: the rule table's matches and the
//! tokens shape reads, ranked; what every reading of the ledger builds on
//! (a JSON value's strings, a message's text).

use super::LedgerEntry;
use super::rules::{self, Table};
use super::shape;
use crate::fold::hot::{Ranges, ledger_spans};

/// An identifier found, with where it was (a position or a line) and its
/// rank (see [`KEYED`]).
pub(super) type Hit = (usize, LedgerEntry, u8);

/// The rank of an entry its place names for certain: a JSON identifier
/// key's value, a user's own pattern's match. A row of the rule table
/// ranks 2, a shape 1 or 2 (see [`shape::strength`]).
pub(super) const KEYED: u8 = 3;

/// A value short enough and on one line, fit for a ledger entry.
pub(super) fn usable(s: &str) -> bool {
    !s.trim().is_empty() && s.len() <= 300 && !s.contains('\n')
}

/// Adds the identifiers in `text` (less those `skip` says), with where
/// each starts and its rank, to `out`.
pub(super) fn matched(text: &str, skip: &dyn Fn(&str) -> bool, out: &mut Vec<Hit>) {
    let Some(table) = rules::table() else {
        return;
    };
    ledger_spans(text, |from, to, words, runs| {
        let span = &text[from..to];
        let within = |&(s, e): &(usize, usize)| (s - from, e - from);
        let words: Vec<(usize, usize)> = words.iter().map(within).collect();
        let runs: Vec<(usize, usize)> = runs.iter().map(within).collect();
        span_entries(table, span, (&words, &runs), |start, end, rank| {
            let found = &span[start..end];
            if !skip(found) {
                out.push((from + start, found.into(), rank));
            }
        });
    });
}

/// Calls `each` with where the identifiers in `span` are, in order, and
/// their ranks (`words`: the span's hot words and its runs of code groups
/// to read whole, where in it each is): the rule table's matches that
/// stand apart, and the tokens that shape reads outside every match of the
/// table (a match that hides its text, a user agent or a URL with a
/// password, hides it from shape too).
pub(super) fn span_entries(
    table: &Table,
    span: &str,
    words: (&Ranges, &Ranges),
    mut each: impl FnMut(usize, usize, u8),
) {
    let mut matches = Vec::new();
    table.matches(span, &mut matches);
    if matches.is_empty() {
        return shape::identifiers(span, words, &[], each);
    }
    let hidden: Vec<(usize, usize)> = matches.iter().map(|m| (m.start, m.end)).collect();
    let mut found: Vec<(usize, usize, u8)> = (matches.iter())
        .filter(|m| m.keep)
        .map(|m| (m.start, m.end, 2))
        .collect();
    shape::identifiers(span, words, &hidden, |start, end, rank| {
        found.push((start, end, rank))
    });
    found.sort_unstable();
    found
        .into_iter()
        .for_each(|(start, end, rank)| each(start, end, rank));
}
