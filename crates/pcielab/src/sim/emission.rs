//! When a stream's TLPs cross the link, in exact integer arithmetic: the engine's progress (I/Os
//! completed over time, piecewise linear in floating point) becomes a position in TLPs held as a
//! 64.64 fixed-point number per whole nanosecond, so the TLPs emitted by `t` are an exact floor
//! of a linear function of `t` within each piece. That exactness is what lets a counter's value
//! be summed over an arithmetic progression of times (every other mux period of a time-shared
//! event, over hours of simulated time) in closed form with floor sums, instead of evaluating it
//! at every rotation.

use super::engine::Progress;
use super::tlp::{Bundle, Run};

/// Fraction bits of positions and rates.
const FRACTION_BITS: u32 = 64;

/// One stretch of time over which the position grows at a constant rate.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Piece {
    /// First whole nanosecond the piece covers (it lasts until the next piece's).
    from_ns: u64,
    /// Position at `from_ns`, in TLPs × 2^64.
    position: u128,
    /// TLPs per nanosecond × 2^64.
    rate: u128,
}

/// A stream's emitted-TLP count as a function of time.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Emission {
    /// Pieces by time, the first from 0 ns; the position never decreases across them.
    pieces: Vec<Piece>,
    /// From this nanosecond on, every TLP has been emitted.
    end_ns: u64,
    total: u64,
}

/// `value × 2^64` for a finite, non-negative `value` (negative and NaN become 0).
fn fixed(value: f64) -> u128 {
    (value.max(0.0) * 2f64.powi(FRACTION_BITS as i32)) as u128
}

impl Emission {
    /// The emission of `total` TLPs, `tlps_per_io` of them per I/O of `progress`.
    pub(crate) fn new(progress: &Progress, tlps_per_io: f64, total: u64) -> Emission {
        let mut pieces: Vec<Piece> = Vec::new();
        // A piece never starts below where the previous one got to: rounding each piece's start
        // independently must not make the count go back.
        let push = |pieces: &mut Vec<Piece>, from_ns: u64, position: u128, rate: u128| {
            if pieces.last().is_some_and(|p: &Piece| p.from_ns == from_ns) {
                pieces.pop();
            }
            let reached = pieces.last().map_or(0, |p| {
                p.position
                    .saturating_add(p.rate.saturating_mul(u128::from(from_ns - 1 - p.from_ns)))
            });
            pieces.push(Piece {
                from_ns,
                position: position.max(reached),
                rate,
            });
        };
        let mut covered = 0u64;
        for &(t0, t1, done0, ios_per_ns) in &progress.segments {
            let from = t0.max(0.0).ceil() as u64;
            let to = t1.max(0.0).ceil() as u64;
            if to <= from.max(covered) {
                continue;
            }
            // Before a segment starts, the count holds at the segment's starting point.
            if covered < from || pieces.is_empty() {
                push(&mut pieces, covered, fixed(done0 * tlps_per_io), 0);
            }
            let from = from.max(covered);
            let start = (done0 + ios_per_ns * (from as f64 - t0)) * tlps_per_io;
            push(
                &mut pieces,
                from,
                fixed(start),
                fixed(ios_per_ns * tlps_per_io),
            );
            covered = to;
        }
        if pieces.is_empty() {
            pieces.push(Piece {
                from_ns: 0,
                position: 0,
                rate: 0,
            });
        }
        Emission {
            pieces,
            end_ns: progress.end().max(0.0).ceil() as u64,
            total,
        }
    }

    /// TLPs emitted by `t_ns`.
    pub(crate) fn emitted(&self, t_ns: u64) -> u64 {
        if t_ns >= self.end_ns {
            return self.total;
        }
        let piece = &self.pieces[self.pieces.partition_point(|p| p.from_ns <= t_ns) - 1];
        let position = piece
            .position
            .saturating_add(piece.rate.saturating_mul(u128::from(t_ns - piece.from_ns)));
        u64::try_from(position >> FRACTION_BITS)
            .unwrap_or(u64::MAX)
            .min(self.total)
    }

    /// `Σ bundle.after_sum(self.emitted(first_ns + k × step_ns), per_tlp)` for `k` in `0..n`,
    /// in closed form over each piece (term by term when there are fewer terms than the closed
    /// form takes floor sums); `None` if an intermediate overflows 128 bits.
    pub(crate) fn progression_sum(
        &self,
        bundle: &Bundle,
        per_tlp: &impl Fn(&Run) -> u64,
        first_ns: u64,
        step_ns: u64,
        n: u64,
    ) -> Option<u128> {
        let terms = PerTlp::new(bundle, per_tlp);
        if u128::from(n) <= terms.closed_form_cost {
            return (0..n).try_fold(0u128, |sum, k| {
                let t = first_ns.checked_add(k.checked_mul(step_ns)?)?;
                sum.checked_add(u128::from(bundle.after_sum(self.emitted(t), per_tlp)))
            });
        }
        let at_total = u128::from(bundle.after_sum(self.total, per_tlp));
        let limit = u128::from(self.total) << FRACTION_BITS;
        let mut sum = 0u128;
        let mut k = 0u64;
        while k < n {
            let t = first_ns.checked_add(k.checked_mul(step_ns)?)?;
            if t >= self.end_ns {
                return sum.checked_add(u128::from(n - k) * at_total);
            }
            let index = self.pieces.partition_point(|p| p.from_ns <= t) - 1;
            let piece = &self.pieces[index];
            let next = self
                .pieces
                .get(index + 1)
                .map_or(self.end_ns, |p| p.from_ns);
            // Terms up to the first time at or past the next piece.
            let in_piece = (n - k).min((next - t).div_ceil(step_ns.max(1)));
            let start = piece
                .position
                .checked_add(piece.rate.checked_mul(u128::from(t - piece.from_ns))?)?;
            let growth = piece.rate.checked_mul(u128::from(step_ns))?;
            // Terms before the position reaches the total (the rest count the total).
            let below = if start >= limit {
                0
            } else if growth == 0 {
                u128::from(in_piece)
            } else {
                (limit - start).div_ceil(growth).min(u128::from(in_piece))
            };
            sum = sum.checked_add(terms.sum(start, growth, below)?)?;
            sum = sum.checked_add((u128::from(in_piece) - below).checked_mul(at_total)?)?;
            k += in_piece;
        }
        Some(sum)
    }
}

/// A per-TLP quantity over a stream of back-to-back bundles, as a function of the TLPs emitted:
/// `F(e) = last × e + Σ steps[i].1 × H(e, steps[i].0)`, where `H(e, s)` counts the first `e`
/// TLPs whose place in their bundle is below `s`.
struct PerTlp {
    tlps: u128,
    last: i128,
    /// (place in the bundle where the per-TLP value changes, value before − value after).
    steps: Vec<(u128, i128)>,
    /// Floor sums one closed-form sum takes: up to this many terms, adding them is cheaper.
    closed_form_cost: u128,
}

impl PerTlp {
    fn new(bundle: &Bundle, per_tlp: &impl Fn(&Run) -> u64) -> PerTlp {
        let mut steps = Vec::new();
        let mut place = 0u128;
        let mut previous: Option<i128> = None;
        for run in bundle.runs.iter().filter(|r| r.count > 0) {
            let value = i128::from(per_tlp(run));
            if let Some(before) = previous.filter(|&v| v != value) {
                steps.push((place, before - value));
            }
            previous = Some(value);
            place += u128::from(run.count);
        }
        let tlps = u128::from(bundle.tlps);
        let closed_form_cost = 2 + steps.iter().map(|&(s, _)| s.min(tlps - s)).sum::<u128>();
        PerTlp {
            tlps,
            last: previous.unwrap_or(0),
            steps,
            closed_form_cost,
        }
    }

    /// `Σ F(floor((start + growth × j) / 2^64))` for `j` in `0..n`: each `H` summed over the
    /// terms by floor sums.
    fn sum(&self, start: u128, growth: u128, n: u128) -> Option<u128> {
        if n == 0 || self.tlps == 0 {
            return Some(0);
        }
        let one = 1u128 << FRACTION_BITS;
        let bundle = self.tlps.checked_mul(one)?;
        // Σ e_j, and Σ floor(e_j / tlps): whole bundles emitted.
        let emitted = floor_sum(n, one, growth, start)?;
        let bundles = floor_sum(n, bundle, growth, start)?;
        // Σ (e_j mod tlps).
        let places = emitted.checked_sub(bundles.checked_mul(self.tlps)?)?;
        // Σ [e_j mod tlps >= v]: e_j's place reached v, as a difference of floors.
        let reached = |v: u128| -> Option<u128> {
            let shifted = start.checked_add((self.tlps - v).checked_mul(one)?)?;
            floor_sum(n, bundle, growth, shifted)?.checked_sub(bundles)
        };
        let mut total = i128::try_from(emitted).ok()?.checked_mul(self.last)?;
        for &(s, difference) in &self.steps {
            // Σ min(place, s), from whichever side of s has fewer values to count.
            let below = if s <= self.tlps - s {
                (1..=s).try_fold(0u128, |acc, v| acc.checked_add(reached(v)?))?
            } else {
                let above =
                    (s + 1..self.tlps).try_fold(0u128, |acc, v| acc.checked_add(reached(v)?))?;
                places.checked_sub(above)?
            };
            let h = bundles.checked_mul(s)?.checked_add(below)?;
            total = total.checked_add(i128::try_from(h).ok()?.checked_mul(difference)?)?;
        }
        u128::try_from(total).ok()
    }
}

/// `Σ floor((a × i + b) / m)` for `i` in `0..n` (`m > 0`), by the Euclidean-like reduction that
/// swaps the roles of `a` and `m`: O(log m) steps. `None` on overflow.
fn floor_sum(mut n: u128, mut m: u128, mut a: u128, mut b: u128) -> Option<u128> {
    let mut sum = 0u128;
    while n > 0 {
        if a >= m {
            let pairs = if n.is_multiple_of(2) {
                (n / 2).checked_mul(n - 1)?
            } else {
                n.checked_mul((n - 1) / 2)?
            };
            sum = sum.checked_add(pairs.checked_mul(a / m)?)?;
            a %= m;
        }
        if b >= m {
            sum = sum.checked_add(n.checked_mul(b / m)?)?;
            b %= m;
        }
        let top = a.checked_mul(n)?.checked_add(b)?;
        if top < m {
            break;
        }
        n = top / m;
        b = top % m;
        std::mem::swap(&mut m, &mut a);
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tlp::{Dir, Kind};
    use proptest::prelude::*;

    fn floor_sum_by_terms(n: u128, m: u128, a: u128, b: u128) -> u128 {
        (0..n).map(|i| (a * i + b) / m).sum()
    }

    #[test]
    fn floor_sums_match_their_terms() {
        for (n, m, a, b) in [
            (0, 7, 3, 2),
            (10, 7, 3, 2),
            (1000, 13, 100, 999),
            (64, 1 << 64, u128::MAX >> 72, 5),
        ] {
            assert_eq!(floor_sum(n, m, a, b), Some(floor_sum_by_terms(n, m, a, b)));
        }
    }

    fn run(kind: Kind, count: u64, payload: u32) -> Run {
        Run {
            dir: Dir::Up,
            kind,
            count,
            payload,
            acks: 0.0,
            update_fcs: 0.0,
        }
    }

    fn bundle(runs: Vec<Run>) -> Bundle {
        Bundle::new(runs, crate::sim::tlp::tests::gen2())
    }

    fn any_bundle() -> impl Strategy<Value = Bundle> {
        let one = (0u64..40, prop_oneof![Just(0u32), 1u32..300], any::<bool>());
        prop::collection::vec(one, 1..5).prop_map(|runs| {
            bundle(
                runs.into_iter()
                    .map(|(count, payload, write)| {
                        run(
                            if write { Kind::MemWrite } else { Kind::MemRead },
                            count,
                            payload,
                        )
                    })
                    .collect(),
            )
        })
    }

    fn any_progress() -> impl Strategy<Value = Progress> {
        // (gap before, length, I/Os per µs): segments with pauses and idle stretches.
        let segment = (
            0u64..3000,
            1u64..20_000,
            prop_oneof![Just(0u32), 1u32..5000],
        );
        prop::collection::vec(segment, 1..5).prop_map(|segments| {
            let mut t = 0.5;
            let mut done = 0.0;
            let mut out = Vec::new();
            for (gap, length, per_us) in segments {
                t += gap as f64 + 0.25;
                let rate = f64::from(per_us) / 1000.0;
                out.push((t, t + length as f64, done, rate));
                done += rate * length as f64;
                t += length as f64;
            }
            Progress {
                segments: out,
                total_ios: done.round() as u64,
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The closed form gives exactly the sum of the per-time counts it replaces.
        #[test]
        fn progression_sums_match_their_terms(
            bundle in any_bundle(),
            progress in any_progress(),
            tlps_per_io in 0.1f64..3.0,
            first in 0u64..40_000,
            step in 1u64..5_000,
            n in 0u64..600,
            field in 0u8..3,
        ) {
            let total = (progress.total_ios as f64 * tlps_per_io) as u64;
            let emission = Emission::new(&progress, tlps_per_io, total);
            let per_tlp = |r: &Run| match field {
                0 => r.payload_units(),
                1 => u64::from(r.kind == Kind::MemWrite),
                _ => u64::from(r.payload),
            };
            let by_terms: u128 = (0..n)
                .map(|k| u128::from(bundle.after_sum(emission.emitted(first + k * step), per_tlp)))
                .sum();
            prop_assert_eq!(emission.progression_sum(&bundle, &per_tlp, first, step, n), Some(by_terms));
        }

        /// The floor-sum form equals its terms, however few they are.
        #[test]
        fn closed_form_matches_terms(
            bundle in any_bundle(),
            start in 0u128..(1u128 << 80),
            growth in 0u128..(1u128 << 72),
            n in 1u128..300,
            field in 0u8..3,
        ) {
            prop_assume!(bundle.tlps > 0);
            let per_tlp = |r: &Run| match field {
                0 => r.payload_units(),
                1 => u64::from(r.kind == Kind::MemWrite),
                _ => u64::from(r.payload),
            };
            let by_terms: u128 = (0..n)
                .map(|j| u128::from(bundle.after_sum(((start + growth * j) >> 64) as u64, per_tlp)))
                .sum();
            prop_assert_eq!(PerTlp::new(&bundle, &per_tlp).sum(start, growth, n), Some(by_terms));
        }

        /// Emission never goes back and ends at the total.
        #[test]
        fn emission_is_monotonic(progress in any_progress(), tlps_per_io in 0.1f64..3.0) {
            let total = (progress.total_ios as f64 * tlps_per_io) as u64;
            let emission = Emission::new(&progress, tlps_per_io, total);
            let end = emission.end_ns;
            let mut last = 0;
            for t in (0..end + 10).step_by(7) {
                let e = emission.emitted(t);
                prop_assert!(e >= last && e <= total);
                last = e;
            }
            prop_assert_eq!(emission.emitted(end), total);
        }
    }
}
