//! What `advise` reads beyond the topology, each fact with the file it came from so a finding can
//! quote it: per function where its configuration space was read (the registers themselves are
//! in the topology, decoded once by `topology::config_space`), AER correctable total,
//! MSI/MSI-X vectors (`msi_irqs/`) and IOMMU domain type (`iommu_group/type`); per machine the
//! ASPM policy, each IRQ's effective affinity, each NUMA node's CPUs, CPU frequency governors
//! and idle states, devfreq governors, and whether irqbalance or tuned would revert a change.
//! Every path is read below a root directory (`/` on a host, a fixture tree in tests); a fact
//! whose file is absent is `None`/empty and the checks that need it are skipped and listed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::input::read_capped;
use crate::pcie::Bdf;
use crate::topology::health::read_function_health;
use crate::topology::Topology;

/// The most of one sysfs/procfs file read (the kernel fills at most a page).
const FILE_BYTES: u64 = 4096;

/// One function's facts beyond the topology.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FunctionFacts {
    /// Where the function's registers came from: the `config` file, "lspci BDF" on an lspci
    /// machine, or "spec BDF" on `sim:`.
    pub(crate) config_source: String,
    /// `TOTAL_ERR_COR` of `aer_dev_correctable`.
    pub(crate) aer_correctable: Option<u64>,
    /// IRQ numbers of the function's MSI/MSI-X vectors (`msi_irqs/`).
    pub(crate) msi_irqs: Vec<u32>,
    /// `iommu_group/type`: DMA, DMA-FQ, identity, blocked.
    pub(crate) iommu_type: Option<String>,
    /// The function's sysfs directory, for evidence paths (`None` on `sim:`).
    pub(crate) dir: Option<PathBuf>,
}

impl FunctionFacts {
    /// The IOMMU group sysfs puts the function in (the name its `iommu_group` link points
    /// to), read when asked; `None` without a sysfs directory or the link.
    pub(crate) fn iommu_group(&self) -> Option<String> {
        let target = fs::read_link(self.dir.as_ref()?.join("iommu_group")).ok()?;
        Some(target.file_name()?.to_string_lossy().into_owned())
    }
}

/// One CPU idle state (`cpuN/cpuidle/stateK`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IdleState {
    pub(crate) state: String,
    pub(crate) name: String,
    /// Exit latency in microseconds (`latency`).
    pub(crate) latency_us: u64,
    pub(crate) disabled: bool,
}

/// Machine-wide facts, read below `root`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SystemFacts {
    pub(crate) root: PathBuf,
    /// The selected policy of `/sys/module/pcie_aspm/parameters/policy` (the bracketed word).
    pub(crate) aspm_policy: Option<String>,
    /// Each IRQ's CPUs as its next interrupt finds them: `effective_affinity_list`, or
    /// `smp_affinity_list` where the first is absent or a move is pending.
    pub(crate) irq_cpus: BTreeMap<u32, Vec<u32>>,
    /// IRQs whose move is pending, with their effective CPUs now: the effective CPUs lie outside
    /// the requested ones. x86 without interrupt remapping moves an MSI only when its next
    /// interrupt arrives, so an idle device keeps the old CPU in `effective_affinity_list`.
    pub(crate) irq_moving: BTreeMap<u32, Vec<u32>>,
    /// Each NUMA node's CPUs (`/sys/devices/system/node/nodeN/cpulist`).
    pub(crate) node_cpus: BTreeMap<i32, Vec<u32>>,
    /// `cpuN/cpufreq/scaling_governor`.
    pub(crate) governors: BTreeMap<u32, String>,
    pub(crate) idle_states: BTreeMap<u32, Vec<IdleState>>,
    /// `/sys/class/devfreq/NAME/governor`.
    pub(crate) devfreq: BTreeMap<String, String>,
    /// Processes that would undo a runtime change: "irqbalance", "tuned" (from `/proc/*/comm`).
    pub(crate) irqbalance_running: bool,
    pub(crate) tuned_running: bool,
}

/// Everything `advise` knows about a machine beyond its topology.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Facts {
    pub(crate) functions: BTreeMap<Bdf, FunctionFacts>,
    /// `None` on machines without a filesystem root (`sim:`, a bare `/sys/bus/pci` snapshot).
    pub(crate) system: Option<SystemFacts>,
}

pub(crate) fn read_text(path: &Path) -> Option<String> {
    let bytes = read_capped(path, FILE_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// A kernel CPU list ("0-3,8,10-11") as CPU numbers; `None` when it does not parse.
pub(crate) fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65535 {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// CPU numbers as the kernel prints a list: ranges joined ("0-3,8").
pub(crate) fn cpu_list_text(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The bracketed choice of a kernel selection file (`default performance [powersave]`).
pub(crate) fn selected_word(text: &str) -> Option<String> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']').map(str::to_string))
        .or_else(|| {
            // A file written plain (a fixture, or an older kernel) names the choice alone.
            let words: Vec<&str> = text.split_whitespace().collect();
            (words.len() == 1).then(|| words[0].to_string())
        })
}

/// Numbered entries of `dir` named `<prefix>N`, in numeric order.
fn numbered(dir: &Path, prefix: &str) -> Vec<(u32, PathBuf)> {
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix(prefix)?.parse().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort();
    found
}

/// Reads the facts of every function of `topo` from `pci_dir/devices/<bdf>` when the machine
/// has sysfs (`sim:` machines have only their spec's topology).
pub(crate) fn read_facts(topo: &Topology, pci_dir: Option<&Path>, root: Option<&Path>) -> Facts {
    let mut functions = BTreeMap::new();
    for f in topo.functions() {
        let facts = match pci_dir {
            Some(pci) => read_function(&pci.join("devices").join(f.bdf.to_string())),
            // A spec says nothing of Extended Tag, Relaxed Ordering, 10-bit tags or exit
            // latencies: the checks that need them are skipped, not fed zeros.
            // Text read from lspci names each function's facts by its address.
            None if !f.evidence.is_empty() => FunctionFacts {
                config_source: format!("lspci {}", f.bdf),
                ..FunctionFacts::default()
            },
            None => FunctionFacts {
                config_source: format!("spec {}", f.bdf),
                ..FunctionFacts::default()
            },
        };
        functions.insert(f.bdf, facts);
    }
    Facts {
        functions,
        system: root.map(read_system),
    }
}

fn read_function(dir: &Path) -> FunctionFacts {
    let msi_irqs = numbered_names(&dir.join("msi_irqs"));
    FunctionFacts {
        config_source: dir.join("config").display().to_string(),
        aer_correctable: read_function_health(dir).aer.correctable,
        msi_irqs,
        iommu_type: read_text(&dir.join("iommu_group/type")),
        dir: Some(dir.to_path_buf()),
    }
}

/// Entries of `dir` whose names are numbers (`msi_irqs/45`), sorted.
fn numbered_names(dir: &Path) -> Vec<u32> {
    numbered(dir, "").into_iter().map(|(n, _)| n).collect()
}

/// Reads the machine-wide facts below `root`.
pub(crate) fn read_system(root: &Path) -> SystemFacts {
    let mut system = SystemFacts {
        root: root.to_path_buf(),
        aspm_policy: read_text(&root.join("sys/module/pcie_aspm/parameters/policy"))
            .and_then(|t| selected_word(&t)),
        ..SystemFacts::default()
    };
    for (irq, dir) in numbered(&root.join("proc/irq"), "") {
        let list = |name: &str| read_text(&dir.join(name)).and_then(|t| parse_cpu_list(&t));
        let (effective, requested) = (list("effective_affinity_list"), list("smp_affinity_list"));
        let cpus = match (effective, requested) {
            (Some(now), Some(wanted)) if !now.iter().all(|c| wanted.contains(c)) => {
                system.irq_moving.insert(irq, now);
                wanted
            }
            (Some(now), _) => now,
            (None, Some(wanted)) => wanted,
            (None, None) => continue,
        };
        system.irq_cpus.insert(irq, cpus);
    }
    for (node, dir) in numbered(&root.join("sys/devices/system/node"), "node") {
        if let Some(cpus) = read_text(&dir.join("cpulist")).and_then(|t| parse_cpu_list(&t)) {
            system.node_cpus.insert(node as i32, cpus);
        }
    }
    for (cpu, dir) in numbered(&root.join("sys/devices/system/cpu"), "cpu") {
        if let Some(g) = read_text(&dir.join("cpufreq/scaling_governor")) {
            system.governors.insert(cpu, g);
        }
        let states: Vec<IdleState> = numbered(&dir.join("cpuidle"), "state")
            .into_iter()
            .filter_map(|(n, state)| {
                Some(IdleState {
                    state: format!("state{n}"),
                    name: read_text(&state.join("name")).unwrap_or_default(),
                    latency_us: read_text(&state.join("latency"))?.parse().ok()?,
                    disabled: read_text(&state.join("disable")).as_deref() == Some("1"),
                })
            })
            .collect();
        if !states.is_empty() {
            system.idle_states.insert(cpu, states);
        }
    }
    for entry in fs::read_dir(root.join("sys/class/devfreq"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if let Some(g) = read_text(&entry.path().join("governor")) {
            system
                .devfreq
                .insert(entry.file_name().to_string_lossy().into_owned(), g);
        }
    }
    for (_, dir) in numbered(&root.join("proc"), "") {
        match read_text(&dir.join("comm")).as_deref() {
            Some("irqbalance") => system.irqbalance_running = true,
            Some("tuned") => system.tuned_running = true,
            _ => {}
        }
    }
    system
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_print_as_the_kernel_writes_them() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(cpu_list_text(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list(""), Some(vec![]));
    }

    #[test]
    fn the_bracketed_policy_is_the_selected_one() {
        // As /sys/module/pcie_aspm/parameters/policy reads on Linux 6.12 (pcie_aspm_get_policy).
        assert_eq!(
            selected_word("default performance [powersave] powersupersave").as_deref(),
            Some("powersave")
        );
        assert_eq!(selected_word("performance").as_deref(), Some("performance"));
        assert_eq!(selected_word("a b"), None);
    }
}
