//! Hostile and real-machine input, end to end (issue 11): every finding runs the real binary in a
//! temporary directory with its address space capped at 1 GiB and a hang deadline, and must end
//! with exit code 0, 1 or 2 (141 for a closed pipe) and the message the finding calls for.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::common::hostile;
use hostile::{expect, run_in, HANG};

#[test]
fn a_closed_pipe_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(["pmu", "list", "--machine", "sim:yitian710"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then close the pipe, as `| head -c1` does.
    let mut out = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    out.read_exact(&mut byte).unwrap();
    drop(out);
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert!(
        status.code() == Some(0) || status.signal() == Some(libc::SIGPIPE),
        "{status:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn numbers_out_of_range_state_the_range() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    expect(
        d,
        &["model", "--gen", "99999999999999999999", "--width", "4"],
        2,
        "1..=7",
    );
    expect(
        d,
        &["model", "--gen", "-1", "--width", "4"],
        2,
        "'-1' is not a number in 1..=7",
    );
    expect(
        d,
        &[
            "qos",
            "monitor",
            "--machine",
            "sim:mpam-seed",
            "-I",
            "18446744073709551615",
        ],
        2,
        "1..=3600000",
    );
    // Each -I is in range, but all of them together are a simulated run of 7.2e9 model steps
    // (and on a host 114 years).
    expect(
        d,
        &[
            "qos",
            "monitor",
            "--machine",
            "sim:mpam-seed",
            "-I",
            "3600000",
            "--count",
            "1000000",
        ],
        2,
        "7200000000 model steps of at most 0.5 s; a simulated machine runs at most 100000",
    );
    resctrl_tree(d, "ff", "1");
    expect(
        d,
        &[
            "qos",
            "monitor",
            "--resctrl",
            "resctrl",
            "-I",
            "3600000",
            "--count",
            "1000",
        ],
        2,
        "1000 intervals of 3600000 ms: 3600000 s is not a duration pcielab runs",
    );
    expect(
        d,
        &["lab", "argv", "--memory", "0", "qemu-seed"],
        2,
        "128..=1048576",
    );
    expect(
        d,
        &[
            "qos",
            "assign",
            "/",
            "--cpus",
            "0-4294967295",
            "--machine",
            "sim:mpam-seed",
        ],
        2,
        "0..=8191",
    );
    expect(
        d,
        &[
            "stat",
            "--machine",
            "sim:yitian710",
            "-a",
            "-e",
            "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
            "--",
            "sleep",
            "1e300",
        ],
        2,
        "one week",
    );
    expect(
        d,
        &[
            "stat",
            "--machine",
            "sim:yitian710",
            "-a",
            "-I",
            "1",
            "-e",
            "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
            "--",
            "sleep",
            "600000",
        ],
        2,
        "intervals",
    );
    expect(
        d,
        &[
            "stat",
            "--machine",
            "sim:yitian710",
            "-a",
            "-I",
            "1",
            "-e",
            "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
            "--",
            "sleep",
            "1e300",
        ],
        2,
        "sleep: 1e300 s is not a duration pcielab runs",
    );
}

/// The longest workload `stat` takes (a week) is simulated without stepping through it: without
/// time-shared counters in a few steps, with time-shared payload and TLP counters in closed form,
/// with other time-shared counters up to a bounded number of rotations.
#[test]
fn a_week_long_simulated_workload_is_counted_or_refused_quickly() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let one = [
        "stat",
        "--machine",
        "sim:yitian710",
        "-a",
        "-e",
        "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
        "--",
    ];
    let week_of_reads = [
        "fio",
        "--name=a",
        "--rw=randread",
        "--bs=4k",
        "--size=1g",
        "--filename=x",
        "--runtime=604800",
        "--time_based",
    ];
    for workload in [&["sleep", "604800"][..], &week_of_reads[..]] {
        let started = Instant::now();
        let r = expect(d, &[&one[..], workload].concat(), 0, " 604800.000");
        assert!(started.elapsed() < HANG, "{}", r.stderr);
    }
    // Rx and Tx payload share the throughput counter, rotated every 4 ms: 151,200,000
    // rotations summed in closed form.
    let tx = ["-e", "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/", "--"];
    let payload_shared = [&one[..one.len() - 1], &tx, &week_of_reads].concat();
    let started = Instant::now();
    let r = expect(d, &payload_shared, 0, "(50.00%)");
    assert!(started.elapsed() < HANG, "{}", r.stderr);
    // Two time-based events on one DWC PMU share its counter, rotated every 4 ms.
    let shared = [
        "stat",
        "--machine",
        "sim:yitian710",
        "-a",
        "-e",
        "dwc_rootport_0/One_Cycle/",
        "-e",
        "dwc_rootport_0/L0/",
        "--",
    ];
    expect(
        d,
        &[&shared[..], &["sleep", "604800"]].concat(),
        2,
        "151200000 rotations; at most 1000000: raise --mux-interval-ms to 605 or more",
    );
    expect(
        d,
        &[
            &shared[..3],
            &["--mux-interval-ms", "6048"],
            &shared[3..],
            &["sleep", "604800"],
        ]
        .concat(),
        0,
        "(50.00%)",
    );
    // A job file of more jobs than fio runs.
    let jobs: String = (0..4097)
        .map(|i| format!("[j{i}]\nrw=read\nfilename=x\n"))
        .collect();
    std::fs::write(d.join("many.fio"), jobs).unwrap();
    expect(
        d,
        &[&one[..], &["fio", "many.fio"]].concat(),
        2,
        "4097 jobs with 4097 clones in all (numjobs summed); fio runs at most 4096",
    );
}

fn scenario(dir: &Path, extra: &str) -> String {
    let path = dir.join("s.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"s\"\ntitle = \"t\"\nmachine = \"sim:mpam-seed\"\nx = \"ways\"\nx_label = \"w\"\ny_label = \"y\"\n{extra}\n\
             [[series]]\nvalues = [\"f\"]\ngroups = [{{ name = \"g\" }}]\n\
             jobs = [{{ name = \"j\", group = \"g\", command = \"bw_mem 1M rd\" }}]\n\
             metrics = [{{ label = \"m\", kind = \"occupancy\", group = \"g\" }}]\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn scenario_durations_are_finite_and_capped() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    for (extra, needle) in [
        ("measure_s = 1e300", "measure_s: 1e300 s is not a duration"),
        (
            "step_s = 1e-300",
            "measure_s / step_s = 2 / 1e-300 is more than",
        ),
        ("measure_s = -5.0", "measure_s"),
        ("duration_s = inf", "duration_s"),
        ("measure_s = nan", "measure_s"),
    ] {
        let s = scenario(d, extra);
        expect(d, &["sim", "run", &s], 2, needle);
    }
    // Each value's run is short, but 30,000 of them are 120,000 model steps.
    let many = std::fs::read_to_string(scenario(d, "")).unwrap().replace(
        "values = [\"f\"]",
        &format!("values = [{}]", vec!["\"f\""; 30_000].join(", ")),
    );
    std::fs::write(d.join("many.toml"), many).unwrap();
    expect(
        d,
        &["sim", "run", "many.toml"],
        2,
        "30000 series values of 4 model steps each are 120000 steps; at most 100000 in all",
    );
    expect(d, &["sim", "run", "missing.toml"], 2, "missing.toml");
    expect(d, &["sim", "run", "."], 2, "is a directory");
    std::os::unix::fs::symlink("loop.toml", d.join("loop.toml")).unwrap();
    expect(d, &["sim", "run", "loop.toml"], 2, "scenario loop.toml");
}

#[test]
fn error_messages_quoting_a_file_are_cut_and_escaped() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    std::fs::write(d.join("long.toml"), format!("a={}\n", "[".repeat(100_000))).unwrap();
    let r = expect(d, &["sim", "run", "long.toml"], 2, "long.toml");
    assert!(r.stderr.len() < 4096, "{} bytes of stderr", r.stderr.len());
    assert!(r.stderr.contains("more characters)"), "{}", r.stderr);
    std::fs::write(d.join("esc.toml"), "\"\x1b[2J\x1b[31m\" = 1\n").unwrap();
    let r = expect(d, &["sim", "run", "esc.toml"], 2, "esc.toml");
    assert!(!r.stderr.contains('\x1b'), "{:?}", r.stderr);
    assert!(r.stderr.contains("\\x1b[2J"), "{}", r.stderr);
}

#[test]
fn hostile_state_files_are_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let st = d.join("st.json");
    let st = st.to_str().unwrap();
    let m = ["--machine", "sim:mpam-seed", "--state", st];
    let with = |args: &[&'static str]| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(m.iter().map(|a| a.to_string()))
            .collect()
    };
    let run_with = |args: &[&'static str], code: i32, needle: &str| {
        let owned = with(args);
        let refs: Vec<&str> = owned.iter().map(String::as_str).collect();
        expect(d, &refs, code, needle)
    };
    run_with(&["qos", "create", "p1"], 0, "");
    let good = std::fs::read_to_string(st).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["resctrl"]["groups"] = serde_json::json!([]);
    std::fs::write(st, v.to_string()).unwrap();
    run_with(&["qos", "show"], 2, "groups is empty");
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["next_pid"] = serde_json::json!(4294967295u32);
    std::fs::write(st, v.to_string()).unwrap();
    run_with(&["qos", "show"], 2, "next_pid");
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    v["resctrl"]["info"]["caches"][0]["cbm_mask"] = serde_json::json!(0);
    std::fs::write(st, v.to_string()).unwrap();
    run_with(&["qos", "show"], 2, "info");
    // Only a path with nothing at it starts a fresh machine; a looping link is unreadable.
    std::os::unix::fs::symlink("loop-b.json", d.join("loop-a.json")).unwrap();
    std::os::unix::fs::symlink("loop-a.json", d.join("loop-b.json")).unwrap();
    expect(
        d,
        &[
            "qos",
            "show",
            "--machine",
            "sim:mpam-seed",
            "--state",
            "loop-a.json",
        ],
        2,
        "state file loop-a.json",
    );
    std::fs::create_dir(d.join("dir.json")).unwrap();
    expect(
        d,
        &[
            "qos",
            "show",
            "--machine",
            "sim:mpam-seed",
            "--state",
            "dir.json",
        ],
        2,
        "is a directory",
    );
}

#[test]
fn desired_state_files_are_validated_where_they_enter() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let m = ["--machine", "sim:mpam-seed", "--dry-run"];
    std::fs::write(
        d.join("pids.yaml"),
        "groups:\n  g:\n    tasks: [4294967297]\n",
    )
    .unwrap();
    expect(
        d,
        &[&["qos", "apply", "pids.yaml"], &m[..]].concat(),
        2,
        "4294967297 is out of range",
    );
    expect(
        d,
        &[&["qos", "apply", "missing.yaml"], &m[..]].concat(),
        2,
        "missing.yaml",
    );
    expect(
        d,
        &[&["qos", "apply", "."], &m[..]].concat(),
        2,
        "is a directory",
    );
    // Unreadable (a link to itself: ELOOP, as root reads past any permission bits).
    std::os::unix::fs::symlink("loop.yaml", d.join("loop.yaml")).unwrap();
    expect(
        d,
        &[&["qos", "apply", "loop.yaml"], &m[..]].concat(),
        2,
        "desired-state file loop.yaml",
    );
    std::fs::write(d.join("deep.yaml"), "[".repeat(100_000)).unwrap();
    let started = Instant::now();
    expect(
        d,
        &[&["qos", "apply", "deep.yaml"], &m[..]].concat(),
        2,
        "deep.yaml",
    );
    assert!(started.elapsed() < HANG);
}

/// A resctrl mount with one L3 resource (`cbm_mask`, `min_cbm_bits`) at `dir/resctrl`.
fn resctrl_tree(dir: &Path, cbm_mask: &str, min_cbm_bits: &str) {
    let root = dir.join("resctrl");
    for (path, text) in [
        ("info/L3/num_closids", "4\n".to_string()),
        ("info/L3/cbm_mask", format!("{cbm_mask}\n")),
        ("info/L3/min_cbm_bits", format!("{min_cbm_bits}\n")),
        ("info/last_cmd_status", "ok\n".to_string()),
        ("schemata", format!("L3:0={cbm_mask}\n")),
        ("tasks", "1\n".to_string()),
        ("cpus_list", "0\n".to_string()),
    ] {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

#[test]
fn a_resctrl_tree_with_min_cbm_bits_above_its_mask_is_an_error_not_a_panic() {
    let d = tempfile::tempdir().unwrap();
    resctrl_tree(d.path(), "1", "5");
    std::fs::write(
        d.path().join("plan.yaml"),
        "groups:\n  g:\n    l3: \"50%\"\n",
    )
    .unwrap();
    expect(
        d.path(),
        &[
            "qos",
            "apply",
            "plan.yaml",
            "--resctrl",
            "resctrl",
            "--dry-run",
        ],
        2,
        "min_cbm_bits",
    );
}

#[test]
fn a_64_way_cache_mask_is_planned_to_its_top_bit() {
    let d = tempfile::tempdir().unwrap();
    resctrl_tree(d.path(), "ffffffffffffffff", "1");
    for (ways, mask) in [
        ("100%", "ffffffffffffffff"),
        ("0-63", "ffffffffffffffff"),
        ("32-63", "ffffffff00000000"),
    ] {
        std::fs::write(
            d.path().join("plan.yaml"),
            format!("groups:\n  g:\n    l3: \"{ways}\"\n"),
        )
        .unwrap();
        let r = expect(
            d.path(),
            &[
                "qos",
                "apply",
                "plan.yaml",
                "--resctrl",
                "resctrl",
                "--dry-run",
            ],
            0,
            "",
        );
        assert!(
            r.stdout.contains(&format!("L3:0={mask}")),
            "{ways}: {}",
            r.stdout
        );
    }
}

#[test]
fn a_spec_cannot_write_outside_the_export_directory() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let spec = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/qemu-seed.toml"),
    )
    .unwrap();
    for driver in ["../../../../x", "/tmp/pcielab-abs", "..", "a/b"] {
        let evil = spec.replacen(
            "[[function]]",
            &format!("[[function]]\ndriver = \"{driver}\""),
            2,
        );
        let evil = evil.replacen(
            &format!("[[function]]\ndriver = \"{driver}\""),
            "[[function]]",
            1,
        );
        std::fs::write(d.join("evil.toml"), evil).unwrap();
        expect(
            d,
            &[
                "topo",
                "--machine",
                "sim:evil.toml",
                "--sysfs-export",
                "out",
            ],
            2,
            "driver",
        );
        assert!(!d.join("out").exists() || !d.join("x").exists());
    }
    assert!(!Path::new("/tmp/pcielab-abs").exists());
    // A planted link inside an existing export directory is not followed.
    for planted in ["tree", "drivers"] {
        let outside = tempfile::tempdir().unwrap();
        let dir = d.join(format!("planted-{planted}"));
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join(planted)).unwrap();
        let r = run_in(
            d,
            &[
                "topo",
                "--machine",
                "sim:qemu-seed",
                "--sysfs-export",
                dir.to_str().unwrap(),
            ],
        );
        assert!(r.code == 1 || r.code == 2, "{planted}: {}", r.stderr);
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "{planted}"
        );
    }
}

#[test]
fn a_planted_link_in_a_snapshot_directory_is_not_followed() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    // A host's /sys/bus/pci to save: an export of a preset with bound drivers.
    expect(
        d,
        &[
            "topo",
            "--machine",
            "sim:qemu-seed",
            "--sysfs-export",
            "root/sys/bus/pci",
        ],
        0,
        "",
    );
    for planted in ["tree", "drivers"] {
        let outside = tempfile::tempdir().unwrap();
        let snap = d.join(format!("snap-{planted}"));
        std::fs::create_dir(&snap).unwrap();
        std::os::unix::fs::symlink(outside.path(), snap.join(planted)).unwrap();
        let r = run_in(d, &["snapshot", snap.to_str().unwrap(), "--root", "root"]);
        assert!(r.code == 1 || r.code == 2, "{planted}: {}", r.stderr);
        assert!(r.stderr.contains(planted), "{planted}: {}", r.stderr);
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "{planted}"
        );
    }
}

#[test]
fn numa_nodes_are_bounded_where_the_spec_enters() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let spec = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets/qemu-seed.toml"),
    )
    .unwrap();
    for node in ["2000000000", "-5", "1024"] {
        let evil = spec.replacen(
            "[[function]]",
            &format!("[[function]]\nnuma_node = {node}"),
            1,
        );
        std::fs::write(d.join("numa.toml"), evil).unwrap();
        // `lab argv` built one QEMU memory backend per node up to the largest: 2e9 of them.
        expect(
            d,
            &["lab", "argv", "numa.toml"],
            2,
            &format!("numa_node = {node}: expected -1 (none) or a node in 0..=1023"),
        );
    }
}

/// A minimal sysfs tree with one function whose files are given.
fn snapshot(dir: &Path, files: &[(&str, &[u8])]) {
    let f = dir.join("snap/devices/0000:00:00.0");
    std::fs::create_dir_all(&f).unwrap();
    for (name, bytes) in files {
        std::fs::write(f.join(name), bytes).unwrap();
    }
}

#[test]
fn endless_config_files_and_escapes_in_labels_are_harmless() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    snapshot(
        d,
        &[
            ("vendor", b"0x8086\n"),
            ("device", b"0x1237\n"),
            ("class", b"0x060000\n"),
            ("label", b"\x1b[31mRED\x1b[0m\nFAKE 00:00.1 line\n"),
        ],
    );
    // A driver link whose name holds an escape sequence.
    std::os::unix::fs::symlink(
        "../../drivers/e\x1b[2Jvil",
        d.join("snap/devices/0000:00:00.0/driver"),
    )
    .unwrap();
    std::os::unix::fs::symlink("/dev/zero", d.join("snap/devices/0000:00:00.0/config")).unwrap();
    let r = expect(d, &["topo", "--machine", "snapshot:snap"], 0, "");
    assert!(!r.stdout.contains('\x1b'), "{}", r.stdout);
    assert!(r.stdout.contains("driver e\\x1b[2Jvil"), "{}", r.stdout);
    let r = expect(d, &["topo", "--machine", "snapshot:snap", "--dot"], 0, "");
    assert!(!r.stdout.contains('\x1b'), "{}", r.stdout);
    std::fs::remove_file(d.join("snap/devices/0000:00:00.0/config")).unwrap();
    std::os::unix::fs::symlink("/dev/urandom", d.join("snap/devices/0000:00:00.0/config")).unwrap();
    let r = run_in(d, &["topo", "--machine", "snapshot:snap"]);
    assert!([0, 1, 2].contains(&r.code), "{}", r.stderr);
}

/// The kernel takes any byte but a newline in a group name: one made by someone else is shown
/// escaped by `qos show` and `qos monitor`.
#[test]
fn resctrl_group_names_with_escapes_are_shown_not_obeyed() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    resctrl_tree(d, "ff", "1");
    let group = d.join("resctrl/g\x1b[2J");
    std::fs::create_dir_all(group.join("mon_data/mon_L3_00")).unwrap();
    for (file, text) in [
        ("schemata", "L3:0=ff\n"),
        ("tasks", ""),
        ("cpus_list", "\n"),
        ("mon_data/mon_L3_00/llc_occupancy", "4096\n"),
    ] {
        std::fs::write(group.join(file), text).unwrap();
    }
    let r = expect(d, &["qos", "show", "--resctrl", "resctrl"], 0, "");
    assert!(!r.stdout.contains('\x1b'), "{:?}", r.stdout);
    assert!(
        r.stdout.contains("group g\\x1b[2J (closid 1"),
        "{}",
        r.stdout
    );
    let r = expect(
        d,
        &["qos", "monitor", "--resctrl", "resctrl", "-I", "1"],
        0,
        "",
    );
    assert!(!r.stdout.contains('\x1b'), "{:?}", r.stdout);
    assert!(r.stdout.contains("g\\x1b[2J"), "{}", r.stdout);
}

#[test]
fn bad_qos_group_names_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    for name in ["..", ".", "p1/..", "info"] {
        expect(
            d,
            &["qos", "create", name, "--machine", "sim:mpam-seed"],
            2,
            "bad group",
        );
    }
}

#[test]
fn a_refusal_is_kept_in_the_simulated_last_cmd_status() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let m = ["--machine", "sim:mpam-seed", "--state", "st.json"];
    assert_eq!(
        run_in(d, &[&["qos", "create", "p1"], &m[..]].concat()).code,
        0
    );
    expect(
        d,
        &[&["qos", "set", "p1", "--schemata", "L3:0=8000"], &m[..]].concat(),
        2,
        "Mask out of range",
    );
    let r = expect(d, &[&["qos", "show", "--json"], &m[..]].concat(), 0, "");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["last_cmd_status"], "Mask out of range", "{}", r.stdout);
}

#[test]
fn p2p_verdicts_without_readable_acs_say_unknown() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    expect(
        d,
        &[
            "topo",
            "--machine",
            "sim:qemu-wide",
            "--sysfs-export",
            "full",
        ],
        0,
        "",
    );
    let full = expect(d, &["topo", "--machine", "snapshot:full", "--p2p"], 0, "");
    assert!(!full.stdout.contains("needs root"), "{}", full.stdout);
    // What an unprivileged reader gets: the first 64 bytes of every config file.
    for entry in std::fs::read_dir(d.join("full/devices")).unwrap() {
        let config = entry.unwrap().path().join("config");
        let bytes = std::fs::read(&config).unwrap();
        std::fs::write(&config, &bytes[..64]).unwrap();
    }
    let short = expect(d, &["topo", "--machine", "snapshot:full", "--p2p"], 0, "");
    assert!(
        short.stdout.contains("unknown: needs root to read ACS of"),
        "{}",
        short.stdout
    );
    let bus_address = |text: &str| {
        text.lines()
            .filter(|l| l.contains(" -> ") && l.contains("bus address"))
            .count()
    };
    assert!(bus_address(&full.stdout) > 0, "{}", full.stdout);
    assert_eq!(bus_address(&short.stdout), 0, "{}", short.stdout);
}

/// `lspci -mm` fields: "class" "vendor" "device".
fn lspci_names(dir: &Path) -> Vec<(String, String)> {
    let out = Command::new("lspci")
        .args(["-A", "linux-sysfs", "-O"])
        .arg(format!("sysfs.path={}", dir.display()))
        .args(["-mm", "-D"])
        .output()
        .expect("lspci (pciutils) is installed (.ci/run)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (bdf, rest) = l.split_once(' ').unwrap();
            let fields: Vec<&str> = rest.split('"').collect();
            (bdf.to_string(), format!("{} {}", fields[3], fields[5]))
        })
        .collect()
}

#[test]
fn device_names_in_topo_are_the_ones_lspci_shows() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    expect(
        d,
        &["topo", "--machine", "sim:qemu-wide", "--sysfs-export", "ex"],
        0,
        "",
    );
    // Without labels the names can only come from pci.ids, as lspci's do.
    for entry in std::fs::read_dir(d.join("ex/devices")).unwrap() {
        let _ = std::fs::remove_file(entry.unwrap().path().join("label"));
    }
    let expected = lspci_names(&d.join("ex"));
    assert!(expected.len() >= 8, "{expected:?}");
    let r = expect(d, &["topo", "--machine", "snapshot:ex", "--json"], 0, "");
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let functions = v["functions"].as_array().unwrap();
    for (bdf, name) in &expected {
        let f = functions
            .iter()
            .find(|f| f["bdf"] == bdf.as_str())
            .unwrap_or_else(|| panic!("{bdf} missing"));
        assert_eq!(f["name"], name.as_str(), "{bdf}");
    }
}

#[test]
fn simulated_program_counts_are_bounded() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let m = ["--machine", "sim:mpam-seed", "--state", "st.json", "--"];
    for (program, needle) in [
        (&["bw_mem", "-P", "4000000000", "1M", "rd"][..], "1..=65536"),
        (&["bw_mem", "-P", "-1", "1M", "rd"][..], "1..=65536"),
        (&["bw_mem", "99999999999999G", "rd"][..], "bad size"),
        (
            &["online-service", "--accesses-per-op", "inf"][..],
            "--accesses-per-op",
        ),
    ] {
        expect(d, &[&["sim", "spawn"], &m[..], program].concat(), 2, needle);
    }
}

#[test]
fn a_function_whose_parent_link_names_itself_still_shows() {
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let dir = d.join("snap/tree/pci0000:00/0000:00:01.0/0000:00:01.0");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in [
        ("vendor", "0x8086\n"),
        ("device", "0x1237\n"),
        ("class", "0x020000\n"),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::fs::create_dir_all(d.join("snap/devices")).unwrap();
    std::os::unix::fs::symlink(
        "../tree/pci0000:00/0000:00:01.0/0000:00:01.0",
        d.join("snap/devices/0000:00:01.0"),
    )
    .unwrap();
    let r = expect(d, &["topo", "--machine", "snapshot:snap"], 0, "");
    assert!(r.stdout.contains("00:01.0"), "{}", r.stdout);
}

/// One piece of markup as a browser's tokenizer splits it: tags with their attributes (values
/// decoded), end tags, text (decoded), comments and declarations. Enough of HTML5's rules for
/// pcielab's output: quoted and bare attribute values, `<style>`/`<script>` raw text, and the
/// character references an escaper writes.
#[derive(Debug, Clone, PartialEq)]
enum Markup {
    Open(String, Vec<(String, String)>),
    Close(String),
    Text(String),
    Comment(String),
    Declaration(String),
}

fn decode(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';').filter(|e| *e <= 10) else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..end];
        let c = match name {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => name
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out + rest
}

fn markup(doc: &str) -> Vec<Markup> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < doc.len() {
        let rest = &doc[i..];
        let upto = |pattern: &str| {
            rest.find(pattern)
                .unwrap_or_else(|| panic!("unterminated markup at byte {i}: {:.60}", rest))
        };
        if let Some(body) = rest.strip_prefix("<!--") {
            let end = upto("-->");
            out.push(Markup::Comment(body[..end - 4].to_string()));
            i += end + 3;
        } else if rest.starts_with("<!") || rest.starts_with("<?") {
            let end = upto(">");
            out.push(Markup::Declaration(rest[..end].to_string()));
            i += end + 1;
        } else if let Some(body) = rest.strip_prefix("</") {
            let end = upto(">");
            out.push(Markup::Close(body[..end - 2].trim().to_lowercase()));
            i += end + 1;
        } else if rest.starts_with('<') {
            let bytes = rest.as_bytes();
            let mut j = 1;
            while j < bytes.len() && !b" \t\r\n/>".contains(&bytes[j]) {
                j += 1;
            }
            let name = rest[1..j].to_lowercase();
            let mut attributes = Vec::new();
            loop {
                while bytes[j].is_ascii_whitespace() || bytes[j] == b'/' {
                    j += 1;
                }
                if bytes[j] == b'>' {
                    j += 1;
                    break;
                }
                let start = j;
                while !b" \t\r\n=/>".contains(&bytes[j]) {
                    j += 1;
                }
                let key = rest[start..j].to_lowercase();
                let mut value = String::new();
                if bytes[j] == b'=' {
                    j += 1;
                    if bytes[j] == b'"' || bytes[j] == b'\'' {
                        let quote = bytes[j] as char;
                        let end = rest[j + 1..].find(quote).unwrap() + j + 1;
                        value = decode(&rest[j + 1..end]);
                        j = end + 1;
                    } else {
                        let start = j;
                        while !b" \t\r\n>".contains(&bytes[j]) {
                            j += 1;
                        }
                        value = decode(&rest[start..j]);
                    }
                }
                attributes.push((key, value));
            }
            i += j;
            if name == "style" || name == "script" {
                let end = doc[i..].find(&format!("</{name}")).unwrap();
                out.push(Markup::Text(doc[i..i + end].to_string()));
                i += end;
            }
            out.push(Markup::Open(name, attributes));
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            out.push(Markup::Text(decode(&rest[..end])));
            i += end;
        }
    }
    out
}

/// Hostile names (markup, quotes, an attribute, a CDATA end, a comment opener, entities) in a
/// spec's machine, function and driver names must reach the topology SVG and the report's HTML
/// as text only, each exactly where a harmless name of the same length lands: the markup of
/// both outputs, tokenized, is identical once the hostile names are read back as the harmless
/// ones, so no element, attribute or comment was injected and each hostile name decodes to
/// itself in the text or attribute value it was put in.
#[test]
fn hostile_names_in_svg_and_html_land_as_text_where_they_were_put() {
    let hostile = [
        ('M', "m<script>alert(1)</script>\"x]]>&amp;'"),
        (
            'F',
            "<script>alert(2)</script>\" onload=\"evil()\" ]]> <!-- &lt;",
        ),
        ('D', "d<b>\"'"),
    ];
    let harmless = |letter: char, name: &str| -> String {
        name.chars()
            .map(|c| if c == ' ' { ' ' } else { letter })
            .collect()
    };
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let outputs = |names: [String; 3], tag: &str| -> (String, String) {
        let q = |s: &str| serde_json::to_string(s).unwrap();
        let spec = format!(
            "name = {}\n\n[[function]]\nbdf = \"0000:00:01.0\"\nkind = \"root_port\"\n\
             vendor = 0x1ded\ndevice_id = 0x8000\nclass = 0x060400\nname = {}\ndriver = {}\n\
             link = {{ max_speed = 16.0, max_width = 4, speed = 16.0, width = 4 }}\n",
            q(&names[0]),
            q(&names[1]),
            q(&names[2])
        );
        // The same file names in a directory of their own: only the names differ.
        let dir = d.join(tag);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("m.toml"), spec).unwrap();
        let machine = "sim:m.toml";
        expect(
            &dir,
            &["topo", "--machine", machine, "--svg", "t.svg"],
            0,
            "",
        );
        expect(
            &dir,
            &["report", "--machine", machine, "-o", "r.html"],
            0,
            "",
        );
        (
            std::fs::read_to_string(dir.join("t.svg")).unwrap(),
            std::fs::read_to_string(dir.join("r.html")).unwrap(),
        )
    };
    let (plain_svg, plain_html) = outputs(hostile.map(|(l, n)| harmless(l, n)), "plain");
    let (svg, html) = outputs(hostile.map(|(_, n)| n.to_string()), "hostile");
    // Read back as the harmless names: what the hostile ones decoded to must be themselves.
    let back = |text: &str| {
        hostile
            .iter()
            .fold(text.to_string(), |t, (l, n)| t.replace(n, &harmless(*l, n)))
    };
    let read_back = |doc: &str| -> Vec<Markup> {
        markup(doc)
            .into_iter()
            .map(|m| match m {
                Markup::Text(t) => Markup::Text(back(&t)),
                Markup::Open(name, attributes) => Markup::Open(
                    name,
                    attributes.into_iter().map(|(k, v)| (k, back(&v))).collect(),
                ),
                other => other,
            })
            .collect()
    };
    for (what, plain, hostile_doc) in [("SVG", &plain_svg, &svg), ("HTML", &plain_html, &html)] {
        let expected = markup(plain);
        let got = read_back(hostile_doc);
        assert_eq!(got.len(), expected.len(), "{what}: markup pieces differ");
        for (g, e) in got.iter().zip(&expected) {
            assert_eq!(g, e, "{what}: the hostile names changed the markup");
        }
        assert!(!hostile_doc.contains("<script") && !hostile_doc.contains("<b>"));
    }
    // Each hostile name did land, whole, as text: a real XML parser reads the SVG's text.
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    for (_, name) in hostile {
        assert!(
            texts.iter().any(|t| t.contains(name)),
            "{name:?} is not in the SVG's text: {texts:?}"
        );
    }
    let cells = markup(&html);
    for (_, name) in hostile {
        assert!(
            cells
                .iter()
                .any(|m| matches!(m, Markup::Text(t) if t.contains(name))),
            "{name:?} is not in the HTML's text"
        );
    }
}
