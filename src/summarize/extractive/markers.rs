//! Markers: the phrases that mark errors and decisions, the verbs that open a request, and questions.

use super::text::lower;
use crate::message::Role;

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

pub(super) fn is_question(s: &str) -> bool {
    s.ends_with('?') || s.ends_with('？')
}
