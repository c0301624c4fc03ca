//! Fitting the platform model ([`super::platform`]) to measurements
//! ([`super::measurements`]): bounded least squares on relative error (log of predicted over
//! measured, so a 64 B row weighs as much as a 4 MB one). Each distinct row's time is compiled
//! once into closed form (`compiled`, over [`super::row_time`]: a maximum of linear terms and
//! per-TLP hinges, rate limits as their inverse, non-decreasing in every coordinate). A branch
//! and bound over boxes of every continuous parameter and the whole numbers (`global`) finds
//! the optimum and proves it to within 0.1 % of its cost (group by group where rows share only
//! the dimensions every row depends on, `separable`), each promising box's centre polished
//! by Levenberg-Marquardt (the `levenberg-marquardt` crate, analytic Jacobian, kept within
//! bounds). `verdicts` judges each parameter there: fitted, bound, or not determined ("not
//! limiting in this data", "cannot be separated from …"), with ±1σ from the residual variance
//! and `(JᵀJ)⁻¹`. `prediction` compares a model with measurements. Deterministic: the same rows
//! on the same link give the same parameters.

mod compiled;
mod global;
mod prediction;
mod search;
mod separable;
mod verdicts;

use serde::{Deserialize, Serialize};

use super::measurements::{Measurement, Workload};
use super::platform::{DmaDirection, FittedCell, MmioOp, PlatformModel, P};
use super::row_time::WHOLE;
use super::transfer::LinkParams;
use crate::error::{Error, Result};
use crate::text::round_to;
use compiled::{spec, Compiled, Distinct};
use global::{branch_and_bound, combination_costs, Proof};
pub use prediction::{compare, predict, predict_rows, PredictionReport, RowResult};
use prediction::{rms_percent, rows_text};
use verdicts::{judge, AtOptimum};
pub use verdicts::{ParamResult, Status};

/// The result of `pcielab fit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FitReport {
    pub(crate) fitted_on: String,
    pub(crate) rows_used: usize,
    /// Root mean square of the per-row relative residuals, in percent.
    pub(crate) rms_residual_percent: f64,
    /// Every parameter some row depends on, most physically basic first.
    pub params: Vec<ParamResult>,
    /// Every row, measured against predicted.
    pub rows: Vec<RowResult>,
    /// How far the global stage proved the optimum.
    #[serde(default)]
    pub(crate) optimum: OptimumProof,
    /// Columns the model cannot reproduce together, each with the residuals that show it.
    #[serde(default)]
    pub(crate) conflicts: Vec<String>,
    /// The fitted model itself (`fit --out` writes it as a `[platform]` table); a report read
    /// back from JSON has the defaults here.
    #[serde(skip)]
    pub model: PlatformModel,
}

/// How far the fit's global stage (a branch and bound, docs/calibration.md "How the fit
/// searches") proved its optimum.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct OptimumProof {
    /// Whether every box of parameters was settled: on the rows the proof ran on, no
    /// parameters within their bounds cost less than the optimum minus `gap_percent`.
    pub(crate) proven: bool,
    /// How much lower, in percent of the optimum's cost on those rows, a fit could still be
    /// (at most 0.1 when proven; what the box budget left otherwise).
    pub(crate) gap_percent: f64,
    /// Distinct (workload, link) rows the proof ran on: every one up to 64, else 64 evenly
    /// spaced ones, the optimum then polished on all.
    pub(crate) proven_on: usize,
    /// The fit's distinct (workload, link) rows.
    pub(crate) distinct_rows: usize,
    /// Boxes the branch and bound split.
    pub(crate) boxes: usize,
}

impl OptimumProof {
    fn from_proof(proof: &Proof) -> OptimumProof {
        let gap = if proof.cost > 0.0 {
            ((proof.cost - proof.lower_bound) / proof.cost).max(0.0) * 100.0
        } else {
            0.0
        };
        OptimumProof {
            proven: proof.proven,
            gap_percent: round_to(gap, 3),
            proven_on: proof.pairs,
            distinct_rows: proof.of_pairs,
            boxes: proof.boxes,
        }
    }

    /// One line for the text report.
    fn to_text(&self) -> String {
        let rows = if self.proven_on < self.distinct_rows {
            format!(
                " on {} of the {} distinct rows (evenly spaced; polished on all)",
                self.proven_on, self.distinct_rows
            )
        } else {
            String::new()
        };
        if self.proven {
            format!(
                "optimum: proven global{rows} to within {} % of its cost ({} boxes)",
                self.gap_percent, self.boxes
            )
        } else {
            format!(
                "optimum: NOT proven{rows}: a fit up to {} % cheaper may exist (box budget of {} spent)",
                self.gap_percent, self.boxes
            )
        }
    }
}

/// A `fit --json` document read back (by `plot` and `report --from`): a fit, or the predictions
/// of a platform fitted elsewhere (`fit --platform`), told apart by their fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FitDocument {
    /// A fit (`fit --json`).
    Fit(Box<FitReport>),
    /// Rows predicted by a platform fitted elsewhere (`fit --platform … --json`).
    Prediction(PredictionReport),
}

impl FitDocument {
    pub(crate) fn rows(&self) -> &[RowResult] {
        match self {
            FitDocument::Fit(f) => &f.rows,
            FitDocument::Prediction(p) => &p.rows,
        }
    }

    pub(crate) fn rows_used(&self) -> usize {
        match self {
            FitDocument::Fit(f) => f.rows_used,
            FitDocument::Prediction(p) => p.rows_used,
        }
    }

    pub(crate) fn rms_residual_percent(&self) -> f64 {
        match self {
            FitDocument::Fit(f) => f.rms_residual_percent,
            FitDocument::Prediction(p) => p.rms_residual_percent,
        }
    }

    /// `fit --platform`: what the given platform was fitted on.
    pub(crate) fn platform_fitted_on(&self) -> Option<&str> {
        match self {
            FitDocument::Fit(_) => None,
            FitDocument::Prediction(p) => Some(&p.platform_fitted_on),
        }
    }
}

/// Parameters some row depends on, most physically basic first: when two cannot be told apart
/// the earlier one takes the data.
fn candidates(rows: &[Measurement]) -> Vec<P> {
    let mut wanted: Vec<P> = Vec::new();
    for m in rows {
        let uses: &[P] = match m.workload {
            Workload::Dma {
                direction: DmaDirection::Write,
                ..
            } => &[
                P::DmaSetupNs,
                P::PostedWriteMbps,
                P::DmaDescriptorBytes,
                P::DmaWriteTlpNs,
            ],
            Workload::Dma {
                direction: DmaDirection::Read,
                ..
            } => &[
                P::DmaSetupNs,
                P::ReadLatencyNs,
                P::ReadLatencyPerByteNs,
                P::CompletionMbps,
                P::DmaMaxReadRequests,
                P::DmaDescriptorBytes,
                P::DmaReadTlpNs,
            ],
            Workload::Mmio {
                op: MmioOp::Store, ..
            } => &[P::MmioStoreIssueNs],
            Workload::Mmio {
                op: MmioOp::Load, ..
            } => &[
                P::MmioLoadLatencyNs,
                P::MmioLoadsPerThread,
                P::MmioLoadsOutstanding,
            ],
            Workload::Queued {
                device: DmaDirection::Write,
                ..
            } => &[
                P::CpuReadIoNs,
                P::DriveReadMbps,
                P::DriveReadIops,
                P::PostedWriteMbps,
            ],
            Workload::Queued {
                device: DmaDirection::Read,
                ..
            } => &[
                P::CpuWriteIoNs,
                P::DriveWriteMbps,
                P::DriveWriteIops,
                P::CompletionMbps,
            ],
        };
        for p in uses {
            if !wanted.contains(p) {
                wanted.push(*p);
            }
        }
    }
    let order = [
        P::CpuReadIoNs,
        P::CpuWriteIoNs,
        P::DriveReadIops,
        P::DriveWriteIops,
        P::DriveReadMbps,
        P::DriveWriteMbps,
        P::DmaSetupNs,
        P::PostedWriteMbps,
        P::ReadLatencyNs,
        P::ReadLatencyPerByteNs,
        P::CompletionMbps,
        P::DmaDescriptorBytes,
        P::DmaWriteTlpNs,
        P::DmaReadTlpNs,
        P::MmioStoreIssueNs,
        P::MmioLoadLatencyNs,
        P::DmaMaxReadRequests,
        P::MmioLoadsPerThread,
        P::MmioLoadsOutstanding,
    ];
    order.into_iter().filter(|p| wanted.contains(p)).collect()
}

/// Fits the platform parameters the rows depend on. `fitted_on` says what the rows are (it is
/// written into the model and the spec fragment).
pub fn fit(rows: &[Measurement], link: &LinkParams, fitted_on: &str) -> Result<FitReport> {
    let mut report = fit_rows(rows, link, fitted_on)?;
    if rows.iter().any(|m| m.latency_ns.is_some()) {
        report
            .conflicts
            .extend(latency_conflict(&report, rows, link, fitted_on)?);
    }
    Ok(report)
}

/// When rates and latencies are fitted together: fits the rates alone and, if adding the
/// latencies makes the rates' residuals much worse, says the two columns contradict each other
/// under the model, with both fits' residuals. (The model runs one DMA at a time; rates measured
/// with transfers pipelined and one transfer's latency describe different things.)
fn latency_conflict(
    joint: &FitReport,
    rows: &[Measurement],
    link: &LinkParams,
    fitted_on: &str,
) -> Result<Option<String>> {
    let rates_only: Vec<Measurement> = rows
        .iter()
        .map(|m| Measurement {
            latency_ns: None,
            ..m.clone()
        })
        .collect();
    let alone = fit_rows(&rates_only, link, fitted_on)?;
    let latency_errors: Vec<f64> = joint
        .rows
        .iter()
        .filter_map(|r| Some((r.predicted_latency_ns? / r.measured_latency_ns? - 1.0) * 100.0))
        .collect();
    let latency_rms = (latency_errors.iter().map(|e| e * e).sum::<f64>()
        / latency_errors.len().max(1) as f64)
        .sqrt();
    // The joint fit may keep the rates and give up the latencies, or the other way round: the
    // worse of its two columns against the rates fitted alone. Twice as bad and 5 points more:
    // beyond what an imperfect optimum leaves on consistent data (latencies ~11 % against rates
    // ~5 % seen on made-up rows), far below the hundreds of percent of a real contradiction.
    let joint_worst = joint.rms_residual_percent.max(latency_rms);
    if joint_worst <= 2.0 * alone.rms_residual_percent + 5.0 {
        return Ok(None);
    }
    let worst = joint
        .rows
        .iter()
        .zip(&alone.rows)
        .max_by(|a, b| {
            let change = |(j, s): &(&RowResult, &RowResult)| {
                (j.residual_percent.abs() - s.residual_percent.abs()).abs()
            };
            change(a).total_cmp(&change(b))
        })
        .map(|(j, s)| {
            format!(
                "; most affected: line {} {} ({:+.1} % alone, {:+.1} % with latencies)",
                j.line, j.workload, s.residual_percent, j.residual_percent
            )
        })
        .unwrap_or_default();
    Ok(Some(format!(
        "columns MBps and latency_ns cannot both be reproduced by this model: fitted on MBps \
         alone the rates' rms residual is {:.1} %, fitted on both it is {:.1} % with the \
         latencies' {:.1} %{worst}. The model runs one DMA at a time, so rates measured with \
         transfers in flight together and one transfer's latency contradict each other; fit \
         them separately",
        alone.rms_residual_percent, joint.rms_residual_percent, latency_rms
    )))
}

fn fit_rows(rows: &[Measurement], link: &LinkParams, fitted_on: &str) -> Result<FitReport> {
    link.validate()?;
    if rows.is_empty() {
        return Err(Error::bad_input("fit: no measurements"));
    }
    let all = candidates(rows);
    let distinct = Distinct::new(rows, link);
    let integers: Vec<P> = all.iter().copied().filter(|&p| spec(p).integer).collect();
    let continuous: Vec<P> = all.iter().copied().filter(|&p| !spec(p).integer).collect();
    let compiled = Compiled::new(&distinct, &continuous);
    let optimum = branch_and_bound(&compiled, &integers);
    // Every whole-number combination near the optimum: which ones fit as well decides whether
    // each whole number is determined, and among those that tie the defaults are preferred,
    // then the smallest values.
    let results = combination_costs(&compiled, &optimum, &integers);
    let best_cost = results.iter().map(|r| r.2).fold(f64::INFINITY, f64::min);
    let tie = |c: f64| c <= best_cost * (1.0 + 1e-6) + 1e-14;
    let default_whole = WHOLE.map(|p| spec(p).default);
    let differs = |c: &[f64; 3]| c.iter().zip(&default_whole).filter(|(x, d)| x != d).count();
    let (whole, t, cost) = results
        .iter()
        .filter(|r| tie(r.2))
        .min_by(|a, b| {
            differs(&a.0)
                .cmp(&differs(&b.0))
                .then(a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal))
        })
        .cloned()
        .expect("at least one combination");
    let rivalled: [bool; 3] =
        std::array::from_fn(|k| results.iter().any(|r| tie(r.2) && r.0[k] != whole[k]));
    let (mut model, params, fitted) = judge(
        &compiled,
        &all,
        &integers,
        AtOptimum {
            t,
            whole,
            cost,
            rivalled,
        },
        distinct.residual_count,
    );
    model.fitted_on = fitted_on.to_string();
    model.fitted = fitted;
    model.uncertainty = params
        .iter()
        .filter_map(|p| Some((p.key.to_string(), p.uncertainty?)))
        .collect();
    model.fitted_cells = rows
        .iter()
        .filter_map(|m| match m.workload {
            Workload::Dma { direction, size } => {
                let on = m.link.unwrap_or(*link);
                Some(FittedCell {
                    direction,
                    size,
                    gen: on.gen.number(),
                    width: on.width,
                })
            }
            _ => None,
        })
        .collect();
    let rows_out = compare(&model, rows, link);
    Ok(FitReport {
        fitted_on: fitted_on.to_string(),
        rows_used: rows.len(),
        rms_residual_percent: rms_percent(&rows_out),
        params,
        rows: rows_out,
        optimum: OptimumProof::from_proof(&optimum.proof),
        conflicts: Vec::new(),
        model,
    })
}

impl FitReport {
    /// Parameters with uncertainty and status, then one line per row with its residual.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "fitted on {}: {} rows, rms residual {:.2} %\n{}\n\n",
            self.fitted_on,
            self.rows_used,
            self.rms_residual_percent,
            self.optimum.to_text()
        );
        text.push_str(&format!(
            "{:<40} {:>14} {:>12}  {}\n",
            "parameter", "value", "±1σ", "status"
        ));
        for p in &self.params {
            let value = p.value.map_or("unbounded".to_string(), |v| format!("{v}"));
            let sigma = p.uncertainty.map_or("-".to_string(), |u| format!("{u}"));
            let status = match p.status {
                Status::Fitted => "fitted",
                Status::Bound => "BOUND ONLY",
                Status::NotDetermined => "NOT DETERMINED",
            };
            text.push_str(&format!(
                "{:<40} {:>14} {:>12}  {status} ({}){}\n",
                p.key,
                value,
                sigma,
                p.unit,
                if p.note.is_empty() {
                    String::new()
                } else {
                    format!(": {}", p.note)
                }
            ));
        }
        text.push('\n');
        text.push_str(&rows_text(&self.rows));
        for conflict in &self.conflicts {
            text.push_str(&format!("\nCONFLICT: {conflict}\n"));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Generation;

    #[test]
    fn rates_measured_in_flight_together_and_one_transfers_latency_are_named_as_a_conflict() {
        let link = LinkParams::new(Generation::Gen3, 4);
        let mut truth = PlatformModel::default();
        // Latency-dominated transfers (as a NIC's small reads are), so rates four times higher
        // cannot come from a smaller setup alone.
        truth.set(P::DmaSetupNs, 200.0);
        truth.set(P::ReadLatencyNs, 2000.0);
        truth.set(P::DmaMaxReadRequests, 4.0);
        let rows = |rate_factor: f64| -> Vec<Measurement> {
            [64, 512, 4096, 65536]
                .into_iter()
                .map(|size| {
                    let workload = Workload::Dma {
                        direction: DmaDirection::Read,
                        size,
                    };
                    let (mbps, latency) = predict(&truth, &workload, &link);
                    Measurement {
                        workload,
                        mbps: mbps * rate_factor,
                        latency_ns: Some(latency),
                        line: 2,
                        link: None,
                    }
                })
                .collect()
        };
        // One transfer at a time, as the model runs them: rates and latencies agree.
        let agree = fit(&rows(1.0), &link, "one at a time").unwrap();
        assert!(agree.conflicts.is_empty(), "{:?}", agree.conflicts);
        // Four transfers in flight: four times the rate, each with the same latency. No single
        // set of parameters gives both; the fit says which columns and by how much.
        let pipelined = fit(&rows(4.0), &link, "four in flight").unwrap();
        let [conflict] = pipelined.conflicts.as_slice() else {
            panic!("{:?}", pipelined.conflicts)
        };
        assert!(
            conflict.starts_with("columns MBps and latency_ns cannot both be reproduced"),
            "{conflict}"
        );
    }

    #[test]
    fn a_per_tlp_slot_is_recovered_from_three_sizes_and_predicts_the_size_past_mps() {
        // Writes made by a model whose TLPs each hold the path 75 ns (over twice a full TLP's
        // 35 ns wire time at Gen3 x8). From 64 B, 512 B and 2 KB the fit must find the slot,
        // although from a start below the wire time its gradient is zero (the restarts' job),
        // and then predict sizes it never saw, the saw-tooth just past MPS included.
        let link = LinkParams::new(Generation::Gen3, 8);
        let mut truth = PlatformModel::default();
        truth.set(P::DmaSetupNs, 1200.0);
        truth.set(P::DmaWriteTlpNs, 75.0);
        truth.set(P::PostedWriteMbps, 6000.0);
        let write = |size| Workload::Dma {
            direction: DmaDirection::Write,
            size,
        };
        let rows: Vec<Measurement> = [64, 512, 2048]
            .into_iter()
            .map(|size| Measurement {
                workload: write(size),
                mbps: predict(&truth, &write(size), &link).0,
                latency_ns: None,
                line: 2,
                link: None,
            })
            .collect();
        let report = fit(&rows, &link, "64 B, 512 B, 2 KB").unwrap();
        for size in [128, 256, 257, 260, 320, 1024, 1536] {
            let got = predict(&report.model, &write(size), &link).0;
            let want = predict(&truth, &write(size), &link).0;
            assert!(
                (got / want - 1.0).abs() < 0.005,
                "{size} B: {got} vs {want}"
            );
        }
        // One byte past MPS costs a whole slot: 257 B is slower than 256 B.
        let rate = |size| predict(&report.model, &write(size), &link).0;
        assert!(rate(257) < rate(256), "{} vs {}", rate(257), rate(256));
    }

    #[test]
    fn loads_at_several_thread_counts_fit_the_root_complex_limit_up_to_latency_scale() {
        // Rows made by a model with one load per thread and two in the root complex. Throughput
        // alone cannot tell (1, 2) loads at latency L from (2, 4) at 2L, so the counts stay "not
        // determined", yet the fit predicts eight threads, a count it never saw.
        let link = LinkParams::new(Generation::Gen3, 4);
        let mut truth = PlatformModel::default();
        truth.set(P::MmioLoadsOutstanding, 2.0);
        truth.set(P::MmioLoadLatencyNs, 900.0);
        let load = |threads| Workload::Mmio {
            op: MmioOp::Load,
            width: 4,
            threads,
        };
        let rows: Vec<Measurement> = [1, 2, 4]
            .into_iter()
            .map(|t| Measurement {
                workload: load(t),
                mbps: predict(&truth, &load(t), &link).0,
                latency_ns: None,
                line: 1,
                link: None,
            })
            .collect();
        let report = fit(&rows, &link, "1, 2 and 4 threads").unwrap();
        for key in ["mmio.loads_per_thread", "mmio.loads_outstanding"] {
            let p = report.params.iter().find(|p| p.key == key).unwrap();
            assert_eq!(p.status, Status::NotDetermined, "{key}");
        }
        let eight = predict(&report.model, &load(8), &link).0;
        let want = predict(&truth, &load(8), &link).0;
        assert!((eight / want - 1.0).abs() < 1e-6, "{eight} vs {want}");
        // Two loads in flight at most: eight threads move what two do.
        assert!((eight / rows[1].mbps - 1.0).abs() < 1e-6);
    }
}
