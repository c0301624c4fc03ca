//! The `pcielab stat -I` picture: each event's value per interval over time, one line per
//! PMU event (so one per port and direction) — MB/s for data-payload events, with each port's
//! link-achievable rate as a reference line, and counts per interval for the rest (on the
//! right axis when both kinds are plotted).

use super::{line_chart_svg, LineChart, Reference, RightAxis, Series, Stroke, XScale};
use crate::error::{Error, Result};
use crate::pmu::stat::{EventReport, StatDocument};

/// What an event is plotted as: MB/s where the document has a bandwidth, else its count.
fn is_bandwidth(e: &EventReport) -> bool {
    e.bandwidth_mbps.is_some()
}

/// The chart of a run's intervals; `None` when it was counted without `-I`.
pub(crate) fn chart(doc: &StatDocument) -> Option<LineChart> {
    let first = doc.intervals.first()?;
    let value = |e: &EventReport| {
        if is_bandwidth(e) {
            e.bandwidth_mbps
        } else {
            e.count.map(|c| c as f64)
        }
    };
    let any_bandwidth = first.events.iter().any(is_bandwidth);
    let any_count = first.events.iter().any(|e| !is_bandwidth(e));
    let mut series = Vec::new();
    for (i, e) in first.events.iter().enumerate() {
        let points = doc
            .intervals
            .iter()
            .filter_map(|interval| {
                let y = interval.events.get(i).and_then(value)?;
                Some((interval.time_s, y))
            })
            .collect();
        let count_on_right = any_bandwidth && !is_bandwidth(e);
        let unit = if is_bandwidth(e) { "MB/s" } else { "count" };
        series.push(Series {
            label: format!("{} ({unit})", e.event),
            points,
            stroke: if doc.intervals.len() <= 40 {
                Stroke::LineWithMarkers
            } else {
                Stroke::Line
            },
            right: count_on_right,
            colour: None,
        });
    }
    let mut references: Vec<Reference> = Vec::new();
    for e in first.events.iter().filter(|e| is_bandwidth(e)) {
        if let Some(ceiling) = e.link_ceiling_mbps {
            let label = format!("{} link-achievable {ceiling:.0} MB/s", e.pmu);
            if !references.iter().any(|r| r.label == label) {
                references.push(Reference { label, y: ceiling });
            }
        }
    }
    let interval_s = first.time_s;
    let y_label = if any_bandwidth {
        "bandwidth (MB/s, 10^6 B/s)".to_string()
    } else {
        format!("count per {} interval", seconds(interval_s))
    };
    Some(LineChart {
        title: format!(
            "PCIe PMU events over time ({} intervals of {})",
            doc.intervals.len(),
            seconds(interval_s)
        ),
        x_label: "time (s)".into(),
        x_scale: XScale::Linear,
        y_label,
        right: (any_bandwidth && any_count).then(|| RightAxis::Own {
            label: format!("count per {} interval", seconds(interval_s)),
        }),
        series,
        references,
        events: vec![],
        y_from_zero: true,
    })
}

fn seconds(s: f64) -> String {
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else {
        format!("{} s", super::value_text(s))
    }
}

/// The run as a standalone SVG document; a run without intervals is bad input naming `origin`.
pub(crate) fn svg(doc: &StatDocument, origin: &str) -> Result<String> {
    let chart = chart(doc).ok_or_else(|| {
        Error::bad_input(format!(
            "{origin}: this stat result has no intervals to draw over time: count with -I MS \
             (e.g. -I 1000)"
        ))
    })?;
    line_chart_svg(&chart)
}
