use super::raw::Locator;

use super::*;
use crate::pcie::features::AspmLatency;
use crate::topology::Aspm;

const GOOD: &str = r#"
name = "t"
[sim]
mounts = ["/home"]

[[function]]
bdf = "0000:00:02.0"
kind = "root_port"
vendor = 0x1ded
device_id = 0x8000
class = 0x060400
link = { max_speed = 32.0, max_width = 4, speed = 5.0, width = 2 }
mps = 256
mps_supported = 512

[[function]]
bdf = "0000:00:03.0"
kind = "root_port"
vendor = 0x1ded
device_id = 0x8000
class = 0x060400

[[function]]
bdf = "0000:04:00.0"
kind = "endpoint"
parent = "0000:00:02.0"
vendor = 0x1b4b
device_id = 0x9235
class = 0x010601
link = { max_speed = 5.0, max_width = 2, speed = 5.0, width = 2 }
aspm = "l1"
[function.device]
model = "ahci"
"#;

fn err(text: &str) -> String {
    let e = parse_spec("t.toml", text).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    e.to_string()
}

#[test]
fn good_spec_parses_with_free_form_tables_and_bus_ranges() {
    let p = parse_spec("t.toml", GOOD).unwrap();
    assert_eq!(p.name, "t");
    assert_eq!(p.sim["mounts"].as_array().unwrap().len(), 1);
    let t = &p.topology;
    let rp = t.get("00:02.0".parse().unwrap()).unwrap();
    assert_eq!(rp.buses, Some((4, 4)));
    assert_eq!(rp.link.unwrap().width, Some(2));
    // The empty port takes the lowest free bus above its own.
    let empty = t.get("00:03.0".parse().unwrap()).unwrap();
    assert_eq!(empty.buses, Some((1, 1)));
    let sata = t.get("04:00.0".parse().unwrap()).unwrap();
    assert_eq!(sata.params["model"].as_str(), Some("ahci"));
    assert_eq!(
        sata.aspm_enabled,
        Aspm {
            l0s: false,
            l1: true
        }
    );
    assert_eq!(sata.aspm_supported, sata.aspm_enabled);
}

#[test]
fn exit_latencies_take_lnkcap_bounds_only() {
    let with = |exit: &str| {
        GOOD.replacen(
            "aspm = \"l1\"",
            &format!("aspm = \"l1\"\nexit_latency = {exit}"),
            1,
        )
    };
    let p = parse_spec("t.toml", &with("{ l1_ns = 16000 }")).unwrap();
    let sata = p.topology.get("04:00.0".parse().unwrap()).unwrap();
    let d = sata.express_detail;
    assert_eq!(
        (d.l0s_exit, d.l1_exit.and_then(AspmLatency::ns)),
        (None, Some(16000))
    );
    assert_eq!(d.l1_exit.map(AspmLatency::text), Some("<16us"));
    // 15 µs is no LnkCap code's bound (they are 1, 2, 4, … 64 µs).
    let e = err(&with("{ l1_ns = 15000 }"));
    assert!(
        e.contains("exit_latency.l1_ns = 15000 is not a LnkCap exit latency bound"),
        "{e}"
    );
    assert!(
        e.contains("1000, 2000, 4000, 8000, 16000, 32000, 64000"),
        "{e}"
    );
    let e = err(&with("{ l0s_ns = 100 }"));
    assert!(
        e.contains("valid (ns): 64, 128, 256, 512, 1000, 2000, 4000"),
        "{e}"
    );
}

/// Root port 00:02.0 with a bridge to bus 03 (so it covers [01-03] with bus 02 unused), and an
/// empty root port 00:03.0.
const TWO_PORTS_ONE_WITH_A_BUS_HOLE: &str = r#"
name = "t"
[[function]]
bdf = "0000:00:02.0"
kind = "root_port"
vendor = 1
device_id = 2
class = 0x060400
[[function]]
bdf = "0000:01:00.0"
kind = "pci_bridge"
parent = "0000:00:02.0"
vendor = 1
device_id = 3
class = 0x060400
[[function]]
bdf = "0000:03:00.0"
kind = "endpoint"
parent = "0000:01:00.0"
vendor = 1
device_id = 4
class = 0x010802
[[function]]
bdf = "0000:00:03.0"
kind = "root_port"
vendor = 1
device_id = 2
class = 0x060400
"#;

#[test]
fn interleaved_subtrees_are_rejected() {
    // Root port 00:03.0's child sits on bus 02, inside 00:02.0's range [01-03].
    let spec = format!(
        "{TWO_PORTS_ONE_WITH_A_BUS_HOLE}{}",
        r#"[[function]]
bdf = "0000:02:00.0"
kind = "endpoint"
parent = "0000:00:03.0"
vendor = 1
device_id = 5
class = 0x010802
"#
    );
    let e = err(&spec);
    assert!(
        e.starts_with("t.toml:30: function 0000:02:00.0: bus 02 lies inside the bus range [01-03] of 0000:00:02.0"),
        "{e}"
    );
}

#[test]
fn empty_ports_skip_buses_inside_other_subtrees() {
    // 00:02.0 covers [01-03] with a hole at 02; the empty 00:03.0 must not take bus 02.
    let p = parse_spec("t.toml", TWO_PORTS_ONE_WITH_A_BUS_HOLE).unwrap();
    let t = &p.topology;
    assert_eq!(
        t.get("00:02.0".parse().unwrap()).unwrap().buses,
        Some((1, 3))
    );
    assert_eq!(
        t.get("01:00.0".parse().unwrap()).unwrap().buses,
        Some((3, 3))
    );
    assert_eq!(
        t.get("00:03.0".parse().unwrap()).unwrap().buses,
        Some((4, 4))
    );
}

#[test]
fn a_bad_platform_table_fails_the_spec_not_only_the_simulator() {
    let e = err(&format!("{GOOD}\n[platform.dma]\nsetup_ns = -5\n"));
    assert!(
        e.contains("t.toml: [platform] dma.setup_ns = -5 is out of range"),
        "{e}"
    );
    parse_spec(
        "t.toml",
        &format!("{GOOD}\n[platform.dma]\nsetup_ns = 5000\n"),
    )
    .unwrap();
}

#[test]
fn errors_carry_file_line_field_and_valid_values() {
    let e = err(&GOOD.replace("max_width = 4", "max_width = 3"));
    assert!(e.starts_with("t.toml:12: "), "{e}");
    assert!(
        e.contains("link.max_width = 3") && e.contains("1, 2, 4, 8, 12, 16, 32"),
        "{e}"
    );

    let e = err(&GOOD.replace("speed = 5.0", "speed = 6.0"));
    assert!(e.starts_with("t.toml:12: ") && e.contains("6 GT/s"), "{e}");

    let e = err(&GOOD.replace("mps = 256", "mps = 300"));
    assert!(
        e.starts_with("t.toml:13: ") && e.contains("128, 256"),
        "{e}"
    );

    let e = err(&GOOD.replace("aspm = \"l1\"", "aspm = \"l2\""));
    assert!(
        e.starts_with("t.toml:31: ") && e.contains("\"l0s+l1\""),
        "{e}"
    );
}

/// The whole-document parse is the reference: every preset, and layouts the split must
/// see through, give the same functions (and the same messages) a section at a time.
#[test]
fn sections_parse_to_what_the_whole_document_parses_to() {
    let whole = |text: &str| {
        let loc = Locator {
            file: "t.toml",
            text,
            base: 0,
        };
        let (_, functions) = parse_whole(&loc).unwrap();
        functions
            .into_iter()
            .map(|c| c.unwrap())
            .collect::<Vec<_>>()
    };
    let sectioned = |text: &str| {
        let loc = Locator {
            file: "t.toml",
            text,
            base: 0,
        };
        parse_sections(&loc).map(|(head, functions)| {
            (
                head,
                functions
                    .into_iter()
                    .map(|c| c.unwrap())
                    .collect::<Vec<_>>(),
            )
        })
    };
    let presets = preset_files();
    assert!(presets.len() >= 9, "{}", presets.len());
    for (name, text) in &presets {
        let (_, functions) = sectioned(text).unwrap_or_else(|| panic!("{name} not split"));
        assert_eq!(functions, whole(text), "{name}");
    }
    // [sim] between functions, a function's own sub-table, a multi-line string holding a
    // header-like line, headers written with spaces and comments.
    let text = "name = \"t\"\ndescription = \"\"\"two\n[[function]]\nlines\"\"\"\n\
        [[function]]\nbdf = \"0000:00:01.0\"\nkind = \"root_port\"\nvendor = 0x1ded\n\
        device_id = 0x8000\nclass = 0x060400\n\
        [ sim ] # settings\nseed = 1\n\
        [[ function ]]\nbdf = \"0000:01:00.0\"\nkind = \"endpoint\"\nparent = \"0000:00:01.0\"\n\
        vendor = 0x144d\ndevice_id = 0xa808\nclass = 0x010802\n\
        link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 4 }\n\
        [function.device]\nmodel = \"nvme\"\n";
    let (head, functions) = sectioned(text).unwrap();
    assert_eq!(head.description, "two\n[[function]]\nlines");
    assert_eq!(head.sim.get("seed"), Some(&toml::Value::Integer(1)));
    assert_eq!(functions, whole(text));
    assert_eq!(functions[1].0.params["model"].as_str(), Some("nvme"));
    // A function's sub-table away from its function: parsed whole instead.
    let apart = text
        .replace("[function.device]\nmodel = \"nvme\"\n", "")
        .replace("[ sim ] # settings\nseed = 1\n", "")
        + "[sim]\nseed = 1\n[function.device]\nmodel = \"nvme\"\n";
    assert!(sectioned(&apart).is_none());
    assert_eq!(
        parse_spec("t.toml", &apart).unwrap().topology,
        parse_spec("t.toml", text).unwrap().topology
    );
    // Errors found converting a section name the line in the whole file.
    let wide = text.replace("class = 0x010802", "class = 0x1010802");
    let err = parse_spec("t.toml", &wide).unwrap_err();
    assert!(
        err.message()
            .starts_with("t.toml:19: function 0000:01:00.0: class"),
        "{err}"
    );
    let mislinked = text.replace("parent = \"0000:00:01.0\"", "parent = \"0000:00:09.0\"");
    let err = parse_spec("t.toml", &mislinked).unwrap_err();
    assert!(err.message().starts_with("t.toml:16: "), "{err}");
}
