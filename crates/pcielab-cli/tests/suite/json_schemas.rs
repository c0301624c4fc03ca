//! JSON a script can trust: every command's real `--json` output names what it is in its
//! `schema` tag, and where docs/json/ ships a schema for that tag (generated with schemars from
//! the serialized types), the output validates against it with an independent JSON Schema
//! validator (the `jsonschema` crate, draft 2020-12).

use crate::common;

use common::{ok, pcielab};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The schema docs/json/ ships for `tag` (`pcielab.<kind>/v1`), if any.
fn shipped_schema(tag: &str) -> Option<Value> {
    let kind = tag.strip_prefix("pcielab.")?.strip_suffix("/v1")?;
    let path = repo_root().join(format!("docs/json/{kind}.schema.json"));
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text).unwrap())
}

/// Every way `doc` breaks `schema`, as text.
fn violations(schema: &Value, doc: &Value) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("a valid JSON Schema");
    validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// Runs `args`, checks the document's tag is `pcielab.<kind>/v1`, validates it against the
/// shipped schema when `has_schema`, and returns it.
fn check_output(args: &[&str], kind: &str, has_schema: bool) -> Value {
    let doc: Value = serde_json::from_str(&ok(pcielab(args))).unwrap();
    let tag = format!("pcielab.{kind}/v1");
    assert_eq!(doc["schema"], tag.as_str(), "{args:?}");
    match shipped_schema(&tag) {
        Some(schema) => {
            assert!(has_schema, "{tag} has a schema now: list it as such");
            let broken = violations(&schema, &doc);
            assert!(
                broken.is_empty(),
                "{args:?} against {kind}.schema.json:\n{}",
                broken.join("\n")
            );
        }
        None => assert!(!has_schema, "docs/json/{kind}.schema.json is missing"),
    }
    doc
}

#[test]
fn typed_outputs_validate_against_their_shipped_schemas() {
    let root = repo_root();
    let preset = root.join("presets/rk3588-ep.toml");
    let dmatest = root.join("fixtures/rockchip/rk3588-gen3x4-dmatest.txt");
    let scenario = root.join("scenarios/mb-throttling-rdt.toml");
    let (preset, dmatest, scenario) = (
        preset.to_str().unwrap(),
        dmatest.to_str().unwrap(),
        scenario.to_str().unwrap(),
    );
    // model and fit, each on its own and with a platform model beside it.
    for (command, plain, with_platform) in [
        (&["model"][..], "model", "model"),
        (&["fit", dmatest][..], "fit", "fit-prediction"),
    ] {
        let link = ["--gen", "3", "--width", "4", "--json"];
        let alone = check_output(&[command, &link[..]].concat(), plain, true);
        let beside = check_output(
            &[command, &link[..], &["--platform", preset][..]].concat(),
            with_platform,
            true,
        );
        if plain == "model" {
            assert!(beside["points"][0]["predicted_write_MBps"].is_number());
        } else {
            assert_eq!(alone["rows_used"], 12);
            assert_eq!(beside["rows_used"], 12);
        }
    }
    check_output(&["sim", "run", scenario, "--json"], "sim-run", true);
    check_output(&["presets", "--json"], "presets", true);
    let irq = check_output(
        &["bench", "irq", "--machine", "sim:rk3588-ep", "--json"],
        "bench-irq",
        true,
    );
    assert_eq!(irq["kind"], "msi");
    let monitor = check_output(
        &[
            "qos",
            "monitor",
            "--machine",
            "sim:mpam-seed",
            "-I",
            "100",
            "--count",
            "2",
            "--json",
        ],
        "qos-monitor",
        true,
    );
    assert_eq!(monitor["intervals"].as_array().unwrap().len(), 2);
    let sample = check_output(
        &["exporter", "--machine", "sim:yitian710", "--once", "--json"],
        "exporter-sample",
        true,
    );
    assert!(sample["functions"][0]["bdf"].is_string());
    let server = root.join("fixtures/advise/server/sys/bus/pci");
    let machine = format!("snapshot:{}", server.display());
    let advice = check_output(&["advise", "--machine", &machine, "--json"], "advise", true);
    assert_eq!(advice["findings"].as_array().unwrap().len(), 18);
    let dry = check_output(
        &[
            "advise",
            "--machine",
            "host",
            "--root",
            root.join("fixtures/advise/server").to_str().unwrap(),
            "--apply",
            "devfreq-governor",
            "--undo-file",
            "/nonexistent/undo.json",
            "--dry-run",
            "--json",
        ],
        "advise-apply",
        true,
    );
    assert_eq!(dry["changes"][0]["value"], "performance");
}

#[test]
fn qos_bench_mmio_and_lab_argv_outputs_validate_against_their_shipped_schemas() {
    let show = check_output(
        &["qos", "show", "--machine", "sim:rdt-xeon8163", "--json"],
        "qos-show",
        true,
    );
    assert_eq!(show["groups"][0]["name"], "/");
    let dir = tempfile::tempdir().unwrap();
    let desired = dir.path().join("want.toml");
    std::fs::write(
        &desired,
        "[groups.online]\nl3 = \"0-7\"\nmb = 55\n[groups.offline]\nl3 = \"8-10\"\nmb = 10\n",
    )
    .unwrap();
    let apply = check_output(
        &[
            "qos",
            "apply",
            desired.to_str().unwrap(),
            "--machine",
            "sim:rdt-xeon8163",
            "--dry-run",
            "--json",
        ],
        "qos-apply",
        true,
    );
    // Each planned step carries its operation's own fields beside the shell line.
    assert_eq!(apply["plan"][0]["op"], "mkdir");
    assert!(apply["plan"][0]["shell"].is_string());
    for op in ["store", "load"] {
        let mmio = check_output(
            &[
                "bench",
                "mmio",
                "0000:01:00.0",
                "--bar",
                "0",
                "--machine",
                "sim:rk3588-ep",
                "--op",
                op,
                "--json",
            ],
            "bench-mmio",
            true,
        );
        assert_eq!(mmio["results"][0]["op"], op);
    }
    let plan = check_output(&["lab", "argv", "qemu-seed", "--json"], "lab-argv", true);
    assert_eq!(plan["argv"][0], "qemu-system-x86_64");
}

#[test]
fn stat_outputs_validate_against_their_shipped_schema() {
    let run = |interval: &[&str]| {
        let fio = [
            "fio",
            "--filename=/dev/sda",
            "--rw=read",
            "--bs=1m",
            "--size=64m",
            "--name=r",
        ];
        let head = [
            "stat",
            "--machine",
            "sim:yitian710",
            "-a",
            "--json",
            "-e",
            "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
        ];
        check_output(
            &[&head[..], interval, &["--"], &fio[..]].concat(),
            "stat",
            true,
        )
    };
    let whole = run(&[]);
    assert_eq!(whole["events"][0]["status"], "counted");
    assert!(whole.get("intervals").is_none());
    let with_intervals = run(&["-I", "50"]);
    assert!(with_intervals["intervals"].as_array().unwrap().len() >= 2);
}

/// `lab check` and `lab run` need QEMU and a guest kernel: a real `lab check qemu-seed --json`
/// (QEMU 7.2, Debian 6.1 guest), stored before documents carried their tag, stands in for them.
#[test]
fn a_stored_lab_check_output_validates_against_the_lab_schemas() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lab-check-qemu-seed.json"
    );
    let mut check: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    // Its `run` member is the run's own report, what `lab run --json` prints.
    let mut run = check["run"].clone();
    for (doc, kind) in [(&mut check, "lab-check"), (&mut run, "lab-run")] {
        let tag = format!("pcielab.{kind}/v1");
        doc["schema"] = tag.as_str().into();
        let schema = shipped_schema(&tag).unwrap_or_else(|| panic!("no schema for {tag}"));
        let broken = violations(&schema, doc);
        assert!(broken.is_empty(), "{kind}:\n{}", broken.join("\n"));
    }
    assert_eq!(check["rows"][0]["status"], "match");
    // A row whose status is not one the type has breaks the schema.
    check["rows"][0]["status"] = "fine".into();
    let schema = shipped_schema("pcielab.lab-check/v1").unwrap();
    assert!(!violations(&schema, &check).is_empty());
}

#[test]
fn topo_outputs_validate_against_their_shipped_schema() {
    // A simulated platform, and the same with its platform model's DMA predictions beside it;
    // a real board's lspci dump, whose functions carry their evidence lines.
    let preset = repo_root().join("presets/rk3588-ep.toml");
    let board = format!(
        "lspci:{}",
        repo_root()
            .join("fixtures/lspci/pciutils/tree-asus-p6t6")
            .display()
    );
    for args in [
        &["topo", "--machine", &board, "--json"][..],
        &["topo", "--machine", "sim:yitian710", "--json"][..],
        &[
            "topo",
            "--machine",
            "sim:rk3588-ep",
            "--platform",
            preset.to_str().unwrap(),
            "--json",
        ][..],
    ] {
        let topo = check_output(args, "topo", true);
        assert!(topo["functions"].as_array().unwrap().len() > 1, "{args:?}");
    }
}

#[test]
fn pmu_list_outputs_validate_against_their_shipped_schema() {
    // A catalog machine's listing, one PMU of it, and this host's own registered PMUs.
    let catalog = check_output(
        &["pmu", "list", "--machine", "sim:yitian710", "--json"],
        "pmu-list",
        true,
    );
    assert_eq!(catalog["pmus"][0]["family"], "dwc_root_port");
    assert!(!catalog["pmus"][0]["events"].as_array().unwrap().is_empty());
    let one = check_output(
        &[
            "pmu",
            "list",
            "--machine",
            "sim:yitian710",
            "--pmu",
            "pcie_bdf_200",
            "--json",
        ],
        "pmu-list",
        true,
    );
    assert_eq!(one["pmus"].as_array().unwrap().len(), 1);
    let host = check_output(
        &["pmu", "list", "--machine", "host", "--json"],
        "pmu-list",
        true,
    );
    assert_eq!(host["machine"], "host");
    assert!(!host["pmus"].as_array().unwrap().is_empty());
}

#[test]
fn each_top_frame_validates_against_its_schema() {
    // `top -b --json` prints one tagged object per line, the frame's rows among them.
    let frames = ok(pcielab(&[
        "top",
        "--machine",
        "sim:yitian710",
        "-b",
        "-n",
        "2",
        "-d",
        "0.1",
        "--json",
    ]));
    let schema = shipped_schema("pcielab.top-frame/v1").expect("docs/json/top-frame.schema.json");
    let lines: Vec<&str> = frames.lines().collect();
    assert_eq!(lines.len(), 2);
    for line in lines {
        let frame: Value = serde_json::from_str(line).unwrap();
        assert_eq!(frame["schema"], "pcielab.top-frame/v1");
        assert!(!frame["rows"].as_array().unwrap().is_empty());
        let broken = violations(&schema, &frame);
        assert!(broken.is_empty(), "top frame:\n{}", broken.join("\n"));
    }
}

/// The P2P matrix has no shipped schema yet: its tag is checked, and this fails once docs/json/
/// ships one, so the output is then validated instead.
#[test]
fn the_p2p_matrix_validates_against_its_shipped_schema() {
    for args in [
        &["topo", "--machine", "sim:qemu-wide", "--p2p", "--json"][..],
        &[
            "topo",
            "--machine",
            "sim:qemu-seed",
            "--p2p",
            "--full",
            "--json",
        ][..],
    ] {
        let doc = check_output(args, "topo-p2p", true);
        assert!(
            !doc["group_verdicts"].as_array().unwrap().is_empty(),
            "{args:?}"
        );
    }
}

#[test]
fn the_validator_rejects_what_breaks_a_schema() {
    let doc: Value = serde_json::from_str(&ok(pcielab(&["presets", "--json"]))).unwrap();
    let schema = shipped_schema("pcielab.presets/v1").unwrap();
    assert!(violations(&schema, &doc).is_empty());
    let mut wrong_tag = doc.clone();
    wrong_tag["schema"] = "pcielab.presets/v2".into();
    assert_eq!(violations(&schema, &wrong_tag).len(), 1);
    let mut missing = doc.clone();
    missing["presets"][0]
        .as_object_mut()
        .unwrap()
        .remove("kind");
    assert!(
        violations(&schema, &missing)
            .iter()
            .any(|v| v.contains("kind")),
        "{:?}",
        violations(&schema, &missing)
    );
}

#[test]
fn a_small_observe_bench_validates_against_its_shipped_schema() {
    // The smallest generated server, one short round: the document's shape, not its figures.
    let doc = check_output(
        &[
            "bench",
            "observe",
            "--functions",
            "322",
            "--scrapes",
            "2",
            "--rounds",
            "1",
            "--json",
        ],
        "bench-observe",
        true,
    );
    assert_eq!(doc["functions"], 322);
    assert!(doc["pcielab_series"].as_u64().unwrap() > 322, "{doc}");
}
