//! Subcommand dispatch: one file per subcommand, each exposing `Args` and `run`.

use clap::Subcommand;
use pcielab::Result;

pub mod qos;
pub mod sim;

#[derive(Subcommand)]
pub enum Command {
    /// resctrl: cache and memory-bandwidth partitioning
    Qos(qos::Args),
    /// Experiments on simulated QoS machines
    Sim(sim::Args),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Qos(args) => qos::run(args),
        Command::Sim(args) => sim::run(args),
    }
}
