//! Boots real QEMU guests (TCG, Debian cloud kernel fetched into the cache) with a topology built
//! in code: the guest's own sysfs must show the functions at the addresses the spec gives, and a
//! hanging guest or a panicking kernel must fail in the right phase with QEMU cleaned up.

use super::common;

use common::{function_at, switch_and_expander};
use std::path::Path;
use std::time::Duration;

use crate::lab::argv::{self, MachineOptions};
use crate::lab::guest;
use crate::lab::session::{run, KernelChoice, RunOptions};
use crate::lab::Phase;
use crate::pcie::Generation;
use crate::topology::{Link, Topology};

/// A root port (Gen3 x4) with a switch and two NVMe, and an expander bridge on NUMA node 1.
fn topology() -> Topology {
    let mut functions = switch_and_expander();
    function_at(&mut functions, "00:02.0").link = Some(Link {
        max_speed: Some(Generation::Gen3),
        max_width: Some(4),
        speed: None,
        width: None,
    });
    function_at(&mut functions, "00:04.0").numa_node = Some(1);
    Topology::new(functions)
}

fn options(script: &str, timeout_s: u64, results: &Path) -> RunOptions {
    RunOptions {
        machine: MachineOptions::default(),
        kernel: KernelChoice::Debian,
        script: Some(script.to_string()),
        files: Vec::new(),
        pcielab: None,
        with_fio: false,
        tools: Vec::new(),
        monitor_hook: false,
        timeout: Duration::from_secs(timeout_s),
        keep: false,
        results_dir: Some(results.to_path_buf()),
        cache: guest::cache_dir(),
    }
}

/// QEMU processes whose parent is this test process.
fn qemu_children() -> Vec<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            let is_qemu = status.lines().any(|l| l.contains("qemu-system"));
            let ours = status
                .lines()
                .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(me.as_str()));
            (is_qemu && ours).then(|| e.file_name().to_str()?.parse().ok())?
        })
        .collect()
}

#[test]
fn guest_sysfs_matches_the_topology_and_failures_name_their_phase() {
    // The link speeds expected below are QEMU 7.2's (fixed 2.5 GT/s endpoints, no capability on
    // xio3130 downstream ports); another QEMU must fail here, not further down.
    let qemu = guest::find_tool("qemu-system-x86_64", "qemu-system-x86", "test").unwrap();
    assert_eq!(
        argv::installed_qemu_version(&qemu),
        Some(argv::QEMU_VERSION),
        "these expectations hold for QEMU {:?}",
        argv::QEMU_VERSION
    );
    let dir = tempfile::tempdir().unwrap();
    let script = "for d in /sys/bus/pci/devices/*; do \
        echo \"${d##*/} $(cat $d/vendor) $(cat $d/device) $(cat $d/numa_node) \
        $(cat $d/max_link_speed 2>/dev/null | cut -d' ' -f1)\"; done > ids.txt\n";
    let mut phases = Vec::new();
    let report = run(
        &topology(),
        &options(script, 120, &dir.path().join("ok")),
        &mut |p| phases.push(p),
    )
    .unwrap();
    assert_eq!(report.script_status, 0);
    assert_eq!(
        phases,
        vec![
            Phase::Prepare,
            Phase::FetchKernel,
            Phase::GuestImage,
            Phase::Boot,
            Phase::GuestScript,
            Phase::Results,
            Phase::Shutdown
        ]
    );
    let ids = std::fs::read_to_string(report.results_dir.join("ids.txt")).unwrap();
    for expected in [
        "0000:00:02.0 0x1b36 0x000c -1 8.0",
        "0000:01:00.0 0x104c 0x8232 -1 2.5",
        "0000:02:01.0 0x104c 0x8233 -1 Unknown",
        "0000:04:00.0 0x1b36 0x0010 -1 2.5",
        "0000:80:00.0 0x1b36 0x000c 1 16.0",
        "0000:81:00.0 0x1b36 0x0010 1 2.5",
    ] {
        assert!(ids.lines().any(|l| l == expected), "{expected} in\n{ids}");
    }
    assert!(report.results_dir.join("dmesg.txt").is_file());
    assert!(qemu_children().is_empty());
    eprintln!(
        "boot {:.1} s, boot-to-result {:.1} s",
        report.boot_s, report.boot_to_result_s
    );

    // The error of a run of `script` stopped after `timeout_s`, its results under `name`.
    let failure = |script: &str, timeout_s, name: &str| {
        run(
            &topology(),
            &options(script, timeout_s, &dir.path().join(name)),
            &mut |_| {},
        )
        .unwrap_err()
    };
    // A guest that hangs: stopped at the timeout, in the guest-script phase.
    let err = failure("echo about to hang; sleep 600\n", 25, "hang");
    let msg = err.message();
    assert_eq!(err.exit_code(), 1);
    assert!(
        msg.starts_with("lab phase 'guest-script': guest made no progress for 25 s"),
        "{msg}"
    );
    assert!(msg.contains("--- last guest console lines ---\n"), "{msg}");
    assert!(
        msg.ends_with("about to hang"),
        "the script's output reaches the console: {msg}"
    );
    assert!(qemu_children().is_empty());

    // A kernel panic: reported as such, with the panic line.
    let err = failure("echo c > /proc/sysrq-trigger\n", 60, "panic");
    let msg = err.message();
    assert!(
        msg.starts_with("lab phase 'guest-script': guest kernel panic: "),
        "{msg}"
    );
    assert!(msg.contains("Kernel panic - not syncing"), "{msg}");
    assert!(qemu_children().is_empty());
}
