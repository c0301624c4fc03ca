//! `advise --apply` and `--undo`: the runtime fixes the kernel exposes as sysfs/procfs files
//! (ASPM policy or per-link ASPM, IRQ affinity, CPU governor, devfreq governor), made safely.
//! Each check may write only its own files (kernel_file.rs: one allow-list for apply and undo),
//! resolved inside the machine's root and bounded by what the file accepts; the undo journal
//! (journal.rs) is created, never replacing a file, before the first write; a write the kernel
//! refuses, or a value that reads back different, restores everything changed so far and says
//! so; a change that irqbalance or tuned would revert is refused unless forced. Paths are
//! relative to a root directory (`/` on a host), so tests run on a fake tree. Config-space writes
//! and kernel parameters are never performed: they are printed by the findings.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::facts::SystemFacts;
use super::{Advice, Finding, Write};
use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::health::{read_link_health, LinkHealth};

pub(crate) mod flow;
mod journal;
mod kernel_file;

pub(crate) use journal::{JournalEntry, UndoJournal, JOURNAL_SCHEMA};
use kernel_file::{canonical_root, quoted_path, KernelFile};

/// One write made (or, with `--dry-run`, shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Change {
    pub(crate) file: String,
    pub(crate) previous: String,
    pub(crate) value: String,
}

/// What `--apply`, `--apply --dry-run` or `--undo` did (the `advise-apply` JSON document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChangeReport {
    /// "wrote", "would write" or "restored".
    pub(crate) action: String,
    pub(crate) changes: Vec<Change>,
    /// After `--apply` (not `--dry-run`, not `--undo`): the whole advice run again on the
    /// machine as it reads now.
    pub(crate) recheck: Option<Recheck>,
}

/// A finding named the way `--ignore` and `--apply` name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct FindingRef {
    pub(crate) id: String,
    pub(crate) subject: String,
    pub(crate) severity: super::Severity,
}

/// The advice before a change against the advice after it, finding by finding (id and subject).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub(crate) struct Recheck {
    /// Findings of the run before that the run after no longer reports.
    pub(crate) gone: Vec<FindingRef>,
    /// Findings both runs report (with the severity the run after gives).
    pub(crate) remaining: Vec<FindingRef>,
    /// Findings only the run after reports: what the change brought.
    pub(crate) new: Vec<FindingRef>,
}

/// Compares two runs of the advice on one machine.
pub(crate) fn recheck(before: &Advice, after: &Advice) -> Recheck {
    let key = |f: &Finding| (f.id, f.subject.clone());
    let reference = |f: &Finding| FindingRef {
        id: f.id.to_string(),
        subject: f.subject.clone(),
        severity: f.severity,
    };
    let in_run = |run: &Advice, f: &Finding| run.findings.iter().any(|g| key(g) == key(f));
    Recheck {
        gone: before
            .findings
            .iter()
            .filter(|f| !in_run(after, f))
            .map(reference)
            .collect(),
        remaining: after
            .findings
            .iter()
            .filter(|f| in_run(before, f))
            .map(reference)
            .collect(),
        new: after
            .findings
            .iter()
            .filter(|f| !in_run(before, f))
            .map(reference)
            .collect(),
    }
}

impl Recheck {
    /// "re-checked: gone …; remaining …; new …", one line each, for the text output.
    pub(crate) fn to_text(&self) -> String {
        let list = |refs: &[FindingRef]| {
            if refs.is_empty() {
                "none".to_string()
            } else {
                refs.iter()
                    .map(|r| format!("{} {} ({})", r.id, r.subject, r.severity.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        format!(
            "re-checked the machine after the change:\n  gone: {}\n  remaining: {}\n  new: {}\n",
            list(&self.gone),
            list(&self.remaining),
            list(&self.new)
        )
    }
}

/// Where and how to write.
#[derive(Debug, Clone)]
pub(crate) struct ApplyOptions {
    pub(crate) root: PathBuf,
    pub(crate) dry_run: bool,
    /// Apply even where irqbalance or tuned would revert the change.
    pub(crate) force: bool,
    /// Whether the process may write the root's kernel files (euid 0 on a host).
    pub(crate) privileged: bool,
    /// After the writes, how long to wait before re-reading the links an ASPM change touches:
    /// a link that retrained lower or counted more correctable errors rolls everything back.
    pub(crate) settle: std::time::Duration,
}

/// The findings `--apply` names: `ID` (every finding of that check) or `ID@BDF`/`ID@SUBJECT`.
pub(crate) fn select<'a>(advice: &'a Advice, wanted: &[String]) -> Result<Vec<&'a Finding>> {
    let mut chosen: Vec<&Finding> = Vec::new();
    for want in wanted {
        let (id, at) = match want.split_once('@') {
            Some((id, at)) => (id, Some(at)),
            None => (want.as_str(), None),
        };
        super::check_id(id, "--apply")?;
        let matching: Vec<&Finding> = advice
            .findings
            .iter()
            .filter(|f| f.id == id)
            .filter(|f| at.is_none_or(|a| f.function.as_deref() == Some(a) || f.subject == a))
            .collect();
        if matching.is_empty() {
            return Err(Error::bad_input(format!(
                "--apply {want}: no such finding on this machine (findings: {})",
                advice
                    .findings
                    .iter()
                    .map(|f| format!("{}@{}", f.id, f.function.as_deref().unwrap_or(&f.subject)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for f in matching {
            if f.fix.writes.is_empty() {
                return Err(Error::bad_input(format!(
                    "--apply {want}: {} on {} has no runtime fix to apply; its fix is printed: {}",
                    f.id, f.subject, f.fix.command
                )));
            }
            if !chosen.iter().any(|c| std::ptr::eq(*c, f)) {
                chosen.push(f);
            }
        }
    }
    Ok(chosen)
}

/// Who would undo a change behind the user's back, for the files `writes` touches.
fn reverting_owner(writes: &[&Write], system: Option<&SystemFacts>) -> Option<String> {
    let system = system?;
    if system.irqbalance_running && writes.iter().any(|w| w.file.starts_with("proc/irq/")) {
        return Some("irqbalance is running and moves IRQs back on its next pass".into());
    }
    if system.tuned_running && writes.iter().any(|w| w.file.contains("governor")) {
        return Some("tuned is running and reapplies its profile's governors".into());
    }
    None
}

/// One write planned: the file (resolved and allowed for its check), what it holds now and the
/// value to write.
struct Planned {
    check: &'static str,
    file: KernelFile,
    now: String,
    value: String,
}

/// Applies the runtime writes of `findings`. Every file is resolved under the root, allowed for
/// its check and its value bounded before anything is written; the undo journal is then created
/// (never replacing a file); on the first refusal, or a value that did not stick, everything
/// changed is restored and the error says what and where. With `dry_run` nothing is written,
/// the journal included.
pub(crate) fn apply(
    findings: &[&Finding],
    system: Option<&SystemFacts>,
    undo_file: &Path,
    options: &ApplyOptions,
) -> Result<Vec<Change>> {
    let writes: Vec<(&'static str, &Write)> = findings
        .iter()
        .flat_map(|f| f.fix.writes.iter().map(move |w| (f.id, w)))
        .collect();
    let files: Vec<&Write> = writes.iter().map(|(_, w)| *w).collect();
    if let Some(owner) = reverting_owner(&files, system).filter(|_| !options.force) {
        return Err(Error::runtime(format!(
            "refusing to apply: {owner}; stop it first, or pass --force to apply anyway"
        )));
    }
    let root = canonical_root(&options.root)?;
    let mut planned = Vec::new();
    for (check, w) in writes {
        let file = KernelFile::resolve(&root, check, &w.file)
            .map_err(|e| prefixed(e, &format!("--apply {check}")))?;
        file.check_value(&w.value)
            .map_err(|e| prefixed(e, &format!("--apply {check}")))?;
        let now = file.current().ok_or_else(|| {
            Error::runtime(format!(
                "{}: cannot read its current value, so it could not be undone; nothing was changed",
                file.path.display()
            ))
        })?;
        planned.push(Planned {
            check,
            file,
            now,
            value: w.value.clone(),
        });
    }
    let changes = changes_of(&planned);
    if options.dry_run {
        return Ok(changes);
    }
    if !options.privileged {
        return Err(Error::runtime(format!(
            "writing {} needs root (CAP_SYS_ADMIN for sysfs, root for /proc/irq); run with sudo, or --dry-run to see the writes",
            changes.iter().map(|c| format!("/{}", c.file)).collect::<Vec<_>>().join(", ")
        )));
    }
    UndoJournal {
        schema: JOURNAL_SCHEMA.into(),
        root: root.display().to_string(),
        changes: planned
            .iter()
            .map(|p| JournalEntry {
                check: p.check.to_string(),
                file: p.file.rel.clone(),
                before: p.now.clone(),
                written: p.value.clone(),
            })
            .collect(),
    }
    .create(undo_file)?;
    let watched = links_watched(&root, &changes);
    let before: Vec<LinkHealth> = watched
        .iter()
        .map(|b| read_link_health(&root, *b))
        .collect();
    write_all_or_restore(&planned, "--apply")?;
    if watched.is_empty() {
        return Ok(changes);
    }
    std::thread::sleep(options.settle);
    for (bdf, was) in watched.iter().zip(&before) {
        if let Some(worse) = got_worse(was, &read_link_health(&root, *bdf)) {
            let restored = restore(&planned);
            return Err(Error::runtime(format!(
                "--apply: after the change {bdf} {worse}; {restored}"
            )));
        }
    }
    Ok(changes)
}

fn changes_of(planned: &[Planned]) -> Vec<Change> {
    planned
        .iter()
        .map(|p| Change {
            file: p.file.rel.clone(),
            previous: p.now.clone(),
            value: p.value.clone(),
        })
        .collect()
}

/// `error` with `what` in front, its kind (bad input or runtime) kept.
fn prefixed(error: Error, what: &str) -> Error {
    match error {
        Error::BadInput(m) => Error::bad_input(format!("{what}: {m}")),
        Error::Runtime(m) => Error::runtime(format!("{what}: {m}")),
    }
}

/// The functions whose links an ASPM change can affect: the one a per-link file names, or every
/// function with a link when the policy changes.
fn links_watched(root: &Path, changes: &[Change]) -> Vec<Bdf> {
    let mut watched: Vec<Bdf> = Vec::new();
    for c in changes {
        let rel = Path::new(&c.file);
        if c.file.ends_with("pcie_aspm/parameters/policy") {
            let devices = root.join("sys/bus/pci/devices");
            watched.extend(
                std::fs::read_dir(devices)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<Bdf>().ok()),
            );
        } else if rel.starts_with("sys/bus/pci/devices") && c.file.contains("/link/") {
            if let Some(bdf) = rel
                .iter()
                .nth(4)
                .and_then(|b| b.to_str()?.parse::<Bdf>().ok())
            {
                watched.push(bdf);
            }
        }
    }
    watched.sort();
    watched.dedup();
    watched
}

/// What got worse on a link between two reads: a lower trained speed or width, or more
/// correctable errors.
fn got_worse(was: &LinkHealth, now: &LinkHealth) -> Option<String> {
    if let (Some(a), Some(b)) = (was.aer.correctable, now.aer.correctable) {
        if b > a {
            return Some(format!(
                "counted {} more correctable AER error(s) ({a} -> {b})",
                b - a
            ));
        }
    }
    let lower = |a: Option<f64>, b: Option<f64>| matches!((a, b), (Some(a), Some(b)) if b < a);
    let narrower = matches!((was.current_width, now.current_width), (Some(a), Some(b)) if b < a);
    if lower(was.current_gts, now.current_gts) || narrower {
        return Some(format!(
            "retrained lower ({} GT/s x{} -> {} GT/s x{})",
            was.current_gts.unwrap_or(0.0),
            was.current_width.unwrap_or(0),
            now.current_gts.unwrap_or(0.0),
            now.current_width.unwrap_or(0)
        ));
    }
    None
}

/// Writes every value held before back, last first; says what could not be.
fn restore(planned: &[Planned]) -> String {
    let failed: Vec<String> = planned
        .iter()
        .rev()
        .filter(|p| p.file.write(&p.now).is_err())
        .map(|p| p.file.path.display().to_string())
        .collect();
    if failed.is_empty() {
        format!("restored the {} file(s) changed", planned.len())
    } else {
        format!("could NOT restore {}: use the undo file", failed.join(", "))
    }
}

/// Writes each planned value in order; on a refused write or a value that reads back
/// different, writes the values held before back (last first) and fails naming the file.
fn write_all_or_restore(planned: &[Planned], what: &str) -> Result<()> {
    for (done, p) in planned.iter().enumerate() {
        let failure = match p.file.write(&p.value) {
            Err(e) => Some(format!("the kernel refused the write: {e}")),
            Ok(()) => match p.file.current() {
                Some(now) if now == p.file.normalised(&p.value) => None,
                now => Some(format!(
                    "it reads back '{}' instead",
                    now.unwrap_or_else(|| "nothing".into())
                )),
            },
        };
        if let Some(why) = failure {
            // The failed file itself was not changed (or could not be): restore the ones before
            // it, and try it too in case a partial write landed.
            let _ = p.file.write(&p.now);
            let restored = if done == 0 {
                "nothing was changed before it".to_string()
            } else {
                restore(&planned[..done])
            };
            return Err(Error::runtime(format!(
                "{what}: writing '{}' to {}: {why}; {restored}",
                p.value,
                p.file.path.display()
            )));
        }
    }
    Ok(())
}

/// How `--undo` acts.
#[derive(Debug, Clone)]
pub struct UndoOptions {
    /// The root of the machine `--machine` (and `--root`) name: the journal must record it.
    pub root: PathBuf,
    /// Whether the process may write the root's kernel files (euid 0 on a host).
    pub privileged: bool,
    /// Restore even files that no longer hold what `--apply` wrote.
    pub force: bool,
}

/// Restores what an undo journal records, last written first. The whole journal is checked
/// before anything is written: its root must be the machine's, each entry's file one its check
/// may write (resolved inside the root), its value one the file accepts, and the file must still
/// hold what `--apply` wrote (unless `force`). Any refusal names the entry and writes nothing.
pub fn undo(undo_file: &Path, options: &UndoOptions) -> Result<Vec<Change>> {
    let journal = UndoJournal::read(undo_file)?;
    let root = canonical_root(&options.root)?;
    if Path::new(&journal.root) != root {
        return Err(Error::bad_input(format!(
            "undo file {}: written for the machine whose root is {}, not {} (the machine --machine and --root name); nothing was restored",
            undo_file.display(),
            crate::input::cut_for_message(&journal.root),
            root.display()
        )));
    }
    let mut planned = Vec::new();
    for (n, entry) in journal.changes.iter().enumerate() {
        let what = format!(
            "undo file {}: entry {} (check '{}', file '{}'); refusing the whole undo, nothing was restored",
            undo_file.display(),
            n + 1,
            crate::input::cut_for_message(&entry.check),
            quoted_path(&entry.file)
        );
        let check = super::check_id(&entry.check, "check").map_err(|e| prefixed(e, &what))?;
        let file =
            KernelFile::resolve(&root, check, &entry.file).map_err(|e| prefixed(e, &what))?;
        file.check_value(&entry.before)
            .map_err(|e| prefixed(e, &what))?;
        let now = file.current().ok_or_else(|| {
            Error::runtime(format!("{what}: {}: cannot read it", file.path.display()))
        })?;
        let written = file.normalised(&entry.written);
        if now != written && !options.force {
            let since = if now == file.normalised(&entry.before) {
                "it already holds the value before (undone already?)"
            } else {
                "it changed since the apply"
            };
            return Err(Error::bad_input(format!(
                "{what}: {} holds '{now}', not '{}' that --apply wrote: {since}; pass --force to restore '{}' anyway",
                file.path.display(),
                crate::input::cut_for_message(&written),
                crate::input::cut_for_message(&entry.before)
            )));
        }
        planned.push(Planned {
            check,
            file,
            now,
            value: entry.before.clone(),
        });
    }
    if !options.privileged {
        return Err(Error::runtime(
            "restoring kernel files needs root; run with sudo",
        ));
    }
    planned.reverse();
    write_all_or_restore(&planned, "--undo")?;
    Ok(changes_of(&planned))
}

#[cfg(test)]
mod tests;

pub use flow::{ApplyRequest, Target};
