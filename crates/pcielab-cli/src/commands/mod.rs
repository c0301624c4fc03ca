//! Subcommand dispatch: one file per subcommand, each exposing `Args` and `run`.

use clap::Subcommand;
use pcielab::Result;

#[derive(Subcommand)]
pub enum Command {}

pub fn run(command: Command) -> Result<()> {
    match command {}
}
