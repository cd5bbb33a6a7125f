//! A fold's candidate entries, and a memory's kept ledger.

use super::candidates::tier_of;
use super::words::word_hash;
use super::{LedgerEntry, Tier, entry_tokens, value_of};
#[cfg(doc)]
use super::{candidates, is_loose};

/// A memory's ledger, kept between folds: its entries in the order a
/// section lists them (highest tier first, newest first within a tier),
/// each with its tier and its tokens, counted once when it became an entry
/// (its text and a line's framing: `- `, the newline).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entries {
    pub texts: Vec<LedgerEntry>,
    pub tokens: Vec<usize>,
    pub tiers: Vec<Tier>,
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
        }
    }

    /// The entries and their tiers, as [`candidates`] takes an earlier
    /// ledger.
    pub(crate) fn listed(&self) -> Vec<(&str, Tier)> {
        self.texts
            .iter()
            .map(|t| &**t)
            .zip(self.tiers.iter().copied())
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
        // (The quick hash: these are the earlier fold's entries, hashed on
        // every fold.)
        let counted: std::collections::HashMap<
            &str,
            usize,
            std::hash::BuildHasherDefault<crate::quick::Quick>,
        > = self
            .texts
            .iter()
            .map(|t| &**t)
            .zip(self.tokens.iter().copied())
            .collect();
        Entries {
            texts: found.texts.clone(),
            tokens: (found.texts.iter())
                .map(|t| {
                    counted
                        .get(&**t)
                        .copied()
                        .unwrap_or_else(|| entry_tokens(t, counter))
                })
                .collect(),
            tiers: found.tiers(),
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
