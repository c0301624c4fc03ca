//! What `pmu list --machine host` reports: every PMU the kernel registered, PCIe PMUs first
//! with the root ports they count (and those ports' lanes, speed and link ceiling), each PMU's
//! type, cpumask, format fields and event aliases; and, when the host has no PCIe PMU, where
//! pcielab looked and which driver, kernel option, kernel version and CPUs would provide one,
//! with the current `perf_event_paranoid`.

use std::path::Path;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::pmu::catalog::{nearest, Family, Unit};
use crate::pmu::kernel::KernelVersion;
use crate::pmu::placement::{place_in, PortPlacement};
use crate::pmu::rules::driver_kernel;
use crate::pmu::sysfs::{
    discover, perf_event_paranoid, PcieDriver, PmuEvent, SysfsPmu, EVENT_SOURCE_DIR,
};
use crate::pmu::PmuDevice;
use crate::topology::sysfs::read_sysfs;

/// The PCIe PMU drivers pcielab knows: name pattern, driver, kernel option, first kernel,
/// and the CPUs whose root complexes have the hardware.
pub(crate) const PROVIDERS: &[(&str, &str, &str, &str, &str)] = &[
    (
        "dwc_rootport_<hex>",
        "dwc_pcie_pmu",
        "CONFIG_DWC_PCIE_PMU",
        "6.8 (Ampere root ports from 6.13)",
        "Alibaba Yitian 710 and Qualcomm root ports with the DesignWare RAS DES capability; Ampere from 6.13; no kernel binds Rockchip's",
    ),
    (
        "pcie_bdf_<hex>",
        "Alibaba's downstream Yitian driver (Anolis / Alibaba Cloud Linux kernels)",
        "vendor kernel option",
        "vendor kernels",
        "Alibaba Yitian 710",
    ),
    (
        "hisi_pcie<sicl>_core<n>",
        "hisi_pcie_pmu",
        "CONFIG_HISI_PCIE_PMU",
        "5.19",
        "HiSilicon Kunpeng (Hip09 and later)",
    ),
    (
        "uncore_iio_free_running_<n>",
        "intel_uncore",
        "CONFIG_PERF_EVENTS_INTEL_UNCORE",
        "4.18 for Skylake-SP; Ice Lake-SP, Sapphire Rapids and later on newer kernels",
        "Intel Xeon Scalable (bare metal: most hypervisors hide uncore PMUs)",
    ),
    (
        "nvidia_pcie_pmu_<socket>",
        "arm_cspmu_module + nvidia_cspmu",
        "CONFIG_NVIDIA_CORESIGHT_PMU_ARCH_SYSTEM_PMU",
        "6.2",
        "NVIDIA Grace (Grace CPU and Grace Hopper superchips)",
    ),
];

/// The `pmu list --machine host --json` document: every PMU the kernel registered.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HostListDocument {
    /// Always `host`.
    pub(crate) machine: &'static str,
    /// Where the PMUs were read (`/sys/bus/event_source/devices`).
    pub(crate) event_source_dir: String,
    /// `null` when /proc/sys/kernel/perf_event_paranoid is unreadable.
    pub(crate) perf_event_paranoid: Option<i32>,
    /// How many of `pmus` are PCIe PMUs.
    pub(crate) pcie_pmus: usize,
    /// PCIe PMUs first.
    pub(crate) pmus: Vec<HostPmuDocument>,
    /// With no PCIe PMU: the drivers that would provide one; `null` otherwise.
    pub(crate) providers: Option<Vec<ProviderDocument>>,
}

/// One registered PMU.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct HostPmuDocument {
    pub(crate) name: String,
    /// The perf_event_attr type the kernel assigned.
    #[serde(rename = "type")]
    pub(crate) type_id: u32,
    /// The PCIe PMU driver its name identifies; `null` for other PMUs.
    pub(crate) driver: Option<PcieDriver>,
    /// The kernel whose rules the PCIe PMU follows.
    pub(crate) kernel: Option<String>,
    pub(crate) cpumask: Vec<u32>,
    pub(crate) mux_interval_ms: Option<u64>,
    /// PCIe PMUs: the root ports it counts.
    pub(crate) root_ports: Option<Vec<Bdf>>,
    pub(crate) lanes: Option<u8>,
    #[serde(rename = "link_achievable_MBps")]
    pub(crate) link_achievable_mbps: Option<f64>,
    /// Format field → the config bits it occupies (`config:0-7`).
    pub(crate) formats: BTreeMap<String, String>,
    pub(crate) events: Vec<HostEventDocument>,
}

/// One event alias a PMU's sysfs `events/` directory lists.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct HostEventDocument {
    pub(crate) name: String,
    /// Its terms, `name=0x..` (`name=?` where the user supplies the value).
    pub(crate) encoding: String,
    /// perf multiplies each count by this (the `.scale` file); `null` when there is none.
    pub(crate) scale: Option<f64>,
    /// What one (scaled) count stands for: the `.unit` file when the driver writes one, else
    /// `bytes` or `16 bytes` for a data-payload event (per the driver's scaling), the catalog
    /// unit of a PCIe PMU's event (`cycles`, `events`, `raw`), or `count`.
    pub(crate) unit: String,
}

/// A driver that provides PCIe PMUs, from [`PROVIDERS`].
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct ProviderDocument {
    pub(crate) pmu: &'static str,
    pub(crate) driver: &'static str,
    pub(crate) kernel_option: &'static str,
    pub(crate) kernel: &'static str,
    pub(crate) cpus: &'static str,
}

/// The host's PMUs with each PCIe PMU's placement.
pub struct HostListing {
    pub(crate) dir: std::path::PathBuf,
    pub(crate) paranoid: Option<i32>,
    /// Running as root: perf_event_paranoid does not limit this process, so no advice is due.
    pub(crate) privileged: bool,
    pub(crate) pmus: Vec<(SysfsPmu, Option<PortPlacement>)>,
    /// The running kernel (`uname -r`), when readable: whose PMU rules apply.
    pub(crate) running: Option<KernelVersion>,
}

/// Discovers the PMUs under `root`, keeps the one named `only` when given (bad input naming
/// the nearest when there is none), and places PCIe PMUs in the live topology.
pub(crate) fn host_listing(root: &Path, only: Option<&str>) -> Result<HostListing> {
    let mut pmus = discover(root)?;
    if let Some(name) = only {
        if !pmus.iter().any(|p| p.name == name) {
            let near = nearest(name, pmus.iter().map(|p| p.name.as_str()));
            return Err(Error::bad_input(format!(
                "--pmu {name}: no such PMU under {}; the nearest names here: {} (give one of \
                 them to --pmu, or run `pcielab pmu list` without --pmu to see every PMU and, \
                 when none counts PCIe, which driver and kernel would provide one)",
                root.join(EVENT_SOURCE_DIR).display(),
                near.join(", ")
            )));
        }
        pmus.retain(|p| p.name == name);
    }
    let topology = read_sysfs(&root.join("sys/bus/pci")).ok();
    let mut placed: Vec<(SysfsPmu, Option<PortPlacement>)> = pmus
        .into_iter()
        .map(|p| {
            let placement = p
                .place
                .as_ref()
                .zip(topology.as_ref())
                .map(|(place, topo)| place_in(place, topo));
            (p, placement)
        })
        .collect();
    placed.sort_by_key(|(p, _)| (p.driver.is_none(), p.name.clone()));
    Ok(HostListing {
        dir: root.join(EVENT_SOURCE_DIR),
        paranoid: perf_event_paranoid(root),
        // SAFETY: geteuid has no preconditions and cannot fail.
        privileged: unsafe { libc::geteuid() } == 0,
        pmus: placed,
        running: KernelVersion::of_host(root).ok(),
    })
}

/// The host's PCIe PMUs as catalog devices (the families pcielab has catalogs for), placed at
/// their first root port.
pub(crate) fn host_pcie_devices(root: &Path) -> Result<Vec<PmuDevice>> {
    let listing = host_listing(root, None)?;
    Ok(listing
        .pmus
        .into_iter()
        .filter_map(|(p, placement)| {
            let family = catalog_family(&p)?;
            Some(PmuDevice {
                name: p.name,
                aliases: Vec::new(),
                family,
                root_port: placement
                    .as_ref()
                    .and_then(|pl| pl.root_ports.first().copied()),
                lanes: placement.and_then(|pl| pl.lanes).unwrap_or(1),
            })
        })
        .collect())
}

/// The catalog a PCIe PMU's driver follows; `None` for PMUs that do not count PCIe.
fn catalog_family(p: &SysfsPmu) -> Option<Family> {
    Some(match p.driver? {
        PcieDriver::DwcUpstream | PcieDriver::DwcSeed => Family::DwcRootPort,
        PcieDriver::HisiPcie => Family::HisiPcie,
        // Skylake-SP's table is the one with outbound bandwidth counters.
        PcieDriver::IntelIio if p.event("bw_out_port0").is_some() => Family::IntelIioSkylake,
        PcieDriver::IntelIio => Family::IntelIio,
        PcieDriver::NvidiaPcie => Family::NvidiaPcie,
    })
}

/// What one count of `event` stands for, as perf prints it: the `.unit` file when the driver
/// writes one (counts times `.scale`); else the bytes per count of a data-payload event (the
/// upstream DWC driver multiplies by 16 so a count is a byte, the Yitian guide's vendor driver
/// does not); else the unit the PMU's catalog gives the event; else a plain `count`.
fn event_unit(pmu: &SysfsPmu, event: &PmuEvent) -> String {
    if let Some(unit) = &event.unit {
        return unit.clone();
    }
    if let Some(bytes) = pmu.driver.and_then(|d| d.payload_unit_bytes(&event.name)) {
        return Unit::Bytes(bytes).label();
    }
    catalog_family(pmu)
        .and_then(|family| family.find(&event.name))
        .map_or_else(|| "count".to_string(), |def| def.unit.label())
}

fn encoding(terms: &[crate::pmu::sysfs::AliasTerm]) -> String {
    terms
        .iter()
        .map(|t| match t.value {
            Some(v) => format!("{}={v:#x}", t.name),
            None => format!("{}=?", t.name),
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl HostListing {
    /// The kernel whose rules a PCIe PMU's driver follows, when the running one is known.
    fn kernel_of(&self, pmu: &SysfsPmu) -> Option<String> {
        pmu.driver?;
        self.running.map(|v| driver_kernel(pmu, v).to_string())
    }

    fn pcie_count(&self) -> usize {
        self.pmus.iter().filter(|(p, _)| p.driver.is_some()).count()
    }

    /// The `--json` document (docs/pmu.md).
    pub(crate) fn document(&self) -> HostListDocument {
        HostListDocument {
            machine: "host",
            event_source_dir: self.dir.display().to_string(),
            perf_event_paranoid: self.paranoid,
            pcie_pmus: self.pcie_count(),
            pmus: self
                .pmus
                .iter()
                .map(|(p, placement)| HostPmuDocument {
                    name: p.name.clone(),
                    type_id: p.type_id,
                    driver: p.driver,
                    kernel: self.kernel_of(p),
                    cpumask: p.cpus.clone(),
                    mux_interval_ms: p.mux_interval_ms,
                    root_ports: placement.as_ref().map(|pl| pl.root_ports.clone()),
                    lanes: placement.as_ref().and_then(|pl| pl.lanes),
                    link_achievable_mbps: placement.as_ref().and_then(|pl| pl.ceiling_mbps),
                    formats: p
                        .formats
                        .iter()
                        .map(|f| (f.name.clone(), f.layout()))
                        .collect(),
                    events: p
                        .events
                        .iter()
                        .map(|e| HostEventDocument {
                            name: e.name.clone(),
                            encoding: encoding(&e.terms),
                            scale: e.scale,
                            unit: event_unit(p, e),
                        })
                        .collect(),
                })
                .collect(),
            providers: (self.pcie_count() == 0).then(providers),
        }
    }

    /// The text form: each PCIe PMU with a table of its events and their units; `detail`
    /// (with `--pmu`) also every format field, and the events of a PMU that is not PCIe.
    pub(crate) fn render(&self, detail: bool) -> String {
        let mut out = String::new();
        for (p, placement) in self
            .pmus
            .iter()
            .filter(|(p, _)| p.driver.is_some() || detail)
        {
            out += &pmu_line(p, placement.as_ref(), self.kernel_of(p));
            if detail {
                for f in &p.formats {
                    out += &format!("    format {:<16} {}\n", f.name, f.layout());
                }
            }
            if !p.events.is_empty() {
                out += &format!("    {:<32} {:<40} UNIT\n", "EVENT", "ENCODING");
            }
            for e in &p.events {
                let mut line = format!(
                    "    {:<32} {:<40} {}",
                    e.name,
                    encoding(&e.terms),
                    event_unit(p, e)
                );
                if let Some(scale) = e.scale {
                    line += &format!(" (count x {scale})");
                }
                out += &line;
                out.push('\n');
            }
        }
        if self.pcie_count() == 0 && !detail {
            out += &format!(
                "host: no PCIe PMUs under {} (looked for dwc_rootport_*, pcie_bdf_*, \
                 hisi_pcie*_core*, uncore_iio_free_running_*, nvidia_pcie_pmu_*).\n\
                 What would provide one:\n",
                self.dir.display()
            );
            for (name, driver, option, kernel, cpus) in PROVIDERS {
                out += &format!("  {name}: driver {driver}, {option}, Linux {kernel}; on {cpus}\n");
            }
        }
        let others: Vec<&str> = self
            .pmus
            .iter()
            .filter(|(p, _)| p.driver.is_none())
            .map(|(p, _)| p.name.as_str())
            .collect();
        if !detail && !others.is_empty() {
            out += &format!(
                "Other PMUs here (count them with -e PMU/EVENT/; details with --pmu NAME): {}\n",
                others.join(", ")
            );
        }
        out += &match self.paranoid {
            Some(p) if self.privileged => {
                format!("perf_event_paranoid is {p}; running as root, system-wide counting is allowed\n")
            }
            Some(p) => format!(
                "perf_event_paranoid is {p}: system-wide counting needs root, CAP_PERFMON, or \
                 a value <= 0\n"
            ),
            None => "perf_event_paranoid: unreadable (no /proc/sys/kernel/perf_event_paranoid)\n"
                .to_string(),
        };
        out
    }
}

fn pmu_line(p: &SysfsPmu, placement: Option<&PortPlacement>, kernel: Option<String>) -> String {
    let mut line = format!("{} (type {})", p.name, p.type_id);
    if let Some(kernel) = kernel {
        line += &format!(" [kernel {kernel} rules]");
    }
    if let Some(driver) = p.driver {
        line += &format!(
            ": {}",
            serde_json::to_value(driver)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        );
    }
    match placement {
        Some(pl) if !pl.root_ports.is_empty() => {
            let ports: Vec<String> = pl.root_ports.iter().map(|b| b.to_string()).collect();
            line += &format!(", root port {}", ports.join(" "));
            if let Some(lanes) = pl.lanes {
                line += &format!(", {lanes} lanes");
            }
        }
        Some(_) => line += ", no matching root port in /sys/bus/pci",
        None => {}
    }
    if !p.cpus.is_empty() {
        let cpus: Vec<String> = p.cpus.iter().map(|c| c.to_string()).collect();
        line += &format!(", cpumask {}", cpus.join(","));
    }
    line + &format!(", {} events\n", p.events.len())
}

fn providers() -> Vec<ProviderDocument> {
    PROVIDERS
        .iter()
        .map(
            |&(pmu, driver, kernel_option, kernel, cpus)| ProviderDocument {
                pmu,
                driver,
                kernel_option,
                kernel,
                cpus,
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write_pmu(root: &Path, name: &str, events: &[(&str, &str)]) {
        let dir = root.join(EVENT_SOURCE_DIR).join(name);
        fs::create_dir_all(dir.join("events")).unwrap();
        fs::write(dir.join("type"), "42\n").unwrap();
        for (file, text) in events {
            fs::write(dir.join("events").join(file), text).unwrap();
        }
    }

    #[test]
    fn every_event_shows_what_one_count_stands_for() {
        let root = tempfile::tempdir().unwrap();
        // The upstream DWC driver scales payload counts to bytes; the Yitian guide's vendor
        // driver reports 16-byte units; Intel IIO writes .scale and .unit files.
        write_pmu(
            root.path(),
            "dwc_rootport_10",
            &[
                ("rx_pcie_tlp_data_payload", "eventid=0x21,type=0x0\n"),
                ("L1", "eventid=0x04,type=0x0\n"),
                ("tx_ack_dllp", "eventid=0x600,type=0x1,lane=?\n"),
            ],
        );
        write_pmu(
            root.path(),
            "pcie_bdf_200",
            &[("Rx_PCIe_TLP_Data_Payload", "eventid=0x21,type=0x0\n")],
        );
        write_pmu(
            root.path(),
            "uncore_iio_free_running_0",
            &[
                ("bw_in_port0", "event=0xff,umask=0x20\n"),
                ("bw_in_port0.scale", "3.814697265625e-6\n"),
                ("bw_in_port0.unit", "MiB\n"),
            ],
        );
        let listing = host_listing(root.path(), None).unwrap();
        let text = listing.render(false);
        let unit_of = |pmu: &str, event: &str| {
            let block = &text[text.find(&format!("{pmu} (type")).unwrap()..];
            let line = block
                .lines()
                .find(|l| l.split_whitespace().next() == Some(event))
                .unwrap_or_else(|| panic!("{event} of {pmu}: {text}"));
            line.split_whitespace()
                .skip(2)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            unit_of("dwc_rootport_10", "rx_pcie_tlp_data_payload"),
            "bytes"
        );
        assert_eq!(unit_of("dwc_rootport_10", "L1"), "cycles");
        assert_eq!(unit_of("dwc_rootport_10", "tx_ack_dllp"), "events");
        assert_eq!(
            unit_of("pcie_bdf_200", "Rx_PCIe_TLP_Data_Payload"),
            "16 bytes"
        );
        assert_eq!(
            unit_of("uncore_iio_free_running_0", "bw_in_port0"),
            "MiB (count x 0.000003814697265625)"
        );
        let doc = serde_json::to_value(listing.document()).unwrap();
        let vendor = doc["pmus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "pcie_bdf_200")
            .unwrap();
        assert_eq!(vendor["events"][0]["unit"], "16 bytes");
    }

    #[test]
    fn without_pcie_pmus_it_says_where_it_looked_and_what_would_help() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(EVENT_SOURCE_DIR).join("msr");
        fs::create_dir_all(dir.join("events")).unwrap();
        fs::write(dir.join("type"), "9\n").unwrap();
        fs::write(dir.join("events/tsc"), "event=0x00\n").unwrap();
        fs::create_dir_all(root.path().join("proc/sys/kernel")).unwrap();
        fs::write(
            root.path().join("proc/sys/kernel/perf_event_paranoid"),
            "2\n",
        )
        .unwrap();
        let listing = host_listing(root.path(), None).unwrap();
        let text = listing.render(false);
        assert!(text.contains("no PCIe PMUs under"), "{text}");
        assert!(text.contains("CONFIG_DWC_PCIE_PMU, Linux 6.8"), "{text}");
        assert!(
            text.contains("Other PMUs here") && text.contains("msr"),
            "{text}"
        );
        assert!(text.contains("perf_event_paranoid is 2"), "{text}");
        // The advice is for those it limits: as root there is nothing to lift.
        let mut as_user = host_listing(root.path(), None).unwrap();
        as_user.privileged = false;
        assert!(as_user.render(false).contains("needs root, CAP_PERFMON"));
        let mut as_root = as_user;
        as_root.privileged = true;
        let text = as_root.render(false);
        assert!(
            !text.contains("needs root") && text.contains("running as root"),
            "{text}"
        );
        let doc = serde_json::to_value(listing.document()).unwrap();
        assert_eq!(doc["pcie_pmus"], 0);
        assert_eq!(doc["providers"].as_array().unwrap().len(), PROVIDERS.len());
        let one = host_listing(root.path(), Some("msr")).unwrap().render(true);
        let tsc = one.lines().find(|l| l.contains(" tsc ")).unwrap();
        assert!(
            tsc.contains("event=0x0") && tsc.trim_end().ends_with("count"),
            "{one}"
        );
        let e = host_listing(root.path(), Some("mrs")).err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.message().contains("the nearest names here: msr"), "{e}");
        assert!(
            e.message().contains("run `pcielab pmu list` without --pmu"),
            "{e}"
        );
    }
}
