//! The Yitian 710 seed's experiments (§4.1-4.4) run verbatim against the simulated SATA path
//! of the yitian710 preset (root port 0000:00:02.0): counts against fio's bytes, throughputs against the seed's,
//! and time-shared estimates against the simulator's true counts.

use super::open_preset;
use crate::pmu::session::{CountOptions, CounterBackend, Reading};
use crate::pmu::{resolve, EventSpec};
use crate::sim::workload::{self, Summary};
use crate::sim::DirectionStats;
use crate::sim::SimBackend;
use crate::sim::{SimRun, SimulatedPcie};

fn yitian710() -> SimulatedPcie {
    open_preset("yitian710").unwrap()
}

struct Stat {
    readings: Vec<Reading>,
    run: SimRun,
}

fn stat(events: &[&str], fio: &str) -> Stat {
    let machine = yitian710();
    let argv: Vec<String> = std::iter::once("fio")
        .chain(fio.split_whitespace())
        .map(String::from)
        .collect();
    let w = workload::parse(&argv, |p| {
        Err(crate::Error::runtime(p.display().to_string()))
    })
    .unwrap();
    let mut backend = SimBackend::new(&machine, w);
    let groups: Vec<Vec<_>> = events
        .iter()
        .map(|e| vec![resolve(backend.devices(), &e.parse::<EventSpec>().unwrap()).unwrap()])
        .collect();
    let counts = backend.count(&groups, &CountOptions::default()).unwrap();
    Stat {
        readings: counts.totals,
        run: backend.run.unwrap(),
    }
}

fn group(run: &SimRun) -> (Option<DirectionStats>, Option<DirectionStats>) {
    match &run.summary {
        Summary::Fio { groups } => (groups[0].read, groups[0].write),
        other => panic!("{other:?}"),
    }
}

fn mib_s(d: &DirectionStats) -> f64 {
    d.bw_bytes as f64 / 1048576.0
}

fn within(value: f64, expected: f64, percent: f64) -> bool {
    (value - expected).abs() <= expected * percent / 100.0
}

const RX: &str = "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/";
const TX: &str = "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/";

#[test]
fn seed_4_1_read_2g_per_job() {
    let s = stat(&[RX], "--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m --size=2g --numjobs=4  --group_reporting --name=test-read");
    let (read, write) = group(&s.run);
    let read = read.unwrap();
    assert!(write.is_none());
    assert_eq!(read.io_bytes, 8 << 30);
    assert_eq!(read.total_ios, 8192);
    assert!(within(mib_s(&read), 517.0, 5.0), "{} MiB/s", mib_s(&read));
    let r = s.readings[0];
    assert_eq!(r.running_ns, r.enabled_ns);
    let counted = r.value * 16;
    // Data plus 7 sixteen-byte units of protocol per command (FIS writes, MSI, register reads).
    assert_eq!(counted, read.io_bytes + 8192 * 7 * 16);
    assert!(counted > read.io_bytes && within(counted as f64, read.io_bytes as f64, 0.1));
    // Little's law: 256 I/Os in flight at 527 IOPS; the seed's fio saw lat avg=486.52 ms.
    assert!(
        within(read.lat_avg_us / 1e3, 486.52, 5.0),
        "{} us",
        read.lat_avg_us
    );
}

#[test]
fn seed_4_2_two_hundred_seconds_passes_two_to_the_32() {
    let s = stat(&[RX], "--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m --numjobs=4 --time_based=1 --runtime=200 --group_reporting --name=test-read");
    let read = group(&s.run).0.unwrap();
    let r = s.readings[0];
    assert!(r.value > 1 << 32, "{}", r.value);
    assert!(within((r.value * 16) as f64, read.io_bytes as f64, 0.1));
    assert!(r.value * 16 > read.io_bytes);
    assert!(within(mib_s(&read), 517.0, 5.0));
    assert!(
        read.runtime_ms >= 200_000 && read.runtime_ms < 201_000,
        "{}",
        read.runtime_ms
    );
}

#[test]
fn seed_4_3_write_counts_tx() {
    let s = stat(&[TX], "--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=write --bs=1m --numjobs=4 --time_based=1 --runtime=20 --group_reporting --name=test-write");
    let (read, write) = group(&s.run);
    assert!(read.is_none());
    let write = write.unwrap();
    // Not a prediction: yitian710's program_mbps = 230 (MB/s) was chosen from this run's 216
    // MiB/s, so the rate only echoes that parameter (230 MB/s = 219.3 MiB/s). What is checked:
    // the write is program-bound, and Tx counts the written bytes.
    let program_mib_s = 230e6 / f64::from(1 << 20);
    assert!(
        within(mib_s(&write), program_mib_s, 1.0),
        "{} MiB/s",
        mib_s(&write)
    );
    let counted = s.readings[0].value * 16;
    assert!(counted > write.io_bytes && within(counted as f64, write.io_bytes as f64, 0.1));
}

#[test]
fn seed_4_4_readwrite_time_shares_one_counter() {
    let s = stat(&[RX, TX], "--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=readwrite --bs=1m --numjobs=4 --time_based=1 --runtime=20 --group_reporting --name=test-rw");
    let (read, write) = group(&s.run);
    let (read, write) = (read.unwrap(), write.unwrap());
    let machine = yitian710();
    let rp = "00:02.0".parse().unwrap();
    let def = |e: &str| resolve(&machine.pmus(), &e.parse().unwrap()).unwrap().def;
    for (reading, event, fio_bytes) in [
        (s.readings[0], RX, read.io_bytes),
        (s.readings[1], TX, write.io_bytes),
    ] {
        let pct = reading.running_percent();
        assert!((49.0..51.0).contains(&pct), "{event}: {pct}%");
        let truth = s.run.dwc_count(rp, def(event), None, s.run.duration_ns) as f64;
        let estimate = reading.estimate().unwrap();
        assert!(
            within(estimate, truth, 1.0),
            "{event}: {estimate} vs {truth}"
        );
        assert!(within(truth * 16.0, fio_bytes as f64, 0.1), "{event}");
    }
    // The seed: read 161, write 168 MiB/s; the model serves reads and writes one command at a
    // time. Each direction on its own (a sum would let one error hide the other).
    // Both come out at 155 MiB/s: read −3.8 %, write −7.8 % (docs/sim.md); each is held to
    // a 2.5-point band around that, so a change that moved either direction fails here.
    let (read_error, write_error) = (
        (mib_s(&read) / 161.0 - 1.0) * 100.0,
        (mib_s(&write) / 168.0 - 1.0) * 100.0,
    );
    assert!(
        (-5.0..=-2.5).contains(&read_error),
        "read {read_error:+.1} %"
    );
    assert!(
        (-9.0..=-6.5).contains(&write_error),
        "write {write_error:+.1} %"
    );
}

#[test]
fn seed_pmu_counts_are_predicted_not_fitted() {
    // The seed's own Rx/Tx_PCIe_TLP_Data_Payload counts. No simulator parameter was chosen from
    // them: §4.1 moves a fixed 8 GiB, so its count tests only the per-command protocol traffic
    // (FIS writes, MSI, register reads: 7 units per command) — the seed's count implies 4.8.
    let s = stat(&[RX], "--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m --size=2g --numjobs=4  --group_reporting --name=test-read");
    let seed_4_1 = 536_910_432.0;
    assert!(
        within(s.readings[0].value as f64, seed_4_1, 0.01),
        "{}",
        s.readings[0].value
    );
    // §4.2 and §4.3 are time-based, so their counts follow the simulated throughput: §4.2's rests
    // on the SATA link model (with its assumed 1 µs FIS turnaround, docs/sim.md), §4.3's on
    // program_mbps, which was fitted on this very run's fio rate (216 MiB/s): only §4.2 is a
    // prediction, and it is 2.3 % high because the read throughput is (527 against 517 MiB/s).
    let s = stat(&[RX], "--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m --numjobs=4 --time_based=1 --runtime=200 --group_reporting --name=test-read");
    let seed_4_2 = 6_777_637_176.0;
    assert!(
        within(s.readings[0].value as f64, seed_4_2, 3.0),
        "{}",
        s.readings[0].value
    );
}
