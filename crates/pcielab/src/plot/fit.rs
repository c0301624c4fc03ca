//! The `pcielab fit` picture: measured MB/s (points) and the fitted model's prediction for
//! each row (lines; with `fit --platform`, the given platform's), per workload kind, against transfer size; beneath it each row's residual
//! in percent, so a systematic misfit shows as a trend.

use std::collections::BTreeMap;

use super::{draw_line_chart, svg_document, LineChart, Reference, Series, Stroke, XScale, WIDTH};
use crate::error::Result;
use crate::model::fit::{FitDocument, RowResult};

/// A row's workload ("write 4096", "fio_read 131072") as (kind, size); rows without a size are
/// placed by their order.
fn kind_and_size(row: &RowResult, index: usize) -> (String, f64) {
    let mut words = row.workload.split_whitespace();
    let kind = words.next().unwrap_or("row").to_string();
    let size = words
        .find_map(|w| w.parse::<f64>().ok())
        .unwrap_or(index as f64 + 1.0);
    (kind, size)
}

/// The upper (rates) and lower (residuals) charts.
pub(crate) fn charts(doc: &FitDocument) -> (LineChart, LineChart) {
    let mut by_kind: BTreeMap<String, Vec<(f64, &RowResult)>> = BTreeMap::new();
    for (i, row) in doc.rows().iter().enumerate() {
        let (kind, size) = kind_and_size(row, i);
        by_kind.entry(kind).or_default().push((size, row));
    }
    let mut rates = Vec::new();
    let mut residuals = Vec::new();
    let model = if doc.platform_fitted_on().is_some() {
        "predicted"
    } else {
        "fitted"
    };
    // One colour per workload kind: its measured points, fitted line and residuals.
    for (colour, (kind, rows)) in by_kind.iter_mut().enumerate() {
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let coloured = |label: String, points: Vec<(f64, f64)>, stroke| Series {
            colour: Some(colour),
            ..Series::new(label, points, stroke)
        };
        rates.push(coloured(
            format!("{kind} measured"),
            rows.iter().map(|(x, r)| (*x, r.measured_mbps)).collect(),
            Stroke::Markers,
        ));
        rates.push(coloured(
            format!("{kind} {model}"),
            rows.iter().map(|(x, r)| (*x, r.predicted_mbps)).collect(),
            Stroke::Line,
        ));
        residuals.push(coloured(
            format!("{kind} residual"),
            rows.iter().map(|(x, r)| (*x, r.residual_percent)).collect(),
            Stroke::LineWithMarkers,
        ));
    }
    let top = LineChart {
        title: match doc.platform_fitted_on() {
            None => format!(
                "Fit: measured vs fitted ({} rows, rms residual {:.2} %)",
                doc.rows_used(), doc.rms_residual_percent()
            ),
            Some(_) => format!(
                "Measured vs predicted by a platform fitted elsewhere ({} rows, rms residual {:.2} %)",
                doc.rows_used(), doc.rms_residual_percent()
            ),
        },
        x_label: "transfer size (bytes, log scale)".into(),
        x_scale: XScale::Bytes,
        y_label: "throughput (MB/s)".into(),
        right: None,
        series: rates,
        references: vec![],
        events: vec![],
        y_from_zero: true,
    };
    let bottom = LineChart {
        title: "Residual of each row: (predicted / measured - 1) x 100".into(),
        x_label: "transfer size (bytes, log scale)".into(),
        x_scale: XScale::Bytes,
        y_label: "residual (%)".into(),
        right: None,
        series: residuals,
        references: vec![Reference {
            label: "0 % (perfect fit)".into(),
            y: 0.0,
        }],
        events: vec![],
        y_from_zero: false,
    };
    (top, bottom)
}

/// The fit as a standalone SVG document: rates above, residuals below.
pub(crate) fn svg(doc: &FitDocument) -> Result<String> {
    let (top, bottom) = charts(doc);
    svg_document(WIDTH, 900, |area| {
        let (upper, lower) = area.split_vertically(540);
        draw_line_chart(&upper, &top)?;
        draw_line_chart(&lower, &bottom)
    })
}
