//! The traffic sampler of a simulated PCIe machine: a workload's finished run played back at
//! the sample's instant (simulated time *is* the sample's time), the root ports' payload bytes
//! read from the simulator's DWC PMU model as a driver reads its registers (wrapping at their
//! width, in the seed driver's 16-byte units), link health from the spec and the simulated
//! link errors.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::traffic::{carried, Carry, LinkStates, OwnTraffic, TrafficSampler};
use crate::error::{Error, Result};
use crate::pcie::{Bdf, Generation};
use crate::pmu::catalog::{EventDef, Family};
use crate::sim::tlp::Dir;
use crate::sim::{SimRun, SimulatedPcie};
use crate::topology::health::{AerCounts, LinkHealth};
use crate::topology::{Function, Kind, Topology};

/// The DWC PMU events the simulated root ports' payload bytes are read from, and the bytes one
/// count stands for (the seed's driver reports 16-byte units).
const SIM_PAYLOAD_EVENTS: [(&str, Dir); 2] = [
    ("Rx_PCIe_TLP_Data_Payload", Dir::Up),
    ("Tx_PCIe_TLP_Data_Payload", Dir::Down),
];
const DWC_PAYLOAD_UNIT_BYTES: u64 = 16;

pub(crate) struct SimTraffic {
    machine: SimulatedPcie,
    /// The machine's topology, in the shared form the observer keeps.
    topology: Arc<Topology>,
    /// The workload's run; without a workload an idle one (`sleep 0`): the machine idles from
    /// then on.
    run: SimRun,
    pmu_ports: BTreeSet<Bdf>,
    carries: BTreeMap<String, Carry>,
}

impl SimTraffic {
    pub(crate) fn new(machine: SimulatedPcie, run: SimRun) -> SimTraffic {
        let pmu_ports = machine.pmus().iter().filter_map(|p| p.root_port).collect();
        SimTraffic {
            topology: Arc::new(machine.topology.clone()),
            machine,
            run,
            pmu_ports,
            carries: BTreeMap::new(),
        }
    }
}

impl TrafficSampler for SimTraffic {
    fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    fn pmu_ports(&self) -> &BTreeSet<Bdf> {
        &self.pmu_ports
    }

    fn warnings(&self) -> &[String] {
        &[]
    }

    fn link_health(
        &mut self,
        t_ns: u64,
        out: &mut Vec<LinkHealth>,
    ) -> Result<Option<Arc<Topology>>> {
        out.clear();
        out.extend(
            self.machine
                .topology
                .functions()
                .iter()
                .map(|f| sim_health(&self.run, f, t_ns)),
        );
        Ok(None)
    }

    fn own_traffic(&mut self, t_ns: u64) -> Result<OwnTraffic> {
        let mut own = OwnTraffic::default();
        for bdf in self.machine.devices.keys() {
            let t = self.run.device_tally(*bdf, t_ns);
            own.devices.insert(
                *bdf,
                (
                    t.payload_bytes[Dir::Up as usize],
                    t.payload_bytes[Dir::Down as usize],
                ),
            );
        }
        for rp in &self.pmu_ports {
            let mut bytes = [0u64; 2];
            for (i, (event, _)) in SIM_PAYLOAD_EVENTS.iter().enumerate() {
                let def = sim_payload_event(event)?;
                let bits = def.group.counter_bits(Family::DwcRootPort);
                let truth = self.run.dwc_count(*rp, def, None, t_ns);
                let register = truth & crate::pmu::counter::mask(bits);
                let units = carried(
                    &mut self.carries,
                    format!("pmu/{rp}/{event}"),
                    register,
                    Some(bits),
                );
                bytes[i] = units.saturating_mul(DWC_PAYLOAD_UNIT_BYTES);
            }
            own.pmu.insert(*rp, (bytes[0], bytes[1]));
        }
        Ok(own)
    }

    /// The simulator's PMU model counts residency at every PMU-counted port.
    fn link_states(&self, bdf: Bdf, t_ns: u64) -> Option<LinkStates> {
        self.pmu_ports.contains(&bdf).then(|| {
            let r = self.run.port_residency(bdf, t_ns);
            LinkStates {
                l0_ns: r.l0_ns as u64,
                l0s_ns: r.l0s_ns as u64,
                l1_ns: r.l1_ns as u64,
            }
        })
    }

    #[cfg(test)]
    fn workload_ns(&self) -> Option<u64> {
        Some(self.run.duration_ns)
    }
}

/// A simulated function's link health: its spec link and the simulated link errors (the root
/// port counts what it received bad as correctable).
fn sim_health(run: &SimRun, f: &Function, t_ns: u64) -> LinkHealth {
    let link = f.link.unwrap_or_default();
    let errors = if f.kind == Kind::RootPort {
        let e = run.port_errors(f.bdf, t_ns);
        e.rx_bad_tlps + e.rx_bad_dllps
    } else {
        0
    };
    let root_port = f.aer && f.kind == Kind::RootPort;
    let zero_if = |present: bool, n: u64| present.then_some(n);
    LinkHealth {
        current_gts: link.speed.map(Generation::gt_s).filter(|_| {
            // A port whose link trained to no width is down: its speed reads Unknown.
            link.width != Some(0)
        }),
        capable_gts: link.max_speed.map(Generation::gt_s),
        current_width: link.width.map(u32::from),
        capable_width: link.max_width.map(u32::from),
        aer: AerCounts {
            correctable: zero_if(f.aer, errors),
            nonfatal: zero_if(f.aer, 0),
            fatal: zero_if(f.aer, 0),
            rootport_correctable: zero_if(root_port, errors),
            rootport_nonfatal: zero_if(root_port, 0),
            rootport_fatal: zero_if(root_port, 0),
        },
    }
}

fn sim_payload_event(name: &str) -> Result<&'static EventDef> {
    Family::DwcRootPort
        .find(name)
        .ok_or_else(|| Error::runtime(format!("the DWC catalog has no event {name}")))
}
