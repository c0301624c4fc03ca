use super::*;
use crate::error::Error;
use crate::pcie::bdf;
use crate::sim::workload::Summary;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| s.to_string()).collect()
}

fn no_files(p: &Path) -> Result<String> {
    Err(Error::bad_input(format!(
        "unexpected read of {}",
        p.display()
    )))
}

fn rate_of(rates: &[FunctionRate], at: &str) -> FunctionRate {
    rates.iter().find(|r| r.bdf == bdf(at)).unwrap().clone()
}

#[test]
fn a_simulated_read_plays_at_the_rate_fio_reports() {
    let machine: Machine = "sim:yitian710".parse().unwrap();
    let job = argv(&[
        "fio",
        "--filename=/dev/sda",
        "--rw=read",
        "--bs=1m",
        "--time_based",
        "--runtime=10",
        "--name=r",
    ]);
    let mut observer = Observer::open(&machine, &job, no_files).unwrap();
    // fio's runtime, plus the I/Os in flight at its end.
    let length = observer.workload_ns().unwrap();
    assert!(
        (10_000_000_000..10_010_000_000).contains(&length),
        "{length}"
    );
    // The same workload run again: the simulator is deterministic.
    let run = machine
        .simulator()
        .unwrap()
        .run(&crate::sim::workload::parse(&job, no_files).unwrap())
        .unwrap();
    let Summary::Fio { groups } = &run.summary else {
        panic!("not fio");
    };
    let fio_mbps = groups[0].read.as_ref().unwrap().bw_bytes as f64 / 1e6;
    let a = observer.sample_at(2_000_000_000).unwrap();
    let b = observer.sample_at(5_000_000_000).unwrap();
    let port = b.get(bdf("00:02.0")).unwrap();
    assert!(port.pmu);
    assert_eq!(port.traffic.unwrap().source, Source::Pmu);
    let r = rates(&a, &b);
    let rp = rate_of(&r, "00:02.0");
    let rx = rp.rx_mbps.unwrap();
    assert!((rx / fio_mbps - 1.0).abs() < 0.01, "{rx} vs fio {fio_mbps}");
    // Reads send almost nothing down (the controller's descriptor and command fetches).
    assert!(rp.tx_mbps.unwrap() < rx * 0.01);
    // The disk's own bytes are derived; they agree with the port's PMU.
    let sata = rate_of(&r, "04:00.0");
    assert_eq!(sata.source, Some(Source::Derived));
    assert!((sata.rx_mbps.unwrap() / rx - 1.0).abs() < 0.01);
    // Gen2 x2, MPS 256: achievable = 1000 MB/s x 256/276 (12 B header, 8 B framing) less SKP.
    let achievable = 1000.0 * 256.0 / 276.0 * 1538.0 / 1542.0;
    assert!((port.achievable_mbps.unwrap() - achievable).abs() < 0.01);
    assert!((rp.rx_percent.unwrap() - rx / achievable * 100.0).abs() < 1e-9);
    // Wire bytes carry the headers and framing: 276/256 of the payload each way up.
    let wire = rp.rx_wire_mbps.unwrap();
    assert!((wire / rx - 276.0 / 256.0).abs() < 0.01, "{wire} vs {rx}");
    // An empty port's link is down; the SATA port trained to what both ends can do.
    assert!(b.get(bdf("00:03.0")).unwrap().link_down);
    assert!(b.get(bdf("00:02.0")).unwrap().downgraded);
    // After the workload the counts stay at its totals.
    let end = observer.sample_at(20_000_000_000).unwrap();
    let later = observer.sample_at(30_000_000_000).unwrap();
    assert_eq!(
        end.get(bdf("00:02.0")).unwrap().traffic,
        later.get(bdf("00:02.0")).unwrap().traffic
    );
}

#[test]
fn an_idle_aspm_port_spends_its_time_in_l1() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("l1.toml");
    std::fs::write(
        &spec,
        "name = \"l1\"\n[[function]]\nbdf = \"0000:00:00.0\"\nkind = \"root_port\"\n\
         vendor = 0x1ded\ndevice_id = 0x8000\nclass = 0x060400\n\
         link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }\naspm = \"l1\"\n",
    )
    .unwrap();
    let machine = format!("sim:{}", spec.display())
        .parse::<Machine>()
        .unwrap();
    let mut observer = Observer::open(&machine, &[], no_files).unwrap();
    let a = observer.sample_at(1_000_000_000).unwrap();
    let b = observer.sample_at(3_000_000_000).unwrap();
    let states = b.get(bdf("00:00.0")).unwrap().link_states.unwrap();
    // Idle from 0: L0 for the L1 entry time (32 us by default), L1 ever after.
    assert_eq!(states.l0_ns, 32_000);
    assert_eq!(states.l1_ns, 3_000_000_000 - 32_000);
    let p = rates(&a, &b)[0].link_state_percent.unwrap();
    assert!((p.l1 - 100.0).abs() < 1e-9 && p.l0 == 0.0, "{p:?}");
    // yitian710's ports run without ASPM: all L0.
    let yitian: Machine = "sim:yitian710".parse().unwrap();
    let mut observer = Observer::open(&yitian, &[], no_files).unwrap();
    let s = observer.sample_at(1_000_000_000).unwrap();
    let states = s.get(bdf("00:02.0")).unwrap().link_states.unwrap();
    assert_eq!((states.l0_ns, states.l1_ns), (1_000_000_000, 0));
    assert_eq!(s.get(bdf("04:00.0")).unwrap().link_states, None);
}

#[test]
fn workloads_play_on_sim_only() {
    let host = "host".parse::<Machine>().unwrap();
    let err = Observer::open(&host, &argv(&["sleep", "1"]), no_files)
        .err()
        .unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(err.message().contains("sim:"), "{err}");
    let sim: Machine = "sim:yitian710".parse().unwrap();
    let err = Observer::open(&sim, &argv(&["dd", "if=/dev/zero"]), no_files)
        .err()
        .unwrap();
    assert_eq!(err.exit_code(), 2);
}

/// qemu-seed exported as a live sysfs under a temporary root, with block and net devices.
struct Fixture {
    root: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let root = tempfile::tempdir().unwrap();
        let spec = crate::machine::read_spec("qemu-seed").unwrap();
        crate::topology::export::export_sysfs(&spec.topology, &root.path().join("sys/bus/pci"))
            .unwrap();
        let f = Fixture { root };
        f.disk("nvme0n1", "0000:00:03.0", 0, 0);
        f.disk("nvme1n1", "0000:03:00.0", 0, 0);
        f.net("eth0", "0000:04:00.0", 0, 0);
        fs::create_dir_all(f.root.path().join("sys/devices/virtual/block/loop0")).unwrap();
        symlink(
            "../devices/virtual/block/loop0",
            f.root.path().join("sys/block/loop0"),
        )
        .unwrap();
        f.set_loop(4096);
        f
    }

    fn device_dir(&self, function: &str) -> PathBuf {
        fs::canonicalize(self.root.path().join("sys/bus/pci/devices").join(function)).unwrap()
    }

    fn disk(&self, name: &str, function: &str, read: u64, written: u64) {
        let dir = self.device_dir(function).join("nvme").join(name);
        fs::create_dir_all(&dir).unwrap();
        let link = self.root.path().join("sys/block").join(name);
        if link.symlink_metadata().is_err() {
            fs::create_dir_all(self.root.path().join("sys/block")).unwrap();
            symlink(&dir, &link).unwrap();
        }
        fs::write(
            dir.join("stat"),
            format!("1 0 {} 0 1 0 {} 0 0 0 0\n", read / 512, written / 512),
        )
        .unwrap();
    }

    fn net(&self, name: &str, function: &str, rx: u64, tx: u64) {
        let dir = self.device_dir(function).join("net").join(name);
        fs::create_dir_all(dir.join("statistics")).unwrap();
        let link = self.root.path().join("sys/class/net").join(name);
        if link.symlink_metadata().is_err() {
            fs::create_dir_all(self.root.path().join("sys/class/net")).unwrap();
            symlink(&dir, &link).unwrap();
        }
        fs::write(dir.join("statistics/rx_bytes"), format!("{rx}\n")).unwrap();
        fs::write(dir.join("statistics/tx_bytes"), format!("{tx}\n")).unwrap();
    }

    fn set_loop(&self, sectors: u64) {
        fs::write(
            self.root
                .path()
                .join("sys/devices/virtual/block/loop0/stat"),
            format!("1 0 {sectors} 0 1 0 {sectors} 0\n"),
        )
        .unwrap();
    }

    fn observer(&self) -> Observer {
        let host = Machine::host_at(self.root.path().to_path_buf());
        Observer::open(&host, &[], no_files).unwrap()
    }
}

fn bytes(sample: &Sample, at: &str) -> Option<(u64, u64)> {
    let t = sample.get(bdf(at)).unwrap().traffic?;
    assert_eq!(t.source, Source::Derived);
    Some((t.rx_bytes, t.tx_bytes))
}

#[test]
fn derived_bytes_sum_up_the_tree_to_switch_and_root_ports() {
    let fx = Fixture::new();
    let mut observer = fx.observer();
    let first = observer.sample_at(0).unwrap();
    assert_eq!(bytes(&first, "00:04.0"), Some((0, 0)));
    fx.disk("nvme1n1", "0000:03:00.0", 8 << 20, 1 << 20);
    fx.net("eth0", "0000:04:00.0", 3000, 700);
    fx.disk("nvme0n1", "0000:00:03.0", 512, 0);
    fx.set_loop(1 << 30); // a loop device belongs to no function
    let s = observer.sample_at(1_000_000_000).unwrap();
    let nvme1 = (8 << 20, 1 << 20);
    let nic = (3000, 700);
    assert_eq!(bytes(&s, "03:00.0"), Some(nvme1));
    assert_eq!(bytes(&s, "04:00.0"), Some(nic));
    // Each downstream port carries its own device; upstream and root port carry both.
    assert_eq!(bytes(&s, "02:00.0"), Some(nvme1));
    assert_eq!(bytes(&s, "02:01.0"), Some(nic));
    let both = (nvme1.0 + nic.0, nvme1.1 + nic.1);
    assert_eq!(bytes(&s, "01:00.0"), Some(both));
    assert_eq!(bytes(&s, "00:04.0"), Some(both));
    // The integrated NVMe is on the root bus: its own bytes, nobody above it.
    assert_eq!(bytes(&s, "00:03.0"), Some((512, 0)));
    assert_eq!(s.get(bdf("00:00.0")).unwrap().traffic, None);
    assert_eq!(
        s.get(bdf("03:00.0")).unwrap().devices,
        vec!["block/nvme1n1"]
    );
    let r = rates(&first, &s);
    let rp = rate_of(&r, "00:04.0");
    assert!((rp.rx_mbps.unwrap() - both.0 as f64 / 1e6).abs() < 1e-9);
    // QEMU's links: 2.5 GT/s x1, MPS 128.
    let achievable = 250.0 * 128.0 / 148.0 * 1538.0 / 1542.0;
    assert!((s.get(bdf("00:04.0")).unwrap().achievable_mbps.unwrap() - achievable).abs() < 1e-6);

    // The NIC's driver restarts its counters and the disk vanishes: totals never go back.
    fx.net("eth0", "0000:04:00.0", 100, 0);
    fs::remove_file(fx.root.path().join("sys/block/nvme1n1")).unwrap();
    let s2 = observer.sample_at(2_000_000_000).unwrap();
    assert_eq!(bytes(&s2, "04:00.0"), Some((3100, 700)));
    assert_eq!(bytes(&s2, "00:04.0"), Some((nvme1.0 + 3100, nvme1.1 + 700)));
    assert_eq!(bytes(&s2, "03:00.0"), Some(nvme1));
}

#[test]
fn a_snapshot_has_link_facts_and_no_traffic() {
    let fx = Fixture::new();
    let snapshot = format!("snapshot:{}", fx.root.path().join("sys/bus/pci").display())
        .parse::<Machine>()
        .unwrap();
    let mut observer = Observer::open(&snapshot, &[], no_files).unwrap();
    let s = observer.sample_at(0).unwrap();
    let rp = s.get(bdf("00:04.0")).unwrap();
    assert_eq!(rp.traffic, None);
    assert_eq!(rp.link.capable_gts, Some(16.0));
    assert_eq!(rp.link.current_width, Some(1));
    assert!(rp.downgraded);
}

/// On a host, a sample written over an older one of the same layout (as `top` writes over the
/// sample before the previous) writes again only the functions that can vary, and `top`'s kept
/// frames make again only their rows: both match what is taken and built afresh while traffic
/// starts, moves and stops, a device appears under a quiet function and goes, a link retrains,
/// AER counters rise and a function is unplugged (a re-plan).
#[test]
fn samples_and_frames_written_over_match_those_made_afresh() {
    use super::top::{Frames, SortKey, TopFrame, View};
    let fx = Fixture::new();
    let devices = fx.root.path().join("sys/bus/pci/devices");
    // The NIC's port and link carry no traffic: only its health can move its rows.
    fs::remove_file(fx.root.path().join("sys/class/net/eth0")).unwrap();
    let port = devices.join("0000:02:01.0");
    fs::write(
        port.join("aer_dev_correctable"),
        "RxErr 0\nTOTAL_ERR_COR 0\n",
    )
    .unwrap();
    // The NIC reads its AER counters and takes its trained state from the port.
    fs::write(
        devices.join("0000:04:00.0/aer_dev_fatal"),
        "TOTAL_ERR_FATAL 0\n",
    )
    .unwrap();
    let mut observer = fx.observer();
    let first = observer.sample_at(0).unwrap();
    let varying = first.varying.as_ref().unwrap();
    assert!(varying.len() < first.functions.len(), "{varying:?}");
    let (mut prev, mut latest) = (first.clone(), first.clone());
    let views = [
        View::default(),
        View {
            tree: false,
            ..View::default()
        },
        View {
            sort: SortKey::Rx,
            ..View::default()
        },
        View {
            filter: "nvme".into(),
            ..View::default()
        },
    ];
    let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(3723);
    let mut frames = Frames::default();
    let mut unplugged = false;
    for step in 1..=28u64 {
        match step {
            2..=5 => fx.disk("nvme1n1", "0000:03:00.0", step << 20, step << 10),
            6 => fx.net("eth1", "0000:00:00.0", 5000, 100),
            7 => fx.net("eth1", "0000:00:00.0", 9000, 300),
            9 => fs::remove_file(fx.root.path().join("sys/class/net/eth1")).unwrap(),
            11 => fs::write(port.join("current_link_speed"), "5.0 GT/s PCIe\n").unwrap(),
            13 => fs::write(
                port.join("aer_dev_correctable"),
                "RxErr 3\nTOTAL_ERR_COR 3\n",
            )
            .unwrap(),
            15 => fs::remove_file(devices.join("0000:04:00.0")).unwrap(),
            _ => {}
        }
        let t_ns = step * 500_000_000;
        std::mem::swap(&mut prev, &mut latest);
        observer.sample_at_into(t_ns, &mut latest).unwrap();
        assert_eq!(latest, observer.sample_at(t_ns).unwrap(), "step {step}");
        unplugged |= latest.get(bdf("04:00.0")).is_none();
        let view = &views[(step as usize / 2) % views.len()];
        let afresh = TopFrame::build(view, &first, &prev, &latest, now);
        assert_eq!(
            frames.build(view, &first, &prev, &latest, now),
            &afresh,
            "step {step}"
        );
        // Every third frame is built and not printed, as while paused.
        if step % 3 != 0 {
            assert_eq!(&*frames.text(), afresh.text(), "step {step}");
        }
    }
    assert!(unplugged);
}

/// Health read at most every second: a retrain and an AER error show at the first sample a
/// second after the last health read, while traffic moves at every sample in between; without
/// the limit the next sample shows them.
#[test]
fn health_every_repeats_the_last_health_read_until_it_is_due() {
    let fx = Fixture::new();
    let port = fx.root.path().join("sys/bus/pci/devices/0000:02:01.0");
    fs::write(port.join("aer_dev_correctable"), "TOTAL_ERR_COR 0\n").unwrap();
    let mut limited = fx.observer();
    limited.health_every(Duration::from_millis(1000));
    let mut every = fx.observer();
    let trained = |s: &Sample| s.get(bdf("02:01.0")).unwrap().link.current_gts;
    let errors = |s: &Sample| s.get(bdf("02:01.0")).unwrap().link.aer.correctable;
    let before = limited.sample_at(0).unwrap();
    assert_eq!(trained(&before), Some(2.5));
    assert_eq!(errors(&before), Some(0));
    fs::write(port.join("current_link_speed"), "5.0 GT/s PCIe\n").unwrap();
    fs::write(port.join("aer_dev_correctable"), "TOTAL_ERR_COR 4\n").unwrap();
    fx.net("eth0", "0000:04:00.0", 3000, 700);
    let early = limited.sample_at(999_999_999).unwrap();
    assert_eq!(trained(&early), Some(2.5));
    assert_eq!(errors(&early), Some(0));
    assert_eq!(bytes(&early, "02:01.0"), Some((3000, 700)));
    let fresh = every.sample_at(999_999_999).unwrap();
    assert_eq!(trained(&fresh), Some(5.0));
    assert_eq!(errors(&fresh), Some(4));
    let due = limited.sample_at(1_000_000_000).unwrap();
    assert_eq!(trained(&due), Some(5.0));
    assert_eq!(errors(&due), Some(4));
    // The NIC below the port takes the port's trained state, when read.
    assert_eq!(due.get(bdf("04:00.0")).unwrap().link.current_gts, Some(5.0));
}
