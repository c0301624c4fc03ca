//! FLIT-mode framing (Gen6 and later): every 256-byte flit carries 236 bytes of TLP data, 6 bytes
//! of data-link payload (flit sequence number, Ack/Nak, flow-control updates), 8 bytes of CRC and 6
//! bytes of FEC. Because Acks and credit updates ride inside every flit, FLIT mode has no separate
//! DLLP cost; its cost is the fixed 20/256 share below.

/// Bytes in one flit on the wire.
pub(crate) const FLIT_BYTES: u32 = 256;
/// Bytes of each flit available to TLPs.
pub(crate) const FLIT_TLP_BYTES: u32 = 236;
/// Data-link payload bytes per flit (sequence number, Ack/Nak, FC updates).
#[cfg(test)]
pub(crate) const FLIT_DLP_BYTES: u32 = 6;
/// CRC bytes per flit.
#[cfg(test)]
pub(crate) const FLIT_CRC_BYTES: u32 = 8;
/// Forward error correction bytes per flit.
#[cfg(test)]
pub(crate) const FLIT_FEC_BYTES: u32 = 6;

/// Wire bytes needed to carry `tlp_bytes` of back-to-back TLPs in flits. TLPs straddle flit
/// boundaries freely, so a stream costs exactly 256/236 of its TLP bytes (a lone transfer's last,
/// partly filled flit is padded with NOPs; that padding is not charged here).
#[inline]
pub(crate) fn wire_bytes_for_tlp_bytes(tlp_bytes: f64) -> f64 {
    tlp_bytes * f64::from(FLIT_BYTES) / f64::from(FLIT_TLP_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flit_fields_add_up() {
        assert_eq!(
            FLIT_TLP_BYTES + FLIT_DLP_BYTES + FLIT_CRC_BYTES + FLIT_FEC_BYTES,
            FLIT_BYTES
        );
        assert!((wire_bytes_for_tlp_bytes(236.0 * 3.0) - 768.0).abs() < 1e-9);
    }
}
