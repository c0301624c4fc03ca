//! Subcommand dispatch: one file per subcommand, each exposing `Args` and a `run` that returns
//! the command's [`Output`]; [`run`] prints it (output.rs holds the policy every byte on
//! standard output follows).

/// `eprintln!` for notes and warnings that may quote an input, as [`output::note`] prints them.
macro_rules! note {
    ($($arg:tt)*) => {
        crate::commands::output::note(&format!($($arg)*))
    };
}

mod advise;
mod bench;
mod corpus;
mod exporter;
mod fit;
mod install;
mod lab;
mod model;
mod output;
mod plot;
mod pmu;
mod presets;
mod qos;
mod report;
mod sim;
mod snapshot;
mod stat;
mod top;
mod topo;

use clap::Subcommand;
use output::{Output, Terminal};
use pcielab::Result;

#[derive(Subcommand)]
pub enum Command {
    /// What to change on this machine: findings with evidence, fix and predicted gain; apply/undo runtime fixes
    Advise(advise::Args),
    /// Show the PCIe tree with links, ceilings and warnings (or JSON, DOT, a sysfs export)
    Topo(topo::Args),
    /// Link bandwidth and TLP counts versus transfer size.
    Model(model::Args),
    /// Fit platform parameters beyond the link to measurements (CSV, fio JSON, dmatest table)
    Fit(fit::Args),
    /// Save the live host's /sys/bus/pci as plain files for later --machine snapshot:DIR
    Snapshot(snapshot::Args),
    /// PCIe PMU devices and their events (`pmu list`)
    Pmu(pmu::Args),
    /// Count PCIe PMU events while a workload runs, like perf stat
    Stat(stat::Args),
    /// resctrl: cache and memory-bandwidth partitioning
    Qos(qos::Args),
    /// Experiments on simulated QoS machines
    Sim(sim::Args),
    /// Live per-port and per-function traffic and link health, full-screen or `-b` text (like top)
    Top(top::Args),
    /// Prometheus metrics of per-port traffic and link health at /metrics (sim: plays a workload)
    Exporter(exporter::Args),
    /// P2P copies through p2pmem, MMIO (BAR) load/store rates, interrupt delivery
    Bench(bench::Args),
    /// QEMU guests built from a topology: argv, run, check, P2PDMA kernel.
    Lab(lab::Args),
    /// One self-contained HTML page: topology, PMUs and given results, each with its plot
    Report(report::Args),
    /// Draw a saved --json result as the SVG its command's --svg draws
    Plot(plot::Args),
    /// Read a directory of lspci outputs (one machine each): failures, timing, findings per check
    Corpus(corpus::Args),
    /// Every built-in sim:NAME machine: kind, what it models, where its values come from
    Presets(presets::Args),
    /// Manual pages from this command line's own definition (one per command with DIR)
    Man(install::ManArgs),
    /// Shell completion script (bash, zsh, fish, elvish, powershell) on standard output
    Completions(install::CompletionArgs),
}

/// Runs `command`, prints what it returns (`Output::print`: the one place a result reaches
/// standard output) and gives the exit status it ends with: 0, or the status a command owes
/// its caller beyond success and failure (`advise --fail-on`'s 3, `stat`'s workload's own).
/// Errors are returned for `main` to print and turn into 1 or 2. Commands that print while
/// they run get the same terminal the result is printed through.
pub fn run(command: Command) -> Result<i32> {
    let mut out = Terminal::new();
    let output: Output = match command {
        Command::Advise(args) => advise::run(args),
        Command::Topo(args) => topo::run(args),
        Command::Model(args) => model::run(args),
        Command::Fit(args) => fit::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Pmu(args) => pmu::run(args),
        Command::Stat(args) => stat::run(args),
        Command::Qos(args) => qos::run(args, &mut out),
        Command::Sim(args) => sim::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Top(args) => top::run(args, &mut out),
        Command::Exporter(args) => exporter::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Report(args) => report::run(args),
        Command::Plot(args) => plot::run(args),
        Command::Presets(args) => presets::run(args),
        Command::Corpus(args) => corpus::run(args),
        Command::Man(args) => install::run_man(args),
        Command::Completions(args) => install::run_completions(args),
    }?;
    output.print(&mut out)
}

/// A clap value parser for a number in `range`: a negative, too large or out-of-range value gets a
/// message that states the valid range (clap's own says only "number too large").
pub fn number_in<T>(
    range: std::ops::RangeInclusive<T>,
) -> impl Fn(&str) -> std::result::Result<T, String> + Clone + Send + Sync + 'static
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy + Send + Sync + 'static,
{
    move |text| {
        pcielab::input::parse_in_range("value", text, range.clone())
            .map_err(|e| e.message().trim_start_matches("value: ").to_string())
    }
}
