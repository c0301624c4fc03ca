//! Criterion benchmark `lab`: the pure work behind `pcielab lab argv` and `pcielab topo --p2p` on
//! the qemu-wide preset, and the performance target of the lab itself — boot to result of a TCG
//! guest with the qemu-seed topology (target ≤ 15 s; the guest lists its PCI devices and sends
//! its results back). The boot group needs QEMU and the Debian cloud kernel (fetched into the
//! cache on first use).

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::time::Duration;

use pcielab::lab::cache_dir;
use pcielab::lab::session::{run, KernelChoice, RunOptions};
use pcielab::lab::{plan, MachineOptions};
use pcielab::machine::read_spec;
use pcielab::topology::p2p::{matrix, Cpu};

fn topology(name: &str) -> pcielab::topology::Topology {
    read_spec(name).expect("valid preset").topology
}

fn pure(c: &mut Criterion) {
    let wide = topology("qemu-wide");
    let options = MachineOptions::default();
    c.bench_function("argv/qemu-wide", |b| {
        b.iter(|| plan(black_box(&wide), &options).unwrap())
    });
    c.bench_function("p2p_matrix/qemu-wide", |b| {
        b.iter(|| matrix(black_box(&wide), Cpu::Amd { family: 0x17 }).unwrap())
    });
}

fn boot(c: &mut Criterion) {
    let seed = topology("qemu-seed");
    let results = tempfile::tempdir().unwrap();
    let options = RunOptions {
        machine: MachineOptions::default(),
        kernel: KernelChoice::Debian,
        script: Some("ls /sys/bus/pci/devices > devices.txt\n".into()),
        files: Vec::new(),
        pcielab: None,
        with_fio: false,
        tools: Vec::new(),
        monitor_hook: false,
        timeout: Duration::from_secs(120),
        keep: false,
        results_dir: Some(results.path().to_path_buf()),
        cache: cache_dir(),
    };
    let mut group = c.benchmark_group("boot_to_result");
    group.sample_size(10);
    group.bench_function("qemu-seed", |b| {
        b.iter(|| run(&seed, &options, &mut |_| {}).unwrap())
    });
    group.finish();
}

criterion_group!(benches, pure, boot);
criterion_main!(benches);
