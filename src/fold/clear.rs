//! Clearing old tool output (Anthropic's `clear_tool_uses`): large tool
//! results, but the newest, replaced by a short placeholder before planning.

use crate::count::TokenCounter;
use crate::fold::ledger;
use crate::message::{Content, Message, Role};

/// At most this many identifiers are named in a placeholder.
const PLACEHOLDER_IDENTIFIERS: usize = 8;

/// Which tool results [`Compactor::clear_tool_results`](crate::Compactor::clear_tool_results)
/// replaces with a placeholder: every one but the newest `keep_recent`, of
/// at least `min_tokens` tokens, from a tool not in `exclude`.
///
/// The placeholder names the tool, the call id and the tokens cleared, and
/// the first identifiers of the result (so that the ledger keeps them when
/// the placeholder is folded later): `[tool result cleared: search (call
/// c1), 5321 tokens; identifiers: /var/log/app.log, 10.0.0.7]`. It stays a
/// result of its call, so tool units and every rule of the compactor hold.
///
/// # Examples
///
/// ```
/// use chatfold::ClearToolResults;
///
/// let c = ClearToolResults::new();
/// assert_eq!((c.keep_recent, c.min_tokens), (3, 200));
/// assert!(c.exclude.is_empty());
/// assert_eq!(c.clear_inputs, chatfold::ClearInputs::None);
/// let c = c.keep_recent(1).min_tokens(50).exclude("memory");
/// assert_eq!(c.exclude, ["memory"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClearToolResults {
    /// How many of the newest tool results stay verbatim.
    pub keep_recent: usize,
    /// The fewest tokens a result must have to be cleared.
    pub min_tokens: usize,
    /// Tools whose results are never cleared.
    pub exclude: Vec<String>,
    /// Whose calls lose their input too when their result is cleared
    /// (Anthropic's `clear_tool_inputs`); none by default.
    pub clear_inputs: ClearInputs,
}

/// Whose calls' inputs [`ClearToolResults`] clears with their results: the
/// call's `arguments` (a block's `input`) become `{}`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClearInputs {
    /// No call's.
    #[default]
    None,
    /// Every cleared result's call.
    All,
    /// The calls of these tools.
    Of(Vec<String>),
}

impl ClearInputs {
    /// Whether a call of the tool `name` loses its input.
    fn applies(&self, name: &str) -> bool {
        match self {
            ClearInputs::None => false,
            ClearInputs::All => true,
            ClearInputs::Of(tools) => tools.iter().any(|t| t == name),
        }
    }
}

impl Default for ClearToolResults {
    fn default() -> Self {
        ClearToolResults::new()
    }
}

impl ClearToolResults {
    /// Keep the newest 3 results, clear others of at least 200 tokens.
    pub const fn new() -> Self {
        ClearToolResults {
            keep_recent: 3,
            min_tokens: 200,
            exclude: Vec::new(),
            clear_inputs: ClearInputs::None,
        }
    }

    /// Keep the newest `results` tool results verbatim.
    pub fn keep_recent(mut self, results: usize) -> Self {
        self.keep_recent = results;
        self
    }

    /// Clear only results of at least `tokens` tokens.
    pub fn min_tokens(mut self, tokens: usize) -> Self {
        self.min_tokens = tokens;
        self
    }

    /// Never clear the results of the tool `name`.
    pub fn exclude(mut self, name: impl Into<String>) -> Self {
        self.exclude.push(name.into());
        self
    }

    /// Clear the inputs of `inputs`' calls with their results.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{ClearInputs, ClearToolResults, Heuristic, Message, ToolCall};
    ///
    /// let history = vec![
    ///     Message::assistant_tool_calls(vec![ToolCall::new("c1", "write_file", r#"{"body": "long text"}"#)]),
    ///     Message::tool("written", "c1"),
    ///     Message::user("thanks"),
    /// ];
    /// let clearing = ClearToolResults::new().keep_recent(0).min_tokens(0);
    /// let (cleared, _) = clearing.clone().clear_inputs(ClearInputs::All).clear(&history, &Heuristic).unwrap();
    /// assert_eq!(cleared[0].tool_calls[0].arguments, "{}");
    /// let of_others = clearing.clear_inputs(ClearInputs::Of(vec!["search".into()]));
    /// let (kept, _) = of_others.clear(&history, &Heuristic).unwrap();
    /// assert_eq!(kept[0], history[0]);
    /// ```
    pub fn clear_inputs(mut self, inputs: ClearInputs) -> Self {
        self.clear_inputs = inputs;
        self
    }

    /// `messages` with the results to clear replaced, and their indices;
    /// `None` when nothing is cleared. Reads the length of every tool result
    /// and counts those long enough to qualify. The compactor does this
    /// before planning; call it to see what would be cleared.
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{ClearToolResults, Heuristic, Message, ToolCall};
    ///
    /// let history = vec![
    ///     Message::assistant_tool_calls(vec![ToolCall::new("c1", "fetch", "{}")]),
    ///     Message::tool("page text ".repeat(200), "c1"),
    ///     Message::user("thanks"),
    /// ];
    /// let (cleared, indices) = ClearToolResults::new().keep_recent(0).clear(&history, &Heuristic).unwrap();
    /// assert_eq!(indices, [1]);
    /// assert_eq!(cleared[1].text(), "[tool result cleared: fetch (call c1), 500 tokens]");
    /// ```
    pub fn clear<C: TokenCounter + ?Sized>(
        &self,
        messages: &[Message],
        counter: &C,
    ) -> Option<(Vec<Message>, Vec<usize>)> {
        // Each result: a tool message (no block), or a `tool_result` block
        // (Anthropic's) of a user message, or a Responses output item (its
        // one part), oldest first.
        let results: Vec<(usize, Option<usize>)> = (0..messages.len())
            .flat_map(|i| {
                let m = &messages[i];
                let whole = (m.item().is_none() && (m.role == Role::Tool || m.tool_call_id.is_some()))
                    .then_some((i, None));
                let blocks = m.parts().iter().enumerate();
                let blocks = blocks
                    .filter(|(_, p)| p.is_result())
                    .map(move |(k, _)| (i, Some(k)));
                whole.into_iter().chain(blocks)
            })
            .collect();
        let older = &results[..results.len().saturating_sub(self.keep_recent)];
        let mut cleared = Vec::new();
        let mut out: Option<Vec<Message>> = None;
        for &(i, block) in older {
            let m = &messages[i];
            let (text, id) = match block {
                None => (m.text(), m.tool_call_id.as_deref()),
                Some(k) => {
                    let part = &m.parts()[k];
                    (
                        std::borrow::Cow::Owned(part.result_texts().join("\n")),
                        part.answered_id(),
                    )
                }
            };
            // A token takes at least one byte for every shipped counter.
            if text.len() < self.min_tokens {
                continue;
            }
            let name = id.and_then(|id| tool_name(messages, i, id)).unwrap_or("tool");
            if self.exclude.iter().any(|e| e == name) {
                continue;
            }
            let tokens = counter.count(&text);
            if tokens < self.min_tokens {
                continue;
            }
            let placeholder = placeholder(name, id, tokens, &text);
            let copy = out.get_or_insert_with(|| messages.to_vec());
            match (block, &mut copy[i].content) {
                (Some(k), Some(Content::Parts(parts))) => parts[k].set_result_content(placeholder),
                (Some(_), Some(Content::Item(item))) => item.set_result_content(placeholder),
                (_, content) => *content = Some(Content::Text(placeholder)),
            }
            if let Some(id) = id.filter(|_| self.clear_inputs.applies(name)) {
                if let Some(j) = copy[..i].iter().rposition(|m| m.call_name(id).is_some()) {
                    copy[j].clear_call_input(id);
                }
            }
            if cleared.last() != Some(&i) {
                cleared.push(i);
            }
        }
        out.map(|messages| (messages, cleared))
    }
}

/// Which thinking blocks to clear (Anthropic's `clear_thinking`): those of
/// every assistant turn but the newest `keep_turns` that think. A turn's
/// other blocks (its text, its tool calls) stay as they are.
///
/// # Examples
///
/// ```
/// use chatfold::{ClearThinking, Message, Part};
/// use serde_json::json;
///
/// let thinking = |n: usize| Message::new("assistant", "").with_parts(vec![
///     Part::from_json(json!({"type": "thinking", "thinking": format!("step {n}"), "signature": "c2ln"})),
///     Part::text(format!("answer {n}")),
/// ]);
/// let history = vec![Message::user("q"), thinking(1), Message::user("q2"), thinking(2)];
/// let (cleared, turns) = ClearThinking::new(1).clear(&history).unwrap();
/// assert_eq!(turns, 1);
/// assert_eq!(cleared[1].parts().len(), 1); // the answer stays
/// assert_eq!(cleared[3], history[3]); // the newest turn keeps its thinking
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClearThinking {
    /// How many of the newest assistant turns that think keep their thinking.
    pub keep_turns: usize,
}

impl ClearThinking {
    /// Keep the thinking of the newest `keep_turns` turns.
    pub const fn new(keep_turns: usize) -> Self {
        ClearThinking { keep_turns }
    }

    /// `messages` with the older turns' thinking blocks taken out, and how
    /// many turns lost theirs; `None` when none did.
    pub fn clear(&self, messages: &[Message]) -> Option<(Vec<Message>, usize)> {
        let thinks = |m: &Message| m.role == Role::Assistant && m.parts().iter().any(|p| p.is_thinking());
        let turns: Vec<usize> = (0..messages.len()).filter(|&i| thinks(&messages[i])).collect();
        let older = &turns[..turns.len().saturating_sub(self.keep_turns)];
        if older.is_empty() {
            return None;
        }
        let mut out = messages.to_vec();
        for &i in older {
            if let Some(Content::Parts(parts)) = &mut out[i].content {
                parts.retain(|p| !p.is_thinking());
            }
        }
        Some((out, older.len()))
    }
}

/// The name of the tool whose call `id` the result at `i` answers (the
/// nearest earlier call with that id).
fn tool_name<'m>(messages: &'m [Message], i: usize, id: &str) -> Option<&'m str> {
    messages[..i].iter().rev().find_map(|m| m.call_name(id))
}

fn placeholder(name: &str, call: Option<&str>, tokens: usize, text: &str) -> String {
    let mut out = format!("[tool result cleared: {name}");
    if let Some(call) = call {
        out.push_str(&format!(" (call {call})"));
    }
    out.push_str(&format!(", {tokens} tokens"));
    let mut found = ledger::identifiers(text, &[]);
    found.dedup();
    let mut seen = std::collections::HashSet::new();
    let named: Vec<ledger::LedgerEntry> = found
        .into_iter()
        .filter(|f| seen.insert(f.clone()))
        .take(PLACEHOLDER_IDENTIFIERS)
        .collect();
    if !named.is_empty() {
        out.push_str("; identifiers: ");
        out.push_str(&named.join(", "));
    }
    out.push(']');
    out
}
