//! cargo-fuzz target `scenario`: the body is `pcielab_fuzz::scenario` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::scenario(data));
