//! cargo-fuzz target `result_json`: the body is `pcielab_fuzz::result_json` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::result_json(data));
