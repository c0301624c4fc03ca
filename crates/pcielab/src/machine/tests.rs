use super::*;

#[test]
fn selectors_parse() {
    assert_eq!(
        "sim:yitian710".parse::<MachineSelector>().unwrap(),
        MachineSelector::SimPreset {
            name: "yitian710".into()
        }
    );
    assert_eq!(
        "sim:my.toml".parse::<MachineSelector>().unwrap(),
        MachineSelector::SimFile {
            path: "my.toml".into()
        }
    );
    assert_eq!(
        "snapshot:/tmp/s".parse::<MachineSelector>().unwrap(),
        MachineSelector::Snapshot {
            dir: "/tmp/s".into()
        }
    );
    assert_eq!(
        "lspci:-".parse::<MachineSelector>().unwrap(),
        MachineSelector::Lspci { path: "-".into() }
    );
    for bad in ["", "sim:", "snapshot:", "hots", "lspci:"] {
        assert_eq!(bad.parse::<MachineSelector>().unwrap_err().exit_code(), 2);
    }
}

fn open(text: &str) -> Result<Machine> {
    text.parse()
}

#[test]
fn a_simulated_pcie_machine_has_topology_and_counters_but_no_resctrl() {
    let yitian = open("sim:yitian710").unwrap();
    let root_ports = yitian
        .topology()
        .unwrap()
        .functions()
        .iter()
        .filter(|f| f.kind == crate::topology::Kind::RootPort)
        .count();
    let crate::pmu::counters::PmuListing::Catalog(pmus) =
        yitian.counters().unwrap().list(None).unwrap()
    else {
        panic!("a simulated PCIe machine lists catalog PMUs");
    };
    // The Yitian preset's root ports are all DesignWare (Alibaba): one PMU each.
    assert_eq!(pmus.len(), root_ports);
    assert!(pmus.iter().any(|p| p.name == "pcie_bdf_200"));
    assert_eq!(yitian.counters().unwrap().pcie_pmus().unwrap(), pmus);
    let err = yitian.qos(&QosOptions::default()).err().unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(err.message().contains("sim:mpam-seed"), "{err}");
}

#[test]
fn a_simulated_resctrl_machine_has_resctrl_but_no_pcie() {
    let mpam = open("sim:mpam-seed").unwrap();
    assert_eq!(
        mpam.qos(&QosOptions::default()).unwrap().name(),
        "sim:mpam-seed"
    );
    for err in [
        mpam.spec().err().unwrap(),
        mpam.counters().err().unwrap(),
        mpam.simulator().err().unwrap(),
    ] {
        assert_eq!(err.exit_code(), 2);
        assert!(err.message().contains("sim:yitian710"), "{err}");
    }
}

#[test]
fn a_snapshot_lists_its_root_port_pmus_but_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let yitian = open("sim:yitian710").unwrap();
    crate::topology::export::export_sysfs(yitian.topology().unwrap(), dir.path()).unwrap();
    let snapshot = open(&format!("snapshot:{}", dir.path().display())).unwrap();
    let counters = snapshot.counters().unwrap();
    let listed = counters.list(Some("dwc_rootport_10")).unwrap();
    let doc = serde_json::to_value(listed.document("snapshot")).unwrap();
    assert_eq!(doc["pmus"][0]["name"], "pcie_bdf_200");
    assert_eq!(doc["pmus"].as_array().unwrap().len(), 1);
    let request = crate::pmu::counters::StatRequest {
        events: &["pcie_bdf_200/L0/".to_string()],
        all_cpus: true,
        mux_interval_ms: None,
        interval_ms: None,
        ber: None,
        workload: &["sleep".to_string(), "1".to_string()],
        read_file: &|p: &Path| Err(Error::bad_input(p.display().to_string())),
        platform: None,
        interrupt: None,
    };
    let err = counters.stat(&request).err().unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(err.message().contains("no counters"), "{err}");
    assert_eq!(
        snapshot
            .qos(&QosOptions::default())
            .err()
            .unwrap()
            .exit_code(),
        2
    );
}

#[test]
fn the_host_reads_its_pci_tree_only_when_asked_and_resctrl_under_its_root() {
    // Opening a host reads nothing: a root without sysfs opens, and fails only when asked
    // for its topology.
    let root = tempfile::tempdir().unwrap();
    let host = Machine::open(&MachineSelector::Host {
        root: root.path().to_path_buf(),
    })
    .unwrap();
    assert!(host.spec().is_err());
    // Its counters are the PMUs under the root's event_source: a DWC root-port PMU there
    // is a PCIe PMU with the DesignWare catalog (unplaced: this root has no PCI tree).
    let pmu_dir = root
        .path()
        .join(crate::pmu::sysfs::EVENT_SOURCE_DIR)
        .join("dwc_rootport_10");
    std::fs::create_dir_all(pmu_dir.join("format")).unwrap();
    std::fs::write(pmu_dir.join("type"), "12\n").unwrap();
    std::fs::write(pmu_dir.join("format/eventid"), "config:0-15\n").unwrap();
    let pmus = host.counters().unwrap().pcie_pmus().unwrap();
    assert_eq!(pmus.len(), 1);
    assert_eq!(pmus[0].name, "dwc_rootport_10");
    assert_eq!(pmus[0].family, crate::pmu::catalog::Family::DwcRootPort);
    assert_eq!(pmus[0].root_port, None);
    // Simulator-only settings are bad input on a host, before anything is opened.
    let events = ["dwc_rootport_10/eventid=0x0/".to_string()];
    let workload = ["true".to_string()];
    let read_file = |p: &Path| Err(Error::bad_input(p.display().to_string()));
    let mut request = crate::pmu::counters::StatRequest {
        events: &events,
        all_cpus: true,
        mux_interval_ms: Some(8),
        interval_ms: None,
        ber: None,
        workload: &workload,
        read_file: &read_file,
        platform: None,
        interrupt: None,
    };
    let counters = host.counters().unwrap();
    let err = counters.stat(&request).err().unwrap();
    assert!(
        err.message().contains("perf_event_mux_interval_ms"),
        "{err}"
    );
    request.mux_interval_ms = None;
    request.ber = Some(1e-9);
    let err = counters.stat(&request).err().unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(err.message().starts_with("--ber"), "{err}");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/resctrl");
    let mut qos = host
        .qos(&QosOptions {
            resctrl_dir: Some(fixture.clone()),
            precheck: true,
            ..QosOptions::default()
        })
        .unwrap();
    assert_eq!(qos.name(), format!("host ({})", fixture.display()));
    assert!(qos.read().unwrap().group("p1").is_some());
    assert_eq!(host.simulator().err().unwrap().exit_code(), 2);
}

#[test]
fn an_unknown_preset_names_both_kinds() {
    let err = open("sim:yitain710").err().unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.message().contains("yitian710") && err.message().contains("mpam-seed"),
        "{err}"
    );
}
