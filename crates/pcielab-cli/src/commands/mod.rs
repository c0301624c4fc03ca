//! Subcommand dispatch: one file per subcommand, each exposing `Args` and `run`.

use clap::Subcommand;
use pcielab::Result;

mod model;

#[derive(Subcommand)]
pub enum Command {
    /// Link bandwidth and TLP counts versus transfer size.
    Model(model::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Model(args) => model::run(args),
    }
}
