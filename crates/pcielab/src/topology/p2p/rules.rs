//! The kernel's rules for one pair: the distance through the common upstream bridge, ACS
//! redirects on the way, and the host-bridge whitelist (with the AMD Zen exemption) when the
//! path goes through the root complex; every verdict with its reasons.

use crate::pcie::Bdf;
use crate::topology::{Function, Kind, Topology};
use serde::{Deserialize, Serialize};

/// ACS control bits that redirect peer-to-peer requests upstream: P2P Request Redirect,
/// P2P Completion Redirect and P2P Egress Control (PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC).
pub(crate) const ACS_REDIRECT_BITS: u16 = 0x0004 | 0x0008 | 0x0020;

/// The CPU the kernel runs on, as far as P2PDMA cares: x86 vendor and family (`cpu_data(0)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "vendor", rename_all = "snake_case")]
pub enum Cpu {
    /// An Intel CPU.
    Intel {
        /// Its x86 family.
        family: u32,
    },
    /// An AMD CPU (family 0x17 or newer is exempt from the whitelist).
    Amd {
        /// Its x86 family.
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
pub(crate) enum MapType {
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
pub(crate) enum Reason {
    /// The two functions meet below a bridge: the closest one.
    CommonUpstreamBridge {
        /// The closest common bridge.
        bridge: Bdf,
    },
    /// The functions are one and the same.
    SameFunction,
    /// Their paths only meet at the root complex.
    NoCommonUpstreamBridge,
    /// A bridge on the path has ACS redirect enabled, which sends the traffic upstream.
    AcsRedirect {
        /// The bridges redirecting.
        bridges: Vec<Bdf>,
    },
    /// ACS of these functions on the path could not be read (it needs root): with redirect on,
    /// the traffic would go upstream instead.
    AcsUnreadable {
        /// The functions whose ACS was unreadable.
        functions: Vec<Bdf>,
    },
    /// AMD family 0x17 or newer: the kernel allows any path through the host bridge.
    CpuExemption {
        /// The CPU's x86 family.
        family: u32,
    },
    /// The host bridge (the first function of the root bus) is on the kernel's whitelist.
    HostBridgeWhitelisted {
        /// The host bridge.
        host_bridge: Bdf,
    },
    /// The host bridge is not on the whitelist (or only allowed within one host bridge).
    HostBridgeNotWhitelisted {
        /// The host bridge, where the root bus has one.
        host_bridge: Option<Bdf>,
        /// Its vendor ID.
        vendor: Option<u16>,
        /// Its device ID.
        device: Option<u16>,
    },
}

/// The kernel's verdict for one provider/client pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verdict {
    pub(crate) provider: Bdf,
    pub(crate) client: Bdf,
    /// The kernel's distance: hops from each function up to where their paths meet, summed.
    pub(crate) distance: u32,
    pub(crate) map: MapType,
    #[serde(default)]
    pub(crate) reasons: Vec<Reason>,
}

impl Verdict {
    /// The warning the kernel logs on the client when it refuses (what `dmesg` shows).
    #[cfg(test)]
    pub(crate) fn kernel_message(&self) -> Option<String> {
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
pub(super) const HOST_BRIDGE_WHITELIST: [(u16, u16, bool); 10] = [
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
pub(crate) fn verdict(
    topology: &Topology,
    provider: Bdf,
    client: Bdf,
    cpu: Cpu,
) -> Option<Verdict> {
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
pub(super) fn verdict_on_paths(
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

pub(super) fn endpoints(topology: &Topology) -> impl Iterator<Item = &Function> {
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
pub(super) fn host_bridge_function(
    topology: &Topology,
    (domain, bus): (u16, u8),
) -> Option<&Function> {
    // Functions are in address order: start at the bus rather than scan the whole host.
    let all = topology.functions();
    let start = all.partition_point(|f| (f.bdf.domain, f.bdf.bus) < (domain, bus));
    let first = all[start..]
        .iter()
        .take_while(|f| (f.bdf.domain, f.bdf.bus) == (domain, bus))
        .find(|f| f.parent.is_none())?;
    (first.bdf.devfn() == 0 || first.kind == Kind::RootPort).then_some(first)
}
