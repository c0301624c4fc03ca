//! `pcielab exporter --machine host` with root-port PCIe PMUs, through the real kernel: in a
//! private mount namespace, yitian710's PCI tree (exported as sysfs) is bind-mounted over
//! /sys/bus/pci and a PMU directory over /sys/bus/event_source/devices holding the machine's
//! real PMUs beside fixtures/observe_pmu's `dwc_rootport_10` (root port 00:02.0), which has the
//! real `software` PMU's type: its Rx payload event opens `cpu-clock` (one count per nanosecond
//! of counting, so Rx bytes lie between 0 and the nanoseconds the exporter ran) and its Tx event
//! `dummy` (Tx exactly 0), so swapped directions fail. As root the port's traffic is `pmu`; as
//! `nobody` the kernel refuses system-wide counting (perf_event_paranoid >= 1 without
//! CAP_PERFMON) and the exporter still answers, the port `derived`, with one warning (where
//! perf_event_paranoid lets everyone count, `nobody` counts too). Needs root, unshare(1) and
//! setpriv(1) (util-linux); when any is missing it fails, never passes silently.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_pcielab");
const DEVICES: &str = "/sys/bus/event_source/devices";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `pci/` (yitian710's tree) and `devices/` (the real PMUs and `dwc_rootport_10`, typed as the
/// software PMU), readable by everyone.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let spec = pcielab::machine::read_spec("yitian710").unwrap();
    pcielab::topology::export_sysfs(&spec.topology, &dir.path().join("pci")).unwrap();
    let devices = dir.path().join("devices");
    fs::create_dir(&devices).unwrap();
    for entry in fs::read_dir(DEVICES).unwrap() {
        let entry = entry.unwrap();
        let real = fs::canonicalize(entry.path()).unwrap();
        std::os::unix::fs::symlink(real, devices.join(entry.file_name())).unwrap();
    }
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/observe_pmu");
    let pmu = devices.join("dwc_rootport_10");
    for sub in ["", "format", "events"] {
        fs::create_dir_all(pmu.join(sub)).unwrap();
        for entry in fs::read_dir(from.join("dwc_rootport_10").join(sub)).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                fs::copy(entry.path(), pmu.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
    let software_type = fs::read_to_string(Path::new(DEVICES).join("software/type"))
        .unwrap_or_else(|e| {
            panic!("the real software PMU is needed ({DEVICES}/software/type: {e})")
        });
    fs::write(pmu.join("type"), software_type).unwrap();
    dir
}

/// `pcielab exporter --machine host --once --json` in the namespace, as `user` when given.
fn exporter_once(fixture: &Path, user: Option<&str>) -> Output {
    let mut argv: Vec<String> = Vec::new();
    if let Some(user) = user {
        argv.extend(
            [
                "setpriv",
                &format!("--reuid={user}"),
                "--regid=nogroup",
                "--clear-groups",
            ]
            .map(String::from),
        );
    }
    argv.extend([BIN, "exporter", "--machine", "host", "--once", "--json"].map(String::from));
    let out = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "mount --bind \"$0/pci\" /sys/bus/pci && \
             mount --bind \"$0/devices\" /sys/bus/event_source/devices && exec \"$@\"",
        ])
        .arg(fixture)
        .args(&argv)
        .output()
        .expect("unshare(1) must be installed (util-linux)");
    let stderr = text(&out.stderr);
    assert!(
        !stderr.contains("mount:") && !stderr.contains("unshare:") && !stderr.contains("setpriv:"),
        "this test needs root for unshare -m and mount --bind, and setpriv: {stderr}"
    );
    out
}

fn port(doc: &serde_json::Value, bdf: &str) -> serde_json::Value {
    doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["bdf"] == bdf)
        .unwrap_or_else(|| panic!("no {bdf} in {doc}"))
        .clone()
}

#[test]
fn a_root_port_pmu_gives_pmu_traffic_and_a_refused_open_falls_back_to_derived() {
    let fixture = fixture();
    let started = std::time::Instant::now();
    let out = exporter_once(fixture.path(), None);
    let ran_ns = started.elapsed().as_nanos() as u64;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}",
        text(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let counted = port(&doc, "0000:00:02.0");
    assert_eq!(counted["pmu"], true, "{counted}");
    assert_eq!(counted["traffic"]["source"], "pmu", "{counted}");
    // Rx is cpu-clock: the nanoseconds between enabling the counters and the one sample, so
    // more than none and no more than the exporter's whole run. Tx is dummy: nothing.
    let rx = counted["traffic"]["rx_bytes"].as_u64().unwrap();
    assert!(
        rx > 0 && rx <= ran_ns,
        "Rx {rx} B should be the ns counted, within the {ran_ns} ns the exporter ran: {counted}"
    );
    assert_eq!(counted["traffic"]["tx_bytes"], 0, "{counted}");
    let plain = port(&doc, "0000:00:01.0");
    assert_eq!(plain["pmu"], false, "{plain}");
    assert_ne!(plain["traffic"]["source"], "pmu", "{plain}");

    let out = exporter_once(fixture.path(), Some("nobody"));
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "a refused PMU is not an error: {stderr}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let as_nobody = port(&doc, "0000:00:02.0");
    assert_eq!(
        as_nobody["pmu"], true,
        "the PMU is still detected: {as_nobody}"
    );
    let paranoid: i32 = fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    if paranoid > 0 {
        // Refused: one warning naming the setting, and the port falls back to derived.
        assert_eq!(stderr.matches("warning").count(), 1, "{stderr}");
        assert!(
            stderr.contains("perf_event_paranoid is") && stderr.contains("derived"),
            "{stderr}"
        );
        assert_ne!(as_nobody["traffic"]["source"], "pmu", "{as_nobody}");
    } else {
        // This kernel lets everyone count system-wide.
        assert!(!stderr.contains("warning"), "{stderr}");
        assert_eq!(as_nobody["traffic"]["source"], "pmu", "{as_nobody}");
    }
}
