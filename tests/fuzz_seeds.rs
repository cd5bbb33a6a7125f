//! The fuzz targets' checks (`fuzz/src/lib.rs`), run on their committed seed
//! corpus and on every input a fuzzer ever failed on (`fuzz/regressions/`),
//! so what fuzzing found stays fixed.

#[path = "../fuzz/src/lib.rs"]
mod checks;

fn replay(target: &str, check: fn(&[u8]) -> bool) {
    let mut count = 0;
    for dir in ["fuzz/seeds", "fuzz/regressions"] {
        let Ok(entries) = std::fs::read_dir(format!("{dir}/{target}")) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            // Seeds are meant to reach the checks; a regression may be any input.
            let exercised = check(&std::fs::read(&path).unwrap());
            assert!(
                exercised || dir.ends_with("regressions"),
                "{} was rejected before the checks",
                path.display()
            );
            count += 1;
        }
    }
    assert!(count > 0, "no inputs for {target}");
}

#[test]
fn compact_inputs_pass() {
    replay("compact", checks::fuzz_compact);
}

#[test]
fn state_inputs_pass() {
    replay("state", checks::fuzz_state);
}

#[test]
fn memory_ops_inputs_pass() {
    replay("memory_ops", checks::fuzz_memory_ops);
}
