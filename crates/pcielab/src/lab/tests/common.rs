//! Topology building blocks the argv and boot tests share: a function at an address with its
//! ids and parent, a link with known capability and trained state, and the switch +
//! expander-bridge machine both start from.

use crate::pcie::{Bdf, Generation};
use crate::topology::{Function, Kind, Link};

pub(super) fn bdf(text: &str) -> Bdf {
    text.parse().unwrap()
}

/// A function with class 0 (the lab derives what it needs from `kind` and the ids).
pub(super) fn func(addr: &str, kind: Kind, ids: (u16, u16), parent: Option<&str>) -> Function {
    let mut f = Function::new(bdf(addr), ids.0, ids.1, 0, kind);
    f.parent = parent.map(bdf);
    f
}

pub(super) fn link(max: (Generation, u8), current: (Generation, u8)) -> Option<Link> {
    Some(Link::trained(max, current))
}

/// QEMU's generic root port and NVMe controller.
pub(super) const RP: (u16, u16) = (0x1b36, 0x000c);
pub(super) const NVME: (u16, u16) = (0x1b36, 0x0010);

/// q35's host bridge; root port 00:02.0 with a switch and an NVMe behind each of its two
/// downstream ports; expander bridge 00:04.0 (bus 128) with root port 80:00.0 and one NVMe.
/// No links, NUMA nodes or device parameters beyond the expander's bus: each test adds its own.
pub(super) fn switch_and_expander() -> Vec<Function> {
    let mut pxb = func("00:04.0", Kind::HostBridge, (0x1b36, 0x000b), None);
    pxb.params
        .insert("bus_nr".into(), toml::Value::Integer(128));
    vec![
        func("00:00.0", Kind::HostBridge, (0x8086, 0x29c0), None),
        func("00:02.0", Kind::RootPort, RP, None),
        pxb,
        func(
            "01:00.0",
            Kind::SwitchUpstream,
            (0x104c, 0x8232),
            Some("00:02.0"),
        ),
        func(
            "02:00.0",
            Kind::SwitchDownstream,
            (0x104c, 0x8233),
            Some("01:00.0"),
        ),
        func(
            "02:01.0",
            Kind::SwitchDownstream,
            (0x104c, 0x8233),
            Some("01:00.0"),
        ),
        func("03:00.0", Kind::Endpoint, NVME, Some("02:00.0")),
        func("04:00.0", Kind::Endpoint, NVME, Some("02:01.0")),
        func("80:00.0", Kind::RootPort, RP, None),
        func("81:00.0", Kind::Endpoint, NVME, Some("80:00.0")),
    ]
}

/// The function at `addr`; panics naming it when the list has none.
pub(super) fn function_at<'a>(functions: &'a mut [Function], addr: &str) -> &'a mut Function {
    let wanted = bdf(addr);
    functions
        .iter_mut()
        .find(|f| f.bdf == wanted)
        .unwrap_or_else(|| panic!("no function {addr}"))
}
