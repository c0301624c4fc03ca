//! Facts from the PCIe specification and the Linux PCI ABI that need no I/O: link generations,
//! bus/device/function addresses, and (in submodules) encodings, TLP/DLLP/FLIT sizes and
//! config-space layout. Everything here is a pure function of its inputs, so the model, the
//! readers and the simulator all share one source of truth for each fact.

pub(crate) mod dllp;
pub(crate) mod features;
pub(crate) mod flit;
pub(crate) mod link;
pub(crate) mod tlp;

pub use tlp::TlpFormat;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// A PCIe link generation (signalling rate). Gen7 is included for the model only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Generation {
    /// 2.5 GT/s, 8b/10b.
    Gen1,
    /// 5 GT/s, 8b/10b.
    Gen2,
    /// 8 GT/s, 128b/130b.
    Gen3,
    /// 16 GT/s, 128b/130b.
    Gen4,
    /// 32 GT/s, 128b/130b.
    Gen5,
    /// 64 GT/s, PAM4 and Flit mode.
    Gen6,
    /// 128 GT/s, PAM4 and Flit mode.
    Gen7,
}

impl Generation {
    /// Every generation, oldest first.
    pub const ALL: [Generation; 7] = [
        Generation::Gen1,
        Generation::Gen2,
        Generation::Gen3,
        Generation::Gen4,
        Generation::Gen5,
        Generation::Gen6,
        Generation::Gen7,
    ];

    /// 1 for Gen1 … 7 for Gen7.
    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    /// Generation `n` (1 to 7), or `None`.
    pub fn from_number(n: u8) -> Option<Generation> {
        Generation::ALL.get((n as usize).checked_sub(1)?).copied()
    }

    /// Signalling rate in GT/s per lane.
    #[inline]
    pub const fn gt_s(self) -> f64 {
        match self {
            Generation::Gen1 => 2.5,
            Generation::Gen2 => 5.0,
            Generation::Gen3 => 8.0,
            Generation::Gen4 => 16.0,
            Generation::Gen5 => 32.0,
            Generation::Gen6 => 64.0,
            Generation::Gen7 => 128.0,
        }
    }

    /// The generation whose rate is `gt_s` (exact match of the spec's rates).
    pub(crate) fn from_gt_s(gt_s: f64) -> Option<Generation> {
        Generation::ALL
            .into_iter()
            .find(|g| (g.gt_s() - gt_s).abs() < 1e-9)
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gen{}", self.number())
    }
}

/// A PCI function address: domain (segment), bus, device, function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bdf {
    pub(crate) domain: u16,
    pub(crate) bus: u8,
    pub(crate) device: u8,
    pub(crate) function: u8,
}

impl Bdf {
    /// The function `domain:bus:device.function`.
    pub fn new(domain: u16, bus: u8, device: u8, function: u8) -> Bdf {
        assert!(
            device < 32 && function < 8,
            "device {device} / function {function} out of range"
        );
        Bdf {
            domain,
            bus,
            device,
            function,
        }
    }

    /// devfn as the kernel packs it: device << 3 | function.
    pub(crate) fn devfn(self) -> u8 {
        (self.device << 3) | self.function
    }
}

impl fmt::Display for Bdf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for Bdf {
    type Err = Error;

    /// Accepts `DDDD:BB:DD.F` and the short `BB:DD.F` (domain 0), as lspci does.
    fn from_str(s: &str) -> Result<Bdf> {
        let bad = || {
            Error::bad_input(format!(
                "invalid PCI address '{s}': expected DDDD:BB:DD.F or BB:DD.F in hex, e.g. 0000:00:02.0"
            ))
        };
        let (rest, function) = s.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, dev] => (*d, *b, *dev),
            [b, dev] => ("0", *b, *dev),
            _ => return Err(bad()),
        };
        let hex = |t: &str, max: u32| -> Result<u32> {
            if t.is_empty() || t.len() > 4 {
                return Err(bad());
            }
            let v = u32::from_str_radix(t, 16).map_err(|_| bad())?;
            if v > max {
                return Err(bad());
            }
            Ok(v)
        };
        Ok(Bdf {
            domain: hex(domain, 0xffff)? as u16,
            bus: hex(bus, 0xff)? as u8,
            device: hex(device, 0x1f)? as u8,
            function: hex(function, 7)? as u8,
        })
    }
}

impl Serialize for Bdf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A BDF is written as `DDDD:BB:DD.F` in lowercase hex, as [`fmt::Display`] prints it.
impl schemars::JsonSchema for Bdf {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Bdf".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9a-f]{4}:[0-9a-f]{2}:[01][0-9a-f]\\.[0-7]$",
            "description": "PCI address DDDD:BB:DD.F (domain, bus, device, function) in lowercase hex"
        })
    }
}

impl<'de> Deserialize<'de> for Bdf {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Bdf, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses a BDF written in a test; panics on a typo so the test names it.
#[cfg(test)]
pub(crate) fn bdf(text: &str) -> Bdf {
    text.parse()
        .unwrap_or_else(|e| panic!("test BDF {text:?}: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_parses_long_and_short_forms() {
        let b: Bdf = "0000:b1:00.1".parse().unwrap();
        assert_eq!(b, Bdf::new(0, 0xb1, 0, 1));
        assert_eq!(
            "30:03.0".parse::<Bdf>().unwrap().to_string(),
            "0000:30:03.0"
        );
        assert_eq!(Bdf::new(1, 0x30, 3, 0).devfn(), 0x18);
    }

    #[test]
    fn bdf_rejects_out_of_range_parts() {
        for bad in [
            "00:20.0",
            "00:1f.8",
            "100:00.0",
            "0000:00:00",
            "zz:00.0",
            "",
        ] {
            let err = bad.parse::<Bdf>().unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}");
            assert!(err.message().contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn generation_rates_round_trip() {
        for g in Generation::ALL {
            assert_eq!(Generation::from_gt_s(g.gt_s()), Some(g));
            assert_eq!(Generation::from_number(g.number()), Some(g));
        }
        assert_eq!(Generation::from_gt_s(2.5), Some(Generation::Gen1));
        assert_eq!(Generation::from_number(0), None);
        assert_eq!(Generation::from_number(8), None);
    }
}
