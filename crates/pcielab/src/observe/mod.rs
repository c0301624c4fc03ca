//! Live observation of PCIe traffic and link health, the library under `pcielab exporter` and
//! `pcielab top`: an [`Observer`] opened on any machine produces [`Sample`]s (cumulative counts
//! at one instant, per function of the topology) and [`rates`] turns two samples into MB/s and
//! % of each link's achievable rate.
//!
//! # Using it
//! ```no_run
//! use pcielab::observe::{rates, Observer};
//! let machine = "sim:yitian710".parse().unwrap();
//! let argv: Vec<String> = ["fio", "--filename=/dev/sda", "--rw=read", "--bs=1m",
//!     "--time_based", "--runtime=60", "--name=r"].iter().map(|s| s.to_string()).collect();
//! let mut observer = Observer::open(&machine, &argv, |p| {
//!     pcielab::input::read_input_file(p, "fio job file")
//! }).unwrap();
//! let before = observer.sample().unwrap();
//! std::thread::sleep(std::time::Duration::from_secs(1));
//! let after = observer.sample().unwrap();
//! for r in rates(&before, &after) {
//!     println!("{} rx {:?} MB/s ({:?} % of link)", r.bdf, r.rx_mbps, r.rx_percent);
//! }
//! ```
//!
//! # What a sample holds, per function (root ports, switch ports, endpoints, bridges)
//! - `traffic`: cumulative payload bytes `rx_bytes` (toward the root complex: what the root
//!   port receives; a disk read, a received frame, a device's DMA write to memory) and `tx_bytes`
//!   (away from it), the estimated bytes on the wire (`model::transfer::WireEstimate`: TLP
//!   headers, framing and returned DLLPs of MPS/MRRS-sized streams on that function's link), and
//!   their `source`: [`Source::Pmu`] where a PCIe PMU counts the port (the simulator's DWC PMU
//!   model on `sim:`; on a host, the port's PMU counters, see below), [`Source::Derived`] where the figure is summed from the block devices and
//!   network interfaces at or below the function ([`derived`]). `None` where neither exists (a
//!   GPU's traffic is invisible without a PMU; a snapshot has no counters). Derived figures are
//!   a lower bound: traffic of other devices on the same path is not in them.
//! - `link`: current and capable speed/width and the kernel's AER counters
//!   ([`crate::topology::health`]), with `downgraded` and `link_down` (an empty slot's port
//!   reports its link down, as the kernel does).
//! - `link_states`: where a PMU counts link power states (the simulator's DWC PMU model), the
//!   time the link spent in L0, L0s and L1 since the observer opened; [`rates`] gives them as %
//!   of the interval.
//! - `achievable_mbps`: the payload rate the function's link can reach at its current
//!   speed/width ([`crate::model::transfer::achievable_mbps`]), the base of "% of link".
//!
//! # PMU counters on a host
//! [`Observer::open`] on `--machine host` opens the Rx and Tx data-payload events of every
//! root-port PMU whose driver has them (`dwc_rootport_*` in bytes, the seed's `pcie_bdf_*` in
//! 16-byte units) through `crate::pmu::host::open_payload_counters`: system-wide on the
//! PMU's cpumask CPU, each event alone, so that on a DesignWare port, whose one time-based
//! counter takes one of them at a time, the kernel time-shares them as perf multiplexes. Each
//! sample adds every interval's raw increment × enabled / running (perf's scaling), so a host
//! reports the estimated full count each way, the figure `sim:` reports exactly (the simulator's
//! model is read as if each event had the counter to itself). A refused open (permissions) is
//! not an error: [`Observer::warnings`] says why once and the ports keep `derived` traffic.
//!
//! Counts are monotonic for the observer's lifetime: PMU registers are carried across wraps at
//! their catalog width (`crate::pmu::perf::WrapCarry`); a device counter that goes backwards
//! (the device was re-created) restarts from its new value on top of the old total, and a
//! device that disappears keeps its total in its function's sums.
//!
//! # Reading sysfs
//! On `host` and `snapshot:` link health is read through the machine's read plan
//! (`crate::topology::readplan`, held by the [`Machine`] so every observer of it shares one):
//! per sample only the trained state of each link (once, at its port end) and the AER counters
//! that exist; the link capability was read once. Every `crate::topology::readplan::REDISCOVER_NS`
//! of sample time, or after a planned file failed to read, the `devices/` listing is compared
//! with the plan, and a function that came or went brings a new topology into the samples.
//! Block and network devices are mapped to their functions once per device name
//! (`derived::DeviceReader`).
//!
//! # Time
//! [`Observer::sample`] stamps each sample with the time since the observer opened. On `sim:`
//! that instant *is* the simulated time: a workload given at open plays in real time (counts at
//! wall time t are the simulator's at simulated time t; after the workload ends they stay at its
//! totals). [`Observer::sample_at`] takes the instant explicitly (tests, a paused view).
//! On a host or snapshot the counters are read when called, whatever the stamp.

pub mod cost;
pub mod derived;
pub mod exporter;
pub mod top;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::machine::{Machine, PcieSource};
use crate::model::transfer::{achievable_mbps, LinkParams, WireEstimate};
use crate::pcie::{Bdf, Generation};
use crate::pmu::catalog::{EventDef, Family};
use crate::pmu::host::{open_payload_counters, PayloadCounters};
use crate::pmu::perf::WrapCarry;
use crate::pmu::placement::placed_root_ports;
use crate::pmu::session::Reading;
use crate::pmu::sysfs::discover;
use crate::sim::tlp::Dir;
use crate::sim::{workload, SimRun, SimulatedPcie};
use crate::topology::health::{AerCounts, LinkHealth};
use crate::topology::readplan::ReadPlan;
use crate::topology::{Function, Kind, Topology};

/// Where a traffic figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A PCIe PMU's data-payload counters (on `sim:`, the simulator's PMU model).
    Pmu,
    /// Summed from block-device and network-interface byte counters at or below the function.
    Derived,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Pmu => "pmu",
            Source::Derived => "derived",
        }
    }
}

/// Cumulative traffic of one function.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Traffic {
    pub source: Source,
    /// Payload bytes toward the root complex (the root port's Rx).
    pub rx_bytes: u64,
    /// Payload bytes away from it (the root port's Tx).
    pub tx_bytes: u64,
    /// Estimated bytes on the wire each way; `None` when the function reports no trained link.
    pub rx_wire_bytes: Option<u64>,
    pub tx_wire_bytes: Option<u64>,
}

/// Cumulative time a link spent in each power state, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct LinkStates {
    pub l0_ns: u64,
    pub l0s_ns: u64,
    pub l1_ns: u64,
}

/// Share of an interval a link spent in each power state, in %.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkStatePercent {
    pub l0: f64,
    pub l0s: f64,
    pub l1: f64,
}

/// One function at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FunctionSample {
    pub bdf: Bdf,
    pub kind: Kind,
    pub parent: Option<Bdf>,
    /// The root port above the function (itself for a root port); `None` on a root bus.
    pub root_port: Option<Bdf>,
    pub name: Option<String>,
    /// The block devices and network interfaces that belong to this function itself.
    pub devices: Vec<String>,
    pub traffic: Option<Traffic>,
    pub link: LinkHealth,
    pub downgraded: bool,
    pub link_down: bool,
    /// The link above this function judged as `topo` and `advise` judge it, at the link's
    /// downstream end (one function per device) with its trained speed and width as read now:
    /// full, slot-limited, power-managed-idle, downtrained or failed; `None` elsewhere or
    /// where the link is not known well enough to judge.
    pub link_judgement: Option<&'static str>,
    /// A PCIe PMU counts this root port's traffic.
    pub pmu: bool,
    /// Link power-state residency, where a PMU counts it.
    pub link_states: Option<LinkStates>,
    /// Link-achievable payload MB/s per direction at the current speed and width.
    pub achievable_mbps: Option<f64>,
}

/// Every function of the machine at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Sample {
    /// The `--machine` selector, as given.
    pub machine: String,
    /// Nanoseconds since the observer opened.
    pub t_ns: u64,
    /// In address order.
    pub functions: Vec<FunctionSample>,
}

impl Sample {
    pub fn get(&self, bdf: Bdf) -> Option<&FunctionSample> {
        self.functions
            .binary_search_by_key(&bdf, |f| f.bdf)
            .ok()
            .map(|i| &self.functions[i])
    }

    /// The function `bdf`, found at index `i` when this sample lists the same functions as the
    /// one `i` is from (every sample between two hotplug events), else by address.
    pub(crate) fn counterpart(&self, i: usize, bdf: Bdf) -> Option<&FunctionSample> {
        match self.functions.get(i) {
            Some(f) if f.bdf == bdf => Some(f),
            _ => self.get(bdf),
        }
    }
}

/// What changed for one function between two samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionRate {
    pub bdf: Bdf,
    pub source: Option<Source>,
    /// Payload MB/s (10^6 bytes per second) each way.
    pub rx_mbps: Option<f64>,
    pub tx_mbps: Option<f64>,
    pub rx_wire_mbps: Option<f64>,
    pub tx_wire_mbps: Option<f64>,
    /// Payload rate as % of the link-achievable rate (the later sample's link).
    pub rx_percent: Option<f64>,
    pub tx_percent: Option<f64>,
    /// AER counter increments (each `None` where either sample lacks the counter).
    pub aer_delta: AerCounts,
    /// Share of the interval in each link power state, where a PMU counts them.
    pub link_state_percent: Option<LinkStatePercent>,
}

/// Rates of every function present in both samples, in address order; empty when `next` is not
/// later than `prev`.
pub fn rates(prev: &Sample, next: &Sample) -> Vec<FunctionRate> {
    let Some(us) = interval_us(prev, next) else {
        return Vec::new();
    };
    next.functions
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some(rate(prev.counterpart(i, n.bdf)?, n, us)))
        .collect()
}

/// Microseconds from `prev` to `next`; `None` when `next` is not later.
pub(crate) fn interval_us(prev: &Sample, next: &Sample) -> Option<f64> {
    (next.t_ns > prev.t_ns).then(|| (next.t_ns - prev.t_ns) as f64 / 1e3)
}

/// What changed for one function from `p` to `n`, `us` microseconds later ([`rates`] for one
/// function: a caller that walks the samples itself needs no list of every function's rates).
pub(crate) fn rate(p: &FunctionSample, n: &FunctionSample, us: f64) -> FunctionRate {
    // MB/s is bytes per microsecond.
    let per_s = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?) as f64 / us);
    let same_source = match (p.traffic, n.traffic) {
        (Some(a), Some(b)) if a.source == b.source => Some((a, b)),
        _ => None,
    };
    let field =
        |get: fn(&Traffic) -> Option<u64>| same_source.and_then(|(a, b)| per_s(get(&a), get(&b)));
    let rx = field(|t| Some(t.rx_bytes));
    let tx = field(|t| Some(t.tx_bytes));
    let percent = |mbps: Option<f64>| Some(mbps? / n.achievable_mbps? * 100.0);
    let share = |a: u64, b: u64| b.saturating_sub(a) as f64 / us / 1e3 * 100.0;
    let link_state_percent = match (p.link_states, n.link_states) {
        (Some(a), Some(b)) => Some(LinkStatePercent {
            l0: share(a.l0_ns, b.l0_ns),
            l0s: share(a.l0s_ns, b.l0s_ns),
            l1: share(a.l1_ns, b.l1_ns),
        }),
        _ => None,
    };
    FunctionRate {
        bdf: n.bdf,
        source: n.traffic.map(|t| t.source),
        rx_mbps: rx,
        tx_mbps: tx,
        rx_wire_mbps: field(|t| t.rx_wire_bytes),
        tx_wire_mbps: field(|t| t.tx_wire_bytes),
        rx_percent: percent(rx),
        tx_percent: percent(tx),
        aer_delta: n.link.aer.since(&p.link.aer),
        link_state_percent,
    }
}

/// A counter made monotonic over the observer's lifetime.
#[derive(Debug, Clone, Copy)]
enum Carry {
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

/// A PMU event the kernel may time-share with others on one counter, made a full-time count:
/// each interval between reads adds its raw increment × enabled / running, perf's scaling.
#[derive(Debug, Default)]
struct Multiplexed {
    last: Reading,
    total: f64,
}

impl Multiplexed {
    /// Folds in a cumulative reading (wraps already carried) and returns the estimated total.
    fn update(&mut self, reading: &Reading) -> u64 {
        let interval = reading.since(&self.last);
        // An interval in which the event never reached the counter adds nothing.
        self.total += interval.estimate().unwrap_or(0.0);
        self.last = *reading;
        self.total as u64
    }
}

/// Where the counts come from.
enum Backend {
    /// A live sysfs (`traffic`: block/net counters under its root) or a snapshot (no
    /// counters, link facts only), read through the machine's read plan.
    Sysfs {
        plan: Arc<Mutex<ReadPlan>>,
        traffic: Option<derived::DeviceReader>,
        /// On a host: the root ports' PCIe PMU payload counters that opened.
        payload: Option<PayloadCounters>,
    },
    /// The simulator and, when a workload was given, its finished run to play back.
    /// Without a workload the run is an idle one (`sleep 0`): the machine idles from then on.
    Sim {
        machine: Box<SimulatedPcie>,
        run: Box<SimRun>,
    },
}

/// The DWC PMU events the simulated root ports' payload bytes are read from, and the bytes one
/// count stands for (the seed's driver reports 16-byte units).
const SIM_PAYLOAD_EVENTS: [(&str, Dir); 2] = [
    ("Rx_PCIe_TLP_Data_Payload", Dir::Up),
    ("Tx_PCIe_TLP_Data_Payload", Dir::Down),
];
const DWC_PAYLOAD_UNIT_BYTES: u64 = 16;

/// Produces samples of one machine; see the module documentation.
pub struct Observer {
    machine: String,
    topology: Topology,
    /// The read plan generation `topology` and `layout` were taken from.
    plan_generation: u64,
    layout: Layout,
    backend: Backend,
    /// Root ports a PCIe PMU counts.
    pmu_ports: BTreeSet<Bdf>,
    started: Instant,
    carries: BTreeMap<String, Carry>,
    /// Host PMU payload counters, scaled for the time they shared a counter: (port, Rx/Tx).
    multiplexed: BTreeMap<(Bdf, usize), Multiplexed>,
    /// Totals of devices that disappeared, per function: (up, down).
    retired: BTreeMap<Bdf, (u64, u64)>,
    warnings: Vec<String>,
    /// The link health buffer, kept between samples.
    healths: Vec<LinkHealth>,
}

impl Observer {
    /// Observes `machine`. `workload` (the argv after `--`) is allowed on `sim:` only, where it
    /// starts playing now; `read_file` reads fio job files.
    pub fn open(
        machine: &Machine,
        workload: &[String],
        read_file: impl Fn(&Path) -> Result<String>,
    ) -> Result<Observer> {
        let selector = machine.selector();
        let mut warnings = Vec::new();
        let (topology, backend, pmu_ports) = match machine.pcie_source()? {
            PcieSource::Simulated => {
                let machine = machine.simulated_pcie()?;
                let work = if workload.is_empty() {
                    workload::Workload::Sleep { ns: 0 }
                } else {
                    workload::parse(workload, read_file)?
                };
                let run = Box::new(machine.run(&work)?);
                let ports = machine.pmus().iter().filter_map(|p| p.root_port).collect();
                let topology = machine.topology.clone();
                let backend = Backend::Sim {
                    machine: Box::new(machine),
                    run,
                };
                (topology, backend, ports)
            }
            PcieSource::Listing => {
                return Err(Error::bad_input(format!(
                    "machine '{selector}' is lspci output: it has no counters or link state to \
                     observe; observe 'host', 'snapshot:DIR' or a sim: machine"
                )))
            }
            PcieSource::Sysfs { root, live: host } => {
                if !workload.is_empty() {
                    return Err(Error::bad_input(format!(
                        "a workload after `--` plays on sim: machines only; on '{selector}' run \
                         it yourself while pcielab observes"
                    )));
                }
                let plan = machine.read_plan()?;
                let topology = plan.lock().map_err(|_| poisoned())?.topology().clone();
                // A snapshot's PMUs are listed, not counted.
                let pmus = if host { discover(root)? } else { Vec::new() };
                let ports = placed_root_ports(&pmus, &topology);
                let payload = if ports.is_empty() {
                    None
                } else {
                    match open_payload_counters(root, &pmus, &topology) {
                        Ok((counters, notes)) => {
                            warnings.extend(notes.into_iter().map(|n| {
                                format!("warning: {n}; its root port shows derived traffic")
                            }));
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
                let backend = Backend::Sysfs {
                    plan,
                    traffic: host.then(|| derived::DeviceReader::new(root)),
                    payload,
                };
                (topology, backend, ports)
            }
        };
        let plan_generation = match &backend {
            Backend::Sysfs { plan, .. } => plan.lock().map_err(|_| poisoned())?.generation(),
            Backend::Sim { .. } => 0,
        };
        Ok(Observer {
            machine: selector.to_string(),
            layout: Layout::of(&topology),
            topology,
            plan_generation,
            backend,
            pmu_ports,
            started: Instant::now(),
            carries: BTreeMap::new(),
            multiplexed: BTreeMap::new(),
            retired: BTreeMap::new(),
            warnings,
            healths: Vec::new(),
        })
    }

    /// What the caller should tell the user once (stderr): PMU counters that did not open, so
    /// their ports' traffic is `derived`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The machine's topology as read at open.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// On `sim:`: the workload's simulated length (0 without one); the counts stop changing
    /// after it.
    #[cfg(test)]
    pub(crate) fn workload_ns(&self) -> Option<u64> {
        match &self.backend {
            Backend::Sim { run, .. } => Some(run.duration_ns),
            Backend::Sysfs { .. } => None,
        }
    }

    /// A sample stamped with the time since open (on `sim:`, the simulated time played to).
    pub fn sample(&mut self) -> Result<Sample> {
        let mut sample = Sample::default();
        self.sample_into(&mut sample)?;
        Ok(sample)
    }

    /// [`Observer::sample`] written over `out`, reusing its memory (a loop that keeps its
    /// oldest sample for the next one allocates nothing per function).
    pub fn sample_into(&mut self, out: &mut Sample) -> Result<()> {
        let t_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.sample_at_into(t_ns, out)
    }

    /// A sample stamped `t_ns`; on `sim:` the counts at simulated time `t_ns`.
    pub fn sample_at(&mut self, t_ns: u64) -> Result<Sample> {
        let mut sample = Sample::default();
        self.sample_at_into(t_ns, &mut sample)?;
        Ok(sample)
    }

    /// [`Observer::sample_at`] written over `out`; see [`Observer::sample_into`].
    pub fn sample_at_into(&mut self, t_ns: u64, out: &mut Sample) -> Result<()> {
        let mut healths = std::mem::take(&mut self.healths);
        let result = self
            .link_health(t_ns, &mut healths)
            .and_then(|()| self.fill(t_ns, &healths, out));
        self.healths = healths;
        result
    }

    fn fill(&mut self, t_ns: u64, healths: &[LinkHealth], out: &mut Sample) -> Result<()> {
        let (own, names, pmu_counts) = self.own_traffic(t_ns)?;
        let functions = self.topology.functions();
        // Sum each function's own bytes into every ancestor, deepest first.
        let mut summed: Vec<Option<(u64, u64)>> =
            functions.iter().map(|f| own.get(&f.bdf).copied()).collect();
        for &i in &self.layout.deepest_first {
            let (Some(bytes), Some(parent)) = (summed[i], functions[i].parent) else {
                continue;
            };
            if let Ok(p) = functions.binary_search_by_key(&parent, |f| f.bdf) {
                let (up, down) = summed[p].unwrap_or((0, 0));
                summed[p] = Some((up.saturating_add(bytes.0), down.saturating_add(bytes.1)));
            }
        }
        out.functions.truncate(functions.len());
        let judge = crate::topology::check::LinkJudge::new(&self.topology);
        for (i, ((f, derived), link)) in functions.iter().zip(summed).zip(healths).enumerate() {
            let traffic = match pmu_counts.get(&f.bdf) {
                Some(&bytes) => Some((Source::Pmu, bytes)),
                None => derived.map(|b| (Source::Derived, b)),
            }
            .map(|(source, (rx, tx))| {
                let wire = self.layout.wire[i].as_ref().map(|w| w.wire_bytes(rx, tx));
                Traffic {
                    source,
                    rx_bytes: rx,
                    tx_bytes: tx,
                    rx_wire_bytes: wire.map(|w| w.0 as u64),
                    tx_wire_bytes: wire.map(|w| w.1 as u64),
                }
            });
            let achievable_mbps = self.layout.achievable(i, f, link);
            let link_judgement = self.layout.link_ports[i]
                .and_then(|p| {
                    let now = (
                        link.current_gts.and_then(Generation::from_gt_s),
                        link.current_width.and_then(|w| u8::try_from(w).ok()),
                    );
                    judge.judge_trained(&functions[p], f, now)
                })
                .map(|j| j.name());
            let sample = FunctionSample {
                bdf: f.bdf,
                kind: f.kind,
                parent: f.parent,
                root_port: self.layout.root_ports[i],
                name: None,
                devices: Vec::new(),
                traffic,
                downgraded: link.downgraded(),
                link_down: link.down(),
                link_judgement,
                achievable_mbps,
                link: link.clone(),
                pmu: self.pmu_ports.contains(&f.bdf),
                link_states: self.link_states(f.bdf, t_ns),
            };
            let devices = names.get(&f.bdf).map_or(&[][..], Vec::as_slice);
            match out.functions.get_mut(i) {
                // The old entry's strings are kept and overwritten: no allocation when the
                // name and devices have not grown.
                Some(old) => {
                    let mut name = std::mem::take(&mut old.name);
                    let mut kept = std::mem::take(&mut old.devices);
                    match (&mut name, f.name.as_deref()) {
                        (Some(kept), Some(now)) => {
                            kept.clear();
                            kept.push_str(now);
                        }
                        (slot, now) => *slot = now.map(str::to_string),
                    }
                    kept.clear();
                    kept.extend_from_slice(devices);
                    *old = FunctionSample {
                        name,
                        devices: kept,
                        ..sample
                    };
                }
                None => out.functions.push(FunctionSample {
                    name: f.name.as_deref().map(str::to_string),
                    devices: devices.to_vec(),
                    ..sample
                }),
            }
        }
        out.machine.clone_from(&self.machine);
        out.t_ns = t_ns;
        Ok(())
    }

    /// Each function's own (device-level) bytes up and down, the device names per function, and
    /// the PMU-counted root ports' bytes, all carried.
    #[allow(clippy::type_complexity)]
    fn own_traffic(
        &mut self,
        t_ns: u64,
    ) -> Result<(
        BTreeMap<Bdf, (u64, u64)>,
        BTreeMap<Bdf, Vec<String>>,
        BTreeMap<Bdf, (u64, u64)>,
    )> {
        let mut own: BTreeMap<Bdf, (u64, u64)> = BTreeMap::new();
        let mut names: BTreeMap<Bdf, Vec<String>> = BTreeMap::new();
        let mut pmu = BTreeMap::new();
        if let Backend::Sysfs {
            payload: Some(payload),
            ..
        } = &mut self.backend
        {
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
                pmu.insert(port.root_port, (bytes[0], bytes[1]));
            }
        }
        match &mut self.backend {
            Backend::Sysfs {
                traffic: Some(reader),
                ..
            } => {
                let devices = reader.read();
                let mut seen = BTreeSet::new();
                for d in devices {
                    let key = format!("{}@{}", d.name, d.function);
                    let up = carried(&mut self.carries, format!("{key}/up"), d.up, None);
                    let down = carried(&mut self.carries, format!("{key}/down"), d.down, None);
                    seen.insert(key);
                    let entry = own.entry(d.function).or_default();
                    *entry = (entry.0.saturating_add(up), entry.1.saturating_add(down));
                    names.entry(d.function).or_default().push(d.name);
                }
                self.retire_missing(&seen);
                for (bdf, (up, down)) in &self.retired {
                    let entry = own.entry(*bdf).or_default();
                    *entry = (entry.0.saturating_add(*up), entry.1.saturating_add(*down));
                }
            }
            Backend::Sysfs { .. } => {}
            Backend::Sim { machine, run } => {
                for bdf in machine.devices.keys() {
                    let t = run.device_tally(*bdf, t_ns);
                    own.insert(
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
                        let truth = run.dwc_count(*rp, def, None, t_ns);
                        let register = truth & crate::pmu::counter::mask(bits);
                        let units = carried(
                            &mut self.carries,
                            format!("pmu/{rp}/{event}"),
                            register,
                            Some(bits),
                        );
                        bytes[i] = units.saturating_mul(DWC_PAYLOAD_UNIT_BYTES);
                    }
                    pmu.insert(*rp, (bytes[0], bytes[1]));
                }
            }
        }
        Ok((own, names, pmu))
    }

    /// Link power-state residency of a PMU-counted port up to `t_ns` (the simulator's PMU model
    /// counts it; a host's figures would need its PMU's residency events).
    fn link_states(&self, bdf: Bdf, t_ns: u64) -> Option<LinkStates> {
        match &self.backend {
            Backend::Sim { run, .. } if self.pmu_ports.contains(&bdf) => {
                let r = run.port_residency(bdf, t_ns);
                Some(LinkStates {
                    l0_ns: r.l0_ns as u64,
                    l0s_ns: r.l0s_ns as u64,
                    l1_ns: r.l1_ns as u64,
                })
            }
            _ => None,
        }
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

    /// Every function's link health, in topology order, into `out`: through the machine's
    /// read plan on sysfs (after its hotplug check; a re-plan brings a new topology), or from
    /// the spec.
    fn link_health(&mut self, t_ns: u64, out: &mut Vec<LinkHealth>) -> Result<()> {
        let plan = match &self.backend {
            Backend::Sysfs { plan, .. } => plan,
            Backend::Sim { run, .. } => {
                let functions = self.topology.functions();
                out.clear();
                out.extend(functions.iter().map(|f| sim_health(run, f, t_ns)));
                return Ok(());
            }
        };
        let mut plan = plan.lock().map_err(|_| poisoned())?;
        plan.refresh(t_ns);
        if plan.generation() != self.plan_generation {
            self.topology = plan.topology().clone();
            self.layout = Layout::of(&self.topology);
            self.plan_generation = plan.generation();
        }
        plan.read_into(out);
        Ok(())
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

/// What sampling derives from a topology once, not per sample.
struct Layout {
    /// Per function (topology order): its wire estimate, where its link is known.
    wire: Vec<Option<WireEstimate>>,
    /// Per function: the root port above it (itself for a root port).
    root_ports: Vec<Option<Bdf>>,
    /// Function indices, deepest first: the order that sums children into parents.
    deepest_first: Vec<usize>,
    /// Per function: the trained speed and width its achievable rate was last worked out for,
    /// and that rate (a link retrains rarely; the model is not run again until it does).
    achievable: Vec<Option<(Trained, Option<f64>)>>,
    /// Per function at a link's downstream end (one per device): the index of the port above.
    link_ports: Vec<Option<usize>>,
}

/// A link's trained speed (GT/s) and width.
type Trained = (Option<f64>, Option<u32>);

impl Layout {
    fn of(topology: &Topology) -> Layout {
        let functions = topology.functions();
        let mut deepest_first: Vec<usize> = (0..functions.len()).collect();
        deepest_first
            .sort_by_key(|&i| std::cmp::Reverse(topology.path_to_root(functions[i].bdf).len()));
        Layout {
            wire: functions
                .iter()
                .map(|f| Some(WireEstimate::for_link(&f.link_params()?)))
                .collect(),
            root_ports: functions
                .iter()
                .map(|f| {
                    topology
                        .path_to_root(f.bdf)
                        .iter()
                        .find(|a| a.kind == Kind::RootPort)
                        .map(|a| a.bdf)
                })
                .collect(),
            achievable: vec![None; functions.len()],
            link_ports: {
                let mut ports = vec![None; functions.len()];
                let index = |bdf| {
                    functions
                        .binary_search_by_key(&bdf, |f: &Function| f.bdf)
                        .ok()
                };
                for (port, f) in crate::topology::check::LinkJudge::new(topology).links() {
                    if let Some(i) = index(f.bdf) {
                        ports[i] = index(port.bdf);
                    }
                }
                ports
            },
            deepest_first,
        }
    }

    /// [`achievable`] for function `i`, `f`, from the memo when its link is trained as before.
    fn achievable(&mut self, i: usize, f: &Function, link: &LinkHealth) -> Option<f64> {
        let trained = (link.current_gts, link.current_width);
        match self.achievable[i] {
            Some((was, mbps)) if was == trained => mbps,
            _ => {
                let mbps = achievable(f, link);
                self.achievable[i] = Some((trained, mbps));
                mbps
            }
        }
    }
}

fn poisoned() -> Error {
    Error::runtime("an observer panicked while holding the machine's read plan")
}

/// The carried value of counter `key` after reading `raw` (`bits`: a register of that width).
fn carried(carries: &mut BTreeMap<String, Carry>, key: String, raw: u64, bits: Option<u32>) -> u64 {
    carries
        .entry(key)
        .or_insert_with(|| match bits {
            Some(bits) => Carry::Register(WrapCarry::new(bits)),
            None => Carry::Restartable { last: 0, total: 0 },
        })
        .update(raw)
}

fn sim_payload_event(name: &str) -> Result<&'static EventDef> {
    Family::DwcRootPort
        .find(name)
        .ok_or_else(|| Error::runtime(format!("the DWC catalog has no event {name}")))
}

/// The payload MB/s `f`'s link can achieve at the speed and width `link` reports now.
fn achievable(f: &Function, link: &LinkHealth) -> Option<f64> {
    let gen = Generation::from_gt_s(link.current_gts?)?;
    let width = u8::try_from(link.current_width?).ok().filter(|w| *w > 0)?;
    Some(achievable_mbps(&LinkParams {
        mps: f.mps.map_or(128, u32::from),
        mrrs: f.mrrs.map_or(512, u32::from),
        ..LinkParams::new(gen, width)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::sim::workload::Summary;
    use std::fs;
    use std::os::unix::fs::symlink;
    use std::path::PathBuf;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|s| s.to_string()).collect()
    }

    fn no_files(p: &Path) -> Result<String> {
        Err(Error::bad_input(format!(
            "unexpected read of {}",
            p.display()
        )))
    }

    fn rate_of(rates: &[FunctionRate], at: &str) -> FunctionRate {
        rates.iter().find(|r| r.bdf == bdf(at)).unwrap().clone()
    }

    #[test]
    fn a_simulated_read_plays_at_the_rate_fio_reports() {
        let machine: Machine = "sim:yitian710".parse().unwrap();
        let job = argv(&[
            "fio",
            "--filename=/dev/sda",
            "--rw=read",
            "--bs=1m",
            "--time_based",
            "--runtime=10",
            "--name=r",
        ]);
        let mut observer = Observer::open(&machine, &job, no_files).unwrap();
        // fio's runtime, plus the I/Os in flight at its end.
        let length = observer.workload_ns().unwrap();
        assert!(
            (10_000_000_000..10_010_000_000).contains(&length),
            "{length}"
        );
        let Backend::Sim { run, .. } = &observer.backend else {
            panic!("no simulated run");
        };
        let Summary::Fio { groups } = &run.summary else {
            panic!("not fio");
        };
        let fio_mbps = groups[0].read.as_ref().unwrap().bw_bytes as f64 / 1e6;
        let a = observer.sample_at(2_000_000_000).unwrap();
        let b = observer.sample_at(5_000_000_000).unwrap();
        let port = b.get(bdf("00:02.0")).unwrap();
        assert!(port.pmu);
        assert_eq!(port.traffic.unwrap().source, Source::Pmu);
        let r = rates(&a, &b);
        let rp = rate_of(&r, "00:02.0");
        let rx = rp.rx_mbps.unwrap();
        assert!((rx / fio_mbps - 1.0).abs() < 0.01, "{rx} vs fio {fio_mbps}");
        // Reads send almost nothing down (the controller's descriptor and command fetches).
        assert!(rp.tx_mbps.unwrap() < rx * 0.01);
        // The disk's own bytes are derived; they agree with the port's PMU.
        let sata = rate_of(&r, "04:00.0");
        assert_eq!(sata.source, Some(Source::Derived));
        assert!((sata.rx_mbps.unwrap() / rx - 1.0).abs() < 0.01);
        // Gen2 x2, MPS 256: achievable = 1000 MB/s x 256/276 (12 B header, 8 B framing) less SKP.
        let achievable = 1000.0 * 256.0 / 276.0 * 1538.0 / 1542.0;
        assert!((port.achievable_mbps.unwrap() - achievable).abs() < 0.01);
        assert!((rp.rx_percent.unwrap() - rx / achievable * 100.0).abs() < 1e-9);
        // Wire bytes carry the headers and framing: 276/256 of the payload each way up.
        let wire = rp.rx_wire_mbps.unwrap();
        assert!((wire / rx - 276.0 / 256.0).abs() < 0.01, "{wire} vs {rx}");
        // An empty port's link is down; the SATA port trained to what both ends can do.
        assert!(b.get(bdf("00:03.0")).unwrap().link_down);
        assert!(b.get(bdf("00:02.0")).unwrap().downgraded);
        // After the workload the counts stay at its totals.
        let end = observer.sample_at(20_000_000_000).unwrap();
        let later = observer.sample_at(30_000_000_000).unwrap();
        assert_eq!(
            end.get(bdf("00:02.0")).unwrap().traffic,
            later.get(bdf("00:02.0")).unwrap().traffic
        );
    }

    #[test]
    fn an_idle_aspm_port_spends_its_time_in_l1() {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("l1.toml");
        std::fs::write(
            &spec,
            "name = \"l1\"\n[[function]]\nbdf = \"0000:00:00.0\"\nkind = \"root_port\"\n\
             vendor = 0x1ded\ndevice_id = 0x8000\nclass = 0x060400\n\
             link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }\naspm = \"l1\"\n",
        )
        .unwrap();
        let machine = format!("sim:{}", spec.display())
            .parse::<Machine>()
            .unwrap();
        let mut observer = Observer::open(&machine, &[], no_files).unwrap();
        let a = observer.sample_at(1_000_000_000).unwrap();
        let b = observer.sample_at(3_000_000_000).unwrap();
        let states = b.get(bdf("00:00.0")).unwrap().link_states.unwrap();
        // Idle from 0: L0 for the L1 entry time (32 us by default), L1 ever after.
        assert_eq!(states.l0_ns, 32_000);
        assert_eq!(states.l1_ns, 3_000_000_000 - 32_000);
        let p = rates(&a, &b)[0].link_state_percent.unwrap();
        assert!((p.l1 - 100.0).abs() < 1e-9 && p.l0 == 0.0, "{p:?}");
        // yitian710's ports run without ASPM: all L0.
        let yitian: Machine = "sim:yitian710".parse().unwrap();
        let mut observer = Observer::open(&yitian, &[], no_files).unwrap();
        let s = observer.sample_at(1_000_000_000).unwrap();
        let states = s.get(bdf("00:02.0")).unwrap().link_states.unwrap();
        assert_eq!((states.l0_ns, states.l1_ns), (1_000_000_000, 0));
        assert_eq!(s.get(bdf("04:00.0")).unwrap().link_states, None);
    }

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
    fn workloads_play_on_sim_only() {
        let host = "host".parse::<Machine>().unwrap();
        let err = Observer::open(&host, &argv(&["sleep", "1"]), no_files)
            .err()
            .unwrap();
        assert_eq!(err.exit_code(), 2);
        assert!(err.message().contains("sim:"), "{err}");
        let sim: Machine = "sim:yitian710".parse().unwrap();
        let err = Observer::open(&sim, &argv(&["dd", "if=/dev/zero"]), no_files)
            .err()
            .unwrap();
        assert_eq!(err.exit_code(), 2);
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

    /// qemu-seed exported as a live sysfs under a temporary root, with block and net devices.
    struct Fixture {
        root: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            let root = tempfile::tempdir().unwrap();
            let spec = crate::machine::read_spec("qemu-seed").unwrap();
            crate::topology::export::export_sysfs(&spec.topology, &root.path().join("sys/bus/pci"))
                .unwrap();
            let f = Fixture { root };
            f.disk("nvme0n1", "0000:00:03.0", 0, 0);
            f.disk("nvme1n1", "0000:03:00.0", 0, 0);
            f.net("eth0", "0000:04:00.0", 0, 0);
            fs::create_dir_all(f.root.path().join("sys/devices/virtual/block/loop0")).unwrap();
            symlink(
                "../devices/virtual/block/loop0",
                f.root.path().join("sys/block/loop0"),
            )
            .unwrap();
            f.set_loop(4096);
            f
        }

        fn device_dir(&self, function: &str) -> PathBuf {
            fs::canonicalize(self.root.path().join("sys/bus/pci/devices").join(function)).unwrap()
        }

        fn disk(&self, name: &str, function: &str, read: u64, written: u64) {
            let dir = self.device_dir(function).join("nvme").join(name);
            fs::create_dir_all(&dir).unwrap();
            let link = self.root.path().join("sys/block").join(name);
            if link.symlink_metadata().is_err() {
                fs::create_dir_all(self.root.path().join("sys/block")).unwrap();
                symlink(&dir, &link).unwrap();
            }
            fs::write(
                dir.join("stat"),
                format!("1 0 {} 0 1 0 {} 0 0 0 0\n", read / 512, written / 512),
            )
            .unwrap();
        }

        fn net(&self, name: &str, function: &str, rx: u64, tx: u64) {
            let dir = self.device_dir(function).join("net").join(name);
            fs::create_dir_all(dir.join("statistics")).unwrap();
            let link = self.root.path().join("sys/class/net").join(name);
            if link.symlink_metadata().is_err() {
                fs::create_dir_all(self.root.path().join("sys/class/net")).unwrap();
                symlink(&dir, &link).unwrap();
            }
            fs::write(dir.join("statistics/rx_bytes"), format!("{rx}\n")).unwrap();
            fs::write(dir.join("statistics/tx_bytes"), format!("{tx}\n")).unwrap();
        }

        fn set_loop(&self, sectors: u64) {
            fs::write(
                self.root
                    .path()
                    .join("sys/devices/virtual/block/loop0/stat"),
                format!("1 0 {sectors} 0 1 0 {sectors} 0\n"),
            )
            .unwrap();
        }

        fn observer(&self) -> Observer {
            let host = Machine::host_at(self.root.path().to_path_buf());
            Observer::open(&host, &[], no_files).unwrap()
        }
    }

    fn bytes(sample: &Sample, at: &str) -> Option<(u64, u64)> {
        let t = sample.get(bdf(at)).unwrap().traffic?;
        assert_eq!(t.source, Source::Derived);
        Some((t.rx_bytes, t.tx_bytes))
    }

    #[test]
    fn derived_bytes_sum_up_the_tree_to_switch_and_root_ports() {
        let fx = Fixture::new();
        let mut observer = fx.observer();
        let first = observer.sample_at(0).unwrap();
        assert_eq!(bytes(&first, "00:04.0"), Some((0, 0)));
        fx.disk("nvme1n1", "0000:03:00.0", 8 << 20, 1 << 20);
        fx.net("eth0", "0000:04:00.0", 3000, 700);
        fx.disk("nvme0n1", "0000:00:03.0", 512, 0);
        fx.set_loop(1 << 30); // a loop device belongs to no function
        let s = observer.sample_at(1_000_000_000).unwrap();
        let nvme1 = (8 << 20, 1 << 20);
        let nic = (3000, 700);
        assert_eq!(bytes(&s, "03:00.0"), Some(nvme1));
        assert_eq!(bytes(&s, "04:00.0"), Some(nic));
        // Each downstream port carries its own device; upstream and root port carry both.
        assert_eq!(bytes(&s, "02:00.0"), Some(nvme1));
        assert_eq!(bytes(&s, "02:01.0"), Some(nic));
        let both = (nvme1.0 + nic.0, nvme1.1 + nic.1);
        assert_eq!(bytes(&s, "01:00.0"), Some(both));
        assert_eq!(bytes(&s, "00:04.0"), Some(both));
        // The integrated NVMe is on the root bus: its own bytes, nobody above it.
        assert_eq!(bytes(&s, "00:03.0"), Some((512, 0)));
        assert_eq!(s.get(bdf("00:00.0")).unwrap().traffic, None);
        assert_eq!(
            s.get(bdf("03:00.0")).unwrap().devices,
            vec!["block/nvme1n1"]
        );
        let r = rates(&first, &s);
        let rp = rate_of(&r, "00:04.0");
        assert!((rp.rx_mbps.unwrap() - both.0 as f64 / 1e6).abs() < 1e-9);
        // QEMU's links: 2.5 GT/s x1, MPS 128.
        let achievable = 250.0 * 128.0 / 148.0 * 1538.0 / 1542.0;
        assert!(
            (s.get(bdf("00:04.0")).unwrap().achievable_mbps.unwrap() - achievable).abs() < 1e-6
        );

        // The NIC's driver restarts its counters and the disk vanishes: totals never go back.
        fx.net("eth0", "0000:04:00.0", 100, 0);
        fs::remove_file(fx.root.path().join("sys/block/nvme1n1")).unwrap();
        let s2 = observer.sample_at(2_000_000_000).unwrap();
        assert_eq!(bytes(&s2, "04:00.0"), Some((3100, 700)));
        assert_eq!(bytes(&s2, "00:04.0"), Some((nvme1.0 + 3100, nvme1.1 + 700)));
        assert_eq!(bytes(&s2, "03:00.0"), Some(nvme1));
    }

    #[test]
    fn a_snapshot_has_link_facts_and_no_traffic() {
        let fx = Fixture::new();
        let snapshot = format!("snapshot:{}", fx.root.path().join("sys/bus/pci").display())
            .parse::<Machine>()
            .unwrap();
        let mut observer = Observer::open(&snapshot, &[], no_files).unwrap();
        let s = observer.sample_at(0).unwrap();
        let rp = s.get(bdf("00:04.0")).unwrap();
        assert_eq!(rp.traffic, None);
        assert_eq!(rp.link.capable_gts, Some(16.0));
        assert_eq!(rp.link.current_width, Some(1));
        assert!(rp.downgraded);
    }
}
