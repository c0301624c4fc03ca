//! One interface over every resctrl backend: read the whole state, perform one kernel operation
//! (mkdir, rmdir, a write to schemata/tasks/cpus_list/mode), read the monitors, let time pass.
//! [`Op`] is the operation as data, so `apply` can plan, check a plan against the kernel model
//! and undo it; `machine::Machine::qos` opens the backend of a machine.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::resctrl::{GroupRef, Resctrl};
use super::schemata::{Errno, Rejection};
use crate::error::{Error, Result};
use crate::linux::cpuset::CpuSet;

/// One change to a resctrl mount, as the kernel sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// Make a group (`mkdir`).
    Mkdir {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
    },
    /// Remove a group (`rmdir`).
    Rmdir {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
    },
    /// Write a group's `schemata`.
    Schemata {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// The lines written to its `schemata`.
        text: String,
    },
    /// Move tasks into a group.
    Tasks {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// The pids written to its `tasks`, one write each.
        text: String,
    },
    /// Give CPUs to a group.
    Cpus {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// The CPU list written to its `cpus_list`.
        cpus_list: String,
    },
    /// Set a group's mode.
    Mode {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// The mode written to its `mode` (`shareable`, `exclusive`, ...).
        mode: String,
    },
}

impl Op {
    pub(crate) fn group(&self) -> &str {
        match self {
            Op::Mkdir { group }
            | Op::Rmdir { group }
            | Op::Schemata { group, .. }
            | Op::Tasks { group, .. }
            | Op::Cpus { group, .. }
            | Op::Mode { group, .. } => group,
        }
    }

    fn group_ref(&self) -> Result<GroupRef> {
        GroupRef::parse(self.group()).ok_or_else(|| {
            Error::bad_input(format!(
                "bad group '{}': expected /, NAME, NAME/MON or mon_groups/MON",
                self.group()
            ))
        })
    }

    /// The file or directory the operation touches, relative to the mount.
    pub(crate) fn target(&self) -> Result<String> {
        let dir = self.group_ref()?.path();
        let join = |f: &str| {
            if dir.is_empty() {
                f.to_string()
            } else {
                format!("{dir}/{f}")
            }
        };
        Ok(match self {
            Op::Mkdir { .. } | Op::Rmdir { .. } => dir,
            Op::Schemata { .. } => join("schemata"),
            Op::Tasks { .. } => join("tasks"),
            Op::Cpus { .. } => join("cpus_list"),
            Op::Mode { .. } => join("mode"),
        })
    }

    /// How a person would do it by hand.
    pub fn describe(&self) -> String {
        let target = self.target().unwrap_or_default();
        match self {
            Op::Mkdir { .. } => format!("mkdir {target}"),
            Op::Rmdir { .. } => format!("rmdir {target}"),
            Op::Schemata { text, .. } => {
                format!("printf '{}' > {target}", text.replace('\n', "\\n"))
            }
            Op::Tasks { text, .. } => format!("echo {text} > {target}"),
            Op::Cpus { cpus_list, .. } => format!("echo {cpus_list} > {target}"),
            Op::Mode { mode, .. } => format!("echo {mode} > {target}"),
        }
    }

    /// Run the operation on the kernel model (the simulated kernel, or a copy of a host's state).
    pub(crate) fn apply_to(&self, rs: &mut Resctrl) -> Result<()> {
        let group = self.group_ref()?;
        let outcome = match self {
            Op::Mkdir { .. } => rs.mkdir(&group),
            Op::Rmdir { .. } => rs.rmdir(&group),
            Op::Schemata { text, .. } => rs.write_schemata(&group, text),
            Op::Tasks { text, .. } => rs.write_tasks(&group, text),
            Op::Cpus { cpus_list, .. } => match CpuSet::parse_list(cpus_list) {
                Some(set) => rs.write_cpus(&group, &set),
                None => Err(Rejection::new(Errno::EINVAL, "Bad CPU list/mask")),
            },
            Op::Mode { mode, .. } => rs.write_mode(&group, mode),
        };
        outcome.map_err(|rej| refused(self, &rej))
    }
}

/// The error for an operation the kernel (or its model) refused, quoting `last_cmd_status`.
pub(crate) fn refused(op: &Op, rej: &Rejection) -> Error {
    let msg = format!("{}: resctrl refused it: {rej}", op.describe());
    match rej.errno {
        Errno::ENOSPC | Errno::EBUSY => Error::runtime(msg),
        _ => Error::bad_input(msg),
    }
}

/// A control or monitor group's monitor readings in one domain. A control group's values
/// include its monitor groups, as its `mon_data` does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MonReading {
    /// The group's name (`/` for the root).
    pub group: String,
    /// The L3 or memory domain (cache id).
    pub domain: u32,
    /// Bytes of L3 the group occupies, where the machine monitors it.
    pub llc_occupancy: Option<u64>,
    /// Memory bandwidth bytes counted, all nodes, where monitored.
    pub mbm_total_bytes: Option<u64>,
    /// Memory bandwidth bytes counted to the local node, where monitored.
    pub mbm_local_bytes: Option<u64>,
}

/// A resctrl backend.
pub trait QosBackend {
    /// `host` or `sim:NAME`.
    fn name(&self) -> String;
    /// The whole state, as a fresh read.
    fn read(&mut self) -> Result<Resctrl>;
    /// Perform one operation. Checked against the kernel's rules first on every backend.
    fn perform(&mut self, op: &Op) -> Result<()>;
    /// Every group's `mon_data` now.
    fn mon_data(&mut self) -> Result<Vec<MonReading>>;
    /// Let `interval` pass (a host sleeps; a simulated machine runs its model).
    fn wait(&mut self, interval: Duration) -> Result<()>;
    /// Whether `count` waits of `interval` are a run this backend does: at most a week in all
    /// (`crate::input::MAX_DURATION_S`); a simulated machine also bounds its model steps.
    fn check_waits(&self, interval: Duration, count: u32) -> Result<()> {
        let total_s = interval.as_secs_f64() * f64::from(count);
        crate::input::duration_s(
            &format!("{count} intervals of {} ms", interval.as_millis()),
            total_s,
            true,
        )?;
        Ok(())
    }
    /// Make changes durable (a simulated machine writes its state file).
    fn save(&mut self) -> Result<()>;
    /// A request was refused before it reached the kernel: a simulated kernel records the
    /// refusal's `last_cmd_status` as a real one would have (a host's kernel saw nothing).
    fn record_refusal(&mut self, _last_cmd_status: &str) -> Result<()> {
        Ok(())
    }
}

/// How to open a machine's resctrl: the overrides `qos` commands accept
/// (`machine::Machine::qos` picks the backend).
#[derive(Debug, Clone, Default)]
pub struct QosOptions {
    /// Host: the resctrl mount (default `<root>/sys/fs/resctrl`).
    pub resctrl_dir: Option<PathBuf>,
    /// Sim: the state file that carries the machine between invocations.
    pub state: Option<PathBuf>,
    /// Sim: mount with CDP (only when the state file is created).
    pub cdp: bool,
    /// Host: check each request against the kernel model before writing (off: the kernel decides).
    pub precheck: bool,
}
