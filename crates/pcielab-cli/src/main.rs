//! The `pcielab` command line. One module per subcommand under `commands/`; each only wires
//! arguments to library calls and prints. Exit codes: 0 ok, 1 runtime failure, 2 bad input.

mod commands;

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "pcielab",
    version,
    about = "Observe, model, control and emulate PCIe I/O on Linux",
    long_about = "pcielab answers PCIe performance questions on a live host (--machine host), a saved \
sysfs snapshot (--machine snapshot:DIR) or a built-in simulated platform (--machine sim:NAME).",
    after_help = "Examples:\n  pcielab topo --machine sim:yitian710\n  pcielab model --gen 3 --width 4 --sizes 64,4K,1M"
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0, usage errors to stderr with 2.
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if let Err(e) = commands::run(cli.command) {
        eprintln!("pcielab: error: {e}");
        std::process::exit(e.exit_code());
    }
}
