//! The host backend: a resctrl mount (default `/sys/fs/resctrl`, any directory shaped like it in
//! tests). Reads build the same [`Resctrl`] the simulator keeps, from whatever layout the kernel
//! shows: optional `info/` files may be missing, and monitor data may be `mon_L3_XX/` directories
//! or (vendor MPAM kernels) plain `mon_L3_XX` / `mon_MB_XX` files. The kernel's rule set comes
//! from the release (`uname -r`) and what `info/` holds. Every write is first run through the
//! kernel model on a copy of what was just read, so a request the kernel would refuse is refused
//! here with the kernel's message before anything is written (unless the pre-check is turned off,
//! and the kernel decides); after a real write fails, `info/last_cmd_status` is quoted. Writes go
//! through `ConfinedDir`: never through a symlink, never outside the mount. Tasks move one pid
//! per write, with every thread of each process. Each write is kept in a journal.
//! What a host cannot tell us (CLOSID and RMID numbers, cache size) is filled in by order and
//! left 0.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::backend::{MonReading, Op, QosBackend};
use super::info::{CacheResource, Info, KernelRules, MbResource, MonResource};
use super::resctrl::{CtrlGroup, Mode, MonGroup, Resctrl};
use super::schemata::Schemata;
use crate::error::{Error, Result};
use crate::input::{read_capped, ConfinedDir};
use crate::linux::cpuset::CpuSet;

/// The most any resctrl file holds that pcielab reads (a tasks file of a busy group included).
const MAX_RESCTRL_FILE: u64 = 16 << 20;

/// A resctrl mount on this machine.
pub struct HostResctrl {
    root: PathBuf,
    /// Where `/proc` is: the threads of a process are `PROC/PID/task/*`.
    proc_dir: PathBuf,
    /// `uname -r`, or what a test says the kernel is.
    release: String,
    precheck: bool,
    journal: Vec<Write>,
}

/// One write(2), mkdir(2) or rmdir(2) performed on the mount, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Write {
    /// `write`, `mkdir` or `rmdir`.
    pub call: &'static str,
    /// Relative to the mount.
    pub path: String,
    /// The bytes written (empty for mkdir/rmdir).
    pub data: String,
}

fn read(path: &Path) -> Result<String> {
    let bytes = read_capped(path, MAX_RESCTRL_FILE).map_err(|e| Error::io(path, e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
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

/// A file that older or vendor kernels may not have: its value, or `default` when absent.
fn read_optional<T: std::str::FromStr>(path: &Path, default: T) -> Result<T> {
    if path.exists() {
        read_num(path)
    } else {
        Ok(default)
    }
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

fn read_tasks(dir: &Path) -> Result<BTreeSet<u32>> {
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

/// Entries of `dir` (sorted) that are real directories (symlinks are not followed) or, with
/// `files`, plain files; resctrl's own directories are skipped.
fn entries(dir: &Path, files: bool) -> Result<Vec<String>> {
    let mut names = Vec::new();
    if !dir.is_dir() {
        return Ok(names);
    }
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let wanted = if files { kind.is_file() } else { kind.is_dir() };
        if wanted && !["info", "mon_groups", "mon_data"].contains(&name.as_str()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// The running kernel's release, as `uname -r` prints it.
pub(crate) fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// How to get resctrl when `dir` holds no mount.
fn not_mounted(dir: &Path) -> Error {
    Error::runtime(format!(
        "{}: resctrl is not mounted here. Mount it (as root) with: mount -t resctrl resctrl {} \
         (add -o cdp for code/data prioritisation); it needs a CPU with RDT or MPAM and a kernel \
         built with CONFIG_X86_CPU_RESCTRL or CONFIG_ARM64_MPAM (grep resctrl /proc/filesystems)",
        dir.display(),
        dir.display()
    ))
}

impl HostResctrl {
    /// Resctrl mounted at `root` (usually `/sys/fs/resctrl`).
    pub fn new(root: PathBuf) -> HostResctrl {
        HostResctrl {
            root,
            proc_dir: PathBuf::from("/proc"),
            release: kernel_release(),
            precheck: true,
            journal: Vec::new(),
        }
    }

    /// Read processes' threads from `proc_dir` instead of `/proc`.
    pub fn with_proc(mut self, proc_dir: PathBuf) -> HostResctrl {
        self.proc_dir = proc_dir;
        self
    }

    /// Apply the rules of kernel `release` instead of the running kernel's.
    #[cfg(test)]
    pub(crate) fn with_release(mut self, release: &str) -> HostResctrl {
        self.release = release.to_string();
        self
    }

    /// With `false`, requests go to the kernel without the model's pre-check: the kernel decides.
    pub(crate) fn with_precheck(mut self, precheck: bool) -> HostResctrl {
        self.precheck = precheck;
        self
    }

    /// Every write, mkdir and rmdir performed so far, in order.
    #[cfg(test)]
    pub(crate) fn journal(&self) -> &[Write] {
        &self.journal
    }

    fn read_info(&self, root_schemata: &Schemata) -> Result<Info> {
        let info = self.root.join("info");
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
            let cbm_mask = read_hex(&dir.join("cbm_mask"))?;
            caches.push(CacheResource {
                name: name.into(),
                num_closids: read_num(&dir.join("num_closids"))?,
                cbm_mask,
                min_cbm_bits: read_optional(&dir.join("min_cbm_bits"), 1)?,
                shareable_bits: if dir.join("shareable_bits").exists() {
                    read_hex(&dir.join("shareable_bits"))?
                } else {
                    0
                },
                // Kernels without the file accept only contiguous masks.
                sparse_masks: read_optional::<u32>(&dir.join("sparse_masks"), 0)? == 1,
                domains: domains(name),
                cache_bytes: 0,
            });
        }
        let mb_dir = info.join("MB");
        let mb = if mb_dir.is_dir() {
            Some(MbResource {
                num_closids: read_num(&mb_dir.join("num_closids"))?,
                min_bandwidth: read_optional(&mb_dir.join("min_bandwidth"), 0)?,
                bandwidth_gran: read_optional(&mb_dir.join("bandwidth_gran"), 1)?,
                delay_linear: read_optional::<u32>(&mb_dir.join("delay_linear"), 1)? == 1,
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
                mon_features: read(&mon_dir.join("mon_features"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::to_string)
                    .collect(),
                rmids_per_closid: None,
            })
        } else {
            None
        };
        Ok(Info {
            caches,
            mb,
            mon,
            rules: KernelRules::for_release(&self.release),
        })
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
        for m in entries(&dir.join("mon_groups"), false)? {
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

    /// Every thread of each pid in a tasks write (`PROC/PID/task/*`); a pid with no such
    /// directory (gone, or not a process here) is kept for the kernel to judge.
    fn threads_of(&self, text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for pid in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let task_dir = self.proc_dir.join(pid).join("task");
            let mut tids: Vec<u64> = match (pid.parse::<u32>(), fs::read_dir(&task_dir)) {
                (Ok(_), Ok(dir)) => dir
                    .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect(),
                _ => Vec::new(),
            };
            tids.sort();
            if tids.is_empty() {
                out.push(pid.to_string());
            } else {
                out.extend(tids.iter().map(u64::to_string));
            }
        }
        out.dedup();
        out
    }

    fn refused(&self, what: String, e: std::io::Error) -> Error {
        Error::runtime(format!(
            "{what}: the kernel refused it ({e}); info/last_cmd_status: \"{}\"",
            self.last_cmd_status().replace('\n', "; ")
        ))
    }

    fn perform_one(&mut self, tree: &ConfinedDir, op: &Op) -> Result<()> {
        let path = op.target()?;
        match op {
            Op::Mkdir { .. } | Op::Rmdir { .. } => {
                let mkdir = matches!(op, Op::Mkdir { .. });
                let call = if mkdir { "mkdir" } else { "rmdir" };
                self.journal.push(Write {
                    call,
                    path: path.clone(),
                    data: String::new(),
                });
                let result = if mkdir {
                    tree.create_dir(&path)
                } else {
                    tree.remove_dir(&path)
                };
                result.map_err(|e| self.refused(format!("{call} {path}"), e))
            }
            Op::Schemata { text, .. } => self.write(tree, &path, text.clone()),
            Op::Tasks { text, .. } => self.write(tree, &path, format!("{text}\n")),
            Op::Cpus { cpus_list, .. } => self.write(tree, &path, format!("{cpus_list}\n")),
            Op::Mode { mode, .. } => self.write(tree, &path, format!("{mode}\n")),
        }
    }

    fn write(&mut self, tree: &ConfinedDir, path: &str, data: String) -> Result<()> {
        self.journal.push(Write {
            call: "write",
            path: path.to_string(),
            data: data.clone(),
        });
        tree.write(path, data.as_bytes(), false)
            .map_err(|e| self.refused(format!("echo {} > {path}", data.trim_end()), e))
    }
}

impl QosBackend for HostResctrl {
    fn name(&self) -> String {
        format!("host ({})", self.root.display())
    }

    fn read(&mut self) -> Result<Resctrl> {
        if !self.root.join("info").is_dir() || !self.root.join("schemata").is_file() {
            return Err(not_mounted(&self.root));
        }
        let root_schemata =
            Schemata::parse_read(&read(&self.root.join("schemata"))?).ok_or_else(|| {
                Error::runtime(format!("{}/schemata: unreadable", self.root.display()))
            })?;
        let info = self.read_info(&root_schemata)?;
        let mut rmid = 0;
        let mut groups = vec![self.read_group(&self.root, "", 0, &mut rmid)?];
        let mut closid = 0;
        for name in entries(&self.root, false)? {
            let dir = self.root.join(&name);
            if dir.join("schemata").is_file() {
                closid += 1;
                groups.push(self.read_group(&dir, &name, closid, &mut rmid)?);
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
        // One pid per write, every thread of each process: kernels before 6.7 take no lists,
        // and a refusal then names the one pid it was about.
        let ops: Vec<Op> = match op {
            Op::Tasks { group, text } => self
                .threads_of(text)
                .into_iter()
                .map(|pid| Op::Tasks {
                    group: group.clone(),
                    text: pid,
                })
                .collect(),
            other => vec![other.clone()],
        };
        if self.precheck {
            let mut model = self.read()?;
            for op in &ops {
                op.apply_to(&mut model)?;
            }
        } else if !self.root.join("info").is_dir() {
            return Err(not_mounted(&self.root));
        }
        let tree = ConfinedDir::new(&self.root);
        for op in &ops {
            self.perform_one(&tree, op)?;
        }
        Ok(())
    }

    fn mon_data(&mut self) -> Result<Vec<MonReading>> {
        let state = self.read()?;
        let mut dirs: Vec<(String, PathBuf)> = Vec::new();
        for g in &state.groups {
            let gdir = if g.name.is_empty() {
                self.root.clone()
            } else {
                self.root.join(&g.name)
            };
            let label = if g.name.is_empty() { "/" } else { &g.name };
            dirs.push((label.to_string(), gdir.clone()));
            for m in &g.mon_groups {
                let label = if g.name.is_empty() {
                    format!("mon_groups/{}", m.name)
                } else {
                    format!("{}/{}", g.name, m.name)
                };
                dirs.push((label, gdir.join("mon_groups").join(&m.name)));
            }
        }
        let mut out = Vec::new();
        for (label, dir) in dirs {
            out.extend(read_mon_data(&label, &dir.join("mon_data"))?);
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

/// One group's `mon_data`: upstream `mon_L3_XX/{llc_occupancy,mbm_total_bytes,mbm_local_bytes}`
/// directories, and the vendor MPAM layout of plain files, `mon_L3_XX` holding the L3 occupancy
/// and `mon_MB_XX` the memory bandwidth byte count of domain XX.
fn read_mon_data(label: &str, mon_data: &Path) -> Result<Vec<MonReading>> {
    // A counter reads "Unavailable" or "Error" when the hardware has no value.
    let value = |path: PathBuf| read_num::<u64>(&path).ok();
    let domain_of = |name: &str, prefix: &str| name.strip_prefix(prefix)?.parse::<u32>().ok();
    let mut readings: std::collections::BTreeMap<u32, MonReading> = Default::default();
    for d in entries(mon_data, false)? {
        let dir = mon_data.join(&d);
        if let Some(domain) = domain_of(&d, "mon_L3_") {
            let r = slot(&mut readings, label, domain);
            r.llc_occupancy = value(dir.join("llc_occupancy"));
            r.mbm_total_bytes = value(dir.join("mbm_total_bytes"));
            r.mbm_local_bytes = value(dir.join("mbm_local_bytes"));
        } else if let Some(domain) = domain_of(&d, "mon_MB_") {
            slot(&mut readings, label, domain).mbm_total_bytes = value(dir.join("mbm_total_bytes"));
        }
    }
    for f in entries(mon_data, true)? {
        if let Some(domain) = domain_of(&f, "mon_L3_") {
            slot(&mut readings, label, domain).llc_occupancy = value(mon_data.join(&f));
        } else if let Some(domain) = domain_of(&f, "mon_MB_") {
            slot(&mut readings, label, domain).mbm_total_bytes = value(mon_data.join(&f));
        }
    }
    Ok(readings.into_values().collect())
}

fn slot<'a>(
    readings: &'a mut std::collections::BTreeMap<u32, MonReading>,
    label: &str,
    domain: u32,
) -> &'a mut MonReading {
    readings.entry(domain).or_insert_with(|| MonReading {
        group: label.to_string(),
        domain,
        llc_occupancy: None,
        mbm_total_bytes: None,
        mbm_local_bytes: None,
    })
}
