//! The hot-word scanner: the words of a text that may hold an identifier,
//! found without reading prose byte by byte. The ledger reads only these
//! words; the built-in summarizer uses them to find the names a line says.

/// Whether `b` may make its word a name's (the built-in summarizer's
/// marks): a digit, `.`, `/`, `:` (these four one range), `@` or `\\`.
pub(crate) const fn is_mark(b: u8) -> bool {
    (b.wrapping_sub(b'.') <= b':' - b'.') | (b == b'@') | (b == b'\\')
}

/// Whether `b`, followed by `next`, makes its word hot for the summarizer:
/// a mark, but a `.` only when a letter or digit follows (not the end of a
/// sentence).
const fn mark_hot(b: u8, next: u8) -> bool {
    is_mark(b) & ((b != b'.') | next.is_ascii_alphanumeric())
}

/// Whether `b`, followed by `next`, makes its word hot for the ledger: a
/// summarizer's mark, or what else an identifier's shape or context may
/// hold (`_`, `#`, `$`, a backtick, a table's `|`, a lowercase letter
/// before a capital), and the lead bytes of typographic quotes and CJK
/// punctuation (`„…“`, `«…»`, `「…」`), which mark what they hold.
const fn ledger_hot(b: u8, next: u8) -> bool {
    mark_hot(b, next)
        | (b == 0xE2)
        | (b == 0xC2)
        | (b == 0xE3)
        | (b == b'_')
        | (b == b'#')
        | (b == b'$')
        | (b == b'`')
        | (b == b'|')
        | (b.is_ascii_lowercase() & next.is_ascii_uppercase())
}

/// Whether the word after `word` is read with it: `word` ends with a
/// label's mark (`ref:`, `#`, `No.`, `№`, a fullwidth colon) or a table's
/// bar, after which a value stands whose place makes it an identifier.
pub(crate) fn asks_next(word: &[u8]) -> bool {
    [&b":"[..], b"#", b"|", b"No.", "№".as_bytes(), "：".as_bytes()]
        .iter()
        .any(|m| word.ends_with(m))
}

/// Letter groups that measure, date or time the number beside them (`300
/// GB`, `1066 AD`, `1030 UTC`): a run of code groups with one is a
/// quantity, not an identifier.
const UNITS: &[&str] = &[
    "AD", "BC", "BCE", "CE", "AM", "PM", "UTC", "GMT", "CET", "EET", "EST", "EDT", "CST", "CDT", "MST",
    "MDT", "PST", "PDT", "JST", "KST", "IST", "KB", "MB", "GB", "TB", "PB", "KM", "KG", "MG", "ML", "CM",
    "MM", "HP", "KW", "MW", "GW", "KWH", "MPH", "KPH", "RPM", "FPS", "DPI", "PPI", "HZ", "MHZ", "GHZ", "OK",
    "PCS", "QTY",
];

/// The run of two or three code groups that follows a label's mark at
/// `at` (`Postcode: 1012 AB`, `plate: 123가 4567`), as one identifier: its
/// start and end, when the groups hold a digit and a letter between them,
/// five to sixteen characters in all, and no unit (see [`UNITS`]). A group
/// is one to eight letters and digits: digits alone, one to three
/// capitals, or digits with letters of any script; the run ends at the
/// first word that is none of these, or after a group that ends a clause
/// (`,` `.` `;` `)`). (An amount, `500 EUR`, is the rule table's money
/// row, which hides what it matches.)
pub(crate) fn labelled_groups(text: &str, at: usize) -> Option<(usize, usize)> {
    code_groups(text, at, None)
}

/// [`labelled_groups`] from `at`; with a `closer`, the run must end right
/// before it (`„1012 AB“`), and a group ends there.
fn code_groups(text: &str, at: usize, closer: Option<char>) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let start = at
        + bytes[at..]
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
    let (mut end, mut groups, mut chars) = (start, 0, 0);
    let (mut digit, mut letter) = (false, false);
    let mut at = start;
    while groups < 3 {
        let word = &text[at..];
        let len = word
            .find(|c| matches!(c, ' ' | '\t' | '\r' | '\n') || Some(c) == closer)
            .unwrap_or(word.len());
        let closed = closer.is_some_and(|c| word[len..].starts_with(c));
        let closes = closed || closer.is_none() && word[..len].ends_with([',', '.', ';', ')']);
        let group = match closer {
            Some(_) => &word[..len],
            None => word[..len].trim_end_matches([',', '.', ';', ')']),
        };
        let Some(count) = code_group(group) else {
            break;
        };
        let digits = group.bytes().all(|b| b.is_ascii_digit());
        if group.len() <= 4 && group.bytes().all(|b| b.is_ascii_uppercase()) && UNITS.contains(&group) {
            return None;
        }
        groups += 1;
        chars += count;
        digit |= group.bytes().any(|b| b.is_ascii_digit());
        letter |= !digits;
        end = at + group.len();
        if closes || !word[len..].starts_with(' ') || word[len + 1..].starts_with(' ') {
            break;
        }
        at += len + 1;
    }
    let closed = closer.is_none_or(|c| text[end..].starts_with(c));
    (groups >= 2 && digit && letter && closed && (5..=16).contains(&chars)).then_some((start, end))
}

/// Whether a code group may begin with `b`: a digit, a capital, or the
/// first byte of a letter of another script.
pub(crate) fn opens_group(b: u8) -> bool {
    b.is_ascii_digit() || b.is_ascii_uppercase() || b >= 0xC0
}

/// The characters of `group` when it is a code group: one to eight
/// letters and digits, digits alone, one to three capitals, or digits with
/// letters of any script.
pub(crate) fn code_group(group: &str) -> Option<usize> {
    let count = group.chars().count();
    let digits = group.bytes().all(|b| b.is_ascii_digit());
    let capitals = group.bytes().all(|b| b.is_ascii_uppercase());
    let mixed = group
        .chars()
        .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase() || (!c.is_ascii() && c.is_alphabetic()))
        && group.bytes().any(|b| b.is_ascii_digit());
    ((1..=8).contains(&count) && (digits || mixed || (capitals && count <= 3))).then_some(count)
}

/// The run of code groups a quote, backtick or bracket in the word at
/// `start..end` opens and closes, whole (`„1012 AB“`, `` `3511 LX` ``,
/// `(123가 4567)`, `「34나 5678」`): what they hold is one thing.
fn quoted_groups(text: &str, start: usize, end: usize) -> Option<(usize, usize)> {
    const PAIRS: [(char, char); 8] = [
        ('`', '`'),
        ('„', '“'),
        ('“', '”'),
        ('«', '»'),
        ('「', '」'),
        ('『', '』'),
        ('(', ')'),
        ('[', ']'),
    ];
    // (The openers' first bytes, to pass most words at one look.)
    let lead = text.as_bytes()[start..end]
        .iter()
        .position(|b| matches!(b, b'`' | b'(' | b'[' | 0xC2 | 0xE2 | 0xE3))?;
    let (at, open, close) = text[start + lead..end].char_indices().find_map(|(i, c)| {
        PAIRS
            .iter()
            .find(|p| p.0 == c)
            .map(|&(o, cl)| (start + lead + i, o, cl))
    })?;
    let inside = at + open.len_utf8();
    if !text.as_bytes().get(inside).is_some_and(|&b| opens_group(b)) {
        return None;
    }
    code_groups(text, inside, Some(close)).filter(|&(from, _)| from == inside)
}

/// The run of code groups a prose label states, when the word before
/// `first` (or before a group of capitals there) is `is`, `was`, `are` or
/// `=` (`my postcode is 3511 LX`, `the flight is BA 2490`), and the run
/// holds `first`.
fn stated_groups(text: &str, first: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    if first < 2 || bytes[first - 1] != b' ' {
        return None;
    }
    let (mut from, mut to) = word_before(bytes, first);
    let capitals = |w: &[u8]| (1..=3).contains(&w.len()) && w.iter().all(u8::is_ascii_uppercase);
    if capitals(&bytes[from..to]) {
        (from, to) = word_before(bytes, from);
    }
    let says = ["is", "was", "are", "="]
        .iter()
        .any(|w| bytes[from..to].eq_ignore_ascii_case(w.as_bytes()));
    (says && from < to)
        .then(|| labelled_groups(text, to))
        .flatten()
        .filter(|&(start, end)| start <= first && first < end)
}

/// Where the word before `at` starts and ends (the spaces between passed
/// over).
fn word_before(bytes: &[u8], at: usize) -> (usize, usize) {
    let gap = bytes[..at].iter().rev().take_while(|&&b| is_space(b)).count();
    let word = bytes[..at - gap]
        .iter()
        .rev()
        .take_while(|&&b| !is_space(b))
        .count();
    (at - gap - word, at - gap)
}

/// Ranges of a text (start and end of each), sorted: its hot words, its
/// runs of code groups.
pub(crate) type Ranges = [(usize, usize)];

/// The spaces that end a word.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// A hot-byte test (given the byte and the next one), written twice: as
/// comparisons, which the compiler vectorizes over a block, and as a
/// table, which finds the byte in a block one byte at a time in a few
/// instructions. Both tests read the next byte only as a letter or digit,
/// a capital, or neither, so the table holds a byte's answer for each.
trait Hot {
    fn test(b: u8, next: u8) -> bool;

    /// Bit `n` of a byte's row: its answer before a byte of [`NEXT`] `n`.
    const TABLE: [u8; 256];

    /// The test, read from the table.
    fn looked_up(b: u8, next: u8) -> bool {
        Self::TABLE[usize::from(b)] >> NEXT[usize::from(next)] & 1 == 1
    }

    /// The position of the first hot byte at or after `from`. Blocks
    /// without one are skipped whole; in the block with one, the table
    /// finds it.
    fn next(bytes: &[u8], from: usize) -> Option<usize> {
        let mut at = from;
        while let Some(block) = (bytes.get(at..at + 33)).and_then(|b| <&[u8; 33]>::try_from(b).ok()) {
            if (0..32).fold(false, |any, i| any | Self::test(block[i], block[i + 1])) {
                break;
            }
            at += 32;
        }
        (at..bytes.len()).find(|&i| Self::looked_up(bytes[i], bytes.get(i + 1).copied().unwrap_or(b' ')))
    }
}

/// A next byte's column in [`Hot::TABLE`]: 1 for a lowercase letter or a
/// digit, 2 for a capital, 0 for anything else.
const NEXT: [u8; 256] = {
    let mut next = [0; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        next[b] = if c.is_ascii_uppercase() {
            2
        } else if c.is_ascii_alphanumeric() {
            1
        } else {
            0
        };
        b += 1;
    }
    next
};

/// The table of a test (a `const fn` cannot call a pointer to one).
macro_rules! hot_table {
    ($test:path) => {{
        let mut table = [0u8; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            table[b] = ($test(c, b' ') as u8) | ($test(c, b'a') as u8) << 1 | ($test(c, b'A') as u8) << 2;
            b += 1;
        }
        table
    }};
}

/// The summarizer's test, [`mark_hot`].
struct Mark;

impl Hot for Mark {
    fn test(b: u8, next: u8) -> bool {
        mark_hot(b, next)
    }

    const TABLE: [u8; 256] = hot_table!(mark_hot);
}

/// The ledger's test, [`ledger_hot`].
struct Ledger;

impl Hot for Ledger {
    fn test(b: u8, next: u8) -> bool {
        ledger_hot(b, next)
    }

    const TABLE: [u8; 256] = hot_table!(ledger_hot);
}

/// Calls `found` with the start and end of each word (split at ASCII
/// space, tab, CR and LF) of `bytes` that `hot` makes hot, in order.
fn hot_words_by<H: Hot>(bytes: &[u8], mut found: impl FnMut(usize, usize)) {
    let mut from = 0;
    while let Some(at) = H::next(bytes, from) {
        // Each word is measured once, when its first such byte is met.
        let start = bytes[..at]
            .iter()
            .rposition(|&b| is_space(b))
            .map_or(0, |i| i + 1);
        let end = bytes[at..]
            .iter()
            .position(|&b| is_space(b))
            .map_or(bytes.len(), |i| at + i);
        found(start, end);
        from = end;
    }
}

/// The summarizer's hot words of `bytes` (see [`is_mark`]).
pub(crate) fn hot_words(bytes: &[u8], found: impl FnMut(usize, usize)) {
    hot_words_by::<Mark>(bytes, found);
}

/// The ledger's hot words of `bytes` (see [`ledger_hot`]).
pub(crate) fn ledger_words(bytes: &[u8], found: impl FnMut(usize, usize)) {
    hot_words_by::<Ledger>(bytes, found);
}

/// Whether `text` holds a ledger's hot word.
pub(crate) fn has_ledger_word(text: &str) -> bool {
    Ledger::next(text.as_bytes(), 0).is_some()
}

/// Spans of [`ledger_spans`] closer than this are read as one (one search
/// costs more than reading a few words).
const SPAN_GAP: usize = 48;

/// Calls `found` with each span of `text` that may hold an identifier, in
/// order, the hot words in it and the runs of code groups in it to read
/// whole (where in `text` each is, sorted): the ledger's hot words, those
/// less than [`SPAN_GAP`] bytes apart read as one (a phone number's or an
/// IBAN's groups, a user agent). A span starts and ends beside whitespace;
/// it takes the word of capitals before it (a currency's or an owner's
/// code: `USD 12,500.00`, `CAIU 864905 0`), a code group after it, and
/// the runs of code groups that a label's mark, quotes or
/// brackets, or a prose label (`is`) make one identifier (see
/// [`labelled_groups`]).
pub(crate) fn ledger_spans(text: &str, mut found: impl FnMut(usize, usize, &Ranges, &Ranges)) {
    // A span is read with the words around it when it ends on a label's
    // mark (`Booking ref: QX7PLM`, `ticket # QX7PLM`).
    let bytes = text.as_bytes();
    let word_before = |at: usize| word_before(bytes, at);
    // The hot words of the span being built, and its runs of code groups.
    let mut words: Vec<(usize, usize)> = Vec::new();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut found = |first: usize, last: usize, words: &[(usize, usize)]| {
        let span = &bytes[first..last];
        let (first, last) = match asks_next(span) {
            true => {
                let gap = bytes[last..].iter().take_while(|&&b| is_space(b)).count();
                let word = bytes[last + gap..].iter().take_while(|&&b| !is_space(b)).count();
                (
                    word_before(first).0,
                    if word > 0 { last + gap + word } else { last },
                )
            }
            false => (first, last),
        };
        // Runs of code groups read whole: after a label's mark in it
        // (`Postcode: 1012 AB`), inside quotes or brackets, or stated
        // (`my postcode is 3511 LX`).
        runs.clear();
        runs.extend(
            (words.iter())
                .filter(|&&(start, end)| asks_next(&bytes[start..end]))
                .filter_map(|&(_, end)| labelled_groups(text, end)),
        );
        runs.extend(
            words
                .iter()
                .filter_map(|&(start, end)| quoted_groups(text, start, end)),
        );
        runs.extend(stated_groups(text, first));
        runs.sort_unstable();
        runs.dedup();
        let last = runs.iter().fold(last, |last, &(_, end)| last.max(end));
        let first = runs.iter().fold(first, |first, &(start, _)| first.min(start));
        // (After a change of script, the capitals that end the word:
        // `请检查GXRU 694131 6`.)
        let (word, to) = word_before(first);
        let capitals = bytes[word..to]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_uppercase())
            .count();
        let from = to - capitals;
        let opens = matches!(bytes[word..from], [] | [b'(']) || bytes[from - 1] >= 0x80;
        let code = (2..=5).contains(&capitals) && opens;
        // A code group after it, one space apart, may close a spaced code
        // (a container's check digit: `CAIU 864905 0`; `4471823 AB`).
        let next = match (bytes.get(last), bytes.get(last + 1)) {
            (Some(b' '), Some(&b)) if opens_group(b) => &text[last + 1..],
            _ => "",
        };
        let len = next.find([' ', '\t', '\r', '\n']).unwrap_or(next.len());
        let group = next[..len].trim_end_matches([',', '.', ';', ')', '!', '?', ':']);
        let closes = code_group(group).is_some();
        found(
            if code { from } else { first },
            if closes { last + 1 + group.len() } else { last },
            words,
            &runs,
        );
    };
    let mut span: Option<(usize, usize)> = None;
    ledger_words(text.as_bytes(), |start, end| {
        span = match span {
            Some((first, last)) if start <= last + SPAN_GAP => Some((first, end)),
            Some((first, last)) => {
                found(first, last, &words);
                words.clear();
                Some((start, end))
            }
            None => Some((start, end)),
        };
        words.push((start, end));
    });
    if let Some((first, last)) = span {
        found(first, last, &words);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_words_are_found_whole_and_prose_is_passed_over() {
        let text =
            "Plain prose here. Deploy build 4f9c2a1 to /srv/app now, then validatePaymentBatch and x_y.";
        let mut words = Vec::new();
        ledger_words(text.as_bytes(), |s, e| words.push(&text[s..e]));
        assert_eq!(words, ["4f9c2a1", "/srv/app", "validatePaymentBatch", "x_y."]);
        let mut marks = Vec::new();
        hot_words(text.as_bytes(), |s, e| marks.push(&text[s..e]));
        assert_eq!(marks, ["4f9c2a1", "/srv/app"]);
        assert!(!has_ledger_word("Nothing to see here. Really."));
    }

    #[test]
    fn the_tables_answer_as_the_tests_do() {
        for (b, next) in (0..=255u8).flat_map(|b| (0..=255u8).map(move |n| (b, n))) {
            assert_eq!(Mark::looked_up(b, next), mark_hot(b, next), "{b} before {next}");
            assert_eq!(
                Ledger::looked_up(b, next),
                ledger_hot(b, next),
                "{b} before {next}"
            );
        }
    }
}
