//! The platform model's prediction of one measurement in the closed form the fit needs: a time
//! that is, in the fit's coordinates, a maximum of sums of linear terms and hinges
//! `max(0, slot − knee)`, with the wire times of the transfer's TLPs worked out once when the
//! form is built. Every rate limit enters as its inverse (ns per byte or per I/O), so an
//! unbounded rate is 0 and a row's time is convex and piecewise linear in every continuous
//! parameter; each term's derivative is exact (a coefficient, or a hinge's count where its slot
//! binds). Whole-number parameters (read requests and MMIO loads in flight) only scale whole
//! branches and are passed in at evaluation, so one set of forms serves every combination the
//! fit enumerates. [`super::platform`] stays the reference: tests check that a form's rate
//! equals `PlatformModel`'s prediction.

use super::measurements::Workload;
use super::platform::{DmaDirection, MmioOp, PlatformModel, P, PARAMS};
use super::transfer::{achievable_mbps, read, write, LinkParams, Overheads};

/// What a rate limit's inverse is counted per: MB/s becomes ns per byte (1000 / MB/s), I/O per
/// second ns per I/O (1e9 / IOPS).
fn inverse_numerator(p: P) -> Option<f64> {
    match PARAMS[p as usize].unit {
        "MB/s" => Some(1000.0),
        "I/O per s" => Some(1e9),
        _ => None,
    }
}

/// `p`'s value in the fit's coordinate: rates as their inverse (an unbounded rate is 0), every
/// other parameter as itself.
pub(crate) fn to_coordinate(p: P, value: f64) -> f64 {
    match inverse_numerator(p) {
        Some(k) => k / value,
        None => value,
    }
}

/// The inverse of [`to_coordinate`].
pub(crate) fn from_coordinate(p: P, t: f64) -> f64 {
    match inverse_numerator(p) {
        Some(_) if t <= 0.0 => f64::INFINITY,
        Some(k) => k / t,
        None => t,
    }
}

/// How fast `p`'s value moves with its coordinate (d value / d coordinate): 1, or for a rate
/// −k / t², which carries a coordinate's uncertainty into the parameter's unit.
pub(crate) fn value_per_coordinate(p: P, t: f64) -> f64 {
    match inverse_numerator(p) {
        Some(k) => -k / (t * t),
        None => 1.0,
    }
}

/// The range of `p`'s coordinate that its bounds allow, low end first.
pub(crate) fn coordinate_bounds(p: P) -> (f64, f64) {
    let s = &PARAMS[p as usize];
    match inverse_numerator(p) {
        Some(k) => (k / s.max, k / s.min),
        None => (s.min, s.max),
    }
}

/// How the whole-number parameters scale a branch.
#[derive(Debug, Clone, Copy)]
enum PerWhole {
    Once,
    /// A read's latency branch runs once per wave of requests: ⌈requests / requests in flight⌉.
    Waves {
        requests: f64,
    },
    /// An MMIO load's round trip is shared by the loads in flight: min(threads × per thread,
    /// outstanding).
    LoadsInFlight {
        threads: f64,
    },
}

/// The whole-number parameters a time depends on, in this order.
pub(crate) const WHOLE: [P; 3] = [
    P::DmaMaxReadRequests,
    P::MmioLoadsPerThread,
    P::MmioLoadsOutstanding,
];

impl PerWhole {
    fn factor(self, whole: &[f64; 3]) -> f64 {
        match self {
            PerWhole::Once => 1.0,
            PerWhole::Waves { requests } => (requests / whole[0].max(1.0)).ceil(),
            PerWhole::LoadsInFlight { threads } => 1.0 / (threads * whole[1]).min(whole[2]),
        }
    }
}

/// `count × max(0, t[param] − knee)`: `count` TLPs of wire time `knee` each held for a slot.
#[derive(Debug, Clone, Copy)]
struct Hinge {
    param: usize,
    count: f64,
    knee: f64,
}

/// `factor × per × (constant + Σ coefficient × t + Σ hinges)`.
#[derive(Debug, Clone)]
struct Branch {
    factor: f64,
    per: PerWhole,
    constant: f64,
    linear: Vec<(usize, f64)>,
    hinges: Vec<Hinge>,
}

impl Branch {
    fn new() -> Branch {
        Branch {
            factor: 1.0,
            per: PerWhole::Once,
            constant: 0.0,
            linear: Vec::new(),
            hinges: Vec::new(),
        }
    }

    fn value(&self, t: &[f64], whole: &[f64; 3]) -> f64 {
        let mut sum = self.constant;
        for &(j, a) in &self.linear {
            sum += a * t[j];
        }
        for h in &self.hinges {
            sum += h.count * (t[h.param] - h.knee).max(0.0);
        }
        self.factor * self.per.factor(whole) * sum
    }

    /// Coordinate `j`'s coefficient in this branch, `None` if it enters a hinge.
    fn coefficient(&self, j: usize) -> Option<f64> {
        if self.hinges.iter().any(|h| h.param == j) {
            return None;
        }
        Some(
            self.linear
                .iter()
                .filter(|&&(i, _)| i == j)
                .map(|&(_, a)| a)
                .sum(),
        )
    }

    /// Adds this branch's derivatives with respect to `t` into `gradient`.
    fn add_gradient(&self, t: &[f64], whole: &[f64; 3], gradient: &mut [f64]) {
        let scale = self.factor * self.per.factor(whole);
        for &(j, a) in &self.linear {
            gradient[j] += scale * a;
        }
        for h in &self.hinges {
            if t[h.param] > h.knee {
                gradient[h.param] += scale * h.count;
            }
        }
    }
}

/// A time in ns: `offset` plus the largest of `branches`. Every coefficient, hinge count and
/// factor is at least 0, so the time is non-decreasing in every coordinate, and the whole
/// numbers only divide branches, so it is non-increasing in them: over a box of coordinates it
/// lies between its values at two corners, which the fit's branch and bound rests on.
#[derive(Debug, Clone)]
pub(crate) struct RowTime {
    offset: Branch,
    branches: Vec<Branch>,
}

impl RowTime {
    fn active(&self, t: &[f64], whole: &[f64; 3]) -> (usize, f64) {
        let mut best = (0, f64::NEG_INFINITY);
        for (i, b) in self.branches.iter().enumerate() {
            let v = b.value(t, whole);
            if v > best.1 {
                best = (i, v);
            }
        }
        best
    }

    /// The time at coordinates `t` with whole numbers `whole`.
    pub(crate) fn time(&self, t: &[f64], whole: &[f64; 3]) -> f64 {
        self.offset.value(t, whole) + self.active(t, whole).1
    }

    /// The time and its derivative with respect to each coordinate (written into `gradient`,
    /// which is cleared first). At a tie between branches the first one's derivative is taken.
    pub(crate) fn time_and_gradient(
        &self,
        t: &[f64],
        whole: &[f64; 3],
        gradient: &mut [f64],
    ) -> f64 {
        gradient.fill(0.0);
        let (branch, value) = self.active(t, whole);
        self.offset.add_gradient(t, whole, gradient);
        self.branches[branch].add_gradient(t, whole, gradient);
        self.offset.value(t, whole) + value
    }

    /// Which dimensions this time depends on: each of the `n` coordinates (a term with a
    /// non-zero coefficient or a hinge), then each whole number of [`WHOLE`] (a branch it
    /// divides). What the fit's global stage splits its rows into independent groups by.
    pub(crate) fn depends_on(&self, n: usize) -> Vec<bool> {
        let mut uses = vec![false; n + WHOLE.len()];
        for b in std::iter::once(&self.offset).chain(&self.branches) {
            for &(j, a) in &b.linear {
                uses[j] |= a != 0.0;
            }
            for h in &b.hinges {
                uses[h.param] = true;
            }
            match b.per {
                PerWhole::Once => {}
                // One request per transfer takes one wave however many may be in flight.
                PerWhole::Waves { requests } => uses[n] |= requests > 1.0,
                PerWhole::LoadsInFlight { .. } => {
                    uses[n + 1] = true;
                    uses[n + 2] = true;
                }
            }
        }
        uses
    }

    /// How coordinate `k` enters this time against coordinate `j`: not at all, as exactly
    /// `ratio` times `j`'s term in every branch (the time then depends on `t[j] + ratio × t[k]`
    /// alone), or otherwise.
    pub(crate) fn proportion(&self, j: usize, k: usize) -> Proportion {
        let mut ratio: Option<f64> = None;
        for b in std::iter::once(&self.offset).chain(&self.branches) {
            let (Some(a_j), Some(a_k)) = (b.coefficient(j), b.coefficient(k)) else {
                return Proportion::Otherwise;
            };
            if a_k == 0.0 && a_j == 0.0 {
                continue;
            }
            if a_j == 0.0 {
                return Proportion::Otherwise;
            }
            let r = a_k / a_j;
            match ratio {
                Some(known) if (r - known).abs() > 1e-12 * r.abs().max(known.abs()) => {
                    return Proportion::Otherwise
                }
                Some(_) => {}
                None => ratio = Some(r),
            }
        }
        ratio.map_or(Proportion::Absent, Proportion::Ratio)
    }
}

/// How one coordinate enters a time against another ([`RowTime::proportion`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Proportion {
    /// The time depends on neither.
    Absent,
    /// Only through `t[j] + ratio × t[k]`.
    Ratio(f64),
    Otherwise,
}

/// Builds row times for one set of free parameters: a free parameter becomes a term, any other
/// is folded into the constant at its value in `fixed`.
pub(crate) struct Builder<'a> {
    pub(crate) fixed: &'a PlatformModel,
    pub(crate) free: &'a [P],
}

impl Builder<'_> {
    fn term(&self, p: P, coefficient: f64, into: &mut Branch) {
        match self.free.iter().position(|&f| f == p) {
            Some(j) => into.linear.push((j, coefficient)),
            None => into.constant += coefficient * to_coordinate(p, self.fixed.get(p)),
        }
    }

    fn hinge(&self, p: P, count: f64, knee: f64, into: &mut Branch) {
        if count == 0.0 {
            return;
        }
        match self.free.iter().position(|&f| f == p) {
            Some(param) => into.hinges.push(Hinge { param, count, knee }),
            None => into.constant += count * (self.fixed.get(p) - knee).max(0.0),
        }
    }

    /// A slot per piece of at most `piece` bytes of a `size`-byte transfer: the full pieces and
    /// the one short last piece, each with its own wire time as the knee.
    fn slot_hinges(
        &self,
        p: P,
        size: u64,
        piece: u64,
        wire_ns: impl Fn(u64) -> f64,
        into: &mut Branch,
    ) {
        let (full, rest) = (size / piece, size % piece);
        if full > 0 {
            self.hinge(p, full as f64, wire_ns(piece), into);
        }
        if rest > 0 {
            self.hinge(p, 1.0, wire_ns(rest), into);
        }
    }

    /// The data phase of a device write: its TLPs (each held for its wire time or the write
    /// slot) or the posted-write acceptance rate.
    fn write_data(&self, size: u64, link: &LinkParams) -> Vec<Branch> {
        let wire_ns = |bytes: u64| write(bytes, link).link_time_ns(link, Overheads::Full);
        let mut occupied = Branch::new();
        occupied.constant = wire_ns(size);
        self.slot_hinges(
            P::DmaWriteTlpNs,
            size,
            u64::from(link.mps),
            wire_ns,
            &mut occupied,
        );
        let mut accepted = Branch::new();
        self.term(P::PostedWriteMbps, size as f64, &mut accepted);
        vec![occupied, accepted]
    }

    /// The data phase of a device read: waves of round trips, or the stream of requests (each
    /// held for its wire time or the read slot) or of completions, after the first round trip.
    fn read_data(&self, size: u64, link: &LinkParams) -> Vec<Branch> {
        if size == 0 {
            return vec![Branch::new()];
        }
        let wire_ns = |bytes: u64| read(bytes, link).link_time_ns(link, Overheads::Full);
        let mrrs = u64::from(link.mrrs);
        let first = size.min(mrrs);
        let round_trip = |b: &mut Branch| {
            self.term(P::ReadLatencyNs, 1.0, b);
            self.term(P::ReadLatencyPerByteNs, first as f64, b);
        };
        let mut waves = Branch::new();
        waves.per = PerWhole::Waves {
            requests: size.div_ceil(mrrs) as f64,
        };
        waves.constant = wire_ns(first);
        round_trip(&mut waves);
        let mut occupied = Branch::new();
        occupied.constant = wire_ns(size);
        self.slot_hinges(P::DmaReadTlpNs, size, mrrs, wire_ns, &mut occupied);
        round_trip(&mut occupied);
        let mut completed = Branch::new();
        self.term(P::CompletionMbps, size as f64, &mut completed);
        round_trip(&mut completed);
        vec![waves, occupied, completed]
    }

    /// The time `workload` takes and the numerator that makes it a rate (MB/s = numerator /
    /// time), and for DMA the time of its read latency (what `read_latency_ns` predicts).
    pub(crate) fn rate_time(&self, workload: &Workload, link: &LinkParams) -> (f64, RowTime) {
        match *workload {
            Workload::Dma { direction, size } => {
                let mut offset = Branch::new();
                self.term(P::DmaSetupNs, 1.0, &mut offset);
                self.term(
                    P::DmaDescriptorBytes,
                    1000.0 / achievable_mbps(link),
                    &mut offset,
                );
                let branches = match direction {
                    DmaDirection::Write => self.write_data(size, link),
                    DmaDirection::Read => self.read_data(size, link),
                };
                (size as f64 * 1000.0, RowTime { offset, branches })
            }
            Workload::Mmio {
                op: MmioOp::Store,
                width,
                ..
            } => {
                let bytes = u64::from(width);
                let mut wire = Branch::new();
                wire.constant = write(bytes, link).link_time_ns(link, Overheads::Full);
                let mut issue = Branch::new();
                self.term(P::MmioStoreIssueNs, 1.0, &mut issue);
                (
                    bytes as f64 * 1000.0,
                    RowTime {
                        offset: Branch::new(),
                        branches: vec![wire, issue],
                    },
                )
            }
            Workload::Mmio {
                op: MmioOp::Load,
                width,
                threads,
            } => {
                let mut round_trip = Branch::new();
                round_trip.per = PerWhole::LoadsInFlight {
                    threads: f64::from(threads.max(1)),
                };
                round_trip.constant =
                    read(u64::from(width), link).link_time_ns(link, Overheads::Full);
                self.term(P::MmioLoadLatencyNs, 1.0, &mut round_trip);
                (
                    f64::from(width) * 1000.0,
                    RowTime {
                        offset: Branch::new(),
                        branches: vec![round_trip],
                    },
                )
            }
            Workload::Queued {
                device,
                bs,
                iodepth,
                jobs,
            } => {
                // Time per I/O of `bs` bytes: the slowest of the drive's bandwidth and IOPS, the
                // CPU's cost shared by the jobs, and the link with the root complex.
                let (cpu, drive_mbps, drive_iops) = match device {
                    DmaDirection::Write => (P::CpuReadIoNs, P::DriveReadMbps, P::DriveReadIops),
                    DmaDirection::Read => (P::CpuWriteIoNs, P::DriveWriteMbps, P::DriveWriteIops),
                };
                let mut bandwidth = Branch::new();
                self.term(drive_mbps, bs as f64, &mut bandwidth);
                let mut iops = Branch::new();
                self.term(drive_iops, 1.0, &mut iops);
                let mut cpu_time = Branch::new();
                self.term(cpu, 1.0 / f64::from(jobs), &mut cpu_time);
                let link_branches = match device {
                    DmaDirection::Write => self.write_data(bs, link),
                    DmaDirection::Read => {
                        // All queued commands share the read tags: one stream of them, per I/O.
                        let queued = u64::from(iodepth.max(1)) * u64::from(jobs.max(1));
                        let mut stream = self.read_data(bs * queued, link);
                        for b in &mut stream {
                            b.factor = 1.0 / queued as f64;
                        }
                        stream
                    }
                };
                let mut branches = vec![bandwidth, iops, cpu_time];
                branches.extend(link_branches);
                (
                    bs as f64 * 1000.0,
                    RowTime {
                        offset: Branch::new(),
                        branches,
                    },
                )
            }
        }
    }

    /// The time of a DMA read of the workload's size from issue to last completion (no
    /// setup): what `PlatformModel::read_latency_ns` predicts for a DMA row of either
    /// direction. `None` for other workloads.
    pub(crate) fn latency_time(&self, workload: &Workload, link: &LinkParams) -> Option<RowTime> {
        match *workload {
            Workload::Dma { size, .. } => Some(RowTime {
                offset: Branch::new(),
                branches: self.read_data(size, link),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fit::predict;
    use crate::pcie::Generation;
    use proptest::prelude::*;

    /// A model with every parameter drawn within a physical range (rates sometimes unbounded).
    fn model_from(draw: &[f64; 12], whole: (u32, u32, u32)) -> PlatformModel {
        let mut m = PlatformModel::default();
        let rate = |x: f64| {
            if x < 0.2 {
                f64::INFINITY
            } else {
                200.0 + 8000.0 * x
            }
        };
        m.set(P::DmaSetupNs, 5000.0 * draw[0]);
        m.set(P::PostedWriteMbps, rate(draw[1]));
        m.set(P::CompletionMbps, rate(draw[2]));
        m.set(P::ReadLatencyNs, 3000.0 * draw[3]);
        m.set(P::ReadLatencyPerByteNs, 2.0 * draw[4]);
        m.set(P::DmaDescriptorBytes, 4000.0 * draw[5]);
        m.set(P::DmaWriteTlpNs, 300.0 * draw[6]);
        m.set(P::DmaReadTlpNs, 600.0 * draw[7]);
        m.set(P::CpuReadIoNs, 20000.0 * draw[8]);
        m.set(P::DriveWriteMbps, rate(draw[9]).min(9000.0));
        m.set(P::MmioStoreIssueNs, 200.0 * draw[10]);
        m.set(P::MmioLoadLatencyNs, 2000.0 * draw[11]);
        m.set(P::DmaMaxReadRequests, f64::from(whole.0));
        m.set(P::MmioLoadsPerThread, f64::from(whole.1));
        m.set(P::MmioLoadsOutstanding, f64::from(whole.2));
        m
    }

    fn workloads(size: u64) -> Vec<Workload> {
        let bs = size.clamp(512, 1 << 20);
        vec![
            Workload::Dma {
                direction: DmaDirection::Write,
                size,
            },
            Workload::Dma {
                direction: DmaDirection::Read,
                size,
            },
            Workload::Mmio {
                op: MmioOp::Store,
                width: 8,
                threads: 2,
            },
            Workload::Mmio {
                op: MmioOp::Load,
                width: 4,
                threads: 3,
            },
            Workload::Queued {
                device: DmaDirection::Write,
                bs,
                iodepth: 4,
                jobs: 2,
            },
            Workload::Queued {
                device: DmaDirection::Read,
                bs,
                iodepth: 8,
                jobs: 1,
            },
        ]
    }

    proptest! {
        /// Monotone as the fit's bound needs: raising any coordinate never shortens a row's
        /// time, raising any whole number never lengthens it.
        #[test]
        fn times_rise_with_every_coordinate_and_fall_with_every_whole_number(
            draw in proptest::array::uniform12(0.0f64..1.0),
            whole in (1u32..33, 1u32..9, 1u32..9),
            size in prop_oneof![1u64..5000, Just(257), Just(513), 4000u64..5_000_000],
            coordinate in 0usize..16,
            factor in 1.0f64..4.0,
            which_whole in 0usize..3,
        ) {
            let model = model_from(&draw, whole);
            let link = LinkParams::new(Generation::Gen3, 8);
            let every = [
                P::PostedWriteMbps, P::CompletionMbps, P::ReadLatencyNs, P::ReadLatencyPerByteNs,
                P::DmaSetupNs, P::DmaDescriptorBytes, P::DmaWriteTlpNs, P::DmaReadTlpNs,
                P::CpuReadIoNs, P::CpuWriteIoNs, P::DriveReadMbps, P::DriveWriteMbps,
                P::DriveReadIops, P::DriveWriteIops, P::MmioStoreIssueNs, P::MmioLoadLatencyNs,
            ];
            let builder = Builder { fixed: &model, free: &every };
            let t: Vec<f64> = every.iter().map(|&p| to_coordinate(p, model.get(p))).collect();
            let mut raised = t.clone();
            raised[coordinate] = raised[coordinate] * factor + 1.0;
            let w = WHOLE.map(|p| model.get(p));
            let mut more = w;
            more[which_whole] += 1.0;
            for workload in workloads(size) {
                let (_, time) = builder.rate_time(&workload, &link);
                let times = std::iter::once(time).chain(builder.latency_time(&workload, &link));
                for time in times {
                    let base = time.time(&t, &w);
                    prop_assert!(time.time(&raised, &w) >= base, "{workload:?} coordinate {coordinate}");
                    prop_assert!(time.time(&t, &more) <= base, "{workload:?} whole {which_whole}");
                }
            }
        }
    }

    proptest! {
        /// The closed form is the platform model: for any parameters, sizes (just past MPS and
        /// MRRS included) and links, with every parameter free or every one fixed, its rate and
        /// latency equal `PlatformModel`'s prediction.
        #[test]
        fn closed_form_rates_and_latencies_equal_the_platform_models(
            draw in proptest::array::uniform12(0.0f64..1.0),
            whole in (1u32..33, 1u32..9, 1u32..9),
            size in prop_oneof![1u64..5000, Just(257), Just(513), Just(1025), 4000u64..5_000_000],
            wide in any::<bool>(),
        ) {
            let model = model_from(&draw, whole);
            let link = if wide {
                LinkParams::new(Generation::Gen3, 8)
            } else {
                LinkParams { mps: 128, mrrs: 256, ..LinkParams::new(Generation::Gen2, 1) }
            };
            // Every parameter a row's time depends on, except the whole numbers.
            let every = [
                P::PostedWriteMbps, P::CompletionMbps, P::ReadLatencyNs, P::ReadLatencyPerByteNs,
                P::DmaSetupNs, P::DmaDescriptorBytes, P::DmaWriteTlpNs, P::DmaReadTlpNs,
                P::CpuReadIoNs, P::CpuWriteIoNs, P::DriveReadMbps, P::DriveWriteMbps,
                P::DriveReadIops, P::DriveWriteIops, P::MmioStoreIssueNs, P::MmioLoadLatencyNs,
            ];
            let whole_values = WHOLE.map(|p| model.get(p));
            for free in [every.to_vec(), Vec::new()] {
                let builder = Builder { fixed: &model, free: &free };
                let t: Vec<f64> = free.iter().map(|&p| to_coordinate(p, model.get(p))).collect();
                for workload in workloads(size) {
                    let (want_rate, want_latency) = predict(&model, &workload, &link);
                    let (numerator, time) = builder.rate_time(&workload, &link);
                    let rate = numerator / time.time(&t, &whole_values);
                    prop_assert!((rate / want_rate - 1.0).abs() < 1e-9, "{workload:?}: {rate} vs {want_rate}");
                    if let Some(latency) = builder.latency_time(&workload, &link) {
                        let got = latency.time(&t, &whole_values);
                        prop_assert!((got / want_latency - 1.0).abs() < 1e-9, "{workload:?}: {got} vs {want_latency}");
                    }
                }
            }
        }
    }
}
