//! What `info/` says about a resctrl mount: the allocation resources (L3, L3CODE/L3DATA with
//! CDP, L2, MB), the monitoring resource (L3_MON) and the domain ids of each. Every backend fills
//! the same [`Info`]; the schemata rules and the group rules read it.

use serde::{Deserialize, Serialize};

/// A cache allocation resource (`info/L3`, `info/L3CODE`, `info/L3DATA`, `info/L2`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CacheResource {
    /// The schemata name: `L3`, `L3CODE`, `L3DATA`, `L2`.
    pub(crate) name: String,
    /// CLOSIDs the resource has (`num_closids`).
    pub num_closids: u32,
    /// The full cache bit mask (`cbm_mask`).
    pub cbm_mask: u64,
    /// The fewest bits a mask may set (`min_cbm_bits`).
    pub min_cbm_bits: u32,
    /// Bits other agents (I/O, firmware) may also use (`shareable_bits`).
    pub shareable_bits: u64,
    /// 1 when masks may have holes (MPAM cache portions, newer Intel parts).
    pub sparse_masks: bool,
    /// Cache ids, one per domain.
    pub domains: Vec<u32>,
    /// Bytes of one domain's cache, used for the group's `size` file (0 when unknown).
    pub(crate) cache_bytes: u64,
}

impl CacheResource {
    /// Number of bits in a capacity bitmask.
    pub(crate) fn cbm_len(&self) -> u32 {
        64 - self.cbm_mask.leading_zeros()
    }
}

/// The memory bandwidth allocation resource (`info/MB`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MbResource {
    pub(crate) num_closids: u32,
    /// The lowest bandwidth a group may get, in percent (`min_bandwidth`).
    pub min_bandwidth: u32,
    /// The step bandwidth values round to (`bandwidth_gran`).
    pub bandwidth_gran: u32,
    /// Whether the throttle is linear (`delay_linear`).
    pub delay_linear: bool,
    pub(crate) thread_throttle_mode: String,
    pub(crate) domains: Vec<u32>,
}

/// The monitoring resource (`info/L3_MON`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MonResource {
    /// RMIDs (monitor ids) the machine has (`num_rmids`).
    pub num_rmids: u32,
    /// `llc_occupancy`, `mbm_total_bytes`, `mbm_local_bytes` as the hardware provides them.
    pub mon_features: Vec<String>,
    /// MPAM: monitor ids are (PARTID, PMG) pairs, so each control group owns only this many of
    /// the RMIDs (itself plus its monitor groups). `None` on x86, where RMIDs are one global pool.
    pub(crate) rmids_per_closid: Option<u32>,
}

/// Everything under `info/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Info {
    /// The cache resources (`L3`, `L2`, CDP's code/data halves).
    pub caches: Vec<CacheResource>,
    /// The memory-bandwidth resource, where there is one.
    pub mb: Option<MbResource>,
    /// The monitoring resource, where there is one.
    pub mon: Option<MonResource>,
    /// Which kernel's rules apply (state files written before this field read as current rules).
    #[serde(default)]
    pub rules: KernelRules,
}

/// The parts of resctrl's behaviour that changed between kernel versions, detected on a host
/// from `uname -r` (the release) and what `info/` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KernelRules {
    /// The kernel release the rules were detected from (`6.1.0-18-amd64`), empty when assumed.
    pub(crate) release: String,
    /// Since 6.7 one write to `tasks` may carry a comma-separated list; before, one pid only.
    pub pid_lists: bool,
    /// Since 6.12 an unparsable MB value is "Invalid MB value …" (was "Non-decimal digit in MB
    /// value …") and values beyond u32 are unparsable rather than out of range.
    pub(crate) invalid_mb_message: bool,
}

impl Default for KernelRules {
    /// The current upstream rules.
    fn default() -> Self {
        KernelRules::for_release("")
    }
}

impl KernelRules {
    /// The rules of a kernel release string; an empty or unreadable one means current upstream.
    pub fn for_release(release: &str) -> KernelRules {
        let version = parse_release(release);
        let since = |major: u32, minor: u32| version.is_none_or(|v| v >= (major, minor));
        KernelRules {
            release: release.to_string(),
            pid_lists: since(6, 7),
            invalid_mb_message: since(6, 12),
        }
    }
}

/// `6.1.0-18-amd64` → (6, 1).
fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

impl Info {
    /// The cache resource `name` (`L3`, `L3CODE`, ...), if the machine has it.
    pub(crate) fn cache(&self, name: &str) -> Option<&CacheResource> {
        self.caches.iter().find(|c| c.name == name)
    }

    /// CDP is on when the L3 resource is split into code and data halves.
    pub(crate) fn cdp(&self) -> bool {
        self.cache("L3CODE").is_some()
    }

    /// The number of control groups (root included) the kernel will allow: the smallest
    /// `num_closids` among the enabled allocation resources.
    pub(crate) fn closids_supported(&self) -> u32 {
        self.caches
            .iter()
            .map(|c| c.num_closids)
            .chain(self.mb.iter().map(|m| m.num_closids))
            .min()
            .unwrap_or(1)
    }

    /// Schemata resource names in the order the kernel prints them.
    pub(crate) fn resource_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.caches.iter().map(|c| c.name.as_str()).collect();
        if self.mb.is_some() {
            names.push("MB");
        }
        names
    }

    /// Domain ids of a schemata resource.
    pub(crate) fn domains_of(&self, resource: &str) -> Option<&[u32]> {
        if resource == "MB" {
            return self.mb.as_ref().map(|m| m.domains.as_slice());
        }
        self.cache(resource).map(|c| c.domains.as_slice())
    }
}
