//! Transaction Layer Packet sizes: header length by TLP type and addressing, the optional ECRC
//! digest, and the per-TLP data-link/physical wrapping each generation adds on the wire (8 B in
//! non-FLIT mode, none in FLIT mode where sequence numbers and CRC live in the flit). These are the
//! only per-TLP byte counts the model and the simulator use.

use super::Generation;

/// The TLP types a DMA transfer is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TlpKind {
    /// Memory Write (posted), carries payload.
    MemWrite,
    /// Memory Read request (non-posted), no payload.
    MemRead,
    /// Completion with Data, carries (part of) a read's payload.
    CompletionData,
}

/// Bytes in one doubleword.
pub(crate) const DW_BYTES: u32 = 4;

/// ECRC (TLP digest) size when End-to-End CRC is enabled.
pub(crate) const ECRC_BYTES: u32 = 4;

/// Data-link + physical wrapping per TLP outside FLIT mode. Gen1/2: STP 1 + sequence number 2 +
/// LCRC 4 + END 1. Gen3-5: STP token 4 (it carries the sequence number) + LCRC 4. Both are 8.
pub(crate) const NON_FLIT_FRAMING_BYTES: u32 = 8;

/// How a TLP's header and digest are formed; the same for every TLP of one transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TlpFormat {
    /// 64-bit addressing: memory requests use the 4 DW header instead of 3 DW.
    pub addr64: bool,
    /// End-to-end CRC (TLP digest) appended to every TLP.
    pub ecrc: bool,
    /// FLIT mode only: Orthogonal Header Content doublewords added to every request header.
    pub flit_ohc_dw: u8,
}

/// Header bytes of one TLP. Memory requests are 3 DW with 32-bit addresses and 4 DW with 64-bit
/// ones; completions are always 3 DW. In FLIT mode request headers also carry any OHC.
#[inline]
pub(crate) fn header_bytes(kind: TlpKind, format: TlpFormat, gen: Generation) -> u32 {
    let base_dw = match kind {
        TlpKind::MemWrite | TlpKind::MemRead if format.addr64 => 4,
        TlpKind::MemWrite | TlpKind::MemRead => 3,
        TlpKind::CompletionData => 3,
    };
    let ohc_dw = match kind {
        TlpKind::MemWrite | TlpKind::MemRead if gen.is_flit() => u32::from(format.flit_ohc_dw),
        _ => 0,
    };
    (base_dw + ohc_dw) * DW_BYTES
}

/// Per-TLP wrapping added below the transaction layer: 8 B outside FLIT mode, 0 in FLIT mode.
#[inline]
pub(crate) fn framing_bytes(gen: Generation) -> u32 {
    if gen.is_flit() {
        0
    } else {
        NON_FLIT_FRAMING_BYTES
    }
}

/// Everything one TLP adds on top of its payload: header, optional ECRC and framing.
#[inline]
pub(crate) fn overhead_bytes(kind: TlpKind, format: TlpFormat, gen: Generation) -> u32 {
    let digest = if format.ecrc { ECRC_BYTES } else { 0 };
    header_bytes(kind, format, gen) + digest + framing_bytes(gen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Generation::*;

    #[test]
    fn worst_case_non_flit_tlp_is_28_bytes() {
        let f = TlpFormat {
            addr64: true,
            ecrc: true,
            flit_ohc_dw: 0,
        };
        for gen in [Gen1, Gen2, Gen3, Gen4, Gen5] {
            assert_eq!(overhead_bytes(TlpKind::MemWrite, f, gen), 28, "{gen}");
        }
    }

    #[test]
    fn completions_keep_a_3dw_header_with_64bit_addressing() {
        let f = TlpFormat {
            addr64: true,
            ecrc: false,
            flit_ohc_dw: 2,
        };
        assert_eq!(overhead_bytes(TlpKind::CompletionData, f, Gen3), 20);
        assert_eq!(overhead_bytes(TlpKind::MemRead, f, Gen3), 24);
        assert_eq!(
            overhead_bytes(TlpKind::MemRead, TlpFormat::default(), Gen2),
            20
        );
    }

    #[test]
    fn flit_mode_drops_framing_and_adds_ohc_to_requests() {
        let f = TlpFormat {
            addr64: true,
            ecrc: false,
            flit_ohc_dw: 1,
        };
        assert_eq!(overhead_bytes(TlpKind::MemWrite, f, Gen6), 20);
        assert_eq!(overhead_bytes(TlpKind::CompletionData, f, Gen6), 12);
        assert_eq!(framing_bytes(Gen7), 0);
    }
}
