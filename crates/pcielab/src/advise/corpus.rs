//! `pcielab corpus DIR`: reads every lspci output under a directory (one machine per file),
//! as `--machine lspci:FILE` would, and reports what a fleet of real machines looks like:
//! which files fail to read (each naming its line), how long each machine takes, how many
//! functions each holds, and per `advise` check how many subjects it judged, how many it could
//! not judge (with the reasons) and how often it fires, with the input line each finding
//! quotes as its evidence. A check that could not look is counted as not judged, never as
//! "0 findings".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::{advise, AdviseOptions, CheckReport, CheckStatus, Severity, CHECKS};
use crate::error::{Error, Result};
use crate::machine::Machine;
use crate::topology::lspci::read_lspci_path;
use crate::topology::lspci_source::LspciFormat;

/// The most files read from one directory tree (the public corpus holds about 19,000).
pub(crate) const MAX_CORPUS_FILES: usize = 100_000;

/// One check's finding on one machine, with the input lines it rests on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Finding {
    pub(crate) check: &'static str,
    pub(crate) severity: Severity,
    /// The PCI function it is filed under; `None` for machine-wide findings.
    pub(crate) function: Option<String>,
    pub(crate) message: String,
    /// Each piece of evidence's input line ("line 12: LnkSta: Speed 2.5GT/s (downgraded)…").
    pub(crate) evidence: Vec<String>,
}

/// What `advise` makes of the lspci output in `path`, for the throughput intent: each
/// finding with the input lines its evidence was read from, and each check's judgement.
pub(crate) fn findings(path: &Path) -> Result<(Vec<Finding>, Vec<CheckReport>)> {
    let machine = Machine::lspci_at(path)?;
    let options = AdviseOptions {
        link_samples: 1,
        ..AdviseOptions::default()
    };
    let advice = advise(&machine, &options)?;
    let found = advice
        .findings
        .into_iter()
        .map(|f| Finding {
            check: f.id,
            severity: f.severity,
            function: f.function,
            message: f.summary,
            evidence: {
                let mut lines: Vec<String> =
                    f.evidence.into_iter().filter_map(|e| e.line).collect();
                lines.dedup();
                lines
            },
        })
        .collect();
    Ok((found, advice.checks))
}

/// One machine (file) read.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MachineRead {
    pub(crate) file: String,
    pub(crate) format: LspciFormat,
    pub(crate) functions: usize,
    pub(crate) read_us: u64,
    pub(crate) notes: Vec<String>,
    pub(crate) findings: Vec<Finding>,
    /// Each check's judgement of this machine: subjects judged, findings, and what it could
    /// not judge with the reason.
    pub(crate) checks: Vec<CheckReport>,
}

/// A file that did not read, and why (the message names its line).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Failure {
    pub(crate) file: String,
    pub(crate) exit_code: i32,
    pub(crate) message: String,
}

/// One check's count over the corpus.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct CheckCount {
    pub(crate) severity: Option<Severity>,
    /// Subjects judged (with a finding or clean), over every machine.
    pub(crate) judged: usize,
    /// Subjects the input did not let the check judge, over every machine.
    pub(crate) not_judged: usize,
    pub(crate) findings: usize,
    /// Machines with a finding.
    pub(crate) machines: usize,
    /// Machines on which the check judged nothing for want of input (status not-judged).
    pub(crate) machines_not_judged: usize,
    /// Each reason for not judging, with the number of subjects it covers.
    pub(crate) reasons: BTreeMap<String, usize>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CorpusReport {
    pub(crate) schema: &'static str,
    pub(crate) dir: String,
    pub(crate) files: usize,
    pub(crate) read: usize,
    pub(crate) failed: Vec<Failure>,
    pub(crate) functions: usize,
    pub(crate) read_us_median: u64,
    pub(crate) read_us_max: u64,
    pub(crate) checks: BTreeMap<&'static str, CheckCount>,
    pub(crate) machines: Vec<MachineRead>,
}

/// Reads every regular file below `dir` (in name order; dot files and `README*` skipped),
/// following symbolic links. A file or directory that cannot be read is reported among the
/// failures and the walk goes on.
pub fn run_corpus(dir: &Path) -> Result<CorpusReport> {
    let (mut files, mut failed) = walk(dir)?;
    files.sort();
    let mut machines = Vec::new();
    for path in &files {
        let file = shown_path(path.strip_prefix(dir).unwrap_or(path));
        let start = Instant::now();
        let read = read_lspci_path(path).and_then(|read| {
            let read_us = start.elapsed().as_micros() as u64;
            Ok((read, read_us, findings(path)?))
        });
        match read {
            Ok((read, read_us, (found, judged))) => machines.push(MachineRead {
                file,
                format: read.format,
                functions: read.topology.functions().len(),
                read_us,
                notes: read.notes,
                findings: found,
                checks: judged,
            }),
            Err(e) => failed.push(Failure {
                file,
                exit_code: e.exit_code(),
                message: e.message().to_string(),
            }),
        }
    }
    failed.sort_by(|a, b| a.file.cmp(&b.file));
    let mut checks: BTreeMap<&'static str, CheckCount> = CHECKS
        .iter()
        .map(|(id, _)| (*id, CheckCount::default()))
        .collect();
    for m in &machines {
        for report in &m.checks {
            let count = checks.entry(report.check).or_default();
            count.judged += report.judged;
            count.not_judged += report.not_judged_count();
            count.machines_not_judged += usize::from(report.status == CheckStatus::NotJudged);
            for group in &report.not_judged {
                *count.reasons.entry(group.reason.clone()).or_default() += group.subjects.len();
            }
        }
        let mut fired: Vec<&str> = Vec::new();
        for finding in &m.findings {
            let count = checks.entry(finding.check).or_default();
            count.severity = Some(finding.severity);
            count.findings += 1;
            if !fired.contains(&finding.check) {
                fired.push(finding.check);
                count.machines += 1;
            }
        }
    }
    let mut times: Vec<u64> = machines.iter().map(|m| m.read_us).collect();
    times.sort_unstable();
    Ok(CorpusReport {
        schema: "pcielab.corpus/v1",
        dir: dir.display().to_string(),
        files: files.len(),
        read: machines.len(),
        failed,
        functions: machines.iter().map(|m| m.functions).sum(),
        read_us_median: times.get(times.len() / 2).copied().unwrap_or(0),
        read_us_max: times.last().copied().unwrap_or(0),
        checks,
        machines,
    })
}

/// A path as the report shows it: UTF-8 as it is, any other byte as `\xNN` (control
/// characters are escaped where the report is printed, JSON keeps them exact).
fn shown_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// Every regular file below `dir`, at any depth, and the entries that could not be read. Links
/// are followed; a directory reached a second time (a link loop, or two links to one place) is
/// reported once and not walked again.
fn walk(dir: &Path) -> Result<(Vec<PathBuf>, Vec<Failure>)> {
    use std::os::unix::fs::MetadataExt;
    let top = std::fs::metadata(dir).map_err(|e| {
        Error::bad_input(format!(
            "corpus directory {}: {e}; expected a directory of lspci outputs, one machine per file",
            dir.display()
        ))
    })?;
    if !top.is_dir() {
        return Err(Error::bad_input(format!(
            "corpus directory {}: is {}; expected a directory of lspci outputs, one machine per file",
            dir.display(),
            crate::input::file_kind(top.file_type())
        )));
    }
    let mut visited = std::collections::HashSet::from([(top.dev(), top.ino())]);
    let (mut files, mut failed) = (Vec::new(), Vec::new());
    let mut pending = vec![dir.to_path_buf()];
    let failure = |path: &Path, why: String| Failure {
        file: shown_path(path.strip_prefix(dir).unwrap_or(path)),
        exit_code: 1,
        message: why,
    };
    while let Some(at) = pending.pop() {
        let entries = match std::fs::read_dir(&at) {
            Ok(entries) => entries,
            Err(e) => {
                failed.push(failure(&at, format!("directory not read: {e}")));
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    failed.push(failure(&at, format!("directory not read to its end: {e}")));
                    break;
                }
            };
            let name = entry.file_name();
            let name = name.as_encoded_bytes();
            if name.starts_with(b".") || name.starts_with(b"README") {
                continue;
            }
            let path = entry.path();
            let meta = match std::fs::metadata(&path) {
                Ok(meta) => meta,
                Err(e) => {
                    failed.push(failure(&path, format!("not read: {e}")));
                    continue;
                }
            };
            if meta.is_dir() {
                if visited.insert((meta.dev(), meta.ino())) {
                    pending.push(path);
                } else {
                    failed.push(failure(
                        &path,
                        "a link to a directory already walked (a link loop or a second link); \
                         not walked again"
                            .into(),
                    ));
                }
            } else if meta.is_file() {
                if files.len() == MAX_CORPUS_FILES {
                    return Err(Error::bad_input(format!(
                        "corpus directory {}: more than {MAX_CORPUS_FILES} files; give a smaller tree",
                        dir.display()
                    )));
                }
                files.push(path);
            }
        }
    }
    Ok((files, failed))
}

impl CorpusReport {
    /// The findings table and the failures, for people.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}: {} files, {} read ({:.1} %), {} failed; {} functions; read time per machine: median {} us, max {} us",
            self.dir,
            self.files,
            self.read,
            if self.files == 0 { 0.0 } else { 100.0 * self.read as f64 / self.files as f64 },
            self.failed.len(),
            self.functions,
            self.read_us_median,
            self.read_us_max
        );
        let _ = writeln!(
            out,
            "\n{:<22} {:<9} {:>9} {:>11} {:>9} {:>9} {:>12}",
            "check", "severity", "judged", "not judged", "findings", "machines", "not judged on"
        );
        for (check, count) in &self.checks {
            let severity = count.severity.map_or("-", Severity::name);
            let _ = writeln!(
                out,
                "{check:<22} {severity:<9} {:>9} {:>11} {:>9} {:>9} {:>12}",
                count.judged,
                count.not_judged,
                count.findings,
                count.machines,
                count.machines_not_judged
            );
        }
        let _ = writeln!(
            out,
            "\n(judged and not judged count subjects: functions, links, pairs or CPUs; \
             \"not judged on\" counts machines where the check judged nothing)"
        );
        for (check, count) in self.checks.iter().filter(|(_, c)| !c.reasons.is_empty()) {
            let _ = writeln!(out, "\nnot judged by {check}:");
            for (reason, subjects) in &count.reasons {
                let _ = writeln!(out, "  {subjects:>6} x {reason}");
            }
        }
        for failure in &self.failed {
            let _ = writeln!(out, "\nFAILED {}: {}", failure.file, failure.message);
        }
        out
    }
}
