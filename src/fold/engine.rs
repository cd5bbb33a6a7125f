//! One fold's steps, with no I/O and no state of its own.
//!
//! A fold has two steps around the summarizer's call:
//!
//! - **begin** ([`Fold::begin`]): the previous summary's prose and the
//!   ledger's candidates, found once, and the allowance left to the
//!   summarizer's own text; [`Fold::request`] is what the summarizer gets;
//! - **complete** ([`Fold::complete`]): the summarizer's text checked by the
//!   policy (trimmed, not empty), given its ledger section and cut to its
//!   limit.
//!
//! The compactor's plan runs these steps over the folded part of a history.
//! A memory folds the front of its buffer through the same policy and
//! ledger (`memory::tracked`).

use std::borrow::Cow;
use std::sync::Arc;

use crate::count::TokenCounter;
use crate::error::Result;
use crate::fold::ledger::{self, Candidates, Tier};
use crate::fold::policy::{Fitted, FoldPolicy, Listing};
use crate::fold::request::SummaryRequest;
use crate::message::{Message, join_lines};

/// A fold begun: the previous summaries' prose, the ledger's candidate
/// entries (each counted once), and the allowance left to the summarizer's
/// text.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fold<'a> {
    /// The previous summaries' prose (their ledgers taken out), if any.
    pub prose: Option<Cow<'a, str>>,
    /// The ledger's candidates, highest rank first (shared with the memo of
    /// readings).
    pub entries: Arc<Candidates>,
    /// Each candidate's tokens: its text and a line's framing.
    pub tokens: Vec<usize>,
    /// Each candidate's tier.
    pub tiers: Vec<Tier>,
    /// Tokens the summarizer's own text may take.
    pub allowance: usize,
}

impl<'a> Fold<'a> {
    /// Begins a fold onto the summary bodies `previous` (prose and ledger
    /// section, oldest first) of `folded`, with `allowance` tokens of
    /// summary text and `extra` more the ledger may take: the previous
    /// prose for the summarizer, the ledger's candidates (each counted
    /// once, here), and the allowance left to the summarizer's own text.
    pub(crate) fn begin<'m, C: TokenCounter + ?Sized>(
        policy: &FoldPolicy,
        previous: &[Cow<'a, str>],
        folded: impl DoubleEndedIterator<Item = &'m Message> + Clone,
        (allowance, extra): (usize, usize),
        counter: &C,
    ) -> Self {
        if !policy.ledger {
            return Fold {
                prose: join_lines(previous.iter().cloned()),
                entries: Arc::default(),
                tokens: Vec::new(),
                tiers: Vec::new(),
                allowance,
            };
        }
        let (mut proses, mut old) = (Vec::new(), Vec::new());
        for body in previous.iter().rev() {
            let (prose, entries) = match body {
                Cow::Borrowed(b) => {
                    let (p, e) = ledger::split(b);
                    (
                        Cow::Borrowed(p),
                        e.into_iter()
                            .map(|(e, t)| (Cow::Borrowed(e), t))
                            .collect::<Vec<_>>(),
                    )
                }
                Cow::Owned(b) => {
                    let (p, e) = ledger::split(b);
                    (
                        Cow::Owned(p.to_owned()),
                        e.into_iter()
                            .map(|(e, t)| (Cow::Owned(e.to_owned()), t))
                            .collect(),
                    )
                }
            };
            proses.push(prose);
            old.extend(entries);
        }
        proses.reverse();
        let old: Vec<ledger::Carried> = old.iter().map(|(e, t)| ledger::Carried::new(e, *t)).collect();
        let prose_text = join_lines(proses.iter().map(|p| &**p)).unwrap_or_default();
        let entries = ledger::candidates(
            folded,
            &prose_text,
            &old,
            &policy.ledger_patterns,
            // As many as the extra room could list too, at 4 tokens each.
            // As many as the extra room could list too, at 4 tokens each,
            // read a little further for them.
            policy.max_entries(allowance).saturating_add(extra / 4),
            allowance.saturating_add(extra / 4).saturating_mul(8),
            // A stateless compactor reads the same history again and again.
            true,
        );
        let tokens: Vec<usize> = (entries.texts.iter())
            .map(|t| ledger::entry_tokens(t, counter))
            .collect();
        let sum = tokens.iter().map(|&t| t as u128).sum();
        let tiers = entries.tiers();
        let told = policy.told_allowance(&tokens, &tiers, (tokens.len(), sum), allowance, counter);
        Fold {
            prose: join_lines(proses),
            entries,
            tokens,
            tiers,
            allowance: told,
        }
    }

    /// The summarizer's request for `messages` (less the indices in `skip`,
    /// sorted), on `previous` (the prose this fold began with when `None`).
    pub(crate) fn request<'m>(
        &'m self,
        previous: Option<Cow<'m, str>>,
        messages: &'m [Message],
        skip: Vec<usize>,
        counter: Option<&'m (dyn TokenCounter + Sync)>,
    ) -> SummaryRequest<'m> {
        let previous = previous.or_else(|| self.prose.as_deref().map(Cow::Borrowed));
        SummaryRequest::skipping(previous, messages, skip, self.allowance)
            .with_ledger(Cow::Borrowed(&self.entries.texts))
            .with_counter(counter)
    }

    /// The summary message for the summarizer's answer: checked (trimmed,
    /// not blank), its ledger section added (less the entries `held` says,
    /// by their place, the turns kept beside it hold verbatim), the whole
    /// cut to `limits` (its limit, and the most it may take to list the
    /// identifiers the user gave), counted exactly.
    ///
    /// # Errors
    ///
    /// [`Error::EmptySummary`](crate::Error::EmptySummary) for a blank answer.
    pub(crate) fn complete<C: TokenCounter + ?Sized>(
        &self,
        policy: &FoldPolicy,
        text: String,
        held: &dyn Fn(usize) -> bool,
        limits: (usize, usize),
        counter: &C,
    ) -> Result<Fitted> {
        let text = policy.accept(text)?;
        let texts: Vec<&str> = self.entries.texts.iter().map(|t| &**t).collect();
        let listing = Listing {
            texts: &texts,
            tokens: &self.tokens,
            tiers: &self.tiers,
        };
        Ok(policy.fit(&text, listing, held, limits, counter, true))
    }

    /// The same fold, owning its prose.
    pub(crate) fn into_owned(self) -> Fold<'static> {
        Fold {
            prose: self.prose.map(|p| Cow::Owned(p.into_owned())),
            entries: self.entries,
            tokens: self.tokens,
            tiers: self.tiers,
            allowance: self.allowance,
        }
    }
}
