//! The analytic model: what a link or a path can carry, as pure functions over [`crate::pcie`]
//! facts — raw rates, TLP/DLLP/SKP overheads, reads and writes versus transfer size, path
//! ceilings, and P2P distance rules. No I/O.

pub mod fit;
pub(crate) mod io;
pub(crate) mod latency;
pub(crate) mod measurements;
pub(crate) mod path;
pub mod platform;
// The oracle the tuned transfer model is tested and benchmarked against: built for the crate's
// own tests, integration tests and benches only (the `test-oracles` feature, Cargo.toml).
#[cfg(any(test, feature = "test-oracles"))]
pub mod reference;
mod row_time;
pub(crate) mod sweep;
#[cfg(test)]
mod tests;
pub mod transfer;

pub use io::{LinkPower, L0S_ENTRY_NS, L1_ENTRY_NS};
pub use measurements::{parse_measurements, Measurement, Workload};
pub use path::PathCeiling;
pub use sweep::{parse_completion_size, parse_sizes, sweep, SizeSweep, DEFAULT_SIZES};
