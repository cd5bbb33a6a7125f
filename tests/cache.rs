//! Summary reuse: a cached fold is used only for its own prefix, gives what
//! a compaction without the cache gives from the same summary, and turns a
//! full-transcript client's one-call-per-request into a call every few
//! requests; chunked folds.

#![cfg(feature = "cache")]

mod common;

use common::conversation;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use chatfold::cache::{FileCache, MemoryCache, SummaryCache};
use chatfold::testing::{Recording, check_compaction, histories, is_boundary};
use chatfold::{Compaction, Compactor, CutReason, Message, Prefix, SummaryRequest, TokenCounter};
use proptest::prelude::*;

/// A summarizer naming how many messages it folded, and from which summary.
fn counting(r: &SummaryRequest<'_>) -> Result<String, Infallible> {
    let before = r.previous_summary().map_or(0, |p| {
        p.split_whitespace()
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0)
    });
    Ok(format!("{} messages folded so far", before + r.messages().len()))
}

fn cache() -> Arc<MemoryCache> {
    Arc::new(MemoryCache::new(10_000, 64 << 20))
}

fn same_result(a: &Compaction<'_>, b: &Compaction<'_>) {
    assert_eq!(a.messages, b.messages);
    assert_eq!(a.tokens_after, b.tokens_after);
    assert_eq!(a.summary_truncated, b.summary_truncated);
    assert_eq!(a.report.cut(), b.report.cut());
    assert!(a.report.fates().eq(b.report.fates()));
    // A replayed fold lists no candidates: its summary is the recorded one.
    if a.report.prefix() != Prefix::Replayed && b.report.prefix() != Prefix::Replayed {
        assert_eq!(a.report.ledger(), b.report.ledger());
    }
    if b.report.prefix() != Prefix::Replayed {
        assert_eq!(a.report.allowance(), b.report.allowance());
    }
}

#[test]
fn the_same_request_twice_calls_the_summarizer_once() {
    let h = conversation(40);
    let compactor = Compactor::new(400).cache(cache(), "counting");
    let first = Recording::new(counting);
    let a = compactor.compact(&h, &first).unwrap();
    assert_eq!(first.calls().len(), 1);
    assert_eq!(a.report.reused(), None);
    let second = Recording::new(counting);
    let b = compactor.compact(&h, &second).unwrap();
    assert!(second.calls().is_empty(), "a cached cut needs no summarizer");
    assert_eq!(b.report.reused(), Some(b.report.cut()));
    assert_eq!(b.report.folds(), 0);
    same_result(&a, &b);
    check_compaction(&h, &b, &compactor).unwrap();
}

#[test]
fn a_longer_transcript_folds_only_what_is_new() {
    let compactor = Compactor::new(400).keep_recent(150).cache(cache(), "counting");
    let h = conversation(40);
    let a = compactor.compact(&h, &counting).unwrap();
    let first_cut = a.report.cut();
    let longer = conversation(46);
    let recording = Recording::new(counting);
    let b = compactor.compact(&longer, &recording).unwrap();
    let calls = recording.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(b.report.reused(), Some(first_cut));
    // Only the messages between the cached cut and the new one, after the
    // cached summary.
    assert_eq!(
        calls[0].previous.as_deref(),
        Some(format!("{} messages folded so far", first_cut - 1).as_str())
    );
    let expected: Vec<Message> = longer[first_cut..b.report.cut()].to_vec();
    assert_eq!(calls[0].messages, expected);
    check_compaction(&longer, &b, &compactor).unwrap();
}

#[test]
fn a_full_transcript_client_gets_the_last_fold_replayed_until_the_budget() {
    let compactor = Compactor::new(1_000).fold_to(500).cache(cache(), "counting");
    let recording = Recording::new(counting);
    let mut h = conversation(5);
    let (mut replayed, mut previous): (usize, Option<Vec<Message>>) = (0, None);
    for i in 0..150 {
        h.push(Message::user(format!(
            "Follow-up {i}: and what about option_{i}?"
        )));
        let ours = compactor.compact(&h, &recording).unwrap();
        check_compaction(&h, &ours, &compactor).unwrap_or_else(|v| panic!("{v}"));
        assert!(ours.tokens_after <= 1_000);
        match ours.report.prefix() {
            // A fold goes down to its target; its ledger may take it halfway
            // to the budget.
            Prefix::Rewritten => assert!(ours.tokens_after <= 750, "{}", ours.tokens_after),
            _ => {
                // Between folds, the last output and the new messages.
                if let Some(previous) = &previous {
                    assert_eq!(ours.messages[..previous.len()], previous[..], "request {i}");
                }
                replayed += usize::from(ours.report.reason() == CutReason::Reused);
            }
        }
        previous = Some(ours.messages.into_owned());
        h.push(Message::assistant(format!(
            "For option_{i}, the default is fine."
        )));
    }
    let calls = recording.calls().len();
    assert!(calls * 5 <= 150, "{calls} summarizer calls for 150 requests");
    assert!(replayed > 100, "{replayed} requests replayed a fold");
}

#[test]
fn an_edit_before_the_cut_starts_a_new_chain() {
    let compactor = Compactor::new(600).fold_to(300).cache(cache(), "counting");
    let mut h = conversation(30);
    let first = compactor.compact(&h, &counting).unwrap();
    assert_eq!(first.report.prefix(), Prefix::Rewritten);
    let first = first.messages.into_owned();
    h.push(Message::user("one more question"));
    let replay = compactor.compact(&h, &counting).unwrap();
    assert_eq!(replay.report.prefix(), Prefix::Replayed);
    assert_eq!(replay.messages[..first.len()], first[..]);
    // The same transcript with an early turn edited is another conversation.
    h[2] = Message::user("an edited early turn");
    let recording = Recording::new(counting);
    let edited = compactor.compact(&h, &recording).unwrap();
    assert_eq!(edited.report.prefix(), Prefix::Rewritten);
    assert_eq!(recording.calls().len(), 1);
    check_compaction(&h, &edited, &compactor).unwrap();
}

/// A cache that answers every key with the same value.
#[derive(Debug)]
struct Poisoned(String);

impl SummaryCache for Poisoned {
    fn get(&self, _: &str) -> Option<String> {
        Some(self.0.clone())
    }
    fn put(&self, _: &str, _: String) {}
}

#[test]
fn poisoned_and_corrupt_entries_are_ignored() {
    let h = conversation(40);
    let plain = Compactor::new(400).compact(&h, &counting).unwrap();
    let values = [
        "garbage".to_owned(),
        r#"{"v":1,"len":3,"check":"0000000000000000","summary":"not yours"}"#.to_owned(),
        r#"{"v":99,"len":3,"summary":"from the future"}"#.to_owned(),
        "{}".to_owned(),
    ];
    for value in values {
        let compactor = Compactor::new(400).cache(Arc::new(Poisoned(value.clone())), "counting");
        let recording = Recording::new(counting);
        let result = compactor.compact(&h, &recording).unwrap();
        assert_eq!(recording.calls().len(), 1, "{value}");
        assert_eq!(result.report.reused(), None);
        same_result(&plain, &result);
    }
}

#[test]
fn namespaces_and_policies_keep_summaries_apart() {
    let shared = cache();
    let h = conversation(40);
    Compactor::new(400)
        .cache(shared.clone(), "model-a")
        .compact(&h, &counting)
        .unwrap();
    let recording = Recording::new(counting);
    Compactor::new(400)
        .cache(shared.clone(), "model-b")
        .compact(&h, &recording)
        .unwrap();
    assert_eq!(recording.calls().len(), 1, "another namespace");
    let recording = Recording::new(counting);
    Compactor::new(400)
        .policy(chatfold::FoldPolicy::new().ledger(false))
        .cache(shared.clone(), "model-a")
        .compact(&h, &recording)
        .unwrap();
    assert_eq!(recording.calls().len(), 1, "another policy");
}

#[test]
fn a_file_cache_survives_the_compactor() {
    let dir = std::env::temp_dir().join(format!("chatfold-cache-test-{}", std::process::id()));
    let h = conversation(40);
    Compactor::new(400)
        .cache(Arc::new(FileCache::new(&dir)), "n")
        .compact(&h, &counting)
        .unwrap();
    let recording = Recording::new(counting);
    let again = Compactor::new(400).cache(Arc::new(FileCache::new(&dir)), "n");
    let result = again.compact(&h, &recording).unwrap();
    assert!(recording.calls().is_empty());
    assert!(result.report.reused().is_some());
    std::fs::remove_dir_all(&dir).unwrap();
    // An unwritable folder is no cache, not an error.
    let nowhere = Compactor::new(400).cache(Arc::new(FileCache::new("/proc/chatfold-no")), "n");
    assert!(nowhere.compact(&h, &counting).unwrap().summarized);
}

#[test]
fn long_middles_fold_in_chunks_of_whole_units() {
    let mut h = conversation(60);
    // A tool unit in the middle.
    h.insert(
        30,
        Message::assistant_tool_calls(vec![chatfold::ToolCall::new("c1", "lookup", "{}")]),
    );
    h.insert(31, Message::tool("result of the lookup ".repeat(10), "c1"));
    let compactor = Compactor::new(500).max_fold_input_tokens(700);
    let recording = Recording::new(counting);
    let result = compactor.compact(&h, &recording).unwrap();
    let calls = recording.calls();
    assert!(calls.len() > 2, "{} calls", calls.len());
    assert_eq!(result.report.folds(), calls.len());
    let allowance = result.report.allowance();
    let mut folded = Vec::new();
    let mut previous: Option<String> = None;
    for call in &calls {
        let tokens: usize = call
            .messages
            .iter()
            .map(|m| compactor.counter.count_message(m))
            .sum();
        assert!(
            tokens + allowance <= 700 || call.messages.len() <= 2,
            "{tokens} tokens in one call"
        );
        if let Some(previous) = &previous {
            assert_eq!(call.previous.as_ref(), Some(previous));
        }
        previous = Some(counting(&SummaryRequest::new(call.previous.as_deref(), &call.messages, 0)).unwrap());
        folded.extend(call.messages.iter().cloned());
        // Each chunk ends at a unit boundary of the history.
        let end = h.iter().position(|m| m == call.messages.last().unwrap()).unwrap() + 1;
        assert!(is_boundary(&h, end));
    }
    let expected: Vec<Message> = h[..result.report.cut()]
        .iter()
        .filter(|m| !m.role.is_pinned())
        .cloned()
        .collect();
    assert_eq!(folded, expected, "every folded message once, in order");
    check_compaction(&h, &result, &compactor).unwrap();
    // Chunk ends are cached: the same request again calls nothing.
    let cached = Compactor::new(500).max_fold_input_tokens(700).cache(cache(), "c");
    cached.compact(&h, &counting).unwrap();
    let again = Recording::new(counting);
    cached.compact(&h, &again).unwrap();
    assert!(again.calls().is_empty());
}

#[test]
fn async_compaction_uses_the_cache_too() {
    let h = conversation(40);
    let compactor = Compactor::new(400).cache(cache(), "counting");
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let summarizer = move |r: SummaryRequest<'_>| {
        // A closure's future cannot borrow its argument: it owns a copy.
        let r = r.into_owned();
        *c.lock().unwrap() += 1;
        async move { counting(&r) }
    };
    let a = pollster::block_on(compactor.compact_async(&h, &summarizer)).unwrap();
    let b = pollster::block_on(compactor.compact_async(&h, &summarizer)).unwrap();
    assert_eq!(*calls.lock().unwrap(), 1);
    same_result(&a, &b);
}

proptest! {
    #![proptest_config(common::cases(48))]

    /// With a cache, every rule still holds; a reused summary is the one
    /// stored for exactly that prefix; and a cut that lands on a cached
    /// prefix gives what a compaction without the cache gives from the same
    /// summary.
    #[test]
    fn cached_compactions_keep_the_rules_and_equal_uncached_ones(
        base in histories(40),
        extra in histories(6),
        budget in 60usize..400,
        step in 0usize..200,
    ) {
        let store = cache();
        let keep = budget / 3;
        let target = (keep + step).min(budget);
        let compactor = Compactor::new(budget).keep_recent(keep).fold_to(target).cache(store.clone(), "p");
        let plain = Compactor::new(budget).keep_recent(keep).fold_to(target);
        let mut h = base.clone();
        for round in 0..2 {
            if round == 1 {
                h.extend(extra.iter().cloned());
            }
            let recording = Recording::new(counting);
            let Ok(result) = compactor.compact(&h, &recording) else { continue };
            check_compaction(&h, &result, &compactor).map_err(|v| TestCaseError::fail(v.to_string()))?;
            if let Some(at) = result.report.reused() {
                let summary = store_summary(&compactor, &h, at);
                if at == result.report.cut() {
                    prop_assert!(recording.calls().is_empty());
                    // The same cut without a cache, from the same summary.
                    if result.report.reason() != CutReason::Reused {
                        let text = summary.clone();
                        let without = plain.compact(&h, &move |_: &SummaryRequest<'_>| Ok::<_, Infallible>(text.clone())).unwrap();
                        same_result(&result, &without);
                    }
                } else {
                    // (No call when nothing but the summary is folded.)
                    let calls = recording.calls();
                    if let Some(call) = calls.first() {
                        prop_assert_eq!(call.previous.as_deref(), Some(summary.as_str()));
                    }
                }
            }
        }
    }
}

/// The summary `compactor` reused for `h[..at]`: what the counting
/// summarizer answers for the folded messages before `at`, chunk after chunk.
fn store_summary(compactor: &Compactor, h: &[Message], at: usize) -> String {
    // Every fold of the counting summarizer says how many messages it has
    // folded in all, so the summary of a prefix is known without the cache.
    let folded = h[..at]
        .iter()
        .filter(|m| !m.role.is_pinned() && !compactor.policy.is_summary(m))
        .count();
    format!("{folded} messages folded so far")
}

/// `compact_async`'s future can be spawned on a multi-threaded runtime:
/// it holds the plan (and the request borrowing it) across the await.
#[test]
fn compact_async_futures_are_send() {
    fn spawnable<F: std::future::Future + Send>(_: &F) {}
    let h = conversation(40);
    let compactor = Compactor::new(400).max_fold_input_tokens(500).cache(cache(), "n");
    let summarizer = chatfold::Ready(counting);
    let future = compactor.compact_async(&h, &summarizer);
    spawnable(&future);
    assert!(pollster::block_on(future).unwrap().summarized);
}

#[test]
fn no_chunk_is_only_system_messages() {
    // A system message, then a user turn larger than a chunk.
    let mut h = vec![Message::system("Be brief."), Message::user("word ".repeat(2_000))];
    h.extend(conversation(30).into_iter().skip(1));
    let compactor = Compactor::new(600).max_fold_input_tokens(400);
    let recording = Recording::new(counting);
    let result = compactor.compact(&h, &recording).unwrap();
    let calls = recording.calls();
    assert!(calls.len() > 1);
    assert!(
        calls.iter().all(|c| !c.messages.is_empty()),
        "a call with nothing to fold"
    );
    assert_eq!(result.report.folds(), calls.len());
    check_compaction(&h, &result, &compactor).unwrap();
}

#[test]
fn a_recorded_fold_is_replayed_while_it_fits_then_extended() {
    let h = conversation(80);
    let compactor = Compactor::new(900).fold_to(450).cache(cache(), "n");
    let first = compactor
        .compact(&h[..100], &|_: &SummaryRequest<'_>| {
            Ok::<_, Infallible>("The user configured several options.".to_owned())
        })
        .unwrap();
    let cut = first.report.cut();
    let first = first.messages.into_owned();
    let mut n = 100;
    loop {
        n += 2;
        let recording = Recording::new(counting);
        let later = compactor.compact(&h[..n], &recording).unwrap();
        check_compaction(&h[..n], &later, &compactor).unwrap();
        if later.report.prefix() == Prefix::Replayed {
            assert!(recording.calls().is_empty());
            assert_eq!(later.messages[..first.len()], first[..]);
            continue;
        }
        // Past the budget: a new fold, extending the recorded summary.
        assert_eq!(later.report.prefix(), Prefix::Rewritten);
        let calls = recording.calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            calls[0].previous.as_deref(),
            Some("The user configured several options.")
        );
        assert_eq!(calls[0].messages[0], h[cut]);
        assert!(n > 104, "a few requests were replayed first");
        break;
    }
}

#[test]
fn two_namespaces_never_share_an_entry() {
    let store = cache();
    let h = conversation(40);
    let first = Recording::new(counting);
    Compactor::new(400)
        .cache(store.clone(), "tenant-a")
        .compact(&h, &first)
        .unwrap();
    assert_eq!(first.calls().len(), 1);
    let held = store.stats().entries;
    assert!(held >= 1);
    // The same messages and settings in another namespace: a fold of its own.
    let second = Recording::new(counting);
    Compactor::new(400)
        .cache(store.clone(), "tenant-b")
        .compact(&h, &second)
        .unwrap();
    assert_eq!(second.calls().len(), 1, "another namespace is served nothing");
    assert_eq!(
        store.stats().entries,
        2 * held,
        "and writes under keys of its own"
    );
    // The first namespace still finds its own.
    let again = Recording::new(counting);
    Compactor::new(400)
        .cache(store.clone(), "tenant-a")
        .compact(&h, &again)
        .unwrap();
    assert!(again.calls().is_empty());
}

#[test]
fn a_boundary_shift_between_messages_is_not_served_the_other_split() {
    // The same concatenated text, split differently between two messages.
    let history = |split: usize| {
        let text = "Question: how do I configure the service? Answer: set the option.";
        let mut h = conversation(30);
        h.insert(1, Message::user(&text[..split]));
        h.insert(2, Message::user(&text[split..]));
        h
    };
    let store = cache();
    let compactor = Compactor::new(400).cache(store.clone(), "ns");
    let first = Recording::new(counting);
    compactor.compact(&history(10), &first).unwrap();
    assert_eq!(first.calls().len(), 1);
    let shifted = Recording::new(counting);
    compactor.compact(&history(11), &shifted).unwrap();
    assert_eq!(shifted.calls().len(), 1, "another split is another prefix");
    let same = Recording::new(counting);
    compactor.compact(&history(10), &same).unwrap();
    assert!(same.calls().is_empty());
}
