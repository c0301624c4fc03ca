//! pcielab: observe, model, control and emulate PCIe I/O on Linux.
//!
//! The library is a house of floors (docs/architecture.md, checked by `tests/suite/layering.rs`):
//! foundations ([`error`], [`input`], [`linux`], [`text`], `units`) under the PCIe
//! specification's facts ([`pcie`]), the maths over links ([`model`]), the tree ([`topology`]),
//! the kernels' rules for PMUs and resctrl ([`pmu`], [`qos`]), the simulator ([`sim`]), the one
//! dispatcher over every kind of machine ([`machine`]), and at the top watching ([`observe`]),
//! drawing ([`plot`]), QEMU guests ([`lab`]) and the report page and schemas ([`report`]).
//!
//! The entry points a program calls:
//! - [`machine::Machine`]: open `host`, `snapshot:DIR` or `sim:…` once, then ask it for its
//!   topology ([`machine::Machine::topology`]), counters ([`machine::Machine::counters`]),
//!   resctrl ([`machine::Machine::qos`]) or simulator ([`machine::Machine::simulator`]).
//! - [`model::sweep()`] and [`model::transfer::LinkParams`]: what a link carries per
//!   transfer size; [`topology::Topology::path_ceiling`]: a path's ceiling and limiting link.
//! - [`model::fit::fit`]: platform parameters from measurements, each judged fitted, bound or not
//!   determined; [`model::platform::PlatformModel`]: their predictions.
//! - [`topology::p2p::Report`]: the kernel's P2PDMA verdicts over a tree.
//! - [`observe::Observer`]: samples and rates of a machine over time (`top`, the exporter).
//! - [`qos::apply`]: a desired resctrl state planned, checked against the kernel's rules and
//!   applied all or nothing.
//! - [`text::json_text`]: any result as its tagged `--json` document, whose schema
//!   [`report::schema`] ships.
//!
//! ```no_run
//! use pcielab::machine::Machine;
//! let machine: Machine = "sim:yitian710".parse()?;
//! for function in machine.topology()?.functions() {
//!     if let Some(ceiling) = machine.topology()?.path_ceiling(function.bdf) {
//!         println!("{}: {:.0} MB/s, limited by {}", function.bdf, ceiling.achievable_mbps, ceiling.limiting);
//!     }
//! }
//! # Ok::<(), pcielab::Error>(())
//! ```

// The public face is what the CLI, benches, fuzz targets and integration tests use, reached
// through each area's module: its submodules are crate-private unless a caller names them as a
// namespace (`lab::session::run`), and the rest is re-exported by name (`pub use`). rustc checks
// the face stays that small (`unreachable_pub`), that a caller can name every type it is handed
// (`unnameable_types`) and that all of it is documented (`missing_docs`).
#![warn(unreachable_pub, unnameable_types, missing_docs)]

pub mod advise;
mod error;
pub mod input;
pub mod lab;
pub mod linux;
pub mod machine;
pub mod model;
pub mod observe;
pub mod pcie;
pub mod plot;
pub mod pmu;
pub mod qos;
pub mod report;
pub mod sim;
pub mod text;
pub mod topology;
mod units;

pub use error::{Error, Result};
