//! cargo-fuzz target `qos_workload`: the body is `pcielab_fuzz::qos_workload` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::qos_workload(data));
