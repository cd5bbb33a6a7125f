#![no_main]
//! Arbitrary bytes as saved state, loaded in every strategy, added to, saved.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    chatfold_fuzz::fuzz_state(data);
});
