//! Checks over what serves a device beyond its link: the IOMMU domain its DMA goes through, the
//! NUMA node of the CPUs its MSI/MSI-X vectors are delivered to, those CPUs' frequency governor
//! and idle states, and devfreq (DDR/bus) governors on SoCs. They need the machine's `/sys` and
//! `/proc` (a host, or a snapshot saved as a whole tree); elsewhere they are not judged.

use std::collections::{BTreeMap, BTreeSet};

use super::facts::{cpu_list_text, SystemFacts};
use super::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Intent, Judged, Lever, Prediction, Severity,
    Write,
};
use crate::topology::{Function, Kind};

/// The machine's kernel files, or the check not judged for want of `what` in them.
fn system<'a>(context: &'a Context, what: &str) -> std::result::Result<&'a SystemFacts, Judged> {
    context
        .facts
        .system
        .as_ref()
        .ok_or_else(|| Judged::nothing("machine", context.input.system(what)))
}

fn busy_endpoints<'a>(context: &'a Context) -> impl Iterator<Item = &'a Function> {
    context
        .topology
        .functions()
        .iter()
        .filter(|f| matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint) && f.driver.is_some())
}

/// The CPUs that receive a busy endpoint's interrupts, with the endpoints they serve.
fn serving_cpus(context: &Context, system: &SystemFacts) -> BTreeMap<u32, BTreeSet<String>> {
    let mut cpus: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
    for f in busy_endpoints(context) {
        let Some(x) = context.facts.functions.get(&f.bdf) else {
            continue;
        };
        for irq in &x.msi_irqs {
            for cpu in system.irq_cpus.get(irq).into_iter().flatten() {
                cpus.entry(*cpu).or_default().insert(f.bdf.to_string());
            }
        }
    }
    cpus
}

/// A machine-wide finding's subject: "cpu " and every CPU the machine shows the facts for.
fn machine_cpus<'a>(cpus: impl Iterator<Item = &'a u32>) -> String {
    format!("cpu {}", cpu_list_text(&cpus.copied().collect::<Vec<_>>()))
}

fn path(system: &SystemFacts, rel: &str) -> String {
    system.root.join(rel).display().to_string()
}

pub(super) fn iommu_translated(context: &Context) -> CheckOutcome {
    if let Err(not_judged) = system(context, "IOMMU groups") {
        return not_judged;
    }
    let intent = context.options.intent;
    let mut judged = Judged::default();
    for f in busy_endpoints(context) {
        let Some(kind) = context
            .facts
            .functions
            .get(&f.bdf)
            .and_then(|x| x.iommu_type.as_ref())
        else {
            judged.not_judged(f.bdf, "no iommu_group/type file: no IOMMU translates its DMA, or the kernel is older than 5.11 (no type file)".into());
            continue;
        };
        let (severity, summary, command) = match (intent, kind.as_str()) {
            (Intent::Isolation, "identity") => (
                Severity::Risk,
                format!("{}'s DMA is not translated (identity domain): it can reach all of memory", f.bdf),
                "iommu.passthrough=0 on the kernel command line (or write DMA to iommu_group/type with the driver unbound)".to_string(),
            ),
            (Intent::Isolation, _) => {
                judged.clean();
                continue;
            }
            (_, "DMA") => (
                Severity::PerfLoss,
                format!("{}'s DMA is translated with strict invalidation: each unmap waits for an IOTLB flush", f.bdf),
                "iommu.strict=0 on the kernel command line (flush queue, type DMA-FQ), or iommu.passthrough=1 where isolation is not needed".to_string(),
            ),
            (_, "DMA-FQ") => (
                Severity::Info,
                format!("{}'s DMA is translated (lazy invalidation): each mapping costs an IOVA allocation and IOTLB misses", f.bdf),
                "iommu.passthrough=1 where isolation is not needed".to_string(),
            ),
            _ => {
                judged.clean();
                continue;
            }
        };
        let file = context.facts.functions[&f.bdf].dir.as_ref().map_or_else(
            || "iommu_group/type".to_string(),
            |d| d.join("iommu_group/type").display().to_string(),
        );
        judged.found(Finding {
            id: "iommu-translated",
            severity,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary,
            evidence: vec![Evidence::new(file, "type", kind.clone())],
            fix: Fix::printed(Lever::KernelParameter, command).noting(
                "writing iommu_group/type needs every driver of the group unbound: printed, not performed",
            ),
            intent,
            prediction: Prediction::not_predicted("IOMMU translation cost is not in the link or platform model"),
        });
    }
    judged
}

/// `irq-far-node` on a `sim:` machine: the spec's `[sim] irq_node` against each busy
/// endpoint's `numa_node`, with the request–response change the simulator will show.
fn irq_far_node_simulated(context: &Context, sim: &crate::sim::SimulatedPcie) -> Judged {
    let mut judged = Judged::default();
    for f in busy_endpoints(context) {
        let (Some(node), Some(&irq_node)) = (f.numa_node, sim.config.irq_nodes.get(&f.bdf)) else {
            judged.not_judged(
                f.bdf,
                "the spec gives no numa_node or no [sim] irq_node for it".into(),
            );
            continue;
        };
        if irq_node == node {
            judged.clean();
            continue;
        }
        let power = sim.link_power(f.bdf);
        let prediction = super::finding::qd1_read_prediction(
            sim,
            f.bdf,
            (&power, sim.far_irq_ns(f.bdf)),
            (&power, 0.0),
        )
        .unwrap_or_else(|| Prediction::not_predicted("the function is not a simulated disk"));
        judged.found(Finding {
            id: "irq-far-node",
            severity: Severity::PerfLoss,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!(
                "{} sits on NUMA node {node} but its interrupts are taken on node {irq_node}'s CPUs",
                f.bdf
            ),
            evidence: vec![
                Evidence::new(format!("spec {}", f.bdf), "numa_node", node.to_string()),
                Evidence::new(format!("spec {} [sim]", f.bdf), "irq_node", irq_node.to_string()),
            ],
            fix: Fix::printed(
                Lever::Command,
                format!("[sim] irq_node = {{ \"{}\" = {node} }} in the spec (on a host: write node {node}'s CPUs to /proc/irq/N/smp_affinity_list for each of its vectors)", f.bdf),
            ),
            intent: context.options.intent,
            prediction,
        });
    }
    judged
}

pub(super) fn irq_far_node(context: &Context) -> CheckOutcome {
    if context.facts.system.is_none() {
        if let Some(sim) = context.simulated.filter(|s| !s.config.irq_nodes.is_empty()) {
            return irq_far_node_simulated(context, sim);
        }
    }
    let what = "IRQ affinities and NUMA node CPU lists";
    let system = match system(context, what) {
        Ok(system) => system,
        Err(not_judged) => return not_judged,
    };
    if system.node_cpus.is_empty() || system.irq_cpus.is_empty() {
        return Judged::nothing("machine", context.input.system(what));
    }
    let mut judged = Judged::default();
    for f in busy_endpoints(context) {
        let Some(node) = f.numa_node else {
            if system.node_cpus.len() > 1 {
                judged.not_judged(
                    f.bdf,
                    "its numa_node reads -1: the firmware does not say which node it sits on"
                        .into(),
                );
            } else {
                judged.clean();
            }
            continue;
        };
        // A node without CPUs (memory only) has nowhere to take the interrupts.
        let Some(local) = system.node_cpus.get(&node).filter(|c| !c.is_empty()) else {
            judged.clean();
            continue;
        };
        let x = &context.facts.functions[&f.bdf];
        let delivered: Vec<(u32, &Vec<u32>)> = x
            .msi_irqs
            .iter()
            .filter_map(|irq| Some((*irq, system.irq_cpus.get(irq)?)))
            .filter(|(_, cpus)| !cpus.is_empty())
            .collect();
        // A device with a vector on its own node spreads its vectors on purpose: the kernel's
        // managed per-queue vectors (NVMe, multi-queue NICs) follow the CPUs that submit, and
        // writing their affinity fails with EIO. Only a device none of whose vectors reach its
        // node is misplaced.
        if delivered.is_empty() {
            judged.not_judged(f.bdf, "no MSI/MSI-X vector with a known affinity (msi_irqs/ empty or its IRQs absent from /proc/irq)".into());
            continue;
        }
        if delivered
            .iter()
            .any(|(_, cpus)| cpus.iter().any(|c| local.contains(c)))
        {
            judged.clean();
            continue;
        }
        let far = delivered;
        let mut evidence = vec![Evidence::new(
            x.dir.as_ref().map_or("numa_node".into(), |d| {
                d.join("numa_node").display().to_string()
            }),
            "numa_node",
            node.to_string(),
        )];
        evidence.push(Evidence::new(
            path(
                system,
                &format!("sys/devices/system/node/node{node}/cpulist"),
            ),
            "cpulist",
            cpu_list_text(local),
        ));
        for (irq, cpus) in &far {
            // A pending move: the requested CPUs take the next interrupt; both files say so.
            if let Some(now) = system.irq_moving.get(irq) {
                evidence.push(Evidence::new(
                    path(system, &format!("proc/irq/{irq}/smp_affinity_list")),
                    "smp_affinity_list",
                    cpu_list_text(cpus),
                ));
                evidence.push(Evidence::new(
                    path(system, &format!("proc/irq/{irq}/effective_affinity_list")),
                    "effective_affinity_list",
                    cpu_list_text(now),
                ));
                continue;
            }
            evidence.push(Evidence::new(
                path(system, &format!("proc/irq/{irq}/effective_affinity_list")),
                "effective_affinity_list",
                cpu_list_text(cpus),
            ));
        }
        let writes: Vec<Write> = far
            .iter()
            .map(|(irq, _)| Write {
                file: format!("proc/irq/{irq}/smp_affinity_list"),
                value: cpu_list_text(local),
            })
            .collect();
        let mut note = "interrupt handling off the device's node reads completions and descriptors across the socket interconnect".to_string();
        if system.irqbalance_running {
            note.push_str("; irqbalance is running and would move these IRQs back: stop it or ban them (IRQBALANCE_BANNED_CPULIST), or --apply --force");
        }
        judged.found(Finding {
            id: "irq-far-node",
            severity: Severity::PerfLoss,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!(
                "{} sits on NUMA node {node} but its {} MSI/MSI-X vector(s) all go only to CPUs of other nodes (IRQ {}){}",
                f.bdf,
                far.len(),
                far.iter().map(|(i, _)| i.to_string()).collect::<Vec<_>>().join(", "),
                if far.iter().any(|(i, _)| system.irq_moving.contains_key(i)) {
                    "; a pending move (smp_affinity_list) takes effect at the next interrupt"
                } else {
                    ""
                }
            ),
            evidence,
            fix: Fix {
                lever: Lever::RuntimeWrite,
                command: writes.iter().map(|w| format!("echo {} > /{}", w.value, w.file)).collect::<Vec<_>>().join("; "),
                reboot: false,
                writes,
                note: Some(note),
            },
            intent: context.options.intent,
            prediction: Prediction::not_predicted("the cost per completion (model::io, [platform] interrupts.cross_node_ns) needs the device's access latency, which only a sim: machine knows"),
        });
    }
    judged
}

pub(super) fn cpu_governor(context: &Context) -> CheckOutcome {
    let what = "cpufreq scaling_governor files";
    let system = match system(context, what) {
        Ok(system) => system,
        Err(not_judged) => return not_judged,
    };
    if system.governors.is_empty() {
        return Judged::nothing("machine", context.input.system(what));
    }
    let serving = serving_cpus(context, system);
    let mut judged = Judged::default();
    let mut slow: Vec<(u32, &String)> = Vec::new();
    for cpu in serving.keys() {
        match system.governors.get(cpu) {
            None => judged.not_judged(
                format!("cpu {cpu}"),
                "no cpufreq governor file for this CPU".into(),
            ),
            Some(g) if g.as_str() != "performance" => slow.push((*cpu, g)),
            Some(_) => judged.clean(),
        }
    }
    if slow.is_empty() {
        return judged;
    }
    let cpus: Vec<u32> = slow.iter().map(|(c, _)| *c).collect();
    let devices: BTreeSet<&String> = cpus.iter().flat_map(|c| &serving[c]).collect();
    let writes: Vec<Write> = cpus
        .iter()
        .map(|c| Write {
            file: format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
            value: "performance".into(),
        })
        .collect();
    let evidence = slow
        .iter()
        .map(|(c, g)| {
            Evidence::new(
                path(
                    system,
                    &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"),
                ),
                "scaling_governor",
                (*g).clone(),
            )
        })
        .collect();
    let mut note = "interrupt and completion handling runs at the clock the governor picks; on-demand governors ramp after the burst".to_string();
    if system.tuned_running {
        note.push_str("; tuned is running and reapplies its profile's governor: change the profile, or --apply --force");
    }
    judged.found_on(
        slow.len(),
        Finding {
            id: "cpu-governor",
            severity: Severity::PerfLoss,
            // The machine's CPUs, not the ones found slow: the subject stays the same after a
            // change (an --ignore written today still matches tomorrow).
            subject: machine_cpus(system.governors.keys()),
            function: None,
            summary: format!(
                "CPU(s) {} serve interrupts of {} but run the {} governor",
                cpu_list_text(&cpus),
                devices.into_iter().cloned().collect::<Vec<_>>().join(", "),
                slow.iter()
                    .map(|(_, g)| g.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join("/")
            ),
            evidence,
            fix: Fix {
                lever: Lever::RuntimeWrite,
                command: format!(
                    "cpupower -c {} frequency-set -g performance",
                    cpu_list_text(&cpus)
                ),
                reboot: false,
                writes,
                note: Some(note),
            },
            intent: context.options.intent,
            prediction: Prediction::not_predicted(
                "CPU frequency is not in the link or platform model",
            ),
        },
    );
    judged
}

/// Idle states slower to leave than this (µs) are called deep.
const DEEP_IDLE_US: u64 = 10;

pub(super) fn cpu_idle_deep(context: &Context) -> CheckOutcome {
    let what = "cpuidle state files";
    let system = match system(context, what) {
        Ok(system) => system,
        Err(not_judged) => return not_judged,
    };
    if system.idle_states.is_empty() {
        return Judged::nothing("machine", context.input.system(what));
    }
    let serving = serving_cpus(context, system);
    let mut judged = Judged::default();
    let mut evidence = Vec::new();
    let mut cpus = Vec::new();
    for cpu in serving.keys() {
        let deep: Vec<_> = system
            .idle_states
            .get(cpu)
            .into_iter()
            .flatten()
            .filter(|s| !s.disabled && s.latency_us > DEEP_IDLE_US)
            .collect();
        if deep.is_empty() {
            judged.clean();
            continue;
        }
        cpus.push(*cpu);
        for s in deep {
            evidence.push(Evidence::new(
                path(
                    system,
                    &format!(
                        "sys/devices/system/cpu/cpu{cpu}/cpuidle/{}/latency",
                        s.state
                    ),
                ),
                &format!("{} ({}) latency", s.state, s.name),
                format!("{} us, disable 0", s.latency_us),
            ));
        }
    }
    if cpus.is_empty() {
        return judged;
    }
    let severity = if context.options.intent == Intent::Latency {
        Severity::PerfLoss
    } else {
        Severity::Info
    };
    judged.found_on(cpus.len(), Finding {
        id: "cpu-idle-deep",
        severity,
        subject: machine_cpus(system.idle_states.keys()),
        function: None,
        summary: format!(
            "CPU(s) {} serve device interrupts with idle states deeper than {DEEP_IDLE_US} us enabled: an interrupt that wakes them waits for the exit",
            cpu_list_text(&cpus)
        ),
        evidence,
        fix: Fix::printed(
            Lever::Command,
            format!(
                "cpupower -c {} idle-set -D {DEEP_IDLE_US}, or a PM QoS latency request from the application",
                cpu_list_text(&cpus)
            ),
        )
        .noting("deep idle states save power and raise turbo headroom; disable them only where latency matters"),
        intent: context.options.intent,
        prediction: Prediction::not_predicted("CPU idle exits are not in the link or platform model"),
    });
    judged
}

pub(super) fn devfreq_governor(context: &Context) -> CheckOutcome {
    let system = match system(context, "devfreq devices") {
        Ok(system) => system,
        Err(not_judged) => return not_judged,
    };
    // No /sys/class/devfreq devices (not an SoC with devfreq): nothing to judge.
    let mut judged = Judged::default();
    for (name, governor) in &system.devfreq {
        if governor.as_str() == "performance" {
            judged.clean();
            continue;
        }
        let file = format!("sys/class/devfreq/{name}/governor");
        judged.found(Finding {
            id: "devfreq-governor",
            severity: Severity::PerfLoss,
            subject: format!("devfreq {name}"),
            function: None,
            summary: format!(
                "devfreq device {name} runs the {governor} governor: DMA to memory is served at whatever DDR/bus clock it picks"
            ),
            evidence: vec![Evidence::new(path(system, &file), "governor", governor.clone())],
            fix: Fix {
                lever: Lever::RuntimeWrite,
                command: format!("echo performance > /{file}"),
                reboot: false,
                writes: vec![Write { file, value: "performance".into() }],
                note: Some("the Rockchip PCIe performance guide, §3.1, fixes CPU and DDR at high frequency".into()),
            },
            intent: context.options.intent,
            prediction: Prediction::not_predicted("memory clock is not in the link or platform model"),
        });
    }
    judged
}
