//! `pcielab advise`: what is misconfigured on a machine for the user's intent, with the evidence
//! (the sysfs file or config-space field as `lspci -vvv` names it, and its value), the fix (the
//! lever, the command, whether it needs a reboot) and the gain pcielab's own model predicts, or
//! why it predicts none. Checks over PCIe links live in links/, checks over the CPUs, IRQs and
//! IOMMU serving a device in system.rs; the facts they read beyond the topology in facts.rs;
//! applying and undoing the runtime fixes in apply.rs.
//!
//! Rule ids are stable: fleets mute known exceptions with `--ignore ID@BDF` and alert on them
//! (`pcielab_advice_findings`). Every check says, per subject, a finding, judged clean, or not
//! judged with the reason (`machine::missing`: what the input lacks and how to get it); a check that
//! could not look is never reported as clean.

pub(crate) mod apply;
pub(crate) mod corpus;
pub(crate) mod facts;
mod finding;
mod links;
mod system;

pub use apply::{undo, ApplyRequest, Change, ChangeReport, Target, UndoOptions};
pub use corpus::{run_corpus, CorpusReport};

pub use finding::*;

use crate::error::Result;
use crate::machine::Machine;
use facts::read_facts;

/// Runs the checks on `machine`.
pub fn advise(machine: &Machine, options: &AdviseOptions) -> Result<Advice> {
    let spec = machine.spec()?;
    let spec_model = spec.platform_model()?;
    let pci_dir = machine.pci_dir();
    let root = machine.system_root();
    let facts = read_facts(&spec.topology, pci_dir.as_deref(), root.as_deref());
    let input = machine.input()?;
    // A machine with a simulator predicts workloads with it; elsewhere this is an error we do
    // not need.
    let simulated = machine.simulator().ok();
    let context = Context {
        simulated: simulated.as_ref(),
        topology: &spec.topology,
        facts: &facts,
        options,
        platform: options.platform.as_ref().or(spec_model.as_ref()),
        pci_dir,
        input,
    };
    let mut advice = run_checks(&context, &machine.selector().to_string());
    quote_input_lines(&mut advice, &spec.topology);
    Ok(advice)
}

/// Quotes, beside each piece of config-space evidence, the input line it was read from, where
/// the machine was read from text that keeps one per fact (lspci output: "LnkSta: …" evidence
/// quotes the function's LnkSta line). The function is the one the evidence's file names, else
/// the finding's.
fn quote_input_lines(advice: &mut Advice, topology: &crate::topology::Topology) {
    for finding in &mut advice.findings {
        for evidence in &mut finding.evidence {
            let named = evidence
                .source
                .split(['/', ' '])
                .find_map(|part| part.parse::<crate::pcie::Bdf>().ok());
            let bdf = named.or_else(|| finding.function.as_deref()?.parse().ok());
            let (register, flag) = evidence
                .field
                .split_once(':')
                .unwrap_or((evidence.field.as_str(), ""));
            let fact = register.trim().to_ascii_lowercase();
            // A flag's own line where the reader kept one ("devctl.rlxdord"), else the
            // register's; the reader keeps one line per capability where lspci prints its
            // control register only (ACSCtl is the "acs" fact).
            let flag_fact = format!("{fact}.{}", flag.trim().to_ascii_lowercase());
            let read = bdf.and_then(|b| topology.get(b)).map(|f| &f.evidence);
            let quoted = read.and_then(|read| {
                read.line(&flag_fact)
                    .or_else(|| read.line(&fact))
                    .or_else(|| read.line(fact.strip_suffix("ctl")?))
            });
            if let Some((number, text)) = quoted {
                evidence.line = Some(format!("line {number}: {}", text.trim()));
            }
        }
    }
}

fn run_checks(context: &Context, machine: &str) -> Advice {
    let selected = |id: &str| context.options.only.is_empty() || context.options.only.contains(&id);
    let mut advice = Advice {
        machine: machine.to_string(),
        intent: context.options.intent,
        checks: Vec::new(),
        muted: 0,
        findings: Vec::new(),
    };
    for (id, _) in CHECKS {
        if !selected(id) {
            continue;
        }
        let judged = match id {
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
            "acs-isolation" => links::acs_isolation(context),
            "iommu-translated" => system::iommu_translated(context),
            "irq-far-node" => system::irq_far_node(context),
            "cpu-governor" => system::cpu_governor(context),
            "cpu-idle-deep" => system::cpu_idle_deep(context),
            "devfreq-governor" => system::devfreq_governor(context),
            other => unreachable!("check {other} listed in CHECKS without a body"),
        };
        advice.checks.push(CheckReport {
            check: id,
            status: judged.status(),
            judged: judged.judged,
            findings: judged.findings.len(),
            not_judged: judged.not_judged,
        });
        for finding in judged.findings {
            if context.options.ignore.iter().any(|m| m.mutes(&finding)) {
                advice.muted += 1;
            } else {
                advice.findings.push(finding);
            }
        }
    }
    advice
}

/// The most subjects a text line lists before "… N more".
const SUBJECTS_SHOWN: usize = 4;

/// The findings as a table: severity, id, subject, summary, fix, prediction; then each check
/// that could not judge all its subjects, with the reason.
pub fn to_text(advice: &Advice) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let count = |status: CheckStatus| advice.checks.iter().filter(|c| c.status == status).count();
    let _ = writeln!(
        out,
        "{}: {} finding(s) for intent {} ({} check(s) judged, {} partly judged, {} not judged, {} with nothing to judge; {} muted)",
        advice.machine,
        advice.findings.len(),
        intent_name(advice.intent),
        count(CheckStatus::Judged),
        count(CheckStatus::PartlyJudged),
        count(CheckStatus::NotJudged),
        count(CheckStatus::NothingToJudge),
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
    for check in advice.checks.iter().filter(|c| !c.not_judged.is_empty()) {
        let _ = writeln!(
            out,
            "\n{}: {} ({} judged, {} not judged)",
            check.check,
            check.status.name(),
            check.judged,
            check.not_judged_count()
        );
        for group in &check.not_judged {
            let shown: Vec<&str> = group
                .subjects
                .iter()
                .take(SUBJECTS_SHOWN)
                .map(String::as_str)
                .collect();
            let more = group.subjects.len().saturating_sub(SUBJECTS_SHOWN);
            let _ = writeln!(
                out,
                "  not judged: {}{}: {}",
                shown.join(", "),
                if more > 0 {
                    format!(" … {more} more")
                } else {
                    String::new()
                },
                group.reason
            );
        }
    }
    out
}

pub(crate) fn intent_name(intent: Intent) -> &'static str {
    match intent {
        Intent::Throughput => "throughput",
        Intent::Latency => "latency",
        Intent::P2p => "p2p",
        Intent::Isolation => "isolation",
    }
}

/// "6300 → 7100 MB/s (+12.7 %, model)", "only if …: 6300 → …" or "not predicted: reason".
pub(crate) fn prediction_text(p: &Prediction) -> String {
    match p {
        Prediction::Predicted {
            metric,
            before,
            after,
            unit,
            change_percent,
            model,
            condition,
        } => format!(
            "{}{metric}: {} -> {} {unit} ({:+.1} %; {model})",
            condition
                .as_ref()
                .map_or(String::new(), |c| format!("only {c}: ")),
            crate::text::round_to(*before, 1),
            crate::text::round_to(*after, 1),
            change_percent
        ),
        Prediction::NotPredicted { reason } => format!("not predicted: {reason}"),
    }
}
