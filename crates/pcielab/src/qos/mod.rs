//! resctrl (Intel RDT, AMD PQoS, Arm MPAM): the kernel's rules for schemata, control and monitor
//! groups ([`resctrl`], [`schemata`]), and backends for a host mount and a simulated machine.

pub mod apply;
pub mod backend;
pub mod cache;
pub(crate) mod engine;
pub mod host;
pub mod info;
pub mod monitor;
pub mod presets;
pub mod request;
pub mod resctrl;
pub mod scenario;
pub mod schemata;
pub mod sim;
pub mod view;
pub mod workload;
