//! MMIO measured on a host (`Machine::mmio` on `host`): map `/sys/bus/pci/devices/BDF/resourceN`
//! (or `resourceN_wc`), then for a fixed time have each thread store, load or memcpy with
//! accesses of 4, 8, 16 or 64 bytes over its slice of the mapping. Stores write a pattern derived
//! from each word's offset, and loads compare what they read with it, so a store run followed by
//! a load run is a read-back check. BARs that are not memory, and BARs of a function a driver
//! owns (unless forced), are refused before anything is mapped.

use std::path::Path;
use std::time::{Duration, Instant};

use super::mapping::Mapping;
use super::mmio::{MmioOperation, MmioOptions, MmioReport, MmioResult};
use crate::error::{Error, Result};
use crate::linux::bar_resource;
use crate::pcie::Bdf;

/// IORESOURCE_* flags from include/linux/ioport.h, as sysfs `resource` prints them.
const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_MEM: u64 = 0x200;
const IORESOURCE_PREFETCH: u64 = 0x2000;

/// BAR `bar` of the function at `dir`: size and whether it is prefetchable; errors for I/O,
/// unassigned or missing BARs.
fn memory_bar(dir: &Path, bdf: Bdf, bar: u8) -> Result<(u64, bool)> {
    let table = crate::input::read_capped(&dir.join("resource"), 4096).map_err(|e| {
        Error::bad_input(format!(
            "{bdf}: cannot read {}: {e} (no such PCI function?)",
            dir.join("resource").display()
        ))
    })?;
    let table = String::from_utf8_lossy(&table);
    let Some((start, end, flags)) = bar_resource(&table, usize::from(bar)) else {
        return Err(Error::runtime(format!(
            "{bdf}: resource line {bar} is missing or unreadable"
        )));
    };
    if flags & IORESOURCE_IO != 0 {
        return Err(Error::bad_input(format!(
            "{bdf} BAR{bar} is an I/O port BAR, not memory: it cannot be mapped; choose a memory BAR"
        )));
    }
    if flags & IORESOURCE_MEM == 0 || end <= start {
        return Err(Error::bad_input(format!(
            "{bdf} BAR{bar} is not an assigned memory BAR (flags {flags:#x}); choose another --bar"
        )));
    }
    Ok((end - start + 1, flags & IORESOURCE_PREFETCH != 0))
}

/// The word at byte `offset` in the store pattern: distinct per offset so that a read-back
/// catches misplaced as well as lost writes.
fn pattern(offset: u64) -> u64 {
    (offset.wrapping_add(1))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(17)
}

/// Stores `width` bytes of pattern at `offset` of the mapping (`base` is the mapping's start).
///
/// # Safety
/// `base + offset .. + width` lies inside a live, writable mapping.
unsafe fn store(base: *mut u8, offset: usize, width: u32) {
    // SAFETY: the caller keeps `base + offset .. + width` inside a live, writable mapping.
    unsafe {
        let p = base.add(offset);
        let o = offset as u64;
        match width {
            4 => std::ptr::write_volatile(p as *mut u32, pattern(o) as u32),
            8 => std::ptr::write_volatile(p as *mut u64, pattern(o)),
            16 => std::ptr::write_volatile(
                p as *mut u128,
                u128::from(pattern(o)) | (u128::from(pattern(o + 8)) << 64),
            ),
            _ => {
                for k in 0..8 {
                    std::ptr::write_volatile((p as *mut u64).add(k), pattern(o + 8 * k as u64));
                }
            }
        }
    }
}

/// Loads `width` bytes at `offset` and says whether they equal the store pattern.
///
/// # Safety
/// `base + offset .. + width` lies inside a live, readable mapping.
unsafe fn load_matches(base: *mut u8, offset: usize, width: u32) -> bool {
    // SAFETY: the caller keeps `base + offset .. + width` inside a live, readable mapping.
    unsafe {
        let p = base.add(offset);
        let o = offset as u64;
        match width {
            4 => std::ptr::read_volatile(p as *const u32) == pattern(o) as u32,
            8 => std::ptr::read_volatile(p as *const u64) == pattern(o),
            16 => {
                let v = std::ptr::read_volatile(p as *const u128);
                v == (u128::from(pattern(o)) | (u128::from(pattern(o + 8)) << 64))
            }
            _ => (0..8).fold(true, |all, k| {
                let v = std::ptr::read_volatile((p as *const u64).add(k));
                all & (v == pattern(o + 8 * k as u64))
            }),
        }
    }
}

/// One timed pass of the threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    Store,
    Load,
    /// memcpy from host memory into the BAR.
    CopyIn,
    /// memcpy from the BAR into host memory.
    CopyOut,
}

impl Pass {
    fn name(self) -> &'static str {
        match self {
            Pass::Store => "store",
            Pass::Load => "load",
            Pass::CopyIn => "memcpy_toio",
            Pass::CopyOut => "memcpy_fromio",
        }
    }
}

/// Raw pointer that may cross into scoped threads (each thread uses its own slice).
#[derive(Clone, Copy)]
struct Base(*mut u8);
// SAFETY: threads touch disjoint ranges of one mapping that outlives them.
unsafe impl Send for Base {}
unsafe impl Sync for Base {}

/// Per-thread tally.
#[derive(Default)]
struct Tally {
    accesses: u64,
    verified: u64,
    mismatched: u64,
}

fn run_threads(base: Base, options: &MmioOptions, pass: Pass, deadline: Duration) -> (Tally, f64) {
    let slice = (options.bytes / u64::from(options.threads)) as usize;
    let width = options.width as usize;
    let start = Instant::now();
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..options.threads as usize)
            .map(|t| {
                scope.spawn(move || {
                    // The whole wrapper moves in (not just its pointer field), so it is Send.
                    let base = base;
                    let mut tally = Tally::default();
                    let begin = t * slice;
                    let mut host = vec![0u8; slice];
                    let mut first_pass = true;
                    while start.elapsed() < deadline || tally.accesses == 0 {
                        match pass {
                            Pass::Store => {
                                for offset in (begin..begin + slice).step_by(width) {
                                    // SAFETY: offset + width ≤ bytes ≤ the mapping's length.
                                    unsafe { store(base.0, offset, options.width) };
                                }
                            }
                            Pass::Load => {
                                for offset in (begin..begin + slice).step_by(width) {
                                    // SAFETY: as above.
                                    let ok = unsafe { load_matches(base.0, offset, options.width) };
                                    if first_pass {
                                        tally.verified += 1;
                                        tally.mismatched += u64::from(!ok);
                                    }
                                }
                                first_pass = false;
                            }
                            // SAFETY (both): the slice lies inside the mapping; host is its size.
                            Pass::CopyIn => unsafe {
                                std::ptr::copy_nonoverlapping(
                                    host.as_ptr(),
                                    base.0.add(begin),
                                    slice,
                                );
                            },
                            Pass::CopyOut => unsafe {
                                std::ptr::copy_nonoverlapping(
                                    base.0.add(begin),
                                    host.as_mut_ptr(),
                                    slice,
                                );
                            },
                        }
                        tally.accesses += (slice / width) as u64;
                    }
                    std::hint::black_box(&host);
                    tally
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let seconds = start.elapsed().as_secs_f64();
    let total = tallies.into_iter().fold(Tally::default(), |mut a, t| {
        a.accesses += t.accesses;
        a.verified += t.verified;
        a.mismatched += t.mismatched;
        a
    });
    (total, seconds)
}

fn result(pass: Pass, width: u32, tally: &Tally, seconds: f64) -> MmioResult {
    let bytes = tally.accesses * u64::from(width);
    MmioResult {
        op: pass.name(),
        bytes,
        accesses: tally.accesses,
        seconds: crate::text::round_to(seconds, 4),
        mbps: crate::text::round_to(bytes as f64 / seconds / 1e6, 2),
        ns_per_access: crate::text::round_to(seconds * 1e9 / tally.accesses.max(1) as f64, 1),
        verified_words: (pass == Pass::Load).then_some(tally.verified),
        mismatched_words: (pass == Pass::Load).then_some(tally.mismatched),
    }
}
/// Measures on the live system whose `/sys` is under `root`.
pub(crate) fn measure(options: &MmioOptions, root: &Path) -> Result<MmioReport> {
    options.validate()?;
    let dir = root.join(format!("sys/bus/pci/devices/{}", options.bdf));
    let (bar_bytes, prefetchable) = memory_bar(&dir, options.bdf, options.bar)?;
    if options.offset + options.bytes > bar_bytes {
        return Err(Error::bad_input(format!(
            "--offset {} --bytes {}: BAR{} of {} has only {bar_bytes} bytes",
            options.offset, options.bytes, options.bar, options.bdf
        )));
    }
    let driver = std::fs::read_link(dir.join("driver")).ok();
    if let Some(driver) = &driver {
        if !options.force {
            let name = driver.file_name().map(|n| n.to_string_lossy().into_owned());
            return Err(Error::bad_input(format!(
                "{} is in use by driver '{}': accessing its BAR can upset the driver and the \
                 device; unbind it first, or pass --force",
                options.bdf,
                name.unwrap_or_default()
            )));
        }
    }
    let file = if options.write_combining {
        if !prefetchable {
            return Err(Error::bad_input(format!(
                "--wc: BAR{} of {} is not prefetchable, so it has no write-combining mapping",
                options.bar, options.bdf
            )));
        }
        dir.join(format!("resource{}_wc", options.bar))
    } else {
        dir.join(format!("resource{}", options.bar))
    };
    let mapping = Mapping::shared(&file, options.offset, options.bytes).map_err(|e| {
        // With CONFIG_IO_STRICT_DEVMEM the kernel refuses (EINVAL) to map a region a driver
        // has claimed, --force or not.
        let why = if driver.is_some() && e.raw_os_error() == Some(libc::EINVAL) {
            " (the kernel will not map a BAR its driver holds: unbind the driver first)"
        } else {
            ""
        };
        Error::runtime(format!(
            "mmap {} ({} bytes): {e}{why}",
            file.display(),
            options.bytes
        ))
    })?;
    let base = Base(mapping.as_ptr());
    let deadline = Duration::from_secs_f64(options.seconds);
    let passes = match options.op {
        MmioOperation::Store => vec![Pass::Store],
        MmioOperation::Load => vec![Pass::Load],
        MmioOperation::Memcpy => vec![Pass::CopyIn, Pass::CopyOut],
    };
    let results = passes
        .into_iter()
        .map(|pass| {
            let (tally, seconds) = run_threads(base, options, pass, deadline);
            result(pass, options.width, &tally, seconds)
        })
        .collect();
    drop(mapping);
    Ok(MmioReport {
        bdf: options.bdf.to_string(),
        bar: options.bar,
        offset: options.offset,
        bytes: options.bytes,
        bar_bytes,
        prefetchable,
        write_combining: options.write_combining,
        width: options.width,
        threads: options.threads,
        source: "measured",
        results,
    })
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::mmio::WIDTHS;
    use std::fs;

    /// A fake sysfs function whose BAR0 is memory backed by a plain file, BAR1 is I/O ports.
    fn fake_function(root: &Path, bdf: &str, driver: bool) {
        let dir = root.join(format!("sys/bus/pci/devices/{bdf}"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("resource"),
            "0x00000000fe000000 0x00000000fe00ffff 0x0000000000040200\n\
             0x000000000000c000 0x000000000000c01f 0x0000000000040101\n",
        )
        .unwrap();
        fs::write(dir.join("resource0"), vec![0u8; 65536]).unwrap();
        if driver {
            std::os::unix::fs::symlink("/sys/bus/pci/drivers/nvme", dir.join("driver")).unwrap();
        }
    }

    fn options(op: MmioOperation, width: u32) -> MmioOptions {
        MmioOptions {
            bdf: "0000:01:00.0".parse().unwrap(),
            bar: 0,
            width,
            op,
            threads: 2,
            seconds: 0.01,
            offset: 4096,
            bytes: 4096,
            write_combining: false,
            force: false,
        }
    }

    #[test]
    fn store_then_load_reads_the_pattern_back_at_every_width() {
        let dir = tempfile::tempdir().unwrap();
        fake_function(dir.path(), "0000:01:00.0", false);
        for width in WIDTHS {
            let stored = measure(&options(MmioOperation::Store, width), dir.path()).unwrap();
            assert!(stored.results[0].bytes >= 4096, "{stored:?}");
            let loaded = measure(&options(MmioOperation::Load, width), dir.path()).unwrap();
            let r = &loaded.results[0];
            assert_eq!(r.verified_words, Some(4096 / u64::from(width)));
            assert_eq!(r.mismatched_words, Some(0), "width {width}");
        }
        // A region never stored to does not match.
        fs::write(
            dir.path()
                .join("sys/bus/pci/devices/0000:01:00.0/resource0"),
            vec![0u8; 65536],
        )
        .unwrap();
        let loaded = measure(&options(MmioOperation::Load, 8), dir.path()).unwrap();
        assert_eq!(loaded.results[0].mismatched_words, Some(512));
    }

    #[test]
    fn io_bars_and_driver_owned_functions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        fake_function(dir.path(), "0000:01:00.0", true);
        let mut o = options(MmioOperation::Load, 4);
        let e = measure(&o, dir.path()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.message().contains("in use by driver 'nvme'"), "{e}");
        o.force = true;
        assert!(measure(&o, dir.path()).is_ok());
        o.bar = 1;
        let e = measure(&o, dir.path()).unwrap_err();
        assert!(e.message().contains("BAR1 is an I/O port BAR"), "{e}");
        o.bar = 0;
        o.width = 32;
        assert!(measure(&o, dir.path())
            .unwrap_err()
            .message()
            .starts_with("--width 32"));
    }
}
