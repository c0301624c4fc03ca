//! `perf stat`-compatible reports of a counting run: the text form (counts with thousands
//! separators, `(49.99%)` when time-shared, `<not counted>`, "seconds time elapsed"), the
//! `-x SEP` CSV form, `-I` interval lines, and per-event JSON records. For data-payload events
//! it adds the bytes, MB/s over the window and the share of the link's ceiling.

use serde::Serialize;

use crate::error::Result;
use crate::pmu::catalog::Unit;
use crate::pmu::session::{CountOptions, CounterBackend, Counts, Reading};
use crate::pmu::{resolve, EventSpec, ResolvedEvent};
use crate::report::thousands;

/// One event's result, as the JSON output documents it (docs/pmu.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventReport {
    pub pmu: String,
    pub event: String,
    /// What perf reports before scaling (in the event's unit).
    pub raw_count: u64,
    /// The estimate raw × enabled / running; `null` when the event never ran.
    pub count: Option<f64>,
    pub unit: String,
    /// `count` in bytes, for events measured in bytes or 16-byte units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    pub enabled_ns: u64,
    pub running_ns: u64,
    /// The measurement window: the time the event was enabled, in seconds.
    pub window_s: f64,
    #[serde(rename = "bandwidth_MBps", skip_serializing_if = "Option::is_none")]
    pub bandwidth_mbps: Option<f64>,
    /// The root port link's link-achievable payload MB/s per direction (`model::transfer::achievable_mbps`).
    #[serde(
        rename = "link_achievable_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub link_ceiling_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_percent: Option<f64>,
}

impl EventReport {
    pub fn new(event: &ResolvedEvent, reading: &Reading, link_ceiling_mbps: Option<f64>) -> Self {
        let count = reading.estimate();
        let window_s = reading.enabled_ns as f64 / 1e9;
        let bytes = match (event.unit(), count) {
            (Unit::Bytes(n), Some(c)) => Some(c * f64::from(n)),
            _ => None,
        };
        let bandwidth_mbps = bytes.filter(|_| window_s > 0.0).map(|b| b / window_s / 1e6);
        EventReport {
            pmu: event.pmu_name.clone(),
            event: event.display.clone(),
            raw_count: reading.value,
            count,
            unit: event.unit().label(),
            bytes,
            enabled_ns: reading.enabled_ns,
            running_ns: reading.running_ns,
            window_s,
            bandwidth_mbps,
            link_ceiling_mbps: link_ceiling_mbps.filter(|_| bytes.is_some()),
            link_percent: bandwidth_mbps
                .zip(link_ceiling_mbps)
                .map(|(bw, ceiling)| 100.0 * bw / ceiling),
        }
    }

    fn running_percent(&self) -> Option<f64> {
        (self.running_ns < self.enabled_ns && self.enabled_ns > 0)
            .then(|| 100.0 * self.running_ns as f64 / self.enabled_ns as f64)
    }
}

/// Reports for every event of a run.
pub fn reports(
    events: &[ResolvedEvent],
    readings: &[Reading],
    ceiling: impl Fn(&ResolvedEvent) -> Option<f64>,
) -> Vec<EventReport> {
    events
        .iter()
        .zip(readings)
        .map(|(e, r)| EventReport::new(e, r, ceiling(e)))
        .collect()
}

/// A finished `stat` run: the events, perf's readings and their reports.
#[derive(Debug, Clone)]
pub struct StatOutcome {
    pub events: Vec<ResolvedEvent>,
    pub counts: Counts,
    pub reports: Vec<EventReport>,
    /// The link ceiling (MB/s) of each PMU device, by device index.
    pub ceilings: Vec<Option<f64>>,
}

/// Resolves `groups` against the backend's PMUs, counts them over its workload and reports.
/// `ceilings` gives each PMU device's link ceiling in MB/s (by device index).
pub fn count_events(
    backend: &mut dyn CounterBackend,
    groups: &[Vec<EventSpec>],
    options: &CountOptions,
    ceilings: Vec<Option<f64>>,
) -> Result<StatOutcome> {
    let resolved: Vec<Vec<ResolvedEvent>> = groups
        .iter()
        .map(|g| {
            g.iter()
                .map(|spec| resolve(backend.devices(), spec))
                .collect()
        })
        .collect::<Result<_>>()?;
    let counts = backend.count(&resolved, options)?;
    let events: Vec<ResolvedEvent> = resolved.into_iter().flatten().collect();
    let reports = reports(&events, &counts.totals, |e| {
        ceilings.get(e.device).copied().flatten()
    });
    Ok(StatOutcome {
        events,
        counts,
        reports,
        ceilings,
    })
}

impl StatOutcome {
    fn ceiling(&self) -> impl Fn(&ResolvedEvent) -> Option<f64> + '_ {
        |e| self.ceilings.get(e.device).copied().flatten()
    }

    /// perf's text report (and `-I` lines before it when intervals were asked for).
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        if !self.counts.intervals.is_empty() {
            out.push_str(&render_intervals(
                &self.events,
                &self.counts,
                self.ceiling(),
                None,
            ));
        }
        out.push_str(&render_text(&self.reports, self.counts.elapsed_ns));
        out
    }

    /// perf's `-x SEP` output (interval lines when intervals were asked for).
    pub fn render_csv(&self, sep: &str) -> String {
        if self.counts.intervals.is_empty() {
            render_csv(&self.reports, sep)
        } else {
            render_intervals(&self.events, &self.counts, self.ceiling(), Some(sep))
        }
    }

    /// The JSON object documented in docs/pmu.md; `workload` is the workload's own summary.
    pub fn to_json(&self, workload: serde_json::Value) -> serde_json::Value {
        let mut doc = serde_json::json!({
            "events": self.reports,
            "elapsed_s": self.counts.elapsed_ns as f64 / 1e9,
            "workload": workload,
        });
        if !self.counts.intervals.is_empty() {
            let mut previous = vec![Reading::default(); self.events.len()];
            let mut intervals = Vec::new();
            for (end_ns, readings) in &self.counts.intervals {
                let deltas: Vec<Reading> = readings
                    .iter()
                    .zip(&previous)
                    .map(|(now, before)| now.since(before))
                    .collect();
                intervals.push(serde_json::json!({
                    "time_s": *end_ns as f64 / 1e9,
                    "events": reports(&self.events, &deltas, self.ceiling()),
                }));
                previous = readings.clone();
            }
            doc["intervals"] = serde_json::Value::Array(intervals);
        }
        doc
    }
}

fn count_text(r: &EventReport) -> String {
    match r.count {
        Some(c) => thousands(c.round() as u64),
        None => "<not counted>".into(),
    }
}

fn event_line(r: &EventReport) -> String {
    let mut line = format!("{:>18}      {:<60}", count_text(r), r.event);
    if let (Some(bytes), Some(bw)) = (r.bytes, r.bandwidth_mbps) {
        line.push_str(&format!(" # {:>10.1} MB {:>8.1} MB/s", bytes / 1e6, bw));
        if let (Some(pct), Some(ceiling)) = (r.link_percent, r.link_ceiling_mbps) {
            line.push_str(&format!(" {pct:5.1}% of achievable {ceiling:.1} MB/s"));
        }
    }
    if let Some(pct) = r.running_percent() {
        line.push_str(&format!("  ({pct:.2}%)"));
    }
    line.trim_end().to_string()
}

/// The text report perf stat prints at the end of a run.
pub fn render_text(reports: &[EventReport], elapsed_ns: u64) -> String {
    let mut out = String::from("\n Performance counter stats for 'system wide':\n\n");
    for r in reports {
        out.push_str(&event_line(r));
        out.push('\n');
    }
    out.push_str(&format!(
        "\n{:>18.9} seconds time elapsed\n\n",
        elapsed_ns as f64 / 1e9
    ));
    out
}

/// One `-x SEP` line: value, unit, event, run time (ns), percent running, metric, metric unit.
fn csv_line(r: &EventReport, sep: &str) -> String {
    let value = match r.count {
        Some(c) => format!("{}", c.round() as u64),
        None => "<not counted>".into(),
    };
    let pct = if r.enabled_ns == 0 {
        0.0
    } else {
        100.0 * r.running_ns as f64 / r.enabled_ns as f64
    };
    let (metric, metric_unit) = match r.bandwidth_mbps {
        Some(bw) => (format!("{bw:.2}"), "MB/s"),
        None => (String::new(), ""),
    };
    [
        value,
        String::new(),
        r.event.clone(),
        r.running_ns.to_string(),
        format!("{pct:.2}"),
        metric,
        metric_unit.to_string(),
    ]
    .join(sep)
}

/// The CSV report of `perf stat -x SEP`.
pub fn render_csv(reports: &[EventReport], sep: &str) -> String {
    reports.iter().map(|r| csv_line(r, sep) + "\n").collect()
}

/// `perf stat -I` lines: each interval's change, scaled by the interval's own enabled/running
/// times, prefixed by the interval's end time in seconds. With `sep`, CSV lines.
pub fn render_intervals(
    events: &[ResolvedEvent],
    counts: &Counts,
    ceiling: impl Fn(&ResolvedEvent) -> Option<f64>,
    sep: Option<&str>,
) -> String {
    let mut out = String::new();
    if sep.is_none() {
        out.push_str("#           time             counts unit events\n");
    }
    let mut previous = vec![Reading::default(); events.len()];
    for (end_ns, readings) in &counts.intervals {
        let deltas: Vec<Reading> = readings
            .iter()
            .zip(&previous)
            .map(|(now, before)| now.since(before))
            .collect();
        let time = *end_ns as f64 / 1e9;
        for r in reports(events, &deltas, &ceiling) {
            match sep {
                Some(sep) => out.push_str(&format!("{time:.9}{sep}{}\n", csv_line(&r, sep))),
                None => out.push_str(&format!("{time:>16.9} {}\n", event_line(&r))),
            }
        }
        previous = readings.clone();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::{resolve, PmuDevice};

    fn event(s: &str) -> ResolvedEvent {
        let devices = vec![PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 2)];
        resolve(&devices, &s.parse().unwrap()).unwrap()
    }

    #[test]
    fn time_shared_payload_event_prints_like_perf() {
        let e = event("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/");
        let reading = Reading {
            value: 105_000_000,
            enabled_ns: 20_000_000_000,
            running_ns: 10_000_000_000,
        };
        let r = EventReport::new(&e, &reading, Some(1000.0));
        assert_eq!(r.count, Some(210_000_000.0));
        assert_eq!(r.bytes, Some(3_360_000_000.0));
        assert!((r.bandwidth_mbps.unwrap() - 168.0).abs() < 1e-9);
        assert!((r.link_percent.unwrap() - 16.8).abs() < 1e-9);
        let text = render_text(&[r.clone()], 20_693_146_778);
        assert!(text.contains("       210,000,000      pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/"));
        assert!(text.contains("(50.00%)"), "{text}");
        assert!(
            text.contains("      20.693146778 seconds time elapsed"),
            "{text}"
        );
        let csv = render_csv(&[r], ",");
        assert_eq!(
            csv,
            "210000000,,pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/,10000000000,50.00,168.00,MB/s\n"
        );
    }

    #[test]
    fn never_running_is_not_counted() {
        let e = event("pcie_bdf_200/L1/");
        let r = EventReport::new(
            &e,
            &Reading {
                value: 0,
                enabled_ns: 5,
                running_ns: 0,
            },
            None,
        );
        assert_eq!(r.count, None);
        assert!(render_text(&[r.clone()], 5).contains("<not counted>"));
        assert!(render_csv(&[r], ";").starts_with("<not counted>;;pcie_bdf_200/L1/;0;0.00"));
    }
}
