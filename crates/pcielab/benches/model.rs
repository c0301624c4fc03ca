//! Model evaluations per second: one evaluation is a transfer's TLP accounting plus its
//! throughput, as the simulator does per I/O. Criterion reports time per batch of 1024
//! evaluations (throughput in elements/s = evaluations per second). Target (issue 12): at least
//! 80 M evaluations/s on one core for writes and for reads; the `reference` rows run the same
//! batch through `model::reference`, the implementation the tuned one must match bit for bit,
//! so the speed-up is read off one run.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pcielab::model::reference;
use pcielab::model::transfer::{read_at, write_at, LinkParams, Overheads, Traffic};
use pcielab::pcie::Generation;

const BATCH: u64 = 1024;

fn links() -> Vec<LinkParams> {
    Generation::ALL
        .into_iter()
        .map(|gen| LinkParams {
            mps: 128 << (gen.number() % 4),
            ..LinkParams::new(gen, 4)
        })
        .collect()
}

/// One batch of evaluations through `transfer` then `throughput`, both monomorphised into the
/// loop as a library user's code would have them.
fn bench_batch(
    group: &mut criterion::BenchmarkGroup<criterion::measurement::WallTime>,
    name: &str,
    transfer: impl Fn(u64, u64, &LinkParams) -> Traffic,
    throughput: impl Fn(&Traffic, &LinkParams, Overheads) -> f64,
) {
    let links = links();
    // Sizes and offsets of a mixed I/O stream, small control transfers to multi-MiB DMA, each
    // on one of the links (chosen here, so the loop times the model and not a modulo).
    let ios: Vec<(u64, u64, &LinkParams)> = (0..BATCH)
        .map(|i| {
            let link = &links[i as usize % links.len()];
            ((i * 4160) % 65536, 64 << (i % 17), link)
        })
        .collect();
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut sum = 0.0;
            for &(addr, size, link) in &ios {
                let traffic = transfer(black_box(addr), black_box(size), link);
                sum += throughput(&traffic, link, Overheads::Full);
            }
            sum
        })
    });
}

fn bench_model(c: &mut Criterion) {
    let mut group = c.benchmark_group("model");
    group.throughput(Throughput::Elements(BATCH));
    let tuned = |t: &Traffic, l: &LinkParams, o| t.throughput_mbps(l, o);
    bench_batch(&mut group, "write_at+throughput", write_at, tuned);
    bench_batch(&mut group, "read_at+throughput", read_at, tuned);
    bench_batch(
        &mut group,
        "reference write_at+throughput",
        reference::write_at,
        reference::throughput_mbps,
    );
    bench_batch(
        &mut group,
        "reference read_at+throughput",
        reference::read_at,
        reference::throughput_mbps,
    );
    group.finish();
}

criterion_group!(benches, bench_model);
criterion_main!(benches);
