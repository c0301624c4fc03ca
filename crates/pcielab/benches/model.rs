//! Model evaluations per second: one evaluation is a transfer's TLP accounting plus its
//! throughput, as the simulator does per I/O. Criterion reports time per batch of 1024
//! evaluations (throughput in elements/s = evaluations per second).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use pcielab::model::transfer::{read_at, write_at, LinkParams, Overheads};
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

fn bench_model(c: &mut Criterion) {
    let links = links();
    // Sizes and offsets of a mixed I/O stream: small control transfers to multi-MiB DMA.
    let ios: Vec<(u64, u64)> = (0..BATCH)
        .map(|i| ((i * 4160) % 65536, 64 << (i % 17)))
        .collect();
    let mut group = c.benchmark_group("model");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("write_at+throughput", |b| {
        b.iter(|| {
            let mut sum = 0.0;
            for (i, &(addr, size)) in ios.iter().enumerate() {
                let link = &links[i % links.len()];
                sum += write_at(black_box(addr), black_box(size), link)
                    .throughput_mbps(link, Overheads::Full);
            }
            sum
        })
    });
    group.bench_function("read_at+throughput", |b| {
        b.iter(|| {
            let mut sum = 0.0;
            for (i, &(addr, size)) in ios.iter().enumerate() {
                let link = &links[i % links.len()];
                sum += read_at(black_box(addr), black_box(size), link)
                    .throughput_mbps(link, Overheads::Full);
            }
            sum
        })
    });
    group.finish();
}

criterion_group!(benches, bench_model);
criterion_main!(benches);
