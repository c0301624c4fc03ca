//! Subcommand dispatch: one file per subcommand, each exposing `Args` and `run`.

mod snapshot;
mod topo;

use clap::Subcommand;
use pcielab::Result;

mod model;
mod pmu;
mod stat;

#[derive(Subcommand)]
pub enum Command {
    /// Link bandwidth and TLP counts versus transfer size.
    Model(model::Args),
    /// Show the PCIe tree with links, ceilings and warnings (or JSON, DOT, a sysfs export)
    Topo(topo::Args),
    /// Save the live host's /sys/bus/pci as plain files for later --machine snapshot:DIR
    Snapshot(snapshot::Args),
    /// PCIe PMU devices and their events (`pmu list`)
    Pmu(pmu::Args),
    /// Count PCIe PMU events while a workload runs, like perf stat
    Stat(stat::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Model(args) => model::run(args),
        Command::Topo(args) => topo::run(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Pmu(args) => pmu::run(args),
        Command::Stat(args) => stat::run(args),
    }
}
