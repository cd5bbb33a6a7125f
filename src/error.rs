//! The crate's one error type, and the structured details it carries.
//!
//! [`Error`], [`Result`] and [`BoxError`] are also at the crate's root; the
//! detail types ([`ConfigError`], [`InputError`], [`FieldError`] ...) live
//! here, since most callers only name them to match on them.
//!
//! # One convention
//!
//! - **Transparent data.** Every detail type is an enum whose variants have
//!   public fields (several kinds: [`ConfigError`], [`InputError`],
//!   [`StateError`], [`TokenizerError`]) or a `#[non_exhaustive]` struct
//!   with public fields (one kind: [`FieldError`], [`JsonError`],
//!   [`ConversionError`], [`FormatMark`]). Match on the variants and read
//!   the fields (which setting, which message, which line): they are the
//!   API. The accessor methods (`problem.field()`, `json.line()`) are
//!   conveniences over the same fields. The Display wording is for people
//!   and may change.
//! - **Display says what failed; `source()` says why.** No Display prints
//!   its cause: walking a chain (`e.to_string()`, then each
//!   [`source`](std::error::Error::source)'s) says every cause once.
//! - **A detail is part of its error's Display, never its `source()`.**
//!   [`Error::InvalidConfig`]'s text is `invalid configuration: ` and the
//!   [`ConfigError`]'s own text: the detail says *what* is wrong, in more
//!   words, not a cause. The detail's cause, when it has one (the `regex`
//!   error of a [`ConfigError::Invalid`], the I/O error of an
//!   [`InputError::Io`]), is the `Error`'s `source()`. A cause that is
//!   another error value is always a `source()`.
//!
//! ```
//! use chatfold::{Error, FoldPolicy};
//! use chatfold::error::ConfigError;
//!
//! let err = FoldPolicy::new().ledger_pattern("ORD#[0-9").unwrap_err();
//! assert!(matches!(err, Error::InvalidConfig(ConfigError::Invalid { setting: "ledger_pattern", .. })));
//! assert_eq!(err.to_string(), r#"invalid configuration: ledger_pattern "ORD#[0-9" is not valid"#);
//! // The regex crate's words are the source, said once.
//! let why = std::error::Error::source(&err).unwrap().to_string();
//! assert!(why.contains("unclosed character class"), "{why}");
//! ```

use std::fmt;

/// A boxed error from a summarizer, a counter or another user-supplied part.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with chatfold's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in chatfold.
///
/// The variants that carry a detail type say it in their Display; their
/// [`source`](std::error::Error::source) is the detail's cause, if any
/// (see the [module docs](self)).
///
/// Every error leaves the caller's data as it was: messages are borrowed, and a
/// memory's state is only changed after every fallible step has succeeded.
///
/// # Examples
///
/// ```
/// use chatfold::{Compactor, Error, History};
/// use chatfold::error::ConfigError;
///
/// let err = Compactor::new(100).keep_recent(500).plan(&[]).unwrap_err();
/// assert!(matches!(
///     err,
///     Error::InvalidConfig(ConfigError::TooLarge { setting: "keep_recent", value: 500, max: 100, .. })
/// ));
///
/// let err = History::from_json_str(r#"[{"role": "user"}, {"role": 7}]"#).unwrap_err();
/// let Error::InvalidMessage { index, problem } = err else { panic!() };
/// assert_eq!((index, problem.field(), problem.found()), (1, "role", Some("a number")));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A setting is out of range (budget 0, `keep_recent` above the budget,
    /// an empty summary prefix, a summary role that cannot carry a summary).
    InvalidConfig(ConfigError),

    /// A message in the input does not have the shape of a chat message.
    InvalidMessage {
        /// Position of the message in the input list.
        index: usize,
        /// The field at fault.
        problem: FieldError,
    },

    /// The input as a whole is not a history (not JSON, not UTF-8, not a
    /// list, unreadable).
    InvalidInput(InputError),

    /// Saved memory state could not be read.
    InvalidState(StateError),

    /// The summarizer returned an error (the [`source`](std::error::Error::source)).
    Summarize(BoxError),

    /// The summarizer returned an empty (or all-whitespace) summary.
    EmptySummary,

    /// In strict mode: the result would be over the budget, because the
    /// system messages, the latest unit and the summary do not fit in it.
    BudgetUnreachable {
        /// The configured budget.
        budget: usize,
        /// Tokens the result would take (at least).
        required: usize,
    },

    /// The pinned messages ([`Pin`](crate::Pin)) and the system messages
    /// alone take more than the budget: no compaction can keep them all
    /// and fit.
    PinnedOverBudget {
        /// The configured budget.
        budget: usize,
        /// Tokens of the pinned and system messages (and the reply priming).
        pinned: usize,
    },

    /// A tokenizer could not be built or is unknown.
    Tokenizer(TokenizerError),

    /// A history has something the other format cannot say without loss
    /// ([`History::convert`](crate::History::convert)).
    Conversion(ConversionError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(e) => write!(f, "invalid configuration: {e}"),
            Error::InvalidMessage { index, problem } => write!(f, "message {index}: {problem}"),
            Error::InvalidInput(e) => write!(f, "invalid input: {e}"),
            Error::InvalidState(e) => write!(f, "invalid state: {e}"),
            Error::Summarize(_) => f.write_str("summarizer failed"),
            Error::EmptySummary => f.write_str("summarizer returned an empty summary"),
            Error::BudgetUnreachable { budget, required } => write!(
                f,
                "budget of {budget} tokens is unreachable: the result needs {required} tokens"
            ),
            Error::PinnedOverBudget { budget, pinned } => write!(
                f,
                "the pinned and system messages take {pinned} tokens, over the budget of {budget}: pin fewer messages or raise the budget"
            ),
            Error::Tokenizer(e) => write!(f, "tokenizer: {e}"),
            Error::Conversion(e) => write!(f, "cannot convert: {e}"),
        }
    }
}

impl std::error::Error for Error {
    /// The cause: the summarizer's error, or the cause of the detail (the
    /// detail itself is in Display).
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Summarize(e) => Some(&**e),
            Error::InvalidConfig(e) => e.source(),
            Error::InvalidMessage { problem, .. } => problem.source(),
            Error::InvalidInput(e) => e.source(),
            Error::InvalidState(e) => e.source(),
            Error::Tokenizer(e) => e.source(),
            Error::Conversion(e) => e.source(),
            Error::EmptySummary | Error::BudgetUnreachable { .. } | Error::PinnedOverBudget { .. } => None,
        }
    }
}

/// What in a history has no lossless form in the other format.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConversionError {
    /// The index of the message (in [`History::messages`](crate::History::messages)).
    pub message: usize,
    /// The field or block in it (`content[2]`, `content[0].cache_control`,
    /// `name`).
    pub field: String,
    /// What it is (`a \`thinking\` block`).
    pub what: String,
    /// The format it could not be converted to.
    pub to: crate::Format,
}

impl ConversionError {
    pub(crate) fn new(message: usize, field: String, what: String, to: crate::Format) -> Self {
        ConversionError {
            message,
            field,
            what,
            to,
        }
    }

    /// The index of the message (in [`History::messages`](crate::History::messages)).
    pub fn message(&self) -> usize {
        self.message
    }

    /// The field or block in it (`content[2]`, `content[0].cache_control`,
    /// `name`).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What it is (`a \`thinking\` block`).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The format it could not be converted to.
    pub fn to(&self) -> crate::Format {
        self.to
    }
}

impl fmt::Display for ConversionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message {}: {} ({}) has no lossless form in {}'s format",
            self.message, self.field, self.what, self.to
        )
    }
}

impl std::error::Error for ConversionError {}

/// A setting out of range, or a value a setting cannot take.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `setting` is `value`, below its least allowed value `min` (the value
    /// of the setting named `limit`, when another setting bounds it).
    #[error("{setting} ({value}) must be at least {min}{}", limit.map(|l| format!(" (the {l})")).unwrap_or_default())]
    TooSmall {
        /// The setting, as its field or method is named (`budget`).
        setting: &'static str,
        /// Its value.
        value: usize,
        /// The least it may be.
        min: usize,
        /// The setting whose value `min` is, if any (`keep_recent`).
        limit: Option<&'static str>,
    },
    /// `setting` is `value`, above `max` (the value of the setting named
    /// `limit`, when another setting bounds it).
    #[error("{setting} ({value}) must be at most {max}{}", limit.map(|l| format!(" (the {l})")).unwrap_or_default())]
    TooLarge {
        /// The setting.
        setting: &'static str,
        /// Its value.
        value: usize,
        /// The most it may be.
        max: usize,
        /// The setting whose value `max` is, if any (`budget`).
        limit: Option<&'static str>,
    },
    /// `setting` is empty, and must not be.
    #[error("{setting} must not be empty")]
    Empty {
        /// The setting.
        setting: &'static str,
    },
    /// `setting` is `value`, which it cannot take, for the reason given.
    #[error("{setting} cannot be {value}: {why}")]
    NotAllowed {
        /// The setting.
        setting: &'static str,
        /// The value given.
        value: String,
        /// Why not.
        why: &'static str,
    },
    /// A prompt template names a slot that does not exist.
    #[error(
        "prompt: {{{slot}}} is not a slot (the slots are {{allowance}}, {{words}}, {{previous}}, {{transcript}}, {{ledger}})"
    )]
    UnknownSlot {
        /// The name between the braces.
        slot: String,
    },
    /// A prompt has no template with a slot it needs.
    #[error("prompt: neither template has the {{{slot}}} slot")]
    MissingSlot {
        /// The slot's name.
        slot: &'static str,
    },
    /// `setting` could not be used (a pattern that does not compile, a URL
    /// that does not parse), for the reason `source` gives.
    #[error("{setting} {value:?} is not valid")]
    Invalid {
        /// The setting.
        setting: &'static str,
        /// The value given (a URL without what may be a password).
        value: String,
        /// Why: the [`source`](std::error::Error::source) (not in Display).
        source: BoxError,
    },
}

impl ConfigError {
    /// The setting at fault (`"prompt"` for a template's slots).
    pub fn setting(&self) -> &'static str {
        match self {
            ConfigError::TooSmall { setting, .. }
            | ConfigError::TooLarge { setting, .. }
            | ConfigError::Empty { setting }
            | ConfigError::NotAllowed { setting, .. }
            | ConfigError::Invalid { setting, .. } => setting,
            ConfigError::UnknownSlot { .. } | ConfigError::MissingSlot { .. } => "prompt",
        }
    }

    /// `setting` must be at least `min`, if it is below.
    pub(crate) fn at_least(
        setting: &'static str,
        value: usize,
        min: usize,
        limit: Option<&'static str>,
    ) -> Result<(), Error> {
        if value < min {
            return Err(Error::InvalidConfig(ConfigError::TooSmall {
                setting,
                value,
                min,
                limit,
            }));
        }
        Ok(())
    }

    /// `setting` must be at most `max` (the value of `limit`), if it is above.
    pub(crate) fn at_most(
        setting: &'static str,
        value: usize,
        max: usize,
        limit: Option<&'static str>,
    ) -> Result<(), Error> {
        if value > max {
            return Err(Error::InvalidConfig(ConfigError::TooLarge {
                setting,
                value,
                max,
                limit,
            }));
        }
        Ok(())
    }
}

/// A JSON field that is missing or has the wrong type: in a message, a tool
/// call, or saved state.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FieldError {
    /// The field's path (`role`, `tool_calls[0].function.name`); empty for
    /// the value itself (a message that is not an object).
    pub field: String,
    /// What the field should be: `"a string"`, `"an object"` ...
    pub expected: &'static str,
    /// What it was (`"a number"`, `"null"` ...); `None` when it is missing.
    pub found: Option<&'static str>,
}

impl FieldError {
    /// `field` is missing; it should be `expected`.
    pub(crate) fn missing(field: impl Into<String>, expected: &'static str) -> Self {
        FieldError {
            field: field.into(),
            expected,
            found: None,
        }
    }

    /// `field` is `found`, not `expected`.
    pub(crate) fn wrong(field: impl Into<String>, expected: &'static str, found: &serde_json::Value) -> Self {
        FieldError {
            field: field.into(),
            expected,
            found: Some(kind_of(found)),
        }
    }

    /// The same error one level down: inside `parent` (`tool_calls[2]`).
    pub(crate) fn within(mut self, parent: &str) -> Self {
        self.field = match self.field.is_empty() {
            true => parent.to_owned(),
            false => format!("{parent}.{}", self.field),
        };
        self
    }

    /// The field's path (`role`, `tool_calls[0].function.name`); empty for
    /// the value itself (a message that is not an object).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What the field should be: `"a string"`, `"an object"` ...
    pub fn expected(&self) -> &'static str {
        self.expected
    }

    /// What it was (`"a number"`, `"null"` ...); `None` when it is missing.
    pub fn found(&self) -> Option<&'static str> {
        self.found
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.field.as_str(), self.found) {
            (field, None) => write!(f, "{field} is missing (it must be {})", self.expected),
            ("", Some(found)) => write!(f, "expected {}, not {found}", self.expected),
            (field, Some(found)) => write!(f, "{field} must be {}, not {found}", self.expected),
        }
    }
}

impl std::error::Error for FieldError {}

/// Text that is not JSON: where, and serde_json's words for what.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonError {
    /// The line (from 1) where the text stops being JSON; 0 when unknown.
    pub line: usize,
    /// The column (bytes from the line's start, from 1) on that line.
    pub column: usize,
    /// What is wrong, in serde_json's words.
    pub message: String,
}

impl JsonError {
    /// From serde_json's error.
    pub(crate) fn from_serde(e: &serde_json::Error) -> Self {
        let text = e.to_string();
        let message = match text.rsplit_once(" at line ") {
            Some((message, _)) if e.line() > 0 => message.to_owned(),
            _ => text,
        };
        JsonError {
            line: e.line(),
            column: e.column(),
            message,
        }
    }

    /// An error found at the end of the text (no position known).
    pub(crate) fn at_end() -> Self {
        JsonError {
            line: 0,
            column: 0,
            message: "EOF while parsing a value".to_owned(),
        }
    }

    /// The error a text gave that starts with `prefix` bytes of our own (on
    /// one line) and goes on with a larger text from `(line, column)`, moved
    /// to that text's line and column.
    pub(crate) fn moved(mut self, prefix: usize, line: usize, column: usize) -> Self {
        match self.line {
            0 => {}
            1 => {
                self.column = (column + self.column).saturating_sub(prefix);
                self.line = line;
            }
            l => self.line = line + l - 1,
        }
        self
    }

    /// The line (from 1) where the text stops being JSON; 0 when unknown.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The column (bytes from the line's start, from 1) on that line.
    pub fn column(&self) -> usize {
        self.column
    }

    /// What is wrong, in serde_json's words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "not valid JSON: {}", self.message),
            line => write!(
                f,
                "not valid JSON: {} at line {line} column {}",
                self.message, self.column
            ),
        }
    }
}

impl std::error::Error for JsonError {}

/// Why an input is not a history.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// Not JSON.
    #[error(transparent)]
    Json(JsonError),
    /// Not UTF-8, from byte `byte` on, at `line` and `column` (counted as
    /// [`JsonError`]'s are, over the bytes before it).
    #[error("not valid UTF-8 at line {line} column {column} (byte {byte})")]
    NotUtf8 {
        /// Offset of the first byte that is not UTF-8.
        byte: u64,
        /// Its line, from 1.
        line: usize,
        /// Its column on that line, in bytes, from 1.
        column: usize,
    },
    /// Reading failed; the I/O error is the [`source`](std::error::Error::source).
    #[error("cannot read the input")]
    Io(#[source] std::io::Error),
    /// JSON, but neither an array nor an object with a `messages` array (or
    /// the Responses API's `input`).
    #[error(
        "expected an array of messages or an object with a \"messages\" array or an \"input\", not {found}"
    )]
    NotAHistory {
        /// What the top level is (`"a number"`, `"an object without \"messages\""`).
        found: &'static str,
    },
    /// A body whose `messages` is not an array.
    #[error("\"messages\" must be an array, not {found}")]
    MessagesNotArray {
        /// What it is.
        found: &'static str,
    },
    /// A Responses body whose `input` is neither a string nor an array.
    #[error("\"input\" must be a string or an array of items, not {found}")]
    InputNotList {
        /// What it is.
        found: &'static str,
    },
    /// A field of the body other than the messages (Anthropic's `system`:
    /// `system[2].text`) is missing or has the wrong type.
    #[error(transparent)]
    Field(FieldError),
    /// A body with marks of two formats (a `tool_use` block and a `tool`
    /// message, say).
    #[error("the body mixes formats: {} is {}'s, {} is {}'s", .first.1, .first.0, .second.1, .second.0)]
    MixedFormats {
        /// One format and its first mark.
        first: (crate::Format, FormatMark),
        /// Another format and its first mark.
        second: (crate::Format, FormatMark),
    },
    /// A body in one format where the other was asked for.
    #[error("the body is in {found}'s format, not {expected}'s: {mark}")]
    WrongFormat {
        /// The format asked for.
        expected: crate::Format,
        /// The format the body is in.
        found: crate::Format,
        /// What says so.
        mark: FormatMark,
    },
}

/// Where a body shows its format: a message (by index) or the body itself,
/// and what (`a \`tool_use\` block`, `the role \`tool\``).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FormatMark {
    /// The index of the message with the mark; `None` for the body itself.
    pub message: Option<usize>,
    /// What the mark is.
    pub what: String,
}

impl FormatMark {
    pub(crate) fn new(message: Option<usize>, what: String) -> Self {
        FormatMark { message, what }
    }

    /// The index of the message with the mark; `None` for the body itself.
    pub fn message(&self) -> Option<usize> {
        self.message
    }

    /// What the mark is.
    pub fn what(&self) -> &str {
        &self.what
    }
}

impl fmt::Display for FormatMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message {
            Some(i) => write!(f, "{} in message {i}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// Why saved state cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// Not JSON.
    #[error(transparent)]
    Json(JsonError),
    /// A version this chatfold does not read (`None`: no version).
    #[error("unsupported version {} (chatfold reads versions 1 and 2)", found.as_deref().unwrap_or("missing"))]
    Version {
        /// The version given, as JSON text.
        found: Option<String>,
    },
    /// A field (or a message in `buffer` or `system`: `buffer[3].role`) is
    /// missing or has the wrong type.
    #[error(transparent)]
    Field(FieldError),
}

/// Why a counter cannot be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// Neither `heuristic`, an encoding, nor a model tiktoken knows.
    #[error(
        "unknown tokenizer or model {name:?} (use heuristic, o200k_base, cl100k_base or an OpenAI model name)"
    )]
    Unknown {
        /// The name given.
        name: String,
    },
    /// A model whose encoding is not a chat encoding.
    #[error("model {model:?} uses {encoding}, which is not a chat encoding (use o200k_base or cl100k_base)")]
    NotChat {
        /// The model.
        model: String,
        /// Its encoding.
        encoding: String,
    },
    /// An encoding, asked for without the `tiktoken` feature.
    #[error("{name:?} needs chatfold's `tiktoken` feature")]
    NeedsTiktoken {
        /// The name given.
        name: String,
    },
}

/// `error: its source: the source's source ...`, the whole chain on one line.
pub(crate) fn with_sources(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// "a number", "an object" ...: for error messages.
pub(crate) fn kind_of(value: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
            Error::InvalidConfig(ConfigError::TooSmall {
                setting: "budget",
                value: 0,
                min: 1,
                limit: None,
            }),
            Error::InvalidMessage {
                index: 3,
                problem: FieldError::missing("role", "a string"),
            },
            Error::EmptySummary,
            Error::BudgetUnreachable {
                budget: 10,
                required: 20,
            },
            Error::PinnedOverBudget {
                budget: 10,
                pinned: 20,
            },
            Error::Summarize("boom".into()),
        ];
        for e in errors {
            let text = e.to_string();
            assert!(!text.ends_with('.'), "{text}");
            assert!(text.chars().next().is_some_and(|c| c.is_lowercase()), "{text}");
        }
    }

    #[test]
    fn a_summarizer_failure_says_its_cause_once() {
        let e = Error::Summarize("rate limited".into());
        assert_eq!(e.to_string(), "summarizer failed");
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("rate limited"));
    }

    #[test]
    fn json_errors_move_into_a_larger_text() {
        let e = serde_json::from_str::<serde_json::Value>("[1,").unwrap_err();
        let json = JsonError::from_serde(&e);
        assert_eq!((json.line(), json.column()), (1, 3));
        assert!(!json.message().contains("line"), "{}", json.message());
        // After a one-byte prefix of our own, from line 5 column 10.
        let moved = json.clone().moved(1, 5, 10);
        assert_eq!((moved.line(), moved.column()), (5, 12));
    }
}
