//! Payload sizes along a path: MPS below what every function on the path supports, MPS that
//! differs between a link's ends, and MRRS small enough to cost reads their bandwidth.

use super::common::{
    busy_endpoint, busy_endpoints, ceiling_prediction, config_source, link_text, moves_bulk_dma,
    NO_ROOT_PORT,
};
use crate::advise::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Intent, Judged, Lever, Prediction, Severity,
};
use crate::model::transfer::LinkParams;
use crate::pcie::Bdf;
use crate::topology::check::LinkJudge;
use crate::topology::{Function, Kind, Topology};

/// The largest MPS every function on `bdf`'s path supports, and the function that limits it
/// (the nearest one on a tie): what `pci=pcie_bus_perf` would program on the endpoint.
fn path_mps(topo: &Topology, bdf: Bdf) -> Option<(u16, Bdf)> {
    let path = topo.path_to_root(bdf);
    // A path that does not reach a root port (a dump or paste of one device, an integrated
    // endpoint whose root complex says nothing) leaves what the path supports unknown: its
    // missing hops may support less.
    if !path.last().is_some_and(|top| top.kind == Kind::RootPort) {
        return None;
    }
    path.into_iter()
        .filter_map(|f| f.mps_supported.map(|m| (m, f.bdf)))
        .fold(None, |best: Option<(u16, Bdf)>, (m, at)| match best {
            Some((b, _)) if b <= m => best,
            _ => Some((m, at)),
        })
}

/// DevCtl's MaxPayload field (bits 7:5) holding `bytes`, as setpci writes it.
fn devctl_mps(bytes: u16) -> u16 {
    ((bytes.max(128) / 128).trailing_zeros() << 5) as u16
}

/// DevCtl's MaxReadReq field (bits 14:12) holding `bytes`.
fn devctl_mrrs(bytes: u16) -> u16 {
    ((bytes.max(128) / 128).trailing_zeros() << 12) as u16
}

/// The setpci writes that raise `endpoint`'s path to MPS `best` and keep every link consistent,
/// in the order to make them: each port on the path programmed below `best`, root first; then
/// the endpoint; then, below each port raised, every other function (siblings of the path, and
/// their subtrees) to min(`best`, what it supports), with its MRRS capped at its MPS where it
/// must stay lower, so no completion larger than it accepts comes down.
fn mps_raise_commands(topo: &Topology, endpoint: Bdf, best: u16) -> Vec<String> {
    let path: Vec<&Function> = topo.path_to_root(endpoint).into_iter().rev().collect();
    let mut commands = Vec::new();
    let set = |f: &Function, mps: u16, commands: &mut Vec<String>| {
        if f.mps != Some(mps) {
            commands.push(format!(
                "setpci -s {} CAP_EXP+8.w={:04x}:00e0",
                f.bdf,
                devctl_mps(mps)
            ));
        }
        if f.mrrs.is_some_and(|r| r > mps) && !f.kind.is_bridge() {
            commands.push(format!(
                "setpci -s {} CAP_EXP+8.w={:04x}:7000",
                f.bdf,
                devctl_mrrs(mps)
            ));
        }
    };
    for f in &path {
        if f.mps.is_some_and(|m| m < best) {
            set(f, best, &mut commands);
        }
    }
    // Below each raised port, what is off the path follows it down.
    let raised: Vec<Bdf> = path
        .iter()
        .filter(|f| f.kind.is_bridge() && f.mps.is_some_and(|m| m < best))
        .map(|f| f.bdf)
        .collect();
    let on_path = |b: Bdf| path.iter().any(|f| f.bdf == b);
    let mut pending: Vec<(Bdf, u16)> = raised.iter().map(|b| (*b, best)).collect();
    while let Some((port, above)) = pending.pop() {
        for child in topo.children(port).filter(|c| !on_path(c.bdf)) {
            let mps = child.mps_supported.map_or(above, |cap| cap.min(above));
            set(child, mps, &mut commands);
            if child.kind.is_bridge() {
                pending.push((child.bdf, mps));
            }
        }
    }
    commands
}

pub(crate) fn mps_below_path(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    // An integrated endpoint has no link and no path: its MPS answers to no port.
    for f in topo.functions().iter().filter(|f| f.kind == Kind::Endpoint) {
        let path = topo.path_to_root(f.bdf);
        if let Some(u) = path
            .iter()
            .find(|u| u.mps.is_none() || u.mps_supported.is_none())
        {
            let reason = context.input.express(u);
            judged.not_judged(
                f.bdf,
                if u.bdf == f.bdf {
                    reason
                } else {
                    format!("{} on its path: {reason}", u.bdf)
                },
            );
            continue;
        }
        let (Some(mps), Some((best, limiting))) = (f.mps, path_mps(topo, f.bdf)) else {
            judged.not_judged(f.bdf, NO_ROOT_PORT.into());
            continue;
        };
        let low: Vec<&Function> = path
            .iter()
            .copied()
            .filter(|u| u.mps.is_some_and(|m| m < best))
            .collect();
        if low.is_empty() || mps >= best {
            judged.clean();
            continue;
        }
        let evidence = low
            .iter()
            .map(|u| {
                Evidence::new(
                    config_source(context, u.bdf),
                    "DevCtl: MaxPayload",
                    format!(
                        "{} bytes (DevCap: MaxPayload {} bytes)",
                        u.mps.unwrap_or(0),
                        u.mps_supported.unwrap_or(0)
                    ),
                )
            })
            .collect();
        let ceiling = topo.path_ceiling(f.bdf);
        let link_fn = ceiling.and_then(|c| topo.get(c.limiting)).unwrap_or(f);
        let prediction = match link_fn.link_params() {
            Some(link) => {
                let now = LinkParams {
                    mps: u32::from(mps),
                    ..link
                };
                let then = LinkParams {
                    mps: u32::from(best),
                    ..link
                };
                ceiling_prediction(
                    context,
                    "write ceiling of the path",
                    &now,
                    &then,
                    &format!(" on the limiting link at {}", link_fn.bdf),
                )
            }
            None => {
                Prediction::not_predicted("no link on the path reports a trained speed and width")
            }
        };
        let p2p = context.options.intent == Intent::P2p;
        judged.found(Finding {
            id: "mps-below-path",
            severity: Severity::PerfLoss,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!(
                "MPS {mps} B on {} but every function on its path supports {best} B (limited by {limiting}); \
                 programmed lower at {}",
                f.bdf,
                low.iter().map(|u| u.bdf.to_string()).collect::<Vec<_>>().join(", ")
            ),
            evidence,
            fix: Fix::printed(Lever::KernelParameter, if p2p {
                    "pci=pcie_bus_safe (the largest MPS every device in the hierarchy supports, equal on every link, so peers can exchange TLPs)".into()
                } else {
                    "pci=pcie_bus_perf (each device gets min(its DevCap, its parent's MPS); MRRS is capped at MPS)".into()
                }).noting(format!(
                    "one device now, every function that must change, top down: {} \
                     — printed, not performed; pcie_bus_perf assumes no P2P, pcie_bus_peer2peer sets 128 B everywhere",
                    mps_raise_commands(topo, f.bdf, best).join("; ")
                )),
            intent: context.options.intent,
            prediction,
        });
    }
    judged
}

pub(crate) fn mps_mismatch(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    for f in topo.functions() {
        let Some(port) = f.parent.and_then(|p| topo.get(p)) else {
            continue;
        };
        let subject = format!("link {} -> {}", port.bdf, f.bdf);
        let (Some(mine), Some(theirs)) = (f.mps, port.mps) else {
            let unknown = if f.mps.is_none() { f } else { port };
            judged.not_judged(subject, context.input.express(unknown));
            continue;
        };
        // Larger below: this function may send TLPs its port rejects as malformed. Smaller
        // below: completions up to the port's MPS may come down unless reads stay at or
        // under this function's MPS (what pcie_bus_perf ensures by capping MRRS).
        let reads_fit = f.mrrs.is_some_and(|r| r <= mine);
        if mine == theirs || (mine < theirs && reads_fit) {
            judged.clean();
            continue;
        }
        let source = config_source(context, f.bdf);
        judged.found(Finding {
            id: "mps-mismatch",
            severity: Severity::Risk,
            subject,
            function: Some(f.bdf.to_string()),
            summary: if mine > theirs {
                format!("MPS {mine} B at {} above {theirs} B at {}: TLPs larger than {theirs} B are malformed at the port", f.bdf, port.bdf)
            } else {
                format!(
                    "MPS {mine} B at {} below {theirs} B at {} with MRRS {} B: completions larger than {mine} B can reach it",
                    f.bdf,
                    port.bdf,
                    f.mrrs.map_or("?".into(), |r| r.to_string())
                )
            },
            evidence: vec![
                Evidence::new(source.clone(), "DevCtl: MaxPayload", format!("{mine} bytes")),
                Evidence::new(config_source(context, port.bdf), "DevCtl: MaxPayload", format!("{theirs} bytes")),
                Evidence::new(source, "DevCtl: MaxReadReq", f.mrrs.map_or("?".into(), |r| format!("{r} bytes"))),
            ],
            fix: Fix::printed(Lever::KernelParameter, "pci=pcie_bus_safe (one MPS on every link) or pci=pcie_bus_perf (MPS per path, MRRS capped at MPS)".into()),
            intent: context.options.intent,
            prediction: Prediction::not_predicted("a correctness risk, not a rate: malformed TLPs are errors, not slowdowns"),
        });
    }
    judged
}

pub(crate) fn mrrs_small(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let judge = LinkJudge::new(topo);
    let mut judged = Judged::default();
    // A root-complex integrated endpoint has no link: its reads are not split into TLPs on a
    // wire, so MRRS costs it nothing (an integrated GPU at 128 B is no finding).
    let linked_bulk_dma = |f: &Function| f.kind == Kind::Endpoint && moves_bulk_dma(f);
    for f in busy_endpoints(context, &mut judged, linked_bulk_dma) {
        let (Some(mrrs), Some(mps)) = (f.mrrs, f.mps) else {
            judged.not_judged(f.bdf, context.input.express(f));
            continue;
        };
        if mrrs > 128 && mrrs >= mps {
            judged.clean();
            continue;
        }
        let target = mps.max(512);
        // Under a switch, other busy endpoints share its upstream link and queues.
        let switch = f
            .parent
            .and_then(|p| topo.get(p))
            .filter(|p| p.kind == Kind::SwitchDownstream)
            .and_then(|d| d.parent);
        let neighbours: Vec<String> = match switch {
            Some(up) => judge
                .endpoints_below(up)
                .iter()
                .filter(|o| **o != f.bdf && topo.get(**o).is_some_and(busy_endpoint))
                .map(|o| o.to_string())
                .collect(),
            None => Vec::new(),
        };
        let mut summary = format!("MRRS {mrrs} B on {} (MPS {mps} B): each read fetches at most {mrrs} B, so reads need more requests and tags", f.bdf);
        if !neighbours.is_empty() {
            summary.push_str(&format!(
                "; MRRS is also a fairness knob: raising it lets {} hold larger reads in the switch shared with {}, whose reads then wait longer",
                f.bdf,
                neighbours.join(", ")
            ));
        }
        let prediction = match (context.platform, f.link_params()) {
            (Some(p), Some(link)) => {
                let now = LinkParams { mrrs: u32::from(mrrs), ..link };
                let then = LinkParams { mrrs: u32::from(target), ..link };
                Prediction::predicted(
                    "streaming DMA read",
                    p.streaming_dma_mbps(&now).1,
                    p.streaming_dma_mbps(&then).1,
                    "MB/s",
                    format!("the platform model (model::platform, 4 MiB reads): MRRS {mrrs} vs {target} B on {}", link_text(&link)),
                )
            }
            _ => Prediction::not_predicted(
                "the link model sizes completions by MPS/RCB, not MRRS; the read-request cost is in the platform model: give --platform",
            ),
        };
        let code = (target / 128).trailing_zeros() << 12;
        judged.found(Finding {
            id: "mrrs-small",
            severity: Severity::PerfLoss,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary,
            evidence: vec![
                Evidence::new(config_source(context, f.bdf), "DevCtl: MaxReadReq", format!("{mrrs} bytes")),
                Evidence::new(config_source(context, f.bdf), "DevCtl: MaxPayload", format!("{mps} bytes")),
            ],
            fix: Fix::printed(Lever::Setpci, format!("setpci -s {} CAP_EXP+8.w={code:04x}:7000 (MRRS {target} B) — printed, not performed; the driver may set MRRS itself", f.bdf)),
            intent: context.options.intent,
            prediction,
        });
    }
    judged
}
