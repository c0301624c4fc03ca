//! Peer-to-peer DMA rules as Linux applies them (drivers/pci/p2pdma.c, 6.x): the distance between
//! a provider (the function whose memory is used, e.g. an NVMe CMB) and a client (the function
//! that DMAs into it), and the kernel's verdict — bus addresses through a common upstream bridge,
//! mapped through the host bridge, or refused — with the reason. The CPU vendor/family is an input
//! because the kernel exempts AMD Zen and later from the host-bridge whitelist. No I/O.

mod groups;
mod report;
mod rules;
#[cfg(test)]
mod tests;

pub(crate) use groups::group_run;
pub use groups::{group_verdicts, groups, Group, GroupVerdict};
pub(crate) use report::group_cells;
pub use report::{to_text, Report};
pub(crate) use rules::has_acs_redirect;
pub(crate) use rules::verdict;
pub use rules::{matrix, Cpu, Verdict};
pub(crate) use rules::{MapType, Reason};
