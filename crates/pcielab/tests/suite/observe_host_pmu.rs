//! The observer on `--machine host` reads root ports' traffic from their PCIe PMUs through the
//! real kernel. A temporary root holds yitian710's PCI tree (as sysfs) and the PMUs of
//! fixtures/observe_pmu: `dwc_rootport_10` at root port 00:02.0 (bytes) and `pcie_bdf_100` at
//! 00:01.0 (16-byte units), both with the real `software` PMU's type and a format that encodes
//! their payload events to two different software events: on `dwc_rootport_10` Rx is
//! `cpu-clock` (a count per nanosecond of counting) and Tx is `dummy` (never counts), on
//! `pcie_bdf_100` the other way round. So each direction's observed byte rate must be the rate
//! `perf stat` reads for the event it maps to (times the unit): 10^9 counts/s one way, 0 the
//! other; a swap of Rx and Tx anywhere on the way fails on both ports.
//! Needs root (system-wide counting), the software PMU and perf (CI runs as root with
//! linux-perf); when any is missing it fails, never passes silently.

use std::fs;
use std::path::Path;
use std::process::Command;

use pcielab::machine::Machine;
use pcielab::observe::{rates, Observer, Source};
use pcielab::pcie::Bdf;

const REAL_DEVICES: &str = "/sys/bus/event_source/devices";

fn fixture_pmus() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/observe_pmu")
}

/// A root with yitian710's PCI tree and the fixture PMUs counting with the software PMU's type.
fn host_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let spec = pcielab::machine::read_spec("yitian710").unwrap();
    pcielab::topology::export_sysfs(&spec.topology, &root.path().join("sys/bus/pci")).unwrap();
    let software_type = fs::read_to_string(Path::new(REAL_DEVICES).join("software/type"))
        .unwrap_or_else(|e| {
            panic!("the real software PMU is needed ({REAL_DEVICES}/software/type: {e})")
        });
    let devices = root.path().join("sys/bus/event_source/devices");
    for pmu in ["dwc_rootport_10", "pcie_bdf_100"] {
        let to = devices.join(pmu);
        for sub in ["", "format", "events"] {
            fs::create_dir_all(to.join(sub)).unwrap();
            for entry in fs::read_dir(fixture_pmus().join(pmu).join(sub)).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_file() {
                    fs::copy(entry.path(), to.join(sub).join(entry.file_name())).unwrap();
                }
            }
        }
        fs::write(to.join("type"), &software_type).unwrap();
    }
    root
}

/// Counts per second of counting of each of `events` on CPU 0 (the fixture PMUs' cpumask), as
/// `perf stat -C 0 -x,` reads them; cpu-clock is converted from perf's msec back to counts (ns).
fn perf_rates_on_cpu0(events: &[&str]) -> Vec<f64> {
    let mut args = vec!["stat", "-C", "0", "-x,"];
    for e in events {
        args.extend(["-e", e]);
    }
    args.extend(["sleep", "1"]);
    let out = Command::new("perf")
        .args(&args)
        .output()
        .expect("perf must be installed (linux-perf)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    events
        .iter()
        .map(|event| {
            let line = stderr
                .lines()
                .find(|l| l.split(',').nth(2) == Some(event))
                .unwrap_or_else(|| panic!("no {event} in perf -x output:\n{stderr}"));
            let field = |i: usize| -> f64 {
                line.split(',')
                    .nth(i)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("perf -x line without field {i}: {line}"))
            };
            let count = if line.split(',').nth(1) == Some("msec") {
                field(0) * 1e6
            } else {
                field(0)
            };
            count / (field(3) / 1e9)
        })
        .collect()
}

fn bdf(text: &str) -> Bdf {
    text.parse().unwrap()
}

#[test]
fn root_port_pmus_count_rx_and_tx_from_the_events_their_files_name() {
    let root = host_root();
    let host = Machine::host_at(root.path().to_path_buf());
    let mut observer =
        Observer::open(&host, &[], |p| panic!("unexpected read of {}", p.display())).unwrap();
    assert_eq!(observer.warnings(), &[] as &[String]);
    let before = observer.sample().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after = observer.sample().unwrap();
    let perf = perf_rates_on_cpu0(&["cpu-clock", "dummy"]);
    let (clock_hz, dummy_hz) = (perf[0], perf[1]);
    assert!(
        (clock_hz / 1e9 - 1.0).abs() < 0.01,
        "perf's cpu-clock counts a nanosecond per nanosecond: {clock_hz}"
    );
    assert_eq!(dummy_hz, 0.0, "perf's dummy never counts");
    let r = rates(&before, &after);
    let rate = |at: &str| r.iter().find(|f| f.bdf == bdf(at)).unwrap().clone();
    // (port, bytes per count, the perf rate its Rx event counts at, its Tx event's)
    for (port, bytes_per_count, rx_hz, tx_hz) in [
        ("00:02.0", 1.0, clock_hz, dummy_hz),
        ("00:01.0", 16.0, dummy_hz, clock_hz),
    ] {
        let sample = after.get(bdf(port)).unwrap();
        assert!(sample.pmu, "{port}");
        assert_eq!(sample.traffic.unwrap().source, Source::Pmu, "{port}");
        let f = rate(port);
        for (dir, mbps, perf_hz) in [
            ("rx", f.rx_mbps.unwrap(), rx_hz),
            ("tx", f.tx_mbps.unwrap(), tx_hz),
        ] {
            let want_mbps = perf_hz * bytes_per_count / 1e6;
            eprintln!("{port} {dir}: {mbps:.3} MB/s; perf's event gives {want_mbps:.3} MB/s");
            assert!(
                (mbps - want_mbps).abs() <= 0.03 * want_mbps.max(1e-3),
                "{port} {dir}: {mbps} MB/s, but its event counts {perf_hz:.0}/s x \
                 {bytes_per_count} B = {want_mbps} MB/s"
            );
        }
    }
    // A root port without a PMU never shows PMU traffic.
    let plain = after.get(bdf("00:00.0")).unwrap();
    assert!(!plain.pmu);
    assert_ne!(plain.traffic.map(|t| t.source), Some(Source::Pmu));
}
