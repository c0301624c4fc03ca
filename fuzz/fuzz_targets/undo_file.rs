//! cargo-fuzz target `undo_file`: the body is `pcielab_fuzz::undo_file` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::undo_file(data));
