//! The read plan of a sysfs machine (a live host or a snapshot): what each sample of link health
//! reads, decided once instead of on every scrape or refresh. Discovery lists each function's
//! directory once, so a file that is not there (no AER capability, no link) is never tried;
//! reads the link capability (`max_link_*`, fixed while the device is present) once; and lets
//! the two ends of one link share one read of its trained state: a port with a link below it
//! (a root port, a switch's downstream port) and every function on its secondary bus report
//! the same LnkSta, so when discovery saw them agree, only the port's `current_link_*` are read
//! and the functions below take its values. Per sample the plan then reads only the trained
//! state of each link and the AER counters that exist.
//!
//! The files a sample reads are opened once, when planned, and read again from offset 0 each
//! sample (`pread`): sysfs makes an attribute's value anew for a read at the start of the file
//! (the kernel's sysfs documentation: "seek to 0 and read again"), and a snapshot's regular file
//! shows what was last written into it. That spares each sample a path lookup through the
//! `devices/` symlink per file, most of what a sample cost. Files are opened with `O_NOATIME`
//! where the kernel allows it (a snapshot's owner), so reading a snapshot does not touch its
//! access times. A caller that keeps its health buffer from one sample to the next has only
//! the functions with something to read written again (on a big host, a few hundred of
//! thousands: the rest have no link of their own or no counters), and the functions below a
//! port only when its trained state moved; [`ReadPlan::varying`] tells which functions' health
//! can differ between two reads, so a caller can leave the rest of what it made alone. At most [`HELD_FILES`] stay open
//! (the process's descriptor limit is commonly 1024); files past them are opened per read. A
//! held file of a device that went away fails to read, which re-plans as any failed read does;
//! a snapshot file replaced by a new one (renamed over it) is seen at the next re-plan.
//!
//! Hotplug: [`ReadPlan::refresh`] compares the `devices/` listing with the planned one at most
//! every [`REDISCOVER_NS`] (one directory read), or at once after a planned file failed to
//! read (a device going away), and on a change reads the topology again and plans anew.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;
use crate::topology::health::{read_function_health, Attribute, LinkHealth};
use crate::topology::Topology;

/// How often the `devices/` listing is compared with the plan (sample time, nanoseconds).
pub(crate) const REDISCOVER_NS: u64 = 10_000_000_000;

/// The most of one attribute read: the kernel fills at most one page.
const ATTRIBUTE_BYTES: usize = 4096;

/// Attribute files a plan keeps open between samples; see the module documentation.
pub(crate) const HELD_FILES: usize = 512;

/// Reads the topology again after hotplug (the machine's own reader, with its naming).
pub(crate) type Reread = fn(&Path) -> Result<Topology>;

/// What one function's sample reads.
#[derive(Debug)]
struct Planned {
    dir: PathBuf,
    /// The static part, read at discovery: capable speed and width.
    fixed: LinkHealth,
    /// The attributes read every sample (present in the directory, not static, and not a
    /// trained-state attribute taken from the link's other end), each with its file when it is
    /// one of those held open.
    each_sample: Vec<(Attribute, Option<File>)>,
}

/// A link's trained speed (GT/s) and width.
pub(crate) type Trained = (Option<f64>, Option<u32>);

fn trained(health: &LinkHealth) -> Trained {
    (health.current_gts, health.current_width)
}

/// A function with attributes to read each sample, and the functions that take its trained
/// state (those on a port's secondary bus).
#[derive(Debug)]
struct Reader {
    index: usize,
    takers: Vec<usize>,
    /// It takes its own trained state from its port.
    takes: bool,
    /// The trained state when planned, which the takers reported then too.
    planned: Trained,
}

/// The per-machine read plan; see the module documentation.
#[derive(Debug)]
pub(crate) struct ReadPlan {
    pci_dir: PathBuf,
    reread: Reread,
    /// Shared with the observers of the plan (one copy of a big host's topology, not one
    /// each).
    topology: Arc<Topology>,
    /// `devices/` entry names when planned, sorted: what the hotplug check compares.
    listed: Vec<String>,
    planned: Vec<Planned>,
    /// The planned functions with a file to read, in address order: the only ones whose health
    /// a sample can change besides their takers.
    readers: Vec<Reader>,
    /// Bumped on every re-plan, so holders of derived tables know to rebuild them.
    generation: u64,
    /// A planned file failed to read: compare the listing at the next refresh.
    stale: bool,
    next_check_ns: u64,
    /// Attribute files read by samples since the plan was made (a test's and a bench's oracle
    /// for "nothing absent is tried").
    reads: u64,
}

impl ReadPlan {
    /// Plans the reads of `topology`, read from `pci_dir` (a directory holding `devices/`).
    pub(crate) fn discover(pci_dir: &Path, topology: Topology, reread: Reread) -> ReadPlan {
        let listed = listing(&pci_dir.join("devices"));
        let (planned, readers) = plan(&pci_dir.join("devices"), &topology);
        ReadPlan {
            pci_dir: pci_dir.to_path_buf(),
            reread,
            topology: Arc::new(topology),
            listed,
            readers,
            planned,
            generation: 0,
            stale: false,
            next_check_ns: REDISCOVER_NS,
            reads: 0,
        }
    }

    /// The topology the plan covers (the latest after hotplug).
    pub(crate) fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    /// Changes each time the plan (and the topology) is made anew.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Into `out`, the functions (indices, ascending) whose health in `healths`, this plan's
    /// latest read, can differ from that of another read of this [`ReadPlan::generation`]: those
    /// with a file to read, and those taking a trained state that is not the one planned. A
    /// function in neither read's list has the same health in both (its fixed part, and the
    /// trained state planned).
    pub(crate) fn varying(&self, healths: &[LinkHealth], out: &mut Vec<usize>) {
        out.clear();
        for reader in &self.readers {
            out.push(reader.index);
            if healths
                .get(reader.index)
                .is_some_and(|h| trained(h) != reader.planned)
            {
                out.extend_from_slice(&reader.takers);
            }
        }
        out.sort_unstable();
    }

    /// Attribute files sample reads have opened since the plan was made.
    #[cfg(test)]
    pub(crate) fn reads(&self) -> u64 {
        self.reads
    }

    /// At sample time `t_ns`: when due (or after a failed read), compares the `devices/`
    /// listing with the plan and, if a function came or went, reads the topology again and
    /// plans anew. A topology that cannot be read keeps the old plan (and is tried again at
    /// the next check).
    pub(crate) fn refresh(&mut self, t_ns: u64) {
        if !self.stale && t_ns < self.next_check_ns {
            return;
        }
        self.next_check_ns = t_ns.saturating_add(REDISCOVER_NS);
        let devices = self.pci_dir.join("devices");
        let now = listing(&devices);
        if now == self.listed && !self.stale {
            return;
        }
        let Ok(topology) = (self.reread)(&self.pci_dir) else {
            return;
        };
        (self.planned, self.readers) = plan(&devices, &topology);
        self.topology = Arc::new(topology);
        self.listed = now;
        self.stale = false;
        self.generation += 1;
    }

    /// The link health of every function of [`ReadPlan::topology`], in its order.
    #[cfg(test)]
    pub(crate) fn read(&mut self) -> Vec<LinkHealth> {
        let mut out = Vec::new();
        self.read_into(&mut out, false);
        out
    }

    /// [`ReadPlan::read`] into `out`. `kept`: `out` holds what this plan (this
    /// [`ReadPlan::generation`]) read into it last, so only the functions with files to read are
    /// written again, and the functions taking a port's trained state only when it moved;
    /// otherwise every function's health replaces what `out` held (its memory is kept).
    pub(crate) fn read_into(&mut self, out: &mut Vec<LinkHealth>, kept: bool) {
        let mut buffer = [0u8; ATTRIBUTE_BYTES];
        let afresh = !kept || out.len() != self.planned.len();
        // The readers whose trained state differs from what `out` held (every one afresh).
        let mut moved = Vec::new();
        if afresh {
            out.clear();
            out.extend(self.planned.iter().map(|p| p.fixed.clone()));
        }
        for reader in &self.readers {
            let i = reader.index;
            let p = &self.planned[i];
            let mut health = p.fixed.clone();
            for (attribute, held) in &p.each_sample {
                self.reads += 1;
                let text = match held {
                    Some(file) => read_held(file, &mut buffer),
                    None => read_attribute(&p.dir.join(attribute.file()), &mut buffer),
                };
                match text {
                    Some(text) => attribute.apply(text, &mut health),
                    None => self.stale = true,
                }
            }
            if reader.takes {
                // Its port's, as the buffer holds it: written below when the port's moved.
                (health.current_gts, health.current_width) = trained(&out[i]);
            }
            if afresh || trained(&health) != trained(&out[i]) {
                moved.push(i);
            }
            out[i] = health;
        }
        for reader in &self.readers {
            if moved.binary_search(&reader.index).is_ok() {
                for &taker in &reader.takers {
                    (out[taker].current_gts, out[taker].current_width) =
                        trained(&out[reader.index]);
                }
            }
        }
    }
}

/// The entry names of `devices`, sorted (empty when it cannot be listed).
fn listing(devices: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(devices)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort_unstable();
    names
}

/// One directory listing and one read of what is there per function; then the trained-state
/// sharing between each port with a link below it and the functions on its secondary bus.
fn plan(devices: &Path, topology: &Topology) -> (Vec<Planned>, Vec<Reader>) {
    let functions = topology.functions();
    let mut seen: Vec<LinkHealth> = Vec::with_capacity(functions.len());
    let mut planned: Vec<Planned> = functions
        .iter()
        .map(|f| {
            let dir = devices.join(f.bdf.to_string());
            let present: Vec<Attribute> = Attribute::ALL
                .into_iter()
                .filter(|a| dir.join(a.file()).exists())
                .collect();
            let health = read_function_health(&dir);
            let mut fixed = LinkHealth::unknown();
            fixed.capable_gts = health.capable_gts;
            fixed.capable_width = health.capable_width;
            seen.push(health);
            Planned {
                dir,
                fixed,
                each_sample: present
                    .into_iter()
                    .filter(|a| !a.is_static())
                    .map(|a| (a, None))
                    .collect(),
            }
        })
        .collect();
    let mut takers: Vec<Vec<usize>> = vec![Vec::new(); functions.len()];
    let mut taking = vec![false; functions.len()];
    for (i, f) in functions.iter().enumerate() {
        let Some(port) = f
            .parent
            .and_then(|p| functions.binary_search_by_key(&p, |x| x.bdf).ok())
            .filter(|&p| functions[p].kind.has_link_below())
        else {
            continue;
        };
        let trained = |h: &LinkHealth| (h.current_gts, h.current_width);
        let port_reads_it = planned[port]
            .each_sample
            .iter()
            .filter(|(a, _)| a.is_current_link())
            .count()
            == 2;
        if port_reads_it && trained(&seen[i]) == trained(&seen[port]) {
            takers[port].push(i);
            taking[i] = true;
            planned[i].each_sample.retain(|(a, _)| !a.is_current_link());
        }
    }
    let readers = (0..planned.len())
        .filter(|&i| !planned[i].each_sample.is_empty())
        .map(|i| Reader {
            index: i,
            takes: taking[i],
            takers: std::mem::take(&mut takers[i]),
            planned: trained(&seen[i]),
        })
        .collect();
    // Open what each sample reads, up to the limit, in address order.
    let mut held = 0;
    'open: for p in &mut planned {
        for (attribute, file) in &mut p.each_sample {
            if held == HELD_FILES {
                break 'open;
            }
            *file = open_attribute(&p.dir.join(attribute.file())).ok();
            held += usize::from(file.is_some());
        }
    }
    (planned, readers)
}

/// One attribute's text in one read: sysfs fills the whole value on the first read, and so
/// does a snapshot's small regular file; `None` when it cannot be opened or read.
fn read_attribute<'a>(path: &Path, buffer: &'a mut [u8]) -> Option<&'a str> {
    let mut file = open_attribute(path).ok()?;
    let n = file.read(buffer).ok()?;
    std::str::from_utf8(&buffer[..n]).ok()
}

/// `path` opened to read, without access-time updates where the kernel allows that (`O_NOATIME`
/// needs the file's owner; sysfs keeps no access times to update).
fn open_attribute(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOATIME)
        .open(path);
    match opened {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => File::open(path),
        opened => opened,
    }
}

/// A held attribute file's text now: one read from its start.
fn read_held<'a>(file: &File, buffer: &'a mut [u8]) -> Option<&'a str> {
    let n = file.read_at(buffer, 0).ok()?;
    std::str::from_utf8(&buffer[..n]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Bdf;
    use crate::topology::export::export_sysfs;
    use crate::topology::generate::server;
    use crate::topology::sysfs::read_sysfs;
    use std::fs;

    fn reread(dir: &Path) -> Result<Topology> {
        read_sysfs(dir)
    }

    /// The generated server exported, read back, planned; with every health attribute
    /// compared against a fresh full read of each function's directory (the oracle).
    #[test]
    fn a_plan_reads_each_link_once_and_agrees_with_a_full_read() {
        let dir = tempfile::tempdir().unwrap();
        let shape = server(crate::topology::generate::FIXED_FUNCTIONS + 64).unwrap();
        export_sysfs(&shape, dir.path()).unwrap();
        // One root port's AER counters, as the kernel shows them with AER enabled.
        let rp_dir = dir.path().join("devices/0000:00:01.0");
        fs::write(
            rp_dir.join("aer_dev_correctable"),
            "RxErr 1\nBadTLP 0\nTOTAL_ERR_COR 1\n",
        )
        .unwrap();
        fs::write(rp_dir.join("aer_rootport_total_err_cor"), "4\n").unwrap();
        let topology = read_sysfs(dir.path()).unwrap();
        let mut plan = ReadPlan::discover(dir.path(), topology.clone(), reread);
        let health = plan.read();
        for (f, h) in topology.functions().iter().zip(&health) {
            let full = read_function_health(&dir.path().join("devices").join(f.bdf.to_string()));
            assert_eq!(*h, full, "{}", f.bdf);
        }
        // Per sample: the trained state of each link once (16 root ports, 96 + 32 downstream
        // ports: two files each), and the two AER files that exist. Nothing else.
        let links = 16 + 96 + 32;
        assert_eq!(plan.reads(), 2 * links + 2);
        plan.read();
        assert_eq!(plan.reads(), 2 * (2 * links + 2));
    }

    /// More files than a plan holds open: every function with AER counters (three files each)
    /// on top of the links' trained state. Held files and files opened per read both see a
    /// value written after planning, and every function agrees with a full read.
    #[test]
    fn files_past_the_held_ones_are_opened_per_read() {
        let dir = tempfile::tempdir().unwrap();
        let shape = server(crate::topology::generate::FIXED_FUNCTIONS + 64).unwrap();
        export_sysfs(&shape, dir.path()).unwrap();
        let topology = read_sysfs(dir.path()).unwrap();
        let aer = |bdf: Bdf, fatal: u64| {
            let at = dir.path().join("devices").join(bdf.to_string());
            fs::write(at.join("aer_dev_correctable"), "TOTAL_ERR_COR 0\n").unwrap();
            fs::write(at.join("aer_dev_nonfatal"), "TOTAL_ERR_NONFATAL 0\n").unwrap();
            fs::write(
                at.join("aer_dev_fatal"),
                format!("TOTAL_ERR_FATAL {fatal}\n"),
            )
            .unwrap();
        };
        for f in topology.functions() {
            aer(f.bdf, 0);
        }
        let mut plan = ReadPlan::discover(dir.path(), topology.clone(), reread);
        let per_sample = 2 * (16 + 96 + 32) + 3 * topology.functions().len();
        assert!(per_sample > HELD_FILES, "{per_sample}");
        let held: usize = plan
            .planned
            .iter()
            .flat_map(|p| &p.each_sample)
            .filter(|(_, file)| file.is_some())
            .count();
        assert_eq!(held, HELD_FILES);
        // The first function's files are held, the last one's are not.
        let functions = topology.functions();
        let (early, late) = (functions[0].bdf, functions[functions.len() - 1].bdf);
        assert!(plan.planned[0].each_sample.iter().all(|(_, f)| f.is_some()));
        assert!(plan.planned[functions.len() - 1]
            .each_sample
            .iter()
            .all(|(_, f)| f.is_none()));
        plan.read();
        aer(early, 3);
        aer(late, 5);
        let health = plan.read();
        assert_eq!(plan.reads(), 2 * per_sample as u64);
        assert_eq!(health[0].aer.fatal, Some(3));
        assert_eq!(health[functions.len() - 1].aer.fatal, Some(5));
        for (f, h) in functions.iter().zip(&health) {
            let full = read_function_health(&dir.path().join("devices").join(f.bdf.to_string()));
            assert_eq!(*h, full, "{}", f.bdf);
        }
        assert_eq!(plan.generation(), 0);
    }

    #[test]
    fn a_link_retraining_shows_at_both_ends_and_hotplug_replans() {
        let dir = tempfile::tempdir().unwrap();
        let shape = server(crate::topology::generate::FIXED_FUNCTIONS).unwrap();
        export_sysfs(&shape, dir.path()).unwrap();
        let topology = read_sysfs(dir.path()).unwrap();
        let mut plan = ReadPlan::discover(dir.path(), topology, reread);
        // The first NVMe's link drops to x1: the kernel shows it at the downstream port and
        // at the drive; the plan reads the port's and gives the drive the same.
        let (port, drive) = ("0000:02:00.0", "0000:03:00.0");
        for end in [port, drive] {
            fs::write(
                dir.path()
                    .join("devices")
                    .join(end)
                    .join("current_link_width"),
                "1\n",
            )
            .unwrap();
        }
        let index = |plan: &ReadPlan, bdf: &str| {
            plan.topology()
                .functions()
                .binary_search_by_key(&bdf.parse().unwrap(), |f| f.bdf)
                .unwrap()
        };
        let health = plan.read();
        let d = &health[index(&plan, drive)];
        assert_eq!((d.current_width, d.capable_width), (Some(1), Some(4)));
        assert!(d.downgraded());
        // Trained otherwise than planned, the drive's health can differ from another read's.
        let mut varying = Vec::new();
        plan.varying(&health, &mut varying);
        assert!(varying.contains(&index(&plan, drive)));
        // A buffer kept from the previous read, written again only where a sample can change
        // it, ends the same as a fresh read: the retrain shows, and back again.
        let mut kept = health.clone();
        for end in [port, drive] {
            let file = dir
                .path()
                .join("devices")
                .join(end)
                .join("current_link_width");
            fs::write(file, "4\n").unwrap();
        }
        plan.read_into(&mut kept, true);
        assert_eq!(kept, plan.read());
        // Back as planned: only the port, whose files are read, can differ.
        plan.varying(&kept, &mut varying);
        assert!(varying.contains(&index(&plan, port)));
        assert!(!varying.contains(&index(&plan, drive)));
        assert_eq!(kept[index(&plan, drive)].current_width, Some(4));
        assert_ne!(kept, health);
        // A file that appears after planning is not read until the next plan.
        let aer = dir.path().join("devices").join(drive).join("aer_dev_fatal");
        fs::write(&aer, "TOTAL_ERR_FATAL 2\n").unwrap();
        assert_eq!(plan.read()[index(&plan, drive)].aer.fatal, None);
        // Not due yet: the listing is not even looked at.
        plan.refresh(REDISCOVER_NS - 1);
        assert_eq!(plan.generation(), 0);
        // The drive is removed: its symlink goes; the next check re-plans without it.
        fs::remove_file(dir.path().join("devices").join(drive)).unwrap();
        plan.refresh(REDISCOVER_NS);
        assert_eq!(plan.generation(), 1);
        let functions = plan.topology().functions().len();
        assert_eq!(functions, crate::topology::generate::FIXED_FUNCTIONS - 1);
        assert_eq!(plan.read().len(), functions);
    }
}
