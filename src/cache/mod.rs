//! Summary reuse across compactions: the cache trait, the keys (keyed
//! BLAKE3 over the folded prefix's canonical encoding), and the caches
//! shipped (in process, files; Redis behind a feature).

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
/// A cache is a plain key-value store: chatfold makes the keys (a keyed
/// hash of the canonical form of the fold policy and the folded messages,
/// keyed by the compactor's cache namespace) and the values (versioned, carrying the
/// prefix's length and a second hash, checked on every read), so a cache
/// never has to understand either. A cache that fails (a server down, a
/// full disk) answers `None` and drops writes: a compaction never fails
/// because of its cache.
///
/// Shipped: [`MemoryCache`] (in process, bounded), [`FileCache`] (a folder,
/// for shell pipelines), and `RedisCache` (feature `redis`, for a fleet of
/// servers).
///
/// # Keys and namespaces
///
/// A key is keyed BLAKE3 over a canonical encoding (every field
/// length-prefixed) of the folded messages (role, text or parts, name,
/// tool calls, call id) and of the fold's settings (the [`FoldPolicy`]'s
/// fields, [`Compactor::clear_tool_results`],
/// [`Compactor::max_fold_input_tokens`]); the hash's key is derived from the
/// namespace given to [`Compactor::cache`]. Keys are therefore only as
/// secret as the namespace. A server whose tenants share a cache must put a
/// secret of each tenant's in its namespace (a keyed hash of the tenant's
/// credential, say): otherwise a tenant who can guess another's messages
/// could be served the summary of them.
///
/// [`FoldPolicy`]: crate::FoldPolicy
/// [`Compactor::clear_tool_results`]: crate::Compactor::clear_tool_results
/// [`Compactor::max_fold_input_tokens`]: crate::Compactor::max_fold_input_tokens
/// [`Compactor::cache`]: crate::Compactor::cache
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
/// different versions never mixes them (1: a non-cryptographic hash; 2:
/// keyed BLAKE3 over a canonical encoding, a link per message; 3: the same
/// encoding as one keyed stream).
const FORMAT: u32 = 3;

/// The context string the chain's key is derived under (BLAKE3's
/// `derive_key`): fixed for a format, unique to this use.
const KEY_CONTEXT: &str = "chatfold 2026-12 summary cache v3 namespace key";

/// A keyed BLAKE3 stream over the canonical encoding of the fold's
/// settings and then of the folded messages, one after another: the hash
/// of the stream so far names the prefix read (the encoding delimits every
/// field and message, so no two prefixes feed the same bytes). One stream
/// hashes a history in BLAKE3's parallel lanes; a [`Link`] is taken where
/// a prefix may be looked up.
///
/// The key is derived from the compactor's cache namespace, so keys are
/// only as secret as the namespace: a server that keeps tenants apart must
/// put a secret of each tenant's in it (a keyed hash of its credential),
/// or one tenant who knows another's messages can tell whether they were
/// folded, and be served that fold's summary.
#[derive(Clone)]
pub(crate) struct Chain {
    stream: Encoder,
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.clone().link().fmt(f)
    }
}

impl PartialEq for Chain {
    fn eq(&self, other: &Self) -> bool {
        self.clone().link() == other.clone().link()
    }
}

/// The hash of a prefix: its first half names the key; its second half is
/// stored in the value and checked on reading, with the prefix's length, so
/// that a collision of the first is caught.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link {
    link: [u8; 32],
}

impl fmt::Debug for Link {
    /// The link's first half only (never the key, which it does not hold).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Link({})", hex(&self.link[..16]))
    }
}

/// A keyed hasher fed a canonical encoding: every variable-length field
/// length-prefixed, every choice tagged, so that no two inputs that differ
/// feed the same bytes ("ab" + "c" is not "a" + "bc").
///
/// The encoding is gathered and handed to the hasher [`Encoder::RUN`]
/// bytes at a time: BLAKE3 hashes the whole chunks of one long input side
/// by side (SIMD), but a message's few hundred bytes, fed alone, one 64-byte
/// block after another. The hash is the same either way.
#[derive(Clone)]
struct Encoder {
    hasher: blake3::Hasher,
    /// Encoded, not yet hashed (less than [`Encoder::RUN`] bytes).
    pending: Vec<u8>,
}

impl Encoder {
    /// Bytes gathered before they are hashed: 64 chunks. (BLAKE3 hashes
    /// the last chunk of each input alone, a 64th of a run.)
    const RUN: usize = 64 << 10;

    fn new(key: &[u8; 32], what: u8) -> Self {
        let mut e = Encoder {
            hasher: blake3::Hasher::new_keyed(key),
            pending: Vec::new(),
        };
        e.update(&[what]);
        e
    }

    /// Feeds `bytes` to the hash, gathered into runs.
    fn update(&mut self, bytes: &[u8]) {
        if self.pending.len() + bytes.len() < Encoder::RUN {
            if self.pending.capacity() == 0 {
                self.pending.reserve_exact(Encoder::RUN);
            }
            self.pending.extend_from_slice(bytes);
            return;
        }
        self.flush();
        match bytes.len() < Encoder::RUN {
            true => self.pending.extend_from_slice(bytes),
            false => {
                self.hasher.update(bytes);
            }
        }
    }

    /// Hashes what is gathered.
    fn flush(&mut self) {
        self.hasher.update(&self.pending);
        self.pending.clear();
    }

    fn word(&mut self, w: u64) {
        self.update(&w.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.word(bytes.len() as u64);
        self.update(bytes);
    }

    fn text(&mut self, text: &str) {
        self.bytes(text.as_bytes());
    }

    fn optional_text(&mut self, text: Option<&str>) {
        match text {
            None => self.word(0),
            Some(text) => {
                self.word(1);
                self.text(text);
            }
        }
    }

    fn optional_word(&mut self, w: Option<usize>) {
        match w {
            None => self.word(0),
            Some(w) => {
                self.word(1);
                self.word(w as u64);
            }
        }
    }

    /// JSON with object keys sorted, numbers and strings as serde_json
    /// writes them, each value tagged with its type.
    fn json(&mut self, value: &serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::Null => self.word(0),
            Value::Bool(b) => {
                self.word(1);
                self.word(u64::from(*b));
            }
            Value::Number(n) => {
                self.word(2);
                self.text(&n.to_string());
            }
            Value::String(text) => {
                self.word(3);
                self.text(text);
            }
            Value::Array(items) => {
                self.word(4);
                self.word(items.len() as u64);
                for item in items {
                    self.json(item);
                }
            }
            Value::Object(fields) => {
                self.word(5);
                self.word(fields.len() as u64);
                let mut sorted: Vec<_> = fields.iter().collect();
                sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in sorted {
                    self.text(k);
                    self.json(v);
                }
            }
        }
    }

    /// The hash of everything fed so far (feeding may go on).
    fn finish(&mut self) -> [u8; 32] {
        self.flush();
        *self.hasher.finalize().as_bytes()
    }
}

/// One setting of a chain's start, encoded as its kind says.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Setting<'a> {
    /// A number.
    Word(u64),
    /// A text.
    Text(&'a str),
    /// A number or none.
    Maybe(Option<usize>),
}

/// Link tags: what a hash is of.
const START: u8 = 1;
const MESSAGE: u8 = 2;
/// A pinned message follows (DESIGN rule 11).
const PINNED: u8 = 3;

impl Chain {
    /// The chain's start: keyed by the namespace, then `settings`, which are
    /// everything besides the messages that decides the summary (the
    /// compactor gives them, `Compactor::chain_start`), each length-prefixed.
    pub(crate) fn start(namespace: &str, settings: &[Setting<'_>]) -> Chain {
        let key = blake3::derive_key(KEY_CONTEXT, namespace.as_bytes());
        let mut e = Encoder::new(&key, START);
        e.word(u64::from(FORMAT));
        for setting in settings {
            match *setting {
                Setting::Word(w) => e.word(w),
                Setting::Text(t) => e.text(t),
                Setting::Maybe(w) => e.optional_word(w),
            }
        }
        Chain { stream: e }
    }

    /// The chain extended by one message (see [`push`](Self::push)).
    #[cfg(test)]
    fn then(&self, m: &Message) -> Chain {
        let mut next = self.clone();
        next.push(m);
        next
    }

    /// Extends the chain by one message's canonical form: its role, text or
    /// parts, name, tool calls and call id (not its `id` or unknown fields,
    /// which no summary reads).
    pub(crate) fn push(&mut self, m: &Message) {
        let e = &mut self.stream;
        e.update(&[MESSAGE]);
        e.text(m.role.as_str());
        match &m.content {
            None => e.word(0),
            Some(Content::Text(text)) => {
                e.word(1);
                e.text(text);
            }
            Some(Content::Parts(parts)) => {
                e.word(2);
                e.word(parts.len() as u64);
                for part in parts {
                    e.json(part.as_json());
                }
            }
            Some(Content::Item(item)) => {
                e.word(3);
                e.json(item.as_json());
            }
        }
        e.optional_text(m.name.as_deref());
        e.word(m.tool_calls.len() as u64);
        for call in &m.tool_calls {
            e.text(&call.id);
            e.text(&call.name);
            e.text(&call.arguments);
        }
        e.optional_text(m.tool_call_id.as_deref());
    }

    /// The hash of the prefix read so far.
    pub(crate) fn link(&mut self) -> Link {
        Link {
            link: self.stream.finish(),
        }
    }

    /// The links of the prefixes of `messages` whose lengths are in
    /// `wanted` (ascending), in one pass from `self`; the messages at
    /// `pinned` (ascending) marked as pinned.
    pub(crate) fn links(
        mut self,
        messages: &[Message],
        wanted: &[usize],
        pinned: &[usize],
    ) -> Vec<(usize, Link)> {
        let mut out = Vec::with_capacity(wanted.len());
        let mut next = wanted.iter().copied().peekable();
        let mut pins = pinned.iter().copied().peekable();
        for (i, m) in messages.iter().enumerate() {
            while let Some(w) = next.next_if(|&w| w <= i) {
                if w == i {
                    out.push((i, self.link()));
                }
            }
            if pins.next_if(|&p| p <= i).is_some_and(|p| p == i) {
                // A pinned message is not folded: a prefix's summary
                // depends on which of its messages were.
                self.stream.update(&[PINNED]);
            }
            self.push(m);
        }
        if next.any(|w| w == messages.len()) {
            out.push((messages.len(), self.link()));
        }
        out
    }

    /// [`Link::key`] of the prefix read so far.
    #[cfg(test)]
    fn key(&self) -> String {
        self.clone().link().key()
    }

    /// [`Link::check`] of the prefix read so far.
    #[cfg(test)]
    fn check(&self) -> String {
        self.clone().link().check()
    }

    /// [`Link::value`] of the prefix read so far.
    #[cfg(test)]
    fn value(&self, len: usize, summary: &str) -> String {
        self.clone().link().value(len, summary)
    }

    /// [`Link::read`] of the prefix read so far.
    #[cfg(test)]
    fn read(&self, len: usize, value: &str) -> Option<String> {
        self.clone().link().read(len, value)
    }
}

impl Link {
    /// The second check: the link's second half.
    fn check(&self) -> String {
        hex(&self.link[16..])
    }

    /// The key naming the prefix this chain covers: the link's first half.
    pub(crate) fn key(&self) -> String {
        format!("chatfold:v{FORMAT}:{}", hex(&self.link[..16]))
    }

    /// The value for a prefix of `len` messages summarized as `summary`.
    pub(crate) fn value(&self, len: usize, summary: &str) -> String {
        serde_json::json!({"v": FORMAT, "len": len, "check": self.check(), "summary": summary}).to_string()
    }

    /// The key naming a fold recorded on this prefix (rule 10): apart from
    /// the summaries' keys, as the value says something else.
    pub(crate) fn step_key(&self) -> String {
        format!("chatfold:v{FORMAT}:step:{}", hex(&self.link[..16]))
    }

    /// The value recording `step` (a fold) on a prefix of `len` messages.
    pub(crate) fn value_with(&self, len: usize, step: serde_json::Value) -> String {
        serde_json::json!({"v": FORMAT, "len": len, "check": self.check(), "step": step}).to_string()
    }

    /// The fold in `value`, if this chain wrote it for a prefix of `len`
    /// messages (as [`read`](Self::read) checks a summary).
    pub(crate) fn read_with(&self, len: usize, value: &str) -> Option<serde_json::Value> {
        let mut v: serde_json::Value = serde_json::from_str(value).ok()?;
        let ours = v.get("v")?.as_u64()? == u64::from(FORMAT)
            && v.get("len")?.as_u64()? == len as u64
            && v.get("check")?.as_str()? == self.check();
        ours.then(|| v.get_mut("step").map(serde_json::Value::take))?
    }

    /// The summary in `value`, if it is one this chain wrote for a prefix of
    /// `len` messages; anything else (another prefix, another format, a
    /// corrupt value) is ignored.
    pub(crate) fn read(&self, len: usize, value: &str) -> Option<String> {
        let v: serde_json::Value = serde_json::from_str(value).ok()?;
        let ours = v.get("v")?.as_u64()? == u64::from(FORMAT)
            && v.get("len")?.as_u64()? == len as u64
            && v.get("check")?.as_str()? == self.check();
        let summary = v.get("summary")?.as_str()?.trim();
        (ours && !summary.is_empty()).then(|| summary.to_owned())
    }
}

/// Lowercase hexadecimal.
fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
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
/// cache.put("chatfold:v3:0123abcd", "{\"v\":1}".into());
/// assert_eq!(cache.get("chatfold:v3:0123abcd").as_deref(), Some("{\"v\":1}"));
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
mod tests;
