//! The platform model: what limits a device or a CPU beyond the link. The link model
//! ([`super::transfer`]) stays the pure bound underneath; this module composes it with the root
//! complex and memory side (posted-write acceptance, completion generation, read latency with a
//! fixed and a per-byte term), an endpoint's DMA engine (per-transfer setup, read requests in
//! flight, descriptor traffic), the CPU's cost per I/O, MMIO from a CPU (posted stores with an
//! issue interval, non-posted loads bound by latency, access width, write-combining) and
//! interrupt delivery (MSI, ELBI). Every parameter has a unit, a default and the source of that
//! default (`PARAMS`); values live in a spec's `[platform]` table (docs/calibration.md) and
//! are fitted from measurements by [`super::fit`]. Pure functions, no I/O.

use super::transfer::{achievable_mbps, read, write, LinkParams, Overheads};
use crate::error::{Error, Result};

/// One platform parameter: where it lives in `[platform]`, what it means, and its range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ParamSpec {
    /// `section.key` under `[platform]`.
    pub key: &'static str,
    pub unit: &'static str,
    pub default: f64,
    /// Bounds the fit respects and the spec reader enforces.
    pub min: f64,
    pub max: f64,
    /// Whole numbers only (counts).
    pub integer: bool,
    pub meaning: &'static str,
    /// Where the default comes from.
    pub source: &'static str,
}

/// Index of each parameter in `PARAMS` and in [`PlatformModel`]'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum P {
    PostedWriteMbps,
    CompletionMbps,
    ReadLatencyNs,
    ReadLatencyPerByteNs,
    DmaSetupNs,
    DmaMaxReadRequests,
    DmaDescriptorBytes,
    DmaWriteTlpNs,
    DmaReadTlpNs,
    CpuReadIoNs,
    CpuWriteIoNs,
    DriveReadMbps,
    DriveWriteMbps,
    DriveReadIops,
    DriveWriteIops,
    MmioStoreIssueNs,
    MmioLoadLatencyNs,
    MmioLoadsOutstanding,
    MmioLoadsPerThread,
    MmioWriteCombiningBytes,
    MsiCpuNs,
    ElbiTriggerNs,
    ElbiCpuNs,
    CrossNodeIrqNs,
}

const UNBOUNDED: f64 = f64::INFINITY;

/// Every parameter, in [`P`] order.
/// The least an interrupt may cost the CPU (or its trigger) in the model: a few cycles. Zero would
/// make the predicted rate infinite (and a handful of ns already means hundreds of millions per
/// second, far beyond any measured interrupt rate).
pub(crate) const MIN_INTERRUPT_NS: f64 = 10.0;

pub(crate) const PARAMS: [ParamSpec; 24] = [
    ParamSpec {
        key: "root_complex.posted_write_MBps",
        unit: "MB/s",
        default: UNBOUNDED,
        min: 10.0,
        max: UNBOUNDED,
        integer: false,
        meaning: "payload rate at which the root complex and memory accept a device's posted writes",
        source: "none: unbounded (the link is the limit) until fitted",
    },
    ParamSpec {
        key: "root_complex.completion_MBps",
        unit: "MB/s",
        default: UNBOUNDED,
        min: 10.0,
        max: UNBOUNDED,
        integer: false,
        meaning: "payload rate at which the root complex generates completions for device reads",
        source: "none: unbounded (the link is the limit) until fitted",
    },
    ParamSpec {
        key: "root_complex.read_latency_ns",
        unit: "ns",
        default: 700.0,
        min: 0.0,
        max: 20_000.0,
        integer: false,
        meaning: "fixed part of a device read's round trip beyond the link: request arrival to first completion",
        source: "simulator's earlier rc_read_latency_ns (assumption, typical of Arm SoCs)",
    },
    ParamSpec {
        key: "root_complex.read_latency_per_byte_ns",
        unit: "ns/B",
        default: 0.3,
        min: 0.0,
        max: 20.0,
        integer: false,
        meaning: "extra round-trip time per byte a read request asks for (memory fetch and completion build)",
        source: "issue 10: published Gen3-Gen5 DMA latencies grow about 0.30 ns per byte",
    },
    ParamSpec {
        key: "dma.setup_ns",
        unit: "ns",
        default: 4000.0,
        min: 0.0,
        max: 1e7,
        integer: false,
        meaning: "endpoint DMA engine: descriptor programming, doorbell and done-polling per transfer",
        source: "reference/pcie-math.md: Rockchip tables show ~4-5 us per transfer",
    },
    ParamSpec {
        key: "dma.max_read_requests",
        unit: "requests",
        default: 8.0,
        min: 1.0,
        max: 256.0,
        integer: true,
        meaning: "read requests (tags) the device's DMA engine keeps in flight when it reads host memory",
        source: "simulator's earlier default (assumption)",
    },
    ParamSpec {
        key: "dma.descriptor_bytes",
        unit: "B",
        default: 0.0,
        min: 0.0,
        max: 1e6,
        integer: false,
        meaning: "descriptor and status bytes crossing the link per transfer, at the link-achievable rate",
        source: "none: 0 (descriptors local to the endpoint) until fitted on two links",
    },
    // A TLP is the unit the DMA engine, the root complex's ingress and the memory controller each
    // handle: a path that needs a fixed time per TLP makes one more, nearly empty TLP (a size
    // just past MPS or MRRS) cost a whole slot, the saw-tooth no per-byte rate can give.
    ParamSpec {
        key: "dma.write_tlp_ns",
        unit: "ns",
        default: 0.0,
        min: 0.0,
        max: 1e5,
        integer: false,
        meaning: "least time one posted Memory Write TLP of a DMA write occupies the path to memory, whatever its payload (the wire time when longer)",
        source: "none: 0 (only the wire paces TLPs) until fitted",
    },
    ParamSpec {
        key: "dma.read_tlp_ns",
        unit: "ns",
        default: 0.0,
        min: 0.0,
        max: 1e5,
        integer: false,
        meaning: "least time one read request of a DMA read and its completions occupy the path, whatever their size (the wire time when longer)",
        source: "none: 0 (only the wire paces requests) until fitted",
    },
    ParamSpec {
        key: "cpu.read_io_ns",
        unit: "ns",
        default: 0.0,
        min: 0.0,
        max: 1e8,
        integer: false,
        meaning: "CPU time one submitting thread spends per read I/O (submission, completion, block layer)",
        source: "none: 0 (not limiting) until fitted",
    },
    ParamSpec {
        key: "cpu.write_io_ns",
        unit: "ns",
        default: 0.0,
        min: 0.0,
        max: 1e8,
        integer: false,
        meaning: "CPU time one submitting thread spends per write I/O",
        source: "none: 0 (not limiting) until fitted",
    },
    ParamSpec {
        key: "drive.read_MBps",
        unit: "MB/s",
        default: 3500.0,
        min: 1.0,
        max: UNBOUNDED,
        integer: false,
        meaning: "the storage device's own sequential read bandwidth (media and controller)",
        source: "Samsung 980 1TB datasheet: 3500 MB/s sequential read",
    },
    ParamSpec {
        key: "drive.write_MBps",
        unit: "MB/s",
        default: 3000.0,
        min: 1.0,
        max: UNBOUNDED,
        integer: false,
        meaning: "the storage device's own sequential write bandwidth",
        source: "Samsung 980 1TB datasheet: 3000 MB/s sequential write",
    },
    ParamSpec {
        key: "drive.read_iops",
        unit: "I/O per s",
        default: 500_000.0,
        min: 1.0,
        max: UNBOUNDED,
        integer: false,
        meaning: "the storage device's own 4 KiB random read IOPS limit",
        source: "Samsung 980 1TB datasheet: 500K random read IOPS",
    },
    ParamSpec {
        key: "drive.write_iops",
        unit: "I/O per s",
        default: 480_000.0,
        min: 1.0,
        max: UNBOUNDED,
        integer: false,
        meaning: "the storage device's own 4 KiB random write IOPS limit",
        source: "Samsung 980 1TB datasheet: 480K random write IOPS",
    },
    ParamSpec {
        key: "mmio.store_issue_ns",
        unit: "ns",
        default: 75.0,
        min: 0.0,
        max: 1e6,
        integer: false,
        meaning: "interval between posted MMIO stores leaving the CPU for the link (one TLP each)",
        source: "Rockchip PCIe performance guide §5.3: RK3588 Gen3x4 32-bit stores 53.3 MB/s = 4 B per 75 ns",
    },
    ParamSpec {
        key: "mmio.load_latency_ns",
        unit: "ns",
        default: 950.0,
        min: 0.0,
        max: 1e6,
        integer: false,
        meaning: "round trip of one non-posted MMIO load beyond the link's serialisation",
        source: "Rockchip PCIe performance guide §5.3: RK3588 Gen3x4 32-bit loads 4.2 MB/s = 4 B per 952 ns",
    },
    ParamSpec {
        key: "mmio.loads_outstanding",
        unit: "loads",
        default: 1.0,
        min: 1.0,
        max: 64.0,
        integer: true,
        meaning: "MMIO loads in flight at once across all threads (the root complex's outbound non-posted slots)",
        source: "Rockchip PCIe performance guide §5.4.2: more threads raise BAR throughput by under 10 %",
    },
    ParamSpec {
        key: "mmio.loads_per_thread",
        unit: "loads",
        default: 1.0,
        min: 1.0,
        max: 64.0,
        integer: true,
        meaning: "MMIO loads one CPU thread keeps in flight (device memory: each load waits for its data)",
        source: "Rockchip PCIe performance guide §5.4.1: load throughput scales with access width, not with more loads in flight",
    },
    ParamSpec {
        key: "mmio.write_combining_bytes",
        unit: "B",
        default: 64.0,
        min: 4.0,
        max: 4096.0,
        integer: true,
        meaning: "bytes a write-combining mapping merges into one Memory Write (a cache line)",
        source: "Arm/x86 write-combining buffers are one 64-byte line",
    },
    ParamSpec {
        key: "interrupts.msi_cpu_ns",
        unit: "ns",
        default: 2000.0,
        min: MIN_INTERRUPT_NS,
        max: 1e7,
        integer: false,
        meaning: "host CPU interrupt entry and handler per MSI (the MSI itself is a 4-byte posted write)",
        source: "Rockchip PCIe performance guide §7.3, RK3588 row: one MSI per 2 us",
    },
    ParamSpec {
        key: "interrupts.elbi_trigger_ns",
        unit: "ns",
        default: 2000.0,
        min: MIN_INTERRUPT_NS,
        max: 1e7,
        integer: false,
        meaning: "interval at which the root complex can write the endpoint's ELBI register (config write)",
        source: "Rockchip PCIe performance guide §6.4: ELBI register write rate 2 us on RK3588",
    },
    ParamSpec {
        key: "interrupts.elbi_cpu_ns",
        unit: "ns",
        default: 6000.0,
        min: MIN_INTERRUPT_NS,
        max: 1e7,
        integer: false,
        meaning: "endpoint CPU interrupt entry and handler per ELBI interrupt",
        source: "Rockchip PCIe performance guide §6.3, RK3588 row: one ELBI per 6 us",
    },
    // blk-mq completes a request on the CPU that submitted it when the interrupted CPU shares
    // no cache with it (block/blk-mq.c, blk_mq_complete_need_ipi): a completion taken on the
    // far node costs an inter-processor interrupt back across the socket interconnect, and the
    // handler's reads of the completion entry and request miss to remote memory.
    ParamSpec {
        key: "interrupts.cross_node_ns",
        unit: "ns",
        default: 1000.0,
        min: 0.0,
        max: 1e6,
        integer: false,
        meaning: "extra time per I/O completion when the device's interrupt is taken on a CPU of another NUMA node than the device and the submitting thread",
        source: "assumption, not measured: one cross-socket IPI back to the submitting CPU (blk_mq_complete_need_ipi) plus a few remote cache misses; fit it on a host",
    },
];

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
    pub values: [f64; PARAMS.len()],
    /// Which measurements the values come from (free text; "defaults" when none).
    pub fitted_on: String,
    /// Keys (`section.key`) whose values were fitted rather than defaulted.
    pub fitted: Vec<String>,
    /// Whether a spec gave it (a non-empty `[platform]` table) rather than the defaults alone:
    /// only then does `stat` on `sim:` print its predictions beside the link's rates.
    pub given: bool,
    /// The DMA measurements the fit saw: a prediction of one of these is in-sample.
    pub fitted_cells: Vec<FittedCell>,
    /// One standard deviation of each fitted parameter that has one, by key.
    pub uncertainty: Vec<(String, f64)>,
}

/// One DMA measurement a platform was fitted on: direction, size and the link it ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FittedCell {
    pub direction: DmaDirection,
    pub size: u64,
    pub gen: u8,
    pub width: u8,
}

impl FittedCell {
    /// `write 64 B Gen3 x4`: how `[platform] fitted_cells` lists it.
    pub fn text(&self) -> String {
        let direction = match self.direction {
            DmaDirection::Write => "write",
            DmaDirection::Read => "read",
        };
        format!(
            "{direction} {} B Gen{} x{}",
            self.size, self.gen, self.width
        )
    }

    fn parse(text: &str) -> Option<FittedCell> {
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
    pub fn on(&self, link: &LinkParams) -> bool {
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
pub struct PlatformDma {
    /// Device to memory, MB/s.
    #[serde(
        rename = "platform_dma_write_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub write_mbps: Option<f64>,
    /// Memory to device, MB/s.
    #[serde(
        rename = "platform_dma_read_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub read_mbps: Option<f64>,
    /// Whether the two rates reproduce the fit's data or predict (and on what link).
    #[serde(
        rename = "platform_dma_provenance",
        skip_serializing_if = "Option::is_none"
    )]
    pub provenance: Option<Provenance>,
}

/// Where a platform number stands against the measurements the platform was fitted on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
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
    pub fn text(self) -> &'static str {
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
    pub fn get(&self, p: P) -> f64 {
        self.values[p as usize]
    }

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

    /// Reads the `[platform]` table of a spec (or a fragment holding only it). Every key is
    /// checked: unknown keys, non-numbers and values outside a parameter's range are bad input
    /// naming `file`, the key and the valid range.
    pub(crate) fn from_table(file: &str, table: &toml::Table) -> Result<PlatformModel> {
        let mut model = PlatformModel {
            given: !table.is_empty(),
            ..PlatformModel::default()
        };
        let sections: Vec<&str> = {
            let mut s: Vec<&str> = PARAMS
                .iter()
                .map(|p| p.key.split('.').next().unwrap_or_default())
                .collect();
            s.dedup();
            s
        };
        for (section, value) in table {
            if section == "fitted" {
                let keys = value.as_array().ok_or_else(|| {
                    Error::bad_input(format!("{file}: [platform] fitted must be a list of keys"))
                })?;
                for entry in keys {
                    let key = entry
                        .as_str()
                        .filter(|k| PARAMS.iter().any(|p| p.key == *k));
                    let key = key.ok_or_else(|| {
                        Error::bad_input(format!(
                            "{file}: [platform] fitted lists {entry}, which is not a parameter key"
                        ))
                    })?;
                    model.fitted.push(key.to_string());
                }
                continue;
            }
            if section == "uncertainty" {
                let bad = || {
                    Error::bad_input(format!(
                        "{file}: [platform] uncertainty must map parameter keys to numbers ≥ 0, \
                         e.g. {{ \"dma.setup_ns\" = 136.0 }}"
                    ))
                };
                for (key, sigma) in value.as_table().ok_or_else(bad)? {
                    let sigma = match sigma {
                        toml::Value::Float(f) => *f,
                        toml::Value::Integer(n) => *n as f64,
                        _ => return Err(bad()),
                    };
                    if !PARAMS.iter().any(|p| p.key == key) || sigma.is_nan() || sigma < 0.0 {
                        return Err(bad());
                    }
                    model.uncertainty.push((key.clone(), sigma));
                }
                continue;
            }
            if section == "fitted_cells" {
                let cells = value.as_array().ok_or_else(|| {
                    Error::bad_input(format!(
                        "{file}: [platform] fitted_cells must be a list like [\"write 64 B Gen3 x4\"]"
                    ))
                })?;
                for entry in cells {
                    let cell = entry.as_str().and_then(FittedCell::parse).ok_or_else(|| {
                        Error::bad_input(format!(
                            "{file}: [platform] fitted_cells lists {entry}: expected \
                             \"write|read SIZE B GenG xW\", e.g. \"write 64 B Gen3 x4\""
                        ))
                    })?;
                    model.fitted_cells.push(cell);
                }
                continue;
            }
            if section == "fitted_on" {
                model.fitted_on = value
                    .as_str()
                    .ok_or_else(|| {
                        Error::bad_input(format!("{file}: [platform] fitted_on must be a string"))
                    })?
                    .to_string();
                continue;
            }
            let Some(keys) = value
                .as_table()
                .filter(|_| sections.contains(&section.as_str()))
            else {
                return Err(Error::bad_input(format!(
                    "{file}: [platform] has no section '{section}': valid are fitted_on, fitted, fitted_cells, uncertainty and {}",
                    sections.join(", ")
                )));
            };
            for (key, value) in keys {
                let full = format!("{section}.{key}");
                let Some(i) = PARAMS.iter().position(|p| p.key == full) else {
                    let valid: Vec<&str> = PARAMS
                        .iter()
                        .filter_map(|p| p.key.strip_prefix(&format!("{section}.")))
                        .collect();
                    return Err(Error::bad_input(format!(
                        "{file}: [platform.{section}] has no key '{key}': valid are {}",
                        valid.join(", ")
                    )));
                };
                let spec = &PARAMS[i];
                let number = match value {
                    toml::Value::Float(f) => *f,
                    toml::Value::Integer(n) => *n as f64,
                    other => {
                        return Err(Error::bad_input(format!(
                            "{file}: [platform] {full} = {other} is not a number ({})",
                            spec.unit
                        )))
                    }
                };
                if number.is_nan()
                    || number < spec.min
                    || number > spec.max
                    || (spec.integer && number.fract() != 0.0)
                {
                    return Err(Error::bad_input(format!(
                        "{file}: [platform] {full} = {number} is out of range: expected {} from {} to {} {}",
                        if spec.integer { "a whole number" } else { "a number" },
                        spec.min,
                        spec.max,
                        spec.unit
                    )));
                }
                model.values[i] = number;
            }
        }
        Ok(model)
    }

    /// The `[platform]` table as TOML text: every parameter, with its unit and meaning as a
    /// comment. Unbounded rates are written as `inf` (TOML's infinity).
    pub fn to_toml(&self) -> String {
        let mut text = String::from("[platform]\n");
        text.push_str(&format!("fitted_on = {:?}\n", self.fitted_on));
        text.push_str(&format!("fitted = {:?}\n", self.fitted));
        let cells: Vec<String> = self.fitted_cells.iter().map(FittedCell::text).collect();
        text.push_str(&format!("fitted_cells = {cells:?}\n"));
        let sigmas: Vec<String> = self
            .uncertainty
            .iter()
            .map(|(key, sigma)| format!("{key:?} = {sigma}"))
            .collect();
        text.push_str(&format!("uncertainty = {{ {} }}\n", sigmas.join(", ")));
        let mut section = "";
        for (spec, value) in PARAMS.iter().zip(self.values) {
            let (sec, key) = spec.key.split_once('.').unwrap_or(("", spec.key));
            if sec != section {
                text.push_str(&format!("\n[platform.{sec}]\n"));
                section = sec;
            }
            let shown = if value.is_infinite() {
                "inf".to_string()
            } else if spec.integer {
                format!("{}", value.round() as i64)
            } else {
                format!("{}", crate::text::round_to(value, 4))
            };
            text.push_str(&format!(
                "{key} = {shown}  # {}: {}\n",
                spec.unit, spec.meaning
            ));
        }
        text
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
    pub fn dma_mbps(&self, direction: DmaDirection, size: u64, link: &LinkParams) -> f64 {
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
    pub fn sigma(&self, p: P) -> Option<f64> {
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
    pub fn drive_request(
        &self,
        read: bool,
        bs: u64,
        access_ns: f64,
        in_flight: f64,
    ) -> super::io::RequestResponse {
        let (mbps, iops) = if read {
            (self.get(P::DriveReadMbps), self.get(P::DriveReadIops))
        } else {
            (self.get(P::DriveWriteMbps), self.get(P::DriveWriteIops))
        };
        super::io::RequestResponse {
            access_ns,
            service_ns: super::io::drive_service_ns(bs, mbps, iops),
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
    pub kind: IrqKind,
    /// Time between interrupts when raised back to back (the Rockchip guide prints it in µs).
    pub interval_ns: f64,
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

/// Reads the `[platform]` table of the spec or fragment at `path` (a `--platform` argument).
pub fn read_platform_file(path: &str) -> Result<PlatformModel> {
    let text = crate::input::read_input_file(std::path::Path::new(path), "--platform")?;
    parse_platform(path, &text)
}

/// `[sim]` keys that now live in `[platform]`, with where: a spec still setting one would be
/// simulated with the platform's defaults, so every reader of a spec refuses it by name.
pub const MOVED_SIM_KEYS: [(&str, &str); 2] = [
    (
        "rc_read_latency_ns",
        "[platform.root_complex] read_latency_ns",
    ),
    ("cpu_io_ns", "[platform.cpu] read_io_ns and write_io_ns"),
];

/// Reads `[platform]` from a TOML file's text: a whole spec or a fragment with only that table.
/// A file without `[platform]` is bad input (it would silently predict with defaults), and so
/// is a `[sim]` table still setting a key that moved to `[platform]`, as when the spec is opened
/// as a machine.
pub fn parse_platform(file: &str, text: &str) -> Result<PlatformModel> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        Error::bad_input(format!(
            "{file}: not valid TOML: {}",
            e.message().trim_end()
        ))
    })?;
    if let Some(sim) = table.get("sim").and_then(|v| v.as_table()) {
        if let Some((old, new)) = MOVED_SIM_KEYS
            .iter()
            .find(|(old, _)| sim.contains_key(*old))
        {
            return Err(Error::bad_input(format!(
                "{file}: [sim]: '{old}' moved to the platform model: set {new} (docs/calibration.md)"
            )));
        }
    }
    let platform = table
        .get("platform")
        .and_then(|v| v.as_table())
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{file}: no [platform] table: write one with `pcielab fit … --out {file}` \
             (keys in docs/calibration.md)"
            ))
        })?;
    PlatformModel::from_table(file, platform)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Generation;

    #[test]
    fn toml_round_trips_and_bad_values_name_the_key() {
        let mut m = PlatformModel::default();
        m.set(P::DmaSetupNs, 4374.5);
        m.set(P::DmaMaxReadRequests, 2.0);
        m.fitted = vec!["dma.setup_ns".into()];
        m.fitted_on = "a table".into();
        // Read back from a file, the model is one a spec gives.
        m.given = true;
        let back = parse_platform("p.toml", &m.to_toml()).unwrap();
        assert_eq!(back, m);
        assert!(back.is_fitted(P::DmaSetupNs));
        let e = parse_platform("p.toml", "[platform.dma]\nsetup_ns = -1\n").unwrap_err();
        assert!(
            e.message()
                .contains("p.toml: [platform] dma.setup_ns = -1 is out of range"),
            "{e}"
        );
        let e = parse_platform("p.toml", "[platform.dma]\nsetup = 1\n").unwrap_err();
        assert!(
            e.message().contains("has no key 'setup'") && e.message().contains("setup_ns"),
            "{e}"
        );
        let e = parse_platform("p.toml", "[platform.dma]\nmax_read_requests = 2.5\n").unwrap_err();
        assert!(e.message().contains("a whole number"), "{e}");
        assert!(parse_platform("p.toml", "[sim]\n")
            .unwrap_err()
            .message()
            .contains("no [platform]"));
    }

    #[test]
    fn mmio_stores_pay_an_issue_interval_and_loads_a_round_trip() {
        let m = PlatformModel::default();
        let link = LinkParams::new(Generation::Gen3, 4);
        // 4 B per 75 ns issue interval; 16 B per interval: width scales stores.
        let s4 = m.mmio_mbps(MmioOp::Store, 4, 1, false, &link);
        assert!((s4 - 4.0 / 75.0 * 1000.0).abs() < 1e-9, "{s4}");
        assert!((m.mmio_mbps(MmioOp::Store, 16, 1, false, &link) / s4 - 4.0).abs() < 1e-9);
        // Threads share the one outbound path.
        assert_eq!(m.mmio_mbps(MmioOp::Store, 4, 4, false, &link), s4);
        // Write-combining merges 4-byte stores into 64-byte writes.
        assert!((m.mmio_mbps(MmioOp::Store, 4, 1, true, &link) / s4 - 16.0).abs() < 1e-9);
        // Loads: one in flight, latency plus the request's and completion's link time.
        let l4 = m.mmio_mbps(MmioOp::Load, 4, 1, false, &link);
        assert!(
            l4 < 4.0 / 950.0 * 1000.0 && l4 > 4.0 / 1000.0 * 1000.0,
            "{l4}"
        );
        // One load per thread, but the root complex's one slot: more threads do not help (§5.4.2)
        // until it has more.
        assert_eq!(m.mmio_mbps(MmioOp::Load, 4, 4, false, &link), l4);
        let mut wide = m.clone();
        wide.set(P::MmioLoadsOutstanding, 2.0);
        let l4x2 = wide.mmio_mbps(MmioOp::Load, 4, 4, false, &link);
        assert!((l4x2 / l4 - 2.0).abs() < 1e-9, "{l4x2}");
        assert_eq!(wide.mmio_mbps(MmioOp::Load, 4, 1, false, &link), l4);
    }

    #[test]
    fn a_per_tlp_slot_makes_one_byte_past_mps_or_mrrs_cost_a_whole_slot() {
        let link = LinkParams::new(Generation::Gen3, 8);
        // A 256 B Memory Write is 276 wire bytes: 35 ns at Gen3 x8 (7877 MB/s), under 100.
        let full_tlp = write(256, &link).link_time_ns(&link, Overheads::Full);
        assert!(full_tlp > 30.0 && full_tlp < 40.0, "{full_tlp}");
        let mut m = PlatformModel::default();
        let time = |m: &PlatformModel, d, s| m.dma_transfer_ns(d, s, &link);
        // Without a slot one more byte costs about a byte's wire time plus a TLP's overhead.
        let step = time(&m, DmaDirection::Write, 257) - time(&m, DmaDirection::Write, 256);
        assert!(step < 5.0, "{step}");
        m.set(P::DmaWriteTlpNs, 100.0);
        m.set(P::DmaReadTlpNs, 400.0);
        let step = time(&m, DmaDirection::Write, 257) - time(&m, DmaDirection::Write, 256);
        assert!((step - 100.0).abs() < 0.5, "{step}");
        // Whole TLPs: 4 slots for 1 KB, whatever the bytes inside them.
        let kb = time(&m, DmaDirection::Write, 1024) - time(&m, DmaDirection::Write, 64);
        assert!((kb - 300.0).abs() < 0.5, "{kb}");
        // Reads: one byte past MRRS is one more request and its slot (the stream bound rules
        // with eight requests in flight and no latency).
        m.set(P::ReadLatencyNs, 0.0);
        m.set(P::ReadLatencyPerByteNs, 0.0);
        let step = time(&m, DmaDirection::Read, 2049) - time(&m, DmaDirection::Read, 2048);
        assert!((step - 400.0).abs() < 1.0, "{step}");
    }

    #[test]
    fn in_sample_cells_and_another_link_are_told_apart() {
        let mut m = PlatformModel::default();
        let gen3x4 = LinkParams::new(Generation::Gen3, 4);
        let gen2x1 = LinkParams::new(Generation::Gen2, 1);
        assert_eq!(
            m.link_warning(&gen2x1),
            None,
            "no cells: nothing to compare"
        );
        m.fitted_cells = vec![FittedCell {
            direction: DmaDirection::Write,
            size: 64,
            gen: 3,
            width: 4,
        }];
        assert!(m.in_sample(DmaDirection::Write, 64, &gen3x4));
        assert!(!m.in_sample(DmaDirection::Read, 64, &gen3x4));
        assert!(!m.in_sample(DmaDirection::Write, 64, &gen2x1));
        assert_eq!(m.link_warning(&gen3x4), None);
        let w = m.link_warning(&gen2x1).unwrap();
        assert!(
            w.starts_with("platform fitted on Gen3 x4 only, applied to Gen2 x1"),
            "{w}"
        );
        let back = parse_platform("p.toml", &m.to_toml()).unwrap();
        assert_eq!(back.fitted_cells, m.fitted_cells);
        let e = parse_platform(
            "p.toml",
            "[platform]\nfitted_cells = [\"write 64 Gen3 x4\"]\n",
        )
        .unwrap_err();
        assert!(e.message().contains("\"write 64 B Gen3 x4\""), "{e}");
    }

    #[test]
    fn interrupts_follow_the_slower_of_trigger_and_handler() {
        let m = PlatformModel::default();
        let link = LinkParams::new(Generation::Gen3, 4);
        // ELBI: the endpoint's 6 µs handler, not the 2 µs register write, sets the pace (§6.3).
        assert_eq!(m.irq_interval_ns(IrqKind::Elbi, &link), 6000.0);
        // MSI: the 2 µs CPU cost plus a 4-byte posted write's few nanoseconds on the link.
        let msi = m.irq_interval_ns(IrqKind::Msi, &link);
        assert!(msi > 2000.0 && msi < 2010.0, "{msi}");
    }
}
