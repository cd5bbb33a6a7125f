//! Summarizers: what turns the folded messages into summary text.
//!
//! The traits ([`Summarizer`], [`AsyncSummarizer`]), the request they get
//! ([`SummaryRequest`]) and the offline default ([`Extractive`]) are also at
//! the crate root. Here besides: the LLM summarizers behind the `openai` and
//! `anthropic` features (`OpenAiSummarizer`, `AnthropicSummarizer`, both an
//! `HttpSummarizer`, with their `HttpError`), the [`Prompt`] they send, and
//! [`Named`]: a summarizer built from its name ([`SummarizerSpec`]), as the
//! CLI, the proxy and the bindings take it.
//!
//! ```
//! use chatfold::summarize::Prompt;
//!
//! let prompt = Prompt::new("Summarize in {words} words.", "{transcript}")?;
//! assert_eq!(prompt.system(), "Summarize in {words} words.");
//! # Ok::<(), chatfold::Error>(())
//! ```

use std::borrow::Cow;
use std::future::Future;

use crate::error::BoxError;
pub use crate::fold::request::SummaryRequest;
use crate::message::Message;

#[cfg(feature = "anthropic")]
mod anthropic;
mod bridge;
mod extractive;
#[cfg(feature = "_http")]
mod http;
mod named;
#[cfg(feature = "openai")]
mod openai;
mod prompt;

#[cfg(feature = "anthropic")]
pub use anthropic::{Anthropic, AnthropicSummarizer};
pub use bridge::{Bridge, LocalOperation, Operation, Polled, Stepped};
pub use extractive::Extractive;
#[cfg(feature = "_http")]
pub use http::{HttpError, HttpErrorKind, HttpSummarizer};
pub use named::{Named, SummarizerSpec};
#[cfg(feature = "openai")]
pub use openai::{OpenAi, OpenAiSummarizer};
pub use prompt::Prompt;

/// A message's plain transcript line: `role: text`, without its name,
/// tool calls or call id (which a [`Message`]'s `Display` adds). chatcram
/// writes its transcripts in these lines and counts them; the Python
/// package's chatcram module does both with this.
///
/// # Examples
///
/// ```
/// use chatfold::Message;
/// use chatfold::summarize::PlainLine;
///
/// assert_eq!(PlainLine::of(&Message::user("Hi.")).to_string(), "user: Hi.");
/// assert_eq!(PlainLine::new("critic", "No.").to_string(), "critic: No.");
/// let mut out = String::from("> ");
/// PlainLine::new("user", "Hi.").push_to(&mut out);
/// assert_eq!(out, "> user: Hi.");
/// ```
#[derive(Clone, Debug)]
pub struct PlainLine<'a> {
    role: &'a str,
    text: Cow<'a, str>,
}

impl<'a> PlainLine<'a> {
    /// The line of `role` saying `text`.
    pub fn new(role: &'a str, text: impl Into<Cow<'a, str>>) -> Self {
        PlainLine {
            role,
            text: text.into(),
        }
    }

    /// The line of `message`.
    pub fn of(message: &'a Message) -> Self {
        PlainLine::new(message.role.as_str(), message.text())
    }

    /// Appends the line to `out` (as `Display` writes it, without the
    /// formatter between: a transcript of many lines is written so).
    pub fn push_to(&self, out: &mut String) {
        out.push_str(self.role);
        out.push_str(": ");
        out.push_str(&self.text);
    }
}

impl std::fmt::Display for PlainLine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.role, self.text)
    }
}

/// Turns folded messages into summary text, synchronously.
///
/// Closures `|request: &SummaryRequest<'_>| -> Result<String, E>` are
/// summarizers, for any error `E` that converts into a boxed error (any
/// `std::error::Error + Send + Sync`, `String`, `&str`).
///
/// # Examples
///
/// ```
/// use chatfold::{Message, Summarizer, SummaryRequest};
///
/// let count_them = |request: &SummaryRequest<'_>| {
///     Ok::<_, std::convert::Infallible>(format!("{} earlier messages", request.messages().len()))
/// };
/// let folded = [Message::user("hi")];
/// let summary = count_them.summarize(&SummaryRequest::new(None, &folded, 50))?;
/// assert_eq!(summary, "1 earlier messages");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Summarizer {
    /// The error the summarizer can fail with.
    type Error: Into<BoxError>;

    /// The summary of `request`.
    ///
    /// # Errors
    ///
    /// Whatever the summarizer fails with; chatfold passes it on in
    /// [`Error::Summarize`](crate::Error::Summarize) and changes nothing.
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, Self::Error>;
}

impl<F, E> Summarizer for F
where
    F: Fn(&SummaryRequest<'_>) -> Result<String, E>,
    E: Into<BoxError>,
{
    type Error = E;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, E> {
        self(request)
    }
}

/// Turns folded messages into summary text, asynchronously.
///
/// The future is `Send` and chatfold needs no runtime: run it on any. The
/// request borrows the caller's messages for the life of the future, so
/// [`Compactor::compact_async`](crate::Compactor::compact_async) copies
/// nothing: a summarizer reads the folded messages where they are.
///
/// An async closure is one, `async |request: SummaryRequest<'_>| { .. }`,
/// and so is an `async fn` of a `SummaryRequest<'_>`: their futures borrow
/// the request, and what the closure borrows, but not what an `async move`
/// closure owns (the compiler says "async closure does not implement `Fn`
/// because it captures state from its environment": borrow it, or clone it
/// inside). Any other function of a request whose future is `Send` is one
/// too (see [`SummarizeFn`]), but a closure that returns a future
/// (`|request| async move { .. }`) cannot lend it the request (its future's
/// type cannot depend on the request's lifetime): it takes what it needs
/// first, or a copy, [`SummaryRequest::into_owned`], as a future spawned
/// on a runtime must. A synchronous summarizer becomes one through
/// [`Ready`].
///
/// # Examples
///
/// ```
/// use chatfold::{AsyncSummarizer, Message, SummaryRequest};
///
/// let summarizer = async |request: SummaryRequest<'_>| {
///     // await an LLM call here, reading `request` where it is
///     Ok::<_, std::convert::Infallible>(format!("{} messages", request.messages().len()))
/// };
/// let folded = [Message::user("hi")];
/// let request = SummaryRequest::new(None, &folded, 50);
/// let summary = pollster::block_on(summarizer.summarize(request))?;
/// assert_eq!(summary, "1 messages");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an async summarizer",
    label = "not an `AsyncSummarizer`",
    note = "an async closure is one: `async |request: SummaryRequest<'_>| {{ .. }}`",
    note = "a sync `Summarizer` becomes one through `Ready(..)`"
)]
pub trait AsyncSummarizer {
    /// The error the summarizer can fail with.
    type Error: Into<BoxError>;

    /// The summary of `request`.
    ///
    /// # Errors
    ///
    /// Whatever the summarizer fails with; chatfold passes it on in
    /// [`Error::Summarize`](crate::Error::Summarize) and changes nothing.
    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = Result<String, Self::Error>> + Send;
}

/// A function that is an [`AsyncSummarizer`]: it takes a request of any
/// lifetime and returns a `Send` future of the summary (which, for an async
/// closure or an `async fn`, borrows the request). Every such function has
/// it; name it only in bounds.
///
/// A closure that takes `SummaryRequest<'static>` has it for `'static`
/// alone, and the compiler says "implementation of `SummarizeFn` is not
/// general enough": write it as an async closure,
/// `async |request: SummaryRequest<'_>| { .. }`.
pub trait SummarizeFn<'r>: Fn(SummaryRequest<'r>) -> <Self as SummarizeFn<'r>>::Future {
    /// What the summarizer can fail with.
    type Error;
    /// What a call returns.
    type Future: Future<Output = Result<String, Self::Error>> + Send;
}

impl<'r, F, Fut, E> SummarizeFn<'r> for F
where
    F: Fn(SummaryRequest<'r>) -> Fut,
    Fut: Future<Output = Result<String, E>> + Send,
{
    type Error = E;
    type Future = Fut;
}

impl<F, E> AsyncSummarizer for F
where
    F: for<'r> SummarizeFn<'r, Error = E>,
    E: Into<BoxError>,
{
    type Error = E;

    /// Calls the function with the request as it is: nothing is copied.
    fn summarize(&self, request: SummaryRequest<'_>) -> impl Future<Output = Result<String, E>> + Send {
        self(request)
    }
}

/// A synchronous [`Summarizer`] used where an [`AsyncSummarizer`] is wanted:
/// it runs on the calling task and its future is ready at once.
///
/// # Examples
///
/// ```
/// use chatfold::{AsyncSummarizer, Extractive, Message, Ready, SummaryRequest};
///
/// let folded = [Message::user("The deploy failed. Logs attached.")];
/// let request = SummaryRequest::new(None, &folded, 50).into_owned();
/// let summary = pollster::block_on(Ready(Extractive::new()).summarize(request))?;
/// assert_eq!(summary, "Started with:\nuser: The deploy failed. Logs attached.");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Ready<S>(pub S);

impl<S> AsyncSummarizer for Ready<S>
where
    S: Summarizer,
    S::Error: Send,
{
    type Error = S::Error;

    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = Result<String, S::Error>> + Send {
        std::future::ready(self.0.summarize(&request))
    }
}
