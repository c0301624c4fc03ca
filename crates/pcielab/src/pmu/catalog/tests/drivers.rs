//! pcielab's PMU catalogs against the kernel's own drivers: the event tables, the `events/`
//! and `format/` file syntax, the attribute files, counter widths and counting rules of
//! dwc_pcie_pmu.c, hisilicon/hisi_pcie_pmu.c, arm_cspmu/nvidia_cspmu.c and the IIO free-running
//! tables of x86 uncore_snbep.c, read from Debian's installed `linux-source-6.12` tarball (the
//! package `.ci/run` installs). The catalog's view of 6.12 (`Family::driver_files`) must be
//! exactly what those sources write; a copy of a source with one line edited must not pass.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::input::target_tmp;
use crate::pmu::kernel::{dwc_lane_counter_per_event, dwc_vendors};
use crate::pmu::KernelVersion;
use crate::pmu::{Family, Group};

const TARBALL: &str = "/usr/src/linux-source-6.12.tar.xz";
const TOP: &str = "linux-source-6.12";
const FILES: &[&str] = &[
    "drivers/perf/dwc_pcie_pmu.c",
    "drivers/perf/hisilicon/hisi_pcie_pmu.c",
    "drivers/perf/arm_cspmu/nvidia_cspmu.c",
    "drivers/perf/arm_cspmu/arm_cspmu.c",
    "drivers/perf/arm_cspmu/arm_cspmu.h",
    "arch/x86/events/intel/uncore_snbep.c",
    "include/linux/pci_ids.h",
];

/// The driver sources, extracted once into target/tmp (xz-decoding the tarball takes ~40 s).
fn sources() -> BTreeMap<&'static str, String> {
    // The tests of this file run in parallel: one extracts while the others wait, or two tars
    // writing the same files race and one fails (as it did on a fresh clone).
    static EXTRACTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = EXTRACTING.lock().unwrap_or_else(|e| e.into_inner());
    let cache = target_tmp().join("kernel-source-6.12");
    let path = |f: &str| cache.join(TOP).join(f);
    if !FILES.iter().all(|f| path(f).is_file()) {
        assert!(
            Path::new(TARBALL).is_file(),
            "{TARBALL} is missing: install Debian's linux-source-6.12 package (apt-get install \
             linux-source-6.12; .ci/run does) — the PMU catalog is checked against its drivers"
        );
        std::fs::create_dir_all(&cache).unwrap();
        let members: Vec<String> = FILES.iter().map(|f| format!("{TOP}/{f}")).collect();
        let status = Command::new("tar")
            .arg("-xJf")
            .arg(TARBALL)
            .arg("-C")
            .arg(&cache)
            .args(&members)
            .status()
            .expect("tar must be installed");
        assert!(
            status.success(),
            "tar could not extract {members:?} from {TARBALL}"
        );
    }
    FILES
        .iter()
        .map(|f| (*f, std::fs::read_to_string(path(f)).unwrap()))
        .collect()
}

/// The text from `start` to the end of its C initializer (`};`).
fn section<'a>(src: &'a str, start: &str) -> &'a str {
    let at = src
        .find(start)
        .unwrap_or_else(|| panic!("no '{start}' in the driver source"));
    let rest = &src[at..];
    &rest[..rest.find("};").unwrap_or(rest.len())]
}

/// The arguments of every use of `name(...)` in `text` (not its `#define`), split at
/// top-level commas and trimmed.
fn calls(text: &str, name: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let needle = format!("{name}(");
    let mut from = 0;
    while let Some(found) = text[from..].find(&needle) {
        let start = from + found;
        from = start + needle.len();
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let (mut depth, mut args, mut arg) = (1, Vec::new(), String::new());
        let mut quoted = false;
        for c in text[from..].chars() {
            match c {
                '"' => quoted = !quoted,
                _ if quoted => {}
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 1 => {
                    args.push(arg.trim().to_string());
                    arg.clear();
                    continue;
                }
                _ => {}
            }
            if depth == 0 {
                break;
            }
            arg.push(c);
        }
        args.push(arg.trim().to_string());
        if !args[0].starts_with('_') {
            out.push(args);
        }
    }
    out
}

fn unquote(text: &str) -> String {
    text.trim().trim_matches('"').to_string()
}

/// A C integer literal or `(0x1ULL << 32)`.
fn c_number(text: &str) -> u64 {
    let text = text.trim().trim_matches(|c| c == '(' || c == ')');
    if let Some((base, shift)) = text.split_once("<<") {
        return c_number(base) << c_number(shift);
    }
    let digits = text.trim().trim_end_matches(['U', 'L', 'u', 'l']);
    match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).unwrap(),
        None => digits
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {text}")),
    }
}

/// The first string literal in the body of C function `function` that contains `marker` and
/// not `absent` (empty when there is none: the comparison then fails on every event).
fn template(src: &str, function: &str, marker: &str, absent: &str) -> String {
    let body = &src[src
        .find(&format!("{function}("))
        .unwrap_or_else(|| panic!("no {function} in the source"))..];
    let body = &body[..body.find("\n}").unwrap()];
    body.split('"')
        .skip(1)
        .step_by(2)
        .find(|s| s.contains(marker) && (absent.is_empty() || !s.contains(absent)))
        .unwrap_or_default()
        .to_string()
}

/// printf of `%x`, `%llx` and `%#x` conversions, as sysfs_emit writes them.
fn printf(template: &str, values: &[u64]) -> String {
    let mut out = String::new();
    let mut values = values.iter();
    let mut rest = template;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let spec = &rest[at + 1..];
        let end = spec.find('x').expect("only hex conversions") + 1;
        let value = values.next().expect("a value per conversion");
        if spec[..end].starts_with('#') {
            out.push_str(&format!("{value:#x}"));
        } else {
            out.push_str(&format!("{value:x}"));
        }
        rest = &spec[end..];
    }
    out.push_str(rest);
    out.trim_end_matches("\\n").to_string()
}

/// The PCI vendor id a `PCI_VENDOR_ID_*` macro names.
fn vendor_id(pci_ids: &str, macro_name: &str) -> u16 {
    let line = pci_ids
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(macro_name))
        .unwrap_or_else(|| panic!("no {macro_name} in pci_ids.h"));
    c_number(line.split_whitespace().nth(2).unwrap()) as u16
}

/// What one driver's source says one of its PMU directories holds.
#[derive(Debug, Default, PartialEq)]
struct DriverView {
    formats: BTreeMap<String, String>,
    events: BTreeMap<String, String>,
    attributes: Vec<String>,
}

fn view_of(files: &crate::pmu::DriverFiles) -> DriverView {
    DriverView {
        formats: files
            .formats
            .iter()
            .map(|(n, f)| (n.to_string(), f.to_string()))
            .collect(),
        events: files.events.iter().cloned().collect(),
        attributes: files
            .attributes
            .iter()
            .map(|(n, _)| n.to_string())
            .collect(),
    }
}

fn dwc_view(src: &str) -> DriverView {
    let table = section(src, "dwc_pcie_pmu_time_event_attrs[]");
    let time = template(src, "dwc_pcie_event_show", "eventid=", "lane=");
    let lane = template(src, "dwc_pcie_event_show", "lane=", "");
    let mut events = BTreeMap::new();
    for args in calls(table, "DWC_PCIE_PMU_TIME_BASE_EVENT_ATTR") {
        events.insert(args[0].clone(), printf(&time, &[c_number(&args[1]), 0]));
    }
    for args in calls(table, "DWC_PCIE_PMU_LANE_EVENT_ATTR") {
        events.insert(args[0].clone(), printf(&lane, &[c_number(&args[1]), 1]));
    }
    DriverView {
        formats: calls(src, "PMU_FORMAT_ATTR")
            .into_iter()
            .map(|a| (a[0].clone(), unquote(&a[1])))
            .collect(),
        events,
        attributes: Vec::new(),
    }
}

fn hisi_view(src: &str) -> DriverView {
    let show = template(src, "hisi_pcie_event_sysfs_show", "config=", "");
    DriverView {
        formats: calls(src, "HISI_PCIE_PMU_FORMAT_ATTR")
            .into_iter()
            .map(|a| (a[0].clone(), unquote(&a[1])))
            .collect(),
        events: calls(src, "HISI_PCIE_PMU_EVENT_ATTR")
            .into_iter()
            .map(|a| (a[0].clone(), printf(&show, &[c_number(&a[1])])))
            .collect(),
        attributes: ["bus", "bdf_min", "bdf_max", "identifier"]
            .into_iter()
            .filter(|a| src.contains(&format!("DEVICE_ATTR_RO({a})")))
            .map(String::from)
            .collect(),
    }
}

fn nvidia_view(nvidia: &str, cspmu: &str, header: &str) -> DriverView {
    // The Grace PCIe PMU is the match entry named nvidia_pcie_pmu_%u: its tables.
    let entry = section(nvidia, "\"nvidia_pcie_pmu_%u\"");
    let table_name = |field: &str| {
        let at = entry.find(field).unwrap() + field.len();
        entry[at..]
            .trim_start_matches([' ', '='])
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap()
            .to_string()
    };
    let define = |name: &str| {
        let at = header.find(&format!("#define {name}")).unwrap() + 8 + name.len();
        header[at..]
            .split("\n\n")
            .next()
            .unwrap()
            .replace("\\\n", " ")
    };
    let show = template(cspmu, "arm_cspmu_sysfs_event_show", "event=", "");
    let events = calls(
        section(nvidia, &format!("{}[]", table_name(".event_attr"))),
        "ARM_CSPMU_EVENT_ATTR",
    )
    .into_iter()
    .map(|a| {
        let value = if a[1].starts_with("ARM_CSPMU_") {
            c_number(&define(&a[1]))
        } else {
            c_number(&a[1])
        };
        (a[0].clone(), printf(&show, &[value]))
    })
    .collect();
    let format_table = section(nvidia, &format!("{}[]", table_name(".format_attr"))).replace(
        "ARM_CSPMU_FORMAT_EVENT_ATTR",
        &define("ARM_CSPMU_FORMAT_EVENT_ATTR"),
    );
    DriverView {
        formats: calls(&format_table, "ARM_CSPMU_FORMAT_ATTR")
            .into_iter()
            .map(|a| (a[0].clone(), unquote(&a[1])))
            .collect(),
        events,
        attributes: ["identifier", "associated_cpus"]
            .into_iter()
            .filter(|a| {
                cspmu.contains(&format!("__ATTR({a},"))
                    || cspmu.contains(&format!("ARM_CSPMU_CPUMASK_ATTR({a},"))
            })
            .map(String::from)
            .collect(),
    }
}

/// The IIO free-running PMU of `uncore_type` (`skx_uncore_iio_free_running`): its event
/// descriptions, format attributes and the counter width of its bandwidth counters.
fn iio_view(src: &str, uncore_type: &str) -> (DriverView, u32) {
    let ty = section(src, &format!("struct intel_uncore_type {uncore_type} = {{"));
    let field = |name: &str| {
        let at = ty.find(name).unwrap() + name.len();
        ty[at..]
            .trim_start_matches([' ', '\t', '=', '&'])
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .next()
            .unwrap()
            .to_string()
    };
    let events = calls(
        section(src, &format!("{}[]", field(".event_descs"))),
        "INTEL_UNCORE_EVENT_DESC",
    )
    .into_iter()
    .map(|a| (a[0].clone(), unquote(&a[1])))
    .collect();
    let group = section(src, &format!("{} = {{", field(".format_group")));
    let attrs_name = group
        .split(".attrs")
        .nth(1)
        .unwrap()
        .trim_start_matches([' ', '\t', '='])
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap();
    let formats = section(src, &format!("{attrs_name}[]"))
        .split("&format_attr_")
        .skip(1)
        .map(|s| s.split('.').next().unwrap())
        .map(|attr| {
            let def = calls(src, "DEFINE_UNCORE_FORMAT_ATTR")
                .into_iter()
                .find(|a| a[0] == attr)
                .unwrap();
            (def[1].clone(), unquote(&def[2]))
        })
        .collect();
    // { base, mask offset, box offset, counters, bits } per counter kind; the bandwidth ones
    // are the kind with 8 counters.
    let counters = section(src, &format!("{}[]", field(".freerunning")));
    let bits = counters
        .split('{')
        .skip(1)
        .map(|c| {
            c.split('}')
                .next()
                .unwrap()
                .split(',')
                .map(str::trim)
                .collect::<Vec<_>>()
        })
        .find(|c| c.len() >= 5 && c[3] == "8")
        .map(|c| c[4].parse().unwrap())
        .unwrap();
    (
        DriverView {
            formats,
            events,
            attributes: Vec::new(),
        },
        bits,
    )
}

/// Every difference between the sources and pcielab's catalog view of 6.12.
fn differences(src: &BTreeMap<&str, String>) -> Vec<String> {
    let kernel = KernelVersion::SOURCE_PACKAGE;
    let mut out = Vec::new();
    let check = |out: &mut Vec<String>, what: &str, driver: DriverView, family: Family| {
        let ours = view_of(&family.driver_files(kernel));
        for (kind, theirs, mine) in [
            ("format", &driver.formats, &ours.formats),
            ("event", &driver.events, &ours.events),
        ] {
            for (name, text) in theirs {
                match mine.get(name) {
                    Some(t) if t == text => {}
                    Some(t) => out.push(format!(
                        "{what} {kind} {name}: driver '{text}', pcielab '{t}'"
                    )),
                    None => out.push(format!(
                        "{what} {kind} {name} ('{text}') missing in pcielab"
                    )),
                }
            }
            for name in mine.keys().filter(|n| !theirs.contains_key(*n)) {
                out.push(format!(
                    "{what} {kind} {name}: pcielab has it, the driver does not"
                ));
            }
        }
        if driver.attributes != ours.attributes && !driver.attributes.is_empty() {
            out.push(format!(
                "{what} attribute files: driver {:?}, pcielab {:?}",
                driver.attributes, ours.attributes
            ));
        }
    };
    let dwc = &src["drivers/perf/dwc_pcie_pmu.c"];
    check(&mut out, "dwc_pcie_pmu", dwc_view(dwc), Family::DwcRootPort);
    check(
        &mut out,
        "hisi_pcie_pmu",
        hisi_view(&src["drivers/perf/hisilicon/hisi_pcie_pmu.c"]),
        Family::HisiPcie,
    );
    check(
        &mut out,
        "nvidia_cspmu",
        nvidia_view(
            &src["drivers/perf/arm_cspmu/nvidia_cspmu.c"],
            &src["drivers/perf/arm_cspmu/arm_cspmu.c"],
            &src["drivers/perf/arm_cspmu/arm_cspmu.h"],
        ),
        Family::NvidiaPcie,
    );
    let snbep = &src["arch/x86/events/intel/uncore_snbep.c"];
    for (uncore_type, family) in [
        ("skx_uncore_iio_free_running", Family::IntelIioSkylake),
        ("icx_uncore_iio_free_running", Family::IntelIio),
    ] {
        let (view, bits) = iio_view(snbep, uncore_type);
        let ours = Group::FreeRunning.counter_bits(family);
        if bits != ours {
            out.push(format!(
                "{uncore_type}: {bits}-bit counters, pcielab {ours}"
            ));
        }
        check(&mut out, uncore_type, view, family);
    }
    // Counting rules of the 6.12 DWC driver: 32-bit lane counters, one counter per event
    // type (the second gets ENOSPC), and a group of DWC events refused at open (EINVAL).
    let lane_bits = if dwc.contains("DWC_PCIE_LANE_EVENT_MAX_PERIOD\t\tGENMASK_ULL(31, 0)") {
        32
    } else {
        0
    };
    if lane_bits != Group::Lane(6).counter_bits(Family::DwcRootPort) {
        out.push(format!("dwc lane counters: driver masks {lane_bits} bits"));
    }
    let one_per_type = dwc.contains("if (pcie_pmu->event[type])\n\t\treturn -ENOSPC;");
    let groups_refused = dwc.contains(
        "if (event->group_leader != event &&\n\t    !is_software_event(event->group_leader))\n\t\treturn -EINVAL;",
    );
    if !(one_per_type && groups_refused) || dwc_lane_counter_per_event(kernel) {
        out.push(format!(
            "dwc counting rules: driver one-per-type {one_per_type}, groups refused \
             {groups_refused}; pcielab per-event lane counters in 6.12: {}",
            dwc_lane_counter_per_event(kernel)
        ));
    }
    let ids = &src["include/linux/pci_ids.h"];
    let mut bound = Vec::new();
    for line in section(dwc, "dwc_pcie_pmu_vsec_ids[]").lines() {
        if let Some(name) = line.split(".vendor_id = ").nth(1) {
            bound.push(vendor_id(ids, name.trim_end_matches(',').trim()));
        }
    }
    if bound != dwc_vendors(kernel) {
        out.push(format!(
            "dwc vendors: driver {bound:04x?}, pcielab {:04x?}",
            dwc_vendors(kernel)
        ));
    }
    out
}

#[test]
fn catalogs_write_exactly_what_the_6_12_drivers_write() {
    let src = sources();
    let diffs = differences(&src);
    assert!(
        diffs.is_empty(),
        "catalog vs kernel 6.12 drivers:\n{}",
        diffs.join("\n")
    );
    // The comparison covered every family's events (the counts are the drivers').
    let kernel = KernelVersion::SOURCE_PACKAGE;
    let count = |f: Family| f.kernel_events(kernel).len();
    assert_eq!(
        [
            count(Family::DwcRootPort),
            count(Family::HisiPcie),
            count(Family::NvidiaPcie),
            count(Family::IntelIioSkylake),
            count(Family::IntelIio)
        ],
        [14 + 7 + 22, 18, 15, 17, 9]
    );
}

#[test]
fn one_edited_line_of_a_driver_fails_the_comparison() {
    let src = sources();
    let edits: &[(&str, &str, &str)] = &[
        (
            "drivers/perf/dwc_pcie_pmu.c",
            "DWC_PCIE_PMU_LANE_EVENT_ATTR(tx_memory_read, 0x701)",
            "DWC_PCIE_PMU_LANE_EVENT_ATTR(tx_memory_read, 0x711)",
        ),
        (
            "drivers/perf/dwc_pcie_pmu.c",
            "DWC_PCIE_PMU_TIME_BASE_EVENT_ATTR(L1_AUX, 0x09)",
            "DWC_PCIE_PMU_TIME_BASE_EVENT_ATTR(L1_AUX, 0x08)",
        ),
        (
            "drivers/perf/dwc_pcie_pmu.c",
            "PMU_FORMAT_ATTR(lane, \"config:20-27\")",
            "PMU_FORMAT_ATTR(lane, \"config:20-28\")",
        ),
        (
            "drivers/perf/dwc_pcie_pmu.c",
            "\"eventid=0x%x,type=0x%x,lane=?\\n\"",
            "\"eventid=0x%x,type=0x%x\\n\"",
        ),
        (
            "drivers/perf/dwc_pcie_pmu.c",
            "DWC_PCIE_LANE_EVENT_MAX_PERIOD\t\tGENMASK_ULL(31, 0)",
            "DWC_PCIE_LANE_EVENT_MAX_PERIOD\t\tGENMASK_ULL(7, 0)",
        ),
        (
            "drivers/perf/dwc_pcie_pmu.c",
            "{ .vendor_id = PCI_VENDOR_ID_QCOM,",
            "{ .vendor_id = PCI_VENDOR_ID_ROCKCHIP,",
        ),
        (
            "drivers/perf/hisilicon/hisi_pcie_pmu.c",
            "HISI_PCIE_PMU_EVENT_ATTR(rx_mrd_flux, 0x0804)",
            "HISI_PCIE_PMU_EVENT_ATTR(rx_mrd_flux, 0x0805)",
        ),
        (
            "drivers/perf/hisilicon/hisi_pcie_pmu.c",
            "HISI_PCIE_PMU_FORMAT_ATTR(thr_len, \"config1:0-3\")",
            "HISI_PCIE_PMU_FORMAT_ATTR(thr_len, \"config1:0-4\")",
        ),
        (
            "drivers/perf/hisilicon/hisi_pcie_pmu.c",
            "\"config=0x%llx\\n\"",
            "\"event=0x%llx\\n\"",
        ),
        (
            "drivers/perf/arm_cspmu/nvidia_cspmu.c",
            "ARM_CSPMU_EVENT_ATTR(rd_cum_outs_rem,\t\t\t0xd)",
            "ARM_CSPMU_EVENT_ATTR(rd_cum_outs_rem,\t\t\t0xe)",
        ),
        (
            "drivers/perf/arm_cspmu/nvidia_cspmu.c",
            "ARM_CSPMU_FORMAT_ATTR(root_port, \"config1:0-9\")",
            "ARM_CSPMU_FORMAT_ATTR(root_port, \"config1:0-15\")",
        ),
        (
            "arch/x86/events/intel/uncore_snbep.c",
            "INTEL_UNCORE_EVENT_DESC(bw_out_port2,\t\t\"event=0xff,umask=0x26\")",
            "INTEL_UNCORE_EVENT_DESC(bw_out_port2,\t\t\"event=0xff,umask=0x25\")",
        ),
        (
            "arch/x86/events/intel/uncore_snbep.c",
            "INTEL_UNCORE_EVENT_DESC(bw_in_port5.scale,\t\"3.0517578125e-5\")",
            "INTEL_UNCORE_EVENT_DESC(bw_in_port5.scale,\t\"3.814697266e-6\")",
        ),
        (
            "arch/x86/events/intel/uncore_snbep.c",
            "[SKX_IIO_MSR_BW]\t= { 0xb00, 0x1, 0x10, 8, 36 },",
            "[SKX_IIO_MSR_BW]\t= { 0xb00, 0x1, 0x10, 8, 48 },",
        ),
    ];
    for (file, from, to) in edits {
        let mut copy = src.clone();
        let text = copy.get_mut(file).unwrap();
        assert_eq!(text.matches(from).count(), 1, "{file} has '{from}' once");
        *text = text.replace(from, to);
        assert!(
            !differences(&copy).is_empty(),
            "editing {file}: '{from}' -> '{to}' went unnoticed"
        );
    }
}
