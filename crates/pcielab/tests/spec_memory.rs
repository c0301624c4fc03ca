//! Reading a big spec file costs memory of the order of the file, not tens of times it: the
//! generated 4096-function server written as a spec (every function with its link, MPS/MRRS,
//! AER and driver, as a hand-written spec would have them) is parsed while a counting
//! allocator records the most bytes held at once; the peak beyond what was held before must
//! stay within 5× the file's size (the whole-document TOML parse peaked near 40×).

use std::fmt::Write;

use pcielab::topology::generate::server;
use pcielab::topology::parse_spec;

#[path = "counting_alloc/mod.rs"]
mod counting_alloc;
use counting_alloc::{peak_during, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The topology as spec TOML, one `[[function]]` table each.
fn spec_text(topology: &pcielab::topology::Topology) -> String {
    let mut out = String::from("name = \"server\"\ndescription = \"generated\"\n");
    for f in topology.functions() {
        let _ = write!(
            out,
            "\n[[function]]\nbdf = \"{}\"\nkind = \"{}\"\nvendor = {:#06x}\ndevice_id = {:#06x}\nclass = {:#08x}\n",
            f.bdf,
            f.kind.name(),
            f.vendor,
            f.device,
            f.class
        );
        if let Some(p) = f.parent {
            let _ = writeln!(out, "parent = \"{p}\"");
        }
        if let Some(l) = f.link {
            let gts = |g: Option<pcielab::pcie::Generation>| g.unwrap().gt_s();
            let _ = writeln!(
                out,
                "link = {{ max_speed = {:.1}, max_width = {}, speed = {:.1}, width = {} }}",
                gts(l.max_speed),
                l.max_width.unwrap(),
                gts(l.speed),
                l.width.unwrap()
            );
        }
        if let (Some(mps), Some(mrrs)) = (f.mps, f.mrrs) {
            let _ = writeln!(out, "mps = {mps}\nmrrs = {mrrs}\naer = {}", f.aer);
        }
        if let Some(d) = &f.driver {
            let _ = writeln!(out, "driver = \"{d}\"");
        }
    }
    out
}

#[test]
fn a_4096_function_spec_parses_within_five_times_its_size() {
    let text = spec_text(&server(4096).unwrap());
    let (platform, peak) = peak_during(|| parse_spec("server.toml", &text).unwrap());
    assert_eq!(platform.topology.functions().len(), 4096);
    assert_eq!(
        platform.topology.functions()[3].link,
        server(4096).unwrap().functions()[3].link
    );
    let ratio = peak as f64 / text.len() as f64;
    // For scale: what one parse of the whole document into a TOML table holds.
    let (whole, whole_peak) = peak_during(|| toml::from_str::<toml::Table>(&text).unwrap());
    drop(whole);
    eprintln!(
        "{} bytes of spec: parse_spec peaked {peak} bytes ({ratio:.2}x), a whole-document \
         toml::Table parse {whole_peak} bytes ({:.1}x)",
        text.len(),
        whole_peak as f64 / text.len() as f64
    );
    assert!(
        ratio <= 5.0,
        "parsing {} bytes peaked at {peak} bytes more ({ratio:.1}x)",
        text.len()
    );
}
