//! The `schemata` file: parsing a write the way the kernel does (every line parsed and checked
//! before any is applied, with the kernel's `last_cmd_status` messages), formatting what a read
//! shows, and reading back what any kernel printed (padded or unpadded values). This is the one
//! place the schemata rules live; the simulated kernel and the host backend's pre-write check both
//! call it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use super::info::{CacheResource, Info, KernelRules, MbResource};

/// Errno values resctrl returns, by name.
// Spelled as the kernel's errno names (EINVAL, not Einval), which is how the messages show them.
#[allow(clippy::upper_case_acronyms)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Errno {
    /// Invalid argument: the text breaks a rule.
    EINVAL,
    /// No space: no free CLOSID or RMID left.
    ENOSPC,
    /// No such group or file.
    ENOENT,
    /// The group exists already.
    EEXIST,
    /// Busy: the group or resource is in use.
    EBUSY,
    /// No such task.
    ESRCH,
    /// Not permitted.
    EPERM,
}

/// The kernel said no: the errno the write/mkdir returns and the text `info/last_cmd_status`
/// holds afterwards (empty where the kernel leaves no message). `detail` is pcielab's own
/// explanation, only where the kernel gives none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    /// The errno the write fails with.
    pub errno: Errno,
    /// What `info/last_cmd_status` says afterwards.
    pub status: String,
    /// Why, in pcielab's words, where the kernel says less.
    pub detail: Option<String>,
}

impl Rejection {
    /// A rejection with `errno` and the `last_cmd_status` text `status`.
    pub(crate) fn new(errno: Errno, status: impl Into<String>) -> Rejection {
        Rejection {
            errno,
            status: status.into(),
            detail: None,
        }
    }

    pub(crate) fn silent(errno: Errno, detail: impl Into<String>) -> Rejection {
        Rejection {
            errno,
            status: String::new(),
            detail: Some(detail.into()),
        }
    }

    /// Append a line the way `rdt_last_cmd_printf` accumulates messages.
    pub(crate) fn then(mut self, line: impl Into<String>) -> Rejection {
        if !self.status.is_empty() {
            self.status.push('\n');
        }
        self.status.push_str(&line.into());
        self
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.status.is_empty() {
            write!(f, "{:?} (the kernel leaves no message", self.errno)?;
            if let Some(d) = &self.detail {
                write!(f, ": {d}")?;
            }
            write!(f, ")")
        } else {
            write!(
                f,
                "\"{}\" ({:?})",
                self.status.replace('\n', "; "),
                self.errno
            )
        }
    }
}

/// One schemata line: a resource and a value per domain (a capacity bitmask for caches, a
/// percentage for MB).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchemaLine {
    pub(crate) resource: String,
    pub(crate) values: BTreeMap<u32, u64>,
}

/// A group's whole schemata, lines in the kernel's order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schemata {
    pub(crate) lines: Vec<SchemaLine>,
}

impl Schemata {
    /// What a new root group shows: every mask full, every MB value at 100.
    pub(crate) fn defaults(info: &Info) -> Schemata {
        let mut lines: Vec<SchemaLine> = info
            .caches
            .iter()
            .map(|c| SchemaLine {
                resource: c.name.clone(),
                values: c.domains.iter().map(|&d| (d, c.cbm_mask)).collect(),
            })
            .collect();
        if let Some(mb) = &info.mb {
            lines.push(SchemaLine {
                resource: "MB".into(),
                values: mb.domains.iter().map(|&d| (d, 100)).collect(),
            });
        }
        Schemata { lines }
    }

    /// The value of `resource` (`L3`, `MB`, ...) in domain `domain`, if set.
    pub fn get(&self, resource: &str, domain: u32) -> Option<u64> {
        self.lines
            .iter()
            .find(|l| l.resource == resource)
            .and_then(|l| l.values.get(&domain).copied())
    }

    /// Overlay a (possibly partial) write: only the named resources and domains change.
    pub(crate) fn merge(&mut self, update: &[SchemaLine]) {
        for u in update {
            match self.lines.iter_mut().find(|l| l.resource == u.resource) {
                Some(line) => line.values.extend(u.values.iter().map(|(k, v)| (*k, *v))),
                None => self.lines.push(u.clone()),
            }
        }
    }

    /// Format as a read of the file shows it: names right-aligned to the widest, values
    /// unpadded (`%x` for masks, `%u` for MB), one line per resource.
    pub(crate) fn format(&self) -> String {
        let width = self
            .lines
            .iter()
            .map(|l| l.resource.len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for line in &self.lines {
            let values: Vec<String> = line
                .values
                .iter()
                .map(|(d, v)| {
                    if line.resource == "MB" {
                        format!("{d}={v}")
                    } else {
                        format!("{d}={v:x}")
                    }
                })
                .collect();
            out.push_str(&format!("{:>width$}:{}\n", line.resource, values.join(";")));
        }
        out
    }

    /// Read what a kernel printed: names may be right-aligned, masks may be zero-padded (older
    /// kernels, `%0*x`), MB values may be space-padded (`%*u`).
    pub fn parse_read(text: &str) -> Option<Schemata> {
        let mut lines = Vec::new();
        for raw in text.lines().filter(|l| !l.trim().is_empty()) {
            let (name, rest) = raw.split_once(':')?;
            let resource = name.trim().to_string();
            let mut values = BTreeMap::new();
            for item in rest.split(';').filter(|i| !i.trim().is_empty()) {
                let (d, v) = item.split_once('=')?;
                let d: u32 = d.trim().parse().ok()?;
                let v = v.trim();
                let v = if resource == "MB" || resource == "SMBA" {
                    v.parse().ok()?
                } else {
                    u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()?
                };
                values.insert(d, v);
            }
            lines.push(SchemaLine { resource, values });
        }
        Some(Schemata { lines })
    }
}

/// kstrtoul semantics for the digits after the kernel has cut the token: optional `+`, optional
/// `0x` for base 16, at least one digit, nothing else, no overflow.
fn kstrtoul(text: &str, radix: u32) -> Option<u64> {
    let text = text.strip_prefix('+').unwrap_or(text);
    let text = if radix == 16 {
        text.strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text)
    } else {
        text
    };
    if text.is_empty() || !text.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(text, radix).ok()
}

/// Validate one capacity bitmask like the kernel's `cbm_validate`.
pub(crate) fn validate_cbm(text: &str, res: &CacheResource) -> Result<u64, Rejection> {
    let val = kstrtoul(text, 16).ok_or_else(|| {
        Rejection::new(
            Errno::EINVAL,
            format!("Non-hex character in the mask {text}"),
        )
    })?;
    if (res.min_cbm_bits > 0 && val == 0) || val > res.cbm_mask {
        return Err(Rejection::new(Errno::EINVAL, "Mask out of range"));
    }
    let first_bit = if val == 0 { 0 } else { val.trailing_zeros() };
    let len = res.cbm_len();
    let zero_bit = (first_bit..len)
        .find(|b| val & (1 << b) == 0)
        .unwrap_or(len);
    let has_later_bit = (zero_bit..len).any(|b| val & (1 << b) != 0);
    if !res.sparse_masks && has_later_bit {
        return Err(Rejection::new(
            Errno::EINVAL,
            format!("The mask {val:x} has non-consecutive 1-bits"),
        ));
    }
    if zero_bit - first_bit < res.min_cbm_bits {
        return Err(Rejection::new(
            Errno::EINVAL,
            format!("Need at least {} bits in the mask", res.min_cbm_bits),
        ));
    }
    Ok(val)
}

/// Validate one MB percentage like the kernel's `bw_validate`: range check, then round up to
/// a multiple of `bandwidth_gran`.
pub(crate) fn validate_mb(
    text: &str,
    mb: &MbResource,
    rules: &KernelRules,
) -> Result<u64, Rejection> {
    let parsed = kstrtoul(text, 10);
    let bw = if rules.invalid_mb_message {
        // kstrtou32 since 6.12: anything past u32 does not parse.
        parsed
            .filter(|v| *v <= u32::MAX as u64)
            .ok_or_else(|| Rejection::new(Errno::EINVAL, format!("Invalid MB value {text}")))?
    } else {
        parsed.ok_or_else(|| {
            Rejection::new(
                Errno::EINVAL,
                format!("Non-decimal digit in MB value {text}"),
            )
        })?
    };
    if bw < mb.min_bandwidth as u64 || bw > 100 {
        return Err(Rejection::new(
            Errno::EINVAL,
            format!("MB value {bw} out of range [{},100]", mb.min_bandwidth),
        ));
    }
    let gran = mb.bandwidth_gran.max(1) as u64;
    Ok(bw.div_ceil(gran) * gran)
}

/// Checks a cache value against the other groups (exclusive-mode rules); returns the kernel's
/// message when the value must be refused.
pub(crate) type OverlapCheck<'a> = dyn Fn(&str, u32, u64) -> Option<String> + 'a;

/// Parse a write to `schemata` exactly as `rdtgroup_schemata_write` does: the text must end
/// with a newline, every line is parsed and checked in order, and the first failure rejects the
/// whole write (nothing is applied). Returns the staged lines, values already rounded.
pub(crate) fn parse_write(
    text: &str,
    info: &Info,
    overlap: &OverlapCheck<'_>,
) -> Result<Vec<SchemaLine>, Rejection> {
    let body = text.strip_suffix('\n').ok_or_else(|| {
        Rejection::silent(Errno::EINVAL, "a schemata write must end with a newline")
    })?;
    let mut staged: Vec<SchemaLine> = Vec::new();
    for tok in body.split('\n') {
        let (resname, rest) = match tok.split_once(':') {
            Some((name, rest)) => (name.trim(), rest),
            None => return Err(Rejection::new(Errno::EINVAL, "Missing ':'")),
        };
        if rest.is_empty() {
            return Err(Rejection::new(
                Errno::EINVAL,
                format!("Missing '{resname}' value"),
            ));
        }
        let domains = info.domains_of(resname).ok_or_else(|| {
            Rejection::new(
                Errno::EINVAL,
                format!("Unknown or unsupported resource name '{resname}'"),
            )
        })?;
        let index = match staged.iter().position(|l| l.resource == resname) {
            Some(i) => i,
            None => {
                staged.push(SchemaLine {
                    resource: resname.to_string(),
                    values: BTreeMap::new(),
                });
                staged.len() - 1
            }
        };
        for dom in rest.split(';') {
            if dom.is_empty() {
                continue;
            }
            let (id, value) = dom
                .split_once('=')
                .and_then(|(id, v)| Some((kstrtoul(id, 10)?, v)))
                .ok_or_else(|| {
                    Rejection::new(Errno::EINVAL, "Missing '=' or non-numeric domain")
                })?;
            let id = u32::try_from(id)
                .ok()
                .filter(|id| domains.contains(id))
                .ok_or_else(|| {
                    Rejection::silent(
                        Errno::EINVAL,
                        format!(
                            "{resname} has no domain {id}; its domains are {}",
                            domains
                                .iter()
                                .map(u32::to_string)
                                .collect::<Vec<_>>()
                                .join(",")
                        ),
                    )
                })?;
            if staged[index].values.contains_key(&id) {
                return Err(Rejection::new(
                    Errno::EINVAL,
                    format!("Duplicate domain {id}"),
                ));
            }
            let value = value.trim();
            let parsed = match (info.cache(resname), &info.mb) {
                (Some(cache), _) => {
                    let cbm = validate_cbm(value, cache)?;
                    if let Some(msg) = overlap(resname, id, cbm) {
                        return Err(Rejection::new(Errno::EINVAL, msg));
                    }
                    cbm
                }
                (None, Some(mb)) => validate_mb(value, mb, &info.rules)?,
                (None, None) => {
                    return Err(Rejection::new(
                        Errno::EINVAL,
                        format!("Unknown or unsupported resource name '{resname}'"),
                    ))
                }
            };
            staged[index].values.insert(id, parsed);
        }
    }
    Ok(staged)
}
