//! `pcielab presets`: every built-in `sim:NAME` machine of either kind, from the registry the
//! `--machine` parser itself opens (so the list cannot disagree with what is accepted).

use super::output::{Document, Form, JsonForm, Output, Terminal};
use clap::Args as ClapArgs;
use pcielab::machine::{preset_catalog, PresetList, PresetSummary};
use pcielab::Result;

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab presets                     name, kind, what it models and where its values come from
  pcielab presets --json | jq -r '.presets[] | select(.kind == \"topology\") | .name'

Kinds: topology presets are PCIe platforms (topo, pmu list, stat, top, exporter, lab, report);
qos presets are resctrl machines (qos, sim run). Either is given as --machine sim:NAME; a spec
file of your own as --machine sim:FILE.toml (format in docs/topology.md). Sources: docs/sources.md.")]
pub struct Args {
    /// Print JSON: {"schema": "pcielab.presets/v1", "presets": [{name, kind, models, source}]}
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<Output> {
    let presets = preset_catalog()?;
    Ok(Output::new(
        PresetList { presets },
        Form::json_if(args.json),
    ))
}

impl Document for PresetList {
    fn kind(&self) -> &'static str {
        "presets"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&render(&self.presets))
    }
}

/// One line per preset (`sim:NAME`, kind, what it models), its source indented below it.
fn render(presets: &[PresetSummary]) -> String {
    let width = presets
        .iter()
        .map(|p| p.name.len() + "sim:".len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for p in presets {
        let machine = format!("sim:{}", p.name);
        out += &format!("{machine:<width$}  {:<8}  {}\n", p.kind, p.models);
        out += &format!("{:<width$}  {:<8}  source: {}\n", "", "", p.source);
    }
    out
}
