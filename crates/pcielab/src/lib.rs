//! pcielab: observe, model, control and emulate PCIe I/O on Linux.
//!
//! The library is organised around four nouns (see `docs/architecture.md`): a [`machine`] is where
//! facts come from (live host, saved sysfs snapshot, or the simulator); it yields a [`topology`];
//! [`pmu`] counts traffic on it; [`qos`] partitions cache and memory bandwidth. The [`model`]
//! (pure link/path math over [`pcie`] facts) sits under all of them, [`sim`] drives workloads
//! through a topology, [`lab`] turns a topology into a QEMU guest, and [`report`] renders results.

pub mod advise;
pub mod error;
pub mod input;
pub mod lab;
pub mod machine;
pub mod model;
pub mod observe;
pub mod pcie;
pub mod plot;
pub mod pmu;
pub mod qos;
pub mod report;
pub mod sim;
pub mod topology;

pub use error::{Error, Result};
