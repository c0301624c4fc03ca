//! The body of every fuzz target: one function per parser that takes the fuzzer's bytes, parses
//! them as a user's file or argument would be, and drives what the command does next with the
//! result (render, plan, check). Shared by the cargo-fuzz targets (`fuzz_targets/*.rs`) and by
//! the stable regression test that replays every input that ever crashed
//! (`crates/pcielab/tests/suite/fuzz_regressions.rs`), so both run exactly the same code.

use pcielab::linux::CpuSet;
use pcielab::machine::MachineSelector;
use pcielab::qos::GroupRef;
use pcielab::qos::HostResctrl;
use pcielab::qos::KernelRules;
use pcielab::qos::Scenario;
use pcielab::qos::Schemata;
use pcielab::qos::{check, parse_desired, plan};
use pcielab::qos::{Op, QosBackend};
use pcielab::qos::{SimState, SimulatedResctrl};
use pcielab::qos::{MPAM_SEED, RDT_XEON8163};
use pcielab::report::Document;
use pcielab::topology::parse_spec;
use pcielab::topology::{to_dot, to_json, to_tree};

/// A target's body: the fuzzer's bytes in, nothing out (a panic is the failure).
pub type Body = fn(&[u8]);

/// Every target by name, as the regression test finds them under `fuzz/regressions/<name>/`.
pub const TARGETS: &[(&str, Body)] = &[
    ("spec_toml", spec_toml),
    ("config_space", config_space),
    ("event_list", event_list),
    ("fio_cmdline", fio_cmdline),
    ("fio_jobfile", fio_jobfile),
    ("schemata", schemata),
    ("resctrl_tree", resctrl_tree),
    ("qos_plan_yaml", qos_plan_yaml),
    ("qos_plan_toml", qos_plan_toml),
    ("scenario", scenario),
    ("state_file", state_file),
    ("qos_workload", qos_workload),
    ("perf_event", perf_event),
    ("sysfs_tree", sysfs_tree),
    ("model_inputs", model_inputs),
    ("http_request", http_request),
    ("result_json", result_json),
    ("lspci_text", lspci_listing),
    ("lspci_hex", lspci_listing),
    ("undo_file", undo_file),
    ("corpus_walk", corpus_walk),
];

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A spec TOML (what `topo`, `stat`, `sim` and `lab` read): parse, render every way, plan the
/// QEMU machine, compute path ceilings and P2P verdicts, build the simulated machine and its PMUs.
pub fn spec_toml(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(spec) = parse_spec("fuzz.toml", text) else {
        return;
    };
    let model = spec.platform_model().ok().flatten();
    let _ = to_tree(&spec, model.as_ref());
    let _ = to_dot(&spec);
    let _ = to_json(&spec, model.as_ref());
    let _ = pcielab::topology::warnings(&spec.topology);
    let _ = pcielab::lab::plan(&spec.topology, &Default::default());
    let _ = pcielab::topology::p2p::matrix(&spec.topology, pcielab::topology::p2p::Cpu::Other);
    for f in spec.topology.functions() {
        let _ = spec.topology.path_ceiling(f.bdf);
    }
    if let Ok(sim) =
        pcielab::sim::SimulatedPcie::new("fuzz", spec.topology, &spec.sim, &spec.platform_table)
    {
        let _ = sim.pmus();
    }
}

/// A function's `config` file as sysfs gives it (any length), read as a snapshot's tree is
/// (`snapshot:DIR`, `topo --machine host`): the bytes are decoded by the reader's own path.
pub fn config_space(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let function = dir.path().join("sys/bus/pci/devices/0000:00:00.0");
    if std::fs::create_dir_all(&function).is_err()
        || std::fs::write(function.join("config"), data).is_err()
    {
        return;
    }
    let _ = pcielab::topology::read_sysfs(&dir.path().join("sys/bus/pci"));
}

/// A perf event list (`-e`), resolved against a simulated machine's PMUs.
pub fn event_list(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(groups) = pcielab::pmu::parse_event_list(text) else {
        return;
    };
    let selector: MachineSelector = "sim:yitian710".parse().expect("preset");
    let machine = pcielab::machine::Machine::open(&selector).expect("preset");
    let pmus = machine.simulator().expect("preset").pmus();
    for spec in groups.iter().flatten() {
        let _ = pcielab::pmu::resolve(&pmus, spec);
    }
}

/// An fio command line, one argument per line.
pub fn fio_cmdline(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let argv: Vec<String> = std::iter::once("fio")
        .chain(text.split('\n'))
        .map(str::to_string)
        .collect();
    let _ = pcielab::sim::parse_workload(&argv, |_| {
        Err(pcielab::Error::bad_input("no job files while fuzzing"))
    });
}

/// An fio job file.
pub fn fio_jobfile(data: &[u8]) {
    let Some(text) = text(data) else { return };
    // As `fio fuzz.fio` reads it: the job file named on the command line.
    let argv = ["fio".to_string(), "fuzz.fio".to_string()];
    let _ = pcielab::sim::parse_workload(&argv, |_| Ok(text.to_string()));
}

/// A schemata write (and the same text as a kernel's read), on both simulated machines.
pub fn schemata(data: &[u8]) {
    let Some(text) = text(data) else { return };
    // As `qos set` and `qos assign` write it: into a new group's files on the simulated kernel.
    let group = || "p1".to_string();
    for preset in [&MPAM_SEED, &RDT_XEON8163] {
        for cdp in [false, true] {
            let mut machine = SimulatedResctrl::boot(preset, cdp);
            let _ = machine.perform(&Op::Mkdir { group: group() });
            for op in [
                Op::Schemata {
                    group: group(),
                    text: text.into(),
                },
                Op::Tasks {
                    group: group(),
                    text: text.into(),
                },
                Op::Mode {
                    group: group(),
                    mode: text.into(),
                },
            ] {
                let _ = op.describe();
                let _ = machine.perform(&op);
            }
        }
    }
    let _ = Schemata::parse_read(text);
    let _ = CpuSet::parse_list(text);
    let _ = CpuSet::parse_mask(text);
    let _ = GroupRef::parse(text);
    let _ = KernelRules::for_release(text);
}

/// A resctrl mount as files: the input's NUL-separated fields fill `info/` files, schemata,
/// tasks, CPUs and a monitor file, then the host backend reads it and its monitors.
pub fn resctrl_tree(data: &[u8]) {
    const FILES: [&str; 12] = [
        "info/L3/num_closids",
        "info/L3/cbm_mask",
        "info/L3/min_cbm_bits",
        "info/L3/sparse_masks",
        "info/MB/num_closids",
        "info/MB/min_bandwidth",
        "info/MB/bandwidth_gran",
        "info/L3_MON/num_rmids",
        "schemata",
        "tasks",
        "cpus_list",
        "mon_data/mon_L3_00",
    ];
    let Ok(dir) = tempfile::tempdir() else { return };
    for (path, field) in FILES.iter().zip(data.split(|b| *b == 0)) {
        let path = dir.path().join(path);
        let _ = std::fs::create_dir_all(path.parent().expect("under the tree"));
        let _ = std::fs::write(path, field);
    }
    let mut host = HostResctrl::new(dir.path().to_path_buf()).with_proc(dir.path().join("proc"));
    if let Ok(rs) = host.read() {
        let _ = pcielab::qos::show("fuzz", &rs).text();
    }
    let _ = host.mon_data();
}

fn plan_on(text: &str, origin: &str) {
    for preset in [&MPAM_SEED, &RDT_XEON8163] {
        let mut machine = SimulatedResctrl::boot(preset, false);
        let Ok(current) = machine.read() else { return };
        if let Ok(desired) = parse_desired(text, origin, &current.info) {
            let ops = plan(&current, &desired);
            let _ = check(&current, &ops);
        }
    }
}

/// A `qos apply` desired-state file in YAML.
pub fn qos_plan_yaml(data: &[u8]) {
    if let Some(text) = text(data) {
        plan_on(text, "plan.yaml");
    }
}

/// A `qos apply` desired-state file in TOML.
pub fn qos_plan_toml(data: &[u8]) {
    if let Some(text) = text(data) {
        plan_on(text, "plan.toml");
    }
}

/// A `sim run` scenario file (parsed and checked, not run).
pub fn scenario(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = Scenario::parse(text, "fuzz.toml");
    }
}

/// A kept `--json` result (`pcielab plot`, `pcielab report --from`): its kind told and read,
/// drawn as its SVG and as a report section.
pub fn result_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(document) = Document::parse("fuzz.json", text) else {
        return;
    };
    let _ = pcielab::report::svg_of(&document, "fuzz.json");
    let result = pcielab::report::ResultFile {
        origin: "fuzz.json".into(),
        document,
    };
    let _ = pcielab::report::page(None, &[result]);
}

/// A simulated machine's `--state` file, then what `qos show` and `qos monitor` do with it.
pub fn state_file(data: &[u8]) {
    let Some(text) = text(data) else { return };
    for preset in [&MPAM_SEED, &RDT_XEON8163] {
        if let Ok(state) = SimState::parse(text, "fuzz.json", preset) {
            let mut machine = SimulatedResctrl::boot(preset, false);
            machine.state = state;
            if let Ok(rs) = machine.read() {
                let _ = pcielab::qos::show("fuzz", &rs).text();
            }
            let _ = machine.mon_data();
            let _ = machine.spawn("bw_mem 1M rd");
        }
    }
}

/// A simulated program's command line (`sim spawn`, scenario jobs).
pub fn qos_workload(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = pcielab::qos::parse_workload(text, &MPAM_SEED);
    }
}

/// The repository root, from the fuzz crate or from `crates/pcielab` (the regression test).
fn repo_root() -> std::path::PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    [here.join(".."), here.join("../..")]
        .into_iter()
        .find(|p| p.join("fixtures/pmu").is_dir())
        .expect("fixtures/pmu in the repository")
}

/// A perf event string (`-e` on a host) against the PMUs in fixtures/pmu, plus the sysfs
/// format and alias files a PMU directory holds, written by the input.
pub fn perf_event(data: &[u8]) {
    use pcielab::pmu::EventContext;
    use pcielab::pmu::{parse_alias_terms, parse_cpu_list, read_pmu, FormatField, SysfsPmu};
    static PMUS: std::sync::OnceLock<Vec<SysfsPmu>> = std::sync::OnceLock::new();
    let Some(text) = text(data) else { return };
    let pmus = PMUS.get_or_init(|| {
        let dir = repo_root().join("fixtures/pmu");
        let mut found: Vec<SysfsPmu> = std::fs::read_dir(&dir)
            .expect("fixtures/pmu")
            .filter_map(|e| read_pmu(&e.ok()?.path()).ok())
            .collect();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        found
    });
    let root = std::path::Path::new("/nonexistent-root");
    let context = EventContext { pmus, root };
    let _ = context.encode_list(text);
    let _ = FormatField::parse("fuzz", text);
    let _ = parse_alias_terms(std::path::Path::new("events/fuzz"), text);
    let _ = parse_cpu_list(text);
}

/// The input cut into fields, each a 16-bit little-endian length and that many bytes (config
/// space is binary, so no separator byte would do); a short last field takes what is left.
fn length_prefixed(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = data.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
        let (field, rest) = rest.split_at(len);
        data = rest;
        Some(field)
    })
}

/// A sysfs tree as a snapshot holds it (`snapshot:DIR`, `topo --machine host`): the input's
/// length-prefixed fields fill the attribute files of three functions (a root port, a bridge and
/// an endpoint below it) and a pci.ids database; the reader builds the topology, names it from the
/// database, renders it, reads link health and computes P2P verdicts.
pub fn sysfs_tree(data: &[u8]) {
    const FUNCTIONS: [&str; 3] = ["0000:00:00.0", "0000:00:01.0", "0000:01:00.0"];
    const FILES: [&str; 12] = [
        "config",
        "vendor",
        "device",
        "class",
        "label",
        "current_link_speed",
        "current_link_width",
        "max_link_speed",
        "max_link_width",
        "numa_node",
        "secondary_bus_number",
        "aer_dev_correctable",
    ];
    let Ok(dir) = tempfile::tempdir() else { return };
    let devices = dir.path().join("sys/bus/pci/devices");
    let mut fields = length_prefixed(data);
    for bdf in FUNCTIONS {
        let function = devices.join(bdf);
        let _ = std::fs::create_dir_all(&function);
        for (name, field) in FILES.iter().zip(fields.by_ref()) {
            let _ = std::fs::write(function.join(name), field);
        }
    }
    let db = dir.path().join("pci.ids");
    let _ = std::fs::write(&db, fields.next().unwrap_or_default());
    let Ok(mut topology) = pcielab::topology::read_sysfs(&dir.path().join("sys/bus/pci")) else {
        return;
    };
    pcielab::topology::name_functions(&mut topology, &db);
    for bdf in FUNCTIONS {
        let _ = pcielab::topology::read_link_health(dir.path(), bdf.parse().expect("bdf"));
    }
    let _ = pcielab::topology::p2p::matrix(&topology, pcielab::topology::p2p::Cpu::Other);
    let spec = pcielab::topology::MachineSpec {
        name: "fuzz".into(),
        description: String::new(),
        topology,
        sim: Default::default(),
        platform_table: Default::default(),
    };
    let _ = to_tree(&spec, None);
    let _ = to_dot(&spec);
    let _ = to_json(&spec, None);
}

/// What `fit` and `model --platform` read: measurements (fio JSON, CSV or the dmatest table)
/// compared with a platform model, and a platform model TOML (the same bytes as both). The
/// fitting optimiser itself is left out: it is a search over the rows, not a parser.
pub fn model_inputs(data: &[u8]) {
    use pcielab::model::platform::parse_platform;
    use pcielab::model::transfer::LinkParams;
    let Some(text) = text(data) else { return };
    let link = LinkParams::new(pcielab::pcie::Generation::Gen3, 4);
    let model = parse_platform("fuzz.toml", text).unwrap_or_default();
    if let Ok(rows) = pcielab::model::parse_measurements("fuzz.csv", text, &link) {
        let _ = pcielab::model::fit::compare(&model, &rows, &link);
    }
}

/// A request to `pcielab exporter` (what any client that reaches the port can send): the whole
/// response, sampling a simulated machine when asked for the metrics. Only a GET or HEAD of
/// `/metrics` may be answered 200; everything else is a 4xx.
pub fn http_request(data: &[u8]) {
    static BODY: std::sync::OnceLock<std::sync::Arc<String>> = std::sync::OnceLock::new();
    let body = BODY.get_or_init(|| {
        let machine: pcielab::machine::Machine = "sim:qemu-seed".parse().expect("preset");
        let sample =
            pcielab::observe::Observer::open(&machine, &[], |_| unreachable!("no workload"))
                .and_then(|mut o| o.sample_at(0))
                .expect("preset");
        std::sync::Arc::new(pcielab::observe::exporter::render_metrics(&sample))
    });
    let mut request = data;
    let Some(reply) = pcielab::observe::exporter::respond(&mut request, || Ok(body.clone())) else {
        return;
    };
    let mut response = Vec::new();
    reply.write_to(&mut response).expect("writing to memory");
    let status = &response[9..12];
    let asked = data.starts_with(b"GET /metrics") || data.starts_with(b"HEAD /metrics");
    assert!(response.starts_with(b"HTTP/1.1 "));
    assert!(status != b"200" || asked, "200 for {data:?}");
    assert!(
        status == b"200" || status[0] == b'4',
        "status {status:?} for {data:?}"
    );
}

/// lspci output as `--machine lspci:FILE` reads it (the seeds of `lspci_text` are `-vvv` text,
/// those of `lspci_hex` `-xxxx` dumps; the reader tells them apart itself): read, then drawn
/// and checked as `topo` does.
pub fn lspci_listing(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(read) = pcielab::topology::read_lspci("fuzz.txt", &text) else {
        return;
    };
    let _ = pcielab::topology::warnings(&read.topology);
    let spec = pcielab::topology::MachineSpec {
        name: "fuzz".into(),
        description: String::new(),
        topology: read.topology,
        sim: Default::default(),
        platform_table: Default::default(),
    };
    let _ = to_tree(&spec, None);
    let _ = to_json(&spec, None);
    for f in spec.topology.functions() {
        let _ = spec.topology.path_ceiling(f.bdf);
    }
}

/// An `advise --undo FILE` journal, read and checked against an empty machine root: the seeds
/// name the root `/fuzz-root`, replaced here by a fresh empty directory so runs get past the
/// root check into the entries; none of the files they name exist there, so nothing is written.
pub fn undo_file(data: &[u8]) {
    let Ok(dir) = tempfile::tempdir() else { return };
    let root = dir.path().join("root");
    if std::fs::create_dir(&root).is_err() {
        return;
    }
    let named = root.as_os_str().as_encoded_bytes();
    let mut journal = Vec::with_capacity(data.len());
    let mut rest = data;
    while let Some(at) = rest.windows(10).position(|w| w == b"/fuzz-root") {
        journal.extend_from_slice(&rest[..at]);
        journal.extend_from_slice(named);
        rest = &rest[at + 10..];
    }
    journal.extend_from_slice(rest);
    let file = dir.path().join("undo.json");
    if std::fs::write(&file, &journal).is_err() {
        return;
    }
    let options = pcielab::advise::UndoOptions {
        root,
        privileged: false,
        force: false,
    };
    let _ = pcielab::advise::undo(&file, &options);
}

/// A directory tree as `corpus DIR` walks it: the input's length-prefixed fields alternate a
/// relative path (a `/` makes directories; a name ending in `@` becomes a symbolic link to the
/// field after it instead of a file) and its contents.
pub fn corpus_walk(data: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(dir) = tempfile::tempdir() else { return };
    let top = dir.path().join("corpus");
    let _ = std::fs::create_dir(&top);
    let mut fields = length_prefixed(data);
    // A few entries are enough to reach every branch of the walk; more only slows a run.
    for _ in 0..16 {
        let (Some(name), Some(content)) = (fields.next(), fields.next()) else {
            break;
        };
        let name = std::path::Path::new(std::ffi::OsStr::from_bytes(name));
        if name.is_absolute() || name.components().any(|c| c.as_os_str() == "..") {
            continue;
        }
        let path = top.join(name);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        match path.to_str().and_then(|p| p.strip_suffix('@')) {
            Some(link) => {
                let _ = std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(content), link);
            }
            None => {
                let _ = std::fs::write(&path, content);
            }
        }
    }
    if let Ok(report) = pcielab::advise::run_corpus(&top) {
        let _ = report.to_text();
    }
}
