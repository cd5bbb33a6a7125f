//! The crate's one error type.

use std::fmt;

/// A boxed error from a summarizer, a counter or another user-supplied part.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with chatfold's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in chatfold.
///
/// Every error leaves the caller's data as it was: messages are borrowed, and a
/// memory's state is only changed after every fallible step has succeeded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is out of range (budget 0, `keep_recent` above the budget,
    /// an empty summary prefix, a summary role that cannot carry a summary).
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong, in words.
        reason: String,
    },

    /// A message in the input does not have the shape of a chat message.
    #[error("message {index}: {reason}")]
    InvalidMessage {
        /// Position of the message in the input list.
        index: usize,
        /// What is wrong with it.
        reason: String,
    },

    /// The input as a whole is not a history (not JSON, not a list ...).
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What is wrong, in words.
        reason: String,
    },

    /// Saved memory state could not be read.
    #[error("invalid state: {reason}")]
    InvalidState {
        /// What is wrong, in words.
        reason: String,
    },

    /// The summarizer returned an error.
    #[error("summarizer failed: {0}")]
    Summarize(#[source] BoxError),

    /// The summarizer returned an empty (or all-whitespace) summary.
    #[error("summarizer returned an empty summary")]
    EmptySummary,

    /// In strict mode: the result would be over the budget, because the
    /// system messages, the latest unit and the summary do not fit in it.
    #[error("budget of {budget} tokens is unreachable: the result needs {required} tokens")]
    BudgetUnreachable {
        /// The configured budget.
        budget: usize,
        /// Tokens the result would take (at least).
        required: usize,
    },

    /// A tokenizer could not be built or is unknown.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
}

impl Error {
    pub(crate) fn config(reason: impl fmt::Display) -> Self {
        Error::InvalidConfig {
            reason: reason.to_string(),
        }
    }

    pub(crate) fn message(index: usize, reason: impl fmt::Display) -> Self {
        Error::InvalidMessage {
            index,
            reason: reason.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_is_send_sync_static() {
        fn assert_bounds<T: Send + Sync + 'static + std::error::Error>() {}
        assert_bounds::<Error>();
    }

    #[test]
    fn messages_are_lowercase_without_period() {
        let errors = [
            Error::config("budget must be at least 1"),
            Error::message(3, "role must be a string"),
            Error::EmptySummary,
            Error::BudgetUnreachable {
                budget: 10,
                required: 20,
            },
        ];
        for e in errors {
            let text = e.to_string();
            assert!(!text.ends_with('.'), "{text}");
            assert!(text.chars().next().is_some_and(|c| c.is_lowercase()), "{text}");
        }
    }
}
