//! The tree a spec describes, checked as a whole: parents exist and may hold children of that
//! kind, addresses are unique, and bridges' bus ranges are assigned and nest.

use super::raw::Locator;
use crate::error::Result;
use crate::pcie::Bdf;
use crate::topology::{Function, Kind};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Which kinds may sit directly below a parent of kind `parent`.
fn allowed_under(parent: Kind, child: Kind) -> bool {
    use Kind::*;
    match parent {
        RootPort | SwitchDownstream => matches!(child, SwitchUpstream | Endpoint | PciBridge),
        SwitchUpstream => child == SwitchDownstream,
        PciBridge => matches!(child, Endpoint | PciBridge),
        HostBridge | Endpoint | RcEndpoint => false,
    }
}

/// Checks the tree: parents exist and can have children of that kind, kinds that must sit on a
/// root bus do, switches have downstream ports, and bus numbers nest as bridges require.
pub(super) fn check_structure(
    loc: &Locator,
    functions: &[Function],
    starts: &HashMap<Bdf, usize>,
    parent_spans: &HashMap<Bdf, usize>,
) -> Result<()> {
    let by_bdf: HashMap<Bdf, &Function> = functions.iter().map(|f| (f.bdf, f)).collect();
    let mut child_bus: HashMap<Bdf, (u8, Bdf)> = HashMap::new();
    for f in functions {
        let at = parent_spans.get(&f.bdf).copied().unwrap_or(starts[&f.bdf]);
        let Some(pb) = f.parent else {
            if matches!(f.kind, Kind::SwitchUpstream | Kind::SwitchDownstream) {
                return Err(loc.err(
                    at,
                    format_args!(
                        "function {}: a {} needs a parent (a {}); add parent = \"DDDD:BB:DD.F\"",
                        f.bdf,
                        f.kind.name(),
                        if f.kind == Kind::SwitchUpstream {
                            "root_port or switch_downstream"
                        } else {
                            "switch_upstream"
                        }
                    ),
                ));
            }
            continue;
        };
        let Some(parent) = by_bdf.get(&pb) else {
            return Err(loc.err(
                at,
                format_args!(
                    "function {}: parent {} is not defined in this file; valid parents are the bdf of a root_port, switch_upstream, switch_downstream or pci_bridge entry",
                    f.bdf, pb
                ),
            ));
        };
        if !allowed_under(parent.kind, f.kind) {
            return Err(loc.err(
                at,
                format_args!(
                    "function {}: a {} cannot sit under {} (kind {}); {}",
                    f.bdf,
                    f.kind.name(),
                    pb,
                    parent.kind.name(),
                    match parent.kind {
                        Kind::RootPort | Kind::SwitchDownstream =>
                            "below a root or downstream port go switch_upstream, endpoint or pci_bridge",
                        Kind::SwitchUpstream => "below a switch_upstream go switch_downstream ports",
                        Kind::PciBridge => "below a pci_bridge go endpoint or pci_bridge",
                        _ => "only root_port, switch_upstream, switch_downstream and pci_bridge have children",
                    }
                ),
            ));
        }
        if pb.domain != f.bdf.domain || f.bdf.bus <= pb.bus {
            return Err(loc.err(
                at,
                format_args!(
                    "function {}: its bus must be in the parent's domain and above the parent's bus {:02x} (a bridge's secondary bus)",
                    f.bdf, pb.bus
                ),
            ));
        }
        match child_bus.get(&pb) {
            Some(&(bus, sibling)) if bus != f.bdf.bus => {
                return Err(loc.err(
                    at,
                    format_args!(
                        "function {}: sits on bus {:02x} but its sibling {} under {} is on bus {:02x}; all children of a bridge share its secondary bus",
                        f.bdf, f.bdf.bus, sibling, pb, bus
                    ),
                ));
            }
            _ => {
                child_bus.insert(pb, (f.bdf.bus, f.bdf));
            }
        }
    }
    if let Some(f) = functions
        .iter()
        .find(|f| f.kind == Kind::SwitchUpstream && !child_bus.contains_key(&f.bdf))
    {
        return Err(loc.err(
            starts[&f.bdf],
            format_args!(
                "function {}: a switch_upstream without switch_downstream ports; add at least one function with kind = \"switch_downstream\" and parent = \"{}\"",
                f.bdf, f.bdf
            ),
        ));
    }
    // A bus is either a root bus or one bridge's secondary bus, never both.
    let mut owner: HashMap<(u16, u8), Option<Bdf>> = HashMap::new();
    for f in functions {
        let key = (f.bdf.domain, f.bdf.bus);
        match owner.get(&key) {
            Some(&o) if o != f.parent => {
                let describe = |b: Option<Bdf>| {
                    b.map_or("a root bus".to_string(), |b| {
                        format!("the secondary bus of {b}")
                    })
                };
                return Err(loc.err(
                    starts[&f.bdf],
                    format_args!(
                        "function {}: bus {:04x}:{:02x} is already {}, but this function makes it {}; give it a bus number of its own",
                        f.bdf,
                        f.bdf.domain,
                        f.bdf.bus,
                        describe(o),
                        describe(f.parent)
                    ),
                ));
            }
            _ => {
                owner.insert(key, f.parent);
            }
        }
    }
    Ok(())
}

/// Fills in each bridge's secondary/subordinate bus range from where its descendants sit; a
/// bridge without children gets the lowest bus number above its own that no function uses and no
/// other subtree's range covers, as firmware would leave an empty port.
pub(super) fn assign_bus_ranges(functions: &mut [Function]) {
    let index: HashMap<Bdf, usize> = functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.bdf, i))
        .collect();
    let ancestors = |bdf: Bdf| -> Vec<Bdf> {
        let mut chain = Vec::new();
        let mut cursor = index.get(&bdf).and_then(|&i| functions[i].parent);
        while let Some(p) = cursor {
            chain.push(p);
            cursor = index.get(&p).and_then(|&i| functions[i].parent);
        }
        chain
    };
    let mut ranges: BTreeMap<Bdf, (u8, u8)> = BTreeMap::new();
    for f in functions.iter() {
        for (depth, up) in ancestors(f.bdf).into_iter().enumerate() {
            let r = ranges.entry(up).or_insert((f.bdf.bus, f.bdf.bus));
            if depth == 0 {
                r.0 = r.0.min(f.bdf.bus);
            }
            r.1 = r.1.max(f.bdf.bus);
        }
    }
    let mut used: BTreeSet<(u16, u8)> = functions
        .iter()
        .map(|f| (f.bdf.domain, f.bdf.bus))
        .collect();
    let empty: Vec<Bdf> = functions
        .iter()
        .filter(|f| f.kind.is_bridge() && !ranges.contains_key(&f.bdf))
        .map(|f| f.bdf)
        .collect();
    for b in empty {
        let above = ancestors(b);
        let foreign = |n: u8| {
            ranges.iter().any(|(owner, &(sec, sub))| {
                owner.domain == b.domain && (sec..=sub).contains(&n) && !above.contains(owner)
            })
        };
        let free = (u16::from(b.bus) + 1..=255)
            .map(|n| n as u8)
            .find(|&n| !used.contains(&(b.domain, n)) && !foreign(n));
        if let Some(n) = free {
            used.insert((b.domain, n));
            ranges.insert(b, (n, n));
            for up in above {
                if let Some(r) = ranges.get_mut(&up) {
                    r.1 = r.1.max(n);
                }
            }
        }
    }
    for f in functions.iter_mut() {
        f.buses = ranges.get(&f.bdf).copied();
    }
}

/// Bus ranges must nest: a bus inside a bridge's [secondary, subordinate] belongs to a function
/// below that bridge, or lspci and the kernel route it to the wrong subtree. Each function's bus
/// must be covered by exactly its ancestors' ranges; counting coverage per bus checks that.
pub(super) fn check_bus_ranges(
    loc: &Locator,
    functions: &[Function],
    starts: &HashMap<Bdf, usize>,
) -> Result<()> {
    let mut cover: HashMap<u16, [i32; 257]> = HashMap::new();
    for f in functions {
        if let Some((sec, sub)) = f.buses {
            let c = cover.entry(f.bdf.domain).or_insert([0; 257]);
            c[usize::from(sec)] += 1;
            c[usize::from(sub) + 1] -= 1;
        }
    }
    let covered: HashMap<u16, Vec<i32>> = cover
        .into_iter()
        .map(|(d, c)| {
            let mut sum = 0;
            (
                d,
                c.iter()
                    .map(|v| {
                        sum += v;
                        sum
                    })
                    .collect(),
            )
        })
        .collect();
    let by_bdf: HashMap<Bdf, &Function> = functions.iter().map(|f| (f.bdf, f)).collect();
    for f in functions {
        let mut depth = 0;
        let mut cursor = f.parent;
        while let Some(p) = cursor {
            depth += 1;
            cursor = by_bdf.get(&p).and_then(|pf| pf.parent);
        }
        let count = covered
            .get(&f.bdf.domain)
            .map_or(0, |c| c[usize::from(f.bdf.bus)]);
        if count == depth {
            continue;
        }
        let intruder = functions.iter().find(|b| {
            b.bdf.domain == f.bdf.domain
                && b.buses
                    .is_some_and(|(sec, sub)| (sec..=sub).contains(&f.bdf.bus))
                && !std::iter::successors(f.parent, |p| by_bdf.get(p).and_then(|pf| pf.parent))
                    .any(|a| a == b.bdf)
        });
        if let Some(b) = intruder {
            let (sec, sub) = b.buses.unwrap_or_default();
            return Err(loc.err(
                starts[&f.bdf],
                format_args!(
                    "function {}: bus {:02x} lies inside the bus range [{sec:02x}-{sub:02x}] of {}, which is not above it; renumber so each subtree's buses form one block",
                    f.bdf, f.bdf.bus, b.bdf
                ),
            ));
        }
    }
    Ok(())
}
