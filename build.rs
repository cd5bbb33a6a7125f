//! Prepares the `tiktoken` feature's vocabularies: reads each encoding's
//! ranks from tiktoken-rs (a build-dependency, so cargo fetches the very
//! files it ships) and writes them into OUT_DIR as flat tables that the
//! library includes and reads in place, with nothing to build at run time.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/count/table.rs");
    #[cfg(feature = "tiktoken")]
    vocab::write_all();
}

#[cfg(feature = "tiktoken")]
#[allow(dead_code)]
#[path = "src/count/table.rs"]
mod table;

#[cfg(feature = "tiktoken")]
mod vocab {
    use std::path::Path;

    use super::table;

    pub fn write_all() {
        let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
        let out = Path::new(&out);
        let o200k = tiktoken_rs::o200k_base().expect("tiktoken-rs builds o200k_base");
        write(out, "o200k_base", &o200k);
        let cl100k = tiktoken_rs::cl100k_base().expect("tiktoken-rs builds cl100k_base");
        write(out, "cl100k_base", &cl100k);
    }

    /// Writes `name.bytes`, `name.ends` and `name.slots` (see
    /// src/count/table.rs) for the ordinary tokens of `bpe`.
    fn write(out: &Path, name: &str, bpe: &tiktoken_rs::CoreBPE) {
        let specials = bpe.special_tokens();
        // Ordinary ranks are decodable and are not a special token's rank;
        // a special token decodes to its own text.
        let mut tokens: Vec<Option<Vec<u8>>> = Vec::new();
        let mut misses = 0;
        let mut rank = 0u32;
        while misses < 4096 {
            match bpe.decode_bytes(&[rank]) {
                Ok(bytes) if !std::str::from_utf8(&bytes).is_ok_and(|s| specials.contains(s)) => {
                    tokens.push(Some(bytes));
                    misses = 0;
                }
                _ => {
                    tokens.push(None);
                    misses += 1;
                }
            }
            rank += 1;
        }
        while tokens.last().is_some_and(Option::is_none) {
            tokens.pop();
        }
        assert!(tokens.len() < table::RANK_MASK as usize, "{name}: too many ranks");
        assert!(
            (0..=255u8).all(|b| tokens.iter().flatten().any(|t| t[..] == [b])),
            "{name}: every byte is a token"
        );

        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(tokens.len() * 4);
        for token in &tokens {
            bytes.extend_from_slice(token.as_deref().unwrap_or(&[]));
            let end = u32::try_from(bytes.len()).expect("vocabulary under 4 GiB");
            ends.extend_from_slice(&end.to_le_bytes());
        }

        let count = tokens.iter().flatten().count();
        // At most half full: most lookups during merges miss, and a miss
        // probes until an empty slot.
        let bits = (count * 2).next_power_of_two().trailing_zeros();
        let mask = (1usize << bits) - 1;
        let mut slots = vec![0u32; 1 << bits];
        for (rank, token) in tokens.iter().enumerate() {
            let Some(token) = token else { continue };
            let hash = table::hash(token);
            let mut i = table::home(hash, bits);
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = table::tag(hash) << table::RANK_BITS | (rank as u32 + 1);
        }
        let slots: Vec<u8> = slots.iter().flat_map(|s| s.to_le_bytes()).collect();

        for (ext, data) in [("bytes", &bytes), ("ends", &ends), ("slots", &slots)] {
            std::fs::write(out.join(format!("{name}.{ext}")), data).expect("OUT_DIR is writable");
        }
    }
}
