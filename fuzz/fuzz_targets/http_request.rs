//! cargo-fuzz target `http_request`: the body is `pcielab_fuzz::http_request` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::http_request(data));
