//! The analytic model: what a link or a path can carry, as pure functions over [`crate::pcie`]
//! facts — raw rates, TLP/DLLP/SKP overheads, reads and writes versus transfer size, path
//! ceilings, and P2P distance rules. No I/O.

pub mod fit;
pub mod io;
pub(crate) mod latency;
pub mod measurements;
pub(crate) mod path;
pub mod platform;
// The oracle the tuned transfer model is tested and benchmarked against: built for the crate's
// own tests, integration tests and benches only (the `test-oracles` feature, Cargo.toml).
#[cfg(any(test, feature = "test-oracles"))]
pub mod reference;
mod row_time;
pub mod sweep;
pub mod transfer;
