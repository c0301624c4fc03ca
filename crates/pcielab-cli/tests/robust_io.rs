//! Where results go and where input comes from (issue 22): every writer follows one output
//! policy (devices and FIFOs written in place and never replaced, symlinks not followed out of
//! their directory, read-only files kept), and every reader refuses a FIFO or device where a file
//! belongs instead of hanging on it. Each case runs the real binary under a hang deadline.

use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::path::Path;

#[path = "common/hostile.rs"]
mod hostile;
use hostile::{expect, run_in};

const MODEL: [&str; 5] = ["model", "--gen", "3", "--width", "4"];

fn model_svg(dir: &Path, out: &str) -> hostile::Run {
    let mut args = MODEL.to_vec();
    args.extend(["--svg", out]);
    run_in(dir, &args)
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn is_char_device(path: &str) -> bool {
    std::fs::symlink_metadata(path)
        .unwrap()
        .file_type()
        .is_char_device()
}

#[test]
fn device_nodes_are_written_in_place_never_replaced() {
    let d = tempfile::tempdir().unwrap();
    let r = model_svg(d.path(), "/dev/null");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = model_svg(d.path(), "/dev/full");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("/dev/full"), "{}", r.stderr);
    assert!(is_char_device("/dev/null") && is_char_device("/dev/full"));
}

#[test]
fn standard_output_by_dash_or_by_name_gets_the_picture() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let mut args = MODEL.to_vec();
    args.push("--json");
    let json = expect(d, &args, 0, "").stdout;
    std::fs::write(d.join("model.json"), json).unwrap();
    for out in ["-", "/dev/stdout"] {
        let r = expect(d, &["plot", "model.json", "-o", out], 0, "");
        assert!(r.stdout.contains("<svg"), "plot -o {out}: {}", r.stdout);
    }
}

#[test]
fn symlinks_leaving_their_directory_and_read_only_files_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim.toml");
    std::fs::write(&victim, "kept\n").unwrap();
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    symlink(&victim, d.join("out.svg")).unwrap();
    expect(
        d,
        &["model", "--gen", "3", "--width", "4", "--svg", "out.svg"],
        2,
        "outside",
    );
    symlink(&victim, d.join("platform.toml")).unwrap();
    expect(
        d,
        &[
            "fit",
            &format!(
                "{}/../../fixtures/rockchip/rk3588-gen3x4-dmatest.txt",
                env!("CARGO_MANIFEST_DIR")
            ),
            "--gen",
            "3",
            "--width",
            "4",
            "--out",
            "platform.toml",
        ],
        2,
        "platform.toml is a symlink",
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "kept\n");

    std::fs::write(d.join("kept.svg"), "original").unwrap();
    std::fs::set_permissions(d.join("kept.svg"), std::fs::Permissions::from_mode(0o444)).unwrap();
    expect(
        d,
        &["model", "--gen", "3", "--width", "4", "--svg", "kept.svg"],
        2,
        "kept.svg: is a read-only file",
    );
    assert_eq!(
        std::fs::read_to_string(d.join("kept.svg")).unwrap(),
        "original"
    );

    // A link to a file beside it is followed: the file is replaced, the link stays.
    std::fs::write(d.join("real.svg"), "old").unwrap();
    symlink("real.svg", d.join("latest.svg")).unwrap();
    expect(
        d,
        &["model", "--gen", "3", "--width", "4", "--svg", "latest.svg"],
        0,
        "",
    );
    assert!(std::fs::read_to_string(d.join("real.svg"))
        .unwrap()
        .contains("<svg"));
    assert!(std::fs::symlink_metadata(d.join("latest.svg"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_fifo_where_a_file_belongs_is_refused_not_waited_on() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    mkfifo(&d.join("fifo"));
    expect(
        d,
        &["fit", "fifo", "--gen", "3", "--width", "4"],
        2,
        "fifo: is a FIFO",
    );
    expect(
        d,
        &[
            "report",
            "--machine",
            "sim:yitian710",
            "--from",
            "fifo",
            "-o",
            "r.html",
        ],
        2,
        "fifo: is a FIFO",
    );
    expect(
        d,
        &["model", "--gen", "3", "--width", "4", "--platform", "fifo"],
        2,
        "fifo: is a FIFO",
    );
    assert!(!d.join("r.html").exists());

    // A snapshot whose config and label are FIFOs: read from the other attributes.
    let function = d.join("snap/devices/0000:00:00.0");
    std::fs::create_dir_all(&function).unwrap();
    for (name, text) in [
        ("vendor", "0x8086\n"),
        ("device", "0x1237\n"),
        ("class", "0x060000\n"),
    ] {
        std::fs::write(function.join(name), text).unwrap();
    }
    mkfifo(&function.join("config"));
    mkfifo(&function.join("label"));
    let r = expect(d, &["topo", "--machine", "snapshot:snap"], 0, "");
    assert!(r.stdout.contains("00:00.0"), "{}", r.stdout);
}

#[test]
fn crafted_results_with_degenerate_ceilings_are_drawn_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let mut args = MODEL.to_vec();
    args.push("--json");
    let json = expect(d, &args, 0, "").stdout;
    let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    for ceiling in [0.0, 1e-300, 1e308] {
        doc["achievable_MBps"] = serde_json::json!(ceiling);
        std::fs::write(d.join("crafted.json"), doc.to_string()).unwrap();
        for command in [
            vec!["plot", "crafted.json", "-o", "out.svg"],
            vec![
                "report",
                "--machine",
                "sim:yitian710",
                "--from",
                "crafted.json",
                "-o",
                "out.html",
            ],
        ] {
            let r = run_in(d, &command);
            assert!(
                [0, 2].contains(&r.code),
                "{command:?} with achievable_MBps {ceiling}: exit {}\n{}",
                r.code,
                r.stderr
            );
        }
    }
}
