//! The `pcielab qos` and `pcielab sim` commands end to end: exit codes, the kernel's messages,
//! state carried in a --state file, JSON shapes, apply --dry-run, sim run with an SVG.

use crate::svg_reading;

use std::path::Path;
use std::process::{Command, Output};

fn pcielab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

#[test]
fn groups_persist_in_the_state_file_and_refusals_quote_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("qos.json");
    let st = state.to_str().unwrap();
    let m = ["--machine", "sim:mpam-seed", "--state", st];
    let with = |args: &[&str]| {
        let mut v: Vec<&str> = args.to_vec();
        v.extend_from_slice(&m);
        pcielab(&v)
    };
    let o = with(&[
        "qos",
        "create",
        "p1",
        "--schemata",
        "L3:0=7ff0;1=7ff0",
        "--schemata",
        "MB:0=33",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let spawn = [
        &["sim", "spawn"][..],
        &m,
        &[
            "--", "numactl", "-N", "0", "-m", "0", "bw_mem", "-P", "8", "1024M", "rd",
        ],
    ]
    .concat();
    let pid = stdout(&pcielab(&spawn));
    let pid = pid.trim();
    assert_eq!(pid, "1000");
    assert!(with(&["qos", "assign", "p1", "--tasks", pid])
        .status
        .success());
    let o = with(&["qos", "set", "p1", "--schemata", "L3:2=0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("\"Mask out of range\" (EINVAL)"),
        "{}",
        stderr(&o)
    );
    // A create that would fail part-way creates nothing.
    let o = with(&["qos", "create", "p2", "--schemata", "MB:0=1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("MB value 1 out of range [2,100]"),
        "{}",
        stderr(&o)
    );
    let show = with(&["qos", "show", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[1]["name"], "p1");
    assert_eq!(groups[1]["schemata"][1], "MB:0=34;1=100;2=100;3=100");
    assert_eq!(groups[1]["tasks"][0], 1000);
    assert_eq!(v["info"]["caches"][0]["cbm_mask"], 0x7fff);
    assert_eq!(v["info"]["mon"]["rmids_per_closid"], 2);
    // The monitor sees the stream in p1, throttled to 34 % of 40 GB/s and read 30 % low.
    let o = with(&["qos", "monitor", "-I", "500", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["schema"], "pcielab.qos-monitor/v1");
    let p1 = doc["intervals"][0]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"] == "p1" && r["domain"] == 0)
        .unwrap();
    let mbps = p1["mbm_total_mbps"].as_f64().unwrap();
    assert!((mbps - 0.34 * 40_000.0 * 0.7).abs() < 200.0, "{mbps}");
    assert!(p1["llc_occupancy_kib"].as_f64().unwrap() > 10_000.0);
    assert!(with(&["qos", "delete", "p1"]).status.success());
    let v: serde_json::Value =
        serde_json::from_slice(&with(&["qos", "show", "--json"]).stdout).unwrap();
    assert_eq!(v["groups"][0]["tasks"], serde_json::json!([1, 1000]));
}

#[test]
fn apply_dry_run_leaves_the_state_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("qos.json");
    let st = state.to_str().unwrap();
    assert!(pcielab(&[
        "qos",
        "create",
        "x",
        "--machine",
        "sim:rdt-xeon8163",
        "--state",
        st
    ])
    .status
    .success());
    let before = std::fs::read(&state).unwrap();
    let file = dir.path().join("want.toml");
    std::fs::write(
        &file,
        "[groups.online]\nl3 = \"0-7\"\nmb = 55\n[groups.offline]\nl3 = \"8-10\"\nmb = 10\n",
    )
    .unwrap();
    let args = [
        "qos",
        "apply",
        file.to_str().unwrap(),
        "--machine",
        "sim:rdt-xeon8163",
        "--state",
        st,
    ];
    let o = pcielab(&[&args[..], &["--dry-run"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("printf 'L3:0=ff;1=ff\\nMB:0=55;1=55\\n' > online/schemata"),
        "{}",
        stdout(&o)
    );
    assert_eq!(std::fs::read(&state).unwrap(), before);
    let o = pcielab(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_ne!(std::fs::read(&state).unwrap(), before);
    let o = pcielab(&args);
    assert!(stdout(&o).contains("nothing to do"), "{}", stdout(&o));
}

#[test]
fn host_show_reads_a_resctrl_directory() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/resctrl");
    let o = pcielab(&[
        "qos",
        "show",
        "--machine",
        "host",
        "--resctrl",
        fixture.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("group p1 (closid 1, rmid 1, shareable)"),
        "{text}"
    );
    assert!(text.contains("schemata  MB:0=10;1=10;2=10;3=10"), "{text}");
    assert!(text.contains("mon_group m1 (rmid 2) tasks 4243"), "{text}");
}

#[test]
fn bad_machines_and_scenarios_exit_2_naming_the_problem() {
    let o = pcielab(&["qos", "show", "--machine", "sim:nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("sim:mpam-seed, sim:rdt-xeon8163"),
        "{}",
        stderr(&o)
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\ntitle = \"x\"\nmachine = \"sim:mpam-seed\"\nx = \"ways\"\nx_label = \"w\"\ny_label = \"y\"\n[[series]]\nvalues = [\"1\"]\njobs = [{ name = \"j\", command = \"fio --rw=read\" }]\nmetrics = [{ label = \"l\", kind = \"latency\", job = \"j\" }]\n").unwrap();
    let o = pcielab(&["sim", "run", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown program 'fio'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn sim_run_prints_a_table_and_writes_an_svg() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "name = \"s\"\ntitle = \"MB sweep\"\nmachine = \"sim:mpam-seed\"\nx = \"value\"\nx_label = \"MB %\"\ny_label = \"MB/s\"\nmeasure_s = 0.5\nsample = 64\nturnover = 0.25\n\
[[series]]\nvalues = [\"100\", \"10\"]\ngroups = [{ name = \"p1\", schemata = \"MB:2={v}\" }]\n\
jobs = [{ name = \"bw\", group = \"p1\", command = \"numactl -m 2 -C 48-71 bw_mem -P 24 124M rd\" }]\n\
metrics = [{ label = \"measured\", kind = \"bandwidth\", job = \"bw\" }, { label = \"monitored\", kind = \"mbm\", group = \"p1\" }]\n",
    )
    .unwrap();
    let svg = dir.path().join("out.svg");
    let o = pcielab(&[
        "sim",
        "run",
        scenario.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let row10: Vec<&str> = table
        .lines()
        .find(|l| l.trim_start().starts_with("10 "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row10, vec!["10", "4000", "2800"]);
    let svg = svg_reading::read(&std::fs::read_to_string(svg).unwrap());
    // One data line per metric (blue, red), labelled in the legend.
    assert_eq!(svg.lines_of("#1F77B4").len(), 1);
    assert_eq!(svg.lines_of("#D62728").len(), 1);
    assert!(
        svg.has_text("measured") && svg.has_text("monitored"),
        "{:?}",
        svg.texts()
    );
    assert!(svg.has_text("MB sweep") && svg.has_text("MB %") && svg.has_text("MB/s"));
    let o = pcielab(&["sim", "run", scenario.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let point = &v["lines"][0]["points"][1];
    assert_eq!(point[0], 10.0);
    assert!(
        (point[1].as_f64().unwrap() - 4000.0).abs() < 1e-6,
        "{point}"
    );
}

#[test]
fn the_state_note_is_only_for_changes_that_would_be_lost() {
    for read_only in [
        &["qos", "show", "--machine", "sim:mpam-seed"][..],
        &["qos", "monitor", "--machine", "sim:mpam-seed", "-I", "100"][..],
    ] {
        let o = pcielab(read_only);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            !stderr(&o).contains("--state"),
            "{read_only:?}: {}",
            stderr(&o)
        );
    }
    let o = pcielab(&["qos", "create", "p1", "--machine", "sim:mpam-seed"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not kept (give --state FILE to keep it)"),
        "{}",
        stderr(&o)
    );
}
