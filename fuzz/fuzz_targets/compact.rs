#![no_main]
//! Arbitrary bytes as a JSON history, compacted with each counter and a
//! summarizer that returns arbitrary text; every rule checked on success.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    chatfold_fuzz::fuzz_compact(data);
});
