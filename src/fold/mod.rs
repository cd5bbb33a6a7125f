//! The floor under [`compact`](crate::Compactor) and [`memory`](crate::memory):
//! everything about folding, each rule written once.
//!
//! - `units`: atomic units (a tool call with its results) and aligned cuts:
//!   where a history or a buffer may be cut, the latest unit always kept;
//! - `policy`: [`FoldPolicy`], what *the summary* is: rendered, recognised,
//!   checked, cut to its allowance;
//! - `ledger`: the exact identifiers kept beside the summary's prose;
//! - `clear`: [`ClearToolResults`], old tool results replaced by a
//!   placeholder before a fold;
//! - `engine`: the steps of one fold (begin, complete), which the
//!   compactor's plan takes;
//! - `request`: [`SummaryRequest`](crate::SummaryRequest), what a
//!   summarizer is asked: the contract between the core and every
//!   summarizer;
//! - `pins`: [`Pin`], the messages a fold keeps verbatim wherever they
//!   stand, resolved once;
//! - `hot`: the hot-word scanner the ledger and the extractive summarizer
//!   share.
//!
//! Nothing here imports from the modules above it.

pub(crate) mod clear;
pub(crate) mod engine;
pub(crate) mod hot;
pub(crate) mod ledger;
pub(crate) mod pins;
pub(crate) mod policy;
pub(crate) mod request;
pub(crate) mod units;

pub use clear::{ClearInputs, ClearThinking, ClearToolResults};
pub use ledger::{LEDGER_HEADING, LedgerEntry, LedgerPattern};
pub use pins::{Pin, PinPredicate};
pub use policy::{DEFAULT_SUMMARY_PREFIX, FoldPolicy};
