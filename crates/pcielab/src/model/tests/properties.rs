//! Property tests of the transfer model: bounds every figure must respect whatever the link,
//! settings, address and size, and the completion split checked against a step-by-step oracle.

use super::drawn_link;
use crate::model::transfer::{
    read, read_at, write, write_at, CompletionSize, LinkParams, Overheads,
};
use crate::pcie::flit::{FLIT_BYTES, FLIT_TLP_BYTES};
use crate::pcie::link::raw_mbps;
use crate::pcie::TlpFormat;
use proptest::prelude::*;

fn any_link() -> impl Strategy<Value = LinkParams> {
    (
        1u8..=7,
        prop::sample::select(LinkParams::WIDTHS.to_vec()),
        prop::sample::select(LinkParams::SIZES.to_vec()),
        prop::sample::select(LinkParams::SIZES.to_vec()),
        prop::sample::select(LinkParams::RCBS.to_vec()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(gen, width, mps, mrrs, rcb, addr64, ecrc, rcb_split)| {
            let format = TlpFormat {
                addr64,
                ecrc,
                flit_ohc_dw: 0,
            };
            drawn_link((gen, width), (mps, mrrs, rcb), format, rcb_split)
        })
}

/// Completion lengths for a read, produced one completion at a time by the spec's rules.
fn completion_oracle(addr: u64, len: u64, link: &LinkParams) -> Vec<(u64, u64)> {
    let (mps, mrrs, rcb) = (link.mps as u64, link.mrrs as u64, link.rcb as u64);
    let end = addr + len;
    let mut out = Vec::new();
    let mut req_start = addr;
    while req_start < end {
        let req_end = end.min((req_start / mrrs + 1) * mrrs);
        let mut at = req_start;
        while at < req_end {
            let stop = match link.completion_size {
                CompletionSize::Rcb => req_end.min((at / rcb + 1) * rcb),
                CompletionSize::Mps if req_end - at <= mps => req_end,
                CompletionSize::Mps => (at + mps) / rcb * rcb,
            };
            out.push((at, stop - at));
            at = stop;
        }
        req_start = req_end;
    }
    out
}

proptest! {
    #[test]
    fn throughput_never_exceeds_the_encoding_limit(
        link in any_link(), size in 1u64..(8 << 20), addr in 0u64..8192,
    ) {
        let mut limit = raw_mbps(link.gen, link.width);
        if link.gen.is_flit() {
            limit *= f64::from(FLIT_TLP_BYTES) / f64::from(FLIT_BYTES);
        }
        for t in [write_at(addr, size, &link), read_at(addr, size, &link)] {
            let ideal = t.throughput_mbps(&link, Overheads::Ideal);
            let full = t.throughput_mbps(&link, Overheads::Full);
            prop_assert!(ideal < limit, "{ideal} >= {limit}");
            prop_assert!(full <= ideal, "full {full} > ideal {ideal}");
            prop_assert!(full > 0.0);
        }
    }

    #[test]
    fn aligned_transfers_need_ceil_size_over_mps_and_mrrs(link in any_link(), size in 1u64..(4 << 20)) {
        let w = write(size, &link);
        prop_assert_eq!(w.mem_writes, size.div_ceil(link.mps as u64));
        prop_assert_eq!(w.upstream.tlps, w.mem_writes);
        let r = read(size, &link);
        prop_assert_eq!(r.mem_reads, size.div_ceil(link.mrrs as u64));
        prop_assert_eq!(r.upstream.tlps, r.mem_reads);
        prop_assert_eq!(r.downstream.tlps, r.completions);
    }

    #[test]
    fn payload_bytes_sum_to_the_size(link in any_link(), size in 0u64..(4 << 20), addr in 0u64..(1 << 16)) {
        for t in [write_at(addr, size, &link), read_at(addr, size, &link)] {
            prop_assert_eq!(t.payload_bytes, size);
            prop_assert_eq!(t.upstream.payload_bytes + t.downstream.payload_bytes, size);
        }
    }

    #[test]
    fn read_completions_follow_mps_and_rcb(link in any_link(), size in 1u64..(1 << 18), addr in 0u64..(1 << 14)) {
        let oracle = completion_oracle(addr, size, &link);
        let mrrs = link.mrrs as u64;
        for (i, &(at, len)) in oracle.iter().enumerate() {
            prop_assert!(len > 0 && len <= link.mps as u64);
            let end = at + len;
            let ends_request = end % mrrs == 0 || end == addr + size;
            if !ends_request {
                prop_assert_eq!(end % link.rcb as u64, 0, "completion {} ends off RCB", i);
            }
        }
        prop_assert_eq!(oracle.iter().map(|c| c.1).sum::<u64>(), size);
        prop_assert_eq!(read_at(addr, size, &link).completions, oracle.len() as u64);
    }

    #[test]
    fn dllp_cost_per_byte_does_not_grow_with_width(link in any_link(), size in 1u64..(4 << 20)) {
        let mut previous = f64::INFINITY;
        for width in LinkParams::WIDTHS {
            let wider = LinkParams { width, ..link };
            let t = write(size, &wider);
            prop_assert_eq!(t.upstream.dllps(), 0.0);
            let dllps = t.downstream.dllps();
            prop_assert!(dllps <= previous, "x{} {} > {}", width, dllps, previous);
            prop_assert!(dllps <= 2.0 * t.mem_writes as f64);
            previous = dllps;
        }
    }
}
