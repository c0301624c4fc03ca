//! The ASPM latency encodings of the PCI Express capability: the 3-bit codes of LnkCap's exit
//! latencies and an endpoint's DevCap acceptable latencies, their bounds in nanoseconds and the
//! words lspci prints for them (`latency_l0s`/`latency_l1` in pciutils' ls-caps.c). The
//! registers themselves are decoded once, by `topology::config_space`.

/// L0s exit latency upper bounds per LnkCap code, in ns (code 7: unlimited).
pub(crate) const L0S_EXIT_NS: [Option<u32>; 8] = [
    Some(64),
    Some(128),
    Some(256),
    Some(512),
    Some(1000),
    Some(2000),
    Some(4000),
    None,
];
/// L1 exit latency upper bounds per LnkCap code, in ns (code 7: unlimited).
pub(crate) const L1_EXIT_NS: [Option<u32>; 8] = [
    Some(1000),
    Some(2000),
    Some(4000),
    Some(8000),
    Some(16000),
    Some(32000),
    Some(64000),
    None,
];
const L0S_EXIT_TEXT: [&str; 8] = [
    "<64ns",
    "<128ns",
    "<256ns",
    "<512ns",
    "<1us",
    "<2us",
    "<4us",
    "unlimited",
];
const L1_EXIT_TEXT: [&str; 8] = [
    "<1us",
    "<2us",
    "<4us",
    "<8us",
    "<16us",
    "<32us",
    "<64us",
    "unlimited",
];

/// One ASPM latency as the registers encode it: a 3-bit code of the L0s table (64 ns … 4 µs)
/// or of the L1 table (1 µs … 64 µs), code 7 meaning more than the table's last step. LnkCap's
/// exit latencies and an endpoint's DevCap acceptable latencies share the two tables (lspci
/// prints both through `latency_l0s`/`latency_l1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct AspmLatency {
    pub(crate) l1: bool,
    /// 0-7.
    pub(crate) code: u8,
}

impl AspmLatency {
    pub(crate) fn l0s(code: u8) -> AspmLatency {
        AspmLatency {
            l1: false,
            code: code & 7,
        }
    }

    pub(crate) fn l1(code: u8) -> AspmLatency {
        AspmLatency {
            l1: true,
            code: code & 7,
        }
    }

    /// The upper bound of the encoded range in nanoseconds; `None` for code 7 ("unlimited").
    pub(crate) fn ns(self) -> Option<u32> {
        let table = if self.l1 { &L1_EXIT_NS } else { &L0S_EXIT_NS };
        table[usize::from(self.code & 7)]
    }

    /// lspci's words for it: `<64ns`, `<1us`, `unlimited`.
    pub(crate) fn text(self) -> &'static str {
        let table = if self.l1 {
            &L1_EXIT_TEXT
        } else {
            &L0S_EXIT_TEXT
        };
        table[usize::from(self.code & 7)]
    }

    /// The code whose range ends at `ns` in the L0s (`l1` false) or L1 table: how a spec's
    /// `exit_latency` bound becomes a LnkCap code; `None` for a value that is no bound.
    pub(crate) fn from_ns(l1: bool, ns: u32) -> Option<AspmLatency> {
        let table = if l1 { &L1_EXIT_NS } else { &L0S_EXIT_NS };
        let code = table.iter().position(|t| *t == Some(ns))? as u8;
        Some(AspmLatency { l1, code })
    }

    /// The latency lspci wrote as `text` in the L0s (`l1` false) or L1 table.
    pub(crate) fn from_text(l1: bool, text: &str) -> Option<AspmLatency> {
        let table = if l1 { &L1_EXIT_TEXT } else { &L0S_EXIT_TEXT };
        let code = table.iter().position(|t| *t == text)? as u8;
        Some(AspmLatency { l1, code })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_words_read_back_to_their_codes() {
        for code in 0..8 {
            for l1 in [false, true] {
                let l = AspmLatency { l1, code };
                assert_eq!(AspmLatency::from_text(l1, l.text()), Some(l));
            }
        }
        // The tables overlap on 1-4 us: the same words are different codes in each.
        assert_eq!(AspmLatency::from_text(false, "<2us").unwrap().code, 5);
        assert_eq!(AspmLatency::from_text(true, "<2us").unwrap().code, 1);
        assert_eq!(AspmLatency::from_text(true, "<64ns"), None);
        assert_eq!(AspmLatency::l1(3).ns(), Some(8000));
    }
}
