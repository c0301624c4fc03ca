//! Memory mappings of device files (a BAR's `resourceN`, p2pmem's `allocate`) and of host
//! memory: what measuring on a host (`host_mmio.rs`, the lab's p2p copies) reads and writes
//! through. Unmapped when dropped.

use std::fs;
use std::path::Path;

use crate::error::{Error, Result};

/// A page-aligned buffer: a shared mapping of a file (p2pmem's `allocate`, a BAR's
/// `resourceN`) or anonymous host memory.
pub(crate) struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    /// `len` bytes of `path` from `offset` (page-aligned) mapped shared, readable and writable.
    pub(crate) fn shared(path: &Path, offset: u64, len: u64) -> std::io::Result<Mapping> {
        let file = fs::OpenOptions::new().read(true).write(true).open(path)?;
        use std::os::fd::AsRawFd;
        Mapping::map_at(file.as_raw_fd(), offset, len, libc::MAP_SHARED)
    }

    /// The first byte of the mapping.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr as *mut u8
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `len` bytes of anonymous host memory, private to this process.
    pub(crate) fn anonymous(len: u64) -> Result<Mapping> {
        Mapping::map(-1, len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS)
            .map_err(|e| Error::runtime(format!("mmap {len} bytes of host memory: {e}")))
    }

    fn map(fd: i32, len: u64, flags: i32) -> std::io::Result<Mapping> {
        Mapping::map_at(fd, 0, len, flags)
    }

    fn map_at(fd: i32, offset: u64, len: u64, flags: i32) -> std::io::Result<Mapping> {
        let len = len as usize;
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh mapping; the kernel picks the address. A p2pmem mapping stays valid
        // after its file is closed.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }

    /// The whole mapping as bytes.
    #[allow(clippy::mut_from_ref)]
    pub(crate) fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: the mapping is readable and writable for `len` bytes; callers do not hold two
        // slices at once.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}
