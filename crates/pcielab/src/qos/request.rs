//! One `qos create`, `set`, `assign` or `delete` as the kernel steps it takes, with the checks
//! the request itself must pass (something to change, a CPU list the kernel reads) before any
//! step is tried. [`super::apply::perform_all`] then makes the steps all or nothing.

use super::backend::Op;
use crate::error::{Error, Result};
use crate::linux::cpuset::{CpuSet, MAX_CPUS};

/// What `create` and `set` may change on a group.
#[derive(Debug, Clone, Default)]
pub struct GroupSettings {
    /// Schemata lines as given, e.g. `L3:0=f;1=f`; a line may hold several separated by a
    /// literal `\n`.
    pub schemata: Vec<String>,
    /// `shareable` or `exclusive`.
    pub mode: Option<String>,
}

impl GroupSettings {
    fn is_empty(&self) -> bool {
        self.schemata.is_empty() && self.mode.is_none()
    }

    /// The steps: write the schemata lines given, then the mode given.
    fn ops(self, group: &str) -> Vec<Op> {
        let mut ops = Vec::new();
        if !self.schemata.is_empty() {
            ops.push(Op::Schemata {
                group: group.to_string(),
                text: schemata_text(&self.schemata),
            });
        }
        if let Some(mode) = self.mode {
            ops.push(Op::Mode {
                group: group.to_string(),
                mode,
            });
        }
        ops
    }
}

/// The schemata file's text: each line given (a literal `\n` splits one), newline-ended.
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

/// One request on a group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
#[derive(Debug, Clone)]
pub enum Request {
    /// Make the group, then set it up.
    Create {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// What to set once it exists.
        settings: GroupSettings,
    },
    /// Change a group's schemata and/or mode.
    Set {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// What to change.
        settings: GroupSettings,
    },
    /// Move CPUs (a list like `0-3,8`) and/or tasks (comma-separated pids) into a group.
    Assign {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
        /// Comma-separated pids to move in.
        tasks: Option<String>,
        /// A CPU list (`0-3,8`) to move in.
        cpus: Option<String>,
    },
    /// Remove a group; its tasks and CPUs return to the parent.
    Delete {
        /// The group (`/`, `NAME`, `NAME/MON` or `mon_groups/MON`).
        group: String,
    },
}

impl Request {
    /// A `set`, refused when it changes nothing.
    pub fn set(group: String, settings: GroupSettings) -> Result<Request> {
        if settings.is_empty() {
            return Err(Error::bad_input("qos set: give --schemata and/or --mode"));
        }
        Ok(Request::Set { group, settings })
    }

    /// An `assign`, refused when it moves nothing.
    pub fn assign(group: String, tasks: Option<String>, cpus: Option<String>) -> Result<Request> {
        if tasks.is_none() && cpus.is_none() {
            return Err(Error::bad_input("qos assign: give --tasks and/or --cpus"));
        }
        Ok(Request::Assign { group, tasks, cpus })
    }

    /// The steps, in the order they are made; a CPU list the kernel would not read is bad input.
    pub fn ops(self) -> Result<Vec<Op>> {
        Ok(match self {
            Request::Create { group, settings } => {
                let mut ops = vec![Op::Mkdir {
                    group: group.clone(),
                }];
                ops.extend(settings.ops(&group));
                ops
            }
            Request::Set { group, settings } => settings.ops(&group),
            Request::Assign { group, tasks, cpus } => {
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
                ops
            }
            Request::Delete { group } => vec![Op::Rmdir { group }],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_makes_the_group_then_writes_schemata_then_mode() {
        let ops = Request::Create {
            group: "p1".into(),
            settings: GroupSettings {
                schemata: vec!["L3:0=f\\nMB:0=30".into()],
                mode: Some("exclusive".into()),
            },
        }
        .ops()
        .unwrap();
        assert_eq!(
            ops,
            vec![
                Op::Mkdir { group: "p1".into() },
                Op::Schemata {
                    group: "p1".into(),
                    text: "L3:0=f\nMB:0=30\n".into()
                },
                Op::Mode {
                    group: "p1".into(),
                    mode: "exclusive".into()
                },
            ]
        );
    }

    #[test]
    fn requests_that_change_nothing_or_name_no_cpu_list_are_bad_input() {
        let set = Request::set("p1".into(), GroupSettings::default()).unwrap_err();
        assert!(set.message().contains("give --schemata and/or --mode"));
        let assign = Request::assign("p1".into(), None, None).unwrap_err();
        assert!(assign.message().contains("give --tasks and/or --cpus"));
        let cpus = Request::assign("p1".into(), None, Some("0-99999".into()))
            .unwrap()
            .ops()
            .unwrap_err();
        assert!(cpus.message().contains("--cpus '0-99999'"), "{cpus}");
    }
}
