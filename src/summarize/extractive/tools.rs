//! Tool calls and their results: the calls made in the fold, the results that answer them, and
//! their `Tools:` lines.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::markers::error_line;
use super::text::{clip, opening, window};
use super::{ARGS_CHARS, WINDOW};
use crate::message::{Message, Part, Role};

/// A call made in the fold and not yet answered.
pub(super) struct Pending {
    pub(super) name: String,
    pub(super) args: String,
    pub(super) index: usize,
    /// Calls made before it in the fold: the order they were made in.
    pub(super) seq: usize,
}

/// The calls made in the fold and not yet answered, by id.
#[derive(Default)]
pub(super) struct Calls {
    pub(super) pending: HashMap<String, Pending>,
    /// Calls made so far.
    made: usize,
}

impl Calls {
    /// Notes the calls turn `m` (the `i`th) makes, OpenAI's and Anthropic's.
    /// (Not by [`Message::call_ids`]: it reads `tool_use` blocks only, and
    /// skips those without an id.)
    pub(super) fn note(&mut self, m: &Message, i: usize) {
        for call in &m.tool_calls {
            self.made += 1;
            self.pending.insert(
                call.id.clone(),
                Pending {
                    name: call.name.clone(),
                    args: clip(&call.arguments, ARGS_CHARS).into_owned(),
                    index: i,
                    seq: self.made,
                },
            );
        }
        for part in m.parts() {
            if part.tool_input().is_some() || part.call_id().is_some() {
                self.made += 1;
                self.pending.insert(
                    part.call_id()
                        .or_else(|| string_field(part, "id"))
                        .unwrap_or("")
                        .to_owned(),
                    Pending {
                        name: part
                            .call_name()
                            .or_else(|| string_field(part, "name"))
                            .unwrap_or("tool")
                            .to_owned(),
                        args: clip(&part.shown_arguments(), ARGS_CHARS).into_owned(),
                        index: i,
                        seq: self.made,
                    },
                );
            }
        }
    }

    /// The calls never answered, in the order they were made.
    pub(super) fn unanswered(self) -> Vec<Pending> {
        let mut unanswered: Vec<Pending> = self.pending.into_values().collect();
        unanswered.sort_by_key(|call| call.seq);
        unanswered
    }
}

/// A tool result in a turn.
pub(super) struct ToolResult<'m> {
    /// The id of the call it answers.
    pub(super) id: Option<&'m str>,
    /// Its text, about its first [`WINDOW`] bytes.
    text: String,
    /// Whether it is flagged as an error (`is_error`).
    flagged: bool,
}

/// The tool results in turn `m`: a `tool` message's, and each
/// `tool_result` block's (Anthropic's form). (Not by
/// [`Message::answered_ids`]: it skips a result without an id, which is
/// still a line here, `tool [?]`.)
pub(super) fn tool_results(m: &Message) -> Vec<ToolResult<'_>> {
    let mut results = Vec::new();
    if m.role == Role::Tool && m.item().is_none() {
        let flagged = is_flagged(m.extra().get("is_error"));
        results.push(ToolResult {
            id: m.tool_call_id.as_deref(),
            text: window(&m.text()).to_owned(),
            flagged,
        });
    }
    for part in m.parts().iter().filter(|p| p.is_result()) {
        let id = part.answered_id();
        let flagged = is_flagged(part.as_json().get("is_error"));
        let texts = part.result_texts();
        let mut text = String::new();
        for t in texts {
            if text.len() >= WINDOW {
                break;
            }
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(window(t));
        }
        results.push(ToolResult { id, text, flagged });
    }
    results
}

/// A part's `key` field, when it is a string.
fn string_field<'p>(part: &'p Part, key: &str) -> Option<&'p str> {
    part.as_json().get(key).and_then(serde_json::Value::as_str)
}

/// Whether an `is_error` field says so.
fn is_flagged(is_error: Option<&serde_json::Value>) -> bool {
    is_error.and_then(serde_json::Value::as_bool) == Some(true)
}

/// The line under `Tools:` for `result` (not yet clipped), naming `call`
/// when it answers one made in the fold; and whether it reports an error.
pub(super) fn tool_line(call: Option<&Pending>, result: &ToolResult<'_>) -> (String, bool) {
    // The call failed when its result is flagged or opens with an
    // error; a result that only reports one further on (a search's
    // matches, a log) is shown by that line, under no `failed`.
    let error = error_line(&result.text);
    let failed = result.flagged || error.is_some_and(|(_, opens)| opens);
    let reports = result.flagged || error.is_some();
    let outcome = error.map_or_else(|| opening(&result.text), |(line, _)| line.to_owned());
    let mut line = match call {
        Some(c) => format!("{}({})", c.name, c.args),
        None => format!("tool [{}]", result.id.unwrap_or("?")),
    };
    match (failed, outcome.is_empty()) {
        (true, _) => {
            let _ = write!(line, " failed: {outcome}");
        }
        (false, true) => line.push_str(" → (no text)"),
        (false, false) => {
            let _ = write!(line, " → {outcome}");
        }
    }
    (line, reports)
}
