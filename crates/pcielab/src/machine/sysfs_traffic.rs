//! The traffic sampler of a sysfs tree: the live host's (its root ports' PCIe PMU payload
//! counters where they open, its block and network devices' byte counters otherwise) or a
//! snapshot's (link facts only: a saved tree has no counters that move). Link health is read
//! through the machine's read plan (`crate::topology::readplan`), shared by every observer of
//! the machine.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::derived::DeviceReader;
use super::traffic::{carried, Carry, LinkStates, Multiplexed, OwnTraffic, TrafficSampler};
use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::pmu::host::{open_payload_counters, PayloadCounters};
use crate::pmu::placement::placed_root_ports;
use crate::pmu::sysfs::discover;
use crate::topology::health::LinkHealth;
use crate::topology::readplan::ReadPlan;
use crate::topology::Topology;

pub(crate) struct SysfsTraffic {
    plan: Arc<Mutex<ReadPlan>>,
    /// The read plan generation `topology` was taken from.
    plan_generation: u64,
    /// The plan generation whose read the caller's health buffer holds (the observer keeps one
    /// buffer; see [`TrafficSampler::link_health`]): `None` before the first read.
    read_generation: Option<u64>,
    /// The read plan's own (shared with it, not copied).
    topology: Arc<Topology>,
    /// The functions whose health in the latest read can differ from another read's
    /// (`ReadPlan::varying`).
    varying: Vec<usize>,
    /// On a host: the block and network devices' byte counters under its root.
    devices: Option<DeviceReader>,
    /// On a host: the root ports' PCIe PMU payload counters that opened.
    payload: Option<PayloadCounters>,
    pmu_ports: BTreeSet<Bdf>,
    warnings: Vec<String>,
    carries: BTreeMap<String, Carry>,
    /// PMU payload counters, scaled for the time they shared a counter: (port, Rx/Tx).
    multiplexed: BTreeMap<(Bdf, usize), Multiplexed>,
    /// Totals of devices that disappeared, per function: (up, down).
    retired: BTreeMap<Bdf, (u64, u64)>,
}

impl SysfsTraffic {
    /// Samples the tree under `root` read through `plan`; `live`: the running kernel's, whose
    /// PMUs count and whose device counters move (a snapshot's PMUs are listed, not counted).
    pub(crate) fn open(
        root: &Path,
        live: bool,
        plan: Arc<Mutex<ReadPlan>>,
    ) -> Result<SysfsTraffic> {
        let (topology, plan_generation) = {
            let plan = plan.lock().map_err(|_| poisoned())?;
            (Arc::clone(plan.topology()), plan.generation())
        };
        let pmus = if live { discover(root)? } else { Vec::new() };
        let pmu_ports = placed_root_ports(&pmus, &topology);
        let mut warnings = Vec::new();
        let payload = if pmu_ports.is_empty() {
            None
        } else {
            match open_payload_counters(root, &pmus, &topology) {
                Ok((counters, notes)) => {
                    warnings.extend(
                        notes
                            .into_iter()
                            .map(|n| format!("warning: {n}; its root port shows derived traffic")),
                    );
                    Some(counters)
                }
                Err(e) => {
                    warnings.push(format!(
                        "warning: the PCIe PMUs' payload counters did not open, so root \
                         ports show derived traffic: {e}"
                    ));
                    None
                }
            }
        };
        Ok(SysfsTraffic {
            plan,
            plan_generation,
            read_generation: None,
            topology,
            varying: Vec::new(),
            devices: live.then(|| DeviceReader::new(root)),
            payload,
            pmu_ports,
            warnings,
            carries: BTreeMap::new(),
            multiplexed: BTreeMap::new(),
            retired: BTreeMap::new(),
        })
    }

    /// Folds the totals of devices not seen in this sample into their function's retired sums.
    fn retire_missing(&mut self, seen: &BTreeSet<String>) {
        let gone: Vec<String> = self
            .carries
            .keys()
            .filter_map(|k| k.strip_suffix("/up"))
            .filter(|key| !seen.contains(*key))
            .map(str::to_string)
            .collect();
        for key in gone {
            let total = |c: Option<Carry>| match c {
                Some(Carry::Restartable { total, .. }) => total,
                _ => 0,
            };
            let up = total(self.carries.remove(&format!("{key}/up")));
            let down = total(self.carries.remove(&format!("{key}/down")));
            let Some(bdf) = key.rsplit('@').next().and_then(|b| b.parse::<Bdf>().ok()) else {
                continue;
            };
            let entry = self.retired.entry(bdf).or_default();
            *entry = (entry.0.saturating_add(up), entry.1.saturating_add(down));
        }
    }
}

impl TrafficSampler for SysfsTraffic {
    fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    fn pmu_ports(&self) -> &BTreeSet<Bdf> {
        &self.pmu_ports
    }

    fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// After the plan's hotplug check: a re-plan brings a new topology.
    fn link_health(
        &mut self,
        t_ns: u64,
        out: &mut Vec<LinkHealth>,
    ) -> Result<Option<Arc<Topology>>> {
        let mut plan = self.plan.lock().map_err(|_| poisoned())?;
        plan.refresh(t_ns);
        let replanned = (plan.generation() != self.plan_generation).then(|| {
            self.topology = Arc::clone(plan.topology());
            self.plan_generation = plan.generation();
            Arc::clone(&self.topology)
        });
        let kept = self.read_generation == Some(plan.generation());
        plan.read_into(out, kept);
        plan.varying(out, &mut self.varying);
        self.read_generation = Some(plan.generation());
        Ok(replanned)
    }

    /// The read plan's (a sysfs machine has no link states).
    fn varying(&self) -> Option<&[usize]> {
        Some(&self.varying)
    }

    fn own_traffic(&mut self, _t_ns: u64) -> Result<OwnTraffic> {
        let mut own = OwnTraffic::default();
        if let Some(payload) = &mut self.payload {
            for (port, readings) in payload.read()? {
                let mut bytes = [0u64; 2];
                for (i, reading) in readings.iter().enumerate() {
                    let counts = self
                        .multiplexed
                        .entry((port.root_port, i))
                        .or_default()
                        .update(reading);
                    bytes[i] = counts.saturating_mul(port.bytes_per_count[i]);
                }
                own.pmu.insert(port.root_port, (bytes[0], bytes[1]));
            }
        }
        let Some(reader) = &mut self.devices else {
            return Ok(own);
        };
        let mut seen = BTreeSet::new();
        for d in reader.read() {
            let key = format!("{}@{}", d.name, d.function);
            let up = carried(&mut self.carries, format!("{key}/up"), d.up, None);
            let down = carried(&mut self.carries, format!("{key}/down"), d.down, None);
            seen.insert(key);
            let entry = own.devices.entry(d.function).or_default();
            *entry = (entry.0.saturating_add(up), entry.1.saturating_add(down));
            own.names.entry(d.function).or_default().push(d.name);
        }
        self.retire_missing(&seen);
        for (bdf, (up, down)) in &self.retired {
            let entry = own.devices.entry(*bdf).or_default();
            *entry = (entry.0.saturating_add(*up), entry.1.saturating_add(*down));
        }
        Ok(own)
    }

    /// A host's figures would need its PMU's residency events.
    fn link_states(&self, _bdf: Bdf, _t_ns: u64) -> Option<LinkStates> {
        None
    }

    #[cfg(test)]
    fn workload_ns(&self) -> Option<u64> {
        None
    }
}

fn poisoned() -> Error {
    Error::runtime("an observer panicked while holding the machine's read plan")
}
