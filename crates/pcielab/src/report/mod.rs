//! Rendering shared by commands: number formatting, aligned text tables, perf-compatible output,
//! plots.
