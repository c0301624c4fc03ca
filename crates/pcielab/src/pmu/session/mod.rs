//! The counting session with perf semantics. A [`CounterBackend`] opens event groups, runs the
//! workload and returns readings (value, time enabled, time running) per event and per
//! interval; a real `perf_event_open` host backend implements it by asking the kernel. For
//! machines without a kernel (the simulator) [`emulate`] plays the kernel's part over a
//! [`TrueCounts`] ground truth: round-robin rotation of groups that cannot count together every
//! mux interval, hardware registers that wrap, and enabled/running accounting. Estimates are
//! `value × enabled / running`, and `None` (perf's `<not counted>`) when running is zero.
//! [`emulate`] computes each event's readings per stretch between reads, skipping stretches over
//! which the ground truth does not move, and summing the mux periods an event is on a counter in
//! closed form where the truth can sum itself over arithmetic progressions of times (the
//! simulator's payload and TLP counters): its cost then grows with print intervals and phases of
//! traffic, not with duration / mux interval. [`emulate_stepwise`] steps through every mux tick
//! as the kernel does and is the reference it is tested against (built for tests and benches
//! only, the `test-oracles` feature, with the register model it steps).

#[cfg(any(test, feature = "test-oracles"))]
use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::pmu::counter::mask;
#[cfg(any(test, feature = "test-oracles"))]
use crate::pmu::counter::HwCounter;
use crate::pmu::kernel::KernelVersion;
use crate::pmu::{fits, Driver, PmuDevice, ResolvedEvent};

/// perf's default `perf_event_mux_interval_ms`.
pub(crate) const DEFAULT_MUX_INTERVAL_NS: u64 = 4_000_000;

/// How to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountOptions {
    /// Rotation period of groups that time-share counters.
    pub mux_interval_ns: u64,
    /// Print interval (`-I`); `None` reads once at the end.
    pub interval_ns: Option<u64>,
    /// How often the counting program reads the counters besides rotations and prints, so that
    /// narrow counters' wraps are carried (pcielab's own reads on a host); `None`: no extra reads.
    pub read_period_ns: Option<u64>,
}

impl Default for CountOptions {
    fn default() -> Self {
        CountOptions {
            mux_interval_ns: DEFAULT_MUX_INTERVAL_NS,
            interval_ns: None,
            read_period_ns: None,
        }
    }
}

/// One event's value with perf's `TOTAL_TIME_ENABLED` / `TOTAL_TIME_RUNNING`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reading {
    /// The counter's value.
    pub value: u64,
    /// Nanoseconds the event was enabled.
    pub enabled_ns: u64,
    /// Nanoseconds it was on a counter; less than enabled when multiplexed, and the value is scaled by enabled/running.
    pub running_ns: u64,
}

impl Reading {
    /// perf's estimate `value × enabled / running`; `None` when the event never ran.
    pub(crate) fn estimate(&self) -> Option<f64> {
        if self.running_ns == 0 {
            return None;
        }
        Some(self.value as f64 * self.enabled_ns as f64 / self.running_ns as f64)
    }

    /// Percent of the enabled time the event was on a counter (perf's `(49.99%)`).
    pub(crate) fn running_percent(&self) -> f64 {
        if self.enabled_ns == 0 {
            return 0.0;
        }
        100.0 * self.running_ns as f64 / self.enabled_ns as f64
    }

    /// The change from `earlier` to `self`, as `perf stat -I` prints per interval.
    pub(crate) fn since(&self, earlier: &Reading) -> Reading {
        Reading {
            value: self.value - earlier.value,
            enabled_ns: self.enabled_ns - earlier.enabled_ns,
            running_ns: self.running_ns - earlier.running_ns,
        }
    }
}

/// What a counting run returns: cumulative readings, in the order the events were given.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Counts {
    /// One reading per event over the whole count.
    pub totals: Vec<Reading>,
    /// Cumulative readings at the end of each `-I` interval, with the interval's end time.
    pub(crate) intervals: Vec<(u64, Vec<Reading>)>,
    /// From enabling the counters (workload start) to disabling them (workload exit).
    pub(crate) elapsed_ns: u64,
}

/// Where counts come from. Each group counts all-or-nothing; groups may not span PMUs.
pub trait CounterBackend {
    /// The PMU devices the backend counts on.
    fn devices(&self) -> &[PmuDevice];
    /// Opens `groups`, runs the backend's workload with them enabled, and reads them.
    fn count(&mut self, groups: &[Vec<ResolvedEvent>], options: &CountOptions) -> Result<Counts>;
}

/// A simulated machine's ground truth: the hardware count `event` would have accumulated from
/// time 0 to `t_ns` had it been on a counter the whole time (non-decreasing in `t_ns`).
pub trait TrueCounts {
    /// The exact count of `event` at time `t_ns` (what an ideal counter would read).
    fn true_count(&self, event: &ResolvedEvent, t_ns: u64) -> u64;

    /// `Σ true_count(event, first_ns + k × step_ns)` for `k` in `0..n`, where the truth can give
    /// it without evaluating every term (a closed form over steady phases); `None` where it
    /// cannot, and [`emulate`] then evaluates the terms. [`TrueCounts::sums_progressions`]
    /// says in advance which events give `Some`.
    fn progression_sum(
        &self,
        _event: &ResolvedEvent,
        _first_ns: u64,
        _step_ns: u64,
        _n: u64,
    ) -> Option<u128> {
        None
    }

    /// Whether [`TrueCounts::progression_sum`] answers for `event` (short of overflow).
    fn sums_progressions(&self, _event: &ResolvedEvent) -> bool {
        false
    }
}

/// Rejects groups perf would refuse (empty groups, groups spanning PMUs) and, under an upstream
/// `dwc_rootport_*` name, groups the newest driver refuses at open because they can never be
/// scheduled (ENOSPC). Under the guide's `pcie_bdf_*` names such a group is counted as perf
/// schedules it: never, `<not counted>`.
pub(crate) fn check_groups(groups: &[Vec<ResolvedEvent>]) -> Result<()> {
    for group in groups {
        let Some(leader) = group.first() else {
            return Err(Error::bad_input("an event group ('{}') is empty"));
        };
        if let Some(other) = group.iter().find(|e| e.device != leader.device) {
            return Err(Error::bad_input(format!(
                "events of one group must be on one PMU: '{}' and '{}' are not",
                leader.display, other.display
            )));
        }
        for (i, event) in group.iter().enumerate() {
            let before: Vec<&ResolvedEvent> = group[..i].iter().collect();
            if event.driver == Driver::Upstream && !fits(&before, event) {
                return Err(Error::bad_input(format!(
                    "'{}': kernel {}'s dwc_pcie_pmu refuses this group at open (ENOSPC): {}",
                    event.display,
                    KernelVersion::NEWEST,
                    event.def.group.sharing_rule()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(any(test, feature = "test-oracles"))]
struct EventState<'a> {
    event: &'a ResolvedEvent,
    group: usize,
    hw: HwCounter,
    /// Ground-truth value at the counter's last update.
    truth_at_update: u64,
    enabled_ns: u64,
    running_ns: u64,
}

#[cfg(any(test, feature = "test-oracles"))]
impl EventState<'_> {
    fn fold(&mut self, truth: &impl TrueCounts, t: u64) {
        let now = truth.true_count(self.event, t);
        self.hw.add(now - self.truth_at_update);
        self.truth_at_update = now;
        self.hw.read();
    }

    fn reading(&self) -> Reading {
        Reading {
            value: self.hw.count * self.event.driver_scale(),
            enabled_ns: self.enabled_ns,
            running_ns: self.running_ns,
        }
    }
}

/// One PMU's perf context: its flexible groups in rotation order and which are on counters.
#[cfg(any(test, feature = "test-oracles"))]
struct Context {
    order: Vec<usize>,
    scheduled: BTreeSet<usize>,
    rotate_necessary: bool,
}

/// The most counter rotations one count steps through: time-shared events whose truth has no
/// closed form ([`TrueCounts::sums_progressions`]) are rotated (and read) this many times at
/// most, an hour at the default 4 ms. Events summed in closed form cost nothing per rotation.
pub(crate) const MAX_ROTATIONS: u64 = 1_000_000;

/// The most `-I` intervals one count keeps (each holds a reading of every event).
pub(crate) const MAX_INTERVALS: u64 = 100_000;

/// Rejects what no emulation can count: bad groups, zero intervals, too many `-I` intervals.
fn check_request(
    groups: &[Vec<ResolvedEvent>],
    options: &CountOptions,
    duration_ns: u64,
) -> Result<()> {
    check_groups(groups)?;
    if options.mux_interval_ns == 0
        || options.interval_ns == Some(0)
        || options.read_period_ns == Some(0)
    {
        return Err(Error::bad_input(
            "the mux, print and read intervals must be at least 1 ns",
        ));
    }
    if let Some(interval) = options.interval_ns {
        if duration_ns / interval > MAX_INTERVALS {
            return Err(Error::bad_input(format!(
                "-I {} ms over a {} s workload would print {} intervals; at most {MAX_INTERVALS}: raise -I",
                interval / 1_000_000,
                duration_ns / 1_000_000_000,
                duration_ns / interval
            )));
        }
    }
    Ok(())
}

/// Refuses more than [`MAX_ROTATIONS`] rotations when some context rotates at all.
fn check_rotations(rotating: bool, options: &CountOptions, duration_ns: u64) -> Result<()> {
    let rotations = duration_ns / options.mux_interval_ns;
    if rotating && rotations > MAX_ROTATIONS {
        return Err(Error::bad_input(format!(
            "the events time-share counters, rotated every {} ms: over a {} s workload that is {rotations} rotations; at most {MAX_ROTATIONS}: raise --mux-interval-ms to {} or more, or count fewer events at once",
            options.mux_interval_ns as f64 / 1e6,
            duration_ns / 1_000_000_000,
            duration_ns.div_ceil(MAX_ROTATIONS).div_ceil(1_000_000)
        )));
    }
    Ok(())
}

/// One PMU context's schedule as rotation plays it out. Each rotation moves the first group of
/// the order to its end, so after `k` rotations the order is the initial one rotated left by
/// `k mod n`, and which groups are on counters repeats every `n` rotations, until (if ever) an
/// order is reached in which every group fits: rotation then stops for good.
struct Rotation {
    /// The context's groups, in their initial order.
    order: Vec<usize>,
    /// Where each group of the whole request sits in `order` (`usize::MAX`: another context).
    position: Vec<usize>,
    /// How many groups, from the front of the order rotated `k` times, are on counters.
    fitted: Vec<usize>,
    /// The number of rotations after which nothing needs rotating, if that ever happens.
    settles_after: Option<u64>,
}

impl Rotation {
    fn new(groups: &[Vec<ResolvedEvent>], device: usize) -> Rotation {
        let order: Vec<usize> = (0..groups.len())
            .filter(|&g| groups[g][0].device == device)
            .collect();
        let mut position = vec![usize::MAX; groups.len()];
        for (p, &g) in order.iter().enumerate() {
            position[g] = p;
        }
        let n = order.len();
        let mut fitted = Vec::with_capacity(n);
        let mut settles_after = None;
        for k in 0..n {
            let rotated = order[k..].iter().chain(&order[..k]).copied();
            let (count, rotate_necessary) = fitting_prefix(rotated, groups);
            fitted.push(count);
            if !rotate_necessary {
                settles_after = Some(k as u64);
                break;
            }
        }
        Rotation {
            order,
            position,
            fitted,
            settles_after,
        }
    }

    /// Rotations done by the start of mux period `j` (the time from `j` to `j + 1` intervals).
    fn rotations(&self, j: u64) -> u64 {
        self.settles_after.map_or(j, |s| j.min(s))
    }

    /// Whether `group` (of this context) is ever on a counter.
    fn is_ever_on(&self, group: usize) -> bool {
        (0..self.fitted.len() as u64).any(|k| self.is_on(group, k))
    }

    /// Whether `group` (of this context) is on a counter during mux period `j`.
    fn is_on(&self, group: usize, j: u64) -> bool {
        let n = self.order.len();
        let k = (self.rotations(j) % n as u64) as usize;
        // The group's place in the order rotated `k` times.
        let place = if self.position[group] >= k {
            self.position[group] - k
        } else {
            self.position[group] + n - k
        };
        place < self.fitted[k]
    }

    /// Whether `group` is on a counter through every mux period from `first` to `last`.
    fn is_on_throughout(&self, group: usize, first: u64, last: u64) -> bool {
        // The schedule repeats every `n` periods (and is constant once settled).
        let distinct = self.order.len() as u64 + 1;
        (first..=last.min(first + distinct)).all(|j| self.is_on(group, j))
    }

    /// Nanoseconds `group` spent on a counter from 0 to `t`.
    fn running_ns(&self, group: usize, t: u64, mux: u64) -> u64 {
        let on_periods = |periods: u64| -> u64 {
            let count = |range: std::ops::Range<u64>| {
                range.filter(|&j| self.is_on(group, j)).count() as u64
            };
            match self.settles_after {
                Some(s) if periods > s => count(0..s) + (periods - s) * count(s..s + 1),
                Some(_) => count(0..periods),
                None => {
                    let n = self.order.len() as u64;
                    periods / n * count(0..n) + count(0..periods % n)
                }
            }
        };
        let whole = t / mux;
        let partial = if self.is_on(group, whole) { t % mux } else { 0 };
        on_periods(whole) * mux + partial
    }
}

/// The stretches between reads of one event inside one print window `[start, end]`: cut at
/// every tick where its context rotates. Stretch `i` lies in mux period `first_period + i`.
struct Stretches<'a, T: TrueCounts> {
    truth: &'a T,
    event: &'a ResolvedEvent,
    group: usize,
    rotation: &'a Rotation,
    mux: u64,
    start: u64,
    end: u64,
    first_period: u64,
    count: u64,
    /// What the hardware register can hold between two reads.
    register_mask: u64,
}

/// Below this many stretches, [`Stretches::sum`] walks them one by one.
const WALK_STRETCHES: u64 = 32;

impl<T: TrueCounts> Stretches<'_, T> {
    /// Time of the boundary before stretch `i` (`i == count`: the window's end).
    fn boundary(&self, i: u64) -> u64 {
        match i {
            0 => self.start,
            i if i == self.count => self.end,
            i => (self.first_period + i) * self.mux,
        }
    }

    fn truth_at(&self, i: u64) -> u64 {
        self.truth.true_count(self.event, self.boundary(i))
    }

    fn is_on(&self, i: u64) -> bool {
        self.rotation.is_on(self.group, self.first_period + i)
    }

    /// What the driver accumulates over stretches `from..to` whose outer boundaries have ground
    /// truth `truth_from` and `truth_to`: each stretch on a counter adds its growth modulo the
    /// register width. The truth never decreases, so a range over which it did not move adds
    /// nothing, and a range on a counter throughout in which the register cannot wrap adds the
    /// whole growth; other ranges are halved.
    fn sum(&self, from: u64, to: u64, truth_from: u64, truth_to: u64) -> u64 {
        let growth = truth_to - truth_from;
        if growth == 0 {
            return 0;
        }
        let last_period = self.first_period + to - 1;
        if growth <= self.register_mask
            && self
                .rotation
                .is_on_throughout(self.group, self.first_period + from, last_period)
        {
            return growth;
        }
        if to - from <= WALK_STRETCHES {
            return self.walk(from, to, truth_from, truth_to);
        }
        if growth <= self.register_mask {
            if let Some(total) = self.closed_sum(from, to, truth_from, truth_to) {
                return total;
            }
        }
        let mid = from + (to - from) / 2;
        let truth_mid = self.truth_at(mid);
        self.sum(from, mid, truth_from, truth_mid) + self.sum(mid, to, truth_mid, truth_to)
    }

    /// [`Stretches::sum`] over a range in which the register cannot wrap, in closed form where
    /// the truth sums progressions: the partial periods at the window's ends are read directly,
    /// the whole mux periods between them by [`Stretches::on_periods`]. `None` where the truth
    /// cannot.
    fn closed_sum(&self, from: u64, to: u64, truth_from: u64, truth_to: u64) -> Option<u64> {
        if !self.truth.sums_progressions(self.event) {
            return None;
        }
        let last = self.count - 1;
        let mut total = 0u128;
        if from == 0 && self.is_on(0) {
            let first_end = if to == 1 { truth_to } else { self.truth_at(1) };
            total += u128::from(first_end - truth_from);
        }
        let (whole_from, whole_to) = (from.max(1), to.min(last));
        if whole_from < whole_to {
            total +=
                self.on_periods(self.first_period + whole_from, self.first_period + whole_to)?;
        }
        if to == self.count && last >= from.max(1) && self.is_on(last) {
            let last_start = if from == last {
                truth_from
            } else {
                self.truth_at(last)
            };
            total += u128::from(truth_to - last_start);
        }
        u64::try_from(total).ok()
    }

    /// `Σ truth(end) − truth(start)` over the whole mux periods `j_lo..j_hi` in which the group
    /// is on a counter: while the context rotates, the periods of each phase of the rotation's
    /// cycle form an arithmetic progression of times; once it has settled, the group is on
    /// throughout or never.
    fn on_periods(&self, j_lo: u64, j_hi: u64) -> Option<u128> {
        let rotation = self.rotation;
        let cycle = rotation.order.len() as u64;
        let settled = rotation.settles_after.unwrap_or(u64::MAX);
        let cycling_to = j_hi.min(settled).max(j_lo);
        let step = cycle.checked_mul(self.mux)?;
        let mut total = 0u128;
        for j in j_lo..j_lo + cycle.min(cycling_to - j_lo) {
            if !rotation.is_on(self.group, j) {
                continue;
            }
            let periods = (cycling_to - j).div_ceil(cycle);
            let sum_at = |first: u64| self.truth.progression_sum(self.event, first, step, periods);
            let ends = sum_at((j + 1).checked_mul(self.mux)?)?;
            let starts = sum_at(j * self.mux)?;
            total = total.checked_add(ends.checked_sub(starts)?)?;
        }
        let settled_from = j_lo.max(settled);
        if settled_from < j_hi && rotation.is_on(self.group, settled_from) {
            let at = |j: u64| self.truth.true_count(self.event, j * self.mux);
            total = total.checked_add(u128::from(at(j_hi) - at(settled_from)))?;
        }
        Some(total)
    }

    /// [`Stretches::sum`] one stretch at a time, asking the truth only at boundaries of
    /// stretches on a counter.
    fn walk(&self, from: u64, to: u64, truth_from: u64, truth_to: u64) -> u64 {
        let mut total = 0;
        // The truth at boundary `i`, if already known.
        let mut known = (from, truth_from);
        let mut truth_at = |i: u64| -> u64 {
            let value = match i {
                _ if i == known.0 => known.1,
                _ if i == to => truth_to,
                _ => self.truth_at(i),
            };
            known = (i, value);
            value
        };
        for i in from..to {
            if self.is_on(i) {
                let a = truth_at(i);
                let b = truth_at(i + 1);
                total += (b - a) & self.register_mask;
            }
        }
        total
    }
}

/// Plays the kernel's perf core over `truth` for a workload lasting `duration_ns`, with the
/// readings [`emulate_stepwise`] gives, but without stepping through mux ticks: enabled and
/// running times come from the rotation's period, and each event's count is summed over its
/// stretches between reads, skipping every range of them over which its ground truth did not
/// move, and summing in closed form where [`TrueCounts::progression_sum`] answers. The cost
/// grows with print intervals, and with mux ticks only inside stretches where a truth without a
/// closed form moves while groups rotate; idle time and unrotated counting cost nothing per tick.
pub fn emulate(
    truth: &impl TrueCounts,
    devices: &[PmuDevice],
    groups: &[Vec<ResolvedEvent>],
    options: &CountOptions,
    duration_ns: u64,
) -> Result<Counts> {
    check_request(groups, options, duration_ns)?;
    let mux = options.mux_interval_ns;
    let rotations: Vec<Rotation> = (0..devices.len())
        .map(|d| Rotation::new(groups, d))
        .collect();
    let events: Vec<(usize, &ResolvedEvent)> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, events)| events.iter().map(move |e| (g, e)))
        .collect();
    // Rotation costs a step per mux period only for events the truth cannot sum in closed form.
    let rotating_by_steps = events.iter().any(|&(_, event)| {
        let r = &rotations[event.device];
        r.settles_after != Some(0) && !truth.sums_progressions(event)
    });
    check_rotations(rotating_by_steps, options, duration_ns)?;
    // Per event: the perf count so far and the ground truth at the last window's end.
    let mut counted = vec![0u64; events.len()];
    let mut truth_then: Vec<Option<u64>> = vec![None; events.len()];
    // Per event: where its current window began (its last read).
    let mut since = vec![0u64; events.len()];
    let mut counts = Counts {
        elapsed_ns: duration_ns,
        ..Counts::default()
    };
    // Windows run from one read of every scheduled event (a print, an extra read) to the next.
    let mut start = 0;
    loop {
        let next_print = options
            .interval_ns
            .map_or(u64::MAX, |i| (start / i + 1) * i);
        let next_read = options
            .read_period_ns
            .map_or(u64::MAX, |r| (start / r + 1) * r);
        let end = next_print.min(next_read).min(duration_ns);
        let carrying_read = end < duration_ns && end != next_print;
        for (k, &(group, event)) in events.iter().enumerate() {
            let rotation = &rotations[event.device];
            let register_mask = mask(event.def.group.counter_bits(devices[event.device].family));
            // A read only to carry wraps leaves a 64-bit register alone (the kernel's reads
            // would not change its count either): its window runs on to the next one.
            if !rotation.is_ever_on(group) || (carrying_read && register_mask == u64::MAX) {
                continue;
            }
            let start = since[k];
            let first_period = start / mux;
            let last_tick = end.saturating_sub(1) / mux;
            // Ticks inside the window at which the context rotates.
            let ticks = match rotation.settles_after {
                None => last_tick.saturating_sub(first_period),
                Some(s) => s.min(last_tick).saturating_sub(first_period),
            };
            let stretches = Stretches {
                truth,
                event,
                group,
                rotation,
                mux,
                start,
                end,
                first_period,
                count: ticks + 1,
                register_mask,
            };
            let from = *truth_then[k].get_or_insert_with(|| stretches.truth_at(0));
            let to = stretches.truth_at(stretches.count);
            counted[k] += stretches.sum(0, stretches.count, from, to);
            truth_then[k] = Some(to);
            since[k] = end;
        }
        if carrying_read {
            start = end;
            continue;
        }
        let readings: Vec<Reading> = events
            .iter()
            .enumerate()
            .map(|(k, &(group, event))| Reading {
                value: counted[k] * event.driver_scale(),
                enabled_ns: end,
                running_ns: rotations[event.device].running_ns(group, end, mux),
            })
            .collect();
        if end < duration_ns {
            counts.intervals.push((end, readings));
        } else {
            counts.totals = readings;
            break;
        }
        start = end;
    }
    if options.interval_ns.is_some() {
        counts.intervals.push((duration_ns, counts.totals.clone()));
    }
    Ok(counts)
}

/// Plays the kernel's perf core over `truth` one mux tick at a time, as the kernel does: the
/// reference [`emulate`] is tested against (its cost grows with `duration_ns / mux interval`).
/// A test oracle, not a way to count: built for the crate's tests, integration tests and
/// benches only (the `test-oracles` feature, Cargo.toml).
#[cfg(any(test, feature = "test-oracles"))]
pub fn emulate_stepwise(
    truth: &impl TrueCounts,
    devices: &[PmuDevice],
    groups: &[Vec<ResolvedEvent>],
    options: &CountOptions,
    duration_ns: u64,
) -> Result<Counts> {
    check_request(groups, options, duration_ns)?;
    let mut states: Vec<EventState> = groups
        .iter()
        .enumerate()
        .flat_map(|(g, events)| events.iter().map(move |e| (g, e)))
        .map(|(group, event)| EventState {
            event,
            group,
            hw: HwCounter::new(event.def.group.counter_bits(devices[event.device].family)),
            truth_at_update: 0,
            enabled_ns: 0,
            running_ns: 0,
        })
        .collect();
    let mut contexts: Vec<Context> = (0..devices.len())
        .map(|d| Context {
            order: (0..groups.len())
                .filter(|&g| groups[g][0].device == d)
                .collect(),
            scheduled: BTreeSet::new(),
            rotate_necessary: false,
        })
        .collect();
    for ctx in &mut contexts {
        schedule(ctx, groups, &mut states, truth, 0);
    }
    let mut counts = Counts {
        elapsed_ns: duration_ns,
        ..Counts::default()
    };
    let mut now = 0u64;
    // Only a context with more groups than counters rotates; when none does, a tick changes
    // nothing, so the run goes from print to print (a week-long `sleep` is a few steps, not
    // 150 million ticks).
    let rotating = contexts.iter().any(|c| c.rotate_necessary);
    check_rotations(rotating, options, duration_ns)?;
    while now < duration_ns {
        let next_tick = if rotating {
            (now / options.mux_interval_ns + 1) * options.mux_interval_ns
        } else {
            u64::MAX
        };
        let next_print = options.interval_ns.map_or(u64::MAX, |i| (now / i + 1) * i);
        let next_read = options
            .read_period_ns
            .map_or(u64::MAX, |r| (now / r + 1) * r);
        let next = next_tick.min(next_print).min(next_read).min(duration_ns);
        for s in &mut states {
            s.enabled_ns += next - now;
            if contexts[s.event.device].scheduled.contains(&s.group) {
                s.running_ns += next - now;
            }
        }
        now = next;
        if now == next_print && now < duration_ns {
            fold_running(&contexts, &mut states, truth, now);
            counts
                .intervals
                .push((now, states.iter().map(EventState::reading).collect()));
        }
        if now == next_read && now != next_print && now < duration_ns {
            // A read to carry wraps: only registers narrower than 64 bits can wrap.
            for s in states.iter_mut().filter(|s| s.hw.bits < 64) {
                if contexts[s.event.device].scheduled.contains(&s.group) {
                    s.fold(truth, now);
                }
            }
        }
        if now == next_tick && now < duration_ns {
            for ctx in contexts.iter_mut().filter(|c| c.rotate_necessary) {
                rotate(ctx, groups, &mut states, truth, now);
            }
        }
    }
    fold_running(&contexts, &mut states, truth, duration_ns);
    counts.totals = states.iter().map(EventState::reading).collect();
    if options.interval_ns.is_some() {
        counts.intervals.push((duration_ns, counts.totals.clone()));
    }
    Ok(counts)
}

#[cfg(any(test, feature = "test-oracles"))]
fn fold_running(contexts: &[Context], states: &mut [EventState], truth: &impl TrueCounts, t: u64) {
    for s in states.iter_mut() {
        if contexts[s.event.device].scheduled.contains(&s.group) {
            s.fold(truth, t);
        }
    }
}

/// How many groups, taken in `order`, go on counters before the first that does not fit (the
/// kernel stops adding hardware events at the first failure), and whether one did not fit (the
/// context then needs rotation).
fn fitting_prefix(
    order: impl Iterator<Item = usize>,
    groups: &[Vec<ResolvedEvent>],
) -> (usize, bool) {
    let mut active: Vec<&ResolvedEvent> = Vec::new();
    let mut fitted = 0;
    for g in order {
        for e in &groups[g] {
            if !fits(&active, e) {
                return (fitted, true);
            }
            active.push(e);
        }
        fitted += 1;
    }
    (fitted, false)
}

/// Schedules groups in rotation order until the first that does not fit and marks the context
/// for rotation if one did not.
#[cfg(any(test, feature = "test-oracles"))]
fn schedule(
    ctx: &mut Context,
    groups: &[Vec<ResolvedEvent>],
    states: &mut [EventState],
    truth: &impl TrueCounts,
    t: u64,
) {
    let (fitted, rotate_necessary) = fitting_prefix(ctx.order.iter().copied(), groups);
    ctx.rotate_necessary = rotate_necessary;
    ctx.scheduled.extend(ctx.order[..fitted].iter().copied());
    for s in states
        .iter_mut()
        .filter(|s| ctx.scheduled.contains(&s.group))
    {
        s.hw.restart();
        s.truth_at_update = truth.true_count(s.event, t);
    }
}

/// Stops every group, moves the first scheduled one to the end of the list, schedules again.
#[cfg(any(test, feature = "test-oracles"))]
fn rotate(
    ctx: &mut Context,
    groups: &[Vec<ResolvedEvent>],
    states: &mut [EventState],
    truth: &impl TrueCounts,
    t: u64,
) {
    for s in states
        .iter_mut()
        .filter(|s| ctx.scheduled.contains(&s.group))
    {
        s.fold(truth, t);
    }
    let first = ctx
        .order
        .iter()
        .position(|g| ctx.scheduled.contains(g))
        .unwrap_or(0);
    if !ctx.order.is_empty() {
        let g = ctx.order.remove(first);
        ctx.order.push(g);
    }
    ctx.scheduled.clear();
    schedule(ctx, groups, states, truth, t);
}

#[cfg(test)]
mod tests;
