//! Keep LLM chat histories inside a token budget.
//!
//! chatfold keeps the system messages and the most recent turns of a chat
//! history verbatim and folds the older middle into **one** summary message,
//! through a summarizer you supply (an LLM call, or the built-in
//! [`Extractive`] one that needs no model).
//!
//! ```
//! use chatfold::{Compactor, Extractive, Message, ToolCall};
//!
//! let mut history = vec![Message::system("You are a travel agent.")];
//! for day in 1..=30 {
//!     history.push(Message::user(format!("Day {day}: what should I see in Seoul?")));
//!     history.push(Message::assistant_tool_calls(vec![ToolCall::new(
//!         format!("c{day}"),
//!         "search",
//!         format!(r#"{{"q": "Seoul day {day}"}}"#),
//!     )]));
//!     history.push(Message::tool(format!("Gyeongbokgung, Bukchon, Namsan, item {day}."), format!("c{day}")));
//!     history.push(Message::assistant(format!("On day {day}, visit Gyeongbokgung Palace.")));
//! }
//!
//! let compactor = Compactor::new(400);
//! let result = compactor.compact(&history, &Extractive::new())?;
//!
//! assert!(result.summarized);
//! assert!(result.tokens_after <= 400);
//! assert_eq!(result.messages[0], history[0]);            // system prompt, verbatim
//! assert!(compactor.policy.is_summary(&result.messages[1])); // one summary
//! assert_eq!(result.messages.last(), history.last());    // recent turns, verbatim
//!
//! // Feed the result back with new turns: the summary is recognised and rolled forward.
//! let mut next = result.messages.into_owned();
//! next.push(Message::user("And day 31?"));
//! let again = compactor.compact(&next, &Extractive::new())?;
//! assert_eq!(again.messages.iter().filter(|m| compactor.policy.is_summary(m)).count(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How it works
//!
//! [`Compactor::plan`] is a pure function: it decides which messages are
//! kept, which system messages are hoisted ahead of the summary, and which are
//! folded, and how many tokens the summary may take. [`Plan::folded`] is what
//! the summarizer gets; [`Plan::apply`] builds the result. [`Compactor::compact`]
//! and [`Compactor::compact_async`] are those three steps. The guarantees are
//! listed on [`Compactor`].
//!
//! # Where things are
//!
//! The everyday names are at the root: [`Compactor`] (and its [`Plan`] and
//! [`Compaction`]), [`Message`], [`History`] (request bodies, OpenAI's and
//! Anthropic's), [`FoldPolicy`] (the summary message and its ledger), the
//! [`Summarizer`] and [`AsyncSummarizer`] traits, [`Extractive`], the
//! counters ([`TokenCounter`], [`Heuristic`], [`Tiktoken`], [`NamedCounter`])
//! and [`Error`]. The rest sits in namespaces most users never name:
//!
//! - [`memory`]: the stateful memories (`RollingMemory`, `TieredMemory` and
//!   the others) and their saved [`State`](memory::State);
//! - [`summarize`]: the LLM summarizers (`OpenAiSummarizer`,
//!   `AnthropicSummarizer`, features `openai` and `anthropic`) and their
//!   [`Prompt`](summarize::Prompt);
//! - [`cache`] (feature `cache`): summary reuse for stateless servers
//!   (`MemoryCache`, `FileCache`, and `RedisCache` with feature `redis`);
//! - [`error`]: the detail types of [`Error`]'s variants;
//! - `testing` (feature `proptest`, outside semver): generators and rule
//!   checks for property-testing a pipeline built on chatfold.
//!
//! The README has a quick start for each front end (the command line, the
//! compactor, the memories, Anthropic request bodies, the LLM summarizers),
//! a table of which type to use for which job, and the exit codes of the
//! `chatfold` command.
//!
//! # Crate features
//!
//! - `tiktoken` (default): [`Tiktoken`], exact OpenAI token counts
//!   (`o200k_base`, `cl100k_base`, by model name): tiktoken-rs's
//!   vocabularies, prepared at build time, and a counter of chatfold's own.
//! - `cache` (default): [`cache`] and [`Compactor::cache`], summary reuse
//!   across compactions, for servers whose clients resend the whole
//!   transcript (pulls in blake3, which keys the cache). Without it the
//!   compactor never hashes.
//! - `openai`: `summarize::OpenAiSummarizer`, for any OpenAI-compatible
//!   Chat Completions endpoint (OpenAI, Ollama, vLLM, Gemini, OpenRouter).
//! - `anthropic`: `summarize::AnthropicSummarizer`, for Anthropic's
//!   Messages API. Either one pulls in ureq (with rustls), backon, oneshot,
//!   log and httpdate.
//! - `redis` (turns on `cache`): `cache::RedisCache`, a summary cache a
//!   fleet of servers shares (pulls in the `redis` crate, without its async
//!   runtime, and log).
//! - `proptest`: `testing`, the history generators, rule checks and faulty
//!   summarizers chatfold's own tests use, for pipelines that property-test
//!   their use of chatfold. It is **outside semver**: it follows proptest's
//!   types and chatfold's tests, and may change in any release.
//! - `serve`: the server parts of `chatfold serve`, the compaction proxy
//!   (tokio, hyper, hyper-util, http-body-util, hyper-rustls, bytes); the
//!   proxy lives in the binary, and the library uses none of them.
//! - `cli`: the `chatfold` command-line tool (pulls in clap, and turns on
//!   `tiktoken`, `cache`, `openai`, `anthropic`, `redis` and `serve`).
//!
//! `cargo doc --all-features --open` documents all of it; plain
//! `cargo doc --open` documents the default features only.

#![forbid(unsafe_code)]
#![deny(missing_docs, missing_debug_implementations)]
#![warn(unreachable_pub, clippy::incompatible_msrv)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg(feature = "cache")]
pub mod cache;
mod compact;
mod count;
pub mod error;
mod fold;
mod history;
pub mod memory;
mod message;
mod quick;
pub mod summarize;
#[cfg(feature = "proptest")]
pub mod testing;

pub use compact::{Compaction, Compactor, CutReason, Fate, Plan, Report, Tokens};
#[cfg(feature = "tiktoken")]
pub use count::Tiktoken;
pub use count::{Heuristic, NamedCounter, TokenCounter};
pub use error::{BoxError, Error, Result};
pub use fold::{
    ClearToolResults, DEFAULT_SUMMARY_PREFIX, FoldPolicy, LEDGER_HEADING, LedgerEntry, LedgerPattern,
};
pub use history::{Format, History, Placement};
pub use message::{Content, CustomRole, Message, Part, Role, ToolCall};
pub use summarize::{AsyncSummarizer, Extractive, Ready, Summarizer, SummaryRequest};

#[cfg(all(doctest, feature = "tiktoken", feature = "cache"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
