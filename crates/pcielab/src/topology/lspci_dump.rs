//! Hex dumps of config space (`lspci -x`, `-xxx`, `-xxxx`), read as pciutils' dump access
//! method (`lspci -F FILE`) reads them: a line starting with a function address opens that
//! function, `OFFSET: BYTES` rows fill its config space, a blank line closes it, `-k`'s
//! `Kernel driver in use:` line names its driver, and every other line (the `-v` text between
//! them) is passed over. The bytes are decoded by
//! [`crate::topology::config_space::decode`], the same code that reads sysfs `config` files. Bytes a
//! dump does not hold are unknown: 64 bytes (`-x`) give identity and bridge bus numbers only,
//! 256 (`-xxx`) add the capability list, 4 KiB (`-xxxx`) the extended capabilities (ACS, AER).

use std::collections::HashMap;

use crate::error::Result;
use crate::pcie::Bdf;
use crate::topology::config_space::{decode, kind_of, Decoded, EXTENDED_SIZE, UNPRIVILEGED_SIZE};
use crate::topology::lspci_source::{
    check_unique, header_line, hex_row, link_by_bus_ranges, passed_over, passed_over_note, Header,
    LspciFormat, LspciRead, Source,
};
use crate::topology::{FactSource, Function, Topology};

/// Where the ACS capability and control registers sit after the capability header.
const ACS_REGISTERS: usize = 4;
/// Identity (vendor, device, revision, class) fills the first 12 bytes.
const IDENTITY_BYTES: usize = 0x0c;

/// One function's dump as it is read.
struct Dumped {
    bdf: Bdf,
    header_line: usize,
    /// The bytes given so far; grown to the highest offset written, so a 64-byte `-x` dump of
    /// many functions takes little memory.
    bytes: Vec<u8>,
    /// The input line each byte came from (0 = not given).
    line_of: Vec<u32>,
    /// `Kernel driver in use:` (with `lspci -k`): the driver and the line's index.
    driver: Option<(String, usize)>,
}

impl Dumped {
    fn new(bdf: Bdf, header_line: usize) -> Dumped {
        Dumped {
            bdf,
            header_line,
            bytes: Vec::new(),
            line_of: Vec::new(),
            driver: None,
        }
    }

    /// The input line (1-based) that gave the byte at `offset`, if any did.
    fn line_at(&self, offset: usize) -> Option<usize> {
        let n = self.line_of.get(offset).copied().unwrap_or(0) as usize;
        (n != 0).then_some(n)
    }
}

pub(crate) fn read(source: &Source) -> Result<LspciRead> {
    let mut dumps: Vec<Dumped> = Vec::new();
    let mut open = false;
    let mut seen = HashMap::new();
    let mut notes = Vec::new();
    let mut skipped = Vec::new();
    // `lspci -k` prints its kernel lines above each dump: with them a function without a
    // driver line has no driver; without them nobody's driver is known.
    let mut kernel_lines = false;
    for (index, line) in source.lines.iter().enumerate() {
        let line = line.trim_end_matches('\r');
        let kernel = line.trim_start();
        let header = header_line(line);
        if let Header::Function(bdf, _) = header {
            check_unique(source, &mut seen, bdf, index)?;
            dumps.push(Dumped::new(bdf, index));
            open = true;
        } else if let Header::Malformed(why) = header {
            return Err(source.bad(index, why));
        } else if line.is_empty() {
            open = false;
        } else if open && line.starts_with(char::is_whitespace) && kernel.starts_with("Kernel ") {
            if let Some(driver) = kernel.strip_prefix("Kernel driver in use: ") {
                let dumped = dumps.last_mut().expect("a function is open");
                dumped.driver = Some((crate::text::printable(driver.trim()), index));
            }
            kernel_lines |= kernel.starts_with("Kernel driver in use: ")
                || kernel.starts_with("Kernel modules: ");
        } else if let (true, Some((offset, row))) = (open, hex_row(line)) {
            let dumped = dumps.last_mut().expect("a function is open");
            fill_row(source, index, dumped, offset, row, &mut notes)?;
        } else if !line.starts_with(char::is_whitespace)
            && hex_row(line).is_none()
            && passed_over(line, dumps.is_empty())
        {
            skipped.push(index);
        } else if !line.starts_with(char::is_whitespace) && hex_row(line).is_none() {
            return Err(source.bad(
                index,
                format!(
                    "'{}' is neither a function address line (`00:1f.2 …`), a hex row \
                     (`40: 10 80 …`) nor indented lspci text",
                    crate::input::cut_for_message(line)
                ),
            ));
        }
    }
    let mut functions = Vec::with_capacity(dumps.len());
    let mut names = crate::topology::SharedNames::default();
    for dumped in &dumps {
        match function_of(source, dumped) {
            Some(mut f) => {
                if kernel_lines {
                    f.driver_source = FactSource::LspciKernelLines;
                }
                if let Some((driver, index)) = &dumped.driver {
                    f.driver = names.share(Some(driver.as_str().into()));
                    f.evidence.saw("driver", index + 1);
                }
                functions.push(f);
            }
            None => notes.push(format!(
                "{}:{}: {} holds {} bytes of config space, too few to say what it is; left out",
                source.name,
                dumped.header_line + 1,
                dumped.bdf,
                dumped.bytes.len()
            )),
        }
    }
    link_by_bus_ranges(&mut functions);
    notes.extend(passed_over_note(source, &skipped));
    Ok(LspciRead {
        topology: Topology::new(functions),
        format: LspciFormat::HexDump,
        notes,
    })
}

/// Stores the bytes of one `OFFSET: xx xx …` row. A row cut off by the end of a paste keeps its
/// whole bytes; any other malformed row is bad input.
fn fill_row(
    source: &Source,
    index: usize,
    dumped: &mut Dumped,
    offset: usize,
    row: &str,
    notes: &mut Vec<String>,
) -> Result<()> {
    for (at, token) in (offset..).zip(row.split(' ')) {
        let byte = match (token.len(), u8::from_str_radix(token, 16)) {
            (2, Ok(byte)) => byte,
            _ if source.is_cut_line(index) => {
                notes.push(format!(
                    "{}:{}: the paste ends inside this row; {} keeps the bytes before '{token}'",
                    source.name,
                    index + 1,
                    dumped.bdf
                ));
                break;
            }
            _ => {
                return Err(source.bad(
                    index,
                    format!(
                        "'{}' in a hex row of {}: expected bytes as two hex digits separated by \
                         single spaces, as lspci -x prints them",
                        crate::input::cut_for_message(token),
                        dumped.bdf
                    ),
                ))
            }
        };
        if at >= EXTENDED_SIZE {
            return Err(source.bad(
                index,
                format!(
                    "offset {at:#x} of {}: config space ends at {EXTENDED_SIZE:#x} (4 KiB)",
                    dumped.bdf
                ),
            ));
        }
        if at >= dumped.bytes.len() {
            // Bytes not in the dump read as all ones, as pciutils fills them.
            dumped.bytes.resize(at + 1, 0xff);
            dumped.line_of.resize(at + 1, 0);
        }
        dumped.bytes[at] = byte;
        // Lines are capped at MAX_LSPCI_LINES, far below u32::MAX.
        dumped.line_of[at] = (index + 1) as u32;
    }
    Ok(())
}

/// The function a dump describes; `None` when it stops before its identity.
fn function_of(source: &Source, dumped: &Dumped) -> Option<Function> {
    if dumped.bytes.len() < IDENTITY_BYTES {
        return None;
    }
    let mut bytes = dumped.bytes.clone();
    bytes.resize(dumped.bytes.len().max(UNPRIVILEGED_SIZE), 0xff);
    let header_known = dumped.bytes.len() >= UNPRIVILEGED_SIZE;
    if !header_known {
        // Without the status register and capability pointer there is no list to walk.
        bytes[0x06] = 0;
    }
    let d = decode(&bytes)?;
    let mut f = Function::new(
        dumped.bdf,
        d.vendor,
        d.device,
        d.class,
        kind_of(None, d.class, 0),
    );
    f.revision = d.revision;
    f.evidence = source.evidence();
    if let Some(n) = dumped.line_at(0) {
        f.evidence.saw("identity", n);
    }
    let header = dumped.header_line;
    f.evidence.saw("header", header + 1);
    if !header_known {
        f.evidence.missing("header");
        f.evidence.missing("capabilities");
        f.acs_unreadable = true;
        return Some(f);
    }
    f.subsystem_vendor = d.subsystem_vendor;
    f.subsystem_device = d.subsystem_device;
    f.buses = d.buses;
    if let Some(n) = dumped.line_at(0x19).filter(|_| d.buses.is_some()) {
        f.evidence.saw("buses", n);
    }
    apply_capabilities(&mut f, &d, dumped);
    Some(f)
}

fn apply_capabilities(f: &mut Function, d: &Decoded, dumped: &Dumped) {
    let line = |offset: usize| dumped.line_at(offset);
    f.kind = kind_of(d.express.map(|e| e.port_type), d.class, d.header_type);
    if !d.capabilities_read {
        f.evidence.missing("capabilities");
        f.acs_unreadable = true;
        return;
    }
    f.take_capabilities(d);
    let Some(e) = d.express else {
        return;
    };
    let at = d.express_at.expect("an express capability has a place");
    forget_reserved_sizes(f, &dumped.bytes, at);
    let registers = [
        ("express", 0x00),
        ("devcap", 0x04),
        ("devctl", 0x08),
        ("devsta", 0x0a),
        ("devcap2", 0x24),
        ("devctl2", 0x28),
        ("lnkcap", 0x0c),
        ("lnkctl", 0x10),
        ("lnksta", 0x12),
        ("lnkcap2", 0x2c),
        ("lnkctl2", 0x30),
        ("lnksta2", 0x32),
    ];
    for (fact, offset) in registers {
        if fact.starts_with("lnk") && e.link.is_none() {
            continue;
        }
        let detail = &f.express_detail;
        let shown = match fact {
            "lnkcap2" => detail.supported_speeds.is_some(),
            "lnkctl2" => detail.target_speed.is_some(),
            "lnksta2" => detail.status2.is_some(),
            "devcap2" | "devctl2" => detail.features.ten_bit_tag_completer.is_some(),
            _ => true,
        };
        if !shown {
            continue;
        }
        if let Some(n) = line(at + offset) {
            f.evidence.saw(fact, n);
        }
    }
    if dumped.bytes.len() <= 0x100 {
        // The extended capabilities were not dumped (`-xxx`): ACS and AER are unknown.
        f.acs_unreadable = true;
        f.evidence.missing("acs");
        f.evidence.missing("aer");
        return;
    }
    if let Some(n) = d.acs_at.and_then(|at| line(at + ACS_REGISTERS)) {
        f.evidence.saw("acs", n);
    }
    if let Some(n) = d.aer_at.and_then(line) {
        f.evidence.saw("aer", n);
    }
    if let Some(n) = d.aer_at.and_then(|at| line(at + 0x08)) {
        f.evidence.saw("aer_masks", n);
    }
    if let Some(n) = d.aer_at.and_then(|at| line(at + 0x04)) {
        f.evidence.saw("aer_status", n);
    }
}

/// Size codes 6 and 7 (DevCap's Max_Payload_Size Supported, DevCtl's Max_Payload_Size and
/// Max_Read_Request_Size) are reserved: the decode reads them as 4096 bytes, a value no advice
/// may rest on, so they stay unknown and the evidence says so.
fn forget_reserved_sizes(f: &mut Function, bytes: &[u8], express_at: usize) {
    let word = |offset: usize| {
        let at = express_at + offset;
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let reserved = |value: Option<u16>, shift: u16| value.is_some_and(|v| (v >> shift) & 7 > 5);
    let (devcap, devctl) = (word(0x04), word(0x08));
    if reserved(devcap, 0) {
        f.mps_supported = None;
        f.evidence.missing("mps_supported");
    }
    if reserved(devctl, 5) {
        f.mps = None;
        f.evidence.missing("mps");
    }
    if reserved(devctl, 12) {
        f.mrrs = None;
        f.evidence.missing("mrrs");
    }
}

#[cfg(test)]
mod tests {
    use crate::pcie::bdf;
    use crate::pcie::Generation::*;
    use crate::topology::lspci::read_lspci;
    use crate::topology::Kind;

    /// The root port of pciutils' `tests/cap-pcie-1` (an Intel 5520 I/O hub), its first 256
    /// bytes: LnkCap at 0x9c says 5 GT/s x4, LnkSta at 0xa2 2.5 GT/s x0 (an empty slot).
    const ROOT_PORT_256: &str = "00:01.0 Class 0604: Device 8086:3408 (rev 10)
00: 86 80 08 34 47 05 10 00 10 00 04 06 00 00 01 00
10: 00 00 00 00 00 00 00 00 00 01 01 00 f0 00 00 00
20: f0 ff 00 00 f1 ff 01 00 00 00 00 00 00 00 00 00
30: 00 00 00 00 40 00 00 00 00 00 00 00 0b 01 00 00
40: 0d 60 00 00 86 80 00 00 00 00 00 00 00 00 00 00
50: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
60: 05 90 03 01 00 00 e0 fe b0 40 00 00 03 00 00 00
70: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
80: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
90: 10 e0 42 00 21 80 00 00 00 00 00 00 42 30 39 01
a0: 40 00 01 10 00 00 00 00 00 00 48 00 10 00 01 00
b0: 00 00 00 00 3e 00 00 00 39 00 00 00 00 00 00 00
c0: 42 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00
d0: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
e0: 01 00 03 c8 00 00 00 00 00 00 00 00 00 00 00 00
f0: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
";

    #[test]
    fn a_256_byte_dump_gives_the_link_and_leaves_acs_and_aer_unknown() {
        let read = read_lspci("rp.txt", ROOT_PORT_256).unwrap();
        let f = &read.topology.functions()[0];
        assert_eq!(f.bdf, bdf("00:01.0"));
        assert_eq!(f.kind, Kind::RootPort);
        assert_eq!((f.vendor, f.device, f.revision), (0x8086, 0x3408, 0x10));
        let link = f.link.unwrap();
        assert_eq!((link.max_speed, link.max_width), (Some(Gen2), Some(4)));
        assert_eq!((link.speed, link.width), (Some(Gen1), Some(0)));
        assert_eq!(
            (f.mps_supported, f.mps, f.mrrs),
            (Some(256), Some(128), Some(128))
        );
        assert!(f.acs_unreadable && f.acs.is_none());
        assert_eq!(f.evidence.unknown().collect::<Vec<_>>(), vec!["acs", "aer"]);
        // LnkSta (0xa2) lies on the a0 row, the 12th line of the dump.
        let (line, text) = f.evidence.line("lnksta").unwrap();
        assert_eq!(line, 12);
        assert!(text.starts_with("a0: 40 00 01 10"));
        assert_eq!(f.evidence.line("buses").unwrap().0, 3);
        assert_eq!(f.buses, Some((1, 1)));
    }

    #[test]
    fn a_paste_cut_inside_a_row_keeps_what_came_before() {
        let cut = ROOT_PORT_256
            .lines()
            .take(11)
            .collect::<Vec<_>>()
            .join("\n")
            + "\na0: 40 0";
        let read = read_lspci("cut.txt", &cut).unwrap();
        assert_eq!(read.notes.len(), 1, "{:?}", read.notes);
        assert!(read.notes[0].starts_with("cut.txt:12: the paste ends inside this row"));
        let f = &read.topology.functions()[0];
        // The express capability at 0x90 runs to 0xcb: cut off, so nothing of it is believed.
        assert_eq!(f.link, None);
        assert!(f.evidence.is_unknown("capabilities"));
        // The same cut with a newline after it is a malformed row, not a paste cut short.
        let err = read_lspci("bad.txt", &(cut + "\n")).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.message()
                .starts_with("bad.txt:12: '0' in a hex row of 0000:00:01.0"),
            "{err}"
        );
    }

    #[test]
    fn a_64_byte_dump_is_identity_and_buses_only() {
        let x: String = ROOT_PORT_256
            .lines()
            .take(5)
            .map(|l| format!("{l}\n"))
            .collect();
        let f = read_lspci("x.txt", &x).unwrap().topology.functions()[0].clone();
        assert_eq!(
            f.kind,
            Kind::PciBridge,
            "no capability list: the class says bridge"
        );
        assert_eq!(f.link, None);
        assert_eq!(f.buses, Some((1, 1)));
        assert!(f.acs_unreadable);
        assert_eq!(
            f.evidence.unknown().collect::<Vec<_>>(),
            vec!["capabilities"]
        );
        let tiny = "00:01.0 x\n00: 86 80 08 34\n";
        let read = read_lspci("tiny.txt", tiny);
        assert!(read.unwrap_err().message().contains("no PCI function"));
    }

    #[test]
    fn reserved_size_codes_stay_unknown() {
        // DevCtl at 0x98: MPS code 6 (bits 5-7 = 0xc0), MRRS code 7 (bits 12-14 = 0x7000).
        let reserved = ROOT_PORT_256.replace(
            "90: 10 e0 42 00 21 80 00 00 00 00 00 00 42 30 39 01",
            "90: 10 e0 42 00 21 80 00 00 c0 70 00 00 42 30 39 01",
        );
        let f = read_lspci("rsvd.txt", &reserved)
            .unwrap()
            .topology
            .functions()[0]
            .clone();
        assert_eq!((f.mps_supported, f.mps, f.mrrs), (Some(256), None, None));
        assert!(f.evidence.is_unknown("mps"));
        assert!(f.evidence.is_unknown("mrrs"));
    }

    #[test]
    fn rows_past_4_kib_are_refused() {
        let err = read_lspci("big.txt", "00:01.0 x\n1000: 00\n").unwrap_err();
        assert!(
            err.message().starts_with("big.txt:2: offset 0x1000"),
            "{err}"
        );
    }
}
