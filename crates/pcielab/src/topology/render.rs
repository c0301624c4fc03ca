//! Writers that turn a topology into text for people and programs: an `lspci -tv`-like tree
//! annotated with links, ceilings and warnings; JSON with the shape documented in
//! `docs/topology.md`; and Graphviz DOT. Ceilings come from [`crate::model::path`], findings
//! from [`super::check`], endpoints' platform predictions from [`crate::model::platform`].

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::model::path::PathCeiling;
use crate::model::platform::{PlatformDma, PlatformModel, Provenance};
use crate::pcie::{Bdf, Generation};
use crate::text::round_to;
use crate::topology::check::warnings;
use crate::topology::spec::MachineSpec;
use crate::topology::{
    DeviceFeatures, Evidence, ExpressDetail, FactSource, Function, Kind, Link, LinkStatus2,
    Topology, DEVICE_ERROR_FLAGS,
};

/// The `--json` document, also as `plot` and `report --from` read it back: fields added after
/// the first documents were written read as empty, false or null when absent.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TopologyJson {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) description: String,
    pub(crate) functions: Vec<FunctionJson>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct FunctionJson {
    pub(crate) bdf: String,
    pub(crate) vendor: String,
    pub(crate) device: String,
    #[serde(default)]
    pub(crate) class: String,
    #[serde(default)]
    pub(crate) revision: String,
    #[serde(default)]
    pub(crate) subsystem_vendor: String,
    #[serde(default)]
    pub(crate) subsystem_device: String,
    pub(crate) kind: Kind,
    pub(crate) name: Option<String>,
    pub(crate) parent: Option<String>,
    pub(crate) buses: Option<BusesJson>,
    pub(crate) link: Option<LinkJson>,
    pub(crate) mps: Option<u16>,
    pub(crate) mps_supported: Option<u16>,
    pub(crate) mrrs: Option<u16>,
    #[serde(default)]
    pub(crate) aspm_supported: Cow<'static, str>,
    #[serde(default)]
    pub(crate) aspm_enabled: Cow<'static, str>,
    pub(crate) acs: Option<AcsJson>,
    #[serde(default)]
    pub(crate) aer: bool,
    /// AER's UEMsk, UESvrt and CEMsk (the bits lspci prints), where the input shows them.
    pub(crate) aer_masks: Option<AerMasksJson>,
    /// AER's UESta and CESta (the bits lspci prints), where the input shows them.
    #[serde(default)]
    pub(crate) aer_status: Option<AerStatusJson>,
    /// DevCap's acceptable L0s/L1 exit latencies (endpoints), where the input shows them.
    pub(crate) acceptable_latency: Option<LatenciesJson>,
    /// The DevCap/DevCtl and DevCap2/DevCtl2 features, each null where the input does not say.
    #[serde(default)]
    pub(crate) device_features: DeviceFeatures,
    /// DevSta's detected errors by lspci's names (`CorrErr`, `NonFatalErr`, `FatalErr`,
    /// `UnsupReq`): empty when none is set, null where the input does not show DevSta.
    #[serde(default)]
    pub(crate) errors_detected: Option<Vec<Cow<'static, str>>>,
    pub(crate) numa_node: Option<i32>,
    pub(crate) driver: Option<String>,
    /// Where `driver` came from: `unknown` means a null driver says nothing (lspci output
    /// captured without `-k`).
    #[serde(default)]
    pub(crate) driver_source: FactSource,
    #[serde(rename = "ceiling_line_rate_MBps")]
    pub(crate) ceiling_mbps: Option<f64>,
    #[serde(rename = "ceiling_achievable_MBps")]
    pub(crate) ceiling_achievable_mbps: Option<f64>,
    #[serde(rename = "ceiling_capable_MBps")]
    pub(crate) ceiling_capable_mbps: Option<f64>,
    pub(crate) ceiling_limited_by: Option<String>,
    /// The platform model's predicted streaming endpoint DMA on this endpoint's link, where a
    /// model is given.
    #[serde(flatten)]
    pub(crate) platform_dma: PlatformDma,
    #[serde(default)]
    pub(crate) warnings: Vec<String>,
    /// The input lines behind each fact, and the facts the input did not give (lspci machines).
    #[serde(default, skip_serializing_if = "EvidenceJson::is_empty")]
    pub(crate) evidence: EvidenceJson,
}

/// Where a function's facts came from, for readers of text someone pasted (lspci output): the
/// line behind each fact, by fact name (`lnksta`, `devctl`, …), and the facts the input did not
/// give (which stay unknown rather than guessed). Empty for the other readers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(rename = "Evidence")]
pub(crate) struct EvidenceJson {
    pub(crate) lines: BTreeMap<String, SourceLine>,
    pub(crate) unknown: Vec<String>,
}

impl EvidenceJson {
    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.unknown.is_empty()
    }
}

impl From<&Evidence> for EvidenceJson {
    fn from(evidence: &Evidence) -> EvidenceJson {
        EvidenceJson {
            lines: evidence
                .lines()
                .map(|(fact, line, text)| {
                    let text = text.to_string();
                    (fact.to_string(), SourceLine { line, text })
                })
                .collect(),
            unknown: evidence.unknown().map(str::to_string).collect(),
        }
    }
}

/// The input line a reader took a fact from (1-based), so a finding can quote its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct SourceLine {
    pub(crate) line: usize,
    pub(crate) text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct BusesJson {
    pub(crate) secondary: u8,
    pub(crate) subordinate: u8,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct LinkJson {
    pub(crate) max_speed_gts: Option<f64>,
    pub(crate) max_width: Option<u8>,
    pub(crate) speed_gts: Option<f64>,
    pub(crate) width: Option<u8>,
    #[serde(default)]
    pub(crate) downgraded: bool,
    /// LnkCap's exit latencies of the supported ASPM states, in lspci's words (`<64ns`,
    /// `<16us`, `unlimited`); null where the state is unsupported or the input does not say.
    pub(crate) l0s_exit_latency: Option<Cow<'static, str>>,
    pub(crate) l1_exit_latency: Option<Cow<'static, str>>,
    /// LnkCap's Data Link Layer Link Active Reporting Capable (lspci `LLActRep`).
    pub(crate) dl_active_reporting: Option<bool>,
    /// LnkSta's DL_Active (lspci `DLActive`).
    pub(crate) dl_active: Option<bool>,
    /// LnkCap2's supported link speeds vector, GT/s, slowest first.
    pub(crate) supported_speeds_gts: Option<Vec<f64>>,
    /// LnkCap2's Crosslink Supported.
    pub(crate) crosslink: Option<bool>,
    /// LnkCtl2's target link speed.
    pub(crate) target_speed_gts: Option<f64>,
    /// LnkSta2.
    pub(crate) status2: Option<LinkStatus2Json>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct LinkStatus2Json {
    pub(crate) equalization_complete: bool,
    pub(crate) equalization_phase1: bool,
    pub(crate) equalization_phase2: bool,
    pub(crate) equalization_phase3: bool,
    pub(crate) equalization_request: bool,
    /// `unsupported`, `upstream_port`, `downstream_port`, `incomplete`; null when the text
    /// (older lspci) does not print it.
    pub(crate) crosslink_resolution: Option<Cow<'static, str>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct LatenciesJson {
    pub(crate) l0s: Cow<'static, str>,
    pub(crate) l1: Cow<'static, str>,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct AerMasksJson {
    /// Register values as 8 hex digits (`0x00100000`: bit 20, UnsupReq).
    pub(crate) uncorrectable_mask: String,
    pub(crate) uncorrectable_severity: String,
    pub(crate) correctable_mask: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct AerStatusJson {
    /// Register values as 8 hex digits, like the masks.
    pub(crate) uncorrectable: String,
    pub(crate) correctable: String,
}

/// DevSta's set error bits by lspci's names; `None` where the input does not show DevSta.
fn errors_detected(d: &ExpressDetail) -> Option<Vec<Cow<'static, str>>> {
    d.errors_detected.map(|bits| {
        DEVICE_ERROR_FLAGS
            .iter()
            .filter(|(_, bit)| bits & (1 << bit) != 0)
            .map(|(name, _)| Cow::Borrowed(*name))
            .collect()
    })
}

fn status2_json(s: LinkStatus2) -> LinkStatus2Json {
    LinkStatus2Json {
        equalization_complete: s.equalization_complete,
        equalization_phase1: s.equalization_phase1,
        equalization_phase2: s.equalization_phase2,
        equalization_phase3: s.equalization_phase3,
        equalization_request: s.equalization_request,
        crosslink_resolution: s.crosslink_resolution.map(|r| {
            [
                "unsupported",
                "upstream_port",
                "downstream_port",
                "incomplete",
            ][usize::from(r & 3)]
            .into()
        }),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct AcsJson {
    pub(crate) capability: String,
    pub(crate) control: String,
}

/// Ceilings are rounded to 0.001 MB/s, so JSON compares equal across readers.
const MBPS_DECIMALS: i32 = 3;

/// An endpoint's streaming DMA (write, read) MB/s on its own link, as `model` predicts it.
fn platform_dma(model: Option<&PlatformModel>, f: &Function) -> Option<(f64, f64, Provenance)> {
    let model = model.filter(|_| f.kind == Kind::Endpoint)?;
    Some(model.streaming_dma_mbps(&f.link_params()?))
}

/// The JSON view of a machine's topology, with `model`'s predictions on its endpoints' links.
pub fn to_json(spec: &MachineSpec, model: Option<&PlatformModel>) -> TopologyJson {
    let topo = &spec.topology;
    let mut found = warnings(topo);
    let functions = topo
        .functions()
        .iter()
        .map(|f| function_json(topo, model, f, found.remove(&f.bdf).unwrap_or_default()))
        .collect();
    TopologyJson {
        name: spec.name.clone(),
        description: spec.description.clone(),
        functions,
    }
}

/// Writes the `pcielab.topo/v1` document of [`to_json`] exactly as `text::json_text` prints it,
/// one function at a time, so that a listing of many functions never holds the whole document
/// (and its JSON tree) in memory at once.
pub fn write_json(
    spec: &MachineSpec,
    model: Option<&PlatformModel>,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let frame = TopologyJson {
        name: spec.name.clone(),
        description: spec.description.clone(),
        functions: Vec::new(),
    };
    let frame = crate::text::json_text("topo", &frame).map_err(std::io::Error::other)?;
    // The frame's own `"functions": []` (a newline inside a JSON string is escaped, so the
    // marker cannot be part of the name or description) is where the functions go.
    let marker = "\n  \"functions\": []";
    let at = frame
        .find(marker)
        .ok_or_else(|| std::io::Error::other("the topo document has no functions field"))?
        + marker.len()
        - "[]".len();
    out.write_all(&frame.as_bytes()[..at])?;
    let topo = &spec.topology;
    if topo.functions().is_empty() {
        out.write_all(b"[]")?;
    } else {
        let mut found = warnings(topo);
        out.write_all(b"[\n")?;
        for (i, f) in topo.functions().iter().enumerate() {
            if i > 0 {
                out.write_all(b",\n")?;
            }
            let one = function_json(topo, model, f, found.remove(&f.bdf).unwrap_or_default());
            let text = serde_json::to_string_pretty(&serde_json::to_value(one)?)?;
            for (n, line) in text.split('\n').enumerate() {
                if n > 0 {
                    out.write_all(b"\n")?;
                }
                out.write_all(b"    ")?;
                out.write_all(line.as_bytes())?;
            }
        }
        out.write_all(b"\n  ]")?;
    }
    out.write_all(&frame.as_bytes()[at + "[]".len()..])
}

/// One function's entry of the JSON view, with its `warnings`.
fn function_json(
    topo: &Topology,
    model: Option<&PlatformModel>,
    f: &Function,
    warnings: Vec<String>,
) -> FunctionJson {
    let ceiling = topo.path_ceiling(f.bdf);
    let dma = platform_dma(model, f);
    let d = &f.express_detail;
    FunctionJson {
        bdf: f.bdf.to_string(),
        vendor: format!("{:#06x}", f.vendor),
        device: format!("{:#06x}", f.device),
        class: format!("{:#08x}", f.class),
        revision: format!("{:#04x}", f.revision),
        subsystem_vendor: format!("{:#06x}", f.subsystem_vendor),
        subsystem_device: format!("{:#06x}", f.subsystem_device),
        kind: f.kind,
        name: f.name.as_deref().map(str::to_string),
        parent: f.parent.map(|p| p.to_string()),
        buses: f.buses.map(|(secondary, subordinate)| BusesJson {
            secondary,
            subordinate,
        }),
        link: f.link.map(|l| LinkJson {
            max_speed_gts: l.max_speed.map(Generation::gt_s),
            max_width: l.max_width,
            speed_gts: l.speed.map(Generation::gt_s),
            width: l.width,
            downgraded: marks_downgraded(f),
            l0s_exit_latency: d.l0s_exit.map(|l| l.text().into()),
            l1_exit_latency: d.l1_exit.map(|l| l.text().into()),
            dl_active_reporting: d.dl_active_reporting,
            dl_active: d.dl_active,
            supported_speeds_gts: d
                .speeds()
                .map(|s| s.into_iter().map(Generation::gt_s).collect()),
            crosslink: d.crosslink,
            target_speed_gts: d.target_speed.map(Generation::gt_s),
            status2: d.status2.map(status2_json),
        }),
        mps: f.mps,
        mps_supported: f.mps_supported,
        mrrs: f.mrrs,
        aspm_supported: f.aspm_supported.name().into(),
        aspm_enabled: f.aspm_enabled.name().into(),
        acs: f.acs.map(|a| AcsJson {
            capability: format!("{:#06x}", a.capability),
            control: format!("{:#06x}", a.control),
        }),
        aer: f.aer,
        aer_masks: f.aer_masks.map(|m| AerMasksJson {
            uncorrectable_mask: format!("{:#010x}", m.uncorrectable_mask),
            uncorrectable_severity: format!("{:#010x}", m.uncorrectable_severity),
            correctable_mask: format!("{:#010x}", m.correctable_mask),
        }),
        aer_status: f.aer_status.map(|s| AerStatusJson {
            uncorrectable: format!("{:#010x}", s.uncorrectable),
            correctable: format!("{:#010x}", s.correctable),
        }),
        device_features: d.features,
        errors_detected: errors_detected(d),
        acceptable_latency: match (d.l0s_acceptable, d.l1_acceptable) {
            (Some(l0s), Some(l1)) => Some(LatenciesJson {
                l0s: l0s.text().into(),
                l1: l1.text().into(),
            }),
            _ => None,
        },
        numa_node: f.numa_node,
        driver: f.driver.as_deref().map(str::to_string),
        driver_source: f.driver_source,
        ceiling_mbps: ceiling.map(|c| round_to(c.mbps, MBPS_DECIMALS)),
        ceiling_achievable_mbps: ceiling.map(|c| round_to(c.achievable_mbps, MBPS_DECIMALS)),
        ceiling_capable_mbps: ceiling.map(|c| round_to(c.capable_mbps, MBPS_DECIMALS)),
        ceiling_limited_by: ceiling.map(|c| c.limiting.to_string()),
        platform_dma: PlatformDma {
            write_mbps: dma.map(|d| round_to(d.0, MBPS_DECIMALS)),
            read_mbps: dma.map(|d| round_to(d.1, MBPS_DECIMALS)),
            provenance: dma.map(|d| d.2),
        },
        warnings,
        evidence: EvidenceJson::from(&f.evidence),
    }
}

/// lspci's "(downgraded)": the link runs below this function's own capability, marked only at
/// upstream-facing ends, since a root or downstream port is often more capable than its device.
pub(crate) fn marks_downgraded(f: &Function) -> bool {
    !matches!(f.kind, Kind::RootPort | Kind::SwitchDownstream)
        && f.link.is_some_and(|l| l.is_downgraded())
}

fn link_text(f: &Function, l: &Link) -> String {
    let speed = |g: Option<Generation>| g.map_or("?".to_string(), |g| format!("{}GT/s", g.gt_s()));
    let width = |w: Option<u8>| w.map_or("x?".to_string(), |w| format!("x{w}"));
    format!(
        "cap {} {}, sta {} {}{}",
        speed(l.max_speed),
        width(l.max_width),
        speed(l.speed),
        width(l.width),
        if marks_downgraded(f) {
            " (downgraded)"
        } else if f.express_detail.data_link_down() {
            " (data link down)"
        } else {
            ""
        }
    )
}

fn ceiling_text(c: &PathCeiling, own: Bdf) -> String {
    let by = if c.limiting == own {
        "own link".to_string()
    } else {
        c.limiting.to_string()
    };
    format!(
        "ceiling line {:.0} MB/s, achievable {:.0} MB/s, limited by {by}",
        c.mbps, c.achievable_mbps
    )
}

/// One function's line in the tree (without the tree drawing).
fn function_line(topo: &Topology, model: Option<&PlatformModel>, f: &Function) -> String {
    let mut line = format!(
        "{:02x}:{:02x}.{:x} {} [{:04x}:{:04x}]",
        f.bdf.bus,
        f.bdf.device,
        f.bdf.function,
        f.kind.name(),
        f.vendor,
        f.device
    );
    if let Some(name) = &f.name {
        let _ = write!(line, " {name}");
    }
    if let Some((sec, sub)) = f.buses {
        let _ = write!(line, " [bus {sec:02x}-{sub:02x}]");
    }
    if let Some(l) = &f.link {
        let _ = write!(line, " | {}", link_text(f, l));
    }
    if let Some(mps) = f.mps {
        let _ = write!(line, " | MPS {mps}");
        if let Some(mrrs) = f.mrrs {
            let _ = write!(line, " MRRS {mrrs}");
        }
    }
    if f.link.is_some() {
        if let Some(c) = topo.path_ceiling(f.bdf) {
            let _ = write!(line, " | {}", ceiling_text(&c, f.bdf));
        }
    }
    if let Some((write, read, provenance)) = platform_dma(model, f) {
        let _ = write!(
            line,
            " | platform DMA write {write:.0} MB/s, read {read:.0} MB/s ({})",
            provenance.text()
        );
    }
    if let Some(d) = &f.driver {
        let _ = write!(line, " | driver {d}");
    }
    line
}

/// The tree: one block per root bus, children indented below their bridge, warnings last;
/// endpoints show `model`'s streaming DMA prediction.
pub fn to_tree(spec: &MachineSpec, model: Option<&PlatformModel>) -> String {
    let topo = &spec.topology;
    let mut out = String::new();
    let _ = writeln!(out, "{}: {}", spec.name, spec.description);
    let mut children: BTreeMap<Bdf, Vec<&Function>> = BTreeMap::new();
    let mut roots: BTreeMap<(u16, u8), Vec<&Function>> = BTreeMap::new();
    for f in topo.functions() {
        match f.parent {
            Some(p) if topo.get(p).is_some() => children.entry(p).or_default().push(f),
            _ => roots.entry((f.bdf.domain, f.bdf.bus)).or_default().push(f),
        }
    }
    for ((domain, bus), funcs) in &roots {
        let numa = funcs.iter().find_map(|f| f.numa_node);
        let _ = write!(out, "[{domain:04x}:{bus:02x}]");
        if let Some(n) = numa {
            let _ = write!(out, " NUMA node {n}");
        }
        out.push('\n');
        draw(topo, model, &children, funcs, "", &mut out);
    }
    if let Some(note) = missing_ceilings_note(topo) {
        let _ = writeln!(out, "\n{note}");
    }
    let found = warnings(topo);
    if !found.is_empty() {
        out.push('\n');
        for (bdf, msgs) in &found {
            for m in msgs {
                let _ = writeln!(out, "warning: {bdf}: {m}");
            }
        }
    }
    out
}

/// Why some (or all) functions show no ceiling: a ceiling needs the PCIe link's speed and width,
/// which root-complex integrated endpoints, conventional PCI functions and most of a VM's
/// virtual devices do not report. Host bridges have no link by nature and are not counted.
fn missing_ceilings_note(topo: &Topology) -> Option<String> {
    let devices: Vec<&Function> = topo
        .functions()
        .iter()
        .filter(|f| f.kind != Kind::HostBridge)
        .collect();
    let without: Vec<String> = devices
        .iter()
        .filter(|f| topo.path_ceiling(f.bdf).is_none())
        .map(|f| f.bdf.to_string())
        .collect();
    if without.is_empty() {
        return None;
    }
    let why = "they report no PCIe link speed and width (no LnkCap/LnkSta in `lspci -vv`): \
               root-complex integrated endpoints, conventional PCI functions and virtual devices \
               (virtio on a VM's root bus) have none, so no path ceiling can be computed";
    Some(if without.len() == devices.len() {
        format!("note: no ceilings: none of the {} functions here has a link to compute one from; {why}", devices.len())
    } else {
        let shown = without
            .iter()
            .take(8)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        let more = without.len().saturating_sub(8);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        format!("note: no ceiling for {shown}{more}: {why}")
    })
}

fn draw(
    topo: &Topology,
    model: Option<&PlatformModel>,
    children: &BTreeMap<Bdf, Vec<&Function>>,
    level: &[&Function],
    prefix: &str,
    out: &mut String,
) {
    for (i, f) in level.iter().enumerate() {
        let last = i + 1 == level.len();
        let _ = writeln!(
            out,
            "{prefix}{}{}",
            if last { "\\-" } else { "+-" },
            function_line(topo, model, f)
        );
        if let Some(kids) = children.get(&f.bdf) {
            let deeper = format!("{prefix}{}", if last { "  " } else { "| " });
            draw(topo, model, children, kids, &deeper, out);
        }
    }
}

/// Graphviz: one node per function, one edge per parent link labelled with its status.
pub fn to_dot(spec: &MachineSpec) -> String {
    let topo = &spec.topology;
    let found = warnings(topo);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "digraph \"{}\" {{\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];",
        escape(&spec.name)
    );
    for f in topo.functions() {
        let mut label = format!(
            "{}\\n{} [{:04x}:{:04x}]",
            f.bdf,
            f.kind.name(),
            f.vendor,
            f.device
        );
        if let Some(n) = &f.name {
            let _ = write!(label, "\\n{}", escape(n));
        }
        let color = if found.contains_key(&f.bdf) {
            ", color=red"
        } else {
            ""
        };
        let _ = writeln!(out, "  \"{}\" [label=\"{label}\"{color}];", f.bdf);
    }
    for f in topo.functions() {
        if let Some(p) = f.parent {
            let label = f.link.map(|l| link_text(f, &l)).unwrap_or_default();
            let style = if marks_downgraded(f) {
                ", style=dashed"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  \"{p}\" -> \"{}\" [label=\"{}\"{style}];",
                f.bdf,
                escape(&label)
            );
        }
    }
    out.push_str("}\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::spec::parse_spec;

    #[test]
    fn functions_without_a_link_say_why_they_have_no_ceiling() {
        // Like a VM: virtio endpoints on the root bus, none with a PCIe link.
        let vm = parse_spec(
            "vm.toml",
            r#"name = "vm"
description = "virtio devices"
[[function]]
bdf = "0000:00:00.0"
kind = "host_bridge"
vendor = 0x8086
device_id = 0x0d57
class = 0x060000
[[function]]
bdf = "0000:00:02.0"
kind = "endpoint"
vendor = 0x1af4
device_id = 0x1042
class = 0x010000
[[function]]
bdf = "0000:00:03.0"
kind = "endpoint"
vendor = 0x1af4
device_id = 0x1041
class = 0x020000
"#,
        )
        .unwrap();
        let tree = to_tree(&vm, None);
        assert!(
            tree.contains("note: no ceilings: none of the 2 functions here"),
            "{tree}"
        );
        assert!(tree.contains("virtio"), "{tree}");
        // qemu-seed: every linked function has a ceiling; only the integrated NVMe has none.
        let seed = crate::topology::spec::preset_for_tests("qemu-seed");
        let tree = to_tree(&seed, None);
        assert!(
            tree.contains("note: no ceiling for 0000:00:03.0: they report"),
            "{tree}"
        );
        // A machine where every device has a link gets no note.
        let rk = crate::topology::spec::preset_for_tests("rk3588-evb");
        assert!(!to_tree(&rk, None).contains("note: no ceiling"));
    }

    #[test]
    fn the_streamed_document_is_the_printed_one() {
        let mut specs = vec![crate::topology::spec::preset_for_tests("yitian710")];
        // Evidence, warnings and names with quotes and escapes, from an lspci read.
        let text = "00:01.0 PCI bridge [0604]: \"Odd\" \x1b[1m [8086:3c02]\n\
                    \tBus: primary=00, secondary=01, subordinate=01\n\
                    01:00.0 Ethernet controller: x\n";
        let read = crate::topology::lspci::read_lspci("odd.txt", text).unwrap();
        specs.push(MachineSpec {
            name: "odd".into(),
            description: "a \"quoted\"\n\"functions\": [] description".into(),
            topology: read.topology,
            sim: Default::default(),
            platform_table: Default::default(),
        });
        specs.push(MachineSpec {
            topology: Topology::new(Vec::new()),
            ..specs[1].clone()
        });
        for spec in &specs {
            let mut streamed = Vec::new();
            write_json(spec, None, &mut streamed).unwrap();
            let printed = crate::text::json_text("topo", &to_json(spec, None)).unwrap();
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                printed,
                "{}",
                spec.name
            );
        }
    }
}
