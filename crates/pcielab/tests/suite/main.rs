//! The library's integration tests, one module per area, linked into one binary: each used to be
//! its own binary linking the whole library, which dominated the suite's build time.
//! `spec_memory` and `lspci_memory` stay separate: each installs a counting global allocator.

mod calibration;
mod fit_properties;
mod fuzz_regressions;
mod layering;
mod observe_host_pmu;
mod qos_groups;
