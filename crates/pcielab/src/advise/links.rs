//! Checks over PCIe links and functions: trained speed/width against min(parent, child)
//! capability, MPS along the path, MRRS, ASPM on busy links with their exit latencies,
//! Extended/10-bit tags, Relaxed Ordering against the kernel's root-port quirks, AER correctable
//! errors and P2P pairs sent through the host by ACS. Each judges a link at its downstream
//! function, the way the kernel's "limited by" message names a link by the device below it.

use std::collections::BTreeMap;

use super::facts::FunctionFacts;
use super::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Intent, Judged, Lever, Prediction, Severity,
    Write,
};
use super::missing::NO_ROOT_PORT;
use crate::model::platform::PlatformModel;
use crate::model::transfer::{achievable_mbps, LinkParams};
use crate::pcie::{Bdf, Generation};
use crate::topology::check::{busy_functions, JudgedLink, LinkJudge, LinkJudgement, Shortfall};
use crate::topology::health::read_function_health;
use crate::topology::p2p::{self, Cpu, MapType, Reason};
use crate::topology::{AspmLatency, DeviceFeatures, Function, Kind, Topology};

/// lspci's rate text: "8GT/s", "2.5GT/s".
fn rate(g: Generation) -> String {
    let gts = g.gt_s();
    if gts.fract() == 0.0 {
        format!("{gts:.0}GT/s")
    } else {
        format!("{gts}GT/s")
    }
}

fn is_endpoint(f: &Function) -> bool {
    matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint)
}

/// An endpoint in use: a driver bound (host, snapshot) or a device model attached (`sim:`).
fn busy_endpoint(f: &Function) -> bool {
    is_endpoint(f) && (f.driver.is_some() || !f.params.is_empty())
}

/// Storage, network, display and accelerator classes: the endpoints that move bulk DMA.
fn moves_bulk_dma(f: &Function) -> bool {
    matches!(f.class >> 16, 0x01 | 0x02 | 0x03 | 0x12)
}

/// The functions of `f`'s device: they share its link.
fn device_functions<'a>(topo: &'a Topology, f: &Function) -> Vec<&'a Function> {
    topo.functions()
        .iter()
        .filter(|g| {
            (g.bdf.domain, g.bdf.bus, g.bdf.device) == (f.bdf.domain, f.bdf.bus, f.bdf.device)
        })
        .collect()
}

fn facts<'a>(context: &'a Context, bdf: Bdf) -> Option<&'a FunctionFacts> {
    context.facts.functions.get(&bdf)
}

/// Where a function's register was read: its `config` file, or its entry in the spec.
fn config_source(context: &Context, bdf: Bdf) -> String {
    facts(context, bdf).map_or_else(|| format!("spec {bdf}"), |f| f.config_source.clone())
}

/// The link model's write ceiling for `link`, or the platform model's streaming DMA write when
/// one is given, with the text naming which.
fn write_ceiling(platform: Option<&PlatformModel>, link: &LinkParams) -> (f64, &'static str) {
    match platform {
        Some(p) => (
            p.streaming_dma_mbps(link).0,
            "the platform model's streaming DMA write (model::platform, 4 MiB transfers)",
        ),
        None => (
            achievable_mbps(link),
            "the link model's achievable payload rate (model::transfer::achievable_mbps: \
             MPS-sized writes, TLP, DLLP and SKP overheads charged)",
        ),
    }
}

fn link_text(link: &LinkParams) -> String {
    format!(
        "{} x{}, MPS {} B, MRRS {} B",
        link.gen, link.width, link.mps, link.mrrs
    )
}

/// The write ceiling `now` and `then` as a prediction of `metric`, each link described after
/// the model's name (`on` says where, when it is not the link itself).
fn ceiling_prediction(
    context: &Context,
    metric: &str,
    now: &LinkParams,
    then: &LinkParams,
    on: &str,
) -> Prediction {
    let (before, model) = write_ceiling(context.platform, now);
    let (after, _) = write_ceiling(context.platform, then);
    Prediction::predicted(
        metric,
        before,
        after,
        "MB/s",
        format!("{model}{on}: {} vs {}", link_text(now), link_text(then)),
    )
}

/// Re-reads the link state of `bdf` on a machine with sysfs: true when any of the samples
/// reaches what both ends support, so the drop was the device saving power, not a downtrain.
fn reaches_capability_when_sampled(context: &Context, bdf: Bdf, s: &Shortfall) -> bool {
    let Some(pci_dir) = &context.pci_dir else {
        return false;
    };
    let dir = pci_dir.join("devices").join(bdf.to_string());
    (1..context.options.link_samples).any(|_| {
        std::thread::sleep(context.options.sample_interval);
        let h = read_function_health(&dir);
        let speed_ok = match (
            h.current_gts.and_then(Generation::from_gt_s),
            s.common_speed,
        ) {
            (Some(now), Some(common)) => now >= common,
            _ => !s.slower(),
        };
        let width_ok = match (h.current_width, s.common_width) {
            (Some(now), Some(common)) => now >= u32::from(common),
            _ => !s.narrower(),
        };
        speed_ok && width_ok
    })
}

pub(super) fn downtrained(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let judge = LinkJudge::new(topo);
    let mut judged = Judged::default();
    for (port, f) in judge.links() {
        let subject = format!("link {} -> {}", port.bdf, f.bdf);
        let Some(link) = judge.judge(port, f) else {
            judged.not_judged(subject, context.input.express(f));
            continue;
        };
        let finding = match link.judgement {
            // A slot-limited link runs at all its slot offers: hardware placement, nothing
            // to change on this machine, so judged clean (topo and the exporter say it).
            LinkJudgement::Full | LinkJudgement::SlotLimited { .. } => None,
            LinkJudgement::Failed => Some(failed_link(context, &link, subject)),
            LinkJudgement::PowerManagedIdle(s) | LinkJudgement::Downtrained(s) => {
                if reaches_capability_when_sampled(context, f.bdf, &s) {
                    None
                } else {
                    Some(below_capability(
                        context, &judge, port, f, &link, &s, subject,
                    ))
                }
            }
        };
        match finding {
            Some(finding) => judged.found(finding),
            None => judged.clean(),
        }
    }
    judged
}

/// Both ends' LnkCap as evidence ("Speed 16GT/s, Width x16").
fn link_cap_evidence(context: &Context, ends: [&Function; 2]) -> Vec<Evidence> {
    ends.iter()
        .map(|u| {
            Evidence::new(
                config_source(context, u.bdf),
                "LnkCap",
                u.link.map_or("?".to_string(), |l| {
                    format!(
                        "Speed {}, Width x{}",
                        l.max_speed.map_or("?".into(), rate),
                        l.max_width.map_or("?".into(), |w| w.to_string())
                    )
                }),
            )
        })
        .collect()
}

/// A link whose data link layer reads down: no rate to predict, a card or slot to look at.
/// Info, not a risk: the device's own registers were read through that link, and emulated
/// ports (QEMU 7.2) read DLActive- under working devices, so the bit alone proves no failure.
fn failed_link(context: &Context, link: &JudgedLink, subject: String) -> Finding {
    Finding {
        id: "link-downtrained",
        severity: Severity::Info,
        subject,
        function: Some(link.device.to_string()),
        summary: link.describe(),
        evidence: vec![Evidence::new(
            config_source(context, link.port),
            "LnkSta: DLActive",
            "-",
        )],
        fix: Fix::printed(
            Lever::Firmware,
            format!(
                "reseat the card of {} and check its power; `echo 1 > /sys/bus/pci/devices/{}/remove; echo 1 > /sys/bus/pci/rescan` re-enumerates it",
                link.device, link.device
            ),
        ),
        intent: context.options.intent,
        prediction: Prediction::not_predicted("a link that is down carries nothing to predict"),
    }
}

/// A link trained below what both ends support: downtrained, or a power-managed idle link
/// whose gain is conditional on it staying low under load.
fn below_capability(
    context: &Context,
    judge: &LinkJudge,
    port: &Function,
    f: &Function,
    link: &JudgedLink,
    s: &Shortfall,
    subject: String,
) -> Finding {
    let topo = context.topology;
    let idle = matches!(link.judgement, LinkJudgement::PowerManagedIdle(_));
    let mut summary = link.describe();
    let limited: Vec<String> = judge
        .endpoints_below(f.bdf)
        .iter()
        .filter(|e| {
            topo.path_ceiling(**e)
                .is_some_and(|c| c.limiting == f.bdf || c.limiting == port.bdf)
        })
        .map(|e| e.to_string())
        .collect();
    if !limited.is_empty() {
        summary.push_str(&format!(
            "; available bandwidth of {} limited by this link at {}",
            limited.join(", "),
            f.bdf
        ));
    }
    if idle {
        summary.push_str(&format!(
            "; read {} time(s), never at full speed",
            context.options.link_samples.max(1)
        ));
    }
    let mut evidence = vec![Evidence::new(
        config_source(context, f.bdf),
        "LnkSta",
        format!(
            "Speed {}{}, Width x{}{}",
            rate(s.speed),
            if s.slower() { " (downgraded)" } else { "" },
            s.width,
            if s.narrower() { " (downgraded)" } else { "" }
        ),
    )];
    evidence.extend(link_cap_evidence(context, [f, port]));
    let prediction = match f.link_params() {
        Some(now) => {
            let best = LinkParams {
                gen: s.common_speed.unwrap_or(s.speed),
                width: s.common_width.unwrap_or(s.width),
                ..now
            };
            let p = ceiling_prediction(context, "write ceiling of this link", &now, &best, "");
            if idle {
                p.conditional("if it ran at load at this speed (a downtrain) and retrained")
            } else {
                p
            }
        }
        None => Prediction::not_predicted("the link reports no trained speed and width"),
    };
    Finding {
        id: "link-downtrained",
        severity: if idle { Severity::Info } else { Severity::PerfLoss },
        subject,
        function: Some(f.bdf.to_string()),
        summary,
        evidence,
        fix: Fix::printed(Lever::Firmware, format!(
                "reseat the card or riser of {}, check the slot's bifurcation and speed settings in firmware; \
                 `echo 1 > /sys/bus/pci/devices/{}/remove; echo 1 > /sys/bus/pci/rescan` retrains it once",
                f.bdf, f.bdf
            )).noting(if idle {
                "re-run under load first: an idle device lowers its link speed on purpose"
            } else {
                "a link that trains low again after a retrain has a signal-integrity or slot problem"
            }),
        intent: context.options.intent,
        prediction,
    }
}

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

pub(super) fn mps_below_path(context: &Context) -> CheckOutcome {
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

pub(super) fn mps_mismatch(context: &Context) -> CheckOutcome {
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

pub(super) fn mrrs_small(context: &Context) -> CheckOutcome {
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

pub(super) fn aspm_busy(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let busy = busy_functions(topo);
    let system = context.facts.system.as_ref();
    let mut judged = Judged::default();
    for (port, f) in LinkJudge::new(topo).links() {
        let subject = format!("link {} -> {}", port.bdf, f.bdf);
        // No trained link below a port whose data link layer is down: no exit latency to pay.
        if port.express_detail.data_link_down() {
            judged.clean();
            continue;
        }
        // The functions of one device share its link; any of them busy keeps it busy, and
        // ASPM enabled on any of them lets the link enter the state.
        let device = device_functions(topo, f);
        if let Some(unknown) = device
            .iter()
            .find(|u| u.link.is_none() || u.evidence.is_unknown("aspm"))
        {
            judged.not_judged(subject, context.input.express(unknown));
            continue;
        }
        if !device.iter().any(|u| busy.contains(&u.bdf)) {
            match context.input.driver() {
                Some(reason) => judged.not_judged(subject, reason),
                None => judged.clean(),
            }
            continue;
        }
        let on: Vec<&Function> = std::iter::once(port)
            .chain(device.iter().copied())
            .filter(|u| u.aspm_enabled.any())
            .collect();
        if on.is_empty() {
            judged.clean();
            continue;
        }
        let mut evidence: Vec<Evidence> = on
            .iter()
            .map(|u| {
                let states = match (u.aspm_enabled.l0s, u.aspm_enabled.l1) {
                    (true, true) => "L0s L1 Enabled",
                    (true, false) => "L0s Enabled",
                    _ => "L1 Enabled",
                };
                Evidence::new(config_source(context, u.bdf), "LnkCtl: ASPM", states)
            })
            .collect();
        // A link's exit takes as long as the slower end; L1 exits also wait for every link above.
        // Each end's LnkCap exit latencies of the states it supports, as its registers or
        // lspci's text give them.
        let ends: Vec<(Bdf, Option<AspmLatency>, Option<AspmLatency>)> = [port, f]
            .iter()
            .filter_map(|u| {
                let d = u.express_detail;
                (d.l0s_exit.is_some() || d.l1_exit.is_some())
                    .then_some((u.bdf, d.l0s_exit, d.l1_exit))
            })
            .collect();
        let l1 = on.iter().any(|u| u.aspm_enabled.l1);
        let l0s = on.iter().any(|u| u.aspm_enabled.l0s);
        let exit_ns = ends
            .iter()
            .map(|(_, l0s_exit, l1_exit)| {
                let l0 = if l0s {
                    l0s_exit.as_ref()?.ns()
                } else {
                    Some(0)
                };
                let l1n = if l1 { l1_exit.as_ref()?.ns() } else { Some(0) };
                Some(l0?.max(l1n?))
            })
            .collect::<Option<Vec<u32>>>()
            .and_then(|v| v.into_iter().max());
        for (bdf, l0s_exit, l1_exit) in &ends {
            let words: Vec<String> = [("L0s", l0s_exit), ("L1", l1_exit)]
                .iter()
                .filter_map(|(state, l)| Some(format!("{state} {}", l.as_ref()?.text())))
                .collect();
            evidence.push(Evidence::new(
                config_source(context, *bdf),
                "LnkCap: Exit Latency",
                words.join(", "),
            ));
        }
        let mut writes = Vec::new();
        let mut command = "pcie_aspm.policy=performance on the kernel command line".to_string();
        let mut reboot = true;
        if let Some(system) = system {
            if let Some(policy) = &system.aspm_policy {
                evidence.push(Evidence::new(
                    system
                        .root
                        .join("sys/module/pcie_aspm/parameters/policy")
                        .display()
                        .to_string(),
                    "policy",
                    policy.clone(),
                ));
            }
            let l1_file = format!("sys/bus/pci/devices/{}/link/l1_aspm", f.bdf);
            let l0s_file = format!("sys/bus/pci/devices/{}/link/l0s_aspm", f.bdf);
            for (file, wanted) in [(&l1_file, l1), (&l0s_file, l0s)] {
                if wanted && system.root.join(file).is_file() {
                    writes.push(Write {
                        file: file.clone(),
                        value: "0".into(),
                    });
                }
            }
            if !writes.is_empty() {
                command = writes
                    .iter()
                    .map(|w| format!("echo 0 > /{}", w.file))
                    .collect::<Vec<_>>()
                    .join("; ");
                reboot = false;
            } else if system
                .aspm_policy
                .as_deref()
                .is_some_and(|p| p != "performance")
            {
                writes.push(Write {
                    file: "sys/module/pcie_aspm/parameters/policy".into(),
                    value: "performance".into(),
                });
                command = "echo performance > /sys/module/pcie_aspm/parameters/policy".into();
                reboot = false;
            }
        }
        // On a simulated disk: the workload-level change, from the model the simulator times
        // fio with, the path's ASPM now against this link's ASPM off. Only where the exits are
        // known: an unknown one costs the simulator nothing, which is no prediction of a gain.
        let simulated = context
            .simulated
            .filter(|_| exit_ns.is_some())
            .and_then(|sim| {
                let power = sim.link_power(f.bdf);
                let mut fixed = topo.clone();
                for u in fixed.functions_mut() {
                    if u.bdf == f.bdf || u.bdf == port.bdf {
                        u.aspm_enabled = Default::default();
                    }
                }
                let after = fixed.path_link_power(f.bdf, power.l0s_entry_ns, power.l1_entry_ns);
                let irq = sim.far_irq_ns(f.bdf);
                super::finding::qd1_read_prediction(sim, f.bdf, (&power, irq), (&after, irq))
            });
        let prediction = simulated.unwrap_or_else(|| match exit_ns {
            Some(exit) => match (context.platform, f.link_params()) {
                (Some(p), Some(link)) => {
                    let base = p.read_latency_ns(4096, &link);
                    Prediction::predicted(
                        "4 KiB read latency after an idle gap",
                        base + f64::from(exit),
                        base,
                        "ns",
                        format!("the platform model's read latency plus the LnkCap exit latency bound ({exit} ns) of the slower end"),
                    )
                }
                _ => Prediction::predicted(
                    "latency added to the first request after an idle gap",
                    f64::from(exit),
                    0.0,
                    "ns",
                    "the LnkCap exit latency bound of the slower end of the link (upper end of the encoded range)".into(),
                ),
            },
            None => Prediction::not_predicted("an exit latency is unreadable or 'unlimited' in LnkCap"),
        });
        judged.found(Finding {
            id: "aspm-busy-link",
            severity: if context.options.intent == Intent::Isolation { Severity::Info } else { Severity::PerfLoss },
            subject,
            function: Some(f.bdf.to_string()),
            summary: format!(
                "ASPM {} enabled at {} on a link whose endpoint is busy (a driver is bound; traffic was not sampled): \
                 each exit from a low-power state delays the next request",
                if l0s && l1 { "L0s and L1" } else if l1 { "L1" } else { "L0s" },
                on.iter().map(|u| u.bdf.to_string()).collect::<Vec<_>>().join(" and ")
            ),
            evidence,
            fix: Fix {
                lever: if reboot { Lever::KernelParameter } else { Lever::RuntimeWrite },
                command,
                reboot,
                writes,
                note: Some("ASPM saves power on idle links; keep it where the device idles most of the time".into()),
            },
            intent: context.options.intent,
            prediction: if context.options.intent == Intent::Isolation {
                prediction.conditional("for a workload that waits on this device (the isolation intent does not)")
            } else {
                prediction
            },
        });
    }
    judged
}

/// The kernel's quirks (drivers/pci/quirks.c, Linux 6.12): root ports flagged
/// PCI_DEV_FLAGS_NO_RELAXED_ORDERING (Intel Haswell/Broadwell Xeon root ports, AMD 0x1a00-0x1a02)
/// and devices whose presence makes the host bridge refuse Extended Tags (3ware, ServerWorks).
const NO_RELAXED_ORDERING: [(u16, std::ops::RangeInclusive<u16>); 3] = [
    (0x8086, 0x6f01..=0x6f0e),
    (0x8086, 0x2f01..=0x2f0e),
    (0x1022, 0x1a00..=0x1a02),
];
const NO_EXT_TAGS: [(u16, u16); 9] = [
    (0x13c1, 0x1004),
    (0x13c1, 0x1005),
    (0x1166, 0x0132),
    (0x1166, 0x0140),
    (0x1166, 0x0141),
    (0x1166, 0x0142),
    (0x1166, 0x0144),
    (0x1166, 0x0420),
    (0x1166, 0x0422),
];

/// The root port above `f`; where the input holds none above an endpoint, `f` is noted as
/// not judged (an integrated endpoint completes at the root complex: no port to ask).
fn root_port_of<'a>(topo: &'a Topology, f: &Function, judged: &mut Judged) -> Option<&'a Function> {
    let root = topo
        .path_to_root(f.bdf)
        .into_iter()
        .find(|u| u.kind == Kind::RootPort);
    if root.is_none() && f.kind == Kind::Endpoint {
        judged.not_judged(f.bdf, NO_ROOT_PORT.into());
    }
    root
}

/// The busy endpoints `wanted`; each other endpoint `wanted` whose busyness is unknown (no
/// driver lines in the input) is noted as not judged.
fn busy_endpoints<'a>(
    context: &'a Context,
    judged: &mut Judged,
    wanted: impl Fn(&Function) -> bool,
) -> Vec<&'a Function> {
    let mut out = Vec::new();
    for f in context
        .topology
        .functions()
        .iter()
        .filter(|f| is_endpoint(f) && wanted(f))
    {
        if busy_endpoint(f) {
            out.push(f);
        } else if let Some(reason) = context.input.driver() {
            judged.not_judged(f.bdf, reason);
        }
    }
    out
}

/// Whether `f`'s DevCap/DevCtl feature bits were read (they come as one register pair).
fn features_known(f: &Function) -> bool {
    f.express_detail.features.ext_tag_supported.is_some()
}

/// The busy endpoints `wanted` whose DevCap/DevCtl features were read, with them; each whose
/// busyness or features are unknown is noted as not judged.
fn busy_with_features<'a>(
    context: &'a Context,
    judged: &mut Judged,
    wanted: impl Fn(&Function) -> bool,
) -> Vec<(&'a Function, DeviceFeatures)> {
    let mut out = Vec::new();
    for f in busy_endpoints(context, judged, wanted) {
        if features_known(f) {
            out.push((f, f.express_detail.features));
        } else {
            judged.not_judged(f.bdf, context.input.features(f));
        }
    }
    out
}

pub(super) fn ext_tag_off(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    // Tags bound the reads a bulk-DMA device keeps in flight; a port or event collector bound
    // to pcieport issues no such reads.
    for (f, x) in busy_with_features(context, &mut judged, moves_bulk_dma) {
        if x.ext_tag_supported != Some(true) {
            judged.clean();
            continue;
        }
        let Some(enabled) = x.ext_tag_enabled else {
            judged.not_judged(f.bdf, context.input.features(f));
            continue;
        };
        if enabled {
            judged.clean();
            continue;
        }
        let quirk = topo
            .functions()
            .iter()
            .find(|o| o.bdf.domain == f.bdf.domain && NO_EXT_TAGS.contains(&(o.vendor, o.device)));
        if quirk.is_some() {
            judged.clean();
            continue;
        }
        let prediction = tag_prediction(context, f, 32, 256, "8-bit (Extended) tags");
        judged.found(Finding {
            id: "ext-tag-off",
            severity: Severity::PerfLoss,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!("{} supports Extended Tags but has them disabled: at most 32 reads in flight instead of 256", f.bdf),
            evidence: vec![
                Evidence::new(config_source(context, f.bdf), "DevCap: ExtTag", "+"),
                Evidence::new(config_source(context, f.bdf), "DevCtl: ExtTag", "-"),
            ],
            fix: Fix::printed(Lever::Setpci, format!("setpci -s {} CAP_EXP+8.w=0100:0100 — printed, not performed (the kernel enables it at enumeration unless a quirk forbids it)", f.bdf)),
            intent: context.options.intent,
            prediction,
        });
    }
    judged
}

/// Read throughput with `before` and `after` tags in flight: the read latency bound
/// (model::latency) with the platform model's read round trip, or not predicted without one.
fn tag_prediction(
    context: &Context,
    f: &Function,
    before: u32,
    after: u32,
    what: &str,
) -> Prediction {
    use crate::model::latency::ReadConcurrency;
    let (Some(p), Some(link)) = (context.platform, f.link_params()) else {
        return Prediction::not_predicted(
            "the tag limit bounds reads by outstanding bytes over the read round trip, which only a platform model gives: use --platform",
        );
    };
    let round_trip_ns = p.read_latency_ns(u64::from(link.mrrs), &link);
    let bound = |tags| {
        ReadConcurrency {
            tags,
            np_header_credits: None,
            round_trip_ns,
        }
        .bound_mbps(link.mrrs)
    };
    let line = achievable_mbps(&link);
    Prediction::predicted(
        "read ceiling (tags × MRRS / round trip, at most the link)",
        bound(before).min(line),
        bound(after).min(line),
        "MB/s",
        format!(
            "model::latency::ReadConcurrency with {what} ({before} -> {after} tags), MRRS {} B and the platform model's {:.0} ns round trip",
            link.mrrs, round_trip_ns
        ),
    )
}

pub(super) fn ten_bit_tag_off(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    for (f, x) in busy_with_features(context, &mut judged, |_| true) {
        let Some(root) = root_port_of(topo, f, &mut judged) else {
            continue;
        };
        if !features_known(root) {
            judged.not_judged(
                f.bdf,
                format!(
                    "its root port {}: {}",
                    root.bdf,
                    context.input.features(root)
                ),
            );
            continue;
        }
        let rx = root.express_detail.features;
        if x.ten_bit_tag_requester != Some(true)
            || x.ten_bit_tag_requester_enabled != Some(false)
            || rx.ten_bit_tag_completer != Some(true)
        {
            judged.clean();
            continue;
        }
        judged.found(Finding {
            id: "ten-bit-tag-off",
            severity: Severity::Info,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!(
                "{} can request with 10-bit tags and its root port {} completes them, but the requester enable is off (Linux 6.12 does not set it)",
                f.bdf, root.bdf
            ),
            evidence: vec![
                Evidence::new(config_source(context, f.bdf), "DevCap2: 10BitTagReq", "+"),
                Evidence::new(config_source(context, f.bdf), "DevCtl2: 10BitTagReq", "-"),
                Evidence::new(config_source(context, root.bdf), "DevCap2: 10BitTagComp", "+"),
            ],
            fix: Fix::printed(Lever::Setpci, format!("setpci -s {} CAP_EXP+28.w=1000:1000 — printed, not performed; only with no P2P peer lacking 10BitTagComp", f.bdf)),
            intent: context.options.intent,
            prediction: tag_prediction(context, f, 256, 768, "10-bit tags")
                .conditional("if the device's reads are limited by tags in flight"),
        });
    }
    judged
}

pub(super) fn relaxed_ordering(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    for (f, x) in busy_with_features(context, &mut judged, moves_bulk_dma) {
        let Some(root) = root_port_of(topo, f, &mut judged) else {
            continue;
        };
        let quirked = NO_RELAXED_ORDERING
            .iter()
            .any(|(v, ids)| root.vendor == *v && ids.contains(&root.device));
        let Some(relaxed) = x.relaxed_ordering_enabled else {
            judged.not_judged(f.bdf, context.input.features(f));
            continue;
        };
        let (severity, summary, command) = match (quirked, relaxed) {
            (true, true) => (
                Severity::Risk,
                format!("Relaxed Ordering is enabled on {} below root port {} ({:04x}:{:04x}), which the kernel flags for a completion erratum (quirk_relaxedordering_disable)", f.bdf, root.bdf, root.vendor, root.device),
                format!("setpci -s {} CAP_EXP+8.w=0000:0010 — printed, not performed", f.bdf),
            ),
            (false, false) => (
                Severity::Info,
                format!("Relaxed Ordering is disabled on {} though its root port {} has no quirk against it: writes cannot pass each other in the fabric", f.bdf, root.bdf),
                format!("setpci -s {} CAP_EXP+8.w=0010:0010 — printed, not performed; the driver decides whether it sets RO on its TLPs", f.bdf),
            ),
            _ => {
                judged.clean();
                continue;
            }
        };
        judged.found(Finding {
            id: "relaxed-ordering",
            severity,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary,
            evidence: vec![Evidence::new(
                config_source(context, f.bdf),
                "DevCtl: RlxdOrd",
                if relaxed { "+" } else { "-" },
            )],
            fix: Fix {
                lever: Lever::Setpci,
                command,
                reboot: false,
                writes: Vec::new(),
                note: None,
            },
            intent: context.options.intent,
            prediction: Prediction::not_predicted("ordering is not in the link or platform model"),
        });
    }
    judged
}

pub(super) fn aer_correctable(context: &Context) -> CheckOutcome {
    let mut judged = Judged::default();
    for f in context.topology.functions() {
        let Some(x) = facts(context, f.bdf) else {
            continue;
        };
        let Some(count) = x.aer_correctable else {
            judged.not_judged(f.bdf, context.input.aer_count(f));
            continue;
        };
        if count == 0 {
            judged.clean();
            continue;
        }
        let bdf = f.bdf;
        let file = x
            .dir
            .as_ref()
            .map_or("aer_dev_correctable".to_string(), |d| {
                d.join("aer_dev_correctable").display().to_string()
            });
        judged.found(Finding {
            id: "aer-correctable",
            severity: Severity::Risk,
            subject: bdf.to_string(),
            function: Some(bdf.to_string()),
            summary: format!("{count} correctable error(s) counted on {bdf}: the link replays TLPs (lost bandwidth) and a rising count precedes link failures"),
            evidence: vec![Evidence::new(file, "TOTAL_ERR_COR", count.to_string())],
            fix: Fix::printed(Lever::Firmware, format!("watch the count under load (pcielab top), reseat {bdf} or its riser; check equalization settings in firmware")),
            intent: context.options.intent,
            prediction: Prediction::not_predicted("replay rate is not known from a total count"),
        });
    }
    judged
}

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

pub(super) fn p2p_through_host(context: &Context) -> CheckOutcome {
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

/// The IOMMU group sysfs puts `bdf` in (the name its `iommu_group` link points to), if read.
fn iommu_group_of(context: &Context, bdf: Bdf) -> Option<String> {
    let dir = facts(context, bdf)?.dir.as_ref()?;
    let target = std::fs::read_link(dir.join("iommu_group")).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

pub(super) fn acs_isolation(context: &Context) -> CheckOutcome {
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

#[cfg(test)]
mod tests;
