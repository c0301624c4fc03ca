//! `--machine`, declared once for every command that reads a machine: clap parses the value
//! into the library's selector, so a bad one is a usage error (exit 2) that lists the forms
//! before anything runs, and each command opens the machine it names the same way.

use pcielab::machine::{Machine, MachineSelector, PRESETS};
use pcielab::{Error, Result};

#[derive(clap::Args, Clone, Debug)]
pub struct MachineArg {
    /// Where facts come from: host (the default where a command has one), snapshot:DIR (a tree
    /// saved by `pcielab snapshot`), sim:PRESET (`pcielab presets` lists them), sim:FILE.toml,
    /// or lspci:FILE (`lspci -vvv` text or an `lspci -xxxx` dump; lspci:- reads stdin)
    #[arg(long = "machine", value_name = "MACHINE", value_parser = SelectorParser,
          hide_possible_values = true)]
    selector: Option<MachineSelector>,
}

/// Parses `--machine` with the library's grammar, and names `host` and every `sim:PRESET` as
/// its possible values, which is what shell completion offers (`--machine sim:<TAB>`); any
/// other selector (`sim:FILE.toml`, `snapshot:DIR`, `lspci:FILE`) still parses.
#[derive(Clone)]
struct SelectorParser;

impl clap::builder::TypedValueParser for SelectorParser {
    type Value = MachineSelector;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> std::result::Result<MachineSelector, clap::Error> {
        clap::builder::TypedValueParser::parse_ref(&selector, cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let topology = PRESETS.iter().map(|p| p.name);
        let qos = pcielab::qos::PRESETS.iter().map(|p| p.name);
        let presets = topology.chain(qos).map(|name| format!("sim:{name}"));
        Some(Box::new(
            std::iter::once("host".to_string())
                .chain(presets)
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

fn selector(text: &str) -> std::result::Result<MachineSelector, String> {
    text.parse().map_err(|e: Error| e.to_string())
}

impl MachineArg {
    /// The machine named, or the live host when none is.
    pub fn open(&self) -> Result<Machine> {
        match &self.selector {
            Some(selector) => Machine::open(selector),
            None => "host".parse(),
        }
    }

    /// `--machine` was given.
    pub fn is_given(&self) -> bool {
        self.selector.is_some()
    }

    /// The machine named, if one is.
    pub fn open_given(&self) -> Result<Option<Machine>> {
        self.selector.as_ref().map(Machine::open).transpose()
    }

    /// The machine named; `needs` says which command needs one and of what kind.
    pub fn open_required(&self, needs: &str) -> Result<Machine> {
        self.open_given()?
            .ok_or_else(|| Error::bad_input(format!("{needs}: give --machine")))
    }
}
