//! Wall time to simulate the Yitian seed's §4.2 experiment (fio reads on the full sim:yitian710
//! preset, counted through perf's multiplexing). Targets: the 200-s run counted every 4 ms at
//! least 1000× faster than real time (under 200 ms per run); and (issue 12) the 20,000-s run with
//! Rx and Tx time-shared at 1 ms rotation within 2× the 200-s run's time. The `stepwise` row
//! counts the 200-s run with `pmu::emulate_stepwise`, the tick-by-tick reference
//! `emulate` must match exactly (stepping is refused beyond `MAX_ROTATIONS` rotations, so the
//! 20,000-s run has no stepwise row).

use criterion::{criterion_group, criterion_main, Criterion};
use pcielab::machine::Machine;
use pcielab::pmu::{emulate, emulate_stepwise, CountOptions, CounterBackend};
use pcielab::pmu::{resolve, EventSpec, ResolvedEvent};
use pcielab::sim::SimBackend;
use pcielab::sim::{parse_workload, Workload};

fn seed_4_2(runtime_s: u64) -> Workload {
    let argv: Vec<String> = format!(
        "fio --filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m \
         --numjobs=4 --time_based=1 --runtime={runtime_s} --group_reporting --name=test-read"
    )
    .split_whitespace()
    .map(String::from)
    .collect();
    parse_workload(&argv, |p| {
        Err(pcielab::Error::runtime(p.display().to_string()))
    })
    .unwrap()
}

fn bench_seed(c: &mut Criterion) {
    let machine = Machine::open(&"sim:yitian710".parse().unwrap())
        .and_then(|m| m.simulator())
        .unwrap();
    let w = seed_4_2(200);
    let spec: EventSpec = "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/".parse().unwrap();
    let spec_tx: EventSpec = "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/".parse().unwrap();
    c.bench_function("sim seed 4.2: 200 s read, one event", |b| {
        b.iter(|| {
            let mut backend = SimBackend::new(&machine, w.clone());
            let groups = vec![vec![resolve(backend.devices(), &spec).unwrap()]];
            backend.count(&groups, &CountOptions::default()).unwrap()
        })
    });
    c.bench_function("sim seed 4.2: 200 s read, Rx and Tx time-shared", |b| {
        b.iter(|| {
            let mut backend = SimBackend::new(&machine, w.clone());
            let groups = vec![
                vec![resolve(backend.devices(), &spec).unwrap()],
                vec![resolve(backend.devices(), &spec_tx).unwrap()],
            ];
            backend.count(&groups, &CountOptions::default()).unwrap()
        })
    });

    // Simulation and counting of Rx and Tx time-shared at 1 ms rotation, by run length and
    // emulation: what a long `sim:` monitoring run costs.
    let pmus = machine.pmus();
    let groups: Vec<Vec<ResolvedEvent>> = [&spec, &spec_tx]
        .iter()
        .map(|s| vec![resolve(&pmus, s).unwrap()])
        .collect();
    let options = CountOptions {
        mux_interval_ns: 1_000_000,
        interval_ns: None,
        read_period_ns: None,
    };
    let mut long = c.benchmark_group("sim seed 4.2 Rx+Tx at 1 ms rotation");
    long.sample_size(10);
    for runtime_s in [200, 20_000] {
        let w = seed_4_2(runtime_s);
        long.bench_function(format!("{runtime_s} s"), |b| {
            b.iter(|| {
                let run = machine.run(&w).unwrap();
                let truth = run.truth(&pmus);
                emulate(&truth, &pmus, &groups, &options, run.duration_ns).unwrap()
            })
        });
    }
    let w = seed_4_2(200);
    long.bench_function("200 s stepwise", |b| {
        b.iter(|| {
            let run = machine.run(&w).unwrap();
            let truth = run.truth(&pmus);
            emulate_stepwise(&truth, &pmus, &groups, &options, run.duration_ns).unwrap()
        })
    });
    long.finish();
}

criterion_group!(benches, bench_seed);
criterion_main!(benches);
