//! tiktoken's pre-splits on ASCII, without a regex: where the piece that
//! starts at a place ends, as the encoding's anchored pre-split finds it,
//! for as long as every byte that decides it is ASCII. A byte outside
//! ASCII that could (a letter, a digit, a space or a mark of some other
//! script may join a run) gives `None`, and the regex reads that piece.
//! Most text is ASCII: the regex, whose Unicode classes take a few
//! milliseconds to build, is then never built.
//!
//! On ASCII the classes are plain: `\p{L}` is `A-Za-z` (`\p{Lu}` the upper
//! case, `\p{Ll}` the lower; no `\p{Lt}`, `\p{Lm}`, `\p{Lo}` or `\p{M}`),
//! `\p{N}` is `0-9`, and `\s` is tab, line feed, vertical tab, form feed,
//! carriage return and space. A pattern's alternatives are taken in order,
//! each as a backtracking matcher would (the regex's leftmost-first
//! match); the tests compare each piece with the regex's.

/// A pre-split on ASCII: where the piece at a place of a text ends, if
/// ASCII decides it.
pub(super) type Split = fn(&[u8], usize) -> Option<usize>;

/// A byte of the text: past its end, ASCII, or outside ASCII.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    End,
    Ascii(u8),
    Wide,
}

fn at(text: &[u8], i: usize) -> At {
    match text.get(i) {
        None => At::End,
        Some(&b) if b.is_ascii() => At::Ascii(b),
        Some(_) => At::Wide,
    }
}

/// `\s` on ASCII.
fn space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// `[^\r\n\p{L}\p{N}]` on ASCII: what may come before a word.
fn before_word(b: u8) -> bool {
    !b.is_ascii_alphanumeric() && b != b'\r' && b != b'\n'
}

/// `[^\s\p{L}\p{N}]` on ASCII: punctuation, symbols, controls.
fn mark(b: u8) -> bool {
    !b.is_ascii_alphanumeric() && !space(b)
}

/// The end of the run of bytes from `i` that `class` takes, or `None`
/// when a byte outside ASCII stops it (it might take that one too).
fn run(text: &[u8], mut i: usize, class: impl Fn(u8) -> bool) -> Option<usize> {
    loop {
        match at(text, i) {
            At::Ascii(b) if class(b) => i += 1,
            At::Wide => return None,
            _ => return Some(i),
        }
    }
}

/// The end of the run of ASCII bytes from `i` that `class` takes: a
/// trailing run of line breaks (or `/`), which no byte outside ASCII joins.
fn trailing(text: &[u8], i: usize, class: impl Fn(u8) -> bool) -> usize {
    i + text[i..]
        .iter()
        .take_while(|&&b| b.is_ascii() && class(b))
        .count()
}

/// Where `\s*[\r\n]+` ends in the run of spaces `text[from..to]` (after
/// its last line break), or `None` if it holds none.
fn after_last_break(text: &[u8], from: usize, to: usize) -> Option<usize> {
    (text[from..to].iter().rposition(|&b| b == b'\r' || b == b'\n')).map(|i| from + i + 1)
}

/// `\p{N}{1,3}` at `i` (a digit): where it ends, or `None` when a byte
/// outside ASCII (a digit of another script?) comes before the third.
fn digits(text: &[u8], i: usize) -> Option<usize> {
    let mut end = i + 1;
    while end < i + 3 {
        match at(text, end) {
            At::Ascii(b) if b.is_ascii_digit() => end += 1,
            At::Wide => return None,
            _ => break,
        }
    }
    Some(end)
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `i`: where it ends (`i` when it
/// does not match), or `None` when a byte outside ASCII decides it.
fn contraction(text: &[u8], i: usize) -> Option<usize> {
    if at(text, i) != At::Ascii(b'\'') {
        return Some(i);
    }
    let lower = |k: usize| match at(text, k) {
        At::Ascii(b) => Some(Some(b.to_ascii_lowercase())),
        At::End => Some(None),
        // (`ſ` is `s` to a case-insensitive match.)
        At::Wide => None,
    };
    Some(match lower(i + 1)? {
        Some(b's' | b't' | b'm' | b'd') => i + 2,
        Some(b'r' | b'v') if lower(i + 2)? == Some(b'e') => i + 3,
        Some(b'l') if lower(i + 2)? == Some(b'l') => i + 3,
        _ => i,
    })
}

/// The o200k_base piece at `i` (a place in `text`): where
/// [`O200K_SPLIT`](super::bpe::O200K_SPLIT) anchored there ends.
pub(super) fn o200k(text: &[u8], i: usize) -> Option<usize> {
    let At::Ascii(first) = at(text, i) else {
        return None;
    };
    // `[^\r\n\p{L}\p{N}]?[\p{Lu}..]*[\p{Ll}..]+(?i:'s|..)?`, then the same
    // with `[\p{Lu}..]+[\p{Ll}..]*`: a mark or space may lead a word.
    let from = if before_word(first) { i + 1 } else { i };
    let upper = run(text, from, |b| b.is_ascii_uppercase())?;
    let lower = run(text, upper, |b| b.is_ascii_lowercase())?;
    if lower > from {
        return contraction(text, lower);
    }
    // `\p{N}{1,3}`.
    if first.is_ascii_digit() {
        return digits(text, i);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`.
    let from = if first == b' ' { i + 1 } else { i };
    let marks = run(text, from, mark)?;
    if marks > from {
        return Some(trailing(text, marks, |b| matches!(b, b'\r' | b'\n' | b'/')));
    }
    // `\s*[\r\n]+`, else `\s+`.
    let spaces = run(text, i, space)?;
    Some(after_last_break(text, i, spaces).unwrap_or(spaces))
}

/// The cl100k_base piece at `i`: where
/// [`CL100K_SPLIT`](super::bpe::CL100K_SPLIT) anchored there ends.
pub(super) fn cl100k(text: &[u8], i: usize) -> Option<usize> {
    let At::Ascii(first) = at(text, i) else {
        return None;
    };
    // `'(?i:[sdmt]|ll|ve|re)`.
    if first == b'\'' {
        let end = contraction(text, i)?;
        if end > i {
            return Some(end);
        }
    }
    // `[^\r\n\p{L}\p{N}]?\p{L}+`.
    let from = if before_word(first) { i + 1 } else { i };
    let letters = run(text, from, |b| b.is_ascii_alphabetic())?;
    if letters > from {
        return Some(letters);
    }
    // `\p{N}{1,3}`.
    if first.is_ascii_digit() {
        return digits(text, i);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`.
    let from = if first == b' ' { i + 1 } else { i };
    let marks = run(text, from, mark)?;
    if marks > from {
        return Some(trailing(text, marks, |b| matches!(b, b'\r' | b'\n')));
    }
    // `\s+$`, else `\s*[\r\n]`, else `\s+`.
    let spaces = run(text, i, space)?;
    if spaces == text.len() {
        return Some(spaces);
    }
    Some(after_last_break(text, i, spaces).unwrap_or(spaces))
}

#[cfg(test)]
mod tests {
    use super::super::bpe::{CL100K_SPLIT, O200K_SPLIT};
    use super::*;
    use proptest::strategy::Strategy as _;

    /// Where `split` anchored at `i` ends in `text`, as the regex finds it.
    fn by_regex(next: &regex::Regex, text: &str, i: usize) -> Option<usize> {
        next.find(&text[i..]).map(|m| i + m.end())
    }

    /// Texts of every ASCII class the pre-splits tell apart, and of what
    /// outside ASCII might join them: letters of both cases and of other
    /// scripts, `ſ` (an `s` to a case-insensitive match), the Kelvin sign,
    /// spaces and digits of other scripts, a mark, a dash, CJK, an emoji.
    fn texts(wide: bool) -> impl proptest::strategy::Strategy<Value = String> {
        let mut pieces = vec![
            "a", "z", "A", "Z", "s", "S", "t", "l", "L", "e", "E", "v", "r", "m", "d", "D", "0", "7", "'",
            " ", "  ", "\t", "\r", "\n", "\u{b}", "\u{c}", ".", ",", "/", "//", "-", "\"", "(", ")", "!",
            "?", "_", "\u{1}", "\u{7f}", "'s", "'LL", "'re", "'Ve", "'d", "123", "4567",
        ];
        if wide {
            pieces.extend([
                "é", "É", "ſ", "\u{212a}", "\u{a0}", "\u{3000}", "\u{85}", "٣", "—", "\u{301}", "日", "😀",
                "ß",
            ]);
        }
        proptest::collection::vec(proptest::sample::select(pieces), 0..24).prop_map(|p| p.concat())
    }

    fn check(text: &str, ascii: Split, next: &regex::Regex) -> Result<(), String> {
        for i in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
            let ours = ascii(text.as_bytes(), i);
            if text.is_ascii() && ours.is_none() {
                return Err(format!("no piece at {i} of ASCII {text:?}"));
            }
            if ours.is_some_and(|end| Some(end) != by_regex(next, text, i)) {
                return Err(format!(
                    "{ours:?} at {i} of {text:?}, the regex {:?}",
                    by_regex(next, text, i)
                ));
            }
        }
        Ok(())
    }

    fn anchored(split: &str) -> regex::Regex {
        regex::Regex::new(&format!("^(?:{split})")).unwrap()
    }

    static O200K: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| anchored(O200K_SPLIT));
    static CL100K: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| anchored(CL100K_SPLIT));

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(2000))]

        #[test]
        fn o200k_pieces_are_the_regex_pieces(text in texts(true), plain in texts(false)) {
            for text in [text, plain] {
                proptest::prop_assert_eq!(check(&text, o200k, &O200K), Ok(()));
            }
        }

        #[test]
        fn cl100k_pieces_are_the_regex_pieces(text in texts(true), plain in texts(false)) {
            for text in [text, plain] {
                proptest::prop_assert_eq!(check(&text, cl100k, &CL100K), Ok(()));
            }
        }
    }
}
