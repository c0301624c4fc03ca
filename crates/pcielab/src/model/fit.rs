//! Fitting the platform model ([`super::platform`]) to measurements
//! ([`super::measurements`]): bounded least squares on relative error (log of predicted over
//! measured, so a 64 B row weighs as much as a 4 MB one), Levenberg-Marquardt with a numeric
//! Jacobian and projection onto each parameter's bounds; whole-number parameters (read
//! requests and loads in flight) are enumerated. Only parameters some row depends on are
//! candidates; one whose Jacobian column is zero ("not limiting in this data") or a combination
//! of earlier ones ("cannot be separated from …") is reported as not determined and left at its
//! default. Uncertainties are one standard deviation from the residual variance and
//! `(JᵀJ)⁻¹`. Fully deterministic: same rows, same link → same parameters.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::measurements::{Measurement, Workload};
use super::platform::{DmaDirection, FittedCell, MmioOp, PlatformModel, P, PARAMS};
use super::transfer::{read, write, LinkParams, Overheads};
use crate::error::{Error, Result};
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
    pub workload: String,
    #[serde(rename = "measured_MBps")]
    pub measured_mbps: f64,
    #[serde(rename = "predicted_MBps")]
    pub predicted_mbps: f64,
    /// (predicted / measured − 1) × 100.
    pub residual_percent: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_latency_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_latency_ns: Option<f64>,
    /// DMA rows: whether the platform was fitted on this very cell (size, direction, link), so
    /// the predicted figure reproduces it rather than predicting it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_sample: Option<bool>,
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
    Fitted,
    /// The data bounds it on one side only: at the reported value it just paces some row, and
    /// any value beyond it (the note says which way) fits as well.
    Bound,
    /// Some row depends on it, but the data cannot pin it down; left at its default.
    NotDetermined,
}

impl Status {
    /// The word `fit --json` writes.
    pub fn as_str(self) -> &'static str {
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
fn sensitive_sides(model: &PlatformModel, p: P, distinct: &Distinct, cost: f64) -> (bool, bool) {
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
        distinct.cost(&residuals(&m, distinct)) > cost * (1.0 + 1e-7) + 1e-18
    };
    (rises(value - step), rises(value + step))
}

/// How far a parameter that paces no row can move toward binding before the cost rises: the
/// data says it is beyond this value. Bisection in log space between `from` (flat) and the
/// bound on the binding side.
fn flat_limit(model: &PlatformModel, p: P, distinct: &Distinct, cost: f64) -> Option<f64> {
    let s = spec(p);
    // Rates bind when lowered; times, bytes and slots when raised.
    let binds_low = s.unit == "MB/s";
    let flat = |v: f64| {
        let mut m = model.clone();
        m.set(p, v);
        distinct.cost(&residuals(&m, distinct)) <= cost * (1.0 + 1e-6) + 1e-15
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
    pub unit: Cow<'static, str>,
    /// `null` when unbounded (the default of rate limits nothing limits).
    pub value: Option<f64>,
    /// One standard deviation; `null` when the rows leave no spare degree of freedom or the
    /// parameter is a whole number.
    pub uncertainty: Option<f64>,
    pub status: Status,
    /// Why it is not determined, or that it sits on a bound.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The result of `pcielab fit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FitReport {
    pub fitted_on: String,
    pub rows_used: usize,
    /// Root mean square of the per-row relative residuals, in percent.
    pub rms_residual_percent: f64,
    pub params: Vec<ParamResult>,
    pub rows: Vec<RowResult>,
    /// Columns the model cannot reproduce together, each with the residuals that show it.
    #[serde(default)]
    pub conflicts: Vec<String>,
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
    Fit(Box<FitReport>),
    Prediction(PredictionReport),
}

impl FitDocument {
    pub fn rows(&self) -> &[RowResult] {
        match self {
            FitDocument::Fit(f) => &f.rows,
            FitDocument::Prediction(p) => &p.rows,
        }
    }

    pub fn rows_used(&self) -> usize {
        match self {
            FitDocument::Fit(f) => f.rows_used,
            FitDocument::Prediction(p) => p.rows_used,
        }
    }

    pub fn rms_residual_percent(&self) -> f64 {
        match self {
            FitDocument::Fit(f) => f.rms_residual_percent,
            FitDocument::Prediction(p) => p.rms_residual_percent,
        }
    }

    /// `fit --platform`: what the given platform was fitted on.
    pub fn platform_fitted_on(&self) -> Option<&str> {
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

/// Log-ratio residuals per distinct pair (and per pair with measured latencies), each weighted
/// by the square root of its rows so that squares and products sum as over the rows.
fn residuals(model: &PlatformModel, distinct: &Distinct) -> Vec<f64> {
    let mut r = Vec::with_capacity(distinct.pairs.len());
    for (at, (workload, link)) in distinct.pairs.iter().enumerate() {
        let (mbps, latency) = predict(model, workload, link);
        let rate = distinct.rate[at];
        r.push(rate.count.sqrt() * (mbps.ln() - rate.mean));
        let measured = distinct.latency[at];
        if measured.count > 0.0 {
            r.push(measured.count.sqrt() * (latency.ln() - measured.mean));
        }
    }
    r
}

/// A starting value that makes the parameter bind on the data (so its gradient is not zero):
/// rates at the fastest measured figure that uses them, CPU costs at the cheapest I/O's time,
/// per-TLP slots at the wire time of a full TLP (so every shorter one is paced by the slot).
fn start_value(p: P, rows: &[Measurement], link: &LinkParams) -> f64 {
    let s = spec(p);
    let max_mbps = rows.iter().map(|m| m.mbps).fold(0.0, f64::max);
    // The cheapest I/O of the direction the CPU cost belongs to (a read I/O is a device write).
    let queued_ns = |want: DmaDirection| {
        rows.iter()
            .filter_map(|m| match m.workload {
                Workload::Queued {
                    device, bs, jobs, ..
                } if device == want => Some(bs as f64 * f64::from(jobs) / m.mbps * 1000.0),
                _ => None,
            })
            .fold(f64::INFINITY, f64::min)
    };
    let max_iops = rows
        .iter()
        .filter_map(|m| match m.workload {
            Workload::Queued { bs, .. } => Some(m.mbps * 1e6 / bs as f64),
            _ => None,
        })
        .fold(0.0, f64::max);
    let value = match p {
        P::PostedWriteMbps | P::CompletionMbps | P::DriveReadMbps | P::DriveWriteMbps => max_mbps,
        P::DriveReadIops | P::DriveWriteIops => max_iops,
        P::CpuReadIoNs => queued_ns(DmaDirection::Write),
        P::CpuWriteIoNs => queued_ns(DmaDirection::Read),
        P::DmaWriteTlpNs => write(u64::from(link.mps), link).link_time_ns(link, Overheads::Full),
        P::DmaReadTlpNs => read(u64::from(link.mrrs), link).link_time_ns(link, Overheads::Full),
        _ => s.default,
    };
    if value.is_finite() {
        value.clamp(s.min, s.max)
    } else {
        s.default
    }
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

/// Solves `a x = b` (small, dense) by Gaussian elimination with partial pivoting; `None` when
/// singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (offset, row) in lower.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[col + 1 + offset] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    Some(x)
}

/// The continuous fit for a fixed set of free parameters: Levenberg-Marquardt in scaled
/// coordinates, projected onto the bounds. Returns the model and its Jacobian (rows × free).
struct Solver<'a> {
    distinct: &'a Distinct,
    free: Vec<P>,
    scale: Vec<f64>,
}

impl Solver<'_> {
    fn apply(&self, base: &PlatformModel, x: &[f64]) -> PlatformModel {
        let mut m = base.clone();
        for (i, &p) in self.free.iter().enumerate() {
            let s = spec(p);
            m.set(p, (x[i] * self.scale[i]).clamp(s.min, s.max));
        }
        m
    }

    fn jacobian(&self, base: &PlatformModel, x: &[f64], r0: &[f64]) -> Vec<Vec<f64>> {
        let mut columns = Vec::with_capacity(x.len());
        for i in 0..x.len() {
            let h = 1e-4 * x[i].abs().max(1e-2);
            let mut up = x.to_vec();
            up[i] += h;
            let mut down = x.to_vec();
            down[i] -= h;
            let s = spec(self.free[i]);
            let lo = s.min / self.scale[i];
            let hi = s.max / self.scale[i];
            let (up, down) = (
                {
                    up[i] = up[i].min(hi);
                    up
                },
                {
                    down[i] = down[i].max(lo);
                    down
                },
            );
            let span = up[i] - down[i];
            let ru = residuals(&self.apply(base, &up), self.distinct);
            let rd = if span > 0.0 && down[i] < x[i] {
                residuals(&self.apply(base, &down), self.distinct)
            } else {
                r0.to_vec()
            };
            let width = if down[i] < x[i] { span } else { up[i] - x[i] };
            columns.push(
                ru.iter()
                    .zip(&rd)
                    .map(|(a, b)| if width > 0.0 { (a - b) / width } else { 0.0 })
                    .collect(),
            );
        }
        columns
    }

    fn run(&self, base: &PlatformModel, start: Vec<f64>) -> (Vec<f64>, f64) {
        let mut x = start;
        let mut r = residuals(&self.apply(base, &x), self.distinct);
        let mut cost = self.distinct.cost(&r);
        let mut lambda = 1e-3;
        for _ in 0..300 {
            let j = self.jacobian(base, &x, &r);
            let n = x.len();
            let mut jtj = vec![vec![0.0; n]; n];
            let mut jtr = vec![0.0; n];
            for a in 0..n {
                for b in 0..n {
                    jtj[a][b] = j[a].iter().zip(&j[b]).map(|(u, v)| u * v).sum();
                }
                jtr[a] = -j[a].iter().zip(&r).map(|(u, v)| u * v).sum::<f64>();
            }
            let mut improved = false;
            while lambda < 1e12 {
                let mut damped = jtj.clone();
                for (k, row) in damped.iter_mut().enumerate() {
                    row[k] += lambda * (jtj[k][k].max(1e-12));
                }
                let Some(step) = solve(damped, jtr.clone()) else {
                    lambda *= 10.0;
                    continue;
                };
                let trial: Vec<f64> = x
                    .iter()
                    .zip(&step)
                    .enumerate()
                    .map(|(i, (xi, d))| {
                        let s = spec(self.free[i]);
                        (xi + d).clamp(s.min / self.scale[i], s.max / self.scale[i])
                    })
                    .collect();
                let tr = residuals(&self.apply(base, &trial), self.distinct);
                let tc = self.distinct.cost(&tr);
                if tc < cost {
                    let gain = cost - tc;
                    x = trial;
                    r = tr;
                    cost = tc;
                    lambda = (lambda / 10.0).max(1e-12);
                    improved = gain > 1e-15 * cost.max(1e-30);
                    break;
                }
                lambda *= 10.0;
            }
            if !improved {
                break;
            }
        }
        (x, cost)
    }
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

/// One continuous fit with `integers` fixed: drops parameters the data cannot determine (back
/// to their defaults) until the rest are. Returns the model, its cost, the notes of dropped
/// parameters and the Jacobian columns of the kept ones.
type Continuous = (PlatformModel, f64, Vec<(P, String)>, Vec<P>, Vec<Vec<f64>>);

/// Where the optimiser starts the parameters whose effect is a `max` (per-TLP slots and rate
/// limits): from a point where they bind, the gradient leads to where the data puts them; once
/// one falls below what binds, its gradient is zero and it stays. So a fit tries a few starts.
#[derive(Debug, Clone, Copy)]
struct Start {
    /// Per-TLP slots at this many full TLPs' wire time.
    slot_tlps: f64,
    /// Rate limits at this multiple of the fastest measured rate.
    rate_factor: f64,
}

/// The start every whole-number combination is fitted from: slots binding on every TLP, rates
/// binding on the fastest row.
const FIRST_START: Start = Start {
    slot_tlps: 4.0,
    rate_factor: 1.0,
};

/// Further starts, tried on the chosen whole-number combination when per-TLP slots are free:
/// rates that no row needs (the slots pace the writes) and slots near and far above the wire.
const RESTARTS: [Start; 4] = [
    Start {
        slot_tlps: 4.0,
        rate_factor: 4.0,
    },
    Start {
        slot_tlps: 1.5,
        rate_factor: 4.0,
    },
    Start {
        slot_tlps: 1.5,
        rate_factor: 1.0,
    },
    Start {
        slot_tlps: 16.0,
        rate_factor: 1.0,
    },
];

fn fit_continuous(
    rows: &[Measurement],
    link: &LinkParams,
    distinct: &Distinct,
    base: &PlatformModel,
    continuous: &[P],
    start: Start,
) -> Continuous {
    let mut free: Vec<P> = continuous.to_vec();
    let mut dropped: Vec<(P, String)> = Vec::new();
    // After dropping a parameter the rest start where the previous fit left them: the dropped
    // one added nothing the others could not, so that point is (close to) the best again.
    let mut previous: Option<PlatformModel> = None;
    loop {
        let starts: Vec<f64> = free
            .iter()
            .map(|&p| match (&previous, p) {
                (Some(m), _) => m.get(p),
                (None, P::DmaWriteTlpNs | P::DmaReadTlpNs) => {
                    start.slot_tlps * start_value(p, rows, link)
                }
                (None, P::PostedWriteMbps | P::CompletionMbps) => {
                    (start.rate_factor * start_value(p, rows, link)).min(spec(p).max)
                }
                (None, _) => start_value(p, rows, link),
            })
            .collect();
        let scale: Vec<f64> = free
            .iter()
            .zip(&starts)
            .map(|(&p, &s)| scale_of(p, s))
            .collect();
        let solver = Solver {
            distinct,
            free: free.clone(),
            scale: scale.clone(),
        };
        let x0: Vec<f64> = starts.iter().zip(&scale).map(|(s, k)| s / k).collect();
        let (x, cost) = solver.run(base, x0);
        let model = solver.apply(base, &x);
        let r = residuals(&model, distinct);
        let columns = solver.jacobian(base, &x, &r);
        match undetermined(&columns, &free) {
            Some((i, why)) => {
                let gone = free.remove(i);
                dropped.push((gone, why));
                let mut kept = model;
                kept.set(gone, spec(gone).default);
                previous = Some(kept);
            }
            None => {
                // Columns back in parameter units for the covariance.
                let columns = columns
                    .into_iter()
                    .zip(&scale)
                    .map(|(c, k)| c.into_iter().map(|v| v / k).collect())
                    .collect();
                return (model, cost, dropped, free, columns);
            }
        }
    }
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
    // Every combination of the whole-number parameters (at most three, small ranges).
    let ranges: Vec<Vec<f64>> = integers
        .iter()
        .map(|&p| {
            let top = if p == P::DmaMaxReadRequests { 32 } else { 8 };
            (1..=top).map(f64::from).collect()
        })
        .collect();
    let mut combos: Vec<Vec<f64>> = vec![Vec::new()];
    for range in &ranges {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                range.iter().map(move |&v| {
                    let mut c = c.clone();
                    c.push(v);
                    c
                })
            })
            .collect();
    }
    let mut results: Vec<(Vec<f64>, Continuous)> = Vec::new();
    for combo in combos {
        let mut base = PlatformModel::default();
        for (&p, &v) in integers.iter().zip(&combo) {
            base.set(p, v);
        }
        let result = fit_continuous(rows, link, &distinct, &base, &continuous, FIRST_START);
        results.push((combo, result));
    }
    let best_cost = results
        .iter()
        .map(|(_, r)| r.1)
        .fold(f64::INFINITY, f64::min);
    let tie = |c: f64| c <= best_cost * (1.0 + 1e-6) + 1e-14;
    // Among equally good combinations prefer the defaults, then the smallest values.
    let defaults: Vec<f64> = integers.iter().map(|&p| spec(p).default).collect();
    let chosen = results
        .iter()
        .filter(|(_, r)| tie(r.1))
        .min_by(|(a, _), (b, _)| {
            let da = a.iter().zip(&defaults).filter(|(x, d)| x != d).count();
            let db = b.iter().zip(&defaults).filter(|(x, d)| x != d).count();
            da.cmp(&db)
                .then(a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal))
        })
        .expect("at least one combination");
    let (combo, mut best) = chosen.clone();
    if continuous
        .iter()
        .any(|p| matches!(p, P::DmaWriteTlpNs | P::DmaReadTlpNs))
    {
        let mut base = PlatformModel::default();
        for (&p, &v) in integers.iter().zip(&combo) {
            base.set(p, v);
        }
        for start in RESTARTS {
            let other = fit_continuous(rows, link, &distinct, &base, &continuous, start);
            if other.1 < best.1 * (1.0 - 1e-9) {
                best = other;
            }
        }
    }
    let (model, cost, dropped, kept, columns) = best;
    let dof = distinct.residual_count as f64 - kept.len() as f64 - integers.len() as f64;
    let covariance = if dof > 0.0 {
        let n = kept.len();
        let jtj: Vec<Vec<f64>> = (0..n)
            .map(|a| {
                (0..n)
                    .map(|b| columns[a].iter().zip(&columns[b]).map(|(u, v)| u * v).sum())
                    .collect()
            })
            .collect();
        let sigma2 = cost / dof;
        let mut diag = Vec::with_capacity(n);
        for k in 0..n {
            let mut e = vec![0.0; n];
            e[k] = 1.0;
            diag.push(solve(jtj.clone(), e).map(|col| (col[k] * sigma2).max(0.0).sqrt()));
        }
        diag
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
            let (below, above) = sensitive_sides(&model, p, &distinct, cost);
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
        } else if let Some(i) = integers.iter().position(|&k| k == p) {
            let rivals = results
                .iter()
                .filter(|(c, r)| tie(r.1) && c[i] != combo[i])
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
            let why = dropped
                .iter()
                .find(|(d, _)| *d == p)
                .map_or_else(String::new, |(_, w)| w.clone());
            let limit = flat_limit(&model, p, &distinct, cost).map_or_else(String::new, |v| {
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
                    "{why}{limit}; default kept; {} would determine it",
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
    pub platform_fitted_on: String,
    pub rows_used: usize,
    /// Root mean square of the per-row relative residuals, in percent.
    pub rms_residual_percent: f64,
    pub rows: Vec<RowResult>,
    /// One per link of these rows that none of the platform's measurements ran on.
    #[serde(default)]
    pub warnings: Vec<String>,
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
