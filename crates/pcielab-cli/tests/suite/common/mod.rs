//! What the CLI test files share: running the built `pcielab` binary, and its standard output
//! once it has succeeded (the failure message carries the exit code and stderr).

use std::process::{Command, Output};

// The exporter tests share only the promtool check and leave this unused.
pub fn pcielab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(args)
        .output()
        .expect("run pcielab")
}

// Each test file is its own crate; those that only look at exit codes leave this unused.
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

/// One register's text in one function's `lspci -vvv`: its line ("\t\tDevCtl:\t…") and its
/// continuation lines, joined by spaces.
// Only the advise tests read registers.
pub fn lspci_register(lspci: &str, name: &str) -> String {
    let head = format!("\t\t{name}:");
    let mut lines = lspci.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no {name} in\n{lspci}"));
    let rest: Vec<&str> = lines.take_while(|l| l.starts_with("\t\t\t")).collect();
    format!("{first} {}", rest.join(" "))
}

/// Asserts that one piece of `pcielab advise` config-space evidence (`field` as lspci -vvv
/// names it, e.g. "DevCtl: MaxPayload", and its `value`) is what the real lspci printed for
/// that function (`lspci`: the function's `lspci -vvv` text).
pub fn assert_lspci_agrees(lspci: &str, bdf: &str, field: &str, value: &str) {
    let (reg, name) = field.split_once(": ").unwrap_or((field, ""));
    let text = lspci_register(lspci, reg);
    let expected = match (name, value) {
        (_, "+" | "-") => format!("{name}{value}"),
        ("MaxPayload" | "MaxReadReq", v) => format!("{name} {}", v.split(" (").next().unwrap()),
        ("", v) => v.to_string(),
        (n, v) => format!("{n} {v}"),
    };
    // lspci marks "(downgraded)" against the device's own LnkCap, pcielab against both ends':
    // the speeds and widths must agree, the marks may not.
    let strip = |s: &str| s.replace(" (downgraded)", "");
    let found = if reg == "ACSCtl" {
        text.contains("ReqRedir+") && text.contains("CmpltRedir+")
    } else {
        strip(&text).contains(&strip(&expected))
    };
    assert!(found, "{bdf} {field} = {value}: lspci says {text}");
}

/// `pcielab advise --apply IDS` on the host tree `root`, recording into the new journal `undo`.
// Only the advise tests apply changes.
pub fn advise_apply(root: &std::path::Path, undo: &std::path::Path, ids: &str) -> Output {
    pcielab(&[
        "advise",
        "--machine",
        "host",
        "--root",
        root.to_str().unwrap(),
        "--apply",
        ids,
        "--undo-file",
        undo.to_str().unwrap(),
    ])
}

/// `pcielab advise --undo UNDO` on the host tree `root`, with `extra` options.
pub fn advise_undo(root: &std::path::Path, undo: &std::path::Path, extra: &[&str]) -> Output {
    let args = [
        &[
            "advise",
            "--machine",
            "host",
            "--root",
            root.to_str().unwrap(),
            "--undo",
            undo.to_str().unwrap(),
        ][..],
        extra,
    ]
    .concat();
    pcielab(&args)
}

pub mod disk;
pub mod exporter;
pub mod hostile;
