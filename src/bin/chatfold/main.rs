//! `chatfold`: compact, count and explain chat histories from the shell.
//!
//! The rooms: `flags` (the command line's definitions), `io` (reading the
//! history, writing the results), `setup` (the library's objects from the
//! flags), `summarizers` (the shell and HTTP summarizers, the API-key
//! rules), `report` (the report and `explain`'s text), `messages` (the
//! words), `commands` (each subcommand), `body` (the compaction path
//! `compact` and `serve` share), `serve` (the proxy). This file parses, runs, maps
//! errors to exit codes and installs the logger.

mod body;
mod commands;
mod flags;
mod io;
mod messages;
mod report;
mod serve;
mod setup;
mod summarizers;

use std::fmt::Write as _;
use std::process::ExitCode;

use chatfold::Error;
use clap::Parser;

use crate::flags::{Cli, Cmd};

/// The exit codes (`messages::EXIT_CODES` says them to the user).
pub(crate) mod exit {
    /// Bad input: not JSON, the wrong shape, a malformed message, an unreadable file.
    pub(crate) const BAD_INPUT: u8 = 1;
    /// Bad usage: flags the library or the command refuses.
    pub(crate) const USAGE: u8 = 2;
    /// The summarizer failed.
    pub(crate) const SUMMARIZER: u8 = 3;
    /// The budget is unreachable under `--strict`.
    pub(crate) const UNREACHABLE: u8 = 4;
    /// The output or the report cannot be written.
    pub(crate) const CANNOT_WRITE: u8 = 5;
}

/// An error and the exit code it maps to.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// What `error:` says.
    pub(crate) message: String,
}

impl Failure {
    /// A failure with its code and message.
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::InvalidInput { .. } | Error::InvalidMessage { .. } | Error::InvalidState { .. } => {
                exit::BAD_INPUT
            }
            Error::Summarize(_) | Error::EmptySummary => exit::SUMMARIZER,
            Error::BudgetUnreachable { .. } | Error::PinnedOverBudget { .. } => exit::UNREACHABLE,
            _ => exit::USAGE,
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

/// Runs the subcommand.
fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Cmd::Compact(args) => commands::compact(&args),
        Cmd::Count { input } => commands::count(&input),
        Cmd::Explain { budget } => commands::explain(&budget),
        Cmd::Serve(args) => serve::serve(&args),
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

/// Installs the logger, parses the command line, runs it and exits with its code.
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
