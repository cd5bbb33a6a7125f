//! What a compaction did: the result, the report of each message's fate
//! and the reason for the cut, and the token counts behind them.

use crate::fold::LedgerEntry;
use crate::fold::ledger::Candidates;
use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::message::Message;

/// What happens to one input message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fate {
    /// Kept verbatim, in place, in the recent part.
    Kept,
    /// A system or developer message from before the cut, kept verbatim ahead
    /// of the summary.
    Hoisted,
    /// Folded into the summary.
    Folded,
    /// A previous chatfold summary, passed to the summarizer as the running summary.
    PreviousSummary,
    /// Pinned ([`Compactor::pin`](super::Compactor::pin)) and from before
    /// the cut: kept verbatim right after the summary, in its order.
    Pinned,
}

/// Why the kept part starts where it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CutReason {
    /// The history fits the budget: nothing is cut.
    Fits,
    /// Keeping the next older unit would pass `keep_recent`.
    KeepRecent,
    /// Keeping the next older unit would leave too little room for the summary.
    Budget,
    /// Every turn after the previous summary (or from the start) is kept.
    Start,
    /// The cache recorded a fold at this cut, and replaying it (its summary
    /// message as rendered, then every message from the cut on) fits the
    /// budget (rule 10).
    Reused,
    /// The budget is unreachable (the system messages and the latest turn
    /// do not fit beside a minimal summary), and a summary would take as
    /// many tokens as what it folds: the history is kept whole.
    NoGain,
}

/// What a compaction did to the start of the prompt, which providers bill
/// at a tenth of its price when it repeats the previous request's (rule 10).
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Extractive, Message, Prefix};
///
/// let compactor = Compactor::new(300).fold_to(150);
/// let history: Vec<Message> = (0..60).map(|i| Message::user(format!("turn number {i}"))).collect();
/// let folded = compactor.compact(&history, &Extractive::new())?;
/// assert_eq!(folded.report.prefix(), Prefix::Rewritten);
/// let mut next = folded.messages.into_owned();
/// next.push(Message::user("and one more"));
/// let appended = compactor.compact(&next, &Extractive::new())?;
/// assert_eq!(appended.report.prefix(), Prefix::Unchanged);
/// assert!(appended.report.prefix_kept());
/// # Ok::<(), chatfold::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Prefix {
    /// Nothing was folded: the history goes as it came.
    Unchanged,
    /// A fold the cache recorded was replayed: the same summary message,
    /// then every message from its cut on.
    Replayed,
    /// A new fold (or a clearing of tool results): the prompt is rewritten
    /// after the messages before the summary.
    Rewritten,
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Prefix::Unchanged => "unchanged",
            Prefix::Replayed => "replayed",
            Prefix::Rewritten => "rewritten",
        })
    }
}

/// A count of tokens: exact, or a lower bound where counting stopped once it
/// proved the history over budget (the folded middle is never counted,
/// unless [`Compactor::count_all`](super::Compactor::count_all) asks).
///
/// # Examples
///
/// ```
/// use chatfold::Tokens;
///
/// assert_eq!(Tokens::Exact(120).exact(), Some(120));
/// assert_eq!(Tokens::AtLeast(90).exact(), None);
/// assert_eq!(Tokens::AtLeast(90).get(), 90);
/// assert_eq!(Tokens::AtLeast(90).to_string(), "at least 90");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tokens {
    /// Every message was counted.
    Exact(usize),
    /// Counting stopped here, past the budget: there are at least this many.
    AtLeast(usize),
}

impl Tokens {
    /// The number: exact, or the lower bound.
    pub fn get(self) -> usize {
        match self {
            Tokens::Exact(n) | Tokens::AtLeast(n) => n,
        }
    }

    /// The number when it is exact.
    pub fn exact(self) -> Option<usize> {
        match self {
            Tokens::Exact(n) => Some(n),
            Tokens::AtLeast(_) => None,
        }
    }
}

impl fmt::Display for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tokens::Exact(n) => write!(f, "{n}"),
            Tokens::AtLeast(n) => write!(f, "at least {n}"),
        }
    }
}

/// The fate in words, as the CLI's `explain` shows it.
///
/// # Examples
///
/// ```
/// use chatfold::Fate;
///
/// assert_eq!(Fate::Hoisted.to_string(), "hoisted (kept before the summary)");
/// ```
impl fmt::Display for Fate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fate::Kept => "kept",
            Fate::Hoisted => "hoisted (kept before the summary)",
            Fate::Folded => "folded",
            Fate::PreviousSummary => "previous summary (folded)",
            Fate::Pinned => "pinned (kept after the summary)",
        })
    }
}

/// The reason in words, as the CLI's report and `explain` show it.
///
/// # Examples
///
/// ```
/// use chatfold::CutReason;
///
/// assert_eq!(CutReason::KeepRecent.to_string(), "keep-recent reached");
/// ```
impl fmt::Display for CutReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CutReason::Fits => "the history fits the budget",
            CutReason::KeepRecent => "keep-recent reached",
            CutReason::Budget => "no more room beside the summary",
            CutReason::Start => "every turn after the previous summary fits",
            CutReason::Reused => "a cached summary covers every message before it",
            CutReason::NoGain => "the budget is unreachable and a summary would not make the history smaller",
        })
    }
}

/// Token counts of the messages counted so far: a suffix counted from the
/// end, and any others (pinned messages) on the side.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) len: usize,
    /// `suffix[k]`: tokens of message `len - 1 - k`.
    pub(super) suffix: Vec<usize>,
    pub(super) side: std::collections::BTreeMap<usize, usize>,
}

impl Counts {
    pub(super) fn new(len: usize) -> Self {
        Counts {
            len,
            ..Counts::default()
        }
    }

    pub(super) fn get(&self, i: usize) -> Option<usize> {
        match self.len.checked_sub(i + 1) {
            Some(k) if k < self.suffix.len() => Some(self.suffix[k]),
            _ => self.side.get(&i).copied(),
        }
    }

    pub(super) fn get_or_count(&mut self, i: usize, count: impl FnOnce() -> usize) -> usize {
        if let Some(t) = self.get(i) {
            return t;
        }
        let t = count();
        if self.len.checked_sub(i + 1) == Some(self.suffix.len()) {
            self.suffix.push(t);
        } else {
            self.side.insert(i, t);
        }
        t
    }
}

/// The result of a compaction.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Extractive, Message};
/// use std::borrow::Cow;
///
/// let short = [Message::user("hi")];
/// let result = Compactor::new(1000).compact(&short, &Extractive::new())?;
/// assert!(matches!(result.messages, Cow::Borrowed(_))); // unchanged, not copied
/// assert!(!result.summarized);
/// assert_eq!(result.tokens_before.exact(), Some(result.tokens_after));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Compaction<'a> {
    /// The compacted history: borrowed when unchanged.
    pub messages: Cow<'a, [Message]>,
    /// Whether a summary was made.
    pub summarized: bool,
    /// Tokens in the input: exact when they were all counted (the history
    /// fit, the budget was unreachable, or
    /// [`Compactor::count_all`](super::Compactor::count_all) was set), else
    /// the lower bound that proved it over the budget.
    pub tokens_before: Tokens,
    /// Tokens in the output, exact.
    pub tokens_after: usize,
    /// Whether the output is over the budget (the budget was unreachable).
    pub over_budget: bool,
    /// Whether the summary was cut to fit its allowance.
    pub summary_truncated: bool,
    /// Tokens of the output's start that the client's previous request
    /// sent too, and a provider serves from its prompt cache: for a new
    /// fold, the messages before the first it changed; otherwise everything
    /// before the latest exchange (the newest unit, and the model's answer
    /// right before it), on the assumption that the client sent the same
    /// conversation one exchange shorter before. Against
    /// [`tokens_after`](Self::tokens_after), the cache-hit share to expect.
    pub prefix_tokens: usize,
    /// What happened to each input message, and why.
    pub report: Report,
}

/// What a compaction did with each input message, and why.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, CutReason, Fate, Message, SummaryRequest};
///
/// let mut history = vec![Message::system("Be brief.")];
/// history.extend((0..40).map(|i| Message::user(format!("message number {i}"))));
/// let result = Compactor::new(100).fold_to(100).compact(&history, &|_: &SummaryRequest<'_>| {
///     Ok::<_, std::convert::Infallible>("forty numbered messages".to_owned())
/// })?;
/// let report = &result.report;
/// assert_eq!(report.fate(0), Some(Fate::Hoisted));
/// assert_eq!(report.fate(1), Some(Fate::Folded));
/// assert_eq!(report.fate(40), Some(Fate::Kept));
/// assert_eq!(report.indices(Fate::Kept).next(), Some(report.cut()));
/// assert_eq!(report.reason(), CutReason::KeepRecent);
/// assert!(report.tokens(40).is_some()); // kept messages are counted
/// assert_eq!(report.tokens(1), None); // folded ones are not
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub(super) len: usize,
    pub(super) cut: usize,
    pub(super) reason: CutReason,
    pub(super) aligned_from: Option<usize>,
    pub(super) allowance: usize,
    pub(super) prose_allowance: usize,
    pub(super) hoisted: Vec<usize>,
    /// Pinned messages before the cut, placed after the summary.
    pub(super) pinned: Vec<usize>,
    pub(super) previous: Vec<usize>,
    pub(super) counts: Counts,
    pub(super) ledger: Listed,
    pub(super) cleared: Vec<usize>,
    pub(super) reused: Option<usize>,
    pub(super) folds: usize,
    pub(super) prefix: Prefix,
}

impl Report {
    /// What the compaction did to the start of the prompt.
    pub fn prefix(&self) -> Prefix {
        self.prefix
    }

    /// Whether the output starts as the previous request's did (nothing
    /// folded, or a recorded fold replayed): not a new fold.
    pub fn prefix_kept(&self) -> bool {
        self.prefix != Prefix::Rewritten
    }

    /// How many leading messages a cached summary covered, when one was
    /// reused (equal to [`cut`](Self::cut) when no summarizer ran).
    pub fn reused(&self) -> Option<usize> {
        self.reused
    }

    /// How many summarizer calls the folded part takes: one, more with
    /// [`Compactor::max_fold_input_tokens`](super::Compactor::max_fold_input_tokens), none when a cached summary
    /// covers it or nothing is folded.
    pub fn folds(&self) -> usize {
        self.folds
    }

    /// How many input messages there were.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the input was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the first message of the kept part (the input's length when
    /// nothing is kept; 0 when the history fit).
    pub fn cut(&self) -> usize {
        self.cut
    }

    /// Why the kept part starts there.
    pub fn reason(&self) -> CutReason {
        self.reason
    }

    /// Where the cut was before alignment moved it forward, if it did.
    pub fn aligned_from(&self) -> Option<usize> {
        self.aligned_from
    }

    /// The most tokens the summary's text may take, the summarizer's prose
    /// and the ledger section together (0 when nothing was folded). The
    /// summary message is this, its prefix and its framing.
    pub fn allowance(&self) -> usize {
        self.allowance
    }

    /// The allowance the summarizer was told
    /// ([`SummaryRequest::allowance`](crate::SummaryRequest::allowance)):
    /// [`allowance`](Self::allowance) less the room the ledger section
    /// takes (0 when nothing was folded).
    pub fn prose_allowance(&self) -> usize {
        self.prose_allowance
    }

    /// The fate of input message `index` (`None` past the end).
    pub fn fate(&self, index: usize) -> Option<Fate> {
        Some(if index >= self.len {
            return None;
        } else if index >= self.cut {
            Fate::Kept
        } else if self.previous.binary_search(&index).is_ok() {
            Fate::PreviousSummary
        } else if self.hoisted.binary_search(&index).is_ok() {
            Fate::Hoisted
        } else if self.pinned.binary_search(&index).is_ok() {
            Fate::Pinned
        } else {
            Fate::Folded
        })
    }

    /// The messages in `range` before the cut that are not folded (hoisted
    /// and pinned ones, previous summaries): their indices counted from
    /// `range.start`, ascending.
    pub(crate) fn not_folded(&self, range: std::ops::Range<usize>) -> Vec<usize> {
        let mut skip: Vec<usize> = (self.hoisted.iter().chain(&self.pinned).chain(&self.previous))
            .filter(|i| range.contains(i))
            .map(|&i| i - range.start)
            .collect();
        skip.sort_unstable();
        skip
    }

    /// The fate of every input message, in order.
    pub fn fates(&self) -> impl Iterator<Item = Fate> + '_ {
        (0..self.len).filter_map(|i| self.fate(i))
    }

    /// Input indices with the given fate, in order.
    pub fn indices(&self, fate: Fate) -> impl Iterator<Item = usize> + '_ {
        (0..self.len).filter(move |&i| self.fate(i) == Some(fate))
    }

    /// The ledger entries listed in the summary, in the order listed:
    /// highest tier first, then newest first (empty when
    /// nothing was folded or the ledger is off). Each entry is shared (see
    /// [`SummaryRequest::ledger`](crate::SummaryRequest::ledger)).
    pub fn ledger(&self) -> &[LedgerEntry] {
        &self.ledger.lists().0
    }

    /// Identifiers found in the folded turns that did not fit in the ledger's
    /// share of the summary (nor stand in its prose).
    pub fn ledger_dropped(&self) -> &[LedgerEntry] {
        &self.ledger.lists().1
    }

    /// Input indices of the tool results whose content was replaced by a
    /// placeholder ([`Compactor::clear_tool_results`](super::Compactor::clear_tool_results)), in order.
    pub fn cleared(&self) -> &[usize] {
        &self.cleared
    }

    /// Tokens of input message `index`, if it was counted: kept and hoisted
    /// messages always are, folded ones only with [`Compactor::count_all`](super::Compactor::count_all).
    pub fn tokens(&self, index: usize) -> Option<usize> {
        self.counts.get(index)
    }
}

#[cfg(test)]
mod tests {
    use super::{CutReason, Fate};

    #[test]
    fn every_fate_and_reason_has_its_own_words() {
        let fates = [
            Fate::Kept,
            Fate::Hoisted,
            Fate::Folded,
            Fate::PreviousSummary,
            Fate::Pinned,
        ]
        .map(|f| f.to_string());
        let reasons = [
            CutReason::Fits,
            CutReason::KeepRecent,
            CutReason::Budget,
            CutReason::Start,
            CutReason::Reused,
        ]
        .map(|r| r.to_string());
        for words in [&fates[..], &reasons[..]] {
            let mut unique = words.to_vec();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), words.len(), "{words:?}");
            assert!(words.iter().all(|w| !w.is_empty() && w == &w.to_lowercase()));
        }
    }
}

/// A fold's ledger entries in a [`Report`]: the fold's candidates, shared
/// (with the memo of readings, which hands the same ones to the next
/// compaction of the same turns), and which of them the summary listed
/// and which it had no room for. The two lists are made when first asked
/// for: a caller that never reads them counts no reference on each entry,
/// nor drops one.
#[derive(Clone, Default)]
pub(crate) struct Listed {
    candidates: Arc<Candidates>,
    /// Indices into `candidates`, listed then dropped (apart, each once).
    listed: Vec<usize>,
    dropped: Vec<usize>,
    lists: OnceLock<(Vec<LedgerEntry>, Vec<LedgerEntry>)>,
}

impl Listed {
    pub(crate) fn new(candidates: Arc<Candidates>, listed: Vec<usize>, dropped: Vec<usize>) -> Self {
        debug_assert!(listed.iter().all(|i| !dropped.contains(i)));
        Listed {
            candidates,
            listed,
            dropped,
            lists: OnceLock::new(),
        }
    }

    /// The listed entries and the dropped ones.
    fn lists(&self) -> &(Vec<LedgerEntry>, Vec<LedgerEntry>) {
        self.lists.get_or_init(|| {
            let texts = &self.candidates.texts;
            let take = |at: &[usize]| at.iter().map(|&i| texts[i].clone()).collect();
            (take(&self.listed), take(&self.dropped))
        })
    }
}

impl PartialEq for Listed {
    fn eq(&self, other: &Self) -> bool {
        self.lists() == other.lists()
    }
}

impl Eq for Listed {}

impl fmt::Debug for Listed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (listed, dropped) = self.lists();
        f.debug_struct("Listed")
            .field("listed", listed)
            .field("dropped", dropped)
            .finish()
    }
}
