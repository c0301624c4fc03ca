//! PCIe performance-monitoring units: event catalogs per PMU family, counter semantics (width,
//! wrap, high-low-high reads), and a perf-like counting session (groups, multiplexing, scaling).
