//! resctrl (Intel RDT, AMD PQoS, Arm MPAM): the kernel's rules for schemata, control and monitor
//! groups ([`resctrl`], [`schemata`]), and backends for a host mount and a simulated machine.

pub(crate) mod apply;
pub(crate) mod backend;
pub mod cache;
pub(crate) mod engine;
pub(crate) mod host;
pub(crate) mod info;
pub(crate) mod monitor;
pub(crate) mod presets;
pub(crate) mod request;
pub(crate) mod resctrl;
pub(crate) mod scenario;
pub(crate) mod schemata;
pub(crate) mod sim;
#[cfg(test)]
mod tests;
pub(crate) mod view;
pub(crate) mod workload;

pub use apply::{
    apply_file, check, parse_desired, perform_all, plan, DesiredGroup, PlannedOp,
    Report as ApplyReport,
};
pub use backend::{MonReading, Op, QosBackend, QosOptions};
pub use host::HostResctrl;
pub use info::{CacheResource, Info, KernelRules, MbResource, MonResource};
pub use monitor::monitor;
pub use presets::{Preset, MPAM_SEED, PRESETS, RDT_XEON8163};
pub use request::{GroupSettings, Request};
pub use resctrl::{CtrlGroup, GroupRef, MonGroup, Resctrl};
pub use scenario::{Line, Outcome, Scenario};
pub use schemata::Schemata;
pub use sim::{MonCounter, SimState, SimulatedResctrl};
pub use view::{monitor_text, show, MonitorDocument, MonitorRow, ShowView};
pub use workload::{parse as parse_workload, AccessStream, Pattern, Workload};
