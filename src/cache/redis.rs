//! A summary cache in Redis, for a fleet of servers that share summaries.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::Commands as _;

use crate::cache::SummaryCache;
use crate::error::{ConfigError, Error, Result};

/// A [`SummaryCache`] in Redis (feature `redis`): stateless servers behind
/// a load balancer share their folds, so a conversation folded by one is
/// reused by the next.
///
/// Keys get a prefix (`chatfold:` unless set) and values a time to live
/// (7 days unless set). Every command has a time-out (200 ms unless set);
/// when Redis fails or is unreachable, the cache logs a warning, answers
/// "not found", drops writes, and tries again after a pause (5 s), so an
/// outage costs one time-out, not one per compaction, and never fails a
/// compaction. It holds one connection, made when first needed and made
/// again after an error; compactions sharing one `RedisCache` take turns on
/// it (one per thread, or a pool of caches, for heavy concurrency).
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use chatfold::cache::RedisCache;
/// use chatfold::Compactor;
///
/// let cache = RedisCache::new("redis://127.0.0.1:6379/0")?.ttl(Duration::from_secs(24 * 3600));
/// let compactor = Compactor::new(8_000).fold_to(4_000).cache(Arc::new(cache), "gpt-4o-mini v3 prompt");
/// # Ok::<(), chatfold::Error>(())
/// ```
pub struct RedisCache {
    client: redis::Client,
    prefix: String,
    ttl: Duration,
    timeout: Duration,
    pause: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    connection: Option<redis::Connection>,
    /// No attempt before this instant, after a failure.
    quiet_until: Option<Instant>,
}

impl fmt::Debug for RedisCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCache")
            .field("server", &self.client.get_connection_info().addr().to_string())
            .field("prefix", &self.prefix)
            .field("ttl", &self.ttl)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RedisCache {
    /// A cache at `url` (`redis://[user:password@]host[:port][/db]`,
    /// `rediss://` for TLS is not built in). Nothing is connected yet.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] when `url` is not a Redis URL.
    pub fn new(url: &str) -> Result<Self> {
        let client = redis::Client::open(url).map_err(|e| {
            Error::InvalidConfig(ConfigError::Invalid {
                setting: "redis_url",
                // Only the scheme: the rest may hold a password.
                value: match url.split_once(':') {
                    Some((scheme, _)) if scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '+') => {
                        format!("{scheme}:…")
                    }
                    _ => "…".to_owned(),
                },
                source: Box::new(e),
            })
        })?;
        Ok(RedisCache {
            client,
            prefix: "chatfold:".to_owned(),
            ttl: Duration::from_secs(7 * 24 * 3600),
            timeout: Duration::from_millis(200),
            pause: Duration::from_secs(5),
            state: Mutex::new(State::default()),
        })
    }

    /// Put `prefix` before every key (several applications can share a
    /// server).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long a summary is kept (at least a second).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_secs(1));
        self
    }

    /// How long a connection attempt or a command may take.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long to leave Redis alone after a failure.
    #[must_use]
    pub fn pause(mut self, pause: Duration) -> Self {
        self.pause = pause;
        self
    }

    /// Runs `command` on the connection, making one if needed; on failure
    /// logs, forgets the connection, and goes quiet for a while.
    fn with<T>(
        &self,
        what: &str,
        command: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        let mut state = self.state.lock().ok()?;
        if state.quiet_until.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        if state.connection.is_none() {
            let connected = self
                .client
                .get_connection_with_timeout(self.timeout)
                .and_then(|c| {
                    c.set_read_timeout(Some(self.timeout))?;
                    c.set_write_timeout(Some(self.timeout))?;
                    Ok(c)
                });
            match connected {
                Ok(c) => state.connection = Some(c),
                Err(e) => {
                    log::warn!(
                        "summary cache: cannot reach Redis ({e}); no cache for {} s",
                        self.pause.as_secs_f64()
                    );
                    state.quiet_until = Some(Instant::now() + self.pause);
                    return None;
                }
            }
        }
        let connection = state.connection.as_mut()?;
        match command(connection) {
            Ok(value) => {
                state.quiet_until = None;
                Some(value)
            }
            Err(e) => {
                log::warn!(
                    "summary cache: Redis {what} failed ({e}); no cache for {} s",
                    self.pause.as_secs_f64()
                );
                state.connection = None;
                state.quiet_until = Some(Instant::now() + self.pause);
                None
            }
        }
    }
}

impl SummaryCache for RedisCache {
    fn get(&self, key: &str) -> Option<String> {
        self.with("GET", |c| {
            c.get::<_, Option<String>>(format!("{}{key}", self.prefix))
        })
        .flatten()
    }

    fn get_many(&self, keys: &[String]) -> Vec<Option<String>> {
        if keys.is_empty() {
            return Vec::new();
        }
        let full: Vec<String> = keys.iter().map(|k| format!("{}{k}", self.prefix)).collect();
        self.with("MGET", |c| {
            redis::cmd("MGET").arg(&full).query::<Vec<Option<String>>>(c)
        })
        .filter(|values| values.len() == keys.len())
        .unwrap_or_else(|| vec![None; keys.len()])
    }

    fn put(&self, key: &str, value: String) {
        let key = format!("{}{key}", self.prefix);
        let _ = self.with("SET", |c| c.set_ex::<_, _, ()>(key, value, self.ttl.as_secs()));
    }
}
