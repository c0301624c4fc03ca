//! The spec's TOML as deserialized, before any check: the raw tables with their source
//! spans, the valid widths and sizes, and the locator that turns a span into `file:line`.

use crate::error::Error;
use crate::topology::Kind;
use serde::Deserialize;
use toml::Spanned;

/// Widths a link can train to (LnkCap/LnkSta encodings the spec defines).
pub(crate) const VALID_WIDTHS: [u8; 7] = [1, 2, 4, 8, 12, 16, 32];

/// Payload and read-request sizes DevCap/DevCtl can encode.
pub(super) const VALID_SIZES: [u16; 6] = [128, 256, 512, 1024, 2048, 4096];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) sim: toml::Table,
    #[serde(default)]
    pub(super) platform: toml::Table,
    #[serde(default, rename = "function")]
    pub(super) functions: Vec<Spanned<RawFunction>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFunction {
    pub(super) bdf: Spanned<String>,
    pub(super) kind: Kind,
    pub(super) vendor: u16,
    pub(super) device_id: u16,
    pub(super) class: Spanned<u32>,
    #[serde(default)]
    pub(super) revision: u8,
    #[serde(default)]
    pub(super) subsystem_vendor: u16,
    #[serde(default)]
    pub(super) subsystem_device: u16,
    pub(super) parent: Option<Spanned<String>>,
    pub(super) name: Option<Spanned<String>>,
    pub(super) link: Option<RawLink>,
    pub(super) mps: Option<Spanned<u16>>,
    pub(super) mps_supported: Option<Spanned<u16>>,
    pub(super) mrrs: Option<Spanned<u16>>,
    pub(super) aspm: Option<Spanned<String>>,
    pub(super) aspm_supported: Option<Spanned<String>>,
    pub(super) exit_latency: Option<Spanned<RawExitLatency>>,
    pub(super) acs: Option<RawAcs>,
    #[serde(default)]
    pub(super) aer: bool,
    pub(super) numa_node: Option<Spanned<i32>>,
    pub(super) driver: Option<Spanned<String>>,
    #[serde(rename = "device")]
    pub(super) params: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub(super) max_speed: Option<Spanned<f64>>,
    pub(super) max_width: Option<Spanned<u8>>,
    pub(super) speed: Option<Spanned<f64>>,
    pub(super) width: Option<Spanned<u8>>,
}

/// LnkCap exit latencies, as the upper bound of an encoded range in ns.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExitLatency {
    pub(super) l0s_ns: Option<u32>,
    pub(super) l1_ns: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAcs {
    pub(super) capability: u16,
    #[serde(default)]
    pub(super) control: u16,
}

/// Turns byte offsets into `file:line` prefixes.
pub(super) struct Locator<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
    /// Where in `text` the offsets given to this locator count from (a function's section
    /// parsed on its own).
    pub(super) base: usize,
}

impl Locator<'_> {
    pub(super) fn line(&self, offset: usize) -> usize {
        let end = (self.base + offset).min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    pub(super) fn err(&self, offset: usize, msg: impl std::fmt::Display) -> Error {
        Error::bad_input(format!("{}:{}: {}", self.file, self.line(offset), msg))
    }
}

/// The key whose value starts at `offset` (`max_width` in `link = { max_width = 300, … }`), when
/// the text just before it reads `key =`.
pub(super) fn key_before(text: &str, offset: usize) -> Option<&str> {
    let before = text.get(..offset)?.trim_end().strip_suffix('=')?.trim_end();
    let start = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'))
        .map_or(0, |i| i + 1);
    Some(&before[start..]).filter(|key| !key.is_empty())
}
