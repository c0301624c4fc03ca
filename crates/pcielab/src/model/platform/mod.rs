//! The platform model: what limits a device or a CPU beyond the link. The link model
//! ([`super::transfer`]) stays the pure bound underneath; this module composes it with the root
//! complex and memory side (posted-write acceptance, completion generation, read latency with a
//! fixed and a per-byte term), an endpoint's DMA engine (per-transfer setup, read requests in
//! flight, descriptor traffic), the CPU's cost per I/O, MMIO from a CPU (posted stores with an
//! issue interval, non-posted loads bound by latency, access width, write-combining) and
//! interrupt delivery (MSI, ELBI). Every parameter has a unit, a default and the source of that
//! default (`PARAMS`); values live in a spec's `[platform]` table (docs/calibration.md) and
//! are fitted from measurements by [`super::fit`]. Pure functions, no I/O.

mod costs;
mod params;
mod table;
#[cfg(test)]
mod tests;

pub use costs::DmaDirection;
pub(crate) use costs::{FittedCell, PlatformDma, Provenance};
pub use costs::{IrqKind, IrqPrediction, MmioOp, PlatformModel};
pub use params::P;
pub(crate) use params::{ParamSpec, PARAMS};
pub use table::parse_platform;
pub(crate) use table::MOVED_SIM_KEYS;
