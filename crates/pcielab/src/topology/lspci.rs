//! The lspci reader: builds a [`Topology`](super::Topology) from the output of `lspci` that someone saved or
//! pasted, the machine a bug report or vendor ticket describes. Two formats are told apart by
//! their lines: hex dumps (`lspci -x`, `-xxx`, `-xxxx`, with or without `-v`, as pciutils' own
//! `-F FILE` dump access method reads them; decoded in [`super::lspci_dump`]) and verbose text
//! (`lspci -v`, `-vv`, `-vvv`, with `-nn`, `-k`, `-D`; read in [`super::lspci_text`]).
//!
//! Both readers keep, per function, the input line behind each fact they took
//! ([`super::Evidence`]) and list the facts the input did not give, which stay unknown. Parents
//! come from the bridges' bus ranges, as lspci's own tree view (`-t`) finds them.

use std::path::Path;

use crate::error::{Error, Result};
use crate::topology::lspci_source::{hex_row, LspciRead, Source};
use crate::topology::SourceText;

/// The most bytes of lspci output read: the largest real server listings are a few MiB.
pub(crate) const MAX_LSPCI_BYTES: u64 = 32 << 20;
/// The most lines read (a 16-bit bus space with every function's 4 KiB dump is about 17 M
/// lines; real listings stay far below this).
pub(crate) const MAX_LSPCI_LINES: usize = 2_000_000;
/// The longest line accepted: lspci's longest (device names, VPD strings) stay under 1 KiB.
pub(crate) const MAX_LSPCI_LINE: usize = 16 << 10;

/// Reads the lspci output in `path`, or standard input when `path` is `-` (with the idle
/// timeout of [`crate::input::stdin_idle_timeout`]).
pub(crate) fn read_lspci_path(path: &Path) -> Result<LspciRead> {
    let name = path.display().to_string();
    let bytes = if name == "-" {
        let idle = crate::input::stdin_idle_timeout()?;
        crate::input::read_stdin("lspci output on standard input", MAX_LSPCI_BYTES, idle)?
    } else {
        crate::input::read_capped(path, MAX_LSPCI_BYTES + 1)
            .map_err(|e| Error::bad_input(format!("lspci output {name}: {e}")))?
    };
    if bytes.len() as u64 > MAX_LSPCI_BYTES {
        return Err(Error::bad_input(format!(
            "lspci output {name}: larger than {} MiB, the most pcielab reads",
            MAX_LSPCI_BYTES >> 20
        )));
    }
    // Names in lspci's text come from pci.ids and sysfs labels and may carry any byte.
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
    read_lspci_text(&name, text)
}

/// Reads lspci output held in `text`; `name` names it in messages (`FILE:LINE: …`).
pub fn read_lspci(name: &str, text: &str) -> Result<LspciRead> {
    read_lspci_text(name, text.to_string())
}

/// [`read_lspci`] of a text it keeps: the functions' evidence quotes its lines.
fn read_lspci_text(name: &str, mut text: String) -> Result<LspciRead> {
    if text.len() as u64 > MAX_LSPCI_BYTES {
        return Err(Error::bad_input(format!(
            "lspci output {name}: larger than {} MiB, the most pcielab reads",
            MAX_LSPCI_BYTES >> 20
        )));
    }
    // Editors on Windows start a saved paste with a byte-order mark.
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    let shared = std::sync::Arc::new(SourceText::new(text));
    let text = shared.text();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() > MAX_LSPCI_LINES {
        return Err(Error::bad_input(format!(
            "lspci output {name}: {} lines, more than the {MAX_LSPCI_LINES} pcielab reads",
            lines.len()
        )));
    }
    if let Some((i, _)) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| l.len() > MAX_LSPCI_LINE)
    {
        return Err(Error::bad_input(format!(
            "{name}:{}: a line longer than {} KiB; lspci's lines are far shorter",
            i + 1,
            MAX_LSPCI_LINE >> 10
        )));
    }
    let source = Source {
        name,
        text: &shared,
        lines: &lines,
        // A paste cut off mid-line ends without a newline.
        cut_short: !text.is_empty() && !text.ends_with('\n'),
    };
    let read = if lines.iter().any(|l| hex_row(l).is_some()) {
        super::lspci_dump::read(&source)?
    } else {
        super::lspci_text::read(&source)?
    };
    if read.topology.functions().is_empty() {
        return Err(Error::bad_input(format!(
            "lspci output {name}: no PCI function in it; expected lines that start with an \
             address such as `00:1f.2 SATA controller: …` (lspci -vvv) followed by their \
             details or hex rows `00: 86 80 …` (lspci -xxxx)"
        )));
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::topology::lspci_source::*;

    fn address(line: &str) -> Option<crate::pcie::Bdf> {
        match header_line(line) {
            Header::Function(bdf, _) => Some(bdf),
            Header::Malformed(_) | Header::None => None,
        }
    }

    #[test]
    fn headers_and_rows_are_told_apart() {
        assert_eq!(address("00:1c.0 PCI bridge: Intel"), Some(bdf("00:1c.0")));
        assert_eq!(address("0001:02:00.1 Eth"), Some(bdf("0001:02:00.1")));
        assert_eq!(address("0ffff:02:00.1 Eth"), Some(bdf("ffff:02:00.1")));
        for (malformed, why) in [
            ("10000:00:00.0 Host", "its domain 10000 is above ffff"),
            ("00:1c.8 x", "its function 8 is above 7"),
            ("0:1c.0 x", "its bus '0' has 1 digit(s), not 2 hex digits"),
            ("00:20.0 x", "its device 20 is above 1f"),
            (
                "000:00:1c.0 x",
                "its domain '000' has 3 digit(s), not 4 or 5",
            ),
        ] {
            match header_line(malformed) {
                Header::Malformed(message) => assert!(message.contains(why), "{message}"),
                _ => panic!("{malformed} is not refused"),
            }
        }
        for not_header in [
            "00: 86 80",
            "\t00:01.0 x",
            "Dear support,",
            "12:34:56.789 captured on host",
            "root@host:~# lspci",
        ] {
            assert!(
                matches!(header_line(not_header), Header::None),
                "{not_header}"
            );
        }
        assert_eq!(hex_row("100: 01 00 01 15"), Some((0x100, "01 00 01 15")));
        // A byte of one digit is still a row, refused by the dump reader naming the byte.
        assert_eq!(hex_row("10: 0"), Some((0x10, "0")));
        assert_eq!(hex_row("\tBus: primary=00"), None);
        assert_eq!(hex_row("00:1c.0 PCI bridge"), None);
        assert_eq!(hex_row("10: 0x"), None);
        assert_eq!(hex_row("00: 86 80 zz"), Some((0, "86 80 zz")));
    }

    #[test]
    fn malformed_addresses_and_bytes_are_refused_naming_line_and_value() {
        for (text, wanted) in [
            (
                "00:00.0 Host bridge: x\n10000:00:00.0 Host bridge: x\n",
                "big.txt:2: '10000:00:00.0' looks like a function address but its domain 10000 \
                 is above ffff",
            ),
            (
                "00:1f.8 SMBus: Intel\n",
                "big.txt:1: '00:1f.8' looks like a function address but its function 8",
            ),
            (
                "00:01.0 x\n00: 86 80 8 34\n",
                "big.txt:2: '8' in a hex row of 0000:00:01.0: expected bytes as two hex digits",
            ),
            (
                "00:01.0 x\n00: 86 80 083 34\n",
                "big.txt:2: '083' in a hex row of 0000:00:01.0",
            ),
        ] {
            let err = read_lspci("big.txt", text).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.message().starts_with(wanted), "{err}");
        }
    }

    #[test]
    fn a_byte_order_mark_does_not_hide_the_first_function() {
        let read = read_lspci(
            "bom.txt",
            "\u{feff}00:00.0 Host bridge [0600]: Intel [8086:1237]\n",
        )
        .unwrap();
        assert_eq!(read.topology.functions()[0].bdf, bdf("00:00.0"));
        assert!(read.notes.is_empty(), "{:?}", read.notes);
    }

    /// `functions` functions, device 0-31 on each bus of each domain in turn; with `bridges`,
    /// each is a bridge to the next bus (the last bus's to bus 00).
    fn listing(functions: usize, bridges: bool) -> String {
        let mut text = String::new();
        for i in 0..functions {
            let (domain, bus, device) = (i / (256 * 32), (i / 32) % 256, i % 32);
            text += &format!("{domain:04x}:{bus:02x}:{device:02x}.0 x\n");
            if bridges {
                text += &format!(
                    "\tBus: primary={bus:02x}, secondary={:02x}, subordinate=ff\n",
                    (bus + 1) % 256
                );
            }
        }
        text
    }

    #[test]
    fn parents_come_from_the_first_lower_bridge_and_the_function_count_is_capped() {
        let read = read_lspci("chain.txt", &listing(64 * 32, true)).unwrap();
        let topo = &read.topology;
        // The function on bus 05 sits below the first bridge listed whose secondary bus is 05:
        // 00:04.0 lists first (bus 04), not the later bridges of bus 04.
        assert_eq!(
            topo.get(bdf("0000:05:03.0")).and_then(|f| f.parent),
            Some(bdf("0000:04:00.0"))
        );
        // Bus 00 has no bridge on a lower bus: no parent, so no cycle through the last bus.
        assert_eq!(topo.get(bdf("0000:00:1f.0")).and_then(|f| f.parent), None);
        let err = read_lspci("huge.txt", &listing(MAX_LSPCI_FUNCTIONS + 1, false)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.message().starts_with(&format!(
                "huge.txt:{}: 0020:00:00.0 is function number 262145; pcielab reads at most",
                MAX_LSPCI_FUNCTIONS + 1
            )),
            "{err}"
        );
    }

    #[test]
    fn bad_input_names_the_line_and_what_was_expected() {
        let err = read_lspci("paste.txt", "00:00.0 Host bridge: x\nhello\n").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.message().starts_with("paste.txt:2: 'hello'"), "{err}");
        // A prompt before the listing and lspci's own warnings inside it are passed over.
        let pasted = "root@server:~# lspci -vv\n00:00.0 Host bridge [0600]: Intel [8086:1237]\n\
                      pcilib: sysfs_read_vpd: read failed: Input/output error\n\tLatency: 0\n";
        let read = read_lspci("forum.txt", pasted).unwrap();
        assert_eq!(read.topology.functions().len(), 1);
        assert_eq!(
            read.notes,
            vec!["forum.txt:1: 2 line(s) that are not the listing (lspci's own messages, a prompt) passed over"]
        );
        let err = read_lspci("prose.txt", "Dear support,\nmy card is slow\n").unwrap_err();
        assert!(err.message().contains("no PCI function"), "{err}");
        let err = read_lspci("empty.txt", "").unwrap_err();
        assert!(err.message().contains("no PCI function"), "{err}");
        let twice = "00:00.0 Host bridge [0600]: Intel [8086:1237]\n\
                     00:00.0 Host bridge [0600]: Intel [8086:1237]\n";
        let err = read_lspci("twice.txt", twice).unwrap_err();
        assert!(
            err.message()
                .starts_with("twice.txt:2: 0000:00:00.0 is listed a second time (first at line 1)"),
            "{err}"
        );
        let long = format!("00:00.0 {}\n", "x".repeat(MAX_LSPCI_LINE));
        assert!(read_lspci("long.txt", &long)
            .unwrap_err()
            .message()
            .starts_with("long.txt:1: a line longer than"));
    }
}
