//! A fold's entries: each with its tokens, its key and whether it is loose;
//! and a memory's kept ledger, folded onto by each fold.

use std::hash::BuildHasherDefault;

use super::said::word_hash;
use super::{LedgerEntry, entry_tokens, is_loose, lines, value_of};
use crate::quick::Quick;

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
    /// Each entry's rank, the highest first (see `candidates`).
    pub ranks: Vec<u8>,
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
        let ranks = vec![0; texts.len()];
        Entries::keyed(
            Candidates {
                texts,
                keys,
                loose,
                ranks,
            },
            counter,
        )
    }

    /// [`candidates`]' entries, each counted by `counter`.
    pub(crate) fn keyed<C: crate::count::TokenCounter + ?Sized>(found: Candidates, counter: &C) -> Self {
        let Candidates {
            texts, keys, loose, ..
        } = found;
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
        // Found again: the entries leave their place (for the front), the
        // section rebuilt without their lines in one copy.
        if !edit.again.is_empty() {
            let mut rendered = String::with_capacity(self.rendered.len());
            self.push_lines(&mut rendered, edit.again, self.len(), true);
            let mut gone = vec![false; self.len()];
            for &a in edit.again {
                gone[a] = true;
                self.total -= self.entries.tokens[a] as u128;
                self.loose_count -= usize::from(self.entries.loose[a]);
                let key = self.entries.keys[a];
                self.unkey(key);
            }
            self.entries.retain(&gone);
            self.rendered = rendered;
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
