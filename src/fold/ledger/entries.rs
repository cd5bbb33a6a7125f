//! A fold's candidate entries, and a memory's kept ledger.

#[cfg(doc)]
use super::candidates;
use super::candidates::tier_of;
use super::words::word_hash;
use super::{LedgerEntry, Tier, entry_tokens, is_loose, value_of};

/// A memory's ledger, kept between folds: its entries in the order a
/// section lists them (highest tier first, newest first within a tier),
/// each with its tier, and what was worked out once when it became an
/// entry: its tokens (its text and a line's framing: `- `, the newline),
/// its [`key_of`] and whether it [`is_loose`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entries {
    pub texts: Vec<LedgerEntry>,
    pub tokens: Vec<usize>,
    pub tiers: Vec<Tier>,
    pub keys: Vec<u64>,
    pub loose: Vec<bool>,
}

/// An earlier fold's entry, as [`candidates`] takes it: its text and tier,
/// with its [`key_of`] and whether it [`is_loose`] (a memory's ledger
/// keeps both; a summary's rendered ledger is read for them).
#[derive(Clone, Debug)]
pub(crate) struct Carried {
    pub text: LedgerEntry,
    pub tier: Tier,
    pub key: u64,
    pub loose: bool,
}

impl Carried {
    /// The entry `text` of `tier`, read for its key and looseness.
    pub(crate) fn new(text: &str, tier: Tier) -> Self {
        Carried {
            text: text.into(),
            tier,
            key: key_of(text),
            loose: is_loose(text),
        }
    }
}

/// What [`candidates`] finds: the entries, highest rank first, each with
/// its [`key_of`], whether it is loose ([`is_loose`]), its rank (its tier
/// above its shape's strength, see `candidates`), and the message it was
/// turn it was last found in (while gathering: a second turn raises it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Candidates {
    pub texts: Vec<LedgerEntry>,
    pub keys: Vec<u64>,
    pub loose: Vec<bool>,
    pub ranks: Vec<u8>,
    pub from: Vec<u32>,
}

/// The hash [`Candidates::keys`] holds.
pub(crate) fn key_of(entry: &str) -> u64 {
    word_hash(value_of(entry))
}

impl Candidates {
    /// Every entry's tier, in order.
    pub(crate) fn tiers(&self) -> Vec<Tier> {
        self.ranks.iter().map(|&r| tier_of(r)).collect()
    }
}

impl Entries {
    /// `entries`, each counted by `counter`.
    pub(crate) fn counted<C: crate::count::TokenCounter + ?Sized>(
        entries: &[(&str, Tier)],
        counter: &C,
    ) -> Self {
        Entries {
            texts: entries.iter().map(|&(t, _)| t.into()).collect(),
            tokens: entries.iter().map(|&(t, _)| entry_tokens(t, counter)).collect(),
            tiers: entries.iter().map(|&(_, tier)| tier).collect(),
            keys: entries.iter().map(|&(t, _)| key_of(t)).collect(),
            loose: entries.iter().map(|&(t, _)| is_loose(t)).collect(),
        }
    }

    /// The entries, as [`candidates`] takes an earlier ledger.
    pub(crate) fn listed(&self) -> Vec<Carried> {
        (0..self.len())
            .map(|i| Carried {
                text: self.texts[i].clone(),
                tier: self.tiers[i],
                key: self.keys[i],
                loose: self.loose[i],
            })
            .collect()
    }

    /// `found` (ranked candidates, these entries among them) with their
    /// tiers and tokens: an entry of these keeps its count, a new one is
    /// counted by `counter`.
    pub(crate) fn ranked<C: crate::count::TokenCounter + ?Sized>(
        &self,
        found: &Candidates,
        counter: &C,
    ) -> Self {
        // Each of these entries by its key (the first with it): a found
        // entry with the key and the same text keeps its count.
        let mut by_key: std::collections::HashMap<
            u64,
            usize,
            std::hash::BuildHasherDefault<crate::quick::Quick>,
        > = std::collections::HashMap::with_capacity_and_hasher(self.len(), Default::default());
        for (i, &key) in self.keys.iter().enumerate() {
            by_key.entry(key).or_insert(i);
        }
        let tokens = (found.texts.iter().zip(&found.keys))
            .map(|(text, key)| match by_key.get(key) {
                Some(&i) if self.texts[i] == *text => self.tokens[i],
                _ => entry_tokens(text, counter),
            })
            .collect();
        Entries {
            texts: found.texts.clone(),
            tokens,
            tiers: found.tiers(),
            keys: found.keys.clone(),
            loose: found.loose.clone(),
        }
    }

    /// These entries less those at `dropped` (ascending), at most `cap`.
    pub(crate) fn without(mut self, dropped: &[usize], cap: usize) -> Self {
        let mut gone = dropped.iter().copied().peekable();
        let mut n = 0;
        let marks: Vec<bool> = (0..self.len())
            .map(|i| {
                let kept = gone.next_if_eq(&i).is_none() && n < cap;
                n += usize::from(kept);
                kept
            })
            .collect();
        retain_marked(&mut self.texts, &marks);
        retain_marked(&mut self.tokens, &marks);
        retain_marked(&mut self.tiers, &marks);
        retain_marked(&mut self.keys, &marks);
        retain_marked(&mut self.loose, &marks);
        self
    }

    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }
}

/// Keeps the items `marks` marks.
fn retain_marked<T>(items: &mut Vec<T>, marks: &[bool]) {
    let mut marks = marks.iter();
    items.retain(|_| marks.next().copied().unwrap_or(false));
}
