//! Data Link Layer Packets outside FLIT mode: their size on the wire and how often the spec makes
//! a receiver send them. A receiver must Ack received TLPs within the Ack latency limit and return
//! flow-control credits (UpdateFC) within a limit of the same form, both
//! `(Max_Payload_Size + TLPOverhead) × Factor / LinkWidth + InternalDelay` symbol times. A
//! streaming receiver that coalesces as much as the rule allows therefore sends one Ack (and one
//! UpdateFC per credit type in use) per limit interval. The limit is in symbol times, during which
//! a link of width W moves W symbols, so the DLLP cost per data byte falls with width exactly as
//! the formula's `/ LinkWidth` says. DLLPs travel opposite to the TLPs they acknowledge.

use super::Generation;

/// A DLLP on the wire: its 6 bytes (type, payload, 16-bit CRC) plus framing — Gen1/2 add SDP
/// and END symbols, Gen3-5 a 2-byte SDP token; 8 either way.
pub(crate) const DLLP_WIRE_BYTES: u32 = 8;

/// The TLPOverhead term of the spec's latency formulas, in symbols (header, digest, framing).
const TLP_OVERHEAD_SYMBOLS: u32 = 28;

/// The spec's AckFactor/UpdateFactor: how many maximum-size TLPs a receiver may let pass before it
/// must Ack, by Max_Payload_Size and link width.
#[inline]
pub(crate) const fn ack_factor(mps: u32, width: u8) -> f64 {
    let small_payload = mps <= 256;
    match (small_payload, width) {
        (true, 1 | 2 | 4) => 1.4,
        (true, 8) => 2.5,
        (true, _) => 3.0,
        (false, 1 | 2 | 4 | 8) => 1.0,
        (false, _) => 2.0,
    }
}

/// The InternalDelay term in symbol times: 19 at 2.5 GT/s and 70 at 5.0 GT/s as the spec's
/// tables give; 115 for 8 GT/s and faster non-FLIT rates (an assumption, see docs/model.md).
#[inline]
pub(crate) fn internal_delay_symbols(gen: Generation) -> u32 {
    match gen {
        Generation::Gen1 => 19,
        Generation::Gen2 => 70,
        _ => 115,
    }
}

/// The longest a receiver may wait before sending an Ack (the same bound applies between
/// UpdateFCs while credits are freed), in symbol times, truncated as the spec's tables are.
#[inline]
pub(crate) fn ack_latency_symbols(gen: Generation, mps: u32, width: u8) -> u32 {
    let legal_mps = mps.is_power_of_two() && (128..=4096).contains(&mps);
    let per_tlp = if legal_mps && usize::from(width) < PER_TLP_SYMBOLS[0].len() {
        PER_TLP_SYMBOLS[(mps.trailing_zeros() - 7) as usize][usize::from(width)]
    } else {
        per_tlp_symbols(mps, width)
    };
    per_tlp + internal_delay_symbols(gen)
}

/// The `(Max_Payload_Size + TLPOverhead) × Factor / LinkWidth` term, truncated.
const fn per_tlp_symbols(mps: u32, width: u8) -> u32 {
    ((mps + TLP_OVERHEAD_SYMBOLS) as f64 * ack_factor(mps, width) / width as f64) as u32
}

/// [`per_tlp_symbols`] for every legal MPS (128 << row) and every width up to 32, computed at
/// compile time with the same IEEE operations, so the model's hot path does no division here.
const PER_TLP_SYMBOLS: [[u32; 33]; 6] = {
    let mut table = [[0; 33]; 6];
    let mut row = 0;
    while row < 6 {
        let mut width = 0;
        while width < 33 {
            table[row][width] = per_tlp_symbols(128 << row, width as u8);
            width += 1;
        }
        row += 1;
    }
    table
};

/// The Ack latency intervals in `busy_bytes` of traffic on the link: the DLLPs of one kind a
/// stream sends before the one-per-TLP limit ([`dllps_for_stream`] applies it). Dividing by a
/// power-of-two width is exact, so it is done as a multiplication.
#[inline]
pub(crate) fn latency_intervals(gen: Generation, mps: u32, width: u8, busy_bytes: f64) -> f64 {
    let symbol_times = if width.is_power_of_two() {
        busy_bytes * (1.0 / f64::from(width))
    } else {
        busy_bytes / f64::from(width)
    };
    symbol_times / f64::from(ack_latency_symbols(gen, mps, width))
}

/// Expected DLLPs of one kind (Ack, or UpdateFC of one credit type) a receiver sends while it
/// takes in `tlps` TLPs spread over `busy_bytes` of its link (all lanes together): one per latency
/// interval, never more than one per TLP. Zero in FLIT mode, where flits carry this information.
#[inline]
pub(crate) fn dllps_for_stream(
    gen: Generation,
    mps: u32,
    width: u8,
    tlps: u64,
    busy_bytes: f64,
) -> f64 {
    if gen.is_flit() || tlps == 0 {
        return 0.0;
    }
    latency_intervals(gen, mps, width, busy_bytes).min(tlps as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Generation::*;

    #[test]
    fn ack_latency_matches_the_spec_tables_at_2_5_gt() {
        let cases = [
            (128, 1, 237),
            (128, 2, 128),
            (128, 4, 73),
            (128, 8, 67),
            (128, 12, 58),
            (128, 16, 48),
            (128, 32, 33),
            (256, 1, 416),
            (256, 8, 107),
            (256, 16, 72),
            (512, 1, 559),
            (512, 12, 109),
            (1024, 8, 150),
            (4096, 1, 4143),
        ];
        for (mps, width, expected) in cases {
            assert_eq!(
                ack_latency_symbols(Gen1, mps, width),
                expected,
                "MPS {mps} x{width}"
            );
        }
    }

    #[test]
    fn ack_latency_at_5_gt_uses_the_larger_internal_delay() {
        let widths = [1, 2, 4, 8, 12, 16, 32];
        let expected = [288, 179, 124, 118, 109, 99, 84];
        for (width, want) in widths.into_iter().zip(expected) {
            assert_eq!(ack_latency_symbols(Gen2, 128, width), want, "x{width}");
        }
    }

    #[test]
    fn dllp_cost_per_byte_falls_with_width() {
        // 1 MB of 256-byte TLPs: a x16 link gets through it in 1/16 of the symbol times.
        let bytes = 4096.0 * 264.0;
        let x1 = dllps_for_stream(Gen3, 256, 1, 4096, bytes);
        let x16 = dllps_for_stream(Gen3, 256, 16, 4096, bytes);
        assert!(x16 < x1, "x1 {x1} x16 {x16}");
        // x1: 1081344 symbol times / (284*1.4 + 115 = 512) per Ack.
        assert!((x1 - 2112.0).abs() < 1e-6, "{x1}");
    }

    #[test]
    fn at_most_one_dllp_per_tlp_and_none_in_flit_mode() {
        assert_eq!(dllps_for_stream(Gen1, 4096, 1, 3, 1e9), 3.0);
        assert_eq!(dllps_for_stream(Gen6, 256, 4, 1000, 1e6), 0.0);
        assert_eq!(dllps_for_stream(Gen3, 256, 4, 0, 0.0), 0.0);
    }
}
