//! Peer-to-peer DMA rules as Linux applies them (drivers/pci/p2pdma.c, 6.x): the distance between
//! a provider (the function whose memory is used, e.g. an NVMe CMB) and a client (the function
//! that DMAs into it), and the kernel's verdict — bus addresses through a common upstream bridge,
//! mapped through the host bridge, or refused — with the reason. The CPU vendor/family is an input
//! because the kernel exempts AMD Zen and later from the host-bridge whitelist. No I/O.

use serde::{Deserialize, Serialize};

use super::{Function, Kind, Topology};
use crate::pcie::Bdf;

/// ACS control bits that redirect peer-to-peer requests upstream: P2P Request Redirect,
/// P2P Completion Redirect and P2P Egress Control (PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC).
pub(crate) const ACS_REDIRECT_BITS: u16 = 0x0004 | 0x0008 | 0x0020;

/// The CPU the kernel runs on, as far as P2PDMA cares: x86 vendor and family (`cpu_data(0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "vendor", rename_all = "snake_case")]
pub enum Cpu {
    Intel {
        family: u32,
    },
    Amd {
        family: u32,
    },
    /// Any other vendor or architecture: never exempt.
    Other,
}

impl Cpu {
    /// The kernel's `cpu_supports_p2pdma()`: AMD family 0x17 (Zen) or newer.
    pub(crate) fn exempts_host_bridge(self) -> bool {
        matches!(self, Cpu::Amd { family } if family >= 0x17)
    }

    /// Parses `intel`, `amd`, `other`, optionally with a family: `amd:0x19`, `intel:6`. A bare
    /// `amd` means Zen (0x17), `intel` family 6. QEMU 7.2's `-cpu max` is AMD family 0xf under
    /// TCG and the host's CPU under KVM; `-cpu EPYC` is AMD family 0x17.
    pub fn parse(s: &str) -> crate::Result<Cpu> {
        let bad = || {
            crate::Error::bad_input(format!(
                "invalid CPU '{s}': expected intel, amd or other, optionally with a family \
                 (amd:0x19, intel:6)"
            ))
        };
        let (vendor, family) = match s.split_once(':') {
            Some((v, f)) => {
                let f = f.trim();
                let parsed = match f.strip_prefix("0x") {
                    Some(hex) => u32::from_str_radix(hex, 16),
                    None => f.parse(),
                };
                (v, Some(parsed.map_err(|_| bad())?))
            }
            None => (s, None),
        };
        match vendor.to_ascii_lowercase().as_str() {
            "intel" => Ok(Cpu::Intel {
                family: family.unwrap_or(6),
            }),
            "amd" => Ok(Cpu::Amd {
                family: family.unwrap_or(0x17),
            }),
            "other" if family.is_none() => Ok(Cpu::Other),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Cpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cpu::Intel { family } => write!(f, "intel:{family:#x}"),
            Cpu::Amd { family } => write!(f, "amd:{family:#x}"),
            Cpu::Other => write!(f, "other"),
        }
    }
}

/// How the kernel will map DMA between the two functions (`enum pci_p2pdma_map_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MapType {
    /// Transactions route through a common upstream bridge with PCI bus addresses.
    BusAddress,
    /// Transactions go up to the root complex and back down.
    ThroughHostBridge,
    /// The kernel refuses: the I/O fails with EREMOTEIO.
    NotSupported,
    /// The verdict depends on facts that could not be read (ACS of a function on the path
    /// without root): the reasons say which.
    Unknown,
}

/// One fact that led to the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Reason {
    /// The two functions meet below a bridge: the closest one.
    CommonUpstreamBridge { bridge: Bdf },
    /// The functions are one and the same.
    SameFunction,
    /// Their paths only meet at the root complex.
    NoCommonUpstreamBridge,
    /// A bridge on the path has ACS redirect enabled, which sends the traffic upstream.
    AcsRedirect { bridges: Vec<Bdf> },
    /// ACS of these functions on the path could not be read (it needs root): with redirect on,
    /// the traffic would go upstream instead.
    AcsUnreadable { functions: Vec<Bdf> },
    /// AMD family 0x17 or newer: the kernel allows any path through the host bridge.
    CpuExemption { family: u32 },
    /// The host bridge (the first function of the root bus) is on the kernel's whitelist.
    HostBridgeWhitelisted { host_bridge: Bdf },
    /// The host bridge is not on the whitelist (or only allowed within one host bridge).
    HostBridgeNotWhitelisted {
        host_bridge: Option<Bdf>,
        vendor: Option<u16>,
        device: Option<u16>,
    },
}

/// The kernel's verdict for one provider/client pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    pub provider: Bdf,
    pub client: Bdf,
    /// The kernel's distance: hops from each function up to where their paths meet, summed.
    pub distance: u32,
    pub map: MapType,
    #[serde(default)]
    pub reasons: Vec<Reason>,
}

impl Verdict {
    /// The warning the kernel logs on the client when it refuses (what `dmesg` shows).
    pub fn kernel_message(&self) -> Option<String> {
        (self.map == MapType::NotSupported).then(|| {
            format!(
                "cannot be used for peer-to-peer DMA as the client and provider ({}) do not share \
                 an upstream bridge or whitelisted host bridge",
                self.provider
            )
        })
    }
}

/// Host bridges the kernel trusts to route peer-to-peer traffic: (vendor, device, only between
/// functions below this same host bridge). Facts from p2pdma.c's whitelist.
const HOST_BRIDGE_WHITELIST: [(u16, u16, bool); 10] = [
    (0x8086, 0x3c00, true), // Xeon E5 / Core i7
    (0x8086, 0x3c01, true),
    (0x8086, 0x2f00, true), // Xeon E7 v3 / E5 v3 / Core i7
    (0x8086, 0x2f01, true),
    (0x8086, 0x2030, false), // Skylake-E root ports
    (0x8086, 0x2031, false),
    (0x8086, 0x2032, false),
    (0x8086, 0x2033, false),
    (0x8086, 0x2020, false),
    (0x8086, 0x09a2, false),
];

/// The kernel's verdict for `client` doing DMA to memory of `provider`. `None` if either
/// address is not in the topology.
pub fn verdict(topology: &Topology, provider: Bdf, client: Bdf, cpu: Cpu) -> Option<Verdict> {
    topology.get(provider)?;
    topology.get(client)?;
    Some(verdict_on_paths(
        topology,
        &topology.path_to_root(provider),
        &topology.path_to_root(client),
        cpu,
    ))
}

/// [`verdict`] for two functions given by their paths to the root (the function first).
fn verdict_on_paths(
    topology: &Topology,
    provider_path: &[&Function],
    client_path: &[&Function],
    cpu: Cpu,
) -> Verdict {
    let (provider, client) = (provider_path[0].bdf, client_path[0].bdf);
    let mut reasons = Vec::new();
    let mut acs_bridges = Vec::new();
    // Walk up from the provider; at each step look for that function on the client's path. The
    // kernel checks ACS on every provider-side function it visits, the meeting point included.
    let mut unreadable = Vec::new();
    let mut meeting = None;
    for (up_a, a) in provider_path.iter().enumerate() {
        if has_acs_redirect(a) {
            acs_bridges.push(a.bdf);
        }
        if a.acs_unreadable {
            unreadable.push(a.bdf);
        }
        if let Some(up_b) = client_path.iter().position(|b| b.bdf == a.bdf) {
            meeting = Some((up_a, up_b, a.bdf));
            break;
        }
    }
    let distance = match meeting {
        Some((up_a, up_b, bridge)) => {
            acs_bridges.extend(
                client_path[..up_b]
                    .iter()
                    .filter(|b| has_acs_redirect(b))
                    .map(|b| b.bdf),
            );
            unreadable.extend(
                client_path[..up_b]
                    .iter()
                    .filter(|b| b.acs_unreadable)
                    .map(|b| b.bdf),
            );
            reasons.push(if up_a == 0 && up_b == 0 {
                Reason::SameFunction
            } else {
                Reason::CommonUpstreamBridge { bridge }
            });
            (up_a + up_b) as u32
        }
        None => {
            reasons.push(Reason::NoCommonUpstreamBridge);
            (provider_path.len() + client_path.len()) as u32
        }
    };
    let acs_redirects = !acs_bridges.is_empty();
    if acs_redirects {
        reasons.push(Reason::AcsRedirect {
            bridges: acs_bridges,
        });
    }
    let map = if meeting.is_some() && !acs_redirects && !unreadable.is_empty() {
        // Bus addresses only if none of them redirects; that cannot be told without root.
        reasons.push(Reason::AcsUnreadable {
            functions: unreadable,
        });
        MapType::Unknown
    } else if meeting.is_some() && !acs_redirects {
        MapType::BusAddress
    } else if let (true, Cpu::Amd { family }) = (cpu.exempts_host_bridge(), cpu) {
        reasons.push(Reason::CpuExemption { family });
        MapType::ThroughHostBridge
    } else {
        host_bridge_verdict(topology, provider_path, client_path, &mut reasons)
    };
    Verdict {
        provider,
        client,
        distance,
        map,
        reasons,
    }
}

/// The most ordered pairs [`matrix`] lists (1,024 endpoints): past it the pairwise table is
/// larger than anyone reads, and the grouped summary says the same in a few lines.
pub(crate) const MAX_PAIRS: usize = 1 << 20;

fn endpoints(topology: &Topology) -> impl Iterator<Item = &Function> {
    topology
        .functions()
        .iter()
        .filter(|f| matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint))
}

/// Verdicts for every ordered pair of distinct endpoints (the provider first), in address order;
/// bad input naming `--full` when there are more than `MAX_PAIRS`.
pub fn matrix(topology: &Topology, cpu: Cpu) -> crate::Result<Vec<Verdict>> {
    let paths: Vec<Vec<&Function>> = endpoints(topology)
        .map(|f| topology.path_to_root(f.bdf))
        .collect();
    let pairs = paths.len() * paths.len().saturating_sub(1);
    if pairs > MAX_PAIRS {
        return Err(crate::Error::bad_input(format!(
            "--full: {} endpoints make {pairs} ordered pairs, more than the {MAX_PAIRS} pcielab lists one by one; \
             leave out --full for the verdicts by group, which cover every pair",
            paths.len()
        )));
    }
    let mut verdicts = Vec::with_capacity(pairs);
    for provider in &paths {
        for client in &paths {
            if provider[0].bdf != client[0].bdf {
                verdicts.push(verdict_on_paths(topology, provider, client, cpu));
            }
        }
    }
    Ok(verdicts)
}

/// Endpoints that share every verdict: the same bridge above them (hence the same path to the
/// root; for integrated endpoints, the same root bus) and the same ACS state of their own, the
/// only facts of an endpoint the kernel's rules read. The virtual functions of an SR-IOV device
/// below one port are one group however many there are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Group {
    /// `g1`, `g2`, … in the address order of their first function.
    pub group: String,
    /// The bridge above them; `None` for endpoints integrated in the root complex.
    pub port: Option<Bdf>,
    /// The root port at the top of their path (for integrated endpoints, the first of them):
    /// where a picture of a large host gathers groups. Always written; absent only from
    /// documents older than it, read back without it (their large hosts cannot be drawn by root
    /// port).
    #[schemars(with = "Bdf")]
    pub top: Option<Bdf>,
    /// Its endpoints, in address order.
    pub functions: Vec<Bdf>,
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
    pub meeting: Option<Bdf>,
    /// Provider groups as runs of consecutive group names: `g1..g64`, `g70`.
    pub provider_groups: Vec<String>,
    /// Client groups, written as `provider_groups`.
    pub client_groups: Vec<String>,
    /// How many ordered endpoint pairs it stands for.
    pub pairs: u64,
    /// The verdict of one pair it stands for: `provider` and `client` name those two
    /// functions, and the reasons name what that pair's path holds (another pair's may name
    /// other bridges with the same effect).
    pub verdict: Verdict,
}

/// `g1` → 0..=0, `g3..g9` → 2..=8: the 0-based group indices a name or run of names stands for.
pub fn group_run(text: &str) -> Option<(usize, usize)> {
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

/// The `pcielab topo --p2p --json` document: the groups and their verdicts, and with `--full`
/// every ordered pair of endpoints (empty otherwise). Read back by `plot` and `report --from`:
/// documents from before verdicts were grouped have only `pairs`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    pub cpu: Cpu,
    #[serde(default)]
    pub groups: Vec<Group>,
    #[serde(default)]
    pub group_verdicts: Vec<GroupVerdict>,
    pub pairs: Vec<Verdict>,
}

impl Report {
    /// The grouped verdicts of `topology`, with every pair too when `full`.
    pub fn new(topology: &Topology, cpu: Cpu, full: bool) -> crate::Result<Report> {
        let groups = groups(topology);
        Ok(Report {
            cpu,
            group_verdicts: group_verdicts(topology, &groups, cpu),
            groups,
            pairs: if full {
                matrix(topology, cpu)?
            } else {
                Vec::new()
            },
        })
    }
}

impl MapType {
    pub fn describe(self) -> &'static str {
        match self {
            MapType::BusAddress => "bus address",
            MapType::ThroughHostBridge => "through host bridge",
            MapType::NotSupported => "not supported",
            MapType::Unknown => "unknown",
        }
    }

    /// One letter for the matrix: B(us address), H(ost bridge), x (refused).
    fn mark(self) -> char {
        match self {
            MapType::BusAddress => 'B',
            MapType::ThroughHostBridge => 'H',
            MapType::NotSupported => 'x',
            MapType::Unknown => '?',
        }
    }
}

/// `0000:01:00.0, 0000:02:00.0`.
fn bdf_list(bdfs: &[Bdf]) -> String {
    bdfs.iter()
        .map(Bdf::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Reason {
    pub fn describe(&self) -> String {
        match self {
            Reason::CommonUpstreamBridge { bridge } => format!("common upstream bridge {bridge}"),
            Reason::SameFunction => "same function".into(),
            Reason::NoCommonUpstreamBridge => "no common upstream bridge".into(),
            Reason::AcsRedirect { bridges } => format!("ACS redirect on {}", bdf_list(bridges)),
            Reason::AcsUnreadable { functions } => {
                format!("unknown: needs root to read ACS of {}", bdf_list(functions))
            }
            Reason::CpuExemption { family } => {
                format!("CPU exemption (AMD family {family:#x} >= 0x17)")
            }
            Reason::HostBridgeWhitelisted { host_bridge } => {
                format!("host bridge {host_bridge} whitelisted")
            }
            Reason::HostBridgeNotWhitelisted {
                host_bridge: Some(bdf),
                vendor,
                device,
            } => format!(
                "host bridge {bdf} ({:04x}:{:04x}) not whitelisted",
                vendor.unwrap_or(0),
                device.unwrap_or(0)
            ),
            Reason::HostBridgeNotWhitelisted { .. } => {
                "no host bridge function at 00.0 or a root port first on the root bus".into()
            }
        }
    }
}

/// The most rows a text matrix gets; a larger host is read from the verdict lines below it.
const MAX_MATRIX_ROWS: usize = 32;

/// The groups, a matrix of group verdicts (distance and B/H/x/? per provider row and client
/// column, when there are few groups) and one line per run of group verdicts; with `--full`,
/// the same per endpoint pair.
pub fn to_text(report: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let endpoints: usize = report.groups.iter().map(|g| g.functions.len()).sum();
    let _ = writeln!(
        out,
        "P2PDMA between {endpoints} endpoints in {} groups, CPU {} (endpoints below one port with the same ACS state \
         share every verdict; --full lists every pair)",
        report.groups.len(),
        report.cpu
    );
    let _ = writeln!(out, "{:<6} {:<14} functions", "group", "below");
    for g in &report.groups {
        let below = g.port.map_or("root complex".to_string(), |p| p.to_string());
        let members = match g.functions.as_slice() {
            [one] => one.to_string(),
            [first, .., last] => format!("{first} … {last} ({})", g.functions.len()),
            [] => String::new(),
        };
        let _ = writeln!(out, "{:<6} {below:<14} {members}", g.group);
    }
    out.push('\n');
    let names: Vec<&str> = report.groups.iter().map(|g| g.group.as_str()).collect();
    if names.len() <= MAX_MATRIX_ROWS {
        let members: Vec<usize> = report.groups.iter().map(|g| g.functions.len()).collect();
        let cells = group_cells(
            &members,
            report
                .group_verdicts
                .iter()
                .map(|gv| (&gv.provider_groups[..], &gv.client_groups[..], &gv.verdict)),
        )
        .expect("at most 32 groups stay far within the budget");
        write_matrix(&mut out, &names, |p, c| cells[p * names.len() + c]);
    }
    let _ = writeln!(
        out,
        "{:<14} provider groups -> client groups: verdict (a pair of groups takes the first line \
         naming both)",
        "paths meet at"
    );
    for gv in &report.group_verdicts {
        let v = &gv.verdict;
        let _ = writeln!(
            out,
            "{:<14} {} -> {}: {} pair{}, {}  (as {} -> {})",
            gv.meeting
                .map_or("root complex".to_string(), |b| b.to_string()),
            gv.provider_groups.join(","),
            gv.client_groups.join(","),
            gv.pairs,
            if gv.pairs == 1 { "" } else { "s" },
            verdict_text(v),
            v.provider,
            v.client
        );
    }
    if !report.pairs.is_empty() {
        out.push('\n');
        let mut bdfs: Vec<Bdf> = report.pairs.iter().map(|v| v.provider).collect();
        bdfs.dedup();
        if bdfs.len() <= MAX_MATRIX_ROWS {
            let shorts: Vec<String> = bdfs.iter().map(|b| short(*b)).collect();
            let labels: Vec<&str> = shorts.iter().map(String::as_str).collect();
            let at = |bdf: Bdf| bdfs.iter().position(|b| *b == bdf);
            let by_pair: std::collections::HashMap<(Option<usize>, Option<usize>), &Verdict> =
                report
                    .pairs
                    .iter()
                    .map(|v| ((at(v.provider), at(v.client)), v))
                    .collect();
            write_matrix(&mut out, &labels, |p, c| {
                by_pair.get(&(Some(p), Some(c))).copied()
            });
        }
        for v in &report.pairs {
            let _ = writeln!(out, "{} -> {}  {}", v.provider, v.client, verdict_text(v));
        }
    }
    out
}

/// The most (provider group, client group) cells [`group_cells`] visits: a document listing
/// more is not one pcielab printed for a host it can draw.
const MAX_CELL_VISITS: usize = 1 << 24;

/// Each (provider group, client group) cell's verdict, row-major over the groups (`members`:
/// how many functions each has), from group verdicts in their listed order (deepest meeting
/// point first: the first naming both groups applies). `None` in a cell no pair falls in (a
/// group of one with itself); `None` overall past `MAX_CELL_VISITS`.
pub fn group_cells<'v, V: ?Sized>(
    members: &[usize],
    verdicts: impl IntoIterator<Item = (&'v [String], &'v [String], &'v V)>,
) -> Option<Vec<Option<&'v V>>> {
    let groups = members.len();
    let mut cells: Vec<Option<&V>> = vec![None; groups * groups];
    let mut visits = 0usize;
    let runs = |names: &[String]| -> Vec<(usize, usize)> {
        names
            .iter()
            .filter_map(|n| group_run(n))
            .filter(|&(first, _)| first < groups)
            .map(|(first, last)| (first, last.min(groups - 1)))
            .collect()
    };
    for (providers, clients, verdict) in verdicts {
        let clients = runs(clients);
        for (first, last) in runs(providers) {
            for p in first..=last {
                for &(c_first, c_last) in &clients {
                    visits += c_last - c_first + 1;
                    if visits > MAX_CELL_VISITS {
                        return None;
                    }
                    for cell in &mut cells[p * groups + c_first..=p * groups + c_last] {
                        cell.get_or_insert(verdict);
                    }
                }
            }
        }
    }
    // A verdict listing a group as provider and client stands for pairs between its
    // functions, which a group of one has none of.
    for (g, &n) in members.iter().enumerate() {
        if n < 2 {
            cells[g * groups + g] = None;
        }
    }
    Some(cells)
}

/// `distance  N  map  reasons`, as every verdict line ends.
fn verdict_text(v: &Verdict) -> String {
    let reasons: Vec<String> = v.reasons.iter().map(Reason::describe).collect();
    format!(
        "distance {:>2}  {:<19}  {}",
        v.distance,
        v.map.describe(),
        reasons.join("; ")
    )
}

/// A square matrix of `labels`, providers down and clients across, a cell per verdict.
fn write_matrix<'v>(
    out: &mut String,
    labels: &[&str],
    cell: impl Fn(usize, usize) -> Option<&'v Verdict>,
) {
    use std::fmt::Write as _;
    let _ = write!(out, "{:<14}", "provider\\client");
    for c in labels {
        let _ = write!(out, " {c:>8}");
    }
    out.push('\n');
    for (p, provider) in labels.iter().enumerate() {
        let _ = write!(out, "{provider:<15}");
        for c in 0..labels.len() {
            let text = cell(p, c).map_or("-".to_string(), |v| {
                format!("{} {}", v.distance, v.map.mark())
            });
            let _ = write!(out, " {text:>8}");
        }
        out.push('\n');
    }
    out.push('\n');
}

/// `bb:dd.f`, or the full address outside domain 0.
fn short(bdf: Bdf) -> String {
    if bdf.domain == 0 {
        format!("{:02x}:{:02x}.{:x}", bdf.bus, bdf.device, bdf.function)
    } else {
        bdf.to_string()
    }
}

pub(crate) fn has_acs_redirect(function: &Function) -> bool {
    function
        .acs
        .is_some_and(|acs| acs.control & ACS_REDIRECT_BITS != 0)
}

/// The kernel's host-bridge whitelist check for a path that must go through the root complex.
fn host_bridge_verdict(
    topology: &Topology,
    provider_path: &[&Function],
    client_path: &[&Function],
    reasons: &mut Vec<Reason>,
) -> MapType {
    let root_bus = |path: &[&Function]| {
        path.last()
            .map(|top| (top.bdf.domain, top.bdf.bus))
            .expect("a path starts with the function itself")
    };
    let (bus_a, bus_b) = (root_bus(provider_path), root_bus(client_path));
    let same_host_bridge = bus_a == bus_b;
    let host_a = host_bridge_function(topology, bus_a);
    let host_b = host_bridge_function(topology, bus_b);
    let whitelisted = |host: Option<&Function>| {
        host.and_then(|h| {
            HOST_BRIDGE_WHITELIST
                .iter()
                .find(|(v, d, _)| *v == h.vendor && *d == h.device)
        })
        .is_some_and(|(_, _, only_same)| same_host_bridge || !only_same)
    };
    if whitelisted(host_a) && whitelisted(host_b) {
        reasons.push(Reason::HostBridgeWhitelisted {
            host_bridge: host_a.expect("whitelisted implies present").bdf,
        });
        return MapType::ThroughHostBridge;
    }
    let refused = if whitelisted(host_a) { host_b } else { host_a };
    reasons.push(Reason::HostBridgeNotWhitelisted {
        host_bridge: refused.map(|h| h.bdf),
        vendor: refused.map(|h| h.vendor),
        device: refused.map(|h| h.device),
    });
    MapType::NotSupported
}

/// The function the kernel takes as a root bus's host bridge: the first function on that bus if
/// it is at devfn 00.0 or is a root port (`pci_host_bridge_dev`).
fn host_bridge_function(topology: &Topology, (domain, bus): (u16, u8)) -> Option<&Function> {
    // Functions are in address order: start at the bus rather than scan the whole host.
    let all = topology.functions();
    let start = all.partition_point(|f| (f.bdf.domain, f.bdf.bus) < (domain, bus));
    let first = all[start..]
        .iter()
        .take_while(|f| (f.bdf.domain, f.bdf.bus) == (domain, bus))
        .find(|f| f.parent.is_none())?;
    (first.bdf.devfn() == 0 || first.kind == Kind::RootPort).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::topology::Acs;

    fn func(addr: &str, kind: Kind, vendor: u16, device: u16, parent: Option<&str>) -> Function {
        let mut f = Function::new(bdf(addr), vendor, device, 0, kind);
        f.parent = parent.map(bdf);
        f
    }

    /// The seed's machine: q35 host bridge, an integrated NVMe, a root port with a switch and
    /// two NVMe below it, plus a second root port with one NVMe.
    fn seed() -> Topology {
        Topology::new(vec![
            func("00:00.0", Kind::HostBridge, 0x8086, 0x29c0, None),
            func("00:03.0", Kind::RcEndpoint, 0x1b36, 0x0010, None),
            func("00:04.0", Kind::RootPort, 0x1b36, 0x000c, None),
            func("00:05.0", Kind::RootPort, 0x1b36, 0x000c, None),
            func(
                "01:00.0",
                Kind::SwitchUpstream,
                0x104c,
                0x8232,
                Some("00:04.0"),
            ),
            func(
                "02:00.0",
                Kind::SwitchDownstream,
                0x104c,
                0x8233,
                Some("01:00.0"),
            ),
            func(
                "02:01.0",
                Kind::SwitchDownstream,
                0x104c,
                0x8233,
                Some("01:00.0"),
            ),
            func("03:00.0", Kind::Endpoint, 0x1b36, 0x0010, Some("02:00.0")),
            func("04:00.0", Kind::Endpoint, 0x1b36, 0x0010, Some("02:01.0")),
            func("05:00.0", Kind::Endpoint, 0x1b36, 0x0010, Some("00:05.0")),
        ])
    }

    const INTEL: Cpu = Cpu::Intel { family: 6 };

    #[test]
    fn same_switch_is_bus_address_at_distance_four() {
        let v = verdict(&seed(), bdf("03:00.0"), bdf("04:00.0"), INTEL).unwrap();
        assert_eq!(v.map, MapType::BusAddress);
        assert_eq!(v.distance, 4);
        assert_eq!(
            v.reasons,
            vec![Reason::CommonUpstreamBridge {
                bridge: bdf("01:00.0")
            }]
        );
        assert_eq!(v.kernel_message(), None);
    }

    #[test]
    fn different_root_ports_are_refused_on_q35_with_intel() {
        let v = verdict(&seed(), bdf("03:00.0"), bdf("05:00.0"), INTEL).unwrap();
        assert_eq!(v.map, MapType::NotSupported);
        // provider side: 03:00.0, 02:00.0, 01:00.0, 00:04.0; client side: 05:00.0, 00:05.0
        assert_eq!(v.distance, 6);
        assert_eq!(
            v.reasons,
            vec![
                Reason::NoCommonUpstreamBridge,
                Reason::HostBridgeNotWhitelisted {
                    host_bridge: Some(bdf("00:00.0")),
                    vendor: Some(0x8086),
                    device: Some(0x29c0)
                }
            ]
        );
        assert!(v
            .kernel_message()
            .unwrap()
            .contains("client and provider (0000:03:00.0) do not share"));
    }

    #[test]
    fn zen_cpu_routes_through_the_host_bridge() {
        let zen = Cpu::Amd { family: 0x17 };
        let v = verdict(&seed(), bdf("00:03.0"), bdf("04:00.0"), zen).unwrap();
        assert_eq!(v.map, MapType::ThroughHostBridge);
        assert_eq!(v.distance, 5);
        assert!(v.reasons.contains(&Reason::CpuExemption { family: 0x17 }));
        let older = Cpu::Amd { family: 0x15 };
        assert_eq!(
            verdict(&seed(), bdf("00:03.0"), bdf("04:00.0"), older)
                .unwrap()
                .map,
            MapType::NotSupported
        );
    }

    #[test]
    fn acs_redirect_on_a_downstream_port_forces_the_host_bridge() {
        let mut topo = seed();
        for f in topo.functions_mut() {
            if f.bdf == bdf("02:01.0") {
                f.acs = Some(Acs {
                    capability: 0x1f,
                    control: 0x0004,
                });
            }
            if f.bdf == bdf("02:00.0") {
                // Source validation only: not a redirect bit.
                f.acs = Some(Acs {
                    capability: 0x1f,
                    control: 0x0001,
                });
            }
        }
        let v = verdict(&topo, bdf("03:00.0"), bdf("04:00.0"), INTEL).unwrap();
        assert_eq!(v.map, MapType::NotSupported);
        assert_eq!(v.distance, 4);
        assert!(v.reasons.contains(&Reason::AcsRedirect {
            bridges: vec![bdf("02:01.0")]
        }));
    }

    #[test]
    fn whitelisted_host_bridge_respects_same_bridge_flag() {
        let mut topo = seed();
        topo.functions_mut()[0].device = 0x3c00; // Xeon E5: only within one host bridge
        let v = verdict(&topo, bdf("03:00.0"), bdf("05:00.0"), INTEL).unwrap();
        assert_eq!(v.map, MapType::ThroughHostBridge);
        assert!(v.reasons.contains(&Reason::HostBridgeWhitelisted {
            host_bridge: bdf("00:00.0")
        }));
        // A second root bus (an expander bridge) whose first function is a root port.
        let mut functions = topo.functions().to_vec();
        functions.push(func("80:00.0", Kind::RootPort, 0x1b36, 0x000c, None));
        functions.push(func(
            "81:00.0",
            Kind::Endpoint,
            0x1b36,
            0x0010,
            Some("80:00.0"),
        ));
        let topo = Topology::new(functions);
        let v = verdict(&topo, bdf("03:00.0"), bdf("81:00.0"), INTEL).unwrap();
        assert_eq!(v.map, MapType::NotSupported);
        assert!(v.reasons.contains(&Reason::HostBridgeNotWhitelisted {
            host_bridge: Some(bdf("00:00.0")),
            vendor: Some(0x8086),
            device: Some(0x3c00)
        }));
    }

    #[test]
    fn matrix_covers_ordered_endpoint_pairs_symmetrically() {
        let m = matrix(&seed(), INTEL).unwrap();
        assert_eq!(m.len(), 4 * 3);
        for v in &m {
            let back = m
                .iter()
                .find(|w| w.provider == v.client && w.client == v.provider)
                .unwrap();
            assert_eq!((v.distance, v.map), (back.distance, back.map));
        }
        let same_fn = verdict(&seed(), bdf("04:00.0"), bdf("04:00.0"), INTEL).unwrap();
        assert_eq!(same_fn.distance, 0);
        assert_eq!(same_fn.reasons, vec![Reason::SameFunction]);
        assert!(verdict(&seed(), bdf("09:00.0"), bdf("04:00.0"), INTEL).is_none());
    }

    #[test]
    fn text_report_has_matrix_and_reasons() {
        let text = to_text(&Report::new(&seed(), INTEL, true).unwrap());
        let row = text.lines().find(|l| l.starts_with("03:00.0")).unwrap();
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["03:00.0", "5", "x", "-", "4", "B", "6", "x"]
        );
        assert!(text.contains(
            "0000:03:00.0 -> 0000:05:00.0  distance  6  not supported        no common upstream \
             bridge; host bridge 0000:00:00.0 (8086:29c0) not whitelisted"
        ));
        // The two NVMe below one switch meet at its upstream port: one verdict line for both
        // directions, listed before the root complex's lines (different path lengths there).
        let meets = |at: &str| text.lines().position(|l| l.starts_with(at)).unwrap();
        assert!(
            text.contains(
                "0000:01:00.0   g2..g3 -> g2..g3: 2 pairs, distance  4  bus address          \
                 common upstream bridge 0000:01:00.0  (as 0000:03:00.0 -> 0000:04:00.0)"
            ),
            "{text}"
        );
        assert!(meets("0000:01:00.0") < meets("root complex"));
        assert!(
            text.contains("root complex   g4 -> g2..g3: 2 pairs, distance  6  not supported"),
            "{text}"
        );
    }

    /// The seed's host widened to SR-IOV size: behind root port 00:05.0 a device with `vfs`
    /// virtual functions, one of which has ACS redirect set and one whose ACS is unreadable.
    fn with_virtual_functions(vfs: u16) -> Topology {
        let mut functions = seed().functions().to_vec();
        for i in 1..=vfs {
            let mut vf = func(
                &format!("{:02x}:{:02x}.{:x}", 5 + i / 256, (i % 256) / 8, i % 8),
                Kind::Endpoint,
                0x1b36,
                0x0010,
                Some("00:05.0"),
            );
            if i == 3 {
                vf.acs = Some(Acs {
                    capability: 0x7f,
                    control: 0x0004,
                });
            }
            vf.acs_unreadable = i == 5;
            functions.push(vf);
        }
        Topology::new(functions)
    }

    /// The seed's host with a fan-out below it: `switches` root ports (00:1c.x), each above a
    /// switch whose `ports` downstream ports each have one endpoint, every endpoint its own group.
    fn with_fan_out(switches: u8, ports: u8) -> Topology {
        let mut functions = seed().functions().to_vec();
        for s in 0..switches {
            let bus = 0x40 + s * 0x10;
            let root_port = format!("00:1c.{s:x}");
            let upstream = format!("{bus:02x}:00.0");
            functions.push(func(&root_port, Kind::RootPort, 0x8086, 0x7ab8, None));
            functions.push(func(
                &upstream,
                Kind::SwitchUpstream,
                0x10b5,
                0x8747,
                Some(&root_port),
            ));
            for port in 0..ports {
                let downstream = format!("{:02x}:{port:02x}.0", bus + 1);
                functions.push(func(
                    &downstream,
                    Kind::SwitchDownstream,
                    0x10b5,
                    0x8747,
                    Some(&upstream),
                ));
                functions.push(func(
                    &format!("{:02x}:00.0", bus + 2 + port),
                    Kind::Endpoint,
                    0x1b36,
                    0x0010,
                    Some(&downstream),
                ));
            }
        }
        Topology::new(functions)
    }

    /// A fan-out with ACS redirect on one downstream port and unreadable ACS on another, three
    /// integrated endpoints (one group of several tops), and a second root bus whose first
    /// function is a root port with a two-function device; `host` and `expander` are the
    /// device ids of the two root buses' host bridges (Intel), for the whitelist's cases.
    fn mixed(host: u16, expander: u16) -> Topology {
        let mut functions = with_fan_out(2, 3).functions().to_vec();
        for f in &mut functions {
            if f.bdf == bdf("41:01.0") {
                f.acs = Some(Acs {
                    capability: 0x7f,
                    control: 0x0008,
                });
            }
            f.acs_unreadable = f.bdf == bdf("51:02.0");
            if f.bdf == bdf("00:00.0") {
                f.device = host;
            }
        }
        for addr in ["00:03.1", "00:03.2"] {
            functions.push(func(addr, Kind::RcEndpoint, 0x1b36, 0x0010, None));
        }
        functions.push(func("80:00.0", Kind::RootPort, 0x8086, expander, None));
        for addr in ["81:00.0", "81:00.1"] {
            functions.push(func(addr, Kind::Endpoint, 0x1b36, 0x0010, Some("80:00.0")));
        }
        Topology::new(functions)
    }

    #[test]
    fn group_verdicts_agree_with_every_pairwise_verdict() {
        let hosts = || {
            [
                seed(),
                with_virtual_functions(40),
                with_fan_out(3, 4),
                // Not whitelisted; whitelisted only within one host bridge; whitelisted.
                mixed(0x29c0, 0x000c),
                mixed(0x3c00, 0x3c00),
                mixed(0x2030, 0x2031),
                mixed(0x2030, 0x3c01),
            ]
        };
        for cpu in [INTEL, Cpu::Amd { family: 0x19 }] {
            for topology in hosts() {
                let groups = groups(&topology);
                let by_group = group_verdicts(&topology, &groups, cpu);
                let group_of = |bdf: Bdf| {
                    groups
                        .iter()
                        .position(|g| g.functions.contains(&bdf))
                        .unwrap()
                };
                let lists = |names: &[String], g: usize| {
                    names.iter().any(|n| {
                        let (first, last) = group_run(n).unwrap();
                        (first..=last).contains(&g)
                    })
                };
                let mut stood_for = vec![0u64; by_group.len()];
                for pair in matrix(&topology, cpu).unwrap() {
                    let (p, c) = (group_of(pair.provider), group_of(pair.client));
                    let at = by_group
                        .iter()
                        .position(|gv| lists(&gv.provider_groups, p) && lists(&gv.client_groups, c))
                        .unwrap_or_else(|| panic!("no group verdict for {pair:?}"));
                    let stands_for = &by_group[at];
                    stood_for[at] += 1;
                    let meeting = pair.reasons.iter().find_map(|r| match r {
                        Reason::CommonUpstreamBridge { bridge } => Some(*bridge),
                        _ => None,
                    });
                    assert_eq!(
                        (
                            stands_for.meeting,
                            stands_for.verdict.distance,
                            stands_for.verdict.map
                        ),
                        (meeting, pair.distance, pair.map),
                        "{} -> {}",
                        pair.provider,
                        pair.client
                    );
                }
                // The matrix of groups (text and SVG) reads the same verdicts: a cell where
                // pairs fall has their verdict, every other cell is empty.
                let members: Vec<usize> = groups.iter().map(|g| g.functions.len()).collect();
                let cells = group_cells(
                    &members,
                    by_group
                        .iter()
                        .map(|gv| (&gv.provider_groups[..], &gv.client_groups[..], &gv.verdict)),
                )
                .unwrap();
                let mut pairs_in = vec![None; cells.len()];
                for pair in matrix(&topology, cpu).unwrap() {
                    let at = group_of(pair.provider) * groups.len() + group_of(pair.client);
                    pairs_in[at] = Some((pair.distance, pair.map));
                }
                assert_eq!(
                    cells
                        .iter()
                        .map(|v| v.map(|v| (v.distance, v.map)))
                        .collect::<Vec<_>>(),
                    pairs_in
                );
                // Each says how many pairs it stands for, and none stands for none.
                assert_eq!(
                    stood_for,
                    by_group.iter().map(|gv| gv.pairs).collect::<Vec<_>>()
                );
            }
        }
        // The fan-out's 12 endpoints are 12 groups of one beside the seed's.
        assert_eq!(
            groups(&with_fan_out(3, 4)).len(),
            groups(&seed()).len() + 12
        );
        let wide = with_virtual_functions(40);
        let groups = groups(&wide);
        // 03:00.0, 04:00.0 (one switch port each), 00:03.0 (integrated), and behind 00:05.0:
        // the plain functions, the one with ACS redirect, the one with unreadable ACS.
        assert_eq!(groups.len(), 6, "{groups:?}");
        assert_eq!(
            groups.iter().map(|g| g.functions.len()).max(),
            Some(1 + 40 - 2)
        );
    }

    /// 16 switches of 64 ports, an endpoint on each (1,024 groups of one, each switch in its
    /// own domain): one verdict per switch and one for the root complex, never one per pair of
    /// groups, and their pair counts cover every ordered pair once.
    #[test]
    fn a_fan_out_has_a_verdict_per_switch_not_per_pair_of_groups() {
        let mut functions = Vec::new();
        for s in 0..16u16 {
            let rp = Bdf::new(s, 0, 1, 0);
            let up = Bdf::new(s, 1, 0, 0);
            functions.push(Function::new(rp, 0x8086, 0x352a, 0, Kind::RootPort));
            let mut f = Function::new(up, 0x1000, 0xc030, 0, Kind::SwitchUpstream);
            f.parent = Some(rp);
            functions.push(f);
            for port in 0..64u8 {
                let down = Bdf::new(s, 2, port / 8, port % 8);
                let mut d = Function::new(down, 0x1000, 0xc030, 0, Kind::SwitchDownstream);
                d.parent = Some(up);
                functions.push(d);
                let mut e = Function::new(
                    Bdf::new(s, 3 + port, 0, 0),
                    0x144d,
                    0xa824,
                    0,
                    Kind::Endpoint,
                );
                e.parent = Some(down);
                functions.push(e);
            }
        }
        let topology = Topology::new(functions);
        let groups = groups(&topology);
        assert_eq!(groups.len(), 1024);
        let verdicts = group_verdicts(&topology, &groups, INTEL);
        assert_eq!(verdicts.len(), 16 + 1, "{:?}", &verdicts[..3]);
        assert_eq!(verdicts.iter().map(|v| v.pairs).sum::<u64>(), 1024 * 1023);
        let per_switch = &verdicts[0];
        assert_eq!(per_switch.meeting, Some(Bdf::new(0, 1, 0, 0)));
        assert_eq!(per_switch.provider_groups, ["g1..g64"]);
        assert_eq!(
            (per_switch.pairs, per_switch.verdict.distance),
            (64 * 63, 4)
        );
        assert_eq!(per_switch.verdict.map, MapType::BusAddress);
        let apart = verdicts.last().unwrap();
        assert_eq!(apart.meeting, None);
        assert_eq!(apart.client_groups, ["g1..g1024"]);
        assert_eq!(
            (apart.verdict.distance, apart.verdict.map),
            (8, MapType::NotSupported)
        );
    }

    #[test]
    fn too_many_pairs_for_the_full_table_is_bad_input_naming_full() {
        let e = matrix(&with_virtual_functions(1100), INTEL).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.message().starts_with("--full: 1104 endpoints"), "{e}");
        let report = Report::new(&with_virtual_functions(1100), INTEL, false).unwrap();
        assert_eq!(report.groups.len(), 6);
    }

    #[test]
    fn cpu_strings_parse() {
        assert_eq!(Cpu::parse("amd").unwrap(), Cpu::Amd { family: 0x17 });
        assert_eq!(Cpu::parse("AMD:0x19").unwrap(), Cpu::Amd { family: 0x19 });
        assert_eq!(Cpu::parse("intel:6").unwrap(), Cpu::Intel { family: 6 });
        assert_eq!(Cpu::parse("other").unwrap(), Cpu::Other);
        assert_eq!(Cpu::Amd { family: 0x19 }.to_string(), "amd:0x19");
        let err = Cpu::parse("arm:3").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.message().contains("arm:3"));
    }
}
