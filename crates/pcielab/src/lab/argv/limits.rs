//! What QEMU 7.2 expresses differently from a spec, as [`Limit`]s the lab reports instead of
//! hiding: links that train to 2.5 GT/s x1, fixed or missing link capabilities, integrated
//! endpoints without a link, NUMA nodes the main host bridge cannot carry.

use crate::pcie::{Bdf, Generation};
use crate::topology::{Function, Link, Topology};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A spec value QEMU 7.2 cannot reproduce, and what the guest will report instead.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Limit {
    /// The function of the spec QEMU cannot express exactly.
    pub bdf: Bdf,
    /// The field as `lab check` names it: `link.speed`, `link.width`, `link.max_speed`, …
    pub field: Cow<'static, str>,
    pub(crate) spec: String,
    /// What QEMU builds instead.
    pub qemu: String,
    pub(crate) why: Cow<'static, str>,
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: spec {}, QEMU shows {} ({})",
            self.bdf, self.field, self.spec, self.qemu, self.why
        )
    }
}

pub(super) const QEMU_CURRENT_LINK: &str =
    "QEMU 7.2 emulates no link training: every current link \
     reports 2.5 GT/s x1";
pub(super) const QEMU_FIXED_ENDPOINT: &str =
    "QEMU 7.2 endpoints and the x3130 upstream port have a fixed \
     2.5 GT/s x1 link capability";
const QEMU_DOWNSTREAM_CAP: &str = "QEMU 7.2's xio3130 downstream port reports no link \
     capability (Unknown speed, width 0)";
const QEMU_INTEGRATED: &str = "an integrated endpoint on the root bus has no link in QEMU";
const QEMU_NUMA_MAIN_BUS: &str = "q35's main host bridge has no NUMA affinity (_PXM): its \
     functions report no node";

pub(super) fn numa_limit(f: &Function, guest_node: Option<i32>) -> Option<Limit> {
    let spec = f.numa_node.filter(|n| *n >= 0);
    (spec.is_some() && spec != guest_node && guest_node.is_none()).then(|| Limit {
        bdf: f.bdf,
        field: "numa_node".into(),
        spec: show_opt(spec),
        qemu: "none".into(),
        why: QEMU_NUMA_MAIN_BUS.into(),
    })
}

/// A link speed as limits and `lab check` show it: `8 GT/s`, or `unknown`.
pub(crate) fn show_speed(g: Option<Generation>) -> String {
    g.map_or("unknown".into(), |g| format!("{} GT/s", g.gt_s()))
}

/// An optional value as limits and `lab check` show it, `none` when absent.
pub(crate) fn show_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("none".into(), |v| v.to_string())
}

fn link_limits(
    f: &Function,
    actual: Link,
    fields: [&'static str; 2],
    why: &'static str,
) -> Vec<Limit> {
    let spec = f.link.unwrap_or_default();
    let (speed_field, width_field) = (fields[0], fields[1]);
    let (spec_speed, spec_width, qemu_speed, qemu_width) = if speed_field == "link.speed" {
        (spec.speed, spec.width, actual.speed, actual.width)
    } else {
        (
            spec.max_speed,
            spec.max_width,
            actual.max_speed,
            actual.max_width,
        )
    };
    let mut limits = Vec::new();
    if spec_speed.is_some() && spec_speed != qemu_speed {
        limits.push(Limit {
            bdf: f.bdf,
            field: speed_field.into(),
            spec: show_speed(spec_speed),
            qemu: show_speed(qemu_speed),
            why: why.into(),
        });
    }
    if spec_width.is_some() && spec_width != qemu_width {
        limits.push(Limit {
            bdf: f.bdf,
            field: width_field.into(),
            spec: show_opt(spec_width),
            qemu: show_opt(qemu_width),
            why: why.into(),
        });
    }
    limits
}

const TRAINED_LINK: Link = Link::trained((Generation::Gen1, 1), (Generation::Gen1, 1));

/// A port's current link follows its child; a port with a child reports 2.5 GT/s x1.
pub(super) fn current_link_limits(topology: &Topology, f: &Function) -> Vec<Limit> {
    if topology.children(f.bdf).next().is_none() {
        return Vec::new();
    }
    link_limits(
        f,
        TRAINED_LINK,
        ["link.speed", "link.width"],
        QEMU_CURRENT_LINK,
    )
}

pub(super) fn fixed_cap_limits(f: &Function, why: &'static str) -> Vec<Limit> {
    link_limits(f, TRAINED_LINK, ["link.max_speed", "link.max_width"], why)
}

pub(super) fn downstream_cap_limits(f: &Function) -> Vec<Limit> {
    let unknown = Link::default();
    link_limits(
        f,
        unknown,
        ["link.max_speed", "link.max_width"],
        QEMU_DOWNSTREAM_CAP,
    )
}

pub(super) fn endpoint_link_limits(f: &Function) -> Vec<Limit> {
    if f.parent.is_none() {
        let none = Link::default();
        let mut limits = link_limits(
            f,
            none,
            ["link.max_speed", "link.max_width"],
            QEMU_INTEGRATED,
        );
        limits.extend(link_limits(
            f,
            none,
            ["link.speed", "link.width"],
            QEMU_INTEGRATED,
        ));
        return limits;
    }
    let mut limits = fixed_cap_limits(f, QEMU_FIXED_ENDPOINT);
    limits.extend(link_limits(
        f,
        TRAINED_LINK,
        ["link.speed", "link.width"],
        QEMU_CURRENT_LINK,
    ));
    limits
}
