//! cargo-fuzz target `event_list`: the body is `pcielab_fuzz::event_list` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::event_list(data));
