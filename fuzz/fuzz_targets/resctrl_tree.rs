//! cargo-fuzz target `resctrl_tree`: the body is `pcielab_fuzz::resctrl_tree` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::resctrl_tree(data));
