//! `pcielab qos`: show, create, set, assign, delete, apply and monitor resctrl groups on a host
//! mount or a simulated MPAM/RDT machine. Argument wiring only; the rules live in
//! `pcielab::qos`.

use crate::machine_arg::MachineArg;
use std::path::PathBuf;
use std::time::Duration;

use super::number_in;
use clap::{Args as ClapArgs, Subcommand};
use pcielab::linux::cpuset::{CpuSet, MAX_CPUS};
use pcielab::qos::apply;
use pcielab::qos::backend::{Op, QosBackend, QosOptions};
use pcielab::qos::view;
use pcielab::text::json_text;
use pcielab::{Error, Result};

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

fn schemata_text(lines: &[String]) -> String {
    let mut text = lines
        .iter()
        .map(|l| l.replace("\\n", "\n"))
        .collect::<Vec<_>>()
        .join("\n");
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
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

impl GroupSettings {
    fn is_empty(&self) -> bool {
        self.schemata.is_empty() && self.mode.is_none()
    }

    /// The steps: write the schemata lines given, then the mode given.
    fn ops(self, group: String) -> Vec<Op> {
        let mut ops = Vec::new();
        if !self.schemata.is_empty() {
            ops.push(Op::Schemata {
                group: group.clone(),
                text: schemata_text(&self.schemata),
            });
        }
        if let Some(mode) = self.mode {
            ops.push(Op::Mode { group, mode });
        }
        ops
    }
}

/// One request's steps, all or nothing (`qos::apply::perform_all`), each printed as done.
fn perform_all(b: &mut dyn QosBackend, ops: &[Op], precheck: bool) -> Result<()> {
    // The steps go on when standard output fails (all or nothing); the failure is reported after.
    let mut written = Ok(());
    apply::perform_all(b, ops, precheck, |op| {
        if written.is_ok() {
            written = outln!("{}", op.describe());
        }
    })?;
    written
}

fn json<T: serde::Serialize>(kind: &str, value: &T) -> Result<()> {
    out!("{}", json_text(kind, value)?)?;
    Ok(())
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        QosCommand::Show {
            machine,
            json: as_json,
        } => {
            let mut b = open(&machine, false)?;
            let v = view::show(&b.name(), &b.read()?);
            if as_json {
                json("qos-show", &v)
            } else {
                out!("{}", v.text())?;
                Ok(())
            }
        }
        QosCommand::Create {
            group,
            machine,
            settings,
        } => {
            let mut b = open(&machine, true)?;
            let mut ops = vec![Op::Mkdir {
                group: group.clone(),
            }];
            ops.extend(settings.ops(group));
            perform_all(b.as_mut(), &ops, !machine.no_precheck)
        }
        QosCommand::Set {
            group,
            machine,
            settings,
        } => {
            if settings.is_empty() {
                return Err(Error::bad_input("qos set: give --schemata and/or --mode"));
            }
            let mut b = open(&machine, true)?;
            perform_all(b.as_mut(), &settings.ops(group), !machine.no_precheck)
        }
        QosCommand::Assign {
            group,
            machine,
            tasks,
            cpus,
        } => {
            if tasks.is_none() && cpus.is_none() {
                return Err(Error::bad_input("qos assign: give --tasks and/or --cpus"));
            }
            let mut b = open(&machine, true)?;
            let mut ops = Vec::new();
            if let Some(cpus_list) = cpus {
                if CpuSet::parse_list(&cpus_list).is_none() {
                    return Err(Error::bad_input(format!(
                        "--cpus '{cpus_list}': expected a CPU list like 0-3,8 with CPUs in 0..={}",
                        MAX_CPUS - 1
                    )));
                }
                ops.push(Op::Cpus {
                    group: group.clone(),
                    cpus_list,
                });
            }
            if let Some(text) = tasks {
                ops.push(Op::Tasks { group, text });
            }
            perform_all(b.as_mut(), &ops, !machine.no_precheck)
        }
        QosCommand::Delete { group, machine } => {
            let mut b = open(&machine, true)?;
            perform_all(b.as_mut(), &[Op::Rmdir { group }], !machine.no_precheck)
        }
        QosCommand::Apply {
            file,
            machine,
            dry_run,
            json: as_json,
        } => {
            let mut b = open(&machine, !dry_run)?;
            let text = pcielab::input::read_input_file(&file, "desired-state file")?;
            let info = b.read()?.info;
            let desired = apply::parse_desired(&text, &file.display().to_string(), &info)?;
            let report = apply::apply(b.as_mut(), &desired, dry_run)?;
            if as_json {
                return json("qos-apply", &report);
            }
            for (i, p) in report.plan.iter().enumerate() {
                outln!("{:>3}. {}", i + 1, p.shell)?;
            }
            outln!(
                "{}",
                match (report.dry_run, report.plan.len()) {
                    (_, 0) => "nothing to do: the machine already matches".to_string(),
                    (true, n) => format!(
                        "dry run: {n} steps checked against the kernel's rules, nothing changed"
                    ),
                    (false, n) => format!("applied {n} steps and verified the read-back"),
                }
            )?;
            Ok(())
        }
        QosCommand::Monitor {
            machine,
            interval_ms,
            count,
            json: as_json,
        } => {
            if interval_ms == 0 {
                return Err(Error::bad_input("-I must be at least 1 ms"));
            }
            let mut b = open(&machine, false)?;
            b.check_waits(Duration::from_millis(interval_ms), count)?;
            let mut all = Vec::new();
            for _ in 0..count.max(1) {
                let before = b.mon_data()?;
                b.wait(Duration::from_millis(interval_ms))?;
                let after = b.mon_data()?;
                let rows = view::monitor_rows(&before, &after, interval_ms as f64 / 1000.0);
                if as_json {
                    all.push(rows);
                } else {
                    out!("{}", view::monitor_text(&rows))?;
                }
            }
            b.save()?;
            if as_json {
                json("qos-monitor", &view::MonitorDocument { intervals: all })?;
            }
            Ok(())
        }
    }
}
