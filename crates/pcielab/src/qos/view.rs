//! What `qos show` and `qos monitor` print: serialisable views of a resctrl state and of two
//! monitor readings, with their text forms. The JSON shapes are documented in `docs/qos.md`.

use serde::Serialize;
use std::collections::BTreeMap;

use super::backend::MonReading;
use super::info::Info;
use super::resctrl::Resctrl;

/// `qos show --json`.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ShowView {
    pub(crate) machine: String,
    pub(crate) info: Info,
    /// Cache resource → `bit_usage` text.
    pub(crate) bit_usage: BTreeMap<String, String>,
    pub(crate) last_cmd_status: String,
    pub(crate) groups: Vec<GroupView>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct GroupView {
    /// `/` for the root.
    pub(crate) name: String,
    pub(crate) closid: u32,
    pub(crate) rmid: u32,
    pub(crate) mode: String,
    /// The schemata file, one string per line.
    pub(crate) schemata: Vec<String>,
    pub(crate) size: Vec<String>,
    pub(crate) tasks: Vec<u32>,
    /// The `cpus` file: hex mask words, most significant first.
    pub(crate) cpus: String,
    pub(crate) cpus_list: String,
    pub(crate) mon_groups: Vec<MonGroupView>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct MonGroupView {
    pub(crate) name: String,
    pub(crate) rmid: u32,
    pub(crate) tasks: Vec<u32>,
    pub(crate) cpus_list: String,
}

/// The `qos show` view of mount `rs` on machine `machine`.
pub fn show(machine: &str, rs: &Resctrl) -> ShowView {
    let nr_cpus = rs.online_cpus.0.iter().max().map_or(1, |c| c + 1);
    ShowView {
        machine: machine.to_string(),
        info: rs.info.clone(),
        bit_usage: rs
            .info
            .caches
            .iter()
            .filter_map(|c| rs.bit_usage(&c.name).map(|u| (c.name.clone(), u)))
            .collect(),
        last_cmd_status: rs.last_cmd_status.clone(),
        groups: rs
            .groups
            .iter()
            .map(|g| GroupView {
                name: if g.name.is_empty() {
                    "/".into()
                } else {
                    g.name.clone()
                },
                closid: g.closid,
                rmid: g.rmid,
                mode: g.mode.name().into(),
                schemata: g.schemata.format().lines().map(str::to_string).collect(),
                size: rs.size_text(g).lines().map(str::to_string).collect(),
                tasks: g.tasks.iter().copied().collect(),
                cpus: g.cpus.to_mask(nr_cpus),
                cpus_list: g.cpus.to_list(),
                mon_groups: g
                    .mon_groups
                    .iter()
                    .map(|m| MonGroupView {
                        name: m.name.clone(),
                        rmid: m.rmid,
                        tasks: m.tasks.iter().copied().collect(),
                        cpus_list: m.cpus.to_list(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn list(v: &[u32]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
    }
}

impl ShowView {
    /// The view as `qos show` prints it.
    pub fn text(&self) -> String {
        let mut out = format!("machine: {}\n", self.machine);
        for c in &self.info.caches {
            out += &format!(
                "{:<7} num_closids={} cbm_mask={:x} min_cbm_bits={} shareable_bits={:x} sparse_masks={} domains={}\n",
                c.name,
                c.num_closids,
                c.cbm_mask,
                c.min_cbm_bits,
                c.shareable_bits,
                c.sparse_masks as u8,
                list(&c.domains)
            );
            if let Some(u) = self.bit_usage.get(&c.name) {
                out += &format!("        bit_usage {u}\n");
            }
        }
        if let Some(mb) = &self.info.mb {
            out += &format!(
                "MB      num_closids={} min_bandwidth={} bandwidth_gran={} delay_linear={} thread_throttle_mode={} domains={}\n",
                mb.num_closids,
                mb.min_bandwidth,
                mb.bandwidth_gran,
                mb.delay_linear as u8,
                mb.thread_throttle_mode,
                list(&mb.domains)
            );
        }
        if let Some(mon) = &self.info.mon {
            out += &format!(
                "L3_MON  num_rmids={} mon_features={}{}\n",
                mon.num_rmids,
                mon.mon_features.join(","),
                mon.rmids_per_closid
                    .map(|p| format!(" ({p} monitor ids per control group: PARTID x PMG)"))
                    .unwrap_or_default()
            );
        }
        // Names and the status come from the resctrl tree: the kernel allows any byte but '\n'
        // in a group name, so they are shown escaped.
        out += &format!(
            "last_cmd_status: {}\n",
            crate::text::printable(&self.last_cmd_status)
        );
        for g in &self.groups {
            out += &format!(
                "\ngroup {} (closid {}, rmid {}, {})\n",
                crate::text::printable(&g.name),
                g.closid,
                g.rmid,
                g.mode
            );
            for line in &g.schemata {
                out += &format!("  schemata  {}\n", line.trim_start());
            }
            out += &format!(
                "  tasks     {}\n  cpus_list {}\n",
                list(&g.tasks),
                if g.cpus_list.is_empty() {
                    "-"
                } else {
                    &g.cpus_list
                }
            );
            for m in &g.mon_groups {
                out += &format!(
                    "  mon_group {} (rmid {}) tasks {} cpus_list {}\n",
                    crate::text::printable(&m.name),
                    m.rmid,
                    list(&m.tasks),
                    if m.cpus_list.is_empty() {
                        "-"
                    } else {
                        &m.cpus_list
                    }
                );
            }
        }
        out
    }
}

/// One row of `qos monitor`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct MonitorRow {
    pub(crate) group: String,
    pub(crate) domain: u32,
    /// `llc_occupancy` now, KiB.
    pub(crate) llc_occupancy_kib: Option<f64>,
    /// `mbm_total_bytes` rate over the interval, MB/s (10^6 bytes/s).
    pub(crate) mbm_total_mbps: Option<f64>,
    pub(crate) mbm_local_mbps: Option<f64>,
}

/// `qos monitor --json`: every interval's rows.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MonitorDocument {
    /// One list of rows per monitor interval.
    pub intervals: Vec<Vec<MonitorRow>>,
}

/// Turn two readings `seconds` apart into rates.
pub(crate) fn monitor_rows(
    before: &[MonReading],
    after: &[MonReading],
    seconds: f64,
) -> Vec<MonitorRow> {
    let rate = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) if seconds > 0.0 => Some(b.saturating_sub(a) as f64 / seconds / 1e6),
        _ => None,
    };
    after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.group == a.group && b.domain == a.domain);
            MonitorRow {
                group: a.group.clone(),
                domain: a.domain,
                llc_occupancy_kib: a.llc_occupancy.map(|o| o as f64 / 1024.0),
                mbm_total_mbps: rate(b.and_then(|b| b.mbm_total_bytes), a.mbm_total_bytes),
                mbm_local_mbps: rate(b.and_then(|b| b.mbm_local_bytes), a.mbm_local_bytes),
            }
        })
        .collect()
}

/// Rows as `qos monitor` prints them.
pub fn monitor_text(rows: &[MonitorRow]) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    let names: Vec<String> = rows
        .iter()
        .map(|r| crate::text::printable(&r.group))
        .collect();
    let width = names.iter().map(String::len).max().unwrap_or(5).max(5);
    let mut out = format!(
        "{:<width$}  {:>6}  {:>12}  {:>10}  {:>10}\n",
        "GROUP", "DOMAIN", "LLC[KiB]", "MBT[MB/s]", "MBL[MB/s]"
    );
    for (r, name) in rows.iter().zip(&names) {
        out += &format!(
            "{:<width$}  {:>6}  {:>12}  {:>10}  {:>10}\n",
            name,
            r.domain,
            f(r.llc_occupancy_kib),
            f(r.mbm_total_mbps),
            f(r.mbm_local_mbps)
        );
    }
    out
}
