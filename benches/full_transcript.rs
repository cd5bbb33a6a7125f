//! A client that sends its full transcript with every request: 500 requests,
//! each one message longer, compacted to 4 000 o200k tokens, with a counting
//! summarizer. Prints the summarizer's calls, its total and largest input,
//! without a cache and with each shipped cache; checks every result against
//! the rules.
//!
//! `cargo bench --bench full_transcript` (Redis too with `--features redis`
//! and `redis-server` on the PATH); results in BENCHMARKS.md.

#[path = "support/history.rs"]
mod history;
#[cfg(feature = "redis")]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use std::cell::Cell;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use chatfold::cache::{FileCache, MemoryCache, SummaryCache};
use chatfold::testing::check_compaction;
use chatfold::{Compactor, Message, SummaryRequest, Tiktoken, TokenCounter};

const REQUESTS: usize = 500;
const FIRST: usize = 60;

struct Totals {
    calls: usize,
    input: usize,
    largest: usize,
    seconds: f64,
}

fn run(conversation: &[Message], compactor: &Compactor<Tiktoken>) -> Totals {
    let counter = compactor.counter;
    let (calls, input, largest) = (Cell::new(0), Cell::new(0), Cell::new(0));
    let summarize = |r: &SummaryRequest<'_>| {
        let tokens = r.messages().map(|m| counter.count_message(m)).sum::<usize>()
            + r.previous_summary().map_or(0, |p| counter.count(p));
        calls.set(calls.get() + 1);
        input.set(input.get() + tokens);
        largest.set(largest.get().max(tokens));
        Ok::<_, Infallible>(format!("Summary {} of the conversation so far.", calls.get()))
    };
    let start = Instant::now();
    for n in FIRST..FIRST + REQUESTS {
        let request = &conversation[..n];
        let result = compactor.compact(request, &summarize).expect("compaction");
        assert!(!result.over_budget, "request {n} over budget");
        if let Err(v) = check_compaction(request, &result, compactor) {
            panic!("request {n}: {v}");
        }
    }
    Totals {
        calls: calls.get(),
        input: input.get(),
        largest: largest.get(),
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let conversation = history::history(FIRST + REQUESTS, 7);
    let o200k = Tiktoken::o200k_base().expect("bundled encoder");
    let total = o200k.count_messages(&conversation);
    println!(
        "{REQUESTS} requests of {FIRST} to {} messages; the conversation is {total} o200k tokens; budget 4 000",
        FIRST + REQUESTS - 1
    );
    // Defaults: keep_recent half the budget; with a cache, stepping up to
    // keep_recent plus three fifths of the rest (3 200).
    let base = Compactor::new(4_000).counter(o200k);
    let dir = std::env::temp_dir().join(format!("chatfold-bench-cache-{}", std::process::id()));
    #[cfg_attr(not(feature = "redis"), allow(unused_mut))]
    let mut caches: Vec<(&str, Arc<dyn SummaryCache>)> = vec![
        ("MemoryCache", Arc::new(MemoryCache::new(100_000, 256 << 20))),
        ("FileCache", Arc::new(FileCache::new(&dir))),
    ];
    #[cfg(feature = "redis")]
    let server = redis_server::Server::start();
    #[cfg(feature = "redis")]
    if let Some(server) = &server {
        let cache = chatfold::cache::RedisCache::new(&server.url()).expect("a Redis URL");
        caches.push(("RedisCache", Arc::new(cache)));
    }
    let mut rows = vec![("no cache", run(&conversation, &base))];
    for (name, cache) in caches {
        rows.push((name, run(&conversation, &base.clone().cache(cache, "counting"))));
    }
    println!(
        "\n{:<12} {:>6} {:>14} {:>14} {:>12} {:>10}",
        "cache", "calls", "input tokens", "x conversation", "largest", "time"
    );
    for (name, t) in &rows {
        println!(
            "{name:<12} {:>6} {:>14} {:>13.2}x {:>12} {:>8.2} s",
            t.calls,
            t.input,
            t.input as f64 / total as f64,
            t.largest,
            t.seconds
        );
    }
    #[cfg(feature = "redis")]
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
