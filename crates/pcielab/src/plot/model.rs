//! The `pcielab model` picture: device DMA write and read MB/s against transfer size (log
//! scale), with the line rate and the link-achievable rate as reference lines, the platform's
//! predictions when the sweep has them, and the right axis reading the same curves as
//! efficiency in % of the link-achievable rate (the table's `%ach`).

use super::{line_chart_svg, LineChart, Reference, RightAxis, Series, Stroke, XScale};
use crate::error::Result;
use crate::model::sweep::SizeSweep;

/// The chart of a sweep.
pub(crate) fn chart(sweep: &SizeSweep) -> LineChart {
    let along = |f: &dyn Fn(&crate::model::sweep::SizePoint) -> Option<f64>| -> Vec<(f64, f64)> {
        sweep
            .points
            .iter()
            .filter_map(|p| f(p).map(|y| (p.size as f64, y)))
            .collect()
    };
    let mut series = vec![
        Series::new(
            "link write MB/s",
            along(&|p| Some(p.write_mbps)),
            Stroke::LineWithMarkers,
        ),
        Series::new(
            "link read MB/s",
            along(&|p| Some(p.read_mbps)),
            Stroke::LineWithMarkers,
        ),
    ];
    let predicted_write = along(&|p| p.predicted_write_mbps);
    if !predicted_write.is_empty() {
        series.push(Series::new(
            "platform write MB/s",
            predicted_write,
            Stroke::Dashed,
        ));
    }
    let predicted_read = along(&|p| p.predicted_read_mbps);
    if !predicted_read.is_empty() {
        series.push(Series::new(
            "platform read MB/s",
            predicted_read,
            Stroke::Dashed,
        ));
    }
    let mut title = format!(
        "PCIe Gen{} x{}: DMA throughput vs transfer size (MPS {}, MRRS {})",
        sweep.gen, sweep.width, sweep.mps, sweep.mrrs
    );
    if sweep.platform_fitted_on.is_some() {
        title.push_str(", with platform prediction");
    }
    LineChart {
        title,
        x_label: "transfer size (bytes, log scale)".into(),
        x_scale: XScale::Bytes,
        y_label: "throughput (MB/s, 10^6 B/s)".into(),
        right: Some(RightAxis::Scaled {
            label: "efficiency (% of link-achievable)".into(),
            per_left_unit: 100.0 / sweep.achievable_mbps,
        }),
        series,
        references: vec![
            Reference {
                label: format!("line rate {:.0} MB/s", sweep.line_rate_mbps),
                y: sweep.line_rate_mbps,
            },
            Reference {
                label: format!("link-achievable {:.0} MB/s", sweep.achievable_mbps),
                y: sweep.achievable_mbps,
            },
        ],
        events: vec![],
        y_from_zero: true,
    }
}

/// The sweep as a standalone SVG document.
pub(crate) fn svg(sweep: &SizeSweep) -> Result<String> {
    line_chart_svg(&chart(sweep))
}
