//! The proxy's counters, written in Prometheus' text format for
//! `GET /metrics`, and the log line of each request.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::fold::Outcome;

/// The added latency histogram's upper bounds, in seconds.
const BUCKETS: [f64; 14] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

/// Everything `/metrics` says.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Requests answered, by route and status.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// Requests forwarded compacted.
    compacted: AtomicU64,
    /// Tokens of compacted requests' histories, before.
    tokens_before: AtomicU64,
    /// And after.
    tokens_after: AtomicU64,
    /// Summarizer calls made (the configured summarizer's).
    summarizer_calls: AtomicU64,
    /// Of which failed.
    summarizer_failures: AtomicU64,
    /// Requests served with the extractive summary in its place.
    fallbacks: AtomicU64,
    /// Compactions that found their summary cached (no summarizer call).
    cache_hits: AtomicU64,
    /// Compactions that had to summarize.
    cache_misses: AtomicU64,
    /// Summarizer calls that waited for the same fold, in flight elsewhere.
    flight_waits: AtomicU64,
    /// Tokens of chat requests' histories sent upstream (compacted or not).
    tokens_sent: AtomicU64,
    /// Of which the previous request of the same client sent too: the
    /// prefix a provider serves from its prompt cache.
    prefix_tokens: AtomicU64,
    /// Requests whose prefix a new fold rewrote.
    prefix_rewrites: AtomicU64,
    /// Added latency: counts per bucket (the last is +Inf), and the sum in
    /// nanoseconds.
    latency: [AtomicU64; BUCKETS.len() + 1],
    latency_sum_nanos: AtomicU64,
}

/// Adds one to `counter`.
fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Metrics {
    /// Counts an answer on `route` with `status`, `added` after the
    /// request came in.
    pub(crate) fn answered(&self, route: &'static str, status: u16, added: Duration) {
        if let Ok(mut requests) = self.requests.lock() {
            *requests.entry((route, status)).or_default() += 1;
        }
        let secs = added.as_secs_f64();
        let bucket = BUCKETS.iter().position(|&b| secs <= b).unwrap_or(BUCKETS.len());
        bump(&self.latency[bucket]);
        let nanos = u64::try_from(added.as_nanos()).unwrap_or(u64::MAX);
        self.latency_sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Counts what a chat request's compaction step did.
    pub(crate) fn folded(&self, outcome: &Outcome) {
        let add = |counter: &AtomicU64, n: u64| {
            counter.fetch_add(n, Ordering::Relaxed);
        };
        let calls = &outcome.calls;
        add(&self.summarizer_calls, calls.made);
        add(&self.summarizer_failures, calls.failed);
        add(&self.flight_waits, calls.waited);
        if let (Some((prefix, kept)), Some((_, sent))) = (outcome.prefix, outcome.tokens) {
            add(&self.tokens_sent, sent as u64);
            add(&self.prefix_tokens, kept as u64);
            if prefix == chatfold::Prefix::Rewritten {
                bump(&self.prefix_rewrites);
            }
        }
        if !outcome.summarized {
            return;
        }
        bump(&self.compacted);
        if let Some((before, after)) = outcome.tokens {
            add(&self.tokens_before, before as u64);
            add(&self.tokens_after, after as u64);
        }
        if outcome.fallback.is_some() {
            bump(&self.fallbacks);
        }
        bump(match outcome.cache {
            "hit" => &self.cache_hits,
            _ => &self.cache_misses,
        });
    }

    /// Everything, in Prometheus' text exposition format.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        self.render_requests(&mut out);
        for (name, help, value) in self.counters() {
            let _ = writeln!(out, "# HELP chatfold_{name} {help}");
            let _ = writeln!(out, "# TYPE chatfold_{name} counter");
            let _ = writeln!(out, "chatfold_{name} {}", value.load(Ordering::Relaxed));
        }
        self.render_latency(&mut out);
        out
    }

    /// The requests answered, by route and status.
    fn render_requests(&self, out: &mut String) {
        let name = "chatfold_requests_total";
        let _ = writeln!(out, "# HELP {name} Requests answered, by route and status.");
        let _ = writeln!(out, "# TYPE {name} counter");
        if let Ok(requests) = self.requests.lock() {
            for ((route, status), n) in requests.iter() {
                let _ = writeln!(out, "{name}{{route=\"{route}\",status=\"{status}\"}} {n}");
            }
        }
    }

    /// The plain counters: their names, help and values.
    fn counters(&self) -> [(&'static str, &'static str, &AtomicU64); 12] {
        [
            (
                "compacted_requests_total",
                "Requests forwarded compacted.",
                &self.compacted,
            ),
            (
                "tokens_before_total",
                "Tokens of compacted requests' histories before compaction.",
                &self.tokens_before,
            ),
            (
                "tokens_after_total",
                "Tokens of compacted requests' histories after compaction.",
                &self.tokens_after,
            ),
            (
                "summarizer_calls_total",
                "Calls to the configured summarizer.",
                &self.summarizer_calls,
            ),
            (
                "summarizer_failures_total",
                "Calls to the configured summarizer that failed.",
                &self.summarizer_failures,
            ),
            (
                "fallbacks_total",
                "Requests compacted with the extractive summary instead.",
                &self.fallbacks,
            ),
            (
                "cache_hits_total",
                "Compactions whose summary was cached.",
                &self.cache_hits,
            ),
            (
                "cache_misses_total",
                "Compactions that called a summarizer.",
                &self.cache_misses,
            ),
            (
                "tokens_sent_total",
                "Tokens of chat requests' histories sent upstream, compacted or not.",
                &self.tokens_sent,
            ),
            (
                "prefix_tokens_total",
                "Of those, the tokens the same client's previous request sent too: the prompt cache's expected hits.",
                &self.prefix_tokens,
            ),
            (
                "prefix_rewrites_total",
                "Requests whose prompt prefix a new fold rewrote.",
                &self.prefix_rewrites,
            ),
            (
                "singleflight_waits_total",
                "Summaries waited for while the same fold was in flight.",
                &self.flight_waits,
            ),
        ]
    }

    /// The added latency's histogram.
    fn render_latency(&self, out: &mut String) {
        let name = "chatfold_added_latency_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from a request's arrival to its dispatch upstream (or the proxy's own answer)."
        );
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut total = 0;
        for (i, count) in self.latency.iter().enumerate() {
            total += count.load(Ordering::Relaxed);
            let le = BUCKETS.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {total}");
        }
        let sum = self.latency_sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {total}");
    }
}
