//! What the fit says about each parameter at its optimum: fitted (the cost rises on both
//! sides, with ±1σ from the residual variance and `(JᵀJ)⁻¹`), bound (it rises on one side
//! only) or not determined (a zero Jacobian column, or one the earlier columns span), with the
//! measurement that would determine it.

use std::borrow::Cow;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::compiled::{spec, Compiled};
use crate::model::platform::{PlatformModel, P};
use crate::model::row_time::{coordinate_bounds, to_coordinate, value_per_coordinate, WHOLE};
use crate::text::round_to;

/// How a parameter came out of the fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The cost rises on both sides of the value.
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
    /// Fitted, bound or not determined.
    pub status: Status,
    /// Why it is not determined, or that it sits on a bound.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
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

/// The optimum the verdicts are judged at: coordinates, whole numbers and cost, and for each
/// whole number whether another value fits as well.
pub(super) struct AtOptimum {
    pub(super) t: Vec<f64>,
    pub(super) whole: [f64; 3],
    pub(super) cost: f64,
    pub(super) rivalled: [bool; 3],
}

/// Judges every parameter in `all` (those some row depends on) at `at`: parameters the data
/// cannot determine go back to their defaults and the rest are polished again, until every one
/// left is determined; then each gets its status, ±1σ and note. Returns the model at the end,
/// the results in `all`'s order and the keys of the fitted ones.
pub(super) fn judge(
    compiled: &Compiled,
    all: &[P],
    integers: &[P],
    at: AtOptimum,
    residual_count: usize,
) -> (PlatformModel, Vec<ParamResult>, Vec<String>) {
    let continuous = &compiled.free;
    let AtOptimum {
        mut t,
        whole,
        mut cost,
        rivalled,
    } = at;
    let mut active: Vec<usize> = (0..continuous.len()).collect();
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
    let dof = residual_count as f64 - kept.len() as f64 - integers.len() as f64;
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
    for &p in all {
        let s = spec(p);
        let value = model.get(p);
        let shown = value.is_finite().then(|| round_to(value, 4));
        if let Some(i) = kept.iter().position(|&k| k == p) {
            let at_bound = value <= s.min || value >= s.max;
            let (below, above) = sensitive_sides(&model, p, compiled, cost);
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
            let status = if !rivalled[at] {
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
                note: if !rivalled[at] {
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
            let limit = flat_limit(&model, p, compiled, cost).map_or_else(String::new, |v| {
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
    (model, params, fitted)
}
