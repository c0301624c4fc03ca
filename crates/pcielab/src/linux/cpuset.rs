//! CPU sets as resctrl writes and reads them: the `cpus_list` form (`0-3,8`) and the `cpus` form
//! (comma-separated 32-bit hex words, most significant first, as the kernel's `%*pb` prints).

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// A set of CPU numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CpuSet(pub BTreeSet<u32>);

/// The most CPUs a Linux kernel supports (the largest CONFIG_NR_CPUS): CPU numbers are below it.
pub(crate) const MAX_CPUS: u32 = 8192;

impl CpuSet {
    /// The CPUs `first` to `last`, both included.
    pub(crate) fn range(first: u32, last: u32) -> CpuSet {
        CpuSet((first..=last).collect())
    }

    /// Parse a `cpus_list` string (`0-3,8,10-11`). Whitespace around the string is ignored; an
    /// empty string is the empty set. CPUs at or past [`MAX_CPUS`] do not exist: `None`.
    pub fn parse_list(text: &str) -> Option<CpuSet> {
        let mut set = BTreeSet::new();
        for part in text.trim().split(',').filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?),
                None => {
                    let c = part.parse::<u32>().ok()?;
                    (c, c)
                }
            };
            if lo > hi || hi >= MAX_CPUS {
                return None;
            }
            set.extend(lo..=hi);
        }
        Some(CpuSet(set))
    }

    /// Parse a `cpus` mask (`ff,ffffffff`): 32-bit hex words, most significant first.
    pub fn parse_mask(text: &str) -> Option<CpuSet> {
        let mut set = BTreeSet::new();
        let words: Vec<&str> = text.trim().split(',').collect();
        if words.len() as u32 > MAX_CPUS / 32 {
            return None;
        }
        for (i, word) in words.iter().rev().enumerate() {
            let value = u32::from_str_radix(word, 16).ok()?;
            for bit in 0..32 {
                if value & (1 << bit) != 0 {
                    set.insert(i as u32 * 32 + bit);
                }
            }
        }
        Some(CpuSet(set))
    }

    /// The `cpus_list` form.
    pub(crate) fn to_list(&self) -> String {
        let mut out = Vec::new();
        let mut iter = self.0.iter().copied().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end = iter.next().unwrap_or(end);
            }
            out.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
        }
        out.join(",")
    }

    /// The `cpus` mask form, `nr_cpus` wide (words of 32 bits, most significant first).
    pub(crate) fn to_mask(&self, nr_cpus: u32) -> String {
        let words = nr_cpus.max(1).div_ceil(32);
        (0..words)
            .rev()
            .map(|w| {
                let value = (0..32)
                    .filter(|b| self.0.contains(&(w * 32 + b)))
                    .fold(0u32, |acc, b| acc | (1 << b));
                if w == words - 1 {
                    let digits = (nr_cpus - w * 32).min(32).div_ceil(4) as usize;
                    format!("{value:0digits$x}")
                } else {
                    format!("{value:08x}")
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    pub(crate) fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_list())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_and_mask_forms_round_trip() {
        let set = CpuSet::parse_list("0-3,8,40-41").unwrap();
        assert_eq!(set.to_list(), "0-3,8,40-41");
        assert_eq!(set.to_mask(48), "0300,0000010f");
        assert_eq!(CpuSet::parse_mask("0300,0000010f").unwrap(), set);
        assert_eq!(CpuSet::parse_list("").unwrap(), CpuSet::default());
        assert!(CpuSet::parse_list("3-1").is_none());
        assert!(CpuSet::parse_list("a").is_none());
    }
}
