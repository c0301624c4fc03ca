//! The fit's global stage: a deterministic branch and bound over boxes of the continuous
//! coordinates and the whole numbers, which proves its optimum to a stated tolerance.
//!
//! Every row's time is non-decreasing in every coordinate and non-increasing in every whole
//! number ([`crate::model::row_time`]), so over a box it lies between its values at two corners
//! and [`Compiled::least_cost_in`] is a true lower bound of the cost there. Boxes are taken
//! lowest bound first and split along the dimension that moves the rows' times most (one no row
//! depends on is never split); a box whose bound is within the tolerance of the best cost found
//! is dropped. Each box's centre is a candidate, and one that beats the best so far is polished
//! by Levenberg-Marquardt. When no box is left the best point is within the tolerance of the
//! global optimum over the whole box (on the rows the bound ran on); a box budget stops the
//! search otherwise, and the report says how far from proven it got.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::compiled::{Compiled, Corners};
use crate::model::platform::{PlatformModel, P};
use crate::model::row_time::{coordinate_bounds, to_coordinate, Proportion, WHOLE};

/// A box may be dropped once its bound is within this fraction of the best cost found (plus
/// [`ABSOLUTE_TOLERANCE`]): the optimum is proven to within 0.1 % of its cost, 0.05 % of its
/// rms residual. Chosen by measurement (docs/calibration.md, "How the fit searches").
const RELATIVE_TOLERANCE: f64 = 1e-3;
/// The tolerance's floor, for rows the model reproduces exactly (cost near 0).
const ABSOLUTE_TOLERANCE: f64 = 1e-9;
/// The lowest-bound box's centre is polished once every this many boxes.
const POLISH_EVERY: usize = 32;
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

/// One box and the least cost in it.
struct Node {
    least: f64,
    lo: Vec<f64>,
    hi: Vec<f64>,
    whole_lo: [f64; 3],
    whole_hi: [f64; 3],
}

impl Node {
    fn corners(&self) -> Corners<'_> {
        Corners {
            lo: &self.lo,
            hi: &self.hi,
            whole_lo: &self.whole_lo,
            whole_hi: &self.whole_hi,
        }
    }

    /// Where the box is split along coordinate `j`, and the point it offers as a candidate:
    /// the geometric middle of a range over several factors of two from a positive start
    /// (rates and slots span decades), else the arithmetic one.
    fn middle(&self, j: usize) -> f64 {
        let (lo, hi) = (self.lo[j], self.hi[j]);
        if lo > 0.0 && hi > 4.0 * lo {
            (lo * hi).sqrt()
        } else {
            0.5 * (lo + hi)
        }
    }

    fn whole_middle(&self, k: usize) -> f64 {
        (0.5 * (self.whole_lo[k] + self.whole_hi[k])).floor()
    }

    fn centre(&self) -> (Vec<f64>, [f64; 3]) {
        (
            (0..self.lo.len()).map(|j| self.middle(j)).collect(),
            std::array::from_fn(|k| self.whole_middle(k)),
        )
    }
}

impl PartialEq for Node {
    fn eq(&self, other: &Self) -> bool {
        self.least.total_cmp(&other.least) == Ordering::Equal
    }
}
impl Eq for Node {}
impl PartialOrd for Node {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Node {
    /// The heap pops the lowest bound first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.least.total_cmp(&self.least)
    }
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

fn tolerance(cost: f64) -> f64 {
    RELATIVE_TOLERANCE * cost + ABSOLUTE_TOLERANCE
}

/// The global optimum of `compiled`'s cost over every coordinate within its bounds and every
/// combination of the whole numbers in `integers` (1 to 32 read requests, 1 to 8 loads), proven
/// on `compiled.proof`'s rows and then polished on every row.
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
    let polish = |t: &[f64], whole: &[f64; 3]| compiled.polish(t, whole, &active, pairs);
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
    let (t, cost) = polish(&start, &start_whole);
    let mut best = (t, start_whole, cost);

    let mut root = Node {
        least: 0.0,
        lo,
        hi,
        whole_lo,
        whole_hi,
    };
    root.least = compiled.least_cost_in(&root.corners(), pairs);
    let mut open = BinaryHeap::new();
    open.push(root);
    // The least bound of every box dropped so far.
    let mut settled = f64::INFINITY;
    let mut boxes = 0;
    let proven = loop {
        let Some(node) = open.pop() else {
            break true;
        };
        if node.least >= best.2 - tolerance(best.2) {
            settled = settled.min(node.least);
            break true;
        }
        if boxes >= BOX_BUDGET {
            open.push(node);
            break false;
        }
        boxes += 1;
        // Every so often the most promising box's centre is polished whatever its cost: the
        // bound says the best basin may be there, before any centre shows it.
        if boxes % POLISH_EVERY == 1 {
            let (t, whole) = node.centre();
            let (t, cost) = polish(&t, &whole);
            if cost < best.2 {
                best = (t, whole, cost);
            }
        }
        let reach = compiled.reach_by_dimension(&node.corners(), pairs);
        let splittable = |d: usize| {
            if d < n {
                let (l, h) = (node.lo[d], node.hi[d]);
                h - l > 1e-12 * h.abs().max(1e-9)
            } else {
                node.whole_lo[d - n] < node.whole_hi[d - n]
            }
        };
        let along = (0..reach.len())
            .filter(|&d| reach[d] > 0.0 && splittable(d))
            .max_by(|&a, &b| reach[a].total_cmp(&reach[b]));
        let Some(d) = along else {
            // No row's time changes across the box: its bound is its cost everywhere.
            let (t, whole) = node.centre();
            let cost = compiled.cost(&t, &whole, pairs);
            if cost < best.2 {
                best = (t, whole, cost);
            }
            settled = settled.min(node.least);
            continue;
        };
        let mut halves = split(node, d, n);
        for half in &mut halves {
            half.least = compiled.least_cost_in(&half.corners(), pairs);
        }
        for child in halves {
            let least = child.least;
            if least >= best.2 - tolerance(best.2) {
                settled = settled.min(least);
                continue;
            }
            let (t, whole) = child.centre();
            if compiled.cost(&t, &whole, pairs) < best.2 {
                let (t, cost) = polish(&t, &whole);
                if cost < best.2 {
                    best = (t, whole, cost);
                }
            }
            open.push(child);
        }
    };
    let open_least = open.peek().map_or(f64::INFINITY, |node| node.least);
    let (mut t, whole, proof_cost) = best;
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
            lower_bound: settled.min(open_least),
            proven,
            boxes,
            pairs: pairs.len(),
            of_pairs: compiled.all.len(),
        },
    }
}

/// The two halves of `node` along dimension `d` (a coordinate below `n`, else a whole number).
fn split(node: Node, d: usize, n: usize) -> [Node; 2] {
    let mut low = Node {
        least: node.least,
        lo: node.lo.clone(),
        hi: node.hi.clone(),
        whole_lo: node.whole_lo,
        whole_hi: node.whole_hi,
    };
    let mut high = node;
    if d < n {
        let middle = high.middle(d);
        low.hi[d] = middle;
        high.lo[d] = middle;
    } else {
        let k = d - n;
        let middle = high.whole_middle(k);
        low.whole_hi[k] = middle;
        high.whole_lo[k] = middle + 1.0;
    }
    [low, high]
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
