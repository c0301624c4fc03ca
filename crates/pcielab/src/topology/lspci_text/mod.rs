//! lspci's verbose text (`-v`, `-vv`, `-vvv`; with `-nn`, `-n`, `-k`, `-D`) read back into
//! functions. Each block starts with the function's address line; the indented lines below it
//! give what this reader keeps: IDs (`[8086:3408]` with `-nn`), revision and prog-if, the
//! subsystem, the bridge's bus numbers (`Bus: primary=…`), the PCI Express capability's port
//! type, DevCap/DevCtl/DevSta (MPS, MRRS, Extended Tags, Relaxed Ordering, detected errors),
//! DevCap2/DevCtl2 (10-bit tags), LnkCap/LnkCtl/LnkSta and their version-2 registers (speed,
//! width, ASPM and its latencies, DL_Active), AER (status, masks) and ACS, the bound driver
//! (`-k`) and the NUMA node: every fact a config-space decode gives that lspci prints.
//!
//! The text names registers' fields as ls-caps.c prints them (pciutils), so the words matched
//! here are lspci's own. What the text does not show stays unknown and is listed in the
//! function's evidence: IDs without `-n` that the installed PCI ID database cannot give back
//! from lspci's names (a name it gives two devices), link registers below `-vv`, and ACS/AER when no
//! extended capability (offset 0x100 and up) is listed — lspci without root, or reading a
//! 256-byte dump, shows none.

use std::collections::HashMap;

use crate::error::Result;
use crate::pcie::{Bdf, Generation};
use crate::topology::config_space::{kind_of, port_type};
use crate::topology::lspci_source::{
    check_unique, header_line, link_by_bus_ranges, passed_over, passed_over_note, Header,
    LspciFormat, LspciRead, Source, MAX_LSPCI_FUNCTIONS,
};
use crate::topology::{
    Acs, AerMasks, AerStatus, Aspm, AspmLatency, FactSource, Function, Link, LinkStatus2,
    SharedNames, Topology, AER_CORRECTABLE_FLAGS, AER_UNCORRECTABLE_FLAGS, DEVICE_ERROR_FLAGS,
};

/// Where the extended capabilities start: a capability listed at or above it proves lspci
/// read them.
const EXTENDED_START: u32 = 0x100;

/// ACS capability/control flags in register bit order, as lspci names them.
const ACS_FLAGS: [&str; 7] = [
    "SrcValid",
    "TransBlk",
    "ReqRedir",
    "CmpltRedir",
    "UpstreamFwd",
    "EgressCtrl",
    "DirectTrans",
];

/// The PCI Express port types as lspci words them, longest first where one starts another
/// (lspci before 3.2 called a PCIe-to-PCI bridge "PCI/PCI-X Bridge").
const PORT_TYPES: [(&str, u8); 10] = [
    ("Legacy Endpoint", port_type::LEGACY_ENDPOINT),
    ("Endpoint", port_type::ENDPOINT),
    ("Root Port", port_type::ROOT_PORT),
    ("Upstream Port", port_type::UPSTREAM),
    ("Downstream Port", port_type::DOWNSTREAM),
    (
        "PCI-Express to PCI/PCI-X Bridge",
        port_type::PCIE_TO_PCI_BRIDGE,
    ),
    (
        "PCI/PCI-X to PCI-Express Bridge",
        port_type::PCI_TO_PCIE_BRIDGE,
    ),
    ("PCI/PCI-X Bridge", port_type::PCIE_TO_PCI_BRIDGE),
    ("Root Complex Integrated Endpoint", port_type::RC_ENDPOINT),
    (
        "Root Complex Event Collector",
        port_type::RC_EVENT_COLLECTOR,
    ),
];

/// The capability whose lines are being read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Other,
    Express,
    Acs,
    Aer,
}

/// The AER registers whose lines were read: UEMsk, UESvrt, CEMsk; UESta, CESta.
#[derive(Default)]
struct AerSeen {
    masks: AerMasks,
    lines: [bool; 3],
    status: AerStatus,
    status_lines: [bool; 2],
}

/// The PCI Express capability's registers as lspci labels them. A register's flags continue on
/// the indented lines below its label (`DevCtl:` then `RlxdOrd- ExtTag+ …`), and some flags
/// are named alike in two registers (`ExtTag` in DevCap and DevCtl, `10BitTagReq` in DevCap2
/// and DevCtl2): the last label read says whose a flag is.
const EXPRESS_REGISTERS: [&str; 18] = [
    "DevCap:", "DevCtl:", "DevSta:", "DevCap2:", "DevCtl2:", "DevSta2:", "LnkCap:", "LnkCtl:",
    "LnkSta:", "LnkCap2:", "LnkCtl2:", "LnkSta2:", "SltCap:", "SltCtl:", "SltSta:", "RootCap:",
    "RootCtl:", "RootSta:",
];

/// One function's block as it is read.
struct Block {
    f: Function,
    header_type: u8,
    /// The PCI Express capability is listed; `port` is its type when lspci named a known one.
    express: bool,
    port: Option<u8>,
    caps_denied: bool,
    extended_listed: bool,
    link_cap_seen: bool,
    link_sta_seen: bool,
    section: Section,
    aer: AerSeen,
    /// LnkSta2's equalization flags were printed (older lspci prints the de-emphasis
    /// level only).
    equalization_seen: bool,
    /// The PCI Express register whose lines are being read (one of [`EXPRESS_REGISTERS`]).
    register: &'static str,
    /// A `Kernel driver in use:` or `Kernel modules:` line was read: the text is `lspci -k`.
    kernel_lines: bool,
    /// A value no lspci prints (an MPS of 0), with its line number: the input is refused.
    invalid: Option<(usize, String)>,
    /// The class as lspci worded it when it gave no number (no `-n`), and the prog-if.
    class_name: Option<(String, u32)>,
}

pub(crate) fn read(source: &Source) -> Result<LspciRead> {
    // Each function starts on an unindented line: room for them all at once, so the list is
    // never copied as it grows (a large listing would hold two copies while it is).
    let unindented = source
        .lines
        .iter()
        .filter(|l| !l.is_empty() && !l.starts_with(char::is_whitespace))
        .count();
    let mut functions = Vec::with_capacity(unindented.min(MAX_LSPCI_FUNCTIONS));
    // The classes worded without a number (no `-n`), by the function's place in `functions`.
    let mut class_names = Vec::new();
    let mut kernel_lines = false;
    let mut names = SharedNames::default();
    let mut open: Option<Block> = None;
    let mut close = |block: Block, functions: &mut Vec<Function>| {
        kernel_lines |= block.kernel_lines;
        if let Some((name, prog_if)) = block.class_name.clone() {
            class_names.push(WordedClass {
                place: functions.len(),
                name,
                prog_if,
                port: block.port,
                header_type: block.header_type,
            });
        }
        let mut f = finish(block);
        f.name = names.share(f.name.take());
        f.driver = names.share(f.driver.take());
        functions.push(f);
    };
    let mut seen = HashMap::new();
    let mut skipped = Vec::new();
    for (index, raw) in source.lines.iter().enumerate() {
        let line = raw.trim_end_matches('\r');
        let header = header_line(line);
        if let Header::Function(bdf, rest) = header {
            check_unique(source, &mut seen, bdf, index)?;
            if let Some(done) = open.replace(header_block(source, bdf, rest, index + 1)) {
                close(done, &mut functions);
            }
        } else if let Header::Malformed(why) = header {
            return Err(source.bad(index, why));
        } else if line.trim().is_empty() {
            continue;
        } else if line.starts_with(char::is_whitespace) {
            if let Some(block) = open.as_mut() {
                detail(block, line.trim(), index + 1);
                if let Some((number, why)) = block.invalid.take() {
                    return Err(source.bad(number - 1, why));
                }
            }
        } else if passed_over(line, open.is_none()) {
            skipped.push(index);
        } else {
            return Err(source.bad(
                index,
                format!(
                    "'{}' is not lspci output: expected a function's address line such as \
                     `00:1f.2 SATA controller: …` or an indented detail line below one",
                    crate::input::cut_for_message(line)
                ),
            ));
        }
    }
    if let Some(done) = open {
        close(done, &mut functions);
    }
    drop(seen);
    // `-k` prints a driver line for every bound function: with it, a function without one has
    // no driver; without it, nobody's driver is known.
    let driver_source = if kernel_lines {
        FactSource::LspciKernelLines
    } else {
        FactSource::Unknown
    };
    let mut notes: Vec<String> = passed_over_note(source, &skipped).into_iter().collect();
    notes.extend(ids_from_names(&mut functions, &class_names));
    for f in &mut functions {
        f.driver_source = driver_source;
    }
    link_by_bus_ranges(&mut functions);
    Ok(LspciRead {
        topology: Topology::new(functions),
        format: LspciFormat::Verbose,
        notes,
    })
}

/// A class lspci worded without its number (no `-n`), with what the function's kind follows
/// from once the number is known.
struct WordedClass {
    /// The function's place in the list read.
    place: usize,
    name: String,
    prog_if: u32,
    port: Option<u8>,
    header_type: u8,
}

/// Without `-nn` lspci prints vendors, devices and classes as names from the PCI ID database:
/// the installed database gives their numbers back (and with the class, the host bridge its
/// kind). What it cannot name stays unknown, and the note says so with the `-nn` hint.
fn ids_from_names(functions: &mut [Function], class_names: &[WordedClass]) -> Option<String> {
    if class_names.is_empty() && !functions.iter().any(|f| f.evidence.is_unknown("vendor")) {
        return None;
    }
    use crate::topology::pciids::{cached, default_db, IdsByName};
    let db = default_db();
    let ids = db.as_deref().and_then(cached).unwrap_or_default();
    let names: std::collections::BTreeSet<&str> =
        functions.iter().filter_map(|f| f.name.as_deref()).collect();
    let index = IdsByName::new(&ids, &names);
    let mut class_names = class_names.iter().peekable();
    let mut unresolved = Vec::new();
    for (at, f) in functions.iter_mut().enumerate() {
        let worded = class_names.next_if(|c| c.place == at);
        let ids = f.name.as_deref().and_then(|n| index.device(n));
        let class = worded.and_then(|c| Some((index.class(&c.name)?, c)));
        if let Some((vendor, device)) = ids {
            f.vendor = vendor;
            f.device = device;
            f.evidence.found("vendor");
            f.evidence.found("device");
        }
        if let Some((class, worded)) = class {
            f.class = u32::from(class) << 8 | worded.prog_if;
            f.evidence.found("class");
            f.kind = kind_of(worded.port, f.class, worded.header_type);
        }
        if (worded.is_some() && class.is_none()) || f.evidence.is_unknown("vendor") {
            unresolved.push(f.bdf.to_string());
        }
    }
    let database = db.map_or_else(
        || "no PCI ID database is installed (pci.ids of pciutils or hwdata)".to_string(),
        |p| format!("{} does not tie their names to one number", p.display()),
    );
    (!unresolved.is_empty()).then(|| {
        format!(
            "{} function(s) printed without numeric IDs ({}) stay partly unknown: {database} \
             (a name it gives two devices, or one it lacks); `lspci -vvv -nn` prints the numbers",
            unresolved.len(),
            unresolved.join(", ")
        )
    })
}

/// The address line: `BDF CLASS: DESCRIPTION (rev RR) (prog-if PP [NAME])`, where CLASS is
/// `Name [cccc]` (-nn), `cccc` (-n), `Class cccc` (no name known) or a name only, and
/// DESCRIPTION ends in `[vvvv:dddd]` (-nn) or is `vvvv:dddd` (-n).
fn header_block(source: &Source, bdf: Bdf, rest: &str, line: usize) -> Block {
    let mut f = Function::new(bdf, 0, 0, 0, crate::topology::Kind::Endpoint);
    f.evidence = source.evidence();
    f.evidence.saw("header", line);
    let (class_part, description) = rest.split_once(": ").unwrap_or((rest, ""));
    let mut description = description.trim_end();
    let mut prog_if = 0u32;
    if let Some(at) = description.rfind(" (prog-if ") {
        let after = &description[at + " (prog-if ".len()..];
        prog_if = after
            .get(..2)
            .and_then(|p| u32::from_str_radix(p, 16).ok())
            .unwrap_or(0);
        description = &description[..at];
    }
    if let Some(at) = description.rfind(" (rev ") {
        let after = &description[at + " (rev ".len()..];
        if let Some(rev) = after.get(..2).and_then(|r| u8::from_str_radix(r, 16).ok()) {
            f.revision = rev;
        }
        description = &description[..at];
    }
    let mut class_name = None;
    match class_code(class_part) {
        Some(class) => f.class = (u32::from(class) << 8) | prog_if,
        None => {
            f.evidence.missing("class");
            class_name = Some((class_part.trim().to_string(), prog_if));
        }
    }
    match id_pair(description) {
        Some((vendor, device)) => {
            f.vendor = vendor;
            f.device = device;
        }
        None => {
            f.evidence.missing("vendor");
            f.evidence.missing("device");
            f.name = Some(crate::text::printable(description).into());
        }
    }
    Block {
        f,
        header_type: 0,
        express: false,
        port: None,
        caps_denied: false,
        extended_listed: false,
        link_cap_seen: false,
        link_sta_seen: false,
        section: Section::Other,
        aer: AerSeen::default(),
        equalization_seen: false,
        register: "",
        kernel_lines: false,
        invalid: None,
        class_name,
    }
}

fn hex16(text: &str) -> Option<u16> {
    (text.len() == 4)
        .then(|| u16::from_str_radix(text, 16).ok())
        .flatten()
}

/// `Name [cccc]`, `Class cccc` or `cccc`: base class and subclass.
fn class_code(part: &str) -> Option<u16> {
    if let Some(inner) = part.strip_suffix(']').and_then(|p| p.rsplit_once('[')) {
        return hex16(inner.1);
    }
    hex16(part.strip_prefix("Class ").unwrap_or(part))
}

/// `… [vvvv:dddd]`, `Device vvvv:dddd` or `vvvv:dddd`.
fn id_pair(description: &str) -> Option<(u16, u16)> {
    let ids = match description
        .strip_suffix(']')
        .and_then(|d| d.rsplit_once('['))
    {
        Some((_, inner)) => inner,
        None => description.rsplit(' ').next()?,
    };
    let (vendor, device) = ids.split_once(':')?;
    Some((hex16(vendor)?, hex16(device)?))
}

/// One indented line of a block.
fn detail(block: &mut Block, line: &str, number: usize) {
    let f = &mut block.f;
    if let Some(cap) = line.strip_prefix("Capabilities: ") {
        block.section = Section::Other;
        capability(block, cap, number);
    } else if let Some(rest) = line.strip_prefix("Subsystem: ") {
        if let Some((vendor, device)) = id_pair(rest.trim_end()) {
            f.subsystem_vendor = vendor;
            f.subsystem_device = device;
            f.evidence.saw("subsystem", number);
        }
    } else if let Some(rest) = line.strip_prefix("Bus: ") {
        block.header_type = 1;
        let field = |name: &str| {
            rest.split(", ")
                .find_map(|p| p.strip_prefix(name))
                .and_then(|v| u8::from_str_radix(v, 16).ok())
        };
        if let (Some(secondary), Some(subordinate)) = (field("secondary="), field("subordinate=")) {
            f.buses = Some((secondary, subordinate));
            f.evidence.saw("buses", number);
        }
    } else if let Some(driver) = line.strip_prefix("Kernel driver in use: ") {
        f.driver = Some(crate::text::printable(driver.trim()).into());
        f.evidence.saw("driver", number);
        block.kernel_lines = true;
    } else if line.starts_with("Kernel modules: ") {
        block.kernel_lines = true;
    } else if let Some(node) = line.strip_prefix("NUMA node: ") {
        f.numa_node = node
            .trim()
            .parse()
            .ok()
            .filter(|n: &i32| (0..crate::topology::MAX_NUMA_NODES).contains(n));
        f.evidence.saw("numa_node", number);
    } else if block.section == Section::Aer {
        aer_register(block, line, number);
    } else if block.express {
        express_register(block, line, number);
    }
}

/// The bits of the `NAME+` flags of `text`, by `flags`' bit numbers.
fn flag_bits(text: &str, flags: &[(&str, u8)]) -> u32 {
    flags
        .iter()
        .filter(|(name, _)| flag(text, name) == Some(true))
        .fold(0u32, |bits, (_, bit)| bits | (1 << bit))
}

/// `UESta:`, `UEMsk:`, `UESvrt:`, `CESta:` and `CEMsk:` of the AER capability: the flags lspci
/// marks `+`.
fn aer_register(block: &mut Block, line: &str, number: usize) {
    let registers: [(&str, &[(&str, u8)]); 5] = [
        ("UEMsk:", &AER_UNCORRECTABLE_FLAGS),
        ("UESvrt:", &AER_UNCORRECTABLE_FLAGS),
        ("CEMsk:", &AER_CORRECTABLE_FLAGS),
        ("UESta:", &AER_UNCORRECTABLE_FLAGS),
        ("CESta:", &AER_CORRECTABLE_FLAGS),
    ];
    for (i, (label, flags)) in registers.into_iter().enumerate() {
        let Some(rest) = line.strip_prefix(label) else {
            continue;
        };
        let bits = flag_bits(rest, flags);
        let (masks, status) = (&mut block.aer.masks, &mut block.aer.status);
        match i {
            0 => masks.uncorrectable_mask = bits,
            1 => masks.uncorrectable_severity = bits,
            2 => masks.correctable_mask = bits,
            3 => status.uncorrectable = bits,
            _ => status.correctable = bits,
        }
        match i {
            0..=2 => block.aer.lines[i] = true,
            _ => block.aer.status_lines[i - 3] = true,
        }
        match i {
            0 => block.f.evidence.saw("aer_masks", number),
            3 => block.f.evidence.saw("aer_status", number),
            _ => {}
        }
    }
}

/// lspci's `NAME+` / `NAME-` among the words of `text` (older versions follow some with a comma).
fn flag(text: &str, name: &str) -> Option<bool> {
    text.split_whitespace()
        .map(|w| w.trim_end_matches(','))
        .find_map(|w| match w.strip_prefix(name) {
            Some("+") => Some(true),
            Some("-") => Some(false),
            _ => None,
        })
}

/// The text after `label` up to the next comma: `Latency L0s <64ns, L1 <1us` gives `<64ns`
/// for `L0s `.
fn word_after<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let at = text.find(label)? + label.len();
    Some(text[at..].split(',').next()?.trim())
}

/// The latencies after `label` (`Exit Latency `, `Latency `): `L0s X` and `L1 Y`, each
/// optional (old lspci, as on CentOS 6, wrote `L0` for L0s).
fn latencies(text: &str, label: &str) -> (Option<AspmLatency>, Option<AspmLatency>) {
    let Some(at) = text.find(label) else {
        return (None, None);
    };
    let (mut l0s, mut l1) = (None, None);
    for item in text[at + label.len()..].split(", ") {
        let item = item.trim();
        if let Some(v) = item
            .strip_prefix("L0s ")
            .or_else(|| item.strip_prefix("L0 "))
        {
            l0s = AspmLatency::from_text(false, v);
        } else if let Some(v) = item.strip_prefix("L1 ") {
            l1 = AspmLatency::from_text(true, v);
        }
    }
    (l0s, l1)
}

/// LnkCap2's `Supported Link Speeds: 2.5-8GT/s` as the speeds vector (bit n-1 for Gen n):
/// lspci prints the range up to the highest bit, `Unknown` for none and `RsvdP` for bits it
/// does not know (which stay unknown).
fn speeds_vector(text: &str) -> Option<u8> {
    let words = word_after(text, "Supported Link Speeds: ")?;
    if words == "Unknown" {
        return Some(0);
    }
    let top = words.strip_suffix("GT/s")?.rsplit('-').next()?;
    let top = Generation::from_gt_s(top.parse().ok()?)?;
    Some(((1u16 << top.number()) - 1) as u8)
}

/// `Capabilities: [OFF] NAME` (or `[OFF vN] NAME` for extended ones, or `<access denied>`).
fn capability(block: &mut Block, cap: &str, number: usize) {
    if cap.starts_with("<access denied>") {
        block.caps_denied = true;
        return;
    }
    let Some((offset, name)) = cap.strip_prefix('[').and_then(|c| c.split_once("] ")) else {
        return;
    };
    let offset = offset.split(' ').next().unwrap_or("");
    if u32::from_str_radix(offset, 16).is_ok_and(|o| o >= EXTENDED_START) {
        block.extended_listed = true;
    }
    let f = &mut block.f;
    if let Some(express) = name.strip_prefix("Express ") {
        // `(v2) ` appears from -vv on.
        let kind = express
            .strip_prefix('(')
            .and_then(|e| e.split_once(") "))
            .map_or(express, |(_, rest)| rest);
        block.express = true;
        block.port = PORT_TYPES
            .iter()
            .find(|(words, _)| kind.starts_with(words))
            .map(|&(_, code)| code);
        f.evidence.saw("express", number);
        block.section = Section::Express;
    } else if name.starts_with("Advanced Error Reporting") {
        f.aer = true;
        f.evidence.saw("aer", number);
        block.section = Section::Aer;
    } else if name.starts_with("Access Control Services") {
        block.section = Section::Acs;
        f.acs = Some(Acs::default());
    }
}

/// Registers of the PCI Express capability, and ACS's two lines.
fn express_register(block: &mut Block, line: &str, number: usize) {
    if block.section == Section::Express {
        if let Some(label) = EXPRESS_REGISTERS.iter().find(|l| line.starts_with(*l)) {
            block.register = label;
        }
        express_flags(block, line, number);
        device_flags(block, line, number);
    }
    let f = &mut block.f;
    let detail = &mut f.express_detail;
    if let Some(rest) = line.strip_prefix("DevCap:") {
        f.mps_supported = size_after(&mut block.invalid, rest, "MaxPayload ", number);
        (detail.l0s_acceptable, detail.l1_acceptable) = latencies(rest, "Latency ");
        f.evidence.saw("devcap", number);
    } else if let Some(rest) = line.strip_prefix("LnkCap2:") {
        detail.supported_speeds = speeds_vector(rest);
        f.evidence.saw("lnkcap2", number);
    } else if let Some(rest) = line.strip_prefix("LnkCtl2:") {
        detail.target_speed = word_after(rest, "Target Link Speed: ")
            .and_then(|w| w.strip_suffix("GT/s")?.parse().ok())
            .and_then(Generation::from_gt_s);
        f.evidence.saw("lnkctl2", number);
    } else if line.starts_with("LnkSta2:") {
        f.evidence.saw("lnksta2", number);
    } else if line.contains("MaxReadReq ") {
        f.mps = size_after(&mut block.invalid, line, "MaxPayload ", number);
        f.mrrs = size_after(&mut block.invalid, line, "MaxReadReq ", number);
        f.evidence.saw("devctl", number);
    } else if let Some(rest) = line.strip_prefix("LnkCap:") {
        block.link_cap_seen = true;
        let link = f.link.get_or_insert_with(Link::default);
        link.max_speed = speed_after(rest);
        link.max_width = width_after(rest).filter(|&w| w != 0);
        f.aspm_supported = aspm_named(rest, ",");
        // Only the supported states' exit latencies count (lspci prints no others).
        let (l0s, l1) = latencies(rest, "Latency ");
        detail.l0s_exit = l0s.filter(|_| f.aspm_supported.l0s);
        detail.l1_exit = l1.filter(|_| f.aspm_supported.l1);
        f.evidence.saw("lnkcap", number);
    } else if let Some(rest) = line.strip_prefix("LnkCtl:") {
        f.aspm_enabled = aspm_named(rest, ";");
        f.evidence.saw("lnkctl", number);
    } else if let Some(rest) = line.strip_prefix("LnkSta:") {
        block.link_sta_seen = true;
        let link = f.link.get_or_insert_with(Link::default);
        link.speed = speed_after(rest);
        // A width of 0 with an unknown speed is an unknown link, as the register decode has it.
        link.width = width_after(rest).filter(|&w| link.speed.is_some() || w != 0);
        f.evidence.saw("lnksta", number);
    } else if block.section == Section::Acs {
        let control = if let Some(rest) = line.strip_prefix("ACSCap:") {
            Some((false, rest))
        } else {
            line.strip_prefix("ACSCtl:").map(|rest| (true, rest))
        };
        if let (Some((is_control, rest)), Some(acs)) = (control, f.acs.as_mut()) {
            let bits = ACS_FLAGS
                .iter()
                .enumerate()
                .filter(|(_, name)| rest.split_whitespace().any(|w| w == format!("{name}+")))
                .fold(0u16, |bits, (i, _)| bits | (1 << i));
            if is_control {
                acs.control = bits;
                f.evidence.saw("acs", number);
            } else {
                acs.capability = bits;
            }
        }
    }
}

/// The flags of the PCI Express capability that sit on lspci's continuation lines (or, in
/// old lspci, on the register's own line): LnkCap's `LLActRep`, LnkSta's `DLActive`,
/// LnkCap2's `Crosslink`, and LnkSta2's equalization flags and `CrosslinkRes:`.
fn express_flags(block: &mut Block, line: &str, number: usize) {
    let detail = &mut block.f.express_detail;
    let evidence = &mut block.f.evidence;
    if let Some(on) = flag(line, "LLActRep") {
        detail.dl_active_reporting = Some(on);
        evidence.saw("dl_active_reporting", number);
    }
    if let Some(on) = flag(line, "DLActive") {
        detail.dl_active = Some(on);
        evidence.saw("dl_active", number);
    }
    if line.starts_with("LnkCap2:") {
        detail.crosslink = flag(line, "Crosslink");
    }
    if line.starts_with("LnkSta2:") {
        detail.status2 = Some(LinkStatus2::default());
    }
    let Some(status2) = detail.status2.as_mut() else {
        return;
    };
    let flags: [(&str, &mut bool); 5] = [
        ("EqualizationComplete", &mut status2.equalization_complete),
        ("EqualizationPhase1", &mut status2.equalization_phase1),
        ("EqualizationPhase2", &mut status2.equalization_phase2),
        ("EqualizationPhase3", &mut status2.equalization_phase3),
        ("LinkEqualizationRequest", &mut status2.equalization_request),
    ];
    for (name, value) in flags {
        if let Some(on) = flag(line, name) {
            *value = on;
            block.equalization_seen = true;
        }
    }
    if let Some(words) = word_after(line, "CrosslinkRes: ") {
        status2.crosslink_resolution = [
            "unsupported",
            "Upstream Port",
            "Downstream Port",
            "incomplete",
        ]
        .iter()
        .position(|w| *w == words)
        .map(|p| p as u8);
    }
}

/// The device registers' flags, on the register's line or below it: DevCap's `ExtTag`, DevCtl's
/// `RlxdOrd` and `ExtTag`, DevSta's error bits, DevCap2's `10BitTagComp`/`10BitTagReq` and
/// DevCtl2's `10BitTagReq` (lspci 3.7 and later print the 10-bit tag flags).
fn device_flags(block: &mut Block, line: &str, number: usize) {
    let detail = &mut block.f.express_detail;
    let evidence = &mut block.f.evidence;
    match block.register {
        // A flag's own line is kept under "register.flag" (lower case), so advice quotes the
        // line that shows it rather than the register's last line.
        "DevCap:" => {
            if let Some(on) = flag(line, "ExtTag") {
                detail.features.ext_tag_supported = Some(on);
                evidence.saw("devcap.exttag", number);
            }
        }
        "DevCtl:" => {
            if let Some(on) = flag(line, "RlxdOrd") {
                detail.features.relaxed_ordering_enabled = Some(on);
                evidence.saw("devctl.rlxdord", number);
            }
            if let Some(on) = flag(line, "ExtTag") {
                detail.features.ext_tag_enabled = Some(on);
                evidence.saw("devctl.exttag", number);
            }
        }
        "DevSta:" if line.starts_with("DevSta:") => {
            detail.errors_detected = Some(flag_bits(line, &DEVICE_ERROR_FLAGS) as u8);
            evidence.saw("devsta", number);
        }
        "DevCap2:" => {
            if let Some(on) = flag(line, "10BitTagComp") {
                detail.features.ten_bit_tag_completer = Some(on);
                evidence.saw("devcap2", number);
            }
            detail.features.ten_bit_tag_requester =
                flag(line, "10BitTagReq").or(detail.features.ten_bit_tag_requester);
        }
        "DevCtl2:" => {
            if let Some(on) = flag(line, "10BitTagReq") {
                detail.features.ten_bit_tag_requester_enabled = Some(on);
                evidence.saw("devctl2", number);
            }
        }
        _ => {}
    }
}

/// `NNN` in `… LABELNNN bytes …`: a payload or read request size, which the register's
/// 3-bit code makes one of 128 to 4096 bytes. Any other value (0, 65535, 300) cannot come from
/// lspci: it is recorded in `invalid` (line `number`), so the reader refuses the input.
fn size_after(
    invalid: &mut Option<(usize, String)>,
    text: &str,
    label: &str,
    number: usize,
) -> Option<u16> {
    let at = text.find(label)? + label.len();
    let value = text[at..].split(' ').next().unwrap_or("");
    let size = value
        .parse::<u16>()
        .ok()
        .filter(|s| (128..=4096).contains(s) && s.is_power_of_two());
    if size.is_none() && invalid.is_none() {
        *invalid = Some((
            number,
            format!(
                "{}'{}' bytes is not a size lspci prints: expected 128, 256, 512, 1024, 2048 \
                 or 4096",
                label,
                crate::input::cut_for_message(value)
            ),
        ));
    }
    size
}

/// The generation of `Speed X.YGT/s` (`unknown` and reserved codes are `None`).
fn speed_after(text: &str) -> Option<Generation> {
    let at = text.find("Speed ")? + "Speed ".len();
    let rate = text[at..].split("GT/s").next()?;
    Generation::from_gt_s(rate.parse().ok()?)
}

/// `N` of `Width xN`.
fn width_after(text: &str) -> Option<u8> {
    let at = text.find("Width x")? + "Width x".len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The ASPM states named between `ASPM ` and `end` (`ASPM L0s L1,`, `ASPM L1 Enabled;`);
/// `not supported`, `Disabled` and older lspci's `unknown` name none.
fn aspm_named(text: &str, end: &str) -> Aspm {
    let words = text
        .find("ASPM ")
        .map(|at| &text[at + "ASPM ".len()..])
        .map_or("", |rest| rest.split(end).next().unwrap_or(rest));
    Aspm {
        l0s: words.contains("L0s"),
        l1: words.contains("L1"),
    }
}

/// The function a finished block describes, with what it left unknown.
fn finish(block: Block) -> Function {
    let mut f = block.f;
    f.evidence.shrink_to_fit();
    f.kind = kind_of(block.port, f.class, block.header_type);
    if block.caps_denied {
        // lspci without root: the capability list was not readable.
        f.evidence.missing("capabilities");
        f.acs_unreadable = true;
        return f;
    }
    if !block.express {
        return f;
    }
    let has_link = !matches!(
        block.port,
        Some(port_type::RC_ENDPOINT | port_type::RC_EVENT_COLLECTOR)
    );
    if has_link {
        if !block.link_cap_seen || !block.link_sta_seen {
            // Below -vv lspci names the capability only.
            f.link.get_or_insert_with(Link::default);
            f.evidence.missing("link");
            f.evidence.missing("aspm");
        }
    } else {
        f.link = None;
    }
    if f.mps.is_none() {
        f.evidence.missing("mps");
    }
    if !block.equalization_seen {
        f.express_detail.status2 = None;
    }
    if !block.extended_listed {
        f.acs_unreadable = true;
        f.acs = None;
        f.aer = false;
        f.evidence.missing("acs");
        f.evidence.missing("aer");
    } else if f.aer {
        if block.aer.lines == [true; 3] {
            f.aer_masks = Some(block.aer.masks);
        } else {
            // Below -vv lspci names the capability only.
            f.evidence.missing("aer_masks");
        }
        if block.aer.status_lines == [true; 2] {
            f.aer_status = Some(block.aer.status);
        } else {
            f.evidence.missing("aer_status");
        }
    }
    f
}

#[cfg(test)]
mod tests;
