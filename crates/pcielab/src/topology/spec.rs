//! The machine spec reader: a TOML file (or a built-in preset) describing a PCIe hierarchy
//! function by function, plus two free-form tables passed through untouched (`[sim]` for the
//! simulator, `[function.device]` for device models). It validates structure and values and
//! reports every problem as bad input with `file:line`, the field and what would be valid.
//! The format is documented with an example in `docs/topology.md`.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use toml::Spanned;

use crate::error::{Error, Result};
use crate::pcie::features::{AspmLatency, L0S_EXIT_NS, L1_EXIT_NS};
use crate::pcie::{Bdf, Generation};
use crate::topology::config_space::{has_express, kind_of};
use crate::topology::{Acs, Aspm, FactSource, Function, Kind, Link, Topology};

/// A machine as described: its PCIe hierarchy plus the tables a spec file adds for the
/// simulator and the platform model ("platform" in pcielab means only the fitted cost model,
/// `model::platform::PlatformModel`; a preset is a named spec).
#[derive(Debug, Clone, PartialEq)]
pub struct MachineSpec {
    pub name: String,
    pub description: String,
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

/// Widths a link can train to (LnkCap/LnkSta encodings the spec defines).
pub(crate) const VALID_WIDTHS: [u8; 7] = [1, 2, 4, 8, 12, 16, 32];

/// Payload and read-request sizes DevCap/DevCtl can encode.
const VALID_SIZES: [u16; 6] = [128, 256, 512, 1024, 2048, 4096];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    sim: toml::Table,
    #[serde(default)]
    platform: toml::Table,
    #[serde(default, rename = "function")]
    functions: Vec<Spanned<RawFunction>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFunction {
    bdf: Spanned<String>,
    kind: Kind,
    vendor: u16,
    device_id: u16,
    class: Spanned<u32>,
    #[serde(default)]
    revision: u8,
    #[serde(default)]
    subsystem_vendor: u16,
    #[serde(default)]
    subsystem_device: u16,
    parent: Option<Spanned<String>>,
    name: Option<Spanned<String>>,
    link: Option<RawLink>,
    mps: Option<Spanned<u16>>,
    mps_supported: Option<Spanned<u16>>,
    mrrs: Option<Spanned<u16>>,
    aspm: Option<Spanned<String>>,
    aspm_supported: Option<Spanned<String>>,
    exit_latency: Option<Spanned<RawExitLatency>>,
    acs: Option<RawAcs>,
    #[serde(default)]
    aer: bool,
    numa_node: Option<Spanned<i32>>,
    driver: Option<Spanned<String>>,
    #[serde(rename = "device")]
    params: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    max_speed: Option<Spanned<f64>>,
    max_width: Option<Spanned<u8>>,
    speed: Option<Spanned<f64>>,
    width: Option<Spanned<u8>>,
}

/// LnkCap exit latencies, as the upper bound of an encoded range in ns.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExitLatency {
    l0s_ns: Option<u32>,
    l1_ns: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAcs {
    capability: u16,
    #[serde(default)]
    control: u16,
}

/// Turns byte offsets into `file:line` prefixes.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
    /// Where in `text` the offsets given to this locator count from (a function's section
    /// parsed on its own).
    base: usize,
}

impl Locator<'_> {
    fn line(&self, offset: usize) -> usize {
        let end = (self.base + offset).min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn err(&self, offset: usize, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}:{}: {}", self.file, self.line(offset), msg))
    }
}

/// The key whose value starts at `offset` (`max_width` in `link = { max_width = 300, … }`), when
/// the text just before it reads `key =`.
fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset)?.trim_end().strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    Some(&before[start..]).filter(|key| !key.is_empty())
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

/// Converts one `[[function]]`, returning it and the offset of its `parent` value.
fn convert_function(
    loc: &Locator,
    entry: &Spanned<RawFunction>,
) -> Result<(Function, Option<usize>)> {
    let raw = entry.get_ref();
    let bdf: Bdf = raw
        .bdf
        .get_ref()
        .parse()
        .map_err(|e: Error| loc.err(raw.bdf.span().start, format_args!("bdf: {e}")))?;
    let ctx = |what: String| format!("function {bdf}: {what}");
    if *raw.class.get_ref() > 0xff_ffff {
        return Err(loc.err(
            raw.class.span().start,
            ctx(format!(
                "class = {:#x} is wider than 24 bits; valid: base class, subclass, prog-if as 0xBBSSPP",
                raw.class.get_ref()
            )),
        ));
    }
    let mut f = Function::new(
        bdf,
        raw.vendor,
        raw.device_id,
        *raw.class.get_ref(),
        raw.kind,
    );
    f.revision = raw.revision;
    f.subsystem_vendor = raw.subsystem_vendor;
    f.subsystem_device = raw.subsystem_device;
    if let Some(name) = &raw.name {
        if name.get_ref().chars().any(char::is_control) || name.get_ref().len() > 256 {
            return Err(loc.err(
                name.span().start,
                ctx(format!(
                    "name = {:?}: expected up to 256 printable characters (no escapes, tabs or newlines)",
                    name.get_ref()
                )),
            ));
        }
    }
    f.name = raw.name.as_ref().map(|n| n.get_ref().as_str().into());
    f.aer = raw.aer;
    if let Some(node) = &raw.numa_node {
        if !(-1..crate::topology::MAX_NUMA_NODES).contains(node.get_ref()) {
            return Err(loc.err(
                node.span().start,
                ctx(format!(
                    "numa_node = {}: expected -1 (none) or a node in 0..={}",
                    node.get_ref(),
                    crate::topology::MAX_NUMA_NODES - 1
                )),
            ));
        }
    }
    f.numa_node = raw
        .numa_node
        .as_ref()
        .map(|n| *n.get_ref())
        .filter(|&n| n >= 0);
    if let Some(driver) = &raw.driver {
        crate::input::path_component("driver", driver.get_ref())
            .map_err(|e| loc.err(driver.span().start, ctx(e.message().to_string())))?;
    }
    f.driver = raw.driver.as_ref().map(|d| d.get_ref().as_str().into());
    f.driver_source = FactSource::Spec;
    f.params = raw
        .params
        .clone()
        .map(|t| t.into_iter().collect::<BTreeMap<_, _>>())
        .unwrap_or_default();
    let parent_at = match &raw.parent {
        Some(p) => {
            f.parent = Some(
                p.get_ref()
                    .parse()
                    .map_err(|e: Error| loc.err(p.span().start, ctx(format!("parent: {e}"))))?,
            );
            Some(p.span().start)
        }
        None => None,
    };
    if let Some(link) = &raw.link {
        f.link = Some(convert_link(loc, &ctx, link)?);
    }
    let size = |field: &str, v: &Option<Spanned<u16>>| -> Result<Option<u16>> {
        match v {
            None => Ok(None),
            Some(s) if VALID_SIZES.contains(s.get_ref()) => Ok(Some(*s.get_ref())),
            Some(s) => Err(loc.err(
                s.span().start,
                ctx(format!(
                    "{field} = {} is not a size DevCap/DevCtl can encode; valid: {}",
                    s.get_ref(),
                    list(&VALID_SIZES)
                )),
            )),
        }
    };
    f.mps = size("mps", &raw.mps)?;
    f.mps_supported = size("mps_supported", &raw.mps_supported)?;
    f.mrrs = size("mrrs", &raw.mrrs)?;
    if let (Some(mps), Some(sup), Some(at)) = (f.mps, f.mps_supported, &raw.mps) {
        if mps > sup {
            return Err(loc.err(
                at.span().start,
                ctx(format!(
                    "mps = {mps} exceeds mps_supported = {sup}; a function cannot be programmed above its capability"
                )),
            ));
        }
    }
    let aspm = |field: &str, v: &Option<Spanned<String>>| -> Result<Option<Aspm>> {
        v.as_ref()
            .map(|s| {
                Aspm::parse(s.get_ref()).ok_or_else(|| {
                    loc.err(
                        s.span().start,
                        ctx(format!(
                            "{field} = \"{}\" is not an ASPM state; valid: {}",
                            s.get_ref(),
                            Aspm::spellings_quoted()
                        )),
                    )
                })
            })
            .transpose()
    };
    let enabled = aspm("aspm", &raw.aspm)?.unwrap_or_default();
    let supported = aspm("aspm_supported", &raw.aspm_supported)?.unwrap_or(enabled);
    if (enabled.l0s && !supported.l0s) || (enabled.l1 && !supported.l1) {
        let at = raw.aspm.as_ref().map_or(0, |s| s.span().start);
        return Err(loc.err(
            at,
            ctx(format!(
                "aspm = \"{}\" enables a state aspm_supported = \"{}\" lacks",
                enabled.name(),
                supported.name()
            )),
        ));
    }
    f.aspm_enabled = enabled;
    f.aspm_supported = supported;
    if let Some(exit) = &raw.exit_latency {
        // A spec names the bound of a LnkCap range, which becomes that range's code.
        let code = |field: &str, l1: bool, v: Option<u32>| -> Result<Option<AspmLatency>> {
            let Some(ns) = v else { return Ok(None) };
            AspmLatency::from_ns(l1, ns).map(Some).ok_or_else(|| {
                let table = if l1 { &L1_EXIT_NS } else { &L0S_EXIT_NS };
                let valid: Vec<String> = table.iter().flatten().map(u32::to_string).collect();
                loc.err(
                    exit.span().start,
                    ctx(format!(
                        "exit_latency.{field} = {ns} is not a LnkCap exit latency bound; valid (ns): {}",
                        valid.join(", ")
                    )),
                )
            })
        };
        let raw_exit = exit.get_ref();
        f.express_detail.l0s_exit = code("l0s_ns", false, raw_exit.l0s_ns)?;
        f.express_detail.l1_exit = code("l1_ns", true, raw_exit.l1_ns)?;
    }
    f.acs = raw.acs.as_ref().map(|a| Acs {
        capability: a.capability,
        control: a.control,
    });
    complete_express(loc, entry.span().start, raw, &mut f)?;
    Ok((f, parent_at))
}

/// Applies what the PCI Express capability implies: ports always have a link, integrated
/// endpoints and host bridges never do; DevCap/DevCtl always exist with it (Linux's defaults
/// 128 B MPS and 512 B MRRS where the spec is silent), and nothing of it exists without it.
fn complete_express(loc: &Locator, at: usize, raw: &RawFunction, f: &mut Function) -> Result<()> {
    let bdf = f.bdf;
    let kind = f.kind.name();
    if f.link.is_some() && matches!(f.kind, Kind::RcEndpoint | Kind::HostBridge) {
        return Err(loc.err(
            at,
            format_args!(
                "function {bdf}: link: kind {kind} has no link (its link registers are reserved); remove `link`, or use kind = \"endpoint\" under a port"
            ),
        ));
    }
    if f.link.is_none()
        && matches!(
            f.kind,
            Kind::RootPort | Kind::SwitchUpstream | Kind::SwitchDownstream
        )
    {
        f.link = Some(Link::default());
    }
    if !has_express(f.kind, f.link.as_ref()) {
        let read_back = kind_of(None, f.class, u8::from(f.kind.is_bridge()));
        if read_back != f.kind {
            return Err(loc.err(
                raw.class.span().start,
                format_args!(
                    "function {bdf}: class = {:#08x} does not fit kind {kind}: without a PCI Express capability (no `link`) the class alone tells the kind, and this one reads as {}; use class 0x0600xx for host_bridge, 0x0604xx for pci_bridge, another class for endpoint, or add `link`",
                    f.class,
                    read_back.name()
                ),
            ));
        }
        let express_only = [
            ("mps", raw.mps.is_some()),
            ("mps_supported", raw.mps_supported.is_some()),
            ("mrrs", raw.mrrs.is_some()),
            ("aspm", raw.aspm.is_some()),
            ("aspm_supported", raw.aspm_supported.is_some()),
            ("exit_latency", raw.exit_latency.is_some()),
            ("acs", raw.acs.is_some()),
            ("aer", raw.aer),
        ];
        if let Some((field, _)) = express_only.iter().find(|(_, set)| *set) {
            return Err(loc.err(
                at,
                format_args!(
                    "function {bdf}: {field} needs a PCI Express capability, which this {kind} lacks without `link` (it is conventional PCI); add `link = {{...}}` or remove {field}"
                ),
            ));
        }
        return Ok(());
    }
    if f.link.is_none() && (f.aspm_enabled.any() || f.aspm_supported.any()) {
        return Err(loc.err(
            at,
            format_args!("function {bdf}: aspm: kind {kind} has no link, so no ASPM; remove aspm"),
        ));
    }
    f.mps = Some(f.mps.unwrap_or(128));
    f.mps_supported = Some(f.mps_supported.unwrap_or(f.mps.unwrap_or(128)));
    f.mrrs = Some(f.mrrs.unwrap_or(512));
    Ok(())
}

fn convert_link(loc: &Locator, ctx: &dyn Fn(String) -> String, raw: &RawLink) -> Result<Link> {
    let speed = |field: &str, v: &Option<Spanned<f64>>| -> Result<Option<Generation>> {
        v.as_ref()
            .map(|s| {
                Generation::from_gt_s(*s.get_ref()).ok_or_else(|| {
                    let rates: Vec<String> = Generation::ALL
                        .iter()
                        .map(|g| g.gt_s().to_string())
                        .collect();
                    loc.err(
                        s.span().start,
                        ctx(format!(
                            "link.{field} = {} GT/s is no PCIe generation's rate; valid: {}",
                            s.get_ref(),
                            rates.join(", ")
                        )),
                    )
                })
            })
            .transpose()
    };
    let width = |field: &str, v: &Option<Spanned<u8>>, allow_down: bool| -> Result<Option<u8>> {
        match v {
            None => Ok(None),
            Some(s) if VALID_WIDTHS.contains(s.get_ref()) => Ok(Some(*s.get_ref())),
            Some(s) if allow_down && *s.get_ref() == 0 => Ok(Some(0)),
            Some(s) => Err(loc.err(
                s.span().start,
                ctx(format!(
                    "link.{field} = {} is not a PCIe link width; valid: {}{}",
                    s.get_ref(),
                    list(&VALID_WIDTHS),
                    if allow_down { " (or 0: link down)" } else { "" }
                )),
            )),
        }
    };
    let pairs = [
        (
            "max_speed",
            "max_width",
            raw.max_speed.as_ref().map(|s| s.span().start),
            raw.max_width.as_ref().map(|s| s.span().start),
        ),
        (
            "speed",
            "width",
            raw.speed.as_ref().map(|s| s.span().start),
            raw.width.as_ref().map(|s| s.span().start),
        ),
    ];
    for (a, b, speed_at, width_at) in pairs {
        if let (Some(pos), None) | (None, Some(pos)) = (speed_at, width_at) {
            return Err(loc.err(
                pos,
                ctx(format!(
                    "link: give link.{a} and link.{b} together (LnkCap/LnkSta hold both), or neither when unknown"
                )),
            ));
        }
    }
    let link = Link {
        max_speed: speed("max_speed", &raw.max_speed)?,
        max_width: width("max_width", &raw.max_width, false)?,
        speed: speed("speed", &raw.speed)?,
        width: width("width", &raw.width, true)?,
    };
    if let (Some(s), Some(m), Some(at)) = (link.speed, link.max_speed, &raw.speed) {
        if s > m {
            return Err(loc.err(
                at.span().start,
                ctx(format!(
                    "link.speed = {} GT/s exceeds link.max_speed = {} GT/s; a link cannot train above its capability",
                    s.gt_s(),
                    m.gt_s()
                )),
            ));
        }
    }
    if let (Some(w), Some(m), Some(at)) = (link.width, link.max_width, &raw.width) {
        if w > m {
            return Err(loc.err(
                at.span().start,
                ctx(format!(
                    "link.width = {w} exceeds link.max_width = {m}; a link cannot train wider than its capability"
                )),
            ));
        }
    }
    Ok(link)
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Which kinds may sit directly below a parent of kind `parent`.
fn allowed_under(parent: Kind, child: Kind) -> bool {
    use Kind::*;
    match parent {
        RootPort | SwitchDownstream => matches!(child, SwitchUpstream | Endpoint | PciBridge),
        SwitchUpstream => child == SwitchDownstream,
        PciBridge => matches!(child, Endpoint | PciBridge),
        HostBridge | Endpoint | RcEndpoint => false,
    }
}

/// Checks the tree: parents exist and can have children of that kind, kinds that must sit on a
/// root bus do, switches have downstream ports, and bus numbers nest as bridges require.
fn check_structure(
    loc: &Locator,
    functions: &[Function],
    starts: &HashMap<Bdf, usize>,
    parent_spans: &HashMap<Bdf, usize>,
) -> Result<()> {
    let by_bdf: HashMap<Bdf, &Function> = functions.iter().map(|f| (f.bdf, f)).collect();
    let mut child_bus: HashMap<Bdf, (u8, Bdf)> = HashMap::new();
    for f in functions {
        let at = parent_spans.get(&f.bdf).copied().unwrap_or(starts[&f.bdf]);
        let Some(pb) = f.parent else {
            if matches!(f.kind, Kind::SwitchUpstream | Kind::SwitchDownstream) {
                return Err(loc.err(
                    at,
                    format_args!(
                        "function {}: a {} needs a parent (a {}); add parent = \"DDDD:BB:DD.F\"",
                        f.bdf,
                        f.kind.name(),
                        if f.kind == Kind::SwitchUpstream {
                            "root_port or switch_downstream"
                        } else {
                            "switch_upstream"
                        }
                    ),
                ));
            }
            continue;
        };
        let Some(parent) = by_bdf.get(&pb) else {
            return Err(loc.err(
                at,
                format_args!(
                    "function {}: parent {} is not defined in this file; valid parents are the bdf of a root_port, switch_upstream, switch_downstream or pci_bridge entry",
                    f.bdf, pb
                ),
            ));
        };
        if !allowed_under(parent.kind, f.kind) {
            return Err(loc.err(
                at,
                format_args!(
                    "function {}: a {} cannot sit under {} (kind {}); {}",
                    f.bdf,
                    f.kind.name(),
                    pb,
                    parent.kind.name(),
                    match parent.kind {
                        Kind::RootPort | Kind::SwitchDownstream =>
                            "below a root or downstream port go switch_upstream, endpoint or pci_bridge",
                        Kind::SwitchUpstream => "below a switch_upstream go switch_downstream ports",
                        Kind::PciBridge => "below a pci_bridge go endpoint or pci_bridge",
                        _ => "only root_port, switch_upstream, switch_downstream and pci_bridge have children",
                    }
                ),
            ));
        }
        if pb.domain != f.bdf.domain || f.bdf.bus <= pb.bus {
            return Err(loc.err(
                at,
                format_args!(
                    "function {}: its bus must be in the parent's domain and above the parent's bus {:02x} (a bridge's secondary bus)",
                    f.bdf, pb.bus
                ),
            ));
        }
        match child_bus.get(&pb) {
            Some(&(bus, sibling)) if bus != f.bdf.bus => {
                return Err(loc.err(
                    at,
                    format_args!(
                        "function {}: sits on bus {:02x} but its sibling {} under {} is on bus {:02x}; all children of a bridge share its secondary bus",
                        f.bdf, f.bdf.bus, sibling, pb, bus
                    ),
                ));
            }
            _ => {
                child_bus.insert(pb, (f.bdf.bus, f.bdf));
            }
        }
    }
    if let Some(f) = functions
        .iter()
        .find(|f| f.kind == Kind::SwitchUpstream && !child_bus.contains_key(&f.bdf))
    {
        return Err(loc.err(
            starts[&f.bdf],
            format_args!(
                "function {}: a switch_upstream without switch_downstream ports; add at least one function with kind = \"switch_downstream\" and parent = \"{}\"",
                f.bdf, f.bdf
            ),
        ));
    }
    // A bus is either a root bus or one bridge's secondary bus, never both.
    let mut owner: HashMap<(u16, u8), Option<Bdf>> = HashMap::new();
    for f in functions {
        let key = (f.bdf.domain, f.bdf.bus);
        match owner.get(&key) {
            Some(&o) if o != f.parent => {
                let describe = |b: Option<Bdf>| {
                    b.map_or("a root bus".to_string(), |b| {
                        format!("the secondary bus of {b}")
                    })
                };
                return Err(loc.err(
                    starts[&f.bdf],
                    format_args!(
                        "function {}: bus {:04x}:{:02x} is already {}, but this function makes it {}; give it a bus number of its own",
                        f.bdf,
                        f.bdf.domain,
                        f.bdf.bus,
                        describe(o),
                        describe(f.parent)
                    ),
                ));
            }
            _ => {
                owner.insert(key, f.parent);
            }
        }
    }
    Ok(())
}

/// Fills in each bridge's secondary/subordinate bus range from where its descendants sit; a
/// bridge without children gets the lowest bus number above its own that no function uses and no
/// other subtree's range covers, as firmware would leave an empty port.
fn assign_bus_ranges(functions: &mut [Function]) {
    let index: HashMap<Bdf, usize> = functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.bdf, i))
        .collect();
    let ancestors = |bdf: Bdf| -> Vec<Bdf> {
        let mut chain = Vec::new();
        let mut cursor = index.get(&bdf).and_then(|&i| functions[i].parent);
        while let Some(p) = cursor {
            chain.push(p);
            cursor = index.get(&p).and_then(|&i| functions[i].parent);
        }
        chain
    };
    let mut ranges: BTreeMap<Bdf, (u8, u8)> = BTreeMap::new();
    for f in functions.iter() {
        for (depth, up) in ancestors(f.bdf).into_iter().enumerate() {
            let r = ranges.entry(up).or_insert((f.bdf.bus, f.bdf.bus));
            if depth == 0 {
                r.0 = r.0.min(f.bdf.bus);
            }
            r.1 = r.1.max(f.bdf.bus);
        }
    }
    let mut used: BTreeSet<(u16, u8)> = functions
        .iter()
        .map(|f| (f.bdf.domain, f.bdf.bus))
        .collect();
    let empty: Vec<Bdf> = functions
        .iter()
        .filter(|f| f.kind.is_bridge() && !ranges.contains_key(&f.bdf))
        .map(|f| f.bdf)
        .collect();
    for b in empty {
        let above = ancestors(b);
        let foreign = |n: u8| {
            ranges.iter().any(|(owner, &(sec, sub))| {
                owner.domain == b.domain && (sec..=sub).contains(&n) && !above.contains(owner)
            })
        };
        let free = (u16::from(b.bus) + 1..=255)
            .map(|n| n as u8)
            .find(|&n| !used.contains(&(b.domain, n)) && !foreign(n));
        if let Some(n) = free {
            used.insert((b.domain, n));
            ranges.insert(b, (n, n));
            for up in above {
                if let Some(r) = ranges.get_mut(&up) {
                    r.1 = r.1.max(n);
                }
            }
        }
    }
    for f in functions.iter_mut() {
        f.buses = ranges.get(&f.bdf).copied();
    }
}

/// Bus ranges must nest: a bus inside a bridge's [secondary, subordinate] belongs to a function
/// below that bridge, or lspci and the kernel route it to the wrong subtree. Each function's bus
/// must be covered by exactly its ancestors' ranges; counting coverage per bus checks that.
fn check_bus_ranges(
    loc: &Locator,
    functions: &[Function],
    starts: &HashMap<Bdf, usize>,
) -> Result<()> {
    let mut cover: HashMap<u16, [i32; 257]> = HashMap::new();
    for f in functions {
        if let Some((sec, sub)) = f.buses {
            let c = cover.entry(f.bdf.domain).or_insert([0; 257]);
            c[usize::from(sec)] += 1;
            c[usize::from(sub) + 1] -= 1;
        }
    }
    let covered: HashMap<u16, Vec<i32>> = cover
        .into_iter()
        .map(|(d, c)| {
            let mut sum = 0;
            (
                d,
                c.iter()
                    .map(|v| {
                        sum += v;
                        sum
                    })
                    .collect(),
            )
        })
        .collect();
    let by_bdf: HashMap<Bdf, &Function> = functions.iter().map(|f| (f.bdf, f)).collect();
    for f in functions {
        let mut depth = 0;
        let mut cursor = f.parent;
        while let Some(p) = cursor {
            depth += 1;
            cursor = by_bdf.get(&p).and_then(|pf| pf.parent);
        }
        let count = covered
            .get(&f.bdf.domain)
            .map_or(0, |c| c[usize::from(f.bdf.bus)]);
        if count == depth {
            continue;
        }
        let intruder = functions.iter().find(|b| {
            b.bdf.domain == f.bdf.domain
                && b.buses
                    .is_some_and(|(sec, sub)| (sec..=sub).contains(&f.bdf.bus))
                && !std::iter::successors(f.parent, |p| by_bdf.get(p).and_then(|pf| pf.parent))
                    .any(|a| a == b.bdf)
        });
        if let Some(b) = intruder {
            let (sec, sub) = b.buses.unwrap_or_default();
            return Err(loc.err(
                starts[&f.bdf],
                format_args!(
                    "function {}: bus {:02x} lies inside the bus range [{sec:02x}-{sub:02x}] of {}, which is not above it; renumber so each subtree's buses form one block",
                    f.bdf, f.bdf.bus, b.bdf
                ),
            ));
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "t"
[sim]
mounts = ["/home"]

[[function]]
bdf = "0000:00:02.0"
kind = "root_port"
vendor = 0x1ded
device_id = 0x8000
class = 0x060400
link = { max_speed = 32.0, max_width = 4, speed = 5.0, width = 2 }
mps = 256
mps_supported = 512

[[function]]
bdf = "0000:00:03.0"
kind = "root_port"
vendor = 0x1ded
device_id = 0x8000
class = 0x060400

[[function]]
bdf = "0000:04:00.0"
kind = "endpoint"
parent = "0000:00:02.0"
vendor = 0x1b4b
device_id = 0x9235
class = 0x010601
link = { max_speed = 5.0, max_width = 2, speed = 5.0, width = 2 }
aspm = "l1"
[function.device]
model = "ahci"
"#;

    fn err(text: &str) -> String {
        let e = parse_spec("t.toml", text).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        e.to_string()
    }

    #[test]
    fn good_spec_parses_with_free_form_tables_and_bus_ranges() {
        let p = parse_spec("t.toml", GOOD).unwrap();
        assert_eq!(p.name, "t");
        assert_eq!(p.sim["mounts"].as_array().unwrap().len(), 1);
        let t = &p.topology;
        let rp = t.get("00:02.0".parse().unwrap()).unwrap();
        assert_eq!(rp.buses, Some((4, 4)));
        assert_eq!(rp.link.unwrap().width, Some(2));
        // The empty port takes the lowest free bus above its own.
        let empty = t.get("00:03.0".parse().unwrap()).unwrap();
        assert_eq!(empty.buses, Some((1, 1)));
        let sata = t.get("04:00.0".parse().unwrap()).unwrap();
        assert_eq!(sata.params["model"].as_str(), Some("ahci"));
        assert_eq!(
            sata.aspm_enabled,
            Aspm {
                l0s: false,
                l1: true
            }
        );
        assert_eq!(sata.aspm_supported, sata.aspm_enabled);
    }

    #[test]
    fn exit_latencies_take_lnkcap_bounds_only() {
        let with = |exit: &str| {
            GOOD.replacen(
                "aspm = \"l1\"",
                &format!("aspm = \"l1\"\nexit_latency = {exit}"),
                1,
            )
        };
        let p = parse_spec("t.toml", &with("{ l1_ns = 16000 }")).unwrap();
        let sata = p.topology.get("04:00.0".parse().unwrap()).unwrap();
        let d = sata.express_detail;
        assert_eq!(
            (d.l0s_exit, d.l1_exit.and_then(AspmLatency::ns)),
            (None, Some(16000))
        );
        assert_eq!(d.l1_exit.map(AspmLatency::text), Some("<16us"));
        // 15 µs is no LnkCap code's bound (they are 1, 2, 4, … 64 µs).
        let e = err(&with("{ l1_ns = 15000 }"));
        assert!(
            e.contains("exit_latency.l1_ns = 15000 is not a LnkCap exit latency bound"),
            "{e}"
        );
        assert!(
            e.contains("1000, 2000, 4000, 8000, 16000, 32000, 64000"),
            "{e}"
        );
        let e = err(&with("{ l0s_ns = 100 }"));
        assert!(
            e.contains("valid (ns): 64, 128, 256, 512, 1000, 2000, 4000"),
            "{e}"
        );
    }

    /// Root port 00:02.0 with a bridge to bus 03 (so it covers [01-03] with bus 02 unused), and an
    /// empty root port 00:03.0.
    const TWO_PORTS_ONE_WITH_A_BUS_HOLE: &str = r#"
name = "t"
[[function]]
bdf = "0000:00:02.0"
kind = "root_port"
vendor = 1
device_id = 2
class = 0x060400
[[function]]
bdf = "0000:01:00.0"
kind = "pci_bridge"
parent = "0000:00:02.0"
vendor = 1
device_id = 3
class = 0x060400
[[function]]
bdf = "0000:03:00.0"
kind = "endpoint"
parent = "0000:01:00.0"
vendor = 1
device_id = 4
class = 0x010802
[[function]]
bdf = "0000:00:03.0"
kind = "root_port"
vendor = 1
device_id = 2
class = 0x060400
"#;

    #[test]
    fn interleaved_subtrees_are_rejected() {
        // Root port 00:03.0's child sits on bus 02, inside 00:02.0's range [01-03].
        let spec = format!(
            "{TWO_PORTS_ONE_WITH_A_BUS_HOLE}{}",
            r#"[[function]]
bdf = "0000:02:00.0"
kind = "endpoint"
parent = "0000:00:03.0"
vendor = 1
device_id = 5
class = 0x010802
"#
        );
        let e = err(&spec);
        assert!(
            e.starts_with("t.toml:30: function 0000:02:00.0: bus 02 lies inside the bus range [01-03] of 0000:00:02.0"),
            "{e}"
        );
    }

    #[test]
    fn empty_ports_skip_buses_inside_other_subtrees() {
        // 00:02.0 covers [01-03] with a hole at 02; the empty 00:03.0 must not take bus 02.
        let p = parse_spec("t.toml", TWO_PORTS_ONE_WITH_A_BUS_HOLE).unwrap();
        let t = &p.topology;
        assert_eq!(
            t.get("00:02.0".parse().unwrap()).unwrap().buses,
            Some((1, 3))
        );
        assert_eq!(
            t.get("01:00.0".parse().unwrap()).unwrap().buses,
            Some((3, 3))
        );
        assert_eq!(
            t.get("00:03.0".parse().unwrap()).unwrap().buses,
            Some((4, 4))
        );
    }

    #[test]
    fn a_bad_platform_table_fails_the_spec_not_only_the_simulator() {
        let e = err(&format!("{GOOD}\n[platform.dma]\nsetup_ns = -5\n"));
        assert!(
            e.contains("t.toml: [platform] dma.setup_ns = -5 is out of range"),
            "{e}"
        );
        parse_spec(
            "t.toml",
            &format!("{GOOD}\n[platform.dma]\nsetup_ns = 5000\n"),
        )
        .unwrap();
    }

    #[test]
    fn errors_carry_file_line_field_and_valid_values() {
        let e = err(&GOOD.replace("max_width = 4", "max_width = 3"));
        assert!(e.starts_with("t.toml:12: "), "{e}");
        assert!(
            e.contains("link.max_width = 3") && e.contains("1, 2, 4, 8, 12, 16, 32"),
            "{e}"
        );

        let e = err(&GOOD.replace("speed = 5.0", "speed = 6.0"));
        assert!(e.starts_with("t.toml:12: ") && e.contains("6 GT/s"), "{e}");

        let e = err(&GOOD.replace("mps = 256", "mps = 300"));
        assert!(
            e.starts_with("t.toml:13: ") && e.contains("128, 256"),
            "{e}"
        );

        let e = err(&GOOD.replace("aspm = \"l1\"", "aspm = \"l2\""));
        assert!(
            e.starts_with("t.toml:31: ") && e.contains("\"l0s+l1\""),
            "{e}"
        );
    }

    /// The whole-document parse is the reference: every preset, and layouts the split must
    /// see through, give the same functions (and the same messages) a section at a time.
    #[test]
    fn sections_parse_to_what_the_whole_document_parses_to() {
        let whole = |text: &str| {
            let loc = Locator {
                file: "t.toml",
                text,
                base: 0,
            };
            let (_, functions) = parse_whole(&loc).unwrap();
            functions
                .into_iter()
                .map(|c| c.unwrap())
                .collect::<Vec<_>>()
        };
        let sectioned = |text: &str| {
            let loc = Locator {
                file: "t.toml",
                text,
                base: 0,
            };
            parse_sections(&loc).map(|(head, functions)| {
                (
                    head,
                    functions
                        .into_iter()
                        .map(|c| c.unwrap())
                        .collect::<Vec<_>>(),
                )
            })
        };
        let presets = preset_files();
        assert!(presets.len() >= 9, "{}", presets.len());
        for (name, text) in &presets {
            let (_, functions) = sectioned(text).unwrap_or_else(|| panic!("{name} not split"));
            assert_eq!(functions, whole(text), "{name}");
        }
        // [sim] between functions, a function's own sub-table, a multi-line string holding a
        // header-like line, headers written with spaces and comments.
        let text = "name = \"t\"\ndescription = \"\"\"two\n[[function]]\nlines\"\"\"\n\
            [[function]]\nbdf = \"0000:00:01.0\"\nkind = \"root_port\"\nvendor = 0x1ded\n\
            device_id = 0x8000\nclass = 0x060400\n\
            [ sim ] # settings\nseed = 1\n\
            [[ function ]]\nbdf = \"0000:01:00.0\"\nkind = \"endpoint\"\nparent = \"0000:00:01.0\"\n\
            vendor = 0x144d\ndevice_id = 0xa808\nclass = 0x010802\n\
            link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }\n\
            [function.device]\nmodel = \"nvme\"\n";
        let (head, functions) = sectioned(text).unwrap();
        assert_eq!(head.description, "two\n[[function]]\nlines");
        assert_eq!(head.sim.get("seed"), Some(&toml::Value::Integer(1)));
        assert_eq!(functions, whole(text));
        assert_eq!(functions[1].0.params["model"].as_str(), Some("nvme"));
        // A function's sub-table away from its function: parsed whole instead.
        let apart = text
            .replace("[function.device]\nmodel = \"nvme\"\n", "")
            .replace("[ sim ] # settings\nseed = 1\n", "")
            + "[sim]\nseed = 1\n[function.device]\nmodel = \"nvme\"\n";
        assert!(sectioned(&apart).is_none());
        assert_eq!(
            parse_spec("t.toml", &apart).unwrap().topology,
            parse_spec("t.toml", text).unwrap().topology
        );
        // Errors found converting a section name the line in the whole file.
        let wide = text.replace("class = 0x010802", "class = 0x1010802");
        let err = parse_spec("t.toml", &wide).unwrap_err();
        assert!(
            err.message()
                .starts_with("t.toml:19: function 0000:01:00.0: class"),
            "{err}"
        );
        let mislinked = text.replace("parent = \"0000:00:01.0\"", "parent = \"0000:00:09.0\"");
        let err = parse_spec("t.toml", &mislinked).unwrap_err();
        assert!(err.message().starts_with("t.toml:16: "), "{err}");
    }
}
