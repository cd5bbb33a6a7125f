//! chatfold's side of the peer comparison (`benches/peers/compare.py`): it
//! writes the generated inputs and times chatfold on them, printing JSON.
//!
//! ```text
//! peer_driver gen MESSAGES SEED FILE
//! peer_driver compact FILE BUDGET KEEP_RECENT TOKENIZER REPS
//! peer_driver rolling FILE ADDS MAX_TOKENS
//! peer_driver pair compact FILE BUDGET KEEP_RECENT TOKENIZER REPS
//! peer_driver pair rolling FILE ADDS MAX_TOKENS [LOW_WATER]
//! ```
//!
//! The rolling memories summarize with a fixed text, as rollmem's side of
//! the comparison does; `CHATFOLD_SUMMARIZER=extractive` gives `pair
//! rolling` the built-in summarizer instead (the default a user gets).
//!
//! `pair` times the ledger on (the default) against the ledger off in one
//! process, interleaved: compactions alternate one by one (which goes first
//! swapped each round), rolling memories take turns in blocks of
//! [`BLOCK`] adds. On a machine whose speed drifts over milliseconds, only
//! runs this close together give a ratio that holds from run to run.

#[path = "../support/history.rs"]
mod history;

use std::convert::Infallible;
use std::time::Instant;

use chatfold::memory::{Memory, Remember, RollingMemory, Settings};
use chatfold::{
    Compactor, Extractive, FoldPolicy, Heuristic, Summarizer, SummaryRequest, Tiktoken, TokenCounter,
};

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map(String::as_str).unwrap_or_else(|| {
        eprintln!("usage: see the top of benches/peers/driver.rs");
        std::process::exit(2)
    })
}

fn num(args: &[String], i: usize) -> usize {
    arg(args, i).parse().unwrap_or_else(|e| {
        eprintln!("argument {i}: {e}");
        std::process::exit(2)
    })
}

fn load(path: &str) -> Vec<chatfold::Message> {
    let text = std::fs::read_to_string(path).expect("readable input");
    chatfold::History::from_json_str(&text)
        .map(|h| h.messages)
        .expect("valid history")
}

fn fixed(_: &SummaryRequest<'_>) -> Result<String, Infallible> {
    Ok("fixed summary".to_owned())
}

/// Adds a rolling memory takes in a row in `pair rolling`.
const BLOCK: usize = 100;

fn time_compact<C: TokenCounter>(
    compactor: &Compactor<C>,
    h: &[chatfold::Message],
    reps: usize,
) -> (Vec<f64>, usize) {
    let mut times = Vec::with_capacity(reps);
    let mut tokens_after = 0;
    // One untimed run first, as the peers' timed runs are warm too.
    compactor.compact(h, &fixed).expect("compaction");
    for _ in 0..reps {
        let start = Instant::now();
        let result = compactor.compact(h, &fixed).expect("compaction");
        times.push(start.elapsed().as_secs_f64());
        tokens_after = result.tokens_after;
    }
    (times, tokens_after)
}

/// The fold policy: the default (ledger on), or, with `CHATFOLD_NO_LEDGER`
/// set, without the ledger (what the peers do).
fn policy() -> FoldPolicy {
    FoldPolicy::new().ledger(std::env::var_os("CHATFOLD_NO_LEDGER").is_none())
}

/// `pair compact`: the ledger on and off, alternating, `reps` times each
/// after one untimed run each.
fn pair_compact<C: TokenCounter + Clone>(
    counter: C,
    h: &[chatfold::Message],
    budget: usize,
    keep: usize,
    reps: usize,
) {
    let with = |ledger: bool| {
        Compactor::new(budget)
            .keep_recent(keep)
            .policy(FoldPolicy::new().ledger(ledger))
            .counter(counter.clone())
    };
    let both = [with(true), with(false)];
    let mut times = [Vec::with_capacity(reps), Vec::with_capacity(reps)];
    let mut tokens = [0, 0];
    for compactor in &both {
        compactor.compact(h, &fixed).expect("compaction");
    }
    for rep in 0..reps {
        for k in [rep % 2, 1 - rep % 2] {
            let start = Instant::now();
            let result = both[k].compact(h, &fixed).expect("compaction");
            times[k].push(start.elapsed().as_secs_f64());
            tokens[k] = result.tokens_after;
        }
    }
    let [on, off] = times;
    println!(
        "{}",
        serde_json::json!({"on_s": on, "off_s": off, "tokens_after": tokens})
    );
}

/// `pair rolling`: two rolling memories, the ledger on and off, each given
/// the same `adds`, in turns of [`BLOCK`] adds; with `low_water`, each
/// folds down to it (one fold per several adds).
fn pair_rolling(h: &[chatfold::Message], adds: usize, max_tokens: usize, low_water: Option<usize>) {
    let words = |t: &str| t.split_whitespace().count();
    let builtin = std::env::var("CHATFOLD_SUMMARIZER").is_ok_and(|s| s == "extractive");
    let summarize = move |request: &SummaryRequest<'_>| match builtin {
        true => Summarizer::summarize(&Extractive::new(), request),
        false => fixed(request),
    };
    let memory = |ledger: bool| {
        let settings = Settings::new(max_tokens)
            .summarizer(summarize)
            .counter(words)
            .policy(FoldPolicy::new().ledger(ledger));
        let settings = match low_water {
            Some(tokens) => settings.low_water(tokens),
            None => settings,
        };
        RollingMemory::new(settings).expect("config")
    };
    let mut both = [memory(true), memory(false)];
    let mut total = [0.0f64; 2];
    for (round, from) in (0..adds).step_by(BLOCK).enumerate() {
        for k in [round % 2, 1 - round % 2] {
            let start = Instant::now();
            for i in from..(from + BLOCK).min(adds) {
                both[k].add_message(h[i % h.len()].clone()).expect("add");
            }
            total[k] += start.elapsed().as_secs_f64();
        }
    }
    let [on, off] = total;
    println!(
        "{}",
        serde_json::json!({"on_s": on, "off_s": off, "buffer_len": [both[0].buffer().len(), both[1].buffer().len()]})
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match arg(&args, 0) {
        "pair" => {
            let rest = &args[1..];
            let h = load(arg(rest, 1));
            match arg(rest, 0) {
                "compact" => {
                    let (budget, keep, reps) = (num(rest, 2), num(rest, 3), num(rest, 5));
                    match arg(rest, 4) {
                        "heuristic" => pair_compact(Heuristic, &h, budget, keep, reps),
                        name => {
                            let counter = Tiktoken::from_name(name).expect("known tokenizer");
                            counter.count("warm up: the encoder is built here");
                            pair_compact(counter, &h, budget, keep, reps)
                        }
                    }
                }
                "rolling" => {
                    let low_water = (rest.len() > 4).then(|| num(rest, 4));
                    pair_rolling(&h, num(rest, 2), num(rest, 3), low_water)
                }
                other => {
                    eprintln!("unknown pair {other}");
                    std::process::exit(2);
                }
            }
        }
        "gen" => {
            let h = history::history(num(&args, 1), num(&args, 2) as u64);
            std::fs::write(arg(&args, 3), serde_json::to_vec(&h).expect("json")).expect("writable output");
        }
        "compact" => {
            let h = load(arg(&args, 1));
            let (budget, keep, reps) = (num(&args, 2), num(&args, 3), num(&args, 5));
            let base = Compactor::new(budget).keep_recent(keep).policy(policy());
            let start = Instant::now();
            let (times, tokens_after) = match arg(&args, 4) {
                "heuristic" => time_compact(&base.counter(Heuristic), &h, reps),
                name => {
                    let counter = Tiktoken::from_name(name).expect("known tokenizer");
                    counter.count("warm up: the encoder is built here");
                    let encoder_s = start.elapsed().as_secs_f64();
                    eprintln!("encoder built in {encoder_s:.3} s");
                    time_compact(&base.counter(counter), &h, reps)
                }
            };
            println!(
                "{}",
                serde_json::json!({"times_s": times, "tokens_after": tokens_after})
            );
        }
        "rolling" => {
            let h = load(arg(&args, 1));
            let (adds, max_tokens) = (num(&args, 2), num(&args, 3));
            let words = |t: &str| t.split_whitespace().count();
            let folds = std::cell::Cell::new(None::<usize>);
            let added = std::cell::Cell::new(0usize);
            let summarize = |_: &SummaryRequest<'_>| {
                if folds.get().is_none() {
                    folds.set(Some(added.get()));
                }
                Ok::<_, Infallible>("fixed summary".to_owned())
            };
            let mut memory = RollingMemory::new(
                Settings::new(max_tokens)
                    .summarizer(summarize)
                    .counter(words)
                    .policy(policy()),
            )
            .expect("config");
            let mut stamps = Vec::with_capacity(adds + 1);
            let start = Instant::now();
            stamps.push(0.0);
            for i in 0..adds {
                added.set(i);
                memory.add_message(h[i % h.len()].clone()).expect("add");
                stamps.push(start.elapsed().as_secs_f64());
            }
            let full = folds.get().unwrap_or(0);
            let first = stamps[(full + 1000).min(adds)] - stamps[full];
            let last = stamps[adds] - stamps[adds.saturating_sub(1000)];
            println!(
                "{}",
                serde_json::json!({"total_s": stamps[adds], "first_1000_after_full_s": first, "last_1000_s": last,
                    "buffer_len": memory.buffer().len(), "full_at": full})
            );
        }
        other => {
            eprintln!("unknown command {other}");
            std::process::exit(2);
        }
    }
}
