//! The counter model of a finished simulation: every DesignWare root-port PMU event at any
//! simulated time, derived from the same emitted TLPs (payload in bytes and 16-byte units, TLPs
//! by type, DLLPs), from link idle time (ASPM residency) and from injected bit errors; and the
//! simulator as a [`CounterBackend`] that plays perf's multiplexing over those counts.

use crate::error::Result;
use crate::pcie::dllp::DLLP_WIRE_BYTES;
use crate::pcie::{Bdf, Generation};
use crate::pmu::catalog::{EventDef, Group};
use crate::pmu::session::{emulate, CountOptions, CounterBackend, Counts, TrueCounts};
use crate::pmu::{PmuDevice, ResolvedEvent};

use super::tlp::{Dir, Kind, Run, Tally};
use super::workload::Workload;
use super::{SimRun, SimulatedPcie};

/// Time spent and transitions made in link power states up to some time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Residency {
    pub(crate) l0_ns: f64,
    pub(crate) l0s_ns: f64,
    pub(crate) l1_ns: f64,
    pub(crate) l0s_entries: u64,
    pub(crate) l1_entries: u64,
    pub(crate) l1_exits: u64,
}

/// Link errors injected at the configured bit-error rate, seen from the root port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Errors {
    /// Received TLPs with an LCRC error (each Nak'ed and replayed by the device).
    pub(crate) rx_bad_tlps: u64,
    /// Received DLLPs with a CRC error.
    pub(crate) rx_bad_dllps: u64,
    /// Transmitted TLPs the device found bad (Nak'ed; replayed by the root port).
    pub(crate) tx_bad_tlps: u64,
}

impl SimRun {
    /// Every TLP that crossed root port `rp`'s link up to `t_ns`.
    pub(crate) fn port_tally(&self, rp: Bdf, t_ns: u64) -> Tally {
        self.tally_of(t_ns, |s| s.root_port == Some(rp))
    }

    /// Every TLP of `device`'s own I/O up to `t_ns` (what its driver's byte counters would
    /// reflect: a disk's sectors, a NIC's frames, with descriptor and doorbell traffic).
    pub(crate) fn device_tally(&self, device: Bdf, t_ns: u64) -> Tally {
        self.tally_of(t_ns, |s| s.device == device)
    }

    /// The TLPs of the streams `keep` selects, emitted up to `t_ns`.
    fn tally_of(&self, t_ns: u64, keep: impl Fn(&super::Stream) -> bool) -> Tally {
        let mut tally = Tally::default();
        for s in self.streams.iter().filter(|s| keep(s)) {
            tally.add_scaled(&s.bundle.after(s.emission.emitted(t_ns)), 1);
        }
        tally
    }

    /// `Σ per_tlp(run)` over every TLP that crossed root port `rp`'s link up to `t_ns`: one
    /// integer field of [`SimRun::port_tally`], computed without the others.
    fn port_sum(&self, rp: Bdf, t_ns: u64, per_tlp: impl Fn(&Run) -> u64) -> u64 {
        self.streams
            .iter()
            .filter(|s| s.root_port == Some(rp))
            .map(|s| s.bundle.after_sum(s.emission.emitted(t_ns), &per_tlp))
            .sum()
    }

    /// `Σ port_sum(rp, first_ns + k × step_ns, per_tlp)` for `k` in `0..n`, in closed form
    /// (`None` if it would overflow).
    fn port_sum_progression(
        &self,
        rp: Bdf,
        per_tlp: impl Fn(&Run) -> u64,
        (first_ns, step_ns, n): (u64, u64, u64),
    ) -> Option<u128> {
        self.streams
            .iter()
            .filter(|s| s.root_port == Some(rp))
            .try_fold(0u128, |sum, s| {
                let stream = s
                    .emission
                    .progression_sum(&s.bundle, &per_tlp, first_ns, step_ns, n)?;
                sum.checked_add(stream)
            })
    }

    /// The ground truth of `pmus`' events over this run, for [`crate::pmu::session`].
    pub fn truth<'a>(&'a self, pmus: &'a [PmuDevice]) -> impl TrueCounts + 'a {
        Truth { run: self, pmus }
    }

    /// DLLPs the root port sent (`Dir::Down`) or received (`Dir::Up`) up to `t_ns`:
    /// (Ack, UpdateFC), for TLPs of the opposite direction, as whole DLLPs.
    pub(crate) fn port_dllps(&self, rp: Bdf, t_ns: u64, way: Dir) -> (u64, u64) {
        let tally = self.port_tally(rp, t_ns);
        let d = way as usize;
        (tally.acks[d] as u64, tally.update_fcs[d] as u64)
    }

    /// Errors injected on `rp`'s link up to `t_ns` (all zero without a bit-error rate).
    pub(crate) fn port_errors(&self, rp: Bdf, t_ns: u64) -> Errors {
        let ber = self.config.ber;
        if ber == 0.0 {
            return Errors::default();
        }
        let tally = self.port_tally(rp, t_ns);
        let (acks, fcs) = self.port_dllps(rp, t_ns, Dir::Up);
        let tlp_bits = tally.wire_bytes[Dir::Up as usize] * 8.0;
        let dllp_bits = (acks + fcs) as f64 * f64::from(DLLP_WIRE_BYTES) * 8.0;
        let rx_bad_tlps = (tlp_bits * ber) as u64;
        Errors {
            rx_bad_tlps,
            rx_bad_dllps: ((tlp_bits + dllp_bits) * ber) as u64 - rx_bad_tlps,
            tx_bad_tlps: (tally.wire_bytes[Dir::Down as usize] * 8.0 * ber) as u64,
        }
    }

    /// Link power-state residency of `rp` from 0 to `t_ns`: idle stretches longer than the
    /// L0s / L1 entry times are spent in those states when ASPM enables them.
    pub(crate) fn port_residency(&self, rp: Bdf, t_ns: u64) -> Residency {
        let Some(port) = self.ports.get(&rp) else {
            return Residency::default();
        };
        let t = t_ns as f64;
        let mut idle = Vec::new();
        let mut cursor = 0.0;
        for &(a, b) in &port.busy {
            if a >= t {
                break;
            }
            if a > cursor {
                idle.push((cursor, a, true));
            }
            cursor = cursor.max(b);
        }
        if cursor < t {
            idle.push((cursor, t, false));
        }
        let c = &self.config;
        let mut r = Residency::default();
        for (a, b, ended) in idle {
            let length = b - a;
            if port.aspm.l1 {
                if port.aspm.l0s {
                    r.l0s_ns += (length.min(c.l1_idle_ns) - c.l0s_idle_ns).max(0.0);
                    r.l0s_entries += u64::from(length > c.l0s_idle_ns);
                }
                if length > c.l1_idle_ns {
                    r.l1_ns += length - c.l1_idle_ns;
                    r.l1_entries += 1;
                    r.l1_exits += u64::from(ended);
                }
            } else if port.aspm.l0s && length > c.l0s_idle_ns {
                r.l0s_ns += length - c.l0s_idle_ns;
                r.l0s_entries += 1;
            }
        }
        r.l0_ns = t - r.l0s_ns - r.l1_ns;
        r
    }

    /// The count a DWC root-port PMU event would have reached at `t_ns`, counting from 0.
    pub(crate) fn dwc_count(&self, rp: Bdf, def: &EventDef, lane: Option<u8>, t_ns: u64) -> u64 {
        let number = def.config & 0xff;
        let cycles = |ns: f64, mhz: f64| (ns * mhz / 1e3) as u64;
        match def.group {
            Group::TimeBased(0) => {
                let r = self.port_residency(rp, t_ns);
                let core = self.config.pmu_clock_mhz;
                match number {
                    0x00 => cycles(t_ns as f64, core),
                    0x01 | 0x02 | 0x08 => cycles(r.l0s_ns, core),
                    0x03 => cycles(r.l0_ns, core),
                    0x04 => cycles(r.l1_ns, core),
                    0x09 => cycles(r.l1_ns, self.config.aux_clock_mhz),
                    _ => 0, // L1.1, L1.2 (no substates modelled), Configuration/Recovery
                }
            }
            Group::TimeBased(_) | Group::Lane(7) => match TlpField::of(def) {
                Some(field) => self.port_sum(rp, t_ns, |r| field.of_run(r)),
                None => 0,
            },
            Group::Lane(6) => {
                let (tx_ack, tx_fc) = self.port_dllps(rp, t_ns, Dir::Down);
                let (rx_ack, rx_fc) = self.port_dllps(rp, t_ns, Dir::Up);
                match number {
                    0x00 => tx_ack,
                    0x01 => tx_fc,
                    0x02 => rx_ack,
                    0x03 => rx_fc,
                    _ => 0, // nullified and duplicate TLPs
                }
            }
            Group::Lane(5) => {
                let r = self.port_residency(rp, t_ns);
                match number {
                    0x01 => r.l1_exits, // every L1 exit passes through Recovery
                    0x02 | 0x03 => r.l0s_entries,
                    0x05 => r.l1_entries,
                    _ => 0,
                }
            }
            Group::Lane(2) => {
                let e = self.port_errors(rp, t_ns);
                match number {
                    0x00 | 0x01 | 0x06 => e.rx_bad_tlps,
                    0x02 => e.rx_bad_dllps,
                    0x05 | 0x07 => e.tx_bad_tlps,
                    _ => 0,
                }
            }
            Group::Lane(1) if number == 0x06 => {
                let e = self.port_errors(rp, t_ns);
                e.rx_bad_tlps + e.rx_bad_dllps
            }
            Group::Lane(0) if number == 0x02 => {
                // 8b/10b links see a bit error as a decode error on the lane that carried it.
                let port = self.ports.get(&rp);
                let coded = port
                    .and_then(|p| p.generation)
                    .is_some_and(|g| g <= Generation::Gen2);
                let width = u64::from(port.map_or(0, |p| p.width));
                match lane {
                    Some(l) if coded && u64::from(l) < width => {
                        let e = self.port_errors(rp, t_ns);
                        let all = e.rx_bad_tlps + e.rx_bad_dllps;
                        all * (u64::from(l) + 1) / width - all * u64::from(l) / width
                    }
                    _ => 0,
                }
            }
            _ => 0,
        }
    }
}

/// The simulator as a counter backend: runs the workload, then plays perf's multiplexing over
/// the simulated counters.
pub struct SimBackend<'m> {
    pub(crate) machine: &'m SimulatedPcie,
    pub(crate) workload: Workload,
    pmus: Vec<PmuDevice>,
    /// The finished run, after [`CounterBackend::count`].
    pub run: Option<SimRun>,
}

impl<'m> SimBackend<'m> {
    /// The PMU model of `machine` playing `workload`.
    pub fn new(machine: &'m SimulatedPcie, workload: Workload) -> SimBackend<'m> {
        SimBackend {
            pmus: machine.pmus(),
            machine,
            workload,
            run: None,
        }
    }
}

/// What a TLP-counting event adds per TLP.
#[derive(Debug, Clone, Copy)]
enum TlpField {
    /// Payload in 16-byte units, of TLPs in one direction.
    Payload(Dir),
    /// One per TLP of a direction and kind.
    Tlps(Dir, Kind),
}

impl TlpField {
    /// The field a DWC throughput (time-based group) or TLP-count (lane group 7) event counts;
    /// `None` for events of those groups simulated traffic never moves, and for other groups.
    fn of(def: &EventDef) -> Option<TlpField> {
        let number = def.config & 0xff;
        let field = match (def.group, number) {
            (Group::TimeBased(g), 0x20) if g != 0 => TlpField::Payload(Dir::Down),
            (Group::TimeBased(g), 0x21) if g != 0 => TlpField::Payload(Dir::Up),
            (Group::Lane(7), 0x00) => TlpField::Tlps(Dir::Down, Kind::MemWrite),
            (Group::Lane(7), 0x01) => TlpField::Tlps(Dir::Down, Kind::MemRead),
            (Group::Lane(7), 0x07) => TlpField::Tlps(Dir::Down, Kind::CplD),
            (Group::Lane(7), 0x0B) => TlpField::Tlps(Dir::Up, Kind::MemWrite),
            (Group::Lane(7), 0x0C) => TlpField::Tlps(Dir::Up, Kind::MemRead),
            (Group::Lane(7), 0x12) => TlpField::Tlps(Dir::Up, Kind::CplD),
            // CCIX, completions without data, config, I/O, messages, atomics, prefixes:
            // simulated traffic has none.
            _ => return None,
        };
        Some(field)
    }

    fn of_run(self, run: &Run) -> u64 {
        match self {
            TlpField::Payload(dir) if run.dir == dir => run.payload_units(),
            TlpField::Tlps(dir, kind) => u64::from(run.dir == dir && run.kind == kind),
            TlpField::Payload(_) => 0,
        }
    }
}

struct Truth<'a> {
    run: &'a SimRun,
    pmus: &'a [PmuDevice],
}

impl TrueCounts for Truth<'_> {
    fn true_count(&self, event: &ResolvedEvent, t_ns: u64) -> u64 {
        match self.pmus[event.device].root_port {
            Some(rp) => self.run.dwc_count(rp, event.def, event.lane, t_ns),
            None => 0,
        }
    }

    fn progression_sum(
        &self,
        event: &ResolvedEvent,
        first_ns: u64,
        step_ns: u64,
        n: u64,
    ) -> Option<u128> {
        let rp = self.pmus[event.device].root_port?;
        let field = TlpField::of(event.def)?;
        self.run
            .port_sum_progression(rp, |r| field.of_run(r), (first_ns, step_ns, n))
    }

    fn sums_progressions(&self, event: &ResolvedEvent) -> bool {
        self.pmus[event.device].root_port.is_some() && TlpField::of(event.def).is_some()
    }
}

impl CounterBackend for SimBackend<'_> {
    fn devices(&self) -> &[PmuDevice] {
        &self.pmus
    }

    fn count(&mut self, groups: &[Vec<ResolvedEvent>], options: &CountOptions) -> Result<Counts> {
        let run = self.machine.run(&self.workload)?;
        let counts = emulate(
            &run.truth(&self.pmus),
            &self.pmus,
            groups,
            options,
            run.duration_ns,
        )?;
        self.run = Some(run);
        Ok(counts)
    }
}
