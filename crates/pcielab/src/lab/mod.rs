//! The QEMU lab: turns a topology into a QEMU command line, builds a guest from Debian packages,
//! boots it and brings the guest's own view of the hierarchy back.

pub mod argv;
pub mod check;
pub mod guest;
pub mod kernel;
pub mod oracle;
pub mod p2pcopy;
pub mod runner;
pub mod session;
