//! `advise --apply` and `--undo`: the runtime fixes the kernel exposes as sysfs/procfs files
//! (ASPM policy or per-link ASPM, IRQ affinity, CPU governor, devfreq governor), made safely.
//! Every file's previous value goes to the undo file before the first write; a write the kernel
//! refuses, or a value that reads back different, restores everything changed so far and says
//! so; a change that irqbalance or tuned would revert is refused unless forced. Paths are
//! relative to a root directory (`/` on a host), so tests run on a fake tree. Config-space writes
//! and kernel parameters are never performed: they are printed by the findings.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::facts::{parse_cpu_list, read_text, selected_word, SystemFacts};
use super::{Advice, Finding, Write};
use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::health::{read_link_health, LinkHealth};

/// What the undo file holds: the root it applies to and each file's value before the change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UndoFile {
    pub schema: String,
    pub root: String,
    /// In the order written; undone in reverse.
    pub previous: Vec<Write>,
}

const UNDO_SCHEMA: &str = "pcielab.advise-undo/v1";

/// One write made (or, with `--dry-run`, shown).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Change {
    pub file: String,
    pub previous: String,
    pub value: String,
}

/// What `--apply`, `--apply --dry-run` or `--undo` did (the `advise-apply` JSON document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ChangeReport {
    /// "wrote", "would write" or "restored".
    pub action: String,
    pub changes: Vec<Change>,
    /// After `--apply` (not `--dry-run`, not `--undo`): the whole advice run again on the
    /// machine as it reads now.
    pub recheck: Option<Recheck>,
}

/// A finding named the way `--ignore` and `--apply` name it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FindingRef {
    pub id: String,
    pub subject: String,
    pub severity: super::Severity,
}

/// The advice before a change against the advice after it, finding by finding (id and subject).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Recheck {
    /// Findings of the run before that the run after no longer reports.
    pub gone: Vec<FindingRef>,
    /// Findings both runs report (with the severity the run after gives).
    pub remaining: Vec<FindingRef>,
    /// Findings only the run after reports: what the change brought.
    pub new: Vec<FindingRef>,
}

/// Compares two runs of the advice on one machine.
pub fn recheck(before: &Advice, after: &Advice) -> Recheck {
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
    pub fn to_text(&self) -> String {
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
pub struct ApplyOptions {
    pub root: PathBuf,
    pub dry_run: bool,
    /// Apply even where irqbalance or tuned would revert the change.
    pub force: bool,
    /// Whether the process may write the root's kernel files (euid 0 on a host).
    pub privileged: bool,
    /// After the writes, how long to wait before re-reading the links an ASPM change touches:
    /// a link that retrained lower or counted more correctable errors rolls everything back.
    pub settle: std::time::Duration,
}

/// The findings `--apply` names: `ID` (every finding of that check) or `ID@BDF`/`ID@SUBJECT`.
pub fn select<'a>(advice: &'a Advice, wanted: &[String]) -> Result<Vec<&'a Finding>> {
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

/// A write's file below `root`, refused unless it is a relative path under `sys/` or `proc/`
/// without `..` (an undo file is user input).
fn target(root: &Path, file: &str, what: &str) -> Result<PathBuf> {
    let rel = Path::new(file);
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)));
    let kernel = rel.starts_with("sys") || rel.starts_with("proc");
    if !plain || !kernel {
        return Err(Error::bad_input(format!(
            "{what}: file '{file}' is not a kernel file: expected a relative path under sys/ or proc/ without '..'"
        )));
    }
    Ok(root.join(rel))
}

/// The value a kernel file holds, normalised the way it reads back: the bracketed word of a
/// selection file, a CPU list in canonical form, otherwise the trimmed text.
fn current_value(path: &Path) -> Option<String> {
    let text = read_text(path)?;
    if path.ends_with("parameters/policy") {
        return selected_word(&text);
    }
    if path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("affinity_list"))
    {
        return parse_cpu_list(&text).map(|c| super::facts::cpu_list_text(&c));
    }
    Some(text)
}

fn normalised(path: &Path, value: &str) -> String {
    if path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("affinity_list"))
    {
        if let Some(cpus) = parse_cpu_list(value) {
            return super::facts::cpu_list_text(&cpus);
        }
    }
    value.trim().to_string()
}

/// Writes `value` into an existing kernel file, as `echo value > file` does.
fn write_value(path: &Path, value: &str) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).truncate(true).open(path)?;
    file.write_all(format!("{value}\n").as_bytes())
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

/// Applies the runtime writes of `findings`. The undo file is written first; on the first
/// refusal, or a value that did not stick, everything changed is restored and the error says
/// what and where. With `dry_run` nothing is written, the undo file included.
pub fn apply(
    findings: &[&Finding],
    system: Option<&SystemFacts>,
    undo_file: &Path,
    options: &ApplyOptions,
) -> Result<Vec<Change>> {
    let writes: Vec<&Write> = findings.iter().flat_map(|f| &f.fix.writes).collect();
    if let Some(owner) = reverting_owner(&writes, system).filter(|_| !options.force) {
        return Err(Error::runtime(format!(
            "refusing to apply: {owner}; stop it first, or pass --force to apply anyway"
        )));
    }
    let mut changes = Vec::new();
    for w in &writes {
        let path = target(&options.root, &w.file, "--apply")?;
        let previous = current_value(&path).ok_or_else(|| {
            Error::runtime(format!(
                "{}: cannot read its current value, so it could not be undone; nothing was changed",
                path.display()
            ))
        })?;
        changes.push(Change {
            file: w.file.clone(),
            previous,
            value: w.value.clone(),
        });
    }
    if options.dry_run {
        return Ok(changes);
    }
    if !options.privileged {
        return Err(Error::runtime(format!(
            "writing {} needs root (CAP_SYS_ADMIN for sysfs, root for /proc/irq); run with sudo, or --dry-run to see the writes",
            changes.iter().map(|c| format!("/{}", c.file)).collect::<Vec<_>>().join(", ")
        )));
    }
    let undo = UndoFile {
        schema: UNDO_SCHEMA.into(),
        root: options.root.display().to_string(),
        previous: changes
            .iter()
            .map(|c| Write {
                file: c.file.clone(),
                value: c.previous.clone(),
            })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&undo)
        .map_err(|e| Error::runtime(format!("undo file: {e}")))?;
    crate::input::write_output(undo_file, format!("{text}\n").as_bytes())?;
    let pairs: Vec<(PathBuf, String, String)> = changes
        .iter()
        .map(|c| {
            Ok((
                target(&options.root, &c.file, "--apply")?,
                c.previous.clone(),
                c.value.clone(),
            ))
        })
        .collect::<Result<_>>()?;
    let watched = links_watched(&options.root, &changes);
    let before: Vec<LinkHealth> = watched
        .iter()
        .map(|b| read_link_health(&options.root, *b))
        .collect();
    write_all_or_restore(&pairs, "--apply")?;
    if watched.is_empty() {
        return Ok(changes);
    }
    std::thread::sleep(options.settle);
    for (bdf, was) in watched.iter().zip(&before) {
        if let Some(worse) = got_worse(was, &read_link_health(&options.root, *bdf)) {
            let restored = restore(&pairs);
            return Err(Error::runtime(format!(
                "--apply: after the change {bdf} {worse}; {restored}"
            )));
        }
    }
    Ok(changes)
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

/// Writes every previous value back, last first; says what could not be.
fn restore(pairs: &[(PathBuf, String, String)]) -> String {
    let failed: Vec<String> = pairs
        .iter()
        .rev()
        .filter(|(path, previous, _)| write_value(path, previous).is_err())
        .map(|(path, _, _)| path.display().to_string())
        .collect();
    if failed.is_empty() {
        format!("restored the {} file(s) changed", pairs.len())
    } else {
        format!("could NOT restore {}: use the undo file", failed.join(", "))
    }
}

/// Writes each (file, previous, new) in order; on a refused write or a value that reads back
/// different, writes the previous values back (last first) and fails naming the file.
fn write_all_or_restore(pairs: &[(PathBuf, String, String)], what: &str) -> Result<()> {
    for (done, (path, _, value)) in pairs.iter().enumerate() {
        let failure = match write_value(path, value) {
            Err(e) => Some(format!("the kernel refused the write: {e}")),
            Ok(()) => match current_value(path) {
                Some(now) if now == normalised(path, value) => None,
                now => Some(format!(
                    "it reads back '{}' instead",
                    now.unwrap_or_else(|| "nothing".into())
                )),
            },
        };
        if let Some(why) = failure {
            // The failed file itself was not changed (or could not be): restore the ones before
            // it, and try it too in case a partial write landed.
            let _ = write_value(path, &pairs[done].1);
            let restored = if done == 0 {
                "nothing was changed before it".to_string()
            } else {
                restore(&pairs[..done])
            };
            return Err(Error::runtime(format!(
                "{what}: writing '{value}' to {}: {why}; {restored}",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Restores the values an undo file holds, last written first. The file is checked whole before
/// anything is written.
pub fn undo(undo_file: &Path, root: &Path, privileged: bool) -> Result<Vec<Change>> {
    let text = crate::input::read_input_file(undo_file, "--undo file")?;
    let undo: UndoFile = serde_json::from_str(&text).map_err(|e| {
        Error::bad_input(format!("{}: not an advise undo file ({e}); expected the JSON `advise --apply --undo-file` wrote", undo_file.display()))
    })?;
    if undo.schema != UNDO_SCHEMA {
        return Err(Error::bad_input(format!(
            "{}: schema '{}' is not {UNDO_SCHEMA}",
            undo_file.display(),
            undo.schema
        )));
    }
    if Path::new(&undo.root) != root {
        return Err(Error::bad_input(format!(
            "{}: written for root {}, not {}; pass --root {}",
            undo_file.display(),
            undo.root,
            root.display(),
            undo.root
        )));
    }
    let mut pairs = Vec::new();
    let mut changes = Vec::new();
    for w in undo.previous.iter().rev() {
        let path = target(root, &w.file, &undo_file.display().to_string())?;
        let now = current_value(&path).ok_or_else(|| {
            Error::runtime(format!(
                "{}: cannot read it; nothing was restored",
                path.display()
            ))
        })?;
        changes.push(Change {
            file: w.file.clone(),
            previous: now.clone(),
            value: w.value.clone(),
        });
        pairs.push((path, now, w.value.clone()));
    }
    if !privileged {
        return Err(Error::runtime(
            "restoring kernel files needs root; run with sudo",
        ));
    }
    write_all_or_restore(&pairs, "--undo")?;
    Ok(changes)
}

#[cfg(test)]
mod tests;
