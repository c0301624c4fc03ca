//! What `pmu list` reports for catalog PMUs (a simulated or snapshot machine's one DesignWare
//! PMU per DWC root port), as the `--json` document of docs/pmu.md and as the text table of
//! each PMU's events; a host's listing is `hostlist`.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::pmu::catalog::nearest;
use crate::pmu::kernel::KernelVersion;
use crate::pmu::PmuDevice;

/// The PMU named `only` (any of its names), or all of them when `None`; bad input naming the
/// nearest names when the machine has no such PMU.
pub(crate) fn only_pmu(pmus: Vec<PmuDevice>, only: Option<&str>) -> Result<Vec<PmuDevice>> {
    let Some(name) = only else {
        return Ok(pmus);
    };
    let names = || {
        pmus.iter()
            .flat_map(|p| std::iter::once(&p.name).chain(&p.aliases))
    };
    if !names().any(|n| n == name) {
        let near = nearest(name, names().map(String::as_str));
        return Err(Error::bad_input(format!(
            "--pmu {name}: this machine has no such PMU; nearest: {}",
            near.join(", ")
        )));
    }
    Ok(pmus.into_iter().filter(|p| p.answers_to(name)).collect())
}

/// Which kernel each of a catalog PMU's names stands for: the seed's `pcie_bdf_*` is the Yitian
/// guide's vendor kernel, the upstream `dwc_rootport_*` the newest modelled driver.
pub(crate) fn kernels_line() -> String {
    format!(
        "pcie_bdf_* follows the Yitian 710 PMU guide's vendor kernel (every guide event, lane= \
         only for per-lane events, impossible groups <not counted>); dwc_rootport_* follows \
         upstream kernel {} (event groups 6-7 only, lane= on every lane event, impossible \
         groups refused)",
        KernelVersion::NEWEST
    )
}

/// The `pmu list --json` document of a catalog machine (`sim:`, `snapshot:`): the machine and
/// every PMU with its full event catalog.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CatalogListDocument {
    /// The `--machine` selector.
    pub(crate) machine: String,
    /// Which kernel each of a PMU's names follows.
    pub(crate) kernels: String,
    pub(crate) pmus: Vec<CatalogPmuDocument>,
}

/// One catalog PMU and its events.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct CatalogPmuDocument {
    #[serde(flatten)]
    pub(crate) device: PmuDevice,
    pub(crate) events: Vec<CatalogEventDocument>,
}

/// One event of a catalog PMU, as that PMU's driver would list it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct CatalogEventDocument {
    pub(crate) name: &'static str,
    /// The name in the Yitian guide's vendor driver; equal to `name` when it has none.
    pub(crate) seed_name: &'static str,
    /// The event's sysfs `events/` text for this PMU.
    pub(crate) encoding: String,
    pub(crate) config: u64,
    pub(crate) group: String,
    pub(crate) unit: String,
    pub(crate) counter_bits: u32,
    pub(crate) per_lane: bool,
    pub(crate) description: &'static str,
}

/// The `--json` document of `pmus` on `machine`.
pub(crate) fn list_document(machine: &str, pmus: &[PmuDevice]) -> CatalogListDocument {
    CatalogListDocument {
        machine: machine.to_string(),
        kernels: kernels_line(),
        pmus: pmus
            .iter()
            .map(|p| CatalogPmuDocument {
                device: p.clone(),
                events: p
                    .family
                    .events()
                    .iter()
                    .map(|e| CatalogEventDocument {
                        name: e.name,
                        seed_name: e.seed_name,
                        encoding: e.encoding(p.family),
                        config: e.config,
                        group: e.group.label(),
                        unit: e.unit.label(),
                        counter_bits: e.group.counter_bits(p.family),
                        per_lane: e.group.per_lane(),
                        description: e.description,
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The text form: per PMU a heading line, then a table of its events, then a blank line.
pub(crate) fn render_list(machine: &str, pmus: &[PmuDevice]) -> String {
    if pmus.is_empty() {
        return format!("{machine}: no PCIe PMUs\n");
    }
    let mut out = format!("{}\n\n", kernels_line());
    for p in pmus {
        let aliases = if p.aliases.is_empty() {
            String::new()
        } else {
            format!(" (also {})", p.aliases.join(", "))
        };
        let port = p
            .root_port
            .map_or(String::new(), |b| format!(", root port {b}"));
        out += &format!(
            "{}{aliases}: {}{port}, {} lanes\n",
            p.name,
            p.family.name(),
            p.lanes
        );
        out += &format!(
            "  {:<30} {:<28} {:<32} {:<20} UNIT\n",
            "EVENT", "UPSTREAM NAME", "ENCODING", "GROUP"
        );
        for e in p.family.events() {
            out += &format!(
                "  {:<30} {:<28} {:<32} {:<20} {}\n",
                e.seed_name,
                e.name,
                e.encoding(p.family),
                e.group.label(),
                e.unit.label()
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::catalog::Family;

    fn one_port() -> Vec<PmuDevice> {
        vec![PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 2)]
    }

    #[test]
    fn json_names_the_pmu_its_port_and_every_event() {
        let doc = serde_json::to_value(list_document("sim:yitian710", &one_port())).unwrap();
        assert_eq!(doc["machine"], "sim:yitian710");
        let pmu = &doc["pmus"][0];
        assert_eq!(pmu["name"], "pcie_bdf_200");
        assert_eq!(pmu["root_port"], "0000:00:02.0");
        assert_eq!(pmu["lanes"], 2);
        let events = pmu["events"].as_array().unwrap();
        assert_eq!(events.len(), Family::DwcRootPort.events().len());
        assert!(events
            .iter()
            .all(|e| e["counter_bits"].as_u64().unwrap() > 0));
    }

    #[test]
    fn text_has_a_heading_and_one_row_per_event() {
        let text = render_list("sim:yitian710", &one_port());
        let (kernels, blocks) = text.split_once("\n\n").unwrap();
        assert!(kernels.contains("upstream kernel 6.18"), "{kernels}");
        let lines: Vec<&str> = blocks.lines().collect();
        assert!(
            lines[0].starts_with("pcie_bdf_200 (also dwc_rootport_"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with(", root port 0000:00:02.0, 2 lanes"),
            "{}",
            lines[0]
        );
        assert!(lines[1].trim_start().starts_with("EVENT"));
        assert_eq!(lines.len(), 2 + Family::DwcRootPort.events().len() + 1);
        assert_eq!(
            render_list("sim:yitian710", &[]),
            "sim:yitian710: no PCIe PMUs\n"
        );
    }
}
