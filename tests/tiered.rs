//! The tiered memory on real runtimes: adds never wait, the worker folds in
//! the background in chunks, the view keeps the hard limit, failures stay
//! inside, and the worker ends with its memory.

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chatfold::memory::{
    Memory, Remember, RollingMemory, Settings, State, SummaryMemory, TieredMemory, TieredSettings,
};
use chatfold::{Compactor, FoldPolicy, Heuristic, Message, SummaryRequest, TokenCounter, ToolCall};

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

fn tags(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m.id.clone().unwrap_or_default())
        .collect()
}

fn tagged(i: usize, text: &str) -> Message {
    Message::user(format!("{text} {i}")).with_id(format!("m{i}"))
}

type Log = Arc<Mutex<Vec<Vec<String>>>>;

/// A summarizer that logs the tags of each chunk it folds successfully and
/// answers a short summary; it waits while `gate` is closed and fails while
/// `failing` is set.
fn logging(
    log: Log,
    gate: Arc<AtomicBool>,
    failing: Arc<AtomicBool>,
) -> impl Fn(
    SummaryRequest<'_>,
) -> std::pin::Pin<Box<dyn Future<Output = Result<String, &'static str>> + Send + '_>>
+ Send
+ Clone
+ Sync
+ 'static {
    move |r| {
        let (log, gate, failing) = (log.clone(), gate.clone(), failing.clone());
        Box::pin(async move {
            // A deadline, so that a test whose gate never opens fails.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !gate.load(Ordering::SeqCst) {
                if std::time::Instant::now() > deadline {
                    return Err("the gate never opened");
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            if failing.load(Ordering::SeqCst) {
                return Err("summarizer down");
            }
            let chunk = tags(&r.messages().cloned().collect::<Vec<_>>());
            let n = chunk.len();
            log.lock().unwrap().push(chunk);
            Ok(format!("{n} more turns folded"))
        })
    }
}

fn flags(open: bool, failing: bool) -> (Log, Arc<AtomicBool>, Arc<AtomicBool>) {
    (
        Log::default(),
        Arc::new(AtomicBool::new(open)),
        Arc::new(AtomicBool::new(failing)),
    )
}

/// Waits until `done` holds, polling; panics after 20 s (a hang, not a
/// measurement).
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..4_000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Drops `memory` and checks that its worker then ends (10 s at most: a hang,
/// not a measurement).
async fn drop_and_join<S, C>(memory: TieredMemory<S, C>, handle: tokio::task::JoinHandle<()>) {
    drop(memory);
    tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .expect("the worker ends when its memory is dropped")
        .unwrap();
}

/// The view's tokens, counted independently.
fn view_tokens<C: TokenCounter>(counter: &C, view: &[Message]) -> usize {
    counter.reply_priming() + view.iter().map(|m| counter.count_message(m)).sum::<usize>()
}

/// Folded chunks + buffer: every tag, once, in order.
fn assert_nothing_lost<S, C: TokenCounter>(memory: &TieredMemory<S, C>, log: &Log, added: &[String]) {
    let mut seen: Vec<String> = log.lock().unwrap().iter().flatten().cloned().collect();
    seen.extend(tags(&memory.buffer()));
    assert_eq!(
        seen, added,
        "folded + buffer must be every message, once, in order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adds_never_wait_for_a_fold_in_flight() {
    let (log, gate, failing) = flags(false, false);
    let settings = TieredSettings::new(50, 200).chunk_size(10).counter(words);
    let (memory, worker) =
        TieredMemory::new([], settings, logging(log.clone(), gate.clone(), failing)).unwrap();
    tokio::spawn(worker);
    let mut added = Vec::new();
    let mut i = 0;
    while !memory.stats().fold_in_flight {
        memory.add_message(tagged(i, "a few words here"));
        added.push(format!("m{i}"));
        i += 1;
        tokio::task::yield_now().await;
        assert!(i < 10_000, "no fold started");
    }
    // 1 000 adds while the summarizer is stuck: each returns, none is lost,
    // the view stays within the hard limit.
    for _ in 0..1_000 {
        memory.add_message(tagged(i, "a few words here"));
        added.push(format!("m{i}"));
        i += 1;
        let stats = memory.stats();
        assert!(stats.view_tokens <= 200, "view of {} tokens", stats.view_tokens);
        assert!(stats.fold_in_flight);
    }
    assert_eq!(memory.buffer().len(), added.len());
    assert!(memory.stats().hidden_messages > 0);
    assert_eq!(
        view_tokens(&words, &memory.messages()),
        memory.stats().view_tokens
    );
    gate.store(true, Ordering::SeqCst);
    eventually("the folds to catch up", || {
        let s = memory.stats();
        s.folds_pending == 0 && !s.fold_in_flight
    })
    .await;
    let stats = memory.stats();
    assert!(stats.buffer_tokens <= 50);
    assert_eq!(stats.hidden_messages, 0);
    assert!(
        stats.folds_done >= 100,
        "chunks of 10: {} folds",
        stats.folds_done
    );
    assert!(log.lock().unwrap().iter().all(|chunk| chunk.len() <= 10));
    assert_nothing_lost(&memory, &log, &added);
    assert_eq!(stats.profile.len(), 256);
}

#[tokio::test(flavor = "current_thread")]
async fn the_worker_runs_on_a_single_threaded_executor() {
    let (log, gate, failing) = flags(true, false);
    let settings = TieredSettings::new(30, 60).chunk_size(4).counter(words);
    let system = [Message::system("You are terse.")];
    let (memory, worker) =
        TieredMemory::new(system.clone(), settings, logging(log.clone(), gate, failing)).unwrap();
    let handle = tokio::spawn(worker);
    let mut added = Vec::new();
    for i in 0..300 {
        memory.add_message(tagged(i, "one two three"));
        added.push(format!("m{i}"));
        if i % 7 == 0 {
            tokio::task::yield_now().await;
        }
        assert!(memory.stats().view_tokens <= 60);
    }
    eventually("the worker to fold", || memory.stats().folds_pending == 0).await;
    let messages = memory.messages();
    assert_eq!(messages[0], system[0]);
    assert!(memory.policy().is_summary(&messages[1]));
    assert_nothing_lost(&memory, &log, &added);
    drop_and_join(memory, handle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_ends_when_the_memory_is_dropped_even_mid_fold() {
    for stuck in [false, true] {
        let (log, gate, failing) = flags(!stuck, false);
        let settings = TieredSettings::new(10, 40).counter(words);
        let (memory, worker) = TieredMemory::new([], settings, logging(log, gate, failing)).unwrap();
        let handle = tokio::spawn(worker);
        if stuck {
            for i in 0..20 {
                memory.add_message(tagged(i, "some words"));
            }
            eventually("a fold to start", || memory.stats().fold_in_flight).await;
        }
        drop_and_join(memory, handle).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_stay_inside_back_off_and_recover() {
    let (log, gate, failing) = flags(true, true);
    let settings = TieredSettings::new(20, 60).chunk_size(3).counter(words);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = {
        let (inner, calls) = (logging(log.clone(), gate, failing.clone()), calls.clone());
        move |r: SummaryRequest<'_>| {
            // A closure's future cannot borrow its argument: it owns a copy.
            let r = r.into_owned();
            calls.fetch_add(1, Ordering::SeqCst);
            inner(r)
        }
    };
    let (memory, worker) = TieredMemory::new([], settings, counted).unwrap();
    tokio::spawn(worker);
    let mut added = Vec::new();
    for i in 0..300 {
        memory.add_message(tagged(i, "alpha beta"));
        added.push(format!("m{i}"));
        assert!(memory.stats().view_tokens <= 60);
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    eventually("a failed fold to be recorded", || !memory.stats().fold_in_flight).await;
    let stats = memory.stats();
    assert!(stats.folds_failed > 0 && stats.folds_done == 0);
    assert!(stats.last_error.as_deref().unwrap().contains("summarizer down"));
    assert_eq!(stats.messages_dropped, 0);
    assert_eq!(
        memory.buffer().len(),
        300,
        "nothing leaves the state without fallback_truncate"
    );
    // Backoff: retries wait for 1, 2, 4, ... 64 adds, not one call per add.
    let tries = calls.load(Ordering::SeqCst);
    assert!((3..=20).contains(&tries), "{tries} calls for 300 adds");
    failing.store(false, Ordering::SeqCst);
    memory.fold_now().await.unwrap();
    let stats = memory.stats();
    assert!(stats.buffer_tokens <= 20 && stats.consecutive_failures == 0);
    assert_nothing_lost(&memory, &log, &added);
}

#[test]
fn fallback_truncate_drops_counted_chunks_only_after_repeated_failures() {
    let (log, gate, failing) = flags(true, true);
    let settings = TieredSettings::new(10, 30)
        .chunk_size(2)
        .fallback_truncate(true)
        .max_failures(3)
        .counter(words);
    let (memory, _) = TieredMemory::new([], settings, logging(log, gate, failing)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let added: Vec<String> = (0..12).map(|i| format!("m{i}")).collect();
    for i in 0..12 {
        memory.add_message(tagged(i, "a b"));
    }
    for attempt in 1..=2 {
        assert!(rt.block_on(memory.fold_now()).is_err());
        assert_eq!(memory.stats().consecutive_failures, attempt);
        assert_eq!(memory.stats().messages_dropped, 0);
    }
    assert!(rt.block_on(memory.fold_now()).is_err());
    let stats = memory.stats();
    assert_eq!(stats.messages_dropped, 2);
    let buffer = tags(&memory.buffer());
    assert_eq!(buffer, added[2..], "the oldest chunk, and only it, is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_during_a_fold_discards_its_result() {
    let (log, gate, failing) = flags(false, false);
    let settings = TieredSettings::new(10, 40).counter(words);
    let (memory, worker) = TieredMemory::new([], settings, logging(log, gate.clone(), failing)).unwrap();
    tokio::spawn(worker);
    for i in 0..20 {
        memory.add_message(tagged(i, "some words"));
    }
    eventually("a fold to start", || memory.stats().fold_in_flight).await;
    memory.clear();
    memory.add_message(tagged(100, "after the clear"));
    gate.store(true, Ordering::SeqCst);
    eventually("the fold to end", || !memory.stats().fold_in_flight).await;
    assert_eq!(memory.summary(), "");
    assert_eq!(tags(&memory.buffer()), ["m100"]);
}

#[test]
fn chunks_are_whole_units_and_leave_the_buffer_aligned() {
    let (log, gate, failing) = flags(true, false);
    let settings = TieredSettings::new(8, 100).chunk_size(3).counter(|_: &str| 1);
    let (memory, _) = TieredMemory::new([], settings, logging(log.clone(), gate, failing)).unwrap();
    let call = Message::assistant_tool_calls(
        ["a", "b", "c"]
            .iter()
            .map(|id| ToolCall::new(*id, "f", "{}"))
            .collect(),
    );
    let mut history = vec![Message::user("q1"), call];
    history.extend(["a", "b", "c"].map(|id| Message::tool("r", id)));
    for i in 0..6 {
        history.push(Message::user(format!("u{i}")));
        history.push(Message::assistant(format!("a{i}")));
    }
    history.push(Message::user("last"));
    let history: Vec<Message> = history
        .into_iter()
        .enumerate()
        .map(|(i, m)| m.with_id(format!("m{i}")))
        .collect();
    for m in &history {
        memory.add_message(m.clone());
    }
    pollster::block_on(memory.fold_now()).unwrap();
    let chunks = log.lock().unwrap().clone();
    // The call and its three results are one unit: the first chunk takes the
    // user turn and the whole unit, past chunk_size. Later chunks stay within
    // it, ending where the rest opens with a user turn.
    assert_eq!(chunks[0], ["m0", "m1", "m2", "m3", "m4"]);
    for chunk in &chunks[1..] {
        assert!(chunk.len() <= 3, "{chunks:?}");
    }
    let buffer = memory.buffer();
    assert_eq!(
        buffer[0].role,
        chatfold::Role::User,
        "the buffer opens with a user turn"
    );
    assert_eq!(chunks.concat().len() + buffer.len(), history.len());
}

/// A summarizer that answers 1 MB of text.
fn verbose() -> impl Fn(&SummaryRequest<'_>) -> Result<String, Infallible> + Clone {
    |_| Ok("lorem ipsum dolor ".repeat(60_000))
}

#[test]
fn a_one_megabyte_summary_is_cut_to_its_cap_in_every_memory() {
    let policy = FoldPolicy::new().max_summary_tokens(200);
    let overhead = Heuristic.count_message(&policy.summary_message(""));

    let mut rolling =
        RollingMemory::new(Settings::new(300).summarizer(verbose()).policy(policy.clone())).unwrap();
    let mut summary = SummaryMemory::new(verbose()).policy(policy.clone());
    for i in 0..100 {
        rolling
            .add_user(format!("message number {i} about the trip"))
            .unwrap();
        summary
            .add_user(format!("message number {i} about the trip"))
            .unwrap();
    }
    for messages in [rolling.messages(), summary.messages()] {
        let total = view_tokens(&Heuristic, &messages);
        assert!(
            total <= 300 + overhead + 200 + Heuristic.reply_priming(),
            "{total} tokens"
        );
        let last = messages[0].text().split_whitespace().last().unwrap().to_owned();
        assert!(
            ["lorem", "ipsum", "dolor"].contains(&&*last),
            "cut at a word boundary: {last}"
        );
    }
    // Without a cap of its own, the rolling memory's allowance is its budget.
    let mut uncapped = RollingMemory::new(Settings::new(300).summarizer(verbose())).unwrap();
    for i in 0..100 {
        uncapped
            .add_user(format!("message number {i} about the trip"))
            .unwrap();
    }
    assert!(Heuristic.count(&uncapped.summary()) <= 300);

    let (tiered, _) =
        TieredMemory::new([], TieredSettings::new(100, 400), chatfold::Ready(verbose())).unwrap();
    for i in 0..100 {
        tiered.add_user(format!("message number {i} about the trip"));
    }
    pollster::block_on(tiered.fold_now()).unwrap();
    let stats = tiered.stats();
    assert!(
        stats.summary_tokens <= overhead + 150,
        "allowance (400 - 100) / 2"
    );
    assert!(stats.view_tokens <= 400);
}

#[test]
fn state_moves_between_the_tiered_and_rolling_memories() {
    let (log, gate, failing) = flags(true, false);
    let settings = TieredSettings::new(20, 80).counter(words);
    let summarizer = logging(log, gate, failing);
    let system = [Message::system("You are a data analyst.")];
    let (tiered, _) = TieredMemory::new(system.clone(), settings.clone(), summarizer.clone()).unwrap();
    for i in 0..30 {
        tiered.add_message(tagged(i, "Analyze Q3 revenue"));
    }
    pollster::block_on(tiered.fold_now()).unwrap();
    let json = tiered.to_state().to_json_string();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["version"], 2);
    assert_eq!(value["system"][0]["content"], "You are a data analyst.");

    let rolling =
        RollingMemory::from_state(State::from_json_str(&json).unwrap(), Settings::new(1_000)).unwrap();
    assert_eq!(rolling.messages()[0], system[0]);
    assert_eq!(rolling.summary(), tiered.summary());
    assert_eq!(rolling.buffer(), tiered.buffer());
    let back = rolling.to_state().to_json_string();
    let (restored, _) =
        TieredMemory::from_state(State::from_json_str(&back).unwrap(), settings, summarizer).unwrap();
    assert_eq!(restored.to_state(), tiered.to_state());
    assert_eq!(restored.messages(), tiered.messages());
}

#[test]
fn a_compactor_with_the_same_policy_folds_a_memorys_summary() {
    let policy = FoldPolicy::new().summary_prefix("[ARCHIVE_L2]\n");
    let summarize = |r: &SummaryRequest<'_>| {
        let previous = r.previous_summary().unwrap_or("");
        Ok::<_, Infallible>(format!("{previous} +{}", r.messages().len()).trim().to_owned())
    };
    let mut memory =
        RollingMemory::new(Settings::new(40).summarizer(summarize).policy(policy.clone())).unwrap();
    for i in 0..30 {
        memory.add_user(format!("turn number {i}")).unwrap();
    }
    let mut history = memory.messages();
    assert!(history[0].text().starts_with("[ARCHIVE_L2]\n"));
    history.extend((0..30).map(|i| Message::user(format!("later turn {i}"))));
    let compactor = Compactor::new(60).policy(policy);
    let result = compactor.compact(&history, &summarize).unwrap();
    let summaries: Vec<&Message> = result
        .messages
        .iter()
        .filter(|m| compactor.policy.is_summary(m))
        .collect();
    assert_eq!(
        summaries.len(),
        1,
        "the memory's summary is rolled forward, not pinned"
    );
    assert!(summaries[0].text().contains(&*memory.summary()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_eight_tasks_of_a_thousand_adds() {
    let log = Log::default();
    let calls = Arc::new(AtomicUsize::new(0));
    let summarizer = {
        let (log, calls) = (log.clone(), calls.clone());
        move |r: SummaryRequest<'_>| {
            // A closure's future cannot borrow its argument: it owns a copy.
            let r = r.into_owned();
            let (log, n) = (log.clone(), calls.fetch_add(1, Ordering::SeqCst));
            async move {
                tokio::time::sleep(Duration::from_millis(1 + (n * 7 % 5) as u64)).await;
                if n % 5 == 4 {
                    return Err("every fifth call fails");
                }
                let chunk = tags(&r.messages().cloned().collect::<Vec<_>>());
                log.lock().unwrap().push(chunk);
                Ok::<_, &str>("summary".to_owned())
            }
        }
    };
    let settings = TieredSettings::new(200, 600).chunk_size(8).counter(words);
    let (memory, worker) = TieredMemory::new([Message::system("L0")], settings, summarizer).unwrap();
    tokio::spawn(worker);
    let memory = Arc::new(memory);
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let memory = memory.clone();
            tokio::spawn(async move {
                for i in 0..1_000 {
                    memory
                        .add_message(Message::user(format!("task {t} says {i}")).with_id(format!("{t}-{i}")));
                    let view = memory.stats().view_tokens;
                    assert!(view <= 600, "view of {view} tokens");
                    if i % 100 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    while memory.fold_now().await.is_err() {}
    let mut seen: Vec<String> = log.lock().unwrap().iter().flatten().cloned().collect();
    seen.extend(tags(&memory.buffer()));
    assert_eq!(seen.len(), 8_000, "nothing lost or duplicated");
    let mut unique = seen.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 8_000);
    for t in 0..8 {
        let order: Vec<usize> = seen
            .iter()
            .filter_map(|tag| tag.strip_prefix(&format!("{t}-")).map(|i| i.parse().unwrap()))
            .collect();
        assert_eq!(order, (0..1_000).collect::<Vec<_>>(), "task {t}'s order");
    }
    let stats = memory.stats();
    assert!(stats.folds_failed > 0 && stats.messages_dropped == 0);
    assert!(stats.view_tokens <= 600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_summarizer_is_a_failed_fold_and_the_worker_goes_on() {
    let calls = Arc::new(AtomicUsize::new(0));
    let summarizer = {
        let calls = calls.clone();
        move |r: SummaryRequest<'_>| {
            // A closure's future cannot borrow its argument: it owns a copy.
            let r = r.into_owned();
            let n = calls.fetch_add(1, Ordering::SeqCst);
            async move {
                assert!(n > 0, "the first call panics");
                Ok::<_, Infallible>(format!("{} turns", r.messages().len()))
            }
        }
    };
    let settings = TieredSettings::new(10, 40).chunk_size(2).counter(words);
    let (memory, worker) = TieredMemory::new([], settings, summarizer).unwrap();
    let handle = tokio::spawn(worker);
    for i in 0..40 {
        memory.add_message(tagged(i, "a b c"));
        tokio::task::yield_now().await;
    }
    // The failed fold is retried on a later add.
    let mut i = 40;
    eventually("folds after the panic", || {
        i += 1;
        memory.add_message(tagged(i, "a b c"));
        memory.stats().folds_done > 0
    })
    .await;
    let stats = memory.stats();
    assert_eq!(stats.folds_failed, 1);
    assert!(
        stats
            .last_error
            .unwrap()
            .contains("summarizer panicked: the first call panics")
    );
    assert!(!handle.is_finished(), "the worker survives");
}

#[test]
fn clearing_old_tool_output_can_spare_a_fold() {
    let (log, gate, failing) = flags(true, false);
    let settings = TieredSettings::new(600, 1_200)
        .clear_tool_results(chatfold::ClearToolResults::new().keep_recent(1).min_tokens(100))
        .counter(words);
    let (memory, _) = TieredMemory::new([], settings, logging(log.clone(), gate, failing)).unwrap();
    memory.add_user("Read the logs of every host.");
    for i in 0..4 {
        memory.add_message(Message::assistant_tool_calls(vec![ToolCall::new(
            format!("c{i}"),
            "read_logs",
            "{}",
        )]));
        memory.add_message(Message::tool(
            format!("host-{i} /var/log/app-{i}.log ok\n").repeat(60),
            format!("c{i}"),
        ));
    }
    assert!(memory.stats().buffer_tokens > 600);
    pollster::block_on(memory.fold_now()).unwrap();
    let stats = memory.stats();
    assert_eq!(stats.results_cleared, 3, "all but the newest result");
    assert_eq!(
        stats.folds_done, 0,
        "clearing alone brought the buffer under the soft limit"
    );
    assert!(log.lock().unwrap().is_empty());
    assert!(stats.buffer_tokens <= 600);
    let buffer = memory.buffer();
    assert!(
        buffer[2]
            .text()
            .starts_with("[tool result cleared: read_logs (call c0)")
    );
    assert!(buffer[2].text().contains("/var/log/app-0.log"));
    assert_eq!(buffer[2].tool_call_id.as_deref(), Some("c0"));
    assert_eq!(buffer[8].text(), "host-3 /var/log/app-3.log ok\n".repeat(60));
}
