//! Counter invariants for random fio workloads on simulated machines: every counter comes from
//! the same emitted TLPs, so payload, TLP counts and DLLPs agree at any instant, never run
//! backwards, and at the end account for fio's bytes exactly once plus protocol traffic.

use super::{open_preset, preset_text, spec_file};
use crate::pcie::Bdf;
use crate::pmu::{EventDef, Family};
use crate::sim::workload::{self, Summary};
use crate::sim::DirectionStats;
use crate::sim::{SimRun, SimulatedPcie};
use proptest::prelude::*;

fn ev(name: &str) -> &'static EventDef {
    Family::DwcRootPort.find(name).unwrap()
}

fn counters(run: &SimRun, rp: Bdf, t: u64) -> Vec<u64> {
    [
        "Rx_PCIe_TLP_Data_Payload",
        "Tx_PCIe_TLP_Data_Payload",
        "rx_memory_write",
        "rx_memory_read",
        "rx_completion_with_data",
        "tx_memory_write",
        "tx_memory_read",
        "tx_completion_with_data",
        "tx_ack_dllp",
        "rx_ack_dllp",
        "tx_update_fc_dllp",
        "rx_update_fc_dllp",
        "lcrc_error",
        "tx_nak_dllp",
        "rx_nak_dllp",
        "retry_tlp",
    ]
    .iter()
    .map(|n| run.dwc_count(rp, ev(n), None, t))
    .collect()
}

fn simulate(machine: &SimulatedPcie, fio: &str) -> SimRun {
    let argv: Vec<String> = fio.split_whitespace().map(String::from).collect();
    let w = workload::parse(&argv, |p| {
        Err(crate::Error::runtime(p.display().to_string()))
    })
    .unwrap();
    machine.run(&w).unwrap()
}

/// `preset` with a PMU on its root ports: Rockchip's (1d87) have none, as no kernel binds one,
/// so rk3588-evb's Gen3 x4 NVMe is counted behind a root port of Alibaba's id (1ded) instead.
fn with_a_bound_pmu(preset: &str) -> SimulatedPcie {
    let text = preset_text(preset).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bound.toml");
    std::fs::write(
        &spec,
        text.replacen("vendor = 0x1d87", "vendor = 0x1ded", 1),
    )
    .unwrap();
    let machine = spec_file(&spec).unwrap();
    assert!(!machine.pmus().is_empty(), "{preset}");
    machine
}

fn totals(run: &SimRun) -> (u64, u64) {
    let Summary::Fio { groups } = &run.summary else {
        panic!("not fio")
    };
    let bytes = |d: &Option<DirectionStats>| d.map_or(0, |d| d.io_bytes);
    groups.iter().fold((0, 0), |(r, w), g| {
        (r + bytes(&g.read), w + bytes(&g.write))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn counters_agree_with_each_other(
        preset in prop::sample::select(vec!["yitian710", "qemu-seed", "rk3588-evb"]),
        rw in prop::sample::select(vec!["read", "write", "randread", "randwrite", "readwrite", "randrw"]),
        bs_kib in prop::sample::select(vec![4u64, 8, 64, 128, 1024]),
        numjobs in 1u32..4,
        iodepth in 1u32..64,
        size_mib in 1u64..64,
        ber_exp in prop::option::of(7i32..12),
        points in prop::collection::vec(0.0f64..1.2, 6),
    ) {
        let mut machine = open_preset(preset).unwrap();
        machine.config.ber = ber_exp.map_or(0.0, |e| 10f64.powi(-e));
        let file = match preset {
            "yitian710" => "./test.big",
            "qemu-seed" => "/dev/nvme1n1",
            _ => "/mnt/test",
        };
        let run = simulate(&machine, &format!(
            "fio --filename={file} --rw={rw} --bs={bs_kib}k --size={size_mib}m --numjobs={numjobs} \
             -iodepth={iodepth} -ioengine=libaio --direct=1 --name=p"
        ));
        let device = machine.config.device_for_path(file).unwrap();
        let rp = machine.root_port(device).unwrap();
        let mut times: Vec<u64> = points.iter().map(|p| (p * run.duration_ns as f64) as u64).collect();
        times.sort();
        times.push(run.duration_ns);
        let mut previous = vec![0u64; 16];
        for &t in &times {
            let c = counters(&run, rp, t);
            for (i, (now, before)) in c.iter().zip(&previous).enumerate() {
                prop_assert!(now >= before, "counter {i} went backwards at {t}");
            }
            let tally = run.port_tally(rp, t);
            // Payload in 16-byte units: at least bytes/16, at most one partial unit per TLP.
            for (units, dir) in [(c[0], 0usize), (c[1], 1)] {
                let bytes = tally.payload_bytes[dir];
                let data_tlps = if dir == 0 { c[2] + c[4] } else { c[5] + c[7] };
                prop_assert!(units * 16 >= bytes && units * 16 < bytes + 16 * data_tlps + 16);
            }
            // At most one Ack or UpdateFC per TLP acknowledged.
            prop_assert!(c[8] <= c[2] + c[3] + c[4] && c[10] <= c[2] + c[3] + c[4]);
            prop_assert!(c[9] <= c[5] + c[6] + c[7] && c[11] <= c[5] + c[6] + c[7]);
            // Every bad TLP is Nak'ed by the receiver and replayed by the sender.
            prop_assert_eq!(c[12], c[13]);
            prop_assert_eq!(c[14], c[15]);
            prop_assert!(c[12] <= c[2] + c[3] + c[4]);
            previous = c;
        }
        let end = previous;
        // Every read request is answered by at least one completion with data.
        prop_assert!(end[7] >= end[3] && end[4] >= end[6]);
        // fio's bytes are in the payload once, plus a little protocol.
        let (read_bytes, write_bytes) = totals(&run);
        let tally = run.port_tally(rp, run.duration_ns);
        prop_assert!(tally.payload_bytes[0] >= read_bytes && tally.payload_bytes[1] >= write_bytes);
        let data = (read_bytes + write_bytes) as f64;
        let all = (tally.payload_bytes[0] + tally.payload_bytes[1]) as f64;
        prop_assert!(all <= data * 1.05 + 4096.0, "{all} vs {data}");
        if machine.config.ber == 0.0 {
            prop_assert_eq!(end[12] + end[14], 0);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Counting a random simulated workload with perf's multiplexing gives exactly the readings
    /// of the kernel's tick-by-tick algorithm: payload and TLP counters, residency cycles,
    /// narrow error and DLLP counters that wrap, idle stretches and print intervals included.
    #[test]
    fn multiplexed_counts_match_the_stepwise_kernel(
        preset in prop::sample::select(vec!["yitian710", "rk3588-evb"]),
        rw in prop::sample::select(vec!["read", "write", "randrw"]),
        bs_kib in prop::sample::select(vec![4u64, 128, 1024]),
        length in prop_oneof![
            (1u64..64).prop_map(|mib| format!("--size={mib}m")),
            (1u64..3).prop_map(|s| format!("--time_based=1 --runtime={s}")),
        ],
        idle in any::<bool>(),
        ber_exp in prop::option::of(7i32..10),
        picks in prop::collection::vec(prop::collection::vec(0usize..8, 1..=2), 1..=4),
        mux_ms in 1u64..=4,
        interval_ms in prop::option::of(100u64..500),
        read_ms in prop::option::of(10u64..200),
    ) {
        use crate::pmu::resolve;
        use crate::pmu::session::{emulate, emulate_stepwise, CountOptions};
        let mut machine = with_a_bound_pmu(preset);
        machine.config.ber = ber_exp.map_or(0.0, |e| 10f64.powi(-e));
        let file = if preset == "yitian710" { "./test.big" } else { "/mnt/test" };
        let run = if idle {
            simulate(&machine, "sleep 1.5")
        } else {
            simulate(&machine, &format!(
                "fio --filename={file} --rw={rw} --bs={bs_kib}k {length} -iodepth=16 \
                 -ioengine=libaio --direct=1 --name=p"
            ))
        };
        let rp = machine.root_port(machine.config.device_for_path(file).unwrap()).unwrap();
        let pmus = machine.pmus();
        let pmu = pmus.iter().find(|p| p.root_port == Some(rp)).unwrap().name.clone();
        let names = [
            "Rx_PCIe_TLP_Data_Payload", "Tx_PCIe_TLP_Data_Payload", "L0", "L1",
            "tx_ack_dllp", "rx_memory_write", "LCRC_Error", "tx_completion_with_data",
        ];
        let groups: Vec<Vec<_>> = picks
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(|&i| resolve(&pmus, &format!("{pmu}/{}/", names[i]).parse().unwrap()).unwrap())
                    .collect()
            })
            .collect();
        let options = CountOptions {
            mux_interval_ns: mux_ms * 1_000_000,
            interval_ns: interval_ms.map(|ms| ms * 1_000_000),
            read_period_ns: read_ms.map(|ms| ms * 1_000_000),
        };
        let truth = run.truth(&pmus);
        let fast = emulate(&truth, &pmus, &groups, &options, run.duration_ns).unwrap();
        let stepwise = emulate_stepwise(&truth, &pmus, &groups, &options, run.duration_ns).unwrap();
        prop_assert_eq!(fast, stepwise);
    }
}

/// A long run counted in closed form (the Yitian 710 PMU guide's §4.2 reads for 900 s, Rx, Tx and two TLP counters
/// in three groups rotated every millisecond: 900,000 rotations) gives the kernel's
/// tick-by-tick readings exactly.
#[test]
fn a_long_closed_form_count_matches_the_stepwise_kernel() {
    use crate::pmu::resolve;
    use crate::pmu::session::{emulate, emulate_stepwise, CountOptions};
    let machine = open_preset("yitian710").unwrap();
    let run = simulate(
        &machine,
        "fio --filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m \
         --numjobs=4 --time_based=1 --runtime=900 --group_reporting --name=test-read",
    );
    let pmus = machine.pmus();
    let groups: Vec<Vec<_>> = [
        &["Rx_PCIe_TLP_Data_Payload"][..],
        &["Tx_PCIe_TLP_Data_Payload"],
        &["rx_memory_write", "tx_completion_with_data"],
    ]
    .iter()
    .map(|group| {
        group
            .iter()
            .map(|name| resolve(&pmus, &format!("pcie_bdf_200/{name}/").parse().unwrap()).unwrap())
            .collect()
    })
    .collect();
    let options = CountOptions {
        mux_interval_ns: 1_000_000,
        interval_ns: Some(60_000_000_000),
        read_period_ns: None,
    };
    let truth = run.truth(&pmus);
    let fast = emulate(&truth, &pmus, &groups, &options, run.duration_ns).unwrap();
    let stepwise = emulate_stepwise(&truth, &pmus, &groups, &options, run.duration_ns).unwrap();
    assert!(fast.totals[0].value > 1_000_000_000, "{:?}", fast.totals);
    assert_eq!(fast, stepwise);
}
