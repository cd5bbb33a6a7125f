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

/// Link tags: what a hash is of.
const START: u8 = 1;
const MESSAGE: u8 = 2;

impl Chain {
    /// The chain's start, from everything besides the messages that decides
    /// the summary: the format, the fold policy, the compactor's clearing
    /// of tool results and chunking of large folds; keyed by the namespace.
    ///
    /// Not in it: the budget and `keep_recent` (a cached summary is reused
    /// only where it fits) and the counter.
    pub(crate) fn start<C>(compactor: &crate::Compactor<C>, namespace: &str) -> Chain {
        let key = blake3::derive_key(KEY_CONTEXT, namespace.as_bytes());
        let mut e = Encoder::new(&key, START);
        e.word(u64::from(FORMAT));
        // Every field named, so that a new one cannot be forgotten here.
        let crate::FoldPolicy {
            summary_role,
            summary_prefix,
            min_summary_tokens,
            max_summary_tokens,
            ledger,
            ledger_percent,
            ledger_patterns,
            // Where the summary goes, not what it says.
            placement: _,
        } = &compactor.policy;
        e.text(summary_role.as_str());
        e.text(summary_prefix);
        e.word(*min_summary_tokens as u64);
        e.optional_word(*max_summary_tokens);
        e.word(u64::from(*ledger));
        e.word(u64::from(*ledger_percent));
        e.word(ledger_patterns.len() as u64);
        for pattern in ledger_patterns {
            e.text(pattern.as_str());
        }
        match &compactor.clear_tool_results {
            None => e.word(0),
            Some(crate::ClearToolResults {
                keep_recent,
                min_tokens,
                exclude,
            }) => {
                e.word(1);
                e.word(*keep_recent as u64);
                e.word(*min_tokens as u64);
                e.word(exclude.len() as u64);
                for tool in exclude {
                    e.text(tool);
                }
            }
        }
        e.optional_word(compactor.max_fold_input_tokens);
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
    /// `wanted` (ascending), in one pass from `self`.
    pub(crate) fn links(mut self, messages: &[Message], wanted: &[usize]) -> Vec<(usize, Link)> {
        let mut out = Vec::with_capacity(wanted.len());
        let mut next = wanted.iter().copied().peekable();
        for (i, m) in messages.iter().enumerate() {
            while let Some(w) = next.next_if(|&w| w <= i) {
                if w == i {
                    out.push((i, self.link()));
                }
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
mod tests {
    use super::*;
    use crate::message::ToolCall;
    use crate::{ClearToolResults, Compactor, FoldPolicy};

    fn start(namespace: &str) -> Chain {
        Chain::start(&Compactor::new(100), namespace)
    }

    #[test]
    fn keys_stay_the_same_however_the_encoding_is_fed() {
        // Keys written by earlier builds (and shared through Redis) must be
        // found again: these are the keys of this history before the
        // encoding was gathered into runs. One text spans several runs,
        // others fill a run in part, and a link falls inside a run. (A new
        // FORMAT or default policy changes them too, as it should: update
        // them then, knowing that earlier caches are left behind.)
        let long: String = (0..6000).map(|i| format!("w{i} ")).collect();
        let parts = Message::user("").with_parts(vec![
            crate::message::Part::text("a part"),
            crate::message::Part::text("é".repeat(9000)),
        ]);
        let messages = vec![
            Message::system("You are terse."),
            Message::user(long.clone()),
            Message::assistant_tool_calls(vec![ToolCall::new("call_1", "lookup", &long[..20_000])]),
            Message::tool("found: 42", "call_1"),
            parts,
            Message::user("done?"),
        ];
        let keys: Vec<(usize, String)> = start("golden")
            .links(&messages, &[0, 1, 2, 3, 5, 6])
            .into_iter()
            .map(|(at, link)| (at, link.key()))
            .collect();
        let expected: Vec<(usize, String)> = GOLDEN_KEYS.iter().map(|&(at, k)| (at, k.to_owned())).collect();
        assert_eq!(keys, expected);
    }

    const GOLDEN_KEYS: &[(usize, &str)] = &[
        (0, "chatfold:v3:ee48b967fbb5fcd088e84aba8a50a222"),
        (1, "chatfold:v3:41ce820f7e13e994d355635d27409e27"),
        (2, "chatfold:v3:06c9b3fda2d95cf35a55a1cb481081e5"),
        (3, "chatfold:v3:033f031a23fd7180418627fed92b5b92"),
        (5, "chatfold:v3:8530c3cd1753337aa0eaabae8b267d5f"),
        (6, "chatfold:v3:f2491956cb24c6d6cf48a5576a0b9419"),
    ];

    #[test]
    fn a_boundary_shift_between_messages_is_another_chain() {
        let s = start("ns");
        let ab_c = s.clone().then(&Message::user("ab")).then(&Message::user("c"));
        let a_bc = s.then(&Message::user("a")).then(&Message::user("bc"));
        assert_ne!(ab_c.key(), a_bc.key());
        assert_ne!(ab_c.check(), a_bc.check());
    }

    #[test]
    fn the_settings_that_change_a_summary_change_the_start() {
        let base = Compactor::new(100);
        let key = |c: &Compactor| Chain::start(c, "ns").then(&Message::user("x")).key();
        assert_eq!(key(&base), key(&Compactor::new(5_000)), "the budget is not in it");
        assert_eq!(key(&base), key(&base.clone().keep_recent(10)));
        let policy = FoldPolicy::new();
        for other in [
            base.clone().policy(policy.clone().summary_prefix("[Summary]")),
            base.clone().policy(policy.clone().max_summary_tokens(50)),
            base.clone().policy(policy.clone().ledger(false)),
            base.clone()
                .policy(policy.clone().ledger_pattern("ORD#[0-9]+").unwrap()),
            base.clone().clear_tool_results(ClearToolResults::new()),
            base.clone().max_fold_input_tokens(1_000),
        ] {
            assert_ne!(key(&base), key(&other), "{other:?}");
        }
        // The namespace keys the hash: the same messages, another key.
        let other = Chain::start(&base, "ns2").then(&Message::user("x"));
        assert_ne!(key(&base), other.key());
        let secret = blake3::derive_key(KEY_CONTEXT, b"ns2");
        assert!(
            !format!("{other:?}").contains(&hex(&secret)),
            "Debug never shows the key"
        );
    }

    #[test]
    fn chains_tell_messages_and_seeds_apart() {
        let first = start("policy");
        let a = first.then(&Message::user("hello"));
        assert_eq!(a, start("policy").then(&Message::user("hello")));
        assert_ne!(a, first.then(&Message::assistant("hello")));
        assert_ne!(a, first.then(&Message::user("hello ")));
        assert_ne!(a, start("other").then(&Message::user("hello")));
        // Boundaries between fields count: "ab" + "" is not "a" + "b".
        let call = |args: &str| Message::assistant_tool_calls(vec![ToolCall::new("c", "f", args)]);
        assert_ne!(
            first.then(&call("ab")),
            first.then(&call("a")).then(&Message::user("b"))
        );
        // Ids and unknown fields are not part of the canonical form.
        assert_eq!(a, first.then(&Message::user("hello").with_id("m1")));
        // Null content is not the text that looks like it; one part is not its JSON as text.
        let mut null = Message::assistant("");
        null.content = None;
        assert_ne!(first.then(&null), first.then(&Message::assistant("")));
        let part = crate::message::Part::text("x");
        let parts = Message::user("").with_parts(vec![part.clone()]);
        assert_ne!(
            first.then(&parts),
            first.then(&Message::user(part.as_json().to_string()))
        );
    }

    #[test]
    fn links_are_the_prefixes_hashes_in_one_pass() {
        let messages: Vec<Message> = (0..6).map(|i| Message::user(format!("turn {i}"))).collect();
        let wanted = [0, 2, 3, 6, 9];
        let links = start("ns").links(&messages, &wanted);
        let positions: Vec<usize> = links.iter().map(|&(at, _)| at).collect();
        assert_eq!(positions, [0, 2, 3, 6], "past the end: none");
        for (at, link) in links {
            let mut by_hand = start("ns");
            messages[..at].iter().for_each(|m| by_hand.push(m));
            assert_eq!(link, by_hand.link(), "prefix of {at}");
        }
        assert_ne!(start("ns").link(), start("ns").then(&messages[0]).link());
    }

    #[test]
    fn values_are_checked_on_reading() {
        let chain = start("p").then(&Message::user("x"));
        let value = chain.value(1, "the summary");
        assert_eq!(chain.read(1, &value).as_deref(), Some("the summary"));
        assert_eq!(chain.read(2, &value), None, "another length");
        let other = start("p").then(&Message::user("y"));
        assert_eq!(other.read(1, &value), None, "another second hash");
        assert_eq!(chain.read(1, "not json"), None);
        assert_eq!(
            chain.read(1, &value.replace(&format!("\"v\":{FORMAT}"), "\"v\":9")),
            None
        );
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
