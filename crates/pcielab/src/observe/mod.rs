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
//!   network interfaces at or below the function (`machine::derived`). `None` where neither exists (a
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
//! that exist; the link capability was read once. [`Observer::health_every`] reads health at
//! most once per interval of sample time (`top` with a delay under a second), the samples
//! between repeating the last read. Every `crate::topology::readplan::REDISCOVER_NS`
//! of sample time, or after a planned file failed to read, the `devices/` listing is compared
//! with the plan, and a function that came or went brings a new topology into the samples.
//! Block and network devices are mapped to their functions once per device name
//! (`machine::derived::DeviceReader`).
//!
//! # Time
//! [`Observer::sample`] stamps each sample with the time since the observer opened. On `sim:`
//! that instant *is* the simulated time: a workload given at open plays in real time (counts at
//! wall time t are the simulator's at simulated time t; after the workload ends they stay at its
//! totals). [`Observer::sample_at`] takes the instant explicitly (tests, a paused view).
//! On a host or snapshot the counters are read when called, whatever the stamp.

pub mod cost;
pub mod exporter;
pub mod top;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::Result;
use crate::machine::traffic::{OwnTraffic, TrafficSampler};
use crate::machine::Machine;
use crate::model::transfer::{achievable_mbps, LinkParams, WireEstimate};
use crate::pcie::{Bdf, Generation};
use crate::topology::health::{AerCounts, LinkHealth};
use crate::topology::readplan::Trained;
use crate::topology::{Function, Kind, Topology};

pub use crate::machine::traffic::LinkStates;

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
    pub(crate) fn name(self) -> &'static str {
        match self {
            Source::Pmu => "pmu",
            Source::Derived => "derived",
        }
    }
}

/// Cumulative traffic of one function.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Traffic {
    /// Where the bytes were counted (a PMU, a device counter, the simulator).
    pub source: Source,
    /// Payload bytes toward the root complex (the root port's Rx).
    pub(crate) rx_bytes: u64,
    /// Payload bytes away from it (the root port's Tx).
    pub(crate) tx_bytes: u64,
    /// Estimated bytes on the wire each way; `None` when the function reports no trained link.
    pub(crate) rx_wire_bytes: Option<u64>,
    pub(crate) tx_wire_bytes: Option<u64>,
}

/// Share of an interval a link spent in each power state, in %.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct LinkStatePercent {
    pub(crate) l0: f64,
    pub(crate) l0s: f64,
    pub(crate) l1: f64,
}

/// One function at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FunctionSample {
    pub(crate) bdf: Bdf,
    pub(crate) kind: Kind,
    pub(crate) parent: Option<Bdf>,
    /// The root port above the function (itself for a root port); `None` on a root bus.
    pub(crate) root_port: Option<Bdf>,
    pub(crate) name: Option<String>,
    /// The block devices and network interfaces that belong to this function itself.
    pub(crate) devices: Vec<String>,
    /// The function's cumulative traffic, where something counts it.
    pub traffic: Option<Traffic>,
    pub(crate) link: LinkHealth,
    pub(crate) downgraded: bool,
    pub(crate) link_down: bool,
    /// The link above this function judged as `topo` and `advise` judge it, at the link's
    /// downstream end (one function per device) with its trained speed and width as read now:
    /// full, slot-limited, power-managed-idle, downtrained or failed; `None` elsewhere or
    /// where the link is not known well enough to judge.
    pub(crate) link_judgement: Option<&'static str>,
    /// A PCIe PMU counts this root port's traffic.
    pub pmu: bool,
    /// Link power-state residency, where a PMU counts it.
    pub(crate) link_states: Option<LinkStates>,
    /// Link-achievable payload MB/s per direction at the current speed and width.
    pub(crate) achievable_mbps: Option<f64>,
}

/// Every function of the machine at one instant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Sample {
    /// The `--machine` selector, as given.
    pub(crate) machine: String,
    /// Nanoseconds since the observer opened.
    pub(crate) t_ns: u64,
    /// In address order.
    pub(crate) functions: Vec<FunctionSample>,
    /// Which list of functions `functions` is: one non-zero number for every sample an observer
    /// takes between two re-plans, so a reader keeping tables by function index (`top`'s tree)
    /// knows them valid without comparing every function; 0 when not known.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) layout: u64,
    /// The functions (indices, ascending) whose records can differ from those of another
    /// sample of the same `layout`: those whose link health or link states can differ (as the
    /// machine's sampler says), and those with traffic or devices in this sample; `None`: any
    /// function's can.
    /// Two samples of one layout differ only at functions in either's list, so a reader that
    /// kept what it made of one (`top`'s rows) makes again only those for the other.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) varying: Option<Vec<usize>>,
}

impl Sample {
    /// The sample of function `bdf`, if the machine has it.
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
    /// The function.
    pub bdf: Bdf,
    pub(crate) source: Option<Source>,
    /// Payload MB/s (10^6 bytes per second) each way.
    pub rx_mbps: Option<f64>,
    /// Payload MB/s away from the root complex (the root port's Tx).
    pub tx_mbps: Option<f64>,
    pub(crate) rx_wire_mbps: Option<f64>,
    pub(crate) tx_wire_mbps: Option<f64>,
    /// Payload rate as % of the link-achievable rate (the later sample's link).
    pub rx_percent: Option<f64>,
    pub(crate) tx_percent: Option<f64>,
    /// AER counter increments (each `None` where either sample lacks the counter).
    pub(crate) aer_delta: AerCounts,
    /// Share of the interval in each link power state, where a PMU counts them.
    pub(crate) link_state_percent: Option<LinkStatePercent>,
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

/// Produces samples of one machine; see the module documentation.
pub struct Observer {
    machine: String,
    /// The sampler's: on sysfs, the read plan's own (shared, not copied).
    topology: Arc<Topology>,
    layout: Layout,
    /// The machine's figures, read through its access method.
    sampler: Box<dyn TrafficSampler>,
    /// Root ports a PCIe PMU counts.
    pmu_ports: BTreeSet<Bdf>,
    started: Instant,
    warnings: Vec<String>,
    /// The link health buffer, kept between samples.
    healths: Vec<LinkHealth>,
    /// Link health is read again once this much sample time has passed since its last read.
    health_every_ns: u64,
    /// The sample time of the last health read.
    health_read_ns: Option<u64>,
}

impl Observer {
    /// Observes `machine`. `workload` (the argv after `--`) is allowed on `sim:` only, where it
    /// starts playing now; `read_file` reads fio job files.
    pub fn open(
        machine: &Machine,
        workload: &[String],
        read_file: impl Fn(&Path) -> Result<String>,
    ) -> Result<Observer> {
        let sampler = machine.traffic_sampler(workload, read_file)?;
        let topology = Arc::clone(sampler.topology());
        Ok(Observer {
            machine: machine.selector().to_string(),
            layout: Layout::of(&topology),
            topology,
            pmu_ports: sampler.pmu_ports().clone(),
            warnings: sampler.warnings().to_vec(),
            sampler,
            started: Instant::now(),
            healths: Vec::new(),
            health_every_ns: 0,
            health_read_ns: None,
        })
    }

    /// Reads link health (trained speed and width, AER counters) at most once per `interval`
    /// of sample time; the samples in between repeat the last read, while traffic is read at
    /// every sample. By default health is read at every sample. Worth it where samples come
    /// faster than links retrain: on a big host the trained state is most of what a sample
    /// reads (two sysfs attributes per link, each a config-space read on a live host).
    pub fn health_every(&mut self, interval: Duration) {
        self.health_every_ns = u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX);
    }

    /// What the caller should tell the user once (stderr): PMU counters that did not open, so
    /// their ports' traffic is `derived`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// On `sim:`: the workload's simulated length (0 without one); the counts stop changing
    /// after it.
    #[cfg(test)]
    pub(crate) fn workload_ns(&self) -> Option<u64> {
        self.sampler.workload_ns()
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
        let OwnTraffic {
            devices: own,
            names,
            pmu: pmu_counts,
        } = self.sampler.own_traffic(t_ns)?;
        let functions = self.topology.functions();
        // What a sample repeats of each function comes from the layout's compact list: a big
        // host's `Function`s are looked at only when something about them is worked out again.
        let identities = &self.layout.identities;
        let index = |bdf: &Bdf| identities.binary_search_by_key(bdf, |f| f.bdf).ok();
        // Each function's own bytes summed into it and every ancestor: only the functions with
        // traffic at or below them are visited.
        let mut summed: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
        for (bdf, &(up, down)) in &own {
            let mut at = index(bdf);
            while let Some(i) = at {
                let sum = summed.entry(i).or_insert((0, 0));
                *sum = (sum.0.saturating_add(up), sum.1.saturating_add(down));
                at = self.layout.parents[i];
            }
        }
        let varying = self.sampler.varying().map(|health| {
            let mut varying: Vec<usize> = health
                .iter()
                .copied()
                .chain(summed.keys().copied())
                .chain(pmu_counts.keys().filter_map(index))
                .chain(names.keys().filter_map(index))
                .collect();
            varying.sort_unstable();
            varying.dedup();
            varying
        });
        // The sample written over holds these functions' names already when it was taken from
        // this layout, and every record but those that can vary between two of its samples.
        let named = out.layout == self.layout.id && out.functions.len() == identities.len();
        let only = match (named, &out.varying, &varying) {
            (true, Some(was), Some(now)) => Some(union(was, now)),
            _ => None,
        };
        let mut all = 0..identities.len();
        let mut listed = only.iter().flatten().copied();
        let written: &mut dyn Iterator<Item = usize> = if only.is_some() {
            &mut listed
        } else {
            &mut all
        };
        out.functions.truncate(identities.len());
        let judge = crate::topology::check::LinkJudge::new(&self.topology);
        for i in written {
            let (Some(f), Some(link)) = (identities.get(i), healths.get(i)) else {
                break;
            };
            let traffic = match pmu_counts.get(&f.bdf) {
                Some(&bytes) => Some((Source::Pmu, bytes)),
                None => summed.get(&i).map(|&b| (Source::Derived, b)),
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
            let achievable_mbps = memoized(&mut self.layout.achievable, i, link, || {
                achievable(&functions[i], link)
            });
            let link_judgement = self.layout.link_ports[i].and_then(|p| {
                memoized(&mut self.layout.judgements, i, link, || {
                    let now = (
                        link.current_gts.and_then(Generation::from_gt_s),
                        link.current_width.and_then(|w| u8::try_from(w).ok()),
                    );
                    judge
                        .judge_trained(&functions[p], &functions[i], now)
                        .map(|j| j.name())
                })
            });
            let link_states = self.sampler.link_states(f.bdf, t_ns);
            let pmu = self.pmu_ports.contains(&f.bdf);
            let devices = names.get(&f.bdf).map_or(&[][..], Vec::as_slice);
            match out.functions.get_mut(i) {
                // A sample of this layout holds this function's address, kind, parents and
                // name already: only what a sample reads is written, in place (no function
                // record is built and moved, and no string is allocated while the device
                // list has not grown).
                Some(old) if named => {
                    old.traffic = traffic;
                    old.downgraded = link.downgraded();
                    old.link_down = link.down();
                    old.link_judgement = link_judgement;
                    old.achievable_mbps = achievable_mbps;
                    old.link.clone_from(link);
                    old.pmu = pmu;
                    old.link_states = link_states;
                    if old.devices != devices {
                        old.devices.clear();
                        old.devices.extend_from_slice(devices);
                    }
                }
                slot => {
                    let sample = FunctionSample {
                        bdf: f.bdf,
                        kind: f.kind,
                        parent: f.parent,
                        root_port: self.layout.root_ports[i],
                        name: functions[i].name.as_deref().map(str::to_string),
                        devices: devices.to_vec(),
                        traffic,
                        downgraded: link.downgraded(),
                        link_down: link.down(),
                        link_judgement,
                        achievable_mbps,
                        link: link.clone(),
                        pmu,
                        link_states,
                    };
                    match slot {
                        Some(old) => *old = sample,
                        None => out.functions.push(sample),
                    }
                }
            }
        }
        out.machine.clone_from(&self.machine);
        out.t_ns = t_ns;
        out.layout = self.layout.id;
        out.varying = varying;
        Ok(())
    }

    /// Every function's link health, in topology order, into `out`, unless the last read is
    /// less than [`Observer::health_every`]'s interval old (`out` then holds it still); a
    /// machine whose functions came or went brings its new topology into the samples.
    fn link_health(&mut self, t_ns: u64, out: &mut Vec<LinkHealth>) -> Result<()> {
        let due = self
            .health_read_ns
            .is_none_or(|last| t_ns < last || t_ns - last >= self.health_every_ns);
        if !due {
            return Ok(());
        }
        if let Some(topology) = self.sampler.link_health(t_ns, out)? {
            self.layout = Layout::of(&topology);
            self.topology = topology;
        }
        self.health_read_ns = Some(t_ns);
        Ok(())
    }
}

/// What sampling derives from a topology once, not per sample.
struct Layout {
    /// Unique in the process: [`Sample::layout`].
    id: u64,
    /// Per function (topology order): what every sample repeats of it.
    identities: Vec<Identity>,
    /// Per function (topology order): its wire estimate, where its link is known.
    wire: Vec<Option<WireEstimate>>,
    /// Per function: the root port above it (itself for a root port).
    root_ports: Vec<Option<Bdf>>,
    /// Per function: its parent's index.
    parents: Vec<Option<usize>>,
    /// Per function: the trained speed and width its achievable rate was last worked out for,
    /// and that rate (a link retrains rarely; the model is not run again until it does).
    achievable: Vec<Option<(Trained, Option<f64>)>>,
    /// Per function at a link's downstream end (one per device): the index of the port above.
    link_ports: Vec<Option<usize>>,
    /// Per such function: the trained speed and width its link was last judged at, and the
    /// judgement (the topology's facts are fixed until a re-plan; only the training moves).
    judgements: Vec<Option<(Trained, Option<&'static str>)>>,
}

/// A function's address, kind and parent, kept apart from its `Function` (hundreds of bytes of
/// decoded registers) so a sample reads 16 bytes per function, not the whole record.
struct Identity {
    bdf: Bdf,
    kind: Kind,
    parent: Option<Bdf>,
}

impl Layout {
    fn of(topology: &Topology) -> Layout {
        let functions = topology.functions();
        let index = |bdf| {
            functions
                .binary_search_by_key(&bdf, |f: &Function| f.bdf)
                .ok()
        };
        // Starts at 1: 0 is a sample's "not known".
        static LAYOUTS: AtomicU64 = AtomicU64::new(1);
        Layout {
            id: LAYOUTS.fetch_add(1, Ordering::Relaxed),
            identities: functions
                .iter()
                .map(|f| Identity {
                    bdf: f.bdf,
                    kind: f.kind,
                    parent: f.parent,
                })
                .collect(),
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
            judgements: vec![None; functions.len()],
            link_ports: {
                let mut ports = vec![None; functions.len()];
                for (port, f) in crate::topology::check::LinkJudge::new(topology).links() {
                    if let Some(i) = index(f.bdf) {
                        ports[i] = index(port.bdf);
                    }
                }
                ports
            },
            parents: functions.iter().map(|f| f.parent.and_then(index)).collect(),
        }
    }
}

/// What `work` gives for function `i`'s link as `link` finds it trained: from `memo` when the
/// link was trained the same at the last call, else worked out and kept (a link retrains
/// rarely; the model and the judgement are not run again until it does).
fn memoized<T: Copy>(
    memo: &mut [Option<(Trained, T)>],
    i: usize,
    link: &LinkHealth,
    work: impl FnOnce() -> T,
) -> T {
    let trained = (link.current_gts, link.current_width);
    match memo[i] {
        Some((was, value)) if was == trained => value,
        _ => {
            let value = work();
            memo[i] = Some((trained, value));
            value
        }
    }
}

/// The indices in either ascending list, ascending, once each.
pub(crate) fn union(a: &[usize], b: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (a.iter().peekable(), b.iter().peekable());
    loop {
        let next = match (x.peek(), y.peek()) {
            (Some(&&p), Some(&&q)) if p < q => x.next(),
            (Some(&&p), Some(&&q)) if q < p => y.next(),
            (Some(_), Some(_)) => {
                y.next();
                x.next()
            }
            (Some(_), None) => x.next(),
            (None, Some(_)) => y.next(),
            (None, None) => break,
        };
        out.extend(next.copied());
    }
    out
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
mod tests;
