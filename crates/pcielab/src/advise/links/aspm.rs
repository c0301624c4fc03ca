//! ASPM on busy links: the exit latencies a busy device pays each time its link wakes, judged
//! against what the device says it tolerates and the latency the user's intent needs.

use super::common::{config_source, device_functions, judgeable_links};
use crate::advise::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Intent, Judged, Lever, Prediction, Severity,
    Write,
};
use crate::pcie::Bdf;
use crate::topology::check::{busy_functions, LinkJudge};
use crate::topology::{Aspm, AspmLatency, Function};

pub(crate) fn aspm_busy(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let busy = busy_functions(topo);
    let system = context.facts.system.as_ref();
    let mut judged = Judged::default();
    let judge = LinkJudge::new(topo);
    for (port, f) in judgeable_links(&judge, &mut judged) {
        let subject = format!("link {} -> {}", port.bdf, f.bdf);
        // No trained link below a port whose data link layer is down: no exit latency to pay.
        if port.express_detail.data_link_down() {
            judged.clean();
            continue;
        }
        // The functions of one device share its link; any of them busy keeps it busy.
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
        // The states the link can enter. A device's own enable is what every one of its
        // functions enables: a non-ARI multi-function device takes only those (PCI Express
        // Base Specification, Link Control register, ASPM Control; an ARI device takes its
        // function 0's alone, which the same rule reads wherever its functions agree). L1 is
        // entered only when both ends enable it; L0s by each end's transmitter on its own.
        let device_states = device.iter().fold(
            Aspm {
                l0s: true,
                l1: true,
            },
            |a, u| Aspm {
                l0s: a.l0s && u.aspm_enabled.l0s,
                l1: a.l1 && u.aspm_enabled.l1,
            },
        );
        let l1 = port.aspm_enabled.l1 && device_states.l1;
        let l0s = port.aspm_enabled.l0s || device_states.l0s;
        if !l0s && !l1 {
            judged.clean();
            continue;
        }
        let port_enters = l1 || port.aspm_enabled.l0s;
        let device_enters = l1 || device_states.l0s;
        let on: Vec<&Function> = std::iter::once(port)
            .filter(|_| port_enters)
            .chain(device.iter().copied().filter(|_| device_enters))
            .collect();
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
                crate::advise::finding::qd1_read_prediction(
                    sim,
                    f.bdf,
                    (&power, irq),
                    (&after, irq),
                )
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
