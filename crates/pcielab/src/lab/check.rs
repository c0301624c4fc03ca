//! Spec versus guest: compares the topology a spec describes with the one the guest kernel shows
//! (read back from the guest's sysfs snapshot) field by field — presence, kind, ids, class,
//! parent, link capability and status, NUMA node, CMB / p2pmem. A difference that QEMU 7.2 cannot
//! avoid (listed by [`super::argv`] as a [`Limit`]) is marked expected, with the reason; q35's
//! own functions are expected extras. Everything else is a mismatch.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::argv::{is_q35_builtin, show_opt, show_speed, Limit, QEMU_NVME_IDS};
use super::runner::Phase;
use super::session::{self, KernelChoice, RunOptions, RunReport};
use crate::error::{Error, Result};
use crate::linux::bar_resource;
use crate::pcie::Bdf;
use crate::topology::sysfs::read_sysfs;
use crate::topology::{Function, Topology};

/// How one field compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Match,
    /// Differs in a way QEMU cannot avoid; `why` says how.
    Expected,
    Mismatch,
}

impl Status {
    /// The word `lab check --json` writes.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Match => "match",
            Status::Expected => "expected",
            Status::Mismatch => "mismatch",
        }
    }
}

/// One compared field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct Row {
    pub(crate) bdf: Bdf,
    /// `link.speed`, `numa_node`, … (the comparer's own names; read back from JSON, owned).
    pub(crate) field: Cow<'static, str>,
    pub(crate) spec: String,
    pub(crate) guest: String,
    pub(crate) status: Status,
    pub(crate) why: Option<String>,
}

/// `lab check`: boots a guest with the topology of the spec `spec` names (a FILE.toml or a
/// preset), reads its hierarchy back and compares it with the spec, field by field. With the
/// P2PDMA kernel the guest's p2pmem is compared too. `progress` hears of each phase of the run.
pub fn boot_and_check(
    spec: &str,
    options: &RunOptions,
    progress: &mut dyn FnMut(Phase),
) -> Result<CheckReport> {
    let topology = super::load_spec(spec)?.topology;
    let run = session::run(&topology, options, progress)?;
    let guest = read_guest(&run.results_dir)?;
    let p2pmem = (options.kernel == KernelChoice::P2pdma).then_some(&guest.p2pmem);
    let rows = compare(
        &topology,
        &guest.topology,
        &run.limits,
        &guest.cmb_bar,
        p2pmem,
    );
    Ok(CheckReport::new(spec, rows, run))
}

/// The `lab check` verdict (its `--json` document, which `plot` and `report --from` read back):
/// every compared field with the counts that decide it, and the run the guest view came from.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckReport {
    /// The spec that was booted, as the user named it.
    pub spec: String,
    /// Whether the guest's tree matched the spec: no fact compared as a mismatch.
    pub ok: bool,
    /// How many compared facts differ between the spec and the guest's own view (QEMU's known
    /// limits excepted).
    pub mismatches: usize,
    pub(crate) expected: usize,
    pub(crate) rows: Vec<Row>,
    pub(crate) run: RunReport,
}

impl CheckReport {
    pub(crate) fn new(spec: &str, rows: Vec<Row>, run: RunReport) -> Self {
        let count = |status| rows.iter().filter(|r| r.status == status).count();
        let mismatches = count(Status::Mismatch);
        CheckReport {
            spec: spec.to_string(),
            ok: mismatches == 0,
            mismatches,
            expected: count(Status::Expected),
            rows,
            run,
        }
    }

    /// One aligned line per field (expected differences with their reason), then a summary.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "{:<14} {:<15} {:<18} {:<18} status\n",
            "function", "field", "spec", "guest"
        );
        for r in &self.rows {
            let status = match r.status {
                Status::Match => "ok".to_string(),
                Status::Expected => format!("expected: {}", r.why.as_deref().unwrap_or("")),
                Status::Mismatch => "MISMATCH".to_string(),
            };
            text.push_str(&format!(
                "{:<14} {:<15} {:<18} {:<18} {status}\n",
                r.bdf.to_string(),
                r.field,
                r.spec,
                r.guest
            ));
        }
        text.push_str(&format!(
            "{} fields compared: {} mismatches, {} expected differences; boot to result {:.1} s\n",
            self.rows.len(),
            self.mismatches,
            self.expected,
            self.run.boot_to_result_s
        ));
        text
    }
}

/// What the guest said about peer-to-peer memory: address → `p2pmem/size` in bytes.
pub(crate) type P2pmem = BTreeMap<Bdf, u64>;

/// Compares every function of `spec` with `guest`. `cmb_bar` gives the guest's CMB BAR size per
/// NVMe (bytes); `p2pmem` is `None` when the guest kernel has no P2PDMA support.
pub(crate) fn compare(
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
        let builtin = is_q35_builtin(g.bdf);
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
        field: field.into(),
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
            Some(l.why.to_string()),
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
pub(crate) struct GuestView {
    pub(crate) topology: Topology,
    /// CMB BAR (BAR 2) size of each NVMe, bytes.
    pub(crate) cmb_bar: BTreeMap<Bdf, u64>,
    /// `p2pmem/size` per device that has p2pmem.
    pub(crate) p2pmem: P2pmem,
}

/// Reads `sysfs/` (a `pcielab snapshot` taken in the guest) and `p2pmem.txt` from `results`.
pub(crate) fn read_guest(results: &Path) -> Result<GuestView> {
    let sysfs = results.join("sysfs");
    let topology = read_sysfs(&sysfs).map_err(|e| {
        Error::runtime(format!(
            "lab phase 'results': the guest's sysfs snapshot is unreadable: {e}"
        ))
    })?;
    let mut cmb_bar = BTreeMap::new();
    for f in topology.functions() {
        if (f.vendor, f.device) != QEMU_NVME_IDS {
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

/// `resource` file text → size of BAR `index` in bytes (`None` when unassigned).
pub(crate) fn bar_size(resource: &str, index: usize) -> Option<u64> {
    let (start, end, _) = bar_resource(resource, index)?;
    (end > start).then(|| end - start + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::pcie::Generation;
    use crate::topology::{Kind, Link};

    #[test]
    fn limits_turn_differences_into_expected_rows() {
        let mut rp = Function::new(bdf("00:02.0"), 0x1b36, 0x000c, 0x060400, Kind::RootPort);
        rp.link = Some(Link::trained((Generation::Gen4, 8), (Generation::Gen4, 8)));
        let mut guest_rp = rp.clone();
        guest_rp.link = Some(Link::trained((Generation::Gen4, 8), (Generation::Gen1, 1)));
        let spec = Topology::new(vec![rp]);
        let lpc = Function::new(bdf("00:1f.0"), 0x8086, 0x2918, 0x060100, Kind::RcEndpoint);
        let stray = Function::new(bdf("00:07.0"), 0x8086, 0x10d3, 0x020000, Kind::RcEndpoint);
        let guest = Topology::new(vec![guest_rp, lpc, stray]);
        let limits = vec![Limit {
            bdf: bdf("00:02.0"),
            field: "link.speed".into(),
            spec: "16 GT/s".into(),
            qemu: "2.5 GT/s".into(),
            why: "training".into(),
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

    fn run_report() -> RunReport {
        RunReport {
            results_dir: "/tmp/r".into(),
            run_dir: None,
            kernel: "/tmp/bzImage".into(),
            script_status: 0,
            oom_kill: None,
            memory_mib: 1024,
            boot_s: 3.0,
            boot_to_result_s: 12.34,
            total_s: 20.0,
            limits: Vec::new(),
            qemu_argv: Vec::new(),
        }
    }

    fn row(field: &'static str, guest: &str, status: Status, why: Option<&str>) -> Row {
        Row {
            bdf: bdf("00:02.0"),
            field: field.into(),
            spec: "16 GT/s".into(),
            guest: guest.into(),
            status,
            why: why.map(String::from),
        }
    }

    #[test]
    fn report_counts_mismatches_and_expected_and_renders_a_table() {
        let rows = vec![
            row("link.max_speed", "16 GT/s", Status::Match, None),
            row(
                "link.speed",
                "2.5 GT/s",
                Status::Expected,
                Some("no training"),
            ),
            row("numa_node", "0", Status::Mismatch, None),
        ];
        let run = run_report();
        let report = CheckReport::new("qemu-seed", rows.clone(), run.clone());
        assert!(!report.ok);
        assert_eq!((report.mismatches, report.expected), (1, 1));
        let text = report.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[2],
            "0000:00:02.0   link.speed      16 GT/s            2.5 GT/s           expected: no training"
        );
        assert!(lines[3].ends_with(" MISMATCH"), "{}", lines[3]);
        assert_eq!(
            lines[4],
            "3 fields compared: 1 mismatches, 1 expected differences; boot to result 12.3 s"
        );
        let json = serde_json::to_value(&report).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 6);
        assert_eq!(json["ok"], false);
        assert_eq!(json["rows"][1]["status"], "expected");
        assert!(CheckReport::new("s", rows[..2].to_vec(), run).ok);
    }
}
