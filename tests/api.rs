//! Public behaviour: documented edge cases, exact token counts, cost.

mod common;

use std::cell::Cell;
use std::convert::Infallible;

use chatfold::{
    Compactor, CutReason, Error, Extractive, Fate, Heuristic, Message, SummaryRequest, TokenCounter,
};

fn fixed(text: &'static str) -> impl Fn(&SummaryRequest<'_>) -> Result<String, Infallible> {
    move |_| Ok(text.to_owned())
}

fn chat(turns: usize) -> Vec<Message> {
    let mut h = vec![Message::system("You are a careful assistant.")];
    for i in 0..turns {
        h.push(Message::user(format!(
            "Question {i}: tell me something about the number {i}."
        )));
        h.push(Message::assistant(format!(
            "The number {i} is {}.",
            if i % 2 == 0 { "even" } else { "odd" }
        )));
    }
    h
}

#[test]
fn empty_history_is_returned_as_is() {
    let r = Compactor::new(100).compact(&[], &fixed("x")).unwrap();
    assert!(r.messages.is_empty() && !r.summarized && !r.over_budget);
    assert_eq!(r.tokens_after, 3); // the reply priming alone
    // A budget below the reply priming cannot be met, even by nothing.
    let r = Compactor::new(2).compact(&[], &fixed("x")).unwrap();
    assert!(r.over_budget && r.messages.is_empty());
    assert!(matches!(
        Compactor::new(2).strict(true).compact(&[], &fixed("x")),
        Err(Error::BudgetUnreachable { budget: 2, .. })
    ));
}

#[test]
fn single_message_over_budget_is_kept_and_flagged() {
    let h = [Message::user("word ".repeat(500))];
    let r = Compactor::new(50).compact(&h, &fixed("never called")).unwrap();
    assert_eq!(&*r.messages, &h[..]);
    assert!(!r.summarized && r.over_budget);
    assert_eq!(r.tokens_after, Heuristic.count_messages(&h));
}

#[test]
fn huge_latest_message_is_kept_and_the_rest_folded() {
    let mut h = chat(10);
    h.push(Message::user("data ".repeat(2_000)));
    let r = Compactor::new(200)
        .compact(&h, &fixed("ten questions about numbers"))
        .unwrap();
    assert!(r.summarized && r.over_budget);
    assert_eq!(r.messages.len(), 3);
    assert_eq!(r.messages[0], h[0]);
    assert_eq!(r.messages[2], h[h.len() - 1]);
    let strict = Compactor::new(200).strict(true).compact(&h, &fixed("s"));
    assert!(matches!(strict, Err(Error::BudgetUnreachable { budget: 200, required }) if required > 200));
}

#[test]
fn all_system_history_cannot_be_folded() {
    let h: Vec<Message> = (0..20)
        .map(|i| Message::system(format!("rule number {i} is important")))
        .collect();
    let r = Compactor::new(50).compact(&h, &fixed("never")).unwrap();
    assert_eq!(&*r.messages, &h[..]);
    assert!(!r.summarized && r.over_budget);
}

#[test]
fn budget_smaller_than_the_system_messages() {
    let mut h = vec![Message::system("policy ".repeat(100))];
    h.extend(chat(5).into_iter().skip(1));
    let calls = Cell::new(0);
    let summarizer = |_: &SummaryRequest<'_>| {
        calls.set(calls.get() + 1);
        Ok::<_, Infallible>("talked about numbers".to_owned())
    };
    let r = Compactor::new(60).compact(&h, &summarizer).unwrap();
    assert!(r.over_budget);
    assert_eq!(r.messages[0], h[0]);
    assert_eq!(r.messages.last(), h.last());
    // Strict mode gives up before calling the summarizer when even an empty
    // summary could not fit.
    calls.set(0);
    let err = Compactor::new(60)
        .strict(true)
        .compact(&h, &summarizer)
        .unwrap_err();
    assert!(
        matches!(err, Error::BudgetUnreachable { budget: 60, .. }),
        "{err}"
    );
    assert_eq!(calls.get(), 0);
}

#[test]
fn system_messages_mid_conversation_are_hoisted_in_order() {
    let mut h = chat(20);
    h.insert(5, Message::system("Mid-conversation rule A."));
    h.insert(9, Message::developer("Mid-conversation rule B."));
    let r = Compactor::new(150).compact(&h, &fixed("numbers")).unwrap();
    assert!(r.summarized);
    assert_eq!(&r.messages[..3], &[h[0].clone(), h[5].clone(), h[9].clone()]);
    assert_eq!(r.report.fate(5), Some(Fate::Hoisted));
    assert_eq!(r.report.indices(Fate::Hoisted).collect::<Vec<_>>(), [0, 5, 9]);
}

#[test]
fn previous_summary_is_rolled_into_the_next() {
    let c = Compactor::new(120);
    let history = chat(20);
    let first = c
        .compact(&history, &fixed("The user asked about numbers 0 to 17."))
        .unwrap();
    let mut next = first.messages.into_owned();
    next.extend(chat(8).into_iter().skip(1));
    let seen = Cell::new(None::<String>);
    let summarizer = |r: &SummaryRequest<'_>| {
        seen.set(r.previous_summary().map(str::to_owned));
        assert!(
            r.messages().all(|m| !c.policy.is_summary(m)),
            "the previous summary was passed as a turn"
        );
        Ok::<_, Infallible>("Numbers 0 to 23 were discussed.".to_owned())
    };
    let second = c.compact(&next, &summarizer).unwrap();
    assert_eq!(
        seen.take().as_deref(),
        Some("The user asked about numbers 0 to 17.")
    );
    assert_eq!(
        second.messages.iter().filter(|m| c.policy.is_summary(m)).count(),
        1
    );
    assert!(second.tokens_after <= 120);
    assert_eq!(second.report.fate(1), Some(Fate::PreviousSummary));
}

#[test]
fn summary_recognised_by_its_prefix_alone() {
    // A client that rebuilt the message from role and content only.
    let h = vec![
        Message::system("Be brief."),
        Message::system(format!(
            "{}earlier: the user likes tea",
            chatfold::DEFAULT_SUMMARY_PREFIX
        )),
        Message::user("x ".repeat(200)),
        Message::user("latest"),
    ];
    let c = Compactor::new(80);
    assert!(c.policy.is_summary(&h[1]) && !c.policy.is_summary(&h[0]));
    let previous = Cell::new(None::<String>);
    let r = c
        .compact(&h, &|r: &SummaryRequest<'_>| {
            previous.set(r.previous_summary().map(str::to_owned));
            Ok::<_, Infallible>("likes tea, sent filler".to_owned())
        })
        .unwrap();
    assert_eq!(previous.take().as_deref(), Some("earlier: the user likes tea"));
    assert_eq!(r.messages.len(), 3);
}

#[test]
fn over_long_summary_is_cut_and_reported() {
    let h = chat(30);
    let c = Compactor::new(200);
    let r = c
        .compact(&h, &fixed("blah blah blah blah blah blah blah. "))
        .unwrap();
    assert!(!r.summary_truncated);
    let long = "a fact worth keeping. ".repeat(500);
    let r = c
        .compact(&h, &|_: &SummaryRequest<'_>| Ok::<_, Infallible>(long.clone()))
        .unwrap();
    assert!(r.summary_truncated && !r.over_budget);
    assert!(r.tokens_after <= 200);
    let summary = r.messages.iter().find(|m| c.policy.is_summary(m)).unwrap();
    assert!(long.starts_with(summary.text().strip_prefix(&*c.policy.summary_prefix).unwrap()));
}

#[test]
fn failing_summarizer_leaves_messages_untouched() {
    let h = chat(30);
    let before = h.clone();
    let err = Compactor::new(100)
        .compact(&h, &|_: &SummaryRequest<'_>| Err::<String, _>("rate limited"))
        .unwrap_err();
    // Display says what failed; the source says why, once.
    assert_eq!(err.to_string(), "summarizer failed");
    let source = std::error::Error::source(&err).map(ToString::to_string);
    assert_eq!(source.as_deref(), Some("rate limited"));
    assert_eq!(h, before);
    let err = Compactor::new(100).compact(&h, &fixed("   ")).unwrap_err();
    assert!(matches!(err, Error::EmptySummary));
    assert_eq!(h, before);
}

#[test]
fn cut_reason_is_reported() {
    let h = chat(30);
    let r = Compactor::new(600)
        .keep_recent(40)
        .compact(&h, &fixed("s"))
        .unwrap();
    assert_eq!(r.report.reason(), CutReason::KeepRecent);
    let r = Compactor::new(120)
        .keep_recent(120)
        .compact(&h, &fixed("s"))
        .unwrap();
    assert_eq!(r.report.reason(), CutReason::Budget);
    let r = Compactor::new(10_000).compact(&h, &fixed("s")).unwrap();
    assert_eq!(r.report.reason(), CutReason::Fits);
}

#[test]
fn cut_moves_past_an_assistant_opening() {
    // keep_recent fits the last three messages, which open with an assistant turn.
    let h = vec![
        Message::user("a ".repeat(100)),
        Message::user("first question"),
        Message::assistant("first answer"),
        Message::user("second question"),
        Message::assistant("second answer"),
    ];
    let kept3 = Heuristic.count_messages(&h[2..]) - 3;
    let r = Compactor::new(90)
        .fold_to(90)
        .keep_recent(kept3)
        .compact(&h, &fixed("s"))
        .unwrap();
    assert_eq!(r.report.aligned_from(), Some(2));
    assert_eq!(r.report.cut(), 3);
    assert_eq!(&r.messages[1..], &h[3..]);
}

#[test]
fn async_compaction_matches_sync() {
    let h = chat(40);
    let c = Compactor::new(150);
    let sync = c.compact(&h, &Extractive::new()).unwrap();
    let summarizer = chatfold::Ready(Extractive::new());
    let r#async = pollster::block_on(c.compact_async(&h, &summarizer)).unwrap();
    assert_eq!(sync.messages, r#async.messages);
    let failing = |_: SummaryRequest<'_>| async { Err::<String, _>("down") };
    assert!(matches!(
        pollster::block_on(c.compact_async(&h, &failing)),
        Err(Error::Summarize(_))
    ));
}

/// Rule 9: the counter is asked about a bounded amount of text, whatever
/// the length of the history.
#[test]
fn counting_grows_with_the_budget_not_the_history() {
    let chars = Cell::new(0usize);
    let counter = |text: &str| {
        chars.set(chars.get() + text.len());
        text.len().div_ceil(4)
    };
    let h = chat(5_000); // 10 001 messages, about 200 000 tokens
    let c = Compactor::new(2_000).counter(counter);
    let r = c.compact(&h, &fixed("numbers")).unwrap();
    assert!(r.summarized && r.tokens_after <= 2_000);
    let history_chars: usize = h.iter().map(|m| m.text().len()).sum();
    // The budget's worth of text is about 8 000 characters; allow for the
    // framing (role names), the kept part counted again in the output
    // accounting of the summary, and one message past the budget.
    assert!(chars.get() < 4 * 2_000 * 4, "counted {} characters", chars.get());
    assert!(
        chars.get() * 20 < history_chars,
        "counted {} of {history_chars}",
        chars.get()
    );
}

#[cfg(feature = "tiktoken")]
#[test]
fn tiktoken_matches_openai_accounting() {
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/token_counts.json")).unwrap();
    for case in fixture.as_array().unwrap() {
        let messages = chatfold::History::from_json_value(case["messages"].clone())
            .map(|h| h.messages)
            .unwrap();
        for name in ["o200k_base", "cl100k_base"] {
            let counter = chatfold::Tiktoken::from_name(name).unwrap();
            let expected = case["tokens"][name].as_u64().unwrap() as usize;
            assert_eq!(
                counter.count_messages(&messages),
                expected,
                "{name}: {messages:?}"
            );
        }
    }
}

#[cfg(feature = "tiktoken")]
#[test]
fn tiktoken_survives_huge_runs_of_one_character() {
    let counter = chatfold::Tiktoken::o200k_base().unwrap();
    for text in ["A".repeat(1_000_000), " ".repeat(1_000_000), "^".repeat(300_000)] {
        assert!(counter.count(&text) > 0);
    }
}

/// Tiktoken proves a long history over budget from lengths alone (no text
/// is shorter in tokens than its bytes over 128): the same result, less counting.
#[cfg(feature = "tiktoken")]
#[test]
fn tiktoken_lower_bound_changes_nothing_but_the_work() {
    struct Watched<'a> {
        inner: chatfold::Tiktoken,
        chars: &'a Cell<usize>,
        bound: bool,
    }
    impl TokenCounter for Watched<'_> {
        fn count(&self, text: &str) -> usize {
            self.chars.set(self.chars.get() + text.len());
            self.inner.count(text)
        }
        fn count_message_at_least(&self, m: &Message) -> usize {
            if self.bound {
                self.inner.count_message_at_least(m)
            } else {
                0
            }
        }
    }
    let h = chat(600);
    let run = |bound: bool| {
        let chars = Cell::new(0);
        let inner = chatfold::Tiktoken::o200k_base().unwrap();
        let counter = Watched {
            inner,
            chars: &chars,
            bound,
        };
        let r = Compactor::new(2_000)
            .counter(counter)
            .compact(&h, &fixed("s"))
            .unwrap();
        (r.messages.into_owned(), r.tokens_after, chars.get())
    };
    let (bounded, bounded_tokens, bounded_chars) = run(true);
    let (exact, exact_tokens, exact_chars) = run(false);
    assert_eq!(bounded, exact);
    assert_eq!(bounded_tokens, exact_tokens);
    assert!(
        bounded_chars * 3 < exact_chars * 2,
        "bounded {bounded_chars} vs exact {exact_chars}"
    );
}

/// An async closure is a summarizer that reads the folded messages where
/// they are (the same addresses as the caller's), holding them across its
/// awaits; it may borrow what is around it; an `async fn` is one too; and
/// the compaction's future is `Send`, spawned on a multi-threaded runtime as
/// a server spawns it.
#[test]
fn an_async_closure_reads_the_callers_messages_in_place() {
    let history: Vec<Message> = (0..60)
        .map(|i| Message::user(format!("turn number {i}")))
        .collect();
    let first = std::sync::atomic::AtomicUsize::new(0);
    let unit = String::from("turns");
    let summarizer = async |request: SummaryRequest<'_>| {
        std::future::ready(()).await;
        let at = request
            .messages()
            .next()
            .map_or(0, |m| m as *const Message as usize);
        first.store(at, std::sync::atomic::Ordering::Relaxed);
        Ok::<_, Infallible>(format!("{} {unit}", request.messages().len()))
    };
    let result = pollster::block_on(Compactor::new(120).compact_async(&history, &summarizer)).unwrap();
    assert!(result.summarized && result.tokens_after <= 120);
    assert!(result.messages.iter().any(|m| m.text().contains(" turns")));
    assert_eq!(
        first.into_inner(),
        &history[0] as *const Message as usize,
        "not a copy"
    );

    async fn count(request: SummaryRequest<'_>) -> Result<String, Infallible> {
        tokio::task::yield_now().await;
        Ok(format!("{} turns", request.messages().len()))
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let owned = history.clone();
    let task = runtime.spawn(async move {
        let summarizer = async |request: SummaryRequest<'_>| {
            tokio::task::yield_now().await;
            Ok::<_, Infallible>(format!("{} turns", request.messages().len()))
        };
        let compactor = Compactor::new(120);
        let by_closure = compactor.compact_async(&owned, &summarizer).await.unwrap();
        let by_fn = compactor.compact_async(&owned, &count).await.unwrap();
        (by_closure.messages.into_owned(), by_fn.messages.into_owned())
    });
    let (by_closure, by_fn) = runtime.block_on(task).unwrap();
    assert_eq!(by_closure, by_fn);
    assert!(by_closure.len() < history.len());
}

/// A compaction's requests carry its counter when it is a built-in one, so
/// the built-in summarizer fits its allowance as the compactor counts (o200k
/// here), not by its own heuristic; a closure counter is not attached.
#[cfg(feature = "tiktoken")]
#[test]
fn the_summarizer_measures_with_the_compactors_counter() {
    use chatfold::{Extractive, Summarizer, Tiktoken, TokenCounter};
    let o200k = Tiktoken::o200k_base().unwrap();
    let h: Vec<Message> = (0..80)
        .map(|i| {
            Message::user(format!(
                "Message {i}: the deploy of service {i} to région Nord-Est, naïve café ünïcödé 東京 {i}."
            ))
        })
        .collect();
    let c = Compactor::new(400).counter(o200k);
    let plan = c.plan(&h).unwrap();
    let request = plan.folded().unwrap();
    assert_eq!(request.count("hello world"), Some(o200k.count("hello world")));
    let text = Extractive::new().summarize(&request).unwrap();
    assert!(
        o200k.count(&text) <= request.allowance(),
        "{} > {}",
        o200k.count(&text),
        request.allowance()
    );
    let closure = Compactor::new(400).counter(|t: &str| t.len());
    assert_eq!(closure.plan(&h).unwrap().folded().unwrap().count("hello"), None);
}

#[test]
fn the_budget_as_a_trigger_still_holds_a_reachable_budget() {
    // The kept turns leave the summary less room than it folds: the
    // summary is cut to what the budget leaves (rule 6), not to what it
    // folds.
    let history = [
        Message::system("You are terse."),
        Message::user("w0x0"),
        Message::assistant("w1x0 w1x1 w1x2 w1x3 w1x4 w1x5 w1x6 w1x7 w1x8 w1x9 w1x10 w1x11"),
        Message::user("w2x0"),
        Message::assistant("w3x0 w3x1 w3x2 w3x3 w3x4 w3x5 w3x6 w3x7 w3x8 w3x9 w3x10"),
    ];
    let total = Heuristic.count_messages(&history);
    for budget in total.saturating_sub(8)..total {
        let mut compactor = Compactor::new(budget)
            .keep_recent(budget / 2)
            .budget_as_trigger(true);
        compactor.policy.min_summary_tokens = 1;
        let plan = compactor.plan(&history).unwrap();
        if plan.report().reason() == CutReason::Fits {
            continue;
        }
        let r = compactor
            .compact(
                &history,
                &fixed("two lines, starting with the user's first words and more"),
            )
            .unwrap();
        assert!(r.summarized);
        assert!(
            r.tokens_after <= budget || r.over_budget,
            "{} > {budget}",
            r.tokens_after
        );
        // The kept turns (which `keep_recent` alone decides) leave a least
        // summary room: the summary takes no more than the budget leaves.
        let kept: usize = (r.report.indices(Fate::Kept))
            .map(|i| Heuristic.count_message(&history[i]))
            .sum();
        let least = Heuristic.count_message(&compactor.policy.summary_message(""))
            + compactor.policy.min_summary_tokens;
        if 3 + Heuristic.count_message(&history[0]) + kept + least <= budget {
            assert!(
                !r.over_budget && r.tokens_after <= budget,
                "{} > {budget}",
                r.tokens_after
            );
        }
    }
}

#[test]
fn the_budget_as_a_trigger_keeps_keep_recent_and_folds_without_gain() {
    let history = chat(30);
    let keep = 60;
    // By default the budget bounds what stays: with room for a summary
    // beside at most 60 tokens of turns, fewer are kept.
    let bounded = Compactor::new(80)
        .keep_recent(keep)
        .compact(&history, &fixed("Numbers."));
    let bounded = bounded.unwrap();
    // As a trigger, `keep_recent` alone decides: more turns stay, and the
    // result may pass the budget.
    let triggered = Compactor::new(80)
        .keep_recent(keep)
        .budget_as_trigger(true)
        .compact(&history, &fixed("Numbers."))
        .unwrap();
    assert!(triggered.summarized);
    let kept = |c: &chatfold::Compaction<'_>| c.report.indices(Fate::Kept).count();
    assert!(
        kept(&triggered) > kept(&bounded),
        "{} <= {}",
        kept(&triggered),
        kept(&bounded)
    );
    let kept_tokens: usize = triggered
        .report
        .indices(Fate::Kept)
        .map(|i| Heuristic.count_message(&history[i]))
        .sum();
    assert!(kept_tokens <= keep || kept(&triggered) <= 1);
    // The next older unit would have passed keep_recent.
    let cut = triggered.report.cut();
    let before: usize = (cut - 2..cut).map(|i| Heuristic.count_message(&history[i])).sum();
    assert!(kept_tokens + before > keep);
    // A history no summary makes smaller is folded anyway, its summary
    // whole, as long as it is no longer than what it folds.
    let tight = [
        Message::user("Hi."),
        Message::assistant("Hello."),
        Message::user("word ".repeat(80)),
    ];
    let whole = Compactor::new(40).compact(&tight, &fixed("Greetings.")).unwrap();
    assert_eq!(
        (whole.summarized, whole.report.reason()),
        (false, CutReason::NoGain)
    );
    let folded = Compactor::new(40)
        .budget_as_trigger(true)
        .compact(&tight, &fixed("Greetings."))
        .unwrap();
    assert!(folded.summarized && folded.over_budget);
    assert!(folded.messages[0].text().ends_with("Greetings."));
    assert!(!folded.summary_truncated);
}

#[test]
fn an_empty_summary_is_an_error_unless_the_policy_takes_it() {
    let history = chat(30);
    let refused = Compactor::new(120).compact(&history, &fixed("  "));
    assert!(matches!(refused, Err(Error::EmptySummary)));
    let policy = chatfold::FoldPolicy::new()
        .allow_empty_summary(true)
        .ledger(false);
    let taken = Compactor::new(120)
        .policy(policy.clone())
        .compact(&history, &fixed("  "))
        .unwrap();
    assert!(taken.summarized);
    let summary = taken.messages.iter().find(|m| policy.is_summary(m)).unwrap();
    // The prefix alone: no text, and no mark of a cut.
    assert_eq!(summary.text(), policy.summary_prefix);
    // A memory stores it, and the folded turns leave.
    use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
    let mut memory = RollingMemory::new(
        Settings::new(30)
            .summarizer(fixed(""))
            .policy(chatfold::FoldPolicy::new().allow_empty_summary(true)),
    )
    .unwrap();
    for i in 0..8 {
        memory.add_user(format!("turn {i} with a few words")).unwrap();
    }
    assert_eq!(memory.summary(), "");
    assert!(memory.buffer().len() < 8);
}
