//! `pcielab advise` on the fixture server (fixtures/advise/server: every check fires) and its
//! well-tuned twin (fixtures/advise/clean: none may), with each piece of config-space evidence
//! compared against what the real `lspci -vvv` prints for the same device from the same tree.

mod common;

use common::{ok, pcielab, promtool_accepts};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/advise")
        .join(name)
}

fn advise_json(tree: &str, extra: &[&str]) -> Value {
    let machine = format!("snapshot:{}", fixture(tree).join("sys/bus/pci").display());
    let args = [&["advise", "--machine", &machine, "--json"][..], extra].concat();
    serde_json::from_str(&ok(pcielab(&args))).unwrap()
}

/// lspci -vvv of one device, read from the tree `pcielab advise` read.
fn lspci_vvv(tree: &str, bdf: &str) -> String {
    let path = format!("sysfs.path={}", fixture(tree).join("sys/bus/pci").display());
    let out = Command::new("lspci")
        .args(["-A", "linux-sysfs", "-O", &path, "-vvv", "-s", bdf])
        .output()
        .expect("lspci (pciutils) must be installed; .ci/run installs it");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// One register's text in lspci -vvv: its line ("\t\tDevCtl:\t…") and its continuation lines.
fn register(lspci: &str, name: &str) -> String {
    let head = format!("\t\t{name}:");
    let mut lines = lspci.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no {name} in\n{lspci}"));
    let rest: Vec<&str> = lines.take_while(|l| l.starts_with("\t\t\t")).collect();
    format!("{first} {}", rest.join(" "))
}

#[test]
fn every_check_fires_on_the_server_and_its_evidence_is_what_lspci_prints() {
    let advice = advise_json("server", &[]);
    let findings = advice["findings"].as_array().unwrap();
    let mut ids: Vec<&str> = findings.iter().map(|f| f["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 15, "{ids:?}");
    assert!(advice["skipped"].as_array().unwrap().is_empty());

    let mut compared = 0;
    for f in findings {
        for e in f["evidence"].as_array().unwrap() {
            let source = e["source"].as_str().unwrap();
            let Some(dir) = source.strip_suffix("/config") else {
                continue;
            };
            let bdf = dir.rsplit('/').next().unwrap();
            let lspci = lspci_vvv("server", bdf);
            let (field, value) = (e["field"].as_str().unwrap(), e["value"].as_str().unwrap());
            let (reg, name) = field.split_once(": ").unwrap_or((field, ""));
            let text = register(&lspci, reg);
            let expected = match (name, value) {
                (_, "+" | "-") => format!("{name}{value}"),
                ("MaxPayload" | "MaxReadReq", v) => {
                    format!("{name} {}", v.split(" (").next().unwrap())
                }
                ("", v) => v.to_string(),
                (n, v) => format!("{n} {v}"),
            };
            // lspci marks "(downgraded)" against the device's own LnkCap, pcielab against
            // both ends': the speeds and widths must agree, the marks may not.
            let strip = |s: &str| s.replace(" (downgraded)", "");
            let found = if reg == "ACSCtl" {
                text.contains("ReqRedir+") && text.contains("CmpltRedir+")
            } else {
                strip(&text).contains(&strip(&expected))
            };
            assert!(found, "{bdf} {field} = {value}: lspci says {text}");
            compared += 1;
        }
    }
    assert!(
        compared >= 30,
        "only {compared} pieces of evidence compared"
    );
}

#[test]
fn the_well_tuned_twin_has_no_finding_for_any_intent_but_isolation() {
    for intent in ["throughput", "latency", "p2p"] {
        let advice = advise_json("clean", &["--intent", intent]);
        assert_eq!(
            advice["findings"],
            serde_json::json!([]),
            "{intent}: {advice:#}"
        );
        assert_eq!(advice["checks_run"].as_array().unwrap().len(), 15);
    }
    // Isolation wants translated DMA: identity domains are risks there.
    let advice = advise_json("clean", &["--intent", "isolation"]);
    assert!(advice["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] == "iommu-translated"));
}

#[test]
fn fail_on_ignore_and_only_shape_the_exit_and_the_findings() {
    let machine = format!(
        "snapshot:{}",
        fixture("server").join("sys/bus/pci").display()
    );
    let run = |extra: &[&str]| pcielab(&[&["advise", "--machine", &machine][..], extra].concat());
    let aer = ["--only", "aer-correctable", "--fail-on"];
    assert_eq!(run(&[&aer[..], &["risk"]].concat()).status.code(), Some(3));
    assert_eq!(
        run(&[&aer[..], &["perf-loss"]].concat()).status.code(),
        Some(0)
    );
    let muted = advise_json(
        "server",
        &[
            "--only",
            "aer-correctable",
            "--ignore",
            "aer-correctable@04:00.0",
        ],
    );
    assert_eq!(muted["findings"], serde_json::json!([]));
    assert_eq!(muted["muted"], 1);
    let out = run(&["--only", "mps"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("valid are link-downtrained"));
}

#[test]
fn apply_and_undo_through_the_cli_on_a_copy_of_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(fixture("server"))
        .arg(&root)
        .status()
        .unwrap()
        .success());
    let governor = root.join("sys/class/devfreq/dmc/governor");
    let before = std::fs::read(&governor).unwrap();
    let undo = dir.path().join("undo.json");
    let (root_s, undo_s) = (root.to_str().unwrap(), undo.to_str().unwrap());
    let apply = |id: &str| {
        pcielab(&[
            "advise",
            "--machine",
            "host",
            "--root",
            root_s,
            "--apply",
            id,
            "--undo-file",
            undo_s,
        ])
    };
    let text = ok(apply("devfreq-governor"));
    assert!(
        text.contains("wrote /sys/class/devfreq/dmc/governor: simple_ondemand -> performance"),
        "{text}"
    );
    assert_eq!(std::fs::read(&governor).unwrap(), b"performance\n");
    // irqbalance runs in this tree: moving IRQs is refused (exit 1) and nothing changes.
    let irq = root.join("proc/irq/120/smp_affinity_list");
    let out = apply("irq-far-node");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("irqbalance"));
    assert_eq!(std::fs::read_to_string(&irq).unwrap(), "9\n");
    ok(pcielab(&["advise", "--undo", undo_s, "--root", root_s]));
    assert_eq!(std::fs::read(&governor).unwrap(), before);
}

/// The undo file goes through the one output policy and is written before anything changes:
/// a device that fails the write, a link out of its directory, a read-only file or a directory
/// leaves every sysfs file as it was and the target untouched; a regular file is replaced whole
/// (mode kept, no temporary left beside it).
#[test]
fn the_undo_file_follows_the_output_policy_and_comes_before_any_change() {
    use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(fixture("server"))
        .arg(&root)
        .status()
        .unwrap()
        .success());
    let governor = root.join("sys/class/devfreq/dmc/governor");
    let before = std::fs::read(&governor).unwrap();
    let undo_dir = dir.path().join("undo");
    std::fs::create_dir(&undo_dir).unwrap();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path().join("undo.json"), undo_dir.join("away.json")).unwrap();
    std::fs::write(undo_dir.join("ro.json"), "kept\n").unwrap();
    std::fs::set_permissions(
        undo_dir.join("ro.json"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    std::fs::create_dir(undo_dir.join("adir")).unwrap();
    let apply = |undo: &Path| {
        pcielab(&[
            "advise",
            "--machine",
            "host",
            "--root",
            root.to_str().unwrap(),
            "--apply",
            "devfreq-governor",
            "--undo-file",
            undo.to_str().unwrap(),
        ])
    };
    for (undo, code, why) in [
        (PathBuf::from("/dev/full"), 1, "/dev/full"),
        (undo_dir.join("away.json"), 2, "is a symlink"),
        (undo_dir.join("ro.json"), 2, "is a read-only file"),
        (undo_dir.join("adir"), 2, "is a directory"),
    ] {
        let out = apply(&undo);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}: {stderr}",
            undo.display()
        );
        assert!(stderr.contains(why), "{}: {stderr}", undo.display());
        assert_eq!(
            std::fs::read(&governor).unwrap(),
            before,
            "{}",
            undo.display()
        );
    }
    assert!(std::fs::metadata("/dev/full")
        .unwrap()
        .file_type()
        .is_char_device());
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert_eq!(
        std::fs::read_to_string(undo_dir.join("ro.json")).unwrap(),
        "kept\n"
    );
    // A regular file: replaced whole, its mode kept, nothing else left in the directory.
    let undo = undo_dir.join("undo.json");
    std::fs::write(&undo, "an older undo file\n").unwrap();
    std::fs::set_permissions(&undo, std::fs::Permissions::from_mode(0o600)).unwrap();
    ok(apply(&undo));
    assert_eq!(std::fs::read(&governor).unwrap(), b"performance\n");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&undo).unwrap()).unwrap();
    assert_eq!(saved["previous"][0]["value"], "simple_ondemand", "{saved}");
    assert_eq!(
        std::fs::metadata(&undo).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let mut names: Vec<String> = std::fs::read_dir(&undo_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["adir", "away.json", "ro.json", "undo.json"]);
}

#[test]
fn the_exporter_serves_each_finding_as_a_series_promtool_accepts() {
    let machine = format!(
        "snapshot:{}",
        fixture("server").join("sys/bus/pci").display()
    );
    let metrics = ok(pcielab(&["exporter", "--machine", &machine, "--once"]));
    promtool_accepts(&metrics);
    let series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("pcielab_advice_findings{"))
        .collect();
    // One series per (check, severity, function): the two directions of a P2P pair and the
    // findings above are 18 findings on 18 distinct label sets.
    assert_eq!(series.len(), 18, "{series:#?}");
    assert!(series.contains(
        &r#"pcielab_advice_findings{check="link-downtrained",severity="perf-loss",function="0000:04:00.0"} 1"#
    ));
    assert!(series.contains(
        &r#"pcielab_advice_findings{check="cpu-governor",severity="perf-loss",function="cpu 0-3"} 1"#
    ));
    let clean = format!(
        "snapshot:{}",
        fixture("clean").join("sys/bus/pci").display()
    );
    let metrics = ok(pcielab(&["exporter", "--machine", &clean, "--once"]));
    assert!(!metrics.contains("pcielab_advice_findings"));
}

#[test]
fn the_report_page_has_an_advice_section_with_every_finding() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    let machine = format!(
        "snapshot:{}",
        fixture("server").join("sys/bus/pci").display()
    );
    ok(pcielab(&[
        "report",
        "--machine",
        &machine,
        "-o",
        page.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();
    let section = &html[html
        .find("<section id=\"advice\">")
        .expect("an advice section")..];
    let section = &section[..section.find("</section>").unwrap()];
    assert!(
        section.contains("18 finding(s) for intent throughput"),
        "{section}"
    );
    let advice = advise_json("server", &[]);
    for f in advice["findings"].as_array().unwrap() {
        // The page escapes HTML: "->" in a link's subject is "-&gt;".
        let subject = f["subject"].as_str().unwrap().replace('>', "&gt;");
        let row = format!("<td>{}</td><td>{subject}</td>", f["id"].as_str().unwrap());
        assert!(section.contains(&row), "no row {row}");
    }
}

/// Seconds a simulated fio job takes on `spec` (the "seconds time elapsed" line of `stat`).
fn simulated_fio_seconds(spec: &Path) -> f64 {
    let machine = format!("sim:{}", spec.display());
    let out = pcielab(&[
        "stat",
        "--machine",
        &machine,
        "-a",
        "--",
        "fio",
        "--filename=/dev/nvme0n1",
        "--rw=write",
        "--bs=1m",
        "--size=1g",
        "--name=w",
    ]);
    assert!(out.status.success());
    // perf stat's summary (and the elapsed time) goes to stderr, as perf's does.
    let text = String::from_utf8(out.stderr).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("seconds time elapsed"))
        .unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn the_simulated_workload_gains_what_the_mps_finding_predicts() {
    let spec = fixture("sim-mps.toml");
    let machine = format!("sim:{}", spec.display());
    let advice: Value = serde_json::from_str(&ok(pcielab(&[
        "advise",
        "--machine",
        &machine,
        "--only",
        "mps-below-path",
        "--json",
    ])))
    .unwrap();
    let findings = advice["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{advice:#}");
    let predicted = findings[0]["prediction"]["change_percent"]
        .as_f64()
        .unwrap();
    // The fix applied to the spec: MPS 256 on the port and the drive, as pcie_bus_perf sets.
    let dir = tempfile::tempdir().unwrap();
    let fixed = dir.path().join("fixed.toml");
    let text = std::fs::read_to_string(&spec)
        .unwrap()
        .replace("mps = 128", "mps = 256");
    std::fs::write(&fixed, text).unwrap();
    let fixed_machine = format!("sim:{}", fixed.display());
    assert_eq!(
        ok(pcielab(&[
            "advise",
            "--machine",
            &fixed_machine,
            "--only",
            "mps-below-path",
            "--json"
        ]))
        .matches("\"id\"")
        .count(),
        0,
        "the fix clears the finding"
    );
    let (before, after) = (simulated_fio_seconds(&spec), simulated_fio_seconds(&fixed));
    let measured = (before / after - 1.0) * 100.0;
    assert!(predicted > 5.0, "{predicted}");
    assert!(
        (measured - predicted).abs() <= 0.10 * predicted,
        "simulated {measured:.2} % vs predicted {predicted:.2} %"
    );
}
