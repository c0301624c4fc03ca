//! The `pcielab topo --p2p` document ([`Report`]) and its text: the groups, a matrix of group
//! verdicts where there are few groups, and one line per run of verdicts.

use super::groups::{group_run, group_verdicts, groups, Group, GroupVerdict};
use super::rules::{matrix, Cpu, MapType, Reason, Verdict};
use crate::pcie::Bdf;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};

/// The `pcielab topo --p2p --json` document: the groups and their verdicts, and with `--full`
/// every ordered pair of endpoints (empty otherwise). Read back by `plot` and `report --from`:
/// documents from before verdicts were grouped have only `pairs`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    pub(crate) cpu: Cpu,
    #[serde(default)]
    pub(crate) groups: Vec<Group>,
    #[serde(default)]
    pub(crate) group_verdicts: Vec<GroupVerdict>,
    pub(crate) pairs: Vec<Verdict>,
}

impl Report {
    /// The grouped verdicts of `topology`, with every pair too when `full`.
    pub fn new(topology: &Topology, cpu: Cpu, full: bool) -> crate::Result<Report> {
        let groups = groups(topology);
        Ok(Report {
            cpu,
            group_verdicts: group_verdicts(topology, &groups, cpu),
            groups,
            pairs: if full {
                matrix(topology, cpu)?
            } else {
                Vec::new()
            },
        })
    }
}

impl MapType {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            MapType::BusAddress => "bus address",
            MapType::ThroughHostBridge => "through host bridge",
            MapType::NotSupported => "not supported",
            MapType::Unknown => "unknown",
        }
    }

    /// One letter for the matrix: B(us address), H(ost bridge), x (refused).
    fn mark(self) -> char {
        match self {
            MapType::BusAddress => 'B',
            MapType::ThroughHostBridge => 'H',
            MapType::NotSupported => 'x',
            MapType::Unknown => '?',
        }
    }
}

/// `0000:01:00.0, 0000:02:00.0`.
fn bdf_list(bdfs: &[Bdf]) -> String {
    bdfs.iter()
        .map(Bdf::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Reason {
    pub(crate) fn describe(&self) -> String {
        match self {
            Reason::CommonUpstreamBridge { bridge } => format!("common upstream bridge {bridge}"),
            Reason::SameFunction => "same function".into(),
            Reason::NoCommonUpstreamBridge => "no common upstream bridge".into(),
            Reason::AcsRedirect { bridges } => format!("ACS redirect on {}", bdf_list(bridges)),
            Reason::AcsUnreadable { functions } => {
                format!("unknown: needs root to read ACS of {}", bdf_list(functions))
            }
            Reason::CpuExemption { family } => {
                format!("CPU exemption (AMD family {family:#x} >= 0x17)")
            }
            Reason::HostBridgeWhitelisted { host_bridge } => {
                format!("host bridge {host_bridge} whitelisted")
            }
            Reason::HostBridgeNotWhitelisted {
                host_bridge: Some(bdf),
                vendor,
                device,
            } => format!(
                "host bridge {bdf} ({:04x}:{:04x}) not whitelisted",
                vendor.unwrap_or(0),
                device.unwrap_or(0)
            ),
            Reason::HostBridgeNotWhitelisted { .. } => {
                "no host bridge function at 00.0 or a root port first on the root bus".into()
            }
        }
    }
}

/// The most rows a text matrix gets; a larger host is read from the verdict lines below it.
const MAX_MATRIX_ROWS: usize = 32;

/// The groups, a matrix of group verdicts (distance and B/H/x/? per provider row and client
/// column, when there are few groups) and one line per run of group verdicts; with `--full`,
/// the same per endpoint pair.
pub fn to_text(report: &Report) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let endpoints: usize = report.groups.iter().map(|g| g.functions.len()).sum();
    let _ = writeln!(
        out,
        "P2PDMA between {endpoints} endpoints in {} groups, CPU {} (endpoints below one port with the same ACS state \
         share every verdict; --full lists every pair)",
        report.groups.len(),
        report.cpu
    );
    let _ = writeln!(out, "{:<6} {:<14} functions", "group", "below");
    for g in &report.groups {
        let below = g.port.map_or("root complex".to_string(), |p| p.to_string());
        let members = match g.functions.as_slice() {
            [one] => one.to_string(),
            [first, .., last] => format!("{first} … {last} ({})", g.functions.len()),
            [] => String::new(),
        };
        let _ = writeln!(out, "{:<6} {below:<14} {members}", g.group);
    }
    out.push('\n');
    let names: Vec<&str> = report.groups.iter().map(|g| g.group.as_str()).collect();
    if names.len() <= MAX_MATRIX_ROWS {
        let members: Vec<usize> = report.groups.iter().map(|g| g.functions.len()).collect();
        let cells = group_cells(
            &members,
            report
                .group_verdicts
                .iter()
                .map(|gv| (&gv.provider_groups[..], &gv.client_groups[..], &gv.verdict)),
        )
        .expect("at most 32 groups stay far within the budget");
        write_matrix(&mut out, &names, |p, c| cells[p * names.len() + c]);
    }
    let _ = writeln!(
        out,
        "{:<14} provider groups -> client groups: verdict (a pair of groups takes the first line \
         naming both)",
        "paths meet at"
    );
    for gv in &report.group_verdicts {
        let v = &gv.verdict;
        let _ = writeln!(
            out,
            "{:<14} {} -> {}: {} pair{}, {}  (as {} -> {})",
            gv.meeting
                .map_or("root complex".to_string(), |b| b.to_string()),
            gv.provider_groups.join(","),
            gv.client_groups.join(","),
            gv.pairs,
            if gv.pairs == 1 { "" } else { "s" },
            verdict_text(v),
            v.provider,
            v.client
        );
    }
    if !report.pairs.is_empty() {
        out.push('\n');
        let mut bdfs: Vec<Bdf> = report.pairs.iter().map(|v| v.provider).collect();
        bdfs.dedup();
        if bdfs.len() <= MAX_MATRIX_ROWS {
            let shorts: Vec<String> = bdfs.iter().map(|b| short(*b)).collect();
            let labels: Vec<&str> = shorts.iter().map(String::as_str).collect();
            let at = |bdf: Bdf| bdfs.iter().position(|b| *b == bdf);
            let by_pair: std::collections::HashMap<(Option<usize>, Option<usize>), &Verdict> =
                report
                    .pairs
                    .iter()
                    .map(|v| ((at(v.provider), at(v.client)), v))
                    .collect();
            write_matrix(&mut out, &labels, |p, c| {
                by_pair.get(&(Some(p), Some(c))).copied()
            });
        }
        for v in &report.pairs {
            let _ = writeln!(out, "{} -> {}  {}", v.provider, v.client, verdict_text(v));
        }
    }
    out
}

/// The most (provider group, client group) cells [`group_cells`] visits: a document listing
/// more is not one pcielab printed for a host it can draw.
const MAX_CELL_VISITS: usize = 1 << 24;

/// Each (provider group, client group) cell's verdict, row-major over the groups (`members`:
/// how many functions each has), from group verdicts in their listed order (deepest meeting
/// point first: the first naming both groups applies). `None` in a cell no pair falls in (a
/// group of one with itself); `None` overall past `MAX_CELL_VISITS`.
pub(crate) fn group_cells<'v, V: ?Sized>(
    members: &[usize],
    verdicts: impl IntoIterator<Item = (&'v [String], &'v [String], &'v V)>,
) -> Option<Vec<Option<&'v V>>> {
    let groups = members.len();
    let mut cells: Vec<Option<&V>> = vec![None; groups * groups];
    let mut visits = 0usize;
    let runs = |names: &[String]| -> Vec<(usize, usize)> {
        names
            .iter()
            .filter_map(|n| group_run(n))
            .filter(|&(first, _)| first < groups)
            .map(|(first, last)| (first, last.min(groups - 1)))
            .collect()
    };
    for (providers, clients, verdict) in verdicts {
        let clients = runs(clients);
        for (first, last) in runs(providers) {
            for p in first..=last {
                for &(c_first, c_last) in &clients {
                    visits += c_last - c_first + 1;
                    if visits > MAX_CELL_VISITS {
                        return None;
                    }
                    for cell in &mut cells[p * groups + c_first..=p * groups + c_last] {
                        cell.get_or_insert(verdict);
                    }
                }
            }
        }
    }
    // A verdict listing a group as provider and client stands for pairs between its
    // functions, which a group of one has none of.
    for (g, &n) in members.iter().enumerate() {
        if n < 2 {
            cells[g * groups + g] = None;
        }
    }
    Some(cells)
}

/// `distance  N  map  reasons`, as every verdict line ends.
fn verdict_text(v: &Verdict) -> String {
    let reasons: Vec<String> = v.reasons.iter().map(Reason::describe).collect();
    format!(
        "distance {:>2}  {:<19}  {}",
        v.distance,
        v.map.describe(),
        reasons.join("; ")
    )
}

/// A square matrix of `labels`, providers down and clients across, a cell per verdict.
fn write_matrix<'v>(
    out: &mut String,
    labels: &[&str],
    cell: impl Fn(usize, usize) -> Option<&'v Verdict>,
) {
    use std::fmt::Write as _;
    let _ = write!(out, "{:<14}", "provider\\client");
    for c in labels {
        let _ = write!(out, " {c:>8}");
    }
    out.push('\n');
    for (p, provider) in labels.iter().enumerate() {
        let _ = write!(out, "{provider:<15}");
        for c in 0..labels.len() {
            let text = cell(p, c).map_or("-".to_string(), |v| {
                format!("{} {}", v.distance, v.map.mark())
            });
            let _ = write!(out, " {text:>8}");
        }
        out.push('\n');
    }
    out.push('\n');
}

/// `bb:dd.f`, or the full address outside domain 0.
fn short(bdf: Bdf) -> String {
    if bdf.domain == 0 {
        format!("{:02x}:{:02x}.{:x}", bdf.bus, bdf.device, bdf.function)
    } else {
        bdf.to_string()
    }
}
