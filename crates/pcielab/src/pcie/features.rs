//! The device-control features and link exit latencies of one function's PCI Express capability,
//! decoded from its configuration space: what `lspci -vvv` prints as `DevCap: … ExtTag+`,
//! `DevCtl: … RlxdOrd+ ExtTag+`, `DevCap2: … 10BitTagComp+ 10BitTagReq+`, `DevCtl2: …
//! 10BitTagReq+` and `LnkCap: … Exit Latency L0s <1us, L1 <64us`. Bit positions are the PCIe
//! base specification's (include/uapi/linux/pci_regs.h names the ones Linux 6.12 uses; the 10-bit
//! tag bits are DevCap2 bits 16/17 and DevCtl2 bit 12). Pure decoding: no I/O.

/// Offsets inside the PCI Express capability.
const DEVCAP: usize = 0x04;
const DEVCTL: usize = 0x08;
const LNKCAP: usize = 0x0c;
const DEVCAP2: usize = 0x24;
const DEVCTL2: usize = 0x28;
/// A capability long enough to hold DevCtl2 (version 2 of the capability).
const V2_LEN: usize = 0x2c;

const DEVCAP_EXT_TAG: u32 = 1 << 5;
const DEVCTL_RELAXED_ORDERING: u16 = 1 << 4;
const DEVCTL_EXT_TAG: u16 = 1 << 8;
const DEVCAP2_10BIT_TAG_COMPLETER: u32 = 1 << 16;
const DEVCAP2_10BIT_TAG_REQUESTER: u32 = 1 << 17;
const DEVCTL2_10BIT_TAG_REQUESTER: u16 = 1 << 12;

/// The features of one function, as its registers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Features {
    /// Offset of the PCI Express capability in configuration space (`CAP_EXP` in setpci).
    pub express_at: usize,
    pub ext_tag_supported: bool,
    pub ext_tag_enabled: bool,
    pub relaxed_ordering_enabled: bool,
    /// `None` when the capability is too short (version 1) to carry DevCap2/DevCtl2.
    pub ten_bit_tag_completer: Option<bool>,
    pub ten_bit_tag_requester: Option<bool>,
    pub ten_bit_tag_requester_enabled: Option<bool>,
    /// LnkCap exit latencies: the upper bound of each encoded range, in nanoseconds; `None`
    /// for code 7, which lspci prints as "unlimited" (more than 4 µs for L0s, 64 µs for L1).
    pub l0s_exit_ns: Option<u32>,
    pub l1_exit_ns: Option<u32>,
    /// The raw LnkCap code (0-7) of each latency, for the text lspci prints.
    pub l0s_exit_code: u8,
    pub l1_exit_code: u8,
}

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

impl Features {
    /// lspci's text for the L0s exit latency ("<1us", "unlimited"), as `latency_l0s` in ls-caps.c.
    pub fn l0s_exit_text(&self) -> &'static str {
        AspmLatency::l0s(self.l0s_exit_code).text()
    }

    /// lspci's text for the L1 exit latency ("<64us").
    pub fn l1_exit_text(&self) -> &'static str {
        AspmLatency::l1(self.l1_exit_code).text()
    }
}

/// One ASPM latency as the registers encode it: a 3-bit code of the L0s table (64 ns … 4 µs)
/// or of the L1 table (1 µs … 64 µs), code 7 meaning more than the table's last step. LnkCap's
/// exit latencies and an endpoint's DevCap acceptable latencies share the two tables (lspci
/// prints both through `latency_l0s`/`latency_l1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AspmLatency {
    pub l1: bool,
    /// 0-7.
    pub code: u8,
}

impl AspmLatency {
    pub fn l0s(code: u8) -> AspmLatency {
        AspmLatency {
            l1: false,
            code: code & 7,
        }
    }

    pub fn l1(code: u8) -> AspmLatency {
        AspmLatency {
            l1: true,
            code: code & 7,
        }
    }

    /// The upper bound of the encoded range in nanoseconds; `None` for code 7 ("unlimited").
    pub fn ns(self) -> Option<u32> {
        let table = if self.l1 { &L1_EXIT_NS } else { &L0S_EXIT_NS };
        table[usize::from(self.code & 7)]
    }

    /// lspci's words for it: `<64ns`, `<1us`, `unlimited`.
    pub fn text(self) -> &'static str {
        let table = if self.l1 {
            &L1_EXIT_TEXT
        } else {
            &L0S_EXIT_TEXT
        };
        table[usize::from(self.code & 7)]
    }

    /// The code whose range ends at `ns` in the L0s (`l1` false) or L1 table: how a spec's
    /// `exit_latency` bound becomes a LnkCap code; `None` for a value that is no bound.
    pub fn from_ns(l1: bool, ns: u32) -> Option<AspmLatency> {
        let table = if l1 { &L1_EXIT_NS } else { &L0S_EXIT_NS };
        let code = table.iter().position(|t| *t == Some(ns))? as u8;
        Some(AspmLatency { l1, code })
    }

    /// The latency lspci wrote as `text` in the L0s (`l1` false) or L1 table.
    pub fn from_text(l1: bool, text: &str) -> Option<AspmLatency> {
        let table = if l1 { &L1_EXIT_TEXT } else { &L0S_EXIT_TEXT };
        let code = table.iter().position(|t| *t == text)? as u8;
        Some(AspmLatency { l1, code })
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Where the PCI Express capability starts, walking the capability list as `decode` does.
fn express_offset(bytes: &[u8]) -> Option<usize> {
    const STATUS_CAP_LIST: u16 = 1 << 4;
    const CAP_ID_EXPRESS: u8 = 0x10;
    if bytes.len() < 0x40 || u16_at(bytes, 0x06) & STATUS_CAP_LIST == 0 {
        return None;
    }
    let mut ptr = usize::from(bytes[0x34] & 0xfc);
    for _ in 0..48 {
        if ptr == 0 || ptr + 2 > bytes.len() {
            return None;
        }
        if bytes[ptr] == CAP_ID_EXPRESS {
            return Some(ptr);
        }
        ptr = usize::from(bytes[ptr + 1] & 0xfc);
    }
    None
}

/// The features of the function whose configuration space is `bytes`; `None` when it has no
/// readable PCI Express capability (a 64-byte unprivileged read, conventional PCI).
pub fn features(bytes: &[u8]) -> Option<Features> {
    let at = express_offset(bytes)?;
    if at + LNKCAP + 4 > bytes.len() {
        return None;
    }
    let devcap = u32_at(bytes, at + DEVCAP);
    let devctl = u16_at(bytes, at + DEVCTL);
    let lnkcap = u32_at(bytes, at + LNKCAP);
    let v2 = at + V2_LEN <= bytes.len();
    let devcap2 = v2.then(|| u32_at(bytes, at + DEVCAP2));
    let devctl2 = v2.then(|| u16_at(bytes, at + DEVCTL2));
    let l0s_exit_code = ((lnkcap >> 12) & 7) as u8;
    let l1_exit_code = ((lnkcap >> 15) & 7) as u8;
    Some(Features {
        express_at: at,
        ext_tag_supported: devcap & DEVCAP_EXT_TAG != 0,
        ext_tag_enabled: devctl & DEVCTL_EXT_TAG != 0,
        relaxed_ordering_enabled: devctl & DEVCTL_RELAXED_ORDERING != 0,
        ten_bit_tag_completer: devcap2.map(|c| c & DEVCAP2_10BIT_TAG_COMPLETER != 0),
        ten_bit_tag_requester: devcap2.map(|c| c & DEVCAP2_10BIT_TAG_REQUESTER != 0),
        ten_bit_tag_requester_enabled: devctl2.map(|c| c & DEVCTL2_10BIT_TAG_REQUESTER != 0),
        l0s_exit_ns: AspmLatency::l0s(l0s_exit_code).ns(),
        l1_exit_ns: AspmLatency::l1(l1_exit_code).ns(),
        l0s_exit_code,
        l1_exit_code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A type 0 header with the PCI Express capability at 0x40, registers as given.
    fn config(devcap: u32, devctl: u16, lnkcap: u32, devcap2: u32, devctl2: u16) -> Vec<u8> {
        let mut b = vec![0u8; 256];
        b[0x06] = 0x10;
        b[0x34] = 0x40;
        b[0x40] = 0x10;
        b[0x44..0x48].copy_from_slice(&devcap.to_le_bytes());
        b[0x48..0x4a].copy_from_slice(&devctl.to_le_bytes());
        b[0x4c..0x50].copy_from_slice(&lnkcap.to_le_bytes());
        b[0x64..0x68].copy_from_slice(&devcap2.to_le_bytes());
        b[0x68..0x6a].copy_from_slice(&devctl2.to_le_bytes());
        b
    }

    /// Registers with every feature bit set at the positions pci_regs.h and the base
    /// specification give: DevCap bit 5, DevCtl bits 4 and 8, DevCap2 bits 16-17, DevCtl2 bit 12;
    /// LnkCap 0x7044 has L0s exit code 7 (bits 14:12) and L1 exit code 0 (bits 17:15).
    #[test]
    fn bits_read_where_lspci_reads_them() {
        let f = features(&config(
            0x1000_8fe1,
            0x2950,
            0x0000_7044,
            0x0073_0000,
            0x1000,
        ))
        .unwrap();
        assert_eq!(f.express_at, 0x40);
        assert!(f.ext_tag_supported && f.ext_tag_enabled && f.relaxed_ordering_enabled);
        assert_eq!(f.ten_bit_tag_completer, Some(true));
        assert_eq!(f.ten_bit_tag_requester, Some(true));
        assert_eq!(f.ten_bit_tag_requester_enabled, Some(true));
        assert_eq!((f.l0s_exit_code, f.l1_exit_code), (7, 0));
        assert_eq!(f.l0s_exit_ns, None);
        assert_eq!(f.l1_exit_ns, Some(1000));
        assert_eq!(f.l1_exit_text(), "<1us");
    }

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

    #[test]
    fn cleared_bits_and_short_reads() {
        // L0s code 4 (<1us), L1 code 6 (<64us): (4 << 12) | (6 << 15).
        let f = features(&config(0, 0, (4 << 12) | (6 << 15), 0, 0)).unwrap();
        assert!(!f.ext_tag_supported && !f.ext_tag_enabled && !f.relaxed_ordering_enabled);
        assert_eq!(f.l0s_exit_ns, Some(1000));
        assert_eq!(f.l0s_exit_text(), "<1us");
        assert_eq!(f.l1_exit_ns, Some(64000));
        assert_eq!(f.l1_exit_text(), "<64us");
        // An unprivileged read (64 bytes) holds no capability list to walk.
        assert_eq!(features(&config(0, 0, 0, 0, 0)[..64]), None);
        // Capability list bit clear: no capabilities.
        let mut none = config(0, 0, 0, 0, 0);
        none[0x06] = 0;
        assert_eq!(features(&none), None);
    }
}
