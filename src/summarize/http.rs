//! Summarizers that call an LLM over HTTP: what the providers share (the
//! settings, the request loop with its time-out and retries, the errors, the
//! bridge to async), written once; each provider only says how its requests
//! and answers look.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use serde_json::Value;

use crate::summarize::prompt::Prompt;
use crate::summarize::{AsyncSummarizer, Summarizer, SummaryRequest};

/// A summarizer that asks an LLM over HTTP: [`OpenAiSummarizer`](super::OpenAiSummarizer)
/// (any OpenAI-compatible Chat Completions endpoint, feature `openai`) or
/// [`AnthropicSummarizer`](super::AnthropicSummarizer) (the Messages API,
/// feature `anthropic`).
///
/// It sends the request's [`Prompt`] (the default unless given another) as
/// a system prompt and one user message, with the allowance as the answer's
/// token limit, and returns the answer's text. Each attempt has a time-out
/// (60 s unless set); 429, 408 and 5xx answers, time-outs and connection
/// errors are retried (3 times unless set) after an exponential backoff with
/// jitter, or after the server's `Retry-After` when it asks for longer.
/// Other answers fail at once, with the status and the provider's message.
/// The API key is never in an error or a log line.
///
/// Cloning is cheap (the settings are shared), and one summarizer serves
/// any number of threads. Both [`Summarizer`] (blocking, no runtime) and
/// [`AsyncSummarizer`] are implemented: the async one runs each exchange on a
/// thread of its own (started when the future is first polled) and wakes
/// the awaiting task when it ends, so it works on any runtime and never
/// blocks one. Dropping its future stops the retries; an attempt already on
/// the wire runs to its end or its time-out. Redirects are not followed (a
/// 3xx is an error): they would carry the key to another host.
///
/// Retries are logged at `warn` through the `log` crate, without the key.
/// ureq's own `trace` level dumps the bytes on the wire, headers included,
/// as its documentation warns: keep `ureq_proto` below `trace` where keys
/// matter.
///
/// The HTTP client is `ureq`, with rustls and the Mozilla root
/// certificates (no system OpenSSL).
///
/// # Examples
///
/// ```no_run
/// # #[cfg(feature = "openai")] {
/// use chatfold::summarize::OpenAiSummarizer;
/// use chatfold::{Compactor, Message};
///
/// // A local Ollama: no key.
/// let ollama = OpenAiSummarizer::new("http://localhost:11434/v1", "llama3.2");
/// let history = vec![Message::system("Be brief."), Message::user("Hello!")];
/// let result = Compactor::new(4_000).compact(&history, &ollama)?;
/// # }
/// # Ok::<(), chatfold::Error>(())
/// ```
pub struct HttpSummarizer<P> {
    inner: Arc<Inner<P>>,
}

/// The settings, shared by clones.
#[derive(Clone)]
struct Inner<P> {
    provider: P,
    url: String,
    key: Option<String>,
    headers: Vec<(String, String)>,
    temperature: Option<f32>,
    timeout: Duration,
    retries: u32,
    backoff: (Duration, Duration),
    max_retry_wait: Duration,
    prompt: Prompt,
    agent: ureq::Agent,
}

impl<P> Clone for HttpSummarizer<P> {
    fn clone(&self) -> Self {
        HttpSummarizer {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<P: fmt::Debug> fmt::Debug for HttpSummarizer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        f.debug_struct("HttpSummarizer")
            .field("provider", &inner.provider)
            .field("url", &inner.endpoint())
            .field("key", &inner.key.as_ref().map(|_| "<redacted>"))
            .field(
                "headers",
                &inner.headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("temperature", &inner.temperature)
            .field("timeout", &inner.timeout)
            .field("retries", &inner.retries)
            .field("backoff", &inner.backoff)
            .field("max_retry_wait", &inner.max_retry_wait)
            .field("prompt", &inner.prompt)
            .finish_non_exhaustive()
    }
}

/// How one provider's requests and answers look (sealed: the crate's providers only).
pub trait Wire: Clone + Send + Sync + 'static {
    /// The provider's name in errors and log lines.
    const NAME: &'static str;
    /// The endpoint's path below the base URL.
    const PATH: &'static str;
    /// The API version's path segment the provider's SDKs add to a base URL
    /// without one (`/v1` for Anthropic), if any.
    const VERSION: Option<&'static str> = None;
    /// The header carrying the key, and its value for `key`.
    fn auth(key: &str) -> (&'static str, String);
    /// Headers every request carries.
    fn fixed_headers(&self) -> Vec<(&'static str, String)>;
    /// The request body.
    fn body(&self, system: String, user: String, max_tokens: usize, temperature: Option<f32>) -> Value;
    /// The summary in a successful answer.
    fn text(answer: &Value) -> Result<String, (HttpErrorKind, String)>;
}

/// The default time-out of one attempt.
const TIMEOUT: Duration = Duration::from_secs(60);
/// The longest timeout an attempt takes (a deadline past it would not fit
/// the clock's arithmetic); see [`HttpSummarizer::timeout`].
const LONGEST_TIMEOUT: Duration = Duration::from_secs(100 * 365 * 86_400);
/// The default number of retries.
const RETRIES: u32 = 3;
/// The default first and longest backoff.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(8));
/// The longest `Retry-After` honoured by default.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(60);
/// How often a cancelled async call is noticed while waiting to retry.
const CANCEL_POLL: Duration = Duration::from_millis(50);

impl<P: Wire> HttpSummarizer<P> {
    pub(crate) fn with_provider(base_url: &str, provider: P) -> Self {
        let (base, query) = base_url.split_at(base_url.find('?').unwrap_or(base_url.len()));
        let base = base.trim_end_matches('/');
        let url = match P::VERSION {
            _ if base.ends_with(P::PATH) => format!("{base}{query}"),
            Some(version) if !base.ends_with(version) => format!("{base}{version}{}{query}", P::PATH),
            _ => format!("{base}{}{query}", P::PATH),
        };
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A redirect would carry the key's header to another host and turn the POST into a GET.
            .max_redirects(0)
            .user_agent(concat!("chatfold/", env!("CARGO_PKG_VERSION")))
            .build();
        HttpSummarizer {
            inner: Arc::new(Inner {
                provider,
                url,
                key: None,
                headers: Vec::new(),
                temperature: None,
                timeout: TIMEOUT,
                retries: RETRIES,
                backoff: BACKOFF,
                max_retry_wait: MAX_RETRY_WAIT,
                prompt: Prompt::default(),
                agent: config.into(),
            }),
        }
    }
}

impl<P: Clone> HttpSummarizer<P> {
    fn set(mut self, change: impl FnOnce(&mut Inner<P>)) -> Self {
        change(Arc::make_mut(&mut self.inner));
        self
    }

    pub(crate) fn provider_mut(self, change: impl FnOnce(&mut P)) -> Self {
        self.set(|inner| change(&mut inner.provider))
    }

    /// The endpoint the requests go to.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// Sends `key` as the API key (local servers need none).
    #[must_use]
    pub fn api_key(self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.set(|inner| inner.key = Some(key))
    }

    /// Adds a header to every request (an organization, a project, a
    /// gateway's routing header ...).
    #[must_use]
    pub fn header(self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let header = (name.into(), value.into());
        self.set(|inner| inner.headers.push(header))
    }

    /// The sampling temperature; unless set, none is sent and the provider's
    /// default applies (some reasoning models accept no other).
    #[must_use]
    pub fn temperature(self, temperature: f32) -> Self {
        self.set(|inner| inner.temperature = Some(temperature))
    }

    /// How long one attempt may take, from connecting to the answer's last
    /// byte (60 s unless set; a century at most, which a longer one is
    /// taken as).
    #[must_use]
    pub fn timeout(self, timeout: Duration) -> Self {
        self.set(|inner| inner.timeout = timeout.min(LONGEST_TIMEOUT))
    }

    /// How many times a failed attempt is retried (3 unless set; 0 never
    /// retries).
    #[must_use]
    pub fn retries(self, retries: u32) -> Self {
        self.set(|inner| inner.retries = retries)
    }

    /// The backoff between attempts: the first wait, doubling up to the
    /// longest, each with up to as much again of random jitter (0.5 s and 8 s
    /// unless set).
    #[must_use]
    pub fn backoff(self, first: Duration, longest: Duration) -> Self {
        self.set(|inner| inner.backoff = (first, longest.max(first)))
    }

    /// The longest `Retry-After` the summarizer waits for; a server asking
    /// for longer gets no retry, and the error says what it asked (60 s unless
    /// set).
    #[must_use]
    pub fn max_retry_wait(self, wait: Duration) -> Self {
        self.set(|inner| inner.max_retry_wait = wait)
    }

    /// The prompt the model is given ([`Prompt::default`] unless set).
    #[must_use]
    pub fn prompt(self, prompt: Prompt) -> Self {
        self.set(|inner| inner.prompt = prompt)
    }

    /// The longest one summary can take with these settings: every attempt
    /// its whole timeout, and between them the longest wait (the backoff's
    /// longest with its jitter, or the longest `Retry-After` heeded). What
    /// a caller waiting on another's summary may wait before giving up on
    /// it (7 minutes unless set: four attempts of 60 s, three waits of 60 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use chatfold::summarize::OpenAiSummarizer;
    ///
    /// let s = OpenAiSummarizer::new("http://127.0.0.1:9/v1", "m")
    ///     .timeout(Duration::from_secs(2))
    ///     .retries(1)
    ///     .max_retry_wait(Duration::from_secs(5));
    /// // Two attempts of 2 s, one wait of at most 16 s (8 s and its jitter).
    /// assert_eq!(s.longest_call(), Duration::from_secs(20));
    /// ```
    pub fn longest_call(&self) -> Duration {
        let inner = &self.inner;
        let wait = inner.backoff.1.saturating_mul(2).max(inner.max_retry_wait);
        inner
            .timeout
            .saturating_mul(inner.retries.saturating_add(1))
            .saturating_add(wait.saturating_mul(inner.retries))
    }
}

impl<P: Wire> HttpSummarizer<P> {
    /// The request body for `request`.
    fn body(&self, request: &SummaryRequest<'_>) -> Vec<u8> {
        let inner = &*self.inner;
        let (system, user) = inner.prompt.render(request);
        let body = inner
            .provider
            .body(system, user, request.allowance().max(1), inner.temperature);
        // A `Value` always serializes.
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

impl<P: Wire> Inner<P> {
    /// Posts `body` until an attempt succeeds, fails for good, or
    /// `cancelled` says nobody waits any more.
    fn call(&self, body: &[u8], cancelled: &dyn Fn() -> bool) -> Result<String, HttpError> {
        let mut backoff = ExponentialBuilder::default()
            .with_min_delay(self.backoff.0)
            .with_max_delay(self.backoff.1)
            .with_jitter()
            .with_max_times(self.retries as usize)
            .build();
        let mut attempts = 0;
        loop {
            if cancelled() {
                return Err(
                    HttpError::new(P::NAME, HttpErrorKind::Cancelled, None, "cancelled").attempts(attempts),
                );
            }
            attempts += 1;
            let (error, retry_after) = match self.attempt(body) {
                Ok(text) => return Ok(text),
                Err(failure) => failure,
            };
            let error = error.attempts(attempts);
            if !error.is_transient() {
                return Err(error);
            }
            let Some(delay) = backoff.next() else {
                return Err(error);
            };
            let delay = match retry_after {
                Some(asked) if asked > self.max_retry_wait => {
                    return Err(error.note(format!(
                        "the server asked to wait {} s, longer than {} s",
                        asked.as_secs_f64(),
                        self.max_retry_wait.as_secs_f64()
                    )));
                }
                Some(asked) => asked.max(delay),
                None => delay,
            };
            log::warn!(
                "{error}; retry {attempts} of {} in {:.1} s",
                self.retries,
                delay.as_secs_f64()
            );
            if !wait(delay, cancelled) {
                return Err(
                    HttpError::new(P::NAME, HttpErrorKind::Cancelled, None, "cancelled").attempts(attempts),
                );
            }
        }
    }

    /// One exchange: the summary, or the error and the server's `Retry-After`.
    fn attempt(&self, body: &[u8]) -> Result<String, (HttpError, Option<Duration>)> {
        let fail =
            |kind, status, message: String| HttpError::new(P::NAME, kind, status, self.redact(&message));
        let mut post = self
            .agent
            .post(&self.url)
            .config()
            .timeout_global(Some(self.timeout))
            .build()
            .header("content-type", "application/json");
        if let Some(key) = &self.key {
            let (name, value) = P::auth(key);
            post = post.header(name, value);
        }
        for (name, value) in self.provider.fixed_headers() {
            post = post.header(name, value);
        }
        for (name, value) in &self.headers {
            post = post.header(name, value);
        }
        let from_ureq = |e: ureq::Error| {
            let kind = match &e {
                ureq::Error::Timeout(_) => HttpErrorKind::Timeout,
                ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                    HttpErrorKind::Connection
                }
                // Not HTTP at all (plain HTTP to a TLS port ...): no retry mends that.
                ureq::Error::Protocol(_) => HttpErrorKind::InvalidAnswer,
                _ => HttpErrorKind::Request,
            };
            let message = match kind {
                HttpErrorKind::Timeout => format!("no answer within {} s", self.timeout.as_secs_f64()),
                _ => e.to_string(),
            };
            (fail(kind, None, format!("{message} ({})", self.endpoint())), None)
        };
        let mut response = post.send(body).map_err(from_ureq)?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let bytes = response.body_mut().read_to_vec().map_err(from_ureq)?;
        if !(200..300).contains(&status) {
            let kind = HttpErrorKind::Status;
            let message = error_message(&bytes).unwrap_or_else(|| {
                response
                    .status()
                    .canonical_reason()
                    .unwrap_or("no message")
                    .to_owned()
            });
            return Err((fail(kind, Some(status), message), retry_after));
        }
        let answer: Value = serde_json::from_slice(&bytes).map_err(|e| {
            let kind = HttpErrorKind::InvalidAnswer;
            (
                fail(kind, Some(status), format!("the answer is not JSON: {e}")),
                None,
            )
        })?;
        let text = P::text(&answer).map_err(|(kind, message)| (fail(kind, Some(status), message), None))?;
        let text = text.trim();
        if text.is_empty() {
            let kind = HttpErrorKind::NoText;
            return Err((
                fail(kind, Some(status), "the answer has no text".to_owned()),
                None,
            ));
        }
        Ok(text.to_owned())
    }

    /// `text` with the key, wherever it appears, replaced.
    fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(key) if !key.is_empty() => text.replace(key.as_str(), "<redacted>"),
            _ => text.to_owned(),
        }
    }
}

impl<P> Inner<P> {
    /// The endpoint without credentials or query (either may carry a key).
    fn endpoint(&self) -> String {
        let url = self.url.split(['?', '#']).next().unwrap_or_default();
        match url.split_once("://") {
            Some((scheme, rest)) => {
                let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
                let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
                format!("{scheme}://{host}{path}")
            }
            None => url.to_owned(),
        }
    }
}

/// Sleeps `delay`, in steps, unless `cancelled`; whether it slept it all.
fn wait(delay: Duration, cancelled: &dyn Fn() -> bool) -> bool {
    let until = std::time::Instant::now() + delay;
    loop {
        if cancelled() {
            return false;
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(CANCEL_POLL));
    }
}

/// The provider's message in an error answer: `error.message` (OpenAI,
/// Anthropic), `error` as a string (Ollama), `message`, or the body's text.
fn error_message(body: &[u8]) -> Option<String> {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let found = [
            value.pointer("/error/message"),
            value.get("error").filter(|e| e.is_string()),
            value.get("message"),
            value.get("detail"),
        ]
        .into_iter()
        .flatten()
        .find_map(Value::as_str);
        if let Some(message) = found {
            return Some(message.to_owned());
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    (!text.is_empty()).then(|| {
        let mut end = text.len().min(300);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text[..end].to_owned()
    })
}

/// The server's `Retry-After` (seconds or an HTTP date) or OpenAI's
/// `retry-after-ms`.
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    let header = |name| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return duration(ms / 1000.0);
    }
    let value = header("retry-after")?;
    match value.parse::<f64>() {
        Ok(seconds) => duration(seconds),
        Err(_) => http_date(value)?
            .duration_since(SystemTime::now())
            .ok()
            .or(Some(Duration::ZERO)),
    }
}

fn duration(seconds: f64) -> Option<Duration> {
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(1e9)))
}

/// An HTTP date: the IMF-fixdate HTTP sends (`Sun, 06 Nov 1994 08:49:37
/// GMT`), or the obsolete RFC 850 and asctime forms a server may still send.
fn http_date(text: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(text).ok()
}

impl<P: Wire> Summarizer for HttpSummarizer<P> {
    type Error = HttpError;

    /// Blocks the calling thread for the exchange (and its retries).
    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, HttpError> {
        self.inner.call(&self.body(request), &|| false)
    }
}

impl<P: Wire> AsyncSummarizer for HttpSummarizer<P> {
    type Error = HttpError;

    /// Runs the exchange on a thread of its own; the future waits for it
    /// without blocking the runtime.
    fn summarize(
        &self,
        request: SummaryRequest<'_>,
    ) -> impl Future<Output = Result<String, HttpError>> + Send {
        let body = self.body(&request);
        drop(request);
        let inner = Arc::clone(&self.inner);
        let (done, answer) = oneshot::async_channel();
        // Nothing is sent until the future is first polled.
        async move {
            let started = std::thread::Builder::new()
                .name("chatfold-summarize".to_owned())
                .spawn(move || {
                    let result = inner.call(&body, &|| done.is_closed());
                    let _ = done.send(result);
                });
            if let Err(e) = started {
                let message = format!("cannot start a thread for the request: {e}");
                return Err(HttpError::new(P::NAME, HttpErrorKind::Request, None, message));
            }
            answer.await.unwrap_or_else(|_| {
                Err(HttpError::new(
                    P::NAME,
                    HttpErrorKind::Request,
                    None,
                    "the request's thread ended without an answer",
                ))
            })
        }
    }
}

/// Why an HTTP summarizer failed.
///
/// Its text names the provider, the status and the provider's own message
/// (or what went wrong on the way), and how many attempts were made; never
/// the API key.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HttpError {
    /// The provider (`openai`, `anthropic`).
    pub provider: &'static str,
    /// What went wrong.
    pub kind: HttpErrorKind,
    /// The HTTP status of the last answer, when there was one.
    pub status: Option<u16>,
    /// The provider's message, or what went wrong on the way (never the key).
    pub message: String,
    /// How many attempts were made.
    pub attempts: u32,
}

/// The kinds of [`HttpError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpErrorKind {
    /// The server answered with a status other than 2xx.
    Status,
    /// An attempt took longer than the time-out.
    Timeout,
    /// The connection failed or was closed before the answer ended.
    Connection,
    /// The request could not be sent (a malformed URL or header, TLS ...).
    Request,
    /// The answer is not what the API returns (not JSON, no choices ...).
    InvalidAnswer,
    /// The model declined to answer (a refusal or a content filter).
    Refusal,
    /// The answer has no text.
    NoText,
    /// The async caller stopped waiting before a retry.
    Cancelled,
}

impl HttpError {
    fn new(
        provider: &'static str,
        kind: HttpErrorKind,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Self {
        HttpError {
            provider,
            kind,
            status,
            message: message.into(),
            attempts: 1,
        }
    }

    fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }

    fn note(mut self, note: String) -> Self {
        self.message = format!("{}; {note}", self.message);
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> HttpErrorKind {
        self.kind
    }

    /// The HTTP status of the last answer, when there was one.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The provider's message, or what went wrong on the way.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// How many attempts were made.
    pub fn attempt_count(&self) -> u32 {
        self.attempts
    }

    /// Whether another attempt may succeed: 408, 429 and 5xx answers,
    /// time-outs and connection errors.
    pub fn is_transient(&self) -> bool {
        match self.kind {
            HttpErrorKind::Status => self
                .status
                .is_some_and(|s| s == 408 || s == 429 || (500..600).contains(&s)),
            HttpErrorKind::Timeout | HttpErrorKind::Connection => true,
            _ => false,
        }
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.provider)?;
        match (self.kind, self.status) {
            (HttpErrorKind::Status, Some(status)) => write!(f, "HTTP {status}: ")?,
            (HttpErrorKind::Timeout, _) => f.write_str("timed out: ")?,
            (HttpErrorKind::Connection, _) => f.write_str("connection failed: ")?,
            (HttpErrorKind::InvalidAnswer, _) => f.write_str("invalid answer: ")?,
            (HttpErrorKind::Refusal, _) => f.write_str("the model refused: ")?,
            _ => {}
        }
        f.write_str(&self.message)?;
        if self.attempts > 1 {
            write!(f, " (after {} attempts)", self.attempts)?;
        }
        Ok(())
    }
}

impl std::error::Error for HttpError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_are_read() {
        let date = http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            date.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            784_111_777
        );
        let leap = http_date("Thu, 29 Feb 2024 00:00:00 GMT").unwrap();
        assert_eq!(
            leap.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            1_709_164_800
        );
        // The obsolete forms a server may still send (RFC 9110, 5.6.7).
        for obsolete in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            assert_eq!(http_date(obsolete), Some(date), "{obsolete}");
        }
        assert!(http_date("Sun, 06 Nov 1994 08:49:37 PST").is_none());
        assert!(http_date("Sun, 31 Nov 1994 08:49:37 GMT").is_none());
        assert!(http_date("soon").is_none());
        assert!(http_date("Sun, 06 Foo 1994 08:49:37 GMT").is_none());
    }

    #[test]
    fn error_messages_come_from_each_providers_shape() {
        let openai = br#"{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai).as_deref(), Some("Incorrect API key"));
        let ollama = br#"{"error":"model \"x\" not found"}"#;
        assert_eq!(error_message(ollama).as_deref(), Some("model \"x\" not found"));
        assert_eq!(error_message(b"Bad Gateway\n").as_deref(), Some("Bad Gateway"));
        assert_eq!(error_message(b"  ").as_deref(), None);
        let long = "é".repeat(400);
        assert_eq!(error_message(long.as_bytes()).unwrap().len(), 300);
    }
}
