//! `pcielab advise` against a real kernel: QEMU lab guests (QEMU 7.2 under TCG, Debian's 6.1
//! cloud kernel) built to show the conditions of each check. In each guest pcielab runs
//! `advise --json` on the live machine, and the guest's own `lspci -D -vvv` (pciutils, copied in
//! with `lab run --tool`) and the kernel files the checks read are saved beside it; every piece
//! of evidence is compared with them, then each case asserts what the guest kernel shows:
//!
//! a. root ports whose LnkCap QEMU's `x-speed`/`x-width` set above their 2.5 GT/s x1 children
//!    (QEMU 7.2 cannot make a link train below both ends): sysfs shows the port's capability
//!    and both ends at 2.5 GT/s x1, the kernel reports no limited link, lspci marks nothing,
//!    and advise (judging against the lower end's capability) raises no `link-downtrained`;
//! b. `pcie_aspm.policy=powersave`: QEMU advertises L0s, the kernel turns it on in its
//!    bookkeeping (`link/l0s_aspm` = 1) for links whose device a driver enabled, but QEMU 7.2's
//!    LnkCtl ASPM bits are read-only, so the register (and lspci, and advise) says disabled and
//!    nothing is raised;
//! c. `pci=pcie_bus_safe` and `pci=pcie_bus_perf`: QEMU 7.2 functions support only 128 B and
//!    their DevCtl payload fields are read-only, so both give 128 B everywhere; advise's MPS and
//!    MRRS findings follow the guest's DevCtl values, before and after its printed setpci;
//! d. an NVMe on NUMA node 1 whose interrupt is pinned to node 0's CPU: `irq-far-node` (while
//!    the move is pending, and once an interrupt delivered it), then `--apply` (the guest's
//!    /proc/irq shows node 1's CPU, the re-run has no finding) and `--undo` (the pinned
//!    affinity exactly); a multi-queue NVMe whose managed vectors the kernel spreads over both
//!    nodes (and refuses to move) is not a finding;
//! e. intel-iommu: `iommu-translated` with the guest's iommu_groups and dmar0, strict then the
//!    printed kernel parameters on the next boots (lazy: info; passthrough: gone);
//! f. one machine, one answer: pcielab on the guest's live sysfs and the same pcielab reading
//!    the guest's own `lspci -vvv -k` and `lspci -k -xxxx` agree on every register fact and on
//!    the PCIe findings; a plain `lspci -xxxx` judges less, never differently.
//!
//! Each guest configuration boots once per run of this file, one at a time (TCG is CPU-heavy);
//! tests that share a configuration share its results. QEMU missing fails, naming the package.

use crate::common;

use common::{assert_lspci_agrees, lspci_register, ok, pcielab};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Saves what the guest says at one moment, under a name: advise's JSON (and exit status),
/// lspci -vvv, and the kernel files the checks read as `path<TAB>value` lines.
const PRELUDE: &str = r#"cd /results
cat /proc/cmdline > cmdline.txt
fold() { tr '\n' ' ' | sed 's/ *$//'; }
stage() {
  pcielab advise --json > "$1.advise.json" 2> "$1.advise.err"
  echo $? > "$1.advise.rc"
  lspci -D -vvv > "$1.lspci" 2>/dev/null
  for f in /sys/bus/pci/devices/*/numa_node /sys/bus/pci/devices/*/*_link_speed \
      /sys/bus/pci/devices/*/*_link_width /sys/bus/pci/devices/*/link/*_aspm \
      /sys/bus/pci/devices/*/iommu_group/type /sys/kernel/iommu_groups/*/type \
      /sys/module/pcie_aspm/parameters/policy /sys/devices/system/node/node*/cpulist \
      /proc/irq/*/smp_affinity_list /proc/irq/*/effective_affinity_list; do
    if [ -f "$f" ]; then printf '%s\t%s\n' "$f" "$(fold < "$f")"; fi
  done > "$1.files"
  for d in /sys/bus/pci/devices/*; do
    if [ -d "$d/msi_irqs" ]; then printf '%s\t%s\n' "$d/msi_irqs" "$(ls "$d/msi_irqs" | sort -n | fold)"; fi
    if [ -e "$d/iommu_group" ]; then printf '%s\t%s\n' "$d/iommu_group" "$(basename "$(readlink "$d/iommu_group")")"; fi
  done >> "$1.files"
  for d in /sys/class/iommu/*/devices; do
    if [ -d "$d" ]; then printf '%s\t%s\n' "$d" "$(ls "$d" | fold)"; fi
  done >> "$1.files"
}
# --apply of a check: its output, error and exit status under a name.
try_apply() {
  pcielab advise --apply "$2" --undo-file "/results/$1.undo.json" --json > "$1.apply.json" 2> "$1.apply.err"
  echo $? > "$1.apply.rc"
}
"#;

/// Cases a, b, c: the state as booted; advise's printed MRRS fix run with the real setpci; a
/// direct write of LnkCtl's ASPM Control field read back; `--apply aspm-busy-link` tried.
const LINKS: &str = r#"stage main
pcielab topo --json > main.topo.json
lspci -vvv -k > main.vvvk.txt 2>/dev/null
lspci -k -xxxx > main.kxxxx.txt 2>/dev/null
lspci -xxxx > main.xxxx.txt 2>/dev/null
pcielab advise --only mrrs-small > mrrs.txt
sed -n 's/^  fix: \(setpci -s [^ ]* [^ ]*\) (MRRS.*/\1/p' mrrs.txt > fixes.sh
while read -r fix; do $fix; echo "$fix -> $?" >> fixes.log; done < fixes.sh
stage after-setpci
for bdf in 0000:00:02.0 0000:03:00.0; do
  before=$(setpci -s $bdf CAP_EXP+10.w)
  setpci -s $bdf CAP_EXP+10.w=0001:0003
  echo "$bdf $before $(setpci -s $bdf CAP_EXP+10.w)" >> lnkctl.txt
done
try_apply aspm aspm-busy-link
"#;

/// Case d: IRQs as the kernel placed them, pinned to node 0, applied, undone; then an attempt
/// to move each vector of the multi-queue NVMe to CPU 0.
///
/// x86 without interrupt remapping moves an MSI when an interrupt arrives (here it took one
/// or two): each change is saved once as written (the move pending) and once after direct
/// reads from the drive delivered it.
const NUMA: &str = r#"irq=$(ls /sys/bus/pci/devices/0000:81:00.0/msi_irqs)
reads=0
kick() {
  n=0
  while [ $n -lt 20 ] && [ "$(cat /proc/irq/$irq/effective_affinity_list)" != "$(cat /proc/irq/$irq/smp_affinity_list)" ]; do
    # A block not read before, past the caches: the read needs the drive, and its completion
    # interrupt comes.
    n=$((n + 1)); reads=$((reads + 1))
    echo 3 > /proc/sys/vm/drop_caches
    dd if=/dev/disk/by-path/pci-0000:81:00.0-nvme-1 of=/dev/null bs=4096 count=1 skip=$((reads * 64)) iflag=direct 2>/dev/null
  done
  echo "$n $(grep " $irq:" /proc/interrupts)" >> kick.log
}
stage booted
echo 0 > /proc/irq/$irq/smp_affinity_list
stage pinned
kick
stage pinned-delivered
try_apply irq irq-far-node@0000:81:00.0
stage applied
kick
stage applied-delivered
pcielab advise --machine host --undo /results/irq.undo.json --json > undo.json 2> undo.err
echo $? > undo.rc
stage undone
kick
stage undone-delivered
for v in $(ls /sys/bus/pci/devices/0000:82:00.0/msi_irqs | sort -n); do
  if echo 0 > /proc/irq/$v/smp_affinity_list; then echo "$v moved"; else echo "$v refused"; fi
done > managed.txt 2>&1
"#;

/// Case e: the state as booted, and `--apply iommu-translated` (a kernel parameter: refused).
const IOMMU: &str = r#"stage main
try_apply iommu iommu-translated
"#;

/// One guest configuration.
struct Boot {
    /// Names its results; boots with the same name happen once.
    name: String,
    spec: String,
    smp: u32,
    kernel_args: Vec<String>,
    qemu_args: Vec<String>,
    script: &'static str,
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
        .display()
        .to_string()
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|w| w.to_string()).collect()
}

/// q35 with an intel-iommu and the interrupt remapping the kernel wants with it.
fn iommu_boot(name: &str, kernel_args: &[&str]) -> Boot {
    Boot {
        name: name.into(),
        spec: "qemu-wide".into(),
        smp: 1,
        kernel_args: words(kernel_args),
        qemu_args: words(&[
            "-device",
            "intel-iommu,intremap=on",
            "-machine",
            "kernel-irqchip=split",
        ]),
        script: IOMMU,
    }
}

fn bus_safe() -> Boot {
    Boot {
        name: "bus-safe".into(),
        spec: "qemu-wide".into(),
        smp: 1,
        kernel_args: words(&["pci=pcie_bus_safe"]),
        qemu_args: Vec::new(),
        script: LINKS,
    }
}

fn bus_perf_powersave() -> Boot {
    Boot {
        name: "bus-perf-powersave".into(),
        spec: "qemu-wide".into(),
        smp: 1,
        kernel_args: words(&["pci=pcie_bus_perf", "pcie_aspm.policy=powersave"]),
        qemu_args: Vec::new(),
        script: LINKS,
    }
}

/// `program` on PATH, or a failure naming the Debian package that has it.
fn installed(program: &str, package: &str) -> String {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{program} is not installed: install the Debian package {package} (.ci/run does)"
            )
        })
        .display()
        .to_string()
}

/// What the guest-side statements here rely on is QEMU 7.2's (Debian 12's) emulation.
fn assert_qemu_7_2() {
    let qemu = installed("qemu-system-x86_64", "qemu-system-x86");
    let out = Command::new(qemu).arg("--version").output().unwrap();
    assert_eq!(
        pcielab::lab::parse_qemu_version(&String::from_utf8_lossy(&out.stdout)),
        Some(pcielab::lab::QEMU_VERSION),
        "these checks describe QEMU 7.2's emulation (hard-wired LnkCtl ASPM and DevCtl payload fields)"
    );
}

static GUESTS: Mutex<BTreeMap<String, PathBuf>> = Mutex::new(BTreeMap::new());

/// Boots `boot` unless this run already did, and returns its results directory.
fn guest(boot: &Boot) -> PathBuf {
    // Held for the whole boot: one guest at a time, and a configuration boots once.
    let mut guests = GUESTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(done) = guests.get(&boot.name) {
        return done.clone();
    }
    assert_qemu_7_2();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("advise_guest")
        .join(&boot.name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.sh");
    std::fs::write(&script, format!("{PRELUDE}{}", boot.script)).unwrap();
    let results = dir.join("results");
    let mut args: Vec<String> = words(&["lab", "run", &boot.spec, "--json", "--timeout", "300"]);
    args.extend(["--smp".into(), boot.smp.to_string()]);
    for arg in &boot.kernel_args {
        args.extend(["--kernel-arg".into(), arg.clone()]);
    }
    for (program, package) in [("lspci", "pciutils"), ("setpci", "pciutils")] {
        args.extend(["--tool".into(), installed(program, package)]);
    }
    args.extend(["--script".into(), script.display().to_string()]);
    args.extend(["--out".into(), results.display().to_string()]);
    if !boot.qemu_args.is_empty() {
        args.push("--".into());
        args.extend(boot.qemu_args.iter().cloned());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: pcielab {}\n{}{}",
        boot.name,
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!(
        "{}: boot to result {:.1} s",
        boot.name,
        report["boot_to_result_s"].as_f64().unwrap()
    );
    let cmdline = read(&results, "cmdline.txt");
    for arg in &boot.kernel_args {
        assert!(cmdline.split_whitespace().any(|w| w == arg), "{cmdline}");
    }
    guests.insert(boot.name.clone(), results.clone());
    results
}

fn read(results: &Path, name: &str) -> String {
    std::fs::read_to_string(results.join(name))
        .unwrap_or_else(|e| panic!("{}: {e}", results.join(name).display()))
}

/// What the guest said at one stage of its script.
struct Stage {
    advice: Value,
    /// Each function's `lspci -vvv` text, by its address with domain.
    lspci: BTreeMap<String, String>,
    /// Kernel file (or directory listing) → value.
    files: BTreeMap<String, String>,
}

fn stage(results: &Path, name: &str) -> Stage {
    assert_eq!(
        read(results, &format!("{name}.advise.rc")).trim(),
        "0",
        "advise in the guest: {}",
        read(results, &format!("{name}.advise.err"))
    );
    let advice = serde_json::from_str(&read(results, &format!("{name}.advise.json"))).unwrap();
    let mut lspci: BTreeMap<String, String> = BTreeMap::new();
    let mut current = String::new();
    for line in read(results, &format!("{name}.lspci")).lines() {
        if !line.starts_with(char::is_whitespace) && !line.is_empty() {
            current = line.split_whitespace().next().unwrap().to_string();
        }
        let block = lspci.entry(current.clone()).or_default();
        block.push_str(line);
        block.push('\n');
    }
    let files = read(results, &format!("{name}.files"))
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Stage {
        advice,
        lspci,
        files,
    }
}

impl Stage {
    fn findings(&self, id: &str) -> Vec<&Value> {
        self.advice["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["id"] == id)
            .collect()
    }

    fn ran(&self, id: &str) -> bool {
        self.advice["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == id && c["judged"].as_u64().unwrap_or(0) > 0)
    }

    fn file(&self, path: &str) -> &str {
        self.files
            .get(path)
            .unwrap_or_else(|| panic!("the guest has no {path}"))
    }

    fn register(&self, bdf: &str, name: &str) -> String {
        lspci_register(&self.lspci[bdf], name)
    }

    /// Functions the guest's lspci shows with a PCI Express capability.
    fn express(&self) -> Vec<&str> {
        self.lspci
            .iter()
            .filter(|(_, text)| text.contains("Capabilities: [") && text.contains("] Express"))
            .map(|(bdf, _)| bdf.as_str())
            .collect()
    }

    /// Every piece of evidence of every finding against the guest: config-space fields against
    /// its lspci -vvv, files against their content there. Returns how many were compared.
    fn assert_evidence_is_the_guests(&self) -> usize {
        let mut compared = 0;
        for f in self.advice["findings"].as_array().unwrap() {
            for e in f["evidence"].as_array().unwrap() {
                let (source, field, value) = (
                    e["source"].as_str().unwrap(),
                    e["field"].as_str().unwrap(),
                    e["value"].as_str().unwrap(),
                );
                if let Some(dir) = source.strip_suffix("/config") {
                    let bdf = dir.rsplit('/').next().unwrap();
                    assert_lspci_agrees(&self.lspci[bdf], bdf, field, value);
                } else {
                    let text = self.file(source);
                    // A selection file's evidence is its bracketed word.
                    let selected = text
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix('[')?.strip_suffix(']'));
                    assert!(
                        text == value || selected == Some(value),
                        "{source}: advise says {value}, the guest {text}"
                    );
                }
                compared += 1;
            }
        }
        compared
    }
}

/// The functions a check reported, in address order.
fn functions(findings: &[&Value]) -> Vec<String> {
    let mut list: Vec<String> = findings
        .iter()
        .map(|f| f["function"].as_str().unwrap().to_string())
        .collect();
    list.sort();
    list
}

#[test]
fn a_root_port_limited_by_x_speed_is_not_a_downtrain_as_the_guest_kernel_sees_it() {
    let results = guest(&bus_safe());
    let s = stage(&results, "main");
    s.assert_evidence_is_the_guests();
    assert!(s.ran("link-downtrained"));
    // No link is called downtrained. QEMU 7.2's root ports read DLActive- above working
    // devices: each such link is the failed-link info (speed and width not judged), and the
    // guest's own lspci shows the port's DLActive-.
    for f in s.findings("link-downtrained") {
        let summary = f["summary"].as_str().unwrap();
        assert!(summary.starts_with("data link down"), "{:#}", s.advice);
        assert_eq!(f["severity"], "info");
        let port = f["subject"]
            .as_str()
            .unwrap()
            .trim_start_matches("link ")
            .split(" -> ")
            .next()
            .unwrap();
        let lnksta = s.register(port, "LnkSta");
        assert!(lnksta.contains("DLActive-"), "{port}: {lnksta}");
    }

    // (port, its child, the port's LnkCap as QEMU's x-speed/x-width set it)
    for (port, child, speed, width) in [
        ("0000:00:02.0", "0000:01:00.0", "16.0 GT/s PCIe", "8"),
        ("0000:00:03.0", "0000:05:00.0", "8.0 GT/s PCIe", "4"),
        ("0000:80:00.0", "0000:81:00.0", "16.0 GT/s PCIe", "4"),
    ] {
        let sys = |bdf: &str, attr: &str| s.file(&format!("/sys/bus/pci/devices/{bdf}/{attr}"));
        assert_eq!(sys(port, "max_link_speed"), speed);
        assert_eq!(sys(port, "max_link_width"), width);
        // Both ends run at what the child can do at most: 2.5 GT/s x1.
        for bdf in [port, child] {
            assert_eq!(sys(bdf, "current_link_speed"), "2.5 GT/s PCIe", "{bdf}");
            assert_eq!(sys(bdf, "current_link_width"), "1", "{bdf}");
        }
        assert_eq!(sys(child, "max_link_speed"), "2.5 GT/s PCIe");
        assert_eq!(sys(child, "max_link_width"), "1");
        // lspci shows the same registers; it judges a link at its upstream end only (an
        // endpoint or upstream port against its own LnkCap), so it marks nothing either.
        let gts = speed.split('.').next().unwrap();
        assert!(s
            .register(port, "LnkCap")
            .contains(&format!("Speed {gts}GT/s, Width x{width}")));
        assert!(s
            .register(child, "LnkCap")
            .contains("Speed 2.5GT/s, Width x1"));
        for bdf in [port, child] {
            assert!(
                s.register(bdf, "LnkSta")
                    .starts_with("\t\tLnkSta:\tSpeed 2.5GT/s, Width x1"),
                "{bdf}: {}",
                s.register(bdf, "LnkSta")
            );
        }
    }
    // The kernel's own check (pcie_report_downtraining, on each endpoint and upstream port at
    // enumeration) reports a link only when it limits the device below its own capability:
    // the log enumerated every function and names none.
    let dmesg = read(&results, "dmesg.txt");
    for bdf in ["0000:01:00.0", "0000:05:00.0", "0000:81:00.0"] {
        assert!(
            dmesg.contains(&format!("pci {bdf}: [")),
            "{bdf} not enumerated in dmesg"
        );
    }
    assert!(!dmesg.contains("available PCIe bandwidth"), "{dmesg}");
}

#[test]
fn b_aspm_powersave_is_kept_by_the_kernel_but_not_by_qemus_read_only_lnkctl() {
    let results = guest(&bus_perf_powersave());
    let s = stage(&results, "main");
    s.assert_evidence_is_the_guests();
    assert_eq!(
        s.file("/sys/module/pcie_aspm/parameters/policy"),
        "default performance [powersave] powersupersave"
    );
    // QEMU advertises L0s with a short exit latency at both ends of every link...
    let express = s.express();
    for bdf in &express {
        let lnkcap = s.register(bdf, "LnkCap");
        assert!(
            lnkcap.contains("ASPM L0s, Exit Latency L0s <64ns"),
            "{bdf}: {lnkcap}"
        );
    }
    // ...and the kernel turned it on (the attribute lives on the link's downstream function)
    // for each link whose device a driver enabled: under powersave the kernel leaves ASPM as
    // the firmware set it until pci_enable_device(). The e1000e has no driver in this kernel.
    let mut l0s: Vec<(String, String)> = s
        .files
        .iter()
        .filter_map(|(k, v)| {
            let bdf = k.strip_suffix("/link/l0s_aspm")?.rsplit('/').next()?;
            Some((bdf.to_string(), v.clone()))
        })
        .collect();
    l0s.sort();
    let expected: Vec<(String, String)> = l0s
        .iter()
        .map(|(bdf, _)| {
            let enabled = s.lspci[bdf].contains("Kernel driver in use:");
            (bdf.clone(), if enabled { "1" } else { "0" }.to_string())
        })
        .collect();
    assert_eq!(l0s, expected);
    let on: Vec<&str> = l0s
        .iter()
        .filter(|(_, v)| v == "1")
        .map(|(b, _)| b.as_str())
        .collect();
    assert_eq!(
        on,
        [
            "0000:01:00.0",
            "0000:03:00.0",
            "0000:04:00.0",
            "0000:81:00.0"
        ]
    );
    // ...but QEMU 7.2's LnkCtl ASPM Control field is read-only zero: the register says
    // disabled everywhere, and a direct write reads back unchanged.
    for bdf in &express {
        let lnkctl = s.register(bdf, "LnkCtl");
        assert!(lnkctl.contains("ASPM Disabled"), "{bdf}: {lnkctl}");
    }
    let writes = read(&results, "lnkctl.txt");
    for line in writes.lines() {
        let [bdf, before, after] = line.split_whitespace().collect::<Vec<_>>()[..] else {
            panic!("{writes}");
        };
        assert_eq!(before, after, "{bdf}: LnkCtl {before} -> {after}");
        assert_eq!(u16::from_str_radix(after, 16).unwrap() & 3, 0, "{bdf}");
    }
    assert_eq!(writes.lines().count(), 2, "{writes}");
    // advise judges the register: no L0s is in effect, so nothing is raised, and there is
    // nothing to apply.
    assert!(s.ran("aspm-busy-link"));
    assert!(s.findings("aspm-busy-link").is_empty(), "{:#}", s.advice);
    assert_eq!(read(&results, "aspm.apply.rc").trim(), "2");
    assert!(read(&results, "aspm.apply.err").contains("--apply aspm-busy-link: no such finding"));
}

#[test]
fn c_pcie_bus_safe_and_perf_leave_qemus_128_byte_payloads_and_advise_follows_devctl() {
    for boot in [bus_safe(), bus_perf_powersave()] {
        let results = guest(&boot);
        let s = stage(&results, "main");
        assert!(s.assert_evidence_is_the_guests() > 0, "{}", boot.name);
        // Every function supports 128 B only, so either mode programs 128 B everywhere, and
        // pcie_bus_perf's MRRS = MPS is 128 B as well.
        let express = s.express();
        assert!(express.len() >= 9, "{express:?}");
        for bdf in &express {
            assert!(
                s.register(bdf, "DevCap").contains("MaxPayload 128 bytes"),
                "{bdf}"
            );
            let devctl = s.register(bdf, "DevCtl");
            assert!(
                devctl.contains("MaxPayload 128 bytes, MaxReadReq 128 bytes"),
                "{}: {bdf}: {devctl}",
                boot.name
            );
        }
        // pcie_bus_safe and pcie_bus_perf make the kernel log what it set on each function:
        // the same values as DevCtl.
        let dmesg = read(&results, "dmesg.txt");
        let set: Vec<&str> = dmesg
            .lines()
            .filter(|l| l.contains("Max Payload Size set to"))
            .collect();
        assert!(set.len() >= 9, "{}: {set:#?}", boot.name);
        for line in set {
            let bdf = line
                .split("pci ")
                .nth(1)
                .unwrap()
                .split(": ")
                .next()
                .unwrap();
            assert!(
                line.ends_with("Max Payload Size set to  128/ 128 (was  128), Max Read Rq  128"),
                "{line}"
            );
            assert!(s
                .register(bdf, "DevCtl")
                .contains("MaxPayload 128 bytes, MaxReadReq 128 bytes"));
        }
        for id in ["mps-below-path", "mps-mismatch"] {
            assert!(s.ran(id));
            assert!(s.findings(id).is_empty(), "{}: {id}", boot.name);
        }
        // mrrs-small: exactly the storage/network endpoints with a driver bound (lspci's
        // "Kernel driver in use") whose MRRS lspci shows at 128 B.
        let expected: Vec<String> = s
            .lspci
            .iter()
            .filter(|(_, t)| t.contains("] Express (v2) Endpoint"))
            .filter(|(_, t)| t.contains("Kernel driver in use:"))
            .filter(|(_, t)| t.contains(" Class 01") || t.contains(" Class 02"))
            .filter(|(_, t)| lspci_register(t, "DevCtl").contains("MaxReadReq 128 bytes"))
            .map(|(bdf, _)| bdf.clone())
            .collect();
        assert_eq!(
            functions(&s.findings("mrrs-small")),
            expected,
            "{}",
            boot.name
        );
        assert_eq!(expected.len(), 3, "the three NVMe drives: {expected:?}");

        // The setpci commands advise printed ran in the guest (exit 0), and the register did
        // not change: QEMU 7.2's DevCtl payload fields are read-only. advise still reports
        // what DevCtl says.
        let fixes = read(&results, "fixes.log");
        let printed: Vec<String> = s
            .findings("mrrs-small")
            .iter()
            .map(|f| {
                let command = f["fix"]["command"].as_str().unwrap();
                format!("{} -> 0", command.split(" (MRRS").next().unwrap())
            })
            .collect();
        assert_eq!(fixes.lines().collect::<Vec<_>>(), printed, "{}", boot.name);
        let after = stage(&results, "after-setpci");
        after.assert_evidence_is_the_guests();
        for bdf in &expected {
            assert_eq!(after.register(bdf, "DevCtl"), s.register(bdf, "DevCtl"));
        }
        assert_eq!(functions(&after.findings("mrrs-small")), expected);
    }
}

#[test]
fn d_an_nvme_whose_irq_is_pinned_to_the_far_node_is_found_applied_and_undone() {
    let results = guest(&Boot {
        name: "numa".into(),
        spec: repo("fixtures/advise/guest-numa.toml"),
        smp: 2,
        kernel_args: Vec::new(),
        qemu_args: words(&["-set", "device.d0000_81_00_0.msix_qsize=1"]),
        script: NUMA,
    });
    let pinned = stage(&results, "pinned");
    let nvme = "/sys/bus/pci/devices/0000:81:00.0";
    assert_eq!(pinned.file(&format!("{nvme}/numa_node")), "1");
    assert_eq!(pinned.file("/sys/devices/system/node/node0/cpulist"), "0");
    assert_eq!(pinned.file("/sys/devices/system/node/node1/cpulist"), "1");
    let irq = pinned.file(&format!("{nvme}/msi_irqs")).to_string();
    assert!(irq.parse::<u32>().is_ok(), "one vector: {irq}");
    let affinity = |s: &Stage| {
        ["smp_affinity_list", "effective_affinity_list"]
            .map(|kind| s.file(&format!("/proc/irq/{irq}/{kind}")).to_string())
    };
    let booted = stage(&results, "booted");
    // The kernel put it on node 1's CPU at boot: nothing to find.
    assert_eq!(affinity(&booted), ["1", "1"]);
    assert!(booted.findings("irq-far-node").is_empty());

    // Pinned to node 0: found while the move waits for the next interrupt, and once an
    // interrupt delivered it; every piece of evidence is the guest's file.
    let delivered = stage(&results, "pinned-delivered");
    assert_eq!(affinity(&pinned), ["0", "1"]);
    assert_eq!(affinity(&delivered), ["0", "0"]);
    for s in [&pinned, &delivered] {
        assert!(s.assert_evidence_is_the_guests() >= 4);
        let found = s.findings("irq-far-node");
        assert_eq!(functions(&found), ["0000:81:00.0"], "{:#}", s.advice);
        assert_eq!(
            found[0]["fix"]["writes"],
            serde_json::json!([{"file": format!("proc/irq/{irq}/smp_affinity_list"), "value": "1"}])
        );
    }

    // --apply: its own re-run of the whole advice has the finding gone (the move still
    // pending), and so do the guest's next readings, before and after an interrupt.
    assert_eq!(
        read(&results, "irq.apply.rc").trim(),
        "0",
        "{}",
        read(&results, "irq.apply.err")
    );
    let report: Value = serde_json::from_str(&read(&results, "irq.apply.json")).unwrap();
    assert_eq!(
        report["changes"],
        serde_json::json!([{"file": format!("proc/irq/{irq}/smp_affinity_list"), "previous": "0", "value": "1"}])
    );
    assert_eq!(
        report["recheck"]["gone"],
        serde_json::json!([{"id": "irq-far-node", "subject": "0000:81:00.0", "severity": "perf-loss"}])
    );
    assert_eq!(report["recheck"]["new"], serde_json::json!([]));
    let applied = stage(&results, "applied");
    let applied_delivered = stage(&results, "applied-delivered");
    assert_eq!(affinity(&applied), ["1", "0"]);
    assert_eq!(affinity(&applied_delivered), ["1", "1"]);
    for s in [&applied, &applied_delivered] {
        assert!(s.findings("irq-far-node").is_empty());
    }

    // --undo: exactly the pinned values again, and the finding with them.
    assert_eq!(
        read(&results, "undo.rc").trim(),
        "0",
        "{}",
        read(&results, "undo.err")
    );
    let undone = stage(&results, "undone");
    let undone_delivered = stage(&results, "undone-delivered");
    assert_eq!(affinity(&undone), ["0", "1"]);
    assert_eq!(affinity(&undone_delivered), affinity(&delivered));
    for s in [&undone, &undone_delivered] {
        assert_eq!(functions(&s.findings("irq-far-node")), ["0000:81:00.0"]);
    }
    // Each delivery took reads, and every pending move completed.
    let kicks = read(&results, "kick.log");
    let reads: Vec<u32> = kicks
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(reads.len(), 3, "{kicks}");
    assert!(reads.iter().all(|n| (1..20).contains(n)), "{kicks}");

    // The multi-queue NVMe on the same node: the kernel spread its managed I/O queue vectors
    // over both nodes' CPUs, so some land on node 0 — which a per-vector rule would flag —
    // yet it refuses to move them (EIO); only the admin vector moves. advise raises nothing.
    let queues = "/sys/bus/pci/devices/0000:82:00.0";
    let vectors: Vec<String> = pinned
        .file(&format!("{queues}/msi_irqs"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    assert!(vectors.len() >= 3, "{vectors:?}");
    let on_cpu0 = vectors
        .iter()
        .filter(|v| pinned.file(&format!("/proc/irq/{v}/effective_affinity_list")) == "0")
        .count();
    assert!(on_cpu0 >= 1, "no vector of {queues} on node 0");
    for s in [&booted, &pinned, &delivered, &applied, &undone] {
        assert!(s
            .findings("irq-far-node")
            .iter()
            .all(|f| f["function"] != "0000:82:00.0"));
    }
    let managed = read(&results, "managed.txt");
    let moved: Vec<&str> = managed
        .lines()
        .filter_map(|l| l.strip_suffix(" moved"))
        .collect();
    let refused = managed.lines().filter(|l| l.ends_with(" refused")).count();
    assert_eq!(moved, [vectors[0].as_str()], "{managed}");
    assert_eq!(refused, vectors.len() - 1, "{managed}");
}

/// Kernel parameters a fix names (`iommu.strict=0`, `iommu.passthrough=1`), in its order.
fn kernel_parameters(command: &str) -> Vec<String> {
    command
        .split(|c: char| c.is_whitespace() || c == '(' || c == ',')
        .filter(|w| w.starts_with("iommu.") && w.contains('='))
        .map(str::to_string)
        .collect()
}

#[test]
fn e_intel_iommu_translation_is_what_the_guests_iommu_groups_say() {
    let strict = guest(&iommu_boot(
        "iommu-strict",
        &["intel_iommu=on", "iommu.strict=1"],
    ));
    let s = stage(&strict, "main");
    s.assert_evidence_is_the_guests();
    assert!(read(&strict, "dmesg.txt").contains("DMA domain TLB invalidation policy: strict mode"));
    let found = s.findings("iommu-translated");
    let busy: Vec<String> = s
        .lspci
        .iter()
        .filter(|(_, t)| {
            t.contains("] Express (v2) Endpoint") && t.contains("Kernel driver in use:")
        })
        .map(|(bdf, _)| bdf.clone())
        .collect();
    assert_eq!(functions(&found), busy);
    let dmar = s.file("/sys/class/iommu/dmar0/devices");
    for f in &found {
        assert_eq!(f["severity"], "perf-loss");
        let bdf = f["function"].as_str().unwrap();
        let evidence = &f["evidence"][0];
        assert_eq!(
            evidence["source"],
            format!("/sys/bus/pci/devices/{bdf}/iommu_group/type")
        );
        assert_eq!(evidence["value"], "DMA");
        // The same domain type as the group's own, and the device is behind dmar0.
        let group = s.file(&format!("/sys/bus/pci/devices/{bdf}/iommu_group"));
        assert_eq!(
            s.file(&format!("/sys/kernel/iommu_groups/{group}/type")),
            "DMA"
        );
        assert!(
            dmar.split_whitespace().any(|d| d == bdf),
            "{bdf} not in {dmar}"
        );
    }
    // A kernel parameter is printed, never applied.
    assert_eq!(read(&strict, "iommu.apply.rc").trim(), "2");
    assert!(read(&strict, "iommu.apply.err").contains("iommu.strict=0"));

    // The printed parameters, each on the next boot.
    let params = kernel_parameters(found[0]["fix"]["command"].as_str().unwrap());
    assert_eq!(params, ["iommu.strict=0", "iommu.passthrough=1"]);
    let lazy = guest(&iommu_boot("iommu-lazy", &["intel_iommu=on", &params[0]]));
    let s = stage(&lazy, "main");
    s.assert_evidence_is_the_guests();
    assert!(read(&lazy, "dmesg.txt").contains("DMA domain TLB invalidation policy: lazy mode"));
    let found = s.findings("iommu-translated");
    assert_eq!(functions(&found), busy);
    for f in &found {
        assert_eq!(f["severity"], "info", "the strict finding is gone: {f:#}");
        assert_eq!(f["evidence"][0]["value"], "DMA-FQ");
    }
    let passthrough = guest(&iommu_boot(
        "iommu-passthrough",
        &["intel_iommu=on", &params[1]],
    ));
    let s = stage(&passthrough, "main");
    assert!(read(&passthrough, "dmesg.txt").contains("Default domain type: Passthrough"));
    for bdf in &busy {
        assert_eq!(
            s.file(&format!("/sys/bus/pci/devices/{bdf}/iommu_group/type")),
            "identity"
        );
    }
    assert!(s.ran("iommu-translated"));
    assert!(s.findings("iommu-translated").is_empty(), "{:#}", s.advice);
}

/// Each function's register facts in a `topo --json` document, by address.
fn register_facts(doc: &Value) -> BTreeMap<String, Value> {
    const FACTS: [&str; 12] = [
        "kind",
        "parent",
        "link",
        "mps",
        "mps_supported",
        "mrrs",
        "aspm_supported",
        "aspm_enabled",
        "acs",
        "aer",
        "device_features",
        "errors_detected",
    ];
    doc["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let facts: serde_json::Map<String, Value> = FACTS
                .iter()
                .map(|k| (k.to_string(), f[*k].clone()))
                .collect();
            (f["bdf"].as_str().unwrap().to_string(), Value::Object(facts))
        })
        .collect()
}

/// The findings of the checks that read PCI registers (not the kernel's IRQ, CPU, IOMMU or
/// AER counter files, which no lspci output holds), as `check subject severity`.
fn pcie_findings(advice: &Value) -> BTreeSet<String> {
    const MACHINE_FILES: [&str; 6] = [
        "irq-far-node",
        "cpu-governor",
        "cpu-idle-deep",
        "devfreq-governor",
        "iommu-translated",
        "aer-correctable",
    ];
    advice["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| !MACHINE_FILES.contains(&f["id"].as_str().unwrap()))
        .map(|f| format!("{} {} {}", f["id"], f["subject"], f["severity"]))
        .collect()
}

#[test]
fn f_the_guests_sysfs_and_its_own_lspci_read_as_one_machine() {
    let results = guest(&bus_safe());
    let live: Value = serde_json::from_str(&read(&results, "main.topo.json")).unwrap();
    let live_facts = register_facts(&live);
    let live_findings = pcie_findings(&stage(&results, "main").advice);
    assert!(!live_findings.is_empty(), "nothing to compare");
    for (capture, whole) in [
        ("main.vvvk.txt", true),
        ("main.kxxxx.txt", true),
        ("main.xxxx.txt", false),
    ] {
        let machine = format!("lspci:{}", results.join(capture).display());
        let doc: Value =
            serde_json::from_str(&ok(pcielab(&["topo", "--machine", &machine, "--json"]))).unwrap();
        let read = register_facts(&doc);
        assert_eq!(
            read.keys().collect::<Vec<_>>(),
            live_facts.keys().collect::<Vec<_>>(),
            "{capture}: functions"
        );
        for (bdf, want) in &live_facts {
            assert_eq!(&read[bdf], want, "{capture} {bdf}");
        }
        let advice: Value =
            serde_json::from_str(&ok(pcielab(&["advise", "--machine", &machine, "--json"])))
                .unwrap();
        let found = pcie_findings(&advice);
        if whole {
            assert_eq!(found, live_findings, "{capture}");
        } else {
            // No driver lines: the busy-link checks cannot judge, so findings may be missing,
            // never different or new.
            assert!(found.is_subset(&live_findings), "{capture}: {found:#?}");
        }
    }
}
