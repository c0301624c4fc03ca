//! The resctrl filesystem as data plus the kernel's rules for changing it: control groups
//! (CLOSIDs) and monitor groups (RMIDs), their schemata, mode, tasks and CPUs, and what `mkdir`,
//! `rmdir` and each file write do, errno and `last_cmd_status` included. The simulated machine
//! *is* this model; the host backend runs every write through a copy of it first, so a request
//! the kernel would refuse is refused before it reaches the kernel.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

use super::info::Info;
use super::schemata::{self, Errno, Rejection, Schemata};
use crate::linux::cpuset::CpuSet;
use crate::linux::low_bits_mask;

/// A group's `mode` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Mode {
    Shareable,
    Exclusive,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Shareable => "shareable",
            Mode::Exclusive => "exclusive",
        }
    }
}

/// Which group a command names: the root (`/`), a control group (`p1`), or a monitor group
/// (`p1/m1`, or `mon_groups/m1` under the root).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRef {
    /// Control group name; empty for the root.
    pub(crate) ctrl: String,
    pub(crate) mon: Option<String>,
}

impl GroupRef {
    /// The root control group.
    pub(crate) fn root() -> GroupRef {
        GroupRef {
            ctrl: String::new(),
            mon: None,
        }
    }

    /// The control group `name`.
    pub(crate) fn ctrl(name: &str) -> GroupRef {
        GroupRef {
            ctrl: name.to_string(),
            mon: None,
        }
    }

    /// Parse `/`, `root`, `p1`, `p1/m1`, `p1/mon_groups/m1`, `mon_groups/m1`. Each name must be
    /// one directory the kernel could create: not `.` or `..`, not `info` or `mon_data` (resctrl's
    /// own), no NUL, at most 255 bytes.
    pub fn parse(text: &str) -> Option<GroupRef> {
        let parts: Vec<&str> = text
            .split('/')
            .filter(|p| !p.is_empty() && *p != "mon_groups")
            .collect();
        let usable = |p: &&str| {
            crate::input::path_component("group", p).is_ok() && !["info", "mon_data"].contains(p)
        };
        if !parts.iter().all(usable) {
            return None;
        }
        let root_mon = text.trim_start_matches('/').starts_with("mon_groups/");
        match (root_mon, parts.as_slice()) {
            (_, []) | (false, ["root"]) => Some(GroupRef::root()),
            (true, [m]) => Some(GroupRef {
                ctrl: String::new(),
                mon: Some(m.to_string()),
            }),
            (false, [c]) => Some(GroupRef::ctrl(c)),
            (false, [c, m]) => Some(GroupRef {
                ctrl: c.to_string(),
                mon: Some(m.to_string()),
            }),
            _ => None,
        }
    }

    /// The directory of this group relative to the mount.
    pub(crate) fn path(&self) -> String {
        let mut p = self.ctrl.clone();
        if let Some(m) = &self.mon {
            if !p.is_empty() {
                p.push('/');
            }
            p.push_str("mon_groups/");
            p.push_str(m);
        }
        p
    }
}

impl std::fmt::Display for GroupRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.ctrl.as_str(), &self.mon) {
            ("", None) => f.write_str("/"),
            (c, None) => f.write_str(c),
            ("", Some(m)) => write!(f, "mon_groups/{m}"),
            (c, Some(m)) => write!(f, "{c}/{m}"),
        }
    }
}

/// A monitor group under a control group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonGroup {
    /// The monitor group's name.
    pub name: String,
    pub(crate) rmid: u32,
    /// Pids in it.
    pub tasks: BTreeSet<u32>,
    pub(crate) cpus: CpuSet,
}

/// A control group (the root has an empty name, CLOSID 0 and RMID 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtrlGroup {
    pub(crate) name: String,
    /// Its CLOSID.
    pub closid: u32,
    /// Its RMID.
    pub rmid: u32,
    pub(crate) mode: Mode,
    /// Its schemata.
    pub schemata: Schemata,
    /// Tasks whose monitor id is this group's own (tasks in its monitor groups are listed there).
    pub tasks: BTreeSet<u32>,
    /// CPUs given to it.
    pub cpus: CpuSet,
    /// Its monitor groups.
    pub mon_groups: Vec<MonGroup>,
}

impl CtrlGroup {
    /// Every task whose CLOSID is this group's (its own and its monitor groups').
    pub(crate) fn all_tasks(&self) -> BTreeSet<u32> {
        let mut all = self.tasks.clone();
        for m in &self.mon_groups {
            all.extend(&m.tasks);
        }
        all
    }
}

/// A whole resctrl mount: `info/`, the groups, the CPUs that are online, the tasks that exist and
/// `info/last_cmd_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resctrl {
    /// The mount's `info/` directory: resources and their limits.
    pub info: Info,
    /// The root first.
    pub(crate) groups: Vec<CtrlGroup>,
    pub(crate) online_cpus: CpuSet,
    /// `info/last_cmd_status`: the kernel's word on the last write.
    pub last_cmd_status: String,
}

type Outcome = Result<(), Rejection>;

fn no_such(group: &GroupRef) -> Rejection {
    Rejection::silent(Errno::ENOENT, format!("no group {group}"))
}

impl Resctrl {
    /// A freshly mounted resctrl: only the root, holding every CPU and the given tasks.
    pub(crate) fn mount(info: Info, online_cpus: CpuSet, tasks: BTreeSet<u32>) -> Resctrl {
        let root = CtrlGroup {
            name: String::new(),
            closid: 0,
            rmid: 0,
            mode: Mode::Shareable,
            schemata: Schemata::defaults(&info),
            tasks,
            cpus: online_cpus.clone(),
            mon_groups: Vec::new(),
        };
        Resctrl {
            info,
            groups: vec![root],
            online_cpus,
            last_cmd_status: "ok".into(),
        }
    }

    /// The control group `name`, if it exists.
    pub fn group(&self, name: &str) -> Option<&CtrlGroup> {
        self.groups.iter().find(|g| g.name == name)
    }

    fn group_index(&self, name: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.name == name)
    }

    /// The same state with `last_cmd_status` cleared: what "the machine is unchanged" compares.
    pub(crate) fn without_status(&self) -> Resctrl {
        Resctrl {
            last_cmd_status: String::new(),
            ..self.clone()
        }
    }

    /// Every task known to the mount.
    pub(crate) fn all_tasks(&self) -> BTreeSet<u32> {
        self.groups.iter().flat_map(|g| g.all_tasks()).collect()
    }

    /// Run an operation with the kernel's bookkeeping: `last_cmd_status` is cleared to `ok`
    /// first and holds the failure's message afterwards.
    fn run(&mut self, op: impl FnOnce(&mut Resctrl) -> Outcome) -> Outcome {
        self.last_cmd_status = "ok".into();
        let result = op(self);
        if let Err(rej) = &result {
            if !rej.status.is_empty() {
                self.last_cmd_status = rej.status.clone();
            }
        }
        result
    }

    fn rmids_in_use(&self) -> BTreeSet<u32> {
        self.groups
            .iter()
            .flat_map(|g| std::iter::once(g.rmid).chain(g.mon_groups.iter().map(|m| m.rmid)))
            .collect()
    }

    /// The kernel's `alloc_rmid`: the lowest free monitor id (x86), or the lowest free PMG of
    /// this CLOSID (MPAM, where ids are PARTID × PMG). `None` when monitoring is absent.
    fn alloc_rmid(&self, closid: u32) -> Result<Option<u32>, Rejection> {
        let Some(mon) = &self.info.mon else {
            return Ok(None);
        };
        let used = self.rmids_in_use();
        let candidates: Vec<u32> = match mon.rmids_per_closid {
            Some(per) => (0..per).map(|pmg| closid * per + pmg).collect(),
            None => (0..mon.num_rmids).collect(),
        };
        candidates
            .into_iter()
            .find(|r| !used.contains(r) && *r < mon.num_rmids)
            .map(Some)
            .ok_or_else(|| Rejection::new(Errno::ENOSPC, "Out of RMIDs"))
    }

    /// `mkdir` of a control group (`p1`) or a monitor group (`p1/mon_groups/m1`).
    pub(crate) fn mkdir(&mut self, group: &GroupRef) -> Outcome {
        self.run(|rs| rs.mkdir_inner(group))
    }

    fn mkdir_inner(&mut self, group: &GroupRef) -> Outcome {
        let name = group.mon.as_deref().unwrap_or(&group.ctrl);
        if name.contains('\n') || name.is_empty() {
            return Err(Rejection::silent(Errno::EINVAL, "bad group name"));
        }
        if let Some(mon_name) = &group.mon {
            let parent = self
                .group_index(&group.ctrl)
                .ok_or_else(|| no_such(&GroupRef::ctrl(&group.ctrl)))?;
            if self.groups[parent]
                .mon_groups
                .iter()
                .any(|m| &m.name == mon_name)
            {
                return Err(Rejection::silent(Errno::EEXIST, format!("{group} exists")));
            }
            if self.info.mon.is_none() {
                return Err(Rejection::silent(
                    Errno::EPERM,
                    "this machine has no monitoring",
                ));
            }
            let rmid = self.alloc_rmid(self.groups[parent].closid)?.unwrap_or(0);
            self.groups[parent].mon_groups.push(MonGroup {
                name: mon_name.clone(),
                rmid,
                tasks: BTreeSet::new(),
                cpus: CpuSet::default(),
            });
            return Ok(());
        }
        if self.group(name).is_some() || ["info", "mon_groups", "mon_data"].contains(&name) {
            return Err(Rejection::silent(Errno::EEXIST, format!("{name} exists")));
        }
        let used: BTreeSet<u32> = self.groups.iter().map(|g| g.closid).collect();
        let closid = (0..self.info.closids_supported())
            .find(|c| !used.contains(c))
            .ok_or_else(|| Rejection::new(Errno::ENOSPC, "Out of CLOSIDs"))?;
        let rmid = self.alloc_rmid(closid)?.unwrap_or(0);
        let schemata = self.initial_schemata()?;
        self.groups.push(CtrlGroup {
            name: name.to_string(),
            closid,
            rmid,
            mode: Mode::Shareable,
            schemata,
            tasks: BTreeSet::new(),
            cpus: CpuSet::default(),
            mon_groups: Vec::new(),
        });
        Ok(())
    }

    /// `rdtgroup_init_alloc`: a new group gets the hardware-shareable bits, the masks of
    /// shareable groups and every unused bit (made contiguous where masks must be), and MB 100.
    fn initial_schemata(&self) -> Result<Schemata, Rejection> {
        let mut schemata = Schemata::defaults(&self.info);
        for res in &self.info.caches {
            for &dom in &res.domains {
                let mut used = 0u64;
                let mut new = res.shareable_bits;
                for g in &self.groups {
                    let ctrl = g.schemata.get(&res.name, dom).unwrap_or(0);
                    used |= ctrl;
                    if g.mode == Mode::Shareable {
                        new |= ctrl;
                    }
                }
                new |= !used & res.cbm_mask;
                if !res.sparse_masks && new != 0 {
                    // cbm_ensure_valid: keep the first run of ones.
                    let first = new.trailing_zeros();
                    let run = (!(new >> first)).trailing_zeros();
                    new = low_bits_mask(run) << first;
                }
                if new.count_ones() < res.min_cbm_bits {
                    return Err(Rejection::new(
                        Errno::ENOSPC,
                        format!("No space on {}:{}", res.name, dom),
                    ));
                }
                schemata.merge(&[schemata::SchemaLine {
                    resource: res.name.clone(),
                    values: [(dom, new)].into(),
                }]);
            }
        }
        Ok(schemata)
    }

    /// `rmdir`: a control group's tasks and CPUs go back to the root; a monitor group's go back
    /// to its parent.
    pub(crate) fn rmdir(&mut self, group: &GroupRef) -> Outcome {
        self.run(|rs| {
            let gi = rs.group_index(&group.ctrl).ok_or_else(|| no_such(group))?;
            match &group.mon {
                Some(m) => {
                    let mi = rs.groups[gi]
                        .mon_groups
                        .iter()
                        .position(|x| &x.name == m)
                        .ok_or_else(|| no_such(group))?;
                    let removed = rs.groups[gi].mon_groups.remove(mi);
                    rs.groups[gi].tasks.extend(removed.tasks);
                }
                None if gi == 0 => {
                    return Err(Rejection::silent(
                        Errno::EPERM,
                        "the root group cannot be removed",
                    ))
                }
                None => {
                    let removed = rs.groups.remove(gi);
                    let tasks = removed.all_tasks();
                    rs.groups[0].tasks.extend(tasks);
                    rs.groups[0].cpus.0.extend(removed.cpus.0);
                }
            }
            Ok(())
        })
    }

    /// Would `cbm` in `resource`/`domain` for group `closid` overlap another group? With
    /// `exclusive_only`, only exclusive groups count; otherwise any group and the
    /// hardware-shareable bits do (`rdtgroup_cbm_overlaps`). With CDP both halves of the other
    /// groups count.
    fn cbm_overlaps(
        &self,
        resource: &str,
        domain: u32,
        cbm: u64,
        closid: u32,
        exclusive_only: bool,
    ) -> bool {
        let Some(res) = self.info.cache(resource) else {
            return false;
        };
        if !exclusive_only && cbm & res.shareable_bits != 0 {
            return true;
        }
        let peers: Vec<&str> = match resource {
            "L3CODE" | "L3DATA" => vec!["L3CODE", "L3DATA"],
            other => vec![other],
        };
        self.groups
            .iter()
            .filter(|g| g.closid != closid)
            .filter(|g| !exclusive_only || g.mode == Mode::Exclusive)
            .any(|g| {
                peers
                    .iter()
                    .any(|p| g.schemata.get(p, domain).unwrap_or(0) & cbm != 0)
            })
    }

    /// A write to a control group's `schemata`; `text` is sent as written (it must end with a
    /// newline, as the kernel requires).
    pub(crate) fn write_schemata(&mut self, group: &GroupRef, text: &str) -> Outcome {
        self.run(|rs| {
            if group.mon.is_some() {
                return Err(Rejection::silent(
                    Errno::ENOENT,
                    "monitor groups have no schemata file",
                ));
            }
            let gi = rs.group_index(&group.ctrl).ok_or_else(|| no_such(group))?;
            let (closid, mode) = (rs.groups[gi].closid, rs.groups[gi].mode);
            let staged = {
                let check = |res: &str, dom: u32, cbm: u64| {
                    if rs.cbm_overlaps(res, dom, cbm, closid, true) {
                        return Some("Overlaps with exclusive group".to_string());
                    }
                    if mode == Mode::Exclusive && rs.cbm_overlaps(res, dom, cbm, closid, false) {
                        return Some("Overlaps with other group".to_string());
                    }
                    None
                };
                schemata::parse_write(text, &rs.info, &check)?
            };
            rs.groups[gi].schemata.merge(&staged);
            Ok(())
        })
    }

    /// A write to `mode`.
    pub(crate) fn write_mode(&mut self, group: &GroupRef, text: &str) -> Outcome {
        self.run(|rs| {
            let gi = rs.group_index(&group.ctrl).ok_or_else(|| no_such(group))?;
            if group.mon.is_some() {
                return Err(Rejection::silent(
                    Errno::ENOENT,
                    "monitor groups have no mode file",
                ));
            }
            match text.trim() {
                "shareable" => rs.groups[gi].mode = Mode::Shareable,
                "exclusive" => {
                    let g = &rs.groups[gi];
                    let overlaps = rs.info.caches.iter().any(|res| {
                        res.domains.iter().any(|&d| {
                            let cbm = g.schemata.get(&res.name, d).unwrap_or(0);
                            rs.cbm_overlaps(&res.name, d, cbm, g.closid, false)
                        })
                    });
                    if overlaps {
                        return Err(Rejection::new(Errno::EINVAL, "Schemata overlaps"));
                    }
                    rs.groups[gi].mode = Mode::Exclusive;
                }
                "pseudo-locksetup" => {
                    return Err(Rejection::new(
                        Errno::EINVAL,
                        "Pseudo-locking not supported",
                    ))
                }
                _ => return Err(Rejection::new(Errno::EINVAL, "Unknown or unsupported mode")),
            }
            Ok(())
        })
    }

    /// A write to `tasks`: comma-separated pids, moved one by one; on a failure the pids before
    /// it stay moved, as in the kernel.
    pub(crate) fn write_tasks(&mut self, group: &GroupRef, text: &str) -> Outcome {
        self.run(|rs| {
            let gi = rs.group_index(&group.ctrl).ok_or_else(|| no_such(group))?;
            if let Some(m) = &group.mon {
                if !rs.groups[gi].mon_groups.iter().any(|x| &x.name == m) {
                    return Err(no_such(group));
                }
            }
            let existing = rs.all_tasks();
            let body = text.trim_end_matches('\n');
            if !rs.info.rules.pid_lists && body.contains(',') {
                // Before 6.7 the whole write is one kstrtoint: a list does not parse.
                return Err(Rejection::silent(
                    Errno::EINVAL,
                    format!(
                        "kernel {} takes one pid per write to tasks",
                        rs.info.rules.release
                    ),
                ));
            }
            for token in body.split(',') {
                let token = token.trim();
                // kstrtoint: a pid is a C int.
                let pid: i32 = token.parse().map_err(|_| {
                    Rejection::new(
                        Errno::EINVAL,
                        format!("Task list parsing error pid {token}"),
                    )
                })?;
                let pid = u32::try_from(pid)
                    .map_err(|_| Rejection::new(Errno::EINVAL, format!("Invalid pid {pid}")))?;
                if !existing.contains(&pid) {
                    return Err(Rejection::new(Errno::ESRCH, format!("No task {pid}"))
                        .then(format!("Error while processing task {pid}")));
                }
                if group.mon.is_some() && !rs.groups[gi].all_tasks().contains(&pid) {
                    return Err(Rejection::new(
                        Errno::EINVAL,
                        "Can't move task to different control group",
                    )
                    .then(format!("Error while processing task {pid}")));
                }
                for g in rs.groups.iter_mut() {
                    g.tasks.remove(&pid);
                    for m in g.mon_groups.iter_mut() {
                        m.tasks.remove(&pid);
                    }
                }
                let target = &mut rs.groups[gi];
                match &group.mon {
                    Some(m) => {
                        if let Some(mg) = target.mon_groups.iter_mut().find(|x| &x.name == m) {
                            mg.tasks.insert(pid);
                        }
                    }
                    None => {
                        target.tasks.insert(pid);
                    }
                }
            }
            Ok(())
        })
    }

    /// A write to `cpus_list`. CPUs given to a control group leave every other control group;
    /// CPUs it drops return to the root (the root cannot drop any). A monitor group may only
    /// take CPUs of its parent.
    pub(crate) fn write_cpus(&mut self, group: &GroupRef, cpus: &CpuSet) -> Outcome {
        self.run(|rs| {
            let gi = rs.group_index(&group.ctrl).ok_or_else(|| no_such(group))?;
            if !cpus.is_subset(&rs.online_cpus) {
                return Err(Rejection::new(Errno::EINVAL, "Can only assign online CPUs"));
            }
            if let Some(m) = &group.mon {
                if !cpus.is_subset(&rs.groups[gi].cpus) {
                    return Err(Rejection::new(
                        Errno::EINVAL,
                        "Can only add CPUs to mongroup that belong to parent",
                    ));
                }
                let parent = &mut rs.groups[gi];
                for other in parent.mon_groups.iter_mut() {
                    if &other.name == m {
                        other.cpus = cpus.clone();
                    } else {
                        other.cpus.0.retain(|c| !cpus.0.contains(c));
                    }
                }
                return Ok(());
            }
            if gi == 0 && !rs.groups[0].cpus.is_subset(cpus) {
                return Err(Rejection::new(
                    Errno::EINVAL,
                    "Can't drop CPUs from default group",
                ));
            }
            let dropped: Vec<u32> = rs.groups[gi].cpus.0.difference(&cpus.0).copied().collect();
            for (i, g) in rs.groups.iter_mut().enumerate() {
                if i == gi {
                    continue;
                }
                g.cpus.0.retain(|c| !cpus.0.contains(c));
                for m in g.mon_groups.iter_mut() {
                    m.cpus.0.retain(|c| !cpus.0.contains(c));
                }
            }
            let target = &mut rs.groups[gi];
            target.cpus = cpus.clone();
            for m in target.mon_groups.iter_mut() {
                m.cpus.0.retain(|c| cpus.0.contains(c));
            }
            rs.groups[0].cpus.0.extend(dropped);
            Ok(())
        })
    }

    /// The group whose allocation applies to task `pid` running on `cpu`, as the context switch
    /// picks it: a task in a non-root group uses that group's CLOSID/RMID; a task in the root
    /// uses the group that owns the CPU. Returns (control group index, RMID).
    pub(crate) fn effective_ids(&self, pid: u32, cpu: u32) -> (usize, u32) {
        for (i, g) in self.groups.iter().enumerate().skip(1) {
            if g.tasks.contains(&pid) {
                return (i, g.rmid);
            }
            if let Some(m) = g.mon_groups.iter().find(|m| m.tasks.contains(&pid)) {
                return (i, m.rmid);
            }
        }
        let root_mon = self.groups[0]
            .mon_groups
            .iter()
            .find(|m| m.tasks.contains(&pid));
        if let Some(m) = root_mon {
            return (0, m.rmid);
        }
        for (i, g) in self.groups.iter().enumerate() {
            if g.cpus.0.contains(&cpu) {
                let rmid = g
                    .mon_groups
                    .iter()
                    .find(|m| m.cpus.0.contains(&cpu))
                    .map_or(g.rmid, |m| m.rmid);
                return (i, rmid);
            }
        }
        (0, 0)
    }

    /// The `size` file of a control group: bytes of cache per domain, MB as its value.
    pub(crate) fn size_text(&self, group: &CtrlGroup) -> String {
        let mut sized = group.schemata.clone();
        for line in sized.lines.iter_mut() {
            if let Some(res) = self.info.cache(&line.resource) {
                let per_bit = res.cache_bytes / res.cbm_len().max(1) as u64;
                for v in line.values.values_mut() {
                    *v = v.count_ones() as u64 * per_bit;
                }
            }
        }
        // Sizes are decimal; reuse the MB formatting path by printing each value in base 10.
        let width = sized
            .lines
            .iter()
            .map(|l| l.resource.len())
            .max()
            .unwrap_or(0);
        sized
            .lines
            .iter()
            .map(|l| {
                let vals: Vec<String> = l.values.iter().map(|(d, v)| format!("{d}={v}")).collect();
                format!("{:>width$}:{}\n", l.resource, vals.join(";"))
            })
            .collect()
    }

    /// `info/<RES>/bit_usage` for a cache resource: per domain, per bit from the top, `0` unused,
    /// `H` hardware only, `X` hardware and software, `S` shared by groups, `E` exclusive.
    pub(crate) fn bit_usage(&self, resource: &str) -> Option<String> {
        let res = self.info.cache(resource)?;
        let doms: Vec<String> = res
            .domains
            .iter()
            .map(|&d| {
                let usage: String = (0..res.cbm_len())
                    .rev()
                    .map(|b| {
                        let bit = 1u64 << b;
                        let users: Vec<&CtrlGroup> = self
                            .groups
                            .iter()
                            .filter(|g| g.schemata.get(resource, d).unwrap_or(0) & bit != 0)
                            .collect();
                        let hw = res.shareable_bits & bit != 0;
                        match (hw, users.len()) {
                            (true, 0) => 'H',
                            (true, _) => 'X',
                            (false, 0) => '0',
                            (false, 1) if users[0].mode == Mode::Exclusive => 'E',
                            _ => 'S',
                        }
                    })
                    .collect();
                format!("{d}={usage}")
            })
            .collect();
        Some(doms.join(";"))
    }
}
