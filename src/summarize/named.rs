//! A summarizer chosen by name and endpoint, built here once for the CLI,
//! the proxy and both bindings.

use std::fmt;
use std::time::Duration;

use super::{Extractive, Summarizer, SummaryRequest};
use crate::count::{Heuristic, TokenCounter};
use crate::error::{BoxError, ConfigError};

/// What names a summarizer: its kind (`"extractive"`, `"openai"` for any
/// OpenAI-compatible Chat Completions server, `"anthropic"`), and for the
/// HTTP ones their endpoint, model, key, time-out and retries.
///
/// # Examples
///
/// ```
/// use chatfold::summarize::{Named, SummarizerSpec};
///
/// let extractive = Named::new(&SummarizerSpec::new("extractive"))?;
/// assert_eq!(extractive.kind(), "extractive");
/// let err = Named::new(&SummarizerSpec::new("gpt")).unwrap_err();
/// assert!(err.to_string().contains("summarizer cannot be gpt"));
/// # Ok::<(), chatfold::error::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SummarizerSpec {
    /// `"extractive"`, `"openai"` or `"anthropic"`.
    pub kind: String,
    /// The server's base URL (`https://api.openai.com/v1`,
    /// `https://api.anthropic.com`); HTTP kinds only.
    pub base_url: Option<String>,
    /// The model to ask; HTTP kinds only.
    pub model: Option<String>,
    /// The API key to send, if any.
    pub api_key: Option<String>,
    /// How long one attempt may take (the HTTP summarizer's default when unset).
    pub timeout: Option<Duration>,
    /// How many times a failed attempt is retried (the default when unset).
    pub retries: Option<u32>,
}

impl SummarizerSpec {
    /// A spec of `kind`, with nothing else set.
    pub fn new(kind: impl Into<String>) -> Self {
        SummarizerSpec {
            kind: kind.into(),
            ..SummarizerSpec::default()
        }
    }

    /// The HTTP summarizer of `kind` at `base_url` asking `model`.
    pub fn http(kind: impl Into<String>, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        SummarizerSpec {
            base_url: Some(base_url.into()),
            model: Some(model.into()),
            ..SummarizerSpec::new(kind)
        }
    }
}

/// A summarizer built from a [`SummarizerSpec`]: the extractive one, or an
/// HTTP one (with the `openai` and `anthropic` features).
#[derive(Clone)]
#[non_exhaustive]
pub enum Named<C = Heuristic> {
    /// [`Extractive`], with no model and no network.
    Extractive(Extractive<C>),
    /// An OpenAI-compatible Chat Completions server.
    #[cfg(feature = "openai")]
    OpenAi(super::OpenAiSummarizer),
    /// Anthropic's Messages API.
    #[cfg(feature = "anthropic")]
    Anthropic(super::AnthropicSummarizer),
}

impl<C> fmt::Debug for Named<C> {
    /// The kind only (never the key).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Named").field(&self.kind()).finish()
    }
}

impl Named {
    /// The summarizer `spec` names, the extractive one measuring with
    /// [`Heuristic`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::NotAllowed`] for an unknown kind (or one whose feature
    /// is off), [`ConfigError::Empty`] for an HTTP kind without its base URL
    /// or model.
    pub fn new(spec: &SummarizerSpec) -> Result<Named, ConfigError> {
        Named::with_counter(spec, Heuristic)
    }
}

impl<C: TokenCounter> Named<C> {
    /// The summarizer `spec` names, the extractive one measuring with
    /// `counter` (when a request carries no counter of its own).
    ///
    /// # Errors
    ///
    /// As [`Named::new`].
    pub fn with_counter(spec: &SummarizerSpec, counter: C) -> Result<Named<C>, ConfigError> {
        let endpoint = || -> Result<(&str, &str), ConfigError> {
            let base_url = spec.base_url.as_deref().filter(|u| !u.is_empty());
            let model = spec.model.as_deref().filter(|m| !m.is_empty());
            Ok((
                base_url.ok_or(ConfigError::Empty { setting: "base_url" })?,
                model.ok_or(ConfigError::Empty { setting: "model" })?,
            ))
        };
        match spec.kind.as_str() {
            "extractive" => Ok(Named::Extractive(Extractive::with_counter(counter))),
            #[cfg(feature = "openai")]
            "openai" => {
                let (url, model) = endpoint()?;
                Ok(Named::OpenAi(configured(
                    super::OpenAiSummarizer::new(url, model),
                    spec,
                )))
            }
            #[cfg(feature = "anthropic")]
            "anthropic" => {
                let (url, model) = endpoint()?;
                Ok(Named::Anthropic(configured(
                    super::AnthropicSummarizer::new(url, model),
                    spec,
                )))
            }
            other => {
                let _ = endpoint;
                Err(ConfigError::NotAllowed {
                    setting: "summarizer",
                    value: other.to_owned(),
                    why: "a summarizer is extractive, openai or anthropic (with its feature)",
                })
            }
        }
    }
}

impl<C> Named<C> {
    /// Its kind, as [`SummarizerSpec::kind`] names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Named::Extractive(_) => "extractive",
            #[cfg(feature = "openai")]
            Named::OpenAi(_) => "openai",
            #[cfg(feature = "anthropic")]
            Named::Anthropic(_) => "anthropic",
        }
    }

    /// The longest one summary can take: an HTTP summarizer's every attempt
    /// and wait; no time for the extractive one.
    pub fn longest_call(&self) -> Duration {
        match self {
            Named::Extractive(_) => Duration::ZERO,
            #[cfg(feature = "openai")]
            Named::OpenAi(s) => s.longest_call(),
            #[cfg(feature = "anthropic")]
            Named::Anthropic(s) => s.longest_call(),
        }
    }
}

/// `summarizer` with `spec`'s key, time-out and retries.
#[cfg(feature = "_http")]
fn configured<P: Clone>(
    mut summarizer: super::HttpSummarizer<P>,
    spec: &SummarizerSpec,
) -> super::HttpSummarizer<P> {
    if let Some(key) = &spec.api_key {
        summarizer = summarizer.api_key(key.clone());
    }
    if let Some(timeout) = spec.timeout {
        summarizer = summarizer.timeout(timeout);
    }
    if let Some(retries) = spec.retries {
        summarizer = summarizer.retries(retries);
    }
    summarizer
}

impl<C: TokenCounter> Summarizer for Named<C> {
    type Error = BoxError;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, BoxError> {
        match self {
            Named::Extractive(s) => Ok(s.summarize(request)?),
            #[cfg(feature = "openai")]
            Named::OpenAi(s) => Ok(Summarizer::summarize(s, request)?),
            #[cfg(feature = "anthropic")]
            Named::Anthropic(s) => Ok(Summarizer::summarize(s, request)?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_kinds_need_their_endpoint() {
        for kind in ["openai", "anthropic"] {
            let err = Named::new(&SummarizerSpec::new(kind)).unwrap_err();
            match cfg!(feature = "_http") {
                true => assert_eq!(err.to_string(), "base_url must not be empty"),
                false => assert!(err.to_string().contains("summarizer cannot be"), "{err}"),
            }
        }
        #[cfg(feature = "openai")]
        {
            let spec = SummarizerSpec::http("openai", "http://127.0.0.1:9/v1", "m");
            let named = Named::new(&spec).unwrap();
            assert_eq!(named.kind(), "openai");
            assert!(named.longest_call() > Duration::ZERO);
            assert!(!format!("{named:?}").contains("127.0.0.1"));
        }
    }
}
