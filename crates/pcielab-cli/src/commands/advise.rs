//! `pcielab advise`: what to change on a machine, with evidence, the fix and the predicted gain;
//! `--apply`/`--undo` make and revert the runtime fixes.

use std::path::PathBuf;
use std::time::Duration;

use super::output::{Document, Form, JsonForm, Output, Terminal};
use crate::machine_arg::MachineArg;
use clap::Args as ClapArgs;
use pcielab::advise::{self as advice, Advice, AdviseOptions, Intent, Mute, Severity};
use pcielab::advise::{ApplyRequest, ChangeReport, Target};
use pcielab::machine::read_platform_file;
use pcielab::{Error, Result};

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab advise --machine host
  pcielab advise --machine snapshot:fixtures/advise/server/sys/bus/pci --json
  pcielab advise --machine host --intent latency --only aspm-busy-link,cpu-idle-deep
  pcielab advise --machine host --ignore link-downtrained@0000:05:00.0 --fail-on perf-loss
  sudo pcielab advise --machine host --apply aspm-busy-link,cpu-governor --undo-file undo.json
  sudo pcielab advise --machine host --undo undo.json
  pcielab advise --machine sim:yitian710 --platform presets/rk3588-evb.toml

Each finding has a stable id (--only, --ignore ID@BDF), a severity (info < risk < perf-loss),
the evidence (file or config-space field as lspci -vvv names it, with its value), the fix (lever,
command, reboot?) and the gain pcielab's model predicts or why it does not. Each check says per
subject a finding, judged clean, or not judged with what the input lacks and how to get it. A snapshot saved as a whole root
(snapshot:ROOT/sys/bus/pci) also yields IRQ, CPU and IOMMU facts. --apply performs runtime
sysfs/procfs writes only, each check only its own files, resolved inside the machine's root
and bounded by what the file accepts; config-space writes and kernel parameters are printed,
never made. The undo file is a journal of one apply, created before the first write and never
replacing anything: name a new file for each --apply. --undo reads it only from a regular file
you own that group and others cannot write, acts only on the machine --machine names (its root
must be the one recorded), checks every entry first (the file its check may write, the value
the file accepts, the file still holding what --apply wrote, unless --force) and writes
nothing if any entry fails. Exit: 0 (findings or not), 1 runtime failure, 2 bad input,
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
    /// A new file where --apply records, before changing anything, each change (check, file,
    /// value before, value written); an existing file is refused, never replaced
    #[arg(long, value_name = "FILE")]
    pub undo_file: Option<PathBuf>,
    /// Restore what an undo file records, on the machine --machine names (required); refused
    /// whole, before any write, if an entry names a file its check does not write or a file
    /// no longer holds what --apply wrote
    #[arg(long, value_name = "FILE")]
    pub undo: Option<PathBuf>,
    /// With --apply: show each write, change nothing
    #[arg(long)]
    pub dry_run: bool,
    /// With --apply: apply even where irqbalance or tuned would revert the change; with --undo:
    /// restore even files changed since the apply
    #[arg(long)]
    pub force: bool,
    /// With --apply: seconds to wait before re-reading the links an ASPM change touches (a
    /// link that retrained lower or counted correctable errors rolls the change back)
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub settle: f64,
}

pub fn run(args: Args) -> Result<Output> {
    let writes = args.undo.is_some() || !args.apply.is_empty();
    let target = Target::open(args.machine.open()?, args.root.as_deref(), writes)?;
    let form = Form::json_if(args.json);
    if let Some(file) = &args.undo {
        // The machine to restore is the one the user names, never a default: the live / only
        // with `--machine host` (and root), a snapshot only under its own root.
        if !args.machine.is_given() {
            return Err(Error::bad_input(
                "--undo: name the machine to restore with --machine (host for this machine's /, with --root DIR for a tree)",
            ));
        }
        return Ok(Output::new(target.undo(file, args.force)?, form));
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
        link_samples: target.link_samples(args.link_samples),
        sample_interval: Duration::from_millis(200),
    };
    let fail_on = args.fail_on.as_deref().map(Severity::parse).transpose()?;
    let found = advice::advise(target.machine(), &options)?;
    for warning in options
        .ignore
        .iter()
        .filter_map(|m| m.unmatched_warning(&found))
    {
        note!("pcielab: advise: warning: {warning}");
    }
    if !args.apply.is_empty() {
        let request = ApplyRequest {
            wanted: &args.apply,
            undo_file: args
                .undo_file
                .as_deref()
                .expect("clap requires --undo-file with --apply"),
            dry_run: args.dry_run,
            force: args.force,
            settle_s: args.settle,
        };
        return Ok(Output::new(target.apply(&found, &options, &request)?, form));
    }
    Ok(Output::new(Advised { found, fail_on }, form))
}

/// The advice, and the severity `--fail-on` names.
struct Advised {
    found: Advice,
    fail_on: Option<Severity>,
}

impl Document for Advised {
    fn kind(&self) -> &'static str {
        "advise"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.found
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&advice::to_text(&self.found))
    }

    /// 3 when a finding meets `--fail-on`.
    fn end(&self) -> Result<i32> {
        if let (Some(threshold), Some(worst)) = (self.fail_on, self.found.worst()) {
            if worst >= threshold {
                note!(
                    "pcielab: advise: a {} finding meets --fail-on {}",
                    worst.name(),
                    threshold.name()
                );
                return Ok(3);
            }
        }
        Ok(0)
    }
}

/// What `--apply` or `--undo` wrote (or would write).
impl Document for ChangeReport {
    fn kind(&self) -> &'static str {
        "advise-apply"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.to_text())
    }
}
