//! Subcommand dispatch: one file per subcommand, each exposing `Args` and `run`.

use clap::Subcommand;
use pcielab::Result;

mod bench;
mod model;

#[derive(Subcommand)]
pub enum Command {
    /// Link bandwidth and TLP counts versus transfer size.
    Model(model::Args),
    /// Measurements on real devices: p2p copies through p2pmem.
    Bench(bench::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Model(args) => model::run(args),
        Command::Bench(args) => bench::run(args),
    }
}
