//! Checks over PCIe links and functions: trained speed/width against min(parent, child)
//! capability, MPS along the path, MRRS, ASPM on busy links with their exit latencies,
//! Extended/10-bit tags, Relaxed Ordering against the kernel's root-port quirks, AER correctable
//! errors and P2P pairs sent through the host by ACS. Each judges a link at its downstream
//! function, the way the kernel's "limited by" message names a link by the device below it.

mod aspm;
mod common;
mod features;
mod isolation;
mod payload;
mod training;

#[cfg(test)]
mod tests;

pub(super) use aspm::aspm_busy;
pub(super) use features::{ext_tag_off, relaxed_ordering, ten_bit_tag_off};
pub(super) use isolation::{acs_isolation, p2p_through_host};
pub(super) use payload::{mps_below_path, mps_mismatch, mrrs_small};
pub(super) use training::{aer_correctable, downtrained};
