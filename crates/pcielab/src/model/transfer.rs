//! Per-transfer TLP accounting: how one DMA write or read of `size` bytes at an address splits into
//! Memory Write, Memory Read and Completion-with-Data TLPs under MPS, MRRS and RCB, how many bytes
//! each direction of the link then carries (payload, header/digest/framing, Ack and UpdateFC
//! DLLPs), and what that means for throughput and time. Pure O(1) arithmetic: the simulator calls
//! it once per I/O. Directions assume the endpoint is the requester (device DMA): its requests
//! and write data go upstream, completions come downstream; `Traffic::reversed` gives the view
//! for CPU-initiated (MMIO) traffic.

use crate::error::{Error, Result};
use crate::pcie::dllp::{dllps_for_stream, latency_intervals, DLLP_WIRE_BYTES};
use crate::pcie::flit::wire_bytes_for_tlp_bytes;
use crate::pcie::link::{per_generation, raw_mbps};
use crate::pcie::tlp::{overhead_bytes, TlpFormat, TlpKind};
use crate::pcie::Generation;

/// How a completer splits the data of one read request into completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompletionSize {
    /// As few completions as the rules allow: each at most MPS, split only at RCB boundaries.
    #[default]
    Mps,
    /// One completion per RCB-aligned block (what many root complexes do, e.g. 64-byte ones).
    Rcb,
}

/// Which overheads a throughput figure includes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overheads {
    /// TLP headers, digest, framing, FLIT structure, Ack/UpdateFC DLLPs and SKP ordered sets.
    Full,
    /// As `Full` without DLLPs and SKP ordered sets (the seed's §2.2 view).
    Ideal,
}

/// The largest single transfer pcielab models or simulates: 1 TiB, several seconds of the widest
/// link the specification defines (Gen7 x32, about 242 GB/s of payload per direction). Larger
/// sizes describe no DMA a device issues, and bounding them keeps every TLP and wire-byte count
/// far inside u64.
pub(crate) const MAX_TRANSFER_BYTES: u64 = 1 << 40;

/// `size` when it is a transfer size pcielab models (1 ..= [`MAX_TRANSFER_BYTES`]); otherwise bad
/// input naming `what` and the bound.
pub(crate) fn transfer_size(what: &str, size: u64) -> crate::Result<u64> {
    if (1..=MAX_TRANSFER_BYTES).contains(&size) {
        Ok(size)
    } else {
        Err(crate::Error::bad_input(format!(
            "{what}: {size} bytes is not a transfer size: expected 1 to {MAX_TRANSFER_BYTES} (1 TiB, \
             seconds of the widest PCIe link)"
        )))
    }
}

/// A link and the transaction-layer settings that shape its traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkParams {
    /// The link's generation (its rate and encoding).
    pub gen: Generation,
    /// Lanes.
    pub width: u8,
    /// Max_Payload_Size in bytes.
    pub mps: u32,
    /// Max_Read_Request_Size in bytes.
    pub mrrs: u32,
    /// Read Completion Boundary in bytes.
    pub rcb: u32,
    /// The TLP header format (non-Flit 3 or 4 DW headers, or Flit mode).
    pub format: TlpFormat,
    /// How completions for reads are split.
    pub completion_size: CompletionSize,
}

impl LinkParams {
    /// Link widths the spec defines.
    pub(crate) const WIDTHS: [u8; 7] = [1, 2, 4, 8, 12, 16, 32];
    /// Legal MPS and MRRS values.
    pub(crate) const SIZES: [u32; 6] = [128, 256, 512, 1024, 2048, 4096];
    /// Legal RCB values.
    pub(crate) const RCBS: [u32; 2] = [64, 128];

    /// A link with the common defaults: MPS 256, MRRS 512, RCB 64, 32-bit addressing, no ECRC.
    pub fn new(gen: Generation, width: u8) -> LinkParams {
        LinkParams {
            gen,
            width,
            mps: 256,
            mrrs: 512,
            rcb: 64,
            format: TlpFormat::default(),
            completion_size: CompletionSize::Mps,
        }
    }

    /// Checks every field against the spec's legal values; the error names the field.
    pub fn validate(&self) -> Result<()> {
        if !Self::WIDTHS.contains(&self.width) {
            return Err(Error::bad_input(format!(
                "width {} is not a PCIe link width: valid are 1, 2, 4, 8, 12, 16, 32",
                self.width
            )));
        }
        for (name, value) in [("mps", self.mps), ("mrrs", self.mrrs)] {
            if !Self::SIZES.contains(&value) {
                return Err(Error::bad_input(format!(
                    "{name} {value} is not valid: expected a power of two from 128 to 4096 \
                     (128, 256, 512, 1024, 2048, 4096)"
                )));
            }
        }
        if !Self::RCBS.contains(&self.rcb) {
            return Err(Error::bad_input(format!(
                "rcb {} is not valid: expected 64 or 128",
                self.rcb
            )));
        }
        Ok(())
    }

    /// MB/s one direction can carry after line encoding, less SKP ordered sets under `Full`.
    #[inline]
    pub(crate) fn capacity_mbps(&self, overheads: Overheads) -> f64 {
        let raw = raw_mbps(self.gen, self.width);
        match overheads {
            Overheads::Full => raw * per_generation(self.gen).after_skp,
            Overheads::Ideal => raw,
        }
    }

    #[inline]
    fn overhead(&self, kind: TlpKind) -> u64 {
        u64::from(overhead_bytes(kind, self.format, self.gen))
    }
}

/// Transfers long enough that DLLP coalescing reaches its steady state.
const STREAM_TLPS: u64 = 4096;

/// The link-achievable payload rate, MB/s per direction: a long stream of Max_Payload_Size
/// writes with every per-TLP, DLLP, SKP (and FLIT) overhead charged. This is what "% of link"
/// compares against; the line rate (after encoding only) is about 7-10 % higher and cannot be
/// reached by payload.
pub(crate) fn achievable_mbps(link: &LinkParams) -> f64 {
    write(u64::from(link.mps) * STREAM_TLPS, link).throughput_mbps(link, Overheads::Full)
}

/// Wire bytes per payload byte on a link carrying long streams of device DMA, for turning byte
/// counts that know only the payload (a PMU's data-payload counter, a disk's sectors, a NIC's
/// bytes) into an estimate of what crossed the link: TLP headers, digest and framing, and the
/// Ack/UpdateFC DLLPs each direction returns for the other (`Overheads::Full`, SKP excluded).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WireEstimate {
    /// Per byte the device writes to memory (Memory Writes up): (upstream, downstream) bytes.
    per_byte_up: (f64, f64),
    /// Per byte the device reads from memory (requests up, completions down).
    per_byte_down: (f64, f64),
}

impl WireEstimate {
    /// The estimate for `link`'s MPS, MRRS and generation: MPS-sized writes, MRRS-sized reads.
    pub(crate) fn for_link(link: &LinkParams) -> WireEstimate {
        let per_byte = |t: Traffic| {
            let payload = t.payload_bytes as f64;
            (
                t.upstream.wire_bytes(link.gen, Overheads::Full) / payload,
                t.downstream.wire_bytes(link.gen, Overheads::Full) / payload,
            )
        };
        WireEstimate {
            per_byte_up: per_byte(write(u64::from(link.mps) * STREAM_TLPS, link)),
            per_byte_down: per_byte(read(u64::from(link.mrrs) * STREAM_TLPS, link)),
        }
    }

    /// (upstream, downstream) wire bytes for `up` payload bytes moved toward the root complex
    /// and `down` bytes moved away from it.
    pub(crate) fn wire_bytes(&self, up: u64, down: u64) -> (f64, f64) {
        let (up, down) = (up as f64, down as f64);
        (
            up * self.per_byte_up.0 + down * self.per_byte_down.0,
            up * self.per_byte_up.1 + down * self.per_byte_down.1,
        )
    }
}

/// What travels in one direction of the link for one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Flow {
    /// TLPs in this direction.
    pub tlps: u64,
    /// Data bytes those TLPs carry.
    pub payload_bytes: u64,
    /// Header, ECRC and per-TLP framing bytes of those TLPs.
    pub(crate) tlp_overhead_bytes: u64,
    /// Expected Ack DLLPs (fractional: the spec's rule is per time interval, so a long stream of
    /// transfers shares them; sum over transfers before rounding).
    pub(crate) acks: f64,
    /// Expected UpdateFC DLLPs, counted like `acks`.
    pub(crate) update_fcs: f64,
}

impl Flow {
    /// Payload plus per-TLP overhead.
    #[inline]
    pub(crate) fn tlp_bytes(&self) -> u64 {
        self.payload_bytes.saturating_add(self.tlp_overhead_bytes)
    }

    /// Expected DLLPs (Acks and UpdateFCs) for this direction.
    #[inline]
    pub(crate) fn dllps(&self) -> f64 {
        self.acks + self.update_fcs
    }

    /// Bytes this direction puts on the link (after framing, before line encoding and SKP). In
    /// FLIT mode TLP bytes are carried at 256/236 and DLLP information rides inside the flits.
    #[inline]
    pub(crate) fn wire_bytes(&self, gen: Generation, overheads: Overheads) -> f64 {
        let tlp_bytes = self.tlp_bytes() as f64;
        if gen.is_flit() {
            return wire_bytes_for_tlp_bytes(tlp_bytes);
        }
        match overheads {
            Overheads::Full => tlp_bytes + self.dllps() * f64::from(DLLP_WIRE_BYTES),
            Overheads::Ideal => tlp_bytes,
        }
    }
}

impl std::ops::AddAssign for Flow {
    fn add_assign(&mut self, other: Flow) {
        self.tlps += other.tlps;
        self.payload_bytes += other.payload_bytes;
        self.tlp_overhead_bytes += other.tlp_overhead_bytes;
        self.acks += other.acks;
        self.update_fcs += other.update_fcs;
    }
}

/// The TLPs and bytes of one transfer, per TLP type and per direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Traffic {
    pub(crate) gen: Generation,
    /// Memory write TLPs.
    pub mem_writes: u64,
    /// Memory read request TLPs.
    pub mem_reads: u64,
    /// Completion-with-data TLPs.
    pub completions: u64,
    /// Bytes of data moved (the transfer size).
    pub payload_bytes: u64,
    /// Toward the root complex (the requester's requests and write data, Acks for completions).
    pub upstream: Flow,
    /// Toward the endpoint (completions, Acks and UpdateFCs for the requests and writes).
    pub downstream: Flow,
}

impl Traffic {
    pub(crate) fn empty(gen: Generation) -> Traffic {
        Traffic {
            gen,
            mem_writes: 0,
            mem_reads: 0,
            completions: 0,
            payload_bytes: 0,
            upstream: Flow::default(),
            downstream: Flow::default(),
        }
    }

    /// The same transfer issued by the CPU towards the endpoint (MMIO): directions swap.
    #[cfg(test)]
    pub(crate) fn reversed(self) -> Traffic {
        Traffic {
            upstream: self.downstream,
            downstream: self.upstream,
            ..self
        }
    }

    /// Wire bytes of the busier direction: the one that sets the transfer's pace.
    #[inline]
    pub(crate) fn busiest_wire_bytes(&self, overheads: Overheads) -> f64 {
        self.upstream
            .wire_bytes(self.gen, overheads)
            .max(self.downstream.wire_bytes(self.gen, overheads))
    }

    /// Time the transfer occupies the link at full rate, in nanoseconds.
    pub(crate) fn link_time_ns(&self, link: &LinkParams, overheads: Overheads) -> f64 {
        // MB/s is bytes per microsecond.
        self.busiest_wire_bytes(overheads) / link.capacity_mbps(overheads) * 1000.0
    }

    /// Payload MB/s when transfers like this one follow each other back to back.
    #[inline]
    pub fn throughput_mbps(&self, link: &LinkParams, overheads: Overheads) -> f64 {
        let wire = self.busiest_wire_bytes(overheads);
        if wire == 0.0 {
            return 0.0;
        }
        self.payload_bytes as f64 / wire * link.capacity_mbps(overheads)
    }

    /// Payload bytes over busiest-direction wire bytes: the share of the link doing useful work.
    #[cfg(test)]
    pub(crate) fn efficiency(&self, overheads: Overheads) -> f64 {
        let wire = self.busiest_wire_bytes(overheads);
        if wire == 0.0 {
            return 0.0;
        }
        self.payload_bytes as f64 / wire
    }
}

/// Accumulates transfers on one link (a simulator's running totals); both must be on the same
/// generation, since wire bytes depend on it.
impl std::ops::AddAssign for Traffic {
    fn add_assign(&mut self, other: Traffic) {
        assert_eq!(
            self.gen, other.gen,
            "adding traffic of different generations"
        );
        self.mem_writes += other.mem_writes;
        self.mem_reads += other.mem_reads;
        self.completions += other.completions;
        self.payload_bytes += other.payload_bytes;
        self.upstream += other.upstream;
        self.downstream += other.downstream;
    }
}

/// `value / divisor` and `value % divisor` as a shift and a mask when `divisor` is a power of
/// two, as MPS, MRRS and RCB always are on a valid link (a 64-bit division costs tens of cycles;
/// any other divisor still divides).
#[inline]
fn div_rem(value: u64, divisor: u64) -> (u64, u64) {
    if divisor.is_power_of_two() {
        (value >> divisor.trailing_zeros(), value & (divisor - 1))
    } else {
        (value / divisor, value % divisor)
    }
}

/// How many `align`-aligned blocks the byte range `[addr, addr + len)` touches.
#[inline]
fn blocks_touched(addr: u64, len: u64, align: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    div_rem(addr + len - 1, align).0 - div_rem(addr, align).0 + 1
}

/// Completions a completer returns for one request `[start, end)` under the MPS policy: each at
/// most MPS bytes, every one but the last ending on an RCB boundary.
#[inline]
fn completions_for_request(start: u64, end: u64, mps: u64, rcb: u64) -> u64 {
    if end - start <= mps {
        return 1;
    }
    // The first completion runs to the last RCB boundary within MPS; after it, every completion
    // starts RCB-aligned and, MPS being a multiple of RCB, carries a full MPS.
    let first_end = start + mps - div_rem(start + mps, rcb).1;
    let (whole, part) = div_rem(end - first_end, mps);
    1 + whole + u64::from(part > 0)
}

/// The read `[addr, addr + len)` (`len > 0`) split into MRRS-aligned requests: (requests,
/// completions). The requests are the first one (up to the first MRRS boundary), whole MRRS
/// requests and a tail, so both counts come from one split.
#[inline]
fn read_split(addr: u64, len: u64, link: &LinkParams) -> (u64, u64) {
    let (mps, mrrs, rcb) = (
        u64::from(link.mps),
        u64::from(link.mrrs),
        u64::from(link.rcb),
    );
    let end = addr + len;
    let first_end = end.min((div_rem(addr, mrrs).0 + 1) * mrrs);
    let (full_requests, tail) = div_rem(end - first_end, mrrs);
    let requests = 1 + full_requests + u64::from(tail > 0);
    if link.completion_size == CompletionSize::Rcb {
        return (requests, blocks_touched(addr, len, rcb));
    }
    let mut completions = completions_for_request(addr, first_end, mps, rcb);
    if full_requests > 0 {
        completions += full_requests * completions_for_request(0, mrrs, mps, rcb);
    }
    if tail > 0 {
        completions += completions_for_request(0, tail, mps, rcb);
    }
    (requests, completions)
}

/// A device DMA write of `size` bytes starting at an MPS-aligned address.
#[inline]
pub(crate) fn write(size: u64, link: &LinkParams) -> Traffic {
    write_at(0, size, link)
}

/// A device DMA write of `size` bytes at `addr`: Memory Writes split at MPS-aligned boundaries
/// (which also keeps each inside a 4 KiB page), carried upstream; Acks and UpdateFC-P for them
/// travel downstream.
#[inline]
pub fn write_at(addr: u64, size: u64, link: &LinkParams) -> Traffic {
    let mut traffic = Traffic::empty(link.gen);
    if size == 0 {
        return traffic;
    }
    let writes = blocks_touched(addr, size, u64::from(link.mps));
    traffic.mem_writes = writes;
    traffic.payload_bytes = size;
    traffic.upstream.tlps = writes;
    traffic.upstream.payload_bytes = size;
    traffic.upstream.tlp_overhead_bytes = writes * link.overhead(TlpKind::MemWrite);
    let busy = traffic.upstream.tlp_bytes() as f64;
    let per_interval = dllps_for_stream(link.gen, link.mps, link.width, writes, busy);
    traffic.downstream.acks = per_interval;
    traffic.downstream.update_fcs = per_interval;
    traffic
}

/// A device DMA read of `size` bytes starting at an MRRS-aligned address.
#[inline]
pub(crate) fn read(size: u64, link: &LinkParams) -> Traffic {
    read_at(0, size, link)
}

/// A device DMA read of `size` bytes at `addr`: Memory Read requests of at most MRRS bytes split
/// at MRRS-aligned boundaries go upstream; Completions with Data (see [`CompletionSize`]) come
/// downstream. Downstream also carries Acks and UpdateFC-NP for the requests; upstream carries
/// Acks for the completions. Endpoints advertise infinite completion credits (the spec requires
/// it), so no UpdateFC-Cpl flows. DLLP intervals are counted over the transfer's busy time.
#[inline]
pub fn read_at(addr: u64, size: u64, link: &LinkParams) -> Traffic {
    let mut traffic = Traffic::empty(link.gen);
    if size == 0 {
        return traffic;
    }
    let (requests, completions) = read_split(addr, size, link);
    traffic.mem_reads = requests;
    traffic.completions = completions;
    traffic.payload_bytes = size;
    traffic.upstream.tlps = requests;
    traffic.upstream.tlp_overhead_bytes = requests * link.overhead(TlpKind::MemRead);
    traffic.downstream.tlps = completions;
    traffic.downstream.payload_bytes = size;
    traffic.downstream.tlp_overhead_bytes = completions * link.overhead(TlpKind::CompletionData);
    let busy = traffic
        .upstream
        .tlp_bytes()
        .max(traffic.downstream.tlp_bytes()) as f64;
    // dllps_for_stream for both directions, sharing the one division by the latency.
    let intervals = if link.gen.is_flit() {
        0.0
    } else {
        latency_intervals(link.gen, link.mps, link.width, busy)
    };
    let for_requests = intervals.min(requests as f64);
    traffic.downstream.acks = for_requests;
    traffic.downstream.update_fcs = for_requests;
    traffic.upstream.acks = intervals.min(completions as f64);
    traffic
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::link::skp_fraction;
    use Generation::*;

    fn link(gen: Generation, width: u8, mps: u32) -> LinkParams {
        LinkParams {
            mps,
            ..LinkParams::new(gen, width)
        }
    }

    #[test]
    fn wire_estimate_charges_headers_framing_and_the_returned_dllps() {
        let estimate = WireEstimate::for_link(&link(Gen3, 4, 256));
        let mib = 1u64 << 20;
        // Device writes: 256 B payload + 12 B header + 8 B framing per TLP, nothing else up.
        let (up, down) = estimate.wire_bytes(mib, 0);
        assert!((up - mib as f64 * 276.0 / 256.0).abs() < 1e-6, "{up}");
        // Down carries only the Acks and UpdateFCs for them: 8 B each, coalesced to well under
        // one of each per 276 B TLP (two per TLP would be 16/256 = 6 %).
        assert!(
            down > mib as f64 * 0.005 && down < mib as f64 * 0.03,
            "{down}"
        );
        // Device reads: 256 B completions (12 B header, 8 B framing) down with the Acks and
        // UpdateFCs for the requests; a 20 B request per 512 B MRRS up, plus the Acks for the
        // completions.
        let (up, down) = estimate.wire_bytes(0, mib);
        let completions = mib as f64 * 276.0 / 256.0;
        assert!(
            down > completions && down < completions + mib as f64 * 0.03,
            "{down}"
        );
        assert!(
            up > mib as f64 * 20.0 / 512.0 && up < mib as f64 * 0.06,
            "{up}"
        );
    }

    #[test]
    fn achievable_rate_is_mps_payload_over_tlp_bytes_less_skp() {
        // 256 B payload + 12 B header + 8 B framing; one SKP block in 376 (128b/130b).
        let expected = 3938.4615 * 256.0 / 276.0 * 375.0 / 376.0;
        let got = achievable_mbps(&link(Gen3, 4, 256));
        assert!((got - expected).abs() < 0.01, "{got} vs {expected}");
        // Gen2 x1, MPS 128: 8b/10b SKP is 4 symbols in 1542.
        let expected = 500.0 * 128.0 / 148.0 * 1538.0 / 1542.0;
        let got = achievable_mbps(&link(Gen2, 1, 128));
        assert!((got - expected).abs() < 0.01, "{got} vs {expected}");
    }

    #[test]
    fn writes_saw_tooth_just_above_multiples_of_mps() {
        let l = link(Gen3, 4, 256);
        assert_eq!(write(256, &l).mem_writes, 1);
        assert_eq!(write(257, &l).mem_writes, 2);
        assert_eq!(write(512, &l).mem_writes, 2);
        assert!(
            write(257, &l).efficiency(Overheads::Ideal)
                < write(256, &l).efficiency(Overheads::Ideal)
        );
        // An unaligned start costs one more TLP.
        assert_eq!(write_at(8, 512, &l).mem_writes, 3);
    }

    #[test]
    fn write_bytes_per_direction() {
        let l = LinkParams {
            format: TlpFormat {
                addr64: true,
                ecrc: true,
                flit_ohc_dw: 0,
            },
            ..link(Gen3, 1, 256)
        };
        let t = write(4096, &l);
        assert_eq!(t.upstream.tlps, 16);
        assert_eq!(t.upstream.tlp_bytes(), 16 * 284);
        assert_eq!(t.downstream.tlps, 0);
        assert_eq!(t.downstream.payload_bytes, 0);
        assert!(t.downstream.acks > 0.0 && t.upstream.acks == 0.0);
        // Ideal Gen3 x1, 284 B per 256 B: the seed's 887.5 MB/s.
        let mbps = t.throughput_mbps(&l, Overheads::Ideal);
        assert!((mbps - 887.5).abs() < 0.1, "{mbps}");
        // Write DLLPs travel downstream, so only SKP lowers the write rate.
        let full = t.throughput_mbps(&l, Overheads::Full);
        assert!(
            (full - mbps * (1.0 - skp_fraction(Gen3))).abs() < 1e-9,
            "{full}"
        );
    }

    #[test]
    fn reads_split_by_mrrs_and_completions_by_mps_or_rcb() {
        let mut l = link(Gen3, 4, 256);
        let t = read(4096, &l);
        assert_eq!((t.mem_reads, t.completions), (8, 16));
        assert_eq!(t.upstream.tlp_bytes(), 8 * 20);
        assert_eq!(t.downstream.tlp_bytes(), 4096 + 16 * 20);
        l.completion_size = CompletionSize::Rcb;
        assert_eq!(read(4096, &l).completions, 64);
        // Unaligned: 100..612 touches two MRRS blocks; the first request (100..512) needs a
        // completion to the RCB boundary 320, then 320..512.
        l.completion_size = CompletionSize::Mps;
        let t = read_at(100, 512, &l);
        assert_eq!((t.mem_reads, t.completions), (2, 3));
    }

    #[test]
    fn zero_sized_transfers_are_empty() {
        let l = link(Gen5, 16, 512);
        for t in [write(0, &l), read(0, &l)] {
            assert_eq!(t.mem_writes + t.mem_reads + t.completions, 0);
            assert_eq!(t.throughput_mbps(&l, Overheads::Full), 0.0);
        }
    }

    #[test]
    fn validation_names_the_field_and_valid_values() {
        let mut l = link(Gen3, 3, 256);
        let e = l.validate().unwrap_err();
        assert!(e.message().contains("width 3") && e.message().contains("12"));
        l.width = 4;
        l.mrrs = 384;
        assert!(l.validate().unwrap_err().message().contains("mrrs 384"));
        l.mrrs = 512;
        l.rcb = 32;
        assert!(l.validate().unwrap_err().message().contains("rcb 32"));
        l.rcb = 128;
        assert!(l.validate().is_ok());
    }

    #[test]
    fn traffic_accumulates_across_transfers() {
        let l = link(Gen3, 4, 256);
        let mut total = write(4096, &l);
        total += read(4096, &l);
        assert_eq!(
            (total.mem_writes, total.mem_reads, total.completions),
            (16, 8, 16)
        );
        assert_eq!(total.payload_bytes, 8192);
        assert_eq!(total.upstream.payload_bytes, 4096);
        assert_eq!(total.upstream.tlps, 24);
        let dllps = write(4096, &l).downstream.dllps() + read(4096, &l).downstream.dllps();
        assert!((total.downstream.dllps() - dllps).abs() < 1e-9);
    }

    #[test]
    fn reversed_swaps_directions() {
        let l = link(Gen2, 1, 128);
        let t = write(64, &l);
        let r = t.reversed();
        assert_eq!(r.downstream.tlps, 1);
        assert_eq!(r.upstream.acks, t.downstream.acks);
    }
}
