//! Traffic derived without a PMU: the byte counters Linux keeps per block device
//! (`/sys/block/*/stat`, sectors of 512 bytes read and written) and per network interface
//! (`/sys/class/net/*/statistics/{rx,tx}_bytes`), each mapped to the PCI function it belongs to
//! through the device path its sysfs entry links to. A disk read and a received frame are data the
//! device writes to memory (upstream, the root port's Rx); a disk write and a sent frame are data it
//! reads from memory (downstream, Tx). Everything is read under a chosen root (`/` or a fixture
//! tree), each file capped, the number of entries bounded.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::input::read_capped;
use crate::pcie::Bdf;

/// The most entries read from one of `/sys/block` and `/sys/class/net`: far above any real
/// machine's disks and NICs, a bound on the work one sample does when a directory is huge.
pub(crate) const MAX_DEVICES: usize = 4096;

/// The most of one counter file read (the kernel fills at most a page).
const ATTRIBUTE_BYTES: u64 = 4096;

/// A disk sector as `/sys/block/*/stat` counts it, whatever the device's own sector size.
const SECTOR_BYTES: u64 = 512;

/// One block device's or network interface's byte counters and the function they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeviceBytes {
    /// `block/nvme0n1` or `net/eth0`.
    pub(crate) name: String,
    pub(crate) function: Bdf,
    /// Bytes the device moved toward the root complex (disk reads, received frames).
    pub(crate) up: u64,
    /// Bytes it moved away from it (disk writes, sent frames).
    pub(crate) down: u64,
}

/// Reads the byte counters of every block device and network interface under a root that
/// belongs to a PCI function. Which function an entry belongs to is resolved once per entry
/// name (its device path does not change while it exists; resolving walks every component of
/// a deep path) and forgotten when the entry goes, so a sample lists two directories and reads
/// the counter files of the devices it knows.
#[derive(Debug)]
pub(crate) struct DeviceReader {
    root: PathBuf,
    /// `block/nvme0n1` → its function, `None` for entries on no PCI function (loop, lo, …).
    functions: BTreeMap<String, Option<Bdf>>,
}

impl DeviceReader {
    pub(crate) fn new(root: &Path) -> DeviceReader {
        DeviceReader {
            root: root.to_path_buf(),
            functions: BTreeMap::new(),
        }
    }

    /// Every such device now, in name order. Devices with no PCI function on their path
    /// (loop, dm, md, lo, bridges, veth) and entries whose counters cannot be read or parsed
    /// are left out; a missing directory is empty.
    pub(crate) fn read(&mut self) -> Vec<DeviceBytes> {
        let mut found = Vec::new();
        let mut listed = BTreeSet::new();
        for (kind, dir) in [("block", "sys/block"), ("net", "sys/class/net")] {
            for (name, path) in entries(&self.root.join(dir)) {
                let key = format!("{kind}/{name}");
                let function = *self
                    .functions
                    .entry(key.clone())
                    .or_insert_with(|| pci_function_of(&path));
                listed.insert(key.clone());
                let Some(function) = function else { continue };
                let counts = if kind == "block" {
                    read_text(&path.join("stat"))
                        .and_then(|t| sectors(&t))
                        .map(|(r, w)| {
                            (
                                r.saturating_mul(SECTOR_BYTES),
                                w.saturating_mul(SECTOR_BYTES),
                            )
                        })
                } else {
                    let counter = |file: &str| {
                        read_text(&path.join("statistics").join(file))
                            .and_then(|t| t.parse::<u64>().ok())
                    };
                    counter("rx_bytes").zip(counter("tx_bytes"))
                };
                if let Some((up, down)) = counts {
                    found.push(DeviceBytes {
                        name: key,
                        function,
                        up,
                        down,
                    });
                }
            }
        }
        self.functions.retain(|key, _| listed.contains(key));
        found
    }
}

/// Sectors read and written: fields 3 and 7 of `stat` (Documentation/block/stat.rst).
fn sectors(text: &str) -> Option<(u64, u64)> {
    let fields: Vec<&str> = text.split_whitespace().collect();
    Some((fields.get(2)?.parse().ok()?, fields.get(6)?.parse().ok()?))
}

fn read_text(path: &Path) -> Option<String> {
    let bytes = read_capped(path, ATTRIBUTE_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

/// Up to [`MAX_DEVICES`] entries of `dir`, sorted by name.
fn entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = read
        .filter_map(|e| e.ok())
        .take(MAX_DEVICES)
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
    out
}

/// The PCI function a sysfs device belongs to: the deepest `DDDD:BB:DD.F` directory on the path
/// its entry resolves to (`…/0000:00:02.0/0000:01:00.0/nvme/nvme0/nvme0n1`). A multipath NVMe
/// namespace hangs off a virtual `nvme-subsysN` instead; it belongs to the function of that
/// subsystem's one controller (none when several controllers share it: the bytes cannot be
/// split between their paths from these counters).
pub(crate) fn pci_function_of(entry: &Path) -> Option<Bdf> {
    let resolved = fs::canonicalize(entry).ok()?;
    if let Some(bdf) = deepest_bdf(&resolved) {
        return Some(bdf);
    }
    let subsystem = resolved
        .ancestors()
        .find(|a| {
            a.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("nvme-subsys"))
        })?
        .to_path_buf();
    let controllers: Vec<Bdf> = entries(&subsystem)
        .into_iter()
        .filter(|(name, _)| {
            name.strip_prefix("nvme")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|(_, path)| deepest_bdf(&fs::canonicalize(path).ok()?))
        .collect();
    match controllers.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// The last path component written as a full `DDDD:BB:DD.F` address.
fn deepest_bdf(path: &Path) -> Option<Bdf> {
    path.components()
        .filter_map(|c| {
            let text = c.as_os_str().to_str()?;
            (text.len() == 12).then(|| text.parse::<Bdf>().ok())?
        })
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn block_and_net_devices_map_to_their_functions() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let nvme = "sys/devices/pci0000:00/0000:00:02.0/0000:01:00.0/0000:02:00.0/0000:03:00.0";
        let disk = format!("{nvme}/nvme/nvme0/nvme0n1");
        let nic = "sys/devices/pci0000:00/0000:00:03.0/0000:04:00.0/net/eth0";
        for dir in [
            disk.as_str(),
            nic,
            "sys/devices/virtual/block/loop0",
            "sys/block",
        ] {
            fs::create_dir_all(r.join(dir)).unwrap();
        }
        fs::create_dir_all(r.join(nic).join("statistics")).unwrap();
        fs::create_dir_all(r.join("sys/class/net")).unwrap();
        // Fields: reads, merged, sectors read, ms, writes, merged, sectors written, ...
        fs::write(r.join(&disk).join("stat"), "10 0 2048 5 3 0 64 1 0 4 6\n").unwrap();
        fs::write(
            r.join("sys/devices/virtual/block/loop0/stat"),
            "1 0 8 0 0 0 8 0\n",
        )
        .unwrap();
        fs::write(r.join(nic).join("statistics/rx_bytes"), "1500\n").unwrap();
        fs::write(r.join(nic).join("statistics/tx_bytes"), "60\n").unwrap();
        symlink(format!("../../{disk}"), r.join("sys/block/nvme0n1")).unwrap();
        symlink("../devices/virtual/block/loop0", r.join("sys/block/loop0")).unwrap();
        symlink(format!("../../../{nic}"), r.join("sys/class/net/eth0")).unwrap();
        let found = DeviceReader::new(r).read();
        assert_eq!(
            found,
            vec![
                DeviceBytes {
                    name: "block/nvme0n1".into(),
                    function: "0000:03:00.0".parse().unwrap(),
                    up: 2048 * 512,
                    down: 64 * 512,
                },
                DeviceBytes {
                    name: "net/eth0".into(),
                    function: "0000:04:00.0".parse().unwrap(),
                    up: 1500,
                    down: 60,
                },
            ]
        );
    }

    /// /proc/diskstats: disk name → bytes read and written (sectors, its 6th and 10th fields,
    /// × 512), parsed on its own as the outside count.
    fn proc_diskstats() -> BTreeMap<String, (u64, u64)> {
        fs::read_to_string("/proc/diskstats")
            .unwrap()
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let sectors = |i: usize| f.get(i)?.parse::<u64>().ok();
                Some((
                    f.get(2)?.to_string(),
                    (sectors(5)? * 512, sectors(9)? * 512),
                ))
            })
            .collect()
    }

    #[test]
    fn this_machines_pci_disks_read_as_proc_diskstats_counts_them() {
        let before = proc_diskstats();
        let found = DeviceReader::new(Path::new("/")).read();
        let after = proc_diskstats();
        let disks: Vec<&DeviceBytes> = found
            .iter()
            .filter(|d| d.name.starts_with("block/"))
            .collect();
        assert!(
            !disks.is_empty(),
            "this test needs a disk on a PCI function under /sys/block; found {found:?}"
        );
        for d in disks {
            let name = &d.name["block/".len()..];
            let (b, a) = (before[name], after[name]);
            assert!(
                b.0 <= d.up && d.up <= a.0 && d.up > 0,
                "{name}: read {} B, /proc/diskstats {}..{}",
                d.up,
                b.0,
                a.0
            );
            assert!(
                b.1 <= d.down && d.down <= a.1,
                "{name}: written {} B, /proc/diskstats {}..{}",
                d.down,
                b.1,
                a.1
            );
        }
    }

    #[test]
    fn a_multipath_namespace_belongs_to_its_one_controller() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let ctrl = "sys/devices/pci0000:00/0000:00:04.0/0000:05:00.0/nvme/nvme0";
        let head = "sys/devices/virtual/nvme-subsystem/nvme-subsys0";
        fs::create_dir_all(r.join(ctrl)).unwrap();
        fs::create_dir_all(r.join(head).join("nvme0n1")).unwrap();
        symlink(format!("../../../../../{ctrl}"), r.join(head).join("nvme0")).unwrap();
        assert_eq!(
            pci_function_of(&r.join(head).join("nvme0n1")),
            Some("0000:05:00.0".parse().unwrap())
        );
        // A second controller in the subsystem: the namespace's bytes cannot be placed.
        let other = "sys/devices/pci0000:00/0000:00:05.0/0000:06:00.0/nvme/nvme1";
        fs::create_dir_all(r.join(other)).unwrap();
        symlink(
            format!("../../../../../{other}"),
            r.join(head).join("nvme1"),
        )
        .unwrap();
        assert_eq!(pci_function_of(&r.join(head).join("nvme0n1")), None);
    }
}
