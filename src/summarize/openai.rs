//! OpenAI-compatible Chat Completions endpoints.

use serde_json::{Value, json};

use crate::summarize::http::{HttpErrorKind, HttpSummarizer, Wire};

/// A summarizer for any OpenAI-compatible Chat Completions endpoint
/// (`POST {base_url}/chat/completions`): OpenAI, Ollama, vLLM, LM Studio,
/// Gemini's OpenAI-compatible endpoint, OpenRouter. The settings shared with
/// the other HTTP summarizer are on [`HttpSummarizer`].
///
/// | provider | base URL | key |
/// |---|---|---|
/// | OpenAI | `https://api.openai.com/v1` | `OPENAI_API_KEY` |
/// | Ollama | `http://localhost:11434/v1` | none |
/// | vLLM | `http://localhost:8000/v1` | none, or its `--api-key` |
/// | LM Studio | `http://localhost:1234/v1` | none |
/// | Gemini | `https://generativelanguage.googleapis.com/v1beta/openai` | `GEMINI_API_KEY` |
/// | OpenRouter | `https://openrouter.ai/api/v1` | `OPENROUTER_API_KEY` |
///
/// The key goes in `Authorization: Bearer`. An answer whose message is a
/// refusal, or that a content filter stopped, is an error, as is one without
/// text.
///
/// # Examples
///
/// ```no_run
/// use std::time::Duration;
/// use chatfold::summarize::OpenAiSummarizer;
/// use chatfold::{Compactor, Message};
///
/// let summarizer = OpenAiSummarizer::new("https://api.openai.com/v1", "gpt-4o-mini")
///     .api_key(std::env::var("OPENAI_API_KEY").unwrap_or_default())
///     .temperature(0.2)
///     .timeout(Duration::from_secs(30))
///     .retries(5);
/// let history: Vec<Message> = vec![/* ... */];
/// let result = Compactor::new(8_000).compact(&history, &summarizer)?;
/// # Ok::<(), chatfold::Error>(())
/// ```
pub type OpenAiSummarizer = HttpSummarizer<OpenAi>;

/// The OpenAI-compatible side of an [`OpenAiSummarizer`]: the model, and the
/// name of the field that carries the answer's token limit.
#[derive(Clone, Debug)]
pub struct OpenAi {
    model: String,
    limit_field: String,
}

impl OpenAiSummarizer {
    /// A summarizer calling `model` at `base_url` (the URL the provider's
    /// docs give for its OpenAI-compatible API, ending in `/v1` or the like;
    /// a URL that already ends in `/chat/completions` is taken as it is).
    pub fn new(base_url: impl AsRef<str>, model: impl Into<String>) -> Self {
        HttpSummarizer::with_provider(
            base_url.as_ref(),
            OpenAi {
                model: model.into(),
                limit_field: "max_tokens".to_owned(),
            },
        )
    }

    /// The request field that carries the allowance as the answer's token
    /// limit: `max_tokens` unless set. OpenAI's reasoning models want
    /// `max_completion_tokens` (and count their reasoning in it, so give
    /// them room with a larger summary allowance).
    #[must_use]
    pub fn token_limit_field(self, field: impl Into<String>) -> Self {
        let field = field.into();
        self.provider_mut(|p| p.limit_field = field)
    }
}

impl Wire for OpenAi {
    const NAME: &'static str = "openai";
    const PATH: &'static str = "/chat/completions";

    fn auth(key: &str) -> (&'static str, String) {
        ("authorization", format!("Bearer {key}"))
    }

    fn fixed_headers(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    fn body(&self, system: String, user: String, max_tokens: usize, temperature: Option<f32>) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        });
        body[&self.limit_field] = json!(max_tokens);
        if let Some(t) = temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    fn text(answer: &Value) -> Result<String, (HttpErrorKind, String)> {
        let invalid = |what: &str| (HttpErrorKind::InvalidAnswer, what.to_owned());
        let choice = answer
            .get("choices")
            .ok_or_else(|| invalid("no `choices` in the answer"))?
            .get(0)
            .ok_or((HttpErrorKind::NoText, "the answer has no choices".to_owned()))?;
        let message = choice
            .get("message")
            .ok_or_else(|| invalid("the choice has no `message`"))?;
        if let Some(refusal) = message.get("refusal").and_then(Value::as_str) {
            return Err((HttpErrorKind::Refusal, refusal.to_owned()));
        }
        match choice.get("finish_reason").and_then(Value::as_str) {
            Some("content_filter") => {
                return Err((HttpErrorKind::Refusal, "stopped by the content filter".to_owned()));
            }
            Some("length") => log::warn!("openai: the summary reached the token limit and was cut"),
            _ => {}
        }
        match message.get("content") {
            Some(Value::String(text)) => Ok(text.clone()),
            // Some servers answer with content parts.
            Some(Value::Array(parts)) => Ok(parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")),
            _ => Ok(String::new()),
        }
    }
}
