//! A question's keywords: the words that tell whether an answer takes it up, stemmed and in
//! their short forms.

use std::ops::ControlFlow;

use super::QUESTION_WORDS;
use super::text::lower;

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
