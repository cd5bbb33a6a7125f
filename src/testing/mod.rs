//! Generators and rule checks for property-testing a pipeline built on
//! chatfold (feature `proptest`).
//!
//! **Outside semver.** This module exposes proptest's types and follows
//! chatfold's own tests: any release may change it. Pin chatfold's exact
//! version in the `[dev-dependencies]` that use it.
//!
//! A team that wraps chatfold with its own summarizer, counter, settings or
//! memory store can prove in its own test suite that the result still keeps
//! chatfold's promises. This module holds what chatfold's own property tests
//! and fuzz targets use:
//!
//! - **strategies** for histories ([`Histories`], [`histories`]): user and
//!   assistant turns, tool calls with several results, results interleaved
//!   with other turns and orphan results, system and developer messages in
//!   the middle, custom roles, content arrays, null content, unicode, long
//!   messages and identifiers. Histories are generated as [`Turn`]s and
//!   rendered, so shrinking removes whole turns and keeps every history well
//!   formed;
//! - **rule checks** ([`check_compaction`], [`check_summarizer_calls`],
//!   [`compact_checked`], [`check_memory_step`]): an oracle written from
//!   the rules in DESIGN.md (not from the library's code), which reports
//!   every broken rule with the message indices involved;
//! - **fault-injecting summarizers** ([`Faulty`], [`Gate`]): failing every
//!   Nth call, empty or oversized answers, panics, and async calls that stay
//!   pending until released (for deadlines and cancellation).
//!
//! # Examples
//!
//! ```
//! use chatfold::testing::{compact_checked, histories};
//! use chatfold::Compactor;
//! use proptest::prelude::*;
//!
//! proptest!(ProptestConfig::with_cases(32), |(history in histories(30), budget in 20usize..400)| {
//!     let compactor = Compactor::new(budget);
//!     // Fails with every broken rule and the indices involved.
//!     compact_checked(&compactor, &history, "a short summary").map_err(|v| TestCaseError::fail(v.to_string()))?;
//! });
//! ```

mod calls;
mod faults;
mod rules;

pub use calls::{Recording, SummarizerCall, check_summarizer_calls, compact_checked};
pub use faults::{Fault, FaultError, Faulty, Gate};
pub use rules::{
    Rule, Violation, Violations, check_compaction, check_memory_step, is_boundary, last_unit_start,
};

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use crate::message::{Message, Part, Role, ToolCall};

/// One step of a generated conversation, rendered into one or more messages
/// by [`render`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Turn {
    /// A system message.
    System(String),
    /// A developer message.
    Developer(String),
    /// A user message with text content.
    User(String),
    /// A user message whose content is an array: text parts and an image.
    UserParts(Vec<String>),
    /// An assistant message with text content.
    Assistant(String),
    /// An assistant message with `"content": null`.
    AssistantNull,
    /// A message with a custom role (role, text).
    Custom(String, String),
    /// An assistant turn calling `calls` tools, and results for `answered`
    /// of them (indices, in that order, repeats allowed), with `interleave`
    /// placed after the first result.
    Tools {
        /// How many calls the assistant makes.
        calls: usize,
        /// Which calls are answered, in the order of the results.
        answered: Vec<usize>,
        /// A turn placed between the first result and the rest.
        interleave: Option<Box<Turn>>,
    },
    /// A tool result whose call never appears.
    Orphan(String),
}

/// The oddities a generated history may contain; all are on unless turned
/// off with [`Histories::without`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Oddity {
    /// System and developer messages anywhere, not only at the start.
    PinnedMidway,
    /// Messages with roles other than the standard ones.
    CustomRoles,
    /// User content as an array of parts (with an image part).
    ContentArrays,
    /// Assistant messages with null content.
    NullContent,
    /// Tool results without a call.
    Orphans,
    /// Other turns between a call's results, and calls answered twice or never.
    Interleaved,
    /// Non-ASCII text: CJK, accents, emoji.
    Unicode,
    /// Long messages (40 to 200 characters; more with [`Histories::long`]).
    Long,
    /// Identifiers the ledger keeps: paths, UUIDs, URLs, ticket keys ...
    Identifiers,
    /// Messages with empty text.
    Empty,
}

impl Oddity {
    /// Every oddity.
    pub const ALL: [Oddity; 10] = [
        Oddity::PinnedMidway,
        Oddity::CustomRoles,
        Oddity::ContentArrays,
        Oddity::NullContent,
        Oddity::Orphans,
        Oddity::Interleaved,
        Oddity::Unicode,
        Oddity::Long,
        Oddity::Identifiers,
        Oddity::Empty,
    ];
}

/// A tunable strategy for OpenAI-format histories.
///
/// # Examples
///
/// ```
/// use chatfold::testing::{Histories, Oddity};
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
///
/// let plain = Histories::new().max_turns(10).tool_weight(0).without(Oddity::Unicode).strategy();
/// let history = plain.new_tree(&mut TestRunner::deterministic()).unwrap().current();
/// assert!(history.iter().all(|m| m.tool_calls.is_empty()));
/// ```
#[derive(Clone, Debug)]
pub struct Histories {
    max_turns: usize,
    tool_weight: u32,
    long_chars: usize,
    off: Vec<Oddity>,
    form: Form,
}

/// How tool exchanges are written in a generated history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Form {
    /// OpenAI's: `tool_calls` on the assistant message, one `tool` message
    /// per result.
    #[default]
    OpenAi,
    /// Anthropic's: a thinking block and `tool_use` blocks in the assistant
    /// message, `tool_result` blocks in user messages (the first result alone, the rest together
    /// after any interleaved turn; an orphan is a user message with one).
    Anthropic,
    /// OpenAI's Responses API items: a `reasoning` item and one
    /// `function_call` item per call, one `function_call_output` item per
    /// result; assistant text and user content arrays as typed `message`
    /// items (user text stays the `{role, content}` shorthand; an orphan is
    /// an output item alone).
    Responses,
}

impl Default for Histories {
    fn default() -> Self {
        Histories::new()
    }
}

impl Histories {
    /// Up to 40 turns, tool units about a third of them, every oddity on.
    pub fn new() -> Self {
        Histories {
            max_turns: 40,
            tool_weight: 3,
            long_chars: 200,
            off: Vec::new(),
            form: Form::OpenAi,
        }
    }

    /// How tool exchanges are written (default [`Form::OpenAi`]).
    #[must_use]
    pub fn form(mut self, form: Form) -> Self {
        self.form = form;
        self
    }

    /// At most `turns` turns (a tool turn is several messages).
    #[must_use]
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns;
        self
    }

    /// How often a turn is a tool unit, against 6 for the other turns
    /// together (3 unless set; 0 for no tool calls).
    #[must_use]
    pub fn tool_weight(mut self, weight: u32) -> Self {
        self.tool_weight = weight;
        self
    }

    /// The longest long message, in characters (200 unless set).
    #[must_use]
    pub fn long(mut self, chars: usize) -> Self {
        self.long_chars = chars.max(40);
        self
    }

    /// Turns `oddity` off.
    #[must_use]
    pub fn without(mut self, oddity: Oddity) -> Self {
        self.off.push(oddity);
        self
    }

    fn has(&self, oddity: Oddity) -> bool {
        !self.off.contains(&oddity)
    }

    /// Message text.
    pub fn text(&self) -> BoxedStrategy<String> {
        let mut choices: Vec<(u32, BoxedStrategy<String>)> =
            vec![(4, "[a-z]{1,8}( [a-z]{1,8}){0,12}[.!?]?".boxed())];
        if self.has(Oddity::Identifiers) {
            choices.push((1, identifier_text().boxed()));
        }
        if self.has(Oddity::Unicode) {
            choices.push((1, "[日本語ébç🙂 ]{1,20}".boxed()));
        }
        if self.has(Oddity::Empty) {
            choices.push((1, Just(String::new()).boxed()));
        }
        if self.has(Oddity::Long) {
            let letters: Vec<char> = "abcdefghijklmnopqrstuvwxyz ".chars().collect();
            let long = prop::collection::vec(prop::sample::select(letters), 40..=self.long_chars)
                .prop_map(|chars| chars.into_iter().collect::<String>());
            choices.push((1, long.boxed()));
        }
        proptest::strategy::Union::new_weighted(choices).boxed()
    }

    fn leaf(&self) -> BoxedStrategy<Turn> {
        let text = self.text();
        let mut choices: Vec<(u32, BoxedStrategy<Turn>)> = vec![
            (8, text.clone().prop_map(Turn::User).boxed()),
            (6, text.clone().prop_map(Turn::Assistant).boxed()),
        ];
        if self.has(Oddity::PinnedMidway) {
            choices.push((1, text.clone().prop_map(Turn::System).boxed()));
            choices.push((1, text.clone().prop_map(Turn::Developer).boxed()));
        }
        if self.has(Oddity::ContentArrays) {
            let parts = prop::collection::vec(text.clone(), 0..3);
            choices.push((1, parts.prop_map(Turn::UserParts).boxed()));
        }
        if self.has(Oddity::NullContent) {
            choices.push((1, Just(Turn::AssistantNull).boxed()));
        }
        if self.has(Oddity::CustomRoles) {
            let custom = ("[a-z]{3,6}", text.clone()).prop_map(|(r, t)| Turn::Custom(r, t));
            choices.push((1, custom.boxed()));
        }
        if self.has(Oddity::Orphans) {
            choices.push((1, text.prop_map(Turn::Orphan).boxed()));
        }
        proptest::strategy::Union::new_weighted(choices).boxed()
    }

    /// One turn.
    pub fn turn(&self) -> BoxedStrategy<Turn> {
        let leaf = self.leaf();
        if self.tool_weight == 0 {
            return leaf;
        }
        let tools = if self.has(Oddity::Interleaved) {
            (
                1usize..4,
                prop::collection::vec(0usize..4, 0..5),
                prop::option::of(leaf.clone()),
            )
                .prop_map(|(calls, answered, interleave)| Turn::Tools {
                    answered: answered.into_iter().filter(|&i| i < calls).collect(),
                    calls,
                    interleave: interleave.map(Box::new),
                })
                .boxed()
        } else {
            (1usize..4)
                .prop_map(|calls| Turn::Tools {
                    answered: (0..calls).collect(),
                    calls,
                    interleave: None,
                })
                .boxed()
        };
        proptest::strategy::Union::new_weighted(vec![(6, leaf), (self.tool_weight, tools)]).boxed()
    }

    /// Histories of up to [`max_turns`](Self::max_turns) turns.
    pub fn strategy(&self) -> BoxedStrategy<Vec<Message>> {
        let form = self.form;
        prop::collection::vec(self.turn(), 0..self.max_turns.max(1))
            .prop_map(move |turns| render_in(&turns, form))
            .boxed()
    }
}

/// Histories of up to `max_turns` turns, every oddity on: shorthand for
/// `Histories::new().max_turns(max_turns).strategy()`.
pub fn histories(max_turns: usize) -> BoxedStrategy<Vec<Message>> {
    Histories::new().max_turns(max_turns).strategy()
}

/// An identifier of one of the ledger's classes: a path (Windows' too), a
/// UUID, a URL (of the web or a database's), a ticket key, an address with
/// a port, a CIDR block, a version (with build metadata too), an email, a
/// hash, a code (a prefixed key, an order number), a container image, a
/// Kubernetes object.
pub fn identifier() -> impl Strategy<Value = String> {
    prop_oneof![
        "/[a-z]{1,6}/[a-z]{1,6}/[a-z]{1,6}\\.(log|csv|json)",
        "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
        "https://[a-z]{3,8}\\.example\\.com/[a-z]{1,6}/[0-9]{1,4}",
        // Ticket keys; not a standard's name (SHA-1, UTF-8, RFC-9110 ...),
        // nor a name with a small number (COVID-19, GPT-4), which the
        // ledger rightly leaves out.
        "[JKPQ][A-Z]{1,4}-[0-9]{3,5}",
        "10\\.[1-9][0-9]?\\.[1-9][0-9]?\\.[1-9][0-9]?:[1-9][0-9]{3}",
        "v[0-9]\\.[0-9]{1,2}\\.[0-9]{1,2}",
        "[a-z]{3,8}@[a-z]{3,8}\\.io",
        "[0-9a-f]{12}[0-9][a-f]",
        "postgres://[a-z]{3,6}@[a-z]{3,8}\\.internal:5432/[a-z]{3,8}",
        "conn_[0-9]{3}[a-f][0-9a-f]{2}",
        "ORD-20[0-9]{2}-[0-9]{5}",
        "txn_[0-9]{6}_[a-z]{3,8}",
        "(ghcr|quay)\\.io/[a-z]{3,8}/[a-z]{3,8}:[1-9]\\.[0-9]{1,2}\\.[0-9]{1,2}",
        "10\\.[1-9][0-9]?\\.0\\.0/(8|16|24)",
        "[1-9]\\.[0-9]{1,2}\\.[0-9]{1,2}\\+build\\.[0-9]{1,3}",
        r"[CD]:\\[a-z]{3,8}\\[a-z]{3,8}\.log",
        "(src|app|lib)/[a-z]{3,8}/[A-Z][a-z]{3,8}",
        "sha256:[0-9a-f]{60}[0-9][a-f][0-9a-f]{2}",
        "(postgres|redis|python):[1-9][0-9]?(-alpine)?",
        "(deploy|sts|svc)/[a-z]{3,8}-[0-9]",
        // Forms of other domains: support, data, code, science, chat.
        "#[1-9][0-9]{5,7}",
        "\\+[1-9][0-9] [1-9][0-9] [0-9]{4} [0-9]{4}",
        "20[0-9]{2}-0[1-9]-[12][0-9]T[01][0-9]:[0-5][0-9]:[0-5][0-9]Z",
        "[0-9A-F]{2}(:[0-9A-F]{2}){5}",
        "(validate|fetch|emit)[A-Z][a-z]{2,6}[A-Z][a-z]{2,6}\\(\\)",
        "(com|org)\\.[a-z]{3,8}\\.[a-z]{3,8}\\.[A-Z][a-z]{3,8}",
        "[A-Z]{3,8}_[A-Z]{3,8}_[A-Z]{3,8}",
        "feature/[A-Z]{2,4}-[0-9]{3,4}-[a-z]{3,8}",
        "[a-z]{3,8}_[a-z]{3,8}\\.rs:[1-9][0-9]{1,3}",
        "@[a-z]{3,8}/[a-z]{3,8}-kit@[1-9]\\.[0-9]{1,2}\\.[0-9]{1,2}",
        "97[89]-[0-9]-[0-9]{3}-[0-9]{5}-[0-9]",
        "[A-Za-z0-9]{30,40}",
        "\\$[1-9][0-9]{0,2},[0-9]{3}\\.[0-9]{2}",
    ]
}

/// A sentence holding one or two identifiers.
pub fn identifier_text() -> impl Strategy<Value = String> {
    (
        "[a-z]{1,8}( [a-z]{1,8}){0,4}",
        prop::collection::vec(identifier(), 1..3),
    )
        .prop_map(|(words, ids)| format!("{words} {} done.", ids.join(" and ")))
}

/// Renders turns as messages, with call ids unique across the history.
pub fn render(turns: &[Turn]) -> Vec<Message> {
    render_in(turns, Form::OpenAi)
}

/// Renders `turns` with tool exchanges in `form`.
pub fn render_in(turns: &[Turn], form: Form) -> Vec<Message> {
    let mut out = Vec::new();
    let mut next_id = 0usize;
    for turn in turns {
        render_one(turn, &mut out, &mut next_id, form);
    }
    out
}

/// A Responses item as a message, read as any input is.
fn item(value: serde_json::Value) -> Message {
    Message::parse(value).unwrap_or_else(|problem| unreachable!("a generated item is valid: {problem}"))
}

/// A user message holding a `tool_result` block for each of `ids`.
fn tool_results<'i>(ids: impl IntoIterator<Item = &'i String>) -> Message {
    let blocks = ids
        .into_iter()
        .map(|id| {
            Part::from_json(serde_json::json!({
                "type": "tool_result", "tool_use_id": id, "content": format!("result for {id}")
            }))
        })
        .collect();
    Message::user("").with_parts(blocks)
}

fn render_one(turn: &Turn, out: &mut Vec<Message>, next_id: &mut usize, form: Form) {
    match turn {
        Turn::System(t) => out.push(Message::system(t.clone())),
        Turn::Developer(t) => out.push(Message::developer(t.clone())),
        Turn::User(t) => out.push(Message::user(t.clone())),
        Turn::UserParts(ts) if form == Form::Responses => {
            let mut content: Vec<serde_json::Value> = ts
                .iter()
                .map(|t| serde_json::json!({"type": "input_text", "text": t}))
                .collect();
            content.push(
                serde_json::json!({"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"}),
            );
            out.push(item(
                serde_json::json!({"type": "message", "role": "user", "content": content}),
            ));
        }
        Turn::Assistant(t) if form == Form::Responses => out.push(item(serde_json::json!({
            "type": "message", "id": format!("msg_{}", out.len()), "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": t, "annotations": []}]
        }))),
        Turn::AssistantNull if form == Form::Responses => out.push(item(serde_json::json!({
            "type": "message", "role": "assistant", "content": []
        }))),
        Turn::UserParts(ts) => {
            let mut parts: Vec<Part> = ts.iter().map(|t| Part::text(t.clone())).collect();
            parts.push(Part::from_json(
                serde_json::json!({"type": "image_url", "image_url": {"url": "https://x/y.png"}}),
            ));
            out.push(Message::user("").with_parts(parts));
        }
        Turn::Assistant(t) => out.push(Message::assistant(t.clone())),
        Turn::AssistantNull => {
            let mut m = Message::assistant("");
            m.content = None;
            out.push(m);
        }
        Turn::Custom(role, t) => out.push(Message::new(Role::from(role.as_str()), t.clone())),
        Turn::Orphan(t) => {
            *next_id += 1;
            let id = format!("orphan{next_id}");
            out.push(match form {
                Form::OpenAi => Message::tool(t.clone(), id),
                Form::Anthropic => tool_results([&id]),
                Form::Responses => {
                    item(serde_json::json!({"type": "function_call_output", "call_id": id, "output": t}))
                }
            });
        }
        Turn::Tools {
            calls,
            answered,
            interleave,
        } => {
            let ids: Vec<String> = (0..*calls)
                .map(|_| {
                    *next_id += 1;
                    format!("call_{next_id}")
                })
                .collect();
            let results: Vec<&String> = answered.iter().filter_map(|&i| ids.get(i)).collect();
            if form == Form::Responses {
                out.push(item(serde_json::json!({
                    "type": "reasoning", "id": format!("rs_{}", out.len()),
                    "summary": [{"type": "summary_text", "text": "Which tools answer this?"}],
                    "encrypted_content": "Z0FBQUFBQm9fZW5jcnlwdGVk"
                })));
                out.extend(ids.iter().map(|id| {
                    item(serde_json::json!({
                        "arguments": format!(r#"{{"q":"{id}"}}"#), "call_id": id, "name": "lookup",
                        "type": "function_call", "id": format!("fc_{id}"), "status": "completed"
                    }))
                }));
                for (k, id) in results.into_iter().enumerate() {
                    out.push(item(serde_json::json!({
                        "type": "function_call_output", "call_id": id, "output": format!("result for {id}")
                    })));
                    if k == 0 {
                        if let Some(extra) = interleave {
                            render_one(extra, out, next_id, form);
                        }
                    }
                }
                return;
            }
            if form == Form::Anthropic {
                let mut blocks = vec![
                    Part::from_json(serde_json::json!({
                        "type": "thinking", "thinking": "Which tools answer this?", "signature": "c2lnbmF0dXJl"
                    })),
                    Part::text("Let me look that up."),
                ];
                blocks.extend(ids.iter().map(|id| {
                    Part::from_json(serde_json::json!({
                        "type": "tool_use", "id": id, "name": "lookup", "input": {"q": id}
                    }))
                }));
                out.push(Message::assistant("").with_parts(blocks));
                if let Some((first, rest)) = results.split_first() {
                    out.push(tool_results([*first]));
                    if let Some(extra) = interleave {
                        render_one(extra, out, next_id, form);
                    }
                    if !rest.is_empty() {
                        out.push(tool_results(rest.iter().copied()));
                    }
                }
                return;
            }
            let tool_calls = ids
                .iter()
                .map(|id| ToolCall::new(id.clone(), "lookup", format!(r#"{{"q":"{id}"}}"#)))
                .collect();
            out.push(Message::assistant_tool_calls(tool_calls));
            for (k, id) in results.into_iter().enumerate() {
                out.push(Message::tool(format!("result for {id}"), id.clone()));
                if k == 0 {
                    if let Some(extra) = interleave {
                        render_one(extra, out, next_id, form);
                    }
                }
            }
        }
    }
}
