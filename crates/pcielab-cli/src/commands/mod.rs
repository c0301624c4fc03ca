//! Subcommand dispatch: one file per subcommand, each exposing `Args` and `run`.

mod topo;

use clap::Subcommand;
use pcielab::Result;

#[derive(Subcommand)]
pub enum Command {
    /// Show the PCIe tree with links, ceilings and warnings (or JSON, DOT, a sysfs export)
    Topo(topo::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Topo(args) => topo::run(args),
    }
}
