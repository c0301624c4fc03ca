//! `pcielab qos`: show, create, set, assign, delete, apply and monitor resctrl groups on a host
//! mount or a simulated MPAM/RDT machine. Argument wiring only; the rules live in
//! `pcielab::qos`.

use crate::machine_arg::MachineArg;
use std::path::PathBuf;
use std::time::Duration;

use super::number_in;
use super::output::{Document, Form, JsonForm, Output, Terminal};
use clap::{Args as ClapArgs, Subcommand};
use pcielab::qos::monitor;
use pcielab::qos::Request;
use pcielab::qos::{apply_file, perform_all, ApplyReport};
use pcielab::qos::{monitor_text, show, MonitorDocument, ShowView};
use pcielab::qos::{QosBackend, QosOptions};
use pcielab::Result;

const EXAMPLES: &str = "Examples:
  pcielab qos show --machine sim:mpam-seed
  pcielab qos create p1 --machine sim:mpam-seed --state /tmp/qos.json --schemata 'L3:0=7ff0;1=7ff0'
  pcielab qos set p1 --machine sim:mpam-seed --state /tmp/qos.json --schemata 'MB:0=30'
  pcielab qos assign p1 --machine sim:mpam-seed --state /tmp/qos.json --tasks 1000 --cpus 0-3
  pcielab qos apply partitions.yaml --machine sim:mpam-seed --state /tmp/qos.json --dry-run
  pcielab qos monitor --machine sim:mpam-seed --state /tmp/qos.json -I 1000
  sudo pcielab qos show --machine host
Simulated machines keep their state only with --state FILE (created on first use).";

#[derive(ClapArgs)]
#[command(about = "resctrl: cache and memory-bandwidth partitioning (Intel RDT, Arm MPAM)", after_help = EXAMPLES)]
pub struct Args {
    #[command(subcommand)]
    command: QosCommand,
}

#[derive(ClapArgs, Clone)]
struct ResctrlMachineArgs {
    #[command(flatten)]
    machine: MachineArg,
    /// Host: the resctrl mount to use instead of /sys/fs/resctrl
    #[arg(long, value_name = "DIR")]
    resctrl: Option<PathBuf>,
    /// Sim: state file carrying the machine between invocations (JSON; created if missing)
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Sim: mount with CDP (L3CODE/L3DATA) when the state is created
    #[arg(long)]
    cdp: bool,
    /// Host: skip pcielab's check of each request against the kernel's rules and let the kernel
    /// decide (for kernels whose rules differ from the model's); its info/last_cmd_status is quoted
    #[arg(long)]
    no_precheck: bool,
}

#[derive(Subcommand)]
enum QosCommand {
    /// Capabilities (info/) and every group with schemata, tasks, CPUs and monitor groups
    #[command(after_help = EXAMPLES)]
    Show {
        #[command(flatten)]
        machine: ResctrlMachineArgs,
        /// JSON output (shape in docs/qos.md)
        #[arg(long)]
        json: bool,
    },
    /// Create a control group (NAME) or a monitor group (NAME/MON), then set it up
    #[command(after_help = EXAMPLES)]
    Create {
        /// NAME (control group), NAME/MON (monitor group) or mon_groups/MON (under the root)
        group: String,
        #[command(flatten)]
        machine: ResctrlMachineArgs,
        #[command(flatten)]
        settings: GroupSettings,
    },
    /// Change a group's schemata and/or mode
    #[command(after_help = EXAMPLES)]
    Set {
        /// /, NAME, NAME/MON or mon_groups/MON
        group: String,
        #[command(flatten)]
        machine: ResctrlMachineArgs,
        #[command(flatten)]
        settings: GroupSettings,
    },
    /// Move tasks (pids) and/or CPUs into a group
    #[command(after_help = EXAMPLES)]
    Assign {
        /// /, NAME, NAME/MON or mon_groups/MON
        group: String,
        #[command(flatten)]
        machine: ResctrlMachineArgs,
        /// Comma-separated pids
        #[arg(long)]
        tasks: Option<String>,
        /// CPU list, e.g. 0-3,8
        #[arg(long)]
        cpus: Option<String>,
    },
    /// Remove a group (its tasks and CPUs return to the parent)
    #[command(after_help = EXAMPLES)]
    Delete {
        /// /, NAME, NAME/MON or mon_groups/MON
        group: String,
        #[command(flatten)]
        machine: ResctrlMachineArgs,
    },
    /// Make the machine match a desired-state file (YAML or TOML): plan, check, apply, verify,
    /// roll back on failure
    #[command(after_help = EXAMPLES)]
    Apply {
        /// Desired-state file: .toml, anything else is read as YAML
        file: PathBuf,
        #[command(flatten)]
        machine: ResctrlMachineArgs,
        /// Print the plan and check it against the kernel's rules; change nothing
        #[arg(long)]
        dry_run: bool,
        /// JSON output (shape in docs/qos.md)
        #[arg(long)]
        json: bool,
    },
    /// L3 occupancy (KiB) and memory bandwidth (MB/s) per group and domain
    #[command(after_help = EXAMPLES)]
    Monitor {
        #[command(flatten)]
        machine: ResctrlMachineArgs,
        /// Interval in milliseconds (1 ms to 1 hour)
        #[arg(short = 'I', long = "interval", default_value_t = 1000, value_parser = number_in(1..=3_600_000u64))]
        interval_ms: u64,
        /// Number of intervals to print (1 to 1000000)
        #[arg(long, default_value_t = 1, value_parser = number_in(1..=1_000_000u32))]
        count: u32,
        /// JSON output (shape in docs/qos.md)
        #[arg(long)]
        json: bool,
    },
}

/// Opens the machine a `qos` command works on. `changes`: the command writes to it, so a
/// simulated machine without `--state` (whose change is lost when pcielab exits) is worth a note;
/// reading one (`show`, `monitor`, `apply --dry-run`) is not.
fn open(m: &ResctrlMachineArgs, changes: bool) -> Result<Box<dyn QosBackend>> {
    let machine = m.machine.open()?;
    let backend = machine.qos(&QosOptions {
        resctrl_dir: m.resctrl.clone(),
        state: m.state.clone(),
        cdp: m.cdp,
        precheck: !m.no_precheck,
    })?;
    if changes && !machine.keeps_qos_changes() && m.state.is_none() {
        note!(
            "pcielab: note: no --state: this simulated machine starts fresh and the change is not \
             kept (give --state FILE to keep it)"
        );
    }
    Ok(backend)
}

/// What `create` and `set` may change on a group.
#[derive(ClapArgs)]
struct GroupSettings {
    /// Schemata lines, e.g. 'L3:0=f;1=f' (repeat or separate lines with '\n')
    #[arg(long)]
    schemata: Vec<String>,
    /// shareable or exclusive
    #[arg(long)]
    mode: Option<String>,
}

impl From<GroupSettings> for pcielab::qos::GroupSettings {
    fn from(s: GroupSettings) -> Self {
        pcielab::qos::GroupSettings {
            schemata: s.schemata,
            mode: s.mode,
        }
    }
}

/// Makes `request` on the machine `m` names, all or nothing (`qos::perform_all`), each
/// step printed as it is made.
fn perform(m: &ResctrlMachineArgs, request: Request, out: &mut Terminal) -> Result<Output> {
    let mut b = open(m, true)?;
    let ops = request.ops()?;
    // The steps go on when standard output fails (all or nothing); the failure is reported after.
    let mut written = Ok(());
    perform_all(b.as_mut(), &ops, !m.no_precheck, |op| {
        if written.is_ok() {
            written = out.text(&format!("{}\n", op.describe()));
        }
    })?;
    written.map(|()| Output::done())
}

/// `qos show`: capabilities and groups.
impl Document for ShowView {
    fn kind(&self) -> &'static str {
        "qos-show"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.text())
    }
}

/// `qos apply`: the plan and what became of it.
impl Document for ApplyReport {
    fn kind(&self) -> &'static str {
        "qos-apply"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.to_text())
    }
}

/// `qos monitor --json`: every interval, printed once the last has been read.
impl Document for MonitorDocument {
    fn kind(&self) -> &'static str {
        "qos-monitor"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        for rows in &self.intervals {
            out.text(&monitor_text(rows))?;
        }
        Ok(())
    }
}

/// Runs a `qos` command; `create`, `set`, `assign`, `delete` and a text `monitor` print through
/// `out` as they go.
pub fn run(args: Args, out: &mut Terminal) -> Result<Output> {
    match args.command {
        QosCommand::Show { machine, json } => {
            let mut b = open(&machine, false)?;
            let shown = show(&b.name(), &b.read()?);
            Ok(Output::new(shown, Form::json_if(json)))
        }
        QosCommand::Create {
            group,
            machine,
            settings,
        } => {
            let settings = settings.into();
            perform(&machine, Request::Create { group, settings }, out)
        }
        QosCommand::Set {
            group,
            machine,
            settings,
        } => perform(&machine, Request::set(group, settings.into())?, out),
        QosCommand::Assign {
            group,
            machine,
            tasks,
            cpus,
        } => perform(&machine, Request::assign(group, tasks, cpus)?, out),
        QosCommand::Delete { group, machine } => perform(&machine, Request::Delete { group }, out),
        QosCommand::Apply {
            file,
            machine,
            dry_run,
            json,
        } => {
            let mut b = open(&machine, !dry_run)?;
            let report = apply_file(b.as_mut(), &file, dry_run)?;
            Ok(Output::new(report, Form::json_if(json)))
        }
        QosCommand::Monitor {
            machine,
            interval_ms,
            count,
            json,
        } => {
            let mut b = open(&machine, false)?;
            let form = Form::json_if(json);
            // Text is printed interval by interval; the JSON document holds them all.
            let mut intervals = Vec::new();
            monitor(
                b.as_mut(),
                Duration::from_millis(interval_ms),
                count,
                |rows| match form {
                    Form::Text => out.text(&monitor_text(&rows)),
                    Form::Json => {
                        intervals.push(rows);
                        Ok(())
                    }
                },
            )?;
            Ok(match form {
                Form::Text => Output::done(),
                Form::Json => Output::new(MonitorDocument { intervals }, form),
            })
        }
    }
}
