//! The QEMU lab: turns a topology into a QEMU command line, builds a guest from Debian packages,
//! boots it and brings the guest's own view of the hierarchy back; and the measurements run in
//! such a guest or on a host (`bench p2p`; `bench mmio` is `Machine::mmio`).

pub mod argv;
pub mod check;
pub mod guest;
pub mod kernel;
pub mod oracle;
pub mod p2pcopy;
pub(crate) mod picture;
pub(crate) mod runner;
pub mod session;

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
mod tests {
    use super::*;

    #[test]
    fn spec_is_a_preset_or_a_file_and_errors_name_the_phase() {
        let seed = load_spec("qemu-seed").unwrap();
        assert!(!seed.topology.functions().is_empty());
        let unknown = load_spec("no-such-preset").unwrap_err();
        assert_eq!(unknown.exit_code(), 2);
        assert!(
            unknown
                .to_string()
                .starts_with("lab phase 'prepare': unknown preset 'sim:no-such-preset'"),
            "{unknown}"
        );
        let missing = load_spec("/nonexistent/board.toml").unwrap_err();
        assert!(
            missing.to_string().starts_with(
                "lab phase 'prepare': spec file /nonexistent/board.toml: No such file"
            ),
            "{missing}"
        );
    }
}
