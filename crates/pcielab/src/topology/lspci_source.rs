//! What both lspci readers share: the formats, what a read gives, the input as numbered lines,
//! the shapes of a device header and a hex row, the lines passed over before the listing, the
//! tree from the bridges' bus ranges and the one-function-per-address rule. The dispatcher
//! (`lspci.rs`) and the two readers (`lspci_dump.rs`, `lspci_text.rs`) import it; it imports
//! neither.

use crate::error::{Error, Result};
use crate::topology::{Function, Topology};

/// Which lspci output a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LspciFormat {
    /// Config space as hex rows (`-x`/`-xxx`/`-xxxx`), decoded by pcielab's config-space code.
    HexDump,
    /// The verbose text lspci prints (`-v`/`-vv`/`-vvv`).
    Verbose,
}

/// What reading one lspci output gave.
#[derive(Debug, Clone)]
pub struct LspciRead {
    pub topology: Topology,
    pub format: LspciFormat,
    /// What the input cut short or left out, each naming its line (a truncated paste, a
    /// function whose config space stops before its identity).
    pub notes: Vec<String>,
}

/// The input as both readers see it.
pub(crate) struct Source<'a> {
    pub name: &'a str,
    pub lines: &'a [&'a str],
    pub cut_short: bool,
}

impl Source<'_> {
    /// `FILE:LINE: why` as bad input (`index` counts from 0).
    pub fn bad(&self, index: usize, why: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}:{}: {why}", self.name, index + 1))
    }

    /// Whether `index` is the last line of a paste that was cut off in the middle of it.
    pub fn is_cut_line(&self, index: usize) -> bool {
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

/// The function address that starts a device's block (`BB:DD.F ` or `DDDD:BB:DD.F `, with a
/// domain of up to 5 hex digits as pciutils accepts), with the rest of the line.
pub(crate) fn device_header(line: &str) -> Option<(crate::pcie::Bdf, &str)> {
    let (address, rest) = line.split_once(' ')?;
    let shape_ok = |part: &str, max: usize| {
        !part.is_empty() && part.len() <= max && part.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let mut parts = address.rsplitn(3, ':');
    let devfn = parts.next()?;
    let bus = parts.next()?;
    let domain = parts.next();
    let (dev, func) = devfn.split_once('.')?;
    let ok = bus.len() == 2
        && shape_ok(bus, 2)
        && dev.len() == 2
        && shape_ok(dev, 2)
        && func.len() == 1
        && matches!(func.as_bytes()[0], b'0'..=b'7')
        && domain.is_none_or(|d| d.len() >= 4 && shape_ok(d, 5));
    if !ok {
        return None;
    }
    let domain = domain.map_or(Some(0), |d| u16::from_str_radix(d, 16).ok())?;
    let device = u8::from_str_radix(dev, 16).ok().filter(|&d| d < 32)?;
    let bdf = crate::pcie::Bdf::new(
        domain,
        u8::from_str_radix(bus, 16).ok()?,
        device,
        func.as_bytes()[0] - b'0',
    );
    Some((bdf, rest))
}

/// A hex row of a config-space dump: its offset and the text after `OFFSET: `.
pub(crate) fn hex_row(line: &str) -> Option<(usize, &str)> {
    let (offset, rest) = line.split_once(": ")?;
    if offset.is_empty() || offset.len() > 8 || !offset.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    // A row holds at least one byte: `10: 00 …`. This also keeps text such as `Bus: primary=`
    // (indented anyway) or a class named in hex from reading as a row.
    let first = rest.as_bytes();
    if first.len() < 2 || !first[0].is_ascii_hexdigit() || !first[1].is_ascii_hexdigit() {
        return None;
    }
    if first.len() > 2 && first[2] != b' ' {
        return None;
    }
    Some((usize::from_str_radix(offset, 16).ok()?, rest))
}

/// Every function's parent: the bridge on a lower bus whose secondary bus is the function's
/// bus, in the same domain. Requiring a lower bus means no parent cycle can form, whatever
/// the input's bus numbers say.
pub(crate) fn link_by_bus_ranges(functions: &mut [Function]) {
    let bridges: Vec<(crate::pcie::Bdf, u8)> = functions
        .iter()
        .filter_map(|f| f.buses.map(|(secondary, _)| (f.bdf, secondary)))
        .collect();
    for f in functions.iter_mut() {
        f.parent = bridges
            .iter()
            .find(|(b, secondary)| {
                b.domain == f.bdf.domain && *secondary == f.bdf.bus && b.bus < f.bdf.bus
            })
            .map(|(b, _)| *b);
    }
}

/// Refuses a function listed twice, naming both lines.
pub(crate) fn check_unique(
    source: &Source,
    seen: &mut std::collections::HashMap<crate::pcie::Bdf, usize>,
    bdf: crate::pcie::Bdf,
    index: usize,
) -> Result<()> {
    if let Some(first) = seen.insert(bdf, index) {
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
