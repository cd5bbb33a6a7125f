//! What `compact --report` writes and `explain` prints, and the checks the
//! command reports on stderr.

use std::fmt::Write as _;

use chatfold::{Compaction, Fate, Message, Report};
use serde_json::{Value, json};

/// The cut's reason in words, with the alignment that moved it, if any.
pub(crate) fn reason(r: &Report) -> String {
    match r.aligned_from() {
        Some(from) => format!(
            "{}; moved from message {from} so the kept part opens with a user turn",
            r.reason()
        ),
        None => r.reason().to_string(),
    }
}

/// The input indices with `fate`.
fn fates(r: &Report, fate: Fate) -> Vec<usize> {
    r.indices(fate).collect()
}

/// The report's fields, in order.
fn report_fields(budget: usize, result: &Compaction<'_>) -> Vec<(&'static str, Value)> {
    let r = &result.report;
    vec![
        ("budget", json!(budget)),
        ("tokens_before", json!(result.tokens_before.get())),
        (
            "tokens_before_exact",
            json!(result.tokens_before.exact().is_some()),
        ),
        ("tokens_after", json!(result.tokens_after)),
        ("summarized", json!(result.summarized)),
        ("over_budget", json!(result.over_budget)),
        ("summary_truncated", json!(result.summary_truncated)),
        ("summary_allowance", json!(r.allowance())),
        ("prose_allowance", json!(r.prose_allowance())),
        ("cut", json!(r.cut())),
        ("reason", json!(reason(r))),
        ("kept", json!(fates(r, Fate::Kept))),
        ("hoisted", json!(fates(r, Fate::Hoisted))),
        ("folded", json!(fates(r, Fate::Folded))),
        ("previous_summary", json!(fates(r, Fate::PreviousSummary))),
        ("cleared", json!(r.cleared())),
        ("ledger", json!(r.ledger())),
        ("ledger_dropped", json!(r.ledger_dropped())),
        ("reused", json!(r.reused())),
        ("folds", json!(r.folds())),
    ]
}

/// The `--report` text: one field a line, each value on one line (index
/// lists stay short however long the history).
pub(crate) fn report_text(budget: usize, result: &Compaction<'_>) -> String {
    let fields = report_fields(budget, result);
    let mut out = String::from("{\n");
    for (i, (key, value)) in fields.iter().enumerate() {
        let comma = if i + 1 < fields.len() { "," } else { "" };
        let _ = writeln!(out, "  {}: {value}{comma}", Value::from(*key));
    }
    out.push_str("}\n");
    out
}

/// Trailing tool results whose call is not in the history, as (index, call
/// id): OpenAI and Anthropic reject a request that ends so.
pub(crate) fn unanswered_tail(messages: &[Message]) -> Vec<(usize, String)> {
    let tail = messages
        .iter()
        .rev()
        .take_while(|m| m.answered_ids().next().is_some())
        .count();
    let from = messages.len() - tail;
    let calls: std::collections::HashSet<&str> =
        messages[..from].iter().flat_map(Message::call_ids).collect();
    let mut found = Vec::new();
    for (i, m) in messages.iter().enumerate().skip(from) {
        for id in m.answered_ids() {
            if !calls.contains(id) {
                found.push((i, id.to_owned()));
            }
        }
    }
    found
}

/// The figures `explain` prints besides the table.
pub(crate) struct Explained<'r> {
    /// The budget.
    pub(crate) budget: usize,
    /// Every message's tokens plus the reply priming.
    pub(crate) total: usize,
    /// `keep_recent` in effect.
    pub(crate) keep_recent: usize,
    /// What the summarizer would be told, when something is folded.
    pub(crate) told: Option<usize>,
    /// The plan applied with a stand-in summary.
    pub(crate) report: &'r Report,
}

/// `explain`'s text.
pub(crate) fn explain_text(messages: &[Message], e: &Explained<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "budget {} tokens; history {} tokens in {} messages: {}",
        e.budget,
        e.total,
        messages.len(),
        if e.total <= e.budget {
            "fits, nothing to do"
        } else {
            "over budget"
        }
    );
    let r = e.report;
    if let Some(told) = e.told {
        let _ = writeln!(
            out,
            "keep-recent {} tokens; kept part starts at message {} ({})",
            e.keep_recent,
            r.cut(),
            reason(r),
        );
        let _ = writeln!(
            out,
            "summary: the summarizer is told at most {told} tokens of prose; \
             the summary message's text, ledger included, takes at most {} tokens",
            r.allowance()
        );
    }
    let _ = writeln!(out, "\n{:>5}  {:<12} {:>7}  fate", "index", "role", "tokens");
    for (i, m) in messages.iter().enumerate() {
        let fate = r.fate(i).unwrap_or(Fate::Kept);
        let tokens = r.tokens(i).map_or("-".to_owned(), |t| t.to_string());
        let _ = writeln!(out, "{i:>5}  {:<12} {tokens:>7}  {fate}", m.role.as_str());
    }
    if e.told.is_some() {
        let _ = writeln!(
            out,
            "\nresult: {} hoisted, one summary message of at most {} tokens of text, {} kept; {} folded",
            r.indices(Fate::Hoisted).count(),
            r.allowance(),
            r.indices(Fate::Kept).count(),
            r.indices(Fate::Folded).count() + r.indices(Fate::PreviousSummary).count(),
        );
    } else if e.total > e.budget {
        let _ = writeln!(
            out,
            "\nnothing can be folded: the system messages and the latest turn alone exceed the budget"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::unanswered_tail;
    use chatfold::{Message, Part, ToolCall};

    fn result_block(id: &str) -> Part {
        Part::from_json(serde_json::json!({"type": "tool_result", "tool_use_id": id, "content": "42"}))
    }

    #[test]
    fn a_trailing_result_without_its_call_is_found() {
        let call = Message::assistant_tool_calls(vec![ToolCall::new("c1", "f", "{}")]);
        let answered = [Message::user("q"), call.clone(), Message::tool("42", "c1")];
        assert!(unanswered_tail(&answered).is_empty());
        let orphan = [Message::user("q"), Message::tool("42", "c9")];
        assert_eq!(unanswered_tail(&orphan), [(1, "c9".to_owned())]);
        let both = [
            Message::user("q"),
            call,
            Message::tool("42", "c1"),
            Message::tool("7", "c2"),
        ];
        assert_eq!(unanswered_tail(&both), [(3, "c2".to_owned())]);
        let anthropic = [Message::user("").with_parts(vec![result_block("toolu_1")])];
        assert_eq!(unanswered_tail(&anthropic), [(0, "toolu_1".to_owned())]);
        // Only the tail: a conversation that moved on is another matter.
        let earlier = [Message::tool("42", "c9"), Message::user("q")];
        assert!(unanswered_tail(&earlier).is_empty());
        assert!(unanswered_tail(&[]).is_empty());
    }
}
