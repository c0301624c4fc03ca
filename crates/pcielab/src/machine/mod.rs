//! Where facts come from, pciutils-style "access methods" behind one interface: the live host
//! (`host`, reading `/`), a saved sysfs tree (`snapshot:DIR`), or the simulator (`sim:PRESET` or
//! `sim:FILE.toml`). This module parses the user's `--machine` selector and opens the backend.

pub mod presets;
pub mod snapshot;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::topology::spec::{parse_spec, Platform};
use crate::topology::sysfs::read_sysfs;
use crate::topology::Topology;

/// The user's choice of machine, parsed from `--machine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineSelector {
    /// The live host; `root` is `/` unless a test points it elsewhere.
    Host { root: PathBuf },
    /// A sysfs tree saved by `pcielab snapshot` (or any copy of `/sys/bus/pci`).
    Snapshot { dir: PathBuf },
    /// A built-in preset by name.
    SimPreset { name: String },
    /// A spec file describing a simulated platform.
    SimFile { path: PathBuf },
}

impl FromStr for MachineSelector {
    type Err = Error;

    fn from_str(s: &str) -> Result<MachineSelector> {
        if s == "host" {
            return Ok(MachineSelector::Host {
                root: PathBuf::from("/"),
            });
        }
        if let Some(dir) = s.strip_prefix("snapshot:").filter(|d| !d.is_empty()) {
            return Ok(MachineSelector::Snapshot {
                dir: PathBuf::from(dir),
            });
        }
        if let Some(target) = s.strip_prefix("sim:").filter(|t| !t.is_empty()) {
            return Ok(MachineSelector::spec(target));
        }
        Err(Error::bad_input(format!(
            "invalid --machine '{s}': expected 'host', 'snapshot:DIR', 'sim:PRESET' or 'sim:FILE.toml'"
        )))
    }
}

impl fmt::Display for MachineSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MachineSelector::Host { .. } => write!(f, "host"),
            MachineSelector::Snapshot { dir } => write!(f, "snapshot:{}", dir.display()),
            MachineSelector::SimPreset { name } => write!(f, "sim:{name}"),
            MachineSelector::SimFile { path } => write!(f, "sim:{}", path.display()),
        }
    }
}

impl MachineSelector {
    /// A topology spec named the way `sim:` takes it: a `.toml` file or a path is a file, any
    /// other word a built-in preset.
    pub fn spec(target: &str) -> MachineSelector {
        if target.ends_with(".toml") || target.contains('/') {
            MachineSelector::SimFile {
                path: PathBuf::from(target),
            }
        } else {
            MachineSelector::SimPreset {
                name: target.to_string(),
            }
        }
    }

    /// Reads the machine's platform: its topology and, for `sim:`, the spec's `[sim]` table.
    pub fn open(&self) -> Result<Platform> {
        match self {
            MachineSelector::SimPreset { name } => {
                let text = presets::preset(name).ok_or_else(|| {
                    Error::bad_input(format!(
                        "unknown preset 'sim:{name}': valid presets are {}, or give a spec file as sim:FILE.toml",
                        presets::names().join(", ")
                    ))
                })?;
                parse_spec(&format!("presets/{name}.toml"), text)
            }
            MachineSelector::SimFile { path } => {
                let text = crate::input::read_input_file(path, "spec file")?;
                parse_spec(&path.display().to_string(), &text)
            }
            MachineSelector::Host { root } => Ok(Platform {
                name: "host".to_string(),
                description: format!("live sysfs under {}", root.display()),
                topology: named(read_sysfs(&root.join("sys/bus/pci"))?),
                sim: toml::Table::new(),
                platform: toml::Table::new(),
            }),
            MachineSelector::Snapshot { dir } => Ok(Platform {
                name: "snapshot".to_string(),
                description: format!("sysfs snapshot {}", dir.display()),
                topology: named(read_sysfs(dir)?),
                sim: toml::Table::new(),
                platform: toml::Table::new(),
            }),
        }
    }
}

/// Functions read from sysfs get lspci's vendor/device names from the installed pci.ids.
fn named(mut topology: Topology) -> Topology {
    if let Some(db) = crate::topology::pciids::default_db() {
        crate::topology::pciids::name_functions(&mut topology, &db);
    }
    topology
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_parse() {
        assert_eq!(
            "sim:yitian710".parse::<MachineSelector>().unwrap(),
            MachineSelector::SimPreset {
                name: "yitian710".into()
            }
        );
        assert_eq!(
            "sim:my.toml".parse::<MachineSelector>().unwrap(),
            MachineSelector::SimFile {
                path: "my.toml".into()
            }
        );
        assert_eq!(
            "snapshot:/tmp/s".parse::<MachineSelector>().unwrap(),
            MachineSelector::Snapshot {
                dir: "/tmp/s".into()
            }
        );
        for bad in ["", "sim:", "snapshot:", "hots"] {
            assert_eq!(bad.parse::<MachineSelector>().unwrap_err().exit_code(), 2);
        }
    }
}
