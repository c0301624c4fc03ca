//! The fit's global stage: a deterministic branch and bound over boxes of the continuous
//! coordinates and the whole numbers, which proves its optimum to a stated tolerance.
//!
//! Every row's time is non-decreasing in every coordinate and non-increasing in every whole
//! number ([`crate::model::row_time`]), so over a box it lies between its values at two corners
//! and [`Compiled::least_cost_in`] is a true lower bound of the cost there. Boxes are taken
//! lowest bound first and split along the dimension that moves the rows' times most (one no row
//! depends on is never split); a box whose bound is within the tolerance of the best cost found
//! is dropped. Each box's centre is a candidate, and one that beats the best so far is polished
//! by Levenberg-Marquardt ([`super::search`]). Rows that fall into groups sharing only the
//! dimensions every row depends on are searched group by group ([`super::separable`]). When no box is left the best point is within the tolerance of the
//! global optimum over the whole box (on the rows the bound ran on); a box budget stops the
//! search otherwise, and the report says how far from proven it got.

use super::compiled::Compiled;
use super::search::{tolerance, Node, Point, Search, ABSOLUTE_TOLERANCE, RELATIVE_TOLERANCE};
use super::separable;
use crate::model::platform::{PlatformModel, P};
use crate::model::row_time::{coordinate_bounds, to_coordinate, Proportion, WHOLE};

/// Boxes split at most; past this the optimum is reported as not proven, with the gap left.
/// Measured (docs/calibration.md): on the Rockchip tables 20,000 boxes find no better optimum
/// than 2,000 and take 5 to 15 times as long.
const BOX_BUDGET: usize = 2_000;

/// The largest value each whole number takes in the search (the polish never moves them).
fn whole_range(p: P) -> f64 {
    if p == P::DmaMaxReadRequests {
        32.0
    } else {
        8.0
    }
}

/// What the global stage proved about its optimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Proof {
    /// The optimum's cost on the rows the bound ran on.
    pub(super) cost: f64,
    /// No point of the search box has a cost below this, on the rows the bound ran on.
    pub(super) lower_bound: f64,
    /// Whether every box was settled (else the box budget ran out).
    pub(super) proven: bool,
    /// Boxes split.
    pub(super) boxes: usize,
    /// Distinct rows the bound ran on, and of how many.
    pub(super) pairs: usize,
    pub(super) of_pairs: usize,
}

/// The best point: coordinates, whole numbers and its cost on every row.
pub(super) struct Optimum {
    pub(super) t: Vec<f64>,
    pub(super) whole: [f64; 3],
    pub(super) cost: f64,
    pub(super) proof: Proof,
}

/// A coordinate whose every effect on every row is `ratio` times another's: it is held at its
/// lower bound and the other's range is stretched by what it could add, which loses nothing.
struct Merged {
    dropped: usize,
    into: usize,
    ratio: f64,
}

/// Coordinates of `compiled` that only ever enter as a fixed multiple of an earlier one
/// (`dma.descriptor_bytes` beside `dma.setup_ns` on one link; a read's per-byte latency beside
/// its fixed one when every read is at least MRRS): the box then has no valley along them.
fn merged_coordinates(compiled: &Compiled) -> Vec<Merged> {
    let n = compiled.free.len();
    let mut merged: Vec<Merged> = Vec::new();
    for k in 0..n {
        for j in 0..k {
            if merged.iter().any(|m| m.dropped == j) {
                continue;
            }
            let mut ratio: Option<f64> = None;
            let mut exact = true;
            for time in compiled.times() {
                match time.proportion(j, k) {
                    Proportion::Absent => {}
                    Proportion::Ratio(r) => match ratio {
                        Some(known) if (r - known).abs() > 1e-12 * r.abs().max(known.abs()) => {
                            exact = false
                        }
                        Some(_) => {}
                        None => ratio = Some(r),
                    },
                    Proportion::Otherwise => exact = false,
                }
                if !exact {
                    break;
                }
            }
            if let (true, Some(ratio)) = (exact, ratio.filter(|&r| r > 0.0)) {
                merged.push(Merged {
                    dropped: k,
                    into: j,
                    ratio,
                });
                break;
            }
        }
    }
    merged
}

/// The global optimum of `compiled`'s cost over every coordinate within its bounds and every
/// combination of the whole numbers in `integers` (1 to 32 read requests, 1 to 8 loads), proven
/// on `compiled.proof`'s rows and then polished on every row. Rows that share no dimension but
/// those every row depends on are searched group by group within each box of the shared ones
/// ([`super::separable`]); otherwise one search covers every dimension.
pub(super) fn branch_and_bound(compiled: &Compiled, integers: &[P]) -> Optimum {
    let n = compiled.free.len();
    let merged = merged_coordinates(compiled);
    let defaults = PlatformModel::default();
    let mut lo: Vec<f64> = Vec::with_capacity(n);
    let mut hi: Vec<f64> = Vec::with_capacity(n);
    for &p in &compiled.free {
        let (low, high) = coordinate_bounds(p);
        lo.push(low);
        hi.push(high);
    }
    for m in &merged {
        hi[m.into] += m.ratio * (hi[m.dropped] - lo[m.dropped]);
        hi[m.dropped] = lo[m.dropped];
    }
    let whole_lo = WHOLE.map(|p| {
        if integers.contains(&p) {
            1.0
        } else {
            defaults.get(p)
        }
    });
    let whole_hi = WHOLE.map(|p| {
        if integers.contains(&p) {
            whole_range(p)
        } else {
            defaults.get(p)
        }
    });
    // The coordinates LM moves: every one but the merged.
    let active: Vec<usize> = (0..n)
        .filter(|&j| merged.iter().all(|m| m.dropped != j))
        .collect();
    let pairs = &compiled.proof;
    // The first incumbent: the defaults, polished.
    let mut start: Vec<f64> = compiled
        .free
        .iter()
        .map(|&p| to_coordinate(p, defaults.get(p)))
        .collect();
    for m in &merged {
        start[m.dropped] = lo[m.dropped];
    }
    let start_whole: [f64; 3] =
        std::array::from_fn(|k| defaults.get(WHOLE[k]).clamp(whole_lo[k], whole_hi[k]));
    let (t, cost) = compiled.polish(&start, &start_whole, &active, pairs);
    let incumbent = Point {
        t,
        whole: start_whole,
        cost,
    };
    let root = Node {
        least: 0.0,
        lo,
        hi,
        whole_lo,
        whole_hi,
    };
    let outcome = match separable::groups(compiled, &root, pairs) {
        Some(groups) => separable::search(compiled, &groups, root, &active, incumbent),
        None => Search {
            compiled,
            pairs,
            active: &active,
            splittable: vec![true; n + WHOLE.len()],
            budget: BOX_BUDGET,
            tolerance: |cost| tolerance(cost),
            cutoff: f64::INFINITY,
        }
        .run(root, incumbent),
    };
    let Point {
        mut t,
        whole,
        cost: proof_cost,
    } = outcome.best;
    let mut cost = proof_cost;
    if pairs.len() < compiled.all.len() {
        (t, cost) = compiled.polish(&t, &whole, &active, &compiled.all);
    }
    // A merged coordinate's share that its partner's range cannot hold goes back to it.
    for m in &merged {
        let top = coordinate_bounds(compiled.free[m.into]).1;
        if t[m.into] > top {
            t[m.dropped] += (t[m.into] - top) / m.ratio;
            t[m.into] = top;
        }
    }
    Optimum {
        t,
        whole,
        cost,
        proof: Proof {
            cost: proof_cost,
            lower_bound: outcome.lower_bound,
            proven: outcome.proven,
            boxes: outcome.boxes,
            pairs: pairs.len(),
            of_pairs: compiled.all.len(),
        },
    }
}

/// Every whole-number combination with its best coordinates near `optimum` and their cost on
/// every row, for the verdicts (a whole number that others fit as well is not determined):
/// polished from the optimum's coordinates on the bound's rows, and again on every row where
/// that comes within the tolerance of the optimum.
pub(super) fn combination_costs(
    compiled: &Compiled,
    optimum: &Optimum,
    integers: &[P],
) -> Vec<([f64; 3], Vec<f64>, f64)> {
    let mut combos: Vec<[f64; 3]> = vec![optimum.whole];
    for &p in integers {
        let at = WHOLE.iter().position(|&w| w == p).expect("a whole number");
        combos = combos
            .into_iter()
            .flat_map(|c| {
                (1..=whole_range(p) as u32).map(move |v| {
                    let mut c = c;
                    c[at] = f64::from(v);
                    c
                })
            })
            .collect();
    }
    let everything: Vec<usize> = (0..compiled.free.len()).collect();
    let proof_best = compiled.cost(&optimum.t, &optimum.whole, &compiled.proof);
    combos
        .into_iter()
        .map(|whole| {
            if whole == optimum.whole {
                return (whole, optimum.t.clone(), optimum.cost);
            }
            let (t, on_proof) = compiled.polish(&optimum.t, &whole, &everything, &compiled.proof);
            if on_proof > proof_best * (1.0 + RELATIVE_TOLERANCE) + ABSOLUTE_TOLERANCE {
                let cost = compiled.cost(&t, &whole, &compiled.all);
                return (whole, t, cost);
            }
            let (t, cost) = if compiled.proof.len() < compiled.all.len() {
                compiled.polish(&t, &whole, &everything, &compiled.all)
            } else {
                (t, on_proof)
            };
            (whole, t, cost)
        })
        .collect()
}
