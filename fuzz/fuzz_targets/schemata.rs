//! cargo-fuzz target `schemata`: the body is `pcielab_fuzz::schemata` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::schemata(data));
