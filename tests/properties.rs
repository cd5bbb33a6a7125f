//! Property tests: each of DESIGN.md's rules 1-8, over generated histories with
//! tool units (several results, interleaved turns, unanswered calls), orphan
//! results, mid-conversation system and developer messages, custom roles,
//! content arrays, null content and unicode.

mod common;

use std::borrow::Cow;
use std::cell::RefCell;
use std::convert::Infallible;

use chatfold::{Compactor, Error, Heuristic, Message, SummaryRequest, TokenCounter};
use common::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Call {
    previous: Option<String>,
    messages: Vec<Message>,
    allowance: usize,
}

/// Whether no compaction of `h` can meet `budget`: pinned messages, the
/// latest unit and a minimal summary already exceed it.
fn unreachable<C: TokenCounter>(c: &Compactor<C>, h: &[Message]) -> bool {
    let after = h.iter().rposition(|m| c.is_summary(m)).map_or(0, |i| i + 1);
    let pinned: usize = h
        .iter()
        .filter(|m| is_pinned(m) && !c.is_summary(m))
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
    let min_summary = c
        .counter
        .count_message(&Message::new(c.summary_role.clone(), &*c.summary_prefix))
        + c.min_summary_tokens;
    c.counter.reply_priming() + pinned + latest + min_summary > c.budget
}

/// Runs one compaction and checks every rule against `h`.
fn check_rules<C: TokenCounter>(c: &Compactor<C>, h: &[Message], summary: &str) -> Option<Vec<Message>> {
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
    let summaries: Vec<usize> = (0..out.len()).filter(|&i| c.is_summary(&out[i])).collect();
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
        .filter(|m| is_pinned(m) && !c.is_summary(m))
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
    let after = h.iter().rposition(|m| c.is_summary(m)).map_or(0, |i| i + 1);
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
        .filter(|m| !is_pinned(m) && !c.is_summary(m))
        .cloned()
        .collect();
    assert_eq!(calls[0].messages, expected_folded);
    let previous: Vec<&Message> = h[..cut].iter().filter(|m| c.is_summary(m)).collect();
    assert_eq!(calls[0].previous.is_some(), !previous.is_empty());
    if !result.over_budget {
        assert!(calls[0].allowance >= c.min_summary_tokens);
    }
    assert!(out[s].text().starts_with(&*c.summary_prefix));
    Some(out.to_vec())
}

fn summary_text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z]{1,6}( [a-z]{1,6}){0,10}",
        1 => "[a-z ]{200,600}[a-z]",
        1 => "[日本🙂]{1,80}",
    ]
}

fn config() -> impl Strategy<Value = (usize, u32, bool)> {
    (1usize..500, 0u32..=100, any::<bool>())
}

fn compactor(budget: usize, keep_pct: u32, strict: bool) -> Compactor {
    let keep = budget * keep_pct as usize / 100;
    Compactor::new(budget).keep_recent(keep).strict(strict)
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn rules_hold_with_the_heuristic_counter(
        h in history(40),
        (budget, keep, strict) in config(),
        summary in summary_text(),
    ) {
        check_rules(&compactor(budget, keep, strict), &h, &summary);
    }

    #[test]
    fn rules_hold_with_a_closure_counter(
        h in history(30),
        (budget, keep, strict) in config(),
        summary in summary_text(),
    ) {
        let words = |t: &str| t.split_whitespace().count();
        let c = compactor(budget, keep, strict).counter(words);
        check_rules(&c, &h, &summary);
    }

    /// Rule 7 for a stateless server: compact, append new turns, feed the
    /// result back, again and again: one running summary, within budget.
    #[test]
    fn feeding_results_back_keeps_one_summary(
        rounds in prop::collection::vec(prop::collection::vec(item(), 1..12), 1..6),
        (budget, keep, _) in config(),
        summary in summary_text(),
    ) {
        let c = compactor(budget + 100, keep, false);
        let mut h: Vec<Message> = vec![Message::system("You are helpful.")];
        for items in rounds {
            h.extend(render(&items));
            if let Some(out) = check_rules(&c, &h, &summary) {
                h = out;
            }
            prop_assert!(h.iter().filter(|m| c.is_summary(m)).count() <= 1);
        }
    }

    /// Strict mode fails exactly when the lenient result is over budget.
    #[test]
    fn strict_mode_errs_exactly_when_over_budget(h in history(30), (budget, keep, _) in config()) {
        let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("short summary".to_owned());
        let lenient = compactor(budget, keep, false).compact(&h, &summarize).unwrap();
        let strict = compactor(budget, keep, true).compact(&h, &summarize);
        prop_assert_eq!(lenient.over_budget, strict.is_err());
    }

    /// Rule 8: a failing or empty summarizer is an error and changes nothing.
    #[test]
    fn summarizer_failures_are_errors(h in history(30), (budget, keep, _) in config(), empty in any::<bool>()) {
        let c = compactor(budget, keep, false);
        let before = h.clone();
        let result = c.compact(&h, &|_: &SummaryRequest<'_>| {
            if empty { Ok(" \n ".to_owned()) } else { Err("model unavailable") }
        });
        prop_assert_eq!(&h, &before);
        let needs_summary = c.plan(&h).unwrap().folds();
        match result {
            Ok(r) => prop_assert!(!needs_summary && !r.summarized),
            Err(Error::EmptySummary) => prop_assert!(needs_summary && empty),
            Err(Error::Summarize(source)) => {
                prop_assert!(needs_summary && !empty);
                prop_assert_eq!(source.to_string(), "model unavailable");
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    /// The report accounts for every input message exactly once.
    #[test]
    fn report_accounts_for_every_message(h in history(30), (budget, keep, _) in config()) {
        let c = compactor(budget, keep, false).count_all(true);
        let r = c.compact(&h, &|_: &SummaryRequest<'_>| Ok::<_, Infallible>("s".into())).unwrap();
        prop_assert_eq!(r.report.fates().count(), h.len());
        prop_assert_eq!(r.report.len(), h.len());
        prop_assert_eq!(r.tokens_before, Some(total(&Heuristic, &h)));
        let kept = r.report.indices(chatfold::Fate::Kept).count();
        let hoisted = r.report.indices(chatfold::Fate::Hoisted).count();
        prop_assert_eq!(r.messages.len(), kept + hoisted + usize::from(r.summarized));
    }
}

#[cfg(feature = "tiktoken")]
proptest! {
    #![proptest_config(cases(64))]

    #[test]
    fn rules_hold_with_tiktoken(
        h in history(30),
        (budget, keep, strict) in config(),
        summary in summary_text(),
    ) {
        let c = compactor(budget, keep, strict).counter(chatfold::Tiktoken::o200k_base().unwrap());
        check_rules(&c, &h, &summary);
    }
}
