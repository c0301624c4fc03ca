//! The observe layer in a real Linux guest (the QEMU lab, preset qemu-seed): while fio writes a
//! known number of bytes to the NVMe behind the switch, `pcielab exporter` inside the guest
//! derives the same bytes for that NVMe, both switch ports and the root port (from the guest
//! kernel's /sys/block counters); then QEMU's monitor injects a PCIe error into the root port
//! and the exporter, and `pcielab top -b` running across the injection, show the guest kernel's
//! AER count go up. Boots a guest: about a minute.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The guest script: exporter snapshots around fio, an error injected through the monitor hook
/// while `top -b` watches the root port, and the exporter served over HTTP and scraped with
/// busybox wget.
const SCRIPT: &str = r#"set -e
cd /results
pcielab exporter --machine host --once > before.prom
fio --output-format=json --output=/results/observe-fio.json /pcielab/job.fio
pcielab exporter --machine host --once > after.prom
pcielab top --machine host -b -d 0.5 --filter 00:04 > top.txt &
toppid=$!
i=0
while [ $i -lt 100 ] && ! grep -q '^0000:00:04.0 ' top.txt; do sleep 0.2; i=$((i+1)); done
echo "@@pcielab monitor pcie_aer_inject_error -c d0000_00_04_0 BAD_TLP"
echo "@@pcielab monitor pcie_aer_inject_error d0000_00_04_0 COMP_TIME"
i=0
while [ $i -lt 60 ] && ! grep -q "TOTAL_ERR_NONFATAL 1" /sys/bus/pci/devices/0000:00:04.0/aer_dev_nonfatal; do
  sleep 1; i=$((i+1))
done
pcielab exporter --machine host --once > injected.prom
sleep 1.5
kill $toppid
ip link set lo up
pcielab exporter --machine host --listen 127.0.0.1:9464 2> exporter.log &
pid=$!
i=0
while [ $i -lt 60 ] && ! grep -q serving exporter.log; do sleep 1; i=$((i+1)); done
wget -q -O served.prom http://127.0.0.1:9464/metrics
kill $pid
"#;

/// `name{labels} value` lines of a Prometheus text body, keyed by `name{labels}`.
fn series(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            Some((key.to_string(), value.parse().ok()?))
        })
        .collect()
}

fn value(all: &BTreeMap<String, f64>, name: &str, function: &str, extra: &str) -> f64 {
    let found: Vec<f64> = all
        .iter()
        .filter(|(k, _)| {
            k.starts_with(&format!("{name}{{function=\"{function}\"")) && k.contains(extra)
        })
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(found.len(), 1, "{name} {function} {extra}: {found:?}");
    found[0]
}

#[test]
fn guest_derived_bytes_match_fio_and_an_injected_error_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("observe.sh");
    std::fs::write(&script, SCRIPT).unwrap();
    let job = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/observe-write.fio");
    let results = dir.path().join("results");
    let out = Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args([
            "lab",
            "run",
            "qemu-seed",
            "--monitor-hook",
            "--json",
            "--script",
        ])
        .arg(&script)
        .arg("--fio")
        .arg(&job)
        .arg("--out")
        .arg(&results)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read_to_string(results.join(name)).unwrap();
    let fio: serde_json::Value = serde_json::from_str(&read("observe-fio.json")).unwrap();
    let written = fio["jobs"][0]["write"]["io_bytes"].as_f64().unwrap();
    assert_eq!(written, 16.0 * 1024.0 * 1024.0);

    let (before, after) = (series(&read("before.prom")), series(&read("after.prom")));
    // The NVMe, the switch's downstream and upstream ports and the root port all carried
    // exactly fio's bytes away from the root complex (a disk write: the device reads memory),
    // and nothing toward it.
    for function in [
        "0000:03:00.0",
        "0000:02:00.0",
        "0000:01:00.0",
        "0000:00:04.0",
    ] {
        let delta = |name: &str| {
            value(&after, name, function, "source=\"derived\"")
                - value(&before, name, function, "source=\"derived\"")
        };
        assert_eq!(delta("pcielab_tx_bytes_total"), written, "{function}");
        assert_eq!(delta("pcielab_rx_bytes_total"), 0.0, "{function}");
        // Wire bytes: 128 B MPS completions with 12-16 B headers and framing, plus DLLPs.
        let wire = delta("pcielab_tx_wire_bytes_total");
        assert!(
            wire > written * 1.1 && wire < written * 1.3,
            "{function}: {wire}"
        );
    }
    // The other NVMe below the switch did nothing.
    let idle = value(&after, "pcielab_tx_bytes_total", "0000:04:00.0", "derived")
        - value(&before, "pcielab_tx_bytes_total", "0000:04:00.0", "derived");
    assert_eq!(idle, 0.0);

    // The guest kernel counted the non-fatal error QEMU injected into the root port, and the
    // exporter shows it, on a plain snapshot and when served over HTTP in the guest.
    let injected = series(&read("injected.prom"));
    let served = series(&read("served.prom"));
    for (name, severity) in [
        ("pcielab_aer_errors_total", "severity=\"nonfatal\""),
        ("pcielab_aer_rootport_errors_total", "severity=\"nonfatal\""),
    ] {
        assert_eq!(value(&after, name, "0000:00:04.0", severity), 0.0);
        assert_eq!(value(&injected, name, "0000:00:04.0", severity), 1.0);
        assert_eq!(value(&served, name, "0000:00:04.0", severity), 1.0);
    }
    // top -b, started before the injection: its first frame has no errors since start, its
    // last one the non-fatal error, on the root port's row (AER_C/NF/F column).
    let top = read("top.txt");
    let aer_cells: Vec<&str> = top
        .lines()
        .filter(|l| l.starts_with("0000:00:04.0 "))
        .map(|l| l.split_whitespace().nth(9).unwrap())
        .collect();
    assert!(aer_cells.len() >= 2, "{top}");
    let nonfatal = |cell: &str| cell.split('/').nth(1).unwrap().to_string();
    assert_eq!(nonfatal(aer_cells[0]), "0", "{top}");
    assert_eq!(nonfatal(aer_cells[aer_cells.len() - 1]), "1", "{top}");
    let dmesg = read("dmesg.txt");
    assert!(
        dmesg.contains(
            "0000:00:04.0: AER: Uncorrected (Non-Fatal) error message received from 0000:00:04.0"
        ),
        "{dmesg}"
    );
}
