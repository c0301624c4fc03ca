//! The QEMU lab: turns a topology into a QEMU command line, builds a guest from Debian packages,
//! boots it and brings the guest's own view of the hierarchy back; and the measurements run in
//! such a guest or on a host (`bench p2p`; `bench mmio` is `Machine::mmio`).

pub(crate) mod argv;
pub(crate) mod check;
pub(crate) mod guest;
pub(crate) mod kernel;
pub(crate) mod oracle;
pub(crate) mod p2pcopy;
pub(crate) mod picture;
pub(crate) mod runner;
pub mod session;

pub use argv::{parse_qemu_version, plan, Disk, Limit, MachineOptions, QemuPlan, QEMU_VERSION};
pub use check::{boot_and_check, CheckReport};
pub use guest::{cache_dir, GuestFile};
pub use kernel::build as build_kernel;
pub use oracle::{boot_and_try, P2pReport, P2pRun};
pub use p2pcopy::{resolve_namespace, run as p2p_copy, CopyOptions, CopyReport, CopyResult};
pub use runner::Phase;

use crate::error::{Error, Result};
use crate::machine::read_spec;
use crate::topology::spec::MachineSpec;

/// Opens the spec a lab command names (a FILE.toml or a preset); bad input is tagged with the
/// run's first phase, like every other lab error.
pub fn load_spec(spec: &str) -> Result<MachineSpec> {
    read_spec(spec).map_err(|e| match e {
        Error::BadInput(msg) => Error::bad_input(format!("lab phase 'prepare': {msg}")),
        other => other,
    })
}

#[cfg(test)]
mod tests;
