//! What the command says to its user: the exit codes' help, its own errors
//! and warnings. (The library's errors bring their own words; the report's
//! fates and reasons are the library's `Display`.)

use std::fmt::Display;
use std::path::Path;

/// The `--help` epilogue: each exit code and whose fault it was.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  bad input (not JSON, wrong shape, a malformed message); stderr says which message
  2  bad usage (budget 0, keep-recent above the budget, unknown tokenizer ...)
  3  the summarizer failed (non-zero exit, empty output, time-out, an HTTP error)
  4  the budget is unreachable and --strict was given
  5  cannot write the output or the report (a closed pipe, a full disk, no such folder)
On every error stdout stays empty.";

/// The input file cannot be opened or read.
pub(crate) fn cannot_read(path: &Path, e: impl Display) -> String {
    format!("cannot read {}: {e}", path.display())
}

/// Standard output cannot be written.
pub(crate) fn cannot_write_output(e: impl Display) -> String {
    format!("cannot write output: {e}")
}

/// The `--report` file cannot be written.
pub(crate) fn cannot_write_report(path: &Path, e: impl Display) -> String {
    format!("cannot write report {}: {e}", path.display())
}

/// A value cannot be written as JSON.
pub(crate) fn cannot_write_json(e: impl Display) -> String {
    format!("cannot write JSON: {e}")
}

/// The tokenizer's builder thread died.
pub(crate) const CANNOT_BUILD_TOKENIZER: &str = "cannot build the tokenizer";

/// A body that says nothing of its format cannot take a summary.
pub(crate) const FORMAT_UNKNOWN: &str = "the body does not say its format (no system prompt, content blocks, \
     tool messages or known model): pass --format openai or --format anthropic";

/// `--summarize-timeout` is not a usable duration.
pub(crate) const BAD_TIMEOUT: &str = "--summarize-timeout must be a positive number of seconds";

/// `--summarize-url` is not an http(s) URL with a plain host.
pub(crate) fn bad_url(url: &str) -> String {
    format!("--summarize-url {url:?} is not an http:// or https:// URL")
}

/// `--api-key-env` names an unset variable.
pub(crate) fn key_var_unset(var: &str) -> String {
    format!("--api-key-env: {var} is not set")
}

/// The provider's own host without its key.
pub(crate) fn key_missing(scheme: &str, host: &str, var: &str) -> String {
    format!(
        "{scheme}://{host} needs an API key: set {var}, or name the variable that holds it with --api-key-env"
    )
}

/// Another host, which the default key is not sent to.
pub(crate) fn key_not_sent(scheme: &str, host: &str, var: &str, domain: &str) -> String {
    format!(
        "{scheme}://{host}: name the variable that holds its API key with --api-key-env \
         ({var} is only sent to {domain} and to local servers)"
    )
}

/// The result is over the budget (without `--strict`); `empty` when it
/// holds no message (what it takes is the request's reply priming).
pub(crate) fn over_budget(tokens: usize, budget: usize, empty: bool) -> String {
    let why = match empty {
        true => "the history has no messages, and a request's reply priming alone takes that many",
        false => "the system messages and the latest turn do not fit",
    };
    format!("the result takes {tokens} tokens, over the budget of {budget}: {why}")
}

/// A trailing tool result whose call is not in the history.
pub(crate) fn unanswered_call(index: usize, id: &str) -> String {
    format!(
        "message {index} is the result of tool call {id:?}, which is not in the history: \
         OpenAI and Anthropic reject such a request"
    )
}

/// The shell summarizer cannot start.
pub(crate) fn cannot_run_command(e: impl Display) -> String {
    format!("cannot run summarize command: {e}")
}

/// A summarize command started while this process ends (it is killed).
pub(crate) const ENDING: &str = "chatfold is ending: the summarize command was stopped";

/// The shell summarizer cannot be waited for.
pub(crate) fn cannot_wait_command(e: impl Display) -> String {
    format!("cannot wait for summarize command: {e}")
}

/// The shell summarizer ran past its deadline.
pub(crate) fn command_timed_out(secs: f64) -> String {
    format!("summarize command timed out after {secs} s")
}

/// The shell summarizer failed; `err` is its trimmed stderr.
pub(crate) fn command_failed(status: &str, err: &str) -> String {
    if err.is_empty() {
        format!("summarize command exited with {status}")
    } else {
        format!("summarize command exited with {status}: {err}")
    }
}
