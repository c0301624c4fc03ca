//! The P2PDMA-capable guest kernel. No Debian kernel enables CONFIG_PCI_P2PDMA, so this builds a
//! small one from Debian's `linux-source-6.12` package: `tinyconfig` plus exactly what the lab
//! guest needs (PCIe ports, NVMe, ACPI + NUMA for expander bridges, ZONE_DEVICE for p2pmem, a
//! serial console, initramfs, the syscalls busybox and fio use), with the drivers those options
//! would bring in by default and the guest never uses switched off again ([`DISABLED`]). The
//! result is cached with a stamp of both option lists, so a second call returns at once and a
//! kernel built from other lists is built again.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::guest::{find_tool, phase_error, run_tool};
use crate::error::{Error, Result};

const PHASE: &str = "kernel-build";

/// The Debian package with the kernel source, and the tarball it installs.
pub(crate) const SOURCE_PACKAGE: &str = "linux-source-6.12";
const SOURCE_TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";

/// Options enabled on top of `tinyconfig`. `olddefconfig` resolves their dependencies; the
/// build then checks that [`REQUIRED`] survived.
pub(crate) const OPTIONS: [&str; 54] = [
    "64BIT",
    "SMP",
    "PRINTK",
    "PRINTK_TIME",
    "TTY",
    "SERIAL_8250",
    "SERIAL_8250_CONSOLE",
    "BLK_DEV_INITRD",
    // The initramfs is gzip-compressed; a gzip image builds and unpacks faster than tinyconfig's
    // xz under TCG.
    "RD_GZIP",
    "KERNEL_GZIP",
    "DEVTMPFS",
    "DEVTMPFS_MOUNT",
    "PROC_FS",
    "SYSFS",
    "TMPFS",
    "BINFMT_ELF",
    "BINFMT_SCRIPT",
    "MULTIUSER",
    "FUTEX",
    "EPOLL",
    "SIGNALFD",
    "TIMERFD",
    "EVENTFD",
    "SHMEM",
    "AIO",
    "FILE_LOCKING",
    "POSIX_TIMERS",
    "BLOCK",
    "PCI",
    "PCI_MSI",
    "PCI_MMCONFIG",
    "PCIEPORTBUS",
    "PCI_QUIRKS",
    "ACPI",
    "NUMA",
    "X86_64_ACPI_NUMA",
    "ACPI_NUMA",
    "SPARSEMEM_VMEMMAP",
    "MEMORY_HOTPLUG",
    "MEMORY_HOTREMOVE",
    "MIGRATION",
    "ZONE_DEVICE",
    "PCI_P2PDMA",
    "BLK_DEV",
    "BLK_DEV_NVME",
    "NVME_CORE",
    "PANIC_ON_OOPS",
    "BUG",
    "ELF_CORE",
    "CPU_SUP_AMD",
    "CPU_SUP_INTEL",
    "X86_LOCAL_APIC",
    "X86_IO_APIC",
    "HIGH_RES_TIMERS",
];

/// Options switched off after [`OPTIONS`]: `olddefconfig` would give them their default (on)
/// once the options above make them visible, and nothing in the guest uses them. The guest has
/// a serial console and no network, keyboard, display, Management Engine, batteries or thermal
/// zones; QEMU's vCPUs have no frequency or idle states to manage (Intel P-state and core
/// priorities pull in cpufreq and the ACPI processor driver); the initramfs is gzip only.
/// About a tenth of the objects the build compiled (docs/performance.md).
pub(crate) const DISABLED: [&str; 27] = [
    "KERNEL_XZ",
    "NET",
    "VT",
    "INPUT",
    "HID_SUPPORT",
    "INTEL_MEI",
    "SCHED_MC_PRIO",
    "X86_INTEL_PSTATE",
    "CPU_FREQ",
    "CPU_IDLE",
    "ACPI_PROCESSOR",
    "THERMAL",
    "ACPI_AC",
    "ACPI_BATTERY",
    "ACPI_BUTTON",
    "ACPI_FAN",
    "ACPI_THERMAL",
    "POWER_SUPPLY",
    "PERF_EVENTS_INTEL_UNCORE",
    "PERF_EVENTS_INTEL_RAPL",
    "PERF_EVENTS_INTEL_CSTATE",
    "RD_BZIP2",
    "RD_LZMA",
    "RD_XZ",
    "RD_LZO",
    "RD_LZ4",
    "RD_ZSTD",
];

/// Options whose absence makes the kernel useless for the lab.
const REQUIRED: [&str; 9] = [
    "PCI_P2PDMA",
    "BLK_DEV_NVME",
    "NUMA",
    "ACPI",
    "SERIAL_8250_CONSOLE",
    "ZONE_DEVICE",
    "SMP",
    "DEVTMPFS",
    "AIO",
];

/// `<cache>/kernel`: the unpacked source and the built image.
pub(crate) fn kernel_dir(cache: &Path) -> PathBuf {
    cache.join("kernel")
}

/// The built image, if `pcielab lab kernel` has run with the current option list.
pub(crate) fn built_kernel(cache: &Path) -> Option<PathBuf> {
    let dir = kernel_dir(cache);
    let image = dir.join("bzImage");
    let stamp = fs::read_to_string(dir.join("bzImage.options")).ok()?;
    (image.is_file() && stamp == options_stamp()).then_some(image)
}

/// What the cached image was built from: the enabled options, then the disabled ones marked
/// `-` (a kernel built from other lists does not match and is built again).
fn options_stamp() -> String {
    OPTIONS
        .iter()
        .map(|o| o.to_string())
        .chain(DISABLED.iter().map(|o| format!("-{o}")))
        .map(|line| line + "\n")
        .collect()
}

/// Builds the kernel (minutes on two cores), reporting steps through `progress`.
pub fn build(cache: &Path, jobs: usize, progress: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    if let Some(image) = built_kernel(cache) {
        return Ok(image);
    }
    let tarball = Path::new(SOURCE_TARBALL);
    if !tarball.is_file() {
        return Err(phase_error(
            PHASE,
            format!(
                "{SOURCE_TARBALL} is missing: install the Debian package {SOURCE_PACKAGE} \
                 (apt-get install --no-install-recommends {SOURCE_PACKAGE})"
            ),
        ));
    }
    for (tool, package) in [
        ("make", "make"),
        ("gcc", "gcc"),
        ("flex", "flex"),
        ("bison", "bison"),
        ("bc", "bc"),
    ] {
        find_tool(tool, package, PHASE)?;
    }
    let dir = kernel_dir(cache);
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let source = dir.join(SOURCE_PACKAGE);
    if !source.join("Makefile").is_file() {
        progress("unpacking the kernel source");
        run_tool(
            Command::new(find_tool("tar", "tar", PHASE)?)
                .arg("-xf")
                .arg(tarball)
                .arg("-C")
                .arg(&dir),
            PHASE,
        )?;
    }
    progress("configuring (tinyconfig + lab options)");
    let make = |args: &[&str]| {
        let mut command = Command::new("make");
        command.arg("ARCH=x86_64").args(args).current_dir(&source);
        command
    };
    run_tool(&mut make(&["tinyconfig"]), PHASE)?;
    let mut config = Command::new(source.join("scripts/config"));
    for option in OPTIONS {
        config.args(["-e", option]);
    }
    for option in DISABLED {
        config.args(["-d", option]);
    }
    run_tool(config.current_dir(&source), PHASE)?;
    run_tool(&mut make(&["olddefconfig"]), PHASE)?;
    let dot_config = fs::read_to_string(source.join(".config"))
        .map_err(|e| Error::io(source.join(".config"), e))?;
    let enabled = |o: &str| dot_config.lines().any(|l| l == format!("CONFIG_{o}=y"));
    let missing: Vec<&str> = REQUIRED.iter().copied().filter(|o| !enabled(o)).collect();
    if !missing.is_empty() {
        return Err(phase_error(
            PHASE,
            format!(
                "olddefconfig dropped CONFIG_{} (a dependency is missing)",
                missing.join(", CONFIG_")
            ),
        ));
    }
    // An option another one selects stays on whatever `-d` said: the list would then promise
    // a smaller kernel than it builds.
    let forced: Vec<&str> = DISABLED.iter().copied().filter(|o| enabled(o)).collect();
    if !forced.is_empty() {
        return Err(phase_error(
            PHASE,
            format!(
                "CONFIG_{} stayed on though the lab switches it off (another option selects it)",
                forced.join(", CONFIG_")
            ),
        ));
    }
    progress("compiling bzImage");
    let jobs = format!("-j{}", jobs.max(1));
    let mut compile = match find_tool("nice", "coreutils", PHASE) {
        // The build shares the machine: keep it out of interactive work's way.
        Ok(nice) => {
            let mut c = Command::new(nice);
            c.args(["-n", "19", "make", "ARCH=x86_64", &jobs, "bzImage"]);
            c
        }
        Err(_) => {
            let mut c = Command::new("make");
            c.args(["ARCH=x86_64", &jobs, "bzImage"]);
            c
        }
    };
    run_tool(compile.current_dir(&source), PHASE)?;
    let image = dir.join("bzImage");
    fs::copy(source.join("arch/x86/boot/bzImage"), &image).map_err(|e| Error::io(&image, e))?;
    let stamp = dir.join("bzImage.options");
    fs::write(&stamp, options_stamp()).map_err(|e| Error::io(&stamp, e))?;
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_built_from_other_lists_is_not_reused() {
        let cache = tempfile::tempdir().unwrap();
        let dir = kernel_dir(cache.path());
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("bzImage"), b"image").unwrap();
        // The stamp an image built before DISABLED existed carries: the enabled list only.
        let enabled_only: String = OPTIONS.iter().map(|o| format!("{o}\n")).collect();
        fs::write(dir.join("bzImage.options"), enabled_only).unwrap();
        assert_eq!(built_kernel(cache.path()), None);
        fs::write(dir.join("bzImage.options"), options_stamp()).unwrap();
        assert_eq!(built_kernel(cache.path()), Some(dir.join("bzImage")));
    }

    #[test]
    fn required_options_are_enabled_and_none_is_also_disabled() {
        for option in REQUIRED {
            assert!(OPTIONS.contains(&option), "{option}");
        }
        for option in DISABLED {
            assert!(!OPTIONS.contains(&option), "{option}");
        }
    }
}
