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
//! A tool result without its call, and a call never answered, are legal:
//! each is a unit of its own. What bad input gives is on [`Error`] and in
//! [`error`]; `tests/bad_input.rs` is the whole catalogue.
//!
//! # The ledger
//!
//! By default the summary ends with the ledger, under the heading
//! `Exact identifiers (kept verbatim):` ([`LEDGER_HEADING`]): the
//! identifiers of the folded turns that the summarizer's text lacks, found
//! without a model, secrets left out, and rolled forward with the summary.
//! It takes the room the summarizer's text leaves, and its share at least:
//! a third by default ([`FoldPolicy::ledger_percent`], `--ledger-percent`).
//! Off: `FoldPolicy::new().ledger(false)` or `--no-ledger`. On
//! `benches/ledger_eval.py` the command keeps 100% of the identifiers, with
//! no wrong ledger entry (`BENCHMARKS.md`).
//!
//! The identifiers a [`FoldPolicy`]'s ledger lists are recognised by shape
//! and context, not by a list of kinds: a token that mixes letters and
//! digits (`OPS-167`, `conn_994a82`, `python:3.11-slim`), that carries
//! structure (`search_store.rs:537`, `pkg.module.ClassName`,
//! `PAYMENT_API_TIMEOUT`, `@acme/kit@8.17.17`, `#482913`,
//! `validatePaymentBatch()`, sequence variants such as `c.215C>G`,
//! what3words' `///filled.count.soap`, paths and hosts), or that is long
//! and rare (account numbers, ISBNs, hashes, base64 cursors); a table of
//! thirteen forms that shape alone reads wrong adds URLs, emails, UUIDs,
//! timestamps and dates, MAC and IP addresses, coordinate pairs
//! (`48.858370, 2.294481`), IBANs (with their check digits), money and
//! phone numbers. Backticks, typographic quotes, a table cell or a label
//! (`Booking ref:`, `ticket #`) raise a weaker shape; tokens end where the
//! script changes (CJK, Thai, Arabic, Hebrew, Devanagari, Cyrillic ...) and
//! at typographic quotes, so `/var/log/app.log` inside Chinese prose,
//! `ORD-88213` glued to Thai and `„RE-2024/33351“` are read whole. Look-alikes (`COVID-19`, `GPT-4`,
//! `x86_64`, `UTF-8`), tool calls' ids, versions inside a browser's user
//! agent and fragments of a longer entry never get a line, and the best
//! entries come first, each tier under its own heading line: what the user
//! gave, what later turns named again, what the model used, what a tool
//! returned; within a tier the surer shapes (a JSON identifier key's value,
//! `booking_ref: QX7PLM`, in OpenAI's arguments and Anthropic's `tool_use`
//! input alike), then the newest. The tiers are read back at the next fold,
//! so a busy session's tool ids never push out what the user gave. In JSON (tool calls' arguments, tool results)
//! identifiers are read as the strings say them, not as they are escaped:
//! `"C:\\srv\\app.log"` gives `C:\srv\app.log`. Secrets are left out, with
//! anything inside them: a URL with a password or a secret parameter, and
//! keys that begin as a service's do (`sk-`, `ghp_`, `xoxb-`, AWS's, …).
//! How much room the ledger takes, and how far back the folded turns are
//! read for it, is on [`FoldPolicy`].
//!
//! # Fold in steps
//!
//! Providers bill a repeated prompt prefix at a tenth of its price, so a
//! compactor that rewrites the start of the prompt on every request costs
//! more than sending everything. chatfold folds only when the history
//! passes the budget, and then down to the fold target
//! ([`Compactor::fold_to`], `--fold-to`, half the budget by default); the
//! summary message is rendered once, and until the budget is passed again
//! every request is the previous one plus the new messages, byte for byte
//! (rule 10 on [`Compactor`]):
//!
//! - a client that sends back what chatfold returned gets it unchanged;
//! - a client that resends its whole transcript (most do) gets the last
//!   fold replayed from the cache ([`Compactor::cache`]: `MemoryCache` in
//!   process, `FileCache` for `--cache-dir`, `RedisCache` for
//!   `--cache-redis` and a fleet of proxies), which records each fold's cut
//!   and summary message; an edit before the cut starts a new chain;
//! - old tool results are cleared at a fold, in one batch;
//! - on an Anthropic request that uses `cache_control`, the summary block
//!   gets a breakpoint (`--cache-breakpoints auto|never`,
//!   [`History::to_json_compacted`]).
//!
//! On a 200-turn agent session at a budget of 4 000 tokens, this is about a
//! quarter of a sliding window's input cost at Anthropic's and OpenAI's
//! cache prices (`benches/peers/cost.py`, `BENCHMARKS.md`).
//!
//! # Request bodies
//!
//! [`History`] reads OpenAI Chat Completions, Anthropic Messages and OpenAI
//! Responses request bodies, tells which is which, and writes every field
//! and block back as it came (`cache_control`, thinking, images, unknown
//! blocks). Give the compactor the history's
//! [`placement`](History::placement), and the summary goes where Claude
//! accepts it: appended to `system`, or as a leading user turn when the
//! kept part opens on an assistant turn. A memory works the same way: feed
//! it `history.messages`, and write `memory.messages()` back with
//! [`History::to_json_with`]. No Claude tokenizer runs offline, and Claude
//! counts some 15–35% more tokens than `o200k_base`: leave that margin in
//! the budget, or scale the counter.
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
//! Which type for which job:
//!
//! | job | use |
//! |---|---|
//! | compact a history | `Compactor::new(budget).compact(&messages, &summarizer)`, or `compact_async` |
//! | a server whose clients resend the whole transcript | one shared `Compactor` with `.cache(..)`; caches: `chatfold::cache::{MemoryCache, FileCache, RedisCache}` |
//! | read and write JSON and request bodies | `History::from_reader` / `from_json_str` / `from_json_value`; `to_json` / `to_json_with` |
//! | a memory per conversation | `chatfold::memory::RollingMemory` / `AsyncRollingMemory`; `TieredMemory` for agents that must never wait |
//! | save and restore a memory | `memory.to_state().to_json_string()`; `State::from_json_str`, then `RollingMemory::from_state(state, settings)` |
//! | summarize with an LLM | `chatfold::summarize::{OpenAiSummarizer, AnthropicSummarizer}`, or a closure over your client |
//! | summarize offline | `Extractive` (the CLI's default) |
//! | count tokens | `Heuristic`, `Tiktoken` (exact OpenAI counts), `NamedCounter` (by name: `"o200k_base".parse()?`), any `Fn(&str) -> usize` |
//! | shape the summary (role, prefix, size, ledger) | `FoldPolicy`, through `.policy(..)` |
//! | summarize yourself | `Compactor::plan` (pure), then `Plan::folded` and `Plan::apply` |
//! | handle errors | match on `chatfold::Error`; detail types in `chatfold::error` |
//! | property-test your pipeline | `chatfold::testing` (feature `proptest`), **outside semver** |
//!
//! The README has a quick start for each front end (the command line, the
//! proxy, the library, Python, JavaScript) and the exit codes of the
//! `chatfold` command.
//!
//! # The `chatfold` command
//!
//! `chatfold --help` and `chatfold <command> --help` list every flag. The
//! ones most runs of `chatfold compact` need:
//!
//! | flag | what it does |
//! |---|---|
//! | `--fold-to N` or `P%` | a history over the budget is folded down to this (default: 50%) |
//! | `--keep-recent N` | tokens of recent turns kept verbatim (default: a quarter of the fold target) |
//! | `--tokenizer T` | `o200k_base` (default), `cl100k_base`, an OpenAI model name, `heuristic` |
//! | `--summarize-cmd 'CMD'` | a shell command: the folded turns' transcript on stdin, `CHATFOLD_MAX_SUMMARY_TOKENS` in its environment, the summary on stdout (`--summarize-timeout`: default 120 s) |
//! | `--summarize-url URL --summarize-model NAME` | an LLM; the key from `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`, or `--api-key-env VAR` for other hosts |
//! | `--cache-dir DIR`, `--cache-redis URL` | record each fold, and replay it for a client that resends its whole transcript ("Fold in steps") |
//! | `--report FILE` | a JSON report of what was kept, hoisted and folded |
//! | `--strict` | fail (exit 4) rather than write a result over the budget |
//!
//! And of `chatfold serve`, the proxy (`--help` lists the rest: an upstream
//! per format, limits, time-outs):
//!
//! | flag | what it does |
//! |---|---|
//! | `--listen ADDR` | where to listen (default `127.0.0.1:8080`) |
//! | `--upstream URL` | the API every request goes to, as its SDK's base URL (`https://api.openai.com/v1`, `https://api.anthropic.com`) or a bare origin |
//! | `--budget N` | the budget for every model (none: requests no rule names pass through) |
//! | `--model-budget 'gpt-4o*=100000'` | the budget for models matching a glob (`*`, `?`; repeatable; the first match wins) |
//! | `--model-window 'claude-*=200000'` | a model's window: the budget is the window less the request's `max_tokens` and its `tools` |
//! | `--summarize-url`, `--summarize-cmd`, `--tokenizer` ... | as for `compact` (the built-in extractive summarizer by default) |
//! | `--cache-redis URL`, `--cache-secret SECRET` | share summaries through Redis with every proxy started with the same secret |
//! | `--pin first-user,last-user` | keep the task and the turn's question verbatim after the summary ([`Pin`]) |
//!
//! A request can set its own budget with `x-chatfold-budget: N` and its own
//! pins with `x-chatfold-pin: last-user` (`none`: no pin); neither is sent
//! upstream. The response says what happened:
//!
//! | header | meaning |
//! |---|---|
//! | `x-chatfold-summarized` | `true` when the history was compacted |
//! | `x-chatfold-tokens-before`, `x-chatfold-tokens-after` | the history's tokens, before and after |
//! | `x-chatfold-cache` | `hit` (no summarizer call), `miss`, or `none` (nothing summarized) |
//! | `x-chatfold-fallback` | the summarizer failed or timed out, and the extractive summary stood in |
//! | `x-chatfold-over-budget` | the system messages and the latest turn alone do not fit |
//! | `x-chatfold-prefix`, `x-chatfold-prefix-tokens` | `kept` when the prompt starts as the client's previous request did (nothing folded, or the last fold replayed), `rewritten` at a new fold; and the tokens of that prefix, which the provider serves from its cache |
//! | `x-chatfold-error` | `true` on an error the proxy answered itself |
//!
//! `GET /healthz` answers `ok`. A Responses request with
//! `previous_response_id` passes untouched (the upstream holds its
//! history). Answers, server-sent events or not, stream back as they
//! arrive, with the upstream's status, headers and error bodies unchanged
//! (a 429 stays a 429 with its `retry-after`).
//!
//! **The Responses API's compaction, for any model.** `POST
//! /v1/responses/compact` (`client.responses.compact`, the Agents SDK's
//! `OpenAIResponsesCompactionSession`) is answered by chatfold when the
//! upstream has none (it says 404): the output holds one `compaction` item,
//! then the newest items as they came, calls with their outputs. A
//! `context_management: [{"type": "compaction", "compact_threshold": N}]`
//! on `/v1/responses` is taken out of the request, the input compacted to
//! `N` tokens, and the response (or its stream) gets the `compaction` item
//! first in its output. chatfold's items are sealed: authenticated with the
//! server's secret (`--cache-secret`: set it so that items outlive a
//! restart and are read by every proxy of a fleet) and bound to the API key
//! that made them, so an altered item, a forged one or another key's gets
//! a 400. An item stands for everything before it, as OpenAI's does:
//! chatfold puts it back as what it holds before the request goes
//! upstream, so no upstream sees an item it cannot read. OpenAI's own
//! compaction items go to OpenAI untouched and get a 400 on the way to any
//! other upstream. `--responses-compaction always` answers both whatever
//! the upstream, `never` forwards them.
//!
//! **Anthropic's context management, for any model.** On `/v1/messages`,
//! `context_management.edits` is answered by chatfold for every upstream but
//! `api.anthropic.com` (`--anthropic-context-management auto`; `always`,
//! `never`, or `on-reject`: the upstream first, and when it answers 400 to
//! the field, once more without it, chatfold answering), and the betas it
//! answered leave `anthropic-beta`. `compact_20260112` folds the history
//! past its `trigger` (or the budget, whichever is smaller) and the answer
//! (or its stream: `content_block_start`, one `compaction_delta`,
//! `content_block_stop`) opens with a `compaction` block: its `content` the
//! summary, its `encrypted_content` sealed as the Responses items are
//! (with `pause_after_compaction`, the answer is that block alone, stopped
//! for `compaction`, and the upstream is not called). Sent
//! back, the block stands for everything before it: chatfold puts back the
//! messages that went upstream for it, then what follows the block. A
//! forged, altered or foreign block gets a 400 in Anthropic's shape;
//! Anthropic's own blocks go to Anthropic only. `clear_tool_uses_20250919`
//! (`trigger`, `keep`, `clear_at_least`, `exclude_tools`,
//! `clear_tool_inputs`) and `clear_thinking_20251015` (`keep`) are applied
//! by [`ClearToolResults`] and [`ClearThinking`], calls and results kept in
//! pairs, and reported in the answer's `context_management.applied_edits`.
//!
//! What the help leaves out:
//!
//! - `--summarize-cmd` runs in a process group of its own, which
//!   `--summarize-timeout` (default 120 s, to its exit and its output's end)
//!   or an interrupt of chatfold ends whole.
//! - `chatfold serve` sends a request's headers upstream as they came (less
//!   hop-by-hop ones and `Host`).
//! - `--upstream` is the API as its SDK's base URL: OpenAI's holds the
//!   version (`https://api.openai.com/v1`,
//!   `https://generativelanguage.googleapis.com/v1beta/openai`, a gateway's
//!   `.../openai`), so a request's `/v1` is left out when the base has a
//!   path; Anthropic's does not (`https://api.anthropic.com`), so the path is
//!   appended whole (a base ending in `/v1` takes the path's own `/v1`). A
//!   bare origin takes the path whole. Clients point their base URL at
//!   `http://HOST:PORT/v1` (OpenAI; `/chat/completions` without it is
//!   compacted too) or `http://HOST:PORT` (Anthropic). With
//!   `--openai-upstream` and `--anthropic-upstream` instead,
//!   `/v1/messages...` and requests with an `anthropic-version` header go to
//!   Anthropic's, the rest to OpenAI's (one given alone takes both).
//! - `--model-window`: the budget is the window less the request's
//!   `max_tokens` (`max_completion_tokens`, `max_output_tokens`) and the
//!   tokens of its `tools`, `functions`, `tool_choice` and `response_format`
//!   (their JSON counted).
//! - `--summarize-timeout SECS` and `--summarize-retries N` bound how long a
//!   request waits for the summarizer before the extractive summary stands
//!   in. `x-chatfold-fallback` then says `extractive; summarizer failed`; the
//!   cause goes to the proxy's stderr, not to the client.
//! - `--max-body` (default 32 MiB): a body declared larger is answered 413
//!   before it is read, one that grows larger as it streams in when it
//!   passes the limit; what the client still sends is read and discarded
//!   (up to 64 MiB, within `--read-timeout`) before the connection closes,
//!   so that a client that writes its whole body before it reads still
//!   reads the 413.
//! - `--fold-threads N` (default 64) bounds the requests folded at once;
//!   more wait their turn. Each fold runs on a thread that keeps memos of
//!   what it read, up to about 4 MiB, so this bounds their memory; raise it
//!   when many folds wait on a slow LLM summarizer.
//! - `x-chatfold-tokens-before` and `x-chatfold-tokens-after` count the
//!   history's messages; the request's other fields, such as `tools`, are
//!   not counted. `x-chatfold-cache: hit` means the summary was cached. An
//!   error the proxy answered itself carries `x-chatfold-error: true`; the
//!   upstream's errors come unchanged.
//! - A body chatfold must compact but cannot read (not JSON, a malformed
//!   tool block) is answered 400 in the API's own error shape (OpenAI's
//!   `{"error": {"message", "type", "param", "code"}}`, Anthropic's
//!   `{"type": "error", "error": {"type", "message"}}`), naming the message
//!   and field; a body that surely fits is forwarded even then.
//! - `GET /metrics` (Prometheus text) has requests by route and status,
//!   compacted requests, tokens before and after, summarizer calls and
//!   failures, fallbacks, cache hits and misses, single-flight waits, and
//!   the added latency (arrival to dispatch upstream) as a histogram. Each
//!   request logs one line on stderr: route, model, status, tokens, cache,
//!   added latency.
//! - Credentials: the client's `Authorization` / `x-api-key` (and Azure's
//!   `api-key`, Google's `x-goog-api-key`) go to the configured upstream and
//!   nowhere else (no redirect is followed), and nothing logs a body or a
//!   key. Tenants never share summaries: a request's cache namespace is a
//!   keyed BLAKE3 hash of its credential headers with the server's secret
//!   (`--cache-secret`, `$CHATFOLD_CACHE_SECRET`, or one made at start), and
//!   the credential itself is never stored or used as a key. Requests
//!   without a credential (a local Ollama) are one tenant. Concurrent
//!   requests that need the same fold make one summarizer call.
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

pub use compact::{
    Aim, Compaction, Compactor, CutReason, Fate, Measure, Plan, Prefix, Recipe, Report, Tokens, View,
    ViewCompaction, ViewRequest,
};
#[cfg(feature = "tiktoken")]
pub use count::Tiktoken;
pub use count::{Heuristic, NamedCounter, TokenCounter};
pub use error::{BoxError, Error, Result};
pub use fold::{
    ClearInputs, ClearThinking, ClearToolResults, DEFAULT_SUMMARY_PREFIX, FoldPolicy, LEDGER_HEADING,
    LedgerEntry, LedgerPattern, Pin, PinPredicate,
};
pub use history::{Breakpoints, Format, History, MAX_BREAKPOINTS, Placement};
pub use message::{Content, CustomRole, Message, Part, Role, ToolCall};
pub use summarize::{AsyncSummarizer, Extractive, Ready, Summarizer, SummaryRequest};

#[cfg(all(doctest, feature = "tiktoken", feature = "cache"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
