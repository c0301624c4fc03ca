//! Wall time to simulate the Yitian seed's §4.2 experiment (200 s of fio reads on the full
//! sim:yitian710 preset, counted through perf's multiplexing every 4 ms). Target: at least
//! 1000× faster than real time, i.e. under 200 ms per run.

use criterion::{criterion_group, criterion_main, Criterion};
use pcielab::machine::Machine;
use pcielab::pmu::session::{CountOptions, CounterBackend};
use pcielab::pmu::{resolve, EventSpec};
use pcielab::sim::{workload, SimBackend};

const SEED_4_2: &str = "fio --filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=read --bs=1m --numjobs=4 --time_based=1 --runtime=200 --group_reporting --name=test-read";

fn seed_4_2(c: &mut Criterion) {
    let machine = Machine::open(&"sim:yitian710".parse().unwrap())
        .and_then(|m| m.simulated_pcie())
        .unwrap();
    let argv: Vec<String> = SEED_4_2.split_whitespace().map(String::from).collect();
    let w = workload::parse(&argv, |p| {
        Err(pcielab::Error::runtime(p.display().to_string()))
    })
    .unwrap();
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
}

criterion_group!(benches, seed_4_2);
criterion_main!(benches);
