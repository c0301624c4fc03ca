//! What the CLI test files share: running the built `pcielab` binary, and its standard output
//! once it has succeeded (the failure message carries the exit code and stderr).

use std::process::{Command, Output};

// The exporter tests share only the promtool check and leave this unused.
#[allow(dead_code)]
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

/// Asserts that `promtool check metrics` (Debian package prometheus) accepts `metrics`.
// Only the exporter tests check metrics.
#[allow(dead_code)]
pub fn promtool_accepts(metrics: &str) {
    use std::io::Write;
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) must be installed: .ci/run installs it");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}
