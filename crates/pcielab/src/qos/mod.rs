//! resctrl (Intel RDT, AMD PQoS, Arm MPAM): the kernel's rules for schemata, control and monitor
//! groups ([`resctrl`], [`schemata`]), and backends for a host mount and a simulated machine.

pub mod cpuset;
pub mod info;
pub mod presets;
pub mod resctrl;
pub mod schemata;
