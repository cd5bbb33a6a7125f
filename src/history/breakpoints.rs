//! Prompt-cache breakpoints on Anthropic request bodies: the summary block
//! of a compacted request marked `cache_control`, so that the provider
//! caches the prompt through it until the next fold (rule 10).

use serde_json::{Value, json};

use super::{Format, History};
use crate::compact::{Compaction, Fate};
use crate::message::{Content, Part};

/// The most `cache_control` breakpoints Anthropic's API takes in one
/// request.
pub const MAX_BREAKPOINTS: usize = 4;

/// Whether a compacted Anthropic request's summary block gets a
/// prompt-cache breakpoint (`"cache_control": {"type": "ephemeral"}`).
///
/// With [`Auto`](Self::Auto) (the default), it does when the request uses
/// `cache_control` anywhere (its tools, system blocks, messages, or the
/// top-level field): the breakpoints on blocks that are kept stay where they
/// are, those on folded blocks are gone with them, and the summary gets one
/// as long as the total stays within the API's limit of
/// [`MAX_BREAKPOINTS`]. The summary then heads the cached prefix of every
/// request until the next fold, as Anthropic's guide does with its own
/// compaction block. Other formats have no breakpoints: OpenAI and most
/// others cache a repeated prefix on their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Breakpoints {
    /// Mark the summary when the request uses `cache_control`.
    #[default]
    Auto,
    /// Never add a breakpoint.
    Never,
}

impl std::str::FromStr for Breakpoints {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Breakpoints::Auto),
            "never" => Ok(Breakpoints::Never),
            _ => Err(format!("{s:?} is neither auto nor never")),
        }
    }
}

impl History {
    /// A compaction's messages written back into this body, as
    /// [`to_json_with`](Self::to_json_with) does, with the summary block
    /// given a prompt-cache breakpoint as `breakpoints` says (Anthropic
    /// bodies only).
    ///
    /// # Examples
    ///
    /// ```
    /// use chatfold::{Breakpoints, Compactor, Extractive, History};
    ///
    /// let mut turns = Vec::new();
    /// for i in 0..40 {
    ///     turns.push(serde_json::json!({"role": "user", "content": format!("question {i} about the deploy")}));
    ///     turns.push(serde_json::json!({"role": "assistant", "content": format!("answer {i}")}));
    /// }
    /// turns.push(serde_json::json!({"role": "user", "content": [
    ///     {"type": "text", "text": "and now?", "cache_control": {"type": "ephemeral"}}
    /// ]}));
    /// let body = serde_json::json!({"model": "claude-sonnet-4-5", "max_tokens": 512,
    ///     "system": "Be brief.", "messages": turns});
    /// let history = History::from_json_value(body)?;
    /// let mut compactor = Compactor::new(300);
    /// compactor.policy.placement = history.placement();
    /// let result = compactor.compact(&history.messages, &Extractive::new())?;
    /// let out = history.to_json_compacted(&result, Breakpoints::Auto);
    /// let summary = &out["system"][1];
    /// assert!(summary["text"].as_str().unwrap().starts_with("Summary of earlier conversation"));
    /// assert_eq!(summary["cache_control"], serde_json::json!({"type": "ephemeral"}));
    /// let never = history.to_json_compacted(&result, Breakpoints::Never);
    /// assert!(never["system"][1].get("cache_control").is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_json_compacted(&self, result: &Compaction<'_>, breakpoints: Breakpoints) -> Value {
        let summary = (result.summarized)
            .then(|| result.report.indices(Fate::Hoisted).count())
            .filter(|_| breakpoints == Breakpoints::Auto && self.format == Format::Anthropic)
            .filter(|&at| {
                result
                    .messages
                    .get(at)
                    .is_some_and(|m| !has_breakpoint(m.content.as_ref()))
            });
        let Some(at) = summary.filter(|_| self.uses_cache_control()) else {
            return self.to_json_with(&result.messages);
        };
        let mut messages = result.messages.to_vec();
        let summary = &mut messages[at];
        let mut block = Part::text(summary.text()).as_json().clone();
        block["cache_control"] = json!({"type": "ephemeral"});
        summary.content = Some(Content::Parts(vec![Part::from_json(block)]));
        let marked = self.to_json_with(&messages);
        match count(&marked) <= MAX_BREAKPOINTS {
            true => marked,
            false => self.to_json_with(&result.messages),
        }
    }

    /// Whether the body uses `cache_control` anywhere.
    fn uses_cache_control(&self) -> bool {
        let Some(body) = &self.body else { return false };
        body.get("cache_control").is_some_and(|v| !v.is_null())
            || body.get("tools").is_some_and(|t| count(t) > 0)
            || self.messages.iter().any(|m| has_breakpoint(m.content.as_ref()))
    }
}

/// Whether `content` holds a block with a breakpoint.
fn has_breakpoint(content: Option<&Content>) -> bool {
    match content {
        Some(Content::Parts(parts)) => parts.iter().any(|p| p.as_json().get("cache_control").is_some()),
        _ => false,
    }
}

/// The breakpoints in a body, or in part of one: every `cache_control`
/// that is set (the top-level one, for automatic caching, takes a slot too).
fn count(value: &Value) -> usize {
    match value {
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| match k.as_str() {
                "cache_control" => usize::from(!v.is_null()),
                _ => count(v),
            })
            .sum(),
        Value::Array(items) => items.iter().map(count).sum(),
        _ => 0,
    }
}
