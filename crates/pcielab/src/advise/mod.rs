//! `pcielab advise`: what is misconfigured on a machine for the user's intent, with the evidence
//! (the sysfs file or config-space field as `lspci -vvv` names it, and its value), the fix (the
//! lever, the command, whether it needs a reboot) and the gain pcielab's own model predicts, or
//! why it predicts none. Checks over PCIe links live in links.rs, checks over the CPUs, IRQs and
//! IOMMU serving a device in system.rs; the facts they read beyond the topology in facts.rs;
//! applying and undoing the runtime fixes in apply.rs.
//!
//! Rule ids are stable: fleets mute known exceptions with `--ignore ID@BDF` and alert on them
//! (`pcielab_advice_findings`). A check whose facts the machine does not hold is skipped and
//! listed with the reason, never reported as clean.

pub mod apply;
pub mod facts;
mod links;
mod system;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::machine::Machine;
use crate::model::platform::PlatformModel;
use facts::{read_facts, Facts};

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Worth knowing; costs nothing measurable for the intent assumed.
    Info,
    /// A risk to correctness or stability (errors, malformed TLPs, revertible settings).
    Risk,
    /// Costs throughput or latency for the intent assumed.
    PerfLoss,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Risk => "risk",
            Severity::PerfLoss => "perf-loss",
        }
    }

    /// `--fail-on` values: the severity, with its rank.
    pub fn parse(text: &str) -> Result<Severity> {
        match text {
            "info" => Ok(Severity::Info),
            "risk" => Ok(Severity::Risk),
            "perf-loss" => Ok(Severity::PerfLoss),
            other => Err(Error::bad_input(format!(
                "severity '{other}' is not one: expected info, risk or perf-loss"
            ))),
        }
    }
}

/// What the user wants from the machine: the advice differs with it (ASPM, ACS, IOMMU, MPS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Intent {
    /// Bulk DMA bandwidth.
    #[default]
    Throughput,
    /// Request-response time (ASPM exits, idle states matter most).
    Latency,
    /// Peer-to-peer DMA between devices (ACS redirect and `pcie_bus_perf` work against it).
    P2p,
    /// Devices kept apart (ACS and a translating IOMMU are wanted, not costs).
    Isolation,
}

impl Intent {
    pub fn parse(text: &str) -> Result<Intent> {
        match text {
            "throughput" => Ok(Intent::Throughput),
            "latency" => Ok(Intent::Latency),
            "p2p" => Ok(Intent::P2p),
            "isolation" => Ok(Intent::Isolation),
            other => Err(Error::bad_input(format!(
                "--intent '{other}' is not one: expected throughput, latency, p2p or isolation"
            ))),
        }
    }
}

/// One fact behind a finding: where it was read and what it said.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Evidence {
    /// The file read (a sysfs/procfs path or a function's `config`), or "spec" on `sim:`.
    pub source: String,
    /// The field as `lspci -vvv` names it ("LnkSta: Speed"), or the attribute's file name.
    pub field: String,
    pub value: String,
    /// The input line quoted, where the machine was read from text that has lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

impl Evidence {
    pub fn new(source: impl Into<String>, field: &str, value: impl Into<String>) -> Evidence {
        Evidence {
            source: source.into(),
            field: field.to_string(),
            value: value.into(),
            line: None,
        }
    }
}

/// The kind of change a fix makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Lever {
    /// A runtime write to sysfs or procfs: `--apply` can make it, and undo it.
    RuntimeWrite,
    /// A kernel command-line parameter: takes a reboot.
    KernelParameter,
    /// A configuration-space write with `setpci`: printed, never performed (drivers and the
    /// kernel own these registers).
    Setpci,
    /// Firmware, BIOS or hardware (a slot, a riser).
    Firmware,
    /// A command to run (`cpupower`): printed, not performed.
    Command,
}

/// One runtime write `--apply` performs: a file below the machine's root and the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Write {
    /// The file, relative to the machine's root ("sys/module/pcie_aspm/parameters/policy").
    pub file: String,
    pub value: String,
}

/// How to fix a finding.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Fix {
    pub lever: Lever,
    /// What to run or set, ready to paste.
    pub command: String,
    pub reboot: bool,
    /// The writes `--apply` makes (runtime writes only; empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<Write>,
    /// Other levers and what to weigh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Fix {
    /// A fix pcielab prints and never performs: a `setpci` write, a kernel parameter (which
    /// takes a reboot), firmware, or a command the user runs.
    pub fn printed(lever: Lever, command: String) -> Fix {
        Fix {
            lever,
            command,
            reboot: lever == Lever::KernelParameter,
            writes: Vec::new(),
            note: None,
        }
    }

    /// The same fix with what to weigh before making it.
    pub fn noting(self, note: impl Into<String>) -> Fix {
        Fix {
            note: Some(note.into()),
            ..self
        }
    }
}

/// What pcielab's model says the fix gains (or costs), or why it says nothing.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Prediction {
    Predicted {
        /// What is predicted ("write ceiling of the path").
        metric: String,
        before: f64,
        after: f64,
        unit: String,
        /// (after − before) / before × 100.
        change_percent: f64,
        /// The model and inputs it came from.
        model: String,
    },
    NotPredicted {
        reason: String,
    },
}

impl Prediction {
    pub fn predicted(metric: &str, before: f64, after: f64, unit: &str, model: String) -> Self {
        let change_percent = if before > 0.0 {
            (after - before) / before * 100.0
        } else {
            0.0
        };
        Prediction::Predicted {
            metric: metric.to_string(),
            before,
            after,
            unit: unit.to_string(),
            change_percent,
            model,
        }
    }

    pub fn not_predicted(reason: impl Into<String>) -> Self {
        Prediction::NotPredicted {
            reason: reason.into(),
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Finding {
    /// The stable rule id (one of [`CHECKS`]).
    pub id: &'static str,
    pub severity: Severity,
    /// What it concerns: "0000:03:00.0", "link 0000:00:01.0 -> 0000:03:00.0", "cpu 4-7",
    /// "irq 45", "devfreq dmc", "machine".
    pub subject: String,
    /// The PCI function it is filed under (`--ignore ID@BDF`, the exporter's `function`
    /// label); `None` for machine-wide findings.
    pub function: Option<String>,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    pub fix: Fix,
    /// The intent this finding assumed.
    pub intent: Intent,
    pub prediction: Prediction,
}

/// A check that did not run, and why.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Skipped {
    pub check: &'static str,
    pub reason: String,
}

/// The whole answer of `advise`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Advice {
    pub machine: String,
    pub intent: Intent,
    pub checks_run: Vec<&'static str>,
    pub skipped: Vec<Skipped>,
    /// Findings muted by `--ignore`, counted so a fleet sees they exist.
    pub muted: usize,
    pub findings: Vec<Finding>,
}

impl Advice {
    /// The most severe finding's severity, `None` with no findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// Every check, by stable rule id, with what it looks at.
pub const CHECKS: [(&str, &str); 15] = [
    (
        "link-downtrained",
        "link trained below min(parent, child) LnkCap",
    ),
    (
        "mps-below-path",
        "MPS below what every function on the path supports",
    ),
    (
        "mps-mismatch",
        "MPS differs across a link in a way that can malform TLPs",
    ),
    ("mrrs-small", "MRRS below MPS or at 128 B on a DMA endpoint"),
    (
        "aspm-busy-link",
        "ASPM L0s/L1 enabled on a link whose endpoint is busy",
    ),
    ("ext-tag-off", "Extended Tag supported but disabled"),
    (
        "ten-bit-tag-off",
        "10-bit tags supported by requester and completer, disabled",
    ),
    (
        "relaxed-ordering",
        "Relaxed Ordering against the root port's kernel quirk",
    ),
    (
        "aer-correctable",
        "AER correctable errors counted on a function",
    ),
    (
        "p2p-through-host",
        "P2P pairs routed through the host bridge by ACS redirect",
    ),
    (
        "iommu-translated",
        "device DMA translated (and strictly invalidated) by the IOMMU",
    ),
    (
        "irq-far-node",
        "MSI/MSI-X vectors delivered to CPUs off the device's NUMA node",
    ),
    (
        "cpu-governor",
        "CPUs serving device IRQs not on the performance governor",
    ),
    (
        "cpu-idle-deep",
        "deep idle states enabled on CPUs serving device IRQs",
    ),
    (
        "devfreq-governor",
        "devfreq (DDR/bus) governor not performance",
    ),
];

/// A muted finding: `ID@BDF` (or `ID@SUBJECT` for machine-wide ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mute {
    pub id: String,
    pub at: String,
}

impl Mute {
    pub fn parse(text: &str) -> Result<Mute> {
        let (id, at) = text.split_once('@').ok_or_else(|| {
            Error::bad_input(format!(
                "--ignore '{text}': expected ID@BDF (e.g. link-downtrained@0000:03:00.0)"
            ))
        })?;
        check_id(id, "--ignore")?;
        let at = match at.parse::<crate::pcie::Bdf>() {
            Ok(bdf) => bdf.to_string(),
            Err(_) => at.to_string(),
        };
        Ok(Mute {
            id: id.to_string(),
            at,
        })
    }

    fn mutes(&self, finding: &Finding) -> bool {
        self.id == finding.id
            && (finding.function.as_deref() == Some(self.at.as_str()) || finding.subject == self.at)
    }
}

/// `id` when it names a check; otherwise bad input listing them.
pub fn check_id(id: &str, option: &str) -> Result<&'static str> {
    CHECKS
        .iter()
        .map(|(c, _)| *c)
        .find(|c| *c == id)
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{option}: '{id}' is not a check id; valid are {}",
                CHECKS.map(|(c, _)| c).join(", ")
            ))
        })
}

/// What to check, for whom and how.
#[derive(Debug, Clone, Default)]
pub struct AdviseOptions {
    pub intent: Intent,
    /// Check ids to run; empty runs every check.
    pub only: Vec<&'static str>,
    pub ignore: Vec<Mute>,
    /// A fitted platform model: gains beyond the link model (reads, latency) are predicted with it.
    pub platform: Option<PlatformModel>,
    /// How many times a host's link state is read before a speed drop is called a downtrain
    /// (devices lower their speed when idle), and the pause between reads.
    pub link_samples: u32,
    pub sample_interval: std::time::Duration,
}

/// What every check receives.
pub(crate) struct Context<'a> {
    pub topology: &'a crate::topology::Topology,
    pub facts: &'a Facts,
    pub options: &'a AdviseOptions,
    pub platform: Option<&'a PlatformModel>,
    /// The pci directory of a machine with sysfs, for re-reading link state.
    pub pci_dir: Option<std::path::PathBuf>,
}

/// Runs the checks on `machine`.
pub fn advise(machine: &Machine, options: &AdviseOptions) -> Result<Advice> {
    let platform = machine.platform()?;
    let spec_model = platform.platform_model()?;
    let pci_dir = machine.pci_dir();
    let root = machine.system_root();
    let facts = read_facts(&platform.topology, pci_dir.as_deref(), root.as_deref());
    let context = Context {
        topology: &platform.topology,
        facts: &facts,
        options,
        platform: options.platform.as_ref().or(spec_model.as_ref()),
        pci_dir,
    };
    Ok(run_checks(&context, &machine.selector().to_string()))
}

/// The result of one check: findings, or why it could not run.
pub(crate) type CheckOutcome = std::result::Result<Vec<Finding>, String>;

fn run_checks(context: &Context, machine: &str) -> Advice {
    let selected = |id: &str| context.options.only.is_empty() || context.options.only.contains(&id);
    let mut advice = Advice {
        machine: machine.to_string(),
        intent: context.options.intent,
        checks_run: Vec::new(),
        skipped: Vec::new(),
        muted: 0,
        findings: Vec::new(),
    };
    for (id, _) in CHECKS {
        if !selected(id) {
            continue;
        }
        let outcome = match id {
            "link-downtrained" => links::downtrained(context),
            "mps-below-path" => links::mps_below_path(context),
            "mps-mismatch" => links::mps_mismatch(context),
            "mrrs-small" => links::mrrs_small(context),
            "aspm-busy-link" => links::aspm_busy(context),
            "ext-tag-off" => links::ext_tag_off(context),
            "ten-bit-tag-off" => links::ten_bit_tag_off(context),
            "relaxed-ordering" => links::relaxed_ordering(context),
            "aer-correctable" => links::aer_correctable(context),
            "p2p-through-host" => links::p2p_through_host(context),
            "iommu-translated" => system::iommu_translated(context),
            "irq-far-node" => system::irq_far_node(context),
            "cpu-governor" => system::cpu_governor(context),
            "cpu-idle-deep" => system::cpu_idle_deep(context),
            "devfreq-governor" => system::devfreq_governor(context),
            other => unreachable!("check {other} listed in CHECKS without a body"),
        };
        match outcome {
            Ok(found) => {
                advice.checks_run.push(id);
                for finding in found {
                    if context.options.ignore.iter().any(|m| m.mutes(&finding)) {
                        advice.muted += 1;
                    } else {
                        advice.findings.push(finding);
                    }
                }
            }
            Err(reason) => advice.skipped.push(Skipped { check: id, reason }),
        }
    }
    advice
}

/// The findings as a table: severity, id, subject, summary, fix, prediction.
pub fn to_text(advice: &Advice) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: {} finding(s) for intent {} ({} check(s) run, {} skipped, {} muted)",
        advice.machine,
        advice.findings.len(),
        intent_name(advice.intent),
        advice.checks_run.len(),
        advice.skipped.len(),
        advice.muted
    );
    for f in &advice.findings {
        let _ = writeln!(
            out,
            "\n[{}] {} {}\n  {}",
            f.severity.name(),
            f.id,
            f.subject,
            f.summary
        );
        for e in &f.evidence {
            let _ = writeln!(out, "  evidence: {} {} = {}", e.source, e.field, e.value);
            if let Some(line) = &e.line {
                let _ = writeln!(out, "    | {line}");
            }
        }
        let reboot = if f.fix.reboot { " (reboot)" } else { "" };
        let _ = writeln!(out, "  fix{reboot}: {}", f.fix.command);
        if let Some(note) = &f.fix.note {
            let _ = writeln!(out, "  note: {note}");
        }
        let _ = writeln!(out, "  predicted: {}", prediction_text(&f.prediction));
    }
    for s in &advice.skipped {
        let _ = writeln!(out, "\nnot checked: {}: {}", s.check, s.reason);
    }
    out
}

pub fn intent_name(intent: Intent) -> &'static str {
    match intent {
        Intent::Throughput => "throughput",
        Intent::Latency => "latency",
        Intent::P2p => "p2p",
        Intent::Isolation => "isolation",
    }
}

/// "6300 → 7100 MB/s (+12.7 %, model)" or "not predicted: reason".
pub fn prediction_text(p: &Prediction) -> String {
    match p {
        Prediction::Predicted {
            metric,
            before,
            after,
            unit,
            change_percent,
            model,
        } => format!(
            "{metric}: {} -> {} {unit} ({:+.1} %; {model})",
            crate::report::round_to(*before, 1),
            crate::report::round_to(*after, 1),
            change_percent
        ),
        Prediction::NotPredicted { reason } => format!("not predicted: {reason}"),
    }
}
