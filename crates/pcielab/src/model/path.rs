//! Path ceilings: the slowest link between a function and its root complex, as the kernel's
//! `pcie_bandwidth_available()` finds it ("… available PCIe bandwidth, limited by …"), with both
//! its line rate and the payload rate that link can achieve.

use super::transfer::{achievable_mbps, LinkParams};
use crate::pcie::link::Link;
use crate::pcie::link::{kernel_link_mbit, raw_mbps};
use crate::pcie::Bdf;

/// The bandwidth ceiling of a function's path to its root complex.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathCeiling {
    /// Line rate: MB/s per direction after line encoding, at the links' current speed/width.
    pub(crate) mbps: f64,
    /// Link-achievable payload MB/s of the limiting link: MPS-sized writes with TLP, DLLP and
    /// SKP overheads (`model::transfer::achievable_mbps`, the limiting function's MPS).
    pub achievable_mbps: f64,
    /// The function whose upstream link sets `mbps` (the nearest one on a tie, as the kernel).
    pub limiting: Bdf,
    /// The kernel's integer view of the same minimum, in Mb/s.
    pub(crate) kernel_mbit: u32,
    /// What the path could carry with every link trained to its capability, in MB/s.
    pub(crate) capable_mbps: f64,
}

/// The ceiling of a path given as its links from the function up to the root: each function
/// with a link, that link, and the link's parameters as the function programs them (the tree
/// walks the path: `Topology::path_ceiling`). Both ends of a link report it; the downstream end
/// is enough for a minimum. `None` when no link reports a current speed and width.
pub(crate) fn path_ceiling(
    links: impl IntoIterator<Item = (Bdf, Link, Option<LinkParams>)>,
) -> Option<PathCeiling> {
    let mut best: Option<PathCeiling> = None;
    let mut capable = f64::INFINITY;
    for (at, link, params) in links {
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
    use crate::pcie::Generation::*;

    #[test]
    fn ceiling_names_the_slowest_link() {
        // A SATA controller trained Gen2 x2 below a Gen5 x4 root port trained down to Gen2 x2,
        // listed from the endpoint up; neither programs an MPS (the reset value, 128 B).
        let links = [
            (
                bdf("04:00.0"),
                Link::trained((Gen2, 2), (Gen2, 2)),
                Some(LinkParams {
                    mps: 128,
                    ..LinkParams::new(Gen2, 2)
                }),
            ),
            (
                bdf("00:02.0"),
                Link::trained((Gen5, 4), (Gen2, 2)),
                Some(LinkParams {
                    mps: 128,
                    ..LinkParams::new(Gen2, 2)
                }),
            ),
        ];
        let c = path_ceiling(links).unwrap();
        // Both report Gen2 x2; the endpoint's own link is found first and wins the tie.
        assert_eq!(c.limiting.to_string(), "0000:04:00.0");
        assert!((c.mbps - 1000.0).abs() < 1e-9);
        assert_eq!(c.kernel_mbit, 8000);
        assert!((c.capable_mbps - 1000.0).abs() < 1e-9);
        // 12 B header and 8 B framing per 128 B payload, then the SKP share.
        let achievable = 1000.0 * 128.0 / 148.0 * 1538.0 / 1542.0;
        assert!(
            (c.achievable_mbps - achievable).abs() < 1e-6,
            "{}",
            c.achievable_mbps
        );
    }
}
