//! An outside count of real block traffic for tests of `--machine host`: the disk under the
//! test's scratch directory (`CARGO_TARGET_TMPDIR`), the PCI function it hangs off, the
//! kernel's sectors-read counter for it in /proc/diskstats, and reads driven past the page cache
//! with `dd iflag=direct`. The derived source reads /sys/block/*/stat; /proc/diskstats is the
//! kernel's other rendering of the same counters, read here by a separate parser. When the
//! scratch directory is on no PCI disk (tmpfs, overlay, a virtual device) the test fails saying
//! so, never passes silently.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A disk on a PCI function and a scratch directory on it.
pub struct PciDisk {
    /// `vda`, `nvme0n1`: the whole disk (a partition's sectors are counted in it too).
    pub name: String,
    /// The function it belongs to, `0000:00:02.0`.
    pub bdf: String,
    pub scratch: PathBuf,
}

fn is_bdf(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && text
            .chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10].contains(&i) || c.is_ascii_hexdigit())
}

/// The PCI disk holding `CARGO_TARGET_TMPDIR`.
pub fn pci_disk() -> PciDisk {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&scratch).unwrap();
    let dev = std::fs::metadata(&scratch).unwrap().dev();
    // Linux's dev_t split (glibc's gnu_dev_major/minor).
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let link = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let mut device = std::fs::canonicalize(&link).unwrap_or_else(|e| {
        panic!(
            "{} is on device {major}:{minor}, which is no block device ({}: {e}); these tests \
             need their scratch directory on a disk on a PCI function",
            scratch.display(),
            link.display()
        )
    });
    if device.join("partition").exists() {
        device.pop();
    }
    let name = device.file_name().unwrap().to_string_lossy().into_owned();
    let bdf = device
        .components()
        .filter_map(|c| c.as_os_str().to_str().filter(|t| is_bdf(t)))
        .next_back()
        .unwrap_or_else(|| {
            panic!(
                "{} is on {name} ({}), which hangs off no PCI function; these tests need their \
                 scratch directory on a disk on a PCI function",
                scratch.display(),
                device.display()
            )
        })
        .to_string();
    PciDisk { name, bdf, scratch }
}

/// Bytes read from `disk` since boot: /proc/diskstats' sectors read (the 6th field) × 512.
pub fn bytes_read(disk: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap();
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(2) == Some(&disk))
        .and_then(|f| f.get(5)?.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no {disk} in /proc/diskstats:\n{text}"))
        * 512
}

/// A file of `mib` MiB of random bytes under `dir`, flushed to the disk.
pub fn file_on_disk(dir: &Path, mib: u32) -> PathBuf {
    let path = dir.join(format!("direct-read-{}", std::process::id()));
    let out = Command::new("dd")
        .arg("if=/dev/urandom")
        .arg(format!("of={}", path.display()))
        .args(["bs=1M", &format!("count={mib}"), "conv=fsync"])
        .output()
        .expect("dd (coreutils)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// Reads `file` whole with O_DIRECT, so every byte comes from the disk; returns the bytes dd
/// says it copied.
pub fn read_direct(file: &Path) -> u64 {
    let out = Command::new("dd")
        .arg(format!("if={}", file.display()))
        .args(["of=/dev/null", "bs=1M", "iflag=direct"])
        .output()
        .expect("dd (coreutils)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
        .lines()
        .find(|l| l.contains(" bytes"))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no byte count in dd's report: {stderr}"))
}
