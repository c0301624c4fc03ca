//! Fitting the platform model ([`super::platform`]) to measurements
//! ([`super::measurements`]): bounded least squares on relative error (log of predicted over
//! measured, so a 64 B row weighs as much as a 4 MB one). Each distinct row's time is compiled
//! once into closed form ([`super::row_time`]: a maximum of linear terms and per-TLP hinges,
//! rate limits as their inverse). A global stage (particle swarm from `argmin`, over every
//! continuous parameter and the whole-number combinations, in a box the rows bound) finds the
//! basin; Levenberg-Marquardt (the `levenberg-marquardt` crate, analytic Jacobian, each step kept
//! within bounds) polishes the best points at every whole-number combination. Only parameters
//! some row depends on are candidates; at the optimum, one whose Jacobian column is zero ("not
//! limiting in this data") or a combination of earlier ones ("cannot be separated from …") is
//! reported as not determined. Uncertainties are one standard deviation from the residual
//! variance and `(JᵀJ)⁻¹` at the optimum. Deterministic: the swarm's seed is fixed, so the same
//! rows on the same link give the same parameters.

use std::borrow::Cow;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::measurements::{Measurement, Workload};
use super::platform::{DmaDirection, FittedCell, MmioOp, PlatformModel, P, PARAMS};
use super::row_time::{
    coordinate_bounds, from_coordinate, to_coordinate, value_per_coordinate, Builder, RowTime,
    WHOLE,
};
use super::transfer::LinkParams;
use crate::error::{Error, Result};
use crate::text::round_to;
use argmin::core::{CostFunction, Executor, State};
use argmin::solver::particleswarm::ParticleSwarm;
use levenberg_marquardt::{LeastSquaresProblem, LevenbergMarquardt};
use nalgebra::{storage::Owned, DMatrix, DVector, Dyn};
use rand::SeedableRng;

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
    /// The row's workload as the input wrote it.
    pub workload: String,
    /// Throughput measured (MB/s, 10^6 bytes per second).
    #[serde(rename = "measured_MBps")]
    pub measured_mbps: f64,
    /// Throughput the fitted model predicts for the same workload (MB/s).
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

/// How a parameter came out of the fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The data pins it down: the value and its uncertainty stand.
    Fitted,
    /// The data bounds it on one side only: at the reported value it just paces some row, and
    /// any value beyond it (the note says which way) fits as well.
    Bound,
    /// Some row depends on it, but the data cannot pin it down; left at its default.
    NotDetermined,
}

impl Status {
    /// The word `fit --json` writes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Fitted => "fitted",
            Status::Bound => "bound",
            Status::NotDetermined => "not_determined",
        }
    }
}

/// Relative change of a parameter used to probe whether the fit's cost rises on each side.
const PROBE: f64 = 1e-3;

/// Which sides of `p`'s value raise the cost (sensitivity, not where the optimiser stopped):
/// (below, above). A side that leaves the cost flat is one the data does not bound.
fn sensitive_sides(model: &PlatformModel, p: P, compiled: &Compiled, cost: f64) -> (bool, bool) {
    let s = spec(p);
    let value = model.get(p);
    let step = PROBE * value.abs().max(scale_of(p, value) * PROBE);
    let rises = |v: f64| {
        let v = v.clamp(s.min, s.max);
        if v == value || !v.is_finite() {
            return true;
        }
        let mut m = model.clone();
        m.set(p, v);
        compiled.cost_of(&m) > cost * (1.0 + 1e-7) + 1e-18
    };
    (rises(value - step), rises(value + step))
}

/// How far a parameter that paces no row can move toward binding before the cost rises: the
/// data says it is beyond this value. Bisection in log space between `from` (flat) and the
/// bound on the binding side.
fn flat_limit(model: &PlatformModel, p: P, compiled: &Compiled, cost: f64) -> Option<f64> {
    let s = spec(p);
    // Rates bind when lowered; times, bytes and slots when raised.
    let binds_low = s.unit == "MB/s";
    let flat = |v: f64| {
        let mut m = model.clone();
        m.set(p, v);
        compiled.cost_of(&m) <= cost * (1.0 + 1e-6) + 1e-15
    };
    let (mut good, mut bad) = if binds_low {
        (1e9_f64.min(s.max), s.min.max(1e-3))
    } else {
        (s.min.max(1e-3), s.max)
    };
    if !flat(good) || flat(bad) {
        return None;
    }
    for _ in 0..60 {
        let mid = (good * bad).sqrt();
        if flat(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

/// The measurement that would pin a parameter down when these rows do not.
fn what_determines(p: P) -> &'static str {
    match p {
        P::DmaDescriptorBytes => {
            "two sizes (a small and a large one, e.g. 64 B and 1 MB) measured on a second link configuration"
        }
        P::DmaSetupNs => "a small transfer (64 B), where the fixed cost dominates",
        P::PostedWriteMbps => {
            "writes large enough to stream (64 KB and up) whose rate flattens below the link's"
        }
        P::CompletionMbps => {
            "reads large enough to stream (64 KB and up) whose rate flattens below the link's"
        }
        P::DmaWriteTlpNs => {
            "a write just past a multiple of MPS (one nearly empty extra TLP) beside one at the multiple"
        }
        P::DmaReadTlpNs => {
            "a read just past a multiple of MRRS (one nearly empty extra request) beside one at the multiple"
        }
        P::ReadLatencyNs | P::ReadLatencyPerByteNs => {
            "reads of several sizes up to MRRS, or read latencies (latency_ns) of the same device"
        }
        P::DmaMaxReadRequests => "reads of several sizes above MRRS × a few requests",
        P::MmioLoadsOutstanding | P::MmioLoadsPerThread => {
            "loads at several thread counts (CSV column jobs)"
        }
        P::CpuReadIoNs | P::CpuWriteIoNs => "small-block queued I/O at one and several jobs",
        P::DriveReadMbps | P::DriveWriteMbps => "large-block sequential queued I/O",
        P::DriveReadIops | P::DriveWriteIops => "small-block queued I/O at several jobs",
        _ => "rows that this parameter alone limits",
    }
}

/// One fitted (or not determined) parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ParamResult {
    /// The `[platform]` key, e.g. `dma.setup_ns`.
    pub key: Cow<'static, str>,
    pub(crate) unit: Cow<'static, str>,
    /// `null` when unbounded (the default of rate limits nothing limits).
    pub value: Option<f64>,
    /// One standard deviation; `null` when the rows leave no spare degree of freedom or the
    /// parameter is a whole number.
    pub uncertainty: Option<f64>,
    /// Whether the data determined it.
    pub status: Status,
    /// Why it is not determined, or that it sits on a bound.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The result of `pcielab fit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FitReport {
    pub(crate) fitted_on: String,
    pub(crate) rows_used: usize,
    /// Root mean square of the per-row relative residuals, in percent.
    pub(crate) rms_residual_percent: f64,
    /// Every parameter with its value and how it came out.
    pub params: Vec<ParamResult>,
    /// Every row used, measured against predicted.
    pub rows: Vec<RowResult>,
    /// Columns the model cannot reproduce together, each with the residuals that show it.
    #[serde(default)]
    pub(crate) conflicts: Vec<String>,
    /// The fitted model itself (`fit --out` writes it as a `[platform]` table); a report read
    /// back from JSON has the defaults here.
    #[serde(skip)]
    pub model: PlatformModel,
}

/// A `fit --json` document read back (by `plot` and `report --from`): a fit, or the predictions
/// of a platform fitted elsewhere (`fit --platform`), told apart by their fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FitDocument {
    /// A fit: parameters and the rows they were fitted on.
    Fit(Box<FitReport>),
    /// Predictions of a platform fitted elsewhere (`fit --platform`).
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

fn spec(p: P) -> &'static super::platform::ParamSpec {
    &PARAMS[p as usize]
}

/// The log of measured figures of the rows that share one (workload, link) pair: how many and
/// their mean. Rows of one pair share a prediction, so their squared residuals sum to
/// `count × (ln predicted − mean)²` plus their spread about the mean, which no parameter moves.
#[derive(Default, Clone, Copy)]
struct Moments {
    count: f64,
    mean: f64,
}

/// The distinct (workload, link) pairs of a fit's rows with the moments of their measurements:
/// the model is evaluated once per pair at every step and each pair contributes one weighted
/// residual (one more for measured latencies), so a step's work depends on the distinct pairs,
/// not on the rows. The cost, the Jacobian's normal equations and the column tests are the
/// same sums as over every row's residual.
struct Distinct {
    pairs: Vec<(Workload, LinkParams)>,
    rate: Vec<Moments>,
    latency: Vec<Moments>,
    /// Σ over rows of (ln measured − its pair's mean)², rates and latencies.
    spread: f64,
    /// Residuals of the rows one by one (every row, and every measured latency).
    residual_count: usize,
}

impl Distinct {
    fn new(rows: &[Measurement], link: &LinkParams) -> Distinct {
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut pairs = Vec::new();
        let of_row: Vec<usize> = rows
            .iter()
            .map(|m| {
                let pair = (m.workload, m.link.unwrap_or(*link));
                // Both are plain integers and enums: their Debug text is an exact key.
                *index.entry(format!("{pair:?}")).or_insert_with(|| {
                    pairs.push(pair);
                    pairs.len() - 1
                })
            })
            .collect();
        let mut rate = vec![Moments::default(); pairs.len()];
        let mut latency = vec![Moments::default(); pairs.len()];
        let add = |into: &mut Moments, value: f64| {
            into.count += 1.0;
            into.mean += value;
        };
        // A measured latency counts only where the model predicts one (DMA reads and writes),
        // which depends on the workload, never on the parameters.
        let predicts_latency: Vec<bool> = pairs
            .iter()
            .map(|(workload, link)| {
                !predict(&PlatformModel::default(), workload, link)
                    .1
                    .is_nan()
            })
            .collect();
        let latency_of = |m: &Measurement, at: usize| m.latency_ns.filter(|_| predicts_latency[at]);
        for (m, &at) in rows.iter().zip(&of_row) {
            add(&mut rate[at], m.mbps.ln());
            if let Some(measured) = latency_of(m, at) {
                add(&mut latency[at], measured.ln());
            }
        }
        for moments in rate.iter_mut().chain(latency.iter_mut()) {
            if moments.count > 0.0 {
                moments.mean /= moments.count;
            }
        }
        let mut spread = 0.0;
        let mut residual_count = 0;
        for (m, &at) in rows.iter().zip(&of_row) {
            spread += (m.mbps.ln() - rate[at].mean).powi(2);
            residual_count += 1;
            if let Some(measured) = latency_of(m, at) {
                spread += (measured.ln() - latency[at].mean).powi(2);
                residual_count += 1;
            }
        }
        Distinct {
            pairs,
            rate,
            latency,
            spread,
            residual_count,
        }
    }

    /// The sum of the rows' squared residuals, from the weighted ones [`residuals`] returns.
    fn cost(&self, weighted: &[f64]) -> f64 {
        weighted.iter().map(|v| v * v).sum::<f64>() + self.spread
    }
}

/// The fit's rows in closed form ([`super::row_time`]): one rate time per distinct pair, and a
/// latency time where latencies were measured, with every continuous candidate free. Built once;
/// each step of the search and of the polish only evaluates these sums.
struct Compiled<'a> {
    distinct: &'a Distinct,
    /// The continuous candidates, in the order of the coordinates `t`.
    free: Vec<P>,
    /// ln of the numerator that turns a time into MB/s, and the time.
    rates: Vec<(f64, RowTime)>,
    latencies: Vec<Option<RowTime>>,
    /// Every pair, and the ones the global stage sees.
    all: Vec<usize>,
    sample: Vec<usize>,
}

impl<'a> Compiled<'a> {
    fn new(distinct: &'a Distinct, free: &[P]) -> Compiled<'a> {
        let defaults = PlatformModel::default();
        let builder = Builder {
            fixed: &defaults,
            free,
        };
        let mut rates = Vec::with_capacity(distinct.pairs.len());
        let mut latencies = Vec::with_capacity(distinct.pairs.len());
        for (at, (workload, link)) in distinct.pairs.iter().enumerate() {
            let (numerator, time) = builder.rate_time(workload, link);
            rates.push((numerator.ln(), time));
            latencies.push(if distinct.latency[at].count > 0.0 {
                builder.latency_time(workload, link)
            } else {
                None
            });
        }
        let all: Vec<usize> = (0..rates.len()).collect();
        let stride = all.len().div_ceil(SEARCH_PAIRS).max(1);
        let sample = all.iter().copied().step_by(stride).collect();
        Compiled {
            distinct,
            free: free.to_vec(),
            rates,
            latencies,
            all,
            sample,
        }
    }

    /// The coordinates and whole numbers of `model`.
    fn point_of(&self, model: &PlatformModel) -> (Vec<f64>, [f64; 3]) {
        (
            self.free
                .iter()
                .map(|&p| to_coordinate(p, model.get(p)))
                .collect(),
            WHOLE.map(|p| model.get(p)),
        )
    }

    /// The model at coordinates `t` and whole numbers `whole`, defaults elsewhere.
    fn model_at(&self, t: &[f64], whole: &[f64; 3]) -> PlatformModel {
        let mut model = PlatformModel::default();
        for (&p, &v) in self.free.iter().zip(t) {
            model.set(p, from_coordinate(p, v));
        }
        for (&p, &v) in WHOLE.iter().zip(whole) {
            model.set(p, v);
        }
        model
    }

    /// Log-ratio residuals of the pairs in `pairs` (each followed by its latency's, where one
    /// was measured), each weighted by the square root of its rows so that squares and
    /// products sum as over the rows. With `gradient`, also each residual's derivatives with
    /// respect to the coordinates, one row of `t.len()` per residual.
    fn residuals(
        &self,
        t: &[f64],
        whole: &[f64; 3],
        pairs: impl Iterator<Item = usize>,
        mut gradient: Option<&mut Vec<f64>>,
    ) -> Vec<f64> {
        let mut r = Vec::with_capacity(self.rates.len());
        let mut g = vec![0.0; t.len()];
        for at in pairs {
            let (ln_numerator, time) = &self.rates[at];
            let rate = self.distinct.rate[at];
            let weight = rate.count.sqrt();
            // ln(numerator / time): d/dt = −(dtime/dt) / time.
            let ns = if let Some(out) = gradient.as_deref_mut() {
                let ns = time.time_and_gradient(t, whole, &mut g);
                out.extend(g.iter().map(|d| -weight * d / ns));
                ns
            } else {
                time.time(t, whole)
            };
            r.push(weight * (ln_numerator - ns.ln() - rate.mean));
            if let Some(time) = &self.latencies[at] {
                let measured = self.distinct.latency[at];
                let weight = measured.count.sqrt();
                let ns = if let Some(out) = gradient.as_deref_mut() {
                    let ns = time.time_and_gradient(t, whole, &mut g);
                    out.extend(g.iter().map(|d| weight * d / ns));
                    ns
                } else {
                    time.time(t, whole)
                };
                r.push(weight * (ns.ln() - measured.mean));
            }
        }
        r
    }

    /// The sum of the squared residuals of `pairs`' rows at (`t`, `whole`) (with every pair:
    /// the fit's cost).
    fn cost(&self, t: &[f64], whole: &[f64; 3], pairs: &[usize]) -> f64 {
        let r = self.residuals(t, whole, pairs.iter().copied(), None);
        self.distinct.cost(&r)
    }

    /// The fit's cost at a model's values.
    fn cost_of(&self, model: &PlatformModel) -> f64 {
        let (t, whole) = self.point_of(model);
        self.cost(&t, &whole, &self.all)
    }

    /// The derivatives of `pairs`' residuals with respect to the coordinates in `active`, one
    /// column each.
    fn columns(
        &self,
        t: &[f64],
        whole: &[f64; 3],
        active: &[usize],
        pairs: &[usize],
    ) -> Vec<Vec<f64>> {
        let mut rows = Vec::new();
        self.residuals(t, whole, pairs.iter().copied(), Some(&mut rows));
        active
            .iter()
            .map(|&j| rows.iter().skip(j).step_by(t.len()).copied().collect())
            .collect()
    }

    /// Levenberg-Marquardt (the `levenberg-marquardt` crate, analytic Jacobian) from `t` over the
    /// coordinates in `active`, each kept within its bounds, on the rows of `pairs`. Returns
    /// the coordinates and the cost on those rows.
    fn polish(
        &self,
        t: &[f64],
        whole: &[f64; 3],
        active: &[usize],
        pairs: &[usize],
    ) -> (Vec<f64>, f64) {
        if active.is_empty() {
            return (t.to_vec(), self.cost(t, whole, pairs));
        }
        // Clamping a step to the bounds hides them from the crate's trust region, which then
        // stops where a clamped coordinate cannot move: each coordinate that ends on a bound is
        // held there and the rest are polished again, until none reaches a new one.
        let mut polished = t.to_vec();
        let mut moving = active.to_vec();
        // Last, every coordinate free again from where the held ones left the rest: one held
        // on the way (a latency pushed to 0 while the others were far off) may belong inside.
        let mut released = false;
        loop {
            let problem = Polish {
                compiled: self,
                whole: *whole,
                t: polished.clone(),
                active: moving.clone(),
                pairs,
            };
            // Tolerances far below what the verdicts' probes (1e-7 of the cost) can see: the
            // slots and latencies of a read trade off along long, nearly flat valleys.
            let (done, _) = LevenbergMarquardt::new()
                .with_ftol(1e-13)
                .with_xtol(1e-13)
                .with_patience(400)
                .minimize(problem);
            if self.cost(&done.t, whole, pairs) <= self.cost(&polished, whole, pairs) {
                polished = done.t;
            }
            let before = moving.len();
            moving.retain(|&j| {
                let (low, high) = coordinate_bounds(self.free[j]);
                polished[j] > low && polished[j] < high
            });
            if released {
                break;
            }
            if moving.len() == before || moving.is_empty() {
                if moving.len() == active.len() {
                    break;
                }
                moving = active.to_vec();
                released = true;
            }
        }
        let (start, end) = (
            self.cost(t, whole, pairs),
            self.cost(&polished, whole, pairs),
        );
        if end <= start {
            (polished, end)
        } else {
            (t.to_vec(), start)
        }
    }
}

/// One polish: the coordinates in `active` are the optimiser's, the rest stay.
struct Polish<'c, 'a> {
    compiled: &'c Compiled<'a>,
    whole: [f64; 3],
    t: Vec<f64>,
    active: Vec<usize>,
    pairs: &'c [usize],
}

impl LeastSquaresProblem<f64, Dyn, Dyn> for Polish<'_, '_> {
    type ResidualStorage = Owned<f64, Dyn>;
    type JacobianStorage = Owned<f64, Dyn, Dyn>;
    type ParameterStorage = Owned<f64, Dyn>;

    fn set_params(&mut self, x: &DVector<f64>) {
        for (&j, &v) in self.active.iter().zip(x.iter()) {
            let (low, high) = coordinate_bounds(self.compiled.free[j]);
            self.t[j] = v.clamp(low, high);
        }
    }

    fn params(&self) -> DVector<f64> {
        DVector::from_iterator(self.active.len(), self.active.iter().map(|&j| self.t[j]))
    }

    fn residuals(&self) -> Option<DVector<f64>> {
        let c = self.compiled;
        let r = c.residuals(&self.t, &self.whole, self.pairs.iter().copied(), None);
        r.iter()
            .all(|v| v.is_finite())
            .then(|| DVector::from_vec(r))
    }

    fn jacobian(&self) -> Option<DMatrix<f64>> {
        let columns = self
            .compiled
            .columns(&self.t, &self.whole, &self.active, self.pairs);
        let height = columns.first().map_or(0, Vec::len);
        let jacobian = DMatrix::from_fn(height, columns.len(), |i, j| columns[j][i]);
        jacobian.iter().all(|v| v.is_finite()).then_some(jacobian)
    }
}

/// At most this many distinct pairs take part in the global search; the polish sees them all.
/// Enough to show every binding pattern of a sweep of sizes, few enough that the search costs
/// the same on 10,000 distinct rows as on 250.
const SEARCH_PAIRS: usize = 250;

/// The global stage: particle swarm (`argmin`) over every continuous coordinate and an index into
/// `combos`, in a box the rows bound (no term of a row's time can exceed the time measured,
/// twice over for misfit). Returns, for each combination, the points to polish there: the
/// swarm's best, the same with every slot and rate limit binding, the cheapest particles, and
/// the best point it evaluated with that combination.
fn global_search(compiled: &Compiled, combos: &[[f64; 3]]) -> Result<Vec<Vec<Vec<f64>>>> {
    let n = compiled.free.len();
    let mut reach = vec![f64::INFINITY; n];
    for &at in &compiled.sample {
        let (ln_numerator, time) = &compiled.rates[at];
        let measured_ns = (ln_numerator - compiled.distinct.rate[at].mean).exp();
        time.reach(2.0 * measured_ns, &mut reach);
        if let Some(latency) = &compiled.latencies[at] {
            latency.reach(2.0 * compiled.distinct.latency[at].mean.exp(), &mut reach);
        }
    }
    let mut low: Vec<f64> = Vec::with_capacity(n + 1);
    let mut high: Vec<f64> = Vec::with_capacity(n + 1);
    for (&p, &r) in compiled.free.iter().zip(&reach) {
        let (lo, hi) = coordinate_bounds(p);
        low.push(lo);
        high.push(hi.min(r).max(lo));
    }
    low.push(0.0);
    high.push(combos.len() as f64);
    let search = Search {
        compiled,
        combos,
        best_per_combo: Mutex::new(vec![(f64::INFINITY, Vec::new()); combos.len()]),
    };
    let swarm = ParticleSwarm::new((low, high.clone()), SWARM_PARTICLES)
        .with_rng_generator(rand::rngs::StdRng::seed_from_u64(SWARM_SEED));
    let result = Executor::new(search, swarm)
        .configure(|state| state.max_iters(SWARM_ITERATIONS))
        .run()
        .map_err(|e| Error::runtime(format!("fit: global search failed: {e}")))?;
    let best = result
        .state()
        .get_best_param()
        .map(|p| p.position[..n].to_vec());
    // The particles where the swarm left them, cheapest first.
    let mut particles: Vec<(f64, Vec<f64>)> = result
        .state()
        .get_population()
        .into_iter()
        .flatten()
        .map(|p| (p.cost, p.position[..n].to_vec()))
        .collect();
    particles.sort_by(|a, b| a.0.total_cmp(&b.0));
    let per_combo = result
        .problem
        .problem
        .map(|search| search.best_per_combo.into_inner().unwrap_or_default())
        .unwrap_or_default();
    // The swarm's best with every slot and rate limit moved to where it paces every row: from
    // there each one's gradient leads down to where the rows put it.
    let binding: Option<Vec<f64>> = best.as_ref().map(|b| {
        b.iter()
            .enumerate()
            .map(|(j, &v)| {
                if acts_through_max(compiled.free[j]) {
                    high[j] / 4.0
                } else {
                    v
                }
            })
            .collect()
    });
    Ok(per_combo
        .into_iter()
        .map(|(_, own)| {
            let mut points: Vec<Vec<f64>> = best.iter().chain(&binding).cloned().collect();
            points.extend(
                particles
                    .iter()
                    .take(SWARM_POLISHED)
                    .map(|(_, x)| x.clone()),
            );
            if !own.is_empty() {
                points.push(own);
            }
            points
        })
        .collect())
}

/// Particles in the swarm and how many steps it takes: chosen by measurement (docs/calibration.md, "How the fit searches").
const SWARM_PARTICLES: usize = 40;
const SWARM_ITERATIONS: u64 = 120;
/// Whole-number combinations polished from every start (besides any within 2 % of the best).
const CLOSE_COMBINATIONS: usize = 4;
/// Particles (cheapest first) polished besides the swarm's best.
const SWARM_POLISHED: usize = 3;
/// Any fixed seed: the same rows give the same fit.
const SWARM_SEED: u64 = 34;

/// The whole-number combination a search coordinate falls in.
fn combo_of(x: &[f64], count: usize) -> usize {
    (x[0].max(0.0) as usize).min(count - 1)
}

/// The global search's cost: the sampled pairs' squared residuals.
struct Search<'c, 'a> {
    compiled: &'c Compiled<'a>,
    combos: &'c [[f64; 3]],
    /// The cheapest point evaluated with each combination, and its cost.
    best_per_combo: Mutex<Vec<(f64, Vec<f64>)>>,
}

impl CostFunction for Search<'_, '_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, x: &Vec<f64>) -> std::result::Result<f64, argmin::core::Error> {
        let n = self.compiled.free.len();
        let combo = combo_of(&x[n..], self.combos.len());
        let r = self.compiled.residuals(
            &x[..n],
            &self.combos[combo],
            self.compiled.sample.iter().copied(),
            None,
        );
        let cost: f64 = r.iter().map(|v| v * v).sum();
        if let Ok(mut best) = self.best_per_combo.lock() {
            if cost < best[combo].0 {
                best[combo] = (cost, x[..n].to_vec());
            }
        }
        Ok(if cost.is_finite() { cost } else { f64::MAX })
    }
}

/// Whether `p` limits through a `max` (a per-TLP slot, an issue interval or a rate limit), so
/// that away from where it binds its gradient is zero.
fn acts_through_max(p: P) -> bool {
    matches!(
        p,
        P::DmaWriteTlpNs | P::DmaReadTlpNs | P::MmioStoreIssueNs | P::CpuReadIoNs | P::CpuWriteIoNs
    ) || matches!(spec(p).unit, "MB/s" | "I/O per s")
}

/// Scale that makes each parameter's step sizes comparable.
fn scale_of(p: P, start: f64) -> f64 {
    let floor = match spec(p).unit {
        "ns/B" => 0.05,
        "B" => 16.0,
        _ => 1.0,
    };
    start.abs().max(floor)
}
/// Why parameter `i` (of `free`) is not determined by `columns`, if it is not: a zero column,
/// or one that earlier columns already span.
fn undetermined(columns: &[Vec<f64>], free: &[P]) -> Option<(usize, String)> {
    let mut basis: Vec<Vec<f64>> = Vec::new();
    let mut owners: Vec<usize> = Vec::new();
    for (i, col) in columns.iter().enumerate() {
        let norm: f64 = col.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm < 1e-9 {
            return Some((i, "no row is paced by it at the best fit".into()));
        }
        let mut v = col.clone();
        let mut overlaps = Vec::new();
        for (b, &owner) in basis.iter().zip(&owners) {
            let dot: f64 = v.iter().zip(b).map(|(a, c)| a * c).sum();
            if dot.abs() > 1e-2 * norm {
                overlaps.push(owner);
            }
            for (vk, bk) in v.iter_mut().zip(b) {
                *vk -= dot * bk;
            }
        }
        let left: f64 = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        if left < 1e-4 * norm {
            let with: Vec<&str> = overlaps.iter().map(|&o| spec(free[o]).key).collect();
            return Some((
                i,
                format!(
                    "cannot be determined by this data: its effect cannot be separated from {}",
                    with.join(", ")
                ),
            ));
        }
        basis.push(v.iter().map(|x| x / left).collect());
        owners.push(i);
    }
    None
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
    // Every combination of the whole-number parameters (at most three, small ranges), the
    // others at their defaults.
    let defaults = PlatformModel::default();
    let mut combos: Vec<[f64; 3]> = vec![WHOLE.map(|p| defaults.get(p))];
    for &p in &integers {
        let top = if p == P::DmaMaxReadRequests { 32 } else { 8 };
        let at = WHOLE.iter().position(|&w| w == p).expect("a whole number");
        combos = combos
            .into_iter()
            .flat_map(|c| {
                (1..=top).map(move |v| {
                    let mut c = c;
                    c[at] = f64::from(v);
                    c
                })
            })
            .collect();
    }
    let compiled = Compiled::new(&distinct, &continuous);
    let everything: Vec<usize> = (0..continuous.len()).collect();
    // Every point the search found, polished at every combination on the rows it saw; then,
    // on every row, each combination that came close there (the rest keep the cost of their
    // point): each combination's best cost is what tells a uniquely best whole number from one
    // others tie with.
    let starts = global_search(&compiled, &combos)?;
    // Slots and rate limits (coordinate 0 where they pace nothing): the swarm rarely lands
    // exactly on "paces nothing", so each is also tried there.
    let hinged: Vec<usize> = everything
        .iter()
        .copied()
        .filter(|&j| coordinate_bounds(continuous[j]).0 == 0.0 && acts_through_max(continuous[j]))
        .collect();
    let from = |t: &[f64], whole: &[f64; 3]| {
        let mut best = compiled.polish(t, whole, &everything, &compiled.sample);
        for &j in &hinged {
            if best.0[j] > 0.0 {
                let mut unpaced = best.0.clone();
                unpaced[j] = 0.0;
                let other = compiled.polish(&unpaced, whole, &everything, &compiled.sample);
                if other.1 < best.1 {
                    best = other;
                }
            }
        }
        best
    };
    // Every combination from the swarm's best point; the few that come out best (and any
    // within 2 % of the best) from every start.
    let mut results: Vec<(Vec<f64>, f64)> = combos
        .iter()
        .zip(&starts)
        .map(|(whole, starts)| compiled.polish(&starts[0], whole, &everything, &compiled.sample))
        .collect();
    let mut order: Vec<usize> = (0..combos.len()).collect();
    order.sort_by(|&a, &b| results[a].1.total_cmp(&results[b].1));
    let first = results[order[0]].1;
    for (rank, &c) in order.iter().enumerate() {
        if rank >= CLOSE_COMBINATIONS && results[c].1 > first * 1.02 {
            break;
        }
        for t in &starts[c] {
            let other = from(t, &combos[c]);
            if other.1 < results[c].1 {
                results[c] = other;
            }
        }
    }
    if compiled.sample.len() < compiled.all.len() {
        let best_sampled = results.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
        for (whole, result) in combos.iter().zip(&mut results) {
            *result = if result.1 <= best_sampled * (1.0 + 1e-3) + 1e-12 {
                compiled.polish(&result.0, whole, &everything, &compiled.all)
            } else {
                let cost = compiled.cost(&result.0, whole, &compiled.all);
                (std::mem::take(&mut result.0), cost)
            };
        }
    }
    let best_cost = results.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
    let tie = |c: f64| c <= best_cost * (1.0 + 1e-6) + 1e-14;
    // Among equally good combinations prefer the defaults, then the smallest values.
    let default_whole = WHOLE.map(|p| spec(p).default);
    let differs = |c: &[f64; 3]| c.iter().zip(&default_whole).filter(|(x, d)| x != d).count();
    let chosen = (0..combos.len())
        .filter(|&c| tie(results[c].1))
        .min_by(|&a, &b| {
            differs(&combos[a]).cmp(&differs(&combos[b])).then(
                combos[a]
                    .partial_cmp(&combos[b])
                    .unwrap_or(std::cmp::Ordering::Equal),
            )
        })
        .expect("at least one combination");
    let whole = combos[chosen];
    let (mut t, mut cost) = results[chosen].clone();
    // Parameters the data cannot determine at the best fit go back to their defaults and the
    // rest are polished again, until every one left is determined.
    let mut active = everything;
    let mut dropped: Vec<(P, String, bool)> = Vec::new();
    let columns = loop {
        let columns: Vec<Vec<f64>> = compiled
            .columns(&t, &whole, &active, &compiled.all)
            .into_iter()
            .zip(&active)
            .map(|(c, &j)| {
                // Relative sensitivity, so one threshold serves every unit.
                let scale = if t[j] != 0.0 { t[j].abs() } else { 1.0 };
                c.into_iter().map(|v| v * scale).collect()
            })
            .collect();
        let free: Vec<P> = active.iter().map(|&j| continuous[j]).collect();
        let Some((i, why)) = undetermined(&columns, &free) else {
            break columns;
        };
        let gone = active.remove(i);
        let p = continuous[gone];
        // Back to its default when the others can make up for it; where a bound stops them
        // (a fixed cost split between setup at 0 and a latency), at the value it had.
        let mut reset = t.clone();
        reset[gone] = to_coordinate(p, spec(p).default);
        // Where its column is a combination of the others', they take over its effect along
        // that combination (least squares), so the polish starts where the cost is the same.
        let kept_columns = compiled.columns(&t, &whole, &active, &compiled.all);
        let own = compiled
            .columns(&t, &whole, &[gone], &compiled.all)
            .remove(0);
        if !kept_columns.is_empty() {
            let spanning =
                DMatrix::from_fn(own.len(), kept_columns.len(), |r, k| kept_columns[k][r]);
            let target = DVector::from_vec(own);
            if let Ok(share) = spanning.svd(true, true).solve(&target, 1e-12) {
                let moved = t[gone] - reset[gone];
                for (&j, a) in active.iter().zip(share.iter()) {
                    let (low, high) = coordinate_bounds(continuous[j]);
                    reset[j] = (reset[j] + a * moved).clamp(low, high);
                }
            }
        }
        let (at_default, default_cost) = compiled.polish(&reset, &whole, &active, &compiled.all);
        let default_kept = default_cost <= cost * (1.0 + 1e-6) + 1e-14;
        (t, cost) = if default_kept {
            (at_default, default_cost)
        } else {
            compiled.polish(&t, &whole, &active, &compiled.all)
        };
        dropped.push((p, why, default_kept));
    };
    let model = compiled.model_at(&t, &whole);
    let kept: Vec<P> = active.iter().map(|&j| continuous[j]).collect();
    let dof = distinct.residual_count as f64 - kept.len() as f64 - integers.len() as f64;
    // ±1σ from σ² (JᵀJ)⁻¹ in the coordinates, carried to the parameter's own unit (a rate is
    // the inverse of its coordinate).
    let covariance: Vec<Option<f64>> = if dof > 0.0 && !kept.is_empty() {
        let height = columns[0].len();
        let jacobian = DMatrix::from_fn(height, kept.len(), |i, k| {
            let j = active[k];
            let scale = if t[j] != 0.0 { t[j].abs() } else { 1.0 };
            columns[k][i] / scale
        });
        let inverse = (jacobian.transpose() * &jacobian).try_inverse();
        let sigma2 = cost / dof;
        active
            .iter()
            .enumerate()
            .map(|(k, &j)| {
                let variance = inverse.as_ref()?[(k, k)] * sigma2;
                let sigma = variance.max(0.0).sqrt();
                Some(sigma * value_per_coordinate(continuous[j], t[j]).abs())
            })
            .collect()
    } else {
        vec![None; kept.len()]
    };
    let mut params = Vec::new();
    let mut fitted = Vec::new();
    for &p in &all {
        let s = spec(p);
        let value = model.get(p);
        let shown = value.is_finite().then(|| round_to(value, 4));
        if let Some(i) = kept.iter().position(|&k| k == p) {
            let at_bound = value <= s.min || value >= s.max;
            let (below, above) = sensitive_sides(&model, p, &compiled, cost);
            if !at_bound && below != above {
                let (side, word) = if above {
                    ("at most", "below")
                } else {
                    ("at least", "above")
                };
                params.push(ParamResult {
                    key: s.key.into(),
                    unit: s.unit.into(),
                    value: shown,
                    uncertainty: None,
                    status: Status::Bound,
                    note: format!(
                        "{side} this value: it just paces a row here, and any value {word} it fits as well; {} would determine it",
                        what_determines(p)
                    ),
                });
                fitted.push(s.key.to_string());
                continue;
            }
            params.push(ParamResult {
                key: s.key.into(),
                unit: s.unit.into(),
                value: shown,
                uncertainty: covariance[i].map(|u| round_to(u, 4)),
                status: Status::Fitted,
                note: if at_bound {
                    format!("at its bound ({} to {} {})", s.min, s.max, s.unit)
                } else if covariance[i].is_some_and(|u| u > value.abs()) {
                    format!(
                        "poorly determined: ±1σ exceeds the value; {} would determine it",
                        what_determines(p)
                    )
                } else if dof <= 0.0 {
                    "as many parameters as rows: no spare row to estimate uncertainty".into()
                } else {
                    String::new()
                },
            });
            fitted.push(s.key.to_string());
        } else if integers.contains(&p) {
            let at = WHOLE.iter().position(|&w| w == p).expect("a whole number");
            let rivals = (0..combos.len())
                .filter(|&c| tie(results[c].1) && combos[c][at] != whole[at])
                .count();
            let status = if rivals == 0 {
                fitted.push(s.key.to_string());
                Status::Fitted
            } else {
                Status::NotDetermined
            };
            params.push(ParamResult {
                key: s.key.into(),
                unit: s.unit.into(),
                value: shown,
                uncertainty: None,
                status,
                note: if rivals == 0 {
                    "whole number: enumerated, uniquely best".into()
                } else {
                    "cannot be determined by this data: other whole numbers fit as well; default kept".into()
                },
            });
        } else {
            let (why, kept_as) = dropped.iter().find(|(d, ..)| *d == p).map_or_else(
                || (String::new(), "default kept"),
                |(_, w, default_kept)| {
                    let kept_as = if *default_kept {
                        "default kept"
                    } else {
                        "kept where the fit left it (its default fits worse)"
                    };
                    (w.clone(), kept_as)
                },
            );
            let limit = flat_limit(&model, p, &compiled, cost).map_or_else(String::new, |v| {
                let side = if s.unit == "MB/s" {
                    "at least"
                } else {
                    "at most"
                };
                format!(
                    "; the data only says it is {side} {} {}",
                    round_to(v, 4),
                    s.unit
                )
            });
            params.push(ParamResult {
                key: s.key.into(),
                unit: s.unit.into(),
                value: shown,
                uncertainty: None,
                status: Status::NotDetermined,
                note: format!(
                    "{why}{limit}; {kept_as}; {} would determine it",
                    what_determines(p)
                ),
            });
        }
    }
    let mut model = model;
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
        conflicts: Vec::new(),
        model,
    })
}

/// Root mean square of the rows' residuals, in percent, rounded to 0.01.
fn rms_percent(rows: &[RowResult]) -> f64 {
    let mean_square = rows
        .iter()
        .map(|r| r.residual_percent * r.residual_percent)
        .sum::<f64>()
        / rows.len().max(1) as f64;
    round_to(mean_square.sqrt(), 2)
}

/// One line per row: measured, predicted and the residual.
fn rows_text(rows: &[RowResult]) -> String {
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

impl FitReport {
    /// Parameters with uncertainty and status, then one line per row with its residual.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "fitted on {}: {} rows, rms residual {:.2} %\n\n",
            self.fitted_on, self.rows_used, self.rms_residual_percent
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
