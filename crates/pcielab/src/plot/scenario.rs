//! The `pcielab sim run` picture: each metric of a QoS scenario as a line against the
//! scenario's x (ways, a schemata value or time), metrics marked `right_axis` against a second
//! axis, and the timeline's events as labelled vertical markers.

use super::{line_chart_svg, LineChart, RightAxis, Series, Stroke, XScale};
use crate::error::Result;
use crate::qos::scenario::Outcome;

/// Lines with more points than this are drawn without markers (time series).
const MARKERS_UP_TO: usize = 40;

/// The chart of an outcome.
pub(crate) fn chart(outcome: &Outcome) -> LineChart {
    let series = outcome
        .lines
        .iter()
        .map(|l| Series {
            label: l.label.clone(),
            points: l.points.clone(),
            stroke: match (l.right_axis, l.points.len() <= MARKERS_UP_TO) {
                (false, true) => Stroke::LineWithMarkers,
                (false, false) => Stroke::Line,
                (true, _) => Stroke::Dashed,
            },
            right: l.right_axis,
            colour: None,
        })
        .collect();
    let any_right = outcome.lines.iter().any(|l| l.right_axis);
    LineChart {
        title: outcome.title.clone(),
        x_label: outcome.x_label.clone(),
        x_scale: XScale::Linear,
        y_label: outcome.y_label.clone(),
        right: any_right.then(|| RightAxis::Own {
            label: outcome.y2_label.clone().unwrap_or_default(),
        }),
        series,
        references: vec![],
        events: outcome.markers.clone(),
        y_from_zero: true,
    }
}

/// The outcome as a standalone SVG document.
pub(crate) fn svg(outcome: &Outcome) -> Result<String> {
    line_chart_svg(&chart(outcome))
}
