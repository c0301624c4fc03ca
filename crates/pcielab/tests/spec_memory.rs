//! Reading a big spec file costs memory of the order of the file, not tens of times it: the
//! generated 4096-function server written as a spec (every function with its link, MPS/MRRS,
//! AER and driver, as a hand-written spec would have them) is parsed while a counting
//! allocator records the most bytes held at once; the peak beyond what was held before must
//! stay within 5× the file's size (the whole-document TOML parse peaked near 40×).

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use pcielab::topology::generate::server;
use pcielab::topology::spec::parse_spec;

/// The system allocator, counting the bytes it holds and the most it has held.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the layout is the caller's, passed on unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above with this same layout.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::SeqCst);
    }
}

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
    let before = HELD.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let platform = parse_spec("server.toml", &text).unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - before;
    assert_eq!(platform.topology.functions().len(), 4096);
    assert_eq!(
        platform.topology.functions()[3].link,
        server(4096).unwrap().functions()[3].link
    );
    let ratio = peak as f64 / text.len() as f64;
    // For scale: what one parse of the whole document into a TOML table holds.
    let before = HELD.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let whole: toml::Table = toml::from_str(&text).unwrap();
    let whole_peak = PEAK.load(Ordering::SeqCst) - before;
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
