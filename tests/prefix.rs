//! Rule 10, as property tests: a history is folded only when it passes the
//! budget, down to the fold target; between folds the output is the last
//! output followed by the new messages, byte for byte, for a client that
//! sends back what chatfold returned and for one that resends its whole
//! transcript through a cache; and for the rolling and tiered memories,
//! whose context only grows at its end between folds.

#![cfg(feature = "cache")]

mod common;

use std::convert::Infallible;
use std::sync::Arc;

use chatfold::cache::MemoryCache;
use chatfold::memory::{Memory, Remember, RollingMemory, Settings, TieredMemory, TieredSettings};
use chatfold::testing::{check_compaction, histories};
use chatfold::{Compactor, Heuristic, Message, SummaryRequest, TokenCounter};
use proptest::prelude::*;

fn summarize(r: &SummaryRequest<'_>) -> Result<String, Infallible> {
    Ok(format!(
        "{} turns, {}",
        r.messages().len(),
        r.previous_summary().unwrap_or("none")
    ))
}

/// The history grown by `extra` after each output, `rounds` times, through
/// `compact`: each output checked against every rule, and against the
/// previous output when the prefix was kept. `feed_back`: the client sends
/// back the output (else its whole transcript).
fn grow(
    compactor: &Compactor,
    start: &[Message],
    extra: &[Vec<Message>],
    feed_back: bool,
) -> Result<(), TestCaseError> {
    let mut transcript = start.to_vec();
    let mut held = start.to_vec();
    let mut previous: Option<Vec<Message>> = None;
    for more in extra {
        let sent = if feed_back { &held } else { &transcript };
        let Ok(result) = compactor.compact(sent, &summarize) else {
            return Ok(());
        };
        check_compaction(sent, &result, compactor).map_err(|v| TestCaseError::fail(v.to_string()))?;
        let out = result.messages.to_vec();
        let was = (
            result.report.prefix(),
            result.report.cut(),
            result.report.reason(),
        );
        if result.report.prefix_kept() {
            if let Some(previous) = &previous {
                // Between folds: the last output, then the new messages.
                prop_assert_eq!(&out[..previous.len()], &previous[..]);
            }
        }
        // The next request: the new messages after what was sent.
        let added = more.clone();
        transcript.extend(added.iter().cloned());
        held = out.clone();
        held.extend(added.iter().cloned());
        // While the last output and the new messages fit, nothing is folded
        // (for the cache, unless a user turn now follows a cut that opened on
        // an answer: rule 4 comes first).
        let fits = compactor.counter.count_messages(&held) <= compactor.budget;
        // (Any message that is not a response opens one; a system or
        // developer message is looked past.)
        let user_turn = added.iter().any(|m| !m.is_response());
        // A new result answering an older call joins that call's unit: the
        // last cut may no longer be between units (rule 3 comes first).
        let called: Vec<&str> = added
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.as_str()))
            .collect();
        let answers_older = added
            .iter()
            .any(|m| m.tool_call_id.as_deref().is_some_and(|id| !called.contains(&id)));
        if fits && (feed_back || !(user_turn || answers_older)) {
            let sent = if feed_back { &held } else { &transcript };
            if let Ok(next) = compactor.compact(sent, &summarize) {
                prop_assert!(
                    next.report.prefix_kept(),
                    "folded though {} fit: before {:?} cut {} reason {:?}, now cut {} reason {:?}, sent {} held {}",
                    compactor.counter.count_messages(&held),
                    was.0,
                    was.1,
                    was.2,
                    next.report.cut(),
                    next.report.reason(),
                    sent.len(),
                    held.len()
                );
                let _ = &sent;
                prop_assert_eq!(&next.messages[..], &held[..]);
            }
        }
        previous = Some(out);
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::cases(96))]

    #[test]
    fn a_client_that_sends_back_the_output_keeps_its_prefix_between_folds(
        start in histories(30),
        extra in prop::collection::vec(histories(3), 1..6),
        budget in 80usize..600,
        target_pct in 20usize..=100,
    ) {
        let compactor = Compactor::new(budget).fold_to((budget * target_pct / 100).max(1));
        grow(&compactor, &start, &extra, true)?;
    }

    #[test]
    fn a_full_transcript_client_gets_the_last_fold_replayed(
        start in histories(30),
        extra in prop::collection::vec(histories(3), 1..6),
        budget in 80usize..600,
        target_pct in 20usize..=100,
    ) {
        let cache = Arc::new(MemoryCache::new(1_000, 16 << 20));
        let compactor = Compactor::new(budget)
            .fold_to((budget * target_pct / 100).max(1))
            .cache(cache, "prefix");
        grow(&compactor, &start, &extra, false)?;
    }
}

/// Whether `now` is `before` followed by more messages.
fn extends(before: &[Message], now: &[Message]) -> bool {
    now.len() >= before.len() && now[..before.len()] == *before
}

proptest! {
    #![proptest_config(common::cases(64))]

    #[test]
    fn the_rolling_memory_keeps_its_prefix_between_folds(
        adds in histories(60),
        max in 40usize..400,
        low_pct in prop::option::of(20usize..=100),
    ) {
        let mut settings = Settings::new(max).summarizer(summarize);
        if let Some(pct) = low_pct {
            settings = settings.low_water((max * pct / 100).max(1));
        }
        let mut memory = RollingMemory::new(settings).unwrap();
        let mut before = memory.messages();
        for message in adds {
            let (buffered, held) = (memory.buffer_tokens(), memory.buffer().len());
            let tokens = Heuristic.count_message(&message);
            memory.add_message(message).unwrap();
            let now = memory.messages();
            if memory.buffer().len() == held + 1 {
                // Nothing left the buffer: the context grew at its end.
                prop_assert!(extends(&before, &now));
            } else {
                // A fold, only past the budget.
                prop_assert!(buffered + tokens > max, "folded at {} of {max}", buffered + tokens);
            }
            before = now;
        }
    }

    #[test]
    fn the_tiered_memory_keeps_its_prefix_between_drains(
        adds in histories(60),
        soft in 40usize..300,
        low_pct in prop::option::of(20usize..=100),
    ) {
        let summarize = async |r: SummaryRequest<'_>| Ok::<_, Infallible>(format!("{} turns", r.messages().len()));
        let mut settings = TieredSettings::new(soft, soft * 3);
        if let Some(pct) = low_pct {
            settings = settings.low_water((soft * pct / 100).max(1));
        }
        let low = settings.fold_to();
        let (memory, worker) = TieredMemory::new([Message::system("Be brief.")], settings, summarize).unwrap();
        drop(worker);
        let mut before = memory.messages();
        for message in adds {
            let (buffered, done) = (memory.stats().buffer_tokens, memory.stats().folds_done);
            let tokens = Heuristic.count_message(&message);
            memory.add_message(message);
            pollster::block_on(memory.fold_now()).unwrap();
            let stats = memory.stats();
            let now = memory.messages();
            if stats.folds_done == done {
                // Between drains the context grows at its end, unless the
                // view is held to the hard limit (turns hidden, or the
                // summary cut beside a latest unit that fills it).
                let whole = stats.system_tokens + stats.summary_tokens + stats.buffer_tokens + Heuristic.reply_priming();
                prop_assert!(extends(&before, &now) || stats.hidden_messages > 0 || whole > soft * 3);
            } else {
                // A drain starts only past the soft limit, and goes down to
                // the target unless only the latest unit is left.
                prop_assert!(buffered + tokens > soft, "folded at {} of {soft}", buffered + tokens);
                let units = memory.buffer().iter().filter(|m| !m.is_response()).count();
                prop_assert!(stats.buffer_tokens <= low || units <= 1, "{} left, target {low}", stats.buffer_tokens);
            }
            before = now;
        }
    }
}
