//! The counting session with perf semantics. A [`CounterBackend`] opens event groups, runs the
//! workload and returns readings (value, time enabled, time running) per event and per
//! interval; a real `perf_event_open` host backend implements it by asking the kernel. For
//! machines without a kernel (the simulator) [`emulate`] plays the kernel's part over a
//! [`TrueCounts`] ground truth: round-robin rotation of groups that cannot count together every
//! mux interval, hardware registers that wrap, and enabled/running accounting. Estimates are
//! `value × enabled / running`, and `None` (perf's `<not counted>`) when running is zero.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::pmu::counter::HwCounter;
use crate::pmu::{fits, PmuDevice, ResolvedEvent};

/// perf's default `perf_event_mux_interval_ms`.
pub const DEFAULT_MUX_INTERVAL_NS: u64 = 4_000_000;

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
    pub value: u64,
    pub enabled_ns: u64,
    pub running_ns: u64,
}

impl Reading {
    /// perf's estimate `value × enabled / running`; `None` when the event never ran.
    pub fn estimate(&self) -> Option<f64> {
        if self.running_ns == 0 {
            return None;
        }
        Some(self.value as f64 * self.enabled_ns as f64 / self.running_ns as f64)
    }

    /// Percent of the enabled time the event was on a counter (perf's `(49.99%)`).
    pub fn running_percent(&self) -> f64 {
        if self.enabled_ns == 0 {
            return 0.0;
        }
        100.0 * self.running_ns as f64 / self.enabled_ns as f64
    }

    /// The change from `earlier` to `self`, as `perf stat -I` prints per interval.
    pub fn since(&self, earlier: &Reading) -> Reading {
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
    pub totals: Vec<Reading>,
    /// Cumulative readings at the end of each `-I` interval, with the interval's end time.
    pub intervals: Vec<(u64, Vec<Reading>)>,
    /// From enabling the counters (workload start) to disabling them (workload exit).
    pub elapsed_ns: u64,
}

/// Where counts come from. Each group counts all-or-nothing; groups may not span PMUs.
pub trait CounterBackend {
    fn devices(&self) -> &[PmuDevice];
    /// Opens `groups`, runs the backend's workload with them enabled, and reads them.
    fn count(&mut self, groups: &[Vec<ResolvedEvent>], options: &CountOptions) -> Result<Counts>;
}

/// A simulated machine's ground truth: the hardware count `event` would have accumulated from
/// time 0 to `t_ns` had it been on a counter the whole time (non-decreasing in `t_ns`).
pub trait TrueCounts {
    fn true_count(&self, event: &ResolvedEvent, t_ns: u64) -> u64;
}

/// Rejects groups perf would refuse: empty groups and groups spanning PMUs.
pub fn check_groups(groups: &[Vec<ResolvedEvent>]) -> Result<()> {
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
    }
    Ok(())
}

struct EventState<'a> {
    event: &'a ResolvedEvent,
    group: usize,
    hw: HwCounter,
    /// Ground-truth value at the counter's last update.
    truth_at_update: u64,
    enabled_ns: u64,
    running_ns: u64,
}

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
struct Context {
    order: Vec<usize>,
    scheduled: BTreeSet<usize>,
    rotate_necessary: bool,
}

/// The most counter rotations one count simulates: time-shared events over a long workload
/// are rotated (and read) this many times at most, an hour at the default 4 ms.
pub const MAX_ROTATIONS: u64 = 1_000_000;

/// The most `-I` intervals one count keeps (each holds a reading of every event).
pub const MAX_INTERVALS: u64 = 100_000;

/// Plays the kernel's perf core over `truth` for a workload lasting `duration_ns`.
pub fn emulate(
    truth: &impl TrueCounts,
    devices: &[PmuDevice],
    groups: &[Vec<ResolvedEvent>],
    options: &CountOptions,
    duration_ns: u64,
) -> Result<Counts> {
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
    let rotations = duration_ns / options.mux_interval_ns;
    if rotating && rotations > MAX_ROTATIONS {
        return Err(Error::bad_input(format!(
            "the events time-share counters, rotated every {} ms: over a {} s workload that is {rotations} rotations; at most {MAX_ROTATIONS}: raise --mux-interval-ms to {} or more, or count fewer events at once",
            options.mux_interval_ns as f64 / 1e6,
            duration_ns / 1_000_000_000,
            duration_ns.div_ceil(MAX_ROTATIONS).div_ceil(1_000_000)
        )));
    }
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

fn fold_running(contexts: &[Context], states: &mut [EventState], truth: &impl TrueCounts, t: u64) {
    for s in states.iter_mut() {
        if contexts[s.event.device].scheduled.contains(&s.group) {
            s.fold(truth, t);
        }
    }
}

/// Schedules groups in rotation order until the first that does not fit (the kernel stops
/// adding hardware events at the first failure and marks the context for rotation).
fn schedule(
    ctx: &mut Context,
    groups: &[Vec<ResolvedEvent>],
    states: &mut [EventState],
    truth: &impl TrueCounts,
    t: u64,
) {
    let mut active: Vec<&ResolvedEvent> = Vec::new();
    ctx.rotate_necessary = false;
    for &g in &ctx.order {
        let mut trial = active.clone();
        let group_fits = groups[g].iter().all(|e| {
            let ok = fits(&trial, e);
            trial.push(e);
            ok
        });
        if !group_fits {
            ctx.rotate_necessary = true;
            break;
        }
        active = trial;
        ctx.scheduled.insert(g);
    }
    for s in states
        .iter_mut()
        .filter(|s| ctx.scheduled.contains(&s.group))
    {
        s.hw.restart();
        s.truth_at_update = truth.true_count(s.event, t);
    }
}

/// Stops every group, moves the first scheduled one to the end of the list, schedules again.
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
mod tests {
    use super::*;
    use crate::pmu::resolve;

    /// Every event counts `rate` per ns, forever.
    struct Linear(u64);

    impl TrueCounts for Linear {
        fn true_count(&self, _: &ResolvedEvent, t: u64) -> u64 {
            self.0 * t
        }
    }

    fn devices() -> Vec<PmuDevice> {
        vec![PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 2)]
    }

    fn ev(s: &str) -> ResolvedEvent {
        resolve(&devices(), &s.parse().unwrap()).unwrap()
    }

    #[test]
    fn two_time_based_events_share_the_counter_round_robin() {
        let groups = vec![
            vec![ev("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/")],
            vec![ev("pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/")],
        ];
        // 10 ms: Rx runs 0-4 and 8-10, Tx runs 4-8.
        let c = emulate(
            &Linear(3),
            &devices(),
            &groups,
            &CountOptions::default(),
            10_000_000,
        )
        .unwrap();
        assert_eq!(c.totals[0].running_ns, 6_000_000);
        assert_eq!(c.totals[1].running_ns, 4_000_000);
        assert_eq!(c.totals[0].enabled_ns, 10_000_000);
        assert_eq!(c.totals[0].value, 18_000_000);
        assert_eq!(c.totals[1].estimate().unwrap(), 30_000_000.0);
        assert!((c.totals[1].running_percent() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn an_impossible_group_is_never_counted() {
        let groups = vec![vec![
            ev("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/"),
            ev("pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/"),
        ]];
        let c = emulate(
            &Linear(1),
            &devices(),
            &groups,
            &CountOptions::default(),
            9_000_000,
        )
        .unwrap();
        assert_eq!(c.totals[0].running_ns, 0);
        assert_eq!(c.totals[0].estimate(), None);
    }

    #[test]
    fn lone_lane_counter_wraps_without_reads_but_intervals_keep_it() {
        let groups = vec![vec![ev("pcie_bdf_200/tx_ack_dllp/")]];
        let long = 5_000_000_000u64; // 5 s at 1 per ns: more than 2^32
        let c = emulate(
            &Linear(1),
            &devices(),
            &groups,
            &CountOptions::default(),
            long,
        )
        .unwrap();
        assert_eq!(c.totals[0].value, long - (1 << 32));
        let opts = CountOptions {
            interval_ns: Some(1_000_000_000),
            ..CountOptions::default()
        };
        let c = emulate(&Linear(1), &devices(), &groups, &opts, long).unwrap();
        assert_eq!(c.totals[0].value, long);
        assert_eq!(c.intervals.len(), 5);
        let second = c.intervals[1].1[0].since(&c.intervals[0].1[0]);
        assert_eq!(second.value, 1_000_000_000);
        // Reads every 2 s (under the 4.29 s wrap) carry the wraps too, and print nothing.
        let reads = CountOptions {
            read_period_ns: Some(2_000_000_000),
            ..CountOptions::default()
        };
        let c = emulate(&Linear(1), &devices(), &groups, &reads, long).unwrap();
        assert_eq!(c.totals[0].value, long);
        assert!(c.intervals.is_empty());
        // Reads every 4.5 s are too slow for a wrap every 4.29 s: one wrap is lost again.
        let slow = CountOptions {
            read_period_ns: Some(4_500_000_000),
            ..CountOptions::default()
        };
        let c = emulate(&Linear(1), &devices(), &groups, &slow, long).unwrap();
        assert_eq!(c.totals[0].value, long - (1 << 32));
    }

    #[test]
    fn groups_may_not_span_pmus() {
        let two = vec![
            PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 2),
            PmuDevice::dwc_root_port("00:03.0".parse().unwrap(), 2),
        ];
        let a = resolve(&two, &"pcie_bdf_200/L0/".parse().unwrap()).unwrap();
        let b = resolve(&two, &"pcie_bdf_300/L0/".parse().unwrap()).unwrap();
        let err = check_groups(&[vec![a, b]]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
    }
}
