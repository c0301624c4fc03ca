//! Spec versus guest: compares the topology a spec describes with the one the guest kernel shows
//! (read back from the guest's sysfs snapshot) field by field — presence, kind, ids, class,
//! parent, link capability and status, NUMA node, CMB / p2pmem. A difference that QEMU 7.2 cannot
//! avoid (listed by [`super::argv`] as a [`Limit`]) is marked expected, with the reason; q35's
//! own functions are expected extras. Everything else is a mismatch.

use serde::Serialize;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::argv::{show_opt, show_speed, Limit};
use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::sysfs::read_sysfs;
use crate::topology::{Function, Topology};

/// q35's fixed functions: present in every guest whether the spec lists them or not.
const Q35_BUILTIN_ADDRESSES: [&str; 4] = ["00:00.0", "00:1f.0", "00:1f.2", "00:1f.3"];

/// How one field compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Match,
    /// Differs in a way QEMU cannot avoid; `why` says how.
    Expected,
    Mismatch,
}

/// One compared field.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub bdf: Bdf,
    pub field: &'static str,
    pub spec: String,
    pub guest: String,
    pub status: Status,
    pub why: Option<String>,
}

/// What the guest said about peer-to-peer memory: address → `p2pmem/size` in bytes.
pub type P2pmem = BTreeMap<Bdf, u64>;

/// Compares every function of `spec` with `guest`. `cmb_bar` gives the guest's CMB BAR size per
/// NVMe (bytes); `p2pmem` is `None` when the guest kernel has no P2PDMA support.
pub fn compare(
    spec: &Topology,
    guest: &Topology,
    limits: &[Limit],
    cmb_bar: &BTreeMap<Bdf, u64>,
    p2pmem: Option<&P2pmem>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for s in spec.functions() {
        let Some(g) = guest.get(s.bdf) else {
            rows.push(row(s.bdf, "present", "yes", "no", Status::Mismatch, None));
            continue;
        };
        rows.push(row(s.bdf, "present", "yes", "yes", Status::Match, None));
        for (field, spec_value, guest_value) in fields(s, g) {
            rows.push(judge(s.bdf, field, spec_value, guest_value, limits));
        }
        if let Some(mb) = s.params.get("cmb_size_mb").and_then(|v| v.as_integer()) {
            let wanted = (mb as u64) << 20;
            let bar = cmb_bar.get(&s.bdf).copied();
            let show =
                |v: Option<u64>| v.map_or("none".to_string(), |b| format!("{} MiB", b >> 20));
            // QEMU sizes the CMB BAR to the next power of two of the CMB.
            let bar_ok = bar == Some(wanted.next_power_of_two());
            rows.push(row(
                s.bdf,
                "cmb",
                &format!("{mb} MiB"),
                &show(bar),
                if bar_ok {
                    Status::Match
                } else {
                    Status::Mismatch
                },
                None,
            ));
            if let Some(p2pmem) = p2pmem {
                let size = p2pmem.get(&s.bdf).copied();
                rows.push(row(
                    s.bdf,
                    "p2pmem",
                    &format!("{mb} MiB"),
                    &show(size),
                    if size == Some(wanted) {
                        Status::Match
                    } else {
                        Status::Mismatch
                    },
                    None,
                ));
            }
        }
    }
    for g in guest.functions() {
        if spec.get(g.bdf).is_some() {
            continue;
        }
        let builtin = Q35_BUILTIN_ADDRESSES
            .iter()
            .any(|a| a.parse::<Bdf>().ok() == Some(g.bdf));
        rows.push(row(
            g.bdf,
            "present",
            "no",
            "yes",
            if builtin {
                Status::Expected
            } else {
                Status::Mismatch
            },
            builtin.then(|| "part of every q35 machine (the spec leaves it out)".to_string()),
        ));
    }
    rows
}

fn row(
    bdf: Bdf,
    field: &'static str,
    spec: &str,
    guest: &str,
    status: Status,
    why: Option<String>,
) -> Row {
    Row {
        bdf,
        field,
        spec: spec.to_string(),
        guest: guest.to_string(),
        status,
        why,
    }
}

fn judge(bdf: Bdf, field: &'static str, spec: String, guest: String, limits: &[Limit]) -> Row {
    if spec == guest {
        return row(bdf, field, &spec, &guest, Status::Match, None);
    }
    let limit = limits
        .iter()
        .find(|l| l.bdf == bdf && l.field == field && l.qemu == guest);
    match limit {
        Some(l) => row(
            bdf,
            field,
            &spec,
            &guest,
            Status::Expected,
            Some(l.why.into()),
        ),
        None => row(bdf, field, &spec, &guest, Status::Mismatch, None),
    }
}

/// The compared fields of a function pair. Spec fields left out (`None`) are not compared.
fn fields(s: &Function, g: &Function) -> Vec<(&'static str, String, String)> {
    let mut out = vec![
        ("kind", s.kind.name().to_string(), g.kind.name().to_string()),
        (
            "vendor",
            format!("{:04x}", s.vendor),
            format!("{:04x}", g.vendor),
        ),
        (
            "device",
            format!("{:04x}", s.device),
            format!("{:04x}", g.device),
        ),
        (
            "class",
            format!("{:06x}", s.class),
            format!("{:06x}", g.class),
        ),
        ("parent", show_opt(s.parent), show_opt(g.parent)),
    ];
    let (sl, gl) = (s.link.unwrap_or_default(), g.link.unwrap_or_default());
    if sl.max_speed.is_some() {
        out.push((
            "link.max_speed",
            show_speed(sl.max_speed),
            show_speed(gl.max_speed),
        ));
    }
    if sl.max_width.is_some() {
        out.push((
            "link.max_width",
            show_opt(sl.max_width),
            show_opt(gl.max_width),
        ));
    }
    if sl.speed.is_some() {
        out.push(("link.speed", show_speed(sl.speed), show_speed(gl.speed)));
    }
    if sl.width.is_some() {
        out.push(("link.width", show_opt(sl.width), show_opt(gl.width)));
    }
    if s.numa_node.is_some() {
        out.push(("numa_node", show_opt(s.numa_node), show_opt(g.numa_node)));
    }
    out
}

/// The guest's view, read back from its results directory.
#[derive(Debug, Clone)]
pub struct GuestView {
    pub topology: Topology,
    /// CMB BAR (BAR 2) size of each NVMe, bytes.
    pub cmb_bar: BTreeMap<Bdf, u64>,
    /// `p2pmem/size` per device that has p2pmem.
    pub p2pmem: P2pmem,
}

/// Reads `sysfs/` (a `pcielab snapshot` taken in the guest) and `p2pmem.txt` from `results`.
pub fn read_guest(results: &Path) -> Result<GuestView> {
    let sysfs = results.join("sysfs");
    let topology = read_sysfs(&sysfs).map_err(|e| {
        Error::runtime(format!(
            "lab phase 'results': the guest's sysfs snapshot is unreadable: {e}"
        ))
    })?;
    let mut cmb_bar = BTreeMap::new();
    for f in topology.functions() {
        if (f.vendor, f.device) != NVME_IDS {
            continue;
        }
        let resource = sysfs
            .join("devices")
            .join(f.bdf.to_string())
            .join("resource");
        if let Some(size) = fs::read_to_string(&resource)
            .ok()
            .and_then(|text| bar_size(&text, 2))
        {
            cmb_bar.insert(f.bdf, size);
        }
    }
    let p2pmem = fs::read_to_string(results.join("p2pmem.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (addr, size) = line.split_once(' ')?;
            Some((addr.parse().ok()?, size.trim().parse().ok()?))
        })
        .collect();
    Ok(GuestView {
        topology,
        cmb_bar,
        p2pmem,
    })
}

/// QEMU's NVMe controller.
const NVME_IDS: (u16, u16) = (0x1b36, 0x0010);

/// `resource` file text (one `start end flags` line per BAR) → size of BAR `index` in bytes.
pub fn bar_size(resource: &str, index: usize) -> Option<u64> {
    let line = resource.lines().nth(index)?;
    let mut parts = line
        .split_whitespace()
        .map(|p| u64::from_str_radix(p.trim_start_matches("0x"), 16).ok());
    let (start, end) = (parts.next()??, parts.next()??);
    (end > start).then(|| end - start + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Generation;
    use crate::topology::{Kind, Link};

    fn bdf(s: &str) -> Bdf {
        s.parse().unwrap()
    }

    #[test]
    fn limits_turn_differences_into_expected_rows() {
        let mut rp = Function::new(bdf("00:02.0"), 0x1b36, 0x000c, 0x060400, Kind::RootPort);
        rp.link = Some(Link {
            max_speed: Some(Generation::Gen4),
            max_width: Some(8),
            speed: Some(Generation::Gen4),
            width: Some(8),
        });
        let mut guest_rp = rp.clone();
        guest_rp.link = Some(Link {
            max_speed: Some(Generation::Gen4),
            max_width: Some(8),
            speed: Some(Generation::Gen1),
            width: Some(1),
        });
        let spec = Topology::new(vec![rp]);
        let lpc = Function::new(bdf("00:1f.0"), 0x8086, 0x2918, 0x060100, Kind::RcEndpoint);
        let stray = Function::new(bdf("00:07.0"), 0x8086, 0x10d3, 0x020000, Kind::RcEndpoint);
        let guest = Topology::new(vec![guest_rp, lpc, stray]);
        let limits = vec![Limit {
            bdf: bdf("00:02.0"),
            field: "link.speed",
            spec: "16 GT/s".into(),
            qemu: "2.5 GT/s".into(),
            why: "training",
        }];
        let rows = compare(&spec, &guest, &limits, &BTreeMap::new(), None);
        let status = |field: &str, at: &str| {
            rows.iter()
                .find(|r| r.field == field && r.bdf == bdf(at))
                .map(|r| r.status)
        };
        assert_eq!(status("link.max_speed", "00:02.0"), Some(Status::Match));
        assert_eq!(status("link.speed", "00:02.0"), Some(Status::Expected));
        // No limit covers the width: a real mismatch.
        assert_eq!(status("link.width", "00:02.0"), Some(Status::Mismatch));
        assert_eq!(status("present", "00:1f.0"), Some(Status::Expected));
        assert_eq!(status("present", "00:07.0"), Some(Status::Mismatch));
    }

    #[test]
    fn bar_sizes_come_from_the_resource_file() {
        let resource = "0x00000000fe800000 0x00000000fe803fff 0x0000000000140204\n\
                        0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
                        0x0000000800000000 0x0000000803ffffff 0x000000000014220c\n";
        assert_eq!(bar_size(resource, 0), Some(0x4000));
        assert_eq!(bar_size(resource, 1), None);
        assert_eq!(bar_size(resource, 2), Some(64 << 20));
    }
}
