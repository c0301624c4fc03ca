//! Where results go and where input comes from (issue 22): every writer follows one output
//! policy (devices and FIFOs written in place and never replaced, symlinks not followed out of
//! their directory, read-only files kept), and every reader refuses a FIFO or device where a file
//! belongs instead of hanging on it. Each case runs the real binary under a hang deadline.

use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
use std::path::Path;

use crate::common::hostile;
use hostile::{expect, run_in};

const MODEL: [&str; 5] = ["model", "--gen", "3", "--width", "4"];

fn model_svg(dir: &Path, out: &str) -> hostile::Run {
    let mut args = MODEL.to_vec();
    args.extend(["--svg", out]);
    run_in(dir, &args)
}

/// The text of a built-in preset's spec file, to be altered into a hostile one.
fn preset(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../presets/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
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

    // A snapshot whose config and label are FIFOs: refused at once, naming one of them (a FIFO
    // skipped without a word would lose the function's capabilities unsaid).
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
    let r = expect(d, &["topo", "--machine", "snapshot:snap"], 2, "is a FIFO");
    assert!(
        r.stderr.contains("0000:00:00.0/config") || r.stderr.contains("0000:00:00.0/label"),
        "{}",
        r.stderr
    );
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

#[test]
fn sizes_and_rates_past_their_physical_bounds_are_usage_errors() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    // Wire bytes of a 2^64-1 byte transfer overflowed u64 and printed 1380 % of the link.
    expect(
        d,
        &[&MODEL[..], &["--sizes", "18446744073709551615"]].concat(),
        2,
        "--sizes: 18446744073709551615 bytes is not a transfer size: expected 1 to 1099511627776",
    );
    expect(
        d,
        &[&MODEL[..], &["--sizes", "17179869184G"]].concat(),
        2,
        "--sizes:",
    );
    let r = expect(
        d,
        &[&MODEL[..], &["--sizes", "1G", "--json"]].concat(),
        0,
        "",
    );
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let line_rate = doc["line_rate_MBps"].as_f64().unwrap();
    for point in doc["points"].as_array().unwrap() {
        for (key, value) in point.as_object().unwrap() {
            if key.ends_with("MBps") {
                let v = value.as_f64().unwrap();
                assert!(
                    v <= line_rate,
                    "{key} = {v} above the line rate {line_rate}"
                );
            }
        }
    }
    for (row, needle) in [
        ("1e30,write,100", "column 'size_bytes': 1e30 is larger than"),
        (
            "4096,write,1e308",
            "column 'MBps': 1e308 MB/s is not a measured rate: expected 0.001",
        ),
        (
            "4096,write,1e-300",
            "column 'MBps': 1e-300 MB/s is not a measured rate",
        ),
    ] {
        std::fs::write(
            d.join("rows.csv"),
            format!("size_bytes,direction,MBps\n{row}\n"),
        )
        .unwrap();
        expect(
            d,
            &["fit", "rows.csv", "--gen", "3", "--width", "4"],
            2,
            needle,
        );
    }
}

#[test]
fn zero_interrupt_costs_and_benchmarks_of_ports_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let spec = preset("rk3588-ep");
    let zeroed = spec.replace("msi_cpu_ns = 2000", "msi_cpu_ns = 0");
    assert_ne!(zeroed, spec, "the preset sets msi_cpu_ns");
    std::fs::write(d.join("zero.toml"), zeroed).unwrap();
    expect(
        d,
        &[
            "bench",
            "irq",
            "--machine",
            "sim:zero.toml",
            "--kind",
            "msi",
        ],
        2,
        "interrupts.msi_cpu_ns = 0 is out of range",
    );
    let given = spec.replace("msi_cpu_ns = 2000", "msi_cpu_ns = 3000");
    std::fs::write(d.join("given.toml"), given).unwrap();
    let r = expect(
        d,
        &[
            "bench",
            "irq",
            "--machine",
            "sim:given.toml",
            "--kind",
            "msi",
            "--json",
        ],
        0,
        "",
    );
    assert!(
        r.stdout
            .contains("given in [platform] as interrupts.msi_cpu_ns"),
        "{}",
        r.stdout
    );
    let topo = expect(d, &["topo", "--machine", "sim:rk3588-ep", "--json"], 0, "").stdout;
    let doc: serde_json::Value = serde_json::from_str(&topo).unwrap();
    let port = doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "root_port")
        .and_then(|f| f["bdf"].as_str())
        .expect("rk3588-ep has a root port")
        .to_string();
    expect(
        d,
        &[
            "bench",
            "irq",
            "--machine",
            "sim:rk3588-ep",
            "--kind",
            "msi",
            "--device",
            &port,
        ],
        2,
        &format!("bench irq --device {port}: is a root port"),
    );
    expect(
        d,
        &[
            "bench",
            "mmio",
            &port,
            "--bar",
            "0",
            "--machine",
            "sim:rk3588-ep",
        ],
        2,
        &format!("bench mmio {port}: is a root port"),
    );
}

const RX: &str = "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/";

#[test]
fn an_impossible_simulated_duration_is_bad_input_naming_seconds() {
    let d = tempfile::tempdir().unwrap();
    let stat = ["stat", "--machine", "sim:yitian710", "-a", "-e", RX, "--"];
    let args = [&stat[..], &["nettest", "--seconds", "1e300"]].concat();
    expect(
        d.path(),
        &args,
        2,
        "nettest --seconds: 1e300 s is not a duration",
    );
    let args = [
        &stat[..],
        &["dmatest", "--transfers", "18446744073709551615"],
    ]
    .concat();
    expect(d.path(), &args, 2, "dmatest: invalid --transfers");
}

#[test]
fn an_empty_field_separator_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let args = [
        "stat",
        "--machine",
        "sim:yitian710",
        "-a",
        "-e",
        RX,
        "-x",
        "",
        "--",
        "sleep",
        "1",
    ];
    expect(d.path(), &args, 2, "--field-separator");
}

/// A snapshot of the yitian710 preset, exported as `pcielab topo --sysfs-export` writes it.
fn exported(dir: &Path, name: &str) -> std::path::PathBuf {
    expect(
        dir,
        &["topo", "--machine", "sim:yitian710", "--sysfs-export", name],
        0,
        "",
    );
    dir.join(name)
}

#[test]
fn a_dangling_devices_link_in_a_snapshot_is_named() {
    let d = tempfile::tempdir().unwrap();
    let snap = exported(d.path(), "snap");
    symlink(
        "/nonexistent/0000:7f:00.0",
        snap.join("devices/0000:7f:00.0"),
    )
    .unwrap();
    expect(
        d.path(),
        &["topo", "--machine", "snapshot:snap"],
        2,
        "snap/devices/0000:7f:00.0: is a dangling symlink to /nonexistent/0000:7f:00.0",
    );
}

#[test]
fn a_looping_devices_link_in_a_snapshot_is_named() {
    let d = tempfile::tempdir().unwrap();
    let snap = exported(d.path(), "snap");
    symlink("0000:7f:00.1", snap.join("devices/0000:7f:00.0")).unwrap();
    symlink("0000:7f:00.0", snap.join("devices/0000:7f:00.1")).unwrap();
    expect(
        d.path(),
        &["topo", "--machine", "snapshot:snap"],
        2,
        "snap/devices/0000:7f:00.0: is a symlink loop",
    );
}

#[test]
fn a_snapshot_whose_devices_holds_no_functions_is_refused() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("root")).unwrap();
    symlink("/", d.path().join("root/devices")).unwrap();
    expect(
        d.path(),
        &["topo", "--machine", "snapshot:root"],
        2,
        "snapshot:root: devices/ holds no PCI functions",
    );
}

#[test]
fn snapshot_of_a_root_without_pci_saves_nothing_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    expect(
        d.path(),
        &["snapshot", "--root", "/proc/self", "out"],
        2,
        "--root /proc/self: cannot read /proc/self/sys/bus/pci/devices",
    );
    assert!(!d.path().join("out").exists());
    std::fs::create_dir_all(d.path().join("empty/sys/bus/pci/devices")).unwrap();
    expect(
        d.path(),
        &["snapshot", "--root", "empty", "out"],
        2,
        "holds no PCI functions; nothing to save",
    );
    assert!(!d.path().join("out").exists());
}

#[test]
fn a_refused_export_leaves_nothing_so_the_retry_succeeds() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.join("out")).unwrap();
    // A planted `drivers` link: the export refuses to write through it.
    symlink(outside.path(), d.join("out/drivers")).unwrap();
    let r = run_in(
        d,
        &[
            "topo",
            "--machine",
            "sim:yitian710",
            "--sysfs-export",
            "out",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("out/drivers"), "{}", r.stderr);
    assert!(!d.join("out/devices").exists() && !d.join("out/tree").exists());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    std::fs::remove_file(d.join("out/drivers")).unwrap();
    expect(
        d,
        &[
            "topo",
            "--machine",
            "sim:yitian710",
            "--sysfs-export",
            "out",
        ],
        0,
        "",
    );
}

#[test]
fn a_number_too_large_for_its_key_names_the_key() {
    let d = tempfile::tempdir().unwrap();
    let spec =
        preset("rk3588-ep").replacen("max_width = 4,", "max_width = 99999999999999999999999,", 1);
    std::fs::write(d.path().join("wide.toml"), spec).unwrap();
    expect(
        d.path(),
        &["topo", "--machine", "sim:wide.toml"],
        2,
        "max_width: number too large to fit in target type",
    );
}

#[test]
fn a_byte_order_mark_is_read_past_and_a_duplicated_column_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rows = "4096,write,600\n65536,write,2300\n1048576,write,3000\n4096,read,500\n65536,read,1400\n1048576,read,1600\n";
    std::fs::write(
        d.path().join("bom.csv"),
        format!("\u{feff}size_bytes,direction,MBps\n{rows}"),
    )
    .unwrap();
    // Compared with a platform rather than fitted: the header is what is under test.
    let platform = format!(
        "{}/../../presets/rk3588-ep.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let r = expect(
        d.path(),
        &[
            "fit",
            "bom.csv",
            "--gen",
            "3",
            "--width",
            "4",
            "--platform",
            &platform,
        ],
        0,
        "",
    );
    assert!(r.stdout.contains("1048576"), "{}", r.stdout);
    std::fs::write(
        d.path().join("twice.csv"),
        "size_bytes,direction,MBps,MBps\n4096,write,100,200\n",
    )
    .unwrap();
    expect(
        d.path(),
        &["fit", "twice.csv", "--gen", "3", "--width", "4"],
        2,
        "twice.csv:1: column 'MBps' appears twice",
    );
}

#[test]
fn a_moved_sim_key_is_refused_by_topo_too() {
    let d = tempfile::tempdir().unwrap();
    let spec = preset("yitian710");
    let moved = spec.replacen("[sim]\n", "[sim]\ncpu_io_ns = 5000\n", 1);
    assert_ne!(moved, spec, "the preset has a [sim] table");
    std::fs::write(d.path().join("moved.toml"), moved).unwrap();
    expect(
        d.path(),
        &["topo", "--machine", "sim:moved.toml"],
        2,
        "moved.toml: [sim]: 'cpu_io_ns' moved to the platform model",
    );
    // The same spec as a platform model: it has a [platform] table, so only the moved key
    // can refuse it.
    let with_platform = std::fs::read_to_string(d.path().join("moved.toml")).unwrap()
        + "\n[platform.cpu]\nread_io_ns = 900\n";
    std::fs::write(d.path().join("moved.toml"), &with_platform).unwrap();
    let mut args = MODEL.to_vec();
    args.extend(["--platform", "moved.toml"]);
    expect(
        d.path(),
        &args,
        2,
        "moved.toml: [sim]: 'cpu_io_ns' moved to the platform model: set [platform.cpu] read_io_ns",
    );
    // Without the moved key the same file is a valid platform model.
    std::fs::write(
        d.path().join("kept.toml"),
        with_platform.replacen("cpu_io_ns = 5000\n", "", 1),
    )
    .unwrap();
    args.truncate(MODEL.len());
    args.extend(["--platform", "kept.toml"]);
    expect(d.path(), &args, 0, "");
}

#[test]
fn a_300_digit_number_is_quoted_cut() {
    let d = tempfile::tempdir().unwrap();
    let huge = "9".repeat(300);
    let r = expect(
        d.path(),
        &["qos", "monitor", "--machine", "sim:mpam-seed", "-I", &huge],
        2,
        "(300 characters)' is not a number in",
    );
    assert!(r.stderr.matches(&huge).count() <= 1, "{}", r.stderr);
}

/// The directories `--sysfs-export` and `snapshot` write into follow the output policy: a file,
/// a device, a FIFO, a read-only directory or a link out of its directory is refused with exit
/// 2 naming it, and left as it was; a link to a directory beside it is followed.
#[test]
fn tree_writers_refuse_what_is_not_a_writable_directory() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(d.join("afile"), "kept\n").unwrap();
    mkfifo(&d.join("fifo"));
    std::fs::create_dir(d.join("ro")).unwrap();
    std::fs::set_permissions(d.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    symlink(outside.path(), d.join("away")).unwrap();
    std::fs::create_dir(d.join("real")).unwrap();
    symlink("real", d.join("beside")).unwrap();
    fn export(dir: &str) -> [&str; 5] {
        ["topo", "--machine", "sim:qemu-seed", "--sysfs-export", dir]
    }
    // The snapshot reads a tree exported first (into a new path).
    expect(d, &export("src/sys/bus/pci"), 0, "");
    fn snapshot(dir: &str) -> [&str; 4] {
        ["snapshot", "--root", "src", dir]
    }
    for (dir, why) in [
        ("afile", "is a regular file, not a directory"),
        ("/dev/null", "is a character device, not a directory"),
        ("fifo", "is a FIFO, not a directory"),
        ("ro", "is a read-only directory"),
        ("away", "is a symlink to"),
    ] {
        for args in [&export(dir)[..], &snapshot(dir)[..]] {
            expect(d, args, 2, &format!("output directory {dir}: {why}"));
        }
    }
    assert_eq!(std::fs::read_to_string(d.join("afile")).unwrap(), "kept\n");
    assert!(is_char_device("/dev/null"));
    assert!(std::fs::symlink_metadata(d.join("fifo"))
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(std::fs::read_dir(d.join("ro")).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    expect(d, &export("beside"), 0, "");
    assert!(d.join("real/devices").is_dir());
    assert!(std::fs::symlink_metadata(d.join("beside"))
        .unwrap()
        .file_type()
        .is_symlink());
}
