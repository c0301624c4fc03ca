//! `perf stat`-compatible reports of a counting run: the text form (counts with thousands
//! separators, `(49.99%)` when time-shared, `<not counted>`, "seconds time elapsed"), the
//! `-x SEP` CSV form, `-I` interval lines, and per-event JSON records. For data-payload events
//! it adds the bytes, MB/s over the window, the share of the link-achievable rate, the line
//! rate and, where a platform model is given, its streaming DMA prediction ([`LinkRates`]).

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::platform::{PlatformDma, PlatformModel, Provenance};
use crate::pcie::Bdf;
use crate::pmu::catalog::Unit;
use crate::pmu::session::{CountOptions, CounterBackend, Counts, Reading};
use crate::pmu::{resolve, EventSpec, PmuDevice, ResolvedEvent};
use crate::text::thousands;
use crate::topology::Topology;

/// What a report needs to know about one event, whichever machine counted it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventLabel {
    pub(crate) pmu: String,
    /// The event as the user wrote it.
    pub(crate) display: String,
    /// The unit of the scaled value (`msec`, `MiB`, `bytes`, …; empty for plain counts).
    pub(crate) unit: String,
    /// What the count is multiplied by before printing (the PMU's `.scale`).
    pub(crate) scale: f64,
    /// Bytes one (unscaled) count stands for, for data-payload events.
    pub(crate) bytes_per_count: Option<f64>,
    /// The root port link's rates, for data-payload events: the "% of link" base and the
    /// numbers printed beside it.
    pub(crate) link: Option<LinkRates>,
    /// Why the event could not be opened at all (perf's `<not supported>`).
    pub(crate) not_supported: Option<String>,
    /// Why an event may never get a counter (told with `<not counted>`).
    pub(crate) not_counted_reason: String,
}

/// What a root port's payload rate is compared with: three different numbers, MB/s per
/// direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinkRates {
    /// The line rate after encoding (what the PCIe generation and width promise).
    pub(crate) line_mbps: f64,
    /// The link-achievable payload rate (`model::transfer::achievable_mbps` along the path): the
    /// "% of link" base.
    pub(crate) achievable_mbps: f64,
    /// The platform model's predicted streaming endpoint DMA (write, read), where the machine's
    /// spec or `--platform` gives a model (callers pass `None` otherwise).
    pub(crate) platform_dma_mbps: Option<(f64, f64, Provenance)>,
}

impl LinkRates {
    /// The rates of root port `rp`'s path in `topo`, with `platform`'s prediction on its link.
    pub(crate) fn of_port(
        topo: &Topology,
        rp: Bdf,
        platform: Option<&PlatformModel>,
    ) -> Option<LinkRates> {
        let ceiling = topo.path_ceiling(rp)?;
        let link = topo.get(rp).and_then(|f| f.link_params());
        Some(LinkRates {
            line_mbps: ceiling.mbps,
            achievable_mbps: ceiling.achievable_mbps,
            platform_dma_mbps: platform
                .zip(link)
                .map(|(p, link)| p.streaming_dma_mbps(&link)),
        })
    }
}

impl EventLabel {
    /// The label of a simulated (catalog) event.
    pub(crate) fn simulated(event: &ResolvedEvent, link: Option<LinkRates>) -> EventLabel {
        let bytes_per_count = match event.unit() {
            Unit::Bytes(n) => Some(f64::from(n)),
            _ => None,
        };
        EventLabel {
            pmu: event.pmu_name.clone(),
            display: event.display.clone(),
            unit: event.unit().label(),
            scale: 1.0,
            bytes_per_count,
            link: link.filter(|_| bytes_per_count.is_some()),
            not_supported: None,
            not_counted_reason: event.def.group.sharing_rule(),
        }
    }
}

/// Whether an event was counted, as `stat --json` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EventStatus {
    Counted,
    /// It never got a counter.
    NotCounted,
    /// It could not be opened.
    NotSupported,
}

impl EventStatus {
    /// The word `stat --json` writes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventStatus::Counted => "counted",
            EventStatus::NotCounted => "not_counted",
            EventStatus::NotSupported => "not_supported",
        }
    }
}

/// One event's result, as the JSON output documents it (docs/pmu.md). Read back by `plot` and
/// `report --from`: fields a simulated run or an older pcielab did not write read as absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct EventReport {
    pub(crate) pmu: String,
    pub(crate) event: String,
    /// What perf reports before scaling (in the event's unit).
    #[serde(default)]
    pub(crate) raw_count: u64,
    /// The estimate raw × enabled / running, rounded to a whole count as perf prints it;
    /// `null` when the event never ran or could not be opened.
    pub(crate) count: Option<u64>,
    /// `count` × the PMU's `.scale`, in `unit` (present when the scale is not 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) scaled: Option<f64>,
    #[serde(default)]
    pub(crate) unit: String,
    /// Percent of the enabled time the event was on a counter.
    #[serde(default)]
    pub(crate) running_percent: f64,
    pub(crate) status: EventStatus,
    /// Why, when `status` is not `counted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// `count` in bytes, for events measured in bytes or 16-byte units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) bytes: Option<f64>,
    #[serde(default)]
    pub(crate) enabled_ns: u64,
    #[serde(default)]
    pub(crate) running_ns: u64,
    /// The measurement window: the time the event was enabled, in seconds.
    #[serde(default)]
    pub(crate) window_s: f64,
    #[serde(
        rename = "bandwidth_MBps",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) bandwidth_mbps: Option<f64>,
    /// The root port link's line rate after encoding, MB/s per direction.
    #[serde(
        rename = "link_line_rate_MBps",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) link_line_mbps: Option<f64>,
    /// The root port link's link-achievable payload MB/s per direction (`model::transfer::achievable_mbps`).
    #[serde(
        rename = "link_achievable_MBps",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) link_ceiling_mbps: Option<f64>,
    /// `bandwidth_MBps` as a percentage of `link_achievable_MBps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) link_percent: Option<f64>,
    /// The platform model's predicted streaming DMA on the link, where a model is given.
    #[serde(flatten)]
    pub(crate) platform_dma: PlatformDma,
}

impl EventReport {
    pub(crate) fn new(label: &EventLabel, reading: &Reading) -> Self {
        let estimate = reading.estimate().filter(|_| label.not_supported.is_none());
        let (status, reason) = match (&label.not_supported, estimate) {
            (Some(why), _) => (EventStatus::NotSupported, Some(why.clone())),
            (None, None) => (
                EventStatus::NotCounted,
                Some(label.not_counted_reason.clone()),
            ),
            (None, Some(_)) => (EventStatus::Counted, None),
        };
        let window_s = reading.enabled_ns as f64 / 1e9;
        let bytes = label.bytes_per_count.zip(estimate).map(|(n, c)| c * n);
        let bandwidth_mbps = bytes.filter(|_| window_s > 0.0).map(|b| b / window_s / 1e6);
        let link = label.link.filter(|_| bytes.is_some());
        let platform = link.and_then(|l| l.platform_dma_mbps);
        EventReport {
            pmu: label.pmu.clone(),
            event: label.display.clone(),
            raw_count: reading.value,
            count: estimate.map(|c| c.round() as u64),
            scaled: estimate
                .filter(|_| label.scale != 1.0)
                .map(|c| c * label.scale),
            unit: label.unit.clone(),
            running_percent: reading.running_percent(),
            status,
            reason,
            bytes,
            enabled_ns: reading.enabled_ns,
            running_ns: reading.running_ns,
            window_s,
            bandwidth_mbps,
            link_line_mbps: link.map(|l| l.line_mbps),
            link_ceiling_mbps: link.map(|l| l.achievable_mbps),
            link_percent: bandwidth_mbps
                .zip(link)
                .map(|(bw, l)| 100.0 * bw / l.achievable_mbps),
            platform_dma: PlatformDma {
                write_mbps: platform.map(|p| p.0),
                read_mbps: platform.map(|p| p.1),
                provenance: platform.map(|p| p.2),
            },
        }
    }

    fn shared_percent(&self) -> Option<f64> {
        (self.running_ns < self.enabled_ns && self.enabled_ns > 0 && self.count.is_some())
            .then_some(self.running_percent)
    }
}

/// Reports for every event of a run.
pub(crate) fn reports(labels: &[EventLabel], readings: &[Reading]) -> Vec<EventReport> {
    labels
        .iter()
        .zip(readings)
        .map(|(e, r)| EventReport::new(e, r))
        .collect()
}

/// A finished `stat` run: the events, perf's readings and their reports.
#[derive(Debug, Clone)]
pub struct StatOutcome {
    pub(crate) events: Vec<EventLabel>,
    pub(crate) counts: Counts,
    pub(crate) reports: Vec<EventReport>,
    /// What was counted, as perf's report heading names it: `system wide`, or the command.
    pub(crate) counted: String,
}

/// Resolves `groups` (event specs as written) against a machine's PMU `devices`.
pub(crate) fn resolve_groups(
    devices: &[PmuDevice],
    groups: &[Vec<EventSpec>],
) -> Result<Vec<Vec<ResolvedEvent>>> {
    groups
        .iter()
        .map(|g| g.iter().map(|spec| resolve(devices, spec)).collect())
        .collect()
}

/// Counts `resolved` (from [`resolve_groups`] on the backend's devices) over the backend's
/// workload and reports. `links` gives each PMU device's root-port rates (by device index).
pub(crate) fn count_events(
    backend: &mut dyn CounterBackend,
    resolved: &[Vec<ResolvedEvent>],
    options: &CountOptions,
    links: Vec<Option<LinkRates>>,
) -> Result<StatOutcome> {
    let counts = backend.count(resolved, options)?;
    let events: Vec<EventLabel> = resolved
        .iter()
        .flatten()
        .map(|e| EventLabel::simulated(e, links.get(e.device).copied().flatten()))
        .collect();
    Ok(StatOutcome::new(events, counts))
}

impl StatOutcome {
    pub(crate) fn new(events: Vec<EventLabel>, counts: Counts) -> StatOutcome {
        let reports = reports(&events, &counts.totals);
        StatOutcome {
            events,
            counts,
            reports,
            counted: "system wide".to_string(),
        }
    }

    /// perf's text report (and `-I` lines before it when intervals were asked for); `verbose`
    /// adds each payload event's bytes, share of the link and platform prediction.
    pub fn render_text(&self, verbose: bool) -> String {
        let mut out = String::new();
        if !self.counts.intervals.is_empty() {
            out.push_str(&render_intervals(&self.events, &self.counts, None, verbose));
        }
        out.push_str(&render_text(
            &self.reports,
            &self.counted,
            self.counts.elapsed_ns,
            verbose,
        ));
        out
    }

    /// perf's `-x SEP` output (interval lines when intervals were asked for).
    pub fn render_csv(&self, sep: &str) -> String {
        if self.counts.intervals.is_empty() {
            render_csv(&self.reports, sep)
        } else {
            render_intervals(&self.events, &self.counts, Some(sep), false)
        }
    }

    /// The JSON object documented in docs/pmu.md; `workload` is the workload's own summary.
    pub fn document(&self, workload: serde_json::Value) -> StatDocument {
        StatDocument {
            events: self.reports.clone(),
            elapsed_s: self.counts.elapsed_ns as f64 / 1e9,
            workload,
            intervals: interval_deltas(&self.counts)
                .map(|(end_ns, deltas)| IntervalReport {
                    time_s: end_ns as f64 / 1e9,
                    events: reports(&self.events, &deltas),
                })
                .collect(),
        }
    }
}

/// The `stat --json` document (docs/pmu.md), also as `plot` and `report --from` read it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatDocument {
    /// Each event over the whole run.
    pub(crate) events: Vec<EventReport>,
    pub(crate) elapsed_s: f64,
    /// The workload's own summary: on a host its argv and exit code, on `sim:` what the
    /// simulated workload reports.
    #[serde(default)]
    pub(crate) workload: serde_json::Value,
    /// Each `-I` interval's change; absent when no interval was asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) intervals: Vec<IntervalReport>,
}

/// One `-I` interval of the `stat --json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct IntervalReport {
    /// When the interval ended, in seconds since counting began.
    pub(crate) time_s: f64,
    /// Each event's change over the interval.
    pub(crate) events: Vec<EventReport>,
}

/// Each `-I` interval's end time and its change from the previous interval.
fn interval_deltas(counts: &Counts) -> impl Iterator<Item = (u64, Vec<Reading>)> + '_ {
    let width = counts.totals.len();
    let mut previous = vec![Reading::default(); width];
    counts.intervals.iter().map(move |(end_ns, readings)| {
        let deltas = readings
            .iter()
            .zip(&previous)
            .map(|(now, before)| now.since(before))
            .collect();
        previous.clone_from(readings);
        (*end_ns, deltas)
    })
}

/// The value perf prints: the scaled value with two decimals, or the whole count.
fn value_text(r: &EventReport, grouped: bool) -> String {
    match (r.status, r.scaled, r.count) {
        (EventStatus::NotSupported, _, _) => "<not supported>".into(),
        (_, Some(scaled), _) => {
            let hundredths = (scaled * 100.0).round() as u64;
            let whole = if grouped {
                thousands(hundredths / 100)
            } else {
                (hundredths / 100).to_string()
            };
            format!("{whole}.{:02}", hundredths % 100)
        }
        (_, None, Some(c)) if grouped => thousands(c),
        (_, None, Some(c)) => c.to_string(),
        (_, None, None) => "<not counted>".into(),
    }
}

/// One counter line: perf's count, unit and event, then for a payload event its rate as perf
/// prints a metric (`# 159.2 MB/s`), and the share of time it was counted. Within 100 columns
/// for events named in up to 44 characters (`dwc_rootport_13018/rx_pcie_tlp_data_payload/`);
/// `verbose` adds the bytes, the share of the link's achievable rate, its line rate and the
/// platform's predicted DMA rates (all in the JSON document too).
fn event_line(r: &EventReport, verbose: bool) -> String {
    let unit = if r.scaled.is_some() {
        r.unit.as_str()
    } else {
        ""
    };
    let mut line = format!("{:>18} {unit:<4} {:<44}", value_text(r, true), r.event);
    match (r.bytes, r.bandwidth_mbps) {
        (Some(_), Some(bw)) if !verbose => line.push_str(&format!(" # {bw:>8.1} MB/s")),
        (Some(bytes), Some(bw)) => {
            line.push_str(&format!(" # {:>10.1} MB {:>8.1} MB/s", bytes / 1e6, bw));
            if let (Some(pct), Some(ceiling)) = (r.link_percent, r.link_ceiling_mbps) {
                line.push_str(&format!(" {pct:5.1}% of achievable {ceiling:.1} MB/s"));
            }
            if let Some(line_rate) = r.link_line_mbps {
                line.push_str(&format!(" (line {line_rate:.1}"));
                let dma = &r.platform_dma;
                if let (Some(write), Some(read)) = (dma.write_mbps, dma.read_mbps) {
                    line.push_str(&format!("; platform DMA write {write:.1}, read {read:.1}"));
                    if let Some(provenance) = dma.provenance {
                        line.push_str(&format!(", {}", provenance.text()));
                    }
                }
                line.push(')');
            }
        }
        _ => {}
    }
    if let Some(pct) = r.shared_percent() {
        line.push_str(&format!("  ({pct:.2}%)"));
    }
    line.trim_end().to_string()
}

/// The text report perf stat prints at the end of a run; `<not counted>` events get their
/// reason underneath; `verbose` as for [`StatOutcome::render_text`].
pub(crate) fn render_text(
    reports: &[EventReport],
    counted: &str,
    elapsed_ns: u64,
    verbose: bool,
) -> String {
    let mut out = format!("\n Performance counter stats for '{counted}':\n\n");
    for r in reports {
        out.push_str(&event_line(r, verbose));
        out.push('\n');
    }
    for r in reports.iter().filter(|r| r.status != EventStatus::Counted) {
        if let Some(why) = &r.reason {
            out.push_str(&format!("  {} {}: {why}\n", value_text(r, true), r.event));
        }
    }
    out.push_str(&format!(
        "\n{:>18.9} seconds time elapsed\n\n",
        elapsed_ns as f64 / 1e9
    ));
    out
}

/// One `-x SEP` line: value, unit, event, run time (ns), percent running, metric, metric unit.
fn csv_line(r: &EventReport, sep: &str) -> String {
    let (metric, metric_unit) = match r.bandwidth_mbps {
        Some(bw) => (format!("{bw:.2}"), "MB/s"),
        None => (String::new(), ""),
    };
    let unit = if r.scaled.is_some() {
        r.unit.as_str()
    } else {
        ""
    };
    [
        value_text(r, false),
        unit.to_string(),
        r.event.clone(),
        r.running_ns.to_string(),
        format!("{:.2}", r.running_percent),
        metric,
        metric_unit.to_string(),
    ]
    .join(sep)
}

/// The CSV report of `perf stat -x SEP`.
pub(crate) fn render_csv(reports: &[EventReport], sep: &str) -> String {
    reports.iter().map(|r| csv_line(r, sep) + "\n").collect()
}

/// `perf stat -I` lines: each interval's change, scaled by the interval's own enabled/running
/// times, prefixed by the interval's end time in seconds. With `sep`, CSV lines.
pub(crate) fn render_intervals(
    events: &[EventLabel],
    counts: &Counts,
    sep: Option<&str>,
    verbose: bool,
) -> String {
    let mut out = String::new();
    if sep.is_none() {
        out.push_str("#           time             counts unit events\n");
    }
    for (end_ns, deltas) in interval_deltas(counts) {
        let time = end_ns as f64 / 1e9;
        for r in reports(events, &deltas) {
            match sep {
                Some(sep) => out.push_str(&format!("{time:.9}{sep}{}\n", csv_line(&r, sep))),
                None => out.push_str(&format!("{time:>16.9} {}\n", event_line(&r, verbose))),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::{resolve, PmuDevice};

    fn event(s: &str, achievable: Option<f64>) -> EventLabel {
        let devices = vec![PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 2)];
        let link = achievable.map(|achievable_mbps| LinkRates {
            line_mbps: achievable_mbps * 1.1,
            achievable_mbps,
            platform_dma_mbps: None,
        });
        EventLabel::simulated(&resolve(&devices, &s.parse().unwrap()).unwrap(), link)
    }

    #[test]
    fn time_shared_payload_event_prints_like_perf() {
        let e = event("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/", Some(1000.0));
        let reading = Reading {
            value: 105_000_000,
            enabled_ns: 20_000_000_000,
            running_ns: 10_000_000_000,
        };
        let r = EventReport::new(&e, &reading);
        assert_eq!(r.count, Some(210_000_000));
        assert_eq!(r.running_percent, 50.0);
        assert_eq!(r.bytes, Some(3_360_000_000.0));
        assert!((r.bandwidth_mbps.unwrap() - 168.0).abs() < 1e-9);
        assert!((r.link_percent.unwrap() - 16.8).abs() < 1e-9);
        let text = render_text(
            std::slice::from_ref(&r),
            "system wide",
            20_693_146_778,
            false,
        );
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
        let e = event("pcie_bdf_200/L1/", None);
        let r = EventReport::new(
            &e,
            &Reading {
                value: 0,
                enabled_ns: 5,
                running_ns: 0,
            },
        );
        assert_eq!((r.count, r.status), (None, EventStatus::NotCounted));
        let text = render_text(std::slice::from_ref(&r), "system wide", 5, false);
        assert!(text.contains("<not counted>"), "{text}");
        assert!(text.contains("one time-based counter"), "{text}");
        assert!(render_csv(&[r], ";").starts_with("<not counted>;;pcie_bdf_200/L1/;0;0.00"));
    }

    #[test]
    fn scaled_events_print_two_decimals_and_their_unit() {
        let label = EventLabel {
            pmu: "software".into(),
            display: "cpu-clock".into(),
            unit: "msec".into(),
            scale: 1e-6,
            bytes_per_count: None,
            link: None,
            not_supported: None,
            not_counted_reason: String::new(),
        };
        let reading = Reading {
            value: 2_002_514_321,
            enabled_ns: 1_001_000_000,
            running_ns: 1_001_000_000,
        };
        let r = EventReport::new(&label, &reading);
        assert!(
            render_text(std::slice::from_ref(&r), "system wide", 1, false)
                .contains("          2,002.51 msec cpu-clock")
        );
        assert_eq!(
            render_csv(&[r], ","),
            "2002.51,msec,cpu-clock,1001000000,100.00,,\n"
        );
        let gone = EventLabel {
            not_supported: Some("the kernel refused it".into()),
            ..label
        };
        let r = EventReport::new(&gone, &Reading::default());
        assert_eq!(r.status, EventStatus::NotSupported);
        assert!(render_text(&[r], "system wide", 1, false).contains("<not supported>"));
    }
}
