//! The platform model's parameters, one table: each one's `[platform]` key, unit, meaning,
//! default, the source of that default and its valid range ([`PARAMS`], indexed by [`P`]).

/// One platform parameter: where it lives in `[platform]`, what it means, and its range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ParamSpec {
    /// `section.key` under `[platform]`.
    pub(crate) key: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) default: f64,
    /// Bounds the fit respects and the spec reader enforces.
    pub(crate) min: f64,
    pub(crate) max: f64,
    /// Whole numbers only (counts).
    pub(crate) integer: bool,
    pub(crate) meaning: &'static str,
    /// Where the default comes from.
    pub(crate) source: &'static str,
}

/// Index of each parameter in `PARAMS` and in [`PlatformModel`]'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum P {
    /// `root_complex.posted_write_MBps` (MB/s): payload rate at which the root complex and memory accept a device's posted writes.
    PostedWriteMbps,
    /// `root_complex.completion_MBps` (MB/s): payload rate at which the root complex generates completions for device reads.
    CompletionMbps,
    /// `root_complex.read_latency_ns` (ns): fixed part of a device read's round trip beyond the link: request arrival to first completion.
    ReadLatencyNs,
    /// `root_complex.read_latency_per_byte_ns` (ns/B): extra round-trip time per byte a read request asks for (memory fetch and completion build).
    ReadLatencyPerByteNs,
    /// `dma.setup_ns` (ns): endpoint DMA engine: descriptor programming, doorbell and done-polling per transfer.
    DmaSetupNs,
    /// `dma.max_read_requests` (requests): read requests (tags) the device's DMA engine keeps in flight when it reads host memory.
    DmaMaxReadRequests,
    /// `dma.descriptor_bytes` (B): descriptor and status bytes crossing the link per transfer, at the link-achievable rate.
    DmaDescriptorBytes,
    /// `dma.write_tlp_ns` (ns): least time one posted Memory Write TLP of a DMA write occupies the path to memory, whatever its payload (the wire time when longer).
    DmaWriteTlpNs,
    /// `dma.read_tlp_ns` (ns): least time one read request of a DMA read and its completions occupy the path, whatever their size (the wire time when longer).
    DmaReadTlpNs,
    /// `cpu.read_io_ns` (ns): CPU time one submitting thread spends per read I/O (submission, completion, block layer).
    CpuReadIoNs,
    /// `cpu.write_io_ns` (ns): CPU time one submitting thread spends per write I/O.
    CpuWriteIoNs,
    /// `drive.read_MBps` (MB/s): the storage device's own sequential read bandwidth (media and controller).
    DriveReadMbps,
    /// `drive.write_MBps` (MB/s): the storage device's own sequential write bandwidth.
    DriveWriteMbps,
    /// `drive.read_iops` (I/O per s): the storage device's own 4 KiB random read IOPS limit.
    DriveReadIops,
    /// `drive.write_iops` (I/O per s): the storage device's own 4 KiB random write IOPS limit.
    DriveWriteIops,
    /// `mmio.store_issue_ns` (ns): interval between posted MMIO stores leaving the CPU for the link (one TLP each).
    MmioStoreIssueNs,
    /// `mmio.load_latency_ns` (ns): round trip of one non-posted MMIO load beyond the link's serialisation.
    MmioLoadLatencyNs,
    /// `mmio.loads_outstanding` (loads): MMIO loads in flight at once across all threads (the root complex's outbound non-posted slots).
    MmioLoadsOutstanding,
    /// `mmio.loads_per_thread` (loads): MMIO loads one CPU thread keeps in flight (device memory: each load waits for its data).
    MmioLoadsPerThread,
    /// `mmio.write_combining_bytes` (B): bytes a write-combining mapping merges into one Memory Write (a cache line).
    MmioWriteCombiningBytes,
    /// `interrupts.msi_cpu_ns` (ns): host CPU interrupt entry and handler per MSI (the MSI itself is a 4-byte posted write).
    MsiCpuNs,
    /// `interrupts.elbi_trigger_ns` (ns): interval at which the root complex can write the endpoint's ELBI register (config write).
    ElbiTriggerNs,
    /// `interrupts.elbi_cpu_ns` (ns): endpoint CPU interrupt entry and handler per ELBI interrupt.
    ElbiCpuNs,
    /// `interrupts.cross_node_ns` (ns): extra time per I/O completion when the device's interrupt is taken on a CPU of another NUMA node than the device and the submitting thread.
    CrossNodeIrqNs,
}

const UNBOUNDED: f64 = f64::INFINITY;

/// Every parameter, in [`P`] order.
/// The least an interrupt may cost the CPU (or its trigger) in the model: a few cycles. Zero would
/// make the predicted rate infinite (and a handful of ns already means hundreds of millions per
/// second, far beyond any measured interrupt rate).
const MIN_INTERRUPT_NS: f64 = 10.0;

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
