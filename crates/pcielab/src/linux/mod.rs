//! Text formats the Linux kernel writes into sysfs and procfs that more than one area reads:
//! CPU lists and masks ([`cpuset`], read by PMU placement and resctrl alike) and the bit masks
//! of `format/` fields and cache schemata; a function's sysfs `resource` table (its BARs); and
//! where `execvp` finds a program, for the commands that run a workload.

pub(crate) mod cpuset;

pub use cpuset::CpuSet;

/// A mask of the low `width` bits (all 64 from 64 on).
pub(crate) fn low_bits_mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

/// The workload's program as `execvp` would find it, or `None` when it does not exist.
pub(crate) fn find_program(program: &str) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        let path = std::path::PathBuf::from(program);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// `resource` file text (one `start end flags` line per BAR) → BAR `index`'s start, end and
/// IORESOURCE flags.
pub(crate) fn bar_resource(resource: &str, index: usize) -> Option<(u64, u64, u64)> {
    let line = resource.lines().nth(index)?;
    let mut parts = line
        .split_whitespace()
        .map(|p| u64::from_str_radix(p.trim_start_matches("0x"), 16).ok());
    Some((parts.next()??, parts.next()??, parts.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_programs_are_not_found() {
        assert!(find_program("sh").is_some());
        assert!(find_program("/nonexistent/pcielab-workload").is_none());
        assert!(find_program("pcielab-no-such-program-xyz").is_none());
    }
}
