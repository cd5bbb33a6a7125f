//! Reading text: windows, sentences, clipping, and the phrases that mark decisions, errors and questions.

use std::borrow::Cow;
use std::ops::ControlFlow;

use super::{QUESTION_WORDS, SENTENCES, WINDOW};
use crate::message::Role;

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

/// The first line of a tool result that names an error (trimmed), and
/// whether it opens the result (no line but blank ones before it).
pub(super) fn error_line(text: &str) -> Option<(&str, bool)> {
    (text.lines().map(str::trim).filter(|l| !l.is_empty()))
        .enumerate()
        .find(|(_, l)| is_error(l))
        .map(|(at, line)| (line, at == 0))
}

/// Words that say a tool failed.
pub(super) const ERROR_MARKERS: &[&str] = &[
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

/// Whether `text` says something failed: one of [`ERROR_MARKERS`] (not
/// inside an identifier: see [`markers`]), or an error code of capitals
/// that holds one (`PERMISSION_DENIED`, `ERR_CONNECTION_REFUSED`).
pub(super) fn is_error(text: &str) -> bool {
    static ERRORS: std::sync::OnceLock<Option<regex::RegexSet>> = std::sync::OnceLock::new();
    static CODES: std::sync::OnceLock<Option<regex::Regex>> = std::sync::OnceLock::new();
    let codes = CODES.get_or_init(|| {
        let alternatives: Vec<String> = (ERROR_MARKERS.iter())
            .map(|m| regex::escape(&m.to_uppercase().replace(' ', "_")))
            .collect();
        let code = format!(
            "(?:^|[^A-Za-z0-9_])[A-Z0-9_]*(?:{})[A-Z0-9_]*(?:[^A-Za-z0-9_]|$)",
            alternatives.join("|")
        );
        regex::Regex::new(&code).ok()
    });
    markers(ERROR_MARKERS.iter().copied(), &ERRORS).is_some_and(|set| set.is_match(&text.to_lowercase()))
        || codes.as_ref().is_some_and(|codes| codes.is_match(text))
}

/// One set of `words`, each to match at the start of a word (lower-cased
/// text): one pass over a line finds them all. Built once per process.
/// A word of an identifier is not one (`statement_timeout_ms` says no
/// time-out, `error_rate` and `errors_total` no error): no `_` joins the
/// word that holds a match to the text around it.
pub(super) fn markers<'w>(
    words: impl Iterator<Item = &'w str>,
    cell: &'static std::sync::OnceLock<Option<regex::RegexSet>>,
) -> Option<&'static regex::RegexSet> {
    cell.get_or_init(|| {
        let pattern = |w: &str| {
            // (A marker that ends a word, `lets ` or `plan:`, ends it there.)
            let rest = match w.ends_with(|c: char| c.is_alphanumeric()) {
                true => "[[:alnum:]]*(?:[^[:alnum:]_]|$)",
                false => "",
            };
            format!(r"(?:^|[^[:alnum:]_]){}{rest}", regex::escape(w))
        };
        regex::RegexSet::new(words.map(pattern)).ok()
    })
    .as_ref()
}

/// Phrases that decide or conclude, and how strongly.
pub(super) const DECISION_MARKERS: &[(&str, i32)] = &[
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
pub(super) const IMPERATIVES: &[&str] = &[
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
pub(super) fn decision(s: &str, role: &Role) -> Option<i32> {
    static DECISIONS: std::sync::OnceLock<Option<regex::RegexSet>> = std::sync::OnceLock::new();
    let lower = &*lower(s);
    let marked_strength = markers(DECISION_MARKERS.iter().map(|&(m, _)| m), &DECISIONS).and_then(|set| {
        // (Most sentences decide nothing: asked once, before which.)
        if !set.is_match(lower) {
            return None;
        }
        set.matches(lower)
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

/// `s` lower-cased (what `str::to_lowercase` gives): `s` itself when it
/// is already, byte by byte when it is ASCII.
pub(super) fn lower(s: &str) -> Cow<'_, str> {
    match s.is_ascii() {
        true if !s.bytes().any(|b| b.is_ascii_uppercase()) => Cow::Borrowed(s),
        true => Cow::Owned(s.to_ascii_lowercase()),
        false => Cow::Owned(s.to_lowercase()),
    }
}

pub(super) fn is_question(s: &str) -> bool {
    s.ends_with('?') || s.ends_with('？')
}

/// Words too common to tell whether an answer takes up a question.
pub(super) const STOPWORDS: &[&str] = &[
    "about", "after", "also", "been", "before", "being", "both", "could", "does", "doing", "each", "from",
    "have", "here", "into", "just", "like", "make", "more", "most", "much", "need", "only", "other", "over",
    "should", "some", "such", "than", "that", "their", "them", "then", "there", "these", "they", "this",
    "those", "user", "very", "want", "were", "what", "when", "where", "which", "while", "will", "with",
    "would", "your",
];

/// The words of `text` of four characters or more, as they stand in it.
pub(super) fn raw_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 4 && (w.is_ascii() || w.chars().count() >= 4))
}

/// Calls `each` with the words of `text` that tell whether an answer takes
/// up a question, lower-cased, until it says to stop: first its names,
/// whole, without the punctuation around them (the words the ledger reads,
/// [`hot_words`], that hold four letters or digits and a digit, `.`, `:`,
/// `@`, `\` or two `/`: `stg-app-07`, `staging.toml`, `/srv/app`, not
/// `e.g.` or `and/or`), then each of its [`raw_words`] (but the stop words,
/// with `stops`) without a plural or verb ending ([`stem`]: `takes` is
/// `take`) and in its short form ([`short_form`]: `production` is
/// `prod`). (An answer's stop words match no question's words: it need not
/// look them up.)
///
/// [`hot_words`]: crate::fold::hot::hot_words
pub(super) fn telling(text: &str, stops: bool, mut each: impl FnMut(&str) -> ControlFlow<()>) {
    let mut go = true;
    crate::fold::hot::hot_words(text.as_bytes(), |start, end| {
        // (A hot word starts and ends beside ASCII white space.)
        let word = &text[start..end];
        let name = word.trim_matches(|c: char| !c.is_alphanumeric());
        // (A mark but a lone `/`: `and/or` is two words.)
        let marked = |b: u8| b != b'/' && crate::fold::hot::is_mark(b);
        let named = name.chars().filter(|c| c.is_alphanumeric()).count() >= 4
            && (name.bytes().any(marked) || word.bytes().filter(|&b| b == b'/').count() >= 2);
        if go && named {
            go = each(&lower(name)).is_continue();
        }
    });
    if !go {
        return;
    }
    for word in raw_words(text) {
        let word = lower(word);
        let stop = stops && STOPWORDS.binary_search(&&*word).is_ok();
        if !stop && each(short_form(stem(&word))).is_break() {
            return;
        }
    }
}

/// Words people shorten, as [`stem`] leaves them, each with its short form
/// (stemmed too), sorted: `production` is `prod`, `configured` is
/// `config`. (Only forms of four characters or more: shorter words tell
/// nothing. A list, not a prefix rule: `data` is no `database`.)
pub(super) const SHORT_FORMS: &[(&str, &str)] = &[
    ("administration", "admin"),
    ("administrator", "admin"),
    ("argument", "args"),
    ("asynchronous", "async"),
    ("asynchronously", "async"),
    ("authenticat", "auth"),
    ("authentication", "auth"),
    ("authoris", "auth"),
    ("authorisation", "auth"),
    ("authoriz", "auth"),
    ("authorization", "auth"),
    ("certificat", "cert"),
    ("configur", "config"),
    ("configuration", "config"),
    ("credential", "cred"),
    ("dependenci", "deps"),
    ("dependency", "deps"),
    ("distribution", "distro"),
    ("documentation", "docs"),
    ("implementation", "impl"),
    ("information", "info"),
    ("initialis", "init"),
    ("initialisation", "init"),
    ("initializ", "init"),
    ("initialization", "init"),
    ("librari", "libs"),
    ("library", "libs"),
    ("management", "mgmt"),
    ("parameter", "param"),
    ("performanc", "perf"),
    ("preferenc", "pref"),
    ("production", "prod"),
    ("repositori", "repo"),
    ("repository", "repo"),
    ("specification", "spec"),
    ("synchronis", "sync"),
    ("synchronisation", "sync"),
    ("synchroniz", "sync"),
    ("synchronization", "sync"),
    ("utiliti", "util"),
    ("utility", "util"),
];

/// `stemmed` (a [`stem`]) in its short form, if people shorten it
/// ([`SHORT_FORMS`]).
pub(super) fn short_form(stemmed: &str) -> &str {
    // (Most words have no listed word's first letter and length: they are
    // not looked up.)
    const LENGTHS: [u32; 26] = {
        let mut lengths = [0; 26];
        let mut i = 0;
        while i < SHORT_FORMS.len() {
            let long = SHORT_FORMS[i].0.as_bytes();
            lengths[(long[0] - b'a') as usize] |= 1 << long.len();
            i += 1;
        }
        lengths
    };
    let first = stemmed.as_bytes().first().copied().unwrap_or(0);
    let listed = first.is_ascii_lowercase()
        && stemmed.len() < 32
        && LENGTHS[(first - b'a') as usize] & 1 << stemmed.len() != 0;
    if !listed {
        return stemmed;
    }
    match SHORT_FORMS.binary_search_by(|&(long, _)| long.cmp(stemmed)) {
        Ok(i) => SHORT_FORMS[i].1,
        Err(_) => stemmed,
    }
}

/// `word` (lower-cased) without one ending that makes another form of it,
/// and then without a final `e`, when four characters or more are left:
/// `-ing`, `-ed`, `-es` after `x`, `ch`, `sh` or `ss`, `-s` but after `s`,
/// `u` or `i`. `looking` and `looks` are `look`, `indexes` is `index`,
/// `cached` and `cache` are `cach`, `status` and `statuses` are `status`.
pub(super) fn stem(word: &str) -> &str {
    fn keep(rest: &str) -> Option<&str> {
        (rest.chars().count() >= 4).then_some(rest)
    }
    let cut = |ending: &str| word.strip_suffix(ending).and_then(keep);
    let base = cut("ing")
        .or_else(|| cut("ed"))
        .or_else(|| cut("es").filter(|rest| ["x", "ch", "sh", "ss"].iter().any(|e| rest.ends_with(e))))
        .or_else(|| cut("s").filter(|rest| !rest.ends_with(['s', 'u', 'i'])))
        .unwrap_or(word);
    base.strip_suffix('e').and_then(keep).unwrap_or(base)
}

/// A question's telling words ([`telling`]): no repeats, the first few.
pub(super) fn keywords(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    telling(text, true, |w| {
        if !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
        match out.len() < QUESTION_WORDS {
            true => ControlFlow::Continue(()),
            false => ControlFlow::Break(()),
        }
    });
    out
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
mod tests {
    use super::*;

    /// The rule [`sentence_end`] keeps, read a character at a time.
    fn end_by_chars(text: &str) -> usize {
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let ends = match c {
                '\n' | '。' | '！' | '？' => true,
                '.' | '!' | '?' => chars.peek().is_none_or(|&(_, n)| n.is_whitespace()),
                _ => false,
            };
            if ends {
                return i + c.len_utf8();
            }
        }
        text.len()
    }

    /// Texts of the characters that end sentences, those that look like
    /// them (`。`'s neighbours share its first byte, `！`'s too), Unicode
    /// spaces, and upper-case letters whose lower case is longer or not ASCII.
    fn texts() -> impl proptest::strategy::Strategy<Value = String> {
        let pieces = vec![
            "a", "B", ".", "!", "?", "\n", " ", "\t", "\u{a0}", "\u{3000}", "。", "、", "！", "？", "＃",
            "ｚ", "İ", "Σ", "ß", "K", "é", "日本", "v1.2", "...", "?!", "\u{2028}",
        ];
        proptest::collection::vec(proptest::sample::select(pieces), 0..40).prop_map(|p| p.concat())
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        #[test]
        fn sentence_ends_are_found_as_a_character_at_a_time(text in texts()) {
            proptest::prop_assert_eq!(sentence_end(&text), end_by_chars(&text));
        }

        #[test]
        fn lower_is_to_lowercase(text in texts()) {
            proptest::prop_assert_eq!(lower(&text), text.to_lowercase());
        }

        #[test]
        fn raw_words_are_the_words_before_lower_case(text in texts()) {
            let by_chars: Vec<String> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.chars().count() >= 4)
                .map(str::to_lowercase)
                .collect();
            let words: Vec<String> = raw_words(&text).map(str::to_lowercase).collect();
            proptest::prop_assert_eq!(words, by_chars);
        }
    }
}
