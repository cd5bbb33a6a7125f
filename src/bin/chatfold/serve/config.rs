//! What the flags mean for the proxy: the upstreams, the budget of a
//! request, the limits and time-outs.

use std::time::Duration;

use hyper::Uri;

use crate::flags::ServeArgs;
use crate::{Failure, exit};

/// An upstream API: its scheme and authority, and a path prefix.
#[derive(Clone, Debug)]
pub(crate) struct Upstream {
    /// `http` or `https`.
    scheme: String,
    /// `host[:port]`.
    authority: String,
    /// The base URL's path, without a final `/` (often empty, or `/v1`).
    prefix: String,
    /// Whether a base with a path holds the API's version, as the base URLs
    /// given to OpenAI's SDK do (`.../v1`, Gemini's `.../v1beta/openai`, a
    /// gateway's `.../openai`): a request's own `/v1` is then left out.
    /// Anthropic's SDK adds `/v1` to its base itself.
    versioned: bool,
}

impl Upstream {
    /// The upstream at `url` (an http or https URL, with no query).
    pub(crate) fn parse(flag: &str, url: &str) -> Result<Upstream, Failure> {
        let bad = || {
            Failure::new(
                exit::USAGE,
                format!("{flag} {url:?} is not an http:// or https:// URL"),
            )
        };
        let uri: Uri = url.parse().map_err(|_| bad())?;
        let scheme = uri
            .scheme_str()
            .filter(|s| matches!(*s, "http" | "https"))
            .ok_or_else(bad)?;
        let authority = uri.authority().ok_or_else(bad)?;
        if authority.as_str().contains('@') || uri.query().is_some() {
            return Err(bad());
        }
        Ok(Upstream {
            scheme: scheme.to_owned(),
            authority: authority.as_str().to_owned(),
            prefix: uri.path().trim_end_matches('/').to_owned(),
            versioned: false,
        })
    }

    /// Whether this is Anthropic's own API, which answers its own
    /// `context_management` and reads its own compaction blocks.
    pub(crate) fn is_anthropic(&self) -> bool {
        self.host().eq_ignore_ascii_case("api.anthropic.com")
    }

    /// The host, without its port.
    fn host(&self) -> &str {
        (self.authority.rsplit_once(':')).map_or(self.authority.as_str(), |(h, _)| h)
    }

    /// Whether this is OpenAI's own API, which reads its own compaction
    /// items and answers `context_management`.
    pub(crate) fn is_openai(&self) -> bool {
        self.host().eq_ignore_ascii_case("api.openai.com")
    }

    /// The same base, read as one that holds the API's version (OpenAI's).
    fn versioned(self) -> Upstream {
        Upstream {
            versioned: true,
            ..self
        }
    }

    /// The upstream's URI for a request to `path_and_query`: the prefix,
    /// then the path, less its `/v1` when the prefix ends with one or holds
    /// the version ([`versioned`](Self::versioned), a prefix not empty).
    pub(crate) fn uri(&self, path_and_query: &str) -> Result<Uri, hyper::http::Error> {
        let holds_version = self.prefix.ends_with("/v1") || (self.versioned && !self.prefix.is_empty());
        let rest = match path_and_query.strip_prefix("/v1") {
            Some(rest) if holds_version && (rest.is_empty() || rest.starts_with(['/', '?'])) => rest,
            _ => path_and_query,
        };
        Uri::builder()
            .scheme(self.scheme.as_str())
            .authority(self.authority.as_str())
            .path_and_query(format!("{}{rest}", self.prefix))
            .build()
    }
}

/// The proxy's settings, checked.
#[derive(Debug)]
pub(crate) struct Config {
    /// Where OpenAI-shaped requests go (and everything not Anthropic's).
    pub(crate) openai: Upstream,
    /// Where Anthropic-shaped requests go.
    pub(crate) anthropic: Upstream,
    /// Each request's budget.
    pub(crate) budgets: Budgets,
    /// Largest body accepted.
    pub(crate) max_body: u64,
    /// Time for a request's headers and body.
    pub(crate) read_timeout: Duration,
    /// Time to connect upstream.
    pub(crate) connect_timeout: Duration,
    /// Time for the upstream to start its answer.
    pub(crate) upstream_timeout: Duration,
    /// Time for in-flight requests to finish on shutdown.
    pub(crate) shutdown_timeout: Duration,
    /// Whether to log each request.
    pub(crate) log: bool,
    /// Who answers the Responses API's compaction.
    pub(crate) compaction: super::CompactionMode,
    /// Who answers Anthropic's context management.
    pub(crate) managed: super::ManagedMode,
}

/// `secs` as a duration, when it is a positive number of seconds.
fn seconds(flag: &str, secs: f64) -> Result<Duration, Failure> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .map(|d| d.min(crate::summarizers::LONGEST_TIMEOUT))
        .ok_or_else(|| {
            Failure::new(
                exit::USAGE,
                format!("{flag} must be a positive number of seconds"),
            )
        })
}

impl Config {
    /// The settings the flags give.
    pub(crate) fn new(args: &ServeArgs) -> Result<Config, Failure> {
        let one = |flag: &str, own: &Option<String>| -> Result<Upstream, Failure> {
            match (own, &args.upstream) {
                (Some(url), _) => Upstream::parse(flag, url),
                (None, Some(url)) => Upstream::parse("--upstream", url),
                (None, None) => Err(Failure::new(
                    exit::USAGE,
                    format!("{flag} or --upstream is needed: where do such requests go?"),
                )),
            }
        };
        let openai = one("--openai-upstream", &args.openai_upstream);
        let anthropic = one("--anthropic-upstream", &args.anthropic_upstream);
        let (openai, anthropic) = match (openai, anthropic) {
            (Ok(o), Ok(a)) => (o, a),
            // Only one upstream named: it takes both shapes.
            (Ok(o), Err(_)) if args.upstream.is_none() => (o.clone(), o),
            (Err(_), Ok(a)) if args.upstream.is_none() => (a.clone(), a),
            (Err(e), _) | (_, Err(e)) => return Err(e),
        };
        if args.budget == Some(0) {
            return Err(Failure::new(exit::USAGE, "--budget must be at least 1"));
        }
        Ok(Config {
            openai: openai.versioned(),
            anthropic,
            budgets: Budgets {
                budget: args.budget,
                model_budgets: args.model_budget.clone(),
                model_windows: args.model_window.clone(),
            },
            max_body: args.max_body,
            read_timeout: seconds("--read-timeout", args.read_timeout)?,
            connect_timeout: seconds("--connect-timeout", args.connect_timeout)?,
            upstream_timeout: seconds("--upstream-timeout", args.upstream_timeout)?,
            shutdown_timeout: seconds("--shutdown-timeout", args.shutdown_timeout)?,
            log: !args.quiet,
            compaction: args.responses_compaction,
            managed: args.anthropic_context_management,
        })
    }
}

/// How a request's budget is found: `--model-budget`, `--model-window`,
/// `--budget`.
#[derive(Clone, Debug)]
pub(crate) struct Budgets {
    /// The budget when no rule names the model.
    pub(crate) budget: Option<usize>,
    /// `--model-budget`: patterns and budgets.
    pub(crate) model_budgets: Vec<(String, usize)>,
    /// `--model-window`: patterns and windows.
    pub(crate) model_windows: Vec<(String, usize)>,
}

impl Budgets {
    /// Whether no rule gives any request a budget.
    pub(crate) fn none(&self) -> bool {
        self.budget.is_none() && self.model_budgets.is_empty() && self.model_windows.is_empty()
    }

    /// The budget for a request to `model`, whose reply and schemas may take
    /// `reserve` tokens (asked only for a window): the first --model-budget
    /// that matches, else the first --model-window less the reserve, else
    /// --budget. `Some(0)` when the
    /// reserve fills the window.
    pub(crate) fn budget(&self, model: Option<&str>, reserve: impl FnOnce() -> Option<u64>) -> Option<usize> {
        let matching = |rules: &[(String, usize)]| {
            let model = model?;
            rules.iter().find(|(p, _)| glob(p, model)).map(|&(_, n)| n)
        };
        if let Some(n) = matching(&self.model_budgets) {
            return Some(n);
        }
        if let Some(window) = matching(&self.model_windows) {
            let reserve = usize::try_from(reserve().unwrap_or(0)).unwrap_or(usize::MAX);
            return Some(window.saturating_sub(reserve));
        }
        self.budget
    }
}

/// Whether `text` matches `pattern`: `*` any run of characters, `?` one
/// character, anything else itself.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen, and where in the text it was tried.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                // Let the last `*` take one more character.
                Some((sp, st)) => {
                    star = Some((sp, st + 1));
                    pi = sp + 1;
                    ti = st + 1;
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_shells_do() {
        for (p, t) in [
            ("gpt-4o*", "gpt-4o"),
            ("gpt-4o*", "gpt-4o-mini"),
            ("*", ""),
            ("claude-*-4*", "claude-sonnet-4-5"),
            ("?pt", "gpt"),
            ("a*b*c", "aXbYbZc"),
            ("llama3.2", "llama3.2"),
        ] {
            assert!(glob(p, t), "{p} {t}");
        }
        for (p, t) in [
            ("gpt-4o", "gpt-4o-mini"),
            ("gpt-4o?", "gpt-4o"),
            ("a*b", "ac"),
            ("", "x"),
            ("*x", "xy"),
        ] {
            assert!(!glob(p, t), "{p} {t}");
        }
    }

    #[test]
    fn an_upstream_base_takes_the_request_path() {
        let u = |base: &str, path: &str| {
            Upstream::parse("--upstream", base)
                .unwrap()
                .uri(path)
                .unwrap()
                .to_string()
        };
        let openai = |base: &str, path: &str| {
            Upstream::parse("--openai-upstream", base)
                .unwrap()
                .versioned()
                .uri(path)
                .unwrap()
                .to_string()
        };
        // OpenAI's bases hold the version: the request's own `/v1` goes.
        assert_eq!(
            openai(
                "https://generativelanguage.googleapis.com/v1beta/openai/",
                "/v1/chat/completions"
            ),
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
        );
        assert_eq!(
            openai("http://127.0.0.1:9/openai", "/v1/models?x=1"),
            "http://127.0.0.1:9/openai/models?x=1"
        );
        assert_eq!(
            openai("https://api.openai.com", "/v1/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            openai("https://openrouter.ai/api/v1", "/chat/completions"),
            "https://openrouter.ai/api/v1/chat/completions"
        );
        assert_eq!(
            openai("http://127.0.0.1:9/openai", "/v1beta/x"),
            "http://127.0.0.1:9/openai/v1beta/x"
        );
        assert_eq!(
            u("https://api.openai.com", "/v1/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            u("https://api.openai.com/v1", "/v1/chat/completions"),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            u("https://api.openai.com/v1/", "/v1/models?x=1"),
            "https://api.openai.com/v1/models?x=1"
        );
        assert_eq!(
            u("http://127.0.0.1:9/openai", "/v1/models"),
            "http://127.0.0.1:9/openai/v1/models"
        );
        assert_eq!(
            u("http://127.0.0.1:9/v1", "/v1beta/x"),
            "http://127.0.0.1:9/v1/v1beta/x"
        );
        for bad in [
            "ftp://x",
            "localhost:8080",
            "http://user:pw@host",
            "http://host/?q=1",
            "not a url",
        ] {
            assert!(Upstream::parse("--upstream", bad).is_err(), "{bad}");
        }
    }
}
