//! cargo-fuzz target `fio_cmdline`: the body is `pcielab_fuzz::fio_cmdline` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::fio_cmdline(data));
