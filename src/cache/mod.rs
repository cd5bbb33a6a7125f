//! Summary reuse across compactions: the cache trait, the keys (a hash chain
//! over the folded prefix), and the caches shipped (in process, files; Redis
//! behind a feature).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::message::{Content, Message};

#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "redis")]
pub use self::redis::RedisCache;

/// Where summaries of folded prefixes are kept between compactions.
///
/// A cache is a plain key-value store: chatfold makes the keys (a hash chain
/// over the canonical form of the folded messages, the fold policy and the
/// compactor's cache namespace) and the values (versioned, carrying the
/// prefix's length and a second hash, checked on every read), so a cache
/// never has to understand either. A cache that fails (a server down, a
/// full disk) answers `None` and drops writes: a compaction never fails
/// because of its cache.
///
/// Shipped: [`MemoryCache`] (in process, bounded), [`FileCache`] (a folder,
/// for shell pipelines), and `RedisCache` (feature `redis`, for a fleet of
/// servers).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use chatfold::cache::MemoryCache;
/// use chatfold::{Compactor, Extractive, Message};
///
/// let cache = Arc::new(MemoryCache::new(1_000, 16 << 20));
/// let compactor = Compactor::new(300).cache(cache.clone(), "extractive");
/// let mut history: Vec<Message> = (0..60).map(|i| Message::user(format!("turn number {i}"))).collect();
/// compactor.compact(&history, &Extractive::new())?;
/// // The same client sends its whole transcript again, one turn longer.
/// history.push(Message::user("one more turn"));
/// let again = compactor.compact(&history, &Extractive::new())?;
/// assert!(again.report.reused().is_some());
/// assert!(cache.stats().hits >= 1);
/// # Ok::<(), chatfold::Error>(())
/// ```
pub trait SummaryCache: Send + Sync {
    /// The value stored under `key`, if any.
    fn get(&self, key: &str) -> Option<String>;

    /// The values stored under `keys`, in order: one round trip where the
    /// store allows (Redis's `MGET`); [`get`](Self::get) for each unless
    /// implemented.
    fn get_many(&self, keys: &[String]) -> Vec<Option<String>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Stores `value` under `key` (replacing any), or drops it.
    fn put(&self, key: &str, value: String);
}

/// The version of the keys and values chatfold writes; a cache shared by
/// different versions never mixes them.
const FORMAT: u32 = 1;

/// Two independent 64-bit hashes, fed the same bytes: the first names the
/// key, the second is stored in the value and checked on reading, with the
/// prefix's length, so that a collision of the first is caught.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    a: u64,
    b: u64,
}

impl Chain {
    /// The chain's start, from everything besides the messages that decides
    /// the summary: the format, the fold policy, the namespace.
    pub(crate) fn start(seed: &str) -> Chain {
        let mut chain = Chain {
            a: 0x243f_6a88_85a3_08d3,
            b: 0x1319_8a2e_0370_7344,
        };
        chain.bytes(&FORMAT.to_le_bytes());
        chain.bytes(seed.as_bytes());
        chain
    }

    /// The chain extended by one message's canonical form: its role, text or
    /// parts, name, tool calls and call id (not its `id` or unknown fields,
    /// which no summary reads).
    pub(crate) fn then(mut self, m: &Message) -> Chain {
        // Every field with a tag, every list with its length: no two
        // messages feed the same words.
        self.bytes(m.role.as_str().as_bytes());
        match &m.content {
            None => self.word(0),
            Some(Content::Text(text)) => {
                self.word(1);
                self.bytes(text.as_bytes());
            }
            Some(Content::Parts(parts)) => {
                self.word(2);
                self.word(parts.len() as u64);
                for part in parts {
                    self.bytes(part.as_json().to_string().as_bytes());
                }
            }
        }
        self.optional(m.name.as_deref());
        self.word(m.tool_calls.len() as u64);
        for call in &m.tool_calls {
            self.bytes(call.id.as_bytes());
            self.bytes(call.name.as_bytes());
            self.bytes(call.arguments.as_bytes());
        }
        self.optional(m.tool_call_id.as_deref());
        self
    }

    fn optional(&mut self, text: Option<&str>) {
        match text {
            None => self.word(0),
            Some(text) => {
                self.word(1);
                self.bytes(text.as_bytes());
            }
        }
    }

    /// Feeds a length-prefixed byte string, eight bytes at a time.
    fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0u8; 8];
            word.copy_from_slice(w);
            self.word(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(word));
        }
    }

    fn word(&mut self, w: u64) {
        self.a = (self.a ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
        self.b = (self.b.rotate_left(23) ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd) ^ (self.b >> 31);
    }

    /// The key naming the prefix this chain covers.
    pub(crate) fn key(&self) -> String {
        format!("chatfold:v{FORMAT}:{:016x}", self.a)
    }

    /// The value for a prefix of `len` messages summarized as `summary`.
    pub(crate) fn value(&self, len: usize, summary: &str) -> String {
        serde_json::json!({"v": FORMAT, "len": len, "check": format!("{:016x}", self.b), "summary": summary})
            .to_string()
    }

    /// The summary in `value`, if it is one this chain wrote for a prefix of
    /// `len` messages; anything else (another prefix, another format, a
    /// corrupt value) is ignored.
    pub(crate) fn read(&self, len: usize, value: &str) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(value).ok()?;
        let ours = v.get("v")?.as_u64()? == u64::from(FORMAT)
            && v.get("len")?.as_u64()? == len as u64
            && v.get("check")?.as_str()? == format!("{:016x}", self.b);
        let summary = v.get("summary")?.as_str()?.trim();
        (ours && !summary.is_empty()).then(|| summary.to_owned())
    }
}

/// Counters of a [`MemoryCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Reads that found a value.
    pub hits: u64,
    /// Reads that found none.
    pub misses: u64,
    /// Values held now.
    pub entries: usize,
    /// Bytes of keys and values held now.
    pub bytes: usize,
}

/// An in-process [`SummaryCache`], bounded by entries and bytes, least
/// recently used first out; thread-safe, shared through `Arc`.
///
/// # Examples
///
/// ```
/// use chatfold::cache::{MemoryCache, SummaryCache};
///
/// let cache = MemoryCache::new(2, 1 << 20);
/// cache.put("a", "1".into());
/// cache.put("b", "2".into());
/// assert_eq!(cache.get("a").as_deref(), Some("1")); // "a" is now the newest
/// cache.put("c", "3".into()); // "b" goes
/// assert_eq!(cache.get("b"), None);
/// assert_eq!(cache.stats().entries, 2);
/// assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1));
/// ```
pub struct MemoryCache {
    max_entries: usize,
    max_bytes: usize,
    lru: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Values by key, and keys by last use.
#[derive(Default)]
struct Lru {
    values: HashMap<String, (String, u64)>,
    order: BTreeMap<u64, String>,
    tick: u64,
    bytes: usize,
}

impl fmt::Debug for MemoryCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryCache")
            .field("max_entries", &self.max_entries)
            .field("max_bytes", &self.max_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}

impl MemoryCache {
    /// A cache of at most `max_entries` values and `max_bytes` bytes of keys
    /// and values.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        MemoryCache {
            max_entries,
            max_bytes,
            lru: Mutex::new(Lru::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Hits, misses, and what it holds.
    pub fn stats(&self) -> CacheStats {
        let (entries, bytes) = self
            .lru
            .lock()
            .map(|l| (l.values.len(), l.bytes))
            .unwrap_or_default();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries,
            bytes,
        }
    }
}

impl SummaryCache for MemoryCache {
    fn get(&self, key: &str) -> Option<String> {
        let found = self.lru.lock().ok().and_then(|mut lru| {
            let lru = &mut *lru;
            lru.tick += 1;
            let tick = lru.tick;
            let (value, used) = lru.values.get_mut(key)?;
            let key = lru.order.remove(used)?;
            *used = tick;
            lru.order.insert(tick, key);
            Some(value.clone())
        });
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    fn put(&self, key: &str, value: String) {
        let size = key.len() + value.len();
        if size > self.max_bytes || self.max_entries == 0 {
            return;
        }
        let Ok(mut lru) = self.lru.lock() else { return };
        let lru = &mut *lru;
        lru.tick += 1;
        let tick = lru.tick;
        if let Some((old, used)) = lru.values.remove(key) {
            lru.order.remove(&used);
            lru.bytes -= key.len() + old.len();
        }
        while lru.values.len() >= self.max_entries || lru.bytes + size > self.max_bytes {
            let Some((_, oldest)) = lru.order.pop_first() else {
                break;
            };
            if let Some((old, _)) = lru.values.remove(&oldest) {
                lru.bytes -= oldest.len() + old.len();
            }
        }
        lru.values.insert(key.to_owned(), (value, tick));
        lru.order.insert(tick, key.to_owned());
        lru.bytes += size;
    }
}

/// A [`SummaryCache`] in a folder, one file per key: for shell pipelines
/// and the CLI (`--cache-dir`), where each compaction is a process of its
/// own. Writes go to a temporary file renamed into place, so a reader never
/// sees half a value; a folder that cannot be read or written is no cache.
///
/// # Examples
///
/// ```
/// use chatfold::cache::{FileCache, SummaryCache};
///
/// let dir = std::env::temp_dir().join(format!("chatfold-doc-{}", std::process::id()));
/// let cache = FileCache::new(&dir);
/// cache.put("chatfold:v1:0123abcd", "{\"v\":1}".into());
/// assert_eq!(cache.get("chatfold:v1:0123abcd").as_deref(), Some("{\"v\":1}"));
/// # std::fs::remove_dir_all(&dir).ok();
/// ```
#[derive(Clone, Debug)]
pub struct FileCache {
    dir: PathBuf,
}

impl FileCache {
    /// A cache in `dir` (made when first written).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileCache { dir: dir.into() }
    }

    /// The file for `key`: its characters other than letters, digits, `-`
    /// and `_` become `_`.
    fn path(&self, key: &str) -> PathBuf {
        let name: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.dir.join(name)
    }
}

impl SummaryCache for FileCache {
    fn get(&self, key: &str) -> Option<String> {
        std::fs::read_to_string(self.path(key)).ok()
    }

    fn put(&self, key: &str, value: String) {
        // A name of its own per write, so that writers never share a file.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let path = self.path(key);
        let n = WRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(&tmp, value))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn chains_tell_messages_and_seeds_apart() {
        let start = Chain::start("policy");
        let a = start.then(&Message::user("hello"));
        assert_eq!(a, Chain::start("policy").then(&Message::user("hello")));
        assert_ne!(a, start.then(&Message::assistant("hello")));
        assert_ne!(a, start.then(&Message::user("hello ")));
        assert_ne!(a, Chain::start("other").then(&Message::user("hello")));
        // Boundaries between fields count: "ab" + "" is not "a" + "b".
        let call = |args: &str| Message::assistant_tool_calls(vec![ToolCall::new("c", "f", args)]);
        assert_ne!(
            start.then(&call("ab")),
            start.then(&call("a")).then(&Message::user("b"))
        );
        // Ids and unknown fields are not part of the canonical form.
        assert_eq!(a, start.then(&Message::user("hello").with_id("m1")));
        // Null content is not the text that looks like it; one part is not its JSON as text.
        let mut null = Message::assistant("");
        null.content = None;
        assert_ne!(start.then(&null), start.then(&Message::assistant("")));
        let part = crate::message::Part::text("x");
        let parts = Message::user("").with_parts(vec![part.clone()]);
        assert_ne!(
            start.then(&parts),
            start.then(&Message::user(part.as_json().to_string()))
        );
    }

    #[test]
    fn values_are_checked_on_reading() {
        let chain = Chain::start("p").then(&Message::user("x"));
        let value = chain.value(1, "the summary");
        assert_eq!(chain.read(1, &value).as_deref(), Some("the summary"));
        assert_eq!(chain.read(2, &value), None, "another length");
        let other = Chain::start("p").then(&Message::user("y"));
        assert_eq!(other.read(1, &value), None, "another second hash");
        assert_eq!(chain.read(1, "not json"), None);
        assert_eq!(chain.read(1, &value.replace("\"v\":1", "\"v\":9")), None);
        assert_eq!(chain.read(1, &chain.value(1, "   ")), None, "blank");
    }

    #[test]
    fn the_memory_cache_keeps_to_its_bounds() {
        let cache = MemoryCache::new(100, 40);
        cache.put("k1", "0123456789".into());
        cache.put("k2", "0123456789".into());
        cache.put("k3", "0123456789".into()); // 36 bytes
        cache.put("k4", "0123456789".into()); // k1 goes
        assert_eq!(cache.get("k1"), None);
        assert_eq!(cache.stats().entries, 3);
        assert!(cache.stats().bytes <= 40);
        cache.put("big", "x".repeat(100));
        assert_eq!(cache.get("big"), None, "larger than the whole cache");
        cache.put("k2", "short".into());
        assert_eq!(cache.get("k2").as_deref(), Some("short"));
        assert_eq!(cache.stats().bytes, 12 + 12 + 7);
    }
}
