//! Criterion benches: planning against history length, compaction end to
//! end, counting throughput against raw tiktoken-rs, memory adds, the
//! ledger's cost (each case with the ledger on, the default, and off).
//!
//! `cargo bench --bench compact`; results and the machine in BENCHMARKS.md.

#[path = "support/history.rs"]
mod history;

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;

use chatfold::memory::{Remember, RollingMemory, Settings};
use chatfold::{Compactor, Extractive, FoldPolicy, Heuristic, Ready, SummaryRequest, Tiktoken, TokenCounter};
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

fn fixed(_: &SummaryRequest<'_>) -> Result<String, Infallible> {
    Ok("fixed summary".to_owned())
}

/// Target 1: plan cost must not grow with the history (budget fixed).
fn plan_vs_history_length(c: &mut Criterion) {
    let o200k = Tiktoken::o200k_base().unwrap();
    let compactor = Compactor::new(8_000).keep_recent(4_000).counter(o200k);
    let mut group = c.benchmark_group("plan_o200k_budget_8000");
    for n in [1_000, 10_000, 100_000] {
        let h = history::history(n, 42);
        group.bench_with_input(BenchmarkId::from_parameter(n), &h, |b, h| {
            b.iter(|| compactor.plan(black_box(h)).unwrap())
        });
    }
    group.finish();
}

fn compact_end_to_end(c: &mut Criterion) {
    let h = history::history(10_000, 42);
    let mut group = c.benchmark_group("compact_10k_budget_8000");
    let heuristic = Compactor::new(8_000).keep_recent(4_000);
    group.bench_function("heuristic_fixed_summary", |b| {
        b.iter(|| heuristic.compact(black_box(&h), &fixed).unwrap())
    });
    let o200k = heuristic.clone().counter(Tiktoken::o200k_base().unwrap());
    group.bench_function("o200k_fixed_summary", |b| {
        b.iter(|| o200k.compact(black_box(&h), &fixed).unwrap())
    });
    let extractive = Extractive::with_counter(o200k.counter);
    group.bench_function("o200k_extractive", |b| {
        b.iter(|| o200k.compact(black_box(&h), &extractive).unwrap())
    });
    group.finish();
}

/// `compact_async` borrows the folded messages: within 1.2x of `compact` on
/// 100 000 messages, with a summarizer type (`Ready`) and with an async
/// closure alike. The last row is a closure whose future owns a copy of its
/// request (`into_owned`, as one that is spawned must): what every closure
/// paid before async closures were summarizers.
fn compact_async_vs_sync(c: &mut Criterion) {
    let h = history::history(100_000, 42);
    let compactor = Compactor::new(8_000)
        .keep_recent(4_000)
        .counter(Tiktoken::o200k_base().unwrap());
    let mut group = c.benchmark_group("compact_100k_o200k_budget_8000");
    group.bench_function("compact", |b| {
        b.iter(|| compactor.compact(black_box(&h), &fixed).unwrap())
    });
    let ready = Ready(fixed);
    group.bench_function("compact_async_borrowed", |b| {
        b.iter(|| pollster::block_on(compactor.compact_async(black_box(&h), &ready)).unwrap())
    });
    let closure = async |r: SummaryRequest<'_>| fixed(&r);
    group.bench_function("compact_async_closure", |b| {
        b.iter(|| pollster::block_on(compactor.compact_async(black_box(&h), &closure)).unwrap())
    });
    let owning = |r: SummaryRequest<'_>| {
        let r = r.into_owned();
        async move { fixed(&r) }
    };
    group.bench_function("compact_async_owning_closure", |b| {
        b.iter(|| pollster::block_on(compactor.compact_async(black_box(&h), &owning)).unwrap())
    });
    group.finish();
}

/// Target 4: counting through chatfold against tiktoken-rs directly.
fn counting_throughput(c: &mut Criterion) {
    let text: String = history::history(400, 7)
        .iter()
        .map(|m| m.text().into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    let mut group = c.benchmark_group("count");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.bench_function("heuristic", |b| b.iter(|| Heuristic.count(black_box(&text))));
    for (name, raw) in [
        ("o200k_base", tiktoken_rs::o200k_base().unwrap()),
        ("cl100k_base", tiktoken_rs::cl100k_base().unwrap()),
    ] {
        let ours = Tiktoken::from_name(name).unwrap();
        group.bench_function(format!("chatfold_{name}"), |b| {
            b.iter(|| ours.count(black_box(&text)))
        });
        group.bench_function(format!("tiktoken_rs_{name}"), |b| {
            b.iter(|| raw.count_ordinary(black_box(&text)))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("encoder_build");
    group.sample_size(10);
    group.bench_function("o200k_base", |b| b.iter(|| tiktoken_rs::o200k_base().unwrap()));
    group.bench_function("cl100k_base", |b| b.iter(|| tiktoken_rs::cl100k_base().unwrap()));
    group.finish();
}

/// Benches `label`: 1 000 adds of `h` from `skip` on to a rolling memory
/// (4 000 tokens, words as tokens, `policy`) that was given `h[..skip]`.
fn bench_adds(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    label: &str,
    h: &[chatfold::Message],
    skip: usize,
    policy: FoldPolicy,
) {
    let words = |t: &str| t.split_whitespace().count();
    group.bench_function(label, |b| {
        b.iter_batched(
            || {
                let settings = Settings::new(4_000)
                    .summarizer(fixed)
                    .counter(words)
                    .policy(policy.clone());
                let mut memory = RollingMemory::new(settings).unwrap();
                for m in &h[..skip] {
                    memory.add_message(m.clone()).unwrap();
                }
                (memory, h[skip..skip + 1_000].to_vec())
            },
            |(mut memory, batch)| {
                for m in batch {
                    memory.add_message(m).unwrap();
                }
                memory
            },
            BatchSize::LargeInput,
        )
    });
}

/// Target 3: adds cost the same once the buffer is full.
fn rolling_adds(c: &mut Criterion) {
    let h = history::history(12_000, 3);
    let mut group = c.benchmark_group("rolling_memory_4000");
    group.throughput(Throughput::Elements(1_000));
    for (label, skip) in [("first_1000_adds", 0usize), ("adds_10000_to_11000", 10_000)] {
        bench_adds(&mut group, label, &h, skip, FoldPolicy::new());
    }
    group.finish();
}

/// The ledger's cost: compactions of 1 000 and 10 000 messages (heuristic
/// and o200k) and 1 000 adds to a full rolling memory, ledger on (the
/// default) and off. Targets: within 1.5x (compactions) and 1.3x (adds).
fn ledger_on_off(c: &mut Criterion) {
    let mut group = c.benchmark_group("ledger");
    let policy = |on: bool| FoldPolicy::new().ledger(on);
    let o200k = Tiktoken::o200k_base().unwrap();
    for n in [1_000, 10_000] {
        let h = history::history(n, 42);
        for on in [true, false] {
            let state = if on { "on" } else { "off" };
            let heuristic = Compactor::new(8_000).keep_recent(4_000).policy(policy(on));
            group.bench_function(format!("compact_{n}_heuristic_{state}"), |b| {
                b.iter(|| heuristic.compact(black_box(&h), &fixed).unwrap())
            });
            let counted = heuristic.clone().counter(o200k);
            group.bench_function(format!("compact_{n}_o200k_{state}"), |b| {
                b.iter(|| counted.compact(black_box(&h), &fixed).unwrap())
            });
        }
    }
    let h = history::history(11_000, 42);
    for on in [true, false] {
        let state = if on { "on" } else { "off" };
        bench_adds(
            &mut group,
            &format!("rolling_adds_10000_to_11000_{state}"),
            &h,
            10_000,
            policy(on),
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    targets = plan_vs_history_length, compact_end_to_end, compact_async_vs_sync, counting_throughput, rolling_adds, ledger_on_off
}
criterion_main!(benches);
