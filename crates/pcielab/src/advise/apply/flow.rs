//! The whole of `advise --apply` and `--undo` on a machine as the user names it: which tree is
//! written (`--root` stands in for a host's `/`), whether writing it takes root, the undo
//! journal, and after an apply the advice run again on the machine as it reads now, so the user
//! sees which findings the change cleared and whether it brought any.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{apply, recheck, undo, ApplyOptions, ChangeReport, UndoOptions};
use crate::advise::facts::read_system;
use crate::advise::{advise, Advice, AdviseOptions};
use crate::error::{Error, Result};
use crate::machine::Machine;

/// The machine advice reads and `--apply`/`--undo` write.
pub struct Target {
    machine: Machine,
    /// It reads the running kernel (`--machine host`, with or without `--root`).
    host: bool,
    /// Its files are this machine's own `/` (compared resolved, so a `--root` that links to
    /// `/` is the live root too).
    live: bool,
}

/// What `--apply` asks for.
pub struct ApplyRequest<'a> {
    /// The findings to fix: `ID` or `ID@BDF` (`ID@SUBJECT`).
    pub wanted: &'a [String],
    /// The new file the undo journal is written to.
    pub undo_file: &'a Path,
    /// Show each write, change nothing.
    pub dry_run: bool,
    /// Apply even where irqbalance or tuned would revert the change.
    pub force: bool,
    /// `--settle`: seconds to wait before re-reading the links an ASPM change touches.
    pub settle_s: f64,
}

fn privileged() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl Target {
    /// `named`, or with `root` the host's files under `root` instead of `/` (only `--machine
    /// host` takes a root). `writes`: `--apply` or `--undo` is asked for, which a machine that
    /// reads this machine's own `/` refuses unless it is `--machine host`.
    pub fn open(named: Machine, root: Option<&Path>, writes: bool) -> Result<Target> {
        let host = named.reads_the_running_kernel();
        let machine = match root {
            Some(root) if host => Machine::host_at(root),
            Some(_) => {
                return Err(Error::bad_input(format!(
                    "--root goes with --machine host, not '{named}'"
                )))
            }
            None => named,
        };
        let live = machine
            .system_root()
            .and_then(|r| std::fs::canonicalize(r).ok())
            .is_some_and(|r| r == Path::new("/"));
        if live && !host && writes {
            return Err(Error::bad_input(format!(
                "--machine {} reads this machine's own /: changing it takes --machine host (and root)",
                machine.selector()
            )));
        }
        Ok(Target {
            machine,
            host,
            live,
        })
    }

    /// The machine to advise on.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The reads of each link's state to make before a speed drop is called a downtrain:
    /// `asked` on a running kernel, whose idle devices slow their links; one elsewhere, where
    /// the state is a record that does not change.
    pub fn link_samples(&self, asked: u32) -> u32 {
        if self.host {
            asked
        } else {
            1
        }
    }

    /// Writes to a tree that is not the live root need no privilege: tests and chroots.
    fn may_write(&self) -> bool {
        !self.live || privileged()
    }

    /// The root whose kernel files `flag` writes.
    fn kernel_root(&self, flag: &str) -> Result<PathBuf> {
        self.machine.system_root().ok_or_else(|| {
            Error::bad_input(format!(
                "{flag} needs a machine with kernel files to write: --machine host (not {})",
                self.machine.selector()
            ))
        })
    }

    /// `--undo FILE`: restores what the journal records (`apply::undo`).
    pub fn undo(&self, file: &Path, force: bool) -> Result<ChangeReport> {
        let changes = undo(
            file,
            &UndoOptions {
                root: self.kernel_root("--undo")?,
                privileged: self.may_write(),
                force,
            },
        )?;
        Ok(ChangeReport {
            action: "restored".to_string(),
            changes,
            recheck: None,
        })
    }

    /// `--apply`: makes the fixes of the findings `request` names among `found` (the advice
    /// `options` gave), then, unless it is a dry run, opens the machine again and compares its
    /// advice with `found`.
    pub fn apply(
        &self,
        found: &Advice,
        options: &AdviseOptions,
        request: &ApplyRequest,
    ) -> Result<ChangeReport> {
        let chosen = super::select(found, request.wanted)?;
        let root = self.kernel_root("--apply")?;
        let system = read_system(&root);
        let changes = apply(
            &chosen,
            Some(&system),
            request.undo_file,
            &ApplyOptions {
                root,
                dry_run: request.dry_run,
                force: request.force,
                privileged: self.may_write(),
                settle: Duration::from_secs_f64(crate::input::duration_s(
                    "--settle",
                    request.settle_s,
                    false,
                )?),
            },
        )?;
        let recheck = if request.dry_run {
            None
        } else {
            let reread = Machine::open(self.machine.selector())?;
            Some(recheck(found, &advise(&reread, options)?))
        };
        let action = if request.dry_run {
            "would write"
        } else {
            "wrote"
        };
        Ok(ChangeReport {
            action: action.to_string(),
            changes,
            recheck,
        })
    }
}

impl ChangeReport {
    /// One line per write (`wrote /FILE: BEFORE -> AFTER`), then the recheck, if any.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for c in &self.changes {
            text += &format!(
                "{} /{}: {} -> {}\n",
                self.action, c.file, c.previous, c.value
            );
        }
        if let Some(recheck) = &self.recheck {
            text += &recheck.to_text();
        }
        text
    }
}
