//! Peer-to-peer paths: pairs the kernel sends through the host because ACS redirects them,
//! and ports whose ACS controls leave devices unisolated for the isolation intent.

use super::common::{config_source, facts};
use crate::advise::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Intent, Judged, Lever, Prediction, Severity,
};
use crate::pcie::Bdf;
use crate::topology::p2p::{Cpu, MapType, Reason};
use crate::topology::{p2p, Function, Kind};
use std::collections::BTreeMap;

/// The endpoints below one meeting bridge whose P2P the kernel sends through the host bridge
/// because of ACS redirect, and every redirecting function on their paths up to it.
#[derive(Default)]
struct RedirectedBelow {
    endpoints: std::collections::BTreeSet<Bdf>,
    redirecting: std::collections::BTreeSet<Bdf>,
    /// One pair's verdict, quoted in the summary.
    example: Option<p2p::Verdict>,
    /// The group verdicts gathered here: the subjects the finding judges.
    verdicts: usize,
    pairs: u64,
}

pub(crate) fn p2p_through_host(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let severity = match context.options.intent {
        Intent::P2p => Severity::PerfLoss,
        // Traffic kept apart is what the isolation intent wants: no pair to judge.
        Intent::Isolation => return Judged::default(),
        Intent::Throughput | Intent::Latency => Severity::Info,
    };
    let groups = p2p::groups(topo);
    // One finding per bridge where redirected paths meet, naming every port on every path
    // between its endpoints: gathered from the group verdicts (each group's path once), so 120
    // ports under one switch make one finding, not 14,280 pairs.
    let mut below: BTreeMap<Bdf, RedirectedBelow> = BTreeMap::new();
    let mut judged = Judged::default();
    for g in p2p::group_verdicts(topo, &groups, Cpu::Intel { family: 6 }) {
        let v = &g.verdict;
        // Only pairs that share a switch and are sent up anyway: ACS is then the reason.
        let (Some(meeting), false) = (g.meeting, v.map == MapType::BusAddress) else {
            judged.clean();
            continue;
        };
        let unreadable = v.reasons.iter().find_map(|r| match r {
            Reason::AcsUnreadable { functions } => functions.first(),
            _ => None,
        });
        if let Some(port) = unreadable.and_then(|b| topo.get(*b)) {
            judged.not_judged(
                format!("p2p {} -> {}", v.provider, v.client),
                format!("ACS of {}: {}", port.bdf, context.input.acs(port)),
            );
            continue;
        }
        if !v
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::AcsRedirect { .. }))
        {
            judged.clean();
            continue;
        }
        let at = below.entry(meeting).or_default();
        at.verdicts += 1;
        at.pairs += g.pairs;
        at.example.get_or_insert_with(|| v.clone());
        let named = g.provider_groups.iter().chain(&g.client_groups);
        for (first, last) in named.filter_map(|name| p2p::group_run(name)) {
            for group in groups.get(first..=last).into_iter().flatten() {
                at.endpoints.extend(&group.functions);
                // The kernel checks ACS on each function from the endpoint up to and including
                // the meeting point (the provider's side); a group's functions share their ACS
                // state and their path.
                let path = topo.path_to_root(group.functions[0]);
                let up_to = path
                    .iter()
                    .position(|f| f.bdf == meeting)
                    .map_or(path.len(), |i| i + 1);
                for f in &path[..up_to] {
                    if p2p::has_acs_redirect(f) {
                        if f.bdf == group.functions[0] {
                            at.redirecting.extend(&group.functions);
                        } else {
                            at.redirecting.insert(f.bdf);
                        }
                    }
                }
            }
        }
    }
    for (meeting, at) in below {
        let Some(v) = at.example else { continue };
        let list = |set: &std::collections::BTreeSet<Bdf>, sep: &str| {
            set.iter().map(Bdf::to_string).collect::<Vec<_>>().join(sep)
        };
        let evidence = at
            .redirecting
            .iter()
            .filter_map(|b| topo.get(*b))
            .map(|b| {
                Evidence::new(
                    config_source(context, b.bdf),
                    "ACSCtl",
                    b.acs.map_or("?".into(), |a| {
                        format!(
                            "control {:#06x} (SrcValid, ReqRedir, CmpltRedir bits)",
                            a.control
                        )
                    }),
                )
            })
            .collect();
        judged.found_on(at.verdicts, Finding {
            id: "p2p-through-host",
            severity,
            subject: format!("p2p below {meeting}"),
            function: Some(meeting.to_string()),
            summary: format!(
                "P2P DMA between the {} endpoints below {meeting} ({}; {} ordered pairs) cannot take the direct path (kernel verdict for {} -> {}: {}, distance {}) because ACS redirect is enabled at {}",
                at.endpoints.len(),
                list(&at.endpoints, ", "),
                at.pairs,
                v.provider,
                v.client,
                v.map.describe(),
                v.distance,
                list(&at.redirecting, ", ")
            ),
            evidence,
            fix: Fix::printed(Lever::KernelParameter, format!(
                    "pci=disable_acs_redir={} (keeps IOMMU groups; those devices can then reach each other directly)",
                    list(&at.redirecting, ";")
                )).noting("ACS redirect isolates devices from each other; keep it where isolation matters"),
            intent: context.options.intent,
            prediction: Prediction::not_predicted("the P2P path cost through the host bridge is platform-specific and not modelled"),
        });
    }
    judged
}

/// The ACS controls the kernel needs on a port, or on a function of a multi-function device,
/// before it gives what lies below or beside it an IOMMU group of its own (`REQ_ACS_FLAGS` in
/// the kernel's drivers/iommu/iommu.c): Source Validation, P2P Request Redirect, P2P Completion
/// Redirect, Upstream Forwarding, as (bit, name as lspci prints it).
const ISOLATION_ACS: [(u16, &str); 4] = [
    (0x01, "SrcValid"),
    (0x04, "ReqRedir"),
    (0x08, "CmpltRedir"),
    (0x10, "UpstreamFwd"),
];

/// The isolation controls `f` lacks, as the kernel's `pci_acs_flags_enabled` judges them: a
/// control the capability does not implement counts as hard-wired on; no ACS capability at all
/// lacks every one. `None` when its ACS could not be read.
fn missing_isolation_acs(f: &Function) -> Option<Vec<&'static str>> {
    if f.acs_unreadable {
        return None;
    }
    Some(
        ISOLATION_ACS
            .iter()
            .filter(|(bit, _)| match f.acs {
                None => true,
                Some(acs) => acs.capability & bit != 0 && acs.control & bit == 0,
            })
            .map(|(_, name)| *name)
            .collect(),
    )
}

/// The IOMMU group sysfs puts `bdf` in, if read.
fn iommu_group_of(context: &Context, bdf: Bdf) -> Option<String> {
    facts(context, bdf)?.iommu_group()
}

pub(crate) fn acs_isolation(context: &Context) -> CheckOutcome {
    if context.options.intent != Intent::Isolation {
        return Judged::default();
    }
    let topo = context.topology;
    let slot = |f: &Function| (f.bdf.domain, f.bdf.bus, f.bdf.device);
    let multifunction = |f: &Function| {
        topo.functions()
            .iter()
            .filter(|g| slot(g) == slot(f))
            .count()
            > 1
    };
    let subjects: Vec<&Function> = topo
        .functions()
        .iter()
        .filter(|f| match f.kind {
            Kind::RootPort | Kind::SwitchDownstream => true,
            Kind::Endpoint | Kind::RcEndpoint | Kind::SwitchUpstream => multifunction(f),
            Kind::HostBridge | Kind::PciBridge => false,
        })
        .collect();
    let mut judged = Judged::default();
    for f in subjects {
        let Some(missing) = missing_isolation_acs(f) else {
            judged.not_judged(f.bdf, context.input.acs(f));
            continue;
        };
        if missing.is_empty() {
            judged.clean();
            continue;
        }
        let port = matches!(f.kind, Kind::RootPort | Kind::SwitchDownstream);
        // What the kernel then puts in one group: a port's whole subtree with it, or every
        // function of the device's slot.
        let merged: Vec<Bdf> = topo
            .functions()
            .iter()
            .filter(|g| {
                if port {
                    topo.path_to_root(g.bdf).iter().any(|p| p.bdf == f.bdf)
                } else {
                    slot(g) == slot(f)
                }
            })
            .map(|g| g.bdf)
            .collect();
        // A root port merges with the one device below it to no harm (a group may hold
        // bridges): it matters where its subtree holds devices to keep apart. A switch's
        // downstream port is where peers meet, so it is always reported.
        let devices = merged
            .iter()
            .filter_map(|b| topo.get(*b))
            .filter(|g| !g.kind.is_bridge())
            .count();
        if f.kind == Kind::RootPort && devices < 2 {
            judged.clean();
            continue;
        }
        let group = iommu_group_of(context, f.bdf)
            .map_or_else(String::new, |g| format!(" (IOMMU group {g})"));
        let listed = merged
            .iter()
            .map(Bdf::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let evidence = vec![Evidence::new(
            config_source(context, f.bdf),
            "ACSCtl",
            f.acs.map_or("no ACS capability".into(), |a| {
                format!(
                    "control {:#06x} of capability {:#06x}",
                    a.control, a.capability
                )
            }),
        )];
        let wanted: u16 = ISOLATION_ACS.iter().map(|(bit, _)| bit).sum();
        judged.found(Finding {
            id: "acs-isolation",
            severity: Severity::Risk,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!(
                "{} {} lacks ACS {}: the kernel cannot isolate {} and puts {listed} in one IOMMU group{group}",
                if port { "port" } else { "multi-function device function" },
                f.bdf,
                missing.join(", "),
                if port { "what lies below it" } else { "its functions from each other" },
            ),
            evidence,
            fix: match f.acs {
                Some(_) => Fix::printed(
                    Lever::Setpci,
                    format!("setpci -s {} ECAP000d+6.w={wanted:04x}:{wanted:04x} (ACS control: SrcValid, ReqRedir, CmpltRedir, UpstreamFwd)", f.bdf),
                )
                .noting("printed, not performed; the kernel enables these at enumeration only where pci=disable_acs_redir or a quirk does not stop it, so a write after boot does not regroup devices: check firmware ACS settings and reboot"),
                None => Fix::printed(
                    Lever::Firmware,
                    format!("{} has no ACS capability: put the devices to isolate behind ports that have it (another slot or switch)", f.bdf),
                ),
            },
            intent: context.options.intent,
            prediction: Prediction::not_predicted("isolation is not a rate"),
        });
    }
    judged
}
