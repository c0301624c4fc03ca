//! `pcielab corpus DIR`: reads every lspci output under a directory (one machine per file),
//! as `--machine lspci:FILE` would, and reports what a fleet of real machines looks like:
//! which files fail to read (each naming its line), how long each machine takes, how many
//! functions each holds, and how often each check fires, with the input line each finding
//! quotes as its evidence.
//!
//! The findings come from one function, [`findings`], which today turns the topology's own
//! health warnings ([`super::check`]) into records; another checker's findings slot in there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::check::{warnings, DOWNTRAINED};
use crate::topology::lspci::read_lspci_path;
use crate::topology::lspci_source::LspciFormat;
use crate::topology::{SourceLine, Topology};

/// The most files read from one directory tree (the public corpus holds about 19,000).
pub const MAX_CORPUS_FILES: usize = 100_000;
/// How deep the walk goes (linuxhw's tree is type/vendor/model/…/file, 8 levels).
const MAX_DEPTH: usize = 16;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Costs bandwidth or latency on this machine.
    PerfLoss,
    /// Worth a look; may cost nothing.
    Notice,
}

/// One check's finding on one function, with the line of input it rests on.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: &'static str,
    pub severity: Severity,
    #[serde(serialize_with = "as_text")]
    pub function: Bdf,
    pub message: String,
    pub evidence: Option<SourceLine>,
}

fn as_text<S: serde::Serializer>(bdf: &Bdf, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(bdf)
}

/// The check ids, the words each health warning starts with, their severity and the fact
/// whose line is the evidence.
const CHECKS: [(&str, &str, Severity, &str); 3] = [
    (
        "downtrained_link",
        DOWNTRAINED,
        Severity::PerfLoss,
        "lnksta",
    ),
    ("mps_mismatch", "MPS mismatch", Severity::PerfLoss, "devctl"),
    (
        "aspm_on_busy_link",
        "ASPM enabled on a busy link",
        Severity::Notice,
        "lnkctl",
    ),
];

/// The findings on `topo`: the single place the corpus gets them from.
pub fn findings(topo: &Topology) -> Vec<Finding> {
    let mut out = Vec::new();
    for (bdf, messages) in warnings(topo) {
        let f = topo
            .get(bdf)
            .expect("warnings name functions of the topology");
        for message in messages {
            let (check, severity, fact) = CHECKS
                .iter()
                .find(|(_, start, _, _)| message.starts_with(start))
                .map_or(("other", Severity::Notice, "header"), |c| (c.0, c.2, c.3));
            out.push(Finding {
                check,
                severity,
                function: bdf,
                message,
                evidence: f.evidence.lines.get(fact).cloned(),
            });
        }
    }
    out
}

/// One machine (file) read.
#[derive(Debug, Clone, Serialize)]
pub struct MachineRead {
    pub file: String,
    pub format: LspciFormat,
    pub functions: usize,
    pub read_us: u64,
    pub notes: Vec<String>,
    pub findings: Vec<Finding>,
}

/// A file that did not read, and why (the message names its line).
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub file: String,
    pub exit_code: i32,
    pub message: String,
}

/// One check's count over the corpus.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckCount {
    pub severity: Option<Severity>,
    pub findings: usize,
    pub machines: usize,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub struct CorpusReport {
    pub schema: &'static str,
    pub dir: String,
    pub files: usize,
    pub read: usize,
    pub failed: Vec<Failure>,
    pub functions: usize,
    pub read_us_median: u64,
    pub read_us_max: u64,
    pub checks: BTreeMap<&'static str, CheckCount>,
    pub machines: Vec<MachineRead>,
}

/// Reads every regular file below `dir` (in name order; dot files and `README*` skipped).
pub fn run_corpus(dir: &Path) -> Result<CorpusReport> {
    let mut files = Vec::new();
    collect(dir, 0, &mut files)?;
    files.sort();
    let mut machines = Vec::new();
    let mut failed = Vec::new();
    for path in &files {
        let file = path.strip_prefix(dir).unwrap_or(path).display().to_string();
        let start = Instant::now();
        match read_lspci_path(path) {
            Ok(read) => {
                let found = findings(&read.topology);
                machines.push(MachineRead {
                    file,
                    format: read.format,
                    functions: read.topology.functions().len(),
                    read_us: start.elapsed().as_micros() as u64,
                    notes: read.notes,
                    findings: found,
                });
            }
            Err(e) => failed.push(Failure {
                file,
                exit_code: e.exit_code(),
                message: e.message().to_string(),
            }),
        }
    }
    let mut checks: BTreeMap<&'static str, CheckCount> = CHECKS
        .iter()
        .map(|c| {
            (
                c.0,
                CheckCount {
                    severity: Some(c.2),
                    ..CheckCount::default()
                },
            )
        })
        .collect();
    for m in &machines {
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

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::bad_input(format!(
            "corpus directory {}: {e}; expected a directory of lspci outputs, one machine per file",
            dir.display()
        ))
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || name.starts_with("README") {
            continue;
        }
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if kind.is_dir() && depth < MAX_DEPTH {
            collect(&entry.path(), depth + 1, out)?;
        } else if kind.is_file() {
            if out.len() == MAX_CORPUS_FILES {
                return Err(Error::bad_input(format!(
                    "corpus directory {}: more than {MAX_CORPUS_FILES} files; give a smaller tree",
                    dir.display()
                )));
            }
            out.push(entry.path());
        }
    }
    Ok(())
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
            "\n{:<22} {:<9} {:>9} {:>9}",
            "check", "severity", "findings", "machines"
        );
        for (check, count) in &self.checks {
            let severity = match count.severity {
                Some(Severity::PerfLoss) => "perf_loss",
                Some(Severity::Notice) | None => "notice",
            };
            let _ = writeln!(
                out,
                "{check:<22} {severity:<9} {:>9} {:>9}",
                count.findings, count.machines
            );
        }
        for failure in &self.failed {
            let _ = writeln!(out, "\nFAILED {}: {}", failure.file, failure.message);
        }
        out
    }
}
