//! Tenants and their summaries: the server's secret, a tenant's cache
//! namespace (a keyed hash of its credential, never the credential), and
//! the cache every compaction uses (in process, then Redis when given).

use std::io::Read as _;

use chatfold::cache::{MemoryCache, RedisCache, SummaryCache};
use hyper::HeaderMap;

/// The context the server's secret is derived under from `--cache-secret`.
const SECRET_CONTEXT: &str = "chatfold serve 2026-12 cache secret";

/// The server's secret: derived from `given`, or 32 random bytes.
pub(crate) fn secret(given: Option<&str>) -> [u8; 32] {
    match given {
        Some(text) => blake3::derive_key(SECRET_CONTEXT, text.as_bytes()),
        None => random(),
    }
}

/// 32 bytes from the system's random source; where there is none, from
/// the clock, the process and std's per-process random hash keys.
fn random() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        use std::hash::{BuildHasher, RandomState};
        let mut h = blake3::Hasher::new();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        h.update(&now.as_nanos().to_le_bytes());
        h.update(&std::process::id().to_le_bytes());
        for _ in 0..4 {
            h.update(&RandomState::new().hash_one(0u8).to_le_bytes());
        }
        bytes = *h.finalize().as_bytes();
    }
    bytes
}

/// The headers that carry a credential: OpenAI's and Anthropic's, Azure
/// OpenAI's and Google's.
const CREDENTIALS: [&str; 4] = ["authorization", "x-api-key", "api-key", "x-goog-api-key"];

/// The request's tenant: a keyed hash (the server's secret) of its
/// credential headers, or `anonymous` without any. The credential itself
/// goes nowhere else.
pub(crate) fn tenant(secret: &[u8; 32], headers: &HeaderMap) -> String {
    let mut h = blake3::Hasher::new_keyed(secret);
    h.update(b"chatfold serve tenant v1");
    let mut any = false;
    for name in CREDENTIALS {
        for value in headers.get_all(name) {
            any = true;
            let value = value.as_bytes();
            h.update(&(name.len() as u64).to_le_bytes());
            h.update(name.as_bytes());
            h.update(&(value.len() as u64).to_le_bytes());
            h.update(value);
        }
    }
    if !any {
        return "anonymous".to_owned();
    }
    let hash = h.finalize();
    let hex: String = hash.as_bytes()[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("tenant-{hex}")
}

/// The in-process cache, in front of Redis when one is given: reads try
/// it first, then Redis (keeping what Redis had); writes go to both. A
/// Redis outage leaves the in-process cache.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Bounded, in process.
    local: MemoryCache,
    /// Shared by a fleet.
    redis: Option<RedisCache>,
}

impl Shared {
    /// At most `entries` summaries in process (and 256 MiB), and `redis`.
    pub(crate) fn new(entries: usize, redis: Option<RedisCache>) -> Self {
        Shared {
            local: MemoryCache::new(entries, 256 << 20),
            redis,
        }
    }
}

impl SummaryCache for Shared {
    fn get(&self, key: &str) -> Option<String> {
        self.get_many(&[key.to_owned()]).pop().flatten()
    }

    fn get_many(&self, keys: &[String]) -> Vec<Option<String>> {
        let mut values = self.local.get_many(keys);
        let Some(redis) = &self.redis else { return values };
        let missing: Vec<usize> = (0..keys.len()).filter(|&i| values[i].is_none()).collect();
        if missing.is_empty() {
            return values;
        }
        let asked: Vec<String> = missing.iter().map(|&i| keys[i].clone()).collect();
        for (i, value) in missing.into_iter().zip(redis.get_many(&asked)) {
            if let Some(value) = value {
                self.local.put(&keys[i], value.clone());
                values[i] = Some(value);
            }
        }
        values
    }

    fn put(&self, key: &str, value: String) {
        if let Some(redis) = &self.redis {
            redis.put(key, value.clone());
        }
        self.local.put(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenants_are_keyed_hashes_of_their_credentials() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(*k, v.parse().unwrap());
            }
            h
        };
        let s = secret(Some("s1"));
        let a = tenant(&s, &headers(&[("authorization", "Bearer sk-a")]));
        let b = tenant(&s, &headers(&[("authorization", "Bearer sk-b")]));
        assert_ne!(a, b);
        assert_eq!(
            a,
            tenant(
                &s,
                &headers(&[("authorization", "Bearer sk-a"), ("x-other", "1")])
            )
        );
        assert_ne!(
            a,
            tenant(&secret(Some("s2")), &headers(&[("authorization", "Bearer sk-a")]))
        );
        assert_ne!(a, tenant(&s, &headers(&[("x-api-key", "Bearer sk-a")])));
        // Azure's and Google's keys name tenants too.
        for name in ["api-key", "x-goog-api-key"] {
            let one = tenant(&s, &headers(&[(name, "k1")]));
            assert!(one.starts_with("tenant-"), "{name}");
            assert_ne!(one, tenant(&s, &headers(&[(name, "k2")])), "{name}");
        }
        assert!(!a.contains("sk-a"));
        assert_eq!(tenant(&s, &HeaderMap::new()), "anonymous");
        assert_ne!(secret(None), secret(None));
    }
}
