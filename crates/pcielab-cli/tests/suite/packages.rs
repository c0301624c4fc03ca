//! pcielab as it leaves the build machine: the arm64 binary, cross-built as docs/install.md says
//! and run under qemu-user, gives the x86 binary's output for the README's commands and every
//! preset; and the Debian packages of both (packaging/build-deb) install, run, verify and remove
//! cleanly on this machine. .ci/run installs the tools (gcc-aarch64-linux-gnu, qemu-user-static,
//! the rustup target); without them these tests fail, naming what to install.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const BIN: &str = env!("CARGO_BIN_EXE_pcielab");
const TARGET: &str = "aarch64-unknown-linux-gnu";
/// Where Debian's libc6-arm64-cross puts the arm64 loader and libc that qemu-user runs against.
const ARM64_SYSROOT: &str = "/usr/aarch64-linux-gnu";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's target directory: this test binary runs from `TARGET_DIR/debug/deps/`.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn success(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The debug arm64 build of the CLI, built once per test run with the linker setting in
/// .cargo/config.toml (the command docs/install.md gives, in debug).
fn arm64_binary() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let installed = success(&run("rustup", &["target", "list", "--installed"]), "rustup");
        assert!(
            installed.lines().any(|t| t == TARGET),
            "the {TARGET} standard library is missing: rustup target add {TARGET}"
        );
        assert!(
            Path::new(ARM64_SYSROOT)
                .join("lib/ld-linux-aarch64.so.1")
                .exists(),
            "no arm64 libc in {ARM64_SYSROOT}: apt-get install gcc-aarch64-linux-gnu"
        );
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let target_dir = target_dir();
        let out = Command::new(cargo)
            .current_dir(repo_root())
            .args([
                "build",
                "-p",
                "pcielab-cli",
                "--target",
                TARGET,
                "--target-dir",
            ])
            .arg(&target_dir)
            .output()
            .unwrap();
        success(&out, "cargo build --target aarch64-unknown-linux-gnu");
        target_dir.join(TARGET).join("debug/pcielab")
    })
}

/// Runs the arm64 binary under qemu-user (`qemu-aarch64-static`, Debian qemu-user-static).
fn arm64(args: &[&str]) -> Output {
    Command::new("qemu-aarch64-static")
        .args(["-L", ARM64_SYSROOT])
        .arg(arm64_binary())
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect(
            "qemu-aarch64-static (Debian qemu-user-static) must be installed: .ci/run installs it",
        )
}

fn x86(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap()
}

/// The README's commands that print the same thing each time they run, as arguments to
/// pcielab: those on simulated machines (its main job: the `cargo run … --` line) and the views
/// of this host (`topo`, `pmu list`: qemu-user passes sysfs through, so both binaries read the same
/// tree). Counting, `top`, the exporter and the lines that write files are left out.
fn readme_commands() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let commands: Vec<Vec<String>> = readme
        .lines()
        .filter_map(|line| {
            let args = line
                .strip_prefix("cargo run --release -p pcielab-cli -- ")
                .or_else(|| line.strip_prefix("pcielab "))?;
            let args: Vec<String> = args
                .split(" #")
                .next()
                .unwrap()
                .split_whitespace()
                .map(String::from)
                .collect();
            let simulated = args
                .windows(2)
                .any(|w| w[0] == "--machine" && w[1].starts_with("sim:"));
            let host_view = args == ["topo"] || args == ["pmu", "list"];
            (simulated || host_view).then_some(args)
        })
        .collect();
    assert!(
        commands.len() >= 3,
        "the README's main job, `pcielab topo` and `pcielab pmu list` not all found: {commands:?}"
    );
    commands
}

/// The README's commands, every preset's tree and advice, the simulated counting and the MPAM
/// scenarios: everything deterministic a user runs without a host PMU.
fn compared_commands() -> Vec<Vec<String>> {
    let presets: serde_json::Value =
        serde_json::from_str(&success(&x86(&["presets", "--json"]), "presets --json")).unwrap();
    let mut commands = readme_commands();
    let fixed: [&[&str]; 15] = [
        &["--version"],
        &["presets"],
        &["man"],
        &["completions", "bash"],
        &["model", "--gen", "3", "--width", "4", "--sizes", "64,4K,1M"],
        &["model", "--gen", "5", "--width", "16", "--json"],
        &["pmu", "list", "--machine", "sim:yitian710"],
        &["topo", "--machine", "sim:yitian710", "--json"],
        &["topo", "--machine", "sim:qemu-wide", "--p2p"],
        &[
            "topo",
            "--machine",
            "lspci:fixtures/lspci/pciutils/bridge-ctl-vga16",
        ],
        &["stat", "--machine", "sim:rk3588-ep", "-a", "--", "dmatest"],
        &["qos", "show", "--machine", "sim:mpam-seed"],
        &["sim", "run", "scenarios/mb-throttling-rdt.toml"],
        &["sim", "run", "scenarios/l3-occupancy-vs-ways.toml"],
        // A mistake is refused the same way.
        &["topo", "--machine", "sim:no-such-preset"],
    ];
    for args in fixed {
        commands.push(args.iter().map(|a| a.to_string()).collect());
    }
    for preset in presets["presets"].as_array().expect("presets[]") {
        let name = preset["name"].as_str().unwrap();
        let machine = format!("sim:{name}");
        if preset["kind"] == "topology" {
            commands.push(vec!["topo".into(), "--machine".into(), machine.clone()]);
            commands.push(vec!["advise".into(), "--machine".into(), machine]);
        }
    }
    commands
}

/// `text` with the one wall-clock figure these commands print, `sim run`'s "simulated in 1.30 s",
/// masked: under qemu-user it is ten times the native one.
fn without_timings(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .lines()
        .map(|line| match line.strip_prefix("simulated in ") {
            Some(time) if time.ends_with(" s") => "simulated in (wall-clock) s",
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_arm64_binary_under_qemu_prints_what_the_x86_binary_prints() {
    let commands = compared_commands();
    assert!(commands.len() > 20, "{commands:?}");
    let mut differing = Vec::new();
    for command in &commands {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let [want, got] = [x86(&args), arm64(&args)].map(|out| {
            (
                out.status.code(),
                without_timings(&out.stdout),
                without_timings(&out.stderr),
            )
        });
        if want != got {
            differing.push(format!(
                "pcielab {}: x86 exit {:?}, arm64 exit {:?}\n--- x86\n{}{}\n--- arm64\n{}{}",
                args.join(" "),
                want.0,
                got.0,
                want.1,
                want.2,
                got.1,
                got.2
            ));
        }
    }
    assert!(differing.is_empty(), "{}", differing.join("\n\n"));
}

/// `packaging/build-deb ARCH BINARY OUTDIR GENERATOR`: the package's path.
fn build_deb(arch: &str, binary: &Path, outdir: &Path) -> PathBuf {
    let out = Command::new(repo_root().join("packaging/build-deb"))
        .arg(arch)
        .arg(binary)
        .arg(outdir)
        .arg(BIN)
        .output()
        .unwrap();
    PathBuf::from(success(&out, &format!("build-deb {arch}")).trim())
}

/// The paths `dpkg-deb -c` lists in a package.
fn package_files(deb: &Path) -> BTreeSet<String> {
    let listing = success(
        &run("dpkg-deb", &["-c", deb.to_str().unwrap()]),
        "dpkg-deb -c",
    );
    listing
        .lines()
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .collect()
}

/// Every path under the directories a package can touch, to compare before and after.
fn system_files() -> BTreeSet<String> {
    let out = run(
        "find",
        &[
            "/usr",
            "/etc",
            "/var/lib/dpkg/info",
            "/var/lib/systemd",
            "-xdev",
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_debian_packages_install_run_verify_and_remove_cleanly() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "dpkg -i needs root: run the tests as root (as .ci/run does in CI)"
    );
    assert!(
        !run("dpkg", &["-s", "pcielab"]).status.success(),
        "a pcielab package is already installed here; this test installs and removes its own: dpkg -r pcielab first"
    );
    let dir = tempfile::tempdir().unwrap();
    let amd64 = build_deb("amd64", Path::new(BIN), dir.path());
    let arm64 = build_deb("arm64", arm64_binary(), dir.path());

    let files = package_files(&amd64);
    for expected in [
        "./usr/bin/pcielab",
        "./usr/share/man/man1/pcielab.1.gz",
        "./usr/share/man/man1/pcielab-stat.1.gz",
        "./usr/share/bash-completion/completions/pcielab",
        "./usr/share/zsh/vendor-completions/_pcielab",
        "./usr/share/fish/vendor_completions.d/pcielab.fish",
        "./usr/share/pcielab/dashboards/pcielab.json",
        "./usr/share/pcielab/dashboards/pcielab-alerts.yml",
        "./usr/lib/systemd/system/pcielab-exporter.service",
        "./usr/share/doc/pcielab/examples/full-config-space.conf",
        "./usr/share/doc/pcielab/copyright",
    ] {
        assert!(
            files.contains(expected),
            "{expected} missing from {files:#?}"
        );
    }
    assert_eq!(
        files,
        package_files(&arm64),
        "amd64 and arm64 packages differ"
    );
    let arch = success(
        &run(
            "dpkg-deb",
            &["--field", arm64.to_str().unwrap(), "Architecture"],
        ),
        "dpkg-deb --field",
    );
    assert_eq!(arch.trim(), "arm64");

    let before = system_files();
    success(&run("dpkg", &["-i", amd64.to_str().unwrap()]), "dpkg -i");
    // Nothing may panic while the package is installed: every result is judged after dpkg -r.
    let attempt = |program: &str, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))
    };
    let unit = "/usr/lib/systemd/system/pcielab-exporter.service";
    let version = attempt("/usr/bin/pcielab", &["--version"]);
    let page = attempt("man", &["-w", "pcielab-stat"]);
    let verify = attempt("systemd-analyze", &["verify", unit]);
    let security = attempt("systemd-analyze", &["security", "--offline=true", unit]);
    let installed = system_files();
    success(&run("dpkg", &["-r", "pcielab"]), "dpkg -r");
    let after = system_files();
    let tool = "systemd-analyze (Debian package systemd) must be installed: .ci/run installs it";
    let (version, page) = (version.unwrap(), page.unwrap());
    let (verify, security) = (verify.expect(tool), security.expect(tool));

    assert_eq!(
        success(&version, "pcielab --version").trim(),
        format!("pcielab {}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        success(&page, "man -w pcielab-stat").trim(),
        "/usr/share/man/man1/pcielab-stat.1.gz"
    );
    success(&verify, "systemd-analyze verify");
    assert!(
        verify.stderr.is_empty(),
        "systemd-analyze verify warned: {}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // systemd's own exposure score of the unit (0 safest, 10 unprotected; a unit with no
    // hardening scores 9.6): the hardening above must keep it in systemd's "OK" band.
    let report = success(&security, "systemd-analyze security");
    let exposure: f64 = report
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for pcielab-exporter.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"));
    assert!(exposure < 2.0, "exposure {exposure}:\n{report}");

    let added: Vec<&String> = installed.difference(&before).collect();
    assert!(added.iter().any(|f| *f == "/usr/bin/pcielab"), "{added:#?}");
    let left: Vec<&String> = after.symmetric_difference(&before).collect();
    assert!(
        left.is_empty(),
        "dpkg -r left these behind (or took them): {left:#?}"
    );
}
