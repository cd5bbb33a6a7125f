//! One fold at a time per conversation: concurrent requests that need the
//! same summary (a client retrying, replicas of one agent) make one
//! summarizer call, and the others wait for its answer.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use chatfold::{BoxError, SummaryRequest};

use super::fleet::{Fleet, Had, Key};

/// How long a landed summary stays for calls that planned before their
/// cache had it (planning takes milliseconds; this is ample).
pub(crate) const LINGER: Duration = Duration::from_secs(60);

/// The folds in flight in this process.
#[derive(Debug)]
pub(crate) struct Flights {
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    /// How long a waiter waits before it folds itself.
    wait: Duration,
    /// How long a landed summary stays ([`LINGER`]).
    linger: Duration,
    /// The fleet's locks, with `--cache-redis`.
    fleet: Option<Fleet>,
}

/// Where a fold's answer lands, and when it did.
#[derive(Debug, Default)]
struct Slot {
    answer: Mutex<Option<(Result<String, String>, Instant)>>,
    landed: Condvar,
}

impl Slot {
    /// Whether a summary landed longer than `linger` ago.
    fn stale(&self, linger: Duration) -> bool {
        self.answer
            .lock()
            .map(|a| a.as_ref().is_some_and(|(_, at)| at.elapsed() > linger))
            .unwrap_or(true)
    }
}

impl Flights {
    /// No folds in flight; a waiter gives up after `wait`; a summary stays
    /// for `linger` after it lands; a process's leader takes the `fleet`'s
    /// lock, when there is one.
    pub(crate) fn new(wait: Duration, linger: Duration, fleet: Option<Fleet>) -> Self {
        Flights {
            slots: Mutex::new(HashMap::new()),
            wait,
            linger,
            fleet,
        }
    }

    /// The answer of `summarize` for the fold `key`: this call's own, or,
    /// when the same fold is in flight, that one's (after at most the
    /// wait, then this call's own). A summary stays for the linger after it
    /// lands, for calls that planned before their cache had it; a failure
    /// leaves with its leader.
    pub(crate) fn run(
        &self,
        key: Key,
        summarize: impl FnOnce() -> Result<String, BoxError>,
    ) -> (Result<String, BoxError>, Had) {
        let (slot, leader) = {
            let Ok(mut slots) = self.slots.lock() else {
                return (summarize(), Had::Made);
            };
            let linger = self.linger;
            slots.retain(|_, slot| !slot.stale(linger));
            match slots.get(&key) {
                Some(slot) => (Arc::clone(slot), false),
                None => {
                    let slot = Arc::new(Slot::default());
                    slots.insert(key, Arc::clone(&slot));
                    (slot, true)
                }
            }
        };
        if !leader {
            if let Some(answer) = self.wait_for(&slot) {
                return (answer.map_err(BoxError::from), Had::Waited);
            }
            return (summarize(), Had::Made);
        }
        let landing = Landing {
            flights: self,
            key,
            slot,
        };
        let (answer, had) = match &self.fleet {
            Some(fleet) => fleet.run(&key, summarize),
            None => (summarize(), Had::Made),
        };
        landing.land(answer.as_ref().map(Clone::clone).map_err(ToString::to_string));
        (answer, had)
    }

    /// The slot's answer, once it lands, or `None` after the wait.
    fn wait_for(&self, slot: &Slot) -> Option<Result<String, String>> {
        let deadline = Instant::now() + self.wait;
        let mut answer = slot.answer.lock().ok()?;
        loop {
            if let Some((answer, _)) = answer.as_ref() {
                return Some(answer.clone());
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            answer = slot.landed.wait_timeout(answer, left).ok()?.0;
        }
    }
}

/// The leader's duty: land an answer, even when the summarizer panics (the
/// waiters then get an error, and fall back), and take a failure off the
/// table.
struct Landing<'a> {
    flights: &'a Flights,
    key: Key,
    slot: Arc<Slot>,
}

impl Landing<'_> {
    fn land(&self, answer: Result<String, String>) {
        if let Ok(mut slot) = self.slot.answer.lock() {
            slot.get_or_insert((answer, Instant::now()));
        }
        self.slot.landed.notify_all();
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        self.land(Err(
            "the summarizer call this request waited for did not finish".to_owned()
        ));
        let failed = self
            .slot
            .answer
            .lock()
            .map_or(true, |a| a.as_ref().is_none_or(|(answer, _)| answer.is_err()));
        if failed {
            if let Ok(mut slots) = self.flights.slots.lock() {
                slots.remove(&self.key);
            }
        }
    }
}

/// The fold's key: keyed BLAKE3 (the server's secret) over a canonical
/// encoding (every field length-prefixed) of the namespace and of the
/// request: its allowance, previous summary, ledger and messages.
pub(crate) fn key(secret: &[u8; 32], namespace: &str, request: &SummaryRequest<'_>) -> Key {
    let mut h = blake3::Hasher::new_keyed(secret);
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"chatfold serve fold v1");
    field(namespace.as_bytes());
    field(&(request.allowance() as u64).to_le_bytes());
    match request.previous_summary() {
        None => field(b"0"),
        Some(text) => {
            field(b"1");
            field(text.as_bytes());
        }
    }
    field(&(request.ledger().len() as u64).to_le_bytes());
    for entry in request.ledger() {
        field(entry.as_bytes());
    }
    field(&(request.messages().len() as u64).to_le_bytes());
    for m in request.messages() {
        // A message's JSON is one-to-one with the message.
        field(m.to_json().to_string().as_bytes());
    }
    *h.finalize().as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn concurrent_calls_for_one_fold_make_one_call() {
        let flights = Flights::new(Duration::from_secs(30), Duration::from_secs(30), None);
        let calls = AtomicUsize::new(0);
        let summarize = || {
            calls.fetch_add(1, Ordering::SeqCst);
            // Holds the fold until the eight others hold its slot too (the
            // table's, this call's and theirs), for ten seconds at most: with
            // single flight broken, every call leads and the asserts below fail.
            let deadline = Instant::now() + Duration::from_secs(10);
            let slot = flights.slots.lock().unwrap().get(&[1; 32]).cloned().unwrap();
            while Arc::strong_count(&slot) < 2 + 8 + 1 && Instant::now() < deadline {
                std::thread::yield_now();
            }
            Ok("the summary".to_owned())
        };
        std::thread::scope(|s| {
            let all: Vec<_> = (0..9)
                .map(|_| s.spawn(|| flights.run([1; 32], summarize)))
                .collect();
            let mut made = 0;
            for call in all {
                let (answer, had) = call.join().unwrap();
                assert_eq!(answer.unwrap(), "the summary");
                made += usize::from(had == Had::Made);
            }
            assert_eq!(made, 1);
        });
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A call that comes after the landing takes the summary too.
        let (answer, had) = flights.run([1; 32], || Ok("another".to_owned()));
        assert_eq!((answer.unwrap().as_str(), had), ("the summary", Had::Waited));
    }

    #[test]
    fn a_summary_lingers_for_the_wait_and_a_failure_not_at_all() {
        let flights = Flights::new(Duration::from_millis(10), Duration::from_millis(10), None);
        assert_eq!(
            flights.run([1; 32], || Ok("landed".to_owned())).0.unwrap(),
            "landed"
        );
        std::thread::sleep(Duration::from_millis(20));
        let (answer, had) = flights.run([1; 32], || Ok("again".to_owned()));
        assert_eq!((answer.unwrap().as_str(), had), ("again", Had::Made));
        let (answer, _) = flights.run([2; 32], || Err("down".into()));
        assert!(answer.is_err());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            flights.run([3; 32], || panic!("summarizer bug"))
        }));
        assert!(panicked.is_err());
        let slots = flights.slots.lock().unwrap();
        assert!(!slots.contains_key(&[2; 32]) && !slots.contains_key(&[3; 32]));
    }
}
