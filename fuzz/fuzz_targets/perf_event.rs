//! cargo-fuzz target `perf_event`: the body is `pcielab_fuzz::perf_event` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::perf_event(data));
