//! `pcielab sim`: timed experiments on a simulated machine (`sim run SCENARIO.toml`) and the
//! simulated processes a `--state` machine runs (`sim spawn`, `sim kill`, `sim presets`).
//! Argument wiring only; the model lives in `pcielab::qos`.

use crate::machine_arg::MachineArg;
use std::path::PathBuf;

use super::output::{Document, Form, JsonForm, Output, Terminal};
use clap::{Args as ClapArgs, Subcommand};
use pcielab::machine::preset_catalog;
use pcielab::plot;
use pcielab::qos::QosBackend;
use pcielab::qos::SimulatedResctrl;
use pcielab::qos::{Outcome, Scenario};
use pcielab::Result;

const EXAMPLES: &str = "Examples:
  pcielab sim run scenarios/mb-throttling.toml --svg mb.svg
  pcielab sim run scenarios/colocation.toml --json
  pcielab sim spawn --machine sim:mpam-seed --state /tmp/qos.json -- numactl -N 2 -m 2 bw_mem -P 16 128M rd
  pcielab sim kill 1000 --machine sim:mpam-seed --state /tmp/qos.json
  pcielab sim presets";

#[derive(ClapArgs)]
#[command(about = "Experiments and processes on simulated QoS machines", after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Subcommand)]
enum SimCommand {
    /// Run a scenario file: prints a table (or JSON) and can write an SVG plot
    #[command(after_help = EXAMPLES)]
    Run {
        /// Scenario file (format in docs/qos.md; the MPAM/resctrl article's experiments are in scenarios/)
        scenario: PathBuf,
        /// JSON output (shape in docs/qos.md)
        #[arg(long)]
        json: bool,
        /// Write the plot here
        #[arg(long, value_name = "OUT.svg")]
        svg: Option<PathBuf>,
    },
    /// Start a simulated process (the MPAM/resctrl article's command lines: numactl, bw_mem, stress-ng) on a --state machine; prints its pid
    #[command(after_help = EXAMPLES)]
    Spawn {
        #[command(flatten)]
        machine: MachineArg,
        /// State file of the machine (created if missing)
        #[arg(long, value_name = "FILE")]
        state: PathBuf,
        /// The command line, e.g. numactl -N 2 -m 2 bw_mem -P 16 128M rd
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// End a simulated process
    #[command(after_help = EXAMPLES)]
    Kill {
        /// pid printed by sim spawn
        pid: u32,
        #[command(flatten)]
        machine: MachineArg,
        /// State file of the machine
        #[arg(long, value_name = "FILE")]
        state: PathBuf,
    },
    /// List the simulated QoS machines (`pcielab presets` lists every kind)
    #[command(after_help = EXAMPLES)]
    Presets,
}

fn machine(m: &MachineArg, state: &std::path::Path) -> Result<SimulatedResctrl> {
    m.open_required("sim spawn and sim kill run on a simulated resctrl machine (sim:mpam-seed or sim:rdt-xeon8163)")?
        .simulated_resctrl(Some(state), false)
}

pub fn run(args: Args) -> Result<Output> {
    match args.command {
        SimCommand::Run {
            scenario,
            json,
            svg,
        } => {
            let outcome = Scenario::load(&scenario)?.run()?;
            let run = ScenarioRun {
                outcome,
                plot: svg.clone(),
            };
            Ok(Output::new(run, Form::json_if(json)).with_svg(svg))
        }
        SimCommand::Spawn {
            machine: m,
            state,
            command,
        } => {
            let mut sim = machine(&m, &state)?;
            let pid = sim.spawn(&command.join(" "))?;
            sim.save()?;
            Ok(Output::text(format!("{pid}\n")))
        }
        SimCommand::Kill {
            pid,
            machine: m,
            state,
        } => {
            let mut sim = machine(&m, &state)?;
            sim.kill(pid)?;
            sim.save()?;
            Ok(Output::done())
        }
        SimCommand::Presets => {
            let lines = preset_catalog()?
                .iter()
                .filter(|p| p.kind == "qos")
                .map(|p| format!("sim:{:<14} {}\n", p.name, p.models))
                .collect();
            Ok(Output::text(lines))
        }
    }
}

/// A scenario's outcome and where its plot was written.
struct ScenarioRun {
    outcome: Outcome,
    plot: Option<PathBuf>,
}

impl Document for ScenarioRun {
    fn kind(&self) -> &'static str {
        "sim-run"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.outcome
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.outcome.table())?;
        out.text(&format!("simulated in {:.2} s\n", self.outcome.wall_s))?;
        match &self.plot {
            Some(path) => out.text(&format!("plot: {}\n", path.display())),
            None => Ok(()),
        }
    }

    fn svg(&self) -> Result<Option<String>> {
        plot::svg(plot::Picture::Scenario(&self.outcome)).map(Some)
    }
}
