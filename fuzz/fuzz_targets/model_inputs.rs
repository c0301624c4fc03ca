//! cargo-fuzz target `model_inputs`: the body is `pcielab_fuzz::model_inputs` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::model_inputs(data));
