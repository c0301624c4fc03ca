//! Path ceilings: the slowest link between a function and its root complex, as the kernel's
//! `pcie_bandwidth_available()` finds it ("… available PCIe bandwidth, limited by …"), with both
//! its line rate and the payload rate that link can achieve.

use super::transfer::{achievable_mbps, LinkParams};
use crate::pcie::link::{kernel_link_mbit, raw_mbps};
use crate::pcie::Bdf;
use crate::topology::{Link, Topology};

/// The bandwidth ceiling of a function's path to its root complex.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathCeiling {
    /// Line rate: MB/s per direction after line encoding, at the links' current speed/width.
    pub mbps: f64,
    /// Link-achievable payload MB/s of the limiting link: MPS-sized writes with TLP, DLLP and
    /// SKP overheads (`model::transfer::achievable_mbps`, the limiting function's MPS).
    pub achievable_mbps: f64,
    /// The function whose upstream link sets `mbps` (the nearest one on a tie, as the kernel).
    pub limiting: Bdf,
    /// The kernel's integer view of the same minimum, in Mb/s.
    pub kernel_mbit: u32,
    /// What the path could carry with every link trained to its capability, in MB/s.
    pub capable_mbps: f64,
}

/// Each function on the path from `bdf` up to the root that has a trained link, with that link.
/// Both ends of a link report it; counting it at the downstream end only is enough for a minimum.
fn links_on_path(topo: &Topology, bdf: Bdf) -> Vec<(Bdf, Link, Option<LinkParams>)> {
    topo.path_to_root(bdf)
        .into_iter()
        .filter_map(|f| f.link.map(|l| (f.bdf, l, LinkParams::for_function(f))))
        .collect()
}

/// The ceiling of `bdf`'s path, or `None` when no link on it reports a current speed and width.
pub fn path_ceiling(topo: &Topology, bdf: Bdf) -> Option<PathCeiling> {
    let mut best: Option<PathCeiling> = None;
    let mut capable = f64::INFINITY;
    for (at, link, params) in links_on_path(topo, bdf) {
        if let (Some(max_speed), Some(max_width)) = (link.max_speed, link.max_width) {
            capable = capable.min(raw_mbps(max_speed, max_width));
        }
        let (Some(speed), Some(width)) = (link.speed, link.width) else {
            continue;
        };
        if width == 0 {
            continue;
        }
        let mbps = raw_mbps(speed, width);
        if best.is_none_or(|b| mbps < b.mbps) {
            best = Some(PathCeiling {
                mbps,
                achievable_mbps: params.map_or(mbps, |p| achievable_mbps(&p)),
                limiting: at,
                kernel_mbit: kernel_link_mbit(speed, width),
                capable_mbps: 0.0,
            });
        }
    }
    best.map(|b| PathCeiling {
        capable_mbps: if capable.is_finite() { capable } else { b.mbps },
        ..b
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::pcie::Generation;
    use crate::topology::{Function, Kind};

    #[test]
    fn ceiling_names_the_slowest_link() {
        use Generation::*;
        let mut rp = Function::new(bdf("00:02.0"), 0x1ded, 0x8000, 0x060400, Kind::RootPort);
        rp.link = Some(Link::trained((Gen5, 4), (Gen2, 2)));
        let mut sata = Function::new(bdf("04:00.0"), 0x1b4b, 0x9235, 0x010601, Kind::Endpoint);
        sata.parent = Some(rp.bdf);
        sata.link = Some(Link::trained((Gen2, 2), (Gen2, 2)));
        let topo = Topology::new(vec![rp, sata]);
        let c = path_ceiling(&topo, "04:00.0".parse().unwrap()).unwrap();
        // Both report Gen2 x2; the endpoint's own link is found first and wins the tie.
        assert_eq!(c.limiting.to_string(), "0000:04:00.0");
        assert!((c.mbps - 1000.0).abs() < 1e-9);
        assert_eq!(c.kernel_mbit, 8000);
        assert!((c.capable_mbps - 1000.0).abs() < 1e-9);
        // No MPS programmed: the spec's reset value, 128 B, with 12 B header and 8 B framing.
        let achievable = 1000.0 * 128.0 / 148.0 * 1538.0 / 1542.0;
        assert!(
            (c.achievable_mbps - achievable).abs() < 1e-6,
            "{}",
            c.achievable_mbps
        );
    }
}
