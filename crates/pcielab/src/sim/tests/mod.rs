//! The simulator as the presets and spec files build it: counters that agree with each other
//! and with the perf-core oracle, the source documents' scenarios, and the Yitian 710 PMU
//! guide's experiments run verbatim.

use std::path::Path;

use crate::error::{Error, Result};
use crate::sim::SimulatedPcie;
use crate::topology::spec::{parse_spec, preset_files, MachineSpec};

mod invariants;
mod scenarios;
mod seed;

/// The simulator `--machine sim:NAME` opens for the preset `name`.
fn open_preset(name: &str) -> Result<SimulatedPcie> {
    let text = preset_text(name).ok_or_else(|| Error::bad_input(format!("no preset {name}")))?;
    simulator(&parse_spec(&format!("presets/{name}.toml"), &text)?)
}

/// The simulator `--machine sim:FILE.toml` opens for the spec file at `path`.
fn spec_file(path: &Path) -> Result<SimulatedPcie> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::runtime(e.to_string()))?;
    simulator(&parse_spec(&path.display().to_string(), &text)?)
}

/// Every preset's name.
fn preset_names() -> Vec<String> {
    preset_files().into_iter().map(|(name, _)| name).collect()
}

/// The spec TOML of preset `name`.
fn preset_text(name: &str) -> Option<String> {
    preset_files()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, text)| text)
}

fn simulator(spec: &MachineSpec) -> Result<SimulatedPcie> {
    SimulatedPcie::new(
        spec.name.clone(),
        spec.topology.clone(),
        &spec.sim,
        &spec.platform_table,
    )
}
