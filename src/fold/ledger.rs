//! The exact-identifier ledger (sawtooth's L1.5): identifiers found in the
//! folded turns, kept verbatim in a section after the summary's prose.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, OnceLock};

use regex::Regex;

use crate::message::{Key, KeyVisitor, Message};
use crate::quick::{Quick, memo_lock};

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

/// Ledger entries, newest first, each with its tokens, counted once when
/// it became an entry: its text and a line's framing (`- `, the newline).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entries {
    pub texts: Vec<LedgerEntry>,
    pub tokens: Vec<usize>,
    /// A hash of each entry's identifier ([`value_of`]), to find one again
    /// without comparing texts.
    pub keys: Vec<u64>,
    /// Whether each entry is loose ([`is_loose`]).
    pub loose: Vec<bool>,
}

/// What [`candidates`] finds: the entries, newest first, each with its
/// [`key_of`] and whether it is loose ([`is_loose`]), both found with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Candidates {
    pub texts: Vec<LedgerEntry>,
    pub keys: Vec<u64>,
    pub loose: Vec<bool>,
}

/// The hash [`Entries::keys`] holds.
pub(crate) fn key_of(entry: &str) -> u64 {
    word_hash(value_of(entry))
}

impl Entries {
    /// `texts`, each counted by `counter`.
    pub(crate) fn counted<C: crate::count::TokenCounter + ?Sized, T: Into<LedgerEntry>>(
        texts: Vec<T>,
        counter: &C,
    ) -> Self {
        let texts: Vec<LedgerEntry> = texts.into_iter().map(Into::into).collect();
        let keys = texts.iter().map(|t| key_of(t)).collect();
        let loose = texts.iter().map(|t| is_loose(t)).collect();
        Entries::keyed(Candidates { texts, keys, loose }, counter)
    }

    /// [`candidates`]' entries, each counted by `counter`.
    pub(crate) fn keyed<C: crate::count::TokenCounter + ?Sized>(found: Candidates, counter: &C) -> Self {
        let Candidates { texts, keys, loose } = found;
        debug_assert!(texts.len() == keys.len() && texts.len() == loose.len());
        let tokens = texts.iter().map(|t| entry_tokens(t, counter)).collect();
        Entries {
            texts,
            tokens,
            keys,
            loose,
        }
    }

    /// Drops the entries `gone` marks.
    pub(crate) fn retain(&mut self, gone: &[bool]) {
        keep(&mut self.texts, gone);
        keep(&mut self.tokens, gone);
        keep(&mut self.keys, gone);
        keep(&mut self.loose, gone);
    }

    /// Keeps the first `n` entries.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.texts.truncate(n);
        self.tokens.truncate(n);
        self.keys.truncate(n);
        self.loose.truncate(n);
    }

    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// A memory's ledger, kept between folds: its entries (newest first, each
/// counted once, with whether it is loose), how many are loose, their
/// tokens' sum, and the section listing them all, rendered. A fold that
/// finds a few entries and lists them all copies the section in runs and
/// edits it by the entries it moves or drops: its cost is a copy of the
/// section, not a pass over each entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Changed only by `Kept`'s own methods, which keep the fields below
    /// in step with them.
    pub entries: Entries,
    /// How many entries are loose.
    pub loose_count: usize,
    /// The sum of the entries' tokens (wide enough never to saturate).
    pub total: u128,
    /// The entries as a section lists them: `- ` and the entry, a line each.
    pub rendered: String,
    /// How many entries have each key: a fold's entry whose key none has
    /// is new, with no search through the entries.
    keyed: std::collections::HashMap<u64, u32, BuildHasherDefault<Quick>>,
}

impl Kept {
    /// `entries`, kept.
    pub(crate) fn new(entries: Entries) -> Self {
        let texts: Vec<&str> = entries.texts.iter().map(|t| &**t).collect();
        let mut keyed = std::collections::HashMap::default();
        for &key in &entries.keys {
            *keyed.entry(key).or_default() += 1;
        }
        Kept {
            loose_count: entries.loose.iter().filter(|&&l| l).count(),
            total: entries.tokens.iter().map(|&t| t as u128).sum(),
            rendered: lines(&texts),
            entries,
            keyed,
        }
    }

    /// Whether an entry has `key`.
    pub(crate) fn has_key(&self, key: u64) -> bool {
        self.keyed.contains_key(&key)
    }

    /// Forgets one entry's `key`.
    fn unkey(&mut self, key: u64) {
        if let std::collections::hash_map::Entry::Occupied(mut n) = self.keyed.entry(key) {
            *n.get_mut() -= 1;
            if *n.get() == 0 {
                n.remove();
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The index of the `k`-th entry not at `again` (ascending indices).
    pub(crate) fn skipping(k: usize, again: &[usize]) -> usize {
        let mut j = k;
        for &a in again {
            if a > j {
                break;
            }
            j += 1;
        }
        j
    }

    /// Appends to `out` the lines of the first `count` entries not at
    /// `again` (ascending), copied from the rendered section in runs,
    /// after a newline when `out` has lines before them.
    pub(crate) fn push_lines(&self, out: &mut String, again: &[usize], mut count: usize, first: bool) {
        let texts = &self.entries.texts;
        if again.is_empty() && count >= texts.len() {
            // All of them: the section as it is.
            if !self.rendered.is_empty() {
                if !first {
                    out.push('\n');
                }
                out.push_str(&self.rendered);
            }
            return;
        }
        let line = |j: usize| texts[j].len() + 3;
        let (mut j, mut at, mut first) = (0, 0, first);
        let mut skip = again.iter().copied().peekable();
        while count > 0 && j < texts.len() {
            let end = skip.peek().copied().unwrap_or(texts.len()).min(j + count);
            if end > j {
                let bytes: usize = (j..end).map(line).sum();
                if !std::mem::take(&mut first) {
                    out.push('\n');
                }
                out.push_str(&self.rendered[at..at + bytes - 1]);
                (count, at, j) = (count - (end - j), at + bytes, end);
            }
            if skip.next_if_eq(&j).is_some() {
                (at, j) = (at + line(j), j + 1);
            }
        }
    }

    /// Removes entry `j` (its line too).
    fn remove(&mut self, j: usize, at: usize) {
        let len = self.entries.texts[j].len() + 3;
        let line = at..(at + len).min(self.rendered.len() + 1);
        // The last line has no newline after it: take the one before.
        let line = match line.end > self.rendered.len() {
            true => at.saturating_sub(1)..self.rendered.len(),
            false => line,
        };
        self.rendered.replace_range(line, "");
        self.total -= self.entries.tokens.remove(j) as u128;
        self.loose_count -= usize::from(self.entries.loose.remove(j));
        self.entries.texts.remove(j);
        let key = self.entries.keys.remove(j);
        self.unkey(key);
    }

    /// Keeps the first `n` entries.
    fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        let gone = &self.entries;
        self.total -= gone.tokens[n..].iter().map(|&t| t as u128).sum::<u128>();
        self.loose_count -= gone.loose[n..].iter().filter(|&&l| l).count();
        let end: usize = gone.texts[..n].iter().map(|t| t.len() + 3).sum();
        self.rendered.truncate(end.saturating_sub(1));
        for i in n..self.len() {
            self.unkey(self.entries.keys[i]);
        }
        self.entries.truncate(n);
    }
}

/// How a fold changes a memory's ledger ([`Kept::fold`]).
pub(crate) struct Edit<'a> {
    /// The kept entries the fold's found again (ascending).
    pub again: &'a [usize],
    /// The candidates (the fold's entries, then the kept ones not found
    /// again) the summary had no room for (ascending).
    pub dropped: &'a [usize],
    /// The most entries the ledger keeps.
    pub cap: usize,
}

impl Kept {
    /// The ledger after a fold: `fresh` (the fold's entries), then the
    /// kept entries not found again, less those dropped, at most `cap`.
    pub(crate) fn fold(&mut self, fresh: Kept, edit: Edit<'_>) {
        let f = fresh.len();
        // Found again: the entries leave their place (for the front).
        let mut at: usize = 0;
        let mut starts = Vec::with_capacity(edit.again.len());
        let mut j = 0;
        for &a in edit.again {
            at += self.entries.texts[j..a]
                .iter()
                .map(|t| t.len() + 3)
                .sum::<usize>();
            starts.push(at);
            j = a;
        }
        for (&a, &at) in edit.again.iter().zip(&starts).rev() {
            self.remove(a, at);
        }
        // The candidates are now `fresh`, then these.
        let mut fresh = fresh;
        let m = f + self.len();
        let tail = edit.dropped.first().copied().unwrap_or(m);
        if edit.dropped.len() == m.saturating_sub(tail) {
            // Most folds drop a tail (the oldest that did not fit), if any.
            fresh.truncate(tail);
            self.truncate(tail.saturating_sub(f));
        } else {
            let mut gone = vec![false; m];
            edit.dropped.iter().for_each(|&i| gone[i] = true);
            fresh = fresh.without(&gone[..f]);
            *self = std::mem::take(self).without(&gone[f..]);
        }
        fresh.truncate(edit.cap);
        self.truncate(edit.cap - fresh.len());
        // `fresh`'s lines, then the kept ones.
        if !fresh.rendered.is_empty() && !self.rendered.is_empty() {
            fresh.rendered.push('\n');
        }
        self.rendered.insert_str(0, &fresh.rendered);
        for &key in &fresh.entries.keys {
            *self.keyed.entry(key).or_default() += 1;
        }
        let e = &mut self.entries;
        e.texts.splice(0..0, fresh.entries.texts);
        e.tokens.splice(0..0, fresh.entries.tokens);
        e.keys.splice(0..0, fresh.entries.keys);
        e.loose.splice(0..0, fresh.entries.loose);
        self.total += fresh.total;
        self.loose_count += fresh.loose_count;
    }

    /// These entries less those `gone` marks, rendered again.
    fn without(mut self, gone: &[bool]) -> Kept {
        self.entries.retain(gone);
        Kept::new(self.entries)
    }
}

/// Drops the items `gone` marks.
fn keep<T>(items: &mut Vec<T>, gone: &[bool]) {
    let mut marks = gone.iter();
    items.retain(|_| !marks.next().copied().unwrap_or(false));
}

/// Whether a prose may hold `entry` though it holds no word the patterns
/// read: the identifier it names is not one such word (a user pattern's
/// match with a space, say), so [`Said::holds`] searches the text for it.
pub(crate) fn is_loose(entry: &str) -> bool {
    let value = value_of(entry);
    !is_lone_word(value)
}

/// Whether `text` holds a word the patterns read (one [`Said`] would keep).
pub(crate) fn has_hot_word(text: &str) -> bool {
    let mut any = false;
    hot_words(text.as_bytes(), |_, _| any = true);
    any
}

/// `entries` as a section's lines (`- ` and the entry, joined by newlines).
fn lines(entries: &[&str]) -> String {
    let mut out = String::with_capacity(entries.iter().map(|e| e.len() + 3).sum::<usize>());
    push_lines(&mut out, entries);
    out
}

/// Appends [`lines`]`(entries)` to `out`.
pub(crate) fn push_lines(out: &mut String, entries: &[&str]) {
    for (i, entry) in entries.iter().enumerate() {
        if i > 0 {
            out.push('\n');
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

/// Kinds of identifier, each a pattern, some checked further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Uuid,
    Url,
    Cloud,
    Email,
    Ipv4,
    Ipv6,
    AbsolutePath,
    WindowsPath,
    RelativePath,
    HostPath,
    K8sObject,
    ImageTag,
    FileName,
    Host,
    HexHash,
    Cve,
    Ticket,
    Version,
}

/// Top-level domains a host name may end with (without a port).
const TLDS: &[&str] = &[
    "com",
    "org",
    "net",
    "io",
    "dev",
    "ai",
    "app",
    "co",
    "cloud",
    "internal",
    "local",
    "localdomain",
    "lan",
    "edu",
    "gov",
    "mil",
    "int",
    "info",
    "biz",
    "me",
    "sh",
    "so",
    "xyz",
    "tech",
    "site",
    "online",
    "us",
    "uk",
    "de",
    "fr",
    "jp",
    "cn",
    "kr",
    "in",
    "au",
    "ca",
    "nl",
    "se",
    "ch",
    "eu",
    "ru",
    "br",
    "es",
    "it",
    "pl",
    "test",
    "example",
    "invalid",
    "svc",
    "cluster",
    "corp",
    "amazonaws",
    "azure",
    "gcp",
];

/// Each class's pattern, in the order a match is tried at one position
/// (longer or more specific forms first).
const SPEC: &[(Class, &str)] = &[
    (
        Class::Uuid,
        r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    ),
    // Any scheme (`postgres://`, `redis://`, `mongodb+srv://`, `s3://`), JDBC's
    // too.
    (
        Class::Url,
        r#"\b(?:jdbc:)?[A-Za-z][A-Za-z0-9+]{0,31}://[^ \t\r\n<>"'`]+"#,
    ),
    (
        Class::Cloud,
        r#"\barn:aws[a-z-]*:[a-z0-9-]*:[a-z0-9-]*:[0-9]*:[^ \t\r\n<>"'`]+"#,
    ),
    (
        Class::Email,
        r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b",
    ),
    (Class::Ipv6, r"\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?"),
    // With a port, or a CIDR block's prefix length (`10.0.0.0/16`).
    (
        Class::Ipv4,
        r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?::[0-9]{1,5}|/[0-9]{1,2})?\b",
    ),
    (Class::Cve, r"\bCVE-[0-9]{4}-[0-9]{4,7}\b"),
    (
        Class::WindowsPath,
        r#"\b[A-Za-z]:\\(?:[^\\ \t\r\n"'<>|]+\\)*[^\\ \t\r\n"'<>|]*"#,
    ),
    (
        Class::AbsolutePath,
        r#"(?:^|[ \t\r\n"'(\[=,:])~?/[A-Za-z0-9._-]+(?:/[A-Za-z0-9._@+-]+)*/?"#,
    ),
    // A host (ending in one of the `TLDS`, or localhost) and a path:
    // a URL without its scheme (`github.com/acme/payments`) or a container
    // image with its tag and digest (`ghcr.io/acme/api:1.4.2`,
    // `quay.io/org/app@sha256:...`).
    (
        Class::HostPath,
        r"\b(?:{host}(?i-u:{tlds})|localhost)(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~%+-]+)+(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(?:@[A-Za-z0-9]+:[0-9a-fA-F]{32,128})?",
    ),
    // With an extension, or of three parts at least (`src/components/Button`,
    // `refs/heads/main`; with a word in it: not a date).
    (
        Class::RelativePath,
        r"\b[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)+\.[A-Za-z0-9]{1,8}\b|\b[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+){2,}",
    ),
    // A Kubernetes object as kubectl names it: one of the `KINDS`, maybe
    // with its group, then its name (`deploy/ledgerd`,
    // `deployment.apps/ledgerd`).
    (
        Class::K8sObject,
        r"\b(?:{kinds})(?:\.[a-z0-9-]+)*/[a-z0-9](?:[a-z0-9.-]{0,251}[a-z0-9])?\b",
    ),
    // One of the well-known `IMAGES` with its tag, or a service of that
    // name with its port (`postgres:16`, `bitnami/redis:7.2-alpine`,
    // `postgres:5432`).
    (
        Class::ImageTag,
        r"\b(?:[a-z0-9][a-z0-9._-]*/)*(?:{images}):[A-Za-z0-9_][A-Za-z0-9._-]{0,127}",
    ),
    (
        Class::FileName,
        r"\b[A-Za-z0-9_-][A-Za-z0-9._-]*\.(?:rs|py|js|mjs|ts|tsx|jsx|json|jsonl|yaml|yml|toml|md|txt|csv|tsv|log|sh|go|java|kt|c|h|cc|cpp|hpp|cs|rb|php|html|css|scss|sql|xml|ini|cfg|conf|lock|env|pdf|png|jpg|jpeg|gif|svg|zip|gz|tgz|tar|parquet|ipynb|proto|tf|wasm|so|dll|exe)\b",
    ),
    (
        Class::Version,
        r"\bv[0-9]+(?:\.[0-9]+){1,3}(?:-[0-9A-Za-z.]+)?(?:\+[0-9A-Za-z.-]+)?\b|\b[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.]+)?(?:\+[0-9A-Za-z.-]+)?\b",
    ),
    (
        Class::Host,
        r"\b{host}[A-Za-z]{2,24}(?::[0-9]{1,5})?\b|\blocalhost:[0-9]{1,5}\b",
    ),
    // With the name of its algorithm, when written (`sha256:9f86d0...`).
    (
        Class::HexHash,
        r"\b(?:(?:sha(?:1|224|256|384|512)|md5):)?[0-9a-fA-F]{7,64}\b",
    ),
    (
        Class::Ipv6,
        r"(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}|(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{0,4}::(?:[0-9A-Fa-f]{1,4}:){0,6}[0-9A-Fa-f]{0,4}",
    ),
    (Class::Ticket, r"\b[A-Z][A-Z0-9]{1,9}-[0-9]{1,7}\b"),
];

/// Every class's pattern in one alternation (one pass over the text finds
/// the candidates, leftmost first, in `SPEC`'s order at each position), and
/// each anchored, to tell which class a candidate is: the first, in
/// `SPEC`'s order, that matches it whole. All read bytes, their classes and
/// word boundaries ASCII (`(?-u)`): a negated class such as a URL's takes
/// any other byte, so a match still ends beside ASCII, and the automata
/// stay small (the first search in a process builds far fewer states).
struct Patterns {
    all: regex::bytes::Regex,
    /// Compiled when first asked (most processes ask a few classes).
    each: Vec<OnceLock<Option<regex::bytes::Regex>>>,
}

impl Patterns {
    /// The first class, in `SPEC`'s order, whose pattern matches `found`
    /// whole: only the classes a look at its bytes leaves possible are
    /// asked.
    fn class_of(&self, found: &[u8]) -> Option<Class> {
        let has = |b: u8| memchr::memchr(b, found).is_some();
        let first = found.first().copied().unwrap_or(0);
        let possible = |class: Class| match class {
            Class::Uuid => found.len() == 36,
            Class::Url => first.is_ascii_alphabetic() && memchr::memmem::find(found, b"://").is_some(),
            Class::Cloud => found.starts_with(b"arn:"),
            Class::Email => has(b'@'),
            Class::Ipv4 => first.is_ascii_digit() && has(b'.'),
            Class::Cve => found.starts_with(b"CVE-"),
            Class::WindowsPath => found.get(1..3) == Some(b":\\"),
            Class::AbsolutePath | Class::RelativePath => has(b'/'),
            Class::HostPath => has(b'/') && (has(b'.') || found.starts_with(b"localhost")),
            Class::K8sObject => has(b'/'),
            Class::ImageTag => has(b':'),
            Class::FileName => has(b'.'),
            Class::Version => (first == b'v' || first.is_ascii_digit()) && has(b'.'),
            Class::Host => has(b'.') || found.starts_with(b"localhost:"),
            Class::HexHash => {
                let hex = digest(found);
                (7..=64).contains(&hex.len()) && hex.iter().all(u8::is_ascii_hexdigit)
            }
            // In brackets, or bare.
            Class::Ipv6 => first == b'[' || has(b':'),
            Class::Ticket => first.is_ascii_uppercase() && has(b'-'),
        };
        // A hash's look is its whole pattern: no need to ask it.
        let exact = |class: Class| class == Class::HexHash;
        let whole = |i: usize| self.each(i).is_some_and(|each| each.is_match(found));
        (SPEC.iter().enumerate())
            .find(|&(i, (class, _))| possible(*class) && (exact(*class) || whole(i)))
            .map(|(_, (class, _))| *class)
    }

    /// The `i`th class's pattern, anchored at both ends.
    fn each(&self, i: usize) -> Option<&regex::bytes::Regex> {
        let compile = || regex::bytes::Regex::new(&format!("^(?:{})$", ascii(SPEC[i].1))).ok();
        self.each.get(i)?.get_or_init(compile).as_ref()
    }
}

/// Compiles the built-in patterns, if not yet (see [`FoldPolicy::prepare`]).
///
/// [`FoldPolicy::prepare`]: crate::FoldPolicy::prepare
pub(crate) fn prepare() {
    patterns();
}

fn patterns() -> Option<&'static Patterns> {
    static PATTERNS: OnceLock<Option<Patterns>> = OnceLock::new();
    PATTERNS
        .get_or_init(|| {
            let all: Vec<String> = SPEC.iter().map(|(_, p)| format!("(?:{})", ascii(p))).collect();
            Some(Patterns {
                all: regex::bytes::Regex::new(&all.join("|")).ok()?,
                each: SPEC.iter().map(|_| OnceLock::new()).collect(),
            })
        })
        .as_ref()
}

/// A hash's hex digits, without the name of its algorithm (`sha256:`).
fn digest(found: &[u8]) -> &[u8] {
    memchr::memchr(b':', found).map_or(found, |at| &found[at + 1..])
}

/// Kinds of Kubernetes object, as kubectl names them (less the short
/// names that are words: `no`, `cm`, `ds` ...).
const KINDS: &[&str] = &[
    "deployments",
    "deployment",
    "deploy",
    "pods",
    "pod",
    "services",
    "service",
    "svc",
    "statefulsets",
    "statefulset",
    "sts",
    "daemonsets",
    "daemonset",
    "cronjobs",
    "cronjob",
    "jobs",
    "job",
    "configmaps",
    "configmap",
    "secrets",
    "secret",
    "namespaces",
    "namespace",
    "ingresses",
    "ingress",
    "pvc",
    "replicasets",
    "replicaset",
    "hpa",
    "rollouts",
    "rollout",
];

/// Container images and services well known enough that `name:tag` (or
/// `name:port`) names one.
const IMAGES: &[&str] = &[
    "postgresql",
    "postgres",
    "mysql",
    "mariadb",
    "redis",
    "valkey",
    "mongodb",
    "mongo",
    "memcached",
    "nginx",
    "httpd",
    "haproxy",
    "traefik",
    "envoy",
    "caddy",
    "node",
    "python",
    "golang",
    "rust",
    "ruby",
    "php",
    "openjdk",
    "eclipse-temurin",
    "amazoncorretto",
    "alpine",
    "ubuntu",
    "debian",
    "busybox",
    "centos",
    "fedora",
    "rockylinux",
    "amazonlinux",
    "rabbitmq",
    "kafka",
    "zookeeper",
    "elasticsearch",
    "opensearch",
    "kibana",
    "logstash",
    "grafana",
    "prometheus",
    "alertmanager",
    "loki",
    "jaeger",
    "vault",
    "consul",
    "etcd",
    "minio",
    "clickhouse",
    "cassandra",
    "cockroachdb",
    "jenkins",
    "localstack",
    "nats",
    "pulsar",
    "keycloak",
];

/// A host name's labels, each with the dot after it (`api.`, `eu-west-1.`).
const HOST_LABELS: &str = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+";

/// A class's pattern as it is compiled, its classes and word boundaries
/// ASCII (see [`Patterns`]).
fn ascii(pattern: &str) -> String {
    format!("(?-u){}", source(pattern))
}

/// A class's pattern with its lists: [`HOST_LABELS`] put in for
/// `{host}`, [`TLDS`] for `{tlds}`, [`KINDS`] for `{kinds}`, [`IMAGES`]
/// for `{images}`.
fn source(pattern: &str) -> String {
    (pattern.replace("{host}", HOST_LABELS))
        .replace("{tlds}", &TLDS.join("|"))
        .replace("{kinds}", &KINDS.join("|"))
        .replace("{images}", &IMAGES.join("|"))
}

/// `found` without the punctuation that ends a sentence or closes a bracket
/// around it.
fn trim_end(found: &str) -> &str {
    let mut s = found;
    loop {
        let Some(last) = s.chars().last() else {
            return s;
        };
        let unbalanced = |open: char| s.matches(open).count() < s.matches(last).count();
        let strip = match last {
            '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '"' | '`' => true,
            ')' => unbalanced('('),
            ']' => unbalanced('['),
            '}' => unbalanced('{'),
            _ => false,
        };
        if !strip {
            return s;
        }
        s = &s[..s.len() - last.len_utf8()];
    }
}

/// Whether `found`, matched as `class`, is an identifier (the checks a
/// pattern without lookaround cannot make).
fn accept(class: Class, found: &str) -> bool {
    match class {
        Class::Ipv4 => match found.split_once('/') {
            Some((ip, bits)) => ip.parse::<Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32),
            None => (found.split(':').next()).is_some_and(|ip| ip.parse::<Ipv4Addr>().is_ok()),
        },
        // A drive alone (`C:\`) names nothing.
        Class::WindowsPath => found.len() > 3,
        Class::Ipv6 => {
            // `[addr]:port` or a bare address.
            let ip = found
                .strip_prefix('[')
                .map_or(found, |rest| rest.split(']').next().unwrap_or(""));
            // Two groups at least (`::` and `2::` are Rust paths more often
            // than addresses), or the loopback.
            let groups = ip.split(':').filter(|g| !g.is_empty()).count();
            ip.parse::<Ipv6Addr>().is_ok() && (groups >= 2 || ip == "::1")
        }
        Class::HexHash => {
            let hex = digest(found.as_bytes());
            hex.iter().any(u8::is_ascii_digit)
                && hex.iter().any(u8::is_ascii_alphabetic)
                && !NOT_CODES.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(hex))
        }
        // A word in it: not a date (`11/30/2026`), nor arithmetic (`a/b/c`).
        Class::RelativePath => {
            (found.split('/')).any(|part| part.bytes().filter(u8::is_ascii_alphabetic).count() >= 2)
        }
        Class::Url => !url_holds_secret(found),
        Class::Host => {
            if found.starts_with("localhost:") || found.contains(':') {
                return true;
            }
            let tld = found.rsplit('.').next().unwrap_or("");
            found.contains('.') && TLDS.contains(&tld.to_ascii_lowercase().as_str())
        }
        // `SHA-256` and `AES-256` name standards; `ed25519` an algorithm.
        Class::Ticket => !is_standard(found.as_bytes()),
        Class::AbsolutePath => found.len() > 2 && !found.ends_with("//"),
        _ => true,
    }
}

/// Whether a URL carries a secret, never copied: a password
/// (`postgres://app:secret@db/x`), a user that is a service's key
/// (`https://ghp_…@github.com/…`), or a query parameter named for one
/// (`?token=`, `&X-Amz-Signature=`, `?api_key=`, `&sig=`). (A secret
/// elsewhere in it, `?key=AIza…`, is one of [`codes`]: the URL holding it
/// is left out.)
fn url_holds_secret(url: &str) -> bool {
    let rest = url.split_once("://").map_or("", |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((user, _)) = authority.rsplit_once('@') {
        if user.contains(':') || is_secret(user.as_bytes()) {
            return true;
        }
    }
    // A password with a raw `/`, `?` or `#` (`app:pa/ss@db`) ends the
    // authority early: a `:` before the first `@` and the first `/`, that
    // no port follows.
    if let Some((before, _)) = rest.split_once('@') {
        let colon = before
            .find(':')
            .filter(|&c| before.find('/').is_none_or(|slash| c < slash));
        if let Some(after) = colon.map(|c| &before[c + 1..]) {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let port = digits > 0 && after[digits..].starts_with(['/', '?', '#']);
            if !port {
                return true;
            }
        }
    }
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    query.split(['&', ';', '#']).any(|pair| {
        let name = pair.split('=').next().unwrap_or("").to_ascii_lowercase();
        SECRET_NAMES.iter().any(|s| name.contains(s)) || name == "sig"
    })
}

/// What the names of secrets hold (a JSON key, a URL's query parameter).
const SECRET_NAMES: &[&str] = &[
    "password",
    "passwd",
    "secret",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "credential",
    "signature",
];

/// Whether a JSON key names an identifier (its string values enter the
/// ledger as `key: value`). Keys that name secrets never do.
fn is_identifier_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    if SECRET_NAMES.iter().any(|s| lower.contains(s)) {
        return false;
    }
    const EXACT: &[&str] = &[
        "id", "uuid", "guid", "key", "url", "uri", "path", "name", "dataset", "host", "hostname", "endpoint",
        "bucket", "sha", "commit", "branch", "arn", "ref", "file", "filename", "table", "database", "email",
    ];
    const SUFFIXES: &[&str] = &[
        "_id", "_key", "_url", "_uri", "_path", "_name", "_arn", "_hash", "_sha", "_host", "_ref",
    ];
    const CAMEL: &[&str] = &[
        "Id", "Key", "Url", "Uri", "Path", "Name", "Arn", "Hash", "Host", "ID", "URL",
    ];
    EXACT.contains(&lower.as_str())
        || SUFFIXES.iter().any(|s| lower.ends_with(s))
        || CAMEL.iter().any(|s| key.len() > s.len() && key.ends_with(s))
}

/// A JSON value as the ledger reads it: strings borrowed from the text
/// where they have no escapes, an object's members in the text's order,
/// other values (numbers, booleans, null) parsed and dropped. It costs a
/// fraction of a [`serde_json::Value`] (no map, no copy of each string).
enum Json<'t> {
    Str(Key<'t>),
    Arr(Vec<Json<'t>>),
    Obj(Vec<(Key<'t>, Json<'t>)>),
    Other,
}

impl<'de> serde::Deserialize<'de> for Json<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// Builds a [`Json`].
struct JsonVisitor;

impl<'de> serde::de::Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_unit<E>(self) -> std::result::Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_borrowed_str<E: serde::de::Error>(self, s: &'de str) -> std::result::Result<Json<'de>, E> {
        KeyVisitor.visit_borrowed_str(s).map(Json::Str)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<Json<'de>, E> {
        KeyVisitor.visit_str(s).map(Json::Str)
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> std::result::Result<Json<'de>, E> {
        KeyVisitor.visit_string(s).map(Json::Str)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Json<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Arr(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Json<'de>, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry()? {
            members.push(member);
        }
        Ok(Json::Obj(members))
    }
}

/// The JSON value of `text`, if it is one.
fn parse_json(text: &str) -> Option<Json<'_>> {
    serde_json::from_str(text).ok()
}

/// Walks a JSON value, adding `key: value` for each identifier key with a
/// short, one-line string value. A key an object gives twice counts once,
/// in its first place with its last value (as `serde_json`'s map reads it).
fn json_entries(value: &Json<'_>, out: &mut Vec<LedgerEntry>, values: &mut Set<String>) {
    match value {
        Json::Obj(members) => {
            let key_at = |i: usize| members[i].0.as_str();
            // Each key's first and last places (found by a map in a long object).
            let places: Option<std::collections::HashMap<&str, (usize, usize)>> =
                (members.len() > 16).then(|| {
                    let mut places = std::collections::HashMap::new();
                    for i in 0..members.len() {
                        (places.entry(key_at(i)))
                            .and_modify(|(_, last): &mut (usize, usize)| *last = i)
                            .or_insert((i, i));
                    }
                    places
                });
            for i in 0..members.len() {
                let key = key_at(i);
                let (first, last) = match &places {
                    Some(places) => places[key],
                    None => (
                        (0..i).find(|&j| key_at(j) == key).unwrap_or(i),
                        (i..members.len()).rev().find(|&j| key_at(j) == key).unwrap_or(i),
                    ),
                };
                if first != i {
                    continue;
                }
                match &members[last].1 {
                    Json::Str(s)
                        if is_identifier_key(key) && usable(s.as_str()) && !holds_secret(s.as_str()) =>
                    {
                        let s = s.as_str();
                        out.push(format!("{key}: {s}").into());
                        values.insert(s.to_owned());
                    }
                    other => json_entries(other, out, values),
                }
            }
        }
        Json::Arr(items) => items.iter().for_each(|v| json_entries(v, out, values)),
        _ => {}
    }
}

/// Every string of `value`, keys and values, in the text's order, added
/// to `out`; whether one of them was written with an escape (`\\`, `\/`,
/// `\"`, `\u00e9`): only then does what they say differ from the text.
fn json_strings<'v>(value: &'v Json<'_>, out: &mut Vec<&'v str>) -> bool {
    let string = |s: &'v Key<'_>, out: &mut Vec<&'v str>| {
        out.push(s.as_str());
        matches!(s, Key::Owned(_))
    };
    match value {
        Json::Str(s) => string(s, out),
        Json::Arr(items) => items
            .iter()
            .fold(false, |escaped, v| json_strings(v, out) | escaped),
        Json::Obj(members) => (members.iter()).fold(false, |escaped, (key, v)| {
            let key = string(key, out);
            json_strings(v, out) | key | escaped
        }),
        Json::Other => false,
    }
}

/// The built-in patterns' identifiers in a JSON value whose strings have
/// escapes, read in each string as it says it (`C:\\srv\\a.log` is
/// `C:\srv\a.log`), none equal to one of `values` (its `key: value`
/// entries' values); `None` when no string has an escape (its text reads
/// the same).
fn json_matched(value: &Json<'_>, values: &Set<String>) -> Option<Vec<LedgerEntry>> {
    let mut strings = Vec::new();
    if !json_strings(value, &mut strings) {
        return None;
    }
    let mut out = Vec::new();
    for s in strings {
        matched(s, &|found| values.contains(found), &mut out);
    }
    Some(out.into_iter().map(|(_, entry)| entry).collect())
}

/// A value short enough and on one line, fit for a ledger entry.
fn usable(s: &str) -> bool {
    !s.trim().is_empty() && s.len() <= 300 && !s.contains('\n')
}

/// Calls `found` with each span of `text` that may hold an identifier of
/// a built-in class, in order: the words (split at ASCII space, tab, CR and
/// LF, which no pattern matches) that hold a digit, `:`, `/`, `\\`, `@` or
/// a `.` followed by a letter or digit (a file name, a host). Every class
/// needs one of them (a UUID of the letters a-f alone, one in 10^13, is
/// left out), and prose mostly has none. The patterns read only these
/// spans, which start and end beside whitespace, so they match there as in
/// the whole text. Spans less than [`SPAN_GAP`] bytes apart are read as one.
fn hot_spans(text: &str, mut found: impl FnMut(usize, usize)) {
    let mut span: Option<(usize, usize)> = None;
    hot_words(text.as_bytes(), |start, end| {
        span = match span {
            Some((first, last)) if start <= last + SPAN_GAP => Some((first, end)),
            Some((first, last)) => {
                found(first, last);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    });
    if let Some((first, last)) = span {
        found(first, last);
    }
}

/// Calls `found` with the start and end of each word of `bytes` that
/// [`hot_spans`] reads, in order (the built-in summarizer's names too).
pub(crate) fn hot_words(bytes: &[u8], mut found: impl FnMut(usize, usize)) {
    let mut from = 0;
    while let Some(at) = next_hot(bytes, from) {
        // Each word is measured once, when its first such byte is met (a
        // word of many dots is not walked again at each).
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

/// Whether `entry`, one word, is one [`hot_words`] finds: no space in it,
/// and a mark that makes it hot (what [`is_lone_word`] is, but for a form
/// feed; the tests check it against the finder).
#[cfg(test)]
fn is_hot_word(entry: &str) -> bool {
    hot_word_apart(entry, is_space)
}

/// Whether `entry` is one hot word with no ASCII whitespace at all (a form
/// feed too): an entry [`Said`] looks up among its words.
fn is_lone_word(entry: &str) -> bool {
    hot_word_apart(entry, |b| b.is_ascii_whitespace())
}

/// Whether no byte of `entry` is a `space` and a mark makes it hot.
fn hot_word_apart(entry: &str, space: impl Fn(u8) -> bool) -> bool {
    let bytes = entry.as_bytes();
    // Every space is at most `b' '`, which rules most entries out eight
    // bytes at a time; and most have their mark in their first bytes.
    !(has_low_byte(bytes) && bytes.iter().any(|&b| space(b))) && next_hot(bytes, 0).is_some()
}

/// Whether a byte of `bytes` is at most `b' '`, eight bytes a step: a
/// subtraction borrows into each byte's top bit that is below `0x21`
/// (bytes of `0x80` and up, whose top bit is set, left out), so the
/// answer is exact whatever the borrows do to the bytes above.
fn has_low_byte(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const TOPS: u64 = 0x8080_8080_8080_8080;
    let low = |word: [u8; 8]| {
        let x = u64::from_le_bytes(word);
        x.wrapping_sub(ONES * 0x21) & !x & TOPS != 0
    };
    let mut chunks = bytes.chunks_exact(8);
    let any = chunks.any(|chunk| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        low(word)
    });
    let rest = chunks.remainder();
    any || (!rest.is_empty() && {
        let mut word = [0xFF; 8];
        word[..rest.len()].copy_from_slice(rest);
        low(word)
    })
}

/// The spaces that end a word.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Whether `b` may make its word an identifier's: a digit, `.`, `/`, `:`
/// (these four one range), `@` or `\\`.
pub(crate) fn is_mark(b: u8) -> bool {
    (b.wrapping_sub(b'.') <= b':' - b'.') | (b == b'@') | (b == b'\\')
}

/// Whether the mark at `bytes[at]` makes its word hot: any but a `.` that
/// no letter or digit follows (the end of a sentence).
fn is_hot_at(bytes: &[u8], at: usize) -> bool {
    bytes[at] != b'.' || bytes.get(at + 1).is_some_and(u8::is_ascii_alphanumeric)
}

/// The position of the first mark at or after `from` that makes its word
/// hot ([`is_mark`] and [`is_hot_at`]). Blocks without one (prose, whose
/// marks are mostly the dots that end its sentences) are skipped whole,
/// each byte read with the next, in a loop the compiler vectorizes.
fn next_hot(bytes: &[u8], from: usize) -> Option<usize> {
    // (Without branches: `&` and `|`.)
    let hot = |b: u8, next: u8| is_mark(b) & ((b != b'.') | next.is_ascii_alphanumeric());
    let mut at = from;
    // Whole blocks with the byte after each (the text's last byte has none).
    while let Some(block) = (bytes.get(at..at + 33)).and_then(|b| <&[u8; 33]>::try_from(b).ok()) {
        if (0..32).fold(false, |any, i| any | hot(block[i], block[i + 1])) {
            break;
        }
        at += 32;
    }
    (at..bytes.len()).find(|&i| is_mark(bytes[i]) && is_hot_at(bytes, i))
}

/// Spans of [`hot_spans`] closer than this are read as one (one search
/// costs more than reading a few words).
const SPAN_GAP: usize = 48;

/// The identifier that the patterns' match `text[start..end]` names, if
/// it is one: its class told, checked and trimmed.
fn pattern_entry<'t>(patterns: &Patterns, text: &'t str, start: usize, end: usize) -> Option<&'t str> {
    // The patterns read bytes (their classes ASCII, a small automaton), and
    // each starts and ends beside ASCII: a match is whole characters.
    let mut found = text.get(start..end)?;
    // An absolute path's match holds the character before the path.
    if let Some(rest) = found.strip_prefix(|c: char| " \t\r\n\"'([=,:".contains(c)) {
        if rest.starts_with('/') || rest.starts_with("~/") {
            found = rest;
        }
    }
    let class = patterns.class_of(found.as_bytes())?;
    let found = match class {
        Class::Url
        | Class::Cloud
        | Class::AbsolutePath
        | Class::RelativePath
        | Class::HostPath
        | Class::ImageTag
        | Class::WindowsPath => trim_end(found),
        _ => found,
    };
    // Some classes stand alone: a bare IPv6 address not inside a word
    // (`std::fs`), a kind or an image not inside a longer name
    // (`my-redis:6379`, `old-deploy/x`, which are that name's).
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let (before, after) = (&text[..start], &text[end..]);
    let tied = match class {
        Class::Ipv6 => before.ends_with(word) || after.starts_with(word),
        Class::K8sObject | Class::ImageTag => before.ends_with(|c: char| word(c) || "-./:@".contains(c)),
        _ => false,
    };
    (!found.is_empty() && !tied && accept(class, found)).then_some(found)
}

/// The identifiers in one text, in order: when the text is one JSON value,
/// its [`whole_json`] entries; else the pattern matches (those inside a
/// longer match left out), in order of position, then the matches of
/// `extra` patterns (each whole match an entry).
pub(crate) fn identifiers(text: &str, extra: &[LedgerPattern]) -> Vec<LedgerEntry> {
    if let Some(found) = whole_json(text, extra) {
        return found;
    }
    let mut out = Vec::new();
    matched(text, &|_| false, &mut out);
    extra_matched(text, extra, &mut out);
    out.into_iter().map(|(_, found)| found).collect()
}

/// The identifiers of `text` read as the one JSON object or array it is
/// (`None` when it is not one): its `key: value` entries first, then the
/// built-in patterns' matches in its strings as they read unescaped (those
/// equal to one of its values left out), then the `extra` patterns'
/// matches in its text.
fn whole_json(text: &str, extra: &[LedgerPattern]) -> Option<Vec<LedgerEntry>> {
    let trimmed = text.trim_start();
    if !(trimmed.starts_with('{') || trimmed.starts_with('[')) || text.len() > 1 << 20 {
        return None;
    }
    let value = parse_json(text)?;
    let (mut out, mut values) = (Vec::new(), Set::default());
    json_entries(&value, &mut out, &mut values);
    let mut found = Vec::new();
    match json_matched(&value, &values) {
        Some(unescaped) => out.extend(unescaped),
        None => matched(text, &|found| values.contains(found), &mut found),
    }
    extra_matched(text, extra, &mut found);
    out.extend(found.into_iter().map(|(_, entry)| entry));
    Some(out)
}

/// Adds the built-in patterns' identifiers in `text` (less those `skip`
/// says), with where each starts, to `out`.
fn matched(text: &str, skip: &dyn Fn(&str) -> bool, out: &mut Vec<(usize, LedgerEntry)>) {
    let Some(patterns) = patterns() else {
        return;
    };
    let mut read = |spans: &mut Spans| {
        hot_spans(text, |from, to| {
            // A span starts and ends beside whitespace (or the text's ends):
            // what it holds depends on its bytes alone.
            let span = &text[from..to];
            spans.with(patterns, span, |start, end| {
                let found = &span[start..end];
                if !skip(found) {
                    out.push((from + start, found.into()));
                }
            });
        });
    };
    // The thread's memo, or none while a thread ends (its memo is gone).
    let remembered = SPANS.try_with(|spans| spans.try_borrow_mut().map(|mut spans| read(&mut spans)).is_ok());
    if remembered != Ok(true) {
        read(&mut Spans::default());
    }
}

/// Where the identifiers in `span` (a span [`hot_spans`] gives, or a
/// whole text) are, in order: each match of the patterns told, checked and
/// trimmed, and each of the [`codes`] (which takes the place of the
/// matches inside it: `ORD-2024-00123` is one entry, not `ORD-2024`).
fn span_entries(patterns: &Patterns, span: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    // URLs with a secret: nothing inside them is an entry.
    let mut hidden = Vec::new();
    for m in patterns.all.find_iter(span.as_bytes()) {
        let text = &span[m.start()..m.end()];
        // (A secret needs a user or a query: `@` or `?`.)
        let carries = memchr::memchr2(b'@', b'?', text.as_bytes()).is_some();
        if carries && text.contains("://") && url_holds_secret(text) {
            hidden.push((m.start(), m.end()));
            continue;
        }
        if let Some(entry) = pattern_entry(patterns, span, m.start(), m.end()) {
            // Where the identifier starts (an absolute path's match starts
            // a character before it, maybe on the line before).
            let at = entry.as_ptr() as usize - span.as_ptr() as usize;
            found.push((at, at + entry.len()));
        }
    }
    let mut codes = codes(span);
    codes.retain(|&(start, end, _)| !hidden.iter().any(|&(s, e)| s < end && start < e));
    // (Most codes are a match already: a hash, a ticket.)
    if codes
        .iter()
        .all(|&(start, end, keep)| keep && found.binary_search(&(start, end)).is_ok())
    {
        return found;
    }
    // Each code takes the place of the matches inside it, unless one
    // reaches out of it (then the code is left out); a secret leaves out
    // every match it touches. (Matches are in order and apart, as codes
    // are; one may touch two codes.)
    let mut gone = vec![false; found.len()];
    let mut kept = Vec::with_capacity(codes.len());
    let mut first = 0;
    for (start, end, keep) in codes {
        while first < found.len() && found[first].1 <= start {
            first += 1;
        }
        let touched = (first..found.len()).take_while(|&i| found[i].0 < end);
        let inside = touched.clone().all(|i| found[i].0 >= start && found[i].1 <= end);
        if inside || !keep {
            touched.for_each(|i| gone[i] = true);
        }
        if inside && keep {
            kept.push((start, end));
        }
    }
    let mut all: Vec<(usize, usize)> = (found.into_iter().zip(gone))
        .filter_map(|(m, gone)| (!gone).then_some(m))
        .chain(kept)
        .collect();
    all.sort_unstable();
    all
}

/// The codes in `text`, in order, each with `true` (and the secrets, which
/// hide what they hold, with `false`): runs of ASCII letters, digits, `-`
/// and `_` (less those at their ends) of 6 to 64 bytes, with a letter and
/// a digit, that stand alone. A run is part of a longer token, and not a
/// code, when `.`, `/`, `@`, `\`, `%`, `+`, `#`, a letter outside ASCII, or
/// a `:` that no word comes before (`10:30`, `crate::v2`) comes just before
/// it, or `/`, `@`, `\`, `%`, `+`, `#`, a letter outside ASCII, or a `.` or
/// `:` followed by a letter or digit just after it (a time, a path, a host,
/// an address, a colour). Order numbers, prefixed keys and resource names
/// (`conn_994a82`, `TX-2026-000417`, `i-0abc123def4567890`, `INC0012345`,
/// `order:ORD-2024-00123`) are codes; quantities ([`is_measure`]:
/// `1500ms`, `64-bit`, `1920x1080`), standards ([`is_standard`]:
/// `SHA-256`), types and algorithms ([`is_typed`]: `uint32_t`, `base64`),
/// a few common words ([`NOT_CODES`]: `x86_64`) and what looks like a
/// service's secret key ([`is_secret`]) are not.
fn codes(text: &str) -> Vec<(usize, usize, bool)> {
    let bytes = text.as_bytes();
    // What ties a run to the text before and after it.
    let joins = |c: char| "/@\\%+#".contains(c) || c.is_alphanumeric();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if !PART[usize::from(bytes[at])] {
            at += 1;
            continue;
        }
        // A run, and whether it has a digit (every code has one).
        let start = at;
        let mut digit = false;
        while at < bytes.len() && PART[usize::from(bytes[at])] {
            digit |= bytes[at].is_ascii_digit();
            at += 1;
        }
        let end = at;
        if !digit || end - start < 6 {
            continue;
        }
        // A `:` before it is a key's after a word (`order:ORD-2024-00123`),
        // not after a number or another `:` (`10:30`, `crate::v2_api`).
        let key = start >= 2 && bytes[start - 2].is_ascii_alphabetic();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let next = bytes.get(end + 1).is_some_and(u8::is_ascii_alphanumeric);
        let tied_before = before.is_some_and(|c| joins(c) || c == '.' || (c == ':' && !key));
        let tied_after = after.is_some_and(|c| joins(c) || ((c == '.' || c == ':') && next));
        if tied_before || tied_after {
            continue;
        }
        let trim = |b: &u8| *b == b'-' || *b == b'_';
        let from = start + bytes[start..end].iter().take_while(|b| trim(b)).count();
        let to = end - bytes[from..end].iter().rev().take_while(|b| trim(b)).count();
        let run = &bytes[from..to];
        let secret = is_secret(run);
        if secret || is_code(run) {
            found.push((from, to, !secret));
        }
    }
    found
}

/// Whether `text` holds a secret (see [`codes`]).
fn holds_secret(text: &str) -> bool {
    codes(text).iter().any(|&(_, _, keep)| !keep)
}

/// The bytes of a code's run: ASCII letters, digits, `-` and `_`.
static PART: [bool; 256] = {
    let mut part = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        part[b] = c.is_ascii_alphanumeric() || c == b'-' || c == b'_';
        b += 1;
    }
    part
};

/// Common words with digits that are not codes (of at most 9 bytes; those
/// whose numbers are bit widths are not codes anyway, see [`is_typed`]).
const NOT_CODES: &[&str] = &[
    "sha224",
    "sha384",
    "x86_64",
    "x86-64",
    "python2",
    "python3",
    "utf8mb4",
    "oauth2",
    "blake2b",
    "blake3",
    "argon2",
    "argon2id",
    "ed25519",
    "x25519",
    "chacha20",
    "poly1305",
    "secp256k1",
];

/// How the keys and tokens of common services begin (OpenAI's and
/// Anthropic's, Stripe's secret and restricted keys, GitHub's, GitLab's,
/// Slack's, Hugging Face's, npm's, PyPI's, Google's API keys, AWS access
/// keys): a code that begins so is never copied into a summary.
const SECRETS: &[&str] = &[
    "sk-",
    "sk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxr-",
    "xoxs-",
    "hf_",
    "npm_",
    "pypi-",
    "AIza",
    "AKIA",
    "ASIA",
    "whsec_",
];

/// Whether `run` (ASCII letters, digits, `-` and `_`) looks like a
/// service's secret key: one of [`SECRETS`]' beginnings and 16 bytes or
/// more (AWS's access keys and Google's API keys in their exact shapes).
/// Nothing inside it is an entry either.
fn is_secret(run: &[u8]) -> bool {
    if run.len() < 16 || !b"srghxnpAw".contains(&run[0]) {
        return false;
    }
    let upper = |b: &u8| b.is_ascii_uppercase() || b.is_ascii_digit();
    SECRETS.iter().any(|p| match run.strip_prefix(p.as_bytes()) {
        None => false,
        // AWS's access keys: 16 capitals and digits; Google's: 35 more.
        Some(rest) if *p == "AKIA" || *p == "ASIA" => rest.len() == 16 && rest.iter().all(upper),
        Some(rest) if *p == "AIza" => rest.len() == 35,
        Some(_) => true,
    })
}

/// Whether `run` (ASCII letters, digits, `-` and `_`) is a code: see
/// [`codes`].
fn is_code(run: &[u8]) -> bool {
    (6..=64).contains(&run.len())
        && run.iter().any(u8::is_ascii_alphabetic)
        && run.iter().any(u8::is_ascii_digit)
        && !is_measure(run)
        && !is_standard(run)
        && !is_typed(run)
        && !(run.len() <= 9 && NOT_CODES.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(run)))
        && !is_secret(run)
}

/// Whether `run` is a quantity: a number and its unit or word (`1500ms`,
/// `64-bit`, `5-minute`), or numbers and short lowercase units in turn (a
/// size, a duration, a hex constant: `1920x1080`, `1h30m0s`, `0x7fff`).
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
    // Digits, then (one or two lowercase letters, digits) again and again,
    // then at most two letters.
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

/// Standards whose names read as codes or ticket keys with their numbers
/// (`RFC9110`, `ISO-8601`, `SHA3-256`, `AES-256`, `UTF-8`).
const STANDARDS: &[&str] = &[
    "UTF", "SHA", "ISO", "MD", "TLS", "SSL", "HTTP", "RFC", "AES", "RSA", "DES", "HMAC", "IEEE", "ECMA",
    "CRC", "ECDSA", "IPV",
];

/// Whether `run` is a standard's name and number: one of [`STANDARDS`],
/// then digits, `-` and `_` only.
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
/// or an algorithm (`uint32_t`, `AtomicU64`, `Float32Array`, `from_utf8`,
/// `sha256`, `base64`, `linux-amd64`), not a code (`db-16` and
/// `conn_256aaa` are).
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
        // After a letter: a width that only letters follow is a code's
        // part (`conn_256aaa`, `build-64ab`).
        let lettered = at > 0 && run[at - 1].is_ascii_alphabetic();
        if !(width && lettered) {
            return false;
        }
        at += digits;
    }
    true
}

thread_local! {
    /// The spans read lately on this thread (see [`Spans`]).
    static SPANS: std::cell::RefCell<Spans> = std::cell::RefCell::default();
}

/// What the patterns found in the short spans read lately, by the span's
/// text: identifiers recur (a path, a host, a code block quoted again),
/// and a span read again costs a lookup instead of a search. A hit
/// compares the whole span, so it is always the same text. Bounded: at
/// [`Spans::BYTES`] (the spans, their places, and a slot's cost each) the
/// memo is emptied.
#[derive(Default)]
struct Spans {
    /// By the span's hash: the span and what it holds (a span whose hash
    /// another has replaces it).
    found: std::collections::HashMap<u64, Span, BuildHasherDefault<Quick>>,
    bytes: usize,
}

/// A span [`Spans`] remembers, and where its identifiers start and end.
#[derive(Default)]
struct Span {
    text: Box<str>,
    found: Box<[(u32, u32)]>,
}

impl Spans {
    /// Longer spans are read each time (and cost little more to read than
    /// to look up).
    const LONGEST: usize = 256;
    /// Bytes kept at most.
    const BYTES: usize = 1 << 20;

    /// Calls `each` with [`span_entries`] of `span`, remembered.
    fn with(&mut self, patterns: &Patterns, span: &str, mut each: impl FnMut(usize, usize)) {
        use std::hash::BuildHasher;
        if span.len() > Spans::LONGEST {
            return span_entries(patterns, span)
                .into_iter()
                .for_each(|(start, end)| each(start, end));
        }
        let key = BuildHasherDefault::<Quick>::default().hash_one(span);
        let hit = self.found.get(&key).filter(|s| *s.text == *span);
        let found = match hit {
            Some(s) => &s.found,
            None => {
                let found: Box<[(u32, u32)]> = span_entries(patterns, span)
                    .into_iter()
                    .map(|(start, end)| (start as u32, end as u32))
                    .collect();
                // The span, its places, and about what a slot and two
                // allocations take.
                let size = span.len() + 8 * found.len() + 64;
                if self.bytes + size > Spans::BYTES {
                    *self = Spans::default();
                }
                self.bytes += size;
                let slot = self.found.entry(key).or_default();
                *slot = Span {
                    text: span.into(),
                    found,
                };
                &slot.found
            }
        };
        found
            .iter()
            .for_each(|&(start, end)| each(start as usize, end as usize));
    }
}

/// Adds the matches of the user's `extra` patterns in `text` (each whole
/// match an entry), with where each starts, to `out`.
fn extra_matched(text: &str, extra: &[LedgerPattern], out: &mut Vec<(usize, LedgerEntry)>) {
    for pattern in extra {
        out.extend(
            (pattern.0.find_iter(text))
                .filter(|m| usable(m.as_str()))
                .map(|m| (m.start(), m.as_str().into())),
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
    unescaped: Option<Vec<LedgerEntry>>,
}

/// The identifiers of a text that is not JSON, newest (last) line first,
/// each with its line: what [`identifiers`] finds in each line read alone,
/// from the last line, in one pass of the patterns over the whole text (no
/// match spans lines). A line that is a JSON value gives its `key: value`
/// entries first, and its matches equal to one of its values are left out;
/// one whose strings have escapes is read string by string, unescaped.
fn by_line_from_end(text: &str, extra: &[LedgerPattern]) -> Vec<(usize, LedgerEntry)> {
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
    let mut found: Vec<(usize, LedgerEntry)> = Vec::new();
    for j in &json {
        found.extend(j.entries.iter().map(|e| (j.line, e.clone())));
    }
    let mut matches = Vec::new();
    matched(text, &|_| false, &mut matches);
    let mut line_of = lines();
    // The JSON line at or after the match's (matches come in order).
    let mut next = 0;
    for (at, entry) in matches {
        let n = line_of(at);
        while json.get(next).is_some_and(|j| j.line < n) {
            next += 1;
        }
        // A JSON line's matches equal to one of its values are left out
        // (its extra patterns' are not), and all of one read unescaped.
        let json_line = json.get(next).filter(|j| j.line == n);
        if !json_line.is_some_and(|j| j.unescaped.is_some() || j.values.contains(entry.as_str())) {
            found.push((n, entry));
        }
    }
    let any_json = !json.is_empty();
    for j in json {
        found.extend(j.unescaped.into_iter().flatten().map(|e| (j.line, e)));
    }
    // The user's patterns read each line alone, as they may match across
    // lines or anchor at one.
    if !extra.is_empty() {
        for (n, line) in text.lines().enumerate() {
            let mut extras = Vec::new();
            extra_matched(line, extra, &mut extras);
            found.extend(extras.into_iter().map(|(_, e)| (n, e)));
        }
    }
    // Each line's JSON entries, its matches (its strings', when read
    // unescaped), the extra patterns' (a stable
    // sort keeps each group's order; matches alone are in order), all
    // reversed: newest first.
    if any_json || !extra.is_empty() {
        found.sort_by_key(|&(line, _)| line);
    }
    found.reverse();
    found
}

/// The pieces of a message to read identifiers from: the content's text
/// (with Anthropic's blocks: thinking, a tool result's content, and the
/// strings in a tool call's `input`), each tool call's arguments, newest
/// (last) first.
fn pieces(message: &Message) -> impl Iterator<Item = &str> {
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
    };
    for input in message.parts().iter().filter_map(Part::tool_input) {
        strings_in(input, &mut parts);
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

/// What messages say where identifiers are read (see [`pieces`]): entries
/// they hold verbatim need no line of their own. An entry that is one word
/// of those the patterns read is looked up among such words of theirs
/// (each also without the punctuation around it), any other searched for
/// in their text. An entry found only
/// inside a longer word is listed still: a line spent, nothing lost.
pub(crate) struct Said<'m> {
    pieces: Vec<&'m str>,
    /// The longest piece's length: a longer entry stands in none.
    longest: usize,
    /// Each piece's words (remembered with the piece when it is long
    /// enough to be).
    words: Vec<Arc<Words>>,
    /// The union of the pieces' filters: most entries are in no piece,
    /// and are known not to be at one look.
    filter: Filter,
    /// When that union is more than half full (many words, as in kept
    /// turns of code or logs), a filter of all the words sized to their
    /// number instead.
    wide: Option<Wide>,
}

/// Where a piece's words ([`word_spans`]) are, their [`word_hash`]es,
/// and a filter of them.
#[derive(Default)]
pub(crate) struct Words {
    spans: Vec<(usize, usize)>,
    hashes: Vec<u64>,
    filter: Filter,
}

impl Words {
    fn of(piece: &str) -> Self {
        let spans = word_spans(piece);
        let hashes: Vec<u64> = (spans.iter())
            .map(|&(start, end)| word_hash(&piece[start..end]))
            .collect();
        let mut filter = Filter::default();
        hashes.iter().for_each(|&hash| filter.add(hash));
        Words {
            spans,
            hashes,
            filter,
        }
    }
}

/// A Bloom filter of 16 bits a word, two a word: about one word in 70 not
/// among those added may be held, however many they are.
struct Wide {
    bits: Vec<u64>,
    /// The number of bits less one (a power of two, less one).
    mask: u64,
}

impl Wide {
    /// A filter of `hashes` ([`word_hash`]es), `n` of them.
    fn of(hashes: impl Iterator<Item = u64>, n: usize) -> Self {
        let size = n.saturating_mul(16).clamp(1 << 10, 1 << 30).next_power_of_two();
        let (mut bits, mask) = (vec![0u64; size / 64], size as u64 - 1);
        hashes.for_each(|hash| set_bits(&mut bits, bits_of(hash, mask)));
        Wide { bits, mask }
    }

    fn may_hold(&self, hash: u64) -> bool {
        has_bits(&self.bits, bits_of(hash, self.mask))
    }
}

/// The two bits of a word's `hash` in a filter of `mask + 1` bits (a
/// power of two), from its two halves.
fn bits_of(hash: u64, mask: u64) -> [u64; 2] {
    [hash & mask, (hash >> 32) & mask]
}

fn set_bits(words: &mut [u64], bits: [u64; 2]) {
    bits.iter()
        .for_each(|&bit| words[(bit / 64) as usize] |= 1 << (bit % 64));
}

fn has_bits(words: &[u64], bits: [u64; 2]) -> bool {
    bits.iter()
        .all(|&bit| words[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
}

/// The hash a word's [`Filter`] bits come from: [`key_of`]'s, so that an
/// entry's key is its hash when the entry is one word.
fn word_hash(word: &str) -> u64 {
    use std::hash::BuildHasher;
    BuildHasherDefault::<Quick>::default().hash_one(word)
}

/// A Bloom filter of 512 bits, two a word: whether a word may be among
/// those added, or is surely not.
#[derive(Clone, Copy, Default)]
struct Filter([u64; 8]);

impl Filter {
    /// The two bits of a word's `hash` ([`word_hash`]).
    fn bits(hash: u64) -> [u64; 2] {
        bits_of(hash, 511)
    }

    fn add(&mut self, hash: u64) {
        set_bits(&mut self.0, Filter::bits(hash));
    }

    fn may_hold(&self, bits: [u64; 2]) -> bool {
        has_bits(&self.0, bits)
    }

    fn union(&mut self, other: &Filter) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a |= b);
    }

    /// Whether more than half the bits are set (then one word in four
    /// that is not among those added would pass).
    fn crowded(&self) -> bool {
        self.0.iter().map(|w| w.count_ones()).sum::<u32>() > 256
    }
}

impl<'m> Said<'m> {
    /// What `messages` say. Each piece's words are found once while the
    /// memo of texts remembers it (a stateless compactor's kept turns are
    /// the same turns request after request).
    pub(crate) fn new(messages: &'m [Message]) -> Self {
        // (Sized once: most messages are one piece.)
        let pieces: Vec<&str> = {
            let mut all = Vec::with_capacity(messages.len());
            all.extend(messages.iter().flat_map(pieces));
            all
        };
        // The pieces this thread's last `Said` held, in order: a stateless
        // compactor keeps the same turns again (with new ones after them,
        // or the oldest gone), and a piece met where it was, or the first
        // one anywhere among them, is compared whole instead of looked up.
        let mut last = said_last(None);
        let (mut next, mut bytes) = (Vec::with_capacity(pieces.len()), 0usize);
        let mut at = 0;
        let mut words = Vec::with_capacity(pieces.len());
        for &piece in &pieces {
            if piece.len() < Recall::MIN {
                words.push(Arc::new(Words::of(piece)));
                continue;
            }
            let is = |s: &Option<Arc<Seen>>| s.as_ref().is_some_and(|s| *s.text == *piece);
            let hit = match last.get(at).is_some_and(is) {
                true => Some(at),
                false if next.is_empty() => last.iter().position(is),
                false => None,
            };
            let seen = match hit.and_then(|i| last[i].take().map(|seen| (i, seen))) {
                Some((i, seen)) => {
                    at = i + 1;
                    seen
                }
                None => RECALL.shared(piece),
            };
            words.push(Arc::clone(seen.words.get_or_init(|| Arc::new(Words::of(piece)))));
            // (A piece too long for the memo has no text to compare: not
            // held.)
            bytes = bytes.saturating_add(piece.len());
            next.push(Some(seen).filter(|seen| !seen.text.is_empty()));
        }
        // (Bounded as a thread's front is.)
        if bytes > Front::BYTES || next.len() > Front::PIECES {
            next.clear();
        }
        drop(last);
        said_last(Some(next));
        Said::of(pieces, words)
    }

    /// What `text` says.
    pub(crate) fn text(text: &'m str) -> Self {
        Said::of(vec![text], vec![Arc::new(Words::of(text))])
    }

    /// `pieces` with their `words`.
    fn of(pieces: Vec<&'m str>, words: Vec<Arc<Words>>) -> Self {
        let mut filter = Filter::default();
        words.iter().for_each(|w| filter.union(&w.filter));
        let wide = filter.crowded().then(|| {
            let n = words.iter().map(|w| w.hashes.len()).sum();
            Wide::of(words.iter().flat_map(|w| w.hashes.iter().copied()), n)
        });
        Said {
            longest: pieces.iter().map(|p| p.len()).max().unwrap_or(0),
            pieces,
            words,
            filter,
            wide,
        }
    }

    /// Whether a word whose [`word_hash`] is `hash` may be one of the
    /// pieces' words (is surely not when `false`).
    fn may_have(&self, hash: u64) -> bool {
        match &self.wide {
            Some(wide) => wide.may_hold(hash),
            None => self.filter.may_hold(Filter::bits(hash)),
        }
    }

    /// Whether `word`, whose [`word_hash`] is `hash`, is one of the
    /// pieces' words.
    fn has_hashed(&self, word: &str, hash: u64) -> bool {
        let bits = Filter::bits(hash);
        self.may_have(hash)
            && (self.pieces.iter().zip(&self.words)).any(|(piece, words)| {
                words.filter.may_hold(bits)
                    && (words.spans.iter().zip(&words.hashes))
                        .any(|(&(start, end), &h)| h == hash && piece.get(start..end) == Some(word))
            })
    }

    /// Whether `entry` stands verbatim in what was said.
    pub(crate) fn holds(&self, entry: &str) -> bool {
        entry.len() <= self.longest && self.holds_keyed(entry, key_of(entry), is_loose(entry))
    }

    /// [`holds`](Self::holds), `key` the entry's [`key_of`] (the hash of
    /// its value, which is the entry when it is one word) and `loose`
    /// whether it is loose ([`is_loose`]): an entry that is not, most
    /// often in no piece, is known so by its key alone.
    pub(crate) fn holds_keyed(&self, entry: &str, key: u64, loose: bool) -> bool {
        debug_assert!(key == key_of(entry) && loose == is_loose(entry));
        if entry.len() > self.longest {
            return false;
        }
        if !loose {
            // Its value is one word: said among the words, or not at all
            // (a `key: value` entry not whole either, or only inside a
            // longer word).
            if !self.may_have(key) {
                return false;
            }
            let value = value_of(entry);
            if !self.has_hashed(value, key) {
                return false;
            }
            if value.len() == entry.len() {
                return true;
            }
        }
        self.pieces.iter().any(|p| covered(entry, p))
    }
}

/// Where the words of `piece` that [`Said`] keeps are: each word
/// [`hot_words`] finds, and the same word without the quotes, brackets and
/// punctuation around it when it has some.
fn word_spans(piece: &str) -> Vec<(usize, usize)> {
    // The codes inside words (`id=conn_994a82`) too.
    let mut spans: Vec<(usize, usize)> = (codes(piece).into_iter())
        .filter_map(|(start, end, keep)| keep.then_some((start, end)))
        .collect();
    hot_words(piece.as_bytes(), |start, end| {
        let word = &piece[start..end];
        spans.push((start, end));
        let bare = word
            .trim_start_matches(['"', '\'', '`', '(', '[', '{', '<'])
            .trim_end_matches(['.', ',', ';', ':', '!', '?', '"', '\'', '`', ')', ']', '}', '>']);
        if bare.len() != word.len() {
            let from = start + (bare.as_ptr() as usize - word.as_ptr() as usize);
            spans.push((from, from + bare.len()));
        }
    });
    spans
}

/// A set hashed with [`Quick`].
type Set<T> = HashSet<T, BuildHasherDefault<Quick>>;

/// Every string inside `value`, keys and values, in order (as
/// [`json_strings`] reads a JSON text's).
fn strings_in<'v>(value: &'v serde_json::Value, out: &mut Vec<&'v str>) {
    match value {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| strings_in(v, out)),
        serde_json::Value::Object(map) => map.iter().for_each(|(key, v)| {
            out.push(key);
            strings_in(v, out);
        }),
        _ => {}
    }
}

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

/// The candidate entries for a fold: from the folded messages (newest
/// first), then the previous ledger, then identifiers in the previous prose;
/// deduplicated, the first (newest) place kept; each with its [`key_of`]
/// and whether it is loose.
/// Reading stops once `enough` entries are found or `max_bytes` of text
/// were read, or, when fewer than a quarter of `enough` were found in those
/// (the room would go unused: the identifiers of a long history's opening
/// turns, under turns of prose), 8 times as much.
/// With `remember` (and no `extra` patterns), each piece's entries are
/// found once per process ([`Recall`]), and a reading that meets the
/// pieces of one of this thread's kept readings takes its entries
/// ([`Reading`]).
pub(crate) fn candidates<'m>(
    folded: impl DoubleEndedIterator<Item = &'m Message>,
    previous_prose: &str,
    previous_ledger: &[&str],
    extra: &[LedgerPattern],
    enough: usize,
    max_bytes: usize,
    remember: bool,
) -> Candidates {
    let memo = remember && extra.is_empty();
    // (A reading that follows another to its end gathers nothing: sized
    // when a piece is read.)
    let mut g = Gathering::new(if memo { 0 } else { enough });
    let (mut read, mut limit, mut extended) = (0usize, max_bytes, false);
    let mut all = folded.rev().flat_map(pieces);
    // The older part of a piece cut at `max_bytes`, read if reading goes on.
    let mut older: Option<&str> = None;
    // This thread's readings (see `Reading`); the one whose pieces these
    // are so far, followed instead of read; the one this reading writes.
    let mut readings = match memo {
        true => readings(None),
        false => Readings::default(),
    };
    let mut follow: Option<usize> = None;
    let mut fresh: Option<Reading> = None;
    // Whether this reading is written (its first piece was seen before).
    let mut record = false;
    // Pieces taken.
    let mut k = 0;
    while let Some(piece) = older.take().or_else(|| all.next()) {
        let found = match follow {
            Some(r) => readings.kept[r].found_after(k),
            None => g.out.texts.len(),
        };
        if found >= enough {
            break;
        }
        if read >= limit {
            // Too few found for the room: 8 times as far (once).
            if !extended && found.saturating_mul(4) < enough {
                (limit, extended) = (max_bytes.saturating_mul(8), true);
            } else {
                break;
            }
        }
        // The newest end of a piece longer than what is left to read,
        // from a word boundary so that no identifier is read in part.
        let left = limit - read;
        let piece = if piece.len() > left {
            let mut from = piece.len() - left;
            while !piece.is_char_boundary(from) {
                from += 1;
            }
            let at = piece[from..]
                .find(char::is_whitespace)
                .map_or(piece.len(), |at| from + at);
            older = Some(&piece[..at]);
            &piece[at..]
        } else {
            piece
        };
        // A piece cut short is the last one read, until the limit moves.
        read = match older.is_none() {
            true => read.saturating_add(piece.len()),
            false => limit,
        };
        if memo && k == 0 {
            let same =
                |r: &Reading| r.enough == enough && r.max_bytes == max_bytes && r.piece(0) == Some(piece);
            follow = readings.kept.iter().position(same);
            record = follow.is_some() || readings.sighted(piece, enough, max_bytes);
            if follow.is_none() {
                g = Gathering::new(enough);
            }
        } else if let Some(r) = follow.filter(|&r| readings.kept[r].piece(k) != Some(piece)) {
            // Another piece: what the reading found before it, then read on.
            (g, fresh) = readings.kept[r].up_to(k, enough);
            follow = None;
        }
        k += 1;
        if follow.is_some() {
            continue;
        }
        // (The newest end of a piece is the same text each time too.)
        let scan = || with_keys(newest_first(piece, extra));
        match memo && piece.len() >= Recall::MIN {
            true => RECALL.with(piece, |seen| g.take(seen.found.get_or_init(scan), enough)),
            false => g.take(&scan(), enough),
        }
        if record {
            let reading = fresh.get_or_insert_with(|| Reading::new(enough, max_bytes));
            match reading.text.len().saturating_add(piece.len()) <= Reading::BYTES {
                true => reading.push(piece, g.out.texts.len()),
                // Too long a reading to keep.
                false => (fresh, record) = (None, false),
            }
        }
    }
    if let Some(r) = follow {
        let reading = &readings.kept[r];
        if k == reading.ends.len() && reading.prose == previous_prose && reading.ledger == previous_ledger {
            // The same reading: what it found.
            let found = reading.found.clone();
            let reading = readings.kept.remove(r);
            readings.kept.insert(0, reading);
            let _ = self::readings(Some(readings));
            return found;
        }
        // The same pieces, fewer of them, or another summary before them.
        (g, fresh) = reading.up_to(k, enough);
    }
    if k == 0 {
        // (No piece read: sized for the previous ledger now.)
        g = Gathering::new(enough);
    }
    for &entry in previous_ledger {
        g.add(&entry.into(), key_of(entry), is_loose(entry));
    }
    for entry in identifiers(previous_prose, extra).into_iter().rev() {
        g.add(&entry, key_of(&entry), is_loose(&entry));
    }
    // (Kept within its bound whole: its text, the previous summary, and
    // about what an entry's place takes, its text shared.)
    let size = |r: &Reading| {
        let ledger: usize = previous_ledger.iter().map(|e| e.len()).sum();
        (r.text.len())
            .saturating_add(previous_prose.len())
            .saturating_add(ledger)
            .saturating_add(g.out.texts.len().saturating_mul(32))
    };
    if let Some(mut reading) = fresh.filter(|r| size(r) <= Reading::BYTES) {
        reading.prose = previous_prose.to_owned();
        reading.ledger = previous_ledger.iter().map(|&e| e.to_owned()).collect();
        reading.found = g.out.clone();
        readings.kept.insert(0, reading);
        readings.kept.truncate(Reading::KEPT);
    }
    if memo {
        let _ = self::readings(Some(readings));
    }
    g.out
}

/// [`candidates`]' entries so far, one per identifier (`key: value` and a
/// bare `value` are the same one), and where each key's first is.
struct Gathering {
    out: Candidates,
    firsts: Firsts,
}

impl Gathering {
    /// Room for `enough` entries.
    fn new(enough: usize) -> Self {
        let likely = enough.min(1 << 12);
        Gathering {
            out: Candidates {
                texts: Vec::with_capacity(likely),
                keys: Vec::with_capacity(likely),
                loose: Vec::with_capacity(likely),
            },
            firsts: Firsts::new(enough),
        }
    }

    /// Adds `entry`, of `key`, unless its identifier is listed.
    fn add(&mut self, entry: &LedgerEntry, key: u64, loose: bool) {
        let out = &mut self.out;
        if let Some(first) = self.firsts.first(key, &out.keys) {
            // Listed already (most often as the same text), unless two
            // identifiers share the hash.
            let texts = &out.texts;
            if texts[first] == **entry {
                return;
            }
            let value = value_of(entry);
            let listed = |e: &LedgerEntry| value_of(e) == value;
            if listed(&texts[first]) || texts.iter().any(listed) {
                return;
            }
        }
        self.firsts.note(key, out.texts.len());
        out.texts.push(entry.clone());
        out.keys.push(key);
        out.loose.push(loose);
    }

    /// Adds a piece's entries, in order, until `enough` (a line's taken
    /// whole).
    fn take(&mut self, found: &[Found], enough: usize) {
        let mut line = None;
        for f in found {
            if line != Some(f.line) && self.out.texts.len() >= enough {
                break;
            }
            line = Some(f.line);
            self.add(&f.entry, f.key, f.loose);
        }
    }
}

thread_local! {
    /// This thread's readings of candidates lately (see [`Reading`]),
    /// newest first.
    static READINGS: std::cell::RefCell<Readings> = std::cell::RefCell::default();
}

/// This thread's readings, taken out (put back with `Some`).
fn readings(back: Option<Readings>) -> Readings {
    swap_local(&READINGS, back)
}

/// The value of this thread's `cell`, taken out (the cell holds `back`
/// then, or the default): the default while the thread ends, or while the
/// value is out.
fn swap_local<T: Default>(cell: &'static std::thread::LocalKey<std::cell::RefCell<T>>, back: Option<T>) -> T {
    (cell.try_with(|value| {
        let mut value = value.try_borrow_mut().ok()?;
        Some(match back {
            Some(back) => std::mem::replace(&mut *value, back),
            None => std::mem::take(&mut *value),
        })
    }))
    .ok()
    .flatten()
    .unwrap_or_default()
}

/// A thread's readings of [`candidates`] (see [`Reading`]), newest first,
/// and the first pieces of the latest readings not kept: a reading is
/// kept when its first piece was seen before with the same limits (a
/// compactor whose cut stays where it was), so that a compactor whose cut
/// moves on each request (and whose readings would never be followed)
/// pays no copy of what it read.
#[derive(Default)]
struct Readings {
    kept: Vec<Reading>,
    /// A hash of each first piece and its limits, the latest
    /// [`Readings::SIGHTED`] of them.
    sighted: [u64; Readings::SIGHTED],
    next: usize,
}

impl Readings {
    const SIGHTED: usize = 8;

    /// Whether a reading of first piece `piece` with these limits was
    /// seen lately; noted if not. (A hash, to choose what to keep: what a
    /// kept reading gives is always compared whole.)
    fn sighted(&mut self, piece: &str, enough: usize, max_bytes: usize) -> bool {
        use std::hash::{BuildHasher, Hash, Hasher};
        let mut hasher = BuildHasherDefault::<Quick>::default().build_hasher();
        (enough, max_bytes).hash(&mut hasher);
        match piece.len() >= Recall::MIN {
            true => RECALL.key(piece).hash(&mut hasher),
            false => piece.hash(&mut hasher),
        }
        let sighting = hasher.finish();
        if self.sighted.contains(&sighting) {
            return true;
        }
        self.sighted[self.next] = sighting;
        self.next = (self.next + 1) % Readings::SIGHTED;
        false
    }
}

/// One reading of [`candidates`]: its limits, the pieces it read (their
/// text, whole), how many entries it had found after each, and what it
/// found in all. A stateless compactor folds the same turns request after
/// request (until the cut moves), and a reading that meets the same
/// pieces in the same order, with the same limits and the same previous
/// summary, finds the same entries: it follows this one, comparing each
/// piece whole (so the entries are always what reading it would find),
/// and takes its entries instead of reading and merging each piece's.
/// A reading that parts from it takes the entries found before the piece
/// that differs and reads on.
#[derive(Default)]
struct Reading {
    enough: usize,
    max_bytes: usize,
    /// The pieces read, joined: piece `k` ends at `ends[k]`.
    text: String,
    ends: Vec<usize>,
    /// Entries found after each piece.
    counts: Vec<usize>,
    prose: String,
    ledger: Vec<String>,
    found: Candidates,
}

impl Reading {
    /// Readings a thread keeps.
    const KEPT: usize = 4;
    /// The most a kept reading holds: the text read (a fold of 4 000
    /// tokens reads 32 KiB, 256 KiB when it must read 8 times as far), the
    /// previous summary, and its entries' places.
    const BYTES: usize = 1 << 18;

    fn new(enough: usize, max_bytes: usize) -> Self {
        Reading {
            enough,
            max_bytes,
            ..Reading::default()
        }
    }

    /// Piece `k`, if it read that many.
    fn piece(&self, k: usize) -> Option<&str> {
        let end = *self.ends.get(k)?;
        let start = k.checked_sub(1).map_or(0, |j| self.ends[j]);
        self.text.get(start..end)
    }

    /// Entries found after the first `k` pieces.
    fn found_after(&self, k: usize) -> usize {
        k.checked_sub(1).map_or(0, |j| self.counts[j])
    }

    /// Adds piece `piece`, after which `found` entries were found.
    fn push(&mut self, piece: &str, found: usize) {
        self.text.push_str(piece);
        self.ends.push(self.text.len());
        self.counts.push(found);
    }

    /// What the first `k` pieces gave (their entries, gathered for at most
    /// `enough`), and a reading of them to go on with.
    fn up_to(&self, k: usize, enough: usize) -> (Gathering, Option<Reading>) {
        let n = self.found_after(k);
        let mut g = Gathering::new(enough);
        g.out.texts.extend_from_slice(&self.found.texts[..n]);
        g.out.keys.extend_from_slice(&self.found.keys[..n]);
        g.out.loose.extend_from_slice(&self.found.loose[..n]);
        for (i, &key) in g.out.keys.iter().enumerate() {
            g.firsts.note(key, i);
        }
        let end = k.checked_sub(1).map_or(0, |j| self.ends[j]);
        let reading = Reading {
            enough: self.enough,
            max_bytes: self.max_bytes,
            text: self.text[..end].to_owned(),
            ends: self.ends[..k].to_vec(),
            counts: self.counts[..k].to_vec(),
            ..Reading::default()
        };
        (g, Some(reading))
    }
}

/// Where the first of [`candidates`]' entries with each key is.
// (One lives on the stack for one call: its size costs nothing, a box would
// cost an allocation.)
#[allow(clippy::large_enum_variant)]
enum Firsts {
    /// For a ledger of a few hundred entries at most: a bit for each key's
    /// low bits. An entry whose bit is clear is new (most are), with no
    /// search and no table to fill; one whose bit is set is looked for
    /// among the keys.
    Bits([u64; 64]),
    /// For a larger one, by key.
    Map(std::collections::HashMap<u64, usize, BuildHasherDefault<Quick>>),
}

impl Firsts {
    /// Entries at most for [`Firsts::Bits`]: a search among the keys stays
    /// shorter than a table's upkeep.
    const FEW: usize = 512;

    fn new(enough: usize) -> Self {
        match enough <= Firsts::FEW {
            true => Firsts::Bits([0; 64]),
            false => Firsts::Map(std::collections::HashMap::with_capacity_and_hasher(
                enough.min(1 << 12),
                Default::default(),
            )),
        }
    }

    /// The index of the first entry with `key`, if any (`keys` the entries').
    fn first(&self, key: u64, keys: &[u64]) -> Option<usize> {
        match self {
            Firsts::Bits(bits) => {
                let bit = key as usize % 4096;
                (bits[bit / 64] & 1 << (bit % 64) != 0)
                    .then(|| keys.iter().position(|&k| k == key))
                    .flatten()
            }
            Firsts::Map(map) => map.get(&key).copied(),
        }
    }

    /// Notes that entry `index` has `key` (the first with it is kept).
    fn note(&mut self, key: u64, index: usize) {
        match self {
            Firsts::Bits(bits) => {
                let bit = key as usize % 4096;
                bits[bit / 64] |= 1 << (bit % 64);
            }
            Firsts::Map(map) => {
                map.entry(key).or_insert(index);
            }
        }
    }
}

/// An identifier found in a piece, with what is known of it once found.
#[derive(Clone, Debug)]
struct Found {
    /// Its line.
    line: usize,
    entry: LedgerEntry,
    /// Its [`key_of`].
    key: u64,
    /// Whether it is loose ([`is_loose`]).
    loose: bool,
}

/// `found` with each entry's [`key_of`] and looseness.
fn with_keys(found: Vec<(usize, LedgerEntry)>) -> Vec<Found> {
    if found.is_empty() {
        return Vec::new();
    }
    found
        .into_iter()
        .map(|(line, entry)| Found {
            line,
            key: key_of(&entry),
            loose: is_loose(&entry),
            entry,
        })
        .collect()
}

/// The identifiers of one piece, newest first, each with its line: a JSON
/// piece's whole (its keys name its values) as one line, any other's line
/// by line from the end.
fn newest_first(piece: &str, extra: &[LedgerPattern]) -> Vec<(usize, LedgerEntry)> {
    // No built-in pattern matches outside a hot word (the patterns read
    // only those), nor a JSON key without a brace or bracket: most short
    // pieces of prose are read at once.
    let bytes = piece.as_bytes();
    if extra.is_empty() && next_hot(bytes, 0).is_none() && memchr::memchr2(b'{', b'[', bytes).is_none() {
        return Vec::new();
    }
    // A piece that is one JSON value is one line; any other (JSON Lines
    // too) is read by line.
    match whole_json(piece, extra) {
        Some(found) => found.into_iter().rev().map(|e| (0, e)).collect(),
        None => by_line_from_end(piece, extra),
    }
}

/// The pieces read lately, process-wide: a stateless compactor reads the
/// same history again on every request, and finds each piece's identifiers
/// once (see [`Recall`]).
static RECALL: Recall = Recall::new();

/// The identifiers found lately in pieces of [`Recall::MIN`] bytes or
/// more, each with the piece's text: a lookup finds its bucket by a keyed
/// hash of the piece's length and a few samples of its bytes, and compares
/// the whole text, so a hit is always the same text (a copy costs less to
/// compare than a hash of the whole costs to compute, and no text can be
/// made to stand for another). Bounded: a shard that holds more than
/// [`Recall::SHARD_BYTES`] of text is emptied, a bucket keeps its newest
/// [`Recall::PER_BUCKET`].
struct Recall {
    /// The hash's seed, random per process.
    key: OnceLock<u64>,
    shards: [std::sync::Mutex<Shard>; Recall::SHARDS],
}

/// One of [`Recall`]'s shards.
#[derive(Default)]
struct Shard {
    /// By the texts' keyed hash (the map's own hash of it the fast one).
    buckets: Option<std::collections::HashMap<u64, Vec<Arc<Seen>>, BuildHasherDefault<Quick>>>,
    bytes: usize,
}

/// A piece read, what was found in it, and where its words are (each
/// found when first asked for).
struct Seen {
    text: Box<str>,
    found: OnceLock<Vec<Found>>,
    words: OnceLock<Arc<Words>>,
}

thread_local! {
    /// The pieces this thread's last [`Said::new`] held, in order.
    static SAID_LAST: std::cell::RefCell<Vec<Option<Arc<Seen>>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// This thread's [`SAID_LAST`], taken out (put back with `Some`).
fn said_last(back: Option<Vec<Option<Arc<Seen>>>>) -> Vec<Option<Arc<Seen>>> {
    swap_local(&SAID_LAST, back)
}

thread_local! {
    /// This thread's pieces read lately (see [`Front`]).
    static FRONT: std::cell::RefCell<Front> = std::cell::RefCell::default();
}

/// The pieces a thread read lately, in front of [`Recall`]'s shards: by
/// the piece's key (a later piece of the same key takes its place), each
/// hit compared whole as in the shards. A lookup here takes no lock and
/// changes no count of references, which cost more than the rest of a
/// lookup. It holds what the shards hold, shared, and keeps it alive after
/// the shards let it go: at most [`Front::BYTES`] of text and
/// [`Front::PIECES`] pieces a thread, then it is emptied. A piece longer
/// than that bound, or one the shards do not keep, is not held.
#[derive(Default)]
struct Front {
    pieces: std::collections::HashMap<u64, Arc<Seen>, BuildHasherDefault<Quick>>,
    bytes: usize,
}

impl Front {
    /// Pieces held at most.
    const PIECES: usize = 4096;
    /// Bytes of text held at most.
    const BYTES: usize = 1 << 20;

    /// The piece `text` of key `key`, held, else from `shared` (then held,
    /// unless it is not to be: `Err`).
    fn find(
        &mut self,
        key: u64,
        text: &str,
        shared: impl Fn() -> Arc<Seen>,
    ) -> Result<&Arc<Seen>, Arc<Seen>> {
        if self.pieces.get(&key).is_none_or(|seen| *seen.text != *text) {
            let seen = shared();
            // (The shards keep no copy of a text longer than a shard.)
            if seen.text.is_empty() || seen.text.len() > Front::BYTES {
                return Err(seen);
            }
            if let Some(old) = self.pieces.remove(&key) {
                self.bytes -= old.text.len();
            }
            if self.bytes + seen.text.len() > Front::BYTES || self.pieces.len() >= Front::PIECES {
                self.pieces.clear();
                self.bytes = 0;
            }
            self.bytes += seen.text.len();
            return Ok(self.pieces.entry(key).insert_entry(seen).into_mut());
        }
        self.pieces.get(&key).ok_or_else(shared)
    }
}

impl Recall {
    /// Shorter pieces are read each time (they cost little to read).
    const MIN: usize = 8;
    const SHARDS: usize = 8;
    /// Bytes of text a shard holds at most.
    const SHARD_BYTES: usize = 4 << 20;
    /// Texts one bucket holds at most.
    const PER_BUCKET: usize = 4;

    const fn new() -> Self {
        Recall {
            key: OnceLock::new(),
            shards: [const {
                std::sync::Mutex::new(Shard {
                    buckets: None,
                    bytes: 0,
                })
            }; Recall::SHARDS],
        }
    }

    /// Calls `f` with the remembered piece `text` (of [`Recall::MIN`]
    /// bytes or more), remembered now if it was not: from this thread's
    /// [`Front`] when it holds it (no lock, no count of references
    /// changed), else from the shared shards.
    fn with<R>(&self, text: &str, mut f: impl FnMut(&Seen) -> R) -> R {
        let key = self.key(text);
        // (Not while this thread's front is in use or gone: the shards.)
        let front = FRONT.try_with(|front| {
            let mut front = front.try_borrow_mut().ok()?;
            Some(match front.find(key, text, || self.get(key, text)) {
                Ok(seen) => f(seen),
                Err(seen) => f(&seen),
            })
        });
        match front {
            Ok(Some(r)) => r,
            _ => f(&self.get(key, text)),
        }
    }

    /// The remembered piece `text` (of [`Recall::MIN`] bytes or more),
    /// remembered now if it was not: as [`with`](Self::with) finds it.
    fn shared(&self, text: &str) -> Arc<Seen> {
        let key = self.key(text);
        let front = FRONT.try_with(|front| {
            let mut front = front.try_borrow_mut().ok()?;
            Some(match front.find(key, text, || self.get(key, text)) {
                Ok(seen) => Arc::clone(seen),
                Err(seen) => seen,
            })
        });
        match front {
            Ok(Some(seen)) => seen,
            _ => self.get(key, text),
        }
    }

    /// The keyed hash `text` is remembered by: its length and a few samples
    /// of its bytes.
    fn key(&self, text: &str) -> u64 {
        use std::hash::{BuildHasher, Hash, Hasher};
        let bytes = text.as_bytes();
        // A fast hash, seeded: a bucket holds few texts and every hit is
        // compared whole, so a collision costs a lookup, never a wrong text.
        let seed = *self
            .key
            .get_or_init(|| std::hash::RandomState::new().hash_one(0u8));
        let mut hasher = Quick(seed);
        bytes.len().hash(&mut hasher);
        // Eight 8-byte samples, evenly spread, the last ending the text.
        let last = bytes.len() - 8;
        let step = last / 7;
        for i in 0..7 {
            hasher.write_u64(sample(bytes, i * step));
        }
        hasher.write_u64(sample(bytes, last));
        hasher.finish()
    }

    /// The remembered piece `text`, of [`key`](Self::key) `key`, from the
    /// shards, remembered now if it was not.
    fn get(&self, key: u64, text: &str) -> Arc<Seen> {
        let shard = &self.shards[(key >> 32) as usize % Recall::SHARDS];
        // (A shard whose lock cannot be had soon is passed by: see
        // `memo_lock`.)
        let seen = memo_lock(shard).and_then(|shard| {
            (shard.buckets.as_ref())
                .and_then(|b| b.get(&key))
                .and_then(|bucket| bucket.iter().find(|s| *s.text == *text).cloned())
        });
        if let Some(seen) = seen {
            return seen;
        }
        // A text longer than a shard is read each time (not kept, not copied).
        let kept = text.len() <= Recall::SHARD_BYTES;
        let seen = Arc::new(Seen {
            text: if kept { text.into() } else { Box::default() },
            found: OnceLock::new(),
            words: OnceLock::new(),
        });
        if !kept {
            return seen;
        }
        let Some(mut guard) = memo_lock(shard) else {
            return seen;
        };
        let shard = &mut *guard;
        // An emptied shard's pieces are dropped after the lock is released.
        let emptied =
            (shard.bytes.saturating_add(text.len()) > Recall::SHARD_BYTES).then(|| std::mem::take(shard));
        shard.bytes += text.len();
        let bucket = shard
            .buckets
            .get_or_insert_with(Default::default)
            .entry(key)
            .or_default();
        if bucket.len() >= Recall::PER_BUCKET {
            let oldest = bucket.remove(0);
            shard.bytes -= oldest.text.len();
        }
        bucket.push(Arc::clone(&seen));
        drop(guard);
        drop(emptied);
        seen
    }
}

/// The 8 bytes of `bytes` at `at`, as a number.
fn sample(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// The identifier an entry names: the value of a `key: value` entry.
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
    entry.len() <= prose.len() && memchr::memmem::find(prose.as_bytes(), entry.as_bytes()).is_some()
}

/// `prose` followed by the ledger section listing `entries` (none: `prose`).
pub(crate) fn render(prose: &str, entries: &[&str]) -> String {
    if entries.is_empty() {
        return prose.to_owned();
    }
    let mut out = String::with_capacity(
        prose.len() + SECTION_START.len() + entries.iter().map(|e| e.len() + 3).sum::<usize>(),
    );
    out.push_str(prose);
    out.push_str(SECTION_START);
    push_lines(&mut out, entries);
    out
}

/// A summary's text split into its prose and its ledger entries; a text
/// without a section is all prose.
pub(crate) fn split(body: &str) -> (&str, Vec<&str>) {
    match body.rfind(SECTION_START) {
        Some(at) => {
            let entries = body[at + SECTION_START.len()..]
                .lines()
                .filter_map(|line| line.strip_prefix("- "))
                .filter(|entry| !entry.is_empty())
                .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(text: &str) -> Vec<LedgerEntry> {
        identifiers(text, &[])
    }

    /// What `recall` remembers found in `text`, found by `scan` if nothing.
    fn found(
        recall: &Recall,
        text: &str,
        scan: impl FnOnce() -> Vec<(usize, LedgerEntry)>,
    ) -> Vec<(usize, LedgerEntry)> {
        let mut scan = Some(scan);
        let found = recall.with(text, |seen| {
            (seen
                .found
                .get_or_init(|| with_keys(scan.take().map(|scan| scan()).unwrap_or_default())))
            .clone()
        });
        found.into_iter().map(|f| (f.line, f.entry)).collect()
    }

    /// A kept ledger's total stays the sum of its entries' counts however
    /// large they are (a cap that truncates, an entry found again).
    #[test]
    fn huge_counts_keep_the_total() {
        let huge = |_: &str| usize::MAX / 2;
        let texts = |n: usize| (0..n).map(|i| format!("/srv/{i}.csv")).collect::<Vec<_>>();
        let sum = |k: &Kept| k.entries.tokens.iter().map(|&t| t as u128).sum::<u128>();
        let mut kept = Kept::new(Entries::counted(texts(3), &huge));
        kept.fold(
            Kept::default(),
            Edit {
                again: &[],
                dropped: &[],
                cap: 1,
            },
        );
        assert_eq!(kept.total, sum(&kept), "truncated");
        let mut kept = Kept::new(Entries::counted(texts(3), &huge));
        let fresh = Kept::new(Entries::counted(vec!["/srv/0.csv".to_owned()], &|_: &str| 1));
        kept.fold(
            fresh,
            Edit {
                again: &[0],
                dropped: &[],
                cap: 10,
            },
        );
        assert_eq!(kept.total, sum(&kept), "found again");
        assert_eq!(kept, Kept::new(kept.entries.clone()));
    }

    /// Brackets inside a line do not make it a JSON line, however many;
    /// a line a brace opens is read as JSON, and a bracketed line that
    /// names no identifier adds nothing.
    #[test]
    fn brackets_on_one_line_are_looked_at_once() {
        let line = "[x] ".repeat(2000) + "/srv/a.csv";
        let text = format!("{{\"id\": \"run-1\"}}\n{line}\n  [1, 2]\n");
        let found = by_line_from_end(&text, &[]);
        assert_eq!(found, [(1, "/srv/a.csv".into()), (0, "id: run-1".into())]);
    }

    /// Two pieces that agree in every sampled byte are still told apart
    /// (the whole text is compared), and a shard keeps its bound.
    #[test]
    fn recall_compares_whole_texts_and_stays_bounded() {
        let recall = Recall::new();
        let a = format!("{}/srv/a1.txt {}", "w ".repeat(4), "x".repeat(180));
        // The samples cover bytes 0..8 and 12..20 of a 200-byte text: byte
        // 10, inside the path, is read by none.
        assert_eq!(a.len(), 200);
        let mut b = a.clone().into_bytes();
        b[10] = b'b';
        let b = String::from_utf8(b).unwrap();
        assert_eq!(
            found(&recall, &a, || newest_first(&a, &[])),
            [(0, "/srv/a1.txt".into())]
        );
        assert_eq!(
            found(&recall, &b, || newest_first(&b, &[])),
            [(0, "/sbv/a1.txt".into())]
        );
        let calls = std::cell::Cell::new(0);
        let counted = |t: &str| {
            calls.set(calls.get() + 1);
            newest_first(t, &[])
        };
        assert_eq!(found(&recall, &a, || counted(&a)), [(0, "/srv/a1.txt".into())]);
        assert_eq!(calls.get(), 0, "remembered");
        // More texts of that bucket: it keeps its newest, and its shard
        // counts the bytes of what it holds.
        for letter in b"cdefg" {
            let mut c = a.clone().into_bytes();
            c[10] = *letter;
            let c = String::from_utf8(c).unwrap();
            found(&recall, &c, || newest_first(&c, &[]));
        }
        let held: Vec<(usize, usize)> = (recall.shards.iter())
            .map(|s| s.lock().unwrap())
            .map(|s| (s.buckets.iter().flatten().map(|(_, b)| b.len()).sum(), s.bytes))
            .filter(|&(n, _)| n > 0)
            .collect();
        assert_eq!(held, [(Recall::PER_BUCKET, Recall::PER_BUCKET * a.len())]);
        let long = "y".repeat(1 << 20);
        for i in 0..Recall::SHARDS * 8 {
            let text = format!("{i} {long}");
            found(&recall, &text, Vec::new);
        }
        let huge = "z".repeat(Recall::SHARD_BYTES + 1);
        found(&recall, &huge, Vec::new);
        for shard in &recall.shards {
            assert!(shard.lock().unwrap().bytes <= Recall::SHARD_BYTES);
        }
    }

    /// A memo whose every lock is held, as in a child forked while another
    /// thread of its parent held one: pieces are read afresh, and nothing
    /// waits.
    #[test]
    fn a_memo_whose_locks_are_held_still_finds() {
        let recall = std::sync::Arc::new(Recall::new());
        let text = format!("see /srv/held.txt {}", "w ".repeat(20));
        let held: Vec<_> = (recall.shards.iter().map(|s| s.lock().unwrap())).collect();
        let (sent, answers) = std::sync::mpsc::channel();
        let other = std::sync::Arc::clone(&recall);
        std::thread::spawn(move || {
            let _ = sent.send(found(&other, &text, || newest_first(&text, &[])));
        });
        let found = answers.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(found, Ok(vec![(0, "/srv/held.txt".into())]));
        drop(held);
    }

    /// This thread's front serves a piece the shards let go, the same
    /// piece each time (compared whole), and stays within its bounds.
    /// A thread keeps [`Reading::KEPT`] readings at most, each of at most
    /// [`Reading::BYTES`] of text, and only readings whose first piece it
    /// saw before; what it finds is what reading afresh finds.
    #[test]
    fn readings_are_kept_when_seen_again_and_stay_bounded() {
        let kept = || {
            let all = readings(None);
            let lens: Vec<usize> = all.kept.iter().map(|r| r.text.len()).collect();
            let _ = readings(Some(all));
            lens
        };
        let turn = |i: usize| Message::user(format!("turn {i} reads /srv/app/{i}.csv and db-{i}.internal"));
        let folded: Vec<Message> = (0..5).map(turn).collect();
        let read = |folded: &[Message]| candidates(folded.iter(), "", &[], &[], 40, 4000, true);
        let afresh = candidates(folded.iter(), "", &[], &[], 40, 4000, false);
        // Seen once: not kept. Seen again: kept, then followed.
        assert_eq!(read(&folded), afresh);
        assert!(kept().is_empty());
        assert_eq!(read(&folded), afresh);
        assert_eq!(kept().len(), 1);
        assert_eq!(read(&folded), afresh);
        assert_eq!(kept().len(), 1);
        // Many others: the newest few.
        for n in 6..20 {
            let other: Vec<Message> = (0..n).map(turn).collect();
            read(&other);
            read(&other);
            assert!(kept().len() <= Reading::KEPT);
        }
        // Longer than a kept reading holds: read, not kept.
        let word = "x".repeat(999);
        let long: Vec<Message> = (0..3)
            .map(|i| Message::user(format!("{} /srv/{i}.csv", vec![word.as_str(); 600].join(" "))))
            .collect();
        let before = kept();
        for _ in 0..2 {
            let found = candidates(long.iter(), "", &[], &[], 40, usize::MAX / 8, true);
            assert_eq!(
                found,
                candidates(long.iter(), "", &[], &[], 40, usize::MAX / 8, false)
            );
        }
        assert_eq!(kept(), before);
        assert!(before.iter().all(|&len| len <= Reading::BYTES));
        // A previous summary too long to keep with it: read, not kept.
        let prose = format!("{} see /srv/p.csv", "word ".repeat(Reading::BYTES / 5));
        for _ in 0..2 {
            let found = candidates(folded.iter(), &prose, &[], &[], 40, 4000, true);
            assert_eq!(
                found,
                candidates(folded.iter(), &prose, &[], &[], 40, 4000, false)
            );
        }
        assert_eq!(kept(), before);
    }

    #[test]
    fn the_front_serves_what_it_holds_and_stays_bounded() {
        let recall = Recall::new();
        let text = format!("see /srv/front.txt {}", "w".repeat(100));
        let ptr = |seen: &Seen| seen as *const Seen;
        let first = recall.with(&text, ptr);
        // The shards forget it; the front still holds it.
        for shard in &recall.shards {
            *shard.lock().unwrap() = Shard::default();
        }
        assert_eq!(recall.with(&text, ptr), first);
        // A text of the same length and samples is another piece.
        let mut other = text.clone().into_bytes();
        other[10] = b'x';
        let other = String::from_utf8(other).unwrap();
        assert_ne!(recall.with(&other, ptr), first);
        assert_eq!(
            found(&recall, &other, || newest_first(&other, &[])),
            [(0, "/srv/fxont.txt".into())]
        );
        let bounded = || {
            FRONT.with(|f| {
                let f = f.borrow();
                let bytes: usize = f.pieces.values().map(|s| s.text.len()).sum();
                assert_eq!(bytes, f.bytes);
                assert!(f.bytes <= Front::BYTES && f.pieces.len() <= Front::PIECES);
            })
        };
        for i in 0..64 {
            recall.with(&format!("{i} {}", "y".repeat(Front::BYTES / 16)), |_| ());
            bounded();
        }
        for i in 0..Front::PIECES + 10 {
            recall.with(&format!("piece number {i}"), |_| ());
        }
        bounded();
        // A piece longer than the bound is not held (it would empty the
        // front at each miss), nor one the shards keep no copy of.
        for long in [Front::BYTES + 1, Recall::SHARD_BYTES + 1] {
            let long = "z".repeat(long);
            let served = recall.with(&long, ptr);
            assert!(FRONT.with(|f| f.borrow().pieces.values().all(|s| !std::ptr::eq(&**s, served))));
            bounded();
        }
        assert!(
            FRONT.with(|f| f.borrow().pieces.len()) > 0,
            "the short pieces stay"
        );
        // While the front is in use, the shards answer, with the same piece.
        let (outer, inner) = recall.with(&text, |seen| (ptr(seen), recall.with(&text, ptr)));
        assert_eq!(outer, inner);
    }

    #[test]
    fn every_pattern_compiles() {
        let patterns = patterns().unwrap();
        assert!((0..SPEC.len()).all(|i| patterns.each(i).is_some()));
    }

    #[test]
    fn each_class_is_found_and_trimmed() {
        let cases = [
            (
                "id 550e8400-e29b-41d4-a716-446655440000 here",
                "550e8400-e29b-41d4-a716-446655440000",
            ),
            ("see https://example.com/a/b?x=1.", "https://example.com/a/b?x=1"),
            ("(docs at https://docs.rs/regex)", "https://docs.rs/regex"),
            (
                "copied to gs://bucket/data/part-0001.parquet",
                "gs://bucket/data/part-0001.parquet",
            ),
            ("in s3://logs-prod/2026/11/30/", "s3://logs-prod/2026/11/30/"),
            (
                "role arn:aws:iam::123456789012:role/deploy",
                "arn:aws:iam::123456789012:role/deploy",
            ),
            ("mail ann.lee+ops@example.co.uk now", "ann.lee+ops@example.co.uk"),
            ("db at 10.0.12.7:5432, ok", "10.0.12.7:5432"),
            ("ipv6 2001:db8::8a2e:370:7334 up", "2001:db8::8a2e:370:7334"),
            ("bound to [::1]:8080", "[::1]:8080"),
            ("wrote /var/log/app/server.log.", "/var/log/app/server.log"),
            ("home ~/.config/app/settings.toml", "~/.config/app/settings.toml"),
            (r"at C:\Users\ann\report.xlsx today", r"C:\Users\ann\report.xlsx"),
            ("edit src/memory/tiered.rs please", "src/memory/tiered.rs"),
            ("open config.yaml now", "config.yaml"),
            (
                "host api.internal.example.com responds",
                "api.internal.example.com",
            ),
            ("cache at redis-01.prod:6379", "redis-01.prod:6379"),
            ("served on localhost:3000", "localhost:3000"),
            (
                "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 landed",
                "9fceb02d0ae598e95dc970b74767f19372d61af8",
            ),
            ("short sha a1b2c3d merged", "a1b2c3d"),
            ("fixes CVE-2024-3094 in xz", "CVE-2024-3094"),
            ("ticket PROJ-1234 opened", "PROJ-1234"),
            ("upgrade to v2.14.0-rc.1 soon", "v2.14.0-rc.1"),
            ("version 1.85.0 required", "1.85.0"),
            ("built 1.4.2+build.57 today", "1.4.2+build.57"),
            ("subnet 10.20.0.0/16 routes", "10.20.0.0/16"),
            ("pull ghcr.io/acme/api:1.4.2.", "ghcr.io/acme/api:1.4.2"),
            (
                "pinned quay.io/org/app@sha256:0123456789abcdef0123456789abcdef",
                "quay.io/org/app@sha256:0123456789abcdef0123456789abcdef",
            ),
            ("see github.com/acme/payments for it", "github.com/acme/payments"),
            (
                "push to localhost:5000/team/app:dev now",
                "localhost:5000/team/app:dev",
            ),
            ("in src/components/Button.", "src/components/Button"),
            ("pushed to refs/heads/main today", "refs/heads/main"),
            (
                "kubectl rollout restart deploy/ledgerd -n payments",
                "deploy/ledgerd",
            ),
            ("scaled deployment.apps/api-gw-2 up", "deployment.apps/api-gw-2"),
            ("base image python:3.11-slim.", "python:3.11-slim"),
            ("runs bitnami/redis:7.2-alpine here", "bitnami/redis:7.2-alpine"),
            ("connect to postgres:5432 first", "postgres:5432"),
            (
                "digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 ok",
                "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            ),
        ];
        for (text, expected) in cases {
            let found = ids(text);
            assert!(found.iter().any(|f| f == expected), "{text:?}: {found:?}");
        }
    }

    /// A host and a path are one entry, not the host and the tag apart;
    /// a drive alone and a prefix past 32 bits are none.
    #[test]
    fn whole_forms_leave_no_fragments() {
        assert_eq!(
            ids("image ghcr.io/acme/search:3.10.4 pulled"),
            ["ghcr.io/acme/search:3.10.4"]
        );
        assert_eq!(
            ids("pkg.go.dev/net/http and notes.md/x"),
            ["pkg.go.dev/net/http", "notes.md"]
        );
        assert!(ids(r"drive C:\ only").is_empty());
        assert_eq!(ids("10.0.0.0/33 and 10.0.0.0/32"), ["10.0.0.0/32"]);
        // A date is no path; a path of two parts needs an extension.
        assert!(ids("on 11/30/2026 and/or later, x/y/z too").is_empty());
        // A kind or an image inside a longer name is not one.
        assert!(ids("my-redis:6379 and old-deploy/x and service: up").is_empty());
        assert_eq!(
            ids("ghcr.io/acme/team/app:1.2 pulled"),
            ["ghcr.io/acme/team/app:1.2"]
        );
    }

    /// In JSON, identifiers are read as the strings say them, not as
    /// their escapes are written: a Windows path, escaped slashes, a
    /// `\u` letter.
    #[test]
    fn json_strings_are_read_unescaped() {
        let text = r#"{"file": "C:\\srv\\app.log", "link": "https:\/\/x.example.com\/a", "note": "caf\u00e9 at 10.1.2.3"}"#;
        let expected = ["file: C:\\srv\\app.log", "https://x.example.com/a", "10.1.2.3"];
        assert_eq!(ids(text), expected);
        // A JSON line among other lines reads the same.
        let lines = format!("log follows\n{text}\nthen /var/log/x.log");
        let found: Vec<String> = by_line_from_end(&lines, &[])
            .into_iter()
            .map(|(_, e)| e.into())
            .collect();
        assert_eq!(
            found,
            [
                "/var/log/x.log",
                "10.1.2.3",
                "https://x.example.com/a",
                "file: C:\\srv\\app.log"
            ]
        );
        // JSON Lines (a tool's output): each line read so, newest first.
        let jsonl = r#"{"f": "C:\\a\\b.log"}
{"f": "C:\\c\\d.log"}"#;
        let found: Vec<String> = (newest_first(jsonl, &[]).into_iter())
            .map(|(_, e)| e.into())
            .collect();
        assert_eq!(found, ["C:\\c\\d.log", "C:\\a\\b.log"]);
    }

    #[test]
    fn codes_are_entries_whole() {
        let cases: &[(&str, &[&str])] = &[
            (
                "use conn_994a82 for sales_q3_2026.",
                &["conn_994a82", "sales_q3_2026"],
            ),
            (
                "order ORD-2024-00123 and TX-2026-000417",
                &["ORD-2024-00123", "TX-2026-000417"],
            ),
            (
                "instance i-0abc123def4567890 in us-east-1",
                &["i-0abc123def4567890", "us-east-1"],
            ),
            (
                "pod ledgerd-7d9f8b6c5-x2x4z restarted",
                &["ledgerd-7d9f8b6c5-x2x4z"],
            ),
            (
                "tickets INC0012345, REF-ABC12 (Alpha-991)",
                &["INC0012345", "REF-ABC12", "Alpha-991"],
            ),
            (
                "customer **cus_NffrFeUfNV2Hib** and _txn_998877_alpha_",
                &["cus_NffrFeUfNV2Hib", "txn_998877_alpha"],
            ),
            (
                "req_id=0123abcd9f) and address 0x52908400098527886E0F70",
                &["0123abcd9f", "0x52908400098527886E0F70"],
            ),
            // A code that holds a ticket is one entry; a ticket alone is one.
            ("PROJ-1234-fix and PROJ-1234", &["PROJ-1234-fix", "PROJ-1234"]),
            ("order:ORD-2024-00123, port conn_994a82:8080", &["ORD-2024-00123"]),
            (
                "quoted \u{201c}conn_994a82\u{201d} and \u{ab}ORD-2024-00123\u{bb}",
                &["conn_994a82", "ORD-2024-00123"],
            ),
            (
                "hashes 0x52908400098527886E0F70 and UPS 1Z999AA10123456784",
                &["0x52908400098527886E0F70", "1Z999AA10123456784"],
            ),
            // A bit width that no letter comes before is a code's part.
            ("open conn_256aaa and build-64ab", &["conn_256aaa", "build-64ab"]),
        ];
        for (text, expected) in cases {
            assert_eq!(ids(text), *expected, "{text:?}");
        }
        // Parts of longer tokens, numbers with units, standards, common
        // words, and secrets (nothing inside them either).
        for (text, expected) in [
            ("at 2026-11-28T23:01:07.123Z took 1500ms", &[][..]),
            ("hash with SHA-256 or sha256 on x86_64, base64 in ISO-8601", &[]),
            (
                "upgrade to v2.14.0-rc1 on api-v2.example.com",
                &["api-v2.example.com", "v2.14.0-rc1"],
            ),
            (
                // (The code is the Kubernetes object's name: no entry alone.)
                "see deploy/ledgerd-2a and user_1a2b3c@example.com",
                &["deploy/ledgerd-2a", "user_1a2b3c@example.com"],
            ),
            (
                "key sk-proj-abcdef1234567890abcdef12 and ghp_a1b2c3d4e5f6a7b8c9d0",
                &[],
            ),
            // Quantities, types, algorithms, standards.
            (
                "a 64-bit 24-hour 5-minute job, #ff5733 at 0x7fff and 0x1000, 1920x1080 in 1h30m0s",
                &[],
            ),
            (
                "uint8_t uint32_t AtomicU64 NonZeroU32 Uint8Array Float32Array complex64 from_utf8 to_u32",
                &[],
            ),
            (
                "b64encode AES-256 RSA-2048 ed25519 HMAC-SHA256 SHA3-256 sha256sum",
                &[],
            ),
            (
                // (An image's tag is no code; the image is an entry whole.)
                "RFC9110 ISO8601 IEEE754 wasm32 linux-amd64 crate::v2_api node:18-alpine",
                &["node:18-alpine"],
            ),
            // Not AWS's key shape: a name.
            ("region ASIA_SOUTHEAST_1 is up", &["ASIA_SOUTHEAST_1"]),
        ] {
            let mut found = ids(text);
            found.sort();
            let mut expected = expected.to_vec();
            expected.sort();
            assert_eq!(found, expected, "{text:?}");
        }
    }

    #[test]
    fn remembered_spans_are_read_afresh_and_stay_bounded() {
        let patterns = patterns().unwrap();
        let mut spans = Spans::default();
        let found = |spans: &mut Spans, span: &str| {
            let mut out = Vec::new();
            spans.with(patterns, span, |start, end| out.push((start, end)));
            out
        };
        for i in 0..40_000 {
            // Distinct spans (most with an identifier), and one read again
            // and again.
            let span = format!(
                "conn_{i:06}a at 10.0.{}.{}:80 and v1.2.{i}",
                i % 250,
                i / 250 % 250
            );
            assert_eq!(found(&mut spans, &span), span_entries(patterns, &span));
            let again = "see ORD-2024-00123";
            assert_eq!(found(&mut spans, again), span_entries(patterns, again));
            assert!(spans.bytes <= Spans::BYTES);
        }
        // A span too long to remember is read each time.
        let long = "x1y2z3w4 ".repeat(40);
        assert_eq!(found(&mut spans, &long), span_entries(patterns, &long));
    }

    #[test]
    fn any_scheme_is_a_url_but_not_one_with_a_password() {
        assert_eq!(
            ids("to redis://cache-1:6379/0 and jdbc:postgresql://db:5432/x, mongodb+srv://c.example.net/db"),
            [
                "redis://cache-1:6379/0",
                "jdbc:postgresql://db:5432/x",
                "mongodb+srv://c.example.net/db"
            ]
        );
        assert_eq!(
            ids("at postgres://app@db.internal:5432/ledger"),
            ["postgres://app@db.internal:5432/ledger"]
        );
        // A password: not the URL, nor the address inside it.
        assert_eq!(
            ids("at postgres://app:s3cr3t@db.internal:5432/ledger"),
            Vec::<String>::new()
        );
        // A port, a time and an address in the query are no password.
        for url in [
            "https://host.example.com:8080/p?email=ann@example.com",
            "https://host.example.com/p?at=10:30&email=ann@example.com",
        ] {
            assert_eq!(ids(&format!("at {url} ok")), [url]);
        }
        // A key as the user, a secret parameter, a secret in the query, a
        // password with a raw slash.
        for url in [
            "postgres://app:pa/ss@db.internal/x",
            "https://ghp_a1b2c3d4e5f6a7b8c9d0e1f2@github.com/o/r.git",
            "https://b.s3.amazonaws.com/k?X-Amz-Signature=abc123def456&X-Amz-Date=1",
            "https://x.blob.core.windows.net/c?sv=2022&sig=abc%2Fdef123",
            "https://api.example.com/v1?id=conn_994a82&key=AIzaSyA1234567890abcdefghijklmnopqrstuv",
        ] {
            assert_eq!(ids(&format!("see {url} now")), Vec::<String>::new(), "{url}");
        }
    }

    #[test]
    fn json_secrets_are_not_entries() {
        let text = r#"{"key": "sk-proj-abcdef1234567890abcdef12", "id": "conn_994a82", "AccessKeyId": "ASIAIOSFODNN7EXAMPLE"}"#;
        assert_eq!(ids(text), ["id: conn_994a82"]);
    }

    #[test]
    fn near_misses_are_not_identifiers() {
        for text in [
            "The quick brown fox jumps over the lazy dog.",
            "We shipped 1234567 units in 2026, e.g. to Korea, i.e. Seoul.",
            "and/or either way; a 1/2 chance",
            "The defaced facade was deadbeef red.",
            "Encoding is UTF-8 and hashing SHA-256 per ISO-8601.",
            "Meet at 10:30:00 or 11:45.",
            "Mr. Smith said end.Next time.",
            "score 3.5 of 10",
            "use std::fs and serde_json::Value; call v2::run",
        ] {
            assert_eq!(ids(text), Vec::<String>::new(), "{text:?}");
        }
    }

    #[test]
    fn contained_matches_are_left_out() {
        // The URL holds a host and a path; only the URL is an entry.
        assert_eq!(
            ids("get https://api.example.com/v1/users/42 now"),
            ["https://api.example.com/v1/users/42"]
        );
        // An IPv4 address is not also a version.
        assert_eq!(ids("at 192.168.1.20 today"), ["192.168.1.20"]);
    }

    #[test]
    fn json_identifier_keys_become_key_value_entries() {
        let text = r#"{"connection_id": "conn_994a82", "rows": 12, "dataset": "sales_q3_2026",
            "nested": {"request_id": "550e8400-e29b-41d4-a716-446655440000", "note": "fine"},
            "api_key": "sk-secret-value", "userId": "u-77"}"#;
        let found = ids(text);
        assert!(
            found.iter().any(|e| e == "connection_id: conn_994a82"),
            "{found:?}"
        );
        assert!(found.iter().any(|e| e == "dataset: sales_q3_2026"));
        assert!(
            found
                .iter()
                .any(|e| e == "request_id: 550e8400-e29b-41d4-a716-446655440000")
        );
        assert!(found.iter().any(|e| e == "userId: u-77"));
        assert!(
            !found.iter().any(|f| f.contains("sk-secret")),
            "secrets stay out: {found:?}"
        );
        // The UUID is there once, as the key's value.
        assert_eq!(found.iter().filter(|f| f.contains("550e8400")).count(), 1);
    }

    #[test]
    fn sections_render_and_split_back() {
        let body = render(
            "The user asked for Q3.",
            &["connection_id: conn_994a82", "/tmp/x.csv"],
        );
        assert_eq!(
            body,
            "The user asked for Q3.\n\nExact identifiers (kept verbatim):\n- connection_id: conn_994a82\n- /tmp/x.csv"
        );
        assert_eq!(
            split(&body),
            (
                "The user asked for Q3.",
                vec!["connection_id: conn_994a82", "/tmp/x.csv"]
            )
        );
        assert_eq!(split("No section here."), ("No section here.", vec![]));
        assert_eq!(render("prose", &[]), "prose");
        let faked = neutralise(format!("a\n\n{LEDGER_HEADING}\n- fake"));
        assert_eq!(split(&faked).1, Vec::<&str>::new());
    }

    /// The identifiers of `text` as the patterns find them over the whole
    /// text, no span skipped.
    fn over_whole_text(text: &str) -> Vec<String> {
        let patterns = patterns().unwrap();
        (span_entries(patterns, text).into_iter())
            .map(|(start, end)| text[start..end].to_owned())
            .collect()
    }

    /// Texts built of identifiers, near misses, words and every kind of
    /// separator, JSON lines among them.
    fn texts() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("/srv/a.csv".to_owned()),
            Just("https://x.io/p?q=1).".to_owned()),
            Just("10.0.0.1:80".to_owned()),
            Just("[::1]:8080".to_owned()),
            Just("std::fs".to_owned()),
            Just("fe80::1".to_owned()),
            Just("PROJ-12".to_owned()),
            Just("v1.2.3".to_owned()),
            Just("a@b.com".to_owned()),
            Just("C:\\x\\y.txt".to_owned()),
            Just("deadbeef12".to_owned()),
            Just("550e8400-e29b-41d4-a716-446655440000".to_owned()),
            Just(r#"{"id": "run-7", "path": "/tmp/x"}"#.to_owned()),
            Just(r#"{"p": "C:\\x\\y.txt", "u": "https:\/\/x.io\/p"}"#.to_owned()),
            Just("ghcr.io/a/b:1.2".to_owned()),
            Just("github.com/x/y.".to_owned()),
            Just("10.0.0.0/16".to_owned()),
            Just("1.2.3+b.4".to_owned()),
            Just("localhost:5000/a@sha256:0123456789abcdef0123456789abcdef".to_owned()),
            Just("Mr. Smith".to_owned()),
            Just("end.Next".to_owned()),
            "[a-z./:@0-9-]{1,12}",
            "[ \t\r\n\"'(=,]{1,2}",
            Just("é, 漢字".to_owned()),
            Just("\u{c}".to_owned()),
            Just("a\u{c}/b/1".to_owned()),
            Just("/données/été.csv".to_owned()),
            Just("https://例え.jp/パス".to_owned()),
            Just("conn_994a82".to_owned()),
            Just("ORD-2024-00123".to_owned()),
            Just("1500ms".to_owned()),
            Just("SHA-256".to_owned()),
            Just("x86_64".to_owned()),
            Just("2026-11-28T23:01:07.123Z".to_owned()),
            Just("req_id=0123abcd9)".to_owned()),
            Just("sk-abc123def456ghi789".to_owned()),
            Just("é1a2b3c4".to_owned()),
            "[a-zA-Z0-9_-]{1,12}",
            "[a-f0-9]{3,8}[g-z]{1,3}[0-9]{1,3}",
            "[./:@%+\\\\é]",
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat())
    }

    proptest::proptest! {
        /// Reading only the spans that may hold an identifier finds what
        /// reading the whole text finds.
        #[test]
        fn spans_find_what_the_whole_text_holds(text in texts()) {
            // Twice: read, then remembered.
            for _ in 0..2 {
                let mut found = Vec::new();
                matched(&text, &|_| false, &mut found);
                for (at, entry) in &found {
                    proptest::prop_assert!(text[*at..].starts_with(entry.as_str()));
                }
                let found: Vec<String> = found.into_iter().map(|(_, e)| e.into()).collect();
                proptest::prop_assert_eq!(found, over_whole_text(&text));
            }
        }

        /// The codes are the runs of letters, digits, `-` and `_` that
        /// stand alone and have the look of a code.
        #[test]
        fn codes_are_the_lone_runs_with_a_code_look(text in texts()) {
            let runs = Regex::new("[A-Za-z0-9_-]+").unwrap();
            let mut expected = Vec::new();
            for run in runs.find_iter(&text) {
                let (start, end) = (run.start(), run.end());
                let before = text[..start].chars().next_back();
                let after = text[end..].chars().next();
                let beyond = text[end..].chars().nth(1);
                let tied = |c: char| "/@\\%+#".contains(c) || !c.is_ascii() && c.is_alphanumeric();
                // A `:` after a letter is a key's; `.` and `:` before a
                // letter or digit go on with the token.
                let key = text[..start].strip_suffix(':').is_some_and(|t| t.ends_with(|c: char| c.is_ascii_alphabetic()));
                let on = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
                if before.is_some_and(|c| tied(c) || c == '.' || (c == ':' && !key))
                    || after.is_some_and(|c| tied(c) || ((c == '.' || c == ':') && on(beyond)))
                {
                    continue;
                }
                let trimmed = run.as_str().trim_matches(['-', '_']);
                let from = start + run.as_str().find(trimmed).unwrap_or(0);
                let bytes = trimmed.as_bytes();
                if !trimmed.contains(|c: char| c.is_ascii_digit()) || trimmed.len() < 6 {
                    continue;
                }
                if is_secret(bytes) || is_code(bytes) {
                    expected.push((from, from + trimmed.len(), !is_secret(bytes)));
                }
            }
            proptest::prop_assert_eq!(codes(&text), expected);
        }

        /// The byte patterns match where the patterns with Unicode classes
        /// would, on texts with non-ASCII letters beside and inside identifiers.
        #[test]
        fn byte_patterns_match_as_unicode_ones(text in texts()) {
            let unicode = SPEC
                .iter()
                .map(|(_, p)| format!("(?:{})", source(p).replace(r"\b", r"(?-u:\b)")))
                .collect::<Vec<_>>()
                .join("|");
            let unicode = Regex::new(&unicode).unwrap();
            let bytes = &patterns().unwrap().all;
            let by_bytes: Vec<(usize, usize)> = bytes.find_iter(text.as_bytes()).map(|m| (m.start(), m.end())).collect();
            let by_chars: Vec<(usize, usize)> = unicode.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            proptest::prop_assert_eq!(by_bytes, by_chars);
        }

        /// One pass over a text reads it as its lines read alone from the last.
        #[test]
        fn one_pass_reads_as_line_by_line(text in texts()) {
            let extra = [LedgerPattern::new(r"\brun-[0-9]+\b").unwrap()];
            let at_once: Vec<LedgerEntry> = by_line_from_end(&text, &extra).into_iter().map(|(_, e)| e).collect();
            let by_line: Vec<LedgerEntry> = text
                .lines()
                .rev()
                .flat_map(|line| identifiers(line, &extra).into_iter().rev())
                .collect();
            proptest::prop_assert_eq!(at_once, by_line);
        }

        /// A piece without a mark or a brace, which is read at once as
        /// holding nothing, is one in which the patterns, run over the whole
        /// text, find nothing either.
        #[test]
        fn pieces_without_marks_hold_nothing(text in texts()) {
            let plain: String = text.chars().filter(|c| !".:/@\\{[0123456789".contains(*c)).collect();
            proptest::prop_assert_eq!(over_whole_text(&plain), Vec::<String>::new());
            proptest::prop_assert_eq!(newest_first(&plain, &[]), Vec::new());
        }

        /// Candidates read through the process's memory of pieces are the
        /// ones read afresh, on the first reading and on every other, with
        /// any limits.
        #[test]
        fn remembered_candidates_are_read_afresh(
            texts in proptest::collection::vec(texts(), 1..6),
            enough in 1usize..40,
            max_bytes in 1usize..4000,
        ) {
            let folded: Vec<Message> = texts.into_iter().map(Message::user).collect();
            let afresh = candidates(folded.iter(), "", &[], &[], enough, max_bytes, false);
            for _ in 0..2 {
                let remembered = candidates(folded.iter(), "", &[], &[], enough, max_bytes, true);
                proptest::prop_assert_eq!(&remembered, &afresh);
            }
        }

        /// A reading that follows an earlier one (the same pieces, then
        /// others, fewer, more, or another previous summary) finds what
        /// reading afresh finds, in any order of readings.
        #[test]
        fn readings_followed_find_what_reading_afresh_finds(
            texts in proptest::collection::vec(texts(), 1..6),
            other in texts(),
            steps in proptest::collection::vec((0usize..6, 0usize..6), 1..8),
            enough in 1usize..40,
            max_bytes in 1usize..4000,
        ) {
            let base: Vec<Message> = texts.into_iter().map(Message::user).collect();
            let ledger = ["/srv/kept.csv", "10.1.2.3"];
            for (change, at) in steps {
                let mut folded = base.clone();
                let at = at % folded.len();
                match change {
                    // A turn after them (read first), before them, in place
                    // of one, or one fewer.
                    0 => folded.push(Message::user(other.clone())),
                    1 => folded.insert(0, Message::user(other.clone())),
                    2 => folded[at] = Message::user(other.clone()),
                    3 if folded.len() > 1 => {
                        folded.remove(at);
                    }
                    _ => {}
                }
                let (prose, listed): (&str, &[&str]) = match change {
                    4 => ("see db-9.internal", &ledger),
                    _ => ("", &[]),
                };
                let afresh = candidates(folded.iter(), prose, listed, &[], enough, max_bytes, false);
                let followed = candidates(folded.iter(), prose, listed, &[], enough, max_bytes, true);
                proptest::prop_assert_eq!(&followed, &afresh);
                let other_limits = candidates(folded.iter(), prose, listed, &[], enough + 1, max_bytes, true);
                let afresh_other = candidates(folded.iter(), prose, listed, &[], enough + 1, max_bytes, false);
                proptest::prop_assert_eq!(&other_limits, &afresh_other);
            }
        }

        /// The word finder gives each word (a run of bytes between spaces)
        /// that a mark makes hot, in order, however long the text (its
        /// blocks skipped whole).
        #[test]
        fn hot_words_are_the_words_a_mark_makes_hot(parts in proptest::collection::vec(texts(), 1..6)) {
            let text = parts.join(" ");
            let bytes = text.as_bytes();
            let mut found = Vec::new();
            hot_words(bytes, |start, end| found.push((start, end)));
            let mut words = Vec::new();
            let mut start = 0;
            for end in (0..=bytes.len()).filter(|&i| i == bytes.len() || is_space(bytes[i])) {
                if (start..end).any(|i| is_mark(bytes[i]) && is_hot_at(bytes, i)) {
                    words.push((start, end));
                }
                start = end + 1;
            }
            proptest::prop_assert_eq!(found, words);
        }

        /// Both ways of finding an entry's first place agree, whatever the
        /// keys (drawn from few values, so that many repeat and collide).
        #[test]
        fn both_ways_of_finding_the_first_entry_agree(
            keys in proptest::collection::vec(0u64..64, 0..300),
            spread in 0u32..58,
        ) {
            let (mut bits, mut map) = (Firsts::new(1), Firsts::new(Firsts::FEW + 1));
            proptest::prop_assert!(matches!((&bits, &map), (Firsts::Bits(_), Firsts::Map(_))));
            let mut seen: Vec<u64> = Vec::new();
            for key in keys {
                let key = key << spread;
                let expected = seen.iter().position(|&k| k == key);
                proptest::prop_assert_eq!(bits.first(key, &seen), expected);
                proptest::prop_assert_eq!(map.first(key, &seen), expected);
                bits.note(key, seen.len());
                map.note(key, seen.len());
                seen.push(key);
            }
        }

        /// The eight-at-a-time check finds a byte of at most `b' '` exactly
        /// when there is one.
        #[test]
        fn low_bytes_are_found_eight_at_a_time(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            proptest::prop_assert_eq!(has_low_byte(&bytes), bytes.iter().any(|&b| b <= b' '));
        }

        /// A word is hot when the word finder finds it whole, and an entry's
        /// value follows its first `: `.
        #[test]
        fn the_quick_word_checks_agree_with_the_finder(text in texts()) {
            for word in text.split([' ', '\n']).chain([text.as_str()]) {
                let mut whole = false;
                hot_words(word.as_bytes(), |start, end| whole |= start == 0 && end == word.len());
                proptest::prop_assert_eq!(is_hot_word(word), whole, "{:?}", word);
                let value = word.find(": ").map_or(word, |i| &word[i + 2..]);
                proptest::prop_assert_eq!(value_of(word), value);
            }
        }

        /// What was said holds an entry only where its text stands verbatim,
        /// in any of the messages (read afresh or remembered).
        #[test]
        fn said_holds_only_what_stands_verbatim(
            said_texts in proptest::collection::vec(texts(), 1..5),
            other in texts(),
        ) {
            let messages: Vec<Message> = said_texts.iter().cloned().map(Message::user).collect();
            for said in [Said::new(&messages), Said::new(&messages)] {
                let entries: Vec<LedgerEntry> = std::iter::once(&other)
                    .chain(&said_texts)
                    .flat_map(|t| identifiers(t, &[]))
                    .collect();
                for entry in &entries {
                    if said.holds(entry) {
                        let held = said_texts.iter().any(|t| t.contains(entry.as_str()));
                        proptest::prop_assert!(held, "{entry:?} held but not in {said_texts:?}");
                    }
                }
                // Each identifier that stands as a word of its own (between
                // the spaces that end words: a form feed is not one) is held.
                for text in &said_texts {
                    for entry in identifiers(text, &[]) {
                        let alone = text.split([' ', '\t', '\r', '\n']).any(|w| w == entry);
                        proptest::prop_assert!(!alone || said.holds(&entry), "{entry:?} not held in {text:?}");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// Kept turns that follow the last ones a thread held (the same
        /// again, with turns after them, the oldest gone, one changed, or
        /// others) hold what they hold read afresh.
        #[test]
        fn said_after_said_holds_what_said_afresh_holds(
            texts in proptest::collection::vec(texts(), 1..6),
            other in texts(),
            steps in proptest::collection::vec((0usize..5, 0usize..6), 1..8),
        ) {
            fn afresh(messages: &[Message]) -> Said<'_> {
                let pieces: Vec<&str> = messages.iter().flat_map(pieces).collect();
                let words = pieces.iter().map(|p| Arc::new(Words::of(p))).collect();
                Said::of(pieces, words)
            }
            let entries: Vec<LedgerEntry> = std::iter::once(&other)
                .chain(&texts)
                .flat_map(|t| identifiers(t, &[]))
                .collect();
            let mut kept: Vec<Message> = texts.iter().cloned().map(Message::user).collect();
            for (change, at) in steps {
                match change {
                    0 => kept.push(Message::user(other.clone())),
                    1 if kept.len() > 1 => {
                        kept.remove(0);
                    }
                    2 => {
                        let at = at % kept.len();
                        kept[at] = Message::user(format!("{other} {at}"));
                    }
                    3 => {
                        let by = at % kept.len();
                        kept.rotate_left(by);
                    }
                    _ => {}
                }
                let (said, fresh) = (Said::new(&kept), afresh(&kept));
                for entry in &entries {
                    proptest::prop_assert_eq!(said.holds(entry), fresh.holds(entry), "{:?}", entry);
                }
            }
        }
    }

    /// Kept turns with many words fill the pieces' union filter: the
    /// lookup goes through a filter sized to them, and is as exact.
    #[test]
    fn many_kept_words_are_looked_up_exactly() {
        let messages: Vec<Message> = (0..40)
            .map(|m| {
                let words: Vec<String> = (0..30).map(|w| format!("/srv/{m}/file-{w}.log")).collect();
                Message::user(words.join(" "))
            })
            .collect();
        for said in [Said::new(&messages), Said::new(&messages)] {
            assert!(said.filter.crowded() && said.wide.is_some());
            for m in 0..40 {
                for w in 0..30 {
                    assert!(said.holds(&format!("/srv/{m}/file-{w}.log")));
                    assert!(!said.holds(&format!("/srv/{m}/file-{w}.logs")));
                    assert!(!said.holds(&format!("/srv/{}/file-{w}.log", m + 40)));
                }
            }
        }
        // A few words: the union alone.
        let few = [Message::user("/srv/a.csv and /srv/b.csv")];
        let said = Said::new(&few);
        assert!(said.wide.is_none() && said.holds("/srv/b.csv") && !said.holds("/srv/c.csv"));
    }

    #[test]
    fn long_words_of_dots_are_read_once() {
        // Each dot not followed by a letter: a walk per dot over the word
        // would be quadratic in its length (this never ends).
        let dots = format!("{} /srv/a.csv {}", ".".repeat(1 << 21), "a.".repeat(1 << 20));
        assert_eq!(ids(&dots), ["/srv/a.csv"]);
        let messages = [Message::user(dots.clone())];
        assert!(Said::new(&messages).holds("/srv/a.csv"));
    }

    #[test]
    fn a_path_that_opens_a_line_belongs_to_that_line() {
        // Its match starts with the newline before it.
        let extra = [LedgerPattern::new(r"\brun-[0-9]+\b").unwrap()];
        let text = "{\"id\": \"run-7\"}\n/srv/a.csv";
        let found: Vec<LedgerEntry> = by_line_from_end(text, &extra)
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        assert_eq!(found, ["/srv/a.csv", "run-7", "id: run-7"]);
    }

    /// No room to read: nothing is read (and reading ends), remembered or
    /// not; the previous ledger is still listed.
    #[test]
    fn no_room_reads_nothing() {
        let folded = [Message::user("see /srv/a.csv and 10.0.0.1")];
        for remember in [false, true, true] {
            let found = candidates(folded.iter(), "", &["/srv/kept.csv"], &[], 40, 0, remember);
            assert_eq!(found.texts, ["/srv/kept.csv"]);
        }
    }

    #[test]
    fn candidates_are_newest_first_and_deduplicated() {
        // Each entry comes with its key.
        let listed = |found: Candidates| {
            assert_eq!(
                found.keys,
                found.texts.iter().map(|t| key_of(t)).collect::<Vec<_>>()
            );
            assert_eq!(
                found.loose,
                found.texts.iter().map(|t| is_loose(t)).collect::<Vec<_>>()
            );
            found.texts
        };
        let folded = [
            Message::user("old /srv/a.txt and PROJ-1"),
            Message::user("new /srv/b.txt and PROJ-1"),
        ];
        let found = listed(candidates(
            folded.iter(),
            "prose with PROJ-9",
            &["ABC-2"],
            &[],
            100,
            usize::MAX,
            false,
        ));
        assert_eq!(found, ["PROJ-1", "/srv/b.txt", "/srv/a.txt", "ABC-2", "PROJ-9"]);
        let keyed = [
            Message::user("at /srv/c.txt"),
            Message::tool(r#"{"path": "/srv/c.txt"}"#, "t1"),
        ];
        assert_eq!(
            listed(candidates(keyed.iter(), "", &[], &[], 100, usize::MAX, false)),
            ["path: /srv/c.txt"]
        );
        let few = listed(candidates(folded.iter(), "", &[], &[], 1, usize::MAX, false));
        assert_eq!(few, ["PROJ-1", "/srv/b.txt"]);
        // A long piece is read from its newest end, from a word boundary.
        let long = [Message::user(format!(
            "/srv/old.txt {} /srv/new.txt",
            "x".repeat(100)
        ))];
        assert_eq!(
            listed(candidates(long.iter(), "", &[], &[], 4, 20, false)),
            ["/srv/new.txt"]
        );
        // With fewer than a quarter of `enough` found by then, its older
        // part too (to 8 times as far).
        assert_eq!(
            listed(candidates(long.iter(), "", &[], &[], 5, 20, false)),
            ["/srv/new.txt", "/srv/old.txt"]
        );
    }

    proptest::proptest! {
        /// What is read follows the budget (DESIGN rule 9), whatever the
        /// layout of identifiers and prose: nothing that starts 8 times
        /// `max_bytes` or more from the newest end is found; while `enough`
        /// is not reached, all that lies within `max_bytes` is; when that
        /// window touches fewer than a quarter of `enough`, all within 8
        /// times as far is; when it holds a quarter or more, nothing beyond
        /// it is.
        #[test]
        fn reading_stops_at_the_window_or_eight_times_it(
            layout in proptest::collection::vec((proptest::prelude::any::<bool>(), 1usize..12), 1..40),
            max_bytes in 20usize..400,
            enough in 1usize..24,
        ) {
            // Newest last; an identifier message is one short line.
            let mut messages = Vec::new();
            for (i, &(id, words)) in layout.iter().enumerate() {
                messages.push(Message::user(match id {
                    true => format!("see /srv/n{i}.csv"),
                    false => vec!["steady"; words].join(" "),
                }));
            }
            // Each identifier's place from the newest end, in the bytes of
            // the pieces read: (start, end).
            let mut places = Vec::new();
            let mut from_end = 0;
            for (i, m) in messages.iter().enumerate().rev() {
                let len = m.text().len();
                if layout[i].0 {
                    places.push((format!("/srv/n{i}.csv"), from_end, from_end + len));
                }
                from_end += len;
            }
            let found = candidates(messages.iter(), "", &[], &[], enough, max_bytes, false).texts;
            let found: Vec<&str> = found.iter().map(|e| e.as_str()).collect();
            let within = |far: usize| places.iter().filter(move |(_, _, end)| *end <= far);
            // Found in the window: those within it, and maybe one it cuts.
            let near = within(max_bytes).count();
            let touched = places.iter().filter(|(_, start, _)| *start < max_bytes).count();
            for (id, start, _) in &places {
                proptest::prop_assert!(*start < 8 * max_bytes || !found.contains(&id.as_str()), "{id} read past 8 times");
            }
            if places.len() < enough {
                for (id, _, _) in within(max_bytes) {
                    proptest::prop_assert!(found.contains(&id.as_str()), "{id} within the window not found");
                }
                // (A piece the window cuts is cut at a word boundary: up to a
                // word of it is charged twice.)
                if touched * 4 < enough {
                    for (id, _, _) in within(8 * max_bytes - 16) {
                        proptest::prop_assert!(found.contains(&id.as_str()), "{id} within 8 times not found");
                    }
                }
            }
            if near * 4 >= enough {
                for (id, start, _) in &places {
                    proptest::prop_assert!(*start < max_bytes || !found.contains(&id.as_str()), "{id} beyond a window that found enough");
                }
            }
        }
    }

    /// The identifiers of a long history's opening turns, under turns of
    /// prose, are read when the prose leaves the room unused, up to 8 times
    /// the bytes; a window that finds enough for the room stops there.
    #[test]
    fn opening_identifiers_under_prose_are_read_up_to_eight_times_as_far() {
        let opening =
            Message::user("Deploy ORD-2024-00123 from /srv/app/release-7.tar to 10.0.4.17, see PAY-4411.");
        let prose = |n: usize| {
            (0..n).map(|i| {
                Message::assistant(format!(
                    "Turn {}: the dashboard looks steady, latency within its usual band again.",
                    ["one", "two", "three"][i % 3]
                ))
            })
        };
        let turn = prose(1).next().unwrap().text().len();
        let folded: Vec<Message> = std::iter::once(opening.clone()).chain(prose(20)).collect();
        let found = candidates(folded.iter(), "", &[], &[], 40, 4 * turn, false).texts;
        assert_eq!(
            found,
            [
                "PAY-4411",
                "10.0.4.17",
                "/srv/app/release-7.tar",
                "ORD-2024-00123"
            ]
        );
        // Past 8 times the bytes, not read.
        let far: Vec<Message> = std::iter::once(opening.clone()).chain(prose(40)).collect();
        let found = candidates(far.iter(), "", &[], &[], 40, 4 * turn, false).texts;
        assert_eq!(found, Vec::<String>::new());
        // A window that finds a quarter of `enough` is all that is read.
        let dense = Message::user(
            "Also /srv/a.csv, /srv/b.csv, /srv/c.csv, PROJ-1, PROJ-2, PROJ-3, v1.2.3, 10.1.1.1, 10.1.1.2, 10.1.1.3.",
        );
        let window: Vec<Message> = [opening, dense].into_iter().collect();
        let dense_len = window[1].text().len();
        let found = candidates(window.iter(), "", &[], &[], 40, dense_len, false).texts;
        assert_eq!(found.len(), 10);
        assert!(!found.iter().any(|f| f == "ORD-2024-00123"));
    }

    #[test]
    fn user_patterns_add_entries() {
        let pattern = LedgerPattern::new(r"ORD#[0-9]+").unwrap();
        assert_eq!(identifiers("order ORD#5521 shipped", &[pattern]), ["ORD#5521"]);
    }

    /// The entries `serde_json::Value` gives (how the ledger read JSON
    /// before [`Json`]), and the values named.
    fn by_value(text: &str) -> Option<(Vec<String>, Vec<String>)> {
        use serde_json::Value;
        fn walk(value: &Value, out: &mut Vec<String>, values: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    for (key, v) in map {
                        match v {
                            Value::String(s) if is_identifier_key(key) && usable(s) && !holds_secret(s) => {
                                out.push(format!("{key}: {s}"));
                                values.push(s.clone());
                            }
                            other => walk(other, out, values),
                        }
                    }
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, out, values)),
                _ => {}
            }
        }
        let value = serde_json::from_str::<Value>(text).ok()?;
        let (mut out, mut values) = (Vec::new(), Vec::new());
        walk(&value, &mut out, &mut values);
        Some((out, values))
    }

    /// JSON texts with identifier keys and others, given twice or more in
    /// one object (short and long ones), strings escaped or not, numbers
    /// of every kind, nesting, and broken texts.
    fn json_texts() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let key = prop_oneof![
            Just("id"),
            Just("path"),
            Just("user_id"),
            Just("fileName"),
            Just("\\u0069d"),
            Just("token"),
            Just("note"),
            Just("n"),
        ]
        .prop_map(|k| format!("\"{k}\""));
        let leaf = prop_oneof![
            Just(r#""run-7""#.to_owned()),
            Just(r#""/tmp/a\/b.csv""#.to_owned()),
            Just(r#""two\nlines""#.to_owned()),
            Just(r#""caf\u00e9""#.to_owned()),
            Just(r#""  ""#.to_owned()),
            Just(format!("\"{}\"", "x".repeat(301))),
            Just("12".to_owned()),
            Just("-3.5e7".to_owned()),
            Just("1e400".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("true".to_owned()),
            Just("null".to_owned()),
            "[a-z0-9./-]{0,12}".prop_map(|s| format!("\"{s}\"")),
        ];
        let value = leaf.prop_recursive(4, 64, 24, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec((key.clone(), inner), 0..24).prop_map(|m| {
                    let members: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                    format!("{{{}}}", members.join(", "))
                }),
            ]
        });
        (value, prop_oneof![Just(""), Just(" "), Just("}"), Just(",")]).prop_map(|(v, tail)| v + tail)
    }

    proptest::proptest! {
        /// The ledger's JSON reading gives the entries, and names the
        /// values, that reading a `serde_json::Value` gives, and fails where
        /// it fails.
        #[test]
        fn json_reads_as_serde_json_values(text in json_texts()) {
            let ours = parse_json(&text).map(|value| {
                let (mut out, mut values) = (Vec::new(), Set::default());
                json_entries(&value, &mut out, &mut values);
                let mut values: Vec<String> = values.into_iter().collect();
                values.sort();
                (out.into_iter().map(String::from).collect::<Vec<_>>(), values)
            });
            let theirs = by_value(&text).map(|(out, mut values)| {
                values.sort();
                values.dedup();
                (out, values)
            });
            proptest::prop_assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn a_key_given_twice_keeps_its_first_place_and_last_value() {
        let long: String = (0..20).map(|i| format!(r#""k{i}": 1, "#)).collect();
        for filler in ["", long.as_str()] {
            let text = format!(r#"{{"id": "a", {filler}"path": "/p", "id": "b"}}"#);
            let mut out = Vec::new();
            json_entries(&parse_json(&text).unwrap(), &mut out, &mut Set::default());
            assert_eq!(out, ["id: b", "path: /p"], "{text}");
        }
    }
}
