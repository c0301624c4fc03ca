//! `pcielab bench mmio`: CPU load/store throughput to a device BAR, as the Rockchip PCIe
//! performance guide's §5 measures it (`resource_mmap_test.c`), asked of a machine
//! ([`Machine::mmio`](super::Machine::mmio)): a host measures it by mapping the BAR
//! (`host_mmio.rs`), a simulated machine predicts it with its platform model (`sim_mmio.rs`).
//! This file holds the request and the report both give.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::pcie::Bdf;

/// What the threads do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MmioOperation {
    /// CPU stores into the BAR.
    Store,
    /// CPU loads from the BAR, each compared with the store pattern.
    Load,
    /// `memcpy` host memory into the BAR, then out of it (two results, as the Rockchip guide's
    /// memset_io / memcpy_fromio row).
    Memcpy,
}

impl MmioOperation {
    /// `--op` text (`store`, `load`, `memcpy`) as an operation; bad input names the valid ones.
    pub fn parse(name: &str) -> Result<MmioOperation> {
        match name {
            "store" => Ok(MmioOperation::Store),
            "load" => Ok(MmioOperation::Load),
            "memcpy" => Ok(MmioOperation::Memcpy),
            _ => Err(Error::bad_input(format!(
                "--op {name}: expected store, load or memcpy"
            ))),
        }
    }
}

/// Access widths the benchmark issues (bytes per CPU access).
pub(crate) const WIDTHS: [u32; 4] = [4, 8, 16, 64];

/// One `bench mmio` request.
#[derive(Debug, Clone)]
pub struct MmioOptions {
    /// The function whose BAR is used.
    pub bdf: Bdf,
    /// The BAR's index (0 to 5).
    pub bar: u8,
    /// Bytes per CPU access: 4, 8, 16 or 64.
    pub width: u32,
    /// What the threads do.
    pub op: MmioOperation,
    /// Threads, each over its own slice of the region (1 to 64).
    pub threads: u32,
    /// How long each pass runs, in seconds.
    pub seconds: f64,
    /// Where in the BAR the region starts (a multiple of 4096: mappings are page-aligned).
    pub offset: u64,
    /// Bytes of the BAR to use from `offset`.
    pub bytes: u64,
    /// Map `resourceN_wc` (write-combining; prefetchable BARs only).
    pub write_combining: bool,
    /// Run even though a driver owns the function.
    pub force: bool,
}

impl MmioOptions {
    /// Bad input naming the first option out of range.
    pub(super) fn validate(&self) -> Result<()> {
        if !WIDTHS.contains(&self.width) {
            return Err(Error::bad_input(format!(
                "--width {}: expected 4, 8, 16 or 64 (bytes per access)",
                self.width
            )));
        }
        if self.bar > 5 {
            return Err(Error::bad_input(format!(
                "--bar {}: a function has BARs 0 to 5",
                self.bar
            )));
        }
        if !(1..=64).contains(&self.threads) {
            return Err(Error::bad_input(format!(
                "--threads {}: expected 1 to 64",
                self.threads
            )));
        }
        if !(self.seconds > 0.0 && self.seconds <= 3600.0) {
            return Err(Error::bad_input(format!(
                "--seconds {}: expected more than 0 and at most 3600",
                crate::input::readable_f64(self.seconds)
            )));
        }
        if !self.offset.is_multiple_of(4096) {
            return Err(Error::bad_input(format!(
                "--offset {}: expected a multiple of 4096 (mappings start on a page)",
                self.offset
            )));
        }
        if self.bytes == 0 || !self.bytes.is_multiple_of(64 * u64::from(self.threads)) {
            return Err(Error::bad_input(format!(
                "--bytes {}: expected a positive multiple of 64 × threads ({})",
                self.bytes,
                64 * self.threads
            )));
        }
        Ok(())
    }
}

/// One direction's measured (or predicted) figures.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct MmioResult {
    /// `store`, `load`, `memcpy_toio` or `memcpy_fromio`.
    pub(crate) op: &'static str,
    /// Bytes moved across the BAR.
    pub(crate) bytes: u64,
    pub(crate) accesses: u64,
    pub(crate) seconds: f64,
    /// 10^6 bytes per second.
    #[serde(rename = "MBps")]
    pub(crate) mbps: f64,
    pub(crate) ns_per_access: f64,
    /// Loads only: words compared with the store pattern and how many differed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) verified_words: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mismatched_words: Option<u64>,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MmioReport {
    pub(crate) bdf: String,
    pub(crate) bar: u8,
    /// Where the region used starts in the BAR, and its length.
    pub(crate) offset: u64,
    pub(crate) bytes: u64,
    /// The BAR's size in bytes.
    pub(crate) bar_bytes: u64,
    pub(crate) prefetchable: bool,
    pub(crate) write_combining: bool,
    pub(crate) width: u32,
    pub(crate) threads: u32,
    /// `measured` on a host, `predicted` (platform model) on a simulated machine.
    pub(crate) source: &'static str,
    pub(crate) results: Vec<MmioResult>,
}

impl MmioReport {
    /// The report as `bench mmio` prints it: the BAR, then one line per pass.
    pub fn to_text(&self) -> String {
        let size = if self.bar_bytes > 0 {
            format!("{} bytes", self.bar_bytes)
        } else {
            "size not modelled".to_string()
        };
        let mut text = format!(
            "{} BAR{} ({size}{}{}), {}-byte accesses, {} thread(s), {}\n",
            self.bdf,
            self.bar,
            if self.prefetchable {
                ", prefetchable"
            } else {
                ""
            },
            if self.write_combining {
                ", write-combining"
            } else {
                ""
            },
            self.width,
            self.threads,
            self.source
        );
        for r in &self.results {
            text.push_str(&format!(
                "{:<13} {:>12} bytes {:>10} accesses in {:.3} s: {:>9.2} MB/s, {:.1} ns per access",
                r.op, r.bytes, r.accesses, r.seconds, r.mbps, r.ns_per_access
            ));
            if let (Some(words), Some(bad)) = (r.verified_words, r.mismatched_words) {
                text.push_str(&format!(
                    "; read back {words} words, {bad} differ from the store pattern"
                ));
            }
            text.push('\n');
        }
        text
    }
}
