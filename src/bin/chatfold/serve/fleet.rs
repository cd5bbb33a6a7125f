//! One fold at a time across a fleet of proxies sharing Redis: the
//! process that takes a fold's lock (`SET NX PX`, with an expiry) folds
//! and leaves the summary under the fold's key; the others wait for it,
//! and fold themselves when it does not come. Redis being down is no lock
//! at all: every process folds for itself, and no request fails.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chatfold::BoxError;

/// A fold's name: a keyed hash of its tenant's namespace and everything the
/// summarizer is asked.
pub(crate) type Key = [u8; 32];

/// How a summary was had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Had {
    /// This call made it.
    Made,
    /// Another call in flight (in this process or, through Redis, in
    /// another) made it; this one waited.
    Waited,
}

/// How often a waiter looks for the summary.
const POLL: Duration = Duration::from_millis(20);
/// How long a landed summary stays for late waiters.
const KEEP: Duration = Duration::from_secs(60);
/// How long a command may take.
const TIMEOUT: Duration = Duration::from_millis(200);
/// How long Redis is left alone after a failure.
const PAUSE: Duration = Duration::from_secs(5);

/// Deletes the lock only if it is still this process's.
const UNLOCK: &str =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// The fleet's locks, in Redis.
pub(crate) struct Fleet {
    client: redis::Client,
    /// How long a lock lives, and how long a waiter waits.
    wait: Duration,
    /// This process's name on the locks it takes.
    token: String,
    state: Mutex<State>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    connection: Option<redis::Connection>,
    quiet_until: Option<Instant>,
}

impl Fleet {
    /// Locks in the Redis at `url`; a lock lives, and a waiter waits, `wait`.
    pub(crate) fn new(url: &str, wait: Duration) -> Result<Fleet, String> {
        let client = redis::Client::open(url).map_err(|e| format!("--cache-redis: {e}"))?;
        let token = format!("{}-{:x}", std::process::id(), rand_word());
        Ok(Fleet {
            client,
            wait,
            token,
            state: Mutex::new(State::default()),
        })
    }

    /// The answer for the fold `key`: a summary another process left, or
    /// `summarize`'s, made under the fleet's lock when it can be had.
    pub(crate) fn run(
        &self,
        key: &Key,
        summarize: impl FnOnce() -> Result<String, BoxError>,
    ) -> (Result<String, BoxError>, Had) {
        let name: String = key.iter().map(|b| format!("{b:02x}")).collect();
        let (lock, landed) = (
            format!("chatfold:flight:{name}:lock"),
            format!("chatfold:flight:{name}:summary"),
        );
        if let Some(Some(summary)) =
            self.command(|c| redis::cmd("GET").arg(&landed).query::<Option<String>>(c))
        {
            return (Ok(summary), Had::Waited);
        }
        let ttl = u64::try_from(self.wait.as_millis()).unwrap_or(u64::MAX).max(1);
        let taken = self.command(|c| {
            redis::cmd("SET")
                .arg(&lock)
                .arg(&self.token)
                .arg("NX")
                .arg("PX")
                .arg(ttl)
                .query::<Option<String>>(c)
        });
        match taken {
            // Another process folds: wait for its summary.
            Some(None) => {
                if let Some(summary) = self.wait_for(&lock, &landed) {
                    return (Ok(summary), Had::Waited);
                }
                (summarize(), Had::Made)
            }
            Some(Some(_)) => {
                let answer = summarize();
                if let Ok(summary) = &answer {
                    let keep = u64::try_from(KEEP.as_millis()).unwrap_or(u64::MAX);
                    let _ = self.command(|c| {
                        redis::cmd("SET")
                            .arg(&landed)
                            .arg(summary)
                            .arg("PX")
                            .arg(keep)
                            .query::<()>(c)
                    });
                }
                let _ = self.command(|c| {
                    redis::cmd("EVAL")
                        .arg(UNLOCK)
                        .arg(1)
                        .arg(&lock)
                        .arg(&self.token)
                        .query::<i64>(c)
                });
                (answer, Had::Made)
            }
            // No Redis: no lock.
            None => (summarize(), Had::Made),
        }
    }

    /// The summary the lock's holder leaves, or `None` when the lock goes
    /// (or Redis does) without one, or the wait is over.
    fn wait_for(&self, lock: &str, landed: &str) -> Option<String> {
        let deadline = Instant::now() + self.wait;
        while Instant::now() < deadline {
            std::thread::sleep(POLL);
            let (summary, held) = self.command(|c| {
                redis::pipe()
                    .cmd("GET")
                    .arg(landed)
                    .cmd("EXISTS")
                    .arg(lock)
                    .query::<(Option<String>, bool)>(c)
            })?;
            if summary.is_some() {
                return summary;
            }
            if !held {
                return None;
            }
        }
        None
    }

    /// Runs `command` on the connection (made when needed); `None` when
    /// Redis fails, and then for a pause.
    fn command<T>(&self, command: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>) -> Option<T> {
        let mut state = self.state.lock().ok()?;
        if state.quiet_until.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        if state.connection.is_none() {
            let connected = self.client.get_connection_with_timeout(TIMEOUT).and_then(|c| {
                c.set_read_timeout(Some(TIMEOUT))?;
                c.set_write_timeout(Some(TIMEOUT))?;
                Ok(c)
            });
            match connected {
                Ok(c) => state.connection = Some(c),
                Err(_) => {
                    state.quiet_until = Some(Instant::now() + PAUSE);
                    return None;
                }
            }
        }
        let result = command(state.connection.as_mut()?);
        match result {
            Ok(value) => Some(value),
            Err(_) => {
                state.connection = None;
                state.quiet_until = Some(Instant::now() + PAUSE);
                None
            }
        }
    }
}

/// A word that differs between processes and starts.
fn rand_word() -> u64 {
    let secret = super::tenant::secret(None);
    u64::from_le_bytes([
        secret[0], secret[1], secret[2], secret[3], secret[4], secret[5], secret[6], secret[7],
    ])
}
