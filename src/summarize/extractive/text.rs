//! Reading text: windows, openings, sentences, clipping, lower case, and what names something exact.

use std::borrow::Cow;

use super::{SENTENCES, WINDOW};

/// A line's speaker and what it says, when it names one: lines of what
/// people said are written `role: what was said`.
pub(super) fn speech(line: &str) -> Option<(&str, &str)> {
    line.split_once(": ")
}

/// What a line says, less its speaker (see [`speech`]).
pub(super) fn spoken(line: &str) -> &str {
    speech(line).map_or(line, |(_, said)| said)
}

/// The first `WINDOW` bytes of `text`, at a character boundary.
pub(super) fn window(text: &str) -> &str {
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
pub(super) const LINE_MIN_CHARS: usize = 60;

/// The opening of `text`: its first sentences (or lines), joined by spaces,
/// until they reach [`LINE_MIN_CHARS`].
pub(super) fn opening(text: &str) -> String {
    let said: Vec<&str> = sentences(window(text)).take(SENTENCES).collect();
    opening_of(&said)
}

/// The opening of the sentences `said`.
pub(super) fn opening_of(said: &[&str]) -> String {
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

/// Whether `s` names something exact: a word that holds a digit, or
/// letters or digits on both sides of `.`, `/`, `#`, `_`, `:` or `@`
/// (`production.toml`, `ops-config#812`, `v2`), or a name in backticks.
pub(super) fn exact(s: &str) -> bool {
    s.contains('`')
        || s.split_whitespace().any(|word| {
            let word = word.trim_matches(|c: char| !c.is_alphanumeric());
            let bytes = word.as_bytes();
            bytes.iter().any(u8::is_ascii_digit)
                || bytes.windows(3).any(|w| {
                    w[0].is_ascii_alphanumeric() && b"./#_:@".contains(&w[1]) && w[2].is_ascii_alphanumeric()
                })
        })
}

/// `s` lower-cased (what `str::to_lowercase` gives): `s` itself when it
/// is already, byte by byte when it is ASCII.
pub(super) fn lower(s: &str) -> Cow<'_, str> {
    match s.is_ascii() {
        true if !s.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Borrowed(s),
        true => Cow::Owned(s.to_ascii_lowercase()),
        false => Cow::Owned(s.to_lowercase()),
    }
}

/// The sentences of `text`: ended by `.`, `!` or `?` before white space, by
/// `。`, `！` or `？`, or by a line break; trimmed, empty ones skipped.
pub(super) fn sentences(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            if rest.trim().is_empty() {
                return None;
            }
            let end = sentence_end(rest);
            let sentence = rest[..end].trim();
            rest = &rest[end..];
            if !sentence.is_empty() {
                return Some(sentence);
            }
        }
    })
}

/// Where the first sentence of `text` ends (see [`sentences`]), just after
/// what ends it; the text's length when nothing does. The bytes that may
/// end one (`.`, `!`, `?`, a line break, and the first bytes of `。`, `！`
/// and `？`) are found a byte at a time, and only they are looked at
/// closer: none of them is part of another character.
fn sentence_end(text: &str) -> usize {
    static MAY_END: [bool; 256] = {
        let mut may = [false; 256];
        may[b'.' as usize] = true;
        may[b'!' as usize] = true;
        may[b'?' as usize] = true;
        may[b'\n' as usize] = true;
        // `。` is E3 80 82, `！` EF BC 81, `？` EF BC 9F.
        may[0xE3] = true;
        may[0xEF] = true;
        may
    };
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(i) = bytes[at..].iter().position(|&b| MAY_END[usize::from(b)]) {
        let i = at + i;
        let ends = match bytes[i] {
            b'\n' => Some(i + 1),
            b'.' | b'!' | b'?' => text[i + 1..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
                .then_some(i + 1),
            _ => ["。", "！", "？"]
                .iter()
                .any(|e| text[i..].starts_with(e))
                .then_some(i + 3),
        };
        if let Some(end) = ends {
            return end;
        }
        at = i + 1;
    }
    text.len()
}

/// `text` cut to about `max` characters (at a word's end when one is near),
/// with an ellipsis when cut.
pub(super) fn clip(text: &str, max: usize) -> Cow<'_, str> {
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
mod tests;
