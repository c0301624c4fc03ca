//! A [`Sample`] as Prometheus text exposition format 0.0.4: each metric family written once
//! per scrape into one reused buffer, each function's labels formatted once (docs/fleet.md lists
//! the metrics).

use crate::advise::Advice;
use crate::observe::{FunctionSample, Sample, Traffic};
use crate::pcie::Bdf;
use crate::topology::health::AerCounts;
use crate::topology::Kind;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A label value with `\`, `"` and newlines escaped as the format requires.
pub(super) fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value as the text format writes it.
#[derive(Clone, Copy)]
enum Value {
    Count(u64),
    /// Shortest round-trip decimal (`2.5`, `16`).
    Real(f64),
    /// Rounded to a whole number.
    Whole(f64),
}

/// Writes one metric family straight into the response: its `# HELP`/`# TYPE` lines before
/// its first series, none at all when it has no series.
struct FamilyWriter<'o> {
    out: &'o mut String,
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    started: bool,
}

impl FamilyWriter<'_> {
    /// `name{labels[,key="value"]} value`
    fn series(&mut self, labels: &str, extra: Option<(&str, &str)>, value: Value) {
        let out = &mut *self.out;
        if !self.started {
            self.started = true;
            let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
            let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        }
        out.push_str(self.name);
        out.push('{');
        out.push_str(labels);
        if let Some((key, text)) = extra {
            out.push(',');
            out.push_str(key);
            out.push_str("=\"");
            out.push_str(text);
            out.push('"');
        }
        out.push_str("} ");
        match value {
            Value::Count(n) => out.push_str(itoa::Buffer::new().format(n)),
            Value::Real(x) => {
                let _ = write!(out, "{x}");
            }
            Value::Whole(x) => {
                let _ = write!(out, "{x:.0}");
            }
        }
        out.push('\n');
    }
}

/// The label set every series of a function starts with, kept while the function list stays.
struct FunctionLabels {
    bdf: Bdf,
    kind: Kind,
    port: Option<Bdf>,
    text: String,
}

/// Renders samples as Prometheus text into a buffer the caller keeps, so a scrape reuses the
/// last one's memory instead of building a new response (and its per-series strings) each
/// time; each function's label set is formatted once, not once per series per scrape.
#[derive(Default)]
pub struct MetricsRenderer {
    labels: Vec<FunctionLabels>,
    /// The `pcielab_advice_findings` family, rendered once: advice is read at start.
    findings: String,
}

impl MetricsRenderer {
    /// A renderer that also serves `advice` as `pcielab_advice_findings{check,severity,function}`
    /// (one series per distinct label set, valued with its number of findings; `function` is the
    /// BDF, or the subject of a machine-wide finding such as `cpu 0-15`) and
    /// `pcielab_advice_subjects{check,judgement}` (judged, not_judged).
    pub fn with_findings(advice: &Advice) -> MetricsRenderer {
        let mut counts: BTreeMap<(&str, &str, String), u64> = BTreeMap::new();
        for f in &advice.findings {
            let function = f.function.clone().unwrap_or_else(|| f.subject.clone());
            *counts
                .entry((f.id, f.severity.name(), function))
                .or_default() += 1;
        }
        let mut findings = String::new();
        let mut w = FamilyWriter {
            out: &mut findings,
            name: "pcielab_advice_findings",
            kind: "gauge",
            help: "Findings of pcielab advise (read at exporter start) by rule id, severity and function.",
            started: false,
        };
        for ((check, severity, function), n) in counts {
            let labels = format!(
                "check=\"{check}\",severity=\"{severity}\",function=\"{}\"",
                escape(&function)
            );
            w.series(&labels, None, Value::Count(n));
        }
        // Per check, the subjects judged and those the input did not let it judge: a check that
        // could not look must not read as a clean one.
        let mut w = FamilyWriter {
            out: &mut findings,
            name: "pcielab_advice_subjects",
            kind: "gauge",
            help: "Subjects (functions, links, pairs, CPUs) each advise check judged or could not judge (read at exporter start).",
            started: false,
        };
        for check in &advice.checks {
            let labels = format!("check=\"{}\"", check.check);
            for (judgement, n) in [
                ("judged", check.judged),
                ("not_judged", check.not_judged_count()),
            ] {
                w.series(
                    &labels,
                    Some(("judgement", judgement)),
                    Value::Count(n as u64),
                );
            }
        }
        MetricsRenderer {
            labels: Vec::new(),
            findings,
        }
    }

    /// Replaces `out` with the sample's metrics: every family the exporter serves
    /// (docs/fleet.md).
    pub fn render(&mut self, sample: &Sample, out: &mut String) {
        self.update_labels(sample);
        out.clear();
        let _ = writeln!(
            out,
            "# HELP pcielab_machine_info The machine this exporter observes and the pcielab version.\n\
             # TYPE pcielab_machine_info gauge\n\
             pcielab_machine_info{{machine=\"{}\",version=\"{}\"}} 1",
            escape(&sample.machine),
            env!("CARGO_PKG_VERSION")
        );
        let functions = &sample.functions;
        let labels = &self.labels;
        let mut family =
            |name, kind, help, each: &mut dyn FnMut(&FunctionSample, &str, &mut FamilyWriter)| {
                let mut w = FamilyWriter {
                    out: &mut *out,
                    name,
                    kind,
                    help,
                    started: false,
                };
                for (f, l) in functions.iter().zip(labels) {
                    each(f, &l.text, &mut w);
                }
            };
        let traffic = |get: fn(&Traffic) -> Option<u64>| {
            move |f: &FunctionSample, l: &str, w: &mut FamilyWriter| {
                if let Some(n) = f.traffic.as_ref().and_then(|t| Some((t, get(t)?))) {
                    w.series(l, Some(("source", n.0.source.name())), Value::Count(n.1));
                }
            }
        };
        family(
            "pcielab_rx_bytes_total",
            "counter",
            "Payload bytes toward the root complex (the root port's Rx: disk reads, received frames).",
            &mut traffic(|t| Some(t.rx_bytes)),
        );
        family(
            "pcielab_tx_bytes_total",
            "counter",
            "Payload bytes away from the root complex (the root port's Tx: disk writes, sent frames).",
            &mut traffic(|t| Some(t.tx_bytes)),
        );
        // Wire bytes come in pairs: a function shows both directions or neither.
        family(
            "pcielab_rx_wire_bytes_total",
            "counter",
            "Estimated bytes on the wire toward the root complex: payload plus TLP headers, framing and DLLPs (model).",
            &mut traffic(|t| t.tx_wire_bytes.and(t.rx_wire_bytes)),
        );
        family(
            "pcielab_tx_wire_bytes_total",
            "counter",
            "Estimated bytes on the wire away from the root complex (model).",
            &mut traffic(|t| t.rx_wire_bytes.and(t.tx_wire_bytes)),
        );
        let states = |f: &FunctionSample| {
            let link = &f.link;
            [
                ("current", link.current_gts, link.current_width),
                ("capable", link.capable_gts, link.capable_width),
            ]
        };
        family(
            "pcielab_link_speed_gts",
            "gauge",
            "Link speed in GT/s: state=current (trained now) or capable (the most both ends can do).",
            &mut |f, l, w| {
                for (state, gts, _) in states(f) {
                    if let Some(g) = gts {
                        w.series(l, Some(("state", state)), Value::Real(g));
                    }
                }
            },
        );
        family(
            "pcielab_link_width_lanes",
            "gauge",
            "Link width in lanes: state=current or capable.",
            &mut |f, l, w| {
                for (state, _, lanes) in states(f) {
                    if let Some(n) = lanes {
                        w.series(l, Some(("state", state)), Value::Count(u64::from(n)));
                    }
                }
            },
        );
        family(
            "pcielab_link_achievable_bytes_per_second",
            "gauge",
            "Payload bytes per second per direction the link can achieve at its current speed and width (model).",
            &mut |f, l, w| {
                if let Some(mbps) = f.achievable_mbps {
                    w.series(l, None, Value::Whole(mbps * 1e6));
                }
            },
        );
        let has_link =
            |f: &FunctionSample| f.link.capable_width.is_some() || f.link.current_width.is_some();
        family(
            "pcielab_link_downgraded",
            "gauge",
            "1 when the link trained slower or narrower than both ends can run.",
            &mut |f, l, w| {
                if has_link(f) {
                    w.series(l, None, Value::Count(u64::from(f.downgraded)));
                }
            },
        );
        family(
            "pcielab_link_down",
            "gauge",
            "1 when the function has a link that reports no trained width or speed (an empty slot's port too).",
            &mut |f, l, w| {
                if has_link(f) {
                    w.series(l, None, Value::Count(u64::from(f.link_down)));
                }
            },
        );
        family(
            "pcielab_link_judgement",
            "gauge",
            "1 for the link above this function (its device's lowest function) as topo and advise judge it: state full, slot-limited, power-managed-idle, downtrained or failed.",
            &mut |f, l, w| {
                if let Some(state) = f.link_judgement {
                    w.series(l, Some(("state", state)), Value::Count(1));
                }
            },
        );
        let severities = |a: &AerCounts| {
            [
                ("correctable", a.correctable, a.rootport_correctable),
                ("nonfatal", a.nonfatal, a.rootport_nonfatal),
                ("fatal", a.fatal, a.rootport_fatal),
            ]
        };
        family(
            "pcielab_aer_errors_total",
            "counter",
            "Errors the function logged (kernel aer_dev_correctable/nonfatal/fatal) by severity.",
            &mut |f, l, w| {
                for (severity, n, _) in severities(&f.link.aer) {
                    if let Some(n) = n {
                        w.series(l, Some(("severity", severity)), Value::Count(n));
                    }
                }
            },
        );
        family(
            "pcielab_aer_rootport_errors_total",
            "counter",
            "Error messages a root port received (kernel aer_rootport_total_err_*) by severity.",
            &mut |f, l, w| {
                for (severity, _, n) in severities(&f.link.aer) {
                    if let Some(n) = n {
                        w.series(l, Some(("severity", severity)), Value::Count(n));
                    }
                }
            },
        );
        family(
            "pcielab_link_state_seconds_total",
            "counter",
            "Time the link spent in each power state (state=l0, l0s, l1), where a PMU counts it.",
            &mut |f, l, w| {
                if let Some(s) = f.link_states {
                    for (state, ns) in [("l0", s.l0_ns), ("l0s", s.l0s_ns), ("l1", s.l1_ns)] {
                        w.series(l, Some(("state", state)), Value::Real(ns as f64 / 1e9));
                    }
                }
            },
        );
        family(
            "pcielab_pmu_present",
            "gauge",
            "1 when a PCIe PMU counts this root port's traffic.",
            &mut |f, l, w| {
                if f.kind == Kind::RootPort {
                    w.series(l, None, Value::Count(u64::from(f.pmu)));
                }
            },
        );
        out.push_str(&self.findings);
    }

    /// Formats each function's labels again only when the function list changed.
    fn update_labels(&mut self, sample: &Sample) {
        let same = self.labels.len() == sample.functions.len()
            && self
                .labels
                .iter()
                .zip(&sample.functions)
                .all(|(l, f)| l.bdf == f.bdf && l.kind == f.kind && l.port == f.root_port);
        if same {
            return;
        }
        self.labels = sample
            .functions
            .iter()
            .map(|f| FunctionLabels {
                bdf: f.bdf,
                kind: f.kind,
                port: f.root_port,
                text: format!(
                    "function=\"{}\",port=\"{}\",kind=\"{}\"",
                    f.bdf,
                    f.root_port.map(|p| p.to_string()).unwrap_or_default(),
                    f.kind.name()
                ),
            })
            .collect();
    }
}

/// The sample as Prometheus text: every metric family the exporter serves (docs/fleet.md).
pub fn render_metrics(sample: &Sample) -> String {
    let mut out = String::new();
    MetricsRenderer::default().render(sample, &mut out);
    out
}
