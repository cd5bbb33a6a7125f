//! The ledger through the memories: `benches/ledger_eval.py --memory`
//! drives this with a conversation (OpenAI's shape, JSON on stdin) and
//! reads back every message the memory shows at the end (JSON on stdout).
//!
//! `cargo run --release --example ledger_memory -- rolling|tiered`
//!
//! Both memories fold with the same lossy summarizer as the command's
//! workloads (the first sentence of each folded turn, 60 words at most,
//! the previous summary dropped), at 2 000 tokens (o200k): the rolling
//! memory's `max_tokens`, the tiered memory's soft limit (hard limit
//! 4 000), its worker on a tokio runtime and every fold done before the
//! view is read.

use std::io::Read;

use chatfold::memory::{Memory, Remember, RollingMemory, Settings, TieredMemory, TieredSettings};
use chatfold::{Message, SummaryRequest, Tiktoken};

/// The first sentence of each folded turn, 60 words at most.
fn lossy(request: &SummaryRequest<'_>) -> Result<String, std::convert::Infallible> {
    let mut words: Vec<String> = Vec::new();
    for message in request.messages() {
        let text = message.text();
        let end = text.find(['.', '?', '!']).map_or(text.len(), |at| at + 1);
        words.extend(text[..end].split_whitespace().map(str::to_owned));
    }
    words.truncate(60);
    Ok(match words.is_empty() {
        true => "Earlier turns.".to_owned(),
        false => words.join(" "),
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "rolling".to_owned());
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input)?;
    let messages: Vec<Message> = serde_json::from_str(&input)?;
    let counter = || Tiktoken::from_name("o200k_base").expect("o200k is built in");
    let shown = match which.as_str() {
        "tiered" => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .build()?;
            let summarize = async |r: SummaryRequest<'_>| lossy(&r);
            let settings = TieredSettings::new(2_000, 4_000).counter(counter());
            let (memory, worker) = TieredMemory::new([], settings, summarize)?;
            runtime.spawn(worker);
            for message in messages {
                memory.add_message(message);
                // Each turn waits for the fold it started, as an agent's
                // next model call would come after it.
                runtime.block_on(memory.fold_now())?;
            }
            memory.messages()
        }
        _ => {
            let settings = Settings::new(2_000).summarizer(lossy).counter(counter());
            let mut memory = RollingMemory::new(settings)?;
            for message in messages {
                memory.add_message(message)?;
            }
            memory.messages()
        }
    };
    println!("{}", serde_json::to_string(&shown)?);
    Ok(())
}
