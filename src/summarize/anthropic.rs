//! Anthropic's Messages API.

use serde_json::{Value, json};

use crate::summarize::http::{HttpErrorKind, HttpSummarizer, Wire};

/// A summarizer calling Anthropic's Messages API (`POST
/// {base_url}/messages`, base URL `https://api.anthropic.com/v1`). The
/// settings shared with the other HTTP summarizer are on [`HttpSummarizer`].
///
/// The key goes in `x-api-key`, with `anthropic-version: 2023-06-01` unless
/// set; the allowance is the required `max_tokens`; the prompt's system part
/// is the top-level `system`. An answer that stops with `refusal`, or has no
/// text block, is an error.
///
/// # Examples
///
/// ```no_run
/// use chatfold::summarize::AnthropicSummarizer;
/// use chatfold::{Compactor, Message};
///
/// let summarizer = AnthropicSummarizer::new("https://api.anthropic.com/v1", "claude-3-5-haiku-latest")
///     .api_key(std::env::var("ANTHROPIC_API_KEY").unwrap_or_default());
/// let history: Vec<Message> = vec![/* ... */];
/// let result = Compactor::new(8_000).compact(&history, &summarizer)?;
/// # Ok::<(), chatfold::Error>(())
/// ```
pub type AnthropicSummarizer = HttpSummarizer<Anthropic>;

/// The Anthropic side of an [`AnthropicSummarizer`]: the model and the API
/// version.
#[derive(Clone, Debug)]
pub struct Anthropic {
    model: String,
    version: String,
}

impl AnthropicSummarizer {
    /// A summarizer calling `model` at `base_url`: `https://api.anthropic.com/v1`
    /// or a gateway's. A URL without the version gets `/v1`, as Anthropic's
    /// SDKs add it (`https://api.anthropic.com` works too); one already
    /// ending in `/messages` is taken as it is.
    pub fn new(base_url: impl AsRef<str>, model: impl Into<String>) -> Self {
        HttpSummarizer::with_provider(
            base_url.as_ref(),
            Anthropic {
                model: model.into(),
                version: "2023-06-01".to_owned(),
            },
        )
    }

    /// The `anthropic-version` header (`2023-06-01` unless set).
    #[must_use]
    pub fn version(self, version: impl Into<String>) -> Self {
        let version = version.into();
        self.provider_mut(|p| p.version = version)
    }
}

impl Wire for Anthropic {
    const NAME: &'static str = "anthropic";
    const PATH: &'static str = "/messages";
    const VERSION: Option<&'static str> = Some("/v1");

    fn auth(key: &str) -> (&'static str, String) {
        ("x-api-key", key.to_owned())
    }

    fn fixed_headers(&self) -> Vec<(&'static str, String)> {
        vec![("anthropic-version", self.version.clone())]
    }

    fn body(&self, system: String, user: String, max_tokens: usize, temperature: Option<f32>) -> Value {
        let mut body = json!({
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": user}],
        });
        if !system.is_empty() {
            body["system"] = json!(system);
        }
        if let Some(t) = temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    fn text(answer: &Value) -> Result<String, (HttpErrorKind, String)> {
        let blocks = answer.get("content").and_then(Value::as_array).ok_or((
            HttpErrorKind::InvalidAnswer,
            "no `content` in the answer".to_owned(),
        ))?;
        if answer.get("stop_reason").and_then(Value::as_str) == Some("refusal") {
            return Err((
                HttpErrorKind::Refusal,
                "the answer stopped with `refusal`".to_owned(),
            ));
        }
        Ok(blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""))
    }
}
