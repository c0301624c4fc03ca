//! Line encodings and raw link bandwidth per generation: what the wire carries before any TLP or
//! DLLP overhead, in the spec's terms and in the Linux kernel's integer `PCIE_SPEED2MBS_ENC` view.

use super::Generation;

/// How symbols are coded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// Gen1/2: 10 line bits per 8 data bits.
    B8b10b,
    /// Gen3-5: 2 sync-header bits per 128-bit block.
    B128b130b,
    /// Gen6+: PAM4 flits, no line code (1b/1b); flit overhead is accounted separately.
    Flit1b1b,
}

impl Encoding {
    /// Data bits per line bit.
    #[inline]
    pub(crate) const fn efficiency(self) -> f64 {
        match self {
            Encoding::B8b10b => 8.0 / 10.0,
            Encoding::B128b130b => 128.0 / 130.0,
            Encoding::Flit1b1b => 1.0,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Encoding::B8b10b => "8b/10b",
            Encoding::B128b130b => "128b/130b",
            Encoding::Flit1b1b => "1b/1b (FLIT)",
        }
    }
}

impl Generation {
    #[inline]
    pub(crate) const fn encoding(self) -> Encoding {
        match self {
            Generation::Gen1 | Generation::Gen2 => Encoding::B8b10b,
            Generation::Gen3 | Generation::Gen4 | Generation::Gen5 => Encoding::B128b130b,
            Generation::Gen6 | Generation::Gen7 => Encoding::Flit1b1b,
        }
    }

    /// Whether the link runs in FLIT mode (Gen6 and later).
    #[inline]
    pub(crate) fn is_flit(self) -> bool {
        self.encoding() == Encoding::Flit1b1b
    }
}

/// Fraction of every lane's symbols spent on SKP ordered sets, which all lanes send together (so
/// the share does not depend on width). 8b/10b: a 4-symbol SKP OS at most every 1538 symbol
/// times; 128b/130b: one 16-symbol SKP block at most every 375 data blocks. FLIT mode is charged
/// like 128b/130b (an assumption, see docs/model.md). The spec's longest intervals are used, so
/// this is the least overhead a compliant transmitter has.
#[inline]
pub(crate) const fn skp_fraction(gen: Generation) -> f64 {
    let (skp_symbols, interval_symbols) = match gen.encoding() {
        Encoding::B8b10b => (4.0, 1538.0),
        Encoding::B128b130b | Encoding::Flit1b1b => (16.0, 375.0 * 16.0),
    };
    skp_symbols / (interval_symbols + skp_symbols)
}

/// Usable bytes per second per direction after line encoding, in MB/s (10^6 B/s).
#[inline]
pub(crate) fn raw_mbps(gen: Generation, width: u8) -> f64 {
    per_generation(gen).lane_mbps * f64::from(width)
}

/// Per-generation constants of [`raw_mbps`] and the SKP share, evaluated by the compiler with
/// the same floating-point operations as at run time (so results are bit for bit the same) and
/// looked up per call, since the rate model is evaluated millions of times in sweeps and fits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PerGeneration {
    /// One lane's MB/s after line encoding.
    pub(crate) lane_mbps: f64,
    /// `1 - skp_fraction`: the share of symbol times left for TLPs and DLLPs.
    pub(crate) after_skp: f64,
}

const PER_GENERATION: [PerGeneration; Generation::ALL.len()] = {
    let mut table = [PerGeneration {
        lane_mbps: 0.0,
        after_skp: 0.0,
    }; Generation::ALL.len()];
    let mut i = 0;
    while i < table.len() {
        let gen = Generation::ALL[i];
        table[i] = PerGeneration {
            lane_mbps: gen.gt_s() * 1000.0 * gen.encoding().efficiency() / 8.0,
            after_skp: 1.0 - skp_fraction(gen),
        };
        i += 1;
    }
    table
};

/// [`PerGeneration`] of `gen`.
#[inline]
pub(crate) fn per_generation(gen: Generation) -> PerGeneration {
    PER_GENERATION[gen as usize]
}

/// The kernel's per-lane `PCIE_SPEED2MBS_ENC` in Mb/s, integer-truncated as C does.
pub(crate) fn kernel_lane_mbit(gen: Generation) -> u32 {
    let (rate, num, den): (u32, u32, u32) = match gen {
        Generation::Gen1 => (2500, 8, 10),
        Generation::Gen2 => (5000, 8, 10),
        Generation::Gen3 => (8000, 128, 130),
        Generation::Gen4 => (16000, 128, 130),
        Generation::Gen5 => (32000, 128, 130),
        Generation::Gen6 => (64000, 1, 1),
        Generation::Gen7 => (128000, 1, 1),
    };
    rate * num / den
}

/// What `pcie_bandwidth_available()` computes for one link: width × per-lane Mb/s.
pub(crate) fn kernel_link_mbit(gen: Generation, width: u8) -> u32 {
    u32::from(width) * kernel_lane_mbit(gen)
}

/// Link capability (LnkCap) and status (LnkSta) of a function's PCIe link. `None` means the
/// register said "unknown"/reserved (QEMU's integrated endpoints report that).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Link {
    /// The fastest generation the port supports (LnkCap).
    pub max_speed: Option<Generation>,
    /// The most lanes the port supports (LnkCap).
    pub max_width: Option<u8>,
    /// The generation the link trained at (LnkSta); `None` when down or unknown.
    pub speed: Option<Generation>,
    /// The lanes the link trained at (LnkSta); `None` when down or unknown.
    pub width: Option<u8>,
}

impl Link {
    /// A link whose capability (LnkCap) and trained state (LnkSta) are both known, each given as
    /// (speed, width).
    pub(crate) const fn trained(max: (Generation, u8), current: (Generation, u8)) -> Link {
        Link {
            max_speed: Some(max.0),
            max_width: Some(max.1),
            speed: Some(current.0),
            width: Some(current.1),
        }
    }

    /// The link trained below what it is capable of (lspci's "(downgraded)").
    pub(crate) fn is_downgraded(&self) -> bool {
        let slower = matches!((self.speed, self.max_speed), (Some(s), Some(m)) if s < m);
        let narrower = matches!((self.width, self.max_width), (Some(w), Some(m)) if w < m);
        slower || narrower
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_values_match_upstream() {
        assert_eq!(kernel_link_mbit(Generation::Gen3, 16), 126016);
        assert_eq!(kernel_link_mbit(Generation::Gen5, 16), 504112);
        assert_eq!(kernel_link_mbit(Generation::Gen6, 16), 1024000);
        assert_eq!(kernel_link_mbit(Generation::Gen1, 1), 2000);
    }

    #[test]
    fn raw_rates() {
        assert!((raw_mbps(Generation::Gen3, 1) - 984.615).abs() < 0.001);
        assert!((raw_mbps(Generation::Gen2, 8) - 4000.0).abs() < 1e-9);
        assert!((raw_mbps(Generation::Gen6, 1) - 8000.0).abs() < 1e-9);
    }

    #[test]
    fn skp_share_per_encoding() {
        assert!((skp_fraction(Generation::Gen2) - 4.0 / 1542.0).abs() < 1e-12);
        assert!((skp_fraction(Generation::Gen4) - 1.0 / 376.0).abs() < 1e-12);
        assert!(skp_fraction(Generation::Gen1) < 0.003);
    }
}
