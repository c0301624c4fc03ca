//! `pcielab advise`: what to change on a machine, with evidence, the fix and the predicted gain;
//! `--apply`/`--undo` make and revert the runtime fixes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::machine_arg::MachineArg;
use clap::Args as ClapArgs;
use pcielab::advise::apply::{self, ApplyOptions, Change, ChangeReport, Recheck};
use pcielab::advise::facts::read_system;
use pcielab::advise::{self as advice, AdviseOptions, Intent, Mute, Severity};
use pcielab::machine::{Machine, PcieSource};
use pcielab::model::platform::read_platform_file;
use pcielab::text::json_text;
use pcielab::{Error, Result};

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab advise --machine host
  pcielab advise --machine snapshot:fixtures/advise/server/sys/bus/pci --json
  pcielab advise --machine host --intent latency --only aspm-busy-link,cpu-idle-deep
  pcielab advise --machine host --ignore link-downtrained@0000:05:00.0 --fail-on perf-loss
  sudo pcielab advise --machine host --apply aspm-busy-link,cpu-governor --undo-file undo.json
  sudo pcielab advise --undo undo.json
  pcielab advise --machine sim:yitian710 --platform presets/rk3588-evb.toml

Each finding has a stable id (--only, --ignore ID@BDF), a severity (info < risk < perf-loss),
the evidence (file or config-space field as lspci -vvv names it, with its value), the fix (lever,
command, reboot?) and the gain pcielab's model predicts or why it does not. Each check says per
subject a finding, judged clean, or not judged with what the input lacks and how to get it. A snapshot saved as a whole root
(snapshot:ROOT/sys/bus/pci) also yields IRQ, CPU and IOMMU facts. --apply performs runtime
sysfs/procfs writes only, writing the undo file first; config-space writes and kernel
parameters are printed, never made. Exit: 0 (findings or not), 1 runtime failure, 2 bad input,
3 when --fail-on is met. Checks, evidence and limits: docs/advise.md.")]
pub struct Args {
    #[command(flatten)]
    pub machine: MachineArg,
    /// With --machine host: the filesystem root to read and write instead of / (a chroot, a
    /// test tree)
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// A spec or fragment with a [platform] table: read, latency and tag gains are predicted
    /// with it [default on sim: the spec's own [platform], if any]
    #[arg(long, value_name = "SPEC.toml")]
    pub platform: Option<String>,
    /// Print JSON (shape in docs/advise.md)
    #[arg(long)]
    pub json: bool,
    /// Run only these checks (comma-separated ids, e.g. mps-below-path,aspm-busy-link)
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    pub only: Vec<String>,
    /// Mute one finding: ID@BDF (or ID@SUBJECT for machine-wide ones); repeatable
    #[arg(long, value_name = "ID@BDF")]
    pub ignore: Vec<String>,
    /// What the machine is for: throughput, latency, p2p or isolation
    #[arg(long, default_value = "throughput")]
    pub intent: String,
    /// Exit 3 when a finding of this severity or worse remains: info, risk or perf-loss
    #[arg(long, value_name = "SEVERITY")]
    pub fail_on: Option<String>,
    /// Reads of a host's link state before a speed drop is called a downtrain (devices slow
    /// their links when idle)
    #[arg(long, default_value_t = 3, value_parser = super::number_in(1..=20u32))]
    pub link_samples: u32,
    /// Apply the runtime fixes of these findings (ID or ID@BDF, comma-separated)
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "ID,...",
        requires = "undo_file",
        conflicts_with = "undo"
    )]
    pub apply: Vec<String>,
    /// Where --apply writes the previous values, before changing anything
    #[arg(long, value_name = "FILE")]
    pub undo_file: Option<PathBuf>,
    /// Restore the values an undo file holds
    #[arg(long, value_name = "FILE")]
    pub undo: Option<PathBuf>,
    /// With --apply: show each write, change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// With --apply: apply even where irqbalance or tuned would revert the change
    #[arg(long)]
    pub force: bool,
    /// With --apply: seconds to wait before re-reading the links an ASPM change touches (a
    /// link that retrained lower or counted correctable errors rolls the change back)
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub settle: f64,
}

fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub fn run(args: Args) -> Result<()> {
    let named = args.machine.open()?;
    let host = matches!(
        named.pcie_source(),
        Ok(PcieSource::Sysfs { live: true, .. })
    );
    let machine = match &args.root {
        Some(root) if host => Machine::host_at(root),
        Some(_) => {
            return Err(Error::bad_input(format!(
                "--root goes with --machine host, not '{named}'"
            )))
        }
        None => named,
    };
    // Writes to a tree that is not the live root need no privilege: tests and chroots.
    let live = host && machine.system_root().as_deref() == Some(Path::new("/"));
    let may_write = !live || privileged();
    if let Some(file) = &args.undo {
        let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        let changes = apply::undo(file, &root, may_write)?;
        return print_changes("restored", &changes, None, args.json);
    }
    let options = AdviseOptions {
        intent: Intent::parse(&args.intent)?,
        only: args
            .only
            .iter()
            .map(|id| advice::check_id(id, "--only"))
            .collect::<Result<_>>()?,
        ignore: args
            .ignore
            .iter()
            .map(|m| Mute::parse(m))
            .collect::<Result<_>>()?,
        platform: args
            .platform
            .as_deref()
            .map(read_platform_file)
            .transpose()?,
        link_samples: if host { args.link_samples } else { 1 },
        sample_interval: Duration::from_millis(200),
    };
    let fail_on = args.fail_on.as_deref().map(Severity::parse).transpose()?;
    let found = advice::advise(&machine, &options)?;
    if !args.apply.is_empty() {
        let chosen = apply::select(&found, &args.apply)?;
        let root = machine.system_root().ok_or_else(|| {
            Error::bad_input(format!(
                "--apply needs a machine with kernel files to write: --machine host (not {})",
                machine.selector()
            ))
        })?;
        let system = read_system(&root);
        let undo_file = args
            .undo_file
            .as_deref()
            .expect("clap requires --undo-file with --apply");
        let changes = apply::apply(
            &chosen,
            Some(&system),
            undo_file,
            &ApplyOptions {
                root,
                dry_run: args.dry_run,
                force: args.force,
                privileged: may_write,
                settle: Duration::from_secs_f64(pcielab::input::duration_s(
                    "--settle",
                    args.settle,
                    false,
                )?),
            },
        )?;
        // The whole advice again on the machine as it reads now, so the user sees which
        // findings the change cleared and whether it brought any.
        let recheck = if args.dry_run {
            None
        } else {
            let reread = Machine::open(machine.selector())?;
            Some(apply::recheck(&found, &advice::advise(&reread, &options)?))
        };
        return print_changes(
            if args.dry_run { "would write" } else { "wrote" },
            &changes,
            recheck,
            args.json,
        );
    }
    let text = if args.json {
        json_text("advise", &found)?
    } else {
        advice::to_text(&found)
    };
    out!("{text}")?;
    if let (Some(threshold), Some(worst)) = (fail_on, found.worst()) {
        if worst >= threshold {
            note!(
                "pcielab: advise: a {} finding meets --fail-on {}",
                worst.name(),
                threshold.name()
            );
            std::process::exit(3);
        }
    }
    Ok(())
}

fn print_changes(
    verb: &str,
    changes: &[Change],
    recheck: Option<Recheck>,
    json: bool,
) -> Result<()> {
    if json {
        let report = ChangeReport {
            action: verb.to_string(),
            changes: changes.to_vec(),
            recheck,
        };
        out!("{}", json_text("advise-apply", &report)?)?;
    } else {
        for c in changes {
            outln!("{verb} /{}: {} -> {}", c.file, c.previous, c.value)?;
        }
        if let Some(recheck) = recheck {
            out!("{}", recheck.to_text())?;
        }
    }
    Ok(())
}
