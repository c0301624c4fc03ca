//! cargo-fuzz target `lspci_text`: the body is `pcielab_fuzz::lspci_listing` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::lspci_listing(data));
