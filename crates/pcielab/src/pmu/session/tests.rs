use super::*;
use crate::pmu::resolve;
use proptest::prelude::*;

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

/// Ground truth made of steady phases: from each phase's start, every event counts at the
/// phase's rate (events per 1000 ns) times its own weight; a rate of 0 is an idle phase.
#[derive(Debug, Clone)]
struct Phases {
    /// (phase start ns, rate), starts increasing from 0.
    phases: Vec<(u64, u64)>,
    /// Weight of each event, by its text.
    weights: Vec<(String, u64)>,
    /// Whether it answers progression sums (term by term: what is tested is how
    /// [`emulate`] uses them).
    sums_progressions: bool,
}

impl TrueCounts for Phases {
    fn true_count(&self, event: &ResolvedEvent, t_ns: u64) -> u64 {
        let weight = self
            .weights
            .iter()
            .find(|(name, _)| *name == event.display)
            .map_or(1, |(_, w)| *w);
        let mut milli = 0u128;
        for (k, &(start, rate)) in self.phases.iter().enumerate() {
            let end = self.phases.get(k + 1).map_or(u64::MAX, |p| p.0);
            if t_ns > start {
                milli += u128::from(t_ns.min(end) - start) * u128::from(rate);
            }
        }
        (milli * u128::from(weight) / 1000) as u64
    }

    fn progression_sum(
        &self,
        event: &ResolvedEvent,
        first_ns: u64,
        step_ns: u64,
        n: u64,
    ) -> Option<u128> {
        self.sums_progressions.then(|| {
            (0..n)
                .map(|k| u128::from(self.true_count(event, first_ns + k * step_ns)))
                .sum()
        })
    }

    fn sums_progressions(&self, _: &ResolvedEvent) -> bool {
        self.sums_progressions
    }
}

/// Events of two root ports: 64-bit time-based ones that must share, 32-bit lane counters,
/// 8-bit and 4-bit error counters that wrap within a mux period at the higher rates.
const POOL: [&str; 10] = [
    "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
    "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/",
    "pcie_bdf_200/L0/",
    "pcie_bdf_200/tx_ack_dllp/",
    "pcie_bdf_200/LCRC_Error/",
    "pcie_bdf_200/EBUF_Overflow,lane=1/",
    "pcie_bdf_300/Rx_PCIe_TLP_Data_Payload/",
    "pcie_bdf_300/L0/",
    "pcie_bdf_300/tx_ack_dllp/",
    "pcie_bdf_300/EBUF_Overflow,lane=0/",
];

fn two_ports() -> Vec<PmuDevice> {
    vec![
        PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 4),
        PmuDevice::dwc_root_port("00:03.0".parse().unwrap(), 4),
    ]
}

/// Groups of one to three pool events on one PMU (duplicates allowed: they collide).
fn any_groups() -> impl Strategy<Value = Vec<Vec<ResolvedEvent>>> {
    let group = (any::<bool>(), prop::collection::vec(0usize..6, 1..=3));
    prop::collection::vec(group, 1..=5).prop_map(|groups| {
        let devices = two_ports();
        groups
            .into_iter()
            .map(|(second_port, picks)| {
                picks
                    .into_iter()
                    .map(|i| {
                        let name = if second_port {
                            POOL[6 + i % 4]
                        } else {
                            POOL[i]
                        };
                        resolve(&devices, &name.parse().unwrap()).unwrap()
                    })
                    .collect()
            })
            .collect()
    })
}

fn any_truth() -> impl Strategy<Value = Phases> {
    let phase = (
        0u64..400_000_000,
        prop_oneof![Just(0u64), 1u64..50, 1u64..20_000],
    );
    (
        prop::collection::vec(phase, 1..6),
        prop::collection::vec(1u64..4, POOL.len()),
        any::<bool>(),
    )
        .prop_map(|(mut phases, weights, sums_progressions)| {
            phases.sort();
            phases[0].0 = 0;
            Phases {
                phases,
                weights: POOL.iter().map(|s| s.to_string()).zip(weights).collect(),
                sums_progressions,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The per-stretch emulation gives exactly the kernel's step-by-step readings.
    #[test]
    fn emulate_matches_stepwise(
        groups in any_groups(),
        truth in any_truth(),
        mux_ms in 1u64..=5,
        mux_extra_ns in prop_oneof![Just(0u64), 1u64..1000],
        interval_ms in prop::option::of(50u64..400),
        read_ms in prop::option::of(7u64..300),
        duration_ns in prop_oneof![Just(0u64), 1u64..2_000_000_000],
    ) {
        let devices = two_ports();
        let options = CountOptions {
            mux_interval_ns: mux_ms * 1_000_000 + mux_extra_ns,
            interval_ns: interval_ms.map(|ms| ms * 1_000_000),
            read_period_ns: read_ms.map(|ms| ms * 1_000_000),
        };
        let fast = emulate(&truth, &devices, &groups, &options, duration_ns).unwrap();
        let stepwise = emulate_stepwise(&truth, &devices, &groups, &options, duration_ns).unwrap();
        prop_assert_eq!(fast, stepwise);
    }
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
