//! The counters side of a machine, as one trait every machine's PMU access implements: the live
//! host through sysfs and perf_event_open (`pmu::host::HostCounters`), the simulator
//! (`sim::SimulatedPcie`), and a saved sysfs tree, whose DesignWare root ports can be listed but
//! not counted (`CatalogPmus`). `machine::Machine::counters` picks one; commands (`pmu list`,
//! `stat`) call it without knowing which. The trait lives here so that pmu/ depends on no
//! backend: the simulator implements it, not the other way round.

use std::path::Path;
use std::sync::atomic::AtomicBool;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::platform::PlatformModel;
use crate::pmu::hostlist::{HostListDocument, HostListing};
use crate::pmu::list::{list_document, only_pmu, render_list, CatalogListDocument};
use crate::pmu::stat::StatOutcome;
use crate::pmu::PmuDevice;

/// What `stat` was asked to do, whichever machine counts it.
pub struct StatRequest<'a> {
    /// The `-e` arguments as given (perf's grammar: comma lists, `{groups}`).
    pub events: &'a [String],
    /// `-a`: PCIe PMUs are uncore PMUs and count system-wide only.
    pub all_cpus: bool,
    /// Simulator: rotation period of time-shared events (`None`: perf's default, 4 ms); a
    /// host rotates at each PMU's own `perf_event_mux_interval_ms` and refuses this.
    pub mux_interval_ms: Option<u64>,
    /// `-I MS`: print counts every MS milliseconds.
    pub interval_ms: Option<u64>,
    /// Simulator: injected link bit-error rate (a host refuses it).
    pub ber: Option<f64>,
    /// The workload's argv, after `--`: a real command on a host, a simulated job on `sim:`.
    pub workload: &'a [String],
    /// Reads the files a simulated workload names (fio job files).
    pub read_file: &'a dyn Fn(&Path) -> Result<String>,
    /// The platform model whose streaming DMA prediction is printed beside payload rates
    /// (`--platform`); `None`: the `sim:` spec's own `[platform]`, if it has one.
    pub platform: Option<&'a PlatformModel>,
    /// Raised by the caller's SIGINT handler while a host workload runs (the CLI registers one
    /// with signal-hook). Ctrl-C reaches the workload from the terminal and its end ends the
    /// count; the flag only tells the result it was interrupted. The library installs no
    /// handler: without one, Ctrl-C ends the calling process as it would anyway.
    pub interrupt: Option<&'a AtomicBool>,
}

/// A finished `stat` run.
pub struct StatDone {
    /// The events counted, their readings and what each reading says.
    pub outcome: StatOutcome,
    /// What a simulated workload reports (fio's summary), for stdout before the counts; empty
    /// for a real workload, which printed its own output.
    pub workload_report: String,
    /// The `workload` member of the `--json` document.
    pub workload_json: Value,
    /// Lines to tell the user before the counts (wrap carrying, wrap risk).
    pub notes: Vec<String>,
    /// The workload's exit status, passed through as perf does.
    pub exit_code: i32,
}

/// How a `stat` run ended.
pub enum StatEnd {
    /// The counting ran; its result.
    Counted(StatDone),
    /// The workload's program does not exist: nothing was counted; perf exits 127.
    WorkloadNotFound(String),
}

/// The `pmu list --json` document: a host's registered PMUs, or a catalog machine's.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PmuListDocument {
    /// A host's list: sysfs PMUs with their events and the drivers that would add more.
    Host(HostListDocument),
    /// A snapshot's or lspci listing's list: the catalog PMUs its root ports would have.
    Catalog(CatalogListDocument),
}

/// What `pmu list` shows for a machine.
pub enum PmuListing {
    /// Every PMU the kernel registered, PCIe PMUs placed at their root ports.
    Host(HostListing),
    /// PMUs from pcielab's catalogs (simulated or snapshot machines).
    Catalog(Vec<PmuDevice>),
}

impl PmuListing {
    /// The `--json` document (docs/pmu.md); `machine` names the machine.
    pub fn document(&self, machine: &str) -> PmuListDocument {
        match self {
            PmuListing::Host(listing) => PmuListDocument::Host(listing.document()),
            PmuListing::Catalog(pmus) => PmuListDocument::Catalog(list_document(machine, pmus)),
        }
    }

    /// The text form; `detail` (one PMU asked for) lists a host PMU's formats and events.
    pub fn render(&self, machine: &str, detail: bool) -> String {
        match self {
            PmuListing::Host(listing) => listing.render(detail),
            PmuListing::Catalog(pmus) => render_list(machine, pmus),
        }
    }
}

/// A machine's performance counters.
pub trait Counters {
    /// The machine's PCIe PMUs that pcielab has an event catalog for, each placed at its
    /// (first) root port: what `top` and the exporter count.
    fn pcie_pmus(&self) -> Result<Vec<PmuDevice>>;
    /// The machine's PMUs; only the one named `only` (any of its names) when given, bad input
    /// naming the nearest when there is none.
    fn list(&self, only: Option<&str>) -> Result<PmuListing>;
    /// Each event's perf_event_attr (type, config, config1, config2), one line per event,
    /// without opening anything; bad input when the kernel would refuse any of them.
    fn dry_run(&self, events: &[String]) -> Result<String>;
    /// Counts the request's events around its workload.
    fn stat(&self, request: &StatRequest) -> Result<StatEnd>;
}

/// `--dry-run` on a machine without perf_event_attr encodings (only a host has them).
pub(crate) fn dry_run_is_for_hosts() -> Error {
    Error::bad_input(
        "--dry-run shows the perf_event_attr of host events: use it with --machine host",
    )
}

/// The catalog PMUs of a machine that has no counters to read: a saved sysfs tree or lspci
/// output.
pub(crate) struct CatalogPmus {
    /// The machine, for messages (`snapshot:DIR`).
    pub(crate) machine: String,
    pub(crate) pmus: Vec<PmuDevice>,
}

impl CatalogPmus {
    fn no_counters(&self) -> Error {
        Error::bad_input(format!(
            "{} is a saved machine (sysfs tree or lspci output): it lists the PMUs its root \
             ports would have, but has no counters to read; count with --machine host or \
             --machine sim:PRESET",
            self.machine
        ))
    }
}

impl Counters for CatalogPmus {
    fn pcie_pmus(&self) -> Result<Vec<PmuDevice>> {
        Ok(self.pmus.clone())
    }

    fn list(&self, only: Option<&str>) -> Result<PmuListing> {
        Ok(PmuListing::Catalog(only_pmu(self.pmus.clone(), only)?))
    }

    fn dry_run(&self, _events: &[String]) -> Result<String> {
        Err(dry_run_is_for_hosts())
    }

    fn stat(&self, _request: &StatRequest) -> Result<StatEnd> {
        Err(self.no_counters())
    }
}
