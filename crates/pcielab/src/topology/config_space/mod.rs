//! PCI configuration space, both ways: decode the bytes of a sysfs `config` file, a snapshot's
//! or an lspci hex dump's (type 0/1 header, the capability list with the PCI Express
//! capability — DevCap/DevCtl/DevSta, LnkCap/LnkCtl/LnkSta, DevCap2/DevCtl2, LnkCap2/LnkCtl2/
//! LnkSta2 — and the ACS and AER extended capabilities) and encode a [`Function`] into config
//! space that the kernel's and lspci's decoders read back to the same values. This is the one
//! decoder of config bytes: every reader that has bytes takes its facts through
//! [`Function::take_capabilities`]. Decode and encode are inverse on everything the topology
//! model holds; a test keeps them so.

use super::{
    Acs, AerMasks, AerStatus, Aspm, AspmLatency, DeviceFeatures, ExpressDetail, Function, Kind,
    Link, LinkStatus2, AER_CORRECTABLE_SHOWN, AER_UNCORRECTABLE_SHOWN,
};
use crate::pcie::Generation;

/// Size of a PCI Express function's config space (with extended capabilities).
pub(crate) const EXTENDED_SIZE: usize = 4096;
/// Size of a conventional PCI function's config space.
pub(crate) const LEGACY_SIZE: usize = 256;
/// What an unprivileged read of sysfs `config` returns: the standard header only.
pub(crate) const UNPRIVILEGED_SIZE: usize = 64;

const STATUS: usize = 0x06;
const STATUS_CAP_LIST: u16 = 1 << 4;
const HEADER_TYPE: usize = 0x0e;
const CAP_PTR: usize = 0x34;
/// Header type 2: a CardBus bridge, whose capability pointer sits at 0x14.
const CARDBUS_HEADER: u8 = 2;
const CARDBUS_CAP_PTR: usize = 0x14;
const CAP_ID_EXPRESS: u8 = 0x10;
const CAP_ID_SSVID: u8 = 0x0d;
const EXPRESS_CAP_AT: usize = 0x40;
const EXPRESS_CAP_LEN: usize = 0x3c;
const SSVID_CAP_AT: usize = 0x80;
const EXT_CAP_START: usize = 0x100;
const EXT_ID_AER: u16 = 0x0001;
const EXT_ID_ACS: u16 = 0x000d;
const AER_CAP_LEN: usize = 0x48;

/// PCI Express capability register offsets (from the capability's start).
const EXP_FLAGS: usize = 0x02;
const EXP_DEVCAP: usize = 0x04;
const EXP_DEVCTL: usize = 0x08;
const EXP_DEVSTA: usize = 0x0a;
const EXP_LNKCAP: usize = 0x0c;
const EXP_LNKCTL: usize = 0x10;
const EXP_LNKSTA: usize = 0x12;
const EXP_DEVCAP2: usize = 0x24;
const EXP_DEVCTL2: usize = 0x28;
const EXP_LNKCAP2: usize = 0x2c;
const EXP_LNKCTL2: usize = 0x30;
const EXP_LNKSTA2: usize = 0x32;

/// DevCap bit 5: Extended Tag Field Supported.
const DEVCAP_EXT_TAG: u32 = 1 << 5;
/// DevCtl bit 4: Enable Relaxed Ordering; bit 8: Extended Tag Field Enable.
const DEVCTL_RELAXED_ORDERING: u16 = 1 << 4;
const DEVCTL_EXT_TAG: u16 = 1 << 8;
/// DevSta bits 3:0: correctable, non-fatal, fatal and unsupported-request errors detected.
const DEVSTA_ERRORS: u16 = 0xf;
/// DevCap2 bits 16/17: 10-Bit Tag Completer/Requester Supported; DevCtl2 bit 12: 10-Bit Tag
/// Requester Enable.
const DEVCAP2_10BIT_TAG_COMPLETER: u32 = 1 << 16;
const DEVCAP2_10BIT_TAG_REQUESTER: u32 = 1 << 17;
const DEVCTL2_10BIT_TAG_REQUESTER: u16 = 1 << 12;
/// LnkCap bit 20: Data Link Layer Link Active Reporting Capable.
const LNKCAP_DLLA: u32 = 1 << 20;
/// LnkSta bit 13: Data Link Layer Link Active.
const LNKSTA_DL_ACTIVE: u16 = 1 << 13;
/// LnkCap2 bit 8: crosslink supported.
const LNKCAP2_CROSSLINK: u32 = 1 << 8;

/// AER register offsets (from the extended capability's start).
const AER_UNCOR_STATUS: usize = 0x04;
const AER_UNCOR_MASK: usize = 0x08;
const AER_UNCOR_SEVER: usize = 0x0c;
const AER_COR_STATUS: usize = 0x10;
const AER_COR_MASK: usize = 0x14;
/// The ACS capability and control bits lspci prints (source validation through direct
/// translated P2P); the egress control vector size above them is not in its text, so no
/// reader keeps it.
pub(crate) const ACS_SHOWN_BITS: u16 = 0x7f;

/// Device/port type field of the PCI Express capability.
pub(crate) mod port_type {
    pub(crate) const ENDPOINT: u8 = 0x0;
    pub(crate) const LEGACY_ENDPOINT: u8 = 0x1;
    pub(crate) const ROOT_PORT: u8 = 0x4;
    pub(crate) const UPSTREAM: u8 = 0x5;
    pub(crate) const DOWNSTREAM: u8 = 0x6;
    pub(crate) const PCIE_TO_PCI_BRIDGE: u8 = 0x7;
    pub(crate) const PCI_TO_PCIE_BRIDGE: u8 = 0x8;
    pub(crate) const RC_ENDPOINT: u8 = 0x9;
    pub(crate) const RC_EVENT_COLLECTOR: u8 = 0xa;
}

/// What the PCI Express capability says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Express {
    pub(crate) port_type: u8,
    /// `None` for root-complex integrated functions, whose link registers are reserved.
    pub(crate) link: Option<Link>,
    pub(crate) mps_supported: u16,
    pub(crate) mps: u16,
    pub(crate) mrrs: u16,
    pub(crate) aspm_supported: Aspm,
    pub(crate) aspm_enabled: Aspm,
    /// The capability's version (PCIe 1.x functions have 1 and no version-2 registers).
    pub(crate) version: u8,
    /// Latencies, DL_Active and the version-2 link registers as the bytes hold them (the
    /// rule that functions other than 0 of an endpoint have no LnkCap2/LnkCtl2 is applied
    /// by [`Function::take_express_detail`], which knows the address).
    pub(crate) detail: ExpressDetail,
}

/// A decoded config space. Capabilities beyond the readable bytes are unknown, not absent:
/// `capabilities_read` says whether the standard capability list could be walked to its end.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Decoded {
    pub(crate) vendor: u16,
    pub(crate) device: u16,
    pub(crate) class: u32,
    pub(crate) revision: u8,
    pub(crate) header_type: u8,
    pub(crate) subsystem_vendor: u16,
    pub(crate) subsystem_device: u16,
    /// Secondary and subordinate bus of a type 1 (bridge) header.
    pub(crate) buses: Option<(u8, u8)>,
    pub(crate) express: Option<Express>,
    pub(crate) acs: Option<Acs>,
    pub(crate) aer: bool,
    /// The AER masks and status, limited to the bits lspci prints; `None` without AER.
    pub(crate) aer_masks: Option<AerMasks>,
    pub(crate) aer_status: Option<AerStatus>,
    pub(crate) capabilities_read: bool,
    /// Where the PCI Express, ACS and AER capabilities start, for readers that quote the bytes
    /// a fact came from.
    pub(crate) express_at: Option<usize>,
    pub(crate) acs_at: Option<usize>,
    pub(crate) aer_at: Option<usize>,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// 128 << code, the DevCap/DevCtl size encoding.
fn size_from_code(code: u32) -> u16 {
    128u16 << code.min(5)
}

fn code_from_size(size: u16) -> u32 {
    (size.max(128) / 128).trailing_zeros().min(5)
}

fn aspm_from_bits(bits: u32) -> Aspm {
    Aspm {
        l0s: bits & 1 != 0,
        l1: bits & 2 != 0,
    }
}

fn aspm_bits(a: Aspm) -> u32 {
    u32::from(a.l0s) | (u32::from(a.l1) << 1)
}

/// Decodes a link: speed code n is Gen n (the LnkCap2 vector index); 0 is "unknown". A
/// capability width of 0 is unknown; a current width of 0 with a speed is a link that is down.
fn link_from(cap: u32, sta: u16) -> Link {
    let max_speed = Generation::from_number((cap & 0xf) as u8);
    let max_width = Some(((cap >> 4) & 0x3f) as u8).filter(|&w| w != 0);
    let speed = Generation::from_number((sta & 0xf) as u8);
    let raw_width = ((sta >> 4) & 0x3f) as u8;
    let width = if speed.is_none() && raw_width == 0 {
        None
    } else {
        Some(raw_width)
    };
    Link {
        max_speed,
        max_width,
        speed,
        width,
    }
}

/// Decodes as much of `bytes` as is there; `None` when even the 64-byte header is missing.
pub(crate) fn decode(bytes: &[u8]) -> Option<Decoded> {
    if bytes.len() < UNPRIVILEGED_SIZE {
        return None;
    }
    let header_type = bytes[HEADER_TYPE] & 0x7f;
    let class = u32_at(bytes, 0x08) >> 8;
    let mut d = Decoded {
        vendor: u16_at(bytes, 0x00),
        device: u16_at(bytes, 0x02),
        class,
        revision: bytes[0x08],
        header_type,
        subsystem_vendor: 0,
        subsystem_device: 0,
        buses: None,
        express: None,
        acs: None,
        aer: false,
        aer_masks: None,
        aer_status: None,
        capabilities_read: true,
        express_at: None,
        acs_at: None,
        aer_at: None,
    };
    if header_type == 1 {
        d.buses = Some((bytes[0x19], bytes[0x1a]));
    } else if header_type == CARDBUS_HEADER {
        // A CardBus bridge keeps its bus numbers where a PCI bridge does, its subsystem IDs
        // and capability pointer elsewhere.
        d.buses = Some((bytes[0x19], bytes[0x1a]));
        d.subsystem_vendor = u16_at(bytes, 0x40);
        d.subsystem_device = u16_at(bytes, 0x42);
    } else {
        d.subsystem_vendor = u16_at(bytes, 0x2c);
        d.subsystem_device = u16_at(bytes, 0x2e);
    }
    if u16_at(bytes, STATUS) & STATUS_CAP_LIST == 0 {
        return Some(d);
    }
    let pointer_at = if header_type == CARDBUS_HEADER {
        CARDBUS_CAP_PTR
    } else {
        CAP_PTR
    };
    let mut ptr = usize::from(bytes[pointer_at] & 0xfc);
    let mut express_at = None;
    let mut hops = 0;
    while ptr != 0 && hops < 48 {
        if ptr + 8 > bytes.len() {
            d.capabilities_read = false;
            break;
        }
        match bytes[ptr] {
            CAP_ID_EXPRESS if ptr + EXPRESS_CAP_LEN <= bytes.len() => express_at = Some(ptr),
            CAP_ID_EXPRESS => {
                d.capabilities_read = false;
                break;
            }
            CAP_ID_SSVID if header_type == 1 => {
                d.subsystem_vendor = u16_at(bytes, ptr + 4);
                d.subsystem_device = u16_at(bytes, ptr + 6);
            }
            _ => {}
        }
        ptr = usize::from(bytes[ptr + 1] & 0xfc);
        hops += 1;
    }
    if let Some(at) = express_at {
        d.express_at = Some(at);
        d.express = Some(decode_express(bytes, at));
        // Extended capabilities need the full 4 KiB; without it ACS and AER read as absent.
        if bytes.len() >= EXT_CAP_START + 4 {
            decode_extended(bytes, &mut d);
        }
    }
    Some(d)
}

fn decode_express(b: &[u8], at: usize) -> Express {
    let flags = u16_at(b, at + EXP_FLAGS);
    let port_type = ((flags >> 4) & 0xf) as u8;
    let version = (flags & 0xf) as u8;
    let devcap = u32_at(b, at + EXP_DEVCAP);
    let devctl = u32::from(u16_at(b, at + EXP_DEVCTL));
    let lnkcap = u32_at(b, at + EXP_LNKCAP);
    let lnkctl = u32::from(u16_at(b, at + EXP_LNKCTL));
    let has_link = !matches!(
        port_type,
        port_type::RC_ENDPOINT | port_type::RC_EVENT_COLLECTOR
    );
    Express {
        port_type,
        link: has_link.then(|| link_from(lnkcap, u16_at(b, at + EXP_LNKSTA))),
        mps_supported: size_from_code(devcap & 0x7),
        mps: size_from_code((devctl >> 5) & 0x7),
        mrrs: size_from_code((devctl >> 12) & 0x7),
        // Integrated endpoints' link registers are reserved: no ASPM to speak of.
        aspm_supported: aspm_from_bits((lnkcap >> 10) & 0x3 & if has_link { 3 } else { 0 }),
        aspm_enabled: aspm_from_bits(lnkctl & 0x3 & if has_link { 3 } else { 0 }),
        version,
        detail: decode_detail(b, at, port_type, version, has_link),
    }
}

/// What lspci prints of the latencies and the version-2 link registers: acceptable latencies
/// for endpoints, an exit latency for each supported ASPM state, LnkCap2 when it is not 0,
/// and LnkCtl2/LnkSta2 from version 2 of the capability on.
fn decode_detail(b: &[u8], at: usize, port_type: u8, version: u8, has_link: bool) -> ExpressDetail {
    let devcap = u32_at(b, at + EXP_DEVCAP);
    let devctl = u16_at(b, at + EXP_DEVCTL);
    let mut d = ExpressDetail {
        features: DeviceFeatures {
            ext_tag_supported: Some(devcap & DEVCAP_EXT_TAG != 0),
            ext_tag_enabled: Some(devctl & DEVCTL_EXT_TAG != 0),
            relaxed_ordering_enabled: Some(devctl & DEVCTL_RELAXED_ORDERING != 0),
            ..DeviceFeatures::default()
        },
        errors_detected: Some((u16_at(b, at + EXP_DEVSTA) & DEVSTA_ERRORS) as u8),
        ..ExpressDetail::default()
    };
    if version >= 2 {
        let devcap2 = u32_at(b, at + EXP_DEVCAP2);
        let devctl2 = u16_at(b, at + EXP_DEVCTL2);
        d.features.ten_bit_tag_completer = Some(devcap2 & DEVCAP2_10BIT_TAG_COMPLETER != 0);
        d.features.ten_bit_tag_requester = Some(devcap2 & DEVCAP2_10BIT_TAG_REQUESTER != 0);
        d.features.ten_bit_tag_requester_enabled = Some(devctl2 & DEVCTL2_10BIT_TAG_REQUESTER != 0);
    }
    if matches!(port_type, port_type::ENDPOINT | port_type::LEGACY_ENDPOINT) {
        d.l0s_acceptable = Some(AspmLatency::l0s((devcap >> 6) as u8));
        d.l1_acceptable = Some(AspmLatency::l1((devcap >> 9) as u8));
    }
    if !has_link {
        return d;
    }
    let lnkcap = u32_at(b, at + EXP_LNKCAP);
    let lnksta = u16_at(b, at + EXP_LNKSTA);
    d.l0s_exit = (lnkcap & (1 << 10) != 0).then(|| AspmLatency::l0s((lnkcap >> 12) as u8));
    d.l1_exit = (lnkcap & (1 << 11) != 0).then(|| AspmLatency::l1((lnkcap >> 15) as u8));
    d.dl_active_reporting = Some(lnkcap & LNKCAP_DLLA != 0);
    d.dl_active = Some(lnksta & LNKSTA_DL_ACTIVE != 0);
    if version < 2 {
        return d;
    }
    let lnkcap2 = u32_at(b, at + EXP_LNKCAP2);
    if lnkcap2 != 0 {
        d.supported_speeds = Some(((lnkcap2 >> 1) & 0x7f) as u8);
        d.crosslink = Some(lnkcap2 & LNKCAP2_CROSSLINK != 0);
    }
    // A target speed hardwired to 0 means 2.5 GT/s only, as lspci reads it.
    let target = (u16_at(b, at + EXP_LNKCTL2) & 0xf) as u8;
    d.target_speed = Generation::from_number(target.max(1));
    let sta2 = u16_at(b, at + EXP_LNKSTA2);
    d.status2 = Some(LinkStatus2 {
        equalization_complete: sta2 & (1 << 1) != 0,
        equalization_phase1: sta2 & (1 << 2) != 0,
        equalization_phase2: sta2 & (1 << 3) != 0,
        equalization_phase3: sta2 & (1 << 4) != 0,
        equalization_request: sta2 & (1 << 5) != 0,
        crosslink_resolution: Some(((sta2 >> 8) & 3) as u8),
    });
    d
}

fn status2_bits(s: LinkStatus2) -> u16 {
    (u16::from(s.equalization_complete) << 1)
        | (u16::from(s.equalization_phase1) << 2)
        | (u16::from(s.equalization_phase2) << 3)
        | (u16::from(s.equalization_phase3) << 4)
        | (u16::from(s.equalization_request) << 5)
        | (u16::from(s.crosslink_resolution.unwrap_or(0) & 3) << 8)
}

fn decode_extended(b: &[u8], d: &mut Decoded) {
    let mut at = EXT_CAP_START;
    let mut hops = 0;
    while at >= EXT_CAP_START && at + 8 <= b.len() && hops < 512 {
        let header = u32_at(b, at);
        if header == 0 || header == u32::MAX {
            break;
        }
        match (header & 0xffff) as u16 {
            EXT_ID_AER => {
                d.aer = true;
                d.aer_at = Some(at);
                let whole = at + AER_COR_MASK + 4 <= b.len();
                d.aer_masks = whole.then(|| AerMasks {
                    uncorrectable_mask: u32_at(b, at + AER_UNCOR_MASK) & AER_UNCORRECTABLE_SHOWN,
                    uncorrectable_severity: u32_at(b, at + AER_UNCOR_SEVER)
                        & AER_UNCORRECTABLE_SHOWN,
                    correctable_mask: u32_at(b, at + AER_COR_MASK) & AER_CORRECTABLE_SHOWN,
                });
                d.aer_status = whole.then(|| AerStatus {
                    uncorrectable: u32_at(b, at + AER_UNCOR_STATUS) & AER_UNCORRECTABLE_SHOWN,
                    correctable: u32_at(b, at + AER_COR_STATUS) & AER_CORRECTABLE_SHOWN,
                });
            }
            EXT_ID_ACS => {
                d.acs_at = Some(at);
                d.acs = Some(Acs {
                    capability: u16_at(b, at + 4) & ACS_SHOWN_BITS,
                    control: u16_at(b, at + 6) & ACS_SHOWN_BITS,
                })
            }
            _ => {}
        }
        at = (header >> 20) as usize & 0xffc;
        hops += 1;
    }
}

/// The kind a function has, from its PCI Express port type, or from its class and header when
/// it has no PCI Express capability (host bridges and conventional PCI).
pub(crate) fn kind_of(express_type: Option<u8>, class: u32, header_type: u8) -> Kind {
    use port_type::*;
    match express_type {
        Some(ENDPOINT | LEGACY_ENDPOINT) => Kind::Endpoint,
        Some(ROOT_PORT) => Kind::RootPort,
        Some(UPSTREAM) => Kind::SwitchUpstream,
        Some(DOWNSTREAM) => Kind::SwitchDownstream,
        Some(PCIE_TO_PCI_BRIDGE | PCI_TO_PCIE_BRIDGE) => Kind::PciBridge,
        Some(RC_ENDPOINT | RC_EVENT_COLLECTOR) => Kind::RcEndpoint,
        _ if class >> 8 == 0x0600 => Kind::HostBridge,
        _ if matches!(header_type, 1 | CARDBUS_HEADER) || matches!(class >> 8, 0x0604 | 0x0609) => {
            Kind::PciBridge
        }
        _ => Kind::Endpoint,
    }
}

/// Whether a function of this kind and link carries a PCI Express capability: ports and
/// integrated endpoints always do, endpoints and PCI bridges when they have a link, host
/// bridges never.
pub(crate) fn has_express(kind: Kind, link: Option<&Link>) -> bool {
    match kind {
        Kind::RootPort | Kind::SwitchUpstream | Kind::SwitchDownstream | Kind::RcEndpoint => true,
        Kind::Endpoint | Kind::PciBridge => link.is_some(),
        Kind::HostBridge => false,
    }
}

fn express_type_of(kind: Kind) -> u8 {
    match kind {
        Kind::Endpoint | Kind::HostBridge => port_type::ENDPOINT,
        Kind::RootPort => port_type::ROOT_PORT,
        Kind::SwitchUpstream => port_type::UPSTREAM,
        Kind::SwitchDownstream => port_type::DOWNSTREAM,
        Kind::PciBridge => port_type::PCIE_TO_PCI_BRIDGE,
        Kind::RcEndpoint => port_type::RC_ENDPOINT,
    }
}

/// Encodes `f` as config space: 4 KiB with the PCI Express capability where it has one,
/// else 256 bytes.
pub(crate) fn encode(f: &Function) -> Vec<u8> {
    let express = has_express(f.kind, f.link.as_ref());
    let mut b = vec![0u8; if express { EXTENDED_SIZE } else { LEGACY_SIZE }];
    put16(&mut b, 0x00, f.vendor);
    put16(&mut b, 0x02, f.device);
    put16(&mut b, 0x04, 0x0006); // memory space + bus master, as an enumerated function
    put32(&mut b, 0x08, (f.class << 8) | u32::from(f.revision));
    let bridge = f.kind.is_bridge();
    b[HEADER_TYPE] = u8::from(bridge);
    let mut caps: Vec<usize> = Vec::new();
    if bridge {
        let (secondary, subordinate) = f.buses.unwrap_or((0, 0));
        b[0x18] = f.bdf.bus;
        b[0x19] = secondary;
        b[0x1a] = subordinate;
        if f.subsystem_vendor != 0 || f.subsystem_device != 0 {
            b[SSVID_CAP_AT] = CAP_ID_SSVID;
            put16(&mut b, SSVID_CAP_AT + 4, f.subsystem_vendor);
            put16(&mut b, SSVID_CAP_AT + 6, f.subsystem_device);
            caps.push(SSVID_CAP_AT);
        }
    } else {
        put16(&mut b, 0x2c, f.subsystem_vendor);
        put16(&mut b, 0x2e, f.subsystem_device);
    }
    if express {
        encode_express(&mut b, f);
        caps.insert(0, EXPRESS_CAP_AT);
        encode_extended(&mut b, f);
    }
    if let Some(&first) = caps.first() {
        put16(&mut b, STATUS, STATUS_CAP_LIST);
        b[CAP_PTR] = first as u8;
        for pair in caps.windows(2) {
            b[pair[0] + 1] = pair[1] as u8;
        }
    }
    b
}

fn encode_express(b: &mut [u8], f: &Function) {
    let at = EXPRESS_CAP_AT;
    b[at] = CAP_ID_EXPRESS;
    put16(
        b,
        at + EXP_FLAGS,
        0x2 | (u16::from(express_type_of(f.kind)) << 4),
    );
    let detail = &f.express_detail;
    let code = |l: Option<AspmLatency>| u32::from(l.map_or(0, |l| l.code));
    // Role-based error reporting is mandatory since PCIe 1.1.
    // A feature the function does not say it has is written clear.
    let set = |on: Option<bool>, bit: u32| if on == Some(true) { bit } else { 0 };
    put32(
        b,
        at + EXP_DEVCAP,
        code_from_size(f.mps_supported.unwrap_or(128))
            | set(detail.features.ext_tag_supported, DEVCAP_EXT_TAG)
            | (code(detail.l0s_acceptable) << 6)
            | (code(detail.l1_acceptable) << 9)
            | (1 << 15),
    );
    let devctl = (code_from_size(f.mps.unwrap_or(128)) << 5)
        | (code_from_size(f.mrrs.unwrap_or(512)) << 12)
        | set(
            detail.features.relaxed_ordering_enabled,
            DEVCTL_RELAXED_ORDERING.into(),
        )
        | set(detail.features.ext_tag_enabled, DEVCTL_EXT_TAG.into());
    put16(b, at + EXP_DEVCTL, devctl as u16);
    put16(
        b,
        at + EXP_DEVSTA,
        u16::from(detail.errors_detected.unwrap_or(0)) & DEVSTA_ERRORS,
    );
    put32(
        b,
        at + EXP_DEVCAP2,
        set(
            detail.features.ten_bit_tag_completer,
            DEVCAP2_10BIT_TAG_COMPLETER,
        ) | set(
            detail.features.ten_bit_tag_requester,
            DEVCAP2_10BIT_TAG_REQUESTER,
        ),
    );
    put16(
        b,
        at + EXP_DEVCTL2,
        set(
            detail.features.ten_bit_tag_requester_enabled,
            DEVCTL2_10BIT_TAG_REQUESTER.into(),
        ) as u16,
    );
    if f.kind == Kind::RcEndpoint {
        return;
    }
    let link = f.link.unwrap_or_default();
    let max_code = link.max_speed.map_or(0, Generation::number);
    let lnkcap = u32::from(max_code)
        | (u32::from(link.max_width.unwrap_or(0)) << 4)
        | (aspm_bits(f.aspm_supported) << 10)
        | (code(detail.l0s_exit) << 12)
        | (code(detail.l1_exit) << 15)
        | if detail.dl_active_reporting == Some(true) {
            LNKCAP_DLLA
        } else {
            0
        }
        | (u32::from(f.bdf.device) << 24);
    put32(b, at + EXP_LNKCAP, lnkcap);
    put16(b, at + EXP_LNKCTL, aspm_bits(f.aspm_enabled) as u16);
    let lnksta = u16::from(link.speed.map_or(0, Generation::number))
        | (u16::from(link.width.unwrap_or(0)) << 4)
        | if detail.dl_active == Some(true) {
            LNKSTA_DL_ACTIVE
        } else {
            0
        };
    put16(b, at + EXP_LNKSTA, lnksta);
    // Supported-speeds vector (bit n for Gen n): as read, else every generation up to the
    // maximum.
    let lnkcap2 = match detail.supported_speeds {
        Some(vector) => {
            (u32::from(vector & 0x7f) << 1)
                | if detail.crosslink == Some(true) {
                    LNKCAP2_CROSSLINK
                } else {
                    0
                }
        }
        None => ((1u32 << max_code) - 1) << 1,
    };
    put32(b, at + EXP_LNKCAP2, lnkcap2);
    let target = detail.target_speed.map_or(max_code, Generation::number);
    put16(b, at + EXP_LNKCTL2, u16::from(target));
    put16(b, at + EXP_LNKSTA2, detail.status2.map_or(0, status2_bits));
}

fn encode_extended(b: &mut [u8], f: &Function) {
    let mut blocks: Vec<(u16, u8, usize)> = Vec::new();
    if f.aer {
        blocks.push((EXT_ID_AER, 2, AER_CAP_LEN));
    }
    if f.acs.is_some() {
        blocks.push((EXT_ID_ACS, 1, 8));
    }
    let mut at = EXT_CAP_START;
    for (i, &(id, version, len)) in blocks.iter().enumerate() {
        let next = if i + 1 < blocks.len() { at + len } else { 0 };
        put32(
            b,
            at,
            u32::from(id) | (u32::from(version) << 16) | ((next as u32) << 20),
        );
        if let (EXT_ID_ACS, Some(acs)) = (id, f.acs) {
            put16(b, at + 4, acs.capability);
            put16(b, at + 6, acs.control);
        }
        if let (EXT_ID_AER, Some(status)) = (id, f.aer_status) {
            put32(b, at + AER_UNCOR_STATUS, status.uncorrectable);
            put32(b, at + AER_COR_STATUS, status.correctable);
        }
        if let (EXT_ID_AER, Some(masks)) = (id, f.aer_masks) {
            put32(b, at + AER_UNCOR_MASK, masks.uncorrectable_mask);
            put32(b, at + AER_UNCOR_SEVER, masks.uncorrectable_severity);
            put32(b, at + AER_COR_MASK, masks.correctable_mask);
        }
        at += len;
    }
}

impl Function {
    /// Takes every fact the decoded capabilities hold: the kind, the PCI Express capability
    /// (link, MPS/MRRS, ASPM, latencies, features), ACS and AER. Nothing when the capability
    /// list could not be read to its end (the kind is then the caller's to infer).
    pub(crate) fn take_capabilities(&mut self, d: &Decoded) {
        if !d.capabilities_read {
            return;
        }
        self.kind = kind_of(d.express.map(|e| e.port_type), d.class, d.header_type);
        let Some(e) = d.express else {
            return;
        };
        self.take_express(&e);
        self.take_express_detail(&e);
        self.acs = d.acs;
        self.aer = d.aer;
        self.aer_masks = d.aer_masks;
        self.aer_status = d.aer_status;
    }

    /// Takes what the PCI Express capability says: link, MPS/MRRS and ASPM.
    fn take_express(&mut self, e: &Express) {
        self.link = e.link;
        self.mps_supported = Some(e.mps_supported);
        self.mps = Some(e.mps);
        self.mrrs = Some(e.mrrs);
        self.aspm_supported = e.aspm_supported;
        self.aspm_enabled = e.aspm_enabled;
    }

    /// Takes the latencies, DL_Active and version-2 link registers `e` holds. LnkCap2 and
    /// LnkCtl2 of an endpoint's functions other than 00.0 are left unknown: they govern
    /// nothing (function 0's control the link) and lspci does not print them.
    fn take_express_detail(&mut self, e: &Express) {
        let mut d = e.detail;
        let endpoint = matches!(
            e.port_type,
            port_type::ENDPOINT | port_type::LEGACY_ENDPOINT
        );
        if endpoint && (self.bdf.device != 0 || self.bdf.function != 0) {
            d.supported_speeds = None;
            d.crosslink = None;
            d.target_speed = None;
        }
        self.express_detail = d;
    }
}

#[cfg(test)]
mod tests;
