//! `pcielab sim`: timed experiments on a simulated machine (`sim run SCENARIO.toml`) and the
//! simulated processes a `--state` machine runs (`sim spawn`, `sim kill`, `sim presets`).
//! Argument wiring only; the model lives in `pcielab::qos`.

use crate::machine_arg::MachineArg;
use std::path::PathBuf;

use clap::{Args as ClapArgs, Subcommand};
use pcielab::machine::presets::catalog;
use pcielab::plot;
use pcielab::qos::backend::QosBackend;
use pcielab::qos::scenario::Scenario;
use pcielab::qos::sim::SimulatedResctrl;
use pcielab::text::json_text;
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

pub fn run(args: Args) -> Result<()> {
    match args.command {
        SimCommand::Run {
            scenario,
            json,
            svg,
        } => {
            let outcome = Scenario::load(&scenario)?.run()?;
            if let Some(path) = &svg {
                pcielab::input::write_output(
                    path.as_ref(),
                    plot::scenario::svg(&outcome)?.as_bytes(),
                )?;
            }
            if json {
                out!("{}", json_text("sim-run", &outcome)?)?;
            } else {
                out!("{}", outcome.table())?;
                outln!("simulated in {:.2} s", outcome.wall_s)?;
                if let Some(path) = svg {
                    outln!("plot: {}", path.display())?;
                }
            }
            Ok(())
        }
        SimCommand::Spawn {
            machine: m,
            state,
            command,
        } => {
            let mut sim = machine(&m, &state)?;
            let pid = sim.spawn(&command.join(" "))?;
            sim.save()?;
            outln!("{pid}")?;
            Ok(())
        }
        SimCommand::Kill {
            pid,
            machine: m,
            state,
        } => {
            let mut sim = machine(&m, &state)?;
            sim.kill(pid)?;
            sim.save()
        }
        SimCommand::Presets => {
            for p in catalog()?.iter().filter(|p| p.kind == "qos") {
                outln!("sim:{:<14} {}", p.name, p.models)?;
            }
            Ok(())
        }
    }
}
