//! Checks over PCIe links and functions: trained speed/width against min(parent, child)
//! capability, MPS along the path, MRRS, ASPM on busy links with their exit latencies,
//! Extended/10-bit tags, Relaxed Ordering against the kernel's root-port quirks, AER correctable
//! errors and P2P pairs sent through the host by ACS. Each judges a link at its downstream
//! function, the way the kernel's "limited by" message names a link by the device below it.

use std::collections::{BTreeMap, HashMap};

use super::facts::FunctionFacts;
use super::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Intent, Lever, Prediction, Severity, Write,
};
use crate::model::platform::PlatformModel;
use crate::model::transfer::{achievable_mbps, LinkParams};
use crate::pcie::features::Features;
use crate::pcie::{Bdf, Generation};
use crate::topology::check::{busy_functions, shortfall, Shortfall};
use crate::topology::health::read_function_health;
use crate::topology::p2p::{self, Cpu, MapType, Reason};
use crate::topology::{AspmLatency, Function, Kind, Topology};

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

/// Classes whose devices lower link speed when idle (GPUs, NICs, accelerators).
fn lowers_speed_when_idle(f: &Function) -> bool {
    matches!(f.class >> 16, 0x02 | 0x03 | 0x12)
}

/// The parent of `f` when a link joins them (the parent is a root or downstream port).
fn port_above<'a>(topo: &'a Topology, f: &Function) -> Option<&'a Function> {
    f.parent
        .and_then(|p| topo.get(p))
        .filter(|p| p.kind.has_link_below())
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

/// Every function with the endpoints at or below it, found in one walk up from each endpoint.
fn endpoints_below(topo: &Topology) -> HashMap<Bdf, Vec<Bdf>> {
    let mut below: HashMap<Bdf, Vec<Bdf>> = HashMap::new();
    for e in topo.functions().iter().filter(|f| is_endpoint(f)) {
        for up in topo.path_to_root(e.bdf) {
            below.entry(up.bdf).or_default().push(e.bdf);
        }
    }
    below
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
    let mut found = Vec::new();
    let mut below_each: Option<HashMap<Bdf, Vec<Bdf>>> = None;
    for f in topo.functions() {
        let Some(port) = port_above(topo, f) else {
            continue;
        };
        let Some(s) = shortfall(port, f) else {
            continue;
        };
        if reaches_capability_when_sampled(context, f.bdf, &s) {
            continue;
        }
        let common_speed = s.common_speed.unwrap_or(s.speed);
        let common_width = s.common_width.unwrap_or(s.width);
        let below_each = below_each.get_or_insert_with(|| endpoints_below(topo));
        let below = below_each.get(&f.bdf).map_or(&[][..], Vec::as_slice);
        // The functions of one device share its link: a GPU's audio function idles with it.
        let same_device = |g: &&Function| {
            (g.bdf.domain, g.bdf.bus, g.bdf.device) == (f.bdf.domain, f.bdf.bus, f.bdf.device)
        };
        let idle_possible = s.slower()
            && !s.narrower()
            && (below
                .iter()
                .any(|b| topo.get(*b).is_some_and(lowers_speed_when_idle))
                || topo
                    .functions()
                    .iter()
                    .filter(same_device)
                    .any(lowers_speed_when_idle));
        let samples = context.options.link_samples.max(1);
        let mut summary = format!(
            "link {} -> {} runs {} x{} but both ends support {} x{} (min of {}'s and {}'s LnkCap)",
            port.bdf, f.bdf, s.speed, s.width, common_speed, common_width, port.bdf, f.bdf
        );
        let limited: Vec<String> = below
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
        if idle_possible {
            summary.push_str(&format!(
                "; speed only, read {samples} time(s) and never at full speed: devices of this class \
                 lower link speed when idle, so re-run under load before calling it a downtrain"
            ));
        }
        let source = config_source(context, f.bdf);
        let port_source = config_source(context, port.bdf);
        let cap = |l: Option<crate::topology::Link>| {
            l.map_or("?".to_string(), |l| {
                format!(
                    "Speed {}, Width x{}",
                    l.max_speed.map_or("?".into(), rate),
                    l.max_width.map_or("?".into(), |w| w.to_string())
                )
            })
        };
        let evidence = vec![
            Evidence::new(
                source.clone(),
                "LnkSta",
                format!(
                    "Speed {}{}, Width x{}{}",
                    rate(s.speed),
                    if s.slower() { " (downgraded)" } else { "" },
                    s.width,
                    if s.narrower() { " (downgraded)" } else { "" }
                ),
            ),
            Evidence::new(source, "LnkCap", cap(f.link)),
            Evidence::new(port_source, "LnkCap", cap(port.link)),
        ];
        let prediction = match f.link_params() {
            Some(now) => {
                let best = LinkParams {
                    gen: common_speed,
                    width: common_width,
                    ..now
                };
                ceiling_prediction(context, "write ceiling of this link", &now, &best, "")
            }
            None => Prediction::not_predicted("the link reports no trained speed and width"),
        };
        found.push(Finding {
            id: "link-downtrained",
            severity: if idle_possible {
                Severity::Info
            } else {
                Severity::PerfLoss
            },
            subject: format!("link {} -> {}", port.bdf, f.bdf),
            function: Some(f.bdf.to_string()),
            summary,
            evidence,
            fix: Fix::printed(Lever::Firmware, format!(
                    "reseat the card or riser of {}, check the slot's bifurcation and speed settings in firmware; \
                     `echo 1 > /sys/bus/pci/devices/{}/remove; echo 1 > /sys/bus/pci/rescan` retrains it once",
                    f.bdf, f.bdf
                )).noting("a link that trains low again after a retrain has a signal-integrity or slot problem"),
            intent: context.options.intent,
            prediction,
        });
    }
    Ok(found)
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

pub(super) fn mps_below_path(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    if topo.functions().iter().all(|f| f.mps.is_none()) {
        return Err("no function's DevCtl was readable (config space needs root)".into());
    }
    let mut found = Vec::new();
    for f in topo.functions().iter().filter(|f| is_endpoint(f)) {
        let (Some(mps), Some((best, limiting))) = (f.mps, path_mps(topo, f.bdf)) else {
            continue;
        };
        let path = topo.path_to_root(f.bdf);
        let low: Vec<&Function> = path
            .iter()
            .copied()
            .filter(|u| u.mps.is_some_and(|m| m < best))
            .collect();
        if low.is_empty() || mps >= best {
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
        found.push(Finding {
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
                    "one device now: setpci -s {} CAP_EXP+8.w={:04x}:00e0 (and the same on each port above it, top down) \
                     — printed, not performed; pcie_bus_perf assumes no P2P, pcie_bus_peer2peer sets 128 B everywhere",
                    f.bdf,
                    (best.max(128) / 128).trailing_zeros() << 5
                )),
            intent: context.options.intent,
            prediction,
        });
    }
    Ok(found)
}

pub(super) fn mps_mismatch(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut found = Vec::new();
    for f in topo.functions() {
        let Some(port) = f.parent.and_then(|p| topo.get(p)) else {
            continue;
        };
        let (Some(mine), Some(theirs)) = (f.mps, port.mps) else {
            continue;
        };
        // Larger below: this function may send TLPs its port rejects as malformed. Smaller
        // below: completions up to the port's MPS may come down unless reads stay at or
        // under this function's MPS (what pcie_bus_perf ensures by capping MRRS).
        let reads_fit = f.mrrs.is_some_and(|r| r <= mine);
        if mine == theirs || (mine < theirs && reads_fit) {
            continue;
        }
        let source = config_source(context, f.bdf);
        found.push(Finding {
            id: "mps-mismatch",
            severity: Severity::Risk,
            subject: format!("link {} -> {}", port.bdf, f.bdf),
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
    Ok(found)
}

pub(super) fn mrrs_small(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    if topo.functions().iter().all(|f| f.mrrs.is_none()) {
        return Err("no function's DevCtl was readable (config space needs root)".into());
    }
    let mut below_each: Option<HashMap<Bdf, Vec<Bdf>>> = None;
    let mut found = Vec::new();
    for f in topo
        .functions()
        .iter()
        .filter(|f| busy_endpoint(f) && moves_bulk_dma(f))
    {
        let (Some(mrrs), Some(mps)) = (f.mrrs, f.mps) else {
            continue;
        };
        if mrrs > 128 && mrrs >= mps {
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
            Some(up) => below_each
                .get_or_insert_with(|| endpoints_below(topo))
                .get(&up)
                .into_iter()
                .flatten()
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
        found.push(Finding {
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
    Ok(found)
}

pub(super) fn aspm_busy(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let busy = busy_functions(topo);
    let system = context.facts.system.as_ref();
    let mut found = Vec::new();
    for f in topo.functions() {
        let Some(port) = port_above(topo, f) else {
            continue;
        };
        // No trained link below a port whose data link layer is down: no exit latency to pay.
        if f.link.is_none() || !busy.contains(&f.bdf) || port.express_detail.data_link_down() {
            continue;
        }
        let on: Vec<&Function> = [port, f]
            .into_iter()
            .filter(|u| u.aspm_enabled.any())
            .collect();
        if on.is_empty() {
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
        // Each end's LnkCap exit latencies: from its config file, else as lspci printed them
        // (only the states it supports).
        let ends: Vec<(Bdf, Option<AspmLatency>, Option<AspmLatency>)> = [port, f]
            .iter()
            .filter_map(|u| match facts(context, u.bdf).and_then(|x| x.features) {
                Some(x) => Some((
                    u.bdf,
                    Some(AspmLatency::l0s(x.l0s_exit_code)),
                    Some(AspmLatency::l1(x.l1_exit_code)),
                )),
                None => {
                    let d = u.express_detail;
                    (d.l0s_exit.is_some() || d.l1_exit.is_some())
                        .then_some((u.bdf, d.l0s_exit, d.l1_exit))
                }
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
        found.push(Finding {
            id: "aspm-busy-link",
            severity: if context.options.intent == Intent::Isolation { Severity::Info } else { Severity::PerfLoss },
            subject: format!("link {} -> {}", port.bdf, f.bdf),
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
            prediction,
        });
    }
    Ok(found)
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

fn root_port_of(topo: &Topology, bdf: Bdf) -> Option<&Function> {
    topo.path_to_root(bdf)
        .into_iter()
        .find(|f| f.kind == Kind::RootPort)
}

/// Busy endpoints whose DevCap/DevCtl features were read, with them; why not, when none were.
fn busy_with_features<'a>(
    context: &'a Context,
) -> std::result::Result<Vec<(&'a Function, Features)>, String> {
    if context
        .facts
        .functions
        .values()
        .all(|f| f.features.is_none())
    {
        return Err("no function's DevCap/DevCtl features are known (reading config space beyond 64 bytes needs root; a sim: spec does not describe them)".into());
    }
    Ok(context
        .topology
        .functions()
        .iter()
        .filter(|f| busy_endpoint(f))
        .filter_map(|f| Some((f, facts(context, f.bdf)?.features?)))
        .collect())
}

pub(super) fn ext_tag_off(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut found = Vec::new();
    for (f, x) in busy_with_features(context)? {
        if !x.ext_tag_supported || x.ext_tag_enabled {
            continue;
        }
        let quirk = topo
            .functions()
            .iter()
            .find(|o| o.bdf.domain == f.bdf.domain && NO_EXT_TAGS.contains(&(o.vendor, o.device)));
        if quirk.is_some() {
            continue;
        }
        let prediction = tag_prediction(context, f, 32, 256, "8-bit (Extended) tags");
        found.push(Finding {
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
    Ok(found)
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
    let mut found = Vec::new();
    for (f, x) in busy_with_features(context)? {
        let Some(root) = root_port_of(topo, f.bdf) else {
            continue;
        };
        let Some(rx) = facts(context, root.bdf).and_then(|x| x.features) else {
            continue;
        };
        if x.ten_bit_tag_requester != Some(true)
            || x.ten_bit_tag_requester_enabled != Some(false)
            || rx.ten_bit_tag_completer != Some(true)
        {
            continue;
        }
        found.push(Finding {
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
            prediction: tag_prediction(context, f, 256, 768, "10-bit tags"),
        });
    }
    Ok(found)
}

pub(super) fn relaxed_ordering(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut found = Vec::new();
    for (f, x) in busy_with_features(context)?
        .into_iter()
        .filter(|(f, _)| moves_bulk_dma(f))
    {
        let Some(root) = root_port_of(topo, f.bdf) else {
            continue;
        };
        let quirked = NO_RELAXED_ORDERING
            .iter()
            .any(|(v, ids)| root.vendor == *v && ids.contains(&root.device));
        let (severity, summary, command) = match (quirked, x.relaxed_ordering_enabled) {
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
            _ => continue,
        };
        found.push(Finding {
            id: "relaxed-ordering",
            severity,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary,
            evidence: vec![Evidence::new(
                config_source(context, f.bdf),
                "DevCtl: RlxdOrd",
                if x.relaxed_ordering_enabled { "+" } else { "-" },
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
    Ok(found)
}

pub(super) fn aer_correctable(context: &Context) -> CheckOutcome {
    let counted: BTreeMap<Bdf, (u64, &FunctionFacts)> = context
        .facts
        .functions
        .iter()
        .filter_map(|(b, x)| Some((*b, (x.aer_correctable?, x))))
        .collect();
    if counted.is_empty() {
        return Err(
            "no aer_dev_correctable file (sim:, a snapshot without AER files, or AER off)".into(),
        );
    }
    let mut found = Vec::new();
    for (bdf, (count, x)) in counted.into_iter().filter(|(_, (c, _))| *c > 0) {
        let file = x
            .dir
            .as_ref()
            .map_or("aer_dev_correctable".to_string(), |d| {
                d.join("aer_dev_correctable").display().to_string()
            });
        found.push(Finding {
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
    Ok(found)
}

pub(super) fn p2p_through_host(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let severity = match context.options.intent {
        Intent::P2p => Severity::PerfLoss,
        Intent::Isolation => return Ok(Vec::new()),
        Intent::Throughput | Intent::Latency => Severity::Info,
    };
    let groups = p2p::groups(topo);
    // One pair per group verdict, each unordered pair once (the lower address as provider
    // where both directions are listed).
    let mut pairs = std::collections::BTreeMap::new();
    for g in p2p::group_verdicts(topo, &groups, Cpu::Intel { family: 6 }) {
        let v = g.verdict;
        let key = (v.provider.min(v.client), v.provider.max(v.client));
        if v.provider < v.client || !pairs.contains_key(&key) {
            pairs.insert(key, v);
        }
    }
    let mut found = Vec::new();
    for v in pairs.values() {
        // Only pairs that share a switch and are sent up anyway: ACS is then the reason.
        let share_a_bridge = v
            .reasons
            .iter()
            .any(|r| matches!(r, Reason::CommonUpstreamBridge { .. }));
        if v.map == MapType::BusAddress || !share_a_bridge {
            continue;
        }
        let Some(bridges) = v.reasons.iter().find_map(|r| match r {
            Reason::AcsRedirect { bridges } => Some(bridges),
            _ => None,
        }) else {
            continue;
        };
        let evidence = bridges
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
        found.push(Finding {
            id: "p2p-through-host",
            severity,
            subject: format!("p2p {} -> {}", v.provider, v.client),
            function: Some(v.client.to_string()),
            summary: format!(
                "P2P DMA between {} and {} cannot take the direct path (kernel verdict: {}, distance {}) because ACS redirect is enabled at {}",
                v.provider,
                v.client,
                v.map.describe(),
                v.distance,
                bridges.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(", ")
            ),
            evidence,
            fix: Fix::printed(Lever::KernelParameter, format!(
                    "pci=disable_acs_redir={} (keeps IOMMU groups; those devices can then reach each other directly)",
                    bridges.iter().map(|b| format!("{b}")).collect::<Vec<_>>().join(";")
                )).noting("ACS redirect isolates devices from each other; keep it where isolation matters"),
            intent: context.options.intent,
            prediction: Prediction::not_predicted("the P2P path cost through the host bridge is platform-specific and not modelled"),
        });
    }
    Ok(found)
}

#[cfg(test)]
mod tests;
