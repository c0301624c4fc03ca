//! The observer on `--machine host` reads root ports' traffic from their PCIe PMUs through the
//! real kernel. A temporary root holds yitian710's PCI tree (as sysfs) and the PMUs of
//! fixtures/observe_pmu: `dwc_rootport_10` at root port 00:02.0 (bytes) and `pcie_bdf_100` at
//! 00:01.0 (16-byte units), both with the real `msr` PMU's type and a format that encodes their
//! data-payload events to config 0, msr's `tsc`. Each payload counter then counts the TSC, so
//! the observed byte rate must be the TSC frequency (times the unit) as `perf stat` reads it.
//! Needs root (system-wide counting), the msr PMU and perf (CI runs as root with linux-perf);
//! when any is missing it fails, never passes silently.

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

/// A root with yitian710's PCI tree and the fixture PMUs counting with msr's type.
fn host_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let platform = pcielab::machine::read_spec("yitian710").unwrap();
    pcielab::topology::export::export_sysfs(&platform.topology, &root.path().join("sys/bus/pci"))
        .unwrap();
    let msr_type = fs::read_to_string(Path::new(REAL_DEVICES).join("msr/type"))
        .unwrap_or_else(|e| panic!("the real msr PMU is needed ({REAL_DEVICES}/msr/type: {e})"));
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
        fs::write(to.join("type"), &msr_type).unwrap();
    }
    root
}

/// The TSC's ticks per second of counting, as `perf stat -a -e msr/tsc/` reads them.
fn perf_tsc_hz() -> f64 {
    let out = Command::new("perf")
        .args(["stat", "-a", "-x,", "-e", "msr/tsc/", "sleep", "1"])
        .output()
        .expect("perf must be installed (linux-perf)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.split(',').nth(2) == Some("msr/tsc/"))
        .unwrap_or_else(|| panic!("no msr/tsc/ in perf -x output:\n{stderr}"));
    let field = |i: usize| -> f64 {
        line.split(',')
            .nth(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("perf -x line without field {i}: {line}"))
    };
    field(0) / (field(3) / 1e9)
}

fn bdf(text: &str) -> Bdf {
    text.parse().unwrap()
}

#[test]
fn root_port_pmus_give_pmu_traffic_at_the_tsc_rate_perf_reads() {
    let root = host_root();
    let host = Machine::host_at(root.path().to_path_buf());
    let mut observer =
        Observer::open(&host, &[], |p| panic!("unexpected read of {}", p.display())).unwrap();
    assert_eq!(observer.warnings(), &[] as &[String]);
    let before = observer.sample().unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after = observer.sample().unwrap();
    let tsc_hz = perf_tsc_hz();
    assert!(tsc_hz > 1e8, "the TSC ticks faster than 100 MHz: {tsc_hz}");
    let r = rates(&before, &after);
    let rate = |at: &str| r.iter().find(|f| f.bdf == bdf(at)).unwrap().clone();
    for (port, bytes_per_tick) in [("00:02.0", 1.0), ("00:01.0", 16.0)] {
        let sample = after.get(bdf(port)).unwrap();
        assert!(sample.pmu, "{port}");
        assert_eq!(sample.traffic.unwrap().source, Source::Pmu, "{port}");
        let f = rate(port);
        for (dir, mbps) in [("rx", f.rx_mbps.unwrap()), ("tx", f.tx_mbps.unwrap())] {
            let hz = mbps * 1e6 / bytes_per_tick;
            let off = 100.0 * (hz / tsc_hz - 1.0);
            eprintln!(
                "{port} {dir}: {mbps:.1} MB/s = {hz:.0} counts/s; perf msr/tsc/ {tsc_hz:.0}/s \
                 ({off:+.3} %)"
            );
            assert!(
                off.abs() < 3.0,
                "{port} {dir}: {hz:.0} counts/s vs TSC {tsc_hz:.0}/s"
            );
        }
    }
    // A root port without a PMU never shows PMU traffic.
    let plain = after.get(bdf("00:00.0")).unwrap();
    assert!(!plain.pmu);
    assert_ne!(plain.traffic.map(|t| t.source), Some(Source::Pmu));
}
