//! `qos apply`: a desired state (YAML or TOML: groups with L3 as a mask, a share like "60%" or a
//! way range like "4-14", MB as a percentage, per domain or for all, mode, tasks, CPUs — close to
//! goresctrl's classes) becomes a plan of kernel operations. The whole plan is first run on a copy
//! of the kernel model, so a plan the kernel would refuse anywhere touches nothing; then it is
//! applied, read back and verified, and on any failure everything is rolled back to the state read
//! before the first write.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::backend::{Op, QosBackend};
use super::info::Info;
use super::resctrl::{GroupRef, Mode, Resctrl};
use super::schemata::Schemata;
use crate::error::{Error, Result};
use crate::linux::cpuset::CpuSet;
use crate::linux::low_bits_mask;

/// One group as the file wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredGroup {
    pub(crate) name: String,
    /// resource → domain → value (masks resolved, MB as written).
    pub schemata: BTreeMap<String, BTreeMap<u32, u64>>,
    pub(crate) mode: Option<String>,
    pub(crate) tasks: Vec<u32>,
    pub(crate) cpus: Option<CpuSet>,
}

/// What `apply` did or would do.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Report {
    /// Whether the plan was only shown, not applied.
    pub dry_run: bool,
    /// The operations, in the order they run.
    pub plan: Vec<PlannedOp>,
    /// How many of them were applied.
    pub applied: usize,
}

/// One planned operation on resctrl.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PlannedOp {
    #[serde(flatten)]
    pub(crate) op: Op,
    /// The same operation as a shell command on the mount.
    pub shell: String,
}

impl Report {
    /// The plan, one numbered step a line, and what became of it.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for (i, p) in self.plan.iter().enumerate() {
            text += &format!("{:>3}. {}\n", i + 1, p.shell);
        }
        text += &match (self.dry_run, self.plan.len()) {
            (_, 0) => "nothing to do: the machine already matches".to_string(),
            (true, n) => {
                format!("dry run: {n} steps checked against the kernel's rules, nothing changed")
            }
            (false, n) => format!("applied {n} steps and verified the read-back"),
        };
        text.push('\n');
        text
    }
}

/// `qos apply FILE`: reads the desired-state file, then [`apply`]s it.
pub fn apply_file(
    backend: &mut dyn QosBackend,
    file: &std::path::Path,
    dry_run: bool,
) -> Result<Report> {
    let text = crate::input::read_input_file(file, "desired-state file")?;
    let info = backend.read()?.info;
    let desired = parse_desired(&text, &file.display().to_string(), &info)?;
    apply(backend, &desired, dry_run)
}

/// Parse a desired-state file's text (`.toml`, else YAML) against the machine's `info`.
pub fn parse_desired(text: &str, origin: &str, info: &Info) -> Result<Vec<DesiredGroup>> {
    let root: Value = if origin.ends_with(".toml") {
        toml::from_str(text)
            .map_err(|e| Error::bad_input(format!("{origin}: {}", e.to_string().trim())))?
    } else {
        crate::input::yaml::parse(text, origin)?
    };
    let bad = |field: &str, msg: String| Error::bad_input(format!("{origin}: {field}: {msg}"));
    let groups = root
        .get("groups")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            bad(
                "groups",
                "missing: expected a table of groups (groups.NAME.l3 = ...)".into(),
            )
        })?;
    let mut out = Vec::new();
    for (name, spec) in groups {
        let spec = spec
            .as_object()
            .ok_or_else(|| bad(&format!("groups.{name}"), "expected a table".into()))?;
        let mut g = DesiredGroup {
            name: name.clone(),
            schemata: BTreeMap::new(),
            mode: None,
            tasks: Vec::new(),
            cpus: None,
        };
        for (key, value) in spec {
            let field = format!("groups.{name}.{key}");
            match key.as_str() {
                "l3" | "l3code" | "l3data" | "l2" | "mb" => {
                    let resource = key.to_uppercase();
                    let domains = info.domains_of(&resource).ok_or_else(|| {
                        bad(&field, format!("this machine has no {resource} resource (it has {})", info.resource_names().join(", ")))
                    })?;
                    let per_domain: Vec<(u32, &Value)> = match value {
                        Value::Object(map) => map
                            .iter()
                            .map(|(d, v)| {
                                d.parse::<u32>()
                                    .ok()
                                    .filter(|d| domains.contains(d))
                                    .map(|d| (d, v))
                                    .ok_or_else(|| bad(&field, format!("domain '{d}' is not one of {domains:?}")))
                            })
                            .collect::<Result<_>>()?,
                        v => domains.iter().map(|&d| (d, v)).collect(),
                    };
                    let mut values = BTreeMap::new();
                    for (d, v) in per_domain {
                        let resolved = if resource == "MB" {
                            mb_value(v)
                        } else {
                            cache_value(v, info, &resource)
                        }
                        .map_err(|m| bad(&format!("{field}.{d}"), m))?;
                        values.insert(d, resolved);
                    }
                    g.schemata.insert(resource, values);
                }
                "mode" => {
                    g.mode = Some(value.as_str().map(str::to_string).ok_or_else(|| {
                        bad(&field, "expected \"shareable\" or \"exclusive\"".into())
                    })?)
                }
                "tasks" => {
                    // The kernel's pids are C ints: 1..=i32::MAX.
                    let expected = || bad(&field, format!("expected a list of pids, each in 1..={}", i32::MAX));
                    g.tasks = value
                        .as_array()
                        .ok_or_else(expected)?
                        .iter()
                        .map(|p| {
                            p.as_u64()
                                .filter(|p| (1..=i32::MAX as u64).contains(p))
                                .map(|p| p as u32)
                                .ok_or_else(|| bad(&field, format!("pid {p} is out of range: expected 1..={}", i32::MAX)))
                        })
                        .collect::<Result<_>>()?
                }
                "cpus" => {
                    let text = match value {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        _ => String::new(),
                    };
                    g.cpus = Some(CpuSet::parse_list(&text).ok_or_else(|| {
                        bad(&field, format!("'{value}' is not a CPU list like \"0-3,8\""))
                    })?)
                }
                other => {
                    return Err(bad(
                        &field,
                        format!("unknown key '{other}' (valid: l3, l3code, l3data, l2, mb, mode, tasks, cpus)"),
                    ))
                }
            }
        }
        out.push(g);
    }
    Ok(out)
}

/// A cache value: `"0x7ff0"`/`"7ff0"` (mask), `"60%"` (that share of the ways, from way 0),
/// `"4-14"` (a way range).
fn cache_value(v: &Value, info: &Info, resource: &str) -> std::result::Result<u64, String> {
    let res = info
        .cache(resource)
        .ok_or_else(|| format!("no {resource}"))?;
    let text = v
        .as_str()
        .ok_or_else(|| format!("'{v}': write masks as strings (\"0x7ff0\", \"60%\", \"4-14\")"))?
        .trim();
    let len = res.cbm_len();
    if let Some(pct) = text.strip_suffix('%') {
        let pct: f64 = pct
            .trim()
            .parse()
            .map_err(|_| format!("'{text}' is not a percentage"))?;
        if !(0.0..=100.0).contains(&pct) {
            return Err(format!("'{text}' must be within 0%..100%"));
        }
        let least = res.min_cbm_bits.max(1);
        if least > len {
            return Err(format!(
                "{} needs at least {least} ways (min_cbm_bits) but its cbm_mask {:x} has only {len}",
                res.name, res.cbm_mask
            ));
        }
        let ways = ((pct / 100.0 * len as f64).round() as u32).clamp(least, len);
        return Ok(low_bits_mask(ways));
    }
    if let Some((a, b)) = text.split_once('-') {
        let (a, b): (u32, u32) = (
            a.trim()
                .parse()
                .map_err(|_| format!("'{text}' is not a way range"))?,
            b.trim()
                .parse()
                .map_err(|_| format!("'{text}' is not a way range"))?,
        );
        if a > b || b >= len {
            return Err(format!("way range '{text}' must lie within 0-{}", len - 1));
        }
        return Ok(low_bits_mask(b - a + 1) << a);
    }
    u64::from_str_radix(text.trim_start_matches("0x"), 16)
        .map_err(|_| format!("'{text}' is not a hex mask, a percentage or a way range"))
}

/// An MB value: `50`, `"50"` or `"50%"`.
fn mb_value(v: &Value) -> std::result::Result<u64, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .ok_or_else(|| format!("'{n}' is not a whole percentage")),
        Value::String(s) => s
            .trim()
            .trim_end_matches('%')
            .parse()
            .map_err(|_| format!("'{s}' is not a percentage like \"50%\"")),
        other => Err(format!("'{other}' is not a percentage")),
    }
}

/// The operations that take `current` to `desired`, in order: create groups, then for each
/// group its schemata (only values that differ), mode, CPUs and tasks.
pub fn plan(current: &Resctrl, desired: &[DesiredGroup]) -> Vec<Op> {
    let mut ops = Vec::new();
    for g in desired {
        let existing = current.group(&g.name);
        if existing.is_none() && !g.name.is_empty() {
            ops.push(Op::Mkdir {
                group: g.name.clone(),
            });
        }
        let base = existing
            .map(|e| e.schemata.clone())
            .unwrap_or_else(|| Schemata::defaults(&current.info));
        let mut lines = Vec::new();
        for (res, values) in &g.schemata {
            let changed: Vec<String> = values
                .iter()
                .filter(|(d, v)| {
                    existing.is_none()
                        || base.get(res, **d) != Some(read_back(&current.info, res, **v))
                })
                .map(|(d, v)| {
                    if res == "MB" {
                        format!("{d}={v}")
                    } else {
                        format!("{d}={v:x}")
                    }
                })
                .collect();
            if !changed.is_empty() {
                lines.push(format!("{res}:{}", changed.join(";")));
            }
        }
        let group = if g.name.is_empty() {
            "/".to_string()
        } else {
            g.name.clone()
        };
        if !lines.is_empty() {
            ops.push(Op::Schemata {
                group: group.clone(),
                text: format!("{}\n", lines.join("\n")),
            });
        }
        if let Some(mode) = &g.mode {
            if existing.map(|e| e.mode.name()) != Some(mode.as_str()) {
                ops.push(Op::Mode {
                    group: group.clone(),
                    mode: mode.clone(),
                });
            }
        }
        if let Some(cpus) = &g.cpus {
            if existing.map(|e| &e.cpus) != Some(cpus) {
                ops.push(Op::Cpus {
                    group: group.clone(),
                    cpus_list: cpus.to_list(),
                });
            }
        }
        let have = existing.map(|e| e.tasks.clone()).unwrap_or_default();
        let missing: Vec<String> = g
            .tasks
            .iter()
            .filter(|t| !have.contains(t))
            .map(u32::to_string)
            .collect();
        if !missing.is_empty() {
            ops.push(Op::Tasks {
                group,
                text: missing.join(","),
            });
        }
    }
    ops
}

/// What the kernel will show for a value written: MB rounds up to `bandwidth_gran`.
fn read_back(info: &Info, resource: &str, value: u64) -> u64 {
    match (&info.mb, resource) {
        (Some(mb), "MB") => {
            let gran = mb.bandwidth_gran.max(1) as u64;
            value.div_ceil(gran) * gran
        }
        _ => value,
    }
}

/// Run a plan on a copy of the kernel model: the state it would leave, or the first step that
/// would fail.
pub fn check(current: &Resctrl, ops: &[Op]) -> Result<Resctrl> {
    let (model, refused) = check_plan(current, ops);
    match refused {
        Some(e) => Err(e),
        None => Ok(model),
    }
}

/// [`check`], also returning the model as the refusal left it (its `last_cmd_status` says why,
/// as the kernel's does after a refused write).
pub(crate) fn check_plan(current: &Resctrl, ops: &[Op]) -> (Resctrl, Option<Error>) {
    let mut model = current.clone();
    for (i, op) in ops.iter().enumerate() {
        if let Err(e) = op.apply_to(&mut model) {
            let msg = format!(
                "plan step {} of {} would fail, nothing was changed: {e}",
                i + 1,
                ops.len()
            );
            let e = match e {
                Error::Runtime(_) => Error::runtime(msg),
                Error::BadInput(_) => Error::bad_input(msg),
            };
            return (model, Some(e));
        }
    }
    (model, None)
}

/// Performs one request's steps as a whole: with `precheck`, every step is first run against
/// the kernel's rules on a copy of the state, so a request that would fail part-way changes
/// nothing (the refusal is recorded where the kernel would record it, `last_cmd_status`);
/// `performed` hears of each step once it is done; the state is saved at the end.
pub fn perform_all(
    backend: &mut dyn QosBackend,
    ops: &[Op],
    precheck: bool,
    mut performed: impl FnMut(&Op),
) -> Result<()> {
    if precheck {
        if let (model, Some(refused)) = check_plan(&backend.read()?, ops) {
            backend.record_refusal(&model.last_cmd_status)?;
            return Err(refused);
        }
    }
    for op in ops {
        backend.perform(op)?;
        performed(op);
    }
    backend.save()
}

/// Put the backend back to `before`: modes, schemata, tasks and CPUs of the groups that existed,
/// then remove groups that did not. Returns an error describing what still differs.
pub(crate) fn rollback(backend: &mut dyn QosBackend, before: &Resctrl) -> Result<()> {
    let now = backend.read()?;
    let mut ops = Vec::new();
    let name_of = |n: &str| {
        if n.is_empty() {
            "/".to_string()
        } else {
            n.to_string()
        }
    };
    for g in &before.groups {
        let Some(cur) = now.group(&g.name) else {
            continue;
        };
        if cur.mode != g.mode && g.mode == Mode::Shareable {
            ops.push(Op::Mode {
                group: name_of(&g.name),
                mode: "shareable".into(),
            });
        }
        if cur.schemata != g.schemata {
            ops.push(Op::Schemata {
                group: name_of(&g.name),
                text: g.schemata.format(),
            });
        }
    }
    for g in &before.groups {
        if now.group(&g.name).is_some_and(|c| c.mode != g.mode) && g.mode == Mode::Exclusive {
            ops.push(Op::Mode {
                group: name_of(&g.name),
                mode: "exclusive".into(),
            });
        }
    }
    for g in &before.groups {
        let cur_tasks = now
            .group(&g.name)
            .map(|c| c.tasks.clone())
            .unwrap_or_default();
        let back: Vec<String> = g.tasks.difference(&cur_tasks).map(u32::to_string).collect();
        if !back.is_empty() {
            ops.push(Op::Tasks {
                group: name_of(&g.name),
                text: back.join(","),
            });
        }
        for m in &g.mon_groups {
            let gref = GroupRef {
                ctrl: g.name.clone(),
                mon: Some(m.name.clone()),
            };
            let cur = now
                .group(&g.name)
                .and_then(|c| c.mon_groups.iter().find(|x| x.name == m.name));
            let back: Vec<String> = m
                .tasks
                .iter()
                .filter(|t| cur.is_none_or(|c| !c.tasks.contains(t)))
                .map(u32::to_string)
                .collect();
            if !back.is_empty() {
                ops.push(Op::Tasks {
                    group: gref.to_string(),
                    text: back.join(","),
                });
            }
        }
        if !g.name.is_empty() && now.group(&g.name).is_some_and(|c| c.cpus != g.cpus) {
            ops.push(Op::Cpus {
                group: g.name.clone(),
                cpus_list: g.cpus.to_list(),
            });
        }
    }
    for g in &now.groups {
        if before.group(&g.name).is_none() {
            ops.push(Op::Rmdir {
                group: g.name.clone(),
            });
        }
    }
    let mut failures = Vec::new();
    for op in &ops {
        if let Err(e) = backend.perform(op) {
            failures.push(e.to_string());
        }
    }
    let after = backend.read()?;
    if after.without_status() != before.without_status() || !failures.is_empty() {
        return Err(Error::runtime(format!(
            "rollback incomplete: the machine differs from before the apply ({})",
            if failures.is_empty() {
                "state differs".to_string()
            } else {
                failures.join("; ")
            }
        )));
    }
    Ok(())
}

/// Plan, check, apply, verify; roll back on any failure.
pub(crate) fn apply(
    backend: &mut dyn QosBackend,
    desired: &[DesiredGroup],
    dry_run: bool,
) -> Result<Report> {
    let before = backend.read()?;
    let ops = plan(&before, desired);
    let expected = check(&before, &ops)?;
    let planned = ops
        .iter()
        .map(|op| PlannedOp {
            op: op.clone(),
            shell: op.describe(),
        })
        .collect();
    if dry_run {
        return Ok(Report {
            dry_run,
            plan: planned,
            applied: 0,
        });
    }
    let mut applied = 0;
    let failure = ops.iter().find_map(|op| match backend.perform(op) {
        Ok(()) => {
            applied += 1;
            None
        }
        Err(e) => Some(e),
    });
    let failure = failure.or_else(|| verify(backend, &expected, desired).err());
    if let Some(err) = failure {
        let undo = match rollback(backend, &before) {
            Ok(()) => "rolled back: the machine is as it was before".to_string(),
            Err(e) => e.to_string(),
        };
        let msg = format!(
            "apply failed after {applied} of {} steps: {err}; {undo}",
            ops.len()
        );
        return Err(match err {
            Error::BadInput(_) => Error::bad_input(msg),
            Error::Runtime(_) => Error::runtime(msg),
        });
    }
    backend.save()?;
    Ok(Report {
        dry_run,
        plan: planned,
        applied,
    })
}

/// Read back and compare every group the file names with what the model predicted.
fn verify(
    backend: &mut dyn QosBackend,
    expected: &Resctrl,
    desired: &[DesiredGroup],
) -> Result<()> {
    let actual = backend.read()?;
    for g in desired {
        let (want, got) = (expected.group(&g.name), actual.group(&g.name));
        let same = match (want, got) {
            (Some(w), Some(a)) => {
                w.schemata == a.schemata
                    && w.mode == a.mode
                    && w.cpus == a.cpus
                    && w.tasks.is_subset(&a.all_tasks())
            }
            _ => false,
        };
        if !same {
            return Err(Error::runtime(format!(
                "read-back of group '{}' differs from what was written",
                g.name
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-way cache: percentages and way ranges reach bit 63 without a shifted-out mask, and
    /// a new group's default mask (every unused way, from the kernel's model) is all 64 bits.
    #[test]
    fn a_64_way_cache_mask_keeps_its_top_bits() {
        let mut info = crate::qos::presets::MPAM_SEED.info(false);
        info.caches[0].cbm_mask = u64::MAX;
        info.caches[0].shareable_bits = 0;
        let cache = info.caches[0].name.clone();
        let domain = info.caches[0].domains[0];
        let mut current = Resctrl::mount(info.clone(), CpuSet::range(0, 3), [1].into());
        current
            .write_schemata(
                &GroupRef::ctrl(""),
                &format!("{cache}:{domain}=ffffffffffffffff\n"),
            )
            .unwrap();
        let key = cache.to_lowercase();
        for (value, mask) in [
            ("100%", u64::MAX),
            ("0-63", u64::MAX),
            ("32-63", 0xffff_ffff_0000_0000),
            ("63-63", 1 << 63),
        ] {
            let text = format!("groups:\n  g:\n    {key}: \"{value}\"\n");
            let desired = parse_desired(&text, "plan.yaml", &info).unwrap();
            let after = check(&current, &plan(&current, &desired)).unwrap();
            let g = after.group("g").unwrap();
            assert_eq!(g.schemata.get(&cache, domain), Some(mask), "{value}");
        }
    }

    #[test]
    fn a_request_that_fails_part_way_changes_nothing_and_says_where() {
        let mut sim =
            crate::qos::sim::SimulatedResctrl::open(&crate::qos::presets::MPAM_SEED, None, false)
                .unwrap();
        let before = sim.read().unwrap();
        // The second step writes a mask that is not hex, which the kernel refuses.
        let ops = [
            Op::Mkdir {
                group: "batch".into(),
            },
            Op::Schemata {
                group: "batch".into(),
                text: "L3:1=xyz\n".into(),
            },
        ];
        let mut done = Vec::new();
        let err = perform_all(&mut sim, &ops, true, |op| done.push(op.describe())).unwrap_err();
        assert!(
            err.message()
                .contains("plan step 2 of 2 would fail, nothing was changed"),
            "{err}"
        );
        assert!(done.is_empty());
        let after = sim.read().unwrap();
        assert_eq!(after.groups, before.groups);
        assert!(
            after
                .last_cmd_status
                .contains("Non-hex character in the mask xyz"),
            "{}",
            after.last_cmd_status
        );
        // The same request without the bad mask is performed step by step.
        perform_all(&mut sim, &ops[..1], true, |op| done.push(op.describe())).unwrap();
        assert_eq!(done, ["mkdir batch"]);
        assert!(sim.read().unwrap().group("batch").is_some());
    }
}
