//! The `pcielab` command line. One module per subcommand under `commands/`; each only wires
//! arguments to library calls and returns what to print, which `commands::run` prints. Exit
//! codes: 0 ok, 1 runtime failure, 2 bad input.

mod commands;
mod machine_arg;

use clap::{CommandFactory, FromArgMatches, Parser};

#[derive(Parser)]
#[command(
    name = "pcielab",
    version,
    about = "Observe, model, control and emulate PCIe I/O on Linux",
    long_about = "pcielab answers PCIe performance questions on a live host (--machine host), a saved \
sysfs snapshot (--machine snapshot:DIR), anyone's saved lspci -vvv or -xxxx output (--machine \
lspci:FILE) or a built-in simulated platform (--machine sim:NAME).",
    after_help = "Examples:\n  \
pcielab topo --machine sim:yitian710                      the tree, links, ceilings, warnings\n  \
pcielab advise                                            what to change here, evidence, predicted gain\n  \
pcielab model --gen 3 --width 4 --sizes 64,4K,1M          link bandwidth vs transfer size\n  \
pcielab pmu list --machine sim:yitian710                  PMU devices and their events\n  \
pcielab stat --machine sim:yitian710 -a -e pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/ -- \\\n      \
fio --filename=./test.big --rw=read --bs=1m --size=2g --numjobs=4 --name=test-read\n  \
pcielab qos show --machine sim:mpam-seed                  resctrl groups and capabilities\n  \
pcielab sim run scenarios/colocation.toml --svg out.svg   an MPAM experiment with a plot\n  \
pcielab lab check qemu-seed                               boot the topology in QEMU and compare\n  \
pcielab presets                                           every sim: machine and its source\n  \
pcielab topo --machine lspci:bug-report.txt               the tree of a pasted lspci -vvv\n  \
pcielab corpus fixtures/lspci/linuxhw                     read many machines' lspci, count findings\n\n\
Machines: host | snapshot:DIR | sim:PRESET | sim:FILE.toml | lspci:FILE (lspci:- = stdin, given up \
after 30 s without a byte; PCIELAB_STDIN_IDLE_S=SECONDS changes that). Exit codes: 0 ok, 1 runtime \
failure, 2 bad input."
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

/// Restore the default SIGPIPE action (Rust starts with it ignored), so that output cut short by a
/// closed pipe (`pcielab pmu list | head`) ends the process quietly with status 141, as coreutils
/// do, instead of a panic in the middle of a print.
fn quiet_on_broken_pipe() {
    // signal-hook cannot set SIG_DFL itself; a handler that always runs the default action is
    // the same thing (the process ends by SIGPIPE, not by an exit code that imitates it).
    let always = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    if let Err(e) =
        signal_hook::flag::register_conditional_default(signal_hook::consts::SIGPIPE, always)
    {
        eprintln!("pcielab: cannot restore the default SIGPIPE action: {e}");
    }
}

/// Every subcommand accepts values that start with '-' and look like numbers, so `-I -1` reaches
/// the option's own range check (which states the valid range) instead of clap's "unexpected
/// argument '-1'".
fn with_negative_numbers(cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names
        .iter()
        .fold(cmd.allow_negative_numbers(true), |cmd, name| {
            cmd.mut_subcommand(name, with_negative_numbers)
        })
}

/// The whole command line as clap sees it: what parses arguments, and what `pcielab man` and
/// `pcielab completions` describe, so pages and completions cannot drift from the parser.
pub fn cli_command() -> clap::Command {
    with_negative_numbers(Cli::command())
}

/// Prints what clap stopped at and gives the exit code: help and version on standard output
/// (exit 0, or 1 when that write fails), usage errors on standard error (exit 2) as plain text
/// with the user's own argument's control characters escaped, as every other message.
fn clap_message(e: &clap::Error) -> i32 {
    let styled = e.render();
    if e.use_stderr() {
        // clap's plain text drops every escape sequence, the user's own included; the same
        // refusal rendered without styles keeps the user's for terminal_text to show as `\x1b`.
        let unstyled = cli_command()
            .styles(clap::builder::Styles::plain())
            .try_get_matches()
            .err()
            .filter(|again| again.kind() == e.kind());
        let text = unstyled.map_or_else(
            || styled.to_string(),
            |again| again.render().ansi().to_string(),
        );
        eprint!("{}", pcielab::text::terminal_text(&text));
        return 2;
    }
    // SAFETY: isatty only inspects the descriptor.
    let text = if unsafe { libc::isatty(1) } == 1 {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    match pcielab::input::write_stdout(text.as_bytes()) {
        Ok(()) => 0,
        Err(err) => {
            eprintln!("pcielab: error: {err}");
            err.exit_code()
        }
    }
}

fn main() {
    quiet_on_broken_pipe();
    let parsed = cli_command()
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => std::process::exit(clap_message(&e)),
    };
    let code = match commands::run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "pcielab: error: {}",
                pcielab::text::terminal_text(&e.to_string())
            );
            e.exit_code()
        }
    };
    if code != 0 {
        std::process::exit(code);
    }
}
