//! Simulator scenarios beyond the Yitian 710 PMU guide: the Rockchip "standard EP + dmatest" DMA-vs-size
//! table, fair sharing of a switch uplink by two NVMe drives, ASPM L1 residency of an idle link,
//! and bit-error injection moving the error counters.

use super::{open_preset, preset_names, spec_file};
use crate::model::platform::P;
use crate::pmu::Family;
use crate::sim::workload::{self, DmaDirection, Summary};
use crate::sim::DirectionStats;
use crate::sim::{SimRun, SimulatedPcie};

/// An RK3588 root complex (Gen3 x4) with a second RK3588 as a standard endpoint whose DMA
/// engine runs dmatest (the Rockchip guide's §4.3.2 setup), with ASPM L1 enabled and the platform
/// model's defaults.
const RK3588_EP: &str = r#"
name = "rk3588-ep"
description = "RK3588 EVB1 root complex with an RK3588 standard endpoint"

[[function]]
bdf = "0000:00:00.0"
kind = "root_port"
vendor = 0x1d87
device_id = 0x3588
class = 0x060400
link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }
mps = 256
mps_supported = 256
mrrs = 512
aspm = "l1"

[[function]]
bdf = "0000:01:00.0"
kind = "endpoint"
vendor = 0x1d87
device_id = 0x3588
class = 0x058000
parent = "0000:00:00.0"
link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }
mps = 256
mps_supported = 256
mrrs = 512
aspm = "l1"
[function.device]
model = "dma"
"#;

fn machine_from(text: &str) -> SimulatedPcie {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, text).unwrap();
    spec_file(&path).unwrap()
}

fn run(machine: &SimulatedPcie, argv: &str) -> SimRun {
    let argv: Vec<String> = argv.split_whitespace().map(String::from).collect();
    let w = workload::parse(&argv, |p| {
        Err(crate::Error::runtime(p.display().to_string()))
    })
    .unwrap();
    machine.run(&w).unwrap()
}

#[test]
fn dmatest_times_every_transfer_with_the_platform_model() {
    // sim:rk3588-ep's [platform] is fitted on the Rockchip guide's §4.3.2 table, so agreeing with that
    // table would prove nothing; what is checked is that the simulator and `pcielab model
    // --platform` are one model (docs/calibration.md has the fit against the Rockchip guide).
    let m = open_preset("rk3588-ep").unwrap();
    let r = run(&m, "dmatest --transfers 200");
    let Summary::DmaTest { device, rows } = &r.summary else {
        panic!("{:?}", r.summary)
    };
    let link = m.link_params(*device);
    assert_eq!(rows.len(), 12);
    for row in rows {
        let model = m.platform.dma_mbps(row.direction, row.size, &link);
        assert!(
            (row.mbps / model - 1.0).abs() < 1e-6,
            "{:?} {}: sim {} vs model {model}",
            row.direction,
            row.size,
            row.mbps
        );
    }
    // Small transfers are set-up bound, big ones bandwidth bound.
    let write = |s: u64| {
        rows.iter()
            .find(|x| x.direction == DmaDirection::Write && x.size == s)
            .unwrap()
            .mbps
    };
    assert!(write(4 << 20) / write(64) > 150.0);
}

fn bw(run: &SimRun, group: usize) -> DirectionStats {
    let Summary::Fio { groups } = &run.summary else {
        panic!()
    };
    groups[group].read.unwrap()
}

#[test]
fn two_nvme_behind_one_switch_uplink_share_it_fairly() {
    let m = open_preset("qemu-seed").unwrap();
    let alone = run(&m, "fio --filename=/dev/nvme1n1 --rw=read --bs=128k --size=64m -iodepth=16 -ioengine=libaio --direct=1 --name=a");
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("two.fio");
    std::fs::write(
        &job,
        "[global]\nrw=read\nbs=128k\nsize=64m\niodepth=16\nioengine=libaio\ndirect=1\n\
         [one]\nfilename=/dev/nvme1n1\n[two]\nfilename=/dev/nvme2n1\n",
    )
    .unwrap();
    let argv = vec!["fio".to_string(), job.display().to_string()];
    let w = workload::parse(&argv, |p| {
        std::fs::read_to_string(p).map_err(|e| crate::Error::runtime(e.to_string()))
    })
    .unwrap();
    let both = m.run(&w).unwrap();
    let single = bw(&alone, 0).bw_bytes as f64;
    // Both jobs are one group: together they get what one got alone, half each.
    let shared = bw(&both, 0).bw_bytes as f64;
    assert!((shared / single - 1.0).abs() < 0.02, "{shared} vs {single}");
    assert_eq!(bw(&both, 0).io_bytes, 128 << 20);
    // The uplink (Gen1 x1, 250 MB/s raw) is the limit, not the drives.
    assert!(single < 250e6 && single > 180e6, "{single}");
}

#[test]
fn idle_link_with_aspm_l1_accrues_l1_residency() {
    let m = machine_from(RK3588_EP);
    let r = run(&m, "sleep 0.01");
    let rp = "00:00.0".parse().unwrap();
    let f = Family::DwcRootPort;
    let cycles = |n: &str| r.dwc_count(rp, f.find(n).unwrap(), None, r.duration_ns);
    let clock_mhz = m.config.pmu_clock_mhz;
    let expected_l1 = (10e6 - m.config.l1_idle_ns) * clock_mhz / 1e3;
    assert!(
        (cycles("L1") as f64 - expected_l1).abs() <= 1.0,
        "{}",
        cycles("L1")
    );
    assert_eq!(cycles("one_cycle"), (10e6 * clock_mhz / 1e3) as u64);
    assert_eq!(cycles("L0") + cycles("L1"), cycles("one_cycle"));
    assert_eq!(cycles("L1_Entry"), 1);
    assert_eq!(cycles("L1_to_Recovery_Entry"), 0); // still in L1 at the end
                                                   // Busy with DMA, the link never idles long enough.
    let busy = run(&m, "dmatest --sizes 1M --dir write --transfers 20");
    assert_eq!(
        busy.dwc_count(rp, f.find("L1").unwrap(), None, busy.duration_ns),
        0
    );
}

#[test]
fn bit_errors_move_the_error_group_consistently() {
    let mut m = open_preset("yitian710").unwrap();
    let fio = "fio --filename=./t --rw=readwrite --bs=1m --size=512m -iodepth=32 -ioengine=libaio --direct=1 --name=e";
    let rp = "00:02.0".parse().unwrap();
    let f = Family::DwcRootPort;
    let clean = run(&m, fio);
    let count = |r: &SimRun, n: &str| r.dwc_count(rp, f.find(n).unwrap(), None, r.duration_ns);
    assert_eq!(
        count(&clean, "LCRC_Error") + count(&clean, "Rx_Nak_DLLP"),
        0
    );
    m.config.ber = 1e-8;
    let noisy = run(&m, fio);
    let rx_bits = noisy.port_tally(rp, noisy.duration_ns).wire_bytes[0] * 8.0;
    let expected = (rx_bits * 1e-8) as u64;
    assert!(expected > 10, "{expected}");
    // Ground truth (the 8-bit hardware counter would wrap at 256; perf sees it modulo).
    assert_eq!(count(&noisy, "LCRC_Error"), expected);
    assert_eq!(count(&noisy, "Tx_Nak_DLLP"), expected);
    assert_eq!(count(&noisy, "Retry_TLP"), count(&noisy, "Rx_Nak_DLLP"));
    // Replays are below the transaction layer: the payload counters do not change.
    assert_eq!(
        count(&noisy, "Rx_PCIe_TLP_Data_Payload"),
        count(&clean, "Rx_PCIe_TLP_Data_Payload")
    );
}

#[test]
fn rockchip_crystalmark_commands_run_verbatim_on_rk3588() {
    let m = open_preset("rk3588-evb").unwrap();
    let cmd = |rw: &str, bs: &str, size: &str| {
        format!(
            "fio -filename=/mnt/test -direct=1 -iodepth 32 -thread -rw={rw} -ioengine=libaio \
             -bs={bs} -size={size} -numjobs=1 -runtime=180 -group_reporting -name=cm"
        )
    };
    let stats = |r: &SimRun| {
        let Summary::Fio { groups } = &r.summary else {
            panic!()
        };
        groups[0].read.or(groups[0].write).unwrap()
    };
    // The preset's [platform] is fitted on these very commands' results (§8.2.2), so what is
    // checked is that the simulator takes its limits from it: the drive's own read rate for
    // SEQ1M, one thread's CPU time per I/O for RND4K.
    let p = &m.platform;
    let seq = stats(&run(&m, &cmd("read", "1024K", "10G")));
    let mb_s = seq.bw_bytes as f64 / 1e6;
    let drive = p.get(P::DriveReadMbps);
    assert!((mb_s / drive - 1.0).abs() < 0.01, "{mb_s} vs {drive}");
    let rnd = stats(&run(&m, &cmd("randread", "4K", "4G")));
    let cpu_bound = 1e9 / p.get(P::CpuReadIoNs);
    assert!(
        (rnd.iops / cpu_bound - 1.0).abs() < 0.01,
        "{} vs {cpu_bound}",
        rnd.iops
    );
    assert_eq!(rnd.io_bytes, 4 << 30);
}

#[test]
fn every_preset_opens_as_a_simulated_machine() {
    for name in preset_names() {
        let m = open_preset(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!m.topology.functions().is_empty(), "{name}");
    }
    let yitian = open_preset("yitian710").unwrap();
    assert_eq!(yitian.devices.len(), 3); // the SATA SSD and two NIC ports
    assert_eq!(yitian.config.cwd, "/home/user");
}

#[test]
fn the_labs_seed_job_file_runs_on_qemu_seed() {
    // The QEMU P2PDMA lab write-up's job file as the lab ships it (escaped colons, stonewall groups).
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../pcielab-cli/tests/fixtures/nvme.fio"
    );
    let m = open_preset("qemu-seed").unwrap();
    let argv = vec!["fio".to_string(), path.to_string()];
    let w = workload::parse(&argv, |p| {
        std::fs::read_to_string(p).map_err(|e| crate::Error::runtime(e.to_string()))
    })
    .unwrap();
    let r = m.run(&w).unwrap();
    let Summary::Fio { groups } = &r.summary else {
        panic!()
    };
    assert_eq!(groups.len(), 4);
    for (g, name) in groups.iter().zip(["read1", "write1", "read2", "write2"]) {
        assert_eq!(g.name, name);
        let d = if name.starts_with("read") {
            g.read
        } else {
            g.write
        };
        assert_eq!(d.unwrap().io_bytes, 32 << 20, "{name}");
    }
}

#[test]
fn nettest_runs_both_connectx_ports_at_line_rate() {
    let m = open_preset("yitian710").unwrap();
    let r = run(&m, "nettest --seconds 0.2 --frame 1518");
    let Summary::NetTest { rows } = &r.summary else {
        panic!("{:?}", r.summary)
    };
    assert_eq!(rows.len(), 4); // b1:00.0 and b1:00.1, rx and tx
                               // 25 Gb/s less preamble and inter-frame gap: 1518 of every 1538 bytes.
    let line = 25.0 * 1518.0 / 1538.0;
    for row in rows {
        assert!((row.gbps - line).abs() < line * 0.002, "{row:?}");
    }
    // The Gen3 x16 root port carries both ports. Received payload: the frames, a 64-byte
    // completion entry per frame either way, a 4-byte MSI-X per 64 frames.
    let rp = "b0:00.0".parse().unwrap();
    let rx = r.port_tally(rp, r.duration_ns).payload_bytes[0];
    let frames: u64 = rows.iter().map(|x| x.frames).sum();
    let frames_in: u64 = rows
        .iter()
        .filter(|x| x.direction == "rx")
        .map(|x| x.bytes)
        .sum();
    assert_eq!(rx, frames_in + frames * 64 + frames / 64 * 4);
    let e = workload::parse(
        &["nettest".into(), "--device".into(), "04:00.0".into()],
        |_| unreachable!(),
    )
    .unwrap();
    assert_eq!(m.run(&e).unwrap_err().exit_code(), 2);
}
