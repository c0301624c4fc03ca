//! The refusals a host's PCIe PMU drivers make at `perf_event_open`, checked before pcielab
//! opens anything, so a group the kernel would refuse is bad input naming the kernel's error
//! and what to write instead, never a `<not counted>` line. Which rules apply is the kernel the
//! PMU's driver comes from (`driver_kernel`): the running kernel, or an older one when the
//! PMU's own event files carry that kernel's names (a backported driver).

use crate::pmu::catalog::Group;
use crate::pmu::event::{EventAttr, PERF_TYPE_SOFTWARE};
use crate::pmu::kernel::{dwc_lane_counter_per_event, dwc_version_from_events, KernelVersion};
use crate::pmu::sysfs::{PcieDriver, SysfsPmu};

/// One event the kernel would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The event as the user wrote it.
    pub(crate) event: String,
    /// The error `perf_event_open` would return (`EINVAL`, `ENOSPC`).
    pub(crate) errno: &'static str,
    /// The driver's reason, and what to write instead.
    pub(crate) reason: String,
}

impl Refusal {
    pub(crate) fn message(&self) -> String {
        format!(
            "'{}': the kernel refuses it at open ({}): {}",
            self.event, self.errno, self.reason
        )
    }
}

/// The kernel whose driver `pmu` follows: `running`, or the older release its DWC event files
/// name (6.12's spellings, 6.13's 0x08 = TX_RX_L0S).
pub(crate) fn driver_kernel(pmu: &SysfsPmu, running: KernelVersion) -> KernelVersion {
    if !matches!(
        pmu.driver,
        Some(PcieDriver::DwcUpstream | PcieDriver::DwcSeed)
    ) {
        return running;
    }
    let events = pmu.events.iter().map(|e| {
        let term = |name: &str| {
            e.terms
                .iter()
                .find(|t| t.name == name)
                .and_then(|t| t.value)
                .unwrap_or(0)
        };
        (e.name.as_str(), (term("type") << 16) | term("eventid"))
    });
    dwc_version_from_events(events).map_or(running, |v| v.min(running))
}

/// Every refusal `kernel`'s drivers would make for one `-e` group (one event alone is a group
/// of one).
pub(crate) fn group_refusals(
    group: &[EventAttr],
    pmus: &[SysfsPmu],
    running: KernelVersion,
) -> Vec<Refusal> {
    let mut out = Vec::new();
    for (i, attr) in group.iter().enumerate() {
        let Some(pmu) = pmus.iter().find(|p| p.name == attr.pmu) else {
            continue;
        };
        let kernel = driver_kernel(pmu, running);
        let refuse = |errno, reason: String| Refusal {
            event: attr.text.clone(),
            errno,
            reason,
        };
        match pmu.driver {
            Some(PcieDriver::DwcUpstream | PcieDriver::DwcSeed) => {
                if let Some(r) = dwc_refusal(group, i, kernel) {
                    out.push(refuse(r.0, r.1));
                }
            }
            Some(PcieDriver::HisiPcie) => {
                let field = |name: &str| pmu.format(name).map_or(0, |f| f.unpack(&attr.config));
                if field("port") == 0 && field("bdf") == 0 {
                    out.push(refuse(
                        "EINVAL",
                        format!(
                            "hisi_pcie_pmu counts only traffic it is told to filter: add \
                             port=BITMAP (root ports of this PCIe core, e.g. {}/EVENT,port=0x1/) \
                             or bdf=REQUESTER (a device below one of its root ports)",
                            attr.pmu
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// The DWC driver's refusal of `group[index]`, as `(errno, reason)`.
fn dwc_refusal(
    group: &[EventAttr],
    index: usize,
    kernel: KernelVersion,
) -> Option<(&'static str, String)> {
    let attr = &group[index];
    let dwc_siblings: Vec<&EventAttr> = group
        .iter()
        .filter(|a| a.pmu == attr.pmu && a.dwc_group.is_some())
        .collect();
    if !dwc_lane_counter_per_event(kernel) {
        // 6.8-6.17: a DWC event may only lead its group or follow a software event.
        let leader = &group[0];
        if index > 0 && leader.type_id != PERF_TYPE_SOFTWARE {
            return Some((
                "EINVAL",
                format!(
                    "the dwc_pcie_pmu driver of kernel {kernel} (6.8-6.17) takes no group of \
                     hardware events: give each as its own -e (two time-based events then \
                     time-share the port's one time-based counter, two lane events its one \
                     lane counter)"
                ),
            ));
        }
        return None;
    }
    match attr.dwc_group {
        Some(Group::Lane(g)) if g < 6 => Some((
            "EINVAL",
            format!(
                "kernel {kernel}'s dwc_pcie_pmu counts lane events of event groups 6 and 7 only \
                 (0x6xx, 0x7xx); group {g} is in the Yitian guide's hardware table but no \
                 upstream driver exposes it"
            ),
        )),
        Some(Group::TimeBased(_)) => {
            let time_based = dwc_siblings
                .iter()
                .filter(|a| matches!(a.dwc_group, Some(Group::TimeBased(_))))
                .count();
            (time_based > 1).then(|| {
                (
                    "ENOSPC",
                    "a root port has one time-based counter: a group with two time-based \
                     events can never be scheduled; give them as separate -e events to \
                     time-share it"
                        .to_string(),
                )
            })
        }
        Some(Group::Lane(_)) => {
            let eventid = |a: &EventAttr| a.config[0] & 0xffff;
            let same = dwc_siblings
                .iter()
                .filter(|a| matches!(a.dwc_group, Some(Group::Lane(_))))
                .filter(|a| eventid(a) == eventid(attr))
                .count();
            (same > 1).then(|| {
                (
                    "ENOSPC",
                    format!(
                        "kernel {kernel} has one lane counter per lane event id: the same \
                         event twice in one group (even on two lanes) can never be scheduled; \
                         give them as separate -e events"
                    ),
                )
            })
        }
        _ => None,
    }
}

/// Events the kernel opens but that can count nothing: an NVIDIA Grace PCIe event without a
/// `root_port=` bitmap (the driver then selects no port). One warning line each.
pub(crate) fn silent_events(attrs: &[EventAttr], pmus: &[SysfsPmu]) -> Vec<String> {
    attrs
        .iter()
        .filter_map(|attr| {
            let pmu = pmus.iter().find(|p| p.name == attr.pmu)?;
            let ports = pmu.format("root_port")?.unpack(&attr.config);
            (pmu.driver == Some(PcieDriver::NvidiaPcie) && ports == 0).then(|| {
                format!(
                    "warning: '{}' selects no root port, so nvidia_cspmu counts nothing: add \
                     root_port=BITMAP (bit N = root port N of the socket, e.g. root_port=0x3ff \
                     for all ten)",
                    attr.text
                )
            })
        })
        .collect()
}
