//! `--machine lspci:FILE` against the real lspci (pciutils, installed by `.ci/run`). The oracle
//! data are pciutils' own test dumps (fixtures/lspci/pciutils, copied from pciutils 3.9.0's
//! `tests/`) and the `lspci -xxxx` of two QEMU lab guests (fixtures/lspci/qemu): for every one,
//! the facts pcielab decodes from the hex dump must equal what
//! `lspci -F FILE -vvv` prints for the same bytes, and reading that lspci text back must give
//! the same topology JSON as reading the dump. A generated dump (`register_sweep`) steps the
//! latency, DL_Active, LnkCap2/LnkCtl2/LnkSta2 and AER mask registers through their codes and
//! bits, which real dumps leave mostly at a few values, against the same oracle.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{ok, pcielab};

fn fixtures(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/lspci/{set}"))
}

/// Every pciutils test dump and every QEMU guest's `lspci -xxxx` (the READMEs that name their
/// sources are not dumps).
fn oracle_dumps() -> Vec<PathBuf> {
    let mut dumps: Vec<PathBuf> = ["pciutils", "qemu"]
        .iter()
        .flat_map(|set| std::fs::read_dir(fixtures(set)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("README")
        })
        .collect();
    dumps.sort();
    assert!(dumps.len() >= 37, "{dumps:?}");
    dumps
}

/// What the real lspci prints for a dump read through its own dump access method.
fn real_lspci(dump: &Path) -> String {
    let out = Command::new("lspci")
        .arg("-F")
        .arg(dump)
        .args(["-vvv", "-nn"])
        .output()
        .expect("lspci (pciutils) must be installed; .ci/run installs it");
    assert!(out.status.success(), "lspci -F {}", dump.display());
    String::from_utf8(out.stdout).unwrap()
}

fn topo_json(machine: &str) -> Value {
    serde_json::from_str(&ok(pcielab(&["topo", "--machine", machine, "--json"]))).unwrap()
}

/// lspci's blocks by address (`0000:` added where lspci leaves the domain out).
fn blocks(text: &str) -> BTreeMap<String, Vec<&str>> {
    let mut out: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if !line.is_empty() && !line.starts_with('\t') {
            let address = line.split(' ').next().unwrap();
            current = if address.matches(':').count() == 1 {
                format!("0000:{address}")
            } else {
                address.to_string()
            };
            out.entry(current.clone()).or_default();
        } else if let Some(block) = out.get_mut(&current) {
            block.push(line.trim());
        }
    }
    out
}

/// The token after `word` in `line`, up to the next space or comma.
fn after<'a>(line: &'a str, word: &str) -> Option<&'a str> {
    let rest = &line[line.find(word)? + word.len()..];
    rest.split([' ', ',', ';']).next()
}

/// lspci's `Speed 8GT/s` as GT/s.
fn rate(token: &str) -> Option<f64> {
    token.strip_suffix("GT/s")?.parse().ok()
}

/// lspci's ASPM words as pcielab's JSON names them.
fn aspm(words: &str) -> &'static str {
    match (words.contains("L0s"), words.contains("L1")) {
        (false, false) => "none",
        (true, false) => "l0s",
        (false, true) => "l1",
        (true, true) => "l0s+l1",
    }
}

/// The ACS flags line as a register value, in lspci's flag order (bit 0 first).
fn acs_bits(line: &str) -> String {
    let flags = [
        "SrcValid",
        "TransBlk",
        "ReqRedir",
        "CmpltRedir",
        "UpstreamFwd",
        "EgressCtrl",
        "DirectTrans",
    ];
    let bits = flags
        .iter()
        .enumerate()
        .filter(|(_, f)| line.contains(&format!("{f}+")))
        .fold(0u16, |b, (i, _)| b | 1 << i);
    format!("{bits:#06x}")
}

/// AER's uncorrectable and correctable error bits by the names lspci prints, at the positions
/// Linux's pci_regs.h gives them (`PCI_ERR_UNC_*`, `PCI_ERR_COR_*`).
const UNCORRECTABLE: [(&str, u32); 12] = [
    ("DLP", 4),
    ("SDES", 5),
    ("TLP", 12),
    ("FCP", 13),
    ("CmpltTO", 14),
    ("CmpltAbrt", 15),
    ("UnxCmplt", 16),
    ("RxOF", 17),
    ("MalfTLP", 18),
    ("ECRC", 19),
    ("UnsupReq", 20),
    ("ACSViol", 21),
];
const CORRECTABLE: [(&str, u32); 6] = [
    ("RxErr", 0),
    ("BadTLP", 6),
    ("BadDLLP", 7),
    ("Rollover", 8),
    ("Timeout", 12),
    ("AdvNonFatalErr", 13),
];

/// An AER register line's flags as a register value. Every flag lspci printed must be one the
/// table knows, so a flag the decoder does not keep cannot pass unseen.
fn aer_bits(rest: &str, table: &[(&str, u32)]) -> String {
    let mut bits = 0u32;
    for word in rest.split_whitespace() {
        let (name, on) = match (word.strip_suffix('+'), word.strip_suffix('-')) {
            (Some(name), _) => (name, true),
            (_, Some(name)) => (name, false),
            _ => panic!("'{word}' in an AER line is not a flag"),
        };
        let bit = table
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("lspci prints AER flag {name}, unknown to this test"))
            .1;
        if on {
            bits |= 1 << bit;
        }
    }
    format!("{bits:#010x}")
}

/// lspci's `NAME+`/`NAME-` among the words of `line`.
fn flag(line: &str, name: &str) -> Option<bool> {
    line.split_whitespace()
        .find_map(|w| match w.strip_prefix(name) {
            Some("+") => Some(true),
            Some("-") => Some(false),
            _ => None,
        })
}

/// `2.5-8GT/s` as the list of rates it covers (lspci prints the range of the speeds vector).
fn speed_range(words: &str) -> Vec<f64> {
    let top = rate(words.rsplit('-').next().unwrap()).unwrap();
    [2.5, 5.0, 8.0, 16.0, 32.0, 64.0]
        .into_iter()
        .filter(|r| *r <= top)
        .collect()
}

#[test]
fn every_pciutils_dump_decodes_to_what_the_real_lspci_prints() {
    let mut compared: BTreeMap<&str, usize> = BTreeMap::new();
    for dump in oracle_dumps() {
        compare_with_lspci(&dump, &mut compared);
    }
    // Enough of each fact was compared that the oracle cannot pass by seeing nothing.
    for (fact, least) in [
        ("speed", 20),
        ("width", 20),
        ("max_speed", 30),
        ("aspm_supported", 30),
        ("aspm_enabled", 30),
        ("mps", 40),
        ("mrrs", 40),
        ("acs_control", 5),
        ("aer", 100),
        ("l0s_exit", 60),
        ("l1_exit", 60),
        ("acceptable_l0s", 20),
        ("dl_active", 60),
        ("dl_active_reporting", 60),
        ("supported_speeds", 20),
        ("crosslink", 20),
        ("target_speed", 45),
        ("status2", 200),
        ("crosslink_resolution", 45),
        ("ue_mask", 20),
        ("ue_severity", 20),
        ("ce_mask", 20),
        ("absent_link2", 20),
        ("absent_acceptable", 50),
    ] {
        assert!(
            compared.get(fact).copied().unwrap_or(0) >= least,
            "{fact}: {compared:?}"
        );
    }
}

/// `count` functions whose registers step through every code lspci decodes, as an `lspci
/// -xxxx` dump: root ports (type 1 headers, nothing below) and endpoints, some with version 1
/// of the PCI Express capability, some functions other than 0 of an endpoint; each with AER.
/// Bits follow the PCIe base specification (pci_regs.h names them); the decoder under test is
/// not used to write them.
fn register_sweep(count: usize) -> String {
    let mut text = String::new();
    // A fixed-seed xorshift: every AER mask bit, printed by lspci or not, turns up.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed as u32
    };
    for i in 0..count {
        let mut b = vec![0u8; 4096];
        let put = |b: &mut Vec<u8>, at: usize, v: u32, n: usize| {
            b[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
        };
        let port = i % 3 == 0;
        let (device, function) = (i / 8, i % 8);
        put(&mut b, 0x00, 0x8086, 2);
        put(&mut b, 0x02, 0x1000 + i as u32, 2);
        put(&mut b, 0x06, 0x0010, 2); // capability list
        put(
            &mut b,
            0x08,
            if port { 0x0604_0000 } else { 0x0108_0200 },
            4,
        );
        b[0x0e] = u8::from(port);
        if port {
            let bus = 0x40 + i as u8;
            b[0x19] = bus;
            b[0x1a] = bus;
        }
        b[0x34] = 0x40;
        let version = if i % 7 == 6 { 1 } else { 2 };
        put(&mut b, 0x40, 0x10, 1);
        put(&mut b, 0x42, version | if port { 4 << 4 } else { 0 }, 2);
        let devcap = (i as u32 % 4) | ((i as u32 % 8) << 6) | (((i as u32 * 5) % 8) << 9);
        put(&mut b, 0x44, devcap, 4);
        let speed = i as u32 % 5 + 1;
        let lnkcap = speed
            | (4 << 4)
            | ((i as u32 % 4) << 10)
            | (((i as u32 * 3) % 8) << 12)
            | (((i as u32 * 7) % 8) << 15)
            | ((i as u32 % 2) << 20);
        put(&mut b, 0x4c, lnkcap, 4);
        put(
            &mut b,
            0x52,
            speed | (4 << 4) | (((i as u32 / 2) % 2) << 13),
            2,
        );
        // LnkCap2: 0 (before PCIe 3.0) for some, else the speeds up to `speed`, crosslink on
        // every third; LnkCtl2's target through 0-6; LnkSta2 through its flags.
        let lnkcap2 = if i % 5 == 4 {
            0
        } else {
            (((1 << speed) - 1) << 1) | (u32::from(i % 3 == 1) << 8)
        };
        put(&mut b, 0x6c, lnkcap2, 4);
        put(&mut b, 0x70, i as u32 % 7, 2);
        put(&mut b, 0x72, (i as u32 * 37) & 0x33f, 2);
        put(&mut b, 0x100, 0x0001_0001, 4); // AER v1, last
        for at in [0x108, 0x10c, 0x114] {
            put(&mut b, at, next(), 4);
        }
        text.push_str(&format!("00:{device:02x}.{function} Device {i}\n"));
        for (row, chunk) in b.chunks(16).enumerate() {
            let bytes: Vec<String> = chunk.iter().map(|x| format!("{x:02x}")).collect();
            text.push_str(&format!("{:02x}: {}\n", row * 16, bytes.join(" ")));
        }
        text.push('\n');
    }
    text
}

#[test]
fn every_register_code_decodes_to_what_the_real_lspci_prints() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("sweep.xxxx");
    std::fs::write(&dump, register_sweep(56)).unwrap();
    let mut compared: BTreeMap<&str, usize> = BTreeMap::new();
    compare_with_lspci(&dump, &mut compared);
    // Every function's three AER registers; every latency and flag of every function with a
    // link (all of them); LnkCap2 where not 0, and lspci's silence where it is.
    for (fact, least) in [
        ("ue_mask", 56),
        ("ue_severity", 56),
        ("ce_mask", 56),
        ("l0s_exit", 56),
        ("l1_exit", 56),
        ("dl_active", 56),
        ("dl_active_reporting", 56),
        ("acceptable_l0s", 30),
        ("supported_speeds", 10),
        ("target_speed", 12),
        ("status2", 200),
        ("absent_link2", 20),
    ] {
        assert!(
            compared.get(fact).copied().unwrap_or(0) >= least,
            "{fact}: {compared:?}"
        );
    }
    // And lspci's text of the sweep reads back to the same topology.
    let text = dir.path().join("sweep.txt");
    std::fs::write(&text, real_lspci(&dump)).unwrap();
    assert_eq!(
        facts_only(topo_json(&format!("lspci:{}", dump.display()))),
        facts_only(topo_json(&format!("lspci:{}", text.display())))
    );
}

/// Compares what pcielab decodes from `dump` with what the real lspci prints for it, fact by
/// fact, counting each fact compared in `compared`.
fn compare_with_lspci(dump: &Path, compared: &mut BTreeMap<&'static str, usize>) {
    let lspci = real_lspci(dump);
    let json = topo_json(&format!("lspci:{}", dump.display()));
    let functions: BTreeMap<String, &Value> = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["bdf"].as_str().unwrap().to_string(), f))
        .collect();
    let listed = blocks(&lspci);
    assert_eq!(
        functions.keys().collect::<Vec<_>>(),
        listed.keys().collect::<Vec<_>>(),
        "{}",
        dump.display()
    );
    for (bdf, lines) in &listed {
        let f = functions[bdf];
        let at = format!("{} {bdf}", dump.display());
        let mut check = |fact: &'static str, ours: &Value, theirs: Value| {
            assert_eq!(ours, &theirs, "{at}: {fact}");
            *compared.entry(fact).or_default() += 1;
        };
        let mut in_acs = false;
        let mut in_aer = false;
        let printed = |label: &str| lines.iter().any(|l| l.starts_with(label));
        let link = &f["link"];
        // What lspci leaves out, pcielab leaves unknown.
        if printed("LnkCap:") {
            for (label, field) in [
                ("LnkCap2:", "supported_speeds_gts"),
                ("LnkCap2:", "crosslink"),
                ("LnkCtl2:", "target_speed_gts"),
                ("LnkSta2:", "status2"),
            ] {
                if !printed(label) {
                    check("absent_link2", &link[field], Value::Null);
                }
            }
        }
        if !lines
            .iter()
            .any(|l| l.starts_with("DevCap:") && l.contains("Latency L0s"))
        {
            check("absent_acceptable", &f["acceptable_latency"], Value::Null);
        }
        for line in lines {
            if line.starts_with("Capabilities: ") {
                in_acs = line.contains("Access Control Services");
                in_aer = line.contains("] Advanced Error Reporting");
            }
            if let Some(on) = flag(line, "LLActRep") {
                check(
                    "dl_active_reporting",
                    &link["dl_active_reporting"],
                    on.into(),
                );
            }
            if let Some(on) = flag(line, "DLActive") {
                check("dl_active", &link["dl_active"], on.into());
            }
            for (name, field) in [
                ("EqualizationComplete", "equalization_complete"),
                ("EqualizationPhase1", "equalization_phase1"),
                ("EqualizationPhase2", "equalization_phase2"),
                ("EqualizationPhase3", "equalization_phase3"),
                ("LinkEqualizationRequest", "equalization_request"),
            ] {
                if let Some(on) = flag(line, name) {
                    check("status2", &link["status2"][field], on.into());
                }
            }
            if let Some(res) = line.split("CrosslinkRes: ").nth(1) {
                let words = res.split(',').next().unwrap();
                let ours = match words {
                    "unsupported" => "unsupported",
                    "Upstream Port" => "upstream_port",
                    "Downstream Port" => "downstream_port",
                    _ => "incomplete",
                };
                check(
                    "crosslink_resolution",
                    &link["status2"]["crosslink_resolution"],
                    ours.into(),
                );
            }
            if let Some(rest) = line.strip_prefix("LnkCap2:") {
                let words = after(rest, "Supported Link Speeds: ").unwrap();
                check(
                    "supported_speeds",
                    &link["supported_speeds_gts"],
                    serde_json::json!(speed_range(words)),
                );
                let on = flag(rest, "Crosslink").unwrap();
                check("crosslink", &link["crosslink"], on.into());
            } else if let Some(rest) = line.strip_prefix("LnkCtl2:") {
                let speed = rate(after(rest, "Target Link Speed: ").unwrap()).unwrap();
                check("target_speed", &link["target_speed_gts"], speed.into());
            }
            if let (true, Some(rest)) = (in_aer, line.strip_prefix("UEMsk:")) {
                let bits = aer_bits(rest, &UNCORRECTABLE);
                check(
                    "ue_mask",
                    &f["aer_masks"]["uncorrectable_mask"],
                    bits.into(),
                );
            } else if let (true, Some(rest)) = (in_aer, line.strip_prefix("UESvrt:")) {
                let bits = aer_bits(rest, &UNCORRECTABLE);
                check(
                    "ue_severity",
                    &f["aer_masks"]["uncorrectable_severity"],
                    bits.into(),
                );
            } else if let (true, Some(rest)) = (in_aer, line.strip_prefix("CEMsk:")) {
                let bits = aer_bits(rest, &CORRECTABLE);
                check("ce_mask", &f["aer_masks"]["correctable_mask"], bits.into());
            }
            if let Some(rest) = line.strip_prefix("LnkCap:") {
                // `Exit Latency L0s <1us, L1 <16us`: only the supported states are printed.
                let exit = rest.split("Exit Latency ").nth(1).unwrap_or("");
                let latency = |state: &str| {
                    exit.split(", ")
                        .find_map(|i| i.strip_prefix(state))
                        .map_or(Value::Null, |w| w.trim().into())
                };
                check("l0s_exit", &link["l0s_exit_latency"], latency("L0s "));
                check("l1_exit", &link["l1_exit_latency"], latency("L1 "));
            }
            if let Some(rest) = line
                .strip_prefix("DevCap:")
                .and_then(|r| r.split("Latency ").nth(1))
            {
                // `Latency L0s <64ns, L1 <1us`: what an endpoint accepts.
                let (l0s, l1) = rest.split_once(", ").unwrap();
                check(
                    "acceptable_l0s",
                    &f["acceptable_latency"]["l0s"],
                    l0s.strip_prefix("L0s ").unwrap().into(),
                );
                check(
                    "acceptable_l1",
                    &f["acceptable_latency"]["l1"],
                    l1.strip_prefix("L1 ").unwrap().trim().into(),
                );
            }
            if let Some(rest) = line.strip_prefix("LnkCap:") {
                if let Some(speed) = after(rest, "Speed ").and_then(rate) {
                    check("max_speed", &f["link"]["max_speed_gts"], speed.into());
                }
                let width: u64 = after(rest, "Width x").unwrap().parse().unwrap();
                if width != 0 {
                    check("max_width", &f["link"]["max_width"], width.into());
                }
                let words = rest
                    .split("ASPM ")
                    .nth(1)
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap();
                check("aspm_supported", &f["aspm_supported"], aspm(words).into());
            } else if let Some(rest) = line.strip_prefix("LnkSta:") {
                if let Some(speed) = after(rest, "Speed ").and_then(rate) {
                    check("speed", &f["link"]["speed_gts"], speed.into());
                    let width: u64 = after(rest, "Width x").unwrap().parse().unwrap();
                    check("width", &f["link"]["width"], width.into());
                }
            } else if let Some(rest) = line.strip_prefix("LnkCtl:") {
                let words = rest
                    .split("ASPM ")
                    .nth(1)
                    .unwrap()
                    .split(';')
                    .next()
                    .unwrap();
                check("aspm_enabled", &f["aspm_enabled"], aspm(words).into());
            } else if let Some(rest) = line.strip_prefix("DevCap:") {
                let mps: u64 = after(rest, "MaxPayload ").unwrap().parse().unwrap();
                check("mps_supported", &f["mps_supported"], mps.into());
            } else if line.contains("MaxReadReq ") {
                let mps: u64 = after(line, "MaxPayload ").unwrap().parse().unwrap();
                let mrrs: u64 = after(line, "MaxReadReq ").unwrap().parse().unwrap();
                check("mps", &f["mps"], mps.into());
                check("mrrs", &f["mrrs"], mrrs.into());
            } else if let (true, Some(rest)) = (in_acs, line.strip_prefix("ACSCap:")) {
                check(
                    "acs_capability",
                    &f["acs"]["capability"],
                    acs_bits(rest).into(),
                );
            } else if let (true, Some(rest)) = (in_acs, line.strip_prefix("ACSCtl:")) {
                check("acs_control", &f["acs"]["control"], acs_bits(rest).into());
            }
        }
        let aer = lines
            .iter()
            .any(|l| l.starts_with("Capabilities: [") && l.contains("] Advanced Error Reporting"));
        check("aer", &f["aer"], aer.into());
    }
}

/// The topology JSON without what depends on the input's wording: the evidence lines and the
/// description naming the file; and without the driver (and the warnings judged from it),
/// which a fixture's `Kernel driver in use:` lines give its dump but lspci cannot print from
/// bytes alone (`-F`).
fn facts_only(mut doc: Value) -> Value {
    doc.as_object_mut().unwrap().remove("description");
    for f in doc["functions"].as_array_mut().unwrap() {
        let f = f.as_object_mut().unwrap();
        for field in ["evidence", "driver", "driver_source", "warnings"] {
            f.remove(field);
        }
    }
    doc
}

#[test]
fn the_real_lspci_text_of_every_dump_reads_to_the_same_topology() {
    let dir = tempfile::tempdir().unwrap();
    let mut functions = 0;
    for dump in oracle_dumps() {
        let text = dir.path().join(dump.file_name().unwrap());
        std::fs::write(&text, real_lspci(&dump)).unwrap();
        let from_dump = facts_only(topo_json(&format!("lspci:{}", dump.display())));
        let from_text = facts_only(topo_json(&format!("lspci:{}", text.display())));
        assert_eq!(from_dump, from_text, "{}", dump.display());
        functions += from_dump["functions"].as_array().unwrap().len();
    }
    assert!(functions >= 140, "{functions}");
}

#[test]
fn an_lspci_machine_has_a_tree_p2p_verdicts_and_a_report_but_no_counters() {
    let board = fixtures("pciutils").join("tree-asus-p6t6");
    let machine = format!("lspci:{}", board.display());
    let json = topo_json(&machine);
    let nic = json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["bdf"] == "0000:06:00.0")
        .unwrap();
    // lspci -tv draws 06:00.0 below the root port 00:07.0 of the X58 I/O hub.
    assert_eq!(nic["parent"], "0000:00:07.0");
    let tree = Command::new("lspci")
        .arg("-F")
        .arg(&board)
        .arg("-t")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&tree.stdout).contains("+-07.0-[06]--+-00.0"));
    let p2p = ok(pcielab(&["topo", "--machine", &machine, "--p2p", "--json"]));
    let p2p: Value = serde_json::from_str(&p2p).unwrap();
    assert!(p2p["groups"].as_array().unwrap().len() >= 2, "{p2p}");
    let page = tempfile::tempdir().unwrap();
    let html = page.path().join("report.html");
    ok(pcielab(&[
        "report",
        "--machine",
        &machine,
        "-o",
        html.to_str().unwrap(),
    ]));
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("0000:06:00.0"));
    for asked in [
        &["stat", "--machine", &machine, "-a", "-e", "x", "--", "true"][..],
        &["qos", "show", "--machine", &machine][..],
    ] {
        let out = pcielab(asked);
        assert_eq!(out.status.code(), Some(2), "{asked:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("lspci output") && err.contains("host"),
            "{asked:?}: {err}"
        );
    }
}

#[test]
fn stdin_and_bad_files_exit_2_naming_the_line() {
    let dump = std::fs::read(fixtures("pciutils").join("cap-pcie-1")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(["topo", "--machine", "lspci:-", "--json"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&dump).unwrap();
    let out = child.wait_with_output().unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["functions"][0]["bdf"], "0000:00:01.0");
    assert_eq!(
        json["functions"][0]["evidence"]["lines"]["lnksta"]["line"],
        67
    );

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "00:01.0 PCI bridge: Intel\n00: 86 80 zz\n").unwrap();
    let out = pcielab(&["topo", "--machine", &format!("lspci:{}", bad.display())]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.txt:2: 'zz' in a hex row"), "{err}");
    let out = pcielab(&["topo", "--machine", "lspci:/nonexistent/lspci.txt"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Lines that open a function's block: `BB:DD.F ` or `DDDD:BB:DD.F ` at the start.
fn header_lines(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            let address = l.split(' ').next().unwrap_or("");
            let parts: Vec<&str> = address.split([':', '.']).collect();
            let hex = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit());
            l.contains(' ') && (parts.len() == 3 || parts.len() == 4) && parts.iter().all(hex)
        })
        .count()
}

#[test]
fn the_corpus_reads_every_kept_machine_and_counts_every_function() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/lspci");
    let report: Value =
        serde_json::from_str(&ok(pcielab(&["corpus", root.to_str().unwrap(), "--json"]))).unwrap();
    assert_eq!(report["schema"], "pcielab.corpus/v1");
    assert_eq!(
        report["failed"].as_array().unwrap().len(),
        0,
        "{}",
        report["failed"]
    );
    let machines = report["machines"].as_array().unwrap();
    assert!(machines.len() >= 192, "{}", machines.len());
    assert_eq!(report["files"], machines.len());
    let mut found = Vec::new();
    for m in machines {
        let file = m["file"].as_str().unwrap();
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(m["functions"], header_lines(&text), "{file}");
        for f in m["findings"].as_array().unwrap() {
            // Every finding quotes at least one line of the file, as the file has it.
            let quotes = f["evidence"].as_array().unwrap();
            assert!(!quotes.is_empty(), "{file}: {f}");
            for quote in quotes {
                let quote = quote.as_str().unwrap();
                let (line, quoted) = quote
                    .strip_prefix("line ")
                    .and_then(|q| q.split_once(": "))
                    .unwrap_or_else(|| panic!("{file}: evidence '{quote}' names no line"));
                let line: usize = line.parse().unwrap();
                assert_eq!(text.lines().nth(line - 1).unwrap().trim(), quoted, "{file}");
            }
            found.push(format!(
                "{file} {} {} {}",
                f["function"], f["check"], f["severity"]
            ));
        }
    }
    // The traps in these machines raise nothing: empty slots at x0 (the PowerEdge 2850's
    // 00:04.0) or at x1 with DLActive- (the Altra's 0002:00:01.0), an x16 slot holding an x8
    // switch (the R210 II), Gen4 ports above nothing listed, single-device dumps whose path to
    // a root port is not in the file, a report taken without root (every capability
    // `<access denied>`), a GPU's audio function enabling ASPM alone (a non-ARI device takes
    // only what all its functions enable), a port enabling L1 above a device that does not,
    // BCM57xx NICs whose tg3 driver clears Relaxed Ordering itself, BMC framebuffers (one-lane
    // display controllers) that move no bulk data, and ports whose LnkCap reads below the speed
    // they run. What remains was reviewed by hand against the text (docs/corpus.md, the review
    // table): GPUs at 2.5 GT/s under 8 GT/s ports, called info (a power-managed idle link), once
    // per link; MaxPayload below what every function on the path supports (Altra, Kunpeng,
    // Phytium, EPYC); ASPM enabled at both ends of links whose endpoints have drivers bound; a
    // P2P pair sent through the host bridge by ACS redirect; Relaxed Ordering off on NICs and
    // storage below unquirked root ports (info) and on below Haswell/Broadwell-EP ports (risk);
    // the R230 H730's Extended Tags off; the Hi1616 and TX2540 M1 links trained at Gen1, and
    // the T140's BCM5720 at x1 of x2; and QEMU 7.2's ports reading DLActive- above working
    // devices, said as the failed link topo names, at info (the bit alone proves no failure).
    assert_eq!(
        found,
        vec![
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.1\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/asrockrack-b650d4u.txt \"0000:01:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/asrockrack-e3c252d4u-2t-ovh-two-gen4-nvme.txt \"0000:01:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/asrockrack-e3c252d4u-2t-ovh-two-gen4-nvme.txt \"0000:02:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/asrockrack-e3c256d4u-2l2t-970-evo.txt \"0000:01:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/asrockrack-ec266d4-4l-connectx3.txt \"0000:01:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/asus-esc8000-g4-plx-cascade-rtx2080ti.txt \"0000:1d:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/dell-poweredge-r220.txt \"0000:02:00.0\" \"p2p-through-host\" \"info\"",
            "linuxhw/dell-poweredge-r230-perc-h730-bcm5720.txt \"0000:01:00.0\" \"ext-tag-off\" \"perf-loss\"",
            "linuxhw/dell-poweredge-t140-centos7.txt \"0000:02:00.1\" \"link-downtrained\" \"perf-loss\"",
            "linuxhw/fujitsu-primergy-rx100-s7p-82574l-g200e.txt \"0000:02:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/fujitsu-primergy-rx2530-m1-nvme-fc-target-speed.txt \"0000:03:00.0\" \"link-downtrained\" \"perf-loss\"",
            "linuxhw/fujitsu-primergy-tx1330-m1.txt \"0000:03:00.0\" \"mrrs-small\" \"perf-loss\"",
            "linuxhw/fujitsu-primergy-tx1330-m1.txt \"0000:01:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/fujitsu-primergy-tx1330-m1.txt \"0000:03:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/fujitsu-primergy-tx1330-m1.txt \"0000:04:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/fujitsu-primergy-tx2540-m1-e18-nvme.txt \"0000:05:00.0\" \"link-downtrained\" \"perf-loss\"",
            "linuxhw/fujitsu-primergy-tx2540-m1-e18-nvme.txt \"0000:05:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/fujitsu-primergy-tx300-s5-megaraid-1078.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/gigabyte-g431-mm0-epyc3000-i210.txt \"0000:04:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/hpe-ml10-gen9.txt \"0000:02:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/hpe-ml10-gen9.txt \"0000:02:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-proliant-microserver-gen10.txt \"0000:01:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-proliant-microserver-gen10.txt \"0000:02:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-proliant-microserver-gen10.txt \"0000:01:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/huawei-rh2288-v3.txt \"0000:02:00.2\" \"relaxed-ordering\" \"risk\"",
            "linuxhw/huawei-taishan-200-kunpeng-es3000-nvme.txt \"0000:03:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/huawei-taishan-2180-hi1616-plx-qat.txt \"0000:01:00.0\" \"link-downtrained\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-atz-rx550-e13-lane-error.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-atz-rx550-e13-lane-error.txt \"0000:04:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-atz113-rx550-e13-lane-errors-whole.txt \"0000:01:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/phytium-ft2000-4-atz113-rx550-e13-lane-errors-whole.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-atz113-rx550-e13-lane-errors-whole.txt \"0000:01:00.1\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-atz113-rx550-e13-lane-errors-whole.txt \"0000:03:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-f913-rx550-e13-lane-errors-whole.txt \"0000:01:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/phytium-ft2000-4-kylin-f913-rx550-e13-lane-errors-whole.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-f913-rx550-e13-lane-errors-whole.txt \"0000:01:00.1\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-f913-rx550-e13-lane-errors-whole.txt \"0000:04:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-hd6450-marvell-9215-whole.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-hd6450-marvell-9215-whole.txt \"0000:01:00.1\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-hd6450-marvell-9215-whole.txt \"0000:04:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-kylin-radeon-hd6450.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-rx550-e13-nvme.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/phytium-ft2000-4-rx550-e13-nvme.txt \"0000:03:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/quanta-s210-x12ms-pciutils-3.13.txt \"0000:05:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/quanta-s210-x12ms-pciutils-3.13.txt \"0000:05:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/quanta-s210-x12ms-pciutils-3.13.txt \"0000:05:00.1\" \"relaxed-ordering\" \"info\"",
            "linuxhw/supermicro-a1srm-2558f.txt \"0000:03:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/supermicro-as-4124gs-tnr.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/supermicro-as-4124gs-tnr.txt \"0000:01:00.1\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/supermicro-h8scm.txt \"0000:02:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/supermicro-h8scm.txt \"0000:03:00.0\" \"relaxed-ordering\" \"info\"",
            "linuxhw/supermicro-x10sra-f-quadro-p2000.txt \"0000:04:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/supermicro-x10sra-f-quadro-p2000.txt \"0000:04:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/supermicro-x10sra-f-quadro-p2000.txt \"0000:04:00.0\" \"relaxed-ordering\" \"risk\"",
            "linuxhw/supermicro-x11ssv-q.txt \"0000:01:00.1\" \"aspm-busy-link\" \"perf-loss\"",
            "pciutils/cap-ea-1 \"0002:01:00.0\" \"mrrs-small\" \"perf-loss\"",
            "pciutils/cap-l1-pm \"0000:01:00.0\" \"mrrs-small\" \"perf-loss\"",
            "pciutils/cap-vc-and-rcl \"0000:02:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "qemu/qemu-seed-guest.xxxx \"0000:01:00.0\" \"link-downtrained\" \"info\"",
            "qemu/qemu-wide-guest.xxxx \"0000:01:00.0\" \"link-downtrained\" \"info\"",
            "qemu/qemu-wide-guest.xxxx \"0000:05:00.0\" \"link-downtrained\" \"info\"",
        ]
    );
    // Every check of every machine is accounted for: judged subjects, not judged ones with a
    // reason, and the corpus totals are their sums.
    let checks = &report["checks"];
    for (id, count) in checks.as_object().unwrap() {
        let per_machine = |field: &str| -> u64 {
            machines
                .iter()
                .flat_map(|m| m["checks"].as_array().unwrap())
                .filter(|c| c["check"] == id.as_str())
                .map(|c| match field {
                    "judged" => c["judged"].as_u64().unwrap(),
                    _ => c["not_judged"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|n| n["subjects"].as_array().unwrap().len() as u64)
                        .sum(),
                })
                .sum()
        };
        assert_eq!(count["judged"], per_machine("judged"), "{id}");
        assert_eq!(count["not_judged"], per_machine("not_judged"), "{id}");
    }
    // lspci output holds no IRQ affinities: never counted as clean.
    assert_eq!(checks["irq-far-node"]["judged"], 0);
    assert_eq!(
        checks["irq-far-node"]["machines_not_judged"],
        machines.len()
    );
    // Several kept dumps are plain -xxxx (no driver lines): busy-link checks could not judge
    // their links and the counts say so.
    assert!(checks["aspm-busy-link"]["not_judged"].as_u64().unwrap() > 0);
    assert!(checks["aspm-busy-link"]["reasons"]
        .as_object()
        .unwrap()
        .keys()
        .any(|r| r.contains("capture with `lspci -vvv -k`")));
}

#[test]
fn corpus_findings_quote_their_evidence_lines_and_failures_their_place() {
    let server =
        std::fs::read_to_string(fixtures("linuxhw").join("dell-poweredge-r210-ii.txt")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The same server with its switch programmed to a smaller MPS than the root port above it,
    // and with its x8 link trained at x4.
    let mps = server.replacen(
        "\t\t\tMaxPayload 256 bytes, MaxReadReq 512 bytes",
        "\t\t\tMaxPayload 128 bytes, MaxReadReq 512 bytes",
        1,
    );
    let narrow = server.replace(
        "\t\tLnkSta:\tSpeed 8GT/s (ok), Width x8 (ok)",
        "\t\tLnkSta:\tSpeed 8GT/s (ok), Width x4 (downgraded)",
    );
    assert!(mps != server && narrow != server);
    std::fs::write(dir.path().join("mps.txt"), &mps).unwrap();
    std::fs::write(dir.path().join("narrow.txt"), &narrow).unwrap();
    std::fs::write(
        dir.path().join("notes.txt"),
        "00:00.0 Host bridge: x\nsee above\n",
    )
    .unwrap();
    let report: Value = serde_json::from_str(&ok(pcielab(&[
        "corpus",
        dir.path().to_str().unwrap(),
        "--json",
    ])))
    .unwrap();
    let failed = report["failed"].as_array().unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["exit_code"], 2);
    assert!(failed[0]["message"]
        .as_str()
        .unwrap()
        .contains("notes.txt:2: 'see above'"));
    let mut seen = Vec::new();
    for m in report["machines"].as_array().unwrap() {
        let text = if m["file"] == "mps.txt" {
            &mps
        } else {
            &narrow
        };
        for finding in m["findings"].as_array().unwrap() {
            assert_eq!(finding["function"], "0000:01:00.0");
            for quote in finding["evidence"].as_array().unwrap() {
                let quote = quote.as_str().unwrap();
                let (line, quoted) = quote
                    .strip_prefix("line ")
                    .and_then(|q| q.split_once(": "))
                    .unwrap_or_else(|| panic!("evidence '{quote}' names no line"));
                let line: usize = line.parse().unwrap();
                assert_eq!(text.lines().nth(line - 1).unwrap().trim(), quoted);
                seen.push((
                    finding["check"].as_str().unwrap().to_string(),
                    quoted.to_string(),
                ));
            }
        }
    }
    seen.sort();
    // The narrowed link quotes the endpoint's LnkSta and both ends' LnkCap; the MPS mismatch
    // quotes the switch's DevCtl line (128) and the root port's above it (256).
    assert_eq!(
        seen,
        vec![
            (
                "link-downtrained".into(),
                "LnkCap:\tPort #0, Speed 8GT/s, Width x8, ASPM L1, Exit Latency L1 <64us".into()
            ),
            (
                "link-downtrained".into(),
                "LnkCap:\tPort #2, Speed 8GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <256ns, L1 <8us".into()
            ),
            (
                "link-downtrained".into(),
                "LnkSta:\tSpeed 8GT/s (ok), Width x4 (downgraded)".into()
            ),
            (
                "mps-mismatch".into(),
                "MaxPayload 128 bytes, MaxReadReq 512 bytes".into()
            ),
            (
                "mps-mismatch".into(),
                "MaxPayload 128 bytes, MaxReadReq 512 bytes".into()
            ),
            (
                "mps-mismatch".into(),
                "MaxPayload 256 bytes, MaxReadReq 128 bytes".into()
            ),
        ]
    );
    assert_eq!(report["checks"]["mps-mismatch"]["machines"], 1);
    assert_eq!(report["checks"]["link-downtrained"]["machines"], 1);
}

/// `topo --json` of lspci text, by BDF: (vendor, device, class, kind).
fn identities(text: &str) -> BTreeMap<String, [String; 4]> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lspci.txt");
    std::fs::write(&file, text).unwrap();
    let machine = format!("lspci:{}", file.display());
    let doc: Value =
        serde_json::from_str(&ok(pcielab(&["topo", "--machine", &machine, "--json"]))).unwrap();
    doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let field = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (
                field("bdf"),
                [
                    field("vendor"),
                    field("device"),
                    field("class"),
                    field("kind"),
                ],
            )
        })
        .collect()
}

#[test]
fn text_without_numeric_ids_is_read_by_name_as_with_nn() {
    // `lspci -vvv` without -nn names vendors, devices and classes from pci.ids; pcielab looks
    // the names up in the same database, so each function gets the IDs, class and kind that
    // `lspci -vvv -nn` states (the host bridge stays a host bridge).
    let (mut functions, mut unresolved) = (0, Vec::new());
    for dump in oracle_dumps() {
        let lspci = |extra: &[&str]| {
            let out = Command::new("lspci")
                .arg("-F")
                .arg(&dump)
                .args(extra)
                .output()
                .expect("lspci (pciutils) must be installed");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let numbered = identities(&lspci(&["-vvv", "-nn"]));
        let named = identities(&lspci(&["-vvv"]));
        assert_eq!(named.len(), numbered.len(), "{}", dump.display());
        for (bdf, ids) in &named {
            let truth = &numbered[bdf];
            // Class and kind always come back; a device name the database gives two numbers
            // (Intel has seven "82576 Gigabit Network Connection") stays unknown (0x0000),
            // never a guess.
            assert_eq!(ids[2..], truth[2..], "{} {bdf}", dump.display());
            if ids[0] == "0x0000" {
                unresolved.push(format!("{bdf} of {}", dump.display()));
                continue;
            }
            assert_eq!(ids, truth, "{} {bdf}", dump.display());
            functions += 1;
        }
    }
    eprintln!("{functions} functions identified by name; not told apart: {unresolved:?}");
    assert!(
        functions >= 150 && unresolved.len() * 10 <= functions,
        "{functions} {unresolved:?}"
    );
}
