//! Needles: do exact identifiers survive folding?
//!
//! A 200-turn conversation (its own seeded generator) places 50 identifiers
//! of every ledger class in its first 20 turns: in prose, in tool-call
//! arguments and in JSON tool results. It is compacted before every turn at a
//! 2 000-token budget (o200k) with a lossy summarizer (the first sentence of
//! each folded turn, 60 words at most, the previous summary dropped):
//! statelessly through the `chatfold` command (each result fed back), and
//! through `RollingMemory` and `TieredMemory`, each with the ledger at its
//! default share (33% of the summary's allowance), at 80%, and off; and
//! through the command in Anthropic's format (a body with `system`,
//! `tool_use` and `tool_result` blocks) at the default share; and compacted
//! once, whole, by the command (with the lossy summarizer and with the
//! built-in one). Recall is the share of identifiers found verbatim in the final
//! context. The same conversation then goes through Python chatcram and
//! rollmem (`benches/needle_peers.py`), when they are installed.
//!
//! `cargo bench --bench needle --features cli`; results in BENCHMARKS.md.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use chatfold::memory::{Memory, Remember, RollingMemory, Settings, TieredMemory, TieredSettings};
use chatfold::{FoldPolicy, Format, Message, Ready, SummaryRequest, Tiktoken, TokenCounter, ToolCall};

const BUDGET: usize = 2_000;
const TURNS: usize = 200;
const NEEDLE_TURNS: usize = 20;

/// xorshift64*: the same conversation for the same seed, on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16)]))
            .collect()
    }

    fn word(&mut self) -> &'static str {
        const WORDS: &[&str] = &[
            "billing", "ledger", "orders", "replica", "cache", "queue", "report", "alpha", "delta", "north",
            "payments", "search", "metrics", "export", "nightly", "batch",
        ];
        WORDS[self.below(WORDS.len())]
    }
}

/// One identifier of class `k` (16 classes), and the text it stands in.
fn needle(rng: &mut Rng, k: usize) -> String {
    match k % 16 {
        0 => format!(
            "{}-{}-4{}-a{}-{}",
            rng.hex(8),
            rng.hex(4),
            rng.hex(3),
            rng.hex(3),
            rng.hex(12)
        ),
        1 => format!(
            "https://{}.example.com/api/v2/{}/{}",
            rng.word(),
            rng.word(),
            rng.below(9000) + 100
        ),
        2 => format!("/var/lib/{}/{}-{}.db", rng.word(), rng.word(), rng.below(90) + 10),
        3 => format!("src/{}/{}_{}.rs", rng.word(), rng.word(), rng.below(90) + 10),
        4 => format!("{}{}", rng.hex(10), rng.below(10)),
        5 => format!(
            "arn:aws:s3:::{}-{}-{}",
            rng.word(),
            rng.word(),
            rng.below(900) + 100
        ),
        6 => format!(
            "gs://{}-{}/exports/{}.parquet",
            rng.word(),
            rng.below(90) + 10,
            rng.word()
        ),
        7 => format!("{}.{}@example.org", rng.word(), rng.word()),
        8 => format!(
            "10.{}.{}.{}:{}",
            rng.below(250) + 1,
            rng.below(250) + 1,
            rng.below(250) + 1,
            rng.below(9000) + 1000
        ),
        9 => format!(
            "{}-{}.{}.internal:{}",
            rng.word(),
            rng.below(90) + 10,
            rng.word(),
            rng.below(9000) + 1000
        ),
        10 => format!(
            "{}-{}",
            ["PAY", "OPS", "SRE", "DATA"][rng.below(4)],
            rng.below(9000) + 100
        ),
        11 => format!("v{}.{}.{}", rng.below(9) + 1, rng.below(30), rng.below(30)),
        12 => format!("conn_{}", rng.hex(6)),
        13 => format!("ORD-{}-{:05}", 2020 + rng.below(7), rng.below(100_000)),
        14 => format!(
            "postgres://{}@{}-db.internal:5432/{}",
            rng.word(),
            rng.word(),
            rng.word()
        ),
        _ => format!("txn_{}_{}", rng.below(900_000) + 100_000, rng.word()),
    }
}

/// The conversation, its needles (what recall looks for), and where the
/// needles are.
fn conversation(seed: u64) -> (Vec<Message>, Vec<String>) {
    let mut rng = Rng(seed);
    let mut history = vec![Message::system("You are an SRE assistant for the payments team.")];
    let mut needles = Vec::new();
    let next = |rng: &mut Rng, needles: &mut Vec<String>| {
        let n = needle(rng, needles.len());
        needles.push(n.clone());
        n
    };
    for turn in 0..TURNS {
        if turn < NEEDLE_TURNS {
            // Two needles in prose, after the first sentence.
            let (a, b) = (next(&mut rng, &mut needles), next(&mut rng, &mut needles));
            history.push(Message::user(format!(
                "Quick question about the {} service. It reads {a} and writes to {b}, is that right?",
                rng.word()
            )));
            if turn % 4 == 3 {
                // Tool call arguments and a JSON result.
                let path = next(&mut rng, &mut needles);
                let id = format!("call_{turn}");
                history.push(Message::assistant_tool_calls(vec![ToolCall::new(
                    id.clone(),
                    "inspect",
                    format!(r#"{{"path": "{path}"}}"#),
                )]));
                let conn = format!("conn_{}", rng.hex(6));
                needles.push(conn.clone());
                history.push(Message::tool(
                    format!(
                        r#"{{"connection_id": "{conn}", "rows": {}, "status": "ok"}}"#,
                        rng.below(900)
                    ),
                    id,
                ));
            }
            history.push(Message::assistant(format!(
                "Yes, that matches the config. The {} job runs nightly and reports to the {} channel.",
                rng.word(),
                rng.word()
            )));
        } else {
            history.push(Message::user(format!(
                "Turn {turn}: how is the {} dashboard looking today? Any anomalies in {}?",
                rng.word(),
                rng.word()
            )));
            history.push(Message::assistant(format!(
                "The {} dashboard looks steady. Latency in {} is within its usual band, and error rates stay flat across the {} fleet.",
                rng.word(),
                rng.word(),
                rng.word()
            )));
        }
    }
    (history, needles)
}

/// The lossy summarizer: the first sentence of each folded turn, 60 words
/// at most; the previous summary is dropped.
fn lossy(request: &SummaryRequest<'_>) -> Result<String, std::convert::Infallible> {
    let mut words = Vec::new();
    for m in request.messages() {
        let text = m.text();
        let first = text.split_inclusive(['.', '?', '!']).next().unwrap_or("");
        words.extend(first.split_whitespace().map(str::to_owned));
    }
    words.truncate(60);
    Ok(if words.is_empty() {
        "Earlier turns.".to_owned()
    } else {
        words.join(" ")
    })
}

/// The same, as a shell command for the CLI (it reads the transcript).
const LOSSY_CMD: &str = r#"awk '/^Previous summary:/ { skip = 1; next } /^Conversation:/ { skip = 0; next } !skip' | sed -E 's/^[a-z_]+: //; s/([.?!]).*/\1/' | tr '\n' ' ' | awk '{ n = NF < 60 ? NF : 60; for (i = 1; i <= n; i++) printf "%s ", $i; if (n == 0) printf "Earlier turns." }'"#;

fn recall(context: &[Message], needles: &[String]) -> usize {
    let text: String = context
        .iter()
        .map(|m| {
            let mut t = m.text().into_owned();
            for c in &m.tool_calls {
                t.push('\n');
                t.push_str(&c.arguments);
            }
            t
        })
        .collect::<Vec<_>>()
        .join("\n");
    needles.iter().filter(|n| text.contains(n.as_str())).count()
}

/// Turn boundaries: the history grows by one user turn and what follows it.
fn turns(history: &[Message]) -> Vec<usize> {
    (2..=history.len())
        .filter(|&end| end == history.len() || history[end].role == chatfold::Role::User)
        .collect()
}

/// How the ledger is set: off, or on with this share of the allowance (percent).
type Ledger = Option<u8>;

/// `chatfold` run with `args` on `input`, its output read back in OpenAI's
/// format.
fn compact(exe: &Path, args: &[&str], input: &str) -> Vec<Message> {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("chatfold runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("chatfold ends");
    assert!(out.status.success(), "chatfold failed");
    chatfold::History::from_json_str(std::str::from_utf8(&out.stdout).expect("utf-8"))
        .and_then(|h| h.convert(Format::OpenAi))
        .expect("chatfold's output reads back")
        .messages
}

fn run_cli(exe: &Path, history: &[Message], ledger: Ledger, format: Format) -> Vec<Message> {
    let mut context: Vec<Message> = Vec::new();
    let mut done = 0;
    for end in turns(history) {
        context.extend(history[done..end].iter().cloned());
        done = end;
        // Sent in `format` (Anthropic's: a body with `system`, tool_use and
        // tool_result blocks).
        let sent = chatfold::History::from(context.clone())
            .convert(format)
            .expect("converts");
        let input = serde_json::to_string(&sent.to_json()).expect("json");
        let mut args = vec![
            "compact",
            "--budget",
            "2000",
            "--tokenizer",
            "o200k_base",
            "--summarize-cmd",
            LOSSY_CMD,
        ];
        let percent = ledger.unwrap_or(0).to_string();
        match ledger {
            Some(_) => args.extend(["--ledger-percent", percent.as_str()]),
            None => args.push("--no-ledger"),
        }
        context = compact(exe, &args, &input);
    }
    context
}

/// The whole conversation compacted once by the command, with the lossy
/// summarizer or (`None`) the built-in one.
fn run_once(exe: &Path, history: &[Message], summarize_cmd: Option<&str>) -> Vec<Message> {
    let input =
        serde_json::to_string(&history.iter().map(Message::to_json).collect::<Vec<_>>()).expect("json");
    let mut args = vec!["compact", "--budget", "2000", "--tokenizer", "o200k_base"];
    if let Some(cmd) = summarize_cmd {
        args.extend(["--summarize-cmd", cmd]);
    }
    compact(exe, &args, &input)
}

fn policy(ledger: Ledger) -> FoldPolicy {
    FoldPolicy::new()
        .ledger(ledger.is_some())
        .ledger_percent(ledger.unwrap_or(0))
        .max_summary_tokens(800)
}

fn run_rolling(history: &[Message], ledger: Ledger) -> Vec<Message> {
    let o200k = Tiktoken::o200k_base().expect("o200k");
    let settings = Settings::new(1_200)
        .summarizer(lossy)
        .counter(o200k)
        .policy(policy(ledger));
    let mut memory = RollingMemory::new(settings).expect("settings");
    for m in &history[1..] {
        memory.add_message(m.clone()).expect("add");
    }
    let mut context = vec![history[0].clone()];
    context.extend(memory.messages());
    context
}

fn run_tiered(history: &[Message], ledger: Ledger) -> Vec<Message> {
    let o200k = Tiktoken::o200k_base().expect("o200k");
    let settings = TieredSettings::new(1_200, BUDGET)
        .counter(o200k)
        .policy(policy(ledger));
    let (memory, _worker) =
        TieredMemory::new([history[0].clone()], settings, Ready(lossy)).expect("settings");
    for m in &history[1..] {
        memory.add_message(m.clone());
        // Before every turn, as a worker would; inline here.
        pollster::block_on(memory.fold_now()).expect("fold");
    }
    memory.messages()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let (history, needles) = conversation(0x5EED_0010);
    let o200k = Tiktoken::o200k_base().expect("o200k");
    let tokens = |m: &[Message]| o200k.count_messages(m);
    println!(
        "needles: {} identifiers in the first {NEEDLE_TURNS} of {TURNS} turns; conversation {} tokens",
        needles.len(),
        tokens(&history)
    );
    println!("{:<46} {:>8} {:>14}", "mode", "recall", "final tokens");
    let exe = Path::new(env!("CARGO_BIN_EXE_chatfold"));
    let mut rows: Vec<(String, Vec<Message>)> = Vec::new();
    for ledger in [Some(33), Some(80), None] {
        let tag = ledger.map_or("ledger off".to_owned(), |p| format!("ledger {p}%"));
        rows.push((
            format!("chatfold CLI, stateless, {tag}"),
            run_cli(exe, &history, ledger, Format::OpenAi),
        ));
        if ledger == Some(33) {
            rows.push((
                format!("chatfold CLI, Anthropic's format, {tag}"),
                run_cli(exe, &history, ledger, Format::Anthropic),
            ));
            rows.push((
                format!("chatfold CLI, once, lossy, {tag}"),
                run_once(exe, &history, Some(LOSSY_CMD)),
            ));
            rows.push((
                format!("chatfold CLI, once, built-in, {tag}"),
                run_once(exe, &history, None),
            ));
        }
        rows.push((format!("RollingMemory, {tag}"), run_rolling(&history, ledger)));
        rows.push((format!("TieredMemory, {tag}"), run_tiered(&history, ledger)));
    }
    for (mode, context) in &rows {
        let found = recall(context, &needles);
        println!(
            "{mode:<46} {:>7.1}% {:>14}",
            100.0 * found as f64 / needles.len() as f64,
            tokens(context)
        );
    }
    peers(&history, &needles);
}

/// chatcram and rollmem on the same conversation, through the Python script.
fn peers(history: &[Message], needles: &[String]) {
    let dir = std::env::temp_dir().join(format!("chatfold-needle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let conversation = serde_json::json!({
        "messages": history.iter().map(Message::to_json).collect::<Vec<_>>(),
        "needles": needles,
        "budget": BUDGET,
    });
    let file = dir.join("needle.json");
    std::fs::write(&file, conversation.to_string()).expect("write");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/needle_peers.py");
    match Command::new("python3").arg(&script).arg(&file).output() {
        Ok(out) if out.status.success() => print!("{}", String::from_utf8_lossy(&out.stdout)),
        Ok(out) => println!("(peers not run: {})", String::from_utf8_lossy(&out.stderr).trim()),
        Err(e) => println!("(peers not run: {e})"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}
