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

/// 100 000 messages as generated (40.6 MB), and with each text about 2.8
/// times as long (108 MB), the size of the history the issue measured.
fn inputs() -> Vec<(&'static str, String)> {
    let short = history::history(100_000, 42);
    let long: Vec<chatfold::Message> = short
        .iter()
        .map(|m| {
            let mut m = m.clone();
            let text = m.text().into_owned();
            if m.content.is_some() && !text.is_empty() && m.tool_calls.is_empty() {
                let cut = text
                    .char_indices()
                    .nth(text.chars().count() * 4 / 5)
                    .map_or(text.len(), |(i, _)| i);
                m.content = Some(chatfold::Content::Text(format!(
                    "{text}\n{text}\n{}",
                    &text[..cut]
                )));
            }
            m
        })
        .collect();
    vec![
        ("read_100k", serde_json::to_string(&short).unwrap()),
        ("read_100k_long", serde_json::to_string(&long).unwrap()),
    ]
}

fn reading(c: &mut Criterion) {
    for (name, json) in inputs() {
        read(c, name, &json);
    }
}

fn read(c: &mut Criterion, name: &str, json: &str) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(json.len() as u64));
    group.bench_function("from_json_str", |b| {
        b.iter(|| History::from_json_str(black_box(json)).unwrap())
    });
    group.bench_function("from_reader", |b| {
        b.iter(|| History::from_reader(black_box(json.as_bytes())).unwrap())
    });
    group.bench_function("serde_json_value", |b| {
        b.iter(|| serde_json::from_str::<serde_json::Value>(black_box(json)).unwrap())
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(6)).warm_up_time(Duration::from_secs(1));
    targets = reading
}
criterion_main!(benches);
