//! The transfer model as first written, one plain division per rule and nothing cached: the
//! oracle that [`crate::model::transfer`]'s tuned functions are property-tested against bit for
//! bit (tests/suite/model_reference.rs) and benchmarked against (benches/model.rs). Not for other use:
//! it is slower and says nothing `transfer` does not.

use crate::model::transfer::{CompletionSize, LinkParams, Overheads, Traffic};
use crate::pcie::dllp::{ack_factor, internal_delay_symbols};
use crate::pcie::link::skp_fraction;
use crate::pcie::tlp::{overhead_bytes, TlpKind};
use crate::pcie::Generation;

/// `pcie::dllp::dllps_for_stream` as first written: the latency limit computed per call.
fn dllps_for_stream(gen: Generation, mps: u32, width: u8, tlps: u64, busy_bytes: f64) -> f64 {
    if gen.is_flit() || tlps == 0 {
        return 0.0;
    }
    let per_tlp = f64::from(mps + 28) * ack_factor(mps, width) / f64::from(width);
    let latency = per_tlp as u32 + internal_delay_symbols(gen);
    let symbol_times = busy_bytes / f64::from(width);
    (symbol_times / f64::from(latency)).min(tlps as f64)
}

fn overhead(link: &LinkParams, kind: TlpKind) -> u64 {
    u64::from(overhead_bytes(kind, link.format, link.gen))
}

fn blocks_touched(addr: u64, len: u64, align: u64) -> u64 {
    if len == 0 {
        return 0;
    }
    (addr + len - 1) / align - addr / align + 1
}

fn completions_for_request(start: u64, end: u64, mps: u64, rcb: u64) -> u64 {
    if end - start <= mps {
        return 1;
    }
    let first_end = (start + mps) / rcb * rcb;
    1 + (end - first_end).div_ceil(mps)
}

fn completions_for_read(addr: u64, len: u64, link: &LinkParams) -> u64 {
    let (mps, mrrs, rcb) = (
        u64::from(link.mps),
        u64::from(link.mrrs),
        u64::from(link.rcb),
    );
    if link.completion_size == CompletionSize::Rcb {
        return blocks_touched(addr, len, rcb);
    }
    let end = addr + len;
    let first_end = end.min((addr / mrrs + 1) * mrrs);
    let mut total = completions_for_request(addr, first_end, mps, rcb);
    if first_end == end {
        return total;
    }
    let full_requests = (end - first_end) / mrrs;
    total += full_requests * completions_for_request(0, mrrs, mps, rcb);
    let tail = (end - first_end) % mrrs;
    if tail > 0 {
        total += completions_for_request(0, tail, mps, rcb);
    }
    total
}

/// [`crate::model::transfer::write_at`] as first written.
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
    traffic.upstream.tlp_overhead_bytes = writes * overhead(link, TlpKind::MemWrite);
    let busy = traffic.upstream.tlp_bytes() as f64;
    let per_interval = dllps_for_stream(link.gen, link.mps, link.width, writes, busy);
    traffic.downstream.acks = per_interval;
    traffic.downstream.update_fcs = per_interval;
    traffic
}

/// [`crate::model::transfer::read_at`] as first written.
pub fn read_at(addr: u64, size: u64, link: &LinkParams) -> Traffic {
    let mut traffic = Traffic::empty(link.gen);
    if size == 0 {
        return traffic;
    }
    let requests = blocks_touched(addr, size, u64::from(link.mrrs));
    let completions = completions_for_read(addr, size, link);
    traffic.mem_reads = requests;
    traffic.completions = completions;
    traffic.payload_bytes = size;
    traffic.upstream.tlps = requests;
    traffic.upstream.tlp_overhead_bytes = requests * overhead(link, TlpKind::MemRead);
    traffic.downstream.tlps = completions;
    traffic.downstream.payload_bytes = size;
    traffic.downstream.tlp_overhead_bytes = completions * overhead(link, TlpKind::CompletionData);
    let busy = traffic
        .upstream
        .tlp_bytes()
        .max(traffic.downstream.tlp_bytes()) as f64;
    let dllps = |tlps| dllps_for_stream(link.gen, link.mps, link.width, tlps, busy);
    traffic.downstream.acks = dllps(requests);
    traffic.downstream.update_fcs = dllps(requests);
    traffic.upstream.acks = dllps(completions);
    traffic
}

/// [`Traffic::throughput_mbps`] as first written.
pub fn throughput_mbps(traffic: &Traffic, link: &LinkParams, overheads: Overheads) -> f64 {
    let wire = traffic.busiest_wire_bytes(overheads);
    if wire == 0.0 {
        return 0.0;
    }
    // `pcie::link::raw_mbps` as first written (it is now a table of the same values).
    let raw =
        link.gen.gt_s() * 1000.0 * link.gen.encoding().efficiency() / 8.0 * f64::from(link.width);
    let capacity = match overheads {
        Overheads::Full => raw * (1.0 - skp_fraction(link.gen)),
        Overheads::Ideal => raw,
    };
    traffic.payload_bytes as f64 / wire * capacity
}
