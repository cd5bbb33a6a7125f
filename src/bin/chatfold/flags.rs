//! The command line's definitions: what each flag is called, takes and says
//! in `--help`. What the flags mean is decided elsewhere (`setup`,
//! `summarizers`, `io`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::messages::EXIT_CODES;

/// Keep LLM chat histories inside a token budget.
///
/// Reads a JSON array of messages, or a request body (an OpenAI Chat
/// Completions or an Anthropic Messages body: an object with a "messages"
/// array), from INPUT or standard input.
#[derive(Parser, Debug)]
#[command(name = "chatfold", version, after_help = EXIT_CODES)]
pub(crate) struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Compact a history to fit the budget; writes it to stdout in the shape it came in.
    Compact(Box<CompactArgs>),
    /// Print the history's token count (OpenAI chat accounting).
    Count {
        /// The history and how to read and count it.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Show what compact would do, message by message, without summarizing.
    Explain {
        /// The budget, the fold settings and the history.
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Run a proxy in front of an OpenAI- or Anthropic-compatible API: chat
    /// requests over budget are compacted, everything else passes through.
    Serve(Box<ServeArgs>),
}

/// What `compact` takes.
#[derive(Args, Debug)]
pub(crate) struct CompactArgs {
    /// The budget, the fold settings and the history.
    #[command(flatten)]
    pub(crate) budget: BudgetArgs,
    /// The summarizer.
    #[command(flatten)]
    pub(crate) summarize: SummarizeArgs,
    /// The summary cache.
    #[command(flatten)]
    pub(crate) cache: CacheArgs,
    /// Fail (exit 4) instead of writing an over-budget result.
    #[arg(long)]
    pub(crate) strict: bool,
    /// Write a JSON report of what was kept, hoisted and folded to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// Indent the JSON output.
    #[arg(long)]
    pub(crate) pretty: bool,
}

/// Which summarizer `compact` uses (the built-in extractive one unless told).
#[derive(Args, Debug)]
pub(crate) struct SummarizeArgs {
    /// Shell command that writes the summary: it reads the transcript on
    /// stdin, and CHATFOLD_MAX_SUMMARY_TOKENS in its environment. Default:
    /// the built-in extractive summarizer (no model, no network).
    #[arg(long, value_name = "CMD", conflicts_with = "summarize_url")]
    pub(crate) summarize_cmd: Option<String>,
    /// Summarize with an LLM at this base URL: an OpenAI-compatible API
    /// (https://api.openai.com/v1, Ollama's http://localhost:11434/v1, vLLM,
    /// Gemini, OpenRouter) or Anthropic's (https://api.anthropic.com/v1).
    #[arg(long, value_name = "URL", requires = "summarize_model")]
    pub(crate) summarize_url: Option<String>,
    /// The model to ask, with --summarize-url.
    #[arg(long, value_name = "NAME", requires = "summarize_url")]
    pub(crate) summarize_model: Option<String>,
    /// The API's shape, with --summarize-url (default: anthropic for an
    /// anthropic.com URL, else openai).
    #[arg(long, value_name = "PROVIDER", requires = "summarize_url")]
    pub(crate) summarize_provider: Option<Provider>,
    /// The environment variable holding the API key. Default: OPENAI_API_KEY
    /// or ANTHROPIC_API_KEY, sent only to openai.com or anthropic.com and to
    /// local servers (which need none); any other host needs this flag.
    #[arg(long, value_name = "VAR", requires = "summarize_url")]
    pub(crate) api_key_env: Option<String>,
    /// Seconds the summarizer may take: the whole command (to its exit and
    /// the end of its output), or one HTTP attempt (default: 120 for a
    /// command, 60 for HTTP).
    #[arg(long, value_name = "SECS")]
    pub(crate) summarize_timeout: Option<f64>,
    /// How many times a failed HTTP attempt is retried (429, 5xx, time-outs,
    /// connection errors).
    #[arg(long, value_name = "N", default_value_t = 3, requires = "summarize_url")]
    pub(crate) summarize_retries: u32,
}

/// The HTTP API shapes --summarize-url speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Provider {
    /// OpenAI-compatible Chat Completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

/// The history, and how to read and count it (every subcommand).
#[derive(Args, Debug)]
pub(crate) struct InputArgs {
    /// heuristic (4 characters a token), o200k_base, cl100k_base, or an OpenAI model name.
    #[arg(long, default_value = "o200k_base")]
    pub(crate) tokenizer: String,
    /// The request body's format: openai, anthropic or responses (OpenAI's
    /// Responses API: `input` items, `instructions`). Default: what the
    /// body says (its structure, else its model's name); a body that says
    /// neither is read as OpenAI's, but compact refuses it (exit 2) when it
    /// must place a summary, as the summary's place differs.
    #[arg(long)]
    pub(crate) format: Option<String>,
    /// The history: a file, or - (or nothing) for standard input.
    #[arg(value_name = "INPUT")]
    pub(crate) input: Option<PathBuf>,
}

/// The budget and the fold settings (`compact` and `explain`).
#[derive(Args, Debug)]
pub(crate) struct BudgetArgs {
    /// Most tokens the compacted history may take.
    #[arg(long)]
    pub(crate) budget: usize,
    /// Tokens of recent turns to keep verbatim (default: a quarter of the fold target, an eighth of the budget).
    #[arg(long)]
    pub(crate) keep_recent: Option<usize>,
    /// The summary and what is folded into it.
    #[command(flatten)]
    pub(crate) fold: FoldArgs,
    /// The history and how to read and count it.
    #[command(flatten)]
    pub(crate) input: InputArgs,
}

/// The fold settings, whatever the budget (`compact`, `explain`, `serve`).
#[derive(Args, Debug)]
pub(crate) struct FoldArgs {
    /// The summary message's role (default: system); a role that answers
    /// (assistant, tool) cannot carry it.
    #[arg(long, value_name = "ROLE")]
    pub(crate) summary_role: Option<String>,
    /// Do not keep the identifiers of folded turns in a ledger section after the summary.
    #[arg(long)]
    pub(crate) no_ledger: bool,
    /// The most of the summary's allowance the ledger may take, in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 33, value_parser = clap::value_parser!(u8).range(0..=100))]
    pub(crate) ledger_percent: u8,
    /// Before compacting, replace old tool results with a placeholder, keeping the newest N verbatim.
    #[arg(long, value_name = "N")]
    pub(crate) clear_tool_results: Option<usize>,
    /// With --clear-tool-results: clear only results of at least this many tokens.
    #[arg(long, value_name = "TOKENS", default_value_t = 200)]
    pub(crate) clear_min_tokens: usize,
    /// With --clear-tool-results: never clear the results of this tool (repeatable).
    #[arg(long, value_name = "TOOL")]
    pub(crate) clear_exclude: Vec<String>,
    /// Fold at most this many tokens per summarizer call: a longer middle is
    /// folded in chunks, each extending the previous chunk's summary.
    #[arg(long, value_name = "TOKENS")]
    pub(crate) max_fold_input_tokens: Option<usize>,
    /// A history over the budget is folded down to this (tokens, or a share
    /// of the budget: 50%), so that later turns are appended to an unchanged
    /// prefix, which providers bill at a tenth, until the budget is passed
    /// again (default: 50%; the budget itself folds on nearly every request).
    #[arg(long, value_name = "TOKENS|PERCENT%", value_parser = fold_to)]
    pub(crate) fold_to: Option<FoldTo>,
    /// Keep these messages verbatim after the summary wherever they stand:
    /// first-user (the task), last-user (the turn's question), or a
    /// message's index; comma-separated or repeated. They count against the
    /// budget; when they alone do not fit, it is an error.
    #[arg(long, value_name = "first-user|last-user|INDEX", value_parser = pins, action = clap::ArgAction::Append)]
    pub(crate) pin: Vec<Vec<chatfold::Pin>>,
    /// On an Anthropic request that uses cache_control: auto puts a
    /// breakpoint on the summary block (within the API's limit of 4), never
    /// leaves the breakpoints as they are.
    #[arg(long, value_name = "auto|never", default_value = "auto")]
    pub(crate) cache_breakpoints: chatfold::Breakpoints,
}

/// `--fold-to`: tokens, or a share of each request's budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FoldTo {
    /// This many tokens (at most the budget).
    Tokens(usize),
    /// This share of the budget, in percent.
    Percent(u8),
}

impl FoldTo {
    /// The fold target for `budget`.
    pub(crate) fn tokens(self, budget: usize) -> usize {
        match self {
            FoldTo::Tokens(n) => n.min(budget),
            FoldTo::Percent(p) => (budget as u128 * u128::from(p) / 100) as usize,
        }
        .max(1)
    }
}

fn pins(text: &str) -> Result<Vec<chatfold::Pin>, String> {
    chatfold::Pin::parse_list(text).map_err(|e| e.to_string())
}

fn fold_to(text: &str) -> Result<FoldTo, String> {
    let bad = || format!("{text:?} is neither a number of tokens nor a percentage (1% to 100%)");
    match text.trim().strip_suffix('%') {
        Some(p) => (p.trim().parse::<u8>().ok())
            .filter(|p| (1..=100).contains(p))
            .map(FoldTo::Percent)
            .ok_or_else(bad),
        None => (text.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .map(FoldTo::Tokens)
            .ok_or_else(bad),
    }
}

/// Where `compact` keeps summaries between runs.
#[derive(Args, Debug)]
pub(crate) struct CacheArgs {
    /// Keep summaries and folds in this folder: a client that sends its
    /// whole transcript each time then gets the last fold replayed, the
    /// same prefix, until the budget is passed again.
    #[arg(long, value_name = "DIR", conflicts_with = "cache_redis")]
    pub(crate) cache_dir: Option<PathBuf>,
    /// Keep summaries in Redis (redis://host[:port][/db]), shared by every
    /// process that uses it.
    #[arg(long, value_name = "URL")]
    pub(crate) cache_redis: Option<String>,
}

/// What `serve` takes.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub(crate) listen: std::net::SocketAddr,
    /// The API every request goes to (https://api.openai.com,
    /// https://api.anthropic.com, http://localhost:11434 ...): the request's
    /// path is appended (a base ending in /v1 takes the path's own /v1).
    #[arg(long, value_name = "URL", required_unless_present_any = ["openai_upstream", "anthropic_upstream"])]
    pub(crate) upstream: Option<String>,
    /// The API for OpenAI-shaped requests (/v1/chat/completions and every
    /// other path), instead of --upstream.
    #[arg(long, value_name = "URL")]
    pub(crate) openai_upstream: Option<String>,
    /// The API for Anthropic-shaped requests (/v1/messages..., and any
    /// request with an anthropic-version header), instead of --upstream.
    #[arg(long, value_name = "URL")]
    pub(crate) anthropic_upstream: Option<String>,
    /// Most tokens a chat request's history may take, for every model no
    /// --model-budget or --model-window names (none: such requests pass
    /// through).
    #[arg(long, value_name = "N")]
    pub(crate) budget: Option<usize>,
    /// The budget for models whose name matches PATTERN (a glob: * and ?),
    /// e.g. 'gpt-4o*=100000' (repeatable; the first match wins).
    #[arg(long, value_name = "PATTERN=N", value_parser = model_rule)]
    pub(crate) model_budget: Vec<(String, usize)>,
    /// The context window of models matching PATTERN: the budget is the
    /// window less the request's max_tokens (max_completion_tokens,
    /// max_output_tokens) (repeatable; --model-budget is looked at first).
    #[arg(long, value_name = "PATTERN=N", value_parser = model_rule)]
    pub(crate) model_window: Vec<(String, usize)>,
    /// heuristic (4 characters a token), o200k_base, cl100k_base, or an OpenAI model name.
    #[arg(long, default_value = "o200k_base")]
    pub(crate) tokenizer: String,
    /// The summary and what is folded into it.
    #[command(flatten)]
    pub(crate) fold: FoldArgs,
    /// The summarizer.
    #[command(flatten)]
    pub(crate) summarize: SummarizeArgs,
    /// Share summaries through Redis (redis://host[:port][/db]) with every
    /// proxy started with the same --cache-secret.
    #[arg(long, value_name = "URL")]
    pub(crate) cache_redis: Option<String>,
    /// The secret tenants' cache namespaces are keyed with (default:
    /// $CHATFOLD_CACHE_SECRET, else one made at start, which no other
    /// process shares).
    #[arg(long, value_name = "SECRET")]
    pub(crate) cache_secret: Option<String>,
    /// Most summaries kept in process.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub(crate) cache_entries: usize,
    /// Largest request body accepted, in bytes (413 past it).
    #[arg(long, value_name = "BYTES", default_value_t = 32 << 20)]
    pub(crate) max_body: u64,
    /// Seconds a client may take to send a request's headers and body.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub(crate) read_timeout: f64,
    /// Seconds to connect to the upstream.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub(crate) connect_timeout: f64,
    /// Seconds the upstream may take to start its response.
    #[arg(long, value_name = "SECS", default_value_t = 600.0)]
    pub(crate) upstream_timeout: f64,
    /// Seconds in-flight requests may take to finish after SIGTERM or Ctrl-C
    /// (then summarize commands still running are killed).
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub(crate) shutdown_timeout: f64,
    /// Most requests folded at once (each on a thread of its own, with
    /// its memos of what it read, up to about 4 MiB); more wait their turn.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) fold_threads: u16,
    /// Who answers the Responses API's compaction: on-404 (chatfold answers
    /// /v1/responses/compact when the upstream says 404, and
    /// context_management unless the upstream is OpenAI's API), always
    /// (chatfold, for any upstream), never (the upstream).
    #[arg(long, value_name = "MODE", value_enum, default_value = "on-404")]
    pub(crate) responses_compaction: CompactionMode,
    /// Who answers Anthropic's context_management on /v1/messages
    /// (compact_20260112, clear_tool_uses_20250919, clear_thinking_20251015):
    /// auto (the upstream when it is api.anthropic.com, chatfold for any
    /// other), always (chatfold), never (the upstream), on-reject (the
    /// upstream, unless it rejects the field: then chatfold, once).
    #[arg(long, value_name = "MODE", value_enum, default_value = "auto")]
    pub(crate) anthropic_context_management: ManagedMode,
    /// No log line per request.
    #[arg(long)]
    pub(crate) quiet: bool,
}

/// `PATTERN=N`, as --model-budget and --model-window take it.
fn model_rule(text: &str) -> Result<(String, usize), String> {
    let (pattern, n) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?} is not PATTERN=N"))?;
    let n = n
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{n:?} is not a positive number of tokens"))?;
    Ok((pattern.trim().to_owned(), n))
}

/// Who a Responses request's compaction is for, as `--responses-compaction`
/// says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CompactionMode {
    /// `/v1/responses/compact` forwarded, answered by chatfold when the
    /// upstream says 404; `context_management` answered by chatfold unless
    /// the upstream is OpenAI's own API.
    #[value(name = "on-404")]
    On404,
    /// chatfold answers both, whatever the upstream.
    Always,
    /// Both go to the upstream as they came (it compacts for itself).
    Never,
}

/// Who answers `context_management` on `/v1/messages`, as
/// `--anthropic-context-management` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ManagedMode {
    /// The upstream when it is Anthropic's own API, chatfold for any other.
    Auto,
    /// chatfold, whatever the upstream.
    Always,
    /// The upstream: the field goes as it came.
    Never,
    /// The upstream, unless it rejects the field: then the request is sent
    /// once more, without it, chatfold answering.
    #[value(name = "on-reject")]
    OnReject,
}
