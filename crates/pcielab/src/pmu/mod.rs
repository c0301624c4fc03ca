//! PCIe performance-monitoring units: event catalogs per PMU family ([`catalog`]), counter
//! semantics (width, wrap, high-low-high reads: [`counter`]), a perf-like counting session
//! (groups, round-robin multiplexing, scaling: [`session`]) and perf-stat style reports
//! ([`stat`]). This file owns PMU devices, their names (`pcie_bdf_<hex>` as the seed's kernel
//! named them, `dwc_rootport_<hex>` upstream) and how `PMU/EVENT/` strings resolve to events.

pub(crate) mod catalog;
pub(crate) mod counter;
pub(crate) mod counters;
pub(crate) mod event;
pub(crate) mod host;
pub(crate) mod hostlist;
pub(crate) mod kernel;
pub(crate) mod list;
pub(crate) mod perf;
pub(crate) mod placement;
pub(crate) mod rules;
pub(crate) mod session;
pub(crate) mod stat;
pub(crate) mod sysfs;

pub(crate) use catalog::Group;
pub use catalog::{DriverFiles, EventDef, Family};
pub use counters::{Counters, PmuListDocument, PmuListing, StatDone, StatEnd, StatRequest};
pub use event::{EventAttr, EventContext};
pub use hostlist::{HostListDocument, HostListing};
pub use kernel::KernelVersion;
pub use list::CatalogListDocument;
#[cfg(any(test, feature = "test-oracles"))]
pub use session::emulate_stepwise;
pub use session::{emulate, CountOptions, CounterBackend, Counts, Reading, TrueCounts};
pub use stat::{StatDocument, StatOutcome};
pub use sysfs::{parse_alias_terms, parse_cpu_list, read_pmu, AliasTerm, FormatField, SysfsPmu};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::{Kind, Topology};
use catalog::{nearest, Unit};

/// One PMU device as `/sys/bus/event_source/devices` would list it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PmuDevice {
    /// The name perf uses (the Yitian 710 PCIe PMU guide's downstream kernel: `pcie_bdf_200` for
    /// 0000:00:02.0).
    pub name: String,
    /// Other names accepted for the same device (upstream `dwc_rootport_10`).
    pub(crate) aliases: Vec<String>,
    pub(crate) family: Family,
    /// The root port whose traffic it counts.
    pub root_port: Option<Bdf>,
    /// Lanes of the port (the range of `lane=`): the link's capable width.
    pub(crate) lanes: u8,
}

/// The seed's `pcie_bdf_%x` of bus, device and function as one byte each (00:02.0 -> 200),
/// with the domain above them when it is not 0.
pub(crate) fn seed_pmu_name(bdf: Bdf) -> String {
    let value = (u64::from(bdf.domain) << 24)
        | (u64::from(bdf.bus) << 16)
        | (u64::from(bdf.device) << 8)
        | u64::from(bdf.function);
    format!("pcie_bdf_{value:x}")
}

/// Upstream `dwc_rootport_%x` of `(domain << 16) | (bus << 8) | devfn` (00:02.0 -> 10).
pub(crate) fn upstream_pmu_name(bdf: Bdf) -> String {
    let value = (u32::from(bdf.domain) << 16) | (u32::from(bdf.bus) << 8) | u32::from(bdf.devfn());
    format!("dwc_rootport_{value:x}")
}

/// Which driver's conventions a PMU name implies: the seed's kernel reports the data-payload
/// counters in raw 16-byte units, the upstream driver multiplies them by 16 and reports bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Driver {
    Seed,
    Upstream,
}

impl PmuDevice {
    /// A DWC root-port PMU for `bdf`, under both names.
    pub(crate) fn dwc_root_port(bdf: Bdf, lanes: u8) -> PmuDevice {
        PmuDevice {
            name: seed_pmu_name(bdf),
            aliases: vec![upstream_pmu_name(bdf)],
            family: Family::DwcRootPort,
            root_port: Some(bdf),
            lanes,
        }
    }

    /// The driver convention `name` (one of this device's names) selects.
    fn driver_for(&self, name: &str) -> Driver {
        if self.family == Family::DwcRootPort && name.starts_with("dwc_rootport_") {
            Driver::Upstream
        } else {
            Driver::Seed
        }
    }

    /// Whether `name` is one of this device's names.
    pub(crate) fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.iter().any(|a| a == name)
    }
}

/// The root-port PMUs a machine with this topology has: one DWC PMU per PCIe root port of a
/// vendor in `vendors` (a topology does not record the RAS DES capability the driver also
/// needs).
pub(crate) fn root_port_pmus(topo: &Topology, vendors: &[u16]) -> Vec<PmuDevice> {
    topo.functions()
        .iter()
        .filter(|f| f.kind == Kind::RootPort && vendors.contains(&f.vendor))
        .map(|f| {
            let lanes = f.link.and_then(|l| l.max_width.or(l.width)).unwrap_or(1);
            PmuDevice::dwc_root_port(f.bdf, lanes)
        })
        .collect()
}

/// The root-port PMUs the newest kernel registers on a machine with this topology, which is
/// what a snapshot lists and a simulated machine counts with: DWC PMUs on the vendors the newest
/// `dwc_pcie_pmu` binds. Rockchip (1d87) root ports get none: their DesignWare controllers
/// carry the RAS DES counters, but no kernel binds a PMU to them ([`no_rockchip_pmu`]).
pub(crate) fn bound_root_port_pmus(topo: &Topology) -> Vec<PmuDevice> {
    root_port_pmus(topo, &kernel::dwc_vendors(kernel::KernelVersion::NEWEST))
}

const ROCKCHIP: u16 = 0x1d87;

/// Why a machine with this topology has no PMU where a user may expect one: its Rockchip root
/// ports (DesignWare controllers no kernel's `dwc_pcie_pmu` binds), and what measures their
/// traffic instead. `None` when it has no Rockchip root port.
pub(crate) fn no_rockchip_pmu(topo: &Topology) -> Option<String> {
    let ports: Vec<String> = topo
        .functions()
        .iter()
        .filter(|f| f.kind == Kind::RootPort && f.vendor == ROCKCHIP)
        .map(|f| f.bdf.to_string())
        .collect();
    if ports.is_empty() {
        return None;
    }
    Some(format!(
        "no kernel binds a PMU to Rockchip (1d87) root ports ({}), so this machine has none to \
         count; instead use `pcielab top` or `pcielab exporter` (the ports' traffic derived from \
         the disk and NIC byte counters), the workload's own result (`pcielab stat --machine \
         sim:… -a -- dmatest`, without -e, prints it as the tool does), or `pcielab model \
         --platform SPEC.toml` for the predicted DMA rates",
        ports.join(", ")
    ))
}

/// An event as the user wrote it: `PMU/EVENT/`, `PMU/EVENT,lane=N/` or
/// `PMU/eventid=0x21,type=0x0/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub(crate) pmu: String,
    pub(crate) event: Option<String>,
    pub(crate) terms: Vec<(String, u64)>,
    /// The text as given, for messages and output.
    pub(crate) text: String,
}

fn parse_number(text: &str, value: &str) -> Result<u64> {
    let parsed = match value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => value.parse(),
    };
    parsed.map_err(|_| {
        Error::bad_input(format!(
            "malformed event '{text}': '{value}' is not a number (decimal or 0x-hex)"
        ))
    })
}

impl std::str::FromStr for EventSpec {
    type Err = Error;

    fn from_str(text: &str) -> Result<EventSpec> {
        let malformed = |why: &str| {
            Error::bad_input(format!(
                "malformed event '{text}': {why}; expected PMU/EVENT/, PMU/EVENT,lane=N/ or \
                 PMU/eventid=0x21,type=0x0/ (e.g. pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/)"
            ))
        };
        let body = text
            .strip_suffix('/')
            .ok_or_else(|| malformed("missing the closing '/'"))?;
        let (pmu, inner) = body
            .split_once('/')
            .ok_or_else(|| malformed("missing '/' after the PMU name"))?;
        if pmu.is_empty() || inner.is_empty() || inner.contains('/') {
            return Err(malformed("empty PMU or event, or extra '/'"));
        }
        let mut event = None;
        let mut terms = Vec::new();
        for part in inner.split(',') {
            match part.split_once('=') {
                Some((key, value)) if !key.is_empty() => {
                    terms.push((key.to_ascii_lowercase(), parse_number(text, value)?))
                }
                Some(_) => return Err(malformed("a term has no name")),
                None if event.is_none() && terms.is_empty() && !part.is_empty() => {
                    event = Some(part.to_string())
                }
                None => return Err(malformed(&format!("unexpected term '{part}'"))),
            }
        }
        Ok(EventSpec {
            pmu: pmu.to_string(),
            event,
            terms,
            text: text.to_string(),
        })
    }
}

/// Splits one `-e` argument as perf does: commas separate events except inside `PMU/…/` and
/// `{…}`; a `{a,b}` group counts all-or-nothing. Returns the groups (single events are groups of
/// one).
pub fn parse_event_list(text: &str) -> Result<Vec<Vec<EventSpec>>> {
    event::split_event_list(text)?
        .iter()
        .map(|group| group.iter().map(|item| item.parse()).collect())
        .collect()
}

/// An event resolved against a machine's PMUs.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedEvent {
    /// Index into the machine's PMU list.
    pub(crate) device: usize,
    /// The PMU name as the user wrote it.
    pub(crate) pmu_name: String,
    /// The event's definition in the driver's catalog.
    pub def: &'static EventDef,
    pub(crate) lane: Option<u8>,
    pub(crate) driver: Driver,
    /// `PMU/EVENT/` as perf prints it: the user's text.
    pub(crate) display: String,
}

impl ResolvedEvent {
    /// The unit of the value perf reports (after any driver scaling).
    pub(crate) fn unit(&self) -> Unit {
        match (self.driver, self.def.unit) {
            (Driver::Upstream, Unit::Bytes(_)) => Unit::Bytes(1),
            (_, unit) => unit,
        }
    }

    /// What the driver multiplies the hardware count by before perf sees it.
    pub(crate) fn driver_scale(&self) -> u64 {
        match (self.driver, self.def.unit) {
            (Driver::Upstream, Unit::Bytes(n)) => u64::from(n),
            _ => 1,
        }
    }

    /// Two events that need the same hardware counter (same event id, same lane) collide.
    pub(crate) fn same_counter(&self, other: &ResolvedEvent) -> bool {
        self.device == other.device && self.def.config == other.def.config
    }
}

/// Resolves `spec` against `devices`, naming the nearest PMUs or events when nothing matches.
pub fn resolve(devices: &[PmuDevice], spec: &EventSpec) -> Result<ResolvedEvent> {
    let Some(device) = devices.iter().position(|d| d.answers_to(&spec.pmu)) else {
        let names = devices.iter().flat_map(|d| {
            std::iter::once(d.name.as_str()).chain(d.aliases.iter().map(|a| a.as_str()))
        });
        let near = nearest(&spec.pmu, names);
        return Err(Error::bad_input(format!(
            "unknown PMU '{}' in '{}'{}",
            spec.pmu,
            spec.text,
            if near.is_empty() {
                " (this machine has no PCIe PMUs)".to_string()
            } else {
                format!("; nearest: {} (see `pcielab pmu list`)", near.join(", "))
            }
        )));
    };
    let pmu = &devices[device];
    let family = pmu.family;
    let mut lane = None;
    let def = match &spec.event {
        Some(name) => family.find(name).ok_or_else(|| {
            Error::bad_input(format!(
                "unknown event '{name}' on {} in '{}'; nearest: {}",
                spec.pmu,
                spec.text,
                family.suggest(name).join(", ")
            ))
        })?,
        None => find_by_terms(family, spec)?,
    };
    for (key, value) in &spec.terms {
        match key.as_str() {
            "lane" => lane = Some(*value),
            "eventid" | "type" if spec.event.is_none() => {}
            _ => {
                return Err(Error::bad_input(format!(
                    "unknown term '{key}' in '{}': valid terms are eventid, type, lane",
                    spec.text
                )))
            }
        }
    }
    let driver = pmu.driver_for(&spec.pmu);
    if driver == Driver::Upstream {
        upstream_lane_rules(def, lane.is_some(), spec)?;
    }
    let lane = match (def.group.per_lane(), lane) {
        (true, None) => {
            return Err(Error::bad_input(format!(
                "event '{}' counts one lane: write {}/{},lane=N/ with N in 0..{}",
                def.seed_name, spec.pmu, def.seed_name, pmu.lanes
            )))
        }
        (_, Some(l)) if l >= u64::from(pmu.lanes) => {
            return Err(Error::bad_input(format!(
                "lane {l} in '{}' is out of range: {} has lanes 0..{}",
                spec.text, spec.pmu, pmu.lanes
            )))
        }
        (_, l) => l.map(|l| l as u8),
    };
    Ok(ResolvedEvent {
        device,
        pmu_name: spec.pmu.clone(),
        def,
        lane,
        driver,
        display: spec.text.clone(),
    })
}

/// What the newest upstream `dwc_pcie_pmu` (the kernel a simulated `dwc_rootport_*` name
/// stands for) refuses: a lane event of the guide's groups 0-5 (EINVAL since 6.18), and a lane
/// event without `lane=` (its event file says `lane=?`, so perf refuses to parse it).
fn upstream_lane_rules(def: &EventDef, has_lane: bool, spec: &EventSpec) -> Result<()> {
    let Group::Lane(group) = def.group else {
        return Ok(());
    };
    let kernel = kernel::KernelVersion::NEWEST;
    if group < 6 {
        return Err(Error::bad_input(format!(
            "'{}': kernel {kernel}'s dwc_pcie_pmu refuses lane events outside event groups 6 \
             and 7 (EINVAL); {} (group {group}) is only on the Yitian guide's vendor kernel: \
             use the pcie_bdf_* name of this PMU",
            spec.text, def.seed_name
        )));
    }
    if !has_lane {
        return Err(Error::bad_input(format!(
            "'{}': the dwc_pcie_pmu driver writes lane=? for every lane event and perf takes \
             none without it: write {}/{},lane=N/",
            spec.text, spec.pmu, def.name
        )));
    }
    Ok(())
}

/// The event whose encoding the `eventid=`/`type=` terms give (DWC format: type 0 time-based,
/// type 1 lane event).
fn find_by_terms(family: Family, spec: &EventSpec) -> Result<&'static EventDef> {
    let term = |k: &str| spec.terms.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
    let Some(eventid) = term("eventid") else {
        return Err(Error::bad_input(format!(
            "malformed event '{}': give an event name or eventid=",
            spec.text
        )));
    };
    let config = eventid | (term("type").unwrap_or(0) << 16);
    family
        .events()
        .iter()
        .find(|e| e.config == config)
        .ok_or_else(|| {
            Error::bad_input(format!(
                "no event with eventid={eventid:#x},type={} on {} (see `pcielab pmu list`)",
                term("type").unwrap_or(0),
                spec.pmu
            ))
        })
}

/// Whether the counters of a PMU can hold `candidate` while `active` events count: one
/// time-based event per root port; lane events each need their own event counter, so the same
/// event (even on another lane) collides — the rule of kernels since 6.18.
pub(crate) fn fits(active: &[&ResolvedEvent], candidate: &ResolvedEvent) -> bool {
    let on_device = active.iter().filter(|a| a.device == candidate.device);
    match candidate.def.group {
        Group::TimeBased(_) => !on_device
            .into_iter()
            .any(|a| matches!(a.def.group, Group::TimeBased(_))),
        Group::Lane(_) => !on_device.into_iter().any(|a| a.same_counter(candidate)),
        Group::General => on_device.count() < 8,
        Group::FreeRunning => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names_follow_the_newest_drivers_refusals() {
        let refused = |s: &str| resolve_str(s).unwrap_err().message().to_string();
        assert!(refused("dwc_rootport_10/tx_ack_dllp/").contains("lane=?"));
        assert!(refused("dwc_rootport_10/EBUF_SKP_Add,lane=0/").contains("EINVAL"));
        // The guide's vendor kernel (pcie_bdf_*) counts both.
        assert!(resolve_str("pcie_bdf_200/tx_ack_dllp/").is_ok());
        assert!(resolve_str("pcie_bdf_200/EBUF_SKP_Add,lane=0/").is_ok());
        let group = |a: &str, b: &str| {
            session::check_groups(&[vec![resolve_str(a).unwrap(), resolve_str(b).unwrap()]])
        };
        let err = group(
            "dwc_rootport_10/rx_pcie_tlp_data_payload/",
            "dwc_rootport_10/tx_pcie_tlp_data_payload/",
        )
        .unwrap_err();
        assert!(err.message().contains("ENOSPC"), "{err}");
        assert!(group(
            "dwc_rootport_10/tx_ack_dllp,lane=0/",
            "dwc_rootport_10/rx_ack_dllp,lane=0/"
        )
        .is_ok());
        assert!(group(
            "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
            "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/"
        )
        .is_ok());
    }

    #[test]
    fn only_bound_vendors_get_pmus_beyond_the_simulator() {
        use crate::topology::Function;
        let port = |bdf: &str, vendor| {
            Function::new(
                bdf.parse().unwrap(),
                vendor,
                0x3588,
                0x060400,
                Kind::RootPort,
            )
        };
        let topo = Topology::new(vec![
            port("0000:00:00.0", 0x1d87),
            port("0001:00:00.0", 0x1ded),
            port("0002:00:00.0", 0x1def),
        ]);
        let names = |vendors: &[u16]| -> Vec<String> {
            root_port_pmus(&topo, vendors)
                .into_iter()
                .flat_map(|p| p.aliases)
                .collect()
        };
        let v = kernel::KernelVersion::new;
        assert_eq!(
            names(&kernel::dwc_vendors(v(6, 12))),
            ["dwc_rootport_10000"]
        );
        assert_eq!(
            names(&kernel::dwc_vendors(v(6, 13))),
            ["dwc_rootport_10000", "dwc_rootport_20000"]
        );
        // The simulator follows the newest kernel: Ampere, never Rockchip.
        let newest: Vec<String> = bound_root_port_pmus(&topo)
            .into_iter()
            .flat_map(|p| p.aliases)
            .collect();
        assert_eq!(newest, ["dwc_rootport_10000", "dwc_rootport_20000"]);
        assert!(no_rockchip_pmu(&topo).unwrap().contains("(0000:00:00.0)"));
    }

    fn devices() -> Vec<PmuDevice> {
        vec![
            PmuDevice::dwc_root_port("00:02.0".parse().unwrap(), 4),
            PmuDevice::dwc_root_port("b0:00.0".parse().unwrap(), 16),
        ]
    }

    fn resolve_str(s: &str) -> Result<ResolvedEvent> {
        resolve(&devices(), &s.parse()?)
    }

    #[test]
    fn names_follow_seed_and_upstream() {
        let rp: Bdf = "00:02.0".parse().unwrap();
        assert_eq!(seed_pmu_name(rp), "pcie_bdf_200");
        assert_eq!(upstream_pmu_name(rp), "dwc_rootport_10");
        let b0: Bdf = "b0:00.0".parse().unwrap();
        assert_eq!(seed_pmu_name(b0), "pcie_bdf_b00000");
        assert_eq!(seed_pmu_name("30:01.0".parse().unwrap()), "pcie_bdf_300100");
        assert_eq!(
            upstream_pmu_name("0001:30:03.0".parse().unwrap()),
            "dwc_rootport_13018"
        );
    }

    #[test]
    fn both_names_resolve_with_their_driver_units() {
        let seed = resolve_str("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/").unwrap();
        let up = resolve_str("dwc_rootport_10/rx_pcie_tlp_data_payload/").unwrap();
        assert_eq!(seed.def, up.def);
        assert_eq!(seed.device, up.device);
        assert_eq!(seed.unit(), Unit::Bytes(16));
        assert_eq!(up.unit(), Unit::Bytes(1));
        assert_eq!(up.driver_scale(), 16);
        let raw = resolve_str("pcie_bdf_200/eventid=0x21,type=0x0/").unwrap();
        assert_eq!(raw.def, seed.def);
        let lane = resolve_str("pcie_bdf_200/EBUF_SKP_Add,lane=3/").unwrap();
        assert_eq!(lane.lane, Some(3));
    }

    #[test]
    fn bad_events_are_bad_input_with_suggestions() {
        let e = resolve_str("pcie_bdf_20/Rx_PCIe_TLP_Data_Payload/").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.message().contains("pcie_bdf_200"), "{e}");
        let e = resolve_str("pcie_bdf_200/Rx_PCIe_TLP_Payload/").unwrap_err();
        assert!(e.message().contains("Rx_PCIe_TLP_Data_Payload"), "{e}");
        for bad in [
            "pcie_bdf_200",
            "pcie_bdf_200/x",
            "/x/",
            "pcie_bdf_200//",
            "a/b/c/",
            "pcie_bdf_200/eventid=zz/",
        ] {
            let e = bad.parse::<EventSpec>().unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.message().contains(bad), "{e}");
        }
        assert!(resolve_str("pcie_bdf_200/EBUF_SKP_Add/").is_err());
        assert!(resolve_str("pcie_bdf_200/EBUF_SKP_Add,lane=4/").is_err());
        assert!(resolve_str("pcie_bdf_200/L0,color=1/").is_err());
    }

    #[test]
    fn event_lists_split_like_perf() {
        let g = parse_event_list(
            "pcie_bdf_200/EBUF_SKP_Add,lane=1/,{pcie_bdf_200/L0/,pcie_bdf_200/tx_ack_dllp/}",
        )
        .unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0][0].terms, vec![("lane".to_string(), 1)]);
        assert_eq!(g[1].len(), 2);
        assert_eq!(g[1][1].event.as_deref(), Some("tx_ack_dllp"));
        for bad in ["", "{pcie_bdf_200/L0/", "{}", "pcie_bdf_200/L0"] {
            assert_eq!(parse_event_list(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn one_time_based_event_per_port() {
        let rx = resolve_str("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/").unwrap();
        let tx = resolve_str("pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/").unwrap();
        let other = resolve_str("pcie_bdf_b00000/Tx_PCIe_TLP_Data_Payload/").unwrap();
        let ack = resolve_str("pcie_bdf_200/tx_ack_dllp/").unwrap();
        let mwr = resolve_str("pcie_bdf_200/rx_memory_write/").unwrap();
        assert!(!fits(&[&rx], &tx));
        assert!(fits(&[&rx], &other));
        assert!(fits(&[&rx, &ack], &mwr));
        assert!(!fits(&[&ack], &ack.clone()));
        let lane0 = resolve_str("pcie_bdf_200/EBUF_SKP_Add,lane=0/").unwrap();
        let lane1 = resolve_str("pcie_bdf_200/EBUF_SKP_Add,lane=1/").unwrap();
        assert!(!fits(&[&lane0], &lane1));
    }
}
