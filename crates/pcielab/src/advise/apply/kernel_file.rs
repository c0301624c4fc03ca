//! The kernel files `--apply` and `--undo` may write, and how each write is made safe: one
//! allow-list per check id (the same for both, so an undo journal cannot name a file its check
//! would never write), the path resolved inside the machine's root (no symlink, at any level, may
//! lead outside it or outside its `sys/` and `proc/`), the value bounded by what the file accepts,
//! and the file written through the descriptor that was checked.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::super::facts::{cpu_list_text, parse_cpu_list, read_text, selected_word};
use crate::error::{Error, Result};
use crate::pcie::Bdf;

/// What a kernel file accepts, which decides how a value for it is bounded and read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accepts {
    /// `/sys/module/pcie_aspm/parameters/policy`: one of the words the file lists.
    AspmPolicy,
    /// A link's `l1_aspm` or `l0s_aspm`: `0` or `1`.
    AspmLinkState,
    /// `/proc/irq/N/smp_affinity_list`: a CPU list naming online CPUs only.
    IrqAffinity,
    /// A CPU's `scaling_governor`: one of its `scaling_available_governors`.
    CpuGovernor,
    /// A devfreq device's `governor`: one of its `available_governors`.
    DevfreqGovernor,
}

/// One kernel file a check may write, resolved under the machine's root.
#[derive(Debug, Clone)]
pub(super) struct KernelFile {
    /// As the finding and the journal name it, relative to the root.
    pub(crate) rel: String,
    /// Where it resolves: inside the root's `sys/` or `proc/`, with no link left on the way.
    pub(crate) path: PathBuf,
    accepts: Accepts,
    root: PathBuf,
}

/// What `check` may write at `rel`, or `None` when the check never writes that file.
fn allowed(check: &str, rel: &str) -> Option<Accepts> {
    let parts: Vec<&str> = rel.split('/').collect();
    let number = |s: &str| !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit());
    let canonical_bdf = |s: &str| s.parse::<Bdf>().is_ok_and(|b| b.to_string() == s);
    // A devfreq device's name: one plain component the kernel could have made.
    let device_name = |s: &str| {
        !s.is_empty()
            && s.len() <= 64
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
    };
    match (check, parts.as_slice()) {
        ("aspm-busy-link", ["sys", "module", "pcie_aspm", "parameters", "policy"]) => {
            Some(Accepts::AspmPolicy)
        }
        (
            "aspm-busy-link",
            ["sys", "bus", "pci", "devices", bdf, "link", "l1_aspm" | "l0s_aspm"],
        ) if canonical_bdf(bdf) => Some(Accepts::AspmLinkState),
        ("irq-far-node", ["proc", "irq", irq, "smp_affinity_list"]) if number(irq) => {
            Some(Accepts::IrqAffinity)
        }
        (
            "cpu-governor",
            ["sys", "devices", "system", "cpu", cpu, "cpufreq", "scaling_governor"],
        ) if cpu.strip_prefix("cpu").is_some_and(number) => Some(Accepts::CpuGovernor),
        ("devfreq-governor", ["sys", "class", "devfreq", name, "governor"])
            if device_name(name) =>
        {
            Some(Accepts::DevfreqGovernor)
        }
        _ => None,
    }
}

/// The files each check may write, in words, for a refusal's message.
const ALLOWED_TEXT: &str = "aspm-busy-link: sys/module/pcie_aspm/parameters/policy, sys/bus/pci/devices/BDF/link/{l1_aspm,l0s_aspm}; \
     irq-far-node: proc/irq/N/smp_affinity_list; cpu-governor: sys/devices/system/cpu/cpuN/cpufreq/scaling_governor; \
     devfreq-governor: sys/class/devfreq/NAME/governor";

impl KernelFile {
    /// `rel` as check `check` may write it under `root` (an absolute, canonical directory), or
    /// bad input saying why not: a file the check never writes, a path that resolves outside
    /// the root's `sys/` or `proc/`, or something other than a regular file.
    pub(crate) fn resolve(root: &Path, check: &str, rel: &str) -> Result<KernelFile> {
        let accepts = allowed(check, rel).ok_or_else(|| {
            Error::bad_input(format!(
                "check '{check}' does not write '{}' (what each check writes: {ALLOWED_TEXT})",
                quoted_path(rel)
            ))
        })?;
        let named = root.join(rel);
        let path = std::fs::canonicalize(&named)
            .map_err(|e| Error::runtime(format!("{}: cannot resolve it: {e}", named.display())))?;
        let inside = path.starts_with(root.join("sys")) || path.starts_with(root.join("proc"));
        if !inside {
            return Err(Error::bad_input(format!(
                "{} resolves to {}, outside {}/sys and {}/proc: a link leads out of the machine's root",
                named.display(),
                path.display(),
                display_root(root),
                display_root(root)
            )));
        }
        let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
        if !meta.is_file() {
            return Err(Error::bad_input(format!(
                "{} is {}, not a kernel attribute file",
                named.display(),
                crate::input::file_kind(meta.file_type())
            )));
        }
        Ok(KernelFile {
            rel: rel.to_string(),
            path,
            accepts,
            root: root.to_path_buf(),
        })
    }

    /// The value the file holds, normalised the way it reads back: the bracketed word of the
    /// ASPM policy, a CPU list in canonical form, otherwise the trimmed text.
    pub(crate) fn current(&self) -> Option<String> {
        let text = read_text(&self.path)?;
        match self.accepts {
            Accepts::AspmPolicy => selected_word(&text),
            Accepts::IrqAffinity => parse_cpu_list(&text).map(|c| cpu_list_text(&c)),
            _ => Some(text),
        }
    }

    /// `value` the way the file would read it back.
    pub(crate) fn normalised(&self, value: &str) -> String {
        match self.accepts {
            Accepts::IrqAffinity => parse_cpu_list(value)
                .map(|c| cpu_list_text(&c))
                .unwrap_or_else(|| value.trim().to_string()),
            _ => value.trim().to_string(),
        }
    }

    /// `value` when the file accepts it; otherwise bad input naming the file, the value and what
    /// would be valid. Bounded before anything is parsed, so a journal holding megabytes of CPU
    /// list is refused without building it.
    pub(crate) fn check_value(&self, value: &str) -> Result<()> {
        let refuse = |valid: String| {
            Err(Error::bad_input(format!(
                "'{}' is not a value /{} accepts: expected {valid}",
                crate::input::cut_for_message(value),
                self.rel
            )))
        };
        let listed = |file: &str| -> Result<Vec<String>> {
            let at = self.path.with_file_name(file);
            let text = read_text(&at).ok_or_else(|| {
                Error::runtime(format!(
                    "{}: cannot read it, so the values /{} accepts are unknown; nothing was written",
                    at.display(),
                    self.rel
                ))
            })?;
            Ok(text
                .split_whitespace()
                .map(|w| w.trim_matches(['[', ']']).to_string())
                .collect())
        };
        let one_of = |words: Vec<String>| {
            if words.iter().any(|w| w == value) {
                Ok(())
            } else {
                refuse(format!("one of {}", words.join(", ")))
            }
        };
        match self.accepts {
            Accepts::AspmLinkState if value == "0" || value == "1" => Ok(()),
            Accepts::AspmLinkState => refuse("0 or 1".into()),
            Accepts::AspmPolicy => one_of(listed("policy")?),
            Accepts::CpuGovernor => one_of(listed("scaling_available_governors")?),
            Accepts::DevfreqGovernor => one_of(listed("available_governors")?),
            Accepts::IrqAffinity => {
                let online_file = self.root.join("sys/devices/system/cpu/online");
                let online = read_text(&online_file)
                    .and_then(|t| parse_cpu_list(&t))
                    .ok_or_else(|| {
                        Error::runtime(format!(
                            "{}: cannot read the machine's CPUs, so a CPU list cannot be bounded; nothing was written",
                            online_file.display()
                        ))
                    })?;
                let valid = format!("a CPU list of online CPUs ({})", cpu_list_text(&online));
                // Every CPU written out singly, comma-separated: the longest list that names
                // only online CPUs without repeats.
                let longest: usize = online.iter().map(|c| c.to_string().len() + 1).sum();
                if value.len() > longest {
                    return refuse(valid);
                }
                match parse_cpu_list(value) {
                    Some(cpus) if !cpus.is_empty() && cpus.iter().all(|c| online.contains(c)) => {
                        Ok(())
                    }
                    _ => refuse(valid),
                }
            }
        }
    }

    /// Writes `value` as `echo value > file` does, through a descriptor checked to be the
    /// resolved regular file (so a link swapped in after [`KernelFile::resolve`] is not
    /// followed), in one write(2).
    pub(crate) fn write(&self, value: &str) -> std::io::Result<()> {
        let held = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(&self.path)?;
        let now_at = std::fs::read_link(format!("/proc/self/fd/{}", held.as_raw_fd()))?;
        if now_at != self.path || !held.metadata()?.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "changed while being opened: now {}, not a regular file at the resolved path",
                    now_at.display()
                ),
            ));
        }
        // Reopened through the held descriptor: the same inode, now for writing.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(format!("/proc/self/fd/{}", held.as_raw_fd()))?;
        file.write_all(format!("{value}\n").as_bytes())
    }
}

/// A path from a journal as a message quotes it: whole up to the length of a long sysfs path,
/// escaped so control characters cannot rewrite the terminal.
pub(super) fn quoted_path(text: &str) -> String {
    const LONGEST_SHOWN: usize = 256;
    if text.chars().count() <= LONGEST_SHOWN {
        crate::text::printable(text)
    } else {
        crate::text::printable(&crate::input::cut_for_message(text))
    }
}

/// The root as a prefix in messages ("" for `/`, so paths read `/sys`, not `//sys`).
fn display_root(root: &Path) -> String {
    let text = root.display().to_string();
    text.trim_end_matches('/').to_string()
}

/// The machine's root as the journal records it and every write is confined to: absolute, with
/// no link left in it. A root that does not exist is bad input naming it.
pub(super) fn canonical_root(root: &Path) -> Result<PathBuf> {
    let canonical = std::fs::canonicalize(root).map_err(|e| {
        Error::bad_input(format!(
            "root {}: {e}; expected an existing directory (the machine's /)",
            root.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(Error::bad_input(format!(
            "root {} is not a directory",
            root.display()
        )));
    }
    Ok(canonical)
}
