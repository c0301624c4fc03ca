//! One request–response I/O (a command, the device's access, its data and its completion) and
//! what a link's ASPM exits and an interrupt taken on the far NUMA node add to it. The simulator
//! times every fio job through [`RequestResponse::io_ns`], `pcielab model --io-latency-us`
//! prints it, and `advise` predicts the gain of its ASPM and IRQ-placement fixes with it: one
//! model, three users. Pure functions, no I/O.

/// The most idle time before a transmitter enters L0s, ns: the PCIe base specification
/// (5.4.1.1.1, "Entry into L0s") requires entry after no more than 7 µs of idle.
pub const L0S_ENTRY_NS: f64 = 7_000.0;

/// Idle time before a link enters L1 under ASPM, ns. The specification leaves it to the
/// implementation; DesignWare controllers program it in their L1 entrance latency field
/// (1-64 µs); 32 µs is the simulator's long-standing default, an assumption, not a measurement.
pub const L1_ENTRY_NS: f64 = 32_000.0;

/// The PCIe base specification lets each switch on the path start its own L1 exit up to 1 µs
/// after its downstream port saw one, so an endpoint's L1 exit latency grows by 1 µs per switch
/// above it (Linux: `pcie_aspm_check_latency`, drivers/pci/pcie/aspm.c).
pub(crate) const L1_SWITCH_EXIT_NS: f64 = 1_000.0;

/// The low-power states ASPM enables on a device's path, each with the exit latency it costs,
/// and the idle time before each is entered. A state is `None` when it is disabled or its exit
/// latency is unknown: it then costs nothing (the model does not guess a latency).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkPower {
    /// Time to leave L0s (ns); `None` when L0s is off.
    pub l0s_exit_ns: Option<f64>,
    /// Time to leave L1 (ns); `None` when L1 is off.
    pub l1_exit_ns: Option<f64>,
    /// Idle time before the link enters L0s (ns).
    pub l0s_entry_ns: f64,
    /// Idle time before the link enters L1 (ns).
    pub l1_entry_ns: f64,
}

impl LinkPower {
    /// ASPM disabled (or unknown): no exit ever costs anything.
    pub(crate) const OFF: LinkPower = LinkPower {
        l0s_exit_ns: None,
        l1_exit_ns: None,
        l0s_entry_ns: L0S_ENTRY_NS,
        l1_entry_ns: L1_ENTRY_NS,
    };

    /// The delay the first TLP after an idle stretch of `gap_ns` waits for the link to return
    /// to L0: the L1 exit when the stretch reached the L1 entry time, else the L0s exit when it
    /// reached the L0s entry time, else nothing.
    pub(crate) fn exit_ns(&self, gap_ns: f64) -> f64 {
        match (self.l1_exit_ns, self.l0s_exit_ns) {
            (Some(l1), _) if gap_ns >= self.l1_entry_ns => l1,
            (_, Some(l0s)) if gap_ns >= self.l0s_entry_ns => l0s,
            _ => 0.0,
        }
    }
}

/// One I/O as a request and its response: the device's access latency (the link carries
/// nothing of this I/O meanwhile), its service time (data at the device's rate), and the
/// memory-read round trip its command fetch and data take; `in_flight` I/Os overlap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RequestResponse {
    pub(crate) access_ns: f64,
    pub(crate) service_ns: f64,
    pub(crate) round_trip_ns: f64,
    /// I/Os in the device at once (at least 1).
    pub(crate) in_flight: f64,
}

impl RequestResponse {
    /// The idle stretch the link sees between I/Os' traffic: one access latency, shared by the
    /// I/Os in flight (their bursts interleave evenly).
    pub(crate) fn idle_gap_ns(&self) -> f64 {
        self.access_ns / self.in_flight.max(1.0)
    }

    /// Time of one I/O from submission to completion: access, service and round trip, the ASPM
    /// exit its data waits for after the idle gap, and `interrupt_ns` more for its completion
    /// interrupt (a far-node CPU's extra cost, 0 where local or unknown).
    pub(crate) fn io_ns(&self, power: &LinkPower, interrupt_ns: f64) -> f64 {
        self.access_ns
            + self.service_ns
            + self.round_trip_ns
            + power.exit_ns(self.idle_gap_ns())
            + interrupt_ns
    }

    /// I/Os per second with `in_flight` I/Os outstanding (Little's law).
    pub(crate) fn iops(&self, power: &LinkPower, interrupt_ns: f64) -> f64 {
        self.in_flight.max(1.0) / self.io_ns(power, interrupt_ns) * 1e9
    }
}

/// A drive's service time for one I/O of `bytes`: its bandwidth or its IOPS limit, whichever
/// is slower.
pub(crate) fn drive_service_ns(bytes: u64, mbps: f64, iops: f64) -> f64 {
    (bytes as f64 / (mbps * 1e6) * 1e9).max(1e9 / iops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l1_16us() -> LinkPower {
        LinkPower {
            l0s_exit_ns: Some(512.0),
            l1_exit_ns: Some(16_000.0),
            ..LinkPower::OFF
        }
    }

    #[test]
    fn an_exit_is_paid_only_after_the_entry_time() {
        let p = l1_16us();
        assert_eq!(p.exit_ns(1_000.0), 0.0);
        assert_eq!(p.exit_ns(7_000.0), 512.0);
        assert_eq!(p.exit_ns(31_999.0), 512.0);
        assert_eq!(p.exit_ns(32_000.0), 16_000.0);
        assert_eq!(LinkPower::OFF.exit_ns(1e9), 0.0);
        let l0s_only = LinkPower {
            l1_exit_ns: None,
            ..p
        };
        assert_eq!(l0s_only.exit_ns(1e9), 512.0);
    }

    #[test]
    fn a_qd1_read_pays_the_exit_deeper_queues_hide_it() {
        // An 80 µs NAND read, 4 KiB at 3500 MB/s (or 2 µs at 500k IOPS), 700 ns round trip.
        let qd1 = RequestResponse {
            access_ns: 80_000.0,
            service_ns: drive_service_ns(4096, 3500.0, 500_000.0),
            round_trip_ns: 700.0,
            in_flight: 1.0,
        };
        assert_eq!(qd1.service_ns, 2_000.0);
        assert_eq!(qd1.io_ns(&LinkPower::OFF, 0.0), 82_700.0);
        assert_eq!(qd1.io_ns(&l1_16us(), 0.0), 98_700.0);
        assert_eq!(qd1.io_ns(&l1_16us(), 1_000.0), 99_700.0);
        // Eight in flight: 10 µs gaps, past L0s entry but not L1.
        let qd8 = RequestResponse {
            in_flight: 8.0,
            ..qd1
        };
        assert_eq!(qd8.io_ns(&l1_16us(), 0.0), 83_212.0);
        assert!((qd8.iops(&LinkPower::OFF, 0.0) - 8.0 / 82_700.0 * 1e9).abs() < 1e-6);
    }
}
