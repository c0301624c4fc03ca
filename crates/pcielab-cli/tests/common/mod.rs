//! What the CLI test files share: running the built `pcielab` binary, and its standard output
//! once it has succeeded (the failure message carries the exit code and stderr).

use std::process::{Command, Output};

pub fn pcielab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(args)
        .output()
        .expect("run pcielab")
}

// Each test file is its own crate; those that only look at exit codes leave this unused.
#[allow(dead_code)]
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
