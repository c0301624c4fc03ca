//! The platform model itself ([`PlatformModel`]): the parameters' values, which were fitted
//! and on what, and what they predict for DMA, CPU I/O, MMIO and interrupts on a link.

use super::params::{P, PARAMS};
use crate::error::{Error, Result};
use crate::model::transfer::{achievable_mbps, read, write, LinkParams, Overheads};

/// Which way a DMA transfer moves data, from the device's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DmaDirection {
    /// The device writes host memory (Memory Writes upstream: Rx payload at the root port).
    Write,
    /// The device reads host memory (Memory Reads upstream, Completions downstream: Tx
    /// payload at the root port).
    Read,
}

/// A CPU access to a BAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MmioOp {
    /// Posted stores.
    Store,
    /// Non-posted loads.
    Load,
}

/// Which interrupt mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IrqKind {
    /// The endpoint writes the host's MSI address; the host CPU takes the interrupt.
    Msi,
    /// The root complex writes the endpoint's ELBI register; the endpoint CPU takes it.
    Elbi,
}

/// Parameter values in [`P`] order, and what they were fitted on.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformModel {
    pub(crate) values: [f64; PARAMS.len()],
    /// Which measurements the values come from (free text; "defaults" when none).
    pub(crate) fitted_on: String,
    /// Keys (`section.key`) whose values were fitted rather than defaulted.
    pub(crate) fitted: Vec<String>,
    /// Whether a spec gave it (a non-empty `[platform]` table) rather than the defaults alone:
    /// only then does `stat` on `sim:` print its predictions beside the link's rates.
    pub(crate) given: bool,
    /// The DMA measurements the fit saw: a prediction of one of these is in-sample.
    pub(crate) fitted_cells: Vec<FittedCell>,
    /// One standard deviation of each fitted parameter that has one, by key.
    pub(crate) uncertainty: Vec<(String, f64)>,
}

/// One DMA measurement a platform was fitted on: direction, size and the link it ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FittedCell {
    pub(crate) direction: DmaDirection,
    pub(crate) size: u64,
    pub(crate) gen: u8,
    pub(crate) width: u8,
}

impl FittedCell {
    /// `write 64 B Gen3 x4`: how `[platform] fitted_cells` lists it.
    pub(crate) fn text(&self) -> String {
        let direction = match self.direction {
            DmaDirection::Write => "write",
            DmaDirection::Read => "read",
        };
        format!(
            "{direction} {} B Gen{} x{}",
            self.size, self.gen, self.width
        )
    }

    pub(super) fn parse(text: &str) -> Option<FittedCell> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let [direction, size, "B", gen, width] = words.as_slice() else {
            return None;
        };
        Some(FittedCell {
            direction: match *direction {
                "write" => DmaDirection::Write,
                "read" => DmaDirection::Read,
                _ => return None,
            },
            size: size.parse().ok()?,
            gen: gen.strip_prefix("Gen")?.parse().ok()?,
            width: width.strip_prefix('x')?.parse().ok()?,
        })
    }

    /// Whether this cell ran on `link`'s generation and width.
    pub(crate) fn on(&self, link: &LinkParams) -> bool {
        self.gen == link.gen.number() && self.width == link.width
    }
}

/// A platform model's predicted streaming DMA on one link, as `topo` and `stat` report it beside
/// the link's own ceiling.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub(crate) struct PlatformDma {
    /// Device to memory, MB/s.
    #[serde(
        rename = "platform_dma_write_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) write_mbps: Option<f64>,
    /// Memory to device, MB/s.
    #[serde(
        rename = "platform_dma_read_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) read_mbps: Option<f64>,
    /// Whether the two rates reproduce the fit's data or predict (and on what link).
    #[serde(
        rename = "platform_dma_provenance",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) provenance: Option<Provenance>,
}

/// Where a platform number stands against the measurements the platform was fitted on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Provenance {
    /// The fit saw this size and direction on this link: the number reproduces a measurement.
    InSample,
    /// Out of sample on a link the fit saw (or the fit recorded no cells).
    Predicted,
    /// Out of sample on a link none of the fit's measurements ran on: per-transfer costs that
    /// scale with the link may be far off.
    OtherLink,
}

impl Provenance {
    /// How `topo` and `stat` print it after the platform's rates.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Provenance::InSample => "in-sample: the fit saw 4 MiB transfers on this link",
            Provenance::Predicted => "predicted for 4 MiB transfers",
            Provenance::OtherLink => {
                "predicted for 4 MiB transfers on a link the platform was not fitted on: may be far off"
            }
        }
    }
}

/// The transfer size of a "streaming" DMA prediction (`topo`, `stat`): large enough that the
/// per-transfer setup is under a few percent of the time on the seed's boards.
pub(crate) const STREAMING_DMA_BYTES: u64 = 4 << 20;

impl Default for PlatformModel {
    fn default() -> Self {
        PlatformModel {
            values: PARAMS.map(|p| p.default),
            fitted_on: "defaults".into(),
            fitted: Vec::new(),
            given: false,
            fitted_cells: Vec::new(),
            uncertainty: Vec::new(),
        }
    }
}

/// Nanoseconds to move `bytes` at `mbps` (MB/s is bytes per microsecond).
fn ns_at(bytes: f64, mbps: f64) -> f64 {
    bytes / mbps * 1000.0
}

/// What a per-TLP minimum `slot` adds to an aligned transfer of `size` split into pieces of at
/// most `piece` bytes (MPS for writes, MRRS for read requests): Σ over pieces of
/// max(0, slot − wire time of the piece), with `wire_ns` giving a piece's wire time. Added to
/// the transfer's own wire time it makes Σ max(wire, slot). Full pieces and the one short last
/// piece are all there is, so the sum is O(1).
fn slot_shortfall_ns(size: u64, piece: u64, slot: f64, wire_ns: impl Fn(u64) -> f64) -> f64 {
    if slot <= 0.0 || size == 0 {
        return 0.0;
    }
    let full = size / piece;
    let rest = size % piece;
    let mut shortfall = 0.0;
    if full > 0 {
        shortfall += full as f64 * (slot - wire_ns(piece)).max(0.0);
    }
    if rest > 0 {
        shortfall += (slot - wire_ns(rest)).max(0.0);
    }
    shortfall
}

impl PlatformModel {
    /// The value of parameter `p`.
    pub fn get(&self, p: P) -> f64 {
        self.values[p as usize]
    }

    /// Sets parameter `p` to `value`, unchecked: staying within its bounds is the caller's job.
    pub fn set(&mut self, p: P, value: f64) {
        self.values[p as usize] = value;
    }

    /// Whether the fit saw a DMA transfer of `size` in `direction` on `link`: a prediction of
    /// it reproduces a measurement rather than predicting one.
    pub(crate) fn in_sample(&self, direction: DmaDirection, size: u64, link: &LinkParams) -> bool {
        self.fitted_cells
            .iter()
            .any(|c| c.direction == direction && c.size == size && c.on(link))
    }

    /// A warning when this platform is applied to a link none of its DMA measurements ran on:
    /// per-transfer costs that scale with the link are only separated by two links' data.
    pub(crate) fn link_warning(&self, link: &LinkParams) -> Option<String> {
        if self.fitted_cells.is_empty() || self.fitted_cells.iter().any(|c| c.on(link)) {
            return None;
        }
        let mut links: Vec<String> = self
            .fitted_cells
            .iter()
            .map(|c| format!("Gen{} x{}", c.gen, c.width))
            .collect();
        links.sort();
        links.dedup();
        Some(format!(
            "platform fitted on {} only, applied to Gen{} x{}: a per-transfer cost that grows on \
             a slower link is not separated from a fixed one by one link's data (the RK3588 \
             Gen3 x4 fit predicts Gen2 x1 64 B writes +270 %); fit with two sizes measured on \
             this link too (docs/calibration.md)",
            links.join(", "),
            link.gen.number(),
            link.width
        ))
    }

    /// Whether `p`'s value came from a fit.
    pub(crate) fn is_fitted(&self, p: P) -> bool {
        self.fitted.iter().any(|k| k == PARAMS[p as usize].key)
    }

    /// Time of one read of `bytes` (one request, at most MRRS) from issue to last completion:
    /// the platform's fixed and per-byte latency plus the link's serialisation of the request
    /// and its completions.
    fn request_round_trip_ns(&self, bytes: u64, link: &LinkParams) -> f64 {
        self.get(P::ReadLatencyNs)
            + self.get(P::ReadLatencyPerByteNs) * bytes as f64
            + read(bytes, link).link_time_ns(link, Overheads::Full)
    }

    /// From issuing a device read of `size` bytes to its last completion: requests of MRRS go
    /// out with at most `max_read_requests` in flight, each slot recycled after a round trip;
    /// the link and the root complex's completion rate bound the stream.
    pub(crate) fn read_data_ns(&self, size: u64, link: &LinkParams, in_flight: f64) -> f64 {
        if size == 0 {
            return 0.0;
        }
        let mrrs = u64::from(link.mrrs);
        let first = size.min(mrrs);
        let first_rtt = self.request_round_trip_ns(first, link);
        let requests = size.div_ceil(mrrs);
        let waves = (requests as f64 / in_flight.max(1.0)).ceil();
        let latency_bound = waves * first_rtt;
        let request_time = |bytes: u64| read(bytes, link).link_time_ns(link, Overheads::Full);
        let occupied = request_time(size)
            + slot_shortfall_ns(size, mrrs, self.get(P::DmaReadTlpNs), request_time);
        let stream_ns = occupied.max(ns_at(size as f64, self.get(P::CompletionMbps)));
        let stream_bound =
            stream_ns + first_rtt - read(first, link).link_time_ns(link, Overheads::Full);
        latency_bound.max(stream_bound)
    }

    /// Time of one device write of `size` bytes: the TLPs on the path (each for its wire time
    /// or `dma.write_tlp_ns`, whichever is longer) or the root complex's acceptance rate,
    /// whichever is slower (posted: nothing waits for a reply).
    pub(crate) fn write_data_ns(&self, size: u64, link: &LinkParams) -> f64 {
        let tlp_time = |bytes: u64| write(bytes, link).link_time_ns(link, Overheads::Full);
        let slot = self.get(P::DmaWriteTlpNs);
        let occupied =
            tlp_time(size) + slot_shortfall_ns(size, u64::from(link.mps), slot, tlp_time);
        occupied.max(ns_at(size as f64, self.get(P::PostedWriteMbps)))
    }

    /// One endpoint-DMA transfer, as dmatest times it: setup, the descriptor read, the data.
    pub(crate) fn dma_transfer_ns(
        &self,
        direction: DmaDirection,
        size: u64,
        link: &LinkParams,
    ) -> f64 {
        // Descriptor and status bytes cross the link once per transfer.
        let descriptor_ns = ns_at(self.get(P::DmaDescriptorBytes), achievable_mbps(link));
        let in_flight = self.get(P::DmaMaxReadRequests);
        let data = match direction {
            DmaDirection::Write => self.write_data_ns(size, link),
            DmaDirection::Read => self.read_data_ns(size, link, in_flight),
        };
        self.get(P::DmaSetupNs) + descriptor_ns + data
    }

    /// Payload MB/s of back-to-back DMA transfers of `size` bytes, one at a time.
    pub(crate) fn dma_mbps(&self, direction: DmaDirection, size: u64, link: &LinkParams) -> f64 {
        size as f64 / self.dma_transfer_ns(direction, size, link) * 1000.0
    }

    /// (write, read) MB/s of back-to-back [`STREAMING_DMA_BYTES`] endpoint DMA transfers on
    /// `link`: the platform's prediction of what a port's traffic can reach, beside the link's
    /// line and achievable rates, and where those two numbers stand against the fit's data.
    pub(crate) fn streaming_dma_mbps(&self, link: &LinkParams) -> (f64, f64, Provenance) {
        let seen = |d| self.in_sample(d, STREAMING_DMA_BYTES, link);
        let provenance = if self.link_warning(link).is_some() {
            Provenance::OtherLink
        } else if seen(DmaDirection::Write) && seen(DmaDirection::Read) {
            Provenance::InSample
        } else {
            Provenance::Predicted
        };
        (
            self.dma_mbps(DmaDirection::Write, STREAMING_DMA_BYTES, link),
            self.dma_mbps(DmaDirection::Read, STREAMING_DMA_BYTES, link),
            provenance,
        )
    }

    /// One standard deviation of `p` as fitted, if the fit gave one.
    pub(crate) fn sigma(&self, p: P) -> Option<f64> {
        let key = PARAMS[p as usize].key;
        self.uncertainty
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, s)| *s)
    }

    /// One standard deviation of [`PlatformModel::read_latency_ns`] from the fitted fixed and
    /// per-byte latencies' (first request's bytes × the per-byte σ, in quadrature; their
    /// covariance is not kept), where the fit gave the fixed part one.
    pub(crate) fn read_latency_sigma_ns(&self, size: u64, link: &LinkParams) -> Option<f64> {
        let fixed = self.sigma(P::ReadLatencyNs)?;
        let first = size.min(u64::from(link.mrrs)) as f64;
        let per_byte = self.sigma(P::ReadLatencyPerByteNs).unwrap_or(0.0) * first;
        Some(fixed.hypot(per_byte))
    }

    /// Latency of one DMA read of `size` (no setup): what `predicted_read_latency_ns` reports.
    pub(crate) fn read_latency_ns(&self, size: u64, link: &LinkParams) -> f64 {
        self.read_data_ns(size, link, self.get(P::DmaMaxReadRequests))
    }

    /// One I/O of `bs` bytes on the platform's drive as a request–response with `in_flight` I/Os
    /// outstanding: `access_ns` of media latency, the drive's service time (`drive.*_MBps`,
    /// `drive.*_iops`) and the root complex's read round trip.
    pub(crate) fn drive_request(
        &self,
        read: bool,
        bs: u64,
        access_ns: f64,
        in_flight: f64,
    ) -> crate::model::io::RequestResponse {
        let (mbps, iops) = if read {
            (self.get(P::DriveReadMbps), self.get(P::DriveReadIops))
        } else {
            (self.get(P::DriveWriteMbps), self.get(P::DriveWriteIops))
        };
        crate::model::io::RequestResponse {
            access_ns,
            service_ns: crate::model::io::drive_service_ns(bs, mbps, iops),
            round_trip_ns: self.get(P::ReadLatencyNs),
            in_flight,
        }
    }

    /// fio-style queued I/O of `bs` bytes: `device` is the device's DMA direction (a disk read is
    /// a device write), `jobs` threads each keep I/Os queued. Returns MB/s. Bounds: CPU time per
    /// I/O per thread, the drive's bandwidth and IOPS, the link, and the root complex (posted
    /// acceptance for device writes; completions and read round trips for device reads).
    pub(crate) fn queued_io_mbps(
        &self,
        device: DmaDirection,
        bs: u64,
        iodepth: u32,
        jobs: u32,
        link: &LinkParams,
    ) -> f64 {
        let bytes = bs as f64;
        let (cpu_ns, drive_mbps, drive_iops) = match device {
            DmaDirection::Write => (
                self.get(P::CpuReadIoNs),
                self.get(P::DriveReadMbps),
                self.get(P::DriveReadIops),
            ),
            DmaDirection::Read => (
                self.get(P::CpuWriteIoNs),
                self.get(P::DriveWriteMbps),
                self.get(P::DriveWriteIops),
            ),
        };
        let mut mbps = drive_mbps.min(drive_iops * bytes / 1e6);
        if cpu_ns > 0.0 {
            mbps = mbps.min(f64::from(jobs) * bytes / cpu_ns * 1000.0);
        }
        let link_mbps = match device {
            DmaDirection::Write => bytes / self.write_data_ns(bs, link) * 1000.0,
            DmaDirection::Read => {
                // Every queued command's requests share the device's read tags, so the stream
                // of all of them, not one command, meets the round-trip bound.
                let queued = u64::from(iodepth.max(1)) * u64::from(jobs.max(1));
                let stream = bs * queued;
                let in_flight = self.get(P::DmaMaxReadRequests);
                stream as f64 / self.read_data_ns(stream, link, in_flight) * 1000.0
            }
        };
        mbps.min(link_mbps)
    }

    /// MMIO throughput of `threads` CPU threads accessing a BAR with `width`-byte accesses.
    /// Stores are posted: one Memory Write per access (per `write_combining_bytes` when the
    /// mapping write-combines), issued at most every `store_issue_ns` through the root
    /// complex's one outbound path (threads share it, seed 5.4.2). Loads are non-posted: each
    /// waits `load_latency_ns` plus its link time; every thread keeps `loads_per_thread` in
    /// flight, and the root complex at most `loads_outstanding` in all.
    pub(crate) fn mmio_mbps(
        &self,
        op: MmioOp,
        width: u32,
        threads: u32,
        write_combining: bool,
        link: &LinkParams,
    ) -> f64 {
        match op {
            MmioOp::Store => {
                let tlp_bytes = if write_combining {
                    self.get(P::MmioWriteCombiningBytes).max(f64::from(width))
                } else {
                    f64::from(width)
                };
                let link_ns = write(tlp_bytes as u64, link).link_time_ns(link, Overheads::Full);
                tlp_bytes / self.get(P::MmioStoreIssueNs).max(link_ns) * 1000.0
            }
            MmioOp::Load => {
                let link_ns = read(u64::from(width), link).link_time_ns(link, Overheads::Full);
                let latency = self.get(P::MmioLoadLatencyNs) + link_ns;
                let in_flight = (f64::from(threads.max(1)) * self.get(P::MmioLoadsPerThread))
                    .min(self.get(P::MmioLoadsOutstanding));
                in_flight * f64::from(width) / latency * 1000.0
            }
        }
    }

    /// Interval between interrupts when one side raises them back to back, in ns (what the
    /// seed's §6/§7 tests print as "us" per interrupt).
    pub fn irq_interval_ns(&self, kind: IrqKind, link: &LinkParams) -> f64 {
        match kind {
            IrqKind::Msi => {
                let msi = write(4, link).link_time_ns(link, Overheads::Full);
                msi + self.get(P::MsiCpuNs)
            }
            IrqKind::Elbi => self.get(P::ElbiTriggerNs).max(self.get(P::ElbiCpuNs)),
        }
    }
}

impl IrqKind {
    /// The mechanism's name as the seed writes it.
    pub fn name(self) -> &'static str {
        match self {
            IrqKind::Msi => "MSI",
            IrqKind::Elbi => "ELBI",
        }
    }

    /// `--kind` text (`msi`, `elbi`) as an interrupt kind; bad input names the valid ones.
    pub fn parse(name: &str) -> Result<IrqKind> {
        match name {
            "msi" => Ok(IrqKind::Msi),
            "elbi" => Ok(IrqKind::Elbi),
            _ => Err(Error::bad_input(format!(
                "--kind {name}: expected msi or elbi"
            ))),
        }
    }
}

/// Back-to-back interrupt delivery as the Rockchip PCIe performance guide's §6/§7 tests report it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct IrqPrediction {
    pub(crate) kind: IrqKind,
    /// Time between interrupts when raised back to back (the Rockchip guide prints it in µs).
    pub interval_ns: f64,
    /// Interrupts per second that follow from the interval.
    pub per_second: f64,
    /// Where the CPU-side parameter comes from: a fit, or its default's source.
    pub source: String,
}

impl PlatformModel {
    /// [`PlatformModel::irq_interval_ns`] as a report.
    pub fn irq_prediction(&self, kind: IrqKind, link: &LinkParams) -> IrqPrediction {
        let interval_ns = self.irq_interval_ns(kind, link);
        let cpu = match kind {
            IrqKind::Msi => P::MsiCpuNs,
            IrqKind::Elbi => P::ElbiCpuNs,
        };
        IrqPrediction {
            kind,
            interval_ns: crate::text::round_to(interval_ns, 1),
            per_second: crate::text::round_to(1e9 / interval_ns, 0),
            source: if self.is_fitted(cpu) {
                format!("fitted on {}", self.fitted_on)
            } else if self.get(cpu) != PARAMS[cpu as usize].default {
                format!("given in [platform] as {}", PARAMS[cpu as usize].key)
            } else {
                // A default copied from a measured row reproduces that row; it predicts only
                // boards and links other than the one it came from.
                format!(
                    "default, not fitted: {}; on that board it reproduces the row, elsewhere it predicts",
                    PARAMS[cpu as usize].source
                )
            },
        }
    }
}
