//! The newer surfaces under hostile input (issue 33): lspci input from files and standard
//! input, `corpus`, `man DIR`, standard output that fails, and escapes from inputs. Each case
//! runs the real binary and asserts its exit code, its message and that it did not panic.

use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::hostile;
use hostile::{expect, run_in, Run};

/// `pcielab ARGS` under `sh -c`, with `redirect` (such as `>/dev/full` or `</`) applied and
/// `env` set; the hang deadline is the shell's `timeout`.
fn shell(dir: &Path, args: &str, redirect: &str, env: &[(&str, &str)]) -> Run {
    let out = Command::new("timeout")
        .args(["20", "sh", "-c"])
        .arg(format!("exec \"$0\" {args} {redirect}"))
        .arg(env!("CARGO_BIN_EXE_pcielab"))
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(code, 124, "pcielab {args} {redirect} hung");
    Run {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn no_panic(r: &Run) {
    assert!(
        !r.stderr.contains("panicked") && r.code != 101,
        "{}",
        r.stderr
    );
}

fn linuxhw(name: &str) -> String {
    format!(
        "{}/../../fixtures/lspci/linuxhw/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn a_full_standard_output_is_exit_1_with_one_line_never_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let corpus = format!("corpus {}", linuxhw(""));
    for args in [
        "man",
        "completions bash",
        "presets",
        "presets --json",
        "advise --machine sim:yitian710",
        corpus.as_str(),
        "topo --machine sim:yitian710",
        "top --machine sim:yitian710 -b -n 1 -d 0.1",
        "qos show --machine sim:mpam-seed --json",
        "--help",
    ] {
        let r = shell(d.path(), args, ">/dev/full", &[]);
        no_panic(&r);
        assert_eq!(r.code, 1, "{args}: {}", r.stderr);
        assert_eq!(
            r.stderr, "pcielab: error: standard output: No space left on device (os error 28)\n",
            "{args}"
        );
    }
    // A closed pipe still ends the process by SIGPIPE, as coreutils do.
    let r = shell(d.path(), "completions bash", "| true", &[]);
    assert_eq!(r.stderr, "", "no message for a reader that left");
}

/// `topo --machine lspci:-` with standard input from `redirect` and `env`: exit 2 naming `why`.
fn stdin_refused(dir: &Path, redirect: &str, env: &[(&str, &str)], why: &str) {
    let r = shell(dir, "topo --machine lspci:-", redirect, env);
    no_panic(&r);
    assert_eq!(r.code, 2, "{redirect}: {}", r.stderr);
    assert!(r.stderr.contains(why), "{redirect}: {}", r.stderr);
}

#[test]
fn standard_input_that_is_a_directory_or_never_ends_is_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    stdin_refused(
        d,
        "</",
        &[],
        "lspci output on standard input is a directory",
    );
    stdin_refused(d, "</dev/zero", &[], "is a character device");
    stdin_refused(
        d,
        "</dev/null",
        &[("PCIELAB_STDIN_IDLE_S", "0")],
        "PCIELAB_STDIN_IDLE_S: '0' is not a number in 1..=86400",
    );
    // More than the cap is refused, naming it.
    std::fs::write(d.join("big"), vec![b' '; (32 << 20) + 1]).unwrap();
    stdin_refused(d, "<big", &[], "more than 32 MiB");
    // A writer that never closes the pipe (the test holds its end open and writes nothing):
    // given up after the idle timeout, naming both limits.
    let started = std::time::Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(["topo", "--machine", "lspci:-"])
        .env("PCIELAB_STDIN_IDLE_S", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let held_open = child.stdin.take();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > hostile::HANG {
            child.kill().unwrap();
            panic!("lspci:- waited for a writer that never closed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(held_open);
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no byte arrived for 1 s and the input was not closed")
            && stderr.contains("reads at most 32 MiB")
            && stderr.contains("PCIELAB_STDIN_IDLE_S"),
        "{stderr}"
    );
}

#[test]
fn malformed_lspci_lines_are_refused_naming_file_line_and_value() {
    let d = tempfile::tempdir().unwrap();
    for (text, wanted) in [
        (
            "00:00.0 Host bridge: x\n10000:00:01.0 Bridge: x\n",
            "bad.txt:2: '10000:00:01.0' looks like a function address but its domain 10000 is above ffff",
        ),
        ("00:1f.8 SMBus: x\n", "bad.txt:1: '00:1f.8' looks like a function address but its function 8 is above 7"),
        (
            "00:01.0 x\n00: 86 80 8 34\n",
            "bad.txt:2: '8' in a hex row of 0000:00:01.0: expected bytes as two hex digits",
        ),
        (
            "00:01.0 Bridge: x\n\tCapabilities: [40] Express (v2) Endpoint\n\t\tDevCtl:\tx\n\t\t\tMaxPayload 0 bytes, MaxReadReq 512 bytes\n",
            "bad.txt:4: MaxPayload '0' bytes is not a size lspci prints: expected 128, 256, 512, 1024, 2048 or 4096",
        ),
        (
            "00:01.0 Bridge: x\n\tCapabilities: [40] Express (v2) Endpoint\n\t\tDevCap:\tMaxPayload 65535 bytes, PhantFunc 0\n",
            "bad.txt:3: MaxPayload '65535' bytes is not a size lspci prints",
        ),
        (
            "00:01.0 Bridge: x\n\tCapabilities: [40] Express (v2) Endpoint\n\t\tDevCap:\tMaxPayload 384 bytes, PhantFunc 0\n",
            "bad.txt:3: MaxPayload '384' bytes is not a size lspci prints",
        ),
        (
            "00:00.0 x\nDear \x1b[2J support\n",
            "bad.txt:2: 'Dear \\x1b[2J support' is not lspci output",
        ),
    ] {
        std::fs::write(d.path().join("bad.txt"), text).unwrap();
        let r = expect(d.path(), &["topo", "--machine", "lspci:bad.txt"], 2, wanted);
        no_panic(&r);
    }
    // A byte-order mark before the first line does not lose its function.
    std::fs::write(
        d.path().join("bom.txt"),
        "\u{feff}00:00.0 Host bridge [0600]: Intel [8086:1237]\n",
    )
    .unwrap();
    let r = expect(d.path(), &["topo", "--machine", "lspci:bom.txt"], 0, "");
    assert!(r.stdout.contains("00:00.0"), "{}", r.stdout);
}

#[test]
fn escapes_from_inputs_are_shown_not_obeyed_and_json_stays_exact() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("evil.txt"),
        "00:00.0 Host bridge: \x1b[31mEvil\x1b]0;title\x07\n",
    )
    .unwrap();
    let r = expect(d.path(), &["topo", "--machine", "lspci:evil.txt"], 0, "");
    assert!(!r.stdout.contains('\x1b') && !r.stdout.contains('\x07'));
    assert!(r.stdout.contains("\\x1b[31mEvil"), "{}", r.stdout);
    let r = expect(
        d.path(),
        &["topo", "--json", "--machine", "lspci:evil.txt"],
        0,
        "",
    );
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        doc["functions"][0]["evidence"]["lines"]["header"]["text"],
        "00:00.0 Host bridge: \x1b[31mEvil\x1b]0;title\x07",
        "JSON keeps the input line exact"
    );
    // The --machine argument itself, in clap's refusal and in pcielab's own.
    for machine in ["bogus\x1b[2J", "lspci:missing\x1b[2J"] {
        let r = run_in(d.path(), &["topo", "--machine", machine]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(!r.stderr.contains('\x1b'), "{:?}", r.stderr);
        assert!(
            r.stderr.contains("\\x1b[2J"),
            "shown, not dropped: {:?}",
            r.stderr
        );
    }
}

#[test]
fn corpus_goes_on_past_bad_entries_at_any_depth_and_names_them_escaped() {
    use std::os::unix::ffi::OsStrExt;
    let d = tempfile::tempdir().unwrap();
    let top = d.path().join("c");
    let mut deep = top.clone();
    for level in 0..24 {
        deep = deep.join(format!("d{level}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let machine = linuxhw("dell-poweredge-r210.txt");
    std::fs::copy(&machine, deep.join("deep.txt")).unwrap();
    let odd = std::ffi::OsStr::from_bytes(b"odd\xff\x1b[2J.txt");
    std::fs::copy(&machine, top.join(odd)).unwrap();
    symlink("..", top.join("d0/loop")).unwrap();
    symlink("nowhere", top.join("dangling.txt")).unwrap();
    let r = expect(d.path(), &["corpus", "c"], 0, "");
    no_panic(&r);
    assert!(
        r.stdout
            .starts_with("c: 2 files, 2 read (100.0 %), 2 failed;"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("FAILED d0/loop: a link to a directory already walked"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("FAILED dangling.txt: not read: No such file or directory"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains('\x1b'), "{}", r.stdout);
    let r = expect(d.path(), &["corpus", "c", "--json"], 0, "");
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let files: Vec<&str> = doc["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "d0/d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11/d12/d13/d14/d15/d16/d17/d18/d19/d20/d21/d22/d23/deep.txt",
            "odd\\xff\x1b[2J.txt"
        ]
    );
}

#[test]
fn man_dir_writes_pages_under_the_output_policy() {
    let d = tempfile::tempdir().unwrap();
    let man = d.path().join("man1");
    std::fs::create_dir(&man).unwrap();
    expect(d.path(), &["man", "man1"], 0, "");
    assert!(man.join("pcielab-topo.1").is_file());
    // A page planted as a link out of the directory is refused, and nothing is written.
    let outside = d.path().join("outside");
    std::fs::write(&outside, "keep").unwrap();
    let fresh = d.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    symlink(&outside, fresh.join("pcielab.1")).unwrap();
    let r = expect(d.path(), &["man", "fresh"], 2, "is a symlink to");
    no_panic(&r);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
    assert_eq!(
        std::fs::read_dir(&fresh).unwrap().count(),
        1,
        "nothing written"
    );
    // DIR itself linked into another tree.
    let elsewhere = tempfile::tempdir().unwrap();
    symlink(elsewhere.path(), d.path().join("away")).unwrap();
    expect(d.path(), &["man", "away"], 2, "outside");
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    // A read-only page is kept; a read-only directory refused.
    std::fs::set_permissions(
        man.join("pcielab.1"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    expect(d.path(), &["man", "man1"], 2, "is a read-only file");
    let locked = d.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    expect(d.path(), &["man", "locked"], 2, "is a read-only directory");
    // A FIFO page is refused before any page is written, never waited on.
    let fifo_dir = d.path().join("fifo");
    std::fs::create_dir(&fifo_dir).unwrap();
    let page = std::ffi::CString::new(
        fifo_dir
            .join("pcielab-topo.1")
            .as_os_str()
            .as_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: page is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(page.as_ptr(), 0o600) }, 0);
    let r = expect(
        d.path(),
        &["man", "fifo"],
        2,
        "pcielab-topo.1 is a FIFO, not a file; a manual page is written only as a regular file \
         (nothing was written",
    );
    no_panic(&r);
    assert_eq!(
        std::fs::read_dir(&fifo_dir).unwrap().count(),
        1,
        "no page written beside the FIFO"
    );
}

#[test]
fn plot_and_report_refuse_unknown_versions_and_missing_parts() {
    let d = tempfile::tempdir().unwrap();
    let r = expect(
        d.path(),
        &["topo", "--p2p", "--json", "--machine", "sim:yitian710"],
        0,
        "",
    );
    let future = r
        .stdout
        .replace("pcielab.topo-p2p/v1", "pcielab.topo-p2p/v2");
    std::fs::write(d.path().join("future.json"), future).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    doc.as_object_mut().unwrap().remove("groups");
    std::fs::write(d.path().join("partial.json"), doc.to_string()).unwrap();
    for command in [
        vec!["plot", "future.json", "-o", "out.svg"],
        vec!["report", "--from", "future.json", "-o", "out.html"],
    ] {
        let r = expect(
            d.path(),
            &command,
            2,
            "schema \"pcielab.topo-p2p/v2\" is not one this pcielab reads",
        );
        no_panic(&r);
    }
    expect(
        d.path(),
        &["plot", "partial.json", "-o", "out.svg"],
        2,
        "a pcielab.topo-p2p/v1 document without groups",
    );
    assert!(!d.path().join("out.svg").exists());
}
