//! A deterministic, seeded generator of realistic chat histories, shared by
//! the criterion benches and the peer comparison (`benches/peers/`).
//!
//! Shape: a system prompt, then user turns (20 to 240 characters) and
//! assistant turns (40 to 700) of prose and code, a few developer notes early
//! on, and every ~200 messages a tool exchange: an assistant call (one to
//! three tools) and its results of 2 to 20 KB each (log lines). 100 000
//! messages come to about 35 MB and 8 million o200k tokens.
#![allow(dead_code)]

use chatfold::{Message, ToolCall};

/// splitmix64: small, fast, and the same on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `lo..hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo) as u64) as usize
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "deploy",
    "failed",
    "because",
    "config",
    "database",
    "timeout",
    "service",
    "staging",
    "production",
    "we",
    "should",
    "check",
    "logs",
    "error",
    "version",
    "release",
    "rollback",
    "latency",
    "request",
    "cache",
    "index",
    "query",
    "user",
    "account",
    "payment",
    "settlement",
    "batch",
    "worker",
    "queue",
    "retry",
    "after",
    "before",
    "with",
    "without",
    "and",
    "or",
    "but",
    "is",
    "was",
    "will",
    "can",
    "not",
    "a",
    "an",
    "to",
    "of",
    "in",
    "on",
    "for",
    "from",
    "this",
    "that",
    "it",
    "please",
    "thanks",
    "why",
    "how",
    "what",
    "when",
    "Seoul",
    "Kubernetes",
    "PostgreSQL",
    "migration",
    "ledger",
    "threshold",
    "warning",
    "metrics",
    "dashboard",
    "alert",
];

const CODE: &[&str] = &[
    "fn main() {\n    let cfg = Config::load(\"staging.toml\")?;\n    run(cfg)\n}",
    "SELECT id, amount FROM ledger_entries WHERE account_id = $1 ORDER BY posted_at DESC LIMIT 500;",
    "kubectl rollout status deploy/ledgerd -n payments --timeout=120s",
    "{\"status\": \"ok\", \"version\": \"2.14.0\", \"db\": \"ok\"}",
];

const TOOLS: &[&str] = &["read_file", "run_command", "search_logs", "http_get"];

fn prose(rng: &mut Rng, min_chars: usize, max_chars: usize) -> String {
    let target = rng.range(min_chars, max_chars);
    let mut out = String::with_capacity(target + 16);
    let mut sentence_start = true;
    while out.len() < target {
        if !out.is_empty() {
            out.push(' ');
        }
        if rng.range(0, 40) == 0 {
            out.push_str("```\n");
            out.push_str(rng.pick(CODE));
            out.push_str("\n```");
            sentence_start = true;
            continue;
        }
        let word = rng.pick(WORDS);
        if sentence_start {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                out.extend(first.to_uppercase());
                out.push_str(chars.as_str());
            }
        } else {
            out.push_str(word);
        }
        sentence_start = rng.range(0, 12) == 0;
        if sentence_start {
            out.push(if rng.range(0, 5) == 0 { '?' } else { '.' });
        }
    }
    out
}

fn tool_output(rng: &mut Rng) -> String {
    let target = rng.range(2_000, 20_000);
    let mut out = String::with_capacity(target + 200);
    let mut line = 0u32;
    while out.len() < target {
        line += 1;
        let ms = rng.range(1, 5_000);
        let level = rng.pick(&["INFO", "WARN", "ERROR", "DEBUG"]);
        let words = prose(rng, 30, 120);
        out.push_str(&format!(
            "2026-11-28T23:{:02}:{:02}.{:03}Z {level} ledgerd[{}]: {words} (took {ms}ms, req_id={:016x})\n",
            line % 60,
            (line * 7) % 60,
            ms % 1000,
            48_000 + line,
            rng.next()
        ));
    }
    out
}

/// `messages` messages of a generated conversation, the same for the same seed.
pub fn history(messages: usize, seed: u64) -> Vec<Message> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(messages + 4);
    out.push(Message::system(
        "You are Ferris, a senior SRE assistant for the Acme payments team. Be precise; quote exact identifiers.",
    ));
    let mut call_id = 0u64;
    while out.len() < messages {
        let roll = rng.range(0, 200);
        if roll == 0 && out.len() < 2_000 {
            out.push(Message::developer(prose(&mut rng, 40, 200)));
        } else if roll == 1 {
            let calls: Vec<ToolCall> = (0..rng.range(1, 4))
                .map(|_| {
                    call_id += 1;
                    let args = format!(
                        "{{\"query\": \"{}\", \"since\": \"24h\"}}",
                        prose(&mut rng, 10, 40)
                    );
                    ToolCall::new(format!("call_{call_id:06}"), rng.pick(TOOLS), args)
                })
                .collect();
            let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
            out.push(Message::assistant_tool_calls(calls));
            for id in ids {
                out.push(Message::tool(tool_output(&mut rng), id));
            }
        } else if out.last().is_some_and(|m| m.role == chatfold::Role::User) {
            out.push(Message::assistant(prose(&mut rng, 40, 700)));
        } else {
            out.push(Message::user(prose(&mut rng, 20, 240)));
        }
    }
    out.truncate(messages);
    // Never end on a dangling call: the last message is a user turn.
    if let Some(last) = out.last_mut() {
        if last.role != chatfold::Role::User || !last.tool_calls.is_empty() {
            *last = Message::user(prose(&mut rng, 20, 240));
        }
    }
    out
}
