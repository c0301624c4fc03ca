//! Endpoints grouped by the facts the kernel's P2PDMA rules read (the bridge above them and
//! their own ACS state), and one verdict per ordered pair of groups, so a host with thousands of
//! endpoints is judged in a few hundred verdicts instead of millions.

use super::rules::{
    endpoints, has_acs_redirect, host_bridge_function, verdict_on_paths, Cpu, Verdict,
    HOST_BRIDGE_WHITELIST,
};
use crate::pcie::Bdf;
use crate::topology::{Function, Topology};
use serde::{Deserialize, Serialize};

/// Endpoints that share every verdict: the same bridge above them (hence the same path to the
/// root; for integrated endpoints, the same root bus) and the same ACS state of their own, the
/// only facts of an endpoint the kernel's rules read. The virtual functions of an SR-IOV device
/// below one port are one group however many there are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Group {
    /// `g1`, `g2`, … in the address order of their first function.
    pub(crate) group: String,
    /// The bridge above them; `None` for endpoints integrated in the root complex.
    pub(crate) port: Option<Bdf>,
    /// The root port at the top of their path (for integrated endpoints, the first of them):
    /// where a picture of a large host gathers groups. Always written; absent only from
    /// documents older than it, read back without it (their large hosts cannot be drawn by root
    /// port).
    #[schemars(with = "Bdf")]
    pub(crate) top: Option<Bdf>,
    /// Its endpoints, in address order.
    pub(crate) functions: Vec<Bdf>,
}

/// The endpoints of `topology` in groups sharing every verdict.
pub fn groups(topology: &Topology) -> Vec<Group> {
    type Key = (Option<Bdf>, (u16, u8), bool, bool);
    let mut index: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for f in endpoints(topology) {
        let top = topology
            .path_to_root(f.bdf)
            .last()
            .map_or(f.bdf, |top| top.bdf);
        let root_bus = (top.domain, top.bus);
        let key = (f.parent, root_bus, has_acs_redirect(f), f.acs_unreadable);
        let at = *index.entry(key).or_insert_with(|| {
            groups.push(Group {
                group: format!("g{}", groups.len() + 1),
                port: f.parent,
                top: Some(top),
                functions: Vec::new(),
            });
            groups.len() - 1
        });
        groups[at].functions.push(f.bdf);
    }
    groups
}

/// One verdict standing for every ordered pair of endpoints whose paths meet at one place, the
/// provider in one of `provider_groups` and the client in one of `client_groups`. The kernel's
/// rules read of such a pair only how far each side is from the meeting point and whether its
/// side of the path holds an ACS redirect or unreadable ACS (below different tops: each side's
/// path length and root bus), so every pair a verdict stands for has its distance and mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GroupVerdict {
    /// The bridge where the two paths meet (their closest common upstream bridge); `None` for
    /// pairs below different root ports or integrated endpoints, which meet only at the root
    /// complex.
    pub(crate) meeting: Option<Bdf>,
    /// Provider groups as runs of consecutive group names: `g1..g64`, `g70`.
    pub(crate) provider_groups: Vec<String>,
    /// Client groups, written as `provider_groups`.
    pub(crate) client_groups: Vec<String>,
    /// How many ordered endpoint pairs it stands for.
    pub(crate) pairs: u64,
    /// The verdict of one pair it stands for: `provider` and `client` name those two
    /// functions, and the reasons name what that pair's path holds (another pair's may name
    /// other bridges with the same effect).
    pub(crate) verdict: Verdict,
}

/// `g1` → 0..=0, `g3..g9` → 2..=8: the 0-based group indices a name or run of names stands for.
pub(crate) fn group_run(text: &str) -> Option<(usize, usize)> {
    let index = |name: &str| -> Option<usize> {
        name.strip_prefix('g')?
            .parse::<usize>()
            .ok()?
            .checked_sub(1)
    };
    let (first, last) = match text.split_once("..") {
        Some((a, b)) => (index(a)?, index(b)?),
        None => (index(text)?, index(text)?),
    };
    (first <= last).then_some((first, last))
}

/// Sorted group indices as runs of names (`g1..g64`, `g70`).
fn run_names(indices: &[usize]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            format!("g{}", indices[i] + 1)
        } else {
            format!("g{}..g{}", indices[i] + 1, indices[j] + 1)
        });
        i = j + 1;
    }
    out
}

/// What one side of a pair contributes to the verdict, seen from a meeting point. Below a
/// bridge: the hops up to it and whether that side's functions (for the provider up to and
/// including the bridge, for the client below it) redirect or have unreadable ACS. Below
/// different tops: the path length and how the root bus's host bridge stands on the whitelist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Side {
    Below {
        hops: usize,
        redirect: bool,
        unreadable: bool,
    },
    Apart {
        length: usize,
        host_bridge: HostBridgeClass,
    },
}

/// A root bus's host bridge as far as the whitelist can tell pairs apart: any whitelisted one
/// lets through a pair with any other whitelisted one, one allowed only within itself lets
/// through only pairs on its own root bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum HostBridgeClass {
    /// The CPU is exempt: the host bridge is not asked.
    Exempt,
    NotWhitelisted,
    Whitelisted,
    OnlyWithin((u16, u8)),
}

/// Where two groups' paths meet and the ones on each side of it, gathered from each group's
/// own path (so the work grows with the groups times the depth of the tree, never with the
/// pairs of groups).
#[derive(Default)]
struct Meeting {
    /// Hops from the meeting point up to the root complex (0 for the root complex itself):
    /// verdicts are listed deepest meeting point first.
    depth: usize,
    /// Per side as provider and as client: (group, the child of the meeting point it is
    /// below, how many endpoints).
    providers: std::collections::BTreeMap<Side, Vec<(usize, Child)>>,
    clients: std::collections::BTreeMap<Side, Vec<(usize, Child)>>,
}

/// The child of a meeting point a group lies below: a bridge, or, for the group's own port,
/// the group's functions themselves (each its own child, so two of them form a pair).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Child {
    Bridge(Bdf),
    Own(usize),
}

/// Verdicts between groups, one per meeting point and pair of sides (see [`GroupVerdict`]),
/// deepest meeting point first: a pair of groups takes the first verdict that lists the
/// provider's group and the client's. Each is computed once, by the pairwise rule, for a
/// pair it stands for.
pub fn group_verdicts(topology: &Topology, groups: &[Group], cpu: Cpu) -> Vec<GroupVerdict> {
    use std::collections::{BTreeMap, HashMap};
    let paths: Vec<Vec<&Function>> = groups
        .iter()
        .map(|g| topology.path_to_root(g.functions[0]))
        .collect();
    let mut host_bridges: HashMap<(u16, u8), HostBridgeClass> = HashMap::new();
    let mut meetings: BTreeMap<Option<Bdf>, Meeting> = BTreeMap::new();
    for (g, path) in paths.iter().enumerate() {
        let top = path.last().expect("a path starts with the function itself");
        let root_bus = (top.bdf.domain, top.bdf.bus);
        let host_bridge = *host_bridges
            .entry(root_bus)
            .or_insert_with(|| host_bridge_class(topology, root_bus, cpu));
        let apart = Side::Apart {
            length: path.len(),
            host_bridge,
        };
        // Integrated endpoints are each their own top.
        let child = if path.len() == 1 {
            Child::Own(g)
        } else {
            Child::Bridge(top.bdf)
        };
        let at = meetings.entry(None).or_default();
        at.providers.entry(apart).or_default().push((g, child));
        at.clients.entry(apart).or_default().push((g, child));
        let (mut redirect, mut unreadable) = (false, false);
        for hops in 1..path.len() {
            let below = path[hops - 1];
            redirect |= has_acs_redirect(below);
            unreadable |= below.acs_unreadable;
            let bridge = path[hops];
            let child = if hops == 1 {
                Child::Own(g)
            } else {
                Child::Bridge(below.bdf)
            };
            let at = meetings.entry(Some(bridge.bdf)).or_default();
            at.depth = path.len() - hops;
            at.clients
                .entry(Side::Below {
                    hops,
                    redirect,
                    unreadable,
                })
                .or_default()
                .push((g, child));
            let provider = Side::Below {
                hops,
                redirect: redirect || has_acs_redirect(bridge),
                unreadable: unreadable || bridge.acs_unreadable,
            };
            at.providers.entry(provider).or_default().push((g, child));
        }
    }
    let members = |g: usize| groups[g].functions.len() as u64;
    let mut out = Vec::new();
    for (meeting, at) in &meetings {
        for providers in at.providers.values() {
            for clients in at.clients.values() {
                // Pairs below one child meet further down; a group's own functions are each
                // their own child.
                let mut per_child: HashMap<Child, (u64, u64)> = HashMap::new();
                for &(g, child) in providers {
                    per_child.entry(child).or_default().0 += members(g);
                }
                for &(g, child) in clients {
                    per_child.entry(child).or_default().1 += members(g);
                }
                let total =
                    |side: &[(usize, Child)]| side.iter().map(|&(g, _)| members(g)).sum::<u64>();
                let below_one_child: u64 = per_child
                    .iter()
                    .map(|(child, &(p, c))| match child {
                        Child::Own(_) => p.min(c),
                        Child::Bridge(_) => p * c,
                    })
                    .sum();
                let pairs = total(providers) * total(clients) - below_one_child;
                if pairs == 0 {
                    continue;
                }
                let (p, c) = representative(providers, clients, &members)
                    .expect("a side pair with pairs has one below different children");
                let client_path = if p == c {
                    topology.path_to_root(groups[c].functions[1])
                } else {
                    paths[c].clone()
                };
                let indices =
                    |side: &[(usize, Child)]| side.iter().map(|&(g, _)| g).collect::<Vec<_>>();
                out.push((
                    at.depth,
                    GroupVerdict {
                        meeting: *meeting,
                        provider_groups: run_names(&indices(providers)),
                        client_groups: run_names(&indices(clients)),
                        pairs,
                        verdict: verdict_on_paths(topology, &paths[p], &client_path, cpu),
                    },
                ));
            }
        }
    }
    // Stable: within one depth, meeting points stay in address order.
    out.sort_by_key(|(depth, _)| std::cmp::Reverse(*depth));
    out.into_iter().map(|(_, v)| v).collect()
}

/// A provider group and a client group below different children of their meeting point (or
/// one group of several functions below its own port, paired with itself).
fn representative(
    providers: &[(usize, Child)],
    clients: &[(usize, Child)],
    members: &impl Fn(usize) -> u64,
) -> Option<(usize, usize)> {
    let apart = |(p, pc): (usize, Child), (c, cc): (usize, Child)| {
        pc != cc || (p == c && matches!(pc, Child::Own(_)) && members(p) > 1)
    };
    let &first = providers.first()?;
    if let Some(&c) = clients.iter().find(|&&c| apart(first, c)) {
        return Some((first.0, c.0));
    }
    // Every client is below the first provider's child: any provider below another pairs
    // with them.
    let &c = clients.first()?;
    providers
        .iter()
        .find(|&&p| apart(p, c))
        .map(|&p| (p.0, c.0))
}

/// How `root_bus`'s host bridge stands for pairs that meet only at the root complex.
fn host_bridge_class(topology: &Topology, root_bus: (u16, u8), cpu: Cpu) -> HostBridgeClass {
    if cpu.exempts_host_bridge() {
        return HostBridgeClass::Exempt;
    }
    let entry = host_bridge_function(topology, root_bus).and_then(|h| {
        HOST_BRIDGE_WHITELIST
            .iter()
            .find(|(v, d, _)| *v == h.vendor && *d == h.device)
    });
    match entry {
        None => HostBridgeClass::NotWhitelisted,
        Some((_, _, false)) => HostBridgeClass::Whitelisted,
        Some((_, _, true)) => HostBridgeClass::OnlyWithin(root_bus),
    }
}
