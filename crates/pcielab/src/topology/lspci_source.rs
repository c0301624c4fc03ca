//! What both lspci readers share: the formats, what a read gives, the input as numbered lines,
//! the shapes of a device header and a hex row, the lines passed over before the listing, the
//! tree from the bridges' bus ranges and the one-function-per-address rule. The dispatcher
//! (`lspci.rs`) and the two readers (`lspci_dump.rs`, `lspci_text.rs`) import it; it imports
//! neither.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::topology::{Function, Topology};

/// Which lspci output a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LspciFormat {
    /// Config space as hex rows (`-x`/`-xxx`/`-xxxx`), decoded by pcielab's config-space code.
    HexDump,
    /// The verbose text lspci prints (`-v`/`-vv`/`-vvv`).
    Verbose,
}

/// What reading one lspci output gave.
#[derive(Debug, Clone)]
pub struct LspciRead {
    /// The tree the listing describes.
    pub topology: Topology,
    pub(crate) format: LspciFormat,
    /// What the input cut short or left out, each naming its line (a truncated paste, a
    /// function whose config space stops before its identity).
    pub(crate) notes: Vec<String>,
}

/// The input as both readers see it.
pub(crate) struct Source<'a> {
    pub(crate) name: &'a str,
    /// The whole text, which the functions' evidence quotes.
    pub(crate) text: &'a std::sync::Arc<crate::topology::SourceText>,
    pub(crate) lines: &'a [&'a str],
    pub(crate) cut_short: bool,
}

impl Source<'_> {
    /// Empty evidence for a function read from this input.
    pub(crate) fn evidence(&self) -> crate::topology::Evidence {
        crate::topology::Evidence::over(self.text.clone())
    }

    /// `FILE:LINE: why` as bad input (`index` counts from 0).
    pub(crate) fn bad(&self, index: usize, why: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}:{}: {why}", self.name, index + 1))
    }

    /// Whether `index` is the last line of a paste that was cut off in the middle of it.
    pub(crate) fn is_cut_line(&self, index: usize) -> bool {
        self.cut_short && index + 1 == self.lines.len()
    }
}

/// Whether an unindented line is not lspci's listing but a message around it that pastes
/// carry: pciutils' own warnings (`pcilib: sysfs_read_vpd: read failed: …`, `lspci: Unable to
/// load libkmod resources`, printed on stderr between the listing's lines), or, before the
/// first function, the shell prompt and command that produced it.
pub(crate) fn passed_over(line: &str, before_first_function: bool) -> bool {
    before_first_function || line.starts_with("pcilib: ") || line.starts_with("lspci: ")
}

/// The note for the lines [`passed_over`] passed over, if any were.
pub(crate) fn passed_over_note(source: &Source, lines: &[usize]) -> Option<String> {
    let first = lines.first()?;
    Some(format!(
        "{}:{}: {} line(s) that are not the listing (lspci's own messages, a prompt) passed over",
        source.name,
        first + 1,
        lines.len()
    ))
}

/// What an unindented line's first word says about it being a function address.
pub(crate) enum Header<'a> {
    /// A valid address, with the rest of the line.
    Function(crate::pcie::Bdf, &'a str),
    /// Shaped like an address (`HEX:HEX.X`, `HEX:HEX:HEX.X`) but not a valid one: why, naming
    /// the part and what would be valid.
    Malformed(String),
    /// Not an address at all.
    None,
}

/// Reads a line's first word as the function address that starts a device's block
/// (`BB:DD.F ` or `DDDD:BB:DD.F `, a domain of 4 or 5 hex digits as pciutils prints and
/// accepts it); see [`Header`].
pub(crate) fn header_line(line: &str) -> Header<'_> {
    let (address, rest) = line.split_once(' ').unwrap_or((line, ""));
    // One character after the dot, as every address has: a time of day before a pasted
    // listing (`12:34:56.789`) is not taken for a malformed address.
    let shaped = address.contains(':')
        && address.rsplit_once('.').is_some_and(|(_, f)| f.len() == 1)
        && address
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    if !shaped {
        return Header::None;
    }
    match address_of(address) {
        Ok(bdf) => Header::Function(bdf, rest),
        Err(why) => Header::Malformed(format!(
            "'{}' looks like a function address but {why}; lspci writes addresses as BB:DD.F or \
             DDDD:BB:DD.F (domain 0000-ffff, bus 00-ff, device 00-1f, function 0-7)",
            crate::input::cut_for_message(address)
        )),
    }
}

/// `[DDDD:]BB:DD.F` as a function address, or which part is wrong.
fn address_of(address: &str) -> std::result::Result<crate::pcie::Bdf, String> {
    let parts: Vec<&str> = address.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [bus, devfn] => (None, *bus, *devfn),
        [domain, bus, devfn] => (Some(*domain), *bus, *devfn),
        _ => return Err("it has more than two ':'".into()),
    };
    let (dev, func) = devfn
        .split_once('.')
        .ok_or_else(|| format!("'{devfn}' has no '.' between device and function"))?;
    let hex = |part: &str, what: &str, digits: &[usize]| {
        if !digits.contains(&part.len()) || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            let wanted = match digits {
                [one] => format!("{one}"),
                _ => format!("{} or {}", digits[0], digits[digits.len() - 1]),
            };
            return Err(format!(
                "its {what} '{part}' has {} digit(s), not {wanted} hex digits",
                part.len()
            ));
        }
        u32::from_str_radix(part, 16).map_err(|e| format!("its {what} '{part}': {e}"))
    };
    let domain = match domain {
        Some(d) => hex(d, "domain", &[4, 5])?,
        None => 0,
    };
    let domain = u16::try_from(domain)
        .map_err(|_| format!("its domain {domain:x} is above ffff, the largest PCI domain"))?;
    let bus = hex(bus, "bus", &[2])? as u8;
    let device = hex(dev, "device", &[2])?;
    if device > 0x1f {
        return Err(format!(
            "its device {device:02x} is above 1f (a bus has 32 devices)"
        ));
    }
    let function = hex(func, "function", &[1])?;
    if function > 7 {
        return Err(format!(
            "its function {function:x} is above 7 (a device has 8 functions)"
        ));
    }
    Ok(crate::pcie::Bdf::new(
        domain,
        bus,
        device as u8,
        function as u8,
    ))
}

/// A hex row of a config-space dump: its offset and the text after `OFFSET: `. The first word
/// after the offset must be hex digits, of any count, so that a row with a byte of one or three
/// digits (or a later word that is not hex) is refused by the dump reader naming the byte,
/// instead of reading as prose.
pub(crate) fn hex_row(line: &str) -> Option<(usize, &str)> {
    let (offset, rest) = line.split_once(": ")?;
    if offset.is_empty() || offset.len() > 8 || !offset.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // A row holds at least one byte: `10: 00 …`. This also keeps text such as `Bus: primary=`
    // (indented anyway) or a class named in hex (`Class 0604: …`) from reading as a row.
    let first = rest.split(' ').next().unwrap_or("");
    if first.is_empty() || !first.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((usize::from_str_radix(offset, 16).ok()?, rest))
}

/// Every function's parent: the first bridge listed on a lower bus whose secondary bus is the
/// function's bus, in the same domain. Requiring a lower bus means no parent cycle can form,
/// whatever the input's bus numbers say.
///
/// Linear in the functions: bridges are indexed by (domain, secondary bus), and for each key
/// only the bridges on a lower bus than every one listed before them are kept (at most 256, one
/// per bus number), since the first bridge below a function's bus is always one of those.
pub(crate) fn link_by_bus_ranges(functions: &mut [Function]) {
    let mut index: HashMap<(u16, u8), Vec<crate::pcie::Bdf>> = HashMap::new();
    for f in functions.iter() {
        let Some((secondary, _)) = f.buses else {
            continue;
        };
        let candidates = index.entry((f.bdf.domain, secondary)).or_default();
        if candidates
            .last()
            .is_none_or(|lowest| f.bdf.bus < lowest.bus)
        {
            candidates.push(f.bdf);
        }
    }
    for f in functions.iter_mut() {
        f.parent = index
            .get(&(f.bdf.domain, f.bdf.bus))
            .and_then(|candidates| candidates.iter().find(|b| b.bus < f.bdf.bus))
            .copied();
    }
}

/// The most functions one lspci output may list: a large server lists a few thousand, so a
/// listing past this is not one machine's (and would take memory out of proportion).
pub(crate) const MAX_LSPCI_FUNCTIONS: usize = 262_144;

/// Refuses a function listed twice (naming both lines), or one past [`MAX_LSPCI_FUNCTIONS`].
pub(crate) fn check_unique(
    source: &Source,
    seen: &mut HashMap<crate::pcie::Bdf, u32>,
    bdf: crate::pcie::Bdf,
    index: usize,
) -> Result<()> {
    if seen.len() == MAX_LSPCI_FUNCTIONS {
        return Err(source.bad(
            index,
            format!(
                "{bdf} is function number {}; pcielab reads at most {MAX_LSPCI_FUNCTIONS} \
                 functions from one lspci output (a large server lists a few thousand)",
                MAX_LSPCI_FUNCTIONS + 1
            ),
        ));
    }
    // Line numbers fit: the input is capped far below 4 G lines.
    if let Some(first) = seen.insert(bdf, u32::try_from(index).unwrap_or(u32::MAX)) {
        return Err(source.bad(
            index,
            format!(
                "{bdf} is listed a second time (first at line {}); one lspci run lists each \
                 function once, so this looks like two outputs pasted together",
                first + 1
            ),
        ));
    }
    Ok(())
}
