//! `--machine lspci:FILE` against the real lspci (pciutils, installed by `.ci/run`). The oracle
//! data are pciutils' own test dumps (fixtures/lspci/pciutils, copied from pciutils 3.9.0's
//! `tests/`) and the `lspci -xxxx` of two QEMU lab guests (fixtures/lspci/qemu): for every one,
//! the facts pcielab decodes from the hex dump must equal what
//! `lspci -F FILE -vvv` prints for the same bytes, and reading that lspci text back must give
//! the same topology JSON as reading the dump.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
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

#[test]
fn every_pciutils_dump_decodes_to_what_the_real_lspci_prints() {
    let mut compared: BTreeMap<&str, usize> = BTreeMap::new();
    for dump in oracle_dumps() {
        let lspci = real_lspci(&dump);
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
            for line in lines {
                if line.starts_with("Capabilities: ") {
                    in_acs = line.contains("Access Control Services");
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
            let aer = lines.iter().any(|l| {
                l.starts_with("Capabilities: [") && l.contains("] Advanced Error Reporting")
            });
            check("aer", &f["aer"], aer.into());
        }
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
    ] {
        assert!(
            compared.get(fact).copied().unwrap_or(0) >= least,
            "{fact}: {compared:?}"
        );
    }
}

/// The topology JSON without what depends on the input's wording: the evidence lines and the
/// description naming the file.
fn facts_only(mut doc: Value) -> Value {
    doc.as_object_mut().unwrap().remove("description");
    for f in doc["functions"].as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("evidence");
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
    assert!(machines.len() >= 47, "{}", machines.len());
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
    // `<access denied>`). What remains is real as the registers read: GPUs (and their audio
    // functions, on the same link) at 2.5 GT/s under 8 GT/s ports, called info because an idle
    // GPU lowers its speed; the Altra's GPU at MaxPayload 128 under a root port that supports
    // 512 and a GPU that supports 256; MaxReadReq 128 on a RAID controller and a NIC; ASPM
    // enabled on links whose endpoints have drivers bound; a P2P pair whose only path is
    // through the host bridge.
    assert_eq!(
        found,
        vec![
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.1\" \"link-downtrained\" \"info\"",
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.0\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/adlink-ampere-altra.txt \"0000:01:00.1\" \"mps-below-path\" \"perf-loss\"",
            "linuxhw/dell-poweredge-r220.txt \"0000:06:00.0\" \"p2p-through-host\" \"info\"",
            "linuxhw/fujitsu-primergy-tx1330-m1.txt \"0000:03:00.0\" \"mrrs-small\" \"perf-loss\"",
            "linuxhw/hpe-ml10-gen9.txt \"0000:02:00.0\" \"link-downtrained\" \"info\"",
            "linuxhw/hpe-ml10-gen9.txt \"0000:02:00.1\" \"link-downtrained\" \"info\"",
            "linuxhw/hpe-ml10-gen9.txt \"0000:02:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-ml10-gen9.txt \"0000:02:00.1\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-proliant-microserver-gen10.txt \"0000:01:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-proliant-microserver-gen10.txt \"0000:02:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/hpe-proliant-microserver-gen10.txt \"0000:02:00.1\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/intel-s1200rp.txt \"0000:03:00.0\" \"aspm-busy-link\" \"perf-loss\"",
            "linuxhw/intel-s3210sh.txt \"0000:02:00.0\" \"mrrs-small\" \"perf-loss\"",
        ]
    );
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
