//! Benchmarks of the QoS simulator: raw speed of the way-partitioned L3 model (simulated
//! accesses per second; target ≥ 50 M/s) and the wall time of each shipped scenario.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use pcielab::qos::cache::L3Cache;
use pcielab::qos::presets::MPAM_SEED;
use pcielab::qos::scenario::Scenario;
use std::hint::black_box;
use std::path::Path;

/// Two groups (7ff0 and 000f) on one 15-way domain, one streaming over twice the cache and one
/// making random accesses over it, so most accesses miss and exercise victim selection.
fn drive(cache: &mut L3Cache, lines: u64, next: &mut u64, n: u64) -> u64 {
    let mut hits = 0u64;
    let mut rng = 0x1234_5678_9abc_def1u64;
    for i in 0..n {
        let line = if i & 1 == 0 {
            *next += 1;
            *next % (2 * lines)
        } else {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (1 << 40) + rng % lines
        };
        let (mask, rmid) = if i & 1 == 0 { (0x7ff0, 1) } else { (0x000f, 2) };
        hits += cache.access(black_box(line), mask, rmid) as u64;
    }
    hits
}

fn cache_accesses(c: &mut Criterion) {
    const N: u64 = 1 << 20;
    let mut group = c.benchmark_group("l3_cache");
    group.throughput(Throughput::Elements(N));
    // The whole 15 MiB domain (2 MiB of tags), and the 1-in-16 sample scenarios use by default.
    for (name, sample) in [("full_15MiB", 1u64), ("sampled_1_in_16", 16)] {
        let lines = MPAM_SEED.l3_bytes / 64 / sample;
        let sets = (lines / MPAM_SEED.l3_ways as u64) as usize;
        let mut cache = L3Cache::new(sets, MPAM_SEED.l3_ways as usize, 4);
        let mut next = 0u64;
        group.bench_function(name, |b| {
            b.iter(|| black_box(drive(&mut cache, lines, &mut next, N)))
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
