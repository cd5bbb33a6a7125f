//! Identifiers recognised by their shape and context, not by a list of
//! kinds.
//!
//! A text is cut into tokens at spaces, at the punctuation that no
//! identifier holds (quotes, brackets, commas, table bars), and at CJK
//! characters and typographic quotes, so that an identifier beside Chinese
//! text or inside `„…“` is read whole with its leading `/`, `#`, `@` or
//! `+`. A token, less the punctuation that ends a sentence, is an
//! identifier when its shape is rare for prose ([`strength`]):
//!
//! - it mixes letters and digits (`OPS-167`, `conn_994a82`,
//!   `python:3.11-slim`), and is not a quantity, a standard, a type, a
//!   short name with a small number (`GPT-4`, `COVID-19`, `Win64`);
//! - it carries structure: an `_` inside it, dotted parts
//!   (`pkg.module.ClassName`), a path, a `key:value`, a sigil (`#inc-4471`,
//!   `@acme/kit`), a call (`validate()`), two inner capitals
//!   (`validatePaymentBatch`);
//! - it is long and rare: six digits or more that are not a round number,
//!   digit groups (`978-0-306-40615-7`, `1.4.2`), a long mixed-case run
//!   (a base64 cursor).
//!
//! Context raises a weaker token: inside backticks or typographic quotes,
//! alone in a table cell, or after a label (`Order ID: 99812`,
//! `booking #QX7PLM`); see [`Context`]. Two or three code groups are one
//! identifier (see [`labelled_groups`]) after a label's mark (`Postcode:
//! 1012 AB`, `plate: 123가 4567`), inside quotes, backticks or brackets
//! (`„1012 AB“`), after a prose label (`my postcode is 3511 LX`), or around
//! a token that is an identifier by its shape (`K1A 0B1`); a run with a
//! unit is a quantity (`300 GB`, `1066 AD`).

use super::lists::{LABELS, NOT_CODES, PREFIX_WORDS, SECRETS, STANDARDS, STRUCTURAL};
use crate::fold::hot::{Ranges, asks_next, code_group, is_space, labelled_groups, opens_group};

/// Where a token stands, beyond its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Context {
    /// Prose, code, a JSON string.
    Plain,
    /// In backticks or typographic quotes, alone in a table cell, or after
    /// a label: a weaker shape is enough.
    Marked,
}

/// Whether `c` (not ASCII) is a CJK character (after one, a word may be
/// a label's value).
pub(super) fn is_cjk(c: char) -> bool {
    matches!(u32::from(c), 0x2E80..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF | 0xFF00..=0xFFEF | 0x20000..=0x3FFFF)
}

/// Whether `c` is a letter, digit or mark of a script other than Latin
/// (Thai, Arabic, Hebrew, Devanagari, Cyrillic, Greek, CJK ...): a token
/// ends where the script changes, so an identifier beside such text is
/// read whole and alone (`8.183884ให` gives `8.183884`).
pub(super) fn is_other_script(c: char) -> bool {
    let latin = matches!(u32::from(c), 0..=0x7F | 0xC0..=0x24F | 0x250..=0x2AF | 0x1E00..=0x1EFF | 0x2C60..=0x2C7F | 0xA720..=0xA7FF);
    !latin && (c.is_alphanumeric() || is_combining(c))
}

/// Whether `c` is a combining mark (Thai and Devanagari vowel signs,
/// Arabic and Hebrew points): part of the word before it.
fn is_combining(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0300..=0x036F | 0x0483..=0x0489 | 0x0591..=0x05C7 | 0x0610..=0x061A | 0x064B..=0x065F | 0x0670
            | 0x06D6..=0x06ED | 0x0900..=0x0903 | 0x093A..=0x094F | 0x0951..=0x0957 | 0x0962..=0x0963
            | 0x0E31 | 0x0E34..=0x0E3A | 0x0E47..=0x0E4E
    )
}

/// Whether an ASCII byte ends a token.
fn ends_token(b: u8) -> bool {
    ENDS_TOKEN[usize::from(b)]
}

/// The ASCII bytes that end a token: controls, spaces, quotes, brackets,
/// `,`, `;`, `|` and `*` (a table, for the token loop).
static ENDS_TOKEN: [bool; 256] = {
    let mut ends = [false; 256];
    let mut b = 0;
    while b < 128 {
        ends[b] = b < 0x21
            || matches!(
                b as u8,
                b'"' | b'`'
                    | b'\''
                    | b','
                    | b';'
                    | b'|'
                    | b'<'
                    | b'>'
                    | b'('
                    | b')'
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b'*'
            );
        b += 1;
    }
    ends
};

/// Whether a character that is not ASCII ends a token: a space, a mark that
/// is not a letter or digit (quotes, `№`, dashes), or a character of
/// another script than Latin's.
fn ends_token_wide(c: char) -> bool {
    !c.is_alphanumeric() || is_other_script(c)
}

/// Calls `each` with the start and end of every identifier `text` holds by
/// shape and context, in order, and its strength (see [`strength`]):
/// those in its hot `words` (sorted, apart), in the word after a label or
/// a table bar, and its `runs` of code groups, each read whole (sorted;
/// see [`labelled_groups`]). Ranges `hidden` (sorted, apart) are passed
/// over.
pub(super) fn identifiers(
    text: &str,
    (words, runs): (&Ranges, &Ranges),
    hidden: &[(usize, usize)],
    mut each: impl FnMut(usize, usize, u8),
) {
    let mut hide = hidden.iter().peekable();
    // The end of a run of code groups read around a token (see
    // `run_around`): the tokens before it are in it.
    let around = std::cell::Cell::new(0);
    // (`whole`: the range is one identifier, a run of code groups.)
    let mut read = |from: usize, to: usize, whole: bool| {
        if whole {
            if !hidden.iter().any(|&(s, e)| s < to && from < e) {
                each(from, to, 2);
            }
            return;
        }
        tokens(&text[from..to], |start, end| {
            let (start, end) = (from + start, from + end);
            if start < around.get() {
                return;
            }
            while hide.peek().is_some_and(|&&(_, e)| e <= start) {
                hide.next();
            }
            if hide.peek().is_some_and(|&&(s, _)| s < end) {
                return;
            }
            let (from, to) = trimmed(text, start, end);
            // (A JSON object's key names a field, not an identifier.)
            if from >= to || text[end..].starts_with("\":") || text[end..].starts_with("\" :") {
                return;
            }
            let token = &text[from..to];
            // (Most tokens are words of prose, which no place makes an
            // identifier: passed at one look.)
            if is_word(token) {
                return;
            }
            // (A place raises a shape of three bytes or more: read only
            // when the shape alone is not enough.)
            let found = strength(token, Context::Plain).or_else(|| {
                let marked = token.len() >= 3 && context_of(text, start, end) == Context::Marked;
                marked.then(|| strength(token, Context::Marked)).flatten()
            });
            let Some(strength) = found else {
                return;
            };
            match run_around(text, from, to).filter(|&(s, e)| !hidden.iter().any(|h| h.0 < e && s < h.1)) {
                Some((s, e)) => {
                    each(s, e, 2);
                    around.set(e);
                }
                None => each(from, to, strength),
            }
        });
    };
    // Only the hot words hold an identifier, and the word after a label's
    // mark or a table's bar (`ref: QX7PLM`, `| QX7PLM |`), whose place
    // makes it one.
    let bytes = text.as_bytes();
    let next_word = |after: usize| {
        let start = after + bytes[after..].iter().take_while(|&&b| is_space(b)).count();
        let end = start + bytes[start..].iter().take_while(|&&b| !is_space(b)).count();
        (start, end)
    };
    let mut runs = runs.iter().copied().peekable();
    let mut pending: Option<usize> = None;
    // (The end of the runs read: the hot words in them are read with them.)
    let mut read_to = 0;
    for &(start, end) in words.iter().chain([&(usize::MAX, usize::MAX)]) {
        // The word after a label's mark, unless a run begins there.
        if let Some((from, to)) =
            (pending.take().map(next_word)).filter(|&(from, to)| from < start && from < to)
        {
            while let Some((s, e)) = runs.next_if(|&(s, _)| s < from) {
                read(s, e, true);
                read_to = read_to.max(e);
            }
            if runs.peek().is_none_or(|&(s, _)| s != from) && from >= read_to {
                read(from, to, false);
            }
        }
        // The runs that begin before this word ends.
        while let Some((s, e)) = runs.next_if(|&(s, _)| s < end) {
            read(s, e, true);
            read_to = read_to.max(e);
        }
        if start < read_to.max(around.get()) || start == usize::MAX {
            continue;
        }
        read(start, end, false);
        pending = asks_next(&bytes[start..end]).then_some(end);
    }
}

/// The run of two or three code groups (see [`labelled_groups`]) that
/// holds the token at `from..to`, an identifier by its shape, and a group
/// beside it, one space apart: the groups around it are its own
/// (`K1A 0B1`, `D02 X285`), unless the run would begin with a label
/// (`ID 99812`, see [`LABELS`]).
fn run_around(text: &str, from: usize, to: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    // (Most tokens have no group beside them: passed at one look.)
    let grouped = |b: u8| b.is_ascii_digit() || b.is_ascii_uppercase() || b >= 0x80;
    let beside = bytes.get(to) == Some(&b' ') && bytes.get(to + 1).is_some_and(|&b| opens_group(b))
        || from >= 2 && bytes[from - 1] == b' ' && grouped(bytes[from - 2]);
    if !beside {
        return None;
    }
    // Where the word that ends one space before `at` starts.
    let word_before = |at: usize| {
        (at >= 2 && bytes[at - 1] == b' ' && !is_space(bytes[at - 2])).then(|| {
            at - 1
                - bytes[..at - 1]
                    .iter()
                    .rev()
                    .take_while(|&&b| !is_space(b))
                    .count()
        })
    };
    let one = word_before(from);
    let group = |at: usize| {
        let word = text[at..].split([' ', '\t', '\r', '\n']).next().unwrap_or("");
        word.bytes().next().is_some_and(opens_group)
            && code_group(word.trim_end_matches([',', '.', ';', ')', '!', '?', ':'])).is_some()
    };
    let after = bytes.get(to) == Some(&b' ') && group(to + 1);
    if !after && !one.is_some_and(group) {
        return None;
    }
    let two = one.and_then(word_before);
    let label = |at: usize| {
        let word = text[at..].split(' ').next().unwrap_or("");
        LABELS.iter().any(|l| l.eq_ignore_ascii_case(word))
    };
    [two, one, Some(from)]
        .into_iter()
        .flatten()
        .filter(|&at| !label(at))
        .find_map(|at| {
            labelled_groups(text, at).filter(|&(s, e)| s <= from && to <= e && (s, e) != (from, to))
        })
}

/// Whether `token` is a plain word: ASCII letters, lowercase but maybe the
/// first, shorter than a long run that a mark would raise.
fn is_word(token: &str) -> bool {
    let bytes = token.as_bytes();
    bytes.len() < 12
        && bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes[1..].iter().all(u8::is_ascii_lowercase)
}

/// Calls `each` with the start and end of every token of `text`, in order.
fn tokens(text: &str, mut each: impl FnMut(usize, usize)) {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b < 0x80 {
            if ends_token(b) {
                at += 1;
                continue;
            }
        } else if let Some(c) = text[at..].chars().next() {
            if ends_token_wide(c) {
                at += c.len_utf8();
                continue;
            }
        }
        let start = at;
        at = token_end(text, at);
        each(start, at);
    }
}

/// Where the words of `piece` that [`Said`](super::Said) keeps are: each
/// hot word, each token inside it, and each token without the punctuation
/// around it, so that an entry that stands in the piece is one of them.
pub(super) fn word_spans(piece: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    crate::fold::hot::ledger_words(piece.as_bytes(), |start, end| {
        spans.push((start, end));
        let word = &piece[start..end];
        tokens(word, |s, e| {
            if (s, e) != (0, word.len()) {
                spans.push((start + s, start + e));
            }
            let (a, b) = trimmed(word, s, e);
            if (a, b) != (s, e) && a < b {
                spans.push((start + a, start + b));
            }
        });
    });
    spans
}

/// Where the token that starts at `at` ends: at the first byte that ends
/// one, but for an empty call's `()` (`validate()`), which it keeps.
fn token_end(text: &str, mut at: usize) -> usize {
    let bytes = text.as_bytes();
    let start = at;
    // A base after a position, as a sequence variant writes them
    // (`c.215C>G`, `r.76a>u`).
    let base = |b: Option<&u8>| b.is_some_and(|b| b"ACGTUacgtu".contains(b));
    while at < bytes.len() {
        let b = bytes[at];
        if b < 0x80 {
            if b == b'(' && bytes.get(at + 1) == Some(&b')') {
                at += 2;
                continue;
            }
            if b == b'>'
                && at >= start + 2
                && base(bytes.get(at - 1))
                && bytes[at - 2].is_ascii_digit()
                && base(bytes.get(at + 1))
            {
                at += 2;
                continue;
            }
            if ends_token(b) {
                break;
            }
            at += 1;
        } else {
            match text[at..].chars().next() {
                Some(c) if !ends_token_wide(c) => at += c.len_utf8(),
                _ => break,
            }
        }
    }
    at
}

/// The token `text[start..end]` without the punctuation that ends a
/// sentence after it or opens one before it.
fn trimmed(text: &str, start: usize, end: usize) -> (usize, usize) {
    let token = &text[start..end];
    let lead = token.len()
        - token
            .trim_start_matches([':', ';', '!', '?', '.', '-', '=', '~'])
            .len();
    // A leading `.` names a dot file (`.env`), `~` a home (`~/src`).
    let lead = if token[lead.saturating_sub(1)..].starts_with(['.', '~']) && lead > 0 {
        lead - 1
    } else {
        lead
    };
    let rest = &token[lead..];
    // (A trailing `=` is base64's padding, part of the token.)
    let kept = rest.trim_end_matches(['.', ':', ';', '!', '?', '-', '/']).len();
    // A path's closing `/` is part of it.
    let kept =
        if rest[..kept].contains('/') && rest[kept..].starts_with('/') && !rest[kept..].starts_with("//") {
            kept + 1
        } else {
            kept
        };
    (start + lead, start + lead + kept)
}

/// Whether the token at `text[start..end]` stands in a marked place: in
/// backticks or typographic quotes, alone in a table cell, or after a
/// label word and `:`, `#` or `No.`.
fn context_of(text: &str, start: usize, end: usize) -> Context {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    let quoted = match before {
        Some('`') => after == Some('`'),
        Some('„' | '“' | '”' | '«' | '»' | '‹' | '›' | '「' | '『' | '‘' | '‚') => true,
        _ => false,
    };
    let bar_before = text[..start].trim_end_matches([' ', '\t']).ends_with('|');
    let bar_after = text[end..].trim_start_matches([' ', '\t']).starts_with('|');
    if quoted || (bar_before && bar_after) || labelled(&text[..start]) {
        Context::Marked
    } else {
        Context::Plain
    }
}

/// Whether `before` ends with a label: a word that names an identifier
/// (`ID`, `ref`, `order`, `ticket` ...; see [`LABELS`]) and `:`, `#`,
/// `No.` or `№`, maybe with spaces.
fn labelled(before: &str) -> bool {
    let rest = before.trim_end_matches([' ', '\t', '\u{a0}']);
    let Some(rest) = rest
        .strip_suffix(':')
        .or_else(|| rest.strip_suffix('#'))
        .or_else(|| rest.strip_suffix('：'))
        .or_else(|| rest.strip_suffix('№'))
        .or_else(|| rest.strip_suffix("No."))
        .or_else(|| rest.strip_suffix("no."))
    else {
        return false;
    };
    let rest = rest.trim_end_matches([' ', '\t']);
    let word_start = rest
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_alphanumeric() && !is_other_script(c) || c == '_' || c == '-')
        .last()
        .map_or(rest.len(), |(i, _)| i);
    let word = rest[word_start..].to_ascii_lowercase();
    let last = word.rsplit(['_', '-']).next().unwrap_or("");
    !word.is_empty() && (LABELS.contains(&word.as_str()) || LABELS.contains(&last) || word.ends_with("id"))
        || rest.ends_with(|c: char| is_cjk(c))
}

/// How strongly `token`'s shape says it is an identifier: 2 for a shape
/// rare in prose, 1 for a weaker one, `None` for prose (or a secret, or a
/// structural id, which are never entries).
pub(super) fn strength(token: &str, context: Context) -> Option<u8> {
    let bytes = token.as_bytes();
    if !(2..=300).contains(&bytes.len()) || is_secret(token) || is_structural(token) {
        return None;
    }
    // A what3words address: `///` and three words joined by dots.
    if let Some(words) = token.strip_prefix("///") {
        let mut parts = words.split('.');
        let word = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.chars().all(char::is_alphabetic));
        return (word(parts.next()) && word(parts.next()) && word(parts.next()) && parts.next().is_none())
            .then_some(2);
    }
    let call = token.strip_suffix("()");
    let core = call.unwrap_or(token);
    let mut digits = 0;
    let (mut letters, mut upper, mut inner_upper) = (0usize, 0usize, 0usize);
    let mut marks = 0;
    let mut prev_lower = false;
    for c in core.chars() {
        if c.is_ascii_digit() {
            digits += 1;
            prev_lower = false;
        } else if c.is_alphabetic() {
            letters += 1;
            if c.is_uppercase() {
                upper += 1;
                inner_upper += usize::from(prev_lower);
            }
            prev_lower = c.is_lowercase();
        } else {
            marks += 1;
            prev_lower = false;
        }
    }
    if letters + digits == 0 {
        return None;
    }
    if call.is_some() {
        // A call: `validatePaymentBatch()`, `np.mean()`.
        return (core.len() >= 3
            && core
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.:$".contains(&b)))
        .then_some(2);
    }
    let marked = context == Context::Marked;
    let first = bytes[0];
    // A sigil and a name: `#482913`, `#inc-4471`, `@jdoe`, `$HOME`, `^4.17.21`.
    if b"#@$^+".contains(&first) {
        let rest = &token[1..];
        let ok = rest.len() >= 3
            && rest.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && (digits >= 3 || letters >= 3 && first != b'+' && first != b'^');
        return ok.then_some(if digits > 0 || marks > 1 { 2 } else { 1 });
    }
    if letters == 0 {
        return digit_shape(core, digits, marked);
    }
    if digits > 0 {
        return mixed_shape(core, digits, letters, marks, marked);
    }
    letter_shape(core, letters, upper, inner_upper, marks, marked)
}

/// A token of digits and marks only.
fn digit_shape(token: &str, digits: usize, marked: bool) -> Option<u8> {
    let groups = token
        .split(|c: char| !c.is_ascii_digit())
        .filter(|g| !g.is_empty())
        .count();
    if groups == 1 {
        if token.len() != digits {
            // `10%`, `5x`: a quantity.
            return None;
        }
        // Six digits or more that are not a round number (or three, marked).
        let round = token.ends_with("000");
        return ((digits >= 6 && !round) || (marked && digits >= 3)).then_some(1);
    }
    let seps: Vec<char> = token.chars().filter(|c| !c.is_ascii_digit()).collect();
    let only = |c: char| seps.iter().all(|&s| s == c);
    let small_groups = token.split(|c: char| !c.is_ascii_digit()).all(|g| g.len() <= 2);
    if only(':') || (seps.contains(&':') && small_groups) {
        // A time of day, or a range of them (`09:00-18:00`).
        return None;
    }
    let enough = if groups >= 3 { 5 } else { 7 };
    (digits >= enough || (marked && digits >= 4)).then_some(if groups >= 3 { 2 } else { 1 })
}

/// A token with letters and digits.
fn mixed_shape(token: &str, digits: usize, letters: usize, marks: usize, marked: bool) -> Option<u8> {
    // A hash or a hex id: seven hex digits or more, letters among them.
    if token.len() >= 7 && token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Some(2);
    }
    // A product and its major version (`Mozilla/5`, `HTTP/2`): a name.
    if let Some((name, version)) = token.split_once('/') {
        let short =
            (1..=4).contains(&version.len()) && version.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if short && name.bytes().all(|b| b.is_ascii_alphabetic()) {
            return None;
        }
    }
    let run_like = token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if run_like {
        let run = token.trim_matches(['-', '_']).as_bytes();
        if is_measure(run) || is_standard(run) || is_typed(run) {
            return None;
        }
        if run.len() <= 9 && NOT_CODES.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(run)) {
            return None;
        }
        // A name with a small number: `GPT-4`, `COVID-19`, `Win64`, `MP3`.
        let number_at_end = token.trim_end_matches(|c: char| c.is_ascii_digit());
        let small_number = digits <= 2 && number_at_end.len() + digits == token.len();
        if small_number && token.len() <= 8 && !marked {
            return None;
        }
    }
    let long = token.len() >= 6;
    if digits >= 3 || (long && (digits >= 2 || marks > 0)) || (marked && token.len() >= 3) {
        return Some(if digits >= 3 || marks > 0 || token.len() >= 10 {
            2
        } else {
            1
        });
    }
    // Letters and a digit or two, no structure: `k8s`, `v2`, `b2b`.
    (letters + digits >= 8).then_some(1)
}

/// A token of letters and marks, no digit.
fn letter_shape(
    token: &str,
    letters: usize,
    upper: usize,
    inner_upper: usize,
    marks: usize,
    marked: bool,
) -> Option<u8> {
    if marks == 0 {
        // Two inner capitals (`validatePaymentBatch`, `PaymentBatchValidator`),
        // a long mixed-case run (a base64 cursor), or, marked, any capital
        // inside or a code of capitals (`QXPLMA`).
        let mixed = upper >= 2 && letters > upper;
        if inner_upper >= 2 || (token.len() >= 16 && mixed && inner_upper >= 3) {
            return Some(2);
        }
        let caps = upper == letters && letters >= 4;
        return (marked && (inner_upper >= 1 || caps || token.len() >= 12)).then_some(1);
    }
    let has = |c: char| token.contains(c);
    let parts = |sep: char| token.split(sep).filter(|p| !p.is_empty()).count();
    if has('@') && !token.starts_with('@') && parts('@') == 2 {
        return Some(2);
    }
    if has('_') && token.trim_matches('_').contains('_') || has('\\') {
        // `search_store`, `PAYMENT_API_TIMEOUT`, `C:\deploy\app`.
        return Some(if upper == letters || has('.') || has('/') {
            2
        } else {
            1
        });
    }
    if has('/') {
        return path_shape(token, marked);
    }
    if has(':') {
        // `std::fs::File`, `redis:latest`, `session:user`.
        let named = token.split(':').filter(|p| p.len() >= 2).count() >= 2;
        return (named && letters >= 5).then_some(if parts(':') >= 3 { 2 } else { 1 });
    }
    if has('.') {
        let all: Vec<&str> = token.split('.').collect();
        if all.iter().any(|p| p.is_empty()) {
            return None;
        }
        let long_parts = all.iter().filter(|p| p.len() >= 2).count();
        if all.len() >= 3 && long_parts >= 2 {
            // `pkg.module.ClassName`, `api.example.com`.
            return Some(2);
        }
        let last = all[all.len() - 1];
        let file_like = (2..=5).contains(&last.len()) && last.bytes().all(|b| b.is_ascii_lowercase());
        return (all.len() == 2 && all[0].len() >= 2 && (file_like || marked || inner_upper > 0))
            .then_some(1);
    }
    if has('-') {
        // Kebab case of three parts, no function word (`payments-api-gateway`,
        // not `state-of-the-art`); marked, two.
        let all: Vec<&str> = token.split('-').collect();
        let plain = all
            .iter()
            .any(|p| PREFIX_WORDS.contains(&p.to_ascii_lowercase().as_str()));
        return ((all.len() >= 3 && !plain && all.iter().all(|p| !p.is_empty()))
            || (marked && all.len() >= 2))
            .then_some(1);
    }
    None
}

/// A path of letters: absolute (`/etc/nginx`, `~/src`) or relative of three
/// parts (`src/components/Button`), or of two with a mark in one
/// (`deploy/orders-api`, `America/Los_Angeles`).
fn path_shape(token: &str, marked: bool) -> Option<u8> {
    let parts: Vec<&str> = token.split('/').filter(|p| !p.is_empty()).collect();
    let wordy = parts
        .iter()
        .any(|p| p.chars().filter(|c| c.is_alphabetic()).count() >= 2);
    if !wordy {
        return None;
    }
    if token.starts_with('/') || token.starts_with("~/") {
        let long = parts.iter().any(|p| p.len() >= 3);
        return (long && !token.starts_with("//")).then_some(if parts.len() >= 2 { 2 } else { 1 });
    }
    if parts.len() >= 3 {
        return Some(2);
    }
    let marked_part = parts.iter().any(|p| p.contains(['.', '_', '-', '@', ':']));
    (parts.len() == 2 && (marked_part || marked)).then_some(1)
}

/// Whether `token` looks like a service's secret key: one of [`SECRETS`]'
/// beginnings and 16 bytes or more (AWS's access keys and Google's API
/// keys in their exact shapes). It is never copied, nor anything inside it.
pub(super) fn is_secret(token: &str) -> bool {
    let run = token.as_bytes();
    if run.len() < 16 || !b"srghxnpAw".contains(&run[0]) {
        return false;
    }
    let upper = |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    SECRETS.iter().any(|p| match run.strip_prefix(p.as_bytes()) {
        None => false,
        Some(rest) if *p == "AKIA" || *p == "ASIA" => rest.len() == 16 && rest.iter().all(upper),
        Some(rest) if *p == "AIza" => rest.len() == 35,
        Some(rest) => rest
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_'),
    })
}

/// Whether `token` is a structural id: a tool call's or a message's id
/// as an API writes it (`call_…`, `toolu_…`), meaningless once its call is
/// folded.
pub(super) fn is_structural(token: &str) -> bool {
    STRUCTURAL.iter().any(|p| {
        token.strip_prefix(p).is_some_and(|rest| {
            rest.len() >= 8
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
    })
}

/// Whether `run` (ASCII letters, digits, `-` and `_`) is a quantity: a
/// number and its unit or word (`1500ms`, `64-bit`, `5-minute`), or
/// numbers and short lowercase units in turn (`1920x1080`, `1h30m0s`,
/// `0x7fff`).
fn is_measure(run: &[u8]) -> bool {
    if let Some(hex) = run.strip_prefix(b"0x") {
        if hex.len() <= 8 && hex.iter().all(u8::is_ascii_hexdigit) {
            return true;
        }
    }
    let digits = run.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return false;
    }
    let rest = &run[digits..];
    let word = rest
        .strip_prefix(b"-")
        .or_else(|| rest.strip_prefix(b"_"))
        .unwrap_or(rest);
    if word.len() <= 8 && word.iter().all(u8::is_ascii_alphabetic) {
        return true;
    }
    let mut at = digits;
    while at < run.len() {
        let letters = run[at..].iter().take_while(|b| b.is_ascii_lowercase()).count();
        let digits = run[at + letters..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if !(1..=2).contains(&letters) || (digits == 0 && at + letters < run.len()) {
            return false;
        }
        at += letters + digits;
    }
    true
}

/// Whether `run` is a standard's name and number: one of [`STANDARDS`],
/// then digits, `-` and `_` only (`SHA-256`, `ISO-8601`, `UTF-8`).
fn is_standard(run: &[u8]) -> bool {
    let letters = run.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    let named = STANDARDS
        .iter()
        .any(|s| s.as_bytes().eq_ignore_ascii_case(&run[..letters]));
    named
        && run[letters..]
            .iter()
            .all(|&b| b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Whether every number in `run` is a bit width after a letter: a type
/// or an algorithm (`uint32_t`, `AtomicU64`, `sha256`, `base64`), not a
/// code (`db-16` and `conn_256aaa` are).
fn is_typed(run: &[u8]) -> bool {
    let mut at = 0;
    while at < run.len() {
        if !run[at].is_ascii_digit() {
            at += 1;
            continue;
        }
        let digits = run[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        let number = &run[at..at + digits];
        let width = [&b"8"[..], b"16", b"32", b"64", b"128", b"256", b"512"].contains(&number);
        let lettered = at > 0 && run[at - 1].is_ascii_alphabetic();
        if !(width && lettered) {
            return false;
        }
        at += digits;
    }
    true
}
