//! perf's event-string grammar on a live host and its encoding into `perf_event_attr`: comma
//! lists and `{a,b}` groups; `PMU/term,term=value/` where a term is an `events/` alias (with its
//! `?` parameters given by the user, like `lane=3`), a `format/` field, or `config`/`config1`/
//! `config2`/`config3`; perf's symbolic software and hardware events (`cpu-clock`,
//! `context-switches`, `cycles`, …); tracepoints `subsys:name`; raw `rNNNN`. Encoding follows
//! perf: alias terms first, the user's terms after them, each value packed into its format
//! field's bits (a value wider than its field is an error).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::pmu::catalog::{nearest, Family, Group};
use crate::pmu::sysfs::{parse_number, tracepoint_id, PcieDriver, SysfsPmu};

/// `perf_event_attr.type` of perf's fixed PMUs.
pub(crate) const PERF_TYPE_HARDWARE: u32 = 0;
pub(crate) const PERF_TYPE_SOFTWARE: u32 = 1;
pub(crate) const PERF_TYPE_TRACEPOINT: u32 = 2;
pub(crate) const PERF_TYPE_RAW: u32 = 4;

/// perf's symbolic events: name (and aliases), type, config, and the unit/scale perf prints
/// them with (the clocks count nanoseconds and are shown in msec).
const SYMBOLS: &[(&[&str], u32, u64)] = &[
    (&["cycles", "cpu-cycles"], PERF_TYPE_HARDWARE, 0),
    (&["instructions"], PERF_TYPE_HARDWARE, 1),
    (&["cache-references"], PERF_TYPE_HARDWARE, 2),
    (&["cache-misses"], PERF_TYPE_HARDWARE, 3),
    (&["branches", "branch-instructions"], PERF_TYPE_HARDWARE, 4),
    (&["branch-misses"], PERF_TYPE_HARDWARE, 5),
    (&["bus-cycles"], PERF_TYPE_HARDWARE, 6),
    (
        &["stalled-cycles-frontend", "idle-cycles-frontend"],
        PERF_TYPE_HARDWARE,
        7,
    ),
    (
        &["stalled-cycles-backend", "idle-cycles-backend"],
        PERF_TYPE_HARDWARE,
        8,
    ),
    (&["ref-cycles"], PERF_TYPE_HARDWARE, 9),
    (&["cpu-clock"], PERF_TYPE_SOFTWARE, 0),
    (&["task-clock"], PERF_TYPE_SOFTWARE, 1),
    (&["page-faults", "faults"], PERF_TYPE_SOFTWARE, 2),
    (&["context-switches", "cs"], PERF_TYPE_SOFTWARE, 3),
    (&["cpu-migrations", "migrations"], PERF_TYPE_SOFTWARE, 4),
    (&["minor-faults"], PERF_TYPE_SOFTWARE, 5),
    (&["major-faults"], PERF_TYPE_SOFTWARE, 6),
    (&["alignment-faults"], PERF_TYPE_SOFTWARE, 7),
    (&["emulation-faults"], PERF_TYPE_SOFTWARE, 8),
    (&["dummy"], PERF_TYPE_SOFTWARE, 9),
    (&["bpf-output"], PERF_TYPE_SOFTWARE, 10),
    (&["cgroup-switches"], PERF_TYPE_SOFTWARE, 11),
];

/// The longest `-e` argument accepted. Real event lists are a few hundred bytes; the bound keeps
/// the work after splitting (nearest-name suggestions compare the text with every known name,
/// error messages quote it) small whatever a script passes.
pub(crate) const MAX_EVENT_LIST_BYTES: usize = 64 * 1024;

/// Splits an `-e` argument as perf does: commas separate events except inside `PMU/…/`; `{…}`
/// makes a group. Returns the groups' item texts (a lone event is a group of one). One pass over
/// the text: work grows linearly with its length.
pub(crate) fn split_event_list(text: &str) -> Result<Vec<Vec<String>>> {
    if text.len() > MAX_EVENT_LIST_BYTES {
        return Err(Error::bad_input(format!(
            "event list of {} bytes (starting '{}…') is longer than the {MAX_EVENT_LIST_BYTES} \
             bytes accepted: give fewer or shorter events per -e",
            text.len(),
            text.chars().take(40).collect::<String>()
        )));
    }
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut group: Option<Vec<String>> = None;
    let mut current = String::new();
    // Toggled by each slash of the current item: inside `PMU/…/` after an odd number of them.
    let mut in_terms = false;
    let finish =
        |item: &mut String, group: &mut Option<Vec<String>>, groups: &mut Vec<Vec<String>>| {
            let item = std::mem::take(item);
            if item.is_empty() {
                return;
            }
            match group {
                Some(g) => g.push(item),
                None => groups.push(vec![item]),
            }
        };
    for c in text.chars() {
        match c {
            '/' => {
                current.push(c);
                in_terms = !in_terms;
            }
            ',' if !in_terms => finish(&mut current, &mut group, &mut groups),
            '{' if !in_terms && current.is_empty() && group.is_none() => group = Some(Vec::new()),
            '}' if !in_terms && group.is_some() => {
                finish(&mut current, &mut group, &mut groups);
                let g = group.take().unwrap_or_default();
                if g.is_empty() {
                    return Err(Error::bad_input(format!(
                        "malformed event list '{text}': empty group {{}}"
                    )));
                }
                groups.push(g);
            }
            '{' | '}' => {
                return Err(Error::bad_input(format!(
                    "malformed event list '{text}': unexpected '{c}' (groups are {{a,b}} and \
                     do not nest)"
                )))
            }
            _ => current.push(c),
        }
    }
    if group.is_some() {
        return Err(Error::bad_input(format!(
            "malformed event list '{text}': '{{' without a matching '}}'"
        )));
    }
    finish(&mut current, &mut group, &mut groups);
    if groups.is_empty() {
        return Err(Error::bad_input(
            "empty event list: give -e EVENT (e.g. -e msr/tsc/ or -e cpu-clock)",
        ));
    }
    Ok(groups)
}

/// One event encoded for `perf_event_open`.
#[derive(Debug, Clone, PartialEq)]
pub struct EventAttr {
    /// The event as the user wrote it (perf prints this).
    pub(crate) text: String,
    /// The PMU it is opened on (`software`, `tracepoint`, `msr`, `dwc_rootport_10`, …).
    pub(crate) pmu: String,
    /// `type`, then `config`, `config1`, `config2`, `config3`.
    pub(crate) type_id: u32,
    pub(crate) config: [u64; 4],
    /// The alias's `.scale` (perf multiplies counts by it) and `.unit`.
    pub(crate) scale: f64,
    pub(crate) unit: String,
    /// CPUs to open on; empty: every online CPU (perf sums them).
    pub(crate) cpus: Vec<u32>,
    /// The PMU's sysfs directory (to tell a vanished PMU from a refused event).
    pub(crate) pmu_dir: Option<PathBuf>,
    /// Bytes per raw count for PCIe data-payload events (16 on the seed's `pcie_bdf_*`).
    pub(crate) payload_bytes: Option<u32>,
    /// Hardware counter width when the driver does not extend it (DWC lane events: 32).
    pub(crate) counter_bits: Option<u32>,
    /// On a DesignWare PMU: the catalog group whose counter the event needs (the port's one
    /// time-based counter, or an event-counter group).
    pub(crate) dwc_group: Option<Group>,
}

/// Where event strings are resolved: the PMUs discovered and the root for tracefs.
pub struct EventContext<'a> {
    /// The PMU devices the events may name.
    pub pmus: &'a [SysfsPmu],
    /// The filesystem root the PMUs were read under (`/` on a live system).
    pub root: &'a Path,
}

impl EventContext<'_> {
    fn pmu(&self, name: &str) -> Option<(usize, &SysfsPmu)> {
        self.pmus.iter().enumerate().find(|(_, p)| p.name == name)
    }

    /// Encodes every group of `text` (one `-e` argument).
    pub fn encode_list(&self, text: &str) -> Result<Vec<Vec<EventAttr>>> {
        let groups = split_event_list(text)?;
        let mut out = Vec::new();
        for group in groups {
            let attrs: Vec<EventAttr> = group
                .iter()
                .map(|item| self.encode(item))
                .collect::<Result<_>>()?;
            if let Some(other) = attrs.iter().find(|a| !same_context(&attrs[0], a)) {
                return Err(Error::bad_input(format!(
                    "events of one group must be on one PMU: '{}' ({}) and '{}' ({}) are not; \
                     write them as separate -e events",
                    attrs[0].text, attrs[0].pmu, other.text, other.pmu
                )));
            }
            out.push(attrs);
        }
        Ok(out)
    }

    /// Encodes one event.
    pub(crate) fn encode(&self, text: &str) -> Result<EventAttr> {
        if let Some((pmu, inner)) = text.strip_suffix('/').and_then(|b| b.split_once('/')) {
            return self.encode_pmu_event(text, pmu, inner);
        }
        if text.contains('/') {
            return Err(Error::bad_input(format!(
                "malformed event '{text}': expected PMU/TERMS/ with a closing '/' and no \
                 modifiers (e.g. msr/tsc/ or dwc_rootport_10/rx_pcie_tlp_data_payload/)"
            )));
        }
        if let Some((subsys, name)) = text.split_once(':') {
            if subsys.is_empty() || name.is_empty() || name.contains(':') {
                return Err(Error::bad_input(format!(
                    "malformed tracepoint '{text}': expected SUBSYSTEM:NAME (e.g. \
                     syscalls:sys_enter_getpid); event modifiers like :u are not supported"
                )));
            }
            let id = tracepoint_id(self.root, subsys, name)?;
            return Ok(self.fixed(text, "tracepoint", PERF_TYPE_TRACEPOINT, id));
        }
        if let Some((_, type_id, config)) = SYMBOLS.iter().find(|(n, _, _)| n.contains(&text)) {
            let pmu = if *type_id == PERF_TYPE_SOFTWARE {
                "software"
            } else {
                "cpu"
            };
            let mut attr = self.fixed(text, pmu, *type_id, *config);
            if *type_id == PERF_TYPE_SOFTWARE && *config <= 1 {
                attr.scale = 1e-6;
                attr.unit = "msec".into();
            }
            return Ok(attr);
        }
        if let Some(raw) = text
            .strip_prefix('r')
            .filter(|h| !h.is_empty())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
        {
            return Ok(self.fixed(text, "cpu", PERF_TYPE_RAW, raw));
        }
        // A bare alias name counts on the PMU that has it, as perf finds `tsc` on msr.
        let owners: Vec<&SysfsPmu> = self
            .pmus
            .iter()
            .filter(|p| p.event(text).is_some())
            .collect();
        match owners.as_slice() {
            [pmu] => {
                let mut attr = self.encode_pmu_event(text, &pmu.name, text)?;
                attr.text = text.to_string();
                return Ok(attr);
            }
            [_, _, ..] => {
                let names: Vec<&str> = owners.iter().map(|p| p.name.as_str()).collect();
                return Err(Error::bad_input(format!(
                    "event '{text}' is on several PMUs ({}): write PMU/{text}/ for the one to count",
                    names.join(", ")
                )));
            }
            [] => {}
        }
        let known = SYMBOLS.iter().flat_map(|(n, _, _)| n.iter().copied());
        let workload_hint = if crate::linux::find_program(text).is_some() {
            format!(
                ". '{text}' is a program: if it is the workload, write it after `--` \
                 (pcielab stat -a -e EVENT -- {text} ...)"
            )
        } else {
            String::new()
        };
        Err(Error::bad_input(format!(
            "unknown event '{text}': expected PMU/EVENT/ (see `pcielab pmu list --machine \
             host`), SUBSYSTEM:TRACEPOINT or a perf symbolic event; nearest: {}{workload_hint}",
            nearest(text, known).join(", ")
        )))
    }

    fn fixed(&self, text: &str, pmu: &str, type_id: u32, config: u64) -> EventAttr {
        let dir = self.pmu(pmu).map(|(_, p)| p.dir.clone());
        EventAttr {
            text: text.to_string(),
            pmu: pmu.to_string(),
            type_id,
            config: [config, 0, 0, 0],
            scale: 1.0,
            unit: String::new(),
            cpus: Vec::new(),
            pmu_dir: dir,
            payload_bytes: None,
            counter_bits: None,
            dwc_group: None,
        }
    }

    fn encode_pmu_event(&self, text: &str, pmu_name: &str, inner: &str) -> Result<EventAttr> {
        let Some((_, pmu)) = self.pmu(pmu_name) else {
            let near = nearest(pmu_name, self.pmus.iter().map(|p| p.name.as_str()));
            return Err(Error::bad_input(format!(
                "unknown PMU '{pmu_name}' in '{text}': no {pmu_name} under \
                 /sys/bus/event_source/devices; the nearest names here: {}. Use one of them, or \
                 run `pcielab pmu list` for every PMU of this machine with its events and, when \
                 none counts PCIe, which driver and kernel would provide one",
                near.join(", ")
            )));
        };
        let mut user_terms: Vec<(&str, Option<&str>)> = Vec::new();
        for part in inner.split(',') {
            if part.is_empty() {
                return Err(Error::bad_input(format!(
                    "malformed event '{text}': an empty term between commas"
                )));
            }
            match part.split_once('=') {
                Some((k, v)) if !k.is_empty() && !v.is_empty() => user_terms.push((k, Some(v))),
                Some(_) => {
                    return Err(Error::bad_input(format!(
                        "malformed event '{text}': term '{part}' needs NAME=VALUE"
                    )))
                }
                None => user_terms.push((part, None)),
            }
        }
        let mut words = [0u64; 4];
        let mut alias = None;
        // A bare term naming an alias expands to the alias's terms, in place; its `?`
        // parameters must come from the user's NAME=VALUE terms.
        let mut assignments: Vec<(String, u64)> = Vec::new();
        let mut perf_name = None;
        for (key, value) in &user_terms {
            // perf's own terms name the event, set its sampling period (counting ignores it)
            // or aggregate and label it in perf's reports: none sets a config bit.
            match (*key, value) {
                ("name", Some(name)) => {
                    perf_name = Some(name.to_string());
                    continue;
                }
                ("period" | "metric-id", Some(_)) | ("percore", None) => continue,
                _ => {}
            }
            match value {
                None if pmu.format(key).is_none() && !is_config_word(key) => {
                    let Some(event) = pmu.event(key) else {
                        let near = nearest(key, pmu.events.iter().map(|e| e.name.as_str()));
                        return Err(Error::bad_input(format!(
                            "unknown event '{key}' on {pmu_name} in '{text}'{}",
                            if near.is_empty() {
                                format!("; {pmu_name} has no events/ aliases")
                            } else {
                                format!("; nearest: {}", near.join(", "))
                            }
                        )));
                    };
                    if alias.replace(event).is_some() {
                        return Err(Error::bad_input(format!(
                            "malformed event '{text}': two event names in one event"
                        )));
                    }
                    for term in &event.terms {
                        let value = match term.value {
                            Some(v) => v,
                            None => {
                                let given = user_terms.iter().find(|(k, _)| *k == term.name);
                                let Some((_, Some(v))) = given else {
                                    return Err(Error::bad_input(format!(
                                        "event '{}' on {pmu_name} needs {}=N: write \
                                         {pmu_name}/{},{}=N/ (in '{text}')",
                                        event.name, term.name, event.name, term.name
                                    )));
                                };
                                number(text, key, v)?
                            }
                        };
                        assignments.push((term.name.clone(), value));
                    }
                }
                None => assignments.push((key.to_string(), 1)),
                Some(v) => assignments.push((key.to_string(), number(text, key, v)?)),
            }
        }
        for (key, value) in &assignments {
            if let Some(word) = config_word_index(key) {
                words[word] = *value;
                continue;
            }
            let Some(field) = pmu.format(key) else {
                let valid: Vec<&str> = pmu
                    .formats
                    .iter()
                    .map(|f| f.name.as_str())
                    .chain(["config", "config1", "config2"])
                    .collect();
                return Err(Error::bad_input(format!(
                    "unknown term '{key}' in '{text}': {pmu_name} takes {}",
                    valid.join(", ")
                )));
            };
            if field.pack(*value, &mut words).is_none() {
                return Err(Error::bad_input(format!(
                    "value {value:#x} of '{key}' in '{text}' is too big for its format field \
                     {}: the maximum is {} ({:#x})",
                    field.layout(),
                    field.max_value(),
                    field.max_value()
                )));
            }
        }
        let dwc_group = dwc_group(pmu, &words);
        let event_name = alias.map(|a| a.name.as_str());
        let payload_bytes = pmu
            .driver
            .zip(event_name)
            .and_then(|(d, e)| d.payload_unit_bytes(e));
        Ok(EventAttr {
            text: perf_name.unwrap_or_else(|| text.to_string()),
            pmu: pmu_name.to_string(),
            type_id: pmu.type_id,
            config: words,
            scale: alias.and_then(|a| a.scale).unwrap_or(1.0),
            unit: alias.and_then(|a| a.unit.clone()).unwrap_or_default(),
            cpus: pmu.cpus.clone(),
            pmu_dir: Some(pmu.dir.clone()),
            payload_bytes,
            counter_bits: dwc_group
                .filter(|g| matches!(g, Group::Lane(_)))
                .map(|g| g.counter_bits(Family::DwcRootPort)),
            dwc_group,
        })
    }
}

/// The DWC counter group an event's `type` and `eventid` fields select: the port's time-based
/// counter or an event counter of group `eventid >> 8`, by the `type` values the PMU's own
/// event files give time-based and lane events (upstream writes 0 and 1; a vendor driver may
/// number them otherwise).
fn dwc_group(pmu: &SysfsPmu, words: &[u64; 4]) -> Option<Group> {
    if !matches!(
        pmu.driver,
        Some(PcieDriver::DwcUpstream | PcieDriver::DwcSeed)
    ) {
        return None;
    }
    let kind = pmu.format("type")?.unpack(words);
    let eventid = pmu.format("eventid")?.unpack(words);
    let (time_based, lane) = dwc_type_values(pmu);
    if kind == time_based {
        Some(Group::TimeBased(u8::from(eventid >= 0x20)))
    } else if kind == lane {
        Some(Group::Lane((eventid >> 8) as u8))
    } else {
        None
    }
}

/// The `type` values a DWC PMU's event files write for its time-based and its lane events,
/// told apart by the catalog's names; 0 and 1 where it has none of either.
fn dwc_type_values(pmu: &SysfsPmu) -> (u64, u64) {
    let type_of = |time_based: bool| {
        pmu.events.iter().find_map(|event| {
            let def = Family::DwcRootPort.find(&event.name)?;
            if matches!(def.group, Group::TimeBased(_)) != time_based {
                return None;
            }
            event.terms.iter().find(|t| t.name == "type")?.value
        })
    };
    (type_of(true).unwrap_or(0), type_of(false).unwrap_or(1))
}

fn same_context(a: &EventAttr, b: &EventAttr) -> bool {
    a.pmu == b.pmu || (a.type_id == PERF_TYPE_SOFTWARE || b.type_id == PERF_TYPE_SOFTWARE)
}

fn is_config_word(key: &str) -> bool {
    config_word_index(key).is_some()
}

fn config_word_index(key: &str) -> Option<usize> {
    ["config", "config1", "config2", "config3"]
        .iter()
        .position(|w| *w == key)
}

fn number(text: &str, key: &str, value: &str) -> Result<u64> {
    parse_number(value).ok_or_else(|| {
        Error::bad_input(format!(
            "malformed event '{text}': {key}={value} is not a number (decimal or 0x-hex)"
        ))
    })
}

/// The perf-style `--dry-run` line of one event: each attr field perf would pass.
pub(crate) fn dry_run_line(attr: &EventAttr) -> String {
    let cpus = if attr.cpus.is_empty() {
        "all online".to_string()
    } else {
        attr.cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{}: type={} config={:#x} config1={:#x} config2={:#x} config3={:#x} pmu={} cpus={cpus} \
         scale={} unit={}",
        attr.text,
        attr.type_id,
        attr.config[0],
        attr.config[1],
        attr.config[2],
        attr.config[3],
        attr.pmu,
        attr.scale,
        if attr.unit.is_empty() {
            "-"
        } else {
            &attr.unit
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::sysfs::{discover, EVENT_SOURCE_DIR};
    use std::fs;

    /// A DWC PMU directory `name` under `root` with the driver's three format fields.
    fn dwc_dir(root: &Path, name: &str, type_id: u32) -> PathBuf {
        let dir = root.join(EVENT_SOURCE_DIR).join(name);
        fs::create_dir_all(dir.join("format")).unwrap();
        fs::create_dir_all(dir.join("events")).unwrap();
        fs::write(dir.join("type"), format!("{type_id}\n")).unwrap();
        fs::write(dir.join("format/eventid"), "config:0-15\n").unwrap();
        fs::write(dir.join("format/type"), "config:16-19\n").unwrap();
        fs::write(dir.join("format/lane"), "config:20-27\n").unwrap();
        dir
    }

    fn fixture() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dir = dwc_dir(root.path(), "dwc_rootport_10", 11);
        fs::write(dir.join("cpumask"), "3\n").unwrap();
        fs::write(
            dir.join("events/rx_pcie_tlp_data_payload"),
            "eventid=0x21,type=0x0\n",
        )
        .unwrap();
        fs::write(
            dir.join("events/tx_ack_dllp"),
            "eventid=0x600,type=0x1,lane=?\n",
        )
        .unwrap();
        let tp = root
            .path()
            .join("sys/kernel/tracing/events/syscalls/sys_enter_getpid");
        fs::create_dir_all(&tp).unwrap();
        fs::write(tp.join("id"), "309\n").unwrap();
        root
    }

    fn encode(root: &Path, text: &str) -> Result<EventAttr> {
        let pmus = discover(root).unwrap();
        EventContext { pmus: &pmus, root }.encode(text)
    }

    #[test]
    fn aliases_params_and_raw_terms_encode_like_perf() {
        let root = fixture();
        let rx = encode(root.path(), "dwc_rootport_10/rx_pcie_tlp_data_payload/").unwrap();
        assert_eq!(
            (rx.type_id, rx.config[0], rx.cpus.clone()),
            (11, 0x21, vec![3])
        );
        assert_eq!(rx.payload_bytes, Some(1));
        let seed_case = encode(root.path(), "dwc_rootport_10/Rx_PCIe_TLP_Data_Payload/").unwrap();
        assert_eq!(seed_case.config, rx.config);
        let ack = encode(root.path(), "dwc_rootport_10/tx_ack_dllp,lane=3/").unwrap();
        assert_eq!(ack.config[0], 0x600 | (1 << 16) | (3 << 20));
        assert_eq!(ack.counter_bits, Some(32));
        assert_eq!(ack.dwc_group, Some(Group::Lane(6)));
        assert_eq!(rx.dwc_group, Some(Group::TimeBased(1)));
        assert_eq!(rx.counter_bits, None);
        let raw = encode(root.path(), "dwc_rootport_10/eventid=0x21,type=0x0/").unwrap();
        assert_eq!(raw.config, rx.config);
        let words = encode(root.path(), "dwc_rootport_10/config=0x5,config1=0x7/").unwrap();
        assert_eq!(words.config, [5, 7, 0, 0]);
        let tp = encode(root.path(), "syscalls:sys_enter_getpid").unwrap();
        assert_eq!((tp.type_id, tp.config[0]), (2, 309));
        let cs = encode(root.path(), "cs").unwrap();
        assert_eq!((cs.type_id, cs.config[0]), (1, 3));
        assert_eq!(encode(root.path(), "cpu-clock").unwrap().unit, "msec");
        assert_eq!(encode(root.path(), "r1a8").unwrap().config[0], 0x1a8);
        let bare = encode(root.path(), "rx_pcie_tlp_data_payload").unwrap();
        assert_eq!(
            (bare.pmu.as_str(), bare.config),
            ("dwc_rootport_10", rx.config)
        );
        assert_eq!(bare.text, "rx_pcie_tlp_data_payload");
        // perf's own terms set no config bit; name= is what the report calls the event.
        let named = encode(
            root.path(),
            "dwc_rootport_10/rx_pcie_tlp_data_payload,name=rx,period=3,percore,metric-id=m/",
        )
        .unwrap();
        assert_eq!((named.text.as_str(), named.config), ("rx", rx.config));
    }

    #[test]
    fn a_vendor_drivers_own_type_values_select_the_counter() {
        let root = tempfile::tempdir().unwrap();
        let dir = dwc_dir(root.path(), "pcie_bdf_200", 12);
        fs::write(dir.join("events/One_Cycle"), "eventid=0x0,type=0x2\n").unwrap();
        fs::write(
            dir.join("events/Tx_Ack_DLLP"),
            "eventid=0x600,type=0x3,lane=?\n",
        )
        .unwrap();
        let lane = encode(root.path(), "pcie_bdf_200/Tx_Ack_DLLP,lane=1/").unwrap();
        assert_eq!(lane.dwc_group, Some(Group::Lane(6)));
        assert_eq!(lane.counter_bits, Some(32));
        let cycles = encode(root.path(), "pcie_bdf_200/One_Cycle/").unwrap();
        assert_eq!(cycles.dwc_group, Some(Group::TimeBased(0)));
        // Upstream's numbering means nothing to this driver.
        let other = encode(root.path(), "pcie_bdf_200/eventid=0x600,type=1/").unwrap();
        assert_eq!(other.dwc_group, None);
    }

    #[test]
    fn bad_events_name_what_is_wrong() {
        let root = fixture();
        let cases = [
            (
                "dwc_rootport_11/rx_pcie_tlp_data_payload/",
                "dwc_rootport_10",
            ),
            (
                "dwc_rootport_10/rx_pcie_payload/",
                "rx_pcie_tlp_data_payload",
            ),
            ("dwc_rootport_10/tx_ack_dllp/", "lane=N"),
            ("dwc_rootport_10/tx_ack_dllp,lane=300/", "maximum is 255"),
            (
                "dwc_rootport_10/rx_pcie_tlp_data_payload,color=1/",
                "eventid, lane, type",
            ),
            ("dwc_rootport_10/eventid=zz/", "not a number"),
            ("syscalls:sys_enter_nothing", "unknown tracepoint"),
            ("cpu-clok", "cpu-clock"),
            ("sleep", "after `--`"),
            ("msr/tsc/u", "closing '/'"),
        ];
        for (text, needle) in cases {
            let e = encode(root.path(), text).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{text}: {e}");
            assert!(e.message().contains(needle), "{text}: {e}");
        }
        let pmus = discover(root.path()).unwrap();
        let ctx = EventContext {
            pmus: &pmus,
            root: root.path(),
        };
        let e = ctx
            .encode_list("{dwc_rootport_10/rx_pcie_tlp_data_payload/,syscalls:sys_enter_getpid}")
            .unwrap_err();
        assert!(e.message().contains("one PMU"), "{e}");
        let ok = ctx.encode_list("cs,{dwc_rootport_10/rx_pcie_tlp_data_payload/,cpu-clock}");
        assert_eq!(
            ok.unwrap().iter().map(Vec::len).collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn lists_split_into_groups() {
        let g = split_event_list("a/x,y=1/,{b/z/,c},d:e").unwrap();
        assert_eq!(g, vec![vec!["a/x,y=1/"], vec!["b/z/", "c"], vec!["d:e"]]);
        for bad in ["", "{a", "{}", "{a,{b}}"] {
            assert_eq!(split_event_list(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn long_lists_of_every_separator_split_in_one_pass_or_are_refused_by_length() {
        let root = fixture();
        let pmus = discover(root.path()).unwrap();
        let context = EventContext {
            pmus: &pmus,
            root: root.path(),
        };
        for separator in ['/', ',', '{', '}', ':', '='] {
            // 1 MB: refused up front, naming the limit.
            let huge = format!("a{}", separator.to_string().repeat(1 << 20));
            let e = split_event_list(&huge).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{separator}");
            assert!(e.message().contains("65536 bytes accepted"), "{e}");
            assert_eq!(context.encode_list(&huge).unwrap_err().exit_code(), 2);
            // Just under the limit: split and encoded (or refused as malformed) in one pass; the
            // earlier count of slashes per slash took minutes here.
            let long = format!(
                "a{}",
                separator.to_string().repeat(MAX_EVENT_LIST_BYTES - 1)
            );
            match context.encode_list(&long) {
                Ok(groups) => assert!(!groups.is_empty()),
                Err(e) => assert_eq!(e.exit_code(), 2, "{separator}: {e}"),
            }
        }
        // An even number of slashes closes the PMU's terms: the comma after them separates.
        let g = split_event_list(&format!("a{},b", "/".repeat(10_000))).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[1], vec!["b"]);
    }
}
