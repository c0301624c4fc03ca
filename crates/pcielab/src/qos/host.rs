//! The host backend: a resctrl mount (default `/sys/fs/resctrl`, any directory shaped like it in
//! tests). Reads build the same [`Resctrl`] the simulator keeps. Every write is first run
//! through the kernel model on a copy of what was just read, so a request the kernel would
//! refuse is refused here, with the kernel's message, before anything is written; after a real
//! write fails, the kernel's own `info/last_cmd_status` is read and reported. What a host cannot
//! tell us (CLOSID and RMID numbers, cache size) is filled in by order and left 0.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::backend::{MonReading, Op, QosBackend};
use super::cpuset::CpuSet;
use super::info::{CacheResource, Info, MbResource, MonResource};
use super::resctrl::{CtrlGroup, Mode, MonGroup, Resctrl};
use super::schemata::Schemata;
use crate::error::{Error, Result};

/// A resctrl mount on this machine.
pub struct HostResctrl {
    root: PathBuf,
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

fn read_num<T: std::str::FromStr>(path: &Path) -> Result<T> {
    let text = read(path)?;
    text.trim().parse().map_err(|_| {
        Error::runtime(format!(
            "{}: expected a number, found '{}'",
            path.display(),
            text.trim()
        ))
    })
}

fn read_hex(path: &Path) -> Result<u64> {
    let text = read(path)?;
    u64::from_str_radix(text.trim(), 16).map_err(|_| {
        Error::runtime(format!(
            "{}: expected hex, found '{}'",
            path.display(),
            text.trim()
        ))
    })
}

fn read_tasks(dir: &Path) -> Result<std::collections::BTreeSet<u32>> {
    let path = dir.join("tasks");
    read(&path)?
        .split_whitespace()
        .map(|t| {
            t.parse()
                .map_err(|_| Error::runtime(format!("{}: bad pid '{t}'", path.display())))
        })
        .collect()
}

fn read_cpus(dir: &Path) -> Result<CpuSet> {
    let path = dir.join("cpus_list");
    let text = read(&path)?;
    CpuSet::parse_list(&text).ok_or_else(|| {
        Error::runtime(format!(
            "{}: bad cpu list '{}'",
            path.display(),
            text.trim()
        ))
    })
}

/// Subdirectories of `dir` (sorted), skipping resctrl's own.
fn subdirs(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    if !dir.exists() {
        return Ok(names);
    }
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if entry.path().is_dir() && !["info", "mon_groups", "mon_data"].contains(&name.as_str()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

impl HostResctrl {
    pub fn new(root: PathBuf) -> HostResctrl {
        HostResctrl { root }
    }

    fn read_info(&self, root_schemata: &Schemata) -> Result<Info> {
        let info = self.root.join("info");
        if !info.is_dir() {
            return Err(Error::runtime(format!(
                "{}: no resctrl mounted here (mount -t resctrl resctrl /sys/fs/resctrl)",
                self.root.display()
            )));
        }
        let domains = |name: &str| -> Vec<u32> {
            root_schemata
                .lines
                .iter()
                .find(|l| l.resource == name)
                .map(|l| l.values.keys().copied().collect())
                .unwrap_or_default()
        };
        let mut caches = Vec::new();
        for name in ["L3", "L3CODE", "L3DATA", "L2", "L2CODE", "L2DATA"] {
            let dir = info.join(name);
            if !dir.is_dir() {
                continue;
            }
            caches.push(CacheResource {
                name: name.into(),
                num_closids: read_num(&dir.join("num_closids"))?,
                cbm_mask: read_hex(&dir.join("cbm_mask"))?,
                min_cbm_bits: read_num(&dir.join("min_cbm_bits"))?,
                shareable_bits: read_hex(&dir.join("shareable_bits"))?,
                sparse_masks: dir.join("sparse_masks").exists()
                    && read_num::<u32>(&dir.join("sparse_masks"))? == 1,
                domains: domains(name),
                cache_bytes: 0,
            });
        }
        let mb_dir = info.join("MB");
        let mb = if mb_dir.is_dir() {
            Some(MbResource {
                num_closids: read_num(&mb_dir.join("num_closids"))?,
                min_bandwidth: read_num(&mb_dir.join("min_bandwidth"))?,
                bandwidth_gran: read_num(&mb_dir.join("bandwidth_gran"))?,
                delay_linear: read_num::<u32>(&mb_dir.join("delay_linear"))? == 1,
                thread_throttle_mode: read(&mb_dir.join("thread_throttle_mode"))
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default(),
                domains: domains("MB"),
            })
        } else {
            None
        };
        let mon_dir = info.join("L3_MON");
        let mon = if mon_dir.is_dir() {
            Some(MonResource {
                num_rmids: read_num(&mon_dir.join("num_rmids"))?,
                mon_features: read(&mon_dir.join("mon_features"))?
                    .split_whitespace()
                    .map(str::to_string)
                    .collect(),
                rmids_per_closid: None,
            })
        } else {
            None
        };
        Ok(Info { caches, mb, mon })
    }

    fn read_group(&self, dir: &Path, name: &str, closid: u32, rmid: &mut u32) -> Result<CtrlGroup> {
        let schemata_path = dir.join("schemata");
        let schemata = Schemata::parse_read(&read(&schemata_path)?).ok_or_else(|| {
            Error::runtime(format!("{}: unreadable schemata", schemata_path.display()))
        })?;
        let mode = match read(&dir.join("mode")).map(|m| m.trim().to_string()) {
            Ok(m) if m == "exclusive" => Mode::Exclusive,
            _ => Mode::Shareable,
        };
        let own_rmid = *rmid;
        *rmid += 1;
        let mut mon_groups = Vec::new();
        for m in subdirs(&dir.join("mon_groups"))? {
            let mdir = dir.join("mon_groups").join(&m);
            mon_groups.push(MonGroup {
                name: m,
                rmid: *rmid,
                tasks: read_tasks(&mdir)?,
                cpus: read_cpus(&mdir)?,
            });
            *rmid += 1;
        }
        let mut tasks = read_tasks(dir)?;
        for m in &mon_groups {
            tasks.retain(|t| !m.tasks.contains(t));
        }
        Ok(CtrlGroup {
            name: name.to_string(),
            closid,
            rmid: own_rmid,
            mode,
            schemata,
            tasks,
            cpus: read_cpus(dir)?,
            mon_groups,
        })
    }

    fn last_cmd_status(&self) -> String {
        read(&self.root.join("info/last_cmd_status"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "(info/last_cmd_status unreadable)".into())
    }
}

impl QosBackend for HostResctrl {
    fn name(&self) -> String {
        format!("host ({})", self.root.display())
    }

    fn read(&mut self) -> Result<Resctrl> {
        let root_schemata =
            Schemata::parse_read(&read(&self.root.join("schemata"))?).ok_or_else(|| {
                Error::runtime(format!("{}/schemata: unreadable", self.root.display()))
            })?;
        let info = self.read_info(&root_schemata)?;
        let mut rmid = 0;
        let mut groups = vec![self.read_group(&self.root, "", 0, &mut rmid)?];
        for (i, name) in subdirs(&self.root)?.into_iter().enumerate() {
            let dir = self.root.join(&name);
            if dir.join("schemata").exists() {
                groups.push(self.read_group(&dir, &name, i as u32 + 1, &mut rmid)?);
            }
        }
        let online_cpus = groups.iter().fold(CpuSet::default(), |mut acc, g| {
            acc.0.extend(&g.cpus.0);
            acc
        });
        Ok(Resctrl {
            info,
            groups,
            online_cpus,
            last_cmd_status: self.last_cmd_status(),
        })
    }

    fn perform(&mut self, op: &Op) -> Result<()> {
        let mut model = self.read()?;
        op.apply_to(&mut model)?;
        let path = self.root.join(op.target()?);
        let result = match op {
            Op::Mkdir { .. } => fs::create_dir(&path),
            Op::Rmdir { .. } => fs::remove_dir(&path),
            Op::Schemata { text, .. } => fs::write(&path, text),
            Op::Tasks { text, .. } => fs::write(&path, format!("{text}\n")),
            Op::Cpus { cpus_list, .. } => fs::write(&path, format!("{cpus_list}\n")),
            Op::Mode { mode, .. } => fs::write(&path, format!("{mode}\n")),
        };
        result.map_err(|e| {
            Error::runtime(format!(
                "{}: the kernel refused it ({e}); info/last_cmd_status: {}",
                op.describe(),
                self.last_cmd_status()
            ))
        })
    }

    fn mon_data(&mut self) -> Result<Vec<MonReading>> {
        let state = self.read()?;
        let mut out = Vec::new();
        let mut dirs: Vec<(String, PathBuf)> = Vec::new();
        for g in &state.groups {
            let gdir = if g.name.is_empty() {
                self.root.clone()
            } else {
                self.root.join(&g.name)
            };
            dirs.push((
                if g.name.is_empty() {
                    "/".into()
                } else {
                    g.name.clone()
                },
                gdir.clone(),
            ));
            for m in &g.mon_groups {
                let label = if g.name.is_empty() {
                    format!("mon_groups/{}", m.name)
                } else {
                    format!("{}/{}", g.name, m.name)
                };
                dirs.push((label, gdir.join("mon_groups").join(&m.name)));
            }
        }
        for (label, dir) in dirs {
            let mon_data = dir.join("mon_data");
            for d in subdirs(&mon_data)? {
                let Some(domain) = d.strip_prefix("mon_L3_").and_then(|n| n.parse().ok()) else {
                    continue;
                };
                // A counter reads "Unavailable" or "Error" when the hardware has no value.
                let value = |f: &str| read_num::<u64>(&mon_data.join(&d).join(f)).ok();
                out.push(MonReading {
                    group: label.clone(),
                    domain,
                    llc_occupancy: value("llc_occupancy"),
                    mbm_total_bytes: value("mbm_total_bytes"),
                    mbm_local_bytes: value("mbm_local_bytes"),
                });
            }
        }
        Ok(out)
    }

    fn wait(&mut self, interval: Duration) -> Result<()> {
        std::thread::sleep(interval);
        Ok(())
    }

    fn save(&mut self) -> Result<()> {
        Ok(())
    }
}
