//! The flow-level engine: flows (a job's I/O stream to one device) progress at rates set by
//! max-min fair sharing (progressive filling) of every resource they use — the device's own
//! service capacity, each direction of every PCIe link on the path (wire bytes of the flow's
//! TLPs and the DLLPs they cause) — each capped by Little's law (I/Os in flight over latency)
//! and by outstanding read requests over the round trip. Rates are recomputed whenever a flow
//! finishes, so the simulated clock advances in piecewise-constant segments; TLP-level counts
//! derive analytically from those segments.

use crate::error::{Error, Result};

/// What a flow asks of the shared resources.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Demand {
    /// Bytes one I/O moves: flows share bottlenecks in equal bytes per second.
    pub(crate) bytes_per_io: f64,
    /// (resource, amount of it one I/O uses): device time in ns, link wire bytes.
    pub(crate) usage: Vec<(usize, f64)>,
    /// The most I/Os per ns the flow can sustain on its own.
    pub(crate) cap: f64,
}

/// Max-min fair rates (I/Os per ns) by progressive filling: every unfrozen flow's byte rate
/// rises together until a resource saturates or a flow reaches its cap; those flows freeze.
pub(crate) fn waterfill(demands: &[Demand], capacity: &[f64]) -> Vec<f64> {
    let n = demands.len();
    let mut rate = vec![0.0; n];
    let mut frozen = vec![false; n];
    let mut used = vec![0.0; capacity.len()];
    while frozen.iter().any(|f| !f) {
        // The byte level at which each resource or flow cap binds.
        let mut slope = vec![0.0; capacity.len()];
        for (_, d) in demands.iter().enumerate().filter(|(i, _)| !frozen[*i]) {
            for &(r, amount) in &d.usage {
                slope[r] += amount / d.bytes_per_io;
            }
        }
        let mut level = f64::INFINITY;
        for r in 0..capacity.len() {
            if slope[r] > 0.0 {
                level = level.min(((capacity[r] - used[r]) / slope[r]).max(0.0));
            }
        }
        for (_, d) in demands.iter().enumerate().filter(|(i, _)| !frozen[*i]) {
            level = level.min(d.cap * d.bytes_per_io);
        }
        let tight: Vec<bool> = (0..capacity.len())
            .map(|r| slope[r] > 0.0 && (capacity[r] - used[r]) / slope[r] <= level * (1.0 + 1e-12))
            .collect();
        let mut froze_any = false;
        for (i, d) in demands.iter().enumerate() {
            if frozen[i] {
                continue;
            }
            let at_cap = d.cap * d.bytes_per_io <= level * (1.0 + 1e-12);
            let bottlenecked = d.usage.iter().any(|&(r, a)| a > 0.0 && tight[r]);
            if at_cap || bottlenecked || !level.is_finite() {
                rate[i] = if level.is_finite() {
                    level / d.bytes_per_io
                } else {
                    0.0
                };
                frozen[i] = true;
                froze_any = true;
                for &(r, amount) in &d.usage {
                    used[r] += amount * rate[i];
                }
            }
        }
        if !froze_any {
            break;
        }
    }
    rate
}

/// A flow's progress: segments of constant I/O rate, ending with every I/O complete.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Progress {
    /// (start ns, end ns, I/Os done at start, I/Os per ns).
    pub(crate) segments: Vec<(f64, f64, f64, f64)>,
    pub(crate) total_ios: u64,
}

impl Progress {
    pub(crate) fn start(&self) -> f64 {
        self.segments.first().map_or(0.0, |s| s.0)
    }

    pub(crate) fn end(&self) -> f64 {
        self.segments.last().map_or(0.0, |s| s.1)
    }

    /// I/Os completed by `t` (fractional inside a segment, exact at the end).
    #[cfg(test)]
    pub(crate) fn done_at(&self, t: f64) -> f64 {
        if t >= self.end() {
            return self.total_ios as f64;
        }
        for &(t0, t1, done0, rate) in &self.segments {
            if t < t0 {
                return done0;
            }
            if t < t1 {
                return done0 + rate * (t - t0);
            }
        }
        0.0
    }
}

/// A flow to run: what it needs and when it stops.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FlowSpec {
    pub(crate) demand: Demand,
    /// I/Os to complete (`size=`), if bounded.
    pub(crate) ios: Option<u64>,
    /// Stop issuing this long after the start (`runtime=`), then drain what is in flight.
    pub(crate) deadline_ns: Option<f64>,
    /// I/Os in flight when it stops issuing: they still complete.
    pub(crate) outstanding: u64,
}

/// Runs flows that start together at `start_ns` until all complete; returns their progress.
pub(crate) fn run_group(
    flows: &[FlowSpec],
    capacity: &[f64],
    start_ns: f64,
) -> Result<Vec<Progress>> {
    struct State {
        done: f64,
        target: Option<f64>,
        draining: bool,
        finished: bool,
        progress: Progress,
    }
    let mut states: Vec<State> = flows
        .iter()
        .map(|f| State {
            done: 0.0,
            target: f.ios.map(|n| n as f64),
            draining: false,
            finished: f.ios == Some(0),
            progress: Progress::default(),
        })
        .collect();
    if let Some(f) = flows
        .iter()
        .find(|f| f.ios.is_none() && f.deadline_ns.is_none())
    {
        return Err(Error::bad_input(format!(
            "a flow of {} bytes per I/O has neither a size nor a runtime",
            f.demand.bytes_per_io
        )));
    }
    let mut t = start_ns;
    while states.iter().any(|s| !s.finished) {
        let active: Vec<usize> = (0..flows.len()).filter(|&i| !states[i].finished).collect();
        let demands: Vec<Demand> = active.iter().map(|&i| flows[i].demand.clone()).collect();
        let rates = waterfill(&demands, capacity);
        let mut step = f64::INFINITY;
        for (k, &i) in active.iter().enumerate() {
            let s = &states[i];
            if let (Some(target), true) = (s.target, rates[k] > 0.0) {
                step = step.min((target - s.done) / rates[k]);
            }
            if let (Some(deadline), false) = (flows[i].deadline_ns, s.draining) {
                step = step.min(start_ns + deadline - t);
            }
        }
        if !step.is_finite() {
            return Err(Error::runtime(
                "simulated I/O cannot progress: a device or link on its path has no capacity",
            ));
        }
        let step = step.max(0.0);
        for (k, &i) in active.iter().enumerate() {
            let s = &mut states[i];
            s.progress.segments.push((t, t + step, s.done, rates[k]));
            s.done += rates[k] * step;
            if let Some(target) = s.target {
                if s.done >= target - 1e-9 * target.max(1.0) {
                    s.done = target;
                    s.finished = true;
                    s.progress.total_ios = target.round() as u64;
                    if let Some(last) = s.progress.segments.last_mut() {
                        // The segment ends exactly where the last I/O completes.
                        last.1 = last.0 + (target - last.2) / rates[k].max(f64::MIN_POSITIVE);
                    }
                }
            }
            let deadline_hit = flows[i]
                .deadline_ns
                .is_some_and(|d| !s.draining && t + step >= start_ns + d - 1e-6);
            if deadline_hit && !s.finished {
                s.draining = true;
                let drained = s.done.ceil() + flows[i].outstanding as f64;
                s.target = Some(s.target.map_or(drained, |tg| tg.min(drained)));
            }
        }
        t += step;
    }
    Ok(states.into_iter().map(|s| s.progress).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(bytes: f64, usage: Vec<(usize, f64)>, cap: f64) -> Demand {
        Demand {
            bytes_per_io: bytes,
            usage,
            cap,
        }
    }

    #[test]
    fn two_flows_share_a_link_fairly_and_the_capped_one_leaves_room() {
        // Link 0 carries 10 bytes/ns; both flows move 1000-byte I/Os over it.
        let fair = waterfill(
            &[
                demand(1000.0, vec![(0, 1000.0)], 1.0),
                demand(1000.0, vec![(0, 1000.0)], 1.0),
            ],
            &[10.0],
        );
        assert!((fair[0] - 0.005).abs() < 1e-12 && (fair[1] - 0.005).abs() < 1e-12);
        let capped = waterfill(
            &[
                demand(1000.0, vec![(0, 1000.0)], 0.002),
                demand(1000.0, vec![(0, 1000.0)], 1.0),
            ],
            &[10.0],
        );
        assert!((capped[0] - 0.002).abs() < 1e-12);
        assert!((capped[1] - 0.008).abs() < 1e-12);
    }

    #[test]
    fn sized_flows_finish_and_the_survivor_speeds_up() {
        let flows = [
            FlowSpec {
                demand: demand(1.0, vec![(0, 1.0)], 1.0),
                ios: Some(100),
                deadline_ns: None,
                outstanding: 1,
            },
            FlowSpec {
                demand: demand(1.0, vec![(0, 1.0)], 1.0),
                ios: Some(300),
                deadline_ns: None,
                outstanding: 1,
            },
        ];
        // Capacity 2 I/Os per ns: both at 1 until 100 ns, then the second alone (capped at 1).
        let p = run_group(&flows, &[2.0], 0.0).unwrap();
        assert!((p[0].end() - 100.0).abs() < 1e-9);
        assert!((p[1].end() - 300.0).abs() < 1e-9);
        assert_eq!(p[1].total_ios, 300);
        assert!((p[1].done_at(50.0) - 50.0).abs() < 1e-9);
    }

    #[test]
    fn timed_flows_drain_what_is_in_flight() {
        let flows = [FlowSpec {
            demand: demand(1.0, vec![(0, 1.0)], 1.0),
            ios: None,
            deadline_ns: Some(1000.5),
            outstanding: 8,
        }];
        let p = run_group(&flows, &[0.01], 0.0).unwrap();
        // 0.01 I/O per ns: 10.005 done at the deadline, then 11 + 8 = 19 in all.
        assert_eq!(p[0].total_ios, 19);
        assert!((p[0].end() - 1900.0).abs() < 1e-6);
    }
}
