//! The p2pmem copy benchmark (the seed's p2pmem-test idea), run inside a guest or on a host with
//! CONFIG_PCI_P2PDMA: O_DIRECT reads from one NVMe namespace into peer-to-peer memory of a PCI
//! device (`p2pmem/allocate`, shared mmap), O_DIRECT writes of that buffer to another namespace,
//! optional verification, and the same copy through host memory for comparison. A refused
//! peer-to-peer transfer fails with EREMOTEIO; that is reported as a result, with the step.

use serde::Serialize;
use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::machine::mapping::Mapping;
use crate::pcie::Bdf;

/// What to copy.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// The file or block device copied from.
    pub src: PathBuf,
    /// The file or block device copied to.
    pub dst: PathBuf,
    /// The device whose p2pmem is the buffer.
    pub p2pmem: Bdf,
    /// Bytes to copy in all.
    pub size: u64,
    /// Bytes per read and write: the size of the p2pmem (and host memory) buffer.
    pub chunk: u64,
    /// Fill the source with a pattern first and compare the destination afterwards.
    pub check: bool,
    /// sysfs root (`/` on a live system).
    pub root: PathBuf,
}

/// One copy's outcome.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CopyResult {
    /// Whether the whole copy (and its check, where asked) succeeded.
    pub ok: bool,
    /// Bytes copied before the end or the failure.
    pub bytes: u64,
    pub(crate) seconds: f64,
    /// Megabytes (10^6 bytes) per second; null when the copy failed.
    pub mb_s: Option<f64>,
    /// `read` (source into the buffer) or `write` (buffer to destination) when it failed.
    pub failed_step: Option<&'static str>,
    pub(crate) errno: Option<i32>,
    /// The failure as the kernel worded it (`strerror`), when the copy failed.
    pub error: Option<String>,
}

/// The benchmark's report.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CopyReport {
    pub(crate) src: PathBuf,
    pub(crate) dst: PathBuf,
    pub(crate) p2pmem: Bdf,
    pub(crate) size: u64,
    pub(crate) chunk: u64,
    /// The copy through the device's p2pmem.
    pub p2p: CopyResult,
    /// The same copy through host memory, to compare with.
    pub host_memory: CopyResult,
    /// `match`, `mismatch`, or null without `--check` or when the p2p copy failed.
    pub check: Option<&'static str>,
}

impl CopyReport {
    /// What was copied, then one line per copy (rate and time, or where it failed) and the
    /// data check.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "p2p copy {} -> {} via p2pmem of {} ({} bytes in {} byte requests)\n",
            self.src.display(),
            self.dst.display(),
            self.p2pmem,
            self.size,
            self.chunk
        );
        for (label, r) in [("p2pmem", &self.p2p), ("host memory", &self.host_memory)] {
            text.push_str(&match r.mb_s {
                Some(rate) => format!("  {label:<12} {rate:10.2} MB/s ({:.3} s)\n", r.seconds),
                None => format!(
                    "  {label:<12} failed at {} after {} bytes: {}\n",
                    r.failed_step.unwrap_or("?"),
                    r.bytes,
                    r.error.as_deref().unwrap_or("?")
                ),
            });
        }
        if let Some(check) = self.check {
            text.push_str(&format!("  data check   {check}\n"));
        }
        text
    }
}

/// Resolves a block device argument: a path, or a PCI address of an NVMe controller (its first
/// namespace, found through sysfs as udev's by-path names do).
pub fn resolve_namespace(root: &Path, arg: &str) -> Result<PathBuf> {
    let Ok(bdf) = arg.parse::<Bdf>() else {
        return Ok(PathBuf::from(arg));
    };
    let block = root.join("sys/block");
    let mut found: Vec<String> = fs::read_dir(&block)
        .map_err(|e| Error::io(&block, e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let pci = fs::canonicalize(e.path().join("device/device")).ok()?;
            (pci.file_name()?.to_str()? == bdf.to_string()).then_some(name)
        })
        .collect();
    found.sort();
    found
        .first()
        .map(|name| root.join("dev").join(name))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "{bdf} has no NVMe namespace in {}: give a block device path or the address \
                 of an NVMe controller",
                block.display()
            ))
        })
}

/// Runs the p2p copy and the host-memory copy.
pub fn run(options: &CopyOptions) -> Result<CopyReport> {
    if options.chunk == 0
        || !options.chunk.is_multiple_of(4096)
        || !options.size.is_multiple_of(options.chunk)
    {
        return Err(Error::bad_input(format!(
            "--chunk {} / --size {}: the chunk must be a multiple of 4096 and divide the size",
            options.chunk, options.size
        )));
    }
    let src = Device::open(&options.src)?;
    let dst = Device::open(&options.dst)?;
    let allocate = options
        .root
        .join("sys/bus/pci/devices")
        .join(options.p2pmem.to_string())
        .join("p2pmem/allocate");
    let p2p_buffer = p2pmem(&allocate, options.chunk)?;
    let host_buffer = Mapping::anonymous(options.chunk)?;

    if options.check {
        fill_pattern(&src, &host_buffer, options)?;
    }
    let p2p = copy(&src, &dst, &p2p_buffer, options);
    let check = if options.check && p2p.ok {
        Some(compare(&dst, &host_buffer, options)?)
    } else {
        None
    };
    let host_memory = copy(&src, &dst, &host_buffer, options);
    Ok(CopyReport {
        src: options.src.clone(),
        dst: options.dst.clone(),
        p2pmem: options.p2pmem,
        size: options.size,
        chunk: options.chunk,
        p2p,
        host_memory,
        check,
    })
}

fn copy(src: &Device, dst: &Device, buffer: &Mapping, options: &CopyOptions) -> CopyResult {
    let started = Instant::now();
    let mut done = 0u64;
    while done < options.size {
        let read = src.read_at(buffer, done);
        if read < 0 {
            return failed("read", -read as i32, done, started);
        }
        let written = dst.write_at(buffer, done);
        if written < 0 {
            return failed("write", -written as i32, done, started);
        }
        done += options.chunk;
    }
    let seconds = started.elapsed().as_secs_f64();
    CopyResult {
        ok: true,
        bytes: done,
        seconds,
        mb_s: Some(done as f64 / 1e6 / seconds.max(1e-9)),
        failed_step: None,
        errno: None,
        error: None,
    }
}

fn failed(step: &'static str, errno: i32, bytes: u64, started: Instant) -> CopyResult {
    CopyResult {
        ok: false,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        mb_s: None,
        failed_step: Some(step),
        errno: Some(errno),
        error: Some(std::io::Error::from_raw_os_error(errno).to_string()),
    }
}

/// A deterministic pattern per chunk (xorshift), so a stale or shifted block cannot match.
fn pattern(chunk_index: u64, out: &mut [u8]) {
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ (chunk_index.wrapping_mul(0x2545_f491_4f6c_dd1d));
    for word in out.chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        word.copy_from_slice(&state.to_le_bytes()[..word.len()]);
    }
}

fn fill_pattern(src: &Device, buffer: &Mapping, options: &CopyOptions) -> Result<()> {
    let mut offset = 0;
    while offset < options.size {
        pattern(offset / options.chunk, buffer.bytes_mut());
        if src.write_at(buffer, offset) < 0 {
            return Err(Error::runtime(format!(
                "writing the check pattern to {}: {}",
                src.path.display(),
                std::io::Error::last_os_error()
            )));
        }
        offset += options.chunk;
    }
    Ok(())
}

fn compare(dst: &Device, buffer: &Mapping, options: &CopyOptions) -> Result<&'static str> {
    let mut expected = vec![0u8; options.chunk as usize];
    let mut offset = 0;
    while offset < options.size {
        if dst.read_at(buffer, offset) < 0 {
            return Err(Error::runtime(format!(
                "reading {} back: {}",
                dst.path.display(),
                std::io::Error::last_os_error()
            )));
        }
        pattern(offset / options.chunk, &mut expected);
        if buffer.bytes_mut() != expected.as_slice() {
            return Ok("mismatch");
        }
        offset += options.chunk;
    }
    Ok("match")
}

/// A block device opened for O_DIRECT reads and writes.
struct Device {
    fd: i32,
    path: PathBuf,
}

impl Device {
    fn open(path: &Path) -> Result<Device> {
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| Error::bad_input(format!("bad path {}", path.display())))?;
        // SAFETY: a valid NUL-terminated path; the descriptor is owned and closed in Drop.
        let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDWR | libc::O_DIRECT) };
        if fd < 0 {
            return Err(Error::runtime(format!(
                "{}: {}",
                path.display(),
                std::io::Error::last_os_error()
            )));
        }
        Ok(Device {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Reads one buffer-sized block at `offset`: bytes read, or `-errno`.
    fn read_at(&self, buffer: &Mapping, offset: u64) -> i64 {
        // SAFETY: the mapping is valid for `len` bytes for the lifetime of `buffer`.
        let n = unsafe {
            libc::pread(
                self.fd,
                buffer.as_ptr().cast(),
                buffer.len(),
                offset as libc::off_t,
            )
        };
        result(n as i64, buffer.len())
    }

    fn write_at(&self, buffer: &Mapping, offset: u64) -> i64 {
        // SAFETY: as for `read_at`.
        let n = unsafe {
            libc::pwrite(
                self.fd,
                buffer.as_ptr().cast(),
                buffer.len(),
                offset as libc::off_t,
            )
        };
        result(n as i64, buffer.len())
    }
}

fn result(n: i64, len: usize) -> i64 {
    if n < 0 {
        -(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as i64)
    } else if n as usize != len {
        -(libc::EIO as i64) // a short transfer on a block device: treat as an I/O error
    } else {
        n
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the descriptor came from open and is closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// `allocate` (a device's published p2pmem) mapped for `len` bytes.
fn p2pmem(allocate: &Path, len: u64) -> Result<Mapping> {
    Mapping::shared(allocate, 0, len).map_err(|e| {
        Error::runtime(format!(
            "{}: {e} (the device has no published p2pmem: no CMB/BAR registered, or \
             a kernel without CONFIG_PCI_P2PDMA)",
            allocate.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(ok: bool) -> CopyResult {
        CopyResult {
            ok,
            bytes: if ok { 1 << 20 } else { 4096 },
            seconds: 0.5,
            mb_s: ok.then_some(2097.152),
            failed_step: (!ok).then_some("read"),
            errno: (!ok).then_some(121),
            error: (!ok).then(|| "Remote I/O error".to_string()),
        }
    }

    #[test]
    fn text_gives_each_copy_its_rate_or_failure() {
        let report = CopyReport {
            src: "/dev/nvme0n1".into(),
            dst: "/dev/nvme1n1".into(),
            p2pmem: crate::pcie::bdf("03:00.0"),
            size: 1 << 20,
            chunk: 65536,
            p2p: copy(false),
            host_memory: copy(true),
            check: None,
        };
        assert_eq!(
            report.to_text(),
            "p2p copy /dev/nvme0n1 -> /dev/nvme1n1 via p2pmem of 0000:03:00.0 (1048576 bytes in \
             65536 byte requests)\n  p2pmem       failed at read after 4096 bytes: Remote I/O \
             error\n  host memory     2097.15 MB/s (0.500 s)\n"
        );
        let checked = CopyReport {
            p2p: copy(true),
            check: Some("match"),
            ..report
        };
        assert!(checked.to_text().ends_with("\n  data check   match\n"));
    }

    #[test]
    fn pattern_differs_per_chunk_and_repeats() {
        let (mut a, mut b, mut c) = (vec![0u8; 4096], vec![0u8; 4096], vec![0u8; 4096]);
        pattern(0, &mut a);
        pattern(1, &mut b);
        pattern(0, &mut c);
        assert_ne!(a, b);
        assert_eq!(a, c);
        assert!(a.iter().any(|&x| x != 0));
    }

    #[test]
    fn chunk_must_be_aligned_and_divide_the_size() {
        let options = CopyOptions {
            src: "/nonexistent".into(),
            dst: "/nonexistent".into(),
            p2pmem: "00:00.0".parse().unwrap(),
            size: 8192,
            chunk: 3000,
            check: false,
            root: "/".into(),
        };
        let err = run(&options).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.message().contains("--chunk 3000"));
    }
}
