//! The fit's rows compiled once: the distinct (workload, link) pairs with the moments of their
//! measurements, each pair's time in closed form ([`crate::model::row_time`]), their weighted
//! log residuals with analytic derivatives, the exact range of the cost over a box of
//! coordinates (what the global stage bounds with), and the Levenberg-Marquardt polish.

use levenberg_marquardt::{LeastSquaresProblem, LevenbergMarquardt};
use nalgebra::{storage::Owned, DMatrix, DVector, Dyn};

use super::prediction::predict;
use crate::model::measurements::{Measurement, Workload};
use crate::model::platform::{ParamSpec, PlatformModel, P, PARAMS};
use crate::model::row_time::{
    coordinate_bounds, from_coordinate, to_coordinate, Builder, RowTime, WHOLE,
};
use crate::model::transfer::LinkParams;

/// The log of measured figures of the rows that share one (workload, link) pair: how many and
/// their mean. Rows of one pair share a prediction, so their squared residuals sum to
/// `count × (ln predicted − mean)²` plus their spread about the mean, which no parameter moves.
#[derive(Default, Clone, Copy)]
pub(super) struct Moments {
    pub(super) count: f64,
    mean: f64,
}

/// The distinct (workload, link) pairs of a fit's rows with the moments of their measurements:
/// the model is evaluated once per pair at every step and each pair contributes one weighted
/// residual (one more for measured latencies), so a step's work depends on the distinct pairs,
/// not on the rows. The cost, the Jacobian's normal equations and the column tests are the
/// same sums as over every row's residual.
pub(super) struct Distinct {
    pub(super) pairs: Vec<(Workload, LinkParams)>,
    rate: Vec<Moments>,
    pub(super) latency: Vec<Moments>,
    /// Σ over rows of (ln measured − its pair's mean)², rates and latencies.
    spread: f64,
    /// Residuals of the rows one by one (every row, and every measured latency).
    pub(super) residual_count: usize,
}

impl Distinct {
    pub(super) fn new(rows: &[Measurement], link: &LinkParams) -> Distinct {
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
pub(super) struct Compiled<'a> {
    distinct: &'a Distinct,
    /// The continuous candidates, in the order of the coordinates `t`.
    pub(super) free: Vec<P>,
    /// ln of the numerator that turns a time into MB/s, and the time.
    rates: Vec<(f64, RowTime)>,
    latencies: Vec<Option<RowTime>>,
    /// Every pair, and the ones the global stage proves its bound on ([`proof_pairs`]).
    pub(super) all: Vec<usize>,
    pub(super) proof: Vec<usize>,
}

impl<'a> Compiled<'a> {
    pub(super) fn new(distinct: &'a Distinct, free: &[P]) -> Compiled<'a> {
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
        let mut compiled = Compiled {
            distinct,
            free: free.to_vec(),
            rates,
            latencies,
            all,
            proof: Vec::new(),
        };
        let dependences: Vec<Vec<bool>> = compiled
            .all
            .iter()
            .map(|&at| compiled.depends_on(at))
            .collect();
        compiled.proof = proof_pairs(&dependences);
        compiled
    }

    /// Every row time: each pair's rate, then the latencies measured.
    pub(super) fn times(&self) -> impl Iterator<Item = &RowTime> {
        self.rates
            .iter()
            .map(|(_, time)| time)
            .chain(self.latencies.iter().flatten())
    }

    /// Which dimensions pair `at`'s rows depend on (its rate's time and its latency's):
    /// coordinates, then whole numbers.
    pub(super) fn depends_on(&self, at: usize) -> Vec<bool> {
        let n = self.free.len();
        let mut uses = self.rates[at].1.depends_on(n);
        if let Some(time) = &self.latencies[at] {
            for (u, v) in uses.iter_mut().zip(time.depends_on(n)) {
                *u |= v;
            }
        }
        uses
    }

    /// What every cost and bound of these rows includes whatever the parameters: the spread of
    /// the measurements of each pair about their mean.
    pub(super) fn spread(&self) -> f64 {
        self.distinct.spread
    }

    /// The coordinates and whole numbers of `model`.
    pub(super) fn point_of(&self, model: &PlatformModel) -> (Vec<f64>, [f64; 3]) {
        (
            self.free
                .iter()
                .map(|&p| to_coordinate(p, model.get(p)))
                .collect(),
            WHOLE.map(|p| model.get(p)),
        )
    }

    /// The model at coordinates `t` and whole numbers `whole`, defaults elsewhere.
    pub(super) fn model_at(&self, t: &[f64], whole: &[f64; 3]) -> PlatformModel {
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
    pub(super) fn residuals(
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
    pub(super) fn cost(&self, t: &[f64], whole: &[f64; 3], pairs: &[usize]) -> f64 {
        let r = self.residuals(t, whole, pairs.iter().copied(), None);
        self.distinct.cost(&r)
    }

    /// The fit's cost at a model's values.
    pub(super) fn cost_of(&self, model: &PlatformModel) -> f64 {
        let (t, whole) = self.point_of(model);
        self.cost(&t, &whole, &self.all)
    }

    /// The least the cost of `pairs`' rows can be anywhere in the box of coordinates
    /// `[lo, hi]` and whole numbers `[whole_lo, whole_hi]`: every row's time is non-decreasing
    /// in every coordinate and non-increasing in every whole number ([`RowTime`]), so over the
    /// box it lies between its values at two corners, and each residual is at least its
    /// distance from 0 to the range those give. Exact when the box is a point.
    pub(super) fn least_cost_in(&self, corners: &Corners, pairs: &[usize]) -> f64 {
        let mut sum = self.distinct.spread;
        for &at in pairs {
            let (ln_numerator, time) = &self.rates[at];
            let rate = self.distinct.rate[at];
            let (fastest, slowest) = corners.time_range(time);
            // ln numerator − ln time − mean falls as the time grows.
            let target = ln_numerator - rate.mean;
            sum += rate.count
                * squared_distance_from_zero(target - slowest.ln(), target - fastest.ln());
            if let Some(time) = &self.latencies[at] {
                let measured = self.distinct.latency[at];
                let (fastest, slowest) = corners.time_range(time);
                sum += measured.count
                    * squared_distance_from_zero(
                        fastest.ln() - measured.mean,
                        slowest.ln() - measured.mean,
                    );
            }
        }
        sum
    }

    /// For each coordinate and then each whole number, how far moving it alone across the box
    /// moves the log times of `pairs`' rows (from the slowest corner and from the fastest,
    /// weighted by their rows): what splitting the box along it can gain. 0 for a dimension no
    /// row depends on in the box, and for every dimension not `splittable`.
    pub(super) fn reach_by_dimension(
        &self,
        corners: &Corners,
        pairs: &[usize],
        splittable: &[bool],
    ) -> Vec<f64> {
        let n = corners.lo.len();
        let mut reach = vec![0.0; n + WHOLE.len()];
        let mut add = |time: &RowTime, weight: f64| {
            // From the slowest corner each dimension moves to its fast end, and back.
            for (mut t, mut whole, sign) in [
                (corners.hi.to_vec(), *corners.whole_lo, 1.0),
                (corners.lo.to_vec(), *corners.whole_hi, -1.0),
            ] {
                let from = time.time(&t, &whole).ln();
                for j in 0..n {
                    if splittable[j] && corners.lo[j] < corners.hi[j] {
                        let keep = t[j];
                        t[j] = if sign > 0.0 {
                            corners.lo[j]
                        } else {
                            corners.hi[j]
                        };
                        reach[j] += weight * sign * (from - time.time(&t, &whole).ln());
                        t[j] = keep;
                    }
                }
                for k in 0..WHOLE.len() {
                    if splittable[n + k] && corners.whole_lo[k] < corners.whole_hi[k] {
                        let keep = whole[k];
                        whole[k] = if sign > 0.0 {
                            corners.whole_hi[k]
                        } else {
                            corners.whole_lo[k]
                        };
                        reach[n + k] += weight * sign * (from - time.time(&t, &whole).ln());
                        whole[k] = keep;
                    }
                }
            }
        };
        for &at in pairs {
            add(&self.rates[at].1, self.distinct.rate[at].count);
            if let Some(time) = &self.latencies[at] {
                add(time, self.distinct.latency[at].count);
            }
        }
        reach
    }

    /// The derivatives of `pairs`' residuals with respect to the coordinates in `active`, one
    /// column each.
    pub(super) fn columns(
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
    pub(super) fn polish(
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

/// `p`'s entry in the parameter table.
pub(super) fn spec(p: P) -> &'static ParamSpec {
    &PARAMS[p as usize]
}

/// A box of the global stage: coordinates `[lo, hi]`, whole numbers `[whole_lo, whole_hi]`.
pub(super) struct Corners<'b> {
    pub(super) lo: &'b [f64],
    pub(super) hi: &'b [f64],
    pub(super) whole_lo: &'b [f64; 3],
    pub(super) whole_hi: &'b [f64; 3],
}

impl Corners<'_> {
    /// The least and the most `time` takes in the box: at the low coordinates with the most
    /// whole numbers, and at the high ones with the fewest.
    fn time_range(&self, time: &RowTime) -> (f64, f64) {
        (
            time.time(self.lo, self.whole_hi),
            time.time(self.hi, self.whole_lo),
        )
    }
}

/// The square of the distance from 0 to `[low, high]` (0 inside).
fn squared_distance_from_zero(low: f64, high: f64) -> f64 {
    if low > 0.0 {
        low * low
    } else if high < 0.0 {
        high * high
    } else {
        0.0
    }
}

/// About this many distinct pairs take part in the global stage's bound ([`proof_pairs`]);
/// the polish and the verdicts see them all. The bound's work per box is linear in its pairs,
/// so past this the fit's time grows only through the polish on every row.
pub(super) const PROOF_PAIRS: usize = 64;

/// The pairs the global stage proves its bound on: every pair up to [`PROOF_PAIRS`], else about
/// that many, evenly spaced within each set of pairs that depend on the same parameters, and at
/// least one of each set. Spaced over all pairs at once, rows that alternate (a write, a read,
/// at each size) would leave one kind out of the bound altogether.
fn proof_pairs(dependences: &[Vec<bool>]) -> Vec<usize> {
    let stride = dependences.len().div_ceil(PROOF_PAIRS).max(1);
    let mut seen: std::collections::HashMap<&[bool], usize> = std::collections::HashMap::new();
    let mut proof = Vec::new();
    for (at, uses) in dependences.iter().enumerate() {
        let position = seen.entry(uses.as_slice()).or_insert(0);
        if position.is_multiple_of(stride) {
            proof.push(at);
        }
        *position += 1;
    }
    proof
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::platform::DmaDirection;
    use crate::pcie::Generation;

    /// 100 distinct sizes, each written and read, one row after the other: every fourth pair
    /// spaced over all of them would be writes only.
    #[test]
    fn the_bound_runs_on_reads_and_writes_alike_when_they_alternate() {
        let link = LinkParams::new(Generation::Gen3, 4);
        let rows: Vec<Measurement> = (0..100u64)
            .flat_map(|i| [DmaDirection::Write, DmaDirection::Read].map(|d| (i, d)))
            .map(|(i, direction)| Measurement {
                workload: Workload::Dma {
                    direction,
                    size: 64 + 37 * i,
                },
                mbps: 1000.0,
                latency_ns: None,
                line: 2,
                link: None,
            })
            .collect();
        let distinct = Distinct::new(&rows, &link);
        let free = [
            P::DmaSetupNs,
            P::PostedWriteMbps,
            P::CompletionMbps,
            P::ReadLatencyNs,
        ];
        let compiled = Compiled::new(&distinct, &free);
        let reads = compiled
            .proof
            .iter()
            .filter(|&&at| {
                matches!(
                    distinct.pairs[at].0,
                    Workload::Dma {
                        direction: DmaDirection::Read,
                        ..
                    }
                )
            })
            .count();
        // 200 pairs, every fourth of each set: 25 of the 100 writes; of the reads, 4 of the 13
        // up to MRRS (one request each, so requests in flight do not matter to them) and 22 of
        // the other 87.
        assert_eq!((compiled.proof.len(), reads), (51, 26));
    }
}
