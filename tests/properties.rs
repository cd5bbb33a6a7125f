//! Property tests: each of DESIGN.md's rules 1-8, over generated histories with
//! tool units (several results, interleaved turns, unanswered calls), orphan
//! results, mid-conversation system and developer messages, custom roles,
//! content arrays, null content and unicode.

mod common;

use std::convert::Infallible;

use chatfold::{Compactor, Error, Heuristic, Message, SummaryRequest, TokenCounter};
use common::*;
use proptest::prelude::*;

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

    /// The same rules with tool exchanges in Anthropic's form: `tool_use`
    /// blocks in assistant messages, `tool_result` blocks in user messages
    /// (several per message, split around interleaved turns, orphans).
    #[test]
    fn rules_hold_over_anthropic_tool_blocks(
        h in chatfold::testing::Histories::new().max_turns(40).form(chatfold::testing::Form::Anthropic).strategy(),
        (budget, keep, strict) in config(),
        summary in summary_text(),
    ) {
        check_rules(&compactor(budget, keep, strict), &h, &summary);
    }

    /// The same rules over Responses API items: reasoning, parallel
    /// `function_call` items and their outputs (split around interleaved
    /// turns, orphans), typed message items beside the shorthand.
    #[test]
    fn rules_hold_over_responses_items(
        h in chatfold::testing::Histories::new().max_turns(40).form(chatfold::testing::Form::Responses).strategy(),
        (budget, keep, strict) in config(),
        summary in summary_text(),
    ) {
        check_rules(&compactor(budget, keep, strict), &h, &summary);
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
            prop_assert!(h.iter().filter(|m| c.policy.is_summary(m)).count() <= 1);
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

    /// An unreachable budget never makes the result larger than the input:
    /// when no summary can make the history smaller it comes back whole,
    /// with no summarizer call and its exact count; the strict error
    /// carries the same count.
    #[test]
    fn an_unreachable_budget_never_grows_the_history(h in history(30), budget in 1usize..120, summary in summary_text()) {
        let c = compactor(budget, 50, false);
        let input = Heuristic.reply_priming() + h.iter().map(|m| Heuristic.count_message(m)).sum::<usize>();
        let calls = std::cell::Cell::new(0);
        let summarize = |_: &SummaryRequest<'_>| { calls.set(calls.get() + 1); Ok::<_, Infallible>(summary.clone()) };
        let r = c.compact(&h, &summarize).unwrap();
        if r.over_budget {
            prop_assert!(r.tokens_after <= input, "{} > {}", r.tokens_after, input);
            if r.report.reason() == chatfold::CutReason::NoGain {
                prop_assert!(!r.summarized && calls.get() == 0);
                prop_assert_eq!(r.tokens_before, chatfold::Tokens::Exact(input));
                prop_assert_eq!(r.tokens_after, input);
                match c.clone().strict(true).compact(&h, &summarize) {
                    Err(Error::BudgetUnreachable { required, .. }) => prop_assert_eq!(required, input),
                    other => prop_assert!(false, "{:?}", other.map(|r| r.tokens_after)),
                }
            }
        }
    }

    /// The report accounts for every input message exactly once.
    #[test]
    fn report_accounts_for_every_message(h in history(30), (budget, keep, _) in config()) {
        let c = compactor(budget, keep, false).count_all(true);
        let r = c.compact(&h, &|_: &SummaryRequest<'_>| Ok::<_, Infallible>("s".into())).unwrap();
        prop_assert_eq!(r.report.fates().count(), h.len());
        prop_assert_eq!(r.report.len(), h.len());
        prop_assert_eq!(r.tokens_before, chatfold::Tokens::Exact(Heuristic.reply_priming() + h.iter().map(|m| Heuristic.count_message(m)).sum::<usize>()));
        let kept = r.report.indices(chatfold::Fate::Kept).count();
        let hoisted = r.report.indices(chatfold::Fate::Hoisted).count();
        prop_assert_eq!(r.messages.len(), kept + hoisted + usize::from(r.summarized));
    }
}

proptest! {
    #![proptest_config(cases(64))]

    /// Rule 9: what is counted is bounded by the budget (and the longest
    /// message), not by the history's length.
    #[test]
    fn counting_grows_with_the_budget_not_the_history(
        lengths in prop::collection::vec(1usize..400, 200..3000),
        budget in 50usize..2000,
        keep in 0u32..=100,
    ) {
        let h: Vec<Message> = lengths
            .iter()
            .enumerate()
            .map(|(i, &n)| if i % 2 == 0 { Message::user("u".repeat(n)) } else { Message::assistant("a".repeat(n)) })
            .collect();
        let counted = std::cell::Cell::new(0usize);
        let counter = |text: &str| {
            counted.set(counted.get() + text.len());
            text.len().div_ceil(4)
        };
        let c = compactor(budget, keep, false).counter(counter);
        let summarize = |_: &SummaryRequest<'_>| Ok::<_, Infallible>("short".to_owned());
        c.compact(&h, &summarize).unwrap();
        let longest = lengths.iter().max().copied().unwrap_or(0);
        // A budget's worth of text (4 bytes a token) counted from the end, one
        // message past it, the role names (at most 2 bytes per token of the
        // budget: a message costs at least 5), the summary. When even the
        // latest message is over budget, the folded part is counted too, up
        // to the summary's limit (overhead and 16 tokens) and one message past
        // it, to learn whether folding shrinks the history.
        let bound = 6 * budget + 2 * longest + 400;
        prop_assert!(counted.get() <= bound, "counted {} bytes, bound {bound}", counted.get());
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
