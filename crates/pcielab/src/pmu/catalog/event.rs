//! What a catalog entry is: the PMU families, an event's unit and group (which counter it
//! takes, how wide), and the event itself.

use serde::Serialize;

/// The PMU families pcielab knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// Synopsys DesignWare root-port PMU (RAS DES capability): Yitian 710, upstream `dwc_pcie_pmu`.
    DwcRootPort,
    /// HiSilicon `hisi_pcie_pmu`: 8 general 64-bit counters per PCIe core.
    HisiPcie,
    /// Intel IIO free-running counters, Ice Lake and later (the kernel's SNR/ICX table:
    /// `bw_in_port0-7`, 32 B per count, 48 bits).
    IntelIio,
    /// Intel IIO free-running counters of Skylake-SP (`bw_in_port0-3`, `bw_out_port0-3`,
    /// `util_*`: 4 B per count, 36 bits).
    IntelIioSkylake,
    /// NVIDIA Grace `nvidia_pcie_pmu_<socket>` (Arm CoreSight PMU): local and remote bytes,
    /// requests and outstanding reads, filtered by the `root_port` bitmap.
    NvidiaPcie,
}

/// What one count of an event means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Unit {
    /// Controller clock cycles (link-state residency, the measurement window itself).
    Cycles,
    /// One count per occurrence (TLPs, DLLPs, errors, state entries).
    Events,
    /// `n` bytes of TLP data payload per count (16 for the DWC "4-DWORD" throughput counter).
    Bytes(u32),
    /// A hardware-defined quantity used only in ratios with its partner event (HiSilicon).
    Raw,
}

impl Unit {
    pub(crate) fn label(self) -> String {
        match self {
            Unit::Cycles => "cycles".into(),
            Unit::Events => "events".into(),
            Unit::Bytes(1) => "bytes".into(),
            Unit::Bytes(n) => format!("{n} bytes"),
            Unit::Raw => "raw".into(),
        }
    }
}

/// Where an event lives in its PMU: a DWC time-based group, a DWC event-counter group, or a
/// family with uniform counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", content = "number", rename_all = "snake_case")]
pub(crate) enum Group {
    /// DWC time-based analysis group 0 (residency) or 1 (data); one 64-bit counter per port.
    TimeBased(u8),
    /// DWC event counter group 0-7 (the high byte of the upstream event id).
    Lane(u8),
    /// A general-purpose counter (HiSilicon: one of 8).
    General,
    /// A free-running counter that is always counting (Intel IIO).
    FreeRunning,
}

impl Group {
    /// The hardware width of the counter this event is read from, in bits.
    pub(crate) fn counter_bits(self, family: Family) -> u32 {
        match (family, self) {
            (_, Group::TimeBased(_)) => 64,
            // The seed: groups 0 and 4 are 4-bit per-lane counters, 1-3 8-bit common-lane
            // error counters, 5-7 32-bit "RAM" counters.
            (_, Group::Lane(0 | 4)) => 4,
            (_, Group::Lane(1..=3)) => 8,
            (_, Group::Lane(_)) => 32,
            (Family::IntelIio, _) => 48,
            (Family::IntelIioSkylake, _) => 36,
            _ => 64,
        }
    }

    /// Why an event of this group may never get a counter (said with `<not counted>`).
    pub(crate) fn sharing_rule(self) -> String {
        match self {
            Group::TimeBased(_) => "the root port has one time-based counter: two time-based \
                events in one group can never count together (give them as separate -e events \
                to time-share it)"
                .into(),
            Group::Lane(_) => "one event counter per event: the same event twice (even on \
                two lanes) in one group never fits"
                .into(),
            Group::General => "the group needs more counters than the PMU's 8".into(),
            Group::FreeRunning => "free-running counter not read".into(),
        }
    }

    /// The hardware counts one lane (groups 0 and 4 of the guide); the others count all lanes
    /// together, although the upstream driver asks every lane event for a `lane=`.
    pub(crate) fn per_lane(self) -> bool {
        matches!(self, Group::Lane(0 | 4))
    }

    pub(crate) fn label(self) -> String {
        match self {
            Group::TimeBased(n) => format!("time-based group {n}"),
            Group::Lane(n) => format!("event group {n}"),
            Group::General => "general".into(),
            Group::FreeRunning => "free-running".into(),
        }
    }
}

/// One event of a catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EventDef {
    /// The upstream Linux name (lowercase where the driver uses lowercase).
    pub(crate) name: &'static str,
    /// The seed's mixed-case name (the Yitian downstream driver); equal to `name` when none.
    pub(crate) seed_name: &'static str,
    /// The event's `config` value as the driver's `format/` files encode it.
    pub config: u64,
    pub(crate) group: Group,
    pub(crate) unit: Unit,
    pub(crate) description: &'static str,
}

impl EventDef {
    /// The event's encoding as the driver's sysfs `events/` file writes it (without the
    /// newline): the DWC driver asks every lane event for `lane=?`.
    pub(crate) fn encoding(&self, family: Family) -> String {
        match family {
            Family::DwcRootPort => {
                let kind = self.config >> 16;
                let lane = if kind == 1 { ",lane=?" } else { "" };
                format!("eventid={:#x},type={kind:#x}{lane}", self.config & 0xffff)
            }
            Family::HisiPcie => format!("config={:#x}", self.config),
            Family::IntelIio | Family::IntelIioSkylake => {
                format!(
                    "event={:#x},umask={:#x}",
                    self.config & 0xff,
                    self.config >> 8
                )
            }
            Family::NvidiaPcie => format!("event={:#x}", self.config),
        }
    }

    /// Whether `query` names this event (either name, ASCII case-insensitively).
    pub(crate) fn matches(&self, query: &str) -> bool {
        self.name.eq_ignore_ascii_case(query) || self.seed_name.eq_ignore_ascii_case(query)
    }
}
