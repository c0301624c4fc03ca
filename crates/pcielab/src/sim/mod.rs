//! The simulator: runs workloads (fio-compatible jobs, endpoint DMA sweeps, NIC loads, idle
//! windows) over a [`Topology`] with a simulated clock and exposes what the root ports' PMUs
//! would count. This file owns the simulated machine (devices, paths, link parameters) and
//! turns workloads into flows for the [`engine`], recording each flow's progress and TLP
//! bundles; `counters` derives every PMU event from that record.

pub(crate) mod config;
pub(crate) mod counters;
pub(crate) mod device;
mod emission;
pub(crate) mod engine;
pub(crate) mod fio;
pub(crate) mod stat;
#[cfg(test)]
mod tests;
pub(crate) mod tlp;
pub(crate) mod workload;

pub use config::SimConfig;
pub use counters::SimBackend;
pub use device::{Ahci, Device, Nic, Nvme};
pub use fio::{DirectionStats, GroupStats, JobSet};
pub use workload::{parse as parse_workload, DmaRow, DmaTest, NetRow, NetTest, Summary, Workload};

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::model::io::{LinkPower, RequestResponse};
use crate::model::latency::ReadConcurrency;
use crate::model::platform::{PlatformModel, P};
use crate::model::transfer::{CompletionSize, LinkParams, Overheads};
use crate::pcie::dllp::DLLP_WIRE_BYTES;
use crate::pcie::tlp::TlpFormat;
use crate::pcie::{Bdf, Generation};
use crate::pmu::{bound_root_port_pmus, PmuDevice};
use crate::topology::{Aspm, Kind as FnKind, Topology};
use device::BlockDevice;
use emission::Emission;
use engine::{Demand, FlowSpec, Progress};
use tlp::{Bundle, Dir};
use workload::DmaDirection;

/// Default MPS/MRRS where the topology does not say.
const DEFAULT_MPS: u32 = 128;
const DEFAULT_MRRS: u32 = 512;
/// Read requests (tags) a block device keeps outstanding.
const BLOCK_READ_TAGS: u32 = 32;

/// A simulated PCIe machine: its topology, its devices and its `[sim]` settings (resctrl is `qos::sim::SimulatedResctrl`).
#[derive(Debug, Clone)]
pub struct SimulatedPcie {
    pub(crate) name: String,
    /// The machine's PCIe tree.
    pub topology: Topology,
    /// The spec's `[sim]` table: clocks, noise, PMU behaviour.
    pub config: SimConfig,
    /// The platform model beyond the link (`[platform]`): root-complex latency, CPU cost per
    /// I/O, DMA engine. The same parameters `pcielab model --platform` predicts with.
    pub platform: PlatformModel,
    /// The simulated devices, by function.
    pub devices: BTreeMap<Bdf, Device>,
}

/// One flow's TLP stream in one direction of I/O (a job's reads or its writes).
#[derive(Debug, Clone)]
struct Stream {
    progress: usize,
    bundle: Bundle,
    /// When its TLPs cross the link.
    emission: Emission,
    ios: u64,
    /// A disk read (data DMA-written to memory) rather than a write.
    read: bool,
    /// The function whose I/O this is.
    device: Bdf,
    root_port: Option<Bdf>,
}

/// A root port's link as the counters see it.
#[derive(Debug, Clone, PartialEq)]
struct PortState {
    aspm: Aspm,
    generation: Option<Generation>,
    width: u8,
    /// Merged intervals (ns) with traffic on the link.
    busy: Vec<(f64, f64)>,
}

/// A finished simulation: the workload's results and a clock-indexed view of every counter.
#[derive(Debug, Clone)]
pub struct SimRun {
    /// Simulated time the run took (ns).
    pub duration_ns: u64,
    /// What the workload reports, as its real tool would.
    pub summary: Summary,
    streams: Vec<Stream>,
    ports: BTreeMap<Bdf, PortState>,
    config: SimConfig,
}

impl SimulatedPcie {
    /// Builds the machine; device parameters come from each function's `params`, platform
    /// settings from the spec's `[sim]` table.
    pub fn new(
        name: impl Into<String>,
        topology: Topology,
        sim: &toml::Table,
        platform: &toml::Table,
    ) -> Result<SimulatedPcie> {
        let name = name.into();
        let platform = PlatformModel::from_table(&name, platform)?;
        let sim: BTreeMap<String, toml::Value> =
            sim.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let config = SimConfig::from_table(Some(&sim))?;
        let mut devices = BTreeMap::new();
        for f in topology.functions() {
            if let Some(d) = Device::from_function(f, &platform)? {
                devices.insert(f.bdf, d);
            }
        }
        Ok(SimulatedPcie {
            name,
            topology,
            config,
            platform,
            devices,
        })
    }

    /// One DesignWare PMU per root port a kernel binds one to (none on Rockchip's).
    pub fn pmus(&self) -> Vec<PmuDevice> {
        bound_root_port_pmus(&self.topology)
    }

    /// The root port above `device` (itself if it is one).
    pub(crate) fn root_port(&self, device: Bdf) -> Option<Bdf> {
        self.topology
            .path_to_root(device)
            .iter()
            .find(|f| f.kind == FnKind::RootPort)
            .map(|f| f.bdf)
    }

    /// The links between `device` and its root port, each named by its downstream end.
    fn path_links(&self, device: Bdf) -> Vec<Bdf> {
        let path = self.topology.path_to_root(device);
        let mut links: Vec<Bdf> = path
            .iter()
            .filter(|f| {
                f.link
                    .is_some_and(|l| l.speed.is_some() && l.width.is_some_and(|w| w > 0))
                    && !matches!(f.kind, FnKind::RootPort | FnKind::SwitchDownstream)
                    && f.parent.is_some()
            })
            .map(|f| f.bdf)
            .collect();
        if links.is_empty() {
            if let Some(rp) = self.root_port(device) {
                links.push(rp);
            }
        }
        links
    }

    /// Usable bytes per ns per direction of the link named by `at` (after line encoding and
    /// SKP ordered sets).
    fn link_capacity(&self, at: Bdf) -> f64 {
        self.topology
            .get(at)
            .and_then(|f| f.link_params())
            .map_or(f64::INFINITY, |l| l.capacity_mbps(Overheads::Full) * 1e-3)
    }

    /// How TLPs between `device` and its root port are sized and framed: MPS is the smallest
    /// programmed on the path, MRRS the device's, speed and width the root port link's;
    /// 64-bit DMA addresses, completions in MPS-sized pieces.
    pub(crate) fn link_params(&self, device: Bdf) -> LinkParams {
        let path = self.topology.path_to_root(device);
        let mps = path
            .iter()
            .filter_map(|f| f.mps)
            .min()
            .map_or(DEFAULT_MPS, u32::from);
        let port_link = self
            .root_port(device)
            .and_then(|rp| self.topology.get(rp))
            .and_then(|f| f.link);
        let gen = port_link
            .and_then(|l| l.speed)
            .or_else(|| path.iter().find_map(|f| f.link.and_then(|l| l.speed)))
            .unwrap_or(Generation::Gen3);
        let width = port_link
            .and_then(|l| l.width)
            .filter(|w| *w > 0)
            .unwrap_or(1);
        LinkParams {
            gen,
            width,
            mps,
            mrrs: self
                .topology
                .get(device)
                .and_then(|f| f.mrrs)
                .map_or(DEFAULT_MRRS, u32::from),
            rcb: 64,
            format: TlpFormat {
                addr64: true,
                ..TlpFormat::default()
            },
            completion_size: CompletionSize::Mps,
        }
    }

    /// Extra read round trip `device` sees from the switches on its path.
    fn switch_rtt_ns(&self, device: Bdf) -> f64 {
        let switches = self
            .topology
            .path_to_root(device)
            .iter()
            .filter(|f| f.kind == FnKind::SwitchUpstream)
            .count();
        switches as f64 * self.config.switch_latency_ns
    }

    /// The memory-read round trip from `device`: the platform's fixed root-complex latency plus
    /// each switch.
    fn read_rtt_ns(&self, device: Bdf) -> f64 {
        self.platform.get(P::ReadLatencyNs) + self.switch_rtt_ns(device)
    }

    /// The platform model as `device` sees it: switches add to the read latency.
    fn platform_at(&self, device: Bdf) -> PlatformModel {
        let mut model = self.platform.clone();
        model.set(P::ReadLatencyNs, self.read_rtt_ns(device));
        model
    }

    /// The ASPM exits `device`'s path costs: its spec's exit latencies and this machine's idle
    /// timers (`l0s_idle_ns`, `l1_idle_ns`).
    pub(crate) fn link_power(&self, device: Bdf) -> LinkPower {
        self.topology
            .path_link_power(device, self.config.l0s_idle_ns, self.config.l1_idle_ns)
    }

    /// What each completion interrupt of `device` costs beyond a local one: the platform's
    /// `interrupts.cross_node_ns` when `[sim] irq_node` puts its interrupts on another NUMA
    /// node than its own `numa_node`; nothing where either is unknown.
    pub(crate) fn far_irq_ns(&self, device: Bdf) -> f64 {
        let own = self.topology.get(device).and_then(|f| f.numa_node);
        match (own, self.config.irq_nodes.get(&device)) {
            (Some(own), Some(irq)) if own != *irq => self.platform.get(P::CrossNodeIrqNs),
            _ => 0.0,
        }
    }

    /// One I/O of `bs` bytes on block device `device` (`read_fraction` of them reads) with
    /// `outstanding` I/Os queued, as a request–response: the device's access latency and
    /// service time, and the read round trip from it.
    pub(crate) fn request_response(
        &self,
        device: Bdf,
        block: &dyn BlockDevice,
        read_fraction: f64,
        bs: u64,
        outstanding: u64,
    ) -> RequestResponse {
        let mixed =
            |f: &dyn Fn(bool) -> f64| read_fraction * f(true) + (1.0 - read_fraction) * f(false);
        RequestResponse {
            access_ns: mixed(&|r| block.latency_ns(r)),
            service_ns: mixed(&|r| block.service_ns(r, bs)),
            round_trip_ns: self.read_rtt_ns(device),
            in_flight: outstanding.min(u64::from(block.queue_depth())) as f64,
        }
    }

    /// Runs `workload` from time 0 and returns the finished simulation.
    pub fn run(&self, workload: &Workload) -> Result<SimRun> {
        let mut builder = RunBuilder::new(self);
        let summary = match workload {
            Workload::Fio(set) => builder.fio(set)?,
            Workload::DmaTest(test) => builder.dmatest(test)?,
            Workload::NetTest(test) => builder.nettest(test)?,
            Workload::Sleep { ns } => {
                builder.now = *ns as f64;
                Summary::Sleep {
                    seconds: *ns as f64 / 1e9,
                }
            }
        };
        Ok(builder.finish(summary))
    }
}

/// What a flow can be limited by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    /// A device's time (one bottleneck for all its I/O).
    Device(Bdf),
    /// A full-duplex device's time in one direction (a NIC's receive or transmit side).
    DeviceWay(Bdf, Dir),
    /// One direction of the link whose downstream end is this function.
    Link(Bdf, Dir),
}

/// Resources of one group's flows and their capacities.
struct Resources {
    keys: Vec<Resource>,
    capacity: Vec<f64>,
}

impl Resources {
    fn index(&mut self, key: Resource, capacity: f64) -> usize {
        if let Some(i) = self.keys.iter().position(|k| *k == key) {
            return i;
        }
        self.keys.push(key);
        self.capacity.push(capacity);
        self.keys.len() - 1
    }
}

/// One direction of a flow's I/O: the TLPs of one I/O and the share of I/Os that are of it.
struct Half {
    bundle: Bundle,
    fraction: f64,
    read: bool,
}

struct RunBuilder<'m> {
    machine: &'m SimulatedPcie,
    now: f64,
    progress: Vec<Progress>,
    streams: Vec<Stream>,
}

impl<'m> RunBuilder<'m> {
    fn new(machine: &'m SimulatedPcie) -> Self {
        RunBuilder {
            machine,
            now: 0.0,
            progress: Vec::new(),
            streams: Vec::new(),
        }
    }

    /// Link usage of one I/O (mixing `halves`): wire bytes of its TLPs per direction plus the
    /// Ack and UpdateFC DLLPs sent that way.
    fn link_usage(
        &self,
        halves: &[Half],
        resources: &mut Resources,
        device: Bdf,
    ) -> Vec<(usize, f64)> {
        let mut usage = Vec::new();
        for link in self.machine.path_links(device) {
            let capacity = self.machine.link_capacity(link);
            for dir in [Dir::Up, Dir::Down] {
                let d = dir as usize;
                let bytes: f64 = halves
                    .iter()
                    .map(|h| {
                        let t = &h.bundle.total;
                        h.fraction
                            * (t.wire_bytes[d]
                                + (t.acks[d] + t.update_fcs[d]) * f64::from(DLLP_WIRE_BYTES))
                    })
                    .sum();
                usage.push((resources.index(Resource::Link(link, dir), capacity), bytes));
            }
        }
        usage
    }

    /// Runs one group of flows starting now; returns each flow's progress index.
    fn run_group(
        &mut self,
        flows: Vec<(FlowSpec, Bdf, Vec<Half>)>,
        resources: &Resources,
    ) -> Result<Vec<usize>> {
        let specs: Vec<FlowSpec> = flows.iter().map(|(s, _, _)| s.clone()).collect();
        let progress = engine::run_group(&specs, &resources.capacity, self.now)?;
        let mut indices = Vec::new();
        for ((_, device, halves), p) in flows.into_iter().zip(progress) {
            let index = self.progress.len();
            let total = p.total_ios;
            self.now = self.now.max(p.end());
            // Split the flow's I/Os between its halves, reads first, as whole I/Os.
            let mut left = total;
            let count = halves.len();
            for (k, half) in halves.into_iter().enumerate() {
                let ios = if k + 1 == count {
                    left
                } else {
                    ((total as f64 * half.fraction).round() as u64).min(left)
                };
                left -= ios;
                if ios > 0 {
                    let tlps = half.bundle.tlps;
                    let tlps_per_io = ios as f64 / total as f64 * tlps as f64;
                    self.streams.push(Stream {
                        progress: index,
                        emission: Emission::new(&p, tlps_per_io, ios * tlps),
                        ios,
                        bundle: half.bundle,
                        read: half.read,
                        device,
                        root_port: self.machine.root_port(device),
                    });
                }
            }
            self.progress.push(p);
            indices.push(index);
        }
        Ok(indices)
    }

    /// I/Os of the streams of progress `index`: (reads, writes).
    fn stream_ios(&self, index: usize) -> (u64, u64) {
        let of = |read: bool| -> u64 {
            self.streams
                .iter()
                .filter(|s| s.progress == index && s.read == read)
                .map(|s| s.ios)
                .sum()
        };
        (of(true), of(false))
    }

    fn fio(&mut self, set: &fio::JobSet) -> Result<Summary> {
        let mut groups = Vec::new();
        for (groupid, jobs) in set.groups().into_iter().enumerate() {
            let start = self.now;
            let mut resources = Resources {
                keys: Vec::new(),
                capacity: Vec::new(),
            };
            let mut flows = Vec::new();
            let mut sizes = Vec::new();
            let mut in_flight = Vec::new();
            for job in &jobs {
                let filename = job.filename.as_deref().unwrap_or_default();
                let bdf = self.machine.config.device_for_path(filename)?;
                let block = self
                    .machine
                    .devices
                    .get(&bdf)
                    .and_then(|d| d.block())
                    .ok_or_else(|| {
                        Error::bad_input(format!(
                            "fio: filename '{filename}' maps to {bdf}, which is not a simulated disk \
                             (it needs a [function.device] table with model = \"ahci\" or \"nvme\")"
                        ))
                    })?;
                let flow = self.fio_flow(job, bdf, block, &mut resources)?;
                in_flight.push(flow.0.outstanding);
                flows.push(flow);
                sizes.push(job.bs);
            }
            let indices = self.run_group(flows, &resources)?;
            let runtime = (self.now - start).round() as u64;
            let (mut read_ios, mut write_ios, mut read_bytes, mut write_bytes) = (0, 0, 0, 0);
            // Little's law per flow: mean latency = I/Os in flight / completion rate.
            let (mut read_lat, mut write_lat) = (0.0, 0.0);
            for ((index, bs), outstanding) in indices.iter().zip(&sizes).zip(&in_flight) {
                let (r, w) = self.stream_ios(*index);
                let p = &self.progress[*index];
                let ios = p.total_ios.max(1) as f64;
                let latency_us = (*outstanding as f64).min(ios) * (p.end() - p.start()) / ios / 1e3;
                read_lat += latency_us * r as f64;
                write_lat += latency_us * w as f64;
                read_ios += r;
                write_ios += w;
                read_bytes += r * bs;
                write_bytes += w * bs;
            }
            let mean = |sum: f64, n: u64| if n > 0 { sum / n as f64 } else { 0.0 };
            let first = jobs[0];
            let reads = first.rw.read_percent(first.rwmixread) > 0;
            let writes = first.rw.read_percent(first.rwmixread) < 100;
            groups.push(GroupStats {
                groupid,
                name: first.name.clone(),
                jobs: jobs.iter().map(|j| j.numjobs).sum(),
                read: (reads || read_ios > 0).then(|| {
                    DirectionStats::new(read_bytes, read_ios, runtime, mean(read_lat, read_ios))
                }),
                write: (writes || write_ios > 0).then(|| {
                    DirectionStats::new(write_bytes, write_ios, runtime, mean(write_lat, write_ios))
                }),
            });
        }
        Ok(Summary::Fio { groups })
    }

    fn fio_flow(
        &self,
        job: &fio::Job,
        bdf: Bdf,
        block: &dyn BlockDevice,
        resources: &mut Resources,
    ) -> Result<(FlowSpec, Bdf, Vec<Half>)> {
        let link = self.machine.link_params(bdf);
        let read_fraction = f64::from(job.rw.read_percent(job.rwmixread)) / 100.0;
        let mut halves = Vec::new();
        for (read, fraction) in [(true, read_fraction), (false, 1.0 - read_fraction)] {
            if fraction > 0.0 {
                halves.push(Half {
                    bundle: Bundle::new(block.io_tlps(read, job.bs, &link), link),
                    fraction,
                    read,
                });
            }
        }
        let mixed =
            |f: &dyn Fn(bool) -> f64| read_fraction * f(true) + (1.0 - read_fraction) * f(false);
        let outstanding = u64::from(job.numjobs) * u64::from(job.effective_depth());
        let io = self
            .machine
            .request_response(bdf, block, read_fraction, job.bs, outstanding);
        let service = io.service_ns;
        let rtt = io.round_trip_ns;
        // Little's law over the whole request–response, with the ASPM exit its data waits for
        // after an idle gap and a far-node completion interrupt (both 0 unless the spec says).
        let mut cap =
            io.in_flight / io.io_ns(&self.machine.link_power(bdf), self.machine.far_irq_ns(bdf));
        let platform = &self.machine.platform;
        let cpu_ns = mixed(&|r| platform.get(if r { P::CpuReadIoNs } else { P::CpuWriteIoNs }));
        if cpu_ns > 0.0 {
            // Each clone's thread submits and reaps its own I/Os.
            cap = cap.min(f64::from(job.numjobs) / cpu_ns);
        }
        let memory_reads_per_io = (1.0 - read_fraction) * job.bs as f64;
        if memory_reads_per_io > 0.0 {
            let concurrency = ReadConcurrency {
                tags: BLOCK_READ_TAGS,
                np_header_credits: None,
                round_trip_ns: rtt,
            };
            // MB/s is bytes per microsecond.
            cap = cap.min(concurrency.bound_mbps(link.mrrs) / 1e3 / memory_reads_per_io);
        }
        let mut usage = vec![(resources.index(Resource::Device(bdf), 1.0), service)];
        usage.extend(self.link_usage(&halves, resources, bdf));
        let per_clone = match (job.size, job.time_based) {
            (Some(size), false) => Some(size.div_ceil(job.bs)),
            (None, false) => match block.capacity_bytes() {
                Some(c) => Some(c / job.bs),
                None => {
                    return Err(Error::bad_input(format!(
                        "fio: job '{}' needs size= (or time_based with runtime=): the simulated \
                         file '{}' has no size of its own",
                        job.name,
                        job.filename.as_deref().unwrap_or_default()
                    )))
                }
            },
            (_, true) => None,
        };
        if job.time_based && job.runtime_ns.is_none() {
            return Err(Error::bad_input(format!(
                "fio: job '{}' is time_based but has no runtime=",
                job.name
            )));
        }
        let spec = FlowSpec {
            demand: Demand {
                bytes_per_io: job.bs as f64,
                usage,
                cap,
            },
            ios: per_clone.map(|n| n * u64::from(job.numjobs)),
            deadline_ns: job.runtime_ns.map(|r| r as f64),
            outstanding,
        };
        Ok((spec, bdf, halves))
    }

    fn dmatest(&mut self, test: &DmaTest) -> Result<Summary> {
        let engines: Vec<Bdf> = self
            .machine
            .devices
            .iter()
            .filter_map(|(b, d)| matches!(d, Device::Dma).then_some(*b))
            .collect();
        let bdf = match test.device {
            Some(want) => engines.iter().find(|b| **b == want).copied().ok_or_else(|| {
                Error::bad_input(format!("dmatest: {want} has no DMA engine (a [function.device] table with model = \"dma\")"))
            })?,
            None => match engines.as_slice() {
                [one] => *one,
                [] => return Err(Error::bad_input(format!("dmatest: machine '{}' has no endpoint DMA engine", self.machine.name))),
                _ => return Err(Error::bad_input("dmatest: several DMA engines; choose one with --device BDF")),
            },
        };
        let link = self.machine.link_params(bdf);
        let platform = self.machine.platform_at(bdf);
        let mut rows = Vec::new();
        for &direction in &test.directions {
            for &size in &test.sizes {
                let start = self.now;
                let runs = match direction {
                    DmaDirection::Write => tlp::dma_write(size, &link),
                    DmaDirection::Read => tlp::dma_read(size, &link),
                };
                let bundle = Bundle::new(runs, link);
                // One transfer at a time, timed by the platform model (setup, descriptor
                // traffic, the data against the link, the root complex and read round trips).
                let transfer_ns = platform.dma_transfer_ns(direction, size, &link);
                let mut resources = Resources {
                    keys: Vec::new(),
                    capacity: Vec::new(),
                };
                let halves = vec![Half {
                    bundle,
                    fraction: 1.0,
                    read: direction == DmaDirection::Write,
                }];
                let usage = self.link_usage(&halves, &mut resources, bdf);
                let spec = FlowSpec {
                    demand: Demand {
                        bytes_per_io: size as f64,
                        usage,
                        cap: 1.0 / transfer_ns,
                    },
                    ios: Some(test.transfers),
                    deadline_ns: None,
                    outstanding: 1,
                };
                self.run_group(vec![(spec, bdf, halves)], &resources)?;
                let runtime = self.now - start;
                rows.push(DmaRow {
                    direction,
                    size,
                    transfers: test.transfers,
                    mbps: (size * test.transfers) as f64 / runtime * 1e3,
                    runtime_ns: runtime.round() as u64,
                });
            }
        }
        Ok(Summary::DmaTest { device: bdf, rows })
    }

    fn nettest(&mut self, test: &NetTest) -> Result<Summary> {
        let nics: Vec<(Bdf, &device::Nic)> = self
            .machine
            .devices
            .iter()
            .filter_map(|(b, d)| match d {
                Device::Nic(n) => Some((*b, n)),
                _ => None,
            })
            .filter(|(b, _)| test.devices.is_empty() || test.devices.contains(b))
            .collect();
        if let Some(missing) = test
            .devices
            .iter()
            .find(|d| !nics.iter().any(|(b, _)| b == *d))
        {
            return Err(Error::bad_input(format!(
                "nettest: {missing} is not a simulated NIC (a [function.device] table with model = \"nic\")"
            )));
        }
        if nics.is_empty() {
            return Err(Error::bad_input(format!(
                "nettest: machine '{}' has no simulated NIC",
                self.machine.name
            )));
        }
        let mut resources = Resources {
            keys: Vec::new(),
            capacity: Vec::new(),
        };
        let mut flows = Vec::new();
        let mut labels = Vec::new();
        for (bdf, nic) in &nics {
            let link = self.machine.link_params(*bdf);
            let batch = nic.frames_per_interrupt;
            for (receive, on) in [(true, test.receive), (false, test.transmit)] {
                if !on {
                    continue;
                }
                let way = if receive { Dir::Up } else { Dir::Down };
                let bundle = Bundle::new(nic.batch_tlps(receive, batch, test.frame, &link), link);
                let halves = vec![Half {
                    bundle,
                    fraction: 1.0,
                    read: receive,
                }];
                let mut usage = vec![(
                    resources.index(Resource::DeviceWay(*bdf, way), 1.0),
                    nic.batch_ns(batch, test.frame),
                )];
                usage.extend(self.link_usage(&halves, &mut resources, *bdf));
                let in_flight = (nic.ring_entries / batch).max(1);
                let spec = FlowSpec {
                    demand: Demand {
                        bytes_per_io: (batch * test.frame) as f64,
                        usage,
                        cap: f64::INFINITY,
                    },
                    ios: None,
                    deadline_ns: Some(test.seconds * 1e9),
                    outstanding: in_flight,
                };
                flows.push((spec, *bdf, halves));
                labels.push((*bdf, if receive { "rx" } else { "tx" }, batch));
            }
        }
        let indices = self.run_group(flows, &resources)?;
        let rows = indices
            .iter()
            .zip(labels)
            .map(|(index, (device, direction, batch))| {
                let p = &self.progress[*index];
                let frames = p.total_ios * batch;
                let bytes = frames * test.frame;
                let ns = p.end() - p.start();
                NetRow {
                    device,
                    direction,
                    frames,
                    bytes,
                    seconds: ns / 1e9,
                    gbps: bytes as f64 * 8.0 / ns,
                }
            })
            .collect();
        Ok(Summary::NetTest { rows })
    }

    fn finish(self, summary: Summary) -> SimRun {
        let duration_ns = self.now.ceil() as u64;
        let mut ports = BTreeMap::new();
        for f in self
            .machine
            .topology
            .functions()
            .iter()
            .filter(|f| f.kind == FnKind::RootPort)
        {
            let mut busy: Vec<(f64, f64)> = self
                .streams
                .iter()
                .filter(|s| s.root_port == Some(f.bdf))
                .map(|s| {
                    (
                        self.progress[s.progress].start(),
                        self.progress[s.progress].end(),
                    )
                })
                .collect();
            busy.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut merged: Vec<(f64, f64)> = Vec::new();
            for (a, b) in busy {
                match merged.last_mut() {
                    Some(last) if a <= last.1 => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            ports.insert(
                f.bdf,
                PortState {
                    aspm: f.aspm_enabled,
                    generation: f.link.and_then(|l| l.speed),
                    width: f.link.and_then(|l| l.width).unwrap_or(0),
                    busy: merged,
                },
            );
        }
        SimRun {
            duration_ns,
            summary,
            streams: self.streams,
            ports,
            config: self.machine.config.clone(),
        }
    }
}
