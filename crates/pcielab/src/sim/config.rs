//! Reading the simulator's settings from a spec: typed access to free-form TOML tables (a
//! function's `[function.device]` parameters, the platform's `[sim]` table) with messages that
//! name the table, key and what is valid, rejecting unknown keys, and the platform settings
//! themselves ([`SimConfig`]: working directory and mounts for fio filenames, link-layer and
//! ASPM timing, the PMU clock, bit-error injection).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::pmu::catalog::edit_distance;

/// A TOML table with the name it is known by in messages (e.g. `[function.device] of 0000:04:00.0`).
pub(crate) struct Table<'a> {
    pub(crate) what: String,
    pub(crate) map: &'a BTreeMap<String, toml::Value>,
}

impl<'a> Table<'a> {
    pub(crate) fn new(
        what: impl Into<String>,
        map: &'a BTreeMap<String, toml::Value>,
    ) -> Table<'a> {
        Table {
            what: what.into(),
            map,
        }
    }

    fn bad(&self, key: &str, valid: &str) -> Error {
        Error::bad_input(format!(
            "{}: '{key}' = {}: expected {valid}",
            self.what,
            self.map.get(key).map(|v| v.to_string()).unwrap_or_default()
        ))
    }

    /// A positive (or zero when `allow_zero`) number; integers are accepted for floats.
    pub(crate) fn number(&self, key: &str, default: f64, allow_zero: bool) -> Result<f64> {
        let Some(value) = self.map.get(key) else {
            return Ok(default);
        };
        let n = match value {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(i) => *i as f64,
            _ => f64::NAN,
        };
        if n.is_finite() && (n > 0.0 || allow_zero && n == 0.0) {
            Ok(n)
        } else {
            Err(self.bad(
                key,
                if allow_zero {
                    "a number >= 0"
                } else {
                    "a number > 0"
                },
            ))
        }
    }

    /// A positive integer at most `max` (what the hardware's field can hold).
    pub(crate) fn integer(&self, key: &str, default: u64, max: u64) -> Result<u64> {
        match self.map.get(key) {
            None => Ok(default),
            Some(toml::Value::Integer(i)) => u64::try_from(*i)
                .ok()
                .filter(|v| (1..=max).contains(v))
                .ok_or_else(|| self.bad(key, &format!("an integer in 1..={max}"))),
            Some(_) => Err(self.bad(key, &format!("an integer in 1..={max}"))),
        }
    }

    pub(crate) fn string(&self, key: &str) -> Result<Option<&'a str>> {
        match self.map.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(self.bad(key, "a string")),
        }
    }

    /// A sub-table of strings (`mounts = { "/" = "/dev/sda4" }`).
    pub(crate) fn string_map(&self, key: &str) -> Result<Vec<(String, String)>> {
        match self.map.get(key) {
            None => Ok(Vec::new()),
            Some(toml::Value::Table(t)) => t
                .iter()
                .map(|(k, v)| match v {
                    toml::Value::String(s) => Ok((k.clone(), s.clone())),
                    _ => Err(self.bad(key, "a table of strings")),
                })
                .collect(),
            Some(_) => Err(self.bad(key, "a table of strings")),
        }
    }

    /// Fails on keys that look like misspellings of `known` ones (within two edits). Other
    /// unknown keys are left alone: a shared table (`[function.device]`) also carries keys for
    /// other readers, such as the QEMU lab's device properties.
    pub(crate) fn no_near_misses(&self, known: &[&str]) -> Result<()> {
        for key in self.map.keys().filter(|k| !known.contains(&k.as_str())) {
            if let Some(near) = known.iter().find(|k| edit_distance(key, k) <= 2) {
                return Err(Error::bad_input(format!(
                    "{}: unknown key '{key}': did you mean '{near}'? (simulator keys: {})",
                    self.what,
                    known.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Fails on keys outside `known`, listing the valid ones.
    /// Rejects keys that moved to the spec's `[platform]` table (`(old, new)` pairs), naming
    /// where each now lives, so an old spec fails loudly instead of silently using defaults.
    pub(crate) fn no_moved_keys(&self, moved: &[(&str, &str)]) -> Result<()> {
        for (old, new) in moved {
            if self.map.contains_key(*old) {
                return Err(Error::bad_input(format!(
                    "{}: '{old}' moved to the platform model: set {new} (docs/calibration.md)",
                    self.what
                )));
            }
        }
        Ok(())
    }

    pub(crate) fn only(&self, known: &[&str]) -> Result<()> {
        let unknown: Vec<&str> = self
            .map
            .keys()
            .map(|k| k.as_str())
            .filter(|k| !known.contains(k))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(Error::bad_input(format!(
            "{}: unknown key{} {}; valid keys: {}",
            self.what,
            if unknown.len() > 1 { "s" } else { "" },
            unknown.join(", "),
            known.join(", ")
        )))
    }
}

/// Platform-wide simulator settings, from the spec's `[sim]` table (every key optional).
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Directory relative fio filenames start from (the seed ran in /home/user).
    pub cwd: String,
    /// Mount point -> block device (`/dev/sda4`) or PCI address of the device holding it.
    pub(crate) mounts: Vec<(String, String)>,
    /// Block device name -> the PCI function behind it (`/dev/sda` = "0000:04:00.0").
    pub(crate) block_devices: Vec<(String, Bdf)>,
    /// Clock of the PMU's time-based residency counters, MHz.
    pub pmu_clock_mhz: f64,
    /// Clock of the `L1_AUX` residency counter, MHz.
    pub(crate) aux_clock_mhz: f64,
    /// Bit-error rate injected on every link (LCRC errors, Naks, replays); 0 = none.
    pub ber: f64,
    /// Extra round-trip latency per switch on the path, ns.
    pub(crate) switch_latency_ns: f64,
    /// Idle time before a link enters L0s when ASPM enables it, ns.
    pub(crate) l0s_idle_ns: f64,
    /// Idle time before a link enters L1 when ASPM enables it, ns.
    pub l1_idle_ns: f64,
    /// The NUMA node whose CPUs take each function's interrupts (its IRQs' effective
    /// affinity); a function not listed takes them where the kernel puts them, costing nothing.
    pub(crate) irq_nodes: BTreeMap<Bdf, i32>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            cwd: "/".into(),
            mounts: Vec::new(),
            block_devices: Vec::new(),
            pmu_clock_mhz: 500.0,
            aux_clock_mhz: 24.0,
            ber: 0.0,
            switch_latency_ns: 150.0,
            l0s_idle_ns: crate::model::io::L0S_ENTRY_NS,
            l1_idle_ns: crate::model::io::L1_ENTRY_NS,
            irq_nodes: BTreeMap::new(),
        }
    }
}

const SIM_KEYS: &[&str] = &[
    "cwd",
    "mounts",
    "block_devices",
    "pmu_clock_mhz",
    "aux_clock_mhz",
    "ber",
    "switch_latency_ns",
    "l0s_idle_ns",
    "l1_idle_ns",
    "irq_node",
];

impl SimConfig {
    /// Reads a `[sim]` table; `None` gives the defaults.
    pub(crate) fn from_table(map: Option<&BTreeMap<String, toml::Value>>) -> Result<SimConfig> {
        let d = SimConfig::default();
        let Some(map) = map else {
            return Ok(d);
        };
        let t = Table::new("[sim]", map);
        t.no_moved_keys(&crate::model::platform::MOVED_SIM_KEYS)?;
        t.only(SIM_KEYS)?;
        let block_devices = t
            .string_map("block_devices")?
            .into_iter()
            .map(|(name, bdf)| {
                bdf.parse::<Bdf>()
                    .map(|b| (name.clone(), b))
                    .map_err(|e| Error::bad_input(format!("[sim] block_devices.{name}: {e}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut irq_nodes = BTreeMap::new();
        match map.get("irq_node") {
            None => {}
            Some(toml::Value::Table(nodes)) => {
                for (bdf, node) in nodes {
                    let bad = |why: String| {
                        Error::bad_input(format!(
                            "[sim] irq_node.\"{bdf}\": {why}; expected {{ \"0000:01:00.0\" = 1 }} (a PCI address = the NUMA node whose CPUs take its interrupts)"
                        ))
                    };
                    let bdf: Bdf = bdf
                        .parse()
                        .map_err(|e: Error| bad(e.message().to_string()))?;
                    let node = node
                        .as_integer()
                        .filter(|n| (0..i64::from(crate::topology::MAX_NUMA_NODES)).contains(n))
                        .ok_or_else(|| bad(format!("{node} is not a NUMA node number")))?;
                    irq_nodes.insert(bdf, node as i32);
                }
            }
            Some(other) => {
                return Err(Error::bad_input(format!(
                    "[sim] irq_node = {other}: expected a table {{ \"0000:01:00.0\" = 1 }}"
                )))
            }
        }
        let ber = t.number("ber", d.ber, true)?;
        if ber >= 1e-3 {
            return Err(Error::bad_input(format!(
                "[sim] ber = {ber}: expected a bit-error rate below 1e-3 (e.g. 1e-12)"
            )));
        }
        Ok(SimConfig {
            cwd: t.string("cwd")?.unwrap_or("/").to_string(),
            mounts: t.string_map("mounts")?,
            block_devices,
            pmu_clock_mhz: t.number("pmu_clock_mhz", d.pmu_clock_mhz, false)?,
            aux_clock_mhz: t.number("aux_clock_mhz", d.aux_clock_mhz, false)?,
            ber,
            switch_latency_ns: t.number("switch_latency_ns", d.switch_latency_ns, true)?,
            l0s_idle_ns: t.number("l0s_idle_ns", d.l0s_idle_ns, true)?,
            l1_idle_ns: t.number("l1_idle_ns", d.l1_idle_ns, true)?,
            irq_nodes,
        })
    }

    /// The PCI function holding `path` (a fio filename): `/dev/disk/by-path/pci-<bdf>-…`, a
    /// block device listed in `block_devices` (partitions included), or a file under a mount.
    pub(crate) fn device_for_path(&self, path: &str) -> Result<Bdf> {
        if let Some(rest) = path.strip_prefix("/dev/disk/by-path/pci-") {
            return rest.get(..12).and_then(|b| b.parse().ok()).ok_or_else(|| {
                Error::bad_input(format!(
                    "filename '{path}': expected /dev/disk/by-path/pci-DDDD:BB:DD.F-…"
                ))
            });
        }
        if let Some(bdf) = self.block_device(path) {
            return Ok(bdf);
        }
        let absolute = self.absolute(path);
        if absolute.starts_with("/dev/") {
            // Device nodes are not files on a mounted filesystem.
            return Err(self.no_device(path, &absolute));
        }
        let mount = self
            .mounts
            .iter()
            .filter(|(m, _)| under(&absolute, m))
            .max_by_key(|(m, _)| m.len());
        let Some((mount, target)) = mount else {
            return Err(self.no_device(path, &absolute));
        };
        target
            .parse::<Bdf>()
            .ok()
            .or_else(|| self.block_device(target))
            .ok_or_else(|| {
                Error::bad_input(format!(
                    "[sim] mounts.\"{mount}\" = \"{target}\": expected a PCI address or a block device listed in [sim] block_devices"
                ))
            })
    }

    fn absolute(&self, path: &str) -> String {
        let joined = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("{}/{}", self.cwd.trim_end_matches('/'), path)
        };
        let mut parts: Vec<&str> = Vec::new();
        for part in joined.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    parts.pop();
                }
                p => parts.push(p),
            }
        }
        format!("/{}", parts.join("/"))
    }

    /// `/dev/sda4` -> the function of `/dev/sda`; `/dev/nvme0n1p2` -> `/dev/nvme0n1`.
    fn block_device(&self, path: &str) -> Option<Bdf> {
        let mut name = path;
        loop {
            if let Some((_, bdf)) = self.block_devices.iter().find(|(n, _)| n == name) {
                return Some(*bdf);
            }
            let trimmed = name.trim_end_matches(|c: char| c.is_ascii_digit());
            let trimmed = if trimmed.len() < name.len() {
                trimmed
                    .strip_suffix('p')
                    .filter(|t| t.ends_with(|c: char| c.is_ascii_digit()))
                    .unwrap_or(trimmed)
            } else {
                return None;
            };
            name = trimmed;
        }
    }

    fn no_device(&self, path: &str, absolute: &str) -> Error {
        let mut known: Vec<String> = self
            .mounts
            .iter()
            .map(|(m, t)| format!("mount {m} ({t})"))
            .collect();
        known.extend(self.block_devices.iter().map(|(n, b)| format!("{n} ({b})")));
        Error::bad_input(format!(
            "filename '{path}' ({absolute}) is on no simulated device; known: {} (or use /dev/disk/by-path/pci-<bdf>-…)",
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        ))
    }
}

fn under(path: &str, mount: &str) -> bool {
    let mount = mount.trim_end_matches('/');
    path == mount || mount.is_empty() || path.starts_with(&format!("{mount}/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yitian() -> SimConfig {
        let text = r#"
            cwd = "/home/user"
            mounts = { "/" = "/dev/sda4", "/boot" = "/dev/sda2", "/data" = "0000:b1:00.0" }
            block_devices = { "/dev/sda" = "0000:04:00.0", "/dev/nvme0n1" = "0000:01:00.0" }
            ber = 1e-12
        "#;
        let map: BTreeMap<String, toml::Value> = toml::from_str(text).unwrap();
        SimConfig::from_table(Some(&map)).unwrap()
    }

    #[test]
    fn irq_nodes_name_a_function_and_a_node() {
        let read = |text: &str| {
            let map: BTreeMap<String, toml::Value> = toml::from_str(text).unwrap();
            SimConfig::from_table(Some(&map))
        };
        let c = read(r#"irq_node = { "0000:01:00.0" = 1 }"#).unwrap();
        assert_eq!(c.irq_nodes.get(&"01:00.0".parse().unwrap()), Some(&1));
        assert!(SimConfig::default().irq_nodes.is_empty());
        let e = read(r#"irq_node = { "0000:01:00.0" = -1 }"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("irq_node.\"0000:01:00.0\": -1 is not a NUMA node number"),
            "{e}"
        );
        let e = read(r#"irq_node = { "nvme" = 1 }"#).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(read("irq_node = 1").is_err());
    }

    #[test]
    fn filenames_resolve_through_cwd_mounts_and_block_devices() {
        let c = yitian();
        let sata: Bdf = "04:00.0".parse().unwrap();
        assert_eq!(c.device_for_path("./test.big").unwrap(), sata);
        assert_eq!(c.device_for_path("../x/../user/t").unwrap(), sata);
        assert_eq!(c.device_for_path("/dev/sda").unwrap(), sata);
        assert_eq!(c.device_for_path("/dev/nvme0n1p2").unwrap().bus, 1);
        assert_eq!(c.device_for_path("/data/f").unwrap().bus, 0xb1);
        assert_eq!(
            c.device_for_path("/dev/disk/by-path/pci-0000:30:00.0-nvme-1")
                .unwrap()
                .bus,
            0x30
        );
        assert_eq!(c.ber, 1e-12);
        assert!(c.device_for_path("/dev/nvme9n1").is_err());
        let none = SimConfig::default().device_for_path("./x").unwrap_err();
        assert_eq!(none.exit_code(), 2);
        assert!(none.message().contains("/x"), "{none}");
    }

    #[test]
    fn integers_are_bounded_by_their_field_not_truncated() {
        let map: BTreeMap<String, toml::Value> =
            toml::from_str("queue_depth = 4294967297\nring_entries = 0\nncq_depth = 32\n").unwrap();
        let t = Table::new("function 01:00.0 [device]", &map);
        let e = t.integer("queue_depth", 1024, 65536).unwrap_err();
        assert!(
            e.to_string()
                .contains("'queue_depth' = 4294967297: expected an integer in 1..=65536"),
            "{e}"
        );
        assert!(t.integer("ring_entries", 1024, 65536).is_err());
        assert_eq!(t.integer("ncq_depth", 1, 32).unwrap(), 32);
        assert_eq!(t.integer("absent", 7, 32).unwrap(), 7);
    }

    #[test]
    fn bad_tables_name_the_key() {
        let map: BTreeMap<String, toml::Value> = toml::from_str("colour = 1\n").unwrap();
        let e = SimConfig::from_table(Some(&map)).unwrap_err();
        assert!(
            e.message().contains("colour") && e.message().contains("cwd"),
            "{e}"
        );
        let map: BTreeMap<String, toml::Value> = toml::from_str("pmu_clock_mhz = -1\n").unwrap();
        let e = SimConfig::from_table(Some(&map)).unwrap_err();
        assert!(e.message().contains("pmu_clock_mhz"), "{e}");
    }
}
