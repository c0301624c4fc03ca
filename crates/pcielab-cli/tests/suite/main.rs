//! The CLI's integration tests, one module per command or area, linked into one binary (each used to
//! be its own binary, and linking them dominated the suite's build time). Run one area with
//! `cargo test -p pcielab-cli --test suite AREA::`.

mod advise;
mod advise_guest;
mod advise_undo;
mod common;
mod exporter;
mod exporter_host_pmu;
mod exporter_scale;
mod fit;
mod host_perf;
mod install;
mod json_schemas;
mod lab;
mod lab_observe;
mod lspci;
mod model;
mod packages;
mod plots;
mod qos;
mod report;
mod robust;
mod robust_io;
mod robust_surfaces;
mod stat;
mod svg_reading;
mod top;
mod topo;
