//! The simulated machines: what their resctrl `info/` shows and the physical parameters the
//! partitioning model runs on. Every number is documented in `docs/qos.md` with its source: the
//! seed article (`arm64-mpam-resctrl`) where it gives one, public facts about the part where it
//! names one, and otherwise a stated assumption chosen to reproduce an effect the seed measured.

use super::info::{CacheResource, Info, KernelRules, MbResource, MonResource};
use crate::error::{Error, Result};
use crate::linux::cpuset::CpuSet;

/// The kernel whose resctrl rules the simulated machines follow: pid lists in one `tasks` write
/// (since 6.7) and the MB messages from before 6.12 ("Non-decimal digit in MB value").
pub(crate) const SIM_KERNEL_RELEASE: &str = "6.11";

/// Physical parameters of one simulated machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    /// The name `sim:NAME` takes.
    pub name: &'static str,
    pub(crate) description: &'static str,
    /// The document its numbers come from, by title (docs/sources.md), for `pcielab presets`.
    pub(crate) source: &'static str,
    /// NUMA nodes; each has one L3 domain (cache id = node id), one memory controller group and
    /// one MB domain.
    pub(crate) nodes: u32,
    pub(crate) cpus_per_node: u32,
    /// L3 bytes per node.
    pub l3_bytes: u64,
    /// L3 ways (the bits of a cache mask).
    pub l3_ways: u32,
    /// L3 hit latency (ns).
    pub l3_hit_ns: f64,
    /// Unloaded DRAM latency seen by a core.
    pub mem_idle_ns: f64,
    /// How fast latency grows with utilisation u: idle × (1 + k·u/(1−u)).
    pub(crate) mem_queue_k: f64,
    /// Bandwidth a node's memory can actually deliver (GB/s, 1e9 bytes/s).
    pub node_peak_gbps: f64,
    /// The bandwidth an MB setting of 100 % stands for (GB/s).
    pub mb_reference_gbps: f64,
    /// Misses one core keeps in flight while streaming (line fill buffers plus prefetch).
    pub core_outstanding: f64,
    pub(crate) num_closids: u32,
    pub(crate) mb_num_closids: u32,
    pub(crate) min_cbm_bits: u32,
    pub(crate) shareable_bits: u64,
    pub(crate) sparse_masks: bool,
    pub(crate) mb_min: u32,
    pub(crate) mb_gran: u32,
    pub(crate) num_rmids: u32,
    pub(crate) rmids_per_closid: Option<u32>,
    pub(crate) mbm_local: bool,
    /// What the bandwidth monitor reports per byte that really moved.
    pub(crate) mbm_scale: f64,
}

/// `sim:mpam-seed`: the Arm64 MPAM machine of the MPAM/resctrl article (its test machine and
/// measurements).
pub const MPAM_SEED: Preset = Preset {
    name: "mpam-seed",
    description:
        "the MPAM/resctrl article's Arm64 machine: 4 nodes x 24 CPUs, 15-way L3 per node, \
                  MB in 2 % steps, 16 PARTIDs x 2 PMGs, MBWU reading ~30 % low",
    source: "the MPAM/resctrl article (its test machine and measurements; docs/qos.md)",
    nodes: 4,
    cpus_per_node: 24,
    l3_bytes: 15 << 20,
    l3_ways: 15,
    l3_hit_ns: 40.0,
    mem_idle_ns: 95.0,
    mem_queue_k: 0.3,
    node_peak_gbps: 32.0,
    mb_reference_gbps: 40.0,
    core_outstanding: 12.0,
    num_closids: 16,
    mb_num_closids: 16,
    min_cbm_bits: 1,
    shareable_bits: 0x7fff,
    sparse_masks: true,
    mb_min: 2,
    mb_gran: 2,
    num_rmids: 32,
    rmids_per_closid: Some(2),
    mbm_local: false,
    mbm_scale: 0.70,
};

/// `sim:rdt-xeon8163`: an Intel RDT machine, from the MPAM/resctrl article's Intel comparison
/// and Intel's published Xeon 8163 figures.
pub const RDT_XEON8163: Preset = Preset {
    name: "rdt-xeon8163",
    description:
        "the MPAM/resctrl article's Intel comparison, Xeon Platinum 8163 (Skylake-SP), 2 sockets x \
                  48 CPUs, 33 MiB 11-way L3, MB in 10 % steps, 176 RMIDs, MBM within ~5 %",
    source: "the MPAM/resctrl article's Intel comparison and Intel's published Xeon 8163 figures",
    nodes: 2,
    cpus_per_node: 48,
    l3_bytes: 33 << 20,
    l3_ways: 11,
    l3_hit_ns: 26.0,
    mem_idle_ns: 90.0,
    mem_queue_k: 0.3,
    node_peak_gbps: 100.0,
    mb_reference_gbps: 100.0,
    core_outstanding: 14.0,
    num_closids: 16,
    mb_num_closids: 8,
    min_cbm_bits: 1,
    shareable_bits: 0,
    sparse_masks: false,
    mb_min: 10,
    mb_gran: 10,
    num_rmids: 176,
    rmids_per_closid: None,
    mbm_local: true,
    mbm_scale: 0.95,
};

/// Every simulated resctrl machine.
pub const PRESETS: [&Preset; 2] = [&MPAM_SEED, &RDT_XEON8163];

impl Preset {
    /// Every preset as `--machine` names it: `sim:mpam-seed, sim:rdt-xeon8163`.
    pub(crate) fn selectors() -> String {
        PRESETS
            .iter()
            .map(|p| format!("sim:{}", p.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Look a preset up by name (`mpam-seed`, `rdt-xeon8163`).
    pub(crate) fn by_name(name: &str) -> Result<&'static Preset> {
        PRESETS
            .iter()
            .copied()
            .find(|p| p.name == name)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "unknown simulated QoS machine '{name}': valid are {}",
                    Preset::selectors()
                ))
            })
    }

    pub(crate) fn cbm_mask(&self) -> u64 {
        (1u64 << self.l3_ways) - 1
    }

    /// CPUs in all.
    pub(crate) fn nr_cpus(&self) -> u32 {
        self.nodes * self.cpus_per_node
    }

    pub(crate) fn node_of_cpu(&self, cpu: u32) -> u32 {
        cpu / self.cpus_per_node
    }

    pub(crate) fn cpus_of_node(&self, node: u32) -> CpuSet {
        CpuSet::range(
            node * self.cpus_per_node,
            (node + 1) * self.cpus_per_node - 1,
        )
    }

    /// What `info/` shows; with `cdp` the L3 is split into L3CODE/L3DATA and each has half the
    /// CLOSIDs.
    pub(crate) fn info(&self, cdp: bool) -> Info {
        let domains: Vec<u32> = (0..self.nodes).collect();
        let cache = |name: &str, closids: u32| CacheResource {
            name: name.into(),
            num_closids: closids,
            cbm_mask: self.cbm_mask(),
            min_cbm_bits: self.min_cbm_bits,
            shareable_bits: self.shareable_bits,
            sparse_masks: self.sparse_masks,
            domains: domains.clone(),
            cache_bytes: self.l3_bytes,
        };
        let caches = if cdp {
            vec![
                cache("L3CODE", self.num_closids / 2),
                cache("L3DATA", self.num_closids / 2),
            ]
        } else {
            vec![cache("L3", self.num_closids)]
        };
        let mut features = vec!["llc_occupancy".to_string(), "mbm_total_bytes".to_string()];
        if self.mbm_local {
            features.push("mbm_local_bytes".into());
        }
        Info {
            caches,
            mb: Some(MbResource {
                num_closids: self.mb_num_closids,
                min_bandwidth: self.mb_min,
                bandwidth_gran: self.mb_gran,
                delay_linear: true,
                thread_throttle_mode: "max".into(),
                domains,
            }),
            mon: Some(MonResource {
                num_rmids: self.num_rmids,
                mon_features: features,
                rmids_per_closid: self.rmids_per_closid,
            }),
            rules: KernelRules::for_release(SIM_KERNEL_RELEASE),
        }
    }
}
