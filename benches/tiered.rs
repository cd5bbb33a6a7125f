//! The add that meets a fold: the tiered memory's `add_message` while a 50 ms
//! summarizer runs in its worker, against `AsyncRollingMemory`, whose add
//! that triggers a fold awaits the summarizer.
//!
//! `cargo bench --bench tiered`: criterion's estimate of one tiered add with a
//! fold in flight, then p50 / p99 / max per add for both memories, each add
//! timed on its own. Results and the machine in BENCHMARKS.md.

use std::hint::black_box;
use std::time::{Duration, Instant};

use chatfold::memory::{AsyncRemember, AsyncRollingMemory, Settings, TieredMemory, TieredSettings};
use chatfold::{AsyncSummarizer, Message, SummaryRequest};
use criterion::{Criterion, criterion_group, criterion_main};

/// A summarizer that takes 50 ms, like a fast LLM call.
async fn slow(request: SummaryRequest<'_>) -> Result<String, &'static str> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(format!("{} turns folded", request.messages().len()))
}

/// Adds timed one by one.
const ADDS: usize = 10_000;

fn turn(i: usize) -> Message {
    Message::user(format!(
        "Turn {i}: the agent checked deployment dep-{i} and found it healthy."
    ))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("runtime")
}

/// A tiered memory whose worker is folding (50 ms calls, back to back).
fn folding_memory(
    rt: &tokio::runtime::Runtime,
) -> TieredMemory<impl AsyncSummarizer + Send + Sync + 'static> {
    let (memory, worker) = TieredMemory::new([], TieredSettings::new(2_000, 8_000), slow).expect("settings");
    rt.spawn(worker);
    let mut i = 0;
    while !memory.stats().fold_in_flight {
        memory.add_message(turn(i));
        i += 1;
        std::thread::sleep(Duration::from_micros(50));
    }
    memory
}

fn percentiles(mut times: Vec<Duration>) -> (Duration, Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99), *times.last().expect("times"))
}

fn tiered_add_with_fold_in_flight(c: &mut Criterion) {
    let rt = runtime();
    let memory = folding_memory(&rt);
    let mut i = 1_000_000;
    c.bench_function("tiered_add_fold_in_flight", |b| {
        b.iter(|| {
            i += 1;
            memory.add_message(black_box(turn(i)));
        })
    });

    // Each add timed on its own, while the worker folds.
    let memory = folding_memory(&rt);
    let (mut times, mut in_flight) = (Vec::with_capacity(ADDS), 0usize);
    for i in 0..ADDS {
        let message = turn(i);
        let start = Instant::now();
        memory.add_message(message);
        times.push(start.elapsed());
        in_flight += usize::from(memory.stats().fold_in_flight);
    }
    let (p50, p99, max) = percentiles(times);
    println!(
        "tiered add, 50 ms summarizer: p50 {p50:?}, p99 {p99:?}, max {max:?} over {ADDS} adds ({:.0}% with a fold in flight, {} folds done)",
        in_flight as f64 * 100.0 / ADDS as f64,
        memory.stats().folds_done
    );

    let rolling = AsyncRollingMemory::new(Settings::new(2_000).summarizer(slow)).expect("settings");
    let mut times = Vec::with_capacity(200);
    rt.block_on(async {
        for i in 0..200 {
            let start = Instant::now();
            rolling.add_message(turn(i)).await.expect("add");
            times.push(start.elapsed());
        }
    });
    let (p50, p99, max) = percentiles(times);
    println!("async rolling add, 50 ms summarizer: p50 {p50:?}, p99 {p99:?}, max {max:?} over 200 adds");
}

criterion_group!(benches, tiered_add_with_fold_in_flight);
criterion_main!(benches);
