//! Independent checks of DESIGN.md's rules (written from the rules, not
//! from the library's code), shared by the property tests and the fuzz
//! targets (`fuzz/`, which include this file by path).
#![allow(dead_code)]

use std::borrow::Cow;
use std::cell::RefCell;
use std::convert::Infallible;

use chatfold::{Compactor, Error, Message, Role, SummaryRequest, TokenCounter};

/// Index of the call a tool result answers: the nearest earlier assistant
/// message carrying a call with that id.
pub fn answered_call(history: &[Message], j: usize) -> Option<usize> {
    let id = history[j].tool_call_id.as_deref()?;
    if history[j].role != Role::Tool {
        return None;
    }
    (0..j)
        .rev()
        .find(|&i| history[i].tool_calls.iter().any(|c| c.id == id))
}

/// Whether `b` is a cut point: no call and its result lie on opposite sides.
pub fn is_boundary(history: &[Message], b: usize) -> bool {
    (b..history.len()).all(|j| answered_call(history, j).is_none_or(|i| i >= b))
}

/// The start of the last unit: the largest boundary below the length.
pub fn last_unit_start(history: &[Message]) -> usize {
    (0..history.len())
        .rev()
        .find(|&b| is_boundary(history, b))
        .unwrap_or(0)
}

/// The first non-pinned message from `b` on is an assistant turn or a tool result.
pub fn opens_with_response(history: &[Message], b: usize) -> bool {
    history[b..]
        .iter()
        .find(|m| !matches!(m.role, Role::System | Role::Developer))
        .is_some_and(|m| matches!(m.role, Role::Assistant | Role::Tool) || m.tool_call_id.is_some())
}

pub fn is_pinned(m: &Message) -> bool {
    matches!(m.role, Role::System | Role::Developer)
}

/// Sum of `count_message` over messages, plus the list's reply priming.
pub fn total<C: TokenCounter>(counter: &C, messages: &[Message]) -> usize {
    counter.reply_priming() + messages.iter().map(|m| counter.count_message(m)).sum::<usize>()
}

#[derive(Debug, Clone)]
struct Call {
    previous: Option<String>,
    messages: Vec<Message>,
    allowance: usize,
}

/// Whether no compaction of `h` can meet `budget`: pinned messages, the
/// latest unit and a minimal summary already exceed it.
pub fn unreachable<C: TokenCounter>(c: &Compactor<C>, h: &[Message]) -> bool {
    let after = h
        .iter()
        .rposition(|m| c.policy.is_summary(m))
        .map_or(0, |i| i + 1);
    let pinned: usize = h
        .iter()
        .filter(|m| is_pinned(m) && !c.policy.is_summary(m))
        .map(|m| c.counter.count_message(m))
        .sum();
    let region = &h[after..];
    let latest: usize = if region.is_empty() {
        0
    } else {
        region[last_unit_start(region)..]
            .iter()
            .filter(|m| !is_pinned(m))
            .map(|m| c.counter.count_message(m))
            .sum()
    };
    let min_summary = c.counter.count_message(&Message::new(
        c.policy.summary_role.clone(),
        &*c.policy.summary_prefix,
    )) + c.policy.min_summary_tokens;
    c.counter.reply_priming() + pinned + latest + min_summary > c.budget
}

/// Runs one compaction and checks every rule against `h`.
pub fn check_rules<C: TokenCounter>(c: &Compactor<C>, h: &[Message], summary: &str) -> Option<Vec<Message>> {
    let calls = RefCell::new(Vec::new());
    let summarizer = |r: &SummaryRequest<'_>| {
        calls.borrow_mut().push(Call {
            previous: r.previous_summary().map(str::to_owned),
            messages: r.messages().cloned().collect(),
            allowance: r.allowance(),
        });
        Ok::<_, Infallible>(summary.to_owned())
    };
    let before = h.to_vec();
    let result = c.compact(h, &summarizer);
    assert_eq!(h, &before[..], "input changed");
    let total_in = total(&c.counter, h);

    let result = match result {
        Err(Error::BudgetUnreachable { budget, required }) => {
            assert!(c.strict, "only strict mode reports unreachable budgets");
            assert_eq!(budget, c.budget);
            assert!(required > budget);
            assert!(unreachable(c, h), "budget was reachable");
            return None;
        }
        Err(Error::EmptySummary) => {
            // Rule 8: a blank summary is an error, and only when something was folded.
            assert!(summary.trim().is_empty(), "EmptySummary for {summary:?}");
            assert_eq!(calls.borrow().len(), 1);
            return None;
        }
        Err(e) => panic!("unexpected error: {e}"),
        Ok(r) => r,
    };
    let out: &[Message] = &result.messages;

    // Rule 1: under budget, unchanged, borrowed, no summarizer call.
    if total_in <= c.budget {
        assert!(matches!(result.messages, Cow::Borrowed(_)));
        assert_eq!(out, h);
        assert!(calls.borrow().is_empty());
        assert!(!result.summarized);
        assert_eq!(result.tokens_before, Some(total_in));
    }

    // Counts are exact, and rule 6: within budget unless unreachable.
    assert_eq!(result.tokens_after, total(&c.counter, out));
    assert_eq!(result.over_budget, result.tokens_after > c.budget);
    if result.over_budget {
        assert!(!c.strict, "strict mode returned an over-budget result");
        assert!(unreachable(c, h), "over budget though reachable");
    }

    // Rule 7: at most one summary, exactly one when summarized.
    let summaries: Vec<usize> = (0..out.len()).filter(|&i| c.policy.is_summary(&out[i])).collect();
    if result.summarized {
        assert_eq!(
            summaries.len(),
            1,
            "summarized into {} summaries",
            summaries.len()
        );
    }

    if !result.summarized {
        assert_eq!(out, h, "not summarized yet changed");
        assert!(calls.borrow().is_empty());
        return Some(out.to_vec());
    }
    let s = summaries[0];
    let (hoisted, kept) = (&out[..s], &out[s + 1..]);

    // Rule 3: the kept part is a verbatim suffix, cut at a unit boundary.
    assert!(h.ends_with(kept), "kept part is not a suffix of the input");
    let cut = h.len() - kept.len();
    assert!(
        is_boundary(h, cut),
        "cut at {cut} separates a tool call from its result"
    );

    // Rule 2: pinned messages before the cut come first, verbatim, in order;
    // previous summaries are not among them.
    let expected_hoisted: Vec<Message> = h[..cut]
        .iter()
        .filter(|m| is_pinned(m) && !c.policy.is_summary(m))
        .cloned()
        .collect();
    assert_eq!(hoisted, &expected_hoisted[..]);

    // Rule 4: the cut is aligned when an aligned boundary exists after it.
    if opens_with_response(h, cut) {
        for b in cut + 1..h.len() {
            assert!(
                !is_boundary(h, b) || opens_with_response(h, b),
                "cut at {cut} opens with a response though {b} would not"
            );
        }
    }

    // Rule 5: the latest unit is kept (after any previous summary).
    let after = h
        .iter()
        .rposition(|m| c.policy.is_summary(m))
        .map_or(0, |i| i + 1);
    if after < h.len() {
        assert!(
            cut <= after + last_unit_start(&h[after..]),
            "latest unit not kept"
        );
    }

    // Rule 8's other half and the summarizer contract: one call, with exactly
    // the folded turns, and the previous summary's text.
    let calls = calls.borrow();
    assert_eq!(calls.len(), 1);
    let expected_folded: Vec<Message> = h[..cut]
        .iter()
        .filter(|m| !is_pinned(m) && !c.policy.is_summary(m))
        .cloned()
        .collect();
    assert_eq!(calls[0].messages, expected_folded);
    let previous: Vec<&Message> = h[..cut].iter().filter(|m| c.policy.is_summary(m)).collect();
    assert_eq!(calls[0].previous.is_some(), !previous.is_empty());
    if !result.over_budget {
        assert!(calls[0].allowance >= c.policy.min_summary_tokens);
    }
    assert!(out[s].text().starts_with(&*c.policy.summary_prefix));
    Some(out.to_vec())
}
