//! `pcielab report`: one self-contained HTML page about a machine and the results given to it.
//! The machine's topology diagram with ceilings and warnings, its PMUs, then one section per
//! result file (`stat`, `model`, `fit`, `topo`, `topo --p2p`, `sim run`, `lab check` JSON),
//! each with its plot and the table beneath. Everything is inline — styles, SVG, no script, no
//! URL — so the page opens offline in any browser and prints cleanly (print styles keep a
//! figure on one page).

use std::fmt::Write as _;

use super::document::Document;
use crate::advise::{Advice, Severity};
use crate::error::Result;
use crate::lab::check::{CheckReport, Status as CheckStatus};
use crate::model::fit::{FitDocument, Status};
use crate::model::sweep::{latency_text, SizeSweep};
use crate::plot::{self, value_text};
use crate::pmu::stat::{EventStatus, StatDocument};
use crate::pmu::PmuDevice;
use crate::qos::scenario::Outcome;
use crate::topology::p2p::{MapType, Reason, Report as P2pReport, Verdict};
use crate::topology::render::{FunctionJson, TopologyJson};

/// What the page says about the machine itself.
pub struct MachineFacts {
    /// The `--machine` it was read from.
    pub selector: String,
    /// The machine's topology as `topo --json` gives it.
    pub topology: TopologyJson,
    /// Its PMU devices.
    pub pmus: Vec<PmuDevice>,
    /// `pcielab advise` on the machine (default intent); `None` when it could not run.
    pub advice: Option<Advice>,
}

/// One result file given with `--from`.
pub struct ResultFile {
    /// The path as given, shown as the section's source.
    pub origin: String,
    /// The document the file held.
    pub document: Document,
}

/// `&`, `<`, `>` and quotes as HTML entities.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A table: headings and rows of cells already as text; `marked` rows are highlighted.
struct Table {
    headings: Vec<String>,
    rows: Vec<Vec<String>>,
    marked: Vec<bool>,
}

impl Table {
    fn new(headings: &[&str]) -> Table {
        Table {
            headings: headings.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            marked: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.row_marked(cells, false);
    }

    fn row_marked(&mut self, cells: Vec<String>, marked: bool) {
        self.rows.push(cells);
        self.marked.push(marked);
    }

    fn html(&self) -> String {
        let mut out = String::from("<table>\n<thead><tr>");
        for h in &self.headings {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr></thead>\n<tbody>\n");
        for (row, marked) in self.rows.iter().zip(&self.marked) {
            out.push_str(if *marked {
                "<tr class=\"warn\">"
            } else {
                "<tr>"
            });
            for cell in row {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
        out
    }
}

/// An SVG document as it goes inline into HTML: the XML namespace is implied there, so the
/// page carries no URL at all.
fn inline_svg(svg: &str, label: &str) -> String {
    let body = svg
        .replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
        .replacen(
            "<svg ",
            &format!("<svg role=\"img\" aria-label=\"{}\" ", escape(label)),
            1,
        );
    format!("<figure>\n{}</figure>\n", body.trim_end())
}

const STYLE: &str = "
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif;
       margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #111; background: #fff;
       line-height: 1.4; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.3rem; border-bottom: 2px solid #ccc; padding-bottom: 0.2rem; margin-top: 2.5rem; }
h3 { font-size: 1.05rem; margin-top: 1.4rem; }
.meta { color: #555; margin-top: 0; }
nav ol { columns: 2; }
figure { margin: 1rem 0; overflow-x: auto; }
figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td { font-variant-numeric: tabular-nums; }
tr.warn td { background: #fde8e8; }
ul.warnings li { color: #a00000; }
.source { font-family: ui-monospace, 'DejaVu Sans Mono', monospace; font-size: 0.85rem; color: #444; }
@page { margin: 14mm; }
@media print {
  body { margin: 0; max-width: none; font-size: 10pt; }
  nav { display: none; }
  h2 { break-after: avoid; page-break-after: avoid; }
  figure { break-inside: avoid; page-break-inside: avoid; overflow: visible; }
  figure svg { max-height: 235mm; width: auto; }
  tr { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
  section { break-before: page; page-break-before: always; }
  section:first-of-type { break-before: auto; page-break-before: auto; }
}
";

/// The whole page.
pub fn page(machine: Option<&MachineFacts>, results: &[ResultFile]) -> Result<String> {
    let title = match machine {
        Some(m) => format!("pcielab report: {}", m.selector),
        None => "pcielab report".to_string(),
    };
    let mut sections: Vec<(String, String, String)> = Vec::new();
    if let Some(m) = machine {
        sections.push((
            "topology".into(),
            format!("Topology of {}", m.topology.name),
            topology_section(&m.topology)?,
        ));
        sections.push((
            "pmus".into(),
            "PMU availability".into(),
            pmu_section(&m.selector, &m.pmus),
        ));
        if let Some(advice) = &m.advice {
            sections.push(("advice".into(), "Advice".into(), advice_section(advice)));
        }
    }
    for (i, r) in results.iter().enumerate() {
        let (heading, body) = result_section(r)?;
        sections.push((format!("result-{}", i + 1), heading, body));
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{}</h1>\n\
         <p class=\"meta\">Written by pcielab {} from {}.</p>\n</header>\n",
        escape(&title),
        escape(&title),
        env!("CARGO_PKG_VERSION"),
        match (machine, results.len()) {
            (Some(_), 0) => "the machine".to_string(),
            (Some(_), n) => format!("the machine and {n} result file(s)"),
            (None, n) => format!("{n} result file(s)"),
        }
    );
    out.push_str("<nav>\n<h2>Contents</h2>\n<ol>\n");
    for (id, heading, _) in &sections {
        let _ = writeln!(out, "<li><a href=\"#{id}\">{}</a></li>", escape(heading));
    }
    out.push_str("</ol>\n</nav>\n");
    for (id, heading, body) in &sections {
        let _ = write!(
            out,
            "<section id=\"{id}\">\n<h2>{}</h2>\n{body}</section>\n",
            escape(heading)
        );
    }
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

fn result_section(r: &ResultFile) -> Result<(String, String)> {
    let source = format!(
        "<p class=\"source\">{} — from {}</p>\n",
        escape(&r.origin),
        escape(r.document.kind().command())
    );
    let (heading, body) = match &r.document {
        Document::Stat(doc) => ("PMU counts".to_string(), stat_body(doc)?),
        Document::Model(sweep) => (
            format!("Link model Gen{} x{}", sweep.gen, sweep.width),
            model_body(sweep)?,
        ),
        Document::Fit(doc) => (
            match doc {
                FitDocument::Prediction(_) => "Platform prediction",
                FitDocument::Fit(_) => "Platform fit",
            }
            .to_string(),
            fit_body(doc)?,
        ),
        Document::Topology(doc) => (format!("Topology of {}", doc.name), topology_section(doc)?),
        Document::P2p(doc) => ("P2PDMA verdicts".to_string(), p2p_body(doc)?),
        Document::Scenario(outcome) => (
            format!("QoS scenario {}", outcome.name),
            scenario_body(outcome)?,
        ),
        Document::LabCheck(doc) => (format!("QEMU lab check of {}", doc.spec), lab_body(doc)?),
    };
    Ok((heading, format!("{source}{body}")))
}

fn optional(v: Option<f64>) -> String {
    v.map_or("-".into(), value_text)
}

fn link_of(f: &FunctionJson) -> (String, String) {
    let Some(l) = &f.link else {
        return ("-".into(), "-".into());
    };
    let text = |gts: Option<f64>, width: Option<u8>| match (gts, width) {
        (Some(s), Some(w)) => format!("{s} GT/s x{w}"),
        _ => "-".into(),
    };
    (
        text(l.speed_gts, l.width),
        text(l.max_speed_gts, l.max_width),
    )
}

fn topology_section(doc: &TopologyJson) -> Result<String> {
    let mut out = inline_svg(
        &plot::topology::svg(doc)?,
        &format!("topology of {}", doc.name),
    );
    let warnings: Vec<String> = doc
        .functions
        .iter()
        .flat_map(|f| f.warnings.iter().map(move |w| format!("{}: {w}", f.bdf)))
        .collect();
    out.push_str("<h3>Warnings</h3>\n");
    if warnings.is_empty() {
        out.push_str("<p>None: every link trained as expected and no check found a problem.</p>\n");
    } else {
        out.push_str("<ul class=\"warnings\">\n");
        for w in &warnings {
            let _ = writeln!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h3>Functions</h3>\n");
    let mut t = Table::new(&[
        "function",
        "kind",
        "name",
        "link (current)",
        "link (capable)",
        "achievable MB/s",
        "limited by",
        "driver",
    ]);
    for f in &doc.functions {
        let (now, capable) = link_of(f);
        let downgraded = f.link.as_ref().is_some_and(|l| l.downgraded);
        t.row_marked(
            vec![
                f.bdf.clone(),
                f.kind.name().to_string(),
                f.name.clone().unwrap_or_default(),
                if downgraded {
                    format!("{now} (downgraded)")
                } else {
                    now
                },
                capable,
                optional(f.ceiling_achievable_mbps),
                f.ceiling_limited_by.clone().unwrap_or_else(|| "-".into()),
                f.driver.clone().unwrap_or_else(|| "-".into()),
            ],
            downgraded || !f.warnings.is_empty(),
        );
    }
    out += &t.html();
    Ok(out)
}

/// The findings of `pcielab advise` as a table, worst first, and the checks it could not run.
fn advice_section(advice: &Advice) -> String {
    let mut out = format!(
        "<p>{} finding(s) for intent {}; rule ids, evidence and limits: docs/advise.md.</p>\n",
        advice.findings.len(),
        crate::advise::intent_name(advice.intent)
    );
    let mut findings: Vec<_> = advice.findings.iter().collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    if !findings.is_empty() {
        let mut t = Table::new(&[
            "severity",
            "rule",
            "subject",
            "finding",
            "evidence",
            "fix",
            "predicted",
        ]);
        for f in findings {
            let evidence: Vec<String> = f
                .evidence
                .iter()
                .map(|e| format!("{} = {}", e.field, e.value))
                .collect();
            t.row_marked(
                vec![
                    f.severity.name().to_string(),
                    f.id.to_string(),
                    f.subject.clone(),
                    f.summary.clone(),
                    evidence.join("; "),
                    format!(
                        "{}{}",
                        f.fix.command,
                        if f.fix.reboot { " (reboot)" } else { "" }
                    ),
                    crate::advise::prediction_text(&f.prediction),
                ],
                f.severity != Severity::Info,
            );
        }
        out.push_str(&t.html());
    }
    let partial: Vec<_> = advice
        .checks
        .iter()
        .filter(|c| !c.not_judged.is_empty())
        .collect();
    if !partial.is_empty() {
        out.push_str("<h3>Not judged</h3>\n<ul>\n");
        for check in partial {
            for group in &check.not_judged {
                let _ = writeln!(
                    out,
                    "<li>{} ({}, {} judged): {} not judged: {}</li>",
                    escape(check.check),
                    check.status.name(),
                    check.judged,
                    escape(&group.subjects.join(", ")),
                    escape(&group.reason)
                );
            }
        }
        out.push_str("</ul>\n");
    }
    out
}

fn pmu_section(selector: &str, pmus: &[PmuDevice]) -> String {
    if pmus.is_empty() {
        return format!(
            "<p>No PCIe PMU on {}: <code>pcielab pmu list --machine {}</code> says which driver and kernel \
             would provide one.</p>\n",
            escape(selector),
            escape(selector)
        );
    }
    let mut t = Table::new(&[
        "PMU",
        "also named",
        "family",
        "root port",
        "lanes",
        "events",
    ]);
    for p in pmus {
        t.row(vec![
            p.name.clone(),
            p.aliases.join(", "),
            serde_json::to_value(p.family)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            p.root_port.map_or("-".into(), |b| b.to_string()),
            p.lanes.to_string(),
            p.family.events().len().to_string(),
        ]);
    }
    format!(
        "<p>{} PCIe PMU(s); count with <code>pcielab stat --machine {} -a -e PMU/EVENT/</code>.</p>\n{}",
        pmus.len(),
        escape(selector),
        t.html()
    )
}

fn stat_body(doc: &StatDocument) -> Result<String> {
    let mut out = String::new();
    match plot::stat::chart(doc) {
        Some(chart) => out += &inline_svg(&plot::line_chart_svg(&chart)?, &chart.title),
        None => out.push_str("<p>Counted without -I: no series over time to plot.</p>\n"),
    }
    let _ = writeln!(out, "<h3>Totals over {:.3} s</h3>", doc.elapsed_s);
    let mut t = Table::new(&[
        "event",
        "count",
        "unit",
        "MB/s",
        "% of link",
        "on counter %",
        "status",
    ]);
    for e in &doc.events {
        t.row_marked(
            vec![
                e.event.clone(),
                e.count.map_or("-".into(), crate::text::thousands),
                e.unit.clone(),
                optional(e.bandwidth_mbps),
                optional(e.link_percent),
                value_text(e.running_percent),
                e.status.as_str().to_string(),
            ],
            e.status != EventStatus::Counted,
        );
    }
    out += &t.html();
    if let Some(first) = doc.intervals.first() {
        out.push_str("<h3>Per interval</h3>\n");
        let mut headings = vec!["time (s)".to_string()];
        headings.extend(first.events.iter().map(|e| {
            let unit = if e.bandwidth_mbps.is_some() {
                "MB/s"
            } else {
                "count"
            };
            format!("{} ({unit})", e.event)
        }));
        let mut t = Table::new(&headings.iter().map(String::as_str).collect::<Vec<_>>());
        for interval in &doc.intervals {
            let mut row = vec![value_text(interval.time_s)];
            row.extend(interval.events.iter().map(|e| match e.bandwidth_mbps {
                Some(bw) => value_text(bw),
                None => e.count.map_or("-".into(), crate::text::thousands),
            }));
            t.row(row);
        }
        out += &t.html();
    }
    Ok(out)
}

fn model_body(sweep: &SizeSweep) -> Result<String> {
    let chart = plot::model::chart(sweep);
    let mut out = inline_svg(&plot::line_chart_svg(&chart)?, &chart.title);
    let _ = writeln!(
        out,
        "<p>MPS {}, MRRS {}, RCB {}: line rate {} MB/s, link-achievable {} MB/s per direction.{}</p>",
        sweep.mps,
        sweep.mrrs,
        sweep.rcb,
        value_text(sweep.line_rate_mbps),
        value_text(sweep.achievable_mbps),
        sweep
            .platform_fitted_on
            .as_ref()
            .map_or(String::new(), |on| format!(" Platform fitted on {}.", escape(on)))
    );
    if let Some(warning) = &sweep.platform_warning {
        let _ = writeln!(out, "<p><strong>Warning:</strong> {}</p>", escape(warning));
    }
    let predicted = sweep.platform_fitted_on.is_some();
    let mut headings = vec![
        "size (bytes)",
        "write MB/s",
        "write % ach",
        "read MB/s",
        "read % ach",
        "MWr TLPs",
        "MRd TLPs",
        "CplD TLPs",
    ];
    if predicted {
        headings.extend(["platform write MB/s", "platform read MB/s"]);
    }
    let latency = sweep
        .points
        .iter()
        .any(|p| p.predicted_read_latency_ns.is_some());
    if latency {
        headings.push("platform read latency ns (± 1 sigma)");
    }
    let mut t = Table::new(&headings);
    let percent = |v: f64| value_text(v / sweep.achievable_mbps * 100.0);
    for p in &sweep.points {
        let mut row = vec![
            p.size.to_string(),
            value_text(p.write_mbps),
            percent(p.write_mbps),
            value_text(p.read_mbps),
            percent(p.read_mbps),
            p.write_tlps.to_string(),
            p.read_request_tlps.to_string(),
            p.completion_tlps.to_string(),
        ];
        if predicted {
            row.push(provenance_cell(
                p.predicted_write_mbps,
                p.predicted_write_in_sample,
            ));
            row.push(provenance_cell(
                p.predicted_read_mbps,
                p.predicted_read_in_sample,
            ));
        }
        if latency {
            row.push(latency_text(p));
        }
        t.row(row);
    }
    out += &t.html();
    Ok(out)
}

/// A platform value with "(in-sample)" when the fit saw its cell: it reproduces a measurement.
fn provenance_cell(value: Option<f64>, in_sample: Option<bool>) -> String {
    match in_sample {
        Some(true) => format!("{} (in-sample)", optional(value)),
        _ => optional(value),
    }
}

fn fit_body(doc: &FitDocument) -> Result<String> {
    let mut out = inline_svg(&plot::fit::svg(doc)?, "measured vs fitted and residuals");
    let (source, warnings, conflicts, params) = match doc {
        FitDocument::Prediction(p) => (
            format!("Predicted by a platform fitted on {}", p.platform_fitted_on),
            p.warnings.as_slice(),
            &[][..],
            &[][..],
        ),
        FitDocument::Fit(f) => (
            format!("Fitted on {}", f.fitted_on),
            &[][..],
            f.conflicts.as_slice(),
            f.params.as_slice(),
        ),
    };
    let _ = writeln!(
        out,
        "<p>{}: {} rows, rms residual {} %.</p>",
        escape(&source),
        doc.rows_used(),
        value_text(doc.rms_residual_percent())
    );
    for warning in warnings {
        let _ = writeln!(out, "<p><strong>Warning:</strong> {}</p>", escape(warning));
    }
    for conflict in conflicts {
        let _ = writeln!(
            out,
            "<p><strong>Conflict:</strong> {}</p>",
            escape(conflict)
        );
    }
    if !params.is_empty() {
        out.push_str("<h3>Parameters</h3>\n");
    }
    let mut t = Table::new(&["parameter", "value", "± 1 sigma", "unit", "status", "note"]);
    for p in params {
        t.row_marked(
            vec![
                p.key.to_string(),
                optional(p.value),
                optional(p.uncertainty),
                p.unit.to_string(),
                p.status.as_str().to_string(),
                p.note.clone(),
            ],
            p.status != Status::Fitted,
        );
    }
    if !params.is_empty() {
        out += &t.html();
    }
    out.push_str("<h3>Rows</h3>\n");
    let mut t = Table::new(&[
        "line",
        "workload",
        "measured MB/s",
        "predicted MB/s",
        "residual %",
        "cell",
    ]);
    for r in doc.rows() {
        t.row(vec![
            r.line.to_string(),
            r.workload.clone(),
            value_text(r.measured_mbps),
            value_text(r.predicted_mbps),
            value_text(r.residual_percent),
            match r.in_sample {
                Some(true) => "in-sample".into(),
                Some(false) => "predicted".into(),
                None => String::new(),
            },
        ]);
    }
    out += &t.html();
    Ok(out)
}

/// A reason as its JSON names it: `acs redirect bridges=["0000:00:01.0"]`, the tag's words
/// then each field, so the table shows the facts the document holds.
fn reason_text(r: &Reason) -> String {
    let value = serde_json::to_value(r).expect("a reason is plain data");
    let mut text = value["reason"].as_str().unwrap_or("?").replace('_', " ");
    if let Some(o) = value.as_object() {
        for (k, v) in o.iter().filter(|(k, _)| *k != "reason") {
            let _ = write!(
                text,
                " {k}={}",
                v.as_str().map_or(v.to_string(), str::to_string)
            );
        }
    }
    text
}

fn p2p_body(doc: &P2pReport) -> Result<String> {
    let mut out = inline_svg(&plot::topology::p2p_svg(doc)?, "P2PDMA verdict matrix");
    let mut t = Table::new(&["provider", "client", "distance", "mapping", "reasons"]);
    let mut row = |provider: String, client: String, p: &Verdict| {
        let reasons: Vec<String> = p.reasons.iter().map(reason_text).collect();
        t.row_marked(
            vec![
                provider,
                client,
                p.distance.to_string(),
                p.map.describe().to_string(),
                reasons.join("; "),
            ],
            p.map == MapType::NotSupported,
        );
    };
    if doc.pairs.is_empty() {
        // Grouped: one row per meeting point and pair of sides, deepest first.
        for gv in &doc.group_verdicts {
            let meeting = gv
                .meeting
                .map_or("root complex".to_string(), |b| b.to_string());
            row(
                gv.provider_groups.join(","),
                format!(
                    "{} ({} pairs meeting at {meeting})",
                    gv.client_groups.join(","),
                    gv.pairs
                ),
                &gv.verdict,
            );
        }
    } else {
        for p in &doc.pairs {
            row(p.provider.to_string(), p.client.to_string(), p);
        }
    }
    out += &t.html();
    Ok(out)
}

fn scenario_body(outcome: &Outcome) -> Result<String> {
    let chart = plot::scenario::chart(outcome);
    let mut out = inline_svg(&plot::line_chart_svg(&chart)?, &chart.title);
    let _ = writeln!(
        out,
        "<p>{} on {}.</p>",
        escape(&outcome.title),
        escape(&outcome.machine)
    );
    let mut headings = vec![outcome.x_label.as_str()];
    headings.extend(outcome.lines.iter().map(|l| l.label.as_str()));
    let mut t = Table::new(&headings);
    for x in outcome.xs() {
        let mut row = vec![value_text(x)];
        row.extend(outcome.lines.iter().map(|l| optional(l.at(x))));
        t.row(row);
    }
    out += &t.html();
    Ok(out)
}

fn lab_body(doc: &CheckReport) -> Result<String> {
    let mut out = inline_svg(&crate::lab::picture::svg(doc)?, "lab check matrix");
    let _ = writeln!(
        out,
        "<p>{}: {} mismatches, {} expected differences.</p>",
        if doc.ok {
            "The guest agrees with the spec"
        } else {
            "The guest does NOT agree with the spec"
        },
        doc.mismatches,
        doc.expected
    );
    let mut t = Table::new(&["function", "field", "spec", "guest", "status", "why"]);
    for r in &doc.rows {
        t.row_marked(
            vec![
                r.bdf.to_string(),
                r.field.to_string(),
                r.spec.clone(),
                r.guest.clone(),
                r.status.as_str().to_string(),
                r.why.clone().unwrap_or_default(),
            ],
            r.status == CheckStatus::Mismatch,
        );
    }
    out += &t.html();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
    }

    #[test]
    fn inline_svg_drops_the_namespace_url_and_labels_the_image() {
        let svg = "<svg width=\"10\" height=\"10\" viewBox=\"0 0 10 10\" xmlns=\"http://www.w3.org/2000/svg\">\n</svg>\n";
        let html = inline_svg(svg, "a < b");
        assert!(!html.contains("http"), "{html}");
        assert!(
            html.contains("<svg role=\"img\" aria-label=\"a &lt; b\" width=\"10\""),
            "{html}"
        );
    }
}
