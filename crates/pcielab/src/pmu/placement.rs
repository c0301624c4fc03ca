//! Where a PCIe PMU sits in a machine's topology: the root ports its place (a root port, a
//! requester-ID range, a root bus or a socket, as its driver's sysfs files say) names, with the
//! first port's lanes, speed and link ceiling, which give `stat` its MB/s and "% of link" and
//! the reader its wrap period.

use std::collections::BTreeSet;

use crate::pcie::link::raw_mbps;
use crate::pcie::{Bdf, Generation};
use crate::pmu::sysfs::{PciePlace, SysfsPmu};
use crate::topology::{Kind, Topology};

/// A PCIe PMU placed in the live topology.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PortPlacement {
    pub(crate) root_ports: Vec<Bdf>,
    /// The first root port's link: capable width and speed.
    pub(crate) lanes: Option<u8>,
    pub(crate) max_speed: Option<Generation>,
    /// That port's link-achievable payload MB/s per direction (the "% of link" base).
    pub(crate) ceiling_mbps: Option<f64>,
}

/// The root ports a PMU's place names in `topo`.
pub(crate) fn place_in(place: &PciePlace, topo: &Topology) -> PortPlacement {
    let root_ports = topo.functions().iter().filter(|f| f.kind == Kind::RootPort);
    let ports: Vec<Bdf> = match *place {
        PciePlace::RootPort { bdf } => vec![bdf],
        PciePlace::RequesterRange { min, max } => root_ports
            .filter(|f| {
                (min..=max).contains(&(u16::from(f.bdf.bus) << 8 | u16::from(f.bdf.devfn())))
            })
            .map(|f| f.bdf)
            .collect(),
        PciePlace::RootBus { domain, bus } => root_ports
            .filter(|f| f.bdf.domain == domain && f.bdf.bus == bus)
            .map(|f| f.bdf)
            .collect(),
        PciePlace::Socket(socket) => root_ports
            .filter(|f| f.numa_node == i32::try_from(socket).ok())
            .map(|f| f.bdf)
            .collect(),
    };
    let link = ports
        .first()
        .and_then(|b| topo.get(*b))
        .and_then(|f| f.link);
    PortPlacement {
        lanes: link.and_then(|l| l.max_width.or(l.width)),
        max_speed: link.and_then(|l| l.max_speed.or(l.speed)),
        ceiling_mbps: match place {
            PciePlace::RootPort { .. } => ports
                .first()
                .and_then(|b| topo.path_ceiling(*b))
                .map(|c| c.achievable_mbps),
            _ => None,
        },
        root_ports: ports,
    }
}

/// Every root port some PCIe PMU of `pmus` counts, placed in `topology`.
pub(crate) fn placed_root_ports(pmus: &[SysfsPmu], topology: &Topology) -> BTreeSet<Bdf> {
    pmus.iter()
        .filter_map(|p| p.place.as_ref())
        .flat_map(|place| place_in(place, topology).root_ports)
        .collect()
}

/// The worst case a narrow counter on a port can count per second: one event per smallest
/// packet (an 8-byte DLLP with framing) at the link's raw rate; Gen5 x16 when the link is
/// unknown.
pub(crate) fn worst_case_events_per_s(placement: Option<&PortPlacement>) -> f64 {
    let gen = placement
        .and_then(|p| p.max_speed)
        .unwrap_or(Generation::Gen5);
    let lanes = placement.and_then(|p| p.lanes).unwrap_or(16);
    raw_mbps(gen, lanes) * 1e6 / 8.0
}
