//! cargo-fuzz target `config_space`: the body is `pcielab_fuzz::config_space` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::config_space(data));
