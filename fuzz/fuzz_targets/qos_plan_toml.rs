//! cargo-fuzz target `qos_plan_toml`: the body is `pcielab_fuzz::qos_plan_toml` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::qos_plan_toml(data));
