//! One branch and bound of the fit's global stage ([`super::global`]): boxes of coordinates and
//! whole numbers, each bounded by [`Compiled::least_cost_in`], taken lowest bound first and split
//! along the dimension that moves the rows' times most, each promising centre polished by
//! Levenberg-Marquardt; run over every dimension at once, or over one group's
//! ([`super::separable`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::compiled::{Compiled, Corners};
use crate::model::row_time::WHOLE;

/// A box may be dropped once its bound is within this fraction of the best cost found (plus
/// [`ABSOLUTE_TOLERANCE`]): the optimum is proven to within 0.1 % of its cost, 0.05 % of its
/// rms residual. Chosen by measurement (docs/calibration.md, "How the fit searches").
pub(super) const RELATIVE_TOLERANCE: f64 = 1e-3;
/// The tolerance's floor, for rows the model reproduces exactly (cost near 0).
pub(super) const ABSOLUTE_TOLERANCE: f64 = 1e-9;
/// The lowest-bound box's centre is polished once every this many boxes.
const POLISH_EVERY: usize = 32;

/// How far above a box's bound the best cost may be for the box to be dropped.
pub(super) fn tolerance(cost: f64) -> f64 {
    RELATIVE_TOLERANCE * cost + ABSOLUTE_TOLERANCE
}

/// One box and the least cost in it.
#[derive(Clone)]
pub(super) struct Node {
    pub(super) least: f64,
    pub(super) lo: Vec<f64>,
    pub(super) hi: Vec<f64>,
    pub(super) whole_lo: [f64; 3],
    pub(super) whole_hi: [f64; 3],
}

impl Node {
    pub(super) fn corners(&self) -> Corners<'_> {
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

    /// The dimension among `splittable` that moves the rows most across the box (`reach`, from
    /// [`Compiled::reach_by_dimension`]), if any still has a width and moves a row.
    pub(super) fn split_along(&self, reach: &[f64], splittable: &[bool]) -> Option<usize> {
        let n = self.lo.len();
        let open = |d: usize| {
            let (l, h) = self.range(d);
            splittable[d]
                && if d < n {
                    h - l > 1e-12 * h.abs().max(1e-9)
                } else {
                    l < h
                }
        };
        (0..reach.len())
            .filter(|&d| reach[d] > 0.0 && open(d))
            .max_by(|&a, &b| reach[a].total_cmp(&reach[b]))
    }

    /// The range of dimension `d` (a coordinate below `lo.len()`, else a whole number).
    pub(super) fn range(&self, d: usize) -> (f64, f64) {
        let n = self.lo.len();
        if d < n {
            (self.lo[d], self.hi[d])
        } else {
            (self.whole_lo[d - n], self.whole_hi[d - n])
        }
    }

    pub(super) fn centre(&self) -> (Vec<f64>, [f64; 3]) {
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

/// Dimension `d` of the point `t`, `whole` (a coordinate below `t.len()`, else a whole
/// number), to write.
pub(super) fn dimension<'p>(t: &'p mut [f64], whole: &'p mut [f64; 3], d: usize) -> &'p mut f64 {
    let n = t.len();
    if d < n {
        &mut t[d]
    } else {
        &mut whole[d - n]
    }
}

/// Dimension `d` of the point `t`, `whole`; see [`dimension`].
pub(super) fn value_of(t: &[f64], whole: &[f64; 3], d: usize) -> f64 {
    if d < t.len() {
        t[d]
    } else {
        whole[d - t.len()]
    }
}

/// A point of the search and its cost on the search's rows.
#[derive(Clone)]
pub(super) struct Point {
    pub(super) t: Vec<f64>,
    pub(super) whole: [f64; 3],
    pub(super) cost: f64,
}

/// What one search found: its best point, the least cost any point of its box can have on its
/// rows, whether every box was settled, and how many it split.
pub(super) struct Outcome {
    pub(super) best: Point,
    pub(super) lower_bound: f64,
    pub(super) proven: bool,
    pub(super) boxes: usize,
}

impl Outcome {
    /// A search's end: its lower bound is the least of the boxes it dropped (`settled`) and of
    /// those still `open`.
    pub(super) fn ended(
        best: Point,
        settled: f64,
        open: &BinaryHeap<Node>,
        proven: bool,
        boxes: usize,
    ) -> Outcome {
        let open_least = open.peek().map_or(f64::INFINITY, |node| node.least);
        Outcome {
            best,
            lower_bound: settled.min(open_least),
            proven,
            boxes,
        }
    }
}

/// One branch and bound on the rows `pairs`: boxes are split only along the dimensions marked
/// `splittable` (coordinates, then whole numbers), the polish moves the coordinates `active`,
/// and a box is dropped once its bound is within `tolerance(best cost)` of the best cost. The
/// search stops once every open box's bound is at least `cutoff` (what makes a caller's box
/// hopeless; infinite for none), and after `budget` boxes.
pub(super) struct Search<'s, 'a, F: Fn(f64) -> f64> {
    pub(super) compiled: &'s Compiled<'a>,
    pub(super) pairs: &'s [usize],
    pub(super) active: &'s [usize],
    pub(super) splittable: Vec<bool>,
    pub(super) budget: usize,
    pub(super) tolerance: F,
    pub(super) cutoff: f64,
}

impl<F: Fn(f64) -> f64> Search<'_, '_, F> {
    fn polish(&self, t: &[f64], whole: &[f64; 3]) -> (Vec<f64>, f64) {
        self.compiled.polish(t, whole, self.active, self.pairs)
    }

    /// The search of `root` from the best point known, `incumbent` (its cost on `pairs`).
    pub(super) fn run(&self, mut root: Node, incumbent: Point) -> Outcome {
        let (compiled, pairs) = (self.compiled, self.pairs);
        let n = root.lo.len();
        // A box's candidate: its centre along what this search splits, the incumbent's values
        // along the rest (which its rows depend on only where they are shared and held).
        let anchor = (incumbent.t.clone(), incumbent.whole);
        let candidate = |node: &Node| {
            let (mut t, mut whole) = node.centre();
            for d in (0..n + WHOLE.len()).filter(|&d| !self.splittable[d]) {
                *dimension(&mut t, &mut whole, d) = value_of(&anchor.0, &anchor.1, d);
            }
            (t, whole)
        };
        let mut best = incumbent;
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
            if node.least >= best.cost - (self.tolerance)(best.cost) {
                settled = settled.min(node.least);
                break true;
            }
            if boxes >= self.budget || node.least >= self.cutoff {
                open.push(node);
                break false;
            }
            boxes += 1;
            // Every so often the most promising box's centre is polished whatever its cost: the
            // bound says the best basin may be there, before any centre shows it.
            if boxes % POLISH_EVERY == 1 {
                let (t, whole) = candidate(&node);
                let (t, cost) = self.polish(&t, &whole);
                if cost < best.cost {
                    best = Point { t, whole, cost };
                }
            }
            let reach = compiled.reach_by_dimension(&node.corners(), pairs, &self.splittable);
            let Some(d) = node.split_along(&reach, &self.splittable) else {
                // No row's time changes across the box along what may be split: its bound is
                // what is known of it.
                let (t, whole) = candidate(&node);
                let cost = compiled.cost(&t, &whole, pairs);
                if cost < best.cost {
                    best = Point { t, whole, cost };
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
                if least >= best.cost - (self.tolerance)(best.cost) {
                    settled = settled.min(least);
                    continue;
                }
                let (t, whole) = candidate(&child);
                if compiled.cost(&t, &whole, pairs) < best.cost {
                    let (t, cost) = self.polish(&t, &whole);
                    if cost < best.cost {
                        best = Point { t, whole, cost };
                    }
                }
                open.push(child);
            }
        };
        Outcome::ended(best, settled, &open, proven, boxes)
    }
}

/// The two halves of `node` along dimension `d` (a coordinate below `n`, else a whole number).
fn split(node: Node, d: usize, n: usize) -> [Node; 2] {
    split_at(node, d, n, None)
}

/// The two halves of `node` along dimension `d`, at `at` for a coordinate where given.
pub(super) fn split_at(node: Node, d: usize, n: usize, at: Option<f64>) -> [Node; 2] {
    let mut low = Node {
        least: node.least,
        lo: node.lo.clone(),
        hi: node.hi.clone(),
        whole_lo: node.whole_lo,
        whole_hi: node.whole_hi,
    };
    let mut high = node;
    if d < n {
        let middle = at.unwrap_or_else(|| high.middle(d));
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
