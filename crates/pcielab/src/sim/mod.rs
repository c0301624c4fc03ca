//! The simulator: runs workloads (fio-compatible jobs, endpoint DMA sweeps) over a
//! [`crate::topology::Topology`] with a simulated clock, and exposes the same counters a real
//! host's PMUs and resctrl monitors would.

pub mod fio;
