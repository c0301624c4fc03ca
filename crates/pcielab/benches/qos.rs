//! Benchmarks of the QoS simulator: raw speed of the way-partitioned L3 model (simulated
//! accesses per second; target ≥ 50 M/s per core on the full domain), with `reference_*` rows
//! running the same accesses through `qos::cache::reference`, the model it replaced and must
//! decide exactly as; and the wall time of each shipped scenario.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pcielab::qos::cache::{reference, L3Cache};
use pcielab::qos::Scenario;
use pcielab::qos::MPAM_SEED;
use pcielab::qos::{AccessStream, Pattern};
use std::hint::black_box;
use std::path::Path;

/// Two groups on one 15-way domain, driven by the simulator's own address generators: `bw_mem`
/// streaming over twice the cache in 7ff0 and `stress-ng` sweeping a buffer the cache's size in
/// 000f, so most accesses miss and exercise victim selection. The two groups alternate access by
/// access.
fn two_groups(sample: u64) -> impl FnMut() -> (u64, u64, u16) {
    let stream = Pattern::Stream {
        bytes: 2 * MPAM_SEED.l3_bytes,
    };
    let thrash = Pattern::Thrash {
        bytes: MPAM_SEED.l3_bytes,
    };
    let mut a = AccessStream::new(&stream, 1, 0, sample);
    let mut b = AccessStream::new(&thrash, 2, 0, sample);
    let mut from_a = false;
    move || {
        from_a = !from_a;
        if from_a {
            (a.next_line(), 0x7ff0, 1)
        } else {
            (b.next_line(), 0x000f, 2)
        }
    }
}

/// Simulated accesses per second of [`L3Cache`] and of the reference it replaced.
fn cache_accesses(c: &mut Criterion) {
    const N: u64 = 1 << 20;
    let mut group = c.benchmark_group("l3_cache");
    group.throughput(Throughput::Elements(N));
    // The whole 15 MiB domain (2 MiB of tags), and the 1-in-16 sample scenarios use by default.
    for (name, sample) in [("full_15MiB", 1u64), ("sampled_1_in_16", 16)] {
        let lines = MPAM_SEED.l3_bytes / 64 / sample;
        let sets = (lines / MPAM_SEED.l3_ways as u64) as usize;
        let ways = MPAM_SEED.l3_ways as usize;
        let mut cache = L3Cache::new(sets, ways, 4);
        let mut next = two_groups(sample);
        group.bench_function(name, |bench| {
            bench.iter(|| black_box(cache.access_run(N as usize, &mut next)))
        });
        // The implementation the model must decide exactly as, on the same accesses.
        let mut cache = reference::L3Cache::new(sets, ways, 4);
        let mut next = two_groups(sample);
        group.bench_function(format!("reference_{name}"), |bench| {
            bench.iter(|| black_box(cache.access_run(N as usize, &mut next)))
        });
    }
    group.finish();
}

fn scenarios(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut group = c.benchmark_group("scenario");
    group.sample_size(10);
    for name in [
        "l3-occupancy-vs-ways",
        "latency-vs-ways",
        "interference",
        "mb-throttling",
        "mb-throttling-rdt",
        "colocation",
    ] {
        let scenario = Scenario::load(&dir.join(format!("{name}.toml"))).unwrap();
        group.bench_function(name, |b| b.iter(|| black_box(scenario.run().unwrap())));
    }
    group.finish();
}

criterion_group!(benches, cache_accesses, scenarios);
criterion_main!(benches);
