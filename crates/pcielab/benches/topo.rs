//! Criterion benchmark `topo`: a generated 4096-function hierarchy (64 root ports, each with a
//! 31-port switch and an SSD per port, spread over 10 PCI domains) read from spec TOML, then
//! rendered as the annotated tree and as JSON — the work behind `pcielab topo` on a big machine.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pcielab::topology::parse_spec;
use pcielab::topology::{to_json, to_tree};
use std::fmt::Write;

const SUBTREES: usize = 64;
const PORTS_PER_SWITCH: usize = 31;
const SUBTREES_PER_DOMAIN: usize = 7;

fn entry(out: &mut String, bdf: &str, kind: &str, parent: Option<&str>, ids: (u16, u16, u32)) {
    let _ = writeln!(out, "[[function]]\nbdf = \"{bdf}\"\nkind = \"{kind}\"");
    if let Some(p) = parent {
        let _ = writeln!(out, "parent = \"{p}\"");
    }
    let _ = writeln!(
        out,
        "vendor = {:#06x}\ndevice_id = {:#06x}\nclass = {:#08x}\nlink = {{ max_speed = 16.0, max_width = 4, speed = 16.0, width = 4 }}\nmps = 256\nmps_supported = 512\n",
        ids.0, ids.1, ids.2
    );
}

/// The spec text of the generated platform.
fn generated_spec() -> String {
    let mut out = String::from("name = \"gen4096\"\ndescription = \"generated\"\n\n");
    for i in 0..SUBTREES {
        let domain = i / SUBTREES_PER_DOMAIN;
        let base = (i % SUBTREES_PER_DOMAIN) * (PORTS_PER_SWITCH + 3);
        let bdf = |bus: usize, dev: usize| format!("{domain:04x}:{bus:02x}:{dev:02x}.0");
        let rp = bdf(base, 0);
        let up = bdf(base + 1, 0);
        entry(&mut out, &rp, "root_port", None, (0x1ded, 0x8000, 0x060400));
        entry(
            &mut out,
            &up,
            "switch_upstream",
            Some(&rp),
            (0x10b5, 0x8796, 0x060400),
        );
        for port in 0..PORTS_PER_SWITCH {
            let down = bdf(base + 2, port);
            entry(
                &mut out,
                &down,
                "switch_downstream",
                Some(&up),
                (0x10b5, 0x8796, 0x060400),
            );
            let ssd = bdf(base + 3 + port, 0);
            entry(
                &mut out,
                &ssd,
                "endpoint",
                Some(&down),
                (0x144d, 0xa80a, 0x010802),
            );
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let text = generated_spec();
    let spec = parse_spec("gen4096.toml", &text).expect("generated spec is valid");
    assert_eq!(spec.topology.functions().len(), 4096);
    c.bench_function("topo/read_spec_4096", |b| {
        b.iter(|| parse_spec("gen4096.toml", black_box(&text)).unwrap())
    });
    c.bench_function("topo/render_tree_4096", |b| {
        b.iter(|| to_tree(black_box(&spec), None))
    });
    c.bench_function("topo/render_json_4096", |b| {
        b.iter(|| serde_json::to_string(&to_json(black_box(&spec), None)).unwrap())
    });
    c.bench_function("topo/read_render_tree_json_4096", |b| {
        b.iter(|| {
            let p = parse_spec("gen4096.toml", black_box(&text)).unwrap();
            (
                to_tree(&p, None),
                serde_json::to_string(&to_json(&p, None)).unwrap(),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
