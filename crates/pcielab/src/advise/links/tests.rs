//! The link checks on sysfs trees written by the exporter (the same files the real lspci reads),
//! opened as a host root, so every check runs end to end through `advise`.

use super::super::{advise, AdviseOptions, Finding, Intent, Mute, Prediction, Severity};
use crate::machine::Machine;
use crate::model::transfer::{achievable_mbps, LinkParams};
use crate::pcie::Generation::*;
use crate::topology::export::export_sysfs;
use crate::topology::spec::parse_spec;

/// The test machines' root port, without its link.
const ROOT_PORT: &str = r#"[[function]]
bdf = "0000:00:01.0"
kind = "root_port"
vendor = 0x8086
device_id = 0x347a
class = 0x060400"#;

/// A root port (`port_link`) with one endpoint of `class` (`ep_link`), written as a host root.
fn machine(
    extra_port: &str,
    port_link: &str,
    extra_ep: &str,
    ep_link: &str,
    class: u32,
) -> (tempfile::TempDir, Machine) {
    let spec = format!(
        r#"name = "t"
{ROOT_PORT}
link = {port_link}
{extra_port}
[[function]]
bdf = "0000:01:00.0"
kind = "endpoint"
parent = "0000:00:01.0"
vendor = 0x144d
device_id = 0xa824
class = {class:#08x}
link = {ep_link}
driver = "nvme"
{extra_ep}
"#
    );
    host_root_of(&spec)
}

/// The machine `spec` describes, exported as sysfs under a temporary host root.
fn host_root_of(spec: &str) -> (tempfile::TempDir, Machine) {
    let topology = parse_spec("t.toml", spec).unwrap().topology;
    let root = tempfile::tempdir().unwrap();
    export_sysfs(&topology, &root.path().join("sys/bus/pci")).unwrap();
    let machine = Machine::host_at(root.path().to_path_buf());
    (root, machine)
}

fn options() -> AdviseOptions {
    AdviseOptions {
        link_samples: 1,
        ..AdviseOptions::default()
    }
}

fn only(machine: &Machine, id: &'static str, options: &AdviseOptions) -> Vec<Finding> {
    let options = AdviseOptions {
        only: vec![id],
        ..options.clone()
    };
    advise(machine, &options).unwrap().findings
}

fn numbers(p: &Prediction) -> (f64, f64) {
    match p {
        Prediction::Predicted { before, after, .. } => (*before, *after),
        Prediction::NotPredicted { reason } => panic!("not predicted: {reason}"),
    }
}

const NVME: u32 = 0x010802;
const GPU: u32 = 0x030200;

/// The condition a prediction holds on, `None` for an unconditional one.
fn condition(p: &Prediction) -> Option<&str> {
    match p {
        Prediction::Predicted { condition, .. } => condition.as_deref(),
        Prediction::NotPredicted { .. } => None,
    }
}

#[test]
fn a_gen4_card_in_a_gen3_slot_is_slot_limited_and_clean_but_a_narrow_link_is_downtrained() {
    let gen3x4 = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }";
    let (_t, m) = machine(
        "",
        gen3x4,
        "",
        "{ max_speed = 16.0, max_width = 4, speed = 8.0, width = 4 }",
        NVME,
    );
    // Judged (slot-limited: all the slot offers) and clean.
    let advice = advise(
        &m,
        &AdviseOptions {
            only: vec!["link-downtrained"],
            ..options()
        },
    )
    .unwrap();
    assert!(advice.findings.is_empty());
    assert_eq!(
        (advice.checks[0].judged, advice.checks[0].not_judged_count()),
        (1, 0)
    );
    let topo = m.topology().unwrap();
    let judge = crate::topology::check::LinkJudge::new(topo);
    let (port, device) = judge.links()[0];
    assert_eq!(judge.judge(port, device).unwrap().name(), "slot-limited");

    let (_t, m) = machine(
        "",
        "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 2 }",
        "",
        "{ max_speed = 16.0, max_width = 4, speed = 8.0, width = 2 }",
        NVME,
    );
    let found = only(&m, "link-downtrained", &options());
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(f.subject, "link 0000:00:01.0 -> 0000:01:00.0");
    assert_eq!(f.severity, Severity::PerfLoss);
    assert!(
        f.summary.starts_with(
            "downtrained link 0000:00:01.0 -> 0000:01:00.0: running Gen3 x2 but both ends support Gen3 x4"
        ),
        "{}",
        f.summary
    );
    assert_eq!(condition(&f.prediction), None);
    assert!(
        f.summary.contains("limited by this link at 0000:01:00.0"),
        "{}",
        f.summary
    );
    assert_eq!(f.evidence[0].field, "LnkSta");
    assert_eq!(f.evidence[0].value, "Speed 8GT/s, Width x2 (downgraded)");
    // The prediction is the link model's achievable rate before and after, at the programmed
    // MPS (the spec's default, 128 B): what `pcielab model --gen 3 --width 2/4 --mps 128` gives.
    let at = |width| {
        achievable_mbps(&LinkParams {
            mps: 128,
            ..LinkParams::new(Gen3, width)
        })
    };
    let (before, after) = numbers(&f.prediction);
    assert!(
        (before - at(2)).abs() < 1e-9 && (after - at(4)).abs() < 1e-9,
        "{before} {after}"
    );
    // Gen3 x2 payload at MPS 128: 1969 MB/s line rate × 128/(128+20) and less for DLLPs/SKP.
    assert!((1600.0..1703.0).contains(&before), "{before}");
}

#[test]
fn a_link_that_is_down_is_a_failed_link_not_a_downtrain() {
    let (_t, m) = machine(
        "",
        "{ max_speed = 8.0, max_width = 4, speed = 2.5, width = 0 }",
        "",
        "{ max_speed = 8.0, max_width = 4, speed = 2.5, width = 0 }",
        NVME,
    );
    let found = only(&m, "link-downtrained", &options());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].severity, Severity::Info);
    assert!(
        found[0]
            .summary
            .starts_with("data link down (failed link) between 0000:00:01.0 and 0000:01:00.0"),
        "{}",
        found[0].summary
    );
    assert!(matches!(
        found[0].prediction,
        Prediction::NotPredicted { .. }
    ));
}

/// A root port and the NVMe drive below it as `lspci -vvnn` prints them, both reading x1 on an
/// x4 link with ASPM L1 on: the port's LnkCap line says `reporting` for LLActRep and its
/// LnkSta flags line says `active` for DLActive.
fn slot_text(reporting: char, active: char) -> String {
    format!(
        "00:1c.0 PCI bridge [0604]: Intel Corporation Device [8086:a33c] (rev f0) (prog-if 00 [Normal decode])
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd- ExtTag- PhantFunc- AuxPwr- NoSnoop-
\t\t\tMaxPayload 256 bytes, MaxReadReq 128 bytes
\t\tLnkCap:\tPort #5, Speed 8GT/s, Width x4, ASPM L1, Exit Latency L1 <16us
\t\t\tClockPM- Surprise- LLActRep{reporting} BwNot+ ASPMOptComp+
\t\tLnkCtl:\tASPM L1 Enabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 8GT/s (ok), Width x1 (downgraded)
\t\t\tTrErr- Train- SlotClk+ DLActive{active} BWMgmt- ABWMgmt-

01:00.0 Non-Volatile memory controller [0108]: Samsung Electronics Co Ltd Device [144d:a808] (prog-if 02 [NVM Express])
\tCapabilities: [70] Express (v2) Endpoint, MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0, Latency L0s unlimited, L1 unlimited
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd+ ExtTag+ PhantFunc- AuxPwr- NoSnoop+ FLReset-
\t\t\tMaxPayload 256 bytes, MaxReadReq 512 bytes
\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x4, ASPM L1, Exit Latency L1 <64us
\t\t\tClockPM+ Surprise- LLActRep- BwNot- ASPMOptComp+
\t\tLnkCtl:\tASPM L1 Enabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 8GT/s (ok), Width x1 (downgraded)
\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
\tKernel driver in use: nvme
"
    )
}

/// An unquirked root port and one endpoint below it as `lspci -vvnn` prints them: the
/// endpoint's `class` (`Ethernet controller [0200]`), its LnkCap `width`, Relaxed Ordering
/// off, MaxPayload and MaxReadReq 128 bytes, and `driver` bound.
fn endpoint_text(class: &str, width: u8, driver: &str) -> String {
    format!(
        "00:1c.0 PCI bridge [0604]: Intel Corporation Device [8086:a33c] (rev f0) (prog-if 00 [Normal decode])
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0
\t\t\tExtTag- RBE+
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd+ ExtTag- PhantFunc- AuxPwr- NoSnoop-
\t\t\tMaxPayload 128 bytes, MaxReadReq 128 bytes
\t\tLnkCap:\tPort #5, Speed 5GT/s, Width x{width}, ASPM not supported
\t\t\tClockPM- Surprise- LLActRep+ BwNot+ ASPMOptComp+
\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x{width} (ok)
\t\t\tTrErr- Train- SlotClk+ DLActive+ BWMgmt- ABWMgmt-
\tKernel driver in use: pcieport

01:00.0 {class}: Vendor Device [1234:5678]
\tCapabilities: [70] Express (v2) Endpoint, MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0, Latency L0s unlimited, L1 unlimited
\t\t\tExtTag+ AttnBtn- AttnInd- PwrInd- RBE+ FLReset-
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd- ExtTag+ PhantFunc- AuxPwr- NoSnoop-
\t\t\tMaxPayload 128 bytes, MaxReadReq 128 bytes
\t\tLnkCap:\tPort #0, Speed 2.5GT/s, Width x{width}, ASPM not supported
\t\t\tClockPM- Surprise- LLActRep- BwNot- ASPMOptComp-
\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 2.5GT/s (ok), Width x{width} (ok)
\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
\tKernel driver in use: {driver}
"
    )
}

/// The ids of the `checks` that find something in `text`, read as one machine's lspci output.
fn found_in(text: &str, checks: &[&'static str]) -> Vec<&'static str> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lspci.txt");
    std::fs::write(&path, text).unwrap();
    let m: Machine = format!("lspci:{}", path.display()).parse().unwrap();
    checks
        .iter()
        .copied()
        .filter(|id| !only(&m, id, &options()).is_empty())
        .collect()
}

#[test]
fn relaxed_ordering_off_is_no_finding_where_the_driver_turns_it_off_itself() {
    let nic = "Ethernet controller [0200]";
    // tg3 clears the enable at every chip reset: the Dell and HPE BCM57xx NICs of the corpus.
    assert!(found_in(&endpoint_text(nic, 1, "tg3"), &["relaxed-ordering"]).is_empty());
    assert_eq!(
        found_in(&endpoint_text(nic, 1, "igb"), &["relaxed-ordering"]),
        ["relaxed-ordering"]
    );
}

#[test]
fn a_one_lane_display_controller_is_a_bmc_framebuffer_not_a_bulk_dma_device() {
    let checks = ["mrrs-small", "relaxed-ordering"];
    let vga = "VGA compatible controller [0300]";
    // A Matrox G200e or ASPEED BMC VGA: written by the host, reading nothing in bulk.
    assert!(found_in(&endpoint_text(vga, 1, "mgag200"), &checks).is_empty());
    // A graphics card with sixteen lanes moves bulk data: both are judged and found.
    assert_eq!(found_in(&endpoint_text(vga, 16, "radeon"), &checks), checks);
}

#[test]
fn no_link_is_judged_below_a_port_whose_data_link_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let link_checks = |reporting, active| -> Vec<(String, Severity)> {
        let path = dir.path().join(format!("{reporting}{active}.txt"));
        std::fs::write(&path, slot_text(reporting, active)).unwrap();
        let m: Machine = format!("lspci:{}", path.display()).parse().unwrap();
        let mut found: Vec<(String, Severity)> = ["link-downtrained", "aspm-busy-link"]
            .into_iter()
            .flat_map(|id| only(&m, id, &options()))
            .map(|f| (f.id.to_string(), f.severity))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        let topo = crate::topology::lspci::read_lspci_path(&path)
            .unwrap()
            .topology;
        // The port's own LnkSta is no ceiling where its data link is down.
        let ceiling = topo.path_ceiling(crate::pcie::bdf("00:1c.0"));
        assert_eq!(ceiling.is_none(), reporting == '+' && active == '-');
        let warned = crate::topology::check::warnings(&topo);
        found.extend(
            warned
                .values()
                .flatten()
                .map(|w| (w.clone(), Severity::Info)),
        );
        found
    };
    // The port reports DL_Active and it is clear: the x1 the drive still reads is no trained
    // link, so neither a downtrain nor ASPM on a busy link is raised, by advise or topo; both
    // say once, in the same words, that the link failed under a listed device.
    let down = link_checks('+', '-');
    assert_eq!(down.len(), 2, "{down:?}");
    assert_eq!(down[0].0, "link-downtrained");
    assert_eq!(down[0].1, Severity::Info);
    assert!(
        down[1]
            .0
            .starts_with("data link down (failed link) between 0000:00:1c.0 and 0000:01:00.0"),
        "{down:?}"
    );
    // With the data link up, the same registers are a real x1 downtrain under ASPM L1.
    let up = link_checks('+', '+');
    assert_eq!(
        up.iter()
            .filter(|(_, s)| *s == Severity::PerfLoss)
            .map(|(id, _)| id.as_str())
            .collect::<Vec<_>>(),
        vec!["aspm-busy-link", "link-downtrained"]
    );
    assert!(
        up.iter()
            .any(|(w, _)| w.starts_with("downtrained link 0000:00:1c.0 -> 0000:01:00.0")),
        "{up:?}"
    );
    // ASPM on that link costs the slower end's L1 exit, as each LnkCap line says it.
    let m: Machine = format!("lspci:{}", dir.path().join("++.txt").display())
        .parse()
        .unwrap();
    let aspm = only(&m, "aspm-busy-link", &options());
    let exits: Vec<(&str, Option<&str>)> = aspm[0]
        .evidence
        .iter()
        .filter(|e| e.field == "LnkCap: Exit Latency")
        .map(|e| (e.value.as_str(), e.line.as_deref()))
        .collect();
    assert_eq!(
        exits,
        vec![
            (
                "L1 <16us",
                Some("line 8: LnkCap:\tPort #5, Speed 8GT/s, Width x4, ASPM L1, Exit Latency L1 <16us")
            ),
            (
                "L1 <64us",
                Some("line 20: LnkCap:\tPort #0, Speed 8GT/s, Width x4, ASPM L1, Exit Latency L1 <64us")
            ),
        ]
    );
    assert_eq!(numbers(&aspm[0].prediction), (64000.0, 0.0));
    // A port that does not report DL_Active always reads DLActive-: that says nothing.
    assert_eq!(link_checks('-', '-').len(), up.len());
}

#[test]
fn an_idle_gpu_at_gen1_is_info_and_gone_when_a_later_sample_reaches_full_speed() {
    let port = "{ max_speed = 8.0, max_width = 16, speed = 2.5, width = 16 }";
    let gpu = "{ max_speed = 16.0, max_width = 16, speed = 2.5, width = 16 }";
    let (root, m) = machine("", port, "", gpu, GPU);
    let found = only(&m, "link-downtrained", &options());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].severity, Severity::Info);
    let said = "power-managed idle link 0000:00:01.0 -> 0000:01:00.0: running Gen1 x16 below the Gen3 x16 both ends support, speed only";
    assert!(found[0].summary.starts_with(said), "{}", found[0].summary);
    // An info finding's gain holds only on a condition, said with it.
    assert_eq!(
        condition(&found[0].prediction),
        Some("if it ran at load at this speed (a downtrain) and retrained")
    );
    // topo judges the link the same way, in the same words (no "check the slot, riser or
    // signal integrity" for an idle GPU).
    let topo = m.topology().unwrap();
    let warned = crate::topology::check::warnings(topo);
    let warning = &warned[&crate::pcie::bdf("01:00.0")];
    assert_eq!(warning.len(), 1, "{warning:?}");
    assert!(
        found[0].summary.starts_with(warning[0].as_str()),
        "{warning:?}"
    );
    assert!(!warning[0].contains("signal integrity"));
    // Under load the kernel's current_link_speed shows the trained-up rate.
    let dir = root.path().join("sys/bus/pci/devices/0000:01:00.0");
    std::fs::write(dir.join("current_link_speed"), "8.0 GT/s PCIe\n").unwrap();
    let sampled = AdviseOptions {
        link_samples: 2,
        ..options()
    };
    assert!(only(&m, "link-downtrained", &sampled).is_empty());
}

#[test]
fn mps_is_judged_against_the_whole_path_and_mismatch_against_the_port() {
    let link = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }";
    let (_t, m) = machine(
        "mps = 128\nmps_supported = 512",
        link,
        "mps = 128\nmps_supported = 256\nmrrs = 128",
        link,
        NVME,
    );
    let found = only(&m, "mps-below-path", &options());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .summary
            .contains("supports 256 B (limited by 0000:01:00.0)"),
        "{}",
        found[0].summary
    );
    let (before, after) = numbers(&found[0].prediction);
    let at = |mps| {
        achievable_mbps(&LinkParams {
            mps,
            mrrs: 128,
            ..LinkParams::new(Gen3, 4)
        })
    };
    assert!((before - at(128)).abs() < 1e-9 && (after - at(256)).abs() < 1e-9);
    // 128 -> 256 B on Gen3 x4: (256/276)/(128/148) ≈ +7 % before DLLP effects.
    let gain = (after - before) / before * 100.0;
    assert!((5.0..10.0).contains(&gain), "{gain}");
    assert_eq!(only(&m, "mrrs-small", &options()).len(), 1);
    assert!(only(&m, "mps-mismatch", &options()).is_empty());

    // Larger below than at the port: TLPs the port rejects.
    let (_t, m) = machine(
        "mps = 128\nmps_supported = 512",
        link,
        "mps = 256\nmps_supported = 256",
        link,
        NVME,
    );
    let found = only(&m, "mps-mismatch", &options());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].severity, Severity::Risk);
    assert!(found[0]
        .summary
        .starts_with("MPS 256 B at 0000:01:00.0 above 128 B at 0000:00:01.0"));
    // Smaller below with reads capped at its MPS is what pcie_bus_perf programs: no finding.
    let (_t, m) = machine(
        "mps = 256\nmps_supported = 256",
        link,
        "mps = 128\nmps_supported = 128\nmrrs = 128",
        link,
        NVME,
    );
    assert!(only(&m, "mps-mismatch", &options()).is_empty());
}

/// ORs `bits` into the 16- or 32-bit register at `offset` of the PCI Express capability (0x40
/// in exported configs) of `bdf` below `root`.
fn patch(root: &std::path::Path, bdf: &str, offset: usize, bits: u32) {
    let path = root.join("sys/bus/pci/devices").join(bdf).join("config");
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[0x40], 0x10);
    let at = 0x40 + offset;
    let value = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) | bits;
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn aspm_on_a_busy_link_costs_the_slower_ends_exit_latency_and_fixes_per_link_first() {
    let link = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }";
    let aspm = "aspm = \"l1\"\naspm_supported = \"l0s+l1\"";
    let (root, m) = machine(aspm, link, aspm, link, NVME);
    // LnkCap L1 exit: port code 6 (<64us), endpoint code 3 (<8us).
    patch(root.path(), "0000:00:01.0", 0x0c, 6 << 15);
    patch(root.path(), "0000:01:00.0", 0x0c, 3 << 15);
    let found = only(&m, "aspm-busy-link", &options());
    assert_eq!(found.len(), 1);
    let f = &found[0];
    assert_eq!(numbers(&f.prediction), (64000.0, 0.0));
    assert!(
        f.evidence
            .iter()
            .any(|e| e.field == "LnkCap: Exit Latency" && e.value == "L0s <64ns, L1 <64us"),
        "{:?}",
        f.evidence
    );
    // No policy file and no per-link file: only the boot parameter is left.
    assert!(f.fix.reboot && f.fix.writes.is_empty());
    let policy = root.path().join("sys/module/pcie_aspm/parameters/policy");
    std::fs::create_dir_all(policy.parent().unwrap()).unwrap();
    std::fs::write(&policy, "default performance [powersave] powersupersave\n").unwrap();
    let f = only(&m, "aspm-busy-link", &options()).remove(0);
    assert_eq!(
        f.fix.writes[0].file,
        "sys/module/pcie_aspm/parameters/policy"
    );
    let l1 = root.path().join("sys/bus/pci/devices/0000:01:00.0/link");
    std::fs::create_dir_all(&l1).unwrap();
    std::fs::write(l1.join("l1_aspm"), "1\n").unwrap();
    let f = only(&m, "aspm-busy-link", &options()).remove(0);
    assert_eq!(f.fix.writes.len(), 1);
    assert_eq!(
        f.fix.writes[0].file,
        "sys/bus/pci/devices/0000:01:00.0/link/l1_aspm"
    );
    assert_eq!(f.fix.writes[0].value, "0");
    // Under isolation intent ASPM is no loss worth flagging as one.
    let isolation = AdviseOptions {
        intent: Intent::Isolation,
        ..options()
    };
    assert_eq!(
        only(&m, "aspm-busy-link", &isolation)[0].severity,
        Severity::Info
    );
}

/// A root port with ASPM `port` above a two-function device whose functions enable `f0` and
/// `f1` (spellings of `Aspm::SPELLINGS`), both bound to a driver.
fn two_function_aspm(port: &str, f0: &str, f1: &str) -> (tempfile::TempDir, Machine) {
    let link = "{ max_speed = 8.0, max_width = 16, speed = 8.0, width = 16 }";
    let function = |bdf: &str, class: u32, aspm: &str, driver: &str| {
        format!(
            r#"[[function]]
bdf = "{bdf}"
kind = "endpoint"
parent = "0000:00:01.0"
vendor = 0x10de
device_id = 0x1e04
class = {class:#08x}
link = {link}
aspm = "{aspm}"
aspm_supported = "l0s+l1"
driver = "{driver}"
"#
        )
    };
    host_root_of(&format!(
        "name = \"t\"\n{ROOT_PORT}\nlink = {link}\naspm = \"{port}\"\naspm_supported = \"l0s+l1\"\n{}{}",
        function("0000:01:00.0", 0x030000, f0, "nvidia"),
        function("0000:01:00.1", 0x040300, f1, "snd_hda_intel"),
    ))
}

#[test]
fn aspm_counts_only_the_states_a_link_can_enter() {
    let states = |port: &str, f0: &str, f1: &str| -> Vec<String> {
        let (_root, m) = two_function_aspm(port, f0, f1);
        only(&m, "aspm-busy-link", &options())
            .iter()
            .map(|f| f.summary.split(" on a link").next().unwrap().to_string())
            .collect()
    };
    // A GPU's audio function enabling L0s and L1 alone (the ASUS ESC8000 G4's and the
    // Supermicro AS-4124GS-TNR's): a non-ARI device takes only what all its functions enable.
    assert!(states("none", "none", "l0s+l1").is_empty());
    // L1 at the port but not in the device (the Intel S1200RP's I210): L1 needs both ends.
    assert!(states("l1", "none", "none").is_empty());
    assert!(states("l1", "l1", "none").is_empty());
    // L0s is entered by each transmitter alone: the port's is enough.
    assert_eq!(
        states("l0s", "none", "none"),
        ["ASPM L0s enabled at 0000:00:01.0"]
    );
    assert_eq!(
        states("l1", "l1", "l1"),
        ["ASPM L1 enabled at 0000:00:01.0 and 0000:01:00.0 and 0000:01:00.1"]
    );
    assert_eq!(
        states("l1", "l0s+l1", "l1"),
        ["ASPM L1 enabled at 0000:00:01.0 and 0000:01:00.0 and 0000:01:00.1"]
    );
}

#[test]
fn ext_tags_off_is_found_only_where_devcap_supports_them_and_devctl_has_them_off() {
    let link = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }";
    let (root, m) = machine("", link, "", link, NVME);
    assert!(
        only(&m, "ext-tag-off", &options()).is_empty(),
        "DevCap says no Extended Tag"
    );
    // A machine's registers are read once, with its topology: each patch is a new machine.
    let reread = || Machine::host_at(root.path().to_path_buf());
    patch(root.path(), "0000:01:00.0", 0x04, 1 << 5);
    let found = only(&reread(), "ext-tag-off", &options());
    assert_eq!(found.len(), 1);
    assert!(matches!(
        found[0].prediction,
        Prediction::NotPredicted { .. }
    ));
    patch(root.path(), "0000:01:00.0", 0x08, 1 << 8);
    assert!(
        only(&reread(), "ext-tag-off", &options()).is_empty(),
        "enabled"
    );
}

#[test]
fn ignore_mutes_one_finding_and_sim_machines_list_what_they_cannot_check() {
    let link = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 2 }";
    let (_t, m) = machine("", link, "", link, NVME);
    let muted = AdviseOptions {
        ignore: vec![Mute::parse("link-downtrained@01:00.0").unwrap()],
        ..options()
    };
    let advice = advise(&m, &muted).unwrap();
    assert!(advice.findings.iter().all(|f| f.id != "link-downtrained"));
    assert_eq!(advice.muted, 1);
    assert!(Mute::parse("no-such-check@01:00.0")
        .unwrap_err()
        .to_string()
        .contains("valid are link-downtrained"));

    let sim = Machine::open(&"sim:yitian710".parse().unwrap()).unwrap();
    let advice = advise(&sim, &options()).unwrap();
    let not_judged: Vec<&str> = advice
        .checks
        .iter()
        .filter(|c| c.status == crate::advise::CheckStatus::NotJudged)
        .map(|c| c.check)
        .collect();
    for id in [
        "irq-far-node",
        "cpu-governor",
        "cpu-idle-deep",
        "devfreq-governor",
        "aer-correctable",
        "iommu-translated",
    ] {
        assert!(
            not_judged.contains(&id),
            "{id} not listed as not judged: {not_judged:?}"
        );
    }
    let system = advice
        .checks
        .iter()
        .find(|c| c.check == "cpu-governor")
        .unwrap();
    assert_eq!(
        system.not_judged[0].reason,
        "a sim: machine has no kernel files: cpufreq scaling_governor files are not simulated"
    );
    let aer = advice
        .checks
        .iter()
        .find(|c| c.check == "aer-correctable")
        .unwrap();
    assert!(
        aer.not_judged
            .iter()
            .any(|n| n.reason == "a sim: machine counts no AER errors"),
        "{aer:?}"
    );
}

/// irq-far-node judges a device's vectors together (a device with one vector on its node
/// spreads them on purpose, as the kernel's managed queue vectors do), follows a move that is
/// pending until the next interrupt, and leaves devices on CPU-less nodes alone.
#[test]
fn irq_far_node_judges_all_vectors_and_follows_pending_moves() {
    let link = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }";
    let (t, _machine) = machine("", link, "numa_node = 1", link, NVME);
    let root = t.path();
    let write = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{text}\n")).unwrap();
    };
    let dev = "sys/bus/pci/devices/0000:01:00.0";
    write(&format!("{dev}/msi_irqs/30"), "msix");
    write(&format!("{dev}/msi_irqs/31"), "msix");
    write("sys/devices/system/node/node0/cpulist", "0-1");
    write("sys/devices/system/node/node1/cpulist", "2-3");
    // (IRQ 30 requested, effective), (IRQ 31 requested, effective)
    let found = |irqs: [(&str, &str); 2]| {
        for (irq, (wanted, now)) in [30, 31].iter().zip(irqs) {
            write(&format!("proc/irq/{irq}/smp_affinity_list"), wanted);
            write(&format!("proc/irq/{irq}/effective_affinity_list"), now);
        }
        only(&Machine::host_at(root), "irq-far-node", &options())
    };
    let far = found([("0-1", "0"), ("0-1", "1")]);
    assert_eq!(far.len(), 1);
    assert_eq!(far[0].fix.writes.len(), 2);
    assert_eq!(far[0].fix.writes[0].value, "2-3");
    // One vector on the device's node: spread, not misplaced.
    assert!(found([("0-1", "0"), ("2-3", "2")]).is_empty());
    // Moved to node 1 but not yet delivered there (no interrupt since): already right.
    assert!(found([("2-3", "0"), ("2-3", "1")]).is_empty());
    // Pinned to node 0, effective still on node 1 until the next interrupt: a finding, with
    // the requested and the current CPUs as evidence.
    let pending = found([("0", "2"), ("0", "3")]);
    assert_eq!(pending.len(), 1);
    let values: Vec<(&str, &str)> = pending[0]
        .evidence
        .iter()
        .filter(|e| e.source.contains("/proc/irq/30/"))
        .map(|e| (e.field.as_str(), e.value.as_str()))
        .collect();
    assert_eq!(
        values,
        [("smp_affinity_list", "0"), ("effective_affinity_list", "2")]
    );
    assert!(pending[0].summary.contains("pending move"));
    // A node without CPUs has nowhere to take them.
    write("sys/devices/system/node/node1/cpulist", "");
    assert!(found([("0-1", "0"), ("0-1", "1")]).is_empty());
}

/// The check of `id` in `advice`.
fn report<'a>(advice: &'a crate::advise::Advice, id: &str) -> &'a crate::advise::CheckReport {
    advice.checks.iter().find(|c| c.check == id).unwrap()
}

/// A VM read as root whose devices are virtio without a PCI Express capability (QEMU's i440fx
/// machine): config space is whole, so nothing blames root; the PCIe checks name what the
/// functions lack. The same tree with every `config` cut to the 64 bytes an unprivileged read
/// gets is told that root is the cause.
#[test]
fn virtio_functions_are_not_judged_for_lacking_pcie_and_a_short_config_for_needing_root() {
    let spec = r#"name = "vm"
[[function]]
bdf = "0000:00:00.0"
kind = "host_bridge"
vendor = 0x8086
device_id = 0x1237
class = 0x060000
[[function]]
bdf = "0000:00:03.0"
kind = "endpoint"
vendor = 0x1af4
device_id = 0x1000
class = 0x020000
driver = "virtio-pci"
[[function]]
bdf = "0000:00:04.0"
kind = "endpoint"
vendor = 0x1af4
device_id = 0x1001
class = 0x010000
driver = "virtio-pci"
"#;
    let topology = parse_spec("vm.toml", spec).unwrap().topology;
    let root = tempfile::tempdir().unwrap();
    let pci = root.path().join("sys/bus/pci");
    export_sysfs(&topology, &pci).unwrap();
    let machine = Machine::host_at(root.path().to_path_buf());
    let advice = advise(&machine, &options()).unwrap();
    let no_pcie =
        "no PCI Express capability (conventional PCI or virtio): it has no PCIe link registers";
    for id in [
        "mps-below-path",
        "mrrs-small",
        "ext-tag-off",
        "aer-correctable",
    ] {
        let c = report(&advice, id);
        assert_eq!(
            c.status,
            crate::advise::CheckStatus::NotJudged,
            "{id}: {c:?}"
        );
        assert!(
            c.not_judged.iter().all(|n| n.reason == no_pcie),
            "{id}: {c:?}"
        );
    }
    assert_eq!(
        report(&advice, "mps-below-path").not_judged[0].subjects,
        ["0000:00:03.0", "0000:00:04.0"]
    );
    let text = crate::advise::to_text(&advice);
    assert!(!text.contains("needs root"), "{text}");

    // Unprivileged: `config` stops at 64 bytes, before the capability list its status
    // register announces (as a real virtio function's MSI-X and vendor capabilities are).
    for bdf in ["0000:00:00.0", "0000:00:03.0", "0000:00:04.0"] {
        let config = pci.join("devices").join(bdf).join("config");
        let mut bytes = std::fs::read(&config).unwrap();
        bytes[0x06] |= 0x10;
        bytes[0x34] = 0x40;
        std::fs::write(&config, &bytes[..64]).unwrap();
    }
    let advice = advise(&Machine::host_at(root.path().to_path_buf()), &options()).unwrap();
    let c = report(&advice, "mps-below-path");
    assert_eq!(
        c.not_judged[0].reason,
        "config space past 64 bytes needs root: run pcielab as root"
    );
}

/// On a host, an AER capability with no `aer_dev_correctable` file is the kernel's AER driver
/// being off, said as such; a function with a count is judged.
#[test]
fn aer_without_counters_on_a_host_names_the_kernel_not_sim_or_snapshots() {
    let link = "{ max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }";
    let (t, m) = machine("aer = true", link, "aer = true", link, NVME);
    let devices = t.path().join("sys/bus/pci/devices");
    let _ = std::fs::remove_file(devices.join("0000:00:01.0/aer_dev_correctable"));
    std::fs::write(
        devices.join("0000:01:00.0/aer_dev_correctable"),
        "RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n",
    )
    .unwrap();
    let advice = advise(&m, &options()).unwrap();
    let c = report(&advice, "aer-correctable");
    assert_eq!(c.status, crate::advise::CheckStatus::PartlyJudged, "{c:?}");
    assert_eq!(c.judged, 1);
    assert_eq!(c.not_judged[0].subjects, ["0000:00:01.0"]);
    assert!(
        c.not_judged[0]
            .reason
            .starts_with("it has an AER capability but no aer_dev_correctable file: the kernel's AER driver is off"),
        "{c:?}"
    );
}

/// The two functions of a GPU share one link: one finding for it, not one per function.
#[test]
fn a_link_shared_by_a_multi_function_device_is_one_finding() {
    let port = "{ max_speed = 8.0, max_width = 16, speed = 8.0, width = 8 }";
    let gpu = "{ max_speed = 8.0, max_width = 16, speed = 8.0, width = 8 }";
    let audio = r#"
[[function]]
bdf = "0000:01:00.1"
kind = "endpoint"
parent = "0000:00:01.0"
vendor = 0x10de
device_id = 0x10f0
class = 0x040300
link = { max_speed = 8.0, max_width = 16, speed = 8.0, width = 8 }
driver = "snd_hda_intel"
"#;
    let (_t, m) = machine("", port, audio, gpu, GPU);
    let found = only(&m, "link-downtrained", &options());
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].subject, "link 0000:00:01.0 -> 0000:01:00.0");
    assert_eq!(found[0].severity, Severity::PerfLoss);
}

/// No `info` finding on any preset or advise fixture spec carries a gain without the
/// condition it holds on, for any intent.
#[test]
fn no_info_finding_predicts_an_unconditional_gain() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/advise");
    let mut machines: Vec<String> = crate::machine::presets::names()
        .into_iter()
        .map(|name| format!("sim:{name}"))
        .collect();
    for spec in ["sim-aspm.toml", "sim-irq.toml", "sim-mps.toml"] {
        machines.push(format!("sim:{}", fixtures.join(spec).display()));
    }
    let mut info = 0;
    for name in &machines {
        let machine = Machine::open(&name.parse().unwrap()).unwrap();
        for intent in [
            Intent::Throughput,
            Intent::Latency,
            Intent::P2p,
            Intent::Isolation,
        ] {
            let advice = advise(
                &machine,
                &AdviseOptions {
                    intent,
                    ..options()
                },
            )
            .unwrap();
            for f in advice
                .findings
                .iter()
                .filter(|f| f.severity == Severity::Info)
            {
                info += 1;
                assert!(
                    matches!(f.prediction, Prediction::NotPredicted { .. })
                        || condition(&f.prediction).is_some(),
                    "{name} {intent:?}: {} {}: {:?}",
                    f.id,
                    f.subject,
                    f.prediction
                );
            }
        }
    }
    assert!(info > 0, "no info finding to look at");
}

/// A root port, a switch's upstream port and `ports` downstream ports with ACS redirect on
/// (control 0x001d), each with one NVMe drive below it, written as a host root.
fn switch_with_redirecting_ports(ports: usize) -> (tempfile::TempDir, Machine) {
    let mut spec = format!(
        r#"name = "switch"
{ROOT_PORT}
link = {{ max_speed = 16.0, max_width = 16, speed = 16.0, width = 16 }}
[[function]]
bdf = "0000:01:00.0"
kind = "switch_upstream"
parent = "0000:00:01.0"
vendor = 0x1000
device_id = 0xc010
class = 0x060400
link = {{ max_speed = 16.0, max_width = 16, speed = 16.0, width = 16 }}
"#,
    );
    for i in 0..ports {
        let port = format!("0000:02:{:02x}.{}", i / 8, i % 8);
        let drive = format!("0000:{:02x}:00.0", 3 + i);
        spec.push_str(&format!(
            r#"[[function]]
bdf = "{port}"
kind = "switch_downstream"
parent = "0000:01:00.0"
vendor = 0x1000
device_id = 0xc010
class = 0x060400
link = {{ max_speed = 16.0, max_width = 4, speed = 16.0, width = 4 }}
acs = {{ capability = 0x001f, control = 0x001d }}
[[function]]
bdf = "{drive}"
kind = "endpoint"
parent = "{port}"
vendor = 0x144d
device_id = 0xa824
class = 0x010802
link = {{ max_speed = 16.0, max_width = 4, speed = 16.0, width = 4 }}
driver = "nvme"
"#
        ));
    }
    host_root_of(&spec)
}

#[test]
fn the_p2p_fix_names_every_redirecting_port_between_the_endpoints_in_one_finding() {
    let p2p = AdviseOptions {
        intent: Intent::P2p,
        ..options()
    };
    for ports in [3, 120] {
        let (_root, machine) = switch_with_redirecting_ports(ports);
        let found = only(&machine, "p2p-through-host", &p2p);
        assert_eq!(found.len(), 1, "{ports} ports: {found:#?}");
        let f = &found[0];
        assert_eq!(f.subject, "p2p below 0000:01:00.0");
        let every_port: Vec<String> = (0..ports)
            .map(|i| format!("0000:02:{:02x}.{}", i / 8, i % 8))
            .collect();
        assert_eq!(
            f.fix.command,
            format!(
                "pci=disable_acs_redir={} (keeps IOMMU groups; those devices can then reach each other directly)",
                every_port.join(";")
            )
        );
        assert_eq!(f.evidence.len(), ports);
        // n drives: n × (n − 1) ordered pairs, all sent through the host bridge.
        assert!(
            f.summary
                .contains(&format!("the {ports} endpoints below 0000:01:00.0 ("))
                && f.summary
                    .contains(&format!("; {} ordered pairs)", ports * (ports - 1))),
            "{}",
            f.summary
        );
    }
}
