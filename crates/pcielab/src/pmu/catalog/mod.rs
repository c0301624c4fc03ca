//! Event catalogs as data, one table per PMU family: the DesignWare/Yitian root-port PMU (every
//! event of the seed's time-based groups 0-1 and event groups 0-7, with the seed's mixed-case
//! names and the upstream `dwc_pcie_pmu` names), HiSilicon `hisi_pcie_pmu`, NVIDIA Grace
//! `nvidia_pcie_pmu` and the Intel IIO free-running counters of Skylake-SP and of Ice Lake and
//! later. Everything else (naming, counting rules, the simulator, the sysfs files a driver
//! writes: `driver_files`) reads these tables; no event is described anywhere else.
//! `tests/suite/pmu_driver_catalog.rs` compares them with the drivers in the installed kernel source.

mod event;
mod lookup;
mod tables;
#[cfg(test)]
mod tests;

pub(crate) use event::Group;
pub(crate) use event::Unit;
pub use event::{EventDef, Family};
pub use lookup::DriverFiles;
pub(crate) use lookup::{edit_distance, nearest};
