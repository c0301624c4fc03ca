//! The lab's phases end to end: a spec read as `lab` reads it, QEMU's argv planned from a
//! topology (argv.rs), a guest booted from it (boot.rs, where QEMU and the lab cache exist), and
//! the p2pmem copy on regular files (p2pcopy.rs).

mod argv;
mod boot;
mod common;
mod p2pcopy;

use super::*;

#[test]
fn spec_is_a_preset_or_a_file_and_errors_name_the_phase() {
    let seed = load_spec("qemu-seed").unwrap();
    assert!(!seed.topology.functions().is_empty());
    let unknown = load_spec("no-such-preset").unwrap_err();
    assert_eq!(unknown.exit_code(), 2);
    assert!(
        unknown
            .to_string()
            .starts_with("lab phase 'prepare': unknown preset 'sim:no-such-preset'"),
        "{unknown}"
    );
    let missing = load_spec("/nonexistent/board.toml").unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("lab phase 'prepare': spec file /nonexistent/board.toml: No such file"),
        "{missing}"
    );
}
