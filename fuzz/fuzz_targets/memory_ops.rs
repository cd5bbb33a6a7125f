#![no_main]
//! Arbitrary operation sequences on RollingMemory and WindowMemory.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    chatfold_fuzz::fuzz_memory_ops(data);
});
