//! The resctrl rules and both backends exercised through the calls the kernel's users make
//! (mkdir, schemata and tasks writes, monitor reads), each against the behaviour the kernel
//! documents: apply plans, group limits and membership, the host mount on a fixture tree,
//! schemata parsing, and the MPAM/resctrl article's trends on the simulated machines.

mod apply;
mod groups;
mod host;
mod schemata;
mod trends;
