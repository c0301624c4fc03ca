//! The global stage on rows that fall into groups sharing only the dimensions every row depends
//! on (DMA writes and reads share `dma.setup_ns` and `dma.descriptor_bytes`; each direction's
//! slot, rate limit, latency and requests in flight touch its own rows only; MMIO stores and
//! loads share nothing). Within a box of the shared dimensions the cost is a sum of one cost
//! per group over its own dimensions, so the least cost in the box is the sum of each group's
//! least, and each group's is found by its own branch and bound over its own dimensions
//! ([`Search`]). The boxes that must be covered then number the sum of each group's, not their
//! product, which is what left a joint search's budget short of the basins several parameters
//! of one direction must move together to reach.
//!
//! An outer branch and bound splits the shared dimensions: each box's bound is the sum of the
//! groups' proven lower bounds there (each a true bound whether or not its search finished), and
//! its candidate the groups' best points joined at the box's centre, polished on every row.

use std::collections::BinaryHeap;

use super::compiled::Compiled;
use super::search::{
    dimension, split_at, tolerance, value_of, Node, Outcome, Point, Search, ABSOLUTE_TOLERANCE,
    RELATIVE_TOLERANCE,
};
use crate::model::row_time::WHOLE;

/// Boxes of the shared dimensions split at most. With the budgets below, chosen by measurement
/// (docs/calibration.md, "How the fit searches"): fewer missed optima of random rows, more
/// missed the 13-row speed goal.
const OUTER_BUDGET: usize = 14;
/// Boxes each group's search splits at most, per box of the shared dimensions.
const GROUP_BUDGET: usize = 200;
/// Boxes each group's search over its own and the shared dimensions splits at most, and each
/// group's search at the shared values it proposes.
const PROPOSAL_BUDGET: usize = 800;
/// Where a shared range from 0 is split, as a fraction of its top.
const LOW_SPLIT: f64 = 0.01;

/// The fit's rows split into groups that share only the dimensions in `shared`.
pub(super) struct Groups {
    /// Per dimension (coordinates, then whole numbers): whether every row depends on it.
    shared: Vec<bool>,
    groups: Vec<Group>,
}

/// Rows that depend on some dimension no other group depends on, and those dimensions.
struct Group {
    pairs: Vec<usize>,
    /// Per dimension: whether it is this group's own.
    own: Vec<bool>,
    /// This group's own coordinates, which its polish moves.
    active: Vec<usize>,
}

/// The groups of `pairs` within `root`, or `None` when they do not fall into two or more.
pub(super) fn groups(compiled: &Compiled, root: &Node, pairs: &[usize]) -> Option<Groups> {
    let n = root.lo.len();
    let free: Vec<bool> = (0..n + WHOLE.len())
        .map(|d| {
            let (lo, hi) = root.range(d);
            lo < hi
        })
        .collect();
    let uses: Vec<Vec<bool>> = pairs
        .iter()
        .map(|&at| {
            let mut u = compiled.depends_on(at);
            for (u, f) in u.iter_mut().zip(&free) {
                *u &= f;
            }
            u
        })
        .collect();
    let shared: Vec<bool> = (0..free.len())
        .map(|d| free[d] && uses.iter().all(|u| u[d]))
        .collect();
    // Rows joined through any dimension that is not shared.
    let mut parent: Vec<usize> = (0..pairs.len()).collect();
    fn root_of(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for d in (0..free.len()).filter(|&d| free[d] && !shared[d]) {
        let mut first: Option<usize> = None;
        for (i, u) in uses.iter().enumerate() {
            if u[d] {
                match first {
                    None => first = Some(i),
                    Some(f) => {
                        let (a, b) = (root_of(&mut parent, f), root_of(&mut parent, i));
                        parent[a] = b;
                    }
                }
            }
        }
    }
    let mut groups: Vec<Group> = Vec::new();
    // Each group's key: its rows' common root, or `None` for the rows with no dimension of
    // their own, which form one group.
    let mut keys: Vec<Option<usize>> = Vec::new();
    for (i, &at) in pairs.iter().enumerate() {
        let own_any = uses[i].iter().zip(&shared).any(|(&u, &s)| u && !s);
        let key = own_any.then(|| root_of(&mut parent, i));
        let g = match keys.iter().position(|&k| k == key) {
            Some(g) => g,
            None => {
                keys.push(key);
                groups.push(Group {
                    pairs: Vec::new(),
                    own: vec![false; free.len()],
                    active: Vec::new(),
                });
                groups.len() - 1
            }
        };
        groups[g].pairs.push(at);
        for d in 0..free.len() {
            groups[g].own[d] |= uses[i][d] && !shared[d];
        }
    }
    for g in &mut groups {
        g.active = (0..n).filter(|&d| g.own[d]).collect();
    }
    (groups.len() > 1).then_some(Groups { shared, groups })
}

/// The branch and bound over the shared dimensions of `root`, each box searched group by
/// group, from `incumbent` (its cost on the proof rows); `active` are the coordinates the
/// polish of a joined point moves.
pub(super) fn search(
    compiled: &Compiled,
    groups: &Groups,
    mut root: Node,
    active: &[usize],
    incumbent: Point,
) -> Outcome {
    let pairs = &compiled.proof;
    let n = root.lo.len();
    // Each group's cost and bound include the measurements' spread once; their sum once too.
    let extra_spread = (groups.groups.len() - 1) as f64 * compiled.spread();
    let share = groups.groups.len() as f64;
    let group_tolerance =
        |cost: f64| 0.5 * RELATIVE_TOLERANCE * cost + 0.5 * ABSOLUTE_TOLERANCE / share;
    let mut best = incumbent;
    let mut boxes = 0;
    // The least cost in `node` and the groups' best points there, joined and polished.
    let evaluate = |node: &Node, best: &mut Point, boxes: &mut usize, budget: usize| -> f64 {
        // The shared dimensions are held where the best point has them when that is in the
        // box, else at its centre.
        let (centre, centre_whole) = node.centre();
        let mut joined = best.t.clone();
        let mut joined_whole = best.whole;
        for d in (0..n + WHOLE.len()).filter(|&d| groups.shared[d]) {
            let (lo, hi) = node.range(d);
            let value = dimension(&mut joined, &mut joined_whole, d);
            if !(lo..=hi).contains(value) {
                *value = value_of(&centre, &centre_whole, d);
            }
        }
        // Each group's bound on the box before its search; a group's search stops once the
        // groups' bounds together settle the box.
        let mut bounds: Vec<f64> = groups
            .groups
            .iter()
            .map(|g| compiled.least_cost_in(&node.corners(), &g.pairs))
            .collect();
        let mut cost = -extra_spread;
        let start = (joined.clone(), joined_whole);
        for (g, group) in groups.groups.iter().enumerate() {
            let others: f64 = bounds.iter().sum::<f64>() - bounds[g];
            let cutoff = best.cost - tolerance(best.cost) + extra_spread - others;
            if bounds[g] >= cutoff {
                return bounds.iter().sum::<f64>() - extra_spread;
            }
            let (t, group_cost) = compiled.polish(&start.0, &start.1, &group.active, &group.pairs);
            let outcome = Search {
                compiled,
                pairs: &group.pairs,
                active: &group.active,
                splittable: group.own.clone(),
                budget,
                tolerance: group_tolerance,
                cutoff,
            }
            .run(
                node.clone(),
                Point {
                    t,
                    whole: start.1,
                    cost: group_cost,
                },
            );
            *boxes += outcome.boxes;
            bounds[g] = bounds[g].max(outcome.lower_bound);
            if bounds[g] >= cutoff {
                return bounds.iter().sum::<f64>() - extra_spread;
            }
            cost += outcome.best.cost;
            for d in (0..n + WHOLE.len()).filter(|&d| group.own[d]) {
                *dimension(&mut joined, &mut joined_whole, d) =
                    value_of(&outcome.best.t, &outcome.best.whole, d);
            }
        }
        let least = bounds.iter().sum::<f64>() - extra_spread;
        // Every row polished together from the joined point moves the shared dimensions too.
        let (t, polished) = compiled.polish(&joined, &joined_whole, active, pairs);
        if polished.min(cost) < best.cost {
            *best = Point {
                t,
                whole: joined_whole,
                cost: polished,
            };
        }
        least
    };
    // First each group is searched over its own and the shared dimensions; the shared values
    // of its best point are a proposal, at which every group is searched over its own. The sum
    // of those searches' bounds bounds the whole box too.
    let mut proposed_least = -extra_spread;
    for group in &groups.groups {
        let splittable: Vec<bool> = (0..n + WHOLE.len())
            .map(|d| group.own[d] || groups.shared[d])
            .collect();
        let moving: Vec<usize> = (0..n)
            .filter(|&d| splittable[d] && active.contains(&d))
            .collect();
        let (t, cost) = compiled.polish(&best.t, &best.whole, &moving, &group.pairs);
        let leader = Search {
            compiled,
            pairs: &group.pairs,
            active: &moving,
            splittable,
            budget: PROPOSAL_BUDGET,
            tolerance: group_tolerance,
            cutoff: f64::INFINITY,
        }
        .run(
            root.clone(),
            Point {
                t,
                whole: best.whole,
                cost,
            },
        );
        boxes += leader.boxes;
        proposed_least += leader.lower_bound;
        let mut at = root.clone();
        for d in (0..n + WHOLE.len()).filter(|&d| groups.shared[d]) {
            let value = value_of(&leader.best.t, &leader.best.whole, d);
            *dimension(&mut at.lo, &mut at.whole_lo, d) = value;
            *dimension(&mut at.hi, &mut at.whole_hi, d) = value;
        }
        // Only a point of the box: its bound says nothing of the rest.
        evaluate(&at, &mut best, &mut boxes, PROPOSAL_BUDGET);
    }
    root.least = evaluate(&root, &mut best, &mut boxes, GROUP_BUDGET).max(proposed_least);
    let mut open = BinaryHeap::new();
    open.push(root);
    let mut settled = f64::INFINITY;
    let mut outer = 0;
    let mut unsettled = false;
    let proven = loop {
        let Some(node) = open.pop() else {
            break !unsettled;
        };
        if node.least >= best.cost - tolerance(best.cost) {
            settled = settled.min(node.least);
            break !unsettled;
        }
        if outer >= OUTER_BUDGET {
            open.push(node);
            break false;
        }
        outer += 1;
        let reach = compiled.reach_by_dimension(&node.corners(), pairs, &groups.shared);
        let Some(d) = node.split_along(&reach, &groups.shared) else {
            // The groups' searches left this box's bound short and it cannot be split further.
            settled = settled.min(node.least);
            unsettled = true;
            continue;
        };
        // A shared range from 0 (a setup time up to 10 ms) is split near its low end, where
        // fits land, rather than at its middle.
        let at = (d < n && node.lo[d] == 0.0).then(|| node.hi[d] * LOW_SPLIT);
        for mut child in split_at(node, d, n, at) {
            child.least = evaluate(&child, &mut best, &mut boxes, GROUP_BUDGET);
            if child.least >= best.cost - tolerance(best.cost) {
                settled = settled.min(child.least);
            } else {
                open.push(child);
            }
        }
    };
    Outcome::ended(best, settled, &open, proven, boxes + outer)
}
