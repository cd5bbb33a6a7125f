//! `chatfold`: compact, count and explain chat histories from the shell.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chatfold::{
    AnthropicSummarizer, ClearToolResults, Compaction, Compactor, Error, Extractive, Fate, FileCache,
    FoldPolicy, Format, History, HttpSummarizer, NamedCounter, OpenAiSummarizer, Plan, RedisCache,
    Summarizer, SummaryCache, SummaryRequest, TokenCounter,
};
use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  bad input (not JSON, wrong shape, a malformed message); stderr says which message
  2  bad usage (budget 0, keep-recent above the budget, unknown tokenizer ...)
  3  the summarizer failed (non-zero exit, empty output, time-out, an HTTP error)
  4  the budget is unreachable and --strict was given
On every error stdout stays empty.";

/// Keep LLM chat histories inside a token budget.
///
/// Reads a JSON array of messages, or a Chat Completions request body (an
/// object with a "messages" array), from INPUT or standard input.
#[derive(Parser, Debug)]
#[command(name = "chatfold", version, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Compact a history to fit the budget; writes it to stdout in the shape it came in.
    Compact(Box<CompactArgs>),
    /// Print the history's token count (OpenAI chat accounting).
    Count {
        #[command(flatten)]
        input: InputArgs,
    },
    /// Show what compact would do, message by message, without summarizing.
    Explain {
        #[command(flatten)]
        budget: BudgetArgs,
    },
}

/// What `compact` takes.
#[derive(Args, Debug)]
struct CompactArgs {
    #[command(flatten)]
    budget: BudgetArgs,
    #[command(flatten)]
    summarize: SummarizeArgs,
    #[command(flatten)]
    cache: CacheArgs,
    /// Fail (exit 4) instead of writing an over-budget result.
    #[arg(long)]
    strict: bool,
    /// Write a JSON report of what was kept, hoisted and folded to FILE.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Indent the JSON output.
    #[arg(long)]
    pretty: bool,
}

/// Which summarizer `compact` uses (the built-in extractive one unless told).
#[derive(Args, Debug)]
struct SummarizeArgs {
    /// Shell command that writes the summary: it reads the transcript on
    /// stdin, and CHATFOLD_MAX_SUMMARY_TOKENS in its environment. Default:
    /// the built-in extractive summarizer (no model, no network).
    #[arg(long, value_name = "CMD", conflicts_with = "summarize_url")]
    summarize_cmd: Option<String>,
    /// Summarize with an LLM at this base URL: an OpenAI-compatible API
    /// (https://api.openai.com/v1, Ollama's http://localhost:11434/v1, vLLM,
    /// Gemini, OpenRouter) or Anthropic's (https://api.anthropic.com/v1).
    #[arg(long, value_name = "URL", requires = "summarize_model")]
    summarize_url: Option<String>,
    /// The model to ask, with --summarize-url.
    #[arg(long, value_name = "NAME", requires = "summarize_url")]
    summarize_model: Option<String>,
    /// The API's shape, with --summarize-url (default: anthropic for an
    /// anthropic.com URL, else openai).
    #[arg(long, value_name = "PROVIDER", requires = "summarize_url")]
    summarize_provider: Option<Provider>,
    /// The environment variable holding the API key. Default: OPENAI_API_KEY
    /// or ANTHROPIC_API_KEY, sent only to openai.com or anthropic.com and to
    /// local servers (which need none); any other host needs this flag.
    #[arg(long, value_name = "VAR", requires = "summarize_url")]
    api_key_env: Option<String>,
    /// Seconds the summarizer may take: the whole command, or one HTTP
    /// attempt (default: 120 for a command, 60 for HTTP).
    #[arg(long, value_name = "SECS")]
    summarize_timeout: Option<f64>,
    /// How many times a failed HTTP attempt is retried (429, 5xx, time-outs,
    /// connection errors).
    #[arg(long, value_name = "N", default_value_t = 3, requires = "summarize_url")]
    summarize_retries: u32,
}

/// The HTTP API shapes --summarize-url speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Provider {
    /// OpenAI-compatible Chat Completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
}

#[derive(Args, Debug)]
struct InputArgs {
    /// heuristic (4 characters a token), o200k_base, cl100k_base, or an OpenAI model name.
    #[arg(long, default_value = "o200k_base")]
    tokenizer: String,
    /// The request format: openai or anthropic (default: what the body says;
    /// OpenAI's when it says neither).
    #[arg(long)]
    format: Option<String>,
    /// The history (default: standard input).
    input: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct BudgetArgs {
    /// Most tokens the compacted history may take.
    #[arg(long)]
    budget: usize,
    /// Tokens of recent turns to keep verbatim (default: half the budget).
    #[arg(long)]
    keep_recent: Option<usize>,
    /// Do not keep the identifiers of folded turns in a ledger section after the summary.
    #[arg(long)]
    no_ledger: bool,
    /// The most of the summary's allowance the ledger may take, in percent.
    #[arg(long, value_name = "PERCENT", default_value_t = 33, value_parser = clap::value_parser!(u8).range(0..=100))]
    ledger_percent: u8,
    /// Before compacting, replace old tool results with a placeholder, keeping the newest N verbatim.
    #[arg(long, value_name = "N")]
    clear_tool_results: Option<usize>,
    /// With --clear-tool-results: clear only results of at least this many tokens.
    #[arg(long, value_name = "TOKENS", default_value_t = 200)]
    clear_min_tokens: usize,
    /// With --clear-tool-results: never clear the results of this tool (repeatable).
    #[arg(long, value_name = "TOOL")]
    clear_exclude: Vec<String>,
    /// Fold at most this many tokens per summarizer call: a longer middle is
    /// folded in chunks, each extending the previous chunk's summary.
    #[arg(long, value_name = "TOKENS")]
    max_fold_input_tokens: Option<usize>,
    #[command(flatten)]
    input: InputArgs,
}

/// Where `compact` keeps summaries between runs.
#[derive(Args, Debug)]
struct CacheArgs {
    /// Keep summaries in this folder and reuse them: a client that sends its
    /// whole transcript each time then costs a summarizer call only every
    /// few requests.
    #[arg(long, value_name = "DIR", conflicts_with = "cache_redis")]
    cache_dir: Option<PathBuf>,
    /// Keep summaries in Redis (redis://host[:port][/db]), shared by every
    /// process that uses it.
    #[arg(long, value_name = "URL")]
    cache_redis: Option<String>,
    /// With a cache: keep up to this many tokens of recent turns to land on a
    /// cut whose summary is cached (default: --keep-recent, no stepping).
    #[arg(long, value_name = "TOKENS")]
    keep_recent_max: Option<usize>,
}

/// An error and the exit code it maps to.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::InvalidInput { .. } | Error::InvalidMessage { .. } | Error::InvalidState { .. } => 1,
            Error::Summarize(_) | Error::EmptySummary => 3,
            Error::BudgetUnreachable { .. } => 4,
            _ => 2,
        };
        // Each error says what failed; its source, why.
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            let _ = write!(message, ": {s}");
            source = s.source();
        }
        Failure::new(code, message)
    }
}

/// The input, read message by message, and how to give it back unchanged.
struct Input {
    history: History,
    source: Source,
}

/// Where the input came from, to write it back byte for byte.
enum Source {
    File(PathBuf),
    /// Standard input, as read, unless it was longer than [`KEEP_STDIN`].
    Stdin(Option<Vec<u8>>),
}

/// The most standard input kept to write back unchanged; a longer input under
/// budget is written back as equivalent JSON instead.
const KEEP_STDIN: usize = 8 << 20;

/// Passes bytes through, keeping a copy of the first [`KEEP_STDIN`].
struct Keep<R> {
    inner: R,
    copy: Option<Vec<u8>>,
}

impl<R: Read> Read for Keep<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(copy) = &mut self.copy {
            if copy.len() + n > KEEP_STDIN {
                self.copy = None;
            } else {
                copy.extend_from_slice(&buf[..n]);
            }
        }
        Ok(n)
    }
}

fn read_input(args: &InputArgs) -> Result<Input, Failure> {
    let format = args.format.as_deref().map(str::parse::<Format>).transpose()?;
    let mut input = read_from(args.input.as_deref())?;
    if let Some(format) = format {
        input.history = input.history.into_format(format)?;
    }
    Ok(input)
}

fn read_from(path: Option<&Path>) -> Result<Input, Failure> {
    match path {
        Some(p) => {
            let file = std::fs::File::open(p)
                .map_err(|e| Failure::new(1, format!("cannot read {}: {e}", p.display())))?;
            Ok(Input {
                history: History::from_reader(file)?,
                source: Source::File(p.to_owned()),
            })
        }
        None => {
            let mut stdin = Keep {
                inner: std::io::stdin().lock(),
                copy: Some(Vec::new()),
            };
            let history = History::from_reader(&mut stdin)?;
            Ok(Input {
                history,
                source: Source::Stdin(stdin.copy),
            })
        }
    }
}

/// The input as it came, for an unchanged result.
fn unchanged(input: &Input, pretty: bool) -> Result<Vec<u8>, Failure> {
    match &input.source {
        Source::File(path) => {
            std::fs::read(path).map_err(|e| Failure::new(1, format!("cannot read {}: {e}", path.display())))
        }
        Source::Stdin(Some(bytes)) => Ok(bytes.clone()),
        Source::Stdin(None) => to_json(&input.history.to_json(), pretty),
    }
}

fn compactor(args: &BudgetArgs) -> Result<Compactor<NamedCounter>, Failure> {
    let counter = args.input.tokenizer.parse::<NamedCounter>()?;
    let mut c = Compactor::new(args.budget).counter(counter).policy(
        FoldPolicy::new()
            .ledger(!args.no_ledger)
            .ledger_percent(args.ledger_percent),
    );
    c.keep_recent = args.keep_recent;
    if let Some(keep) = args.clear_tool_results {
        let clearing = args.clear_exclude.iter().fold(
            ClearToolResults::new()
                .keep_recent(keep)
                .min_tokens(args.clear_min_tokens),
            |c, name| c.exclude(name.clone()),
        );
        c = c.clear_tool_results(clearing);
    }
    c.max_fold_input_tokens = args.max_fold_input_tokens;
    Ok(c)
}

/// `compactor` with the cache the flags name, its keys in the summarizer's
/// namespace.
fn cached(
    compactor: Compactor<NamedCounter>,
    args: &CacheArgs,
    summarize: &SummarizeArgs,
) -> Result<Compactor<NamedCounter>, Failure> {
    let store: Arc<dyn SummaryCache> = match (&args.cache_dir, &args.cache_redis) {
        (Some(dir), _) => Arc::new(FileCache::new(dir)),
        (None, Some(url)) => Arc::new(RedisCache::new(url)?),
        (None, None) => return Ok(compactor),
    };
    let namespace = match (
        &summarize.summarize_cmd,
        &summarize.summarize_url,
        &summarize.summarize_model,
    ) {
        (Some(cmd), _, _) => format!("cmd {cmd}"),
        (None, Some(url), Some(model)) => format!("http {url} {model}"),
        _ => "extractive".to_owned(),
    };
    let mut compactor = compactor.cache(store, namespace);
    compactor.keep_recent_max = args.keep_recent_max;
    Ok(compactor)
}

/// The summarizer the flags chose.
enum Chosen {
    Extractive(Extractive<NamedCounter>),
    Shell(ShellSummarizer),
    OpenAi(OpenAiSummarizer),
    Anthropic(AnthropicSummarizer),
}

impl Chosen {
    fn new(args: &SummarizeArgs, counter: NamedCounter) -> Result<Chosen, Failure> {
        let timeout = match args.summarize_timeout {
            Some(secs) if secs > 0.0 && Duration::try_from_secs_f64(secs).is_ok() => {
                Some(Duration::from_secs_f64(secs))
            }
            Some(_) => {
                return Err(Failure::new(
                    2,
                    "--summarize-timeout must be a positive number of seconds",
                ));
            }
            None => None,
        };
        if let Some(command) = &args.summarize_cmd {
            return Ok(Chosen::Shell(ShellSummarizer {
                command: command.clone(),
                timeout: timeout.unwrap_or(Duration::from_secs(120)),
            }));
        }
        let (Some(url), Some(model)) = (&args.summarize_url, &args.summarize_model) else {
            return Ok(Chosen::Extractive(Extractive::with_counter(counter)));
        };
        let Some((scheme, host)) = url_host(url) else {
            return Err(Failure::new(
                2,
                format!("--summarize-url {url:?} is not an http:// or https:// URL"),
            ));
        };
        let provider = args.summarize_provider.unwrap_or(
            if host == "anthropic.com" || host.ends_with(".anthropic.com") {
                Provider::Anthropic
            } else {
                Provider::Openai
            },
        );
        let (default_var, domain) = match provider {
            Provider::Openai => ("OPENAI_API_KEY", "openai.com"),
            Provider::Anthropic => ("ANTHROPIC_API_KEY", "anthropic.com"),
        };
        let own = host == domain || host.ends_with(&format!(".{domain}"));
        let read = |var: &str| std::env::var(var).ok().map(|k| k.trim().to_owned());
        let key = match &args.api_key_env {
            // Named on the command line: an empty variable means no key.
            Some(var) => match read(var) {
                Some(key) => Some(key).filter(|k| !k.is_empty()),
                None => return Err(Failure::new(2, format!("--api-key-env: {var} is not set"))),
            },
            // The default variable goes to the provider's own hosts and to local servers only.
            None => match read(default_var).filter(|k| !k.is_empty()) {
                key if is_local(host) => key,
                Some(key) if own => Some(key),
                None if own => {
                    return Err(Failure::new(
                        2,
                        format!(
                            "{scheme}://{host} needs an API key: set {default_var}, or name the variable that holds it with --api-key-env"
                        ),
                    ));
                }
                _ => {
                    return Err(Failure::new(
                        2,
                        format!(
                            "{scheme}://{host}: name the variable that holds its API key with --api-key-env ({default_var} is only sent to {domain} and to local servers)"
                        ),
                    ));
                }
            },
        };
        let timeout = timeout.unwrap_or(Duration::from_secs(60));
        Ok(match provider {
            Provider::Openai => Chosen::OpenAi(
                with_key(OpenAiSummarizer::new(url, model), key)
                    .timeout(timeout)
                    .retries(args.summarize_retries),
            ),
            Provider::Anthropic => Chosen::Anthropic(
                with_key(AnthropicSummarizer::new(url, model), key)
                    .timeout(timeout)
                    .retries(args.summarize_retries),
            ),
        })
    }
}

fn with_key<P>(summarizer: HttpSummarizer<P>, key: Option<String>) -> HttpSummarizer<P>
where
    P: Clone,
{
    match key {
        Some(key) => summarizer.api_key(key),
        None => summarizer,
    }
}

/// The scheme and host of an http(s) URL.
fn url_host(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if !matches!(scheme, "http" | "https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split_once(']')?.0,
        None => authority.split(':').next()?,
    };
    (!host.is_empty()).then_some((scheme, host))
}

/// Whether `host` is this machine or a private network's (no key expected).
fn is_local(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") || host.ends_with(".localhost") || host.ends_with(".local") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_unspecified(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.is_unspecified() || (ip.segments()[0] & 0xfe00) == 0xfc00
        }
        Err(_) => false,
    }
}

impl Summarizer for Chosen {
    type Error = chatfold::BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error> {
        match self {
            Chosen::Extractive(s) => Ok(s.summarize(request)?),
            Chosen::Shell(s) => Ok(s.summarize(request)?),
            Chosen::OpenAi(s) => Ok(Summarizer::summarize(s, request)?),
            Chosen::Anthropic(s) => Ok(Summarizer::summarize(s, request)?),
        }
    }
}

/// Runs a shell command as the summarizer.
struct ShellSummarizer {
    command: String,
    timeout: Duration,
}

impl Summarizer for ShellSummarizer {
    type Error = String;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, String> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .env("CHATFOLD_MAX_SUMMARY_TOKENS", request.allowance().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run summarize command: {e}"))?;
        let stdin = child.stdin.take();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // A command that exits without reading its input is not an error here.
                if let Some(stdin) = stdin {
                    let mut pipe = std::io::BufWriter::with_capacity(1 << 16, stdin);
                    let _ = request.write_transcript(&mut pipe).and_then(|()| pipe.flush());
                }
            });
            self.wait(&mut child)
        })
    }
}

impl ShellSummarizer {
    /// Waits for the command (killing it at the deadline) and takes its answer.
    fn wait(&self, child: &mut std::process::Child) -> Result<String, String> {
        let stdout = child.stdout.take().map(reader);
        let stderr = child.stderr.take().map(reader);
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "summarize command timed out after {} s",
                        self.timeout.as_secs_f64()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(format!("cannot wait for summarize command: {e}")),
            }
        };
        let out = stdout.map(join_reader).unwrap_or_default();
        let err = stderr.map(join_reader).unwrap_or_default();
        if !status.success() {
            let err = err.trim();
            let code = status
                .code()
                .map_or("a signal".to_owned(), |c| format!("status {c}"));
            return Err(if err.is_empty() {
                format!("summarize command exited with {code}")
            } else {
                format!("summarize command exited with {code}: {err}")
            });
        }
        // Trimmed, and refused when blank, by the library (`FoldPolicy::accept`).
        Ok(out)
    }
}

fn reader(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn join_reader(handle: std::thread::JoinHandle<String>) -> String {
    handle.join().unwrap_or_default()
}

fn fates(compaction_report: &chatfold::Report, fate: Fate) -> Vec<usize> {
    compaction_report.indices(fate).collect()
}

fn report_json(budget: usize, result: &Compaction<'_>) -> Value {
    let r = &result.report;
    json!({
        "budget": budget,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "summarized": result.summarized,
        "over_budget": result.over_budget,
        "summary_truncated": result.summary_truncated,
        "cut": r.cut(),
        "reason": reason(r),
        "kept": fates(r, Fate::Kept),
        "hoisted": fates(r, Fate::Hoisted),
        "folded": fates(r, Fate::Folded),
        "previous_summary": fates(r, Fate::PreviousSummary),
        "cleared": r.cleared(),
        "ledger": r.ledger(),
        "ledger_dropped": r.ledger_dropped(),
        "reused": r.reused(),
        "folds": r.folds(),
    })
}

fn reason(r: &chatfold::Report) -> String {
    let why = match r.reason() {
        chatfold::CutReason::Fits => "the history fits the budget",
        chatfold::CutReason::KeepRecent => "keep-recent reached",
        chatfold::CutReason::Budget => "no more room beside the summary",
        chatfold::CutReason::Start => "every turn after the previous summary fits",
        chatfold::CutReason::Reused => "a cached summary covers every message before it",
        _ => "other",
    };
    match r.aligned_from() {
        Some(from) => format!("{why}; moved from message {from} so the kept part opens with a user turn"),
        None => why.to_owned(),
    }
}

fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Failure::new(1, format!("cannot write output: {e}")))
}

fn to_json(value: &impl serde::Serialize, pretty: bool) -> Result<Vec<u8>, Failure> {
    let mut out = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    }
    .map_err(|e| Failure::new(1, format!("cannot write JSON: {e}")))?;
    out.push(b'\n');
    Ok(out)
}

fn compact(all: &CompactArgs) -> Result<(), Failure> {
    let CompactArgs {
        budget: args,
        summarize,
        cache,
        strict,
        report,
        pretty,
    } = all;
    let (strict, report, pretty) = (*strict, report.as_deref(), *pretty);
    // The tokenizer's tables are built while the input is read.
    let (input, compactor) = std::thread::scope(|scope| {
        let building = scope.spawn(|| compactor(args));
        let input = read_input(&args.input);
        let compactor = building
            .join()
            .unwrap_or_else(|_| Err(Failure::new(2, "cannot build the tokenizer")));
        (input, compactor)
    });
    let compactor = cached(compactor?, cache, summarize)?
        .strict(strict)
        .count_all(report.is_some());
    let input = input?;
    let summarizer = Chosen::new(summarize, compactor.counter)?;
    let result = compactor.compact(&input.history.messages, &summarizer)?;
    if result.summarized && input.history.is_body() && !input.history.format_known() {
        // The summary's place differs: a system message in `messages`
        // (OpenAI) or a block of the top-level `system` (Anthropic).
        return Err(Failure::new(
            2,
            "the body does not say its format (no system prompt, content blocks, tool messages or known model): \
             pass --format openai or --format anthropic",
        ));
    }
    let output = if result.summarized {
        to_json(&input.history.to_json_with(&result.messages), pretty)?
    } else {
        // Unchanged: the input goes back byte for byte.
        unchanged(&input, pretty)?
    };
    if let Some(path) = report {
        let text = to_json(&report_json(args.budget, &result), true)?;
        std::fs::write(path, text)
            .map_err(|e| Failure::new(1, format!("cannot write report {}: {e}", path.display())))?;
    }
    if result.over_budget {
        eprintln!(
            "warning: the result takes {} tokens, over the budget of {}: the system messages and the latest turn do not fit",
            result.tokens_after, args.budget
        );
    }
    write_stdout(&output)?;
    // The process ends here: the OS takes the history back faster than
    // freeing its hundred thousand strings one by one.
    std::mem::forget(result);
    std::mem::forget(input);
    Ok(())
}

fn count(args: &InputArgs) -> Result<(), Failure> {
    let counter = args.tokenizer.parse::<NamedCounter>()?;
    let input = read_input(args)?;
    write_stdout(format!("{}\n", counter.count_messages(&input.history.messages)).as_bytes())
}

fn explain(args: &BudgetArgs) -> Result<(), Failure> {
    let compactor = compactor(args)?.count_all(true);
    let input = read_input(&args.input)?;
    let messages = &input.history.messages;
    let plan: Plan<'_, '_, NamedCounter> = compactor.plan(messages)?;
    let mut out = String::new();
    let report = plan.report();
    let total =
        (0..report.len()).filter_map(|i| report.tokens(i)).sum::<usize>() + compactor.counter.reply_priming();
    let _ = writeln!(
        out,
        "budget {} tokens; history {} tokens in {} messages: {}",
        args.budget,
        total,
        messages.len(),
        if total <= args.budget {
            "fits, nothing to do"
        } else {
            "over budget"
        }
    );
    let folded = plan.folded().map(|request| request.allowance());
    let result = plan.apply("(summary)")?;
    if let Some(allowance) = folded {
        let _ = writeln!(
            out,
            "keep-recent {} tokens; kept part starts at message {} ({}); summary allowance {} tokens",
            compactor.effective_keep_recent(),
            result.report.cut(),
            reason(&result.report),
            allowance
        );
    }
    let _ = writeln!(out, "\n{:>5}  {:<12} {:>7}  fate", "index", "role", "tokens");
    for (i, m) in messages.iter().enumerate() {
        let fate = match result.report.fate(i).unwrap_or(Fate::Kept) {
            Fate::Kept => "kept",
            Fate::Hoisted => "hoisted (kept before the summary)",
            Fate::Folded => "folded",
            Fate::PreviousSummary => "previous summary (folded)",
            _ => "other",
        };
        let tokens = result.report.tokens(i).map_or("-".to_owned(), |t| t.to_string());
        let _ = writeln!(out, "{i:>5}  {:<12} {tokens:>7}  {fate}", m.role.as_str());
    }
    if folded.is_some() {
        let r = &result.report;
        let _ = writeln!(
            out,
            "\nresult: {} hoisted, one summary of at most {} tokens, {} kept; {} folded",
            r.indices(Fate::Hoisted).count(),
            r.allowance(),
            r.indices(Fate::Kept).count(),
            r.indices(Fate::Folded).count() + r.indices(Fate::PreviousSummary).count(),
        );
    } else if total > args.budget {
        let _ = writeln!(
            out,
            "\nnothing can be folded: the system messages and the latest turn alone exceed the budget"
        );
    }
    write_stdout(out.as_bytes())
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Cmd::Compact(args) => compact(&args),
        Cmd::Count { input } => count(&input),
        Cmd::Explain { budget } => explain(&budget),
    }
}

/// Prints the library's warnings (an HTTP summarizer's retries) on stderr.
struct Warnings;

impl log::Log for Warnings {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn && metadata.target().starts_with("chatfold")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("warning: {}", record.args());
        }
    }

    fn flush(&self) {}
}

fn main() -> ExitCode {
    if log::set_logger(&Warnings).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
