//! cargo-fuzz target `corpus_walk`: the body is `pcielab_fuzz::corpus_walk` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::corpus_walk(data));
