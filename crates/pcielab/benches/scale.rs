//! Criterion benchmark `scale`: how the work behind `topo --p2p` and `fit` grows with the host
//! and the data (docs/performance.md has the growth exponents measured from it).
//!
//! - `p2p_groups/sriov/N`: N endpoints as 16 root ports, each with a device of N/16 functions
//!   (an SR-IOV physical function and its virtual functions): a handful of groups however large N.
//! - `p2p_groups/fanout/N`: N endpoints each behind its own switch downstream port (64 per switch):
//!   every endpoint its own group, the worst case for grouping.
//! - `fit/N`: fitting N mixed read/write DMA rows.
//! - `lspci_bridges/N`: reading an `lspci -v` listing of N bridges, 32 per bus, each bus's
//!   bridges leading to the next bus: every function's parent is looked up among many bridges,
//!   which must stay linear in N (a search per function made 100k bridges take minutes).
//! - `fit_distinct/N`: fitting N DMA rows that all differ (writes and reads of N different
//!   sizes from 64 B to 4 MiB, made by a platform with per-TLP slots and rate limits that bind
//!   only on large transfers): nothing collapses, every row is its own residual.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use pcielab::model::fit::{fit, predict};
use pcielab::model::platform::{DmaDirection, PlatformModel, P};
use pcielab::model::transfer::LinkParams;
use pcielab::model::{parse_measurements, Measurement, Workload};
use pcielab::pcie::{Bdf, Generation};
use pcielab::topology::p2p::{group_verdicts, groups, Cpu};
use pcielab::topology::read_lspci;
use pcielab::topology::{Function, Kind, Topology};

const ROOT_PORTS: usize = 16;

fn function(bdf: Bdf, kind: Kind, parent: Option<Bdf>) -> Function {
    let mut f = Function::new(bdf, 0x1b36, 0x0010, 0x010802, kind);
    f.parent = parent;
    f
}

/// Bus `bus`'s `i`-th function (8 per device, 32 devices per bus).
fn on_bus(bus: usize, i: usize) -> Bdf {
    Bdf::new(0, bus as u8, (i / 8) as u8, (i % 8) as u8)
}

fn sriov_host(endpoints: usize) -> Topology {
    let mut functions = vec![function(Bdf::new(0, 0, 0, 0), Kind::HostBridge, None)];
    let per_port = endpoints / ROOT_PORTS;
    let mut bus = 1;
    for port in 0..ROOT_PORTS {
        let rp = Bdf::new(0, 0, (port + 1) as u8, 0);
        functions.push(function(rp, Kind::RootPort, None));
        // Virtual functions take buses after the physical function's, 256 per bus.
        for i in 0..per_port {
            functions.push(function(
                on_bus(bus + i / 256, i % 256),
                Kind::Endpoint,
                Some(rp),
            ));
        }
        bus += per_port.div_ceil(256);
    }
    Topology::new(functions)
}

fn fanout_host(endpoints: usize) -> Topology {
    const PORTS_PER_SWITCH: usize = 64;
    let mut functions = vec![function(Bdf::new(0, 0, 0, 0), Kind::HostBridge, None)];
    // (domain, next free bus, switches placed in this domain so far)
    let mut at = (0u16, 1usize, 0usize);
    let next_bus = |at: &mut (u16, usize, usize)| {
        at.1 += 1;
        (at.0, (at.1 - 1) as u8)
    };
    for switch in 0..endpoints.div_ceil(PORTS_PER_SWITCH) {
        // A switch's buses (upstream, downstream, one per port) all in one domain, as
        // firmware numbers them; its root port on that domain's bus 0, past the host bridge.
        if at.1 + 2 + PORTS_PER_SWITCH > 256 {
            at = (at.0 + 1, 1, 0);
        }
        let k = at.2;
        at.2 += 1;
        let (d, b) = next_bus(&mut at);
        let rp = Bdf::new(d, 0, (k % 31 + 1) as u8, (k / 31 % 8) as u8);
        functions.push(function(rp, Kind::RootPort, None));
        let up = Bdf::new(d, b, 0, 0);
        functions.push(function(up, Kind::SwitchUpstream, Some(rp)));
        let (_, down_bus) = next_bus(&mut at);
        for port in 0..PORTS_PER_SWITCH.min(endpoints - switch * PORTS_PER_SWITCH) {
            let down = Bdf::new(d, down_bus, (port / 8) as u8, (port % 8) as u8);
            functions.push(function(down, Kind::SwitchDownstream, Some(up)));
            let (_, ep_bus) = next_bus(&mut at);
            functions.push(function(
                Bdf::new(d, ep_bus, 0, 0),
                Kind::Endpoint,
                Some(down),
            ));
        }
    }
    Topology::new(functions)
}

/// `rows` dmatest-like CSV rows: reads and writes at sizes from 64 B to 4 MiB.
fn measurements(rows: usize) -> String {
    let mut text = String::from("size_bytes,direction,MBps\n");
    for i in 0..rows {
        let size = 64u64 << (i % 17);
        let write = i % 2 == 0;
        let rate = if write { 3000.0 } else { 2500.0 } * size as f64 / (size as f64 + 2048.0);
        let jitter = 1.0 + ((i * 7919) % 11) as f64 / 1000.0;
        text += &format!(
            "{size},{},{:.1}\n",
            if write { "write" } else { "read" },
            rate * jitter
        );
    }
    text
}

/// `count` bridges as `lspci -v` lists them, 32 per bus, each to the next bus.
fn bridge_listing(count: usize) -> String {
    let mut text = String::new();
    for i in 0..count {
        let (domain, bus, device) = (i / (256 * 32), (i / 32) % 256, i % 32);
        text += &format!(
            "{domain:04x}:{bus:02x}:{device:02x}.0 PCI bridge [0604]: Intel [8086:3c02]\n\
             \tBus: primary={bus:02x}, secondary={:02x}, subordinate=ff, sec-latency=0\n\n",
            (bus + 1) % 256
        );
    }
    text
}

fn lspci_bridges(c: &mut Criterion) {
    let mut group = c.benchmark_group("lspci_bridges");
    group.sample_size(10);
    for count in [25_000, 50_000, 100_000, 200_000] {
        let text = bridge_listing(count);
        group.bench_with_input(BenchmarkId::from_parameter(count), &text, |b, text| {
            b.iter(|| read_lspci("bench.txt", black_box(text)).unwrap())
        });
    }
    group.finish();
}

fn p2p(c: &mut Criterion) {
    let mut group = c.benchmark_group("p2p_groups");
    group.sample_size(10);
    for endpoints in [256, 512, 1024, 2048, 4096, 8192] {
        let host = sriov_host(endpoints);
        group.bench_with_input(BenchmarkId::new("sriov", endpoints), &host, |b, host| {
            b.iter(|| {
                let g = groups(black_box(host));
                group_verdicts(host, &g, Cpu::Intel { family: 6 })
            })
        });
    }
    for endpoints in [256, 512, 1024, 2048, 4096, 8192] {
        let host = fanout_host(endpoints);
        group.bench_with_input(BenchmarkId::new("fanout", endpoints), &host, |b, host| {
            b.iter(|| {
                let g = groups(black_box(host));
                group_verdicts(host, &g, Cpu::Intel { family: 6 })
            })
        });
    }
    group.finish();
}

fn fitting(c: &mut Criterion) {
    let mut group = c.benchmark_group("fit");
    group.sample_size(10);
    let link = LinkParams::new(Generation::Gen3, 4);
    for rows in [100, 1_000, 10_000] {
        let parsed = parse_measurements("bench.csv", &measurements(rows), &link).unwrap();
        group.bench_with_input(BenchmarkId::from_parameter(rows), &parsed, |b, rows| {
            b.iter(|| fit(black_box(rows), &link, "bench").unwrap())
        });
    }
    group.finish();
}

/// `rows` DMA rows of distinct sizes spread evenly in log size over 64 B to 4 MiB, writes and
/// reads alternating, as a platform with slots and rate limits predicts them, ±1 % jitter.
fn distinct_rows(rows: usize, link: &LinkParams) -> Vec<Measurement> {
    let mut truth = PlatformModel::default();
    truth.set(P::DmaSetupNs, 1500.0);
    truth.set(P::PostedWriteMbps, 2900.0);
    truth.set(P::CompletionMbps, 2600.0);
    truth.set(P::DmaWriteTlpNs, 90.0);
    truth.set(P::DmaReadTlpNs, 150.0);
    truth.set(P::DmaMaxReadRequests, 4.0);
    let mut sizes: Vec<u64> = Vec::with_capacity(rows);
    for i in 0..rows {
        let size = (64.0 * 65536f64.powf(i as f64 / rows as f64)) as u64;
        // Distinct whatever the rounding.
        sizes.push(size.max(sizes.last().map_or(0, |s| s + 1)));
    }
    sizes
        .into_iter()
        .enumerate()
        .map(|(i, size)| {
            let direction = if i % 2 == 0 {
                DmaDirection::Write
            } else {
                DmaDirection::Read
            };
            let workload = Workload::Dma { direction, size };
            let jitter = 1.0 + (((i * 7919) % 21) as f64 - 10.0) / 1000.0;
            Measurement {
                workload,
                mbps: predict(&truth, &workload, link).0 * jitter,
                latency_ns: None,
                line: i + 2,
                link: None,
            }
        })
        .collect()
}

fn fitting_distinct(c: &mut Criterion) {
    let mut group = c.benchmark_group("fit_distinct");
    group.sample_size(10);
    let link = LinkParams::new(Generation::Gen3, 4);
    for rows in [13, 100, 1_000, 10_000] {
        let made = distinct_rows(rows, &link);
        group.bench_with_input(BenchmarkId::from_parameter(rows), &made, |b, rows| {
            b.iter(|| fit(black_box(rows), &link, "bench").unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, p2p, fitting, fitting_distinct, lspci_bridges);
criterion_main!(benches);
