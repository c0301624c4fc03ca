//! What a check finds and what every check receives: severities, intents, evidence, fixes,
//! predictions, findings and the advice they make, the list of checks with their stable ids,
//! and the options. The checks (links/, system.rs) and the driver (mod.rs) import this file;
//! it imports none of them.

use serde::Serialize;

use super::facts::Facts;
use crate::error::{Error, Result};
use crate::model::platform::PlatformModel;

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
    /// The severity as `--json` and the text print it (`info`, `warn`, `error`).
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
    /// `--intent` text (`throughput`, `latency`, `power`) as an intent; bad input names the valid ones.
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
pub(crate) struct Evidence {
    /// The file read (a sysfs/procfs path or a function's `config`), "lspci BDF", or
    /// "spec BDF" (the function's entry in a `sim:` spec).
    pub(crate) source: String,
    /// The field as `lspci -vvv` names it ("LnkSta: Speed"), or the attribute's file name.
    pub(crate) field: String,
    pub(crate) value: String,
    /// The input line quoted, where the machine was read from text that has lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<String>,
}

impl Evidence {
    pub(crate) fn new(
        source: impl Into<String>,
        field: &str,
        value: impl Into<String>,
    ) -> Evidence {
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
pub(crate) enum Lever {
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
pub(crate) struct Write {
    /// The file, relative to the machine's root ("sys/module/pcie_aspm/parameters/policy").
    pub(crate) file: String,
    pub(crate) value: String,
}

/// How to fix a finding.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct Fix {
    pub(crate) lever: Lever,
    /// What to run or set, ready to paste.
    pub(crate) command: String,
    pub(crate) reboot: bool,
    /// The writes `--apply` makes (runtime writes only; empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) writes: Vec<Write>,
    /// Other levers and what to weigh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) note: Option<String>,
}

impl Fix {
    /// A fix pcielab prints and never performs: a `setpci` write, a kernel parameter (which
    /// takes a reboot), firmware, or a command the user runs.
    pub(crate) fn printed(lever: Lever, command: String) -> Fix {
        Fix {
            lever,
            command,
            reboot: lever == Lever::KernelParameter,
            writes: Vec::new(),
            note: None,
        }
    }

    /// The same fix with what to weigh before making it.
    pub(crate) fn noting(self, note: impl Into<String>) -> Fix {
        Fix {
            note: Some(note.into()),
            ..self
        }
    }
}

/// What pcielab's model says the fix gains (or costs), or why it says nothing.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub(crate) enum Prediction {
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
        /// The condition the gain holds on, where it is not the machine as read ("if it ran
        /// at load"): an `info` finding's gain always carries one.
        #[serde(skip_serializing_if = "Option::is_none")]
        condition: Option<String>,
    },
    NotPredicted {
        reason: String,
    },
}

impl Prediction {
    pub(crate) fn predicted(
        metric: &str,
        before: f64,
        after: f64,
        unit: &str,
        model: String,
    ) -> Self {
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
            condition: None,
        }
    }

    /// The same gain, holding only on `condition` (a `NotPredicted` stays as it is).
    pub(crate) fn conditional(mut self, holds_if: &str) -> Self {
        if let Prediction::Predicted { condition, .. } = &mut self {
            *condition = Some(holds_if.to_string());
        }
        self
    }

    pub(crate) fn not_predicted(reason: impl Into<String>) -> Self {
        Prediction::NotPredicted {
            reason: reason.into(),
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct Finding {
    /// The stable rule id (one of [`CHECKS`]).
    pub(crate) id: &'static str,
    pub(crate) severity: Severity,
    /// What it concerns: "0000:03:00.0", "link 0000:00:01.0 -> 0000:03:00.0", "cpu 4-7",
    /// "irq 45", "devfreq dmc", "machine".
    pub(crate) subject: String,
    /// The PCI function it is filed under (`--ignore ID@BDF`, the exporter's `function`
    /// label); `None` for machine-wide findings.
    pub(crate) function: Option<String>,
    pub(crate) summary: String,
    pub(crate) evidence: Vec<Evidence>,
    pub(crate) fix: Fix,
    /// The intent this finding assumed.
    pub(crate) intent: Intent,
    pub(crate) prediction: Prediction,
}

/// Subjects a check could not judge, and why: what the input lacks and how to get it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct NotJudged {
    pub(crate) reason: String,
    /// The functions, links or parts of the machine not judged for this reason.
    pub(crate) subjects: Vec<String>,
}

/// How much of its subjects one check could judge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CheckStatus {
    /// Every subject judged: a finding or clean.
    Judged,
    /// Some subjects judged, others not (listed with the reason).
    PartlyJudged,
    /// No subject judged: the input lacks what the check reads.
    NotJudged,
    /// The machine has nothing this check looks at (no busy endpoint, no link).
    NothingToJudge,
}

impl CheckStatus {
    pub(crate) fn name(self) -> &'static str {
        match self {
            CheckStatus::Judged => "judged",
            CheckStatus::PartlyJudged => "partly judged",
            CheckStatus::NotJudged => "not judged",
            CheckStatus::NothingToJudge => "nothing to judge",
        }
    }
}

/// What one check made of the machine: per subject a finding, judged clean, or not judged.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct CheckReport {
    pub(crate) check: &'static str,
    pub(crate) status: CheckStatus,
    /// Subjects judged, with a finding or clean.
    pub(crate) judged: usize,
    /// Findings made, those muted by `--ignore` included.
    pub(crate) findings: usize,
    /// Subjects not judged, grouped by reason.
    pub(crate) not_judged: Vec<NotJudged>,
}

impl CheckReport {
    /// How many subjects were not judged.
    pub(crate) fn not_judged_count(&self) -> usize {
        self.not_judged.iter().map(|n| n.subjects.len()).sum()
    }
}

/// The whole answer of `advise`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Advice {
    pub(crate) machine: String,
    pub(crate) intent: Intent,
    /// Every check run, in [`CHECKS`] order, with what it could and could not judge.
    pub(crate) checks: Vec<CheckReport>,
    /// Findings muted by `--ignore`, counted so a fleet sees they exist.
    pub(crate) muted: usize,
    pub(crate) findings: Vec<Finding>,
}

impl Advice {
    /// The most severe finding's severity, `None` with no findings.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }
}

/// Every check, by stable rule id, with what it looks at.
pub(crate) const CHECKS: [(&str, &str); 16] = [
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
        "acs-isolation",
        "a port or multi-function device without the ACS isolation controls (isolation intent)",
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
    pub(crate) id: String,
    pub(crate) at: String,
    /// Set when it muted a finding in a run, so one that names nothing can be reported.
    matched: std::cell::Cell<bool>,
}

impl Mute {
    /// An `--ignore` entry (`RULE` or `RULE@BDF`) as a mute; bad input names what is wrong with it.
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
            matched: std::cell::Cell::new(false),
        })
    }

    pub(crate) fn mutes(&self, finding: &Finding) -> bool {
        let mutes = self.id == finding.id
            && (finding.function.as_deref() == Some(self.at.as_str())
                || finding.subject == self.at);
        if mutes {
            self.matched.set(true);
        }
        mutes
    }

    /// After a run that produced `advice`: a warning when this mute muted nothing (a subject
    /// that does not exist on this machine, or no longer does), naming the closest subjects
    /// the run found; `None` when it muted a finding.
    pub fn unmatched_warning(&self, advice: &Advice) -> Option<String> {
        if self.matched.get() {
            return None;
        }
        let subjects: Vec<String> = advice
            .findings
            .iter()
            .flat_map(|f| {
                [Some(&f.subject), f.function.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(move |at| format!("{}@{at}", f.id))
            })
            .collect();
        let wanted = format!("{}@{}", self.id, self.at);
        let closest = crate::pmu::catalog::nearest(&wanted, subjects.iter().map(String::as_str));
        Some(format!(
            "--ignore {wanted} matched no finding on this machine{}",
            if closest.is_empty() {
                String::new()
            } else {
                format!("; closest: {}", closest.join(", "))
            }
        ))
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
    /// What the machine is tuned for: it decides which findings apply and how they are ranked.
    pub intent: Intent,
    /// Check ids to run; empty runs every check.
    pub only: Vec<&'static str>,
    /// Findings to leave out (`--ignore`), by rule or by rule and function.
    pub ignore: Vec<Mute>,
    /// A fitted platform model: gains beyond the link model (reads, latency) are predicted with it.
    pub platform: Option<PlatformModel>,
    /// How many times a host's link state is read before a speed drop is called a downtrain
    /// (devices lower their speed when idle), and the pause between reads.
    pub link_samples: u32,
    /// Time between the link samples a busy-link check takes.
    pub sample_interval: std::time::Duration,
}

/// What every check receives.
pub(crate) struct Context<'a> {
    pub(crate) topology: &'a crate::topology::Topology,
    pub(crate) facts: &'a Facts,
    pub(crate) options: &'a AdviseOptions,
    pub(crate) platform: Option<&'a PlatformModel>,
    /// The pci directory of a machine with sysfs, for re-reading link state.
    pub(crate) pci_dir: Option<std::path::PathBuf>,
    /// What kind of input the facts came from, to say why one is missing.
    pub(crate) input: crate::machine::missing::Input,
    /// The simulator behind a `sim:` machine: its devices' access latencies and its `[sim]`
    /// IRQ placement let ASPM and IRQ findings predict a workload's change.
    pub(crate) simulated: Option<&'a crate::sim::SimulatedPcie>,
}

/// What one check makes of its subjects, built as it walks them: a finding, judged clean, or
/// not judged with the reason (from `machine::missing`). A check in the older style
/// (`Result<Vec<Finding>, String>`) ports by `found` for each push, `clean` where it
/// `continue`d past a subject it looked at, and `not_judged` where a fact was `None`.
#[derive(Debug, Default)]
pub(crate) struct Judged {
    pub(crate) findings: Vec<Finding>,
    pub(crate) judged: usize,
    pub(crate) not_judged: Vec<NotJudged>,
}

impl Judged {
    /// A subject judged and found clean.
    pub(crate) fn clean(&mut self) {
        self.judged += 1;
    }

    /// A subject judged, with its finding.
    pub(crate) fn found(&mut self, finding: Finding) {
        self.judged += 1;
        self.findings.push(finding);
    }

    /// `subjects` judged at once, with the one finding that covers them (CPUs serving IRQs).
    pub(crate) fn found_on(&mut self, subjects: usize, finding: Finding) {
        self.judged += subjects;
        self.findings.push(finding);
    }

    /// A subject the input does not let the check judge.
    pub(crate) fn not_judged(&mut self, subject: impl std::fmt::Display, reason: String) {
        let subject = subject.to_string();
        match self.not_judged.iter_mut().find(|n| n.reason == reason) {
            Some(group) => group.subjects.push(subject),
            None => self.not_judged.push(NotJudged {
                reason,
                subjects: vec![subject],
            }),
        }
    }

    /// Nothing judged: the whole check lacks its input (`subject` names what, "machine").
    pub(crate) fn nothing(subject: &str, reason: String) -> Judged {
        let mut judged = Judged::default();
        judged.not_judged(subject, reason);
        judged
    }

    pub(crate) fn status(&self) -> CheckStatus {
        match (self.judged, self.not_judged.is_empty()) {
            (0, true) => CheckStatus::NothingToJudge,
            (0, false) => CheckStatus::NotJudged,
            (_, true) => CheckStatus::Judged,
            (_, false) => CheckStatus::PartlyJudged,
        }
    }
}

/// The result of one check.
pub(crate) type CheckOutcome = Judged;

/// The size and queue depth of the request–response workload ASPM and IRQ-placement findings
/// predict for: 4 KiB reads, one at a time (the latency benchmark drive datasheets quote).
pub(crate) const QD1_READ_BYTES: u64 = 4096;

/// The simulated device `bdf`'s 4 KiB reads at queue depth 1, as IOPS with the path's ASPM
/// exits and the interrupt cost `before`, then `after` the fix: `model::io::RequestResponse`,
/// the function the simulator times fio with. `None` when `bdf` is not a simulated disk.
pub(crate) fn qd1_read_prediction(
    sim: &crate::sim::SimulatedPcie,
    bdf: crate::pcie::Bdf,
    before: (&crate::model::io::LinkPower, f64),
    after: (&crate::model::io::LinkPower, f64),
) -> Option<Prediction> {
    let block = sim.devices.get(&bdf)?.block()?;
    let io = sim.request_response(bdf, block, 1.0, QD1_READ_BYTES, 1);
    let describe = |(power, irq): (&crate::model::io::LinkPower, f64)| {
        format!(
            "ASPM exit {} ns, interrupt +{irq} ns",
            power.exit_ns(io.idle_gap_ns())
        )
    };
    Some(Prediction::predicted(
        "4 KiB reads at queue depth 1 (request–response)",
        io.iops(before.0, before.1),
        io.iops(after.0, after.1),
        "IOPS",
        format!(
            "model::io request–response, as the simulator times fio: access {} ns + service {} ns + read round trip {} ns, link idle {} ns between I/Os (L0s entry {} ns, L1 entry {} ns); before: {}; after: {}",
            io.access_ns,
            io.service_ns,
            io.round_trip_ns,
            io.idle_gap_ns(),
            before.0.l0s_entry_ns,
            before.0.l1_entry_ns,
            describe(before),
            describe(after)
        ),
    ))
}
