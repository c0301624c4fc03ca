//! The machine spec reader: a TOML file (or a built-in preset) describing a PCIe hierarchy
//! function by function, plus tables passed through for others: `[sim]` for the simulator,
//! `[function.device]` for device models, and `[platform]` for the platform model (the fitted
//! cost model, checked here by `model::platform`). It validates structure and values and
//! reports every problem as bad input with `file:line`, the field and what would be valid.
//! The format is documented with an example in `docs/topology.md`.

use serde::Deserialize;
use std::collections::HashMap;
use toml::Spanned;

use crate::error::Result;

use crate::pcie::Bdf;

use crate::topology::{Function, Topology};

mod convert;
mod raw;
mod structure;
#[cfg(test)]
mod tests;

use convert::convert_function;
use raw::{key_before, Locator, RawFunction, RawSpec};
use structure::{assign_bus_ranges, check_bus_ranges, check_structure};

/// A machine as described: its PCIe hierarchy plus the tables a spec file adds for the
/// simulator and the platform model ("platform" in pcielab means only the fitted cost model,
/// `model::platform::PlatformModel`; a preset is a named spec).
#[derive(Debug, Clone, PartialEq)]
pub struct MachineSpec {
    /// The machine's name (a preset's name, or the spec's `name`).
    pub name: String,
    /// One line saying what the machine is.
    pub description: String,
    /// Its PCIe tree.
    pub topology: Topology,
    /// The spec's `[sim]` table, untouched (empty for machines read from sysfs).
    pub sim: toml::Table,
    /// The spec's `[platform]` table (the platform model beyond the link,
    /// `model::platform`), untouched here; empty when absent.
    pub platform_table: toml::Table,
}

impl MachineSpec {
    /// The platform model of the spec's `[platform]` table (checked when the spec was parsed);
    /// `None` without one, as for machines read from sysfs.
    pub fn platform_model(&self) -> Result<Option<crate::model::platform::PlatformModel>> {
        if self.platform_table.is_empty() {
            return Ok(None);
        }
        crate::model::platform::PlatformModel::from_table(&self.name, &self.platform_table)
            .map(Some)
    }
}

/// Parses and validates a spec; `file` names it in messages (a path, or `presets/NAME.toml`).
///
/// A spec of thousands of functions is parsed a `[[function]]` section at a time
/// (`split_sections`): the TOML document the parser builds holds every value with its source
/// text and layout, some 40 bytes for each byte of input, so one document per function keeps
/// the peak near the input's own size instead. Whatever the sections do not parse alone (a
/// layout the split cannot follow, any error) is parsed whole, so results and messages are
/// those of one whole-document parse.
pub fn parse_spec(file: &str, text: &str) -> Result<MachineSpec> {
    let loc = Locator {
        file,
        text,
        base: 0,
    };
    let (head, functions) = match parse_sections(&loc) {
        Some(parsed) => parsed,
        None => parse_whole(&loc)?,
    };
    let mut starts: HashMap<Bdf, usize> = HashMap::new();
    let mut parent_spans: HashMap<Bdf, usize> = HashMap::new();
    let mut checked = Vec::with_capacity(functions.len());
    for converted in functions {
        let (function, at, parent_at) = converted?;
        if let Some(first) = starts.insert(function.bdf, at) {
            return Err(loc.err(
                at,
                format_args!(
                    "duplicate bdf {}: already defined at line {}; every function needs its own address",
                    function.bdf,
                    loc.line(first)
                ),
            ));
        }
        if let Some(p) = parent_at {
            parent_spans.insert(function.bdf, p);
        }
        checked.push(function);
    }
    let mut functions = checked;
    check_structure(&loc, &functions, &starts, &parent_spans)?;
    assign_bus_ranges(&mut functions);
    check_bus_ranges(&loc, &functions, &starts)?;
    // Checked here so every command on this spec (topo too, not only the simulator) rejects a
    // bad [platform]; the simulator reads the values.
    crate::model::platform::PlatformModel::from_table(file, &head.platform)?;
    Ok(MachineSpec {
        name: head.name,
        description: head.description,
        topology: Topology::new(functions),
        sim: head.sim,
        platform_table: head.platform,
    })
}

/// A function converted (or the error converting it), with the offsets of its `bdf` and
/// `parent` values in the whole text.
type Converted = Result<(Function, usize, Option<usize>)>;

fn convert_at(loc: &Locator, entry: &Spanned<RawFunction>) -> Converted {
    let (function, parent_at) = convert_function(loc, entry)?;
    let at = loc.base + entry.get_ref().bdf.span().start;
    Ok((function, at, parent_at.map(|p| loc.base + p)))
}

/// The whole document in one parse.
fn parse_whole(loc: &Locator) -> Result<(RawSpec, Vec<Converted>)> {
    let mut raw: RawSpec = toml::from_str(loc.text).map_err(|e| {
        let offset = e.span().map_or(0, |s| s.start);
        // toml's messages for a bad value ("number too large to fit in target type") do not
        // say which key holds it: name the key written before the value.
        match key_before(loc.text, offset) {
            Some(key) => loc.err(offset, format!("{key}: {}", e.message().trim_end())),
            None => loc.err(offset, e.message().trim_end()),
        }
    })?;
    let functions = std::mem::take(&mut raw.functions)
        .iter()
        .map(|entry| convert_at(loc, entry))
        .collect();
    Ok((raw, functions))
}

/// One `[[function]]` section parsed alone.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FunctionSection {
    function: Vec<Spanned<RawFunction>>,
}

/// The document a section at a time; `None` when that cannot stand for the whole parse.
fn parse_sections(loc: &Locator) -> Option<(RawSpec, Vec<Converted>)> {
    let (head, sections) = split_sections(loc.text)?;
    let head: RawSpec = toml::from_str(&head).ok()?;
    if !head.functions.is_empty() {
        return None;
    }
    let mut functions = Vec::with_capacity(sections.len());
    for range in sections {
        let section: FunctionSection = toml::from_str(&loc.text[range.clone()]).ok()?;
        let [entry] = section.function.as_slice() else {
            return None;
        };
        let at = Locator {
            base: range.start,
            ..*loc
        };
        functions.push(convert_at(&at, entry));
    }
    Some((head, functions))
}

/// Splits a spec into everything but its functions (the top-level keys, `[sim]`,
/// `[platform]` and their sub-tables, in order) and the byte range of each function's section:
/// its `[[function]]` header up to the next header that is not one of its sub-tables
/// (`[function.device]`). Header lines are told apart from text inside multi-line strings.
/// `None` when there is no `[[function]]` header to split at, or a function's sub-table is not
/// next to its function.
fn split_sections(text: &str) -> Option<(String, Vec<std::ops::Range<usize>>)> {
    let mut head = String::new();
    let mut sections: Vec<std::ops::Range<usize>> = Vec::new();
    // Where the current segment started and whether it belongs to a function's section.
    let mut segment_start = 0;
    let mut in_function = false;
    let mut open_string: Option<&str> = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let at = offset;
        offset += line.len();
        if let Some(delimiter) = open_string {
            if line.matches(delimiter).count() % 2 == 1 {
                open_string = None;
            }
            continue;
        }
        let header = table_header(line);
        if let Some((name, array)) = header {
            let own_table = name.starts_with("function.") && in_function;
            if !own_table {
                if in_function {
                    sections.last_mut()?.end = at;
                } else {
                    head.push_str(&text[segment_start..at]);
                }
                segment_start = at;
                in_function = name == "function" && array;
                if in_function {
                    sections.push(at..text.len());
                } else if name == "function" || name.starts_with("function.") {
                    return None;
                }
            }
            continue;
        }
        for delimiter in ["\"\"\"", "\'\'\'"] {
            if line.matches(delimiter).count() % 2 == 1 {
                open_string = Some(delimiter);
                break;
            }
        }
    }
    if sections.is_empty() {
        return None;
    }
    if !in_function {
        head.push_str(&text[segment_start..]);
    }
    Some((head, sections))
}

/// The dotted name of a table header line (`[sim]`, `[[function]]`, `[ function.device ]`)
/// and whether it is an array-of-tables header; `None` for any other line.
fn table_header(line: &str) -> Option<(String, bool)> {
    let line = line.trim();
    let array = line.starts_with("[[");
    let open = if array { 2 } else { 1 };
    let close = if array { "]]" } else { "]" };
    if !line.starts_with('[') {
        return None;
    }
    let end = line.find(close)?;
    let rest = line[end + close.len()..].trim_start();
    if !(rest.is_empty() || rest.starts_with('#')) {
        return None;
    }
    let name: String = line[open..end]
        .split('.')
        .map(|part| part.trim().trim_matches('"'))
        .collect::<Vec<_>>()
        .join(".");
    Some((name, array))
}

/// The spec files under the repository's presets/, by name, for tests on this floor and below
/// `machine` (which embeds the same files): (name, text), in name order.
#[cfg(test)]
pub(crate) fn preset_files() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../presets");
    let mut all: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    all.sort();
    all
}

/// One preset's spec, parsed as `sim:NAME` parses it.
#[cfg(test)]
pub(crate) fn preset_for_tests(name: &str) -> MachineSpec {
    let (_, text) = preset_files().into_iter().find(|(n, _)| n == name).unwrap();
    parse_spec(&format!("presets/{name}.toml"), &text).unwrap()
}
