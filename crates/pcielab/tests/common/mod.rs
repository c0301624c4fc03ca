//! Topology building blocks shared by the lab integration tests: a function at an address with
//! its ids and parent, and a link with known capability and trained state. Each test binary uses
//! only some of them, hence the `dead_code` allowance.
#![allow(dead_code)]

use pcielab::pcie::{Bdf, Generation};
use pcielab::topology::{Function, Kind, Link};

pub fn bdf(text: &str) -> Bdf {
    text.parse().unwrap()
}

/// A function with class 0 (the lab derives what it needs from `kind` and the ids).
pub fn func(addr: &str, kind: Kind, ids: (u16, u16), parent: Option<&str>) -> Function {
    let mut f = Function::new(bdf(addr), ids.0, ids.1, 0, kind);
    f.parent = parent.map(bdf);
    f
}

pub fn link(max: (Generation, u8), current: (Generation, u8)) -> Option<Link> {
    Some(Link::trained(max, current))
}
