//! cargo-fuzz target `fio_jobfile`: the body is `pcielab_fuzz::fio_jobfile` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::fio_jobfile(data));
