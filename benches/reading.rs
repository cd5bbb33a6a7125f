//! Reading a history: `History::from_reader` against `History::from_json_str`
//! on the same bytes (100 000 messages, 40.6 MB), and serde_json alone.
//!
//! `cargo bench --bench reading`; results and the machine in BENCHMARKS.md.

#[path = "support/history.rs"]
mod history;

use std::hint::black_box;
use std::time::Duration;

use chatfold::History;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn reading(c: &mut Criterion) {
    let json = serde_json::to_string(&history::history(100_000, 42)).unwrap();
    let mut group = c.benchmark_group("read_100k");
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("from_json_str", |b| {
        b.iter(|| History::from_json_str(black_box(&json)).unwrap())
    });
    group.bench_function("from_reader", |b| {
        b.iter(|| History::from_reader(black_box(json.as_bytes())).unwrap())
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(&json)).unwrap())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(6)).warm_up_time(Duration::from_secs(1));
    targets = reading
}
criterion_main!(benches);
