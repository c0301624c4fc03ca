//! `pcielab advise` on the fixture server (fixtures/advise/server: every check fires) and its
//! well-tuned twin (fixtures/advise/clean: none may), with each piece of config-space evidence
//! compared against what the real `lspci -vvv` prints for the same device from the same tree.

use crate::common;

use common::{
    advise_apply, advise_undo, assert_lspci_agrees, lspci_register, ok, pcielab, promtool_accepts,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/advise")
        .join(name)
}

/// A writable copy of the two-socket server fixture (in a temporary directory the caller keeps)
/// and its root, for tests that apply changes.
fn server_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(fixture("server"))
        .arg(&root)
        .status()
        .unwrap()
        .success());
    (dir, root)
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

#[test]
fn every_check_fires_on_the_server_and_its_evidence_is_what_lspci_prints() {
    let advice = advise_json("server", &[]);
    let findings = advice["findings"].as_array().unwrap();
    let mut ids: Vec<&str> = findings.iter().map(|f| f["id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 15, "{ids:?}");
    // Every check looked: none is left wholly not judged on a whole-root snapshot, except
    // acs-isolation, which judges only under --intent isolation.
    let checks = advice["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 16);
    let (isolation, others): (Vec<_>, Vec<_>) =
        checks.iter().partition(|c| c["check"] == "acs-isolation");
    assert_eq!(isolation[0]["status"], "nothing-to-judge", "{isolation:#?}");
    assert!(
        others
            .iter()
            .all(|c| c["status"] != "not-judged" && c["judged"].as_u64().unwrap() > 0),
        "{checks:#?}"
    );

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
            assert_lspci_agrees(&lspci, bdf, field, value);
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
        let checks = advice["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 16);
        assert!(
            checks.iter().all(|c| c["status"] != "not-judged"),
            "{intent}: {checks:#?}"
        );
    }
    // Isolation wants translated DMA (identity domains are risks there) and the ACS controls
    // that give devices groups of their own.
    let advice = advise_json("clean", &["--intent", "isolation"]);
    assert!(advice["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] == "iommu-translated" || f["id"] == "acs-isolation"));
}

/// Under `--intent isolation`, the well-tuned twin's switch ports (ACS SrcValid only) and the
/// root port above them (no ACS capability) are findings; the controls each lacks are the ones
/// real lspci prints with '-' among SrcValid, ReqRedir, CmpltRedir and UpstreamFwd (the kernel's
/// `REQ_ACS_FLAGS`), and the group it merges is the port's whole subtree.
#[test]
fn ports_without_the_acs_isolation_controls_are_findings_under_isolation() {
    let advice = advise_json(
        "clean",
        &["--intent", "isolation", "--only", "acs-isolation"],
    );
    let findings = advice["findings"].as_array().unwrap();
    let subjects: Vec<&str> = findings
        .iter()
        .map(|f| f["subject"].as_str().unwrap())
        .collect();
    // 00:02.0, 00:03.0 and the 80:0x.0 root ports each hold one device: no group to split.
    assert_eq!(subjects, ["0000:00:01.0", "0000:02:00.0", "0000:02:01.0"]);
    for f in findings {
        let bdf = f["subject"].as_str().unwrap();
        let summary = f["summary"].as_str().unwrap();
        let lspci = lspci_vvv("clean", bdf);
        let missing: Vec<&str> = match lspci.lines().find_map(|l| l.trim().strip_prefix("ACSCtl:"))
        {
            Some(ctl) => ctl
                .split_whitespace()
                .filter_map(|w| w.strip_suffix('-'))
                .filter(|w| ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"].contains(w))
                .collect(),
            None => vec!["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"],
        };
        assert!(
            summary.contains(&format!("lacks ACS {}:", missing.join(", "))),
            "{bdf}: lspci says {missing:?}; {summary}"
        );
    }
    assert!(findings[0]["summary"].as_str().unwrap().contains(
        "puts 0000:00:01.0, 0000:01:00.0, 0000:02:00.0, 0000:02:01.0, 0000:03:00.0, 0000:04:00.0 in one IOMMU group"
    ));
    // The other intents do not ask for isolation.
    let advice = advise_json("clean", &["--only", "acs-isolation"]);
    assert_eq!(advice["findings"], serde_json::json!([]));
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
    let out = run(&["--ignore", "mps@0000:04:00.0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("valid are link-downtrained"));
    // A subject this machine does not have: a warning naming the closest, the run goes on.
    let out = run(&["--ignore", "aer-correctable@0000:04:01.0"]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "warning: --ignore aer-correctable@0000:04:01.0 matched no finding on this machine; closest: aer-correctable@0000:04:00.0"
        ),
        "{stderr}"
    );
    let out = run(&["--ignore", "aer-correctable@0000:04:00.0"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn apply_and_undo_through_the_cli_on_a_copy_of_the_server() {
    let (dir, root) = server_copy();
    let governor = root.join("sys/class/devfreq/dmc/governor");
    let before = std::fs::read(&governor).unwrap();
    let undo = dir.path().join("undo.json");
    let apply = |id: &str| advise_apply(&root, &undo, id);
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
    ok(advise_undo(&root, &undo, &[]));
    assert_eq!(std::fs::read(&governor).unwrap(), before);
}

/// The undo file is a new file, created before anything changes: a device, a link (even to a
/// new path), a read-only file, a directory or an older undo file already at the path is refused
/// (exit 2), leaving every sysfs file and the thing at the path as they were; a new path is
/// created with mode 0600 and nothing else beside it.
#[test]
fn the_undo_file_is_created_new_before_any_change_and_never_replaces_anything() {
    use std::os::unix::fs::{symlink, FileTypeExt, PermissionsExt};
    let (dir, root) = server_copy();
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
    std::fs::write(undo_dir.join("older.json"), "an older undo file\n").unwrap();
    let apply = |undo: &Path| advise_apply(&root, undo, "devfreq-governor");
    for (undo, why) in [
        (PathBuf::from("/dev/full"), "a character device"),
        (undo_dir.join("away.json"), "a symbolic link"),
        (undo_dir.join("ro.json"), "a regular file"),
        (undo_dir.join("adir"), "a directory"),
        (undo_dir.join("older.json"), "a regular file"),
        (governor.clone(), "a regular file"),
    ] {
        let out = apply(&undo);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", undo.display());
        assert!(
            stderr.contains(&format!(
                "already exists ({why}); pcielab never replaces it"
            )),
            "{}: {stderr}",
            undo.display()
        );
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
    for (name, kept) in [
        ("ro.json", "kept\n"),
        ("older.json", "an older undo file\n"),
    ] {
        assert_eq!(std::fs::read_to_string(undo_dir.join(name)).unwrap(), kept);
    }
    // A new path: created private, nothing else left in the directory.
    let undo = undo_dir.join("undo.json");
    ok(apply(&undo));
    assert_eq!(std::fs::read(&governor).unwrap(), b"performance\n");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&undo).unwrap()).unwrap();
    assert_eq!(saved["schema"], "pcielab.advise-undo/v2");
    assert_eq!(
        saved["root"],
        root.canonicalize().unwrap().to_str().unwrap()
    );
    assert_eq!(saved["changes"][0]["check"], "devfreq-governor", "{saved}");
    assert_eq!(saved["changes"][0]["before"], "simple_ondemand", "{saved}");
    assert_eq!(saved["changes"][0]["written"], "performance", "{saved}");
    assert_eq!(
        std::fs::metadata(&undo).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let mut names: Vec<String> = std::fs::read_dir(&undo_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["adir", "away.json", "older.json", "ro.json", "undo.json"]
    );
}

/// `--apply` runs the whole advice again on the machine as it reads after the writes: the
/// findings the writes cleared are `gone`, every other finding of the run before `remaining`.
#[test]
fn apply_re_runs_the_whole_advice_and_names_what_is_gone() {
    let (dir, root) = server_copy();
    let undo = dir.path().join("undo.json");
    let (root_s, undo_s) = (root.to_str().unwrap(), undo.to_str().unwrap());
    let host = ["advise", "--machine", "host", "--root", root_s];
    let before: Value =
        serde_json::from_str(&ok(pcielab(&[&host[..], &["--json"]].concat()))).unwrap();
    let key = |f: &Value| {
        format!(
            "{} {}",
            f["id"].as_str().unwrap(),
            f["subject"].as_str().unwrap()
        )
    };
    let before: Vec<String> = before["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(key)
        .collect();
    let cleared = ["cpu-governor cpu 0-15", "devfreq-governor devfreq dmc"];
    for c in cleared {
        assert!(before.contains(&c.to_string()), "{c} not in {before:?}");
    }

    let applied = [
        &host[..],
        &[
            "--apply",
            "devfreq-governor,cpu-governor",
            "--undo-file",
            undo_s,
        ],
    ]
    .concat();
    let report: Value =
        serde_json::from_str(&ok(pcielab(&[&applied[..], &["--json"]].concat()))).unwrap();
    assert_eq!(report["action"], "wrote");
    assert_eq!(report["changes"].as_array().unwrap().len(), 5);
    let keys = |name: &str| -> Vec<String> {
        report["recheck"][name]
            .as_array()
            .unwrap()
            .iter()
            .map(key)
            .collect()
    };
    assert_eq!(keys("gone"), cleared);
    let remaining: Vec<String> = before
        .iter()
        .filter(|k| !cleared.contains(&k.as_str()))
        .cloned()
        .collect();
    assert_eq!(keys("remaining"), remaining);
    assert!(keys("new").is_empty());

    // The text says the same; a second apply finds nothing left to apply, and the undo brings
    // both findings back.
    ok(advise_undo(&root, &undo, &[]));
    // A new journal for the second apply: the first one is never replaced.
    let undo_again = dir.path().join("undo-again.json");
    let applied: Vec<&str> = applied
        .iter()
        .map(|a| {
            if *a == undo_s {
                undo_again.to_str().unwrap()
            } else {
                a
            }
        })
        .collect();
    let text = ok(pcielab(&applied));
    assert!(
        text.contains(
            "re-checked the machine after the change:\n  gone: cpu-governor cpu 0-15 (perf-loss), devfreq-governor devfreq dmc (perf-loss)\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("  new: none\n"), "{text}");
    let out = pcielab(&applied);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such finding"));
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
        &r#"pcielab_advice_findings{check="cpu-governor",severity="perf-loss",function="cpu 0-15"} 1"#
    ));
    // Each link as advise judges it: its link-downtrained findings are the exporter's
    // downtrained and power-managed-idle links, the rest full or slot-limited.
    let states: Vec<(String, String)> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("pcielab_link_judgement{"))
        .map(|l| {
            let label = |key: &str| {
                let at = l.find(&format!("{key}=\"")).unwrap() + key.len() + 2;
                l[at..at + l[at..].find('"').unwrap()].to_string()
            };
            (label("function"), label("state"))
        })
        .collect();
    let advice = advise_json("server", &["--only", "link-downtrained"]);
    let judged_below: Vec<(String, String)> = advice["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let state = match f["severity"].as_str().unwrap() {
                "perf-loss" => "downtrained",
                _ => "power-managed-idle",
            };
            (
                f["function"].as_str().unwrap().to_string(),
                state.to_string(),
            )
        })
        .collect();
    assert_eq!(
        states
            .iter()
            .filter(|(_, s)| s != "full" && s != "slot-limited")
            .cloned()
            .collect::<Vec<_>>(),
        judged_below
    );
    assert!(
        states.contains(&("0000:05:00.0".into(), "power-managed-idle".into())),
        "{states:?}"
    );
    // The subjects each check judged, and those it could not, one series each.
    assert!(metrics
        .contains(r#"pcielab_advice_subjects{check="link-downtrained",judgement="judged"} 7"#));
    assert!(metrics
        .contains(r#"pcielab_advice_subjects{check="link-downtrained",judgement="not_judged"} 0"#));
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
    // Each check that left subjects not judged is listed with its reason, as advise says it
    // (here aer-correctable: the host bridges have no PCI Express capability).
    assert!(section.contains("<h3>Not judged</h3>"), "{section}");
    for check in advice["checks"].as_array().unwrap() {
        for group in check["not_judged"].as_array().unwrap() {
            let reason = group["reason"].as_str().unwrap();
            let row = format!("<li>{} (", check["check"].as_str().unwrap());
            assert!(
                section.contains(&row) && section.contains(reason),
                "no {row}…{reason}"
            );
        }
    }
    for f in advice["findings"].as_array().unwrap() {
        // The page escapes HTML: "->" in a link's subject is "-&gt;".
        let subject = f["subject"].as_str().unwrap().replace('>', "&gt;");
        let row = format!("<td>{}</td><td>{subject}</td>", f["id"].as_str().unwrap());
        assert!(section.contains(&row), "no row {row}");
    }
}

/// Seconds a simulated fio job takes on `spec` (the "seconds time elapsed" line of `stat`).
fn simulated_fio_seconds(spec: &Path) -> f64 {
    simulated_seconds(spec, &["--rw=write", "--bs=1m", "--size=1g", "--name=w"])
}

/// 4 KiB random reads at queue depth 1, the request–response workload ASPM exits and far-node
/// interrupts slow down.
const QD1_READS: [&str; 6] = [
    "--rw=randread",
    "--bs=4k",
    "--size=64m",
    "--ioengine=libaio",
    "--iodepth=1",
    "--name=r",
];

/// Seconds the simulated fio job `job` takes on /dev/nvme0n1 of `spec`.
fn simulated_seconds(spec: &Path, job: &[&str]) -> f64 {
    let machine = format!("sim:{}", spec.display());
    let out = pcielab(
        &[
            &[
                "stat",
                "--machine",
                &machine,
                "-a",
                "--",
                "fio",
                "--filename=/dev/nvme0n1",
                "--direct=1",
            ][..],
            job,
        ]
        .concat(),
    );
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

/// The one finding `check` gives on `spec`, as JSON.
fn only_finding(spec: &Path, check: &str) -> Value {
    let machine = format!("sim:{}", spec.display());
    let advice: Value = serde_json::from_str(&ok(pcielab(&[
        "advise",
        "--machine",
        &machine,
        "--only",
        check,
        "--json",
    ])))
    .unwrap();
    let findings = advice["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{advice:#}");
    findings[0].clone()
}

/// `spec` with the fix applied as `edit` says, written beside the test's other files; the fix
/// must clear the finding.
fn fixed_spec(dir: &Path, spec: &Path, check: &str, edit: &dyn Fn(String) -> String) -> PathBuf {
    let fixed = dir.join(spec.file_name().unwrap());
    let text = std::fs::read_to_string(spec).unwrap();
    let changed = edit(text.clone());
    assert_ne!(changed, text, "the edit changed nothing");
    std::fs::write(&fixed, changed).unwrap();
    let machine = format!("sim:{}", fixed.display());
    let advice = ok(pcielab(&[
        "advise",
        "--machine",
        &machine,
        "--only",
        check,
        "--json",
    ]));
    assert_eq!(
        advice.matches("\"id\"").count(),
        0,
        "the fix clears the finding: {advice}"
    );
    fixed
}

/// The simulated QD1 reads on the fixed spec gain within 10 % of what the finding predicted.
fn assert_qd1_gain_within_a_tenth(spec: &Path, fixed: &Path, predicted: f64) {
    let measured = measured_qd1_gain(spec, fixed);
    assert!(
        (measured - predicted).abs() <= 0.10 * predicted,
        "simulated {measured:.2} % vs predicted {predicted:.2} %"
    );
}

/// The simulated QD1 reads' change from `spec` to `fixed`, in % of IOPS.
fn measured_qd1_gain(spec: &Path, fixed: &Path) -> f64 {
    let (before, after) = (
        simulated_seconds(spec, &QD1_READS),
        simulated_seconds(fixed, &QD1_READS),
    );
    (before / after - 1.0) * 100.0
}

#[test]
fn the_simulated_qd1_reads_gain_what_the_aspm_finding_predicts() {
    let spec = fixture("sim-aspm.toml");
    let finding = only_finding(&spec, "aspm-busy-link");
    let predicted = finding["prediction"]["change_percent"].as_f64().unwrap();
    // The L1 exit (32 µs, the drive's LnkCap bound) on every 82.7 µs read: about +39 %.
    assert!(predicted > 30.0 && predicted < 45.0, "{finding:#}");
    let dir = tempfile::tempdir().unwrap();
    // The fix on this link: ASPM off at both ends, as `echo 0 > link/l1_aspm` leaves it.
    let fixed = fixed_spec(dir.path(), &spec, "aspm-busy-link", &|t| {
        t.replace("aspm = \"l1\"", "aspm = \"none\"")
    });
    assert_qd1_gain_within_a_tenth(&spec, &fixed, predicted);
    // A deeper queue keeps the link busy (80 µs / 8 in flight is past L0s entry, short of
    // L1's): the same fix then changes far less than the QD1 prediction.
    let qd8 = |s: &Path| {
        simulated_seconds(
            s,
            &[
                "--rw=randread",
                "--bs=4k",
                "--size=64m",
                "--ioengine=libaio",
                "--iodepth=8",
                "--name=r",
            ],
        )
    };
    let deep = (qd8(&spec) / qd8(&fixed) - 1.0) * 100.0;
    assert!(deep < predicted / 10.0, "QD8 changed {deep:.2} %");
}

#[test]
fn the_simulated_qd1_reads_gain_what_the_irq_finding_predicts() {
    let spec = fixture("sim-irq.toml");
    let finding = only_finding(&spec, "irq-far-node");
    assert_eq!(finding["evidence"][1]["field"], "irq_node");
    assert_eq!(finding["evidence"][1]["value"], "1");
    let predicted = finding["prediction"]["change_percent"].as_f64().unwrap();
    // 1.5 µs per completion on a 12.7 µs read: 14.2 / 12.7, about +11.8 %.
    assert!(predicted > 10.0 && predicted < 13.0, "{finding:#}");
    let dir = tempfile::tempdir().unwrap();
    let fixed = fixed_spec(dir.path(), &spec, "irq-far-node", &|t| {
        t.replace("\"0000:01:00.0\" = 1 }", "\"0000:01:00.0\" = 0 }")
    });
    assert_qd1_gain_within_a_tenth(&spec, &fixed, predicted);
}

/// `pcielab model --json` with `args`: its first point and the document.
fn model_json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(pcielab(&[&["model", "--json"][..], args].concat()))).unwrap()
}

#[test]
fn each_sim_prediction_is_what_pcielab_model_prints_for_before_and_after() {
    let close = |a: f64, b: &Value, what: &str| {
        let b = b.as_f64().unwrap_or_else(|| panic!("{what}: {b}"));
        // `model` rounds to 0.01 MB/s and 0.1 IOPS.
        assert!((a - b).abs() <= 0.051, "{what}: advise {a} vs model {b}");
    };
    // MPS: the link model's achievable payload rate at MPS 128 and at 256 on Gen3 x2.
    let mps = only_finding(&fixture("sim-mps.toml"), "mps-below-path");
    let p = &mps["prediction"];
    for (value, mps) in [(&p["before"], "128"), (&p["after"], "256")] {
        let model = model_json(&["--gen", "3", "--width", "2", "--mps", mps, "--sizes", "4K"]);
        close(
            value.as_f64().unwrap(),
            &model["achievable_MBps"],
            &format!("MPS {mps}"),
        );
    }
    // ASPM: the drive's 80 µs reads with L1 (exit 32 µs, the slower end's) and with ASPM off.
    let aspm = only_finding(&fixture("sim-aspm.toml"), "aspm-busy-link");
    let qd1 = [
        "--gen",
        "3",
        "--width",
        "2",
        "--sizes",
        "4K",
        "--io-latency-us",
        "80",
    ];
    // A finding's before against `model`'s QD1 IOPS with `before` added to `base`, its after
    // against `base` alone.
    let qd1_pair = |finding: &Value, base: &[&str], before: &[&str], what: &str| {
        let p = &finding["prediction"];
        for (value, extra, side) in [
            (&p["before"], before, "before"),
            (&p["after"], &[][..], "after"),
        ] {
            let model = model_json(&[base, extra].concat());
            close(
                value.as_f64().unwrap(),
                &model["points"][0]["predicted_qd1_read_iops"],
                &format!("{what} {side}"),
            );
        }
    };
    qd1_pair(
        &aspm,
        &qd1,
        &["--aspm", "l1", "--exit-latency-ns", "1000,32000"],
        "ASPM L1",
    );
    // IRQ placement: the spec's own [platform] (cross_node_ns = 1500), far and local.
    let irq = only_finding(&fixture("sim-irq.toml"), "irq-far-node");
    let platform = fixture("sim-irq.toml");
    let qd1 = [
        "--gen",
        "3",
        "--width",
        "4",
        "--sizes",
        "4K",
        "--io-latency-us",
        "10",
        "--platform",
        platform.to_str().unwrap(),
    ];
    qd1_pair(&irq, &qd1, &["--irq-far-node"], "IRQ far node");
}

#[test]
fn spec_exit_latencies_export_as_the_lnkcap_lspci_reads_and_advise_quotes() {
    // The fixture's drive says L1 <32us and no L0s bound; its root port L0s <1us, L1 <16us.
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("pci");
    let machine = format!("sim:{}", fixture("sim-aspm.toml").display());
    ok(pcielab(&[
        "topo",
        "--machine",
        &machine,
        "--sysfs-export",
        tree.to_str().unwrap(),
    ]));
    let lspci = |bdf: &str| {
        let out = Command::new("lspci")
            .args([
                "-A",
                "linux-sysfs",
                "-O",
                &format!("sysfs.path={}", tree.display()),
                "-vvv",
                "-s",
                bdf,
            ])
            .output()
            .expect("lspci (pciutils) must be installed; .ci/run installs it");
        lspci_register(&String::from_utf8(out.stdout).unwrap(), "LnkCap")
    };
    let port = lspci("00:01.0");
    assert!(port.contains("Exit Latency L0s <1us, L1 <16us"), "{port}");
    // Code 0 where the spec gives no L0s bound, as before exit latencies were exported.
    let drive = lspci("01:00.0");
    assert!(drive.contains("L1 <32us"), "{drive}");
    // advise on the exported tree reads the same exits from config and quotes them as on sim:
    // and as lspci prints them: the exit of each state the end supports (the drive: L1 only).
    let snapshot = format!("snapshot:{}", tree.display());
    let advice: Value = serde_json::from_str(&ok(pcielab(&[
        "advise",
        "--machine",
        &snapshot,
        "--only",
        "aspm-busy-link",
        "--json",
    ])))
    .unwrap();
    let exits: Vec<&str> = advice["findings"][0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["field"] == "LnkCap: Exit Latency")
        .map(|e| e["value"].as_str().unwrap())
        .collect();
    assert_eq!(exits, ["L0s <1us, L1 <16us", "L1 <32us"], "{advice:#}");
    // Without a device model the snapshot predicts per request: the 32 µs exit.
    assert_eq!(advice["findings"][0]["prediction"]["before"], 32000.0);
}

/// The real lspci renders the server fixture as a plain `-xxxx` dump (no `Kernel driver in
/// use:` lines). On the dump nothing says whether a driver is bound, so the checks that need a
/// busy endpoint list every subject as not judged with what to capture, and never as run and
/// clean; on the snapshot it was rendered from the same checks judge and find.
#[test]
fn a_plain_hex_dump_lists_busy_link_checks_as_not_judged_with_what_to_capture() {
    let path = format!(
        "sysfs.path={}",
        fixture("server").join("sys/bus/pci").display()
    );
    let dir = tempfile::tempdir().unwrap();
    let render = |name: &str, args: &[&str]| {
        let out = Command::new("lspci")
            .args(["-A", "linux-sysfs", "-O", &path])
            .args(args)
            .output()
            .expect("lspci (pciutils) must be installed; .ci/run installs it");
        assert!(out.status.success());
        let file = dir.path().join(name);
        std::fs::write(&file, out.stdout).unwrap();
        let machine = format!("lspci:{}", file.display());
        let advice: Value =
            serde_json::from_str(&ok(pcielab(&["advise", "--machine", &machine, "--json"])))
                .unwrap();
        let text = ok(pcielab(&["advise", "--machine", &machine]));
        (advice, text)
    };
    let check = |advice: &Value, id: &str| -> Value {
        advice["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == id)
            .unwrap_or_else(|| panic!("{id} missing: {advice:#}"))
            .clone()
    };
    let findings = |advice: &Value, id: &str| {
        advice["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] == id)
            .count()
    };
    let without_k =
        "this lspci output has no `Kernel driver in use:` lines, so whether a driver is \
                     bound (the device busy) is unknown: capture with `lspci -vvv -k`";

    let (dump, text) = render("dump.txt", &["-xxxx"]);
    let aspm = check(&dump, "aspm-busy-link");
    assert_eq!(aspm["status"], "not-judged", "{aspm:#}");
    assert_eq!(aspm["judged"], 0);
    assert_eq!(aspm["not_judged"][0]["reason"], without_k);
    assert!(
        text.contains("aspm-busy-link: not judged (0 judged, "),
        "{text}"
    );
    assert!(text.contains(without_k), "{text}");
    for id in [
        "mrrs-small",
        "ext-tag-off",
        "ten-bit-tag-off",
        "relaxed-ordering",
    ] {
        let c = check(&dump, id);
        assert_ne!(c["status"], "judged", "{id}: {c:#}");
        assert!(
            c["not_judged"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["reason"] == without_k),
            "{id}: {c:#}"
        );
    }
    // The facts the dump does carry are judged: the link and MPS checks.
    for id in ["link-downtrained", "mps-below-path"] {
        assert_eq!(check(&dump, id)["status"], "judged", "{id}");
    }
    // No reason on a dump of readable config space blames root.
    assert!(!serde_json::to_string(&dump).unwrap().contains("needs root"));

    // The snapshot the dump was rendered from knows each driver: the same check judges every
    // link there and finds the busy link with ASPM on.
    let snapshot = advise_json("server", &[]);
    let aspm = check(&snapshot, "aspm-busy-link");
    assert_eq!(aspm["status"], "judged", "{aspm:#}");
    assert!(findings(&snapshot, "aspm-busy-link") > 0);
    assert_eq!(findings(&dump, "aspm-busy-link"), 0);
}

/// Raising one drive's MPS names every function that must change, in order: the ports on its
/// path root first, the drive, then the switch's other port and the drive below it (siblings
/// that would otherwise be left below their raised port). Each one named is one real lspci
/// shows programmed below the path's 512 B.
#[test]
fn the_mps_fix_names_every_function_that_must_change_siblings_included() {
    let advice = advise_json("server", &["--only", "mps-below-path"]);
    let finding = advice["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["subject"] == "0000:03:00.0")
        .expect("mps-below-path on 0000:03:00.0");
    let note = finding["fix"]["note"].as_str().unwrap();
    let named: Vec<&str> = note
        .split("setpci -s ")
        .skip(1)
        .map(|part| part.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(
        named,
        [
            "0000:00:01.0",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0",
            "0000:02:01.0",
            "0000:04:00.0"
        ],
        "{note}"
    );
    for bdf in named {
        let lspci = lspci_vvv("server", bdf);
        let devctl_mps = lspci
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("DevCtl:"))
            .find_map(|l| l.split("MaxPayload ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or_else(|| panic!("{bdf}: no DevCtl MaxPayload in {lspci}"));
        assert!(devctl_mps < 512, "{bdf}: lspci says {devctl_mps}");
        assert!(note.contains(&format!("setpci -s {bdf} CAP_EXP+8.w=0040:00e0")));
    }
}

#[test]
fn each_evidence_line_names_the_function_it_was_read_from() {
    // sim:yitian710's SATA controller and its root port both program MPS 256 B (the preset's
    // mps = 256 on 00:02.0 and 04:00.0): the one finding quotes both, each under its own name.
    let text = ok(pcielab(&["advise", "--machine", "sim:yitian710"]));
    let finding = &text[text.find("mps-below-path 0000:04:00.0").unwrap()..];
    let evidence: Vec<&str> = finding
        .lines()
        .take_while(|l| !l.trim_start().starts_with("fix"))
        .filter(|l| l.trim_start().starts_with("evidence:"))
        .collect();
    assert_eq!(evidence.len(), 2, "{finding}");
    assert!(evidence[0].contains("spec 0000:04:00.0 DevCtl"), "{text}");
    assert!(evidence[1].contains("spec 0000:00:02.0 DevCtl"), "{text}");
    for finding in text.split("\n\n[") {
        let lines: Vec<&str> = finding
            .lines()
            .filter(|l| l.contains("evidence:"))
            .collect();
        let distinct: std::collections::BTreeSet<&&str> = lines.iter().collect();
        assert_eq!(
            distinct.len(),
            lines.len(),
            "repeated evidence in {finding}"
        );
    }
}
