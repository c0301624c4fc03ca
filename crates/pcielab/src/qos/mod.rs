//! resctrl (Intel RDT, AMD PQoS, Arm MPAM): the kernel's rules for schemata, control and monitor
//! groups, and backends for a host mount and a simulated machine.
