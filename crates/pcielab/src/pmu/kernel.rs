//! Which kernel's PMU drivers pcielab follows: the kernel version (from `uname -r`, or what a
//! PMU's own sysfs files give away) and one table of the upstream changes to the modelled
//! drivers since Debian's `linux-source-6.12`, each with the release that first carried it.
//! The catalogs (`pmu::catalog`) are the newest drivers' tables; a kernel's view of them is the
//! newest one with every later change of this table undone, so no name or rule of an older
//! kernel is written anywhere else.

use std::fmt;
use std::path::Path;

use crate::error::{Error, Result};

/// A kernel release as `major.minor` (the PMU drivers do not change within a stable series).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct KernelVersion {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

impl KernelVersion {
    /// Kernel version `major.minor`.
    pub const fn new(major: u32, minor: u32) -> KernelVersion {
        KernelVersion { major, minor }
    }

    /// The release Debian's `linux-source-6.12` package holds, against whose driver sources the
    /// catalog is tested.
    #[cfg(test)]
    pub(crate) const SOURCE_PACKAGE: KernelVersion = KernelVersion::new(6, 12);

    /// The newest behaviour pcielab models (every fact of [`UPSTREAM_CHANGES`] applied).
    pub(crate) const NEWEST: KernelVersion = KernelVersion::new(6, 18);

    /// Parses the leading `MAJOR.MINOR` of a release string (`6.18.44-fc-v782`, `6.12.0`).
    pub fn parse(release: &str) -> Option<KernelVersion> {
        let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(KernelVersion { major, minor })
    }

    /// The running kernel under `root` (`/proc/sys/kernel/osrelease`, what `uname -r` prints).
    pub(crate) fn of_host(root: &Path) -> Result<KernelVersion> {
        let path = root.join("proc/sys/kernel/osrelease");
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        KernelVersion::parse(&text).ok_or_else(|| {
            Error::runtime(format!(
                "{}: '{}' is not a kernel release (expected MAJOR.MINOR...)",
                path.display(),
                text.trim()
            ))
        })
    }

    /// Whether a change first released in `since` is in this kernel.
    pub(crate) fn has(self, since: KernelVersion) -> bool {
        self >= since
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl std::str::FromStr for KernelVersion {
    type Err = Error;

    fn from_str(text: &str) -> Result<KernelVersion> {
        KernelVersion::parse(text)
            .filter(|v| v.major > 0)
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "kernel version '{text}' is not MAJOR.MINOR (e.g. 6.12 or 6.18)"
                ))
            })
    }
}

/// What one upstream change did to a driver pcielab models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Event files renamed: `(eventid, name before, name after)`.
    Renames(&'static [(u64, &'static str, &'static str)]),
    /// DWC: one lane counter per distinct lane event id instead of one per port; a group
    /// that cannot be scheduled fails with ENOSPC instead of every group failing with EINVAL;
    /// lane events outside event groups 6 and 7 are refused.
    DwcLaneCounterPerEvent,
    /// DWC: root ports of this PCI vendor are bound too.
    DwcBindsVendor(u16),
}

/// One upstream change since the 6.12 sources, with where it is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UpstreamChange {
    /// The first release carrying it.
    pub(crate) since: KernelVersion,
    /// The upstream commit's subject line.
    pub(crate) commit: &'static str,
    /// Where pcielab's authors saw it, or why it is unconfirmed (docs/pmu.md repeats this).
    pub(crate) evidence: &'static str,
    pub(crate) effect: Effect,
}

/// The DWC driver's 6.13 renames: lower-case payload events (perf could not count an event
/// with mixed case in its name) and the three misspelt lane events.
const DWC_6_13_RENAMES: &[(u64, &str, &str)] = &[
    (0x20, "Tx_PCIe_TLP_Data_Payload", "tx_pcie_tlp_data_payload"),
    (0x21, "Rx_PCIe_TLP_Data_Payload", "rx_pcie_tlp_data_payload"),
    (0x22, "Tx_CCIX_TLP_Data_Payload", "tx_ccix_tlp_data_payload"),
    (0x23, "Rx_CCIX_TLP_Data_Payload", "rx_ccix_tlp_data_payload"),
    (0x10604, "rx_nulified_tlp", "rx_nullified_tlp"),
    (0x10605, "tx_nulified_tlp", "tx_nullified_tlp"),
    (0x10606, "rx_duplicate_tl", "rx_duplicate_tlp"),
];

/// The December 2024 fix: time-based 0x08 is L1 aux and 0x09 Tx-and-Rx L0s, as the DesignWare
/// databook (and the Yitian 710 PMU guide) number them.
const DWC_6_14_RENAMES: &[(u64, &str, &str)] =
    &[(0x08, "TX_RX_L0S", "L1_AUX"), (0x09, "L1_AUX", "TX_RX_L0S")];

/// Every change to the DesignWare root-port PMU driver after 6.12, oldest first.
pub(crate) static DWC_CHANGES: &[UpstreamChange] = &[
    UpstreamChange {
        since: KernelVersion::new(6, 13),
        commit: "perf/dwc_pcie: Convert the events with mixed case to lowercase",
        evidence: "the rename diff as backported to 6.6 (deepin-community/kernel pull request \
                   #965, from Anolis); upstream hash not confirmed",
        effect: Effect::Renames(DWC_6_13_RENAMES),
    },
    UpstreamChange {
        since: KernelVersion::new(6, 13),
        commit: "perf/dwc_pcie: Add support for Ampere SoCs",
        evidence: "the same 6.6 backport adds the Ampere vendor id; release not confirmed",
        effect: Effect::DwcBindsVendor(0x1def),
    },
    UpstreamChange {
        since: KernelVersion::new(6, 14),
        commit: "perf/dwc_pcie: fix event ids of L1_AUX and TX_RX_L0S (\"according to the \
                 databook\")",
        evidence: "not confirmed from a public source by pcielab's authors; release from the \
                   fix's December 2024 date",
        effect: Effect::Renames(DWC_6_14_RENAMES),
    },
    UpstreamChange {
        since: KernelVersion::new(6, 18),
        commit: "perf/dwc_pcie: Support counting multiple lane events in parallel",
        evidence: "not confirmed from a public source by pcielab's authors",
        effect: Effect::DwcLaneCounterPerEvent,
    },
];

/// The name `kernel`'s DWC driver gives the event whose newest name is `newest` (`config`
/// is its type and eventid), by undoing every later rename.
pub(crate) fn dwc_name_in(kernel: KernelVersion, config: u64, newest: &str) -> String {
    let mut name = newest.to_string();
    for change in DWC_CHANGES.iter().rev() {
        if kernel.has(change.since) {
            break;
        }
        if let Effect::Renames(renames) = change.effect {
            if let Some((_, before, _)) = renames
                .iter()
                .find(|(id, _, after)| *id == config && *after == name)
            {
                name = (*before).to_string();
            }
        }
    }
    name
}

/// Whether `kernel`'s DWC driver has a change of this kind.
fn dwc_has(kernel: KernelVersion, wanted: impl Fn(&Effect) -> bool) -> bool {
    DWC_CHANGES
        .iter()
        .any(|c| wanted(&c.effect) && kernel.has(c.since))
}

/// Whether `kernel` counts one lane event per distinct event id (6.18) rather than one per port.
pub(crate) fn dwc_lane_counter_per_event(kernel: KernelVersion) -> bool {
    dwc_has(kernel, |e| *e == Effect::DwcLaneCounterPerEvent)
}

/// The PCI vendors whose root ports `kernel`'s DWC driver binds (with the RAS DES capability).
pub(crate) fn dwc_vendors(kernel: KernelVersion) -> Vec<u16> {
    // Alibaba and Qualcomm are in the 6.12 driver's table.
    let mut vendors = vec![0x1ded, 0x17cb];
    vendors.extend(DWC_CHANGES.iter().filter_map(|c| match c.effect {
        Effect::DwcBindsVendor(v) if kernel.has(c.since) => Some(v),
        _ => None,
    }));
    vendors
}

/// The newest kernel whose DWC driver writes these event files, when they are older than
/// every change of [`DWC_CHANGES`] that renamed an event: `(name, type << 16 | eventid)` pairs
/// from the PMU's `events/`. 6.12's spellings give 6.12; `TX_RX_L0S` at 0x08 gives 6.13.
pub(crate) fn dwc_version_from_events<'a>(
    events: impl IntoIterator<Item = (&'a str, u64)>,
) -> Option<KernelVersion> {
    let events: Vec<(&str, u64)> = events.into_iter().collect();
    DWC_CHANGES
        .iter()
        .filter(|change| match change.effect {
            Effect::Renames(renames) => renames.iter().any(|(id, before, after)| {
                // A name that only the older driver gives that event id.
                before != after
                    && events
                        .iter()
                        .any(|(name, config)| name == before && config == id)
            }),
            _ => false,
        })
        .map(|change| KernelVersion::new(change.since.major, change.since.minor - 1))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_to_major_minor() {
        assert_eq!(
            KernelVersion::parse("6.18.44-fc-v782"),
            Some(KernelVersion::new(6, 18))
        );
        assert_eq!(
            KernelVersion::parse("6.12"),
            Some(KernelVersion::new(6, 12))
        );
        assert_eq!(KernelVersion::parse("six"), None);
        assert!("6".parse::<KernelVersion>().is_err());
    }

    #[test]
    fn names_are_undone_back_to_each_kernel() {
        let v = KernelVersion::new;
        assert_eq!(dwc_name_in(v(6, 12), 0x08, "L1_AUX"), "TX_RX_L0S");
        assert_eq!(dwc_name_in(v(6, 13), 0x08, "L1_AUX"), "TX_RX_L0S");
        assert_eq!(dwc_name_in(v(6, 14), 0x08, "L1_AUX"), "L1_AUX");
        assert_eq!(dwc_name_in(v(6, 12), 0x09, "TX_RX_L0S"), "L1_AUX");
        assert_eq!(
            dwc_name_in(v(6, 12), 0x21, "rx_pcie_tlp_data_payload"),
            "Rx_PCIe_TLP_Data_Payload"
        );
        assert_eq!(
            dwc_name_in(v(6, 13), 0x21, "rx_pcie_tlp_data_payload"),
            "rx_pcie_tlp_data_payload"
        );
        assert_eq!(
            dwc_name_in(v(6, 12), 0x10606, "rx_duplicate_tlp"),
            "rx_duplicate_tl"
        );
        assert!(!dwc_lane_counter_per_event(v(6, 17)));
        assert!(dwc_lane_counter_per_event(v(6, 18)));
        assert!(!dwc_vendors(v(6, 12)).contains(&0x1def));
        assert!(dwc_vendors(v(6, 13)).contains(&0x1def));
        assert!(!dwc_vendors(v(6, 18)).contains(&0x1d87));
    }

    #[test]
    fn event_files_date_their_driver() {
        let v = KernelVersion::new;
        let of = |events: &[(&str, u64)]| dwc_version_from_events(events.iter().copied());
        assert_eq!(
            of(&[("rx_nulified_tlp", 0x10604), ("L1_AUX", 0x09)]),
            Some(v(6, 12))
        );
        assert_eq!(
            of(&[("TX_RX_L0S", 0x08), ("rx_nullified_tlp", 0x10604)]),
            Some(v(6, 13))
        );
        assert_eq!(of(&[("TX_RX_L0S", 0x09), ("L1_AUX", 0x08)]), None);
    }
}
