//! What an observer reads from a machine at each sample, whatever the machine is: the link
//! health of every function, each function's own bytes up and down, the root ports a PCIe PMU
//! counts and their bytes, and link power-state residency where a PMU counts it. A
//! [`TrafficSampler`] is opened by [`super::Machine::traffic_sampler`]; each access method
//! implements it beside itself (`sysfs_traffic.rs` for a host or snapshot, `sim_traffic.rs`
//! for the simulator), so `observe` sums and rates the same figures from any machine.
//!
//! Every figure a sampler returns is cumulative and monotonic over its lifetime: a PMU
//! register is carried across wraps at its catalog width, a kernel counter that restarts (its
//! device was re-created) continues from the old total, and a time-shared PMU event is scaled
//! per interval by enabled / running as perf scales it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::error::Result;
use crate::pcie::Bdf;
use crate::pmu::perf::WrapCarry;
use crate::pmu::session::Reading;
use crate::topology::health::LinkHealth;
use crate::topology::Topology;

/// Cumulative time a link spent in each power state, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LinkStates {
    pub(crate) l0_ns: u64,
    pub(crate) l0s_ns: u64,
    pub(crate) l1_ns: u64,
}

/// Bytes up (toward the root complex) and down, cumulative.
pub(crate) type UpDown = (u64, u64);

/// One sample's own traffic: per function, the bytes of the devices that belong to it and
/// their names; per PMU-counted root port, the bytes its PMU counted.
#[derive(Debug, Default)]
pub(crate) struct OwnTraffic {
    pub(crate) devices: BTreeMap<Bdf, UpDown>,
    pub(crate) names: BTreeMap<Bdf, Vec<String>>,
    pub(crate) pmu: BTreeMap<Bdf, UpDown>,
}

/// A machine's traffic and link health, sampled on demand (see the module documentation).
pub(crate) trait TrafficSampler: Send {
    /// The topology the samples describe, as read at open (shared, not copied: on sysfs the
    /// read plan's own).
    fn topology(&self) -> &Arc<Topology>;

    /// Root ports whose traffic a PCIe PMU counts.
    fn pmu_ports(&self) -> &BTreeSet<Bdf>;

    /// What the user should be told once: PMU counters that did not open.
    fn warnings(&self) -> &[String];

    /// Every function's link health at `t_ns`, in topology order, into `out`. Returns the new
    /// topology when functions came or went since the last call (the health is then in its
    /// order). `out` is the buffer of the previous call, left as that call filled it (the
    /// observer keeps one): a sampler may leave in it what it knows has not changed.
    fn link_health(
        &mut self,
        t_ns: u64,
        out: &mut Vec<LinkHealth>,
    ) -> Result<Option<Arc<Topology>>>;

    /// The functions (indices, ascending) whose link health or link states as of the latest
    /// [`TrafficSampler::link_health`] call can differ from another call's while the topology
    /// stays the same: a function in neither call's list has the same in both. `None`: any
    /// function's can.
    fn varying(&self) -> Option<&[usize]> {
        None
    }

    /// Each function's own bytes and the PMU-counted root ports' bytes at `t_ns`.
    fn own_traffic(&mut self, t_ns: u64) -> Result<OwnTraffic>;

    /// Link power-state residency of `bdf` up to `t_ns`, where a PMU counts it.
    fn link_states(&self, bdf: Bdf, t_ns: u64) -> Option<LinkStates>;

    /// On a simulator: the workload's simulated length (the counts stop changing after it).
    #[cfg(test)]
    fn workload_ns(&self) -> Option<u64>;
}

/// A counter made monotonic over a sampler's lifetime.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Carry {
    /// A PMU register of a fixed width: wraps carried.
    Register(WrapCarry),
    /// A 64-bit kernel counter that starts again from zero when its device is re-created.
    Restartable { last: u64, total: u64 },
}

impl Carry {
    fn update(&mut self, raw: u64) -> u64 {
        match self {
            Carry::Register(c) => c.update(raw),
            Carry::Restartable { last, total } => {
                *total += if raw >= *last { raw - *last } else { raw };
                *last = raw;
                *total
            }
        }
    }
}

/// The carried value of counter `key` after reading `raw` (`bits`: a register of that width).
pub(crate) fn carried(
    carries: &mut BTreeMap<String, Carry>,
    key: String,
    raw: u64,
    bits: Option<u32>,
) -> u64 {
    carries
        .entry(key)
        .or_insert_with(|| match bits {
            Some(bits) => Carry::Register(WrapCarry::new(bits)),
            None => Carry::Restartable { last: 0, total: 0 },
        })
        .update(raw)
}

/// A PMU event the kernel may time-share with others on one counter, made a full-time count:
/// each interval between reads adds its raw increment × enabled / running, perf's scaling.
#[derive(Debug, Default)]
pub(crate) struct Multiplexed {
    last: Reading,
    total: f64,
}

impl Multiplexed {
    /// Folds in a cumulative reading (wraps already carried) and returns the estimated total.
    pub(crate) fn update(&mut self, reading: &Reading) -> u64 {
        let interval = reading.since(&self.last);
        // An interval in which the event never reached the counter adds nothing.
        self.total += interval.estimate().unwrap_or(0.0);
        self.last = *reading;
        self.total as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_shared_counts_are_scaled_per_interval() {
        let reading = |value, enabled_ns, running_ns| Reading {
            value,
            enabled_ns,
            running_ns,
        };
        let mut rx = Multiplexed::default();
        // On the counter half of the first second: 500 counted stand for 1000.
        assert_eq!(rx.update(&reading(500, 1_000, 500)), 1000);
        // A quarter of the next: 100 more counted stand for 400 (not 600 × 2000/750 = 1600).
        assert_eq!(rx.update(&reading(600, 2_000, 750)), 1400);
        // Never on the counter in the third: nothing is added, nothing divides by zero.
        assert_eq!(rx.update(&reading(600, 3_000, 750)), 1400);
        // Alone on the counter: counts are taken as read.
        assert_eq!(rx.update(&reading(1600, 4_000, 1_750)), 2400);
    }

    #[test]
    fn narrow_registers_stay_monotonic_across_wraps() {
        let mut carries = BTreeMap::new();
        let mut total = 0;
        for raw in [200u64, 250, 10, 100, 5] {
            let now = carried(&mut carries, "x".into(), raw, Some(8));
            assert!(now >= total);
            total = now;
        }
        // 200, +50, +16 (wrap), +90, +161 (wrap)
        assert_eq!(total, 200 + 50 + 16 + 90 + 161);
        // A restarted 64-bit counter adds its new value on top.
        for (raw, want) in [(100u64, 100u64), (150, 150), (20, 170)] {
            assert_eq!(carried(&mut carries, "y".into(), raw, None), want);
        }
    }
}
