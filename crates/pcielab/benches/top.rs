//! Criterion benchmark `top`: one `pcielab top -b` refresh on a generated 4096-function server
//! (the shape `pcielab bench observe` uses) exported as sysfs and read back as `snapshot:`, the
//! path `--machine host` reads: a sample through the machine's read plan, the frame (rates,
//! rows in tree order) and its text, done as `top`'s loop does them (the sample written over
//! the oldest one, the frame and its text kept in a `Frames`). `bench observe` compares the
//! whole process with procps top; this isolates the per-refresh work so a profile of it shows
//! where the time goes.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pcielab::machine::Machine;
use pcielab::observe::top::{Frames, SortKey, View};
use pcielab::observe::Observer;
use pcielab::topology::export_sysfs;
use pcielab::topology::generate::server;
use std::time::SystemTime;

const FUNCTIONS: usize = 4096;

fn refresh(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    export_sysfs(&server(FUNCTIONS).expect("the server shape"), dir.path()).expect("the export");
    let machine: Machine = format!("snapshot:{}", dir.path().display())
        .parse()
        .expect("the snapshot machine");
    let mut observer = Observer::open(&machine, &[], |_| unreachable!()).expect("an observer");
    let first = observer.sample_at(0).expect("a sample");
    let mut prev = observer.sample_at(1_000_000_000).expect("a sample");
    let mut latest = prev.clone();
    let mut t_ns = 2_000_000_000;
    let mut group = c.benchmark_group("top");
    for (label, view) in [
        ("refresh_4096_tree", View::default()),
        (
            "refresh_4096_flat_by_rx",
            View {
                sort: SortKey::Rx,
                tree: false,
                ..View::default()
            },
        ),
    ] {
        let mut frames = Frames::default();
        group.bench_function(label, |b| {
            b.iter(|| {
                std::mem::swap(&mut prev, &mut latest);
                observer
                    .sample_at_into(t_ns, &mut latest)
                    .expect("a sample");
                t_ns += 1_000_000_000;
                let frame = frames.build(&view, &first, &prev, &latest, SystemTime::now());
                assert_eq!(frame.rows.len(), FUNCTIONS);
                black_box(frames.text().len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, refresh);
criterion_main!(benches);
