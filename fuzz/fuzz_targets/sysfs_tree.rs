//! cargo-fuzz target `sysfs_tree`: the body is `pcielab_fuzz::sysfs_tree` (fuzz/src/targets.rs).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pcielab_fuzz::sysfs_tree(data));
