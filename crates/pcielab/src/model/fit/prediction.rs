//! What a platform model predicts for measurements, row by row: the rates and latencies the fit
//! compares, their residuals, and `fit --platform`'s report of a model fitted elsewhere.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::measurements::{Measurement, Workload};
use crate::model::platform::PlatformModel;
use crate::model::transfer::LinkParams;
use crate::text::round_to;

/// What the model predicts for one measurement: MB/s and, where it applies, latency.
pub fn predict(model: &PlatformModel, workload: &Workload, link: &LinkParams) -> (f64, f64) {
    match *workload {
        Workload::Dma { direction, size } => (
            model.dma_mbps(direction, size, link),
            model.read_latency_ns(size, link),
        ),
        Workload::Mmio { op, width, threads } => {
            (model.mmio_mbps(op, width, threads, false, link), f64::NAN)
        }
        Workload::Queued {
            device,
            bs,
            iodepth,
            jobs,
        } => (
            model.queued_io_mbps(device, bs, iodepth, jobs, link),
            f64::NAN,
        ),
    }
}

/// One row's measured and predicted figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RowResult {
    /// Line in the input (0 for fio JSON jobs).
    pub line: usize,
    /// The workload as `write 4096`, with ` on GenN xW` when the row names its own link.
    pub workload: String,
    /// The measured rate.
    #[serde(rename = "measured_MBps")]
    pub measured_mbps: f64,
    /// The model's rate for the same workload and link.
    #[serde(rename = "predicted_MBps")]
    pub predicted_mbps: f64,
    /// (predicted / measured − 1) × 100.
    pub residual_percent: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) measured_latency_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_latency_ns: Option<f64>,
    /// DMA rows: whether the platform was fitted on this very cell (size, direction, link), so
    /// the predicted figure reproduces it rather than predicting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) in_sample: Option<bool>,
}

/// Compares `model`'s predictions with every measurement (each on its own link if it names one,
/// else on `link`).
pub fn compare(model: &PlatformModel, rows: &[Measurement], link: &LinkParams) -> Vec<RowResult> {
    rows.iter()
        .map(|m| {
            let on = m.link.unwrap_or(*link);
            let (mbps, latency) = predict(model, &m.workload, &on);
            RowResult {
                line: m.line,
                workload: match m.link {
                    Some(own) => format!("{} on {} x{}", m.workload.label(), own.gen, own.width),
                    None => m.workload.label(),
                },
                measured_mbps: m.mbps,
                predicted_mbps: round_to(mbps, 2),
                residual_percent: round_to((mbps / m.mbps - 1.0) * 100.0, 2),
                measured_latency_ns: m.latency_ns,
                predicted_latency_ns: m.latency_ns.map(|_| round_to(latency, 1)),
                in_sample: match m.workload {
                    Workload::Dma { direction, size } => {
                        Some(model.in_sample(direction, size, &on))
                    }
                    _ => None,
                },
            }
        })
        .collect()
}

/// Root mean square of the rows' residuals, in percent, rounded to 0.01.
pub(super) fn rms_percent(rows: &[RowResult]) -> f64 {
    let mean_square = rows
        .iter()
        .map(|r| r.residual_percent * r.residual_percent)
        .sum::<f64>()
        / rows.len().max(1) as f64;
    round_to(mean_square.sqrt(), 2)
}

/// One line per row: measured, predicted and the residual.
pub(super) fn rows_text(rows: &[RowResult]) -> String {
    let mut text = format!(
        "{:>5}  {:<28} {:>12} {:>12} {:>9}  {}\n",
        "line", "measurement", "measured", "predicted", "residual", "cell"
    );
    for r in rows {
        let cell = match r.in_sample {
            Some(true) => "in-sample",
            Some(false) => "predicted",
            None => "",
        };
        text.push_str(&format!(
            "{:>5}  {:<28} {:>12.2} {:>12.2} {:>8.2}%  {cell}\n",
            r.line, r.workload, r.measured_mbps, r.predicted_mbps, r.residual_percent
        ));
    }
    text
}

/// Measurements set against a platform model fitted elsewhere, nothing fitted: what
/// `pcielab fit --platform SPEC` prints. Each residual is a prediction error unless the model
/// was fitted on these very rows (`platform_fitted_on` says what it was fitted on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PredictionReport {
    pub(crate) platform_fitted_on: String,
    pub(crate) rows_used: usize,
    /// Root mean square of the per-row relative residuals, in percent.
    pub(crate) rms_residual_percent: f64,
    pub(crate) rows: Vec<RowResult>,
    /// One per link of these rows that none of the platform's measurements ran on.
    #[serde(default)]
    pub(crate) warnings: Vec<String>,
}

/// Predicts every row with `model` (each on its own link if it names one, else on `link`).
pub fn predict_rows(
    model: &PlatformModel,
    rows: &[Measurement],
    link: &LinkParams,
) -> Result<PredictionReport> {
    link.validate()?;
    let mut warnings: Vec<String> = Vec::new();
    for m in rows {
        if let Some(w) = model.link_warning(&m.link.unwrap_or(*link)) {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    let rows = compare(model, rows, link);
    Ok(PredictionReport {
        platform_fitted_on: model.fitted_on.clone(),
        rows_used: rows.len(),
        rms_residual_percent: rms_percent(&rows),
        rows,
        warnings,
    })
}

impl PredictionReport {
    /// Where the parameters come from, then one line per row with its residual.
    pub fn to_text(&self) -> String {
        let warnings: String = self
            .warnings
            .iter()
            .map(|w| format!("warning: {w}\n"))
            .collect();
        format!(
            "predicted with a platform fitted on {}: {} rows, rms residual {:.2} %\n{warnings}\n{}",
            self.platform_fitted_on,
            self.rows_used,
            self.rms_residual_percent,
            rows_text(&self.rows)
        )
    }
}
