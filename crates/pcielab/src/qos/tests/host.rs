//! The host backend against `fixtures/resctrl` (a directory shaped like /sys/fs/resctrl on the
//! the MPAM/resctrl article's MPAM machine): every read path, and writes on a copy: a request the kernel would refuse
//! never reaches the files, an accepted one lands as the kernel would receive it.

use std::path::{Path, PathBuf};

use crate::qos::backend::{Op, QosBackend};
use crate::qos::HostResctrl;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/resctrl")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn reads_info_groups_and_padded_schemata() {
    let mut host = HostResctrl::new(fixture());
    let rs = host.read().unwrap();
    let l3 = rs.info.cache("L3").unwrap();
    assert_eq!(
        (l3.num_closids, l3.cbm_mask, l3.shareable_bits),
        (16, 0x7fff, 0x7fff)
    );
    assert!(l3.sparse_masks);
    assert_eq!(l3.domains, vec![0, 1, 2, 3]);
    let mb = rs.info.mb.as_ref().unwrap();
    assert_eq!((mb.min_bandwidth, mb.bandwidth_gran), (2, 2));
    let mon = rs.info.mon.as_ref().unwrap();
    assert_eq!(mon.num_rmids, 32);
    assert_eq!(mon.mon_features, vec!["llc_occupancy", "mbm_total_bytes"]);
    assert_eq!(rs.last_cmd_status, "ok");
    let p1 = rs.group("p1").unwrap();
    // Zero-padded masks and space-padded MB values, as older kernels print them.
    assert_eq!(p1.schemata.get("L3", 2), Some(1));
    assert_eq!(p1.schemata.get("MB", 3), Some(10));
    // The control group's tasks file lists m1's task too; it belongs to m1.
    assert_eq!(p1.tasks.iter().copied().collect::<Vec<_>>(), vec![4242]);
    assert_eq!(p1.mon_groups[0].name, "m1");
    assert!(p1.mon_groups[0].tasks.contains(&4243));
    assert_eq!(rs.group("").unwrap().cpus.to_list(), "0-95");
    assert_eq!(rs.all_tasks().len(), 5);
}

#[test]
fn reads_mon_data_with_unavailable_counters() {
    let mut host = HostResctrl::new(fixture());
    let data = host.mon_data().unwrap();
    let get = |g: &str, d: u32| data.iter().find(|r| r.group == g && r.domain == d).unwrap();
    // The MPAM/resctrl article's readings of p1 on nodes 0-3.
    let occ: Vec<u64> = (0..4)
        .map(|d| get("p1", d).llc_occupancy.unwrap())
        .collect();
    assert_eq!(occ, vec![395264, 296960, 390144, 459776]);
    assert_eq!(get("p1", 1).mbm_total_bytes, Some(2_000_000));
    assert_eq!(get("p1", 3).mbm_total_bytes, None);
    assert_eq!(get("p1/m1", 0).llc_occupancy, Some(131072));
    assert_eq!(get("/", 0).mbm_local_bytes, None);
}

#[test]
fn refused_writes_never_reach_the_files_and_accepted_ones_do() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), dir.path());
    let mut host = HostResctrl::new(dir.path().to_path_buf());
    let schemata = dir.path().join("p1/schemata");
    let original = std::fs::read_to_string(&schemata).unwrap();
    let err = host
        .perform(&Op::Schemata {
            group: "p1".into(),
            text: "L3:0=8000\n".into(),
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("\"Mask out of range\" (EINVAL)"),
        "{err}"
    );
    assert_eq!(err.exit_code(), 2);
    assert_eq!(std::fs::read_to_string(&schemata).unwrap(), original);
    let err = host
        .perform(&Op::Tasks {
            group: "p1/m1".into(),
            text: "300".into(),
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Can't move task to different control group"),
        "{err}"
    );
    host.perform(&Op::Schemata {
        group: "p1".into(),
        text: "MB:0=33\n".into(),
    })
    .unwrap();
    assert_eq!(std::fs::read_to_string(&schemata).unwrap(), "MB:0=33\n");
    host.perform(&Op::Mkdir { group: "p2".into() }).unwrap();
    assert!(dir.path().join("p2").is_dir());
    let err = host.perform(&Op::Mkdir { group: "p1".into() }).unwrap_err();
    assert!(err.to_string().contains("EEXIST"), "{err}");
}

#[test]
fn a_missing_mount_is_a_clear_runtime_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("schemata"), "L3:0=f\n").unwrap();
    let err = HostResctrl::new(dir.path().to_path_buf())
        .read()
        .unwrap_err();
    assert_eq!(err.exit_code(), 1);
    assert!(
        err.to_string().contains("resctrl is not mounted here")
            && err.to_string().contains("mount -t resctrl resctrl"),
        "{err}"
    );
}

/// Build a directory tree from (path, contents) pairs.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn journal(host: &HostResctrl) -> Vec<(String, String, String)> {
    host.journal()
        .iter()
        .map(|w| (w.call.to_string(), w.path.clone(), w.data.clone()))
        .collect()
}

fn w(call: &str, path: &str, data: &str) -> (String, String, String) {
    (call.into(), path.into(), data.into())
}

/// A vendor MPAM kernel: no sparse_masks/delay_linear/thread_throttle_mode/mon_features files,
/// monitor data as plain `mon_L3_01` / `mon_MB_01` files, a 6.12 kernel.
fn vendor_mpam() -> tempfile::TempDir {
    tree(&[
        ("info/L3/num_closids", "16\n"),
        ("info/L3/cbm_mask", "ffff\n"),
        ("info/L3/min_cbm_bits", "1\n"),
        ("info/MB/num_closids", "16\n"),
        ("info/MB/min_bandwidth", "1\n"),
        ("info/MB/bandwidth_gran", "1\n"),
        ("info/L3_MON/num_rmids", "64\n"),
        ("info/last_cmd_status", "ok\n"),
        ("schemata", "L3:1=ffff\nMB:1=100\n"),
        ("tasks", "1\n500\n501\n502\n"),
        ("cpus_list", "0-3\n"),
        ("mon_data/mon_L3_01", "123456\n"),
        ("mon_data/mon_MB_01", "7890\n"),
        ("p1/schemata", "L3:1=00ff\nMB:1=50\n"),
        ("p1/tasks", ""),
        ("p1/cpus_list", "\n"),
        ("p1/mode", "shareable\n"),
        ("p1/mon_data/mon_L3_01", "4096\n"),
        ("p1/mon_data/mon_MB_01", "Unavailable\n"),
        ("proc/500/task/500/stat", ""),
        ("proc/500/task/501/stat", ""),
        ("proc/500/task/502/stat", ""),
    ])
}

#[test]
fn a_vendor_mpam_tree_reads_plain_mon_files_and_moves_every_thread_one_per_write() {
    let dir = vendor_mpam();
    let mut host = HostResctrl::new(dir.path().to_path_buf())
        .with_proc(dir.path().join("proc"))
        .with_release("6.12.0-vendor");
    let rs = host.read().unwrap();
    let l3 = rs.info.cache("L3").unwrap();
    assert!(
        !l3.sparse_masks,
        "no sparse_masks file: contiguous masks only"
    );
    assert_eq!(l3.shareable_bits, 0);
    assert!(rs.info.mb.as_ref().unwrap().delay_linear);
    assert!(rs.info.mon.as_ref().unwrap().mon_features.is_empty());
    let data = host.mon_data().unwrap();
    let get = |g: &str| data.iter().find(|r| r.group == g && r.domain == 1).unwrap();
    assert_eq!(get("/").llc_occupancy, Some(123456));
    assert_eq!(get("/").mbm_total_bytes, Some(7890));
    assert_eq!(get("p1").llc_occupancy, Some(4096));
    assert_eq!(get("p1").mbm_total_bytes, None);

    host.perform(&Op::Tasks {
        group: "p1".into(),
        text: "500".into(),
    })
    .unwrap();
    host.perform(&Op::Mkdir { group: "p2".into() }).unwrap();
    let err = host
        .perform(&Op::Schemata {
            group: "p1".into(),
            text: "MB:1=abc\n".into(),
        })
        .unwrap_err();
    assert!(
        err.to_string().contains("\"Invalid MB value abc\""),
        "{err}"
    );
    assert_eq!(
        journal(&host),
        vec![
            w("write", "p1/tasks", "500\n"),
            w("write", "p1/tasks", "501\n"),
            w("write", "p1/tasks", "502\n"),
            w("mkdir", "p2", ""),
        ]
    );
}

#[test]
fn a_pre_6_7_kernel_gets_one_pid_per_write_and_its_own_messages() {
    let dir = tree(&[
        ("info/L3/num_closids", "16\n"),
        ("info/L3/cbm_mask", "7ff\n"),
        ("info/L3/min_cbm_bits", "1\n"),
        ("info/L3/shareable_bits", "0\n"),
        ("info/MB/num_closids", "8\n"),
        ("info/MB/min_bandwidth", "10\n"),
        ("info/MB/bandwidth_gran", "10\n"),
        ("info/MB/delay_linear", "1\n"),
        ("info/last_cmd_status", "ok\n"),
        ("schemata", "    L3:0=7ff\n    MB:0=100\n"),
        ("tasks", "1\n700\n701\n800\n"),
        ("cpus_list", "0-7\n"),
        ("g/schemata", "    L3:0=00f\n    MB:0= 50\n"),
        ("g/tasks", ""),
        ("g/cpus_list", "\n"),
        // 700 is a process with a second thread 701; 800 has no /proc entry (kept as named).
        ("proc/700/task/700/stat", ""),
        ("proc/700/task/701/stat", ""),
    ]);
    let mut host = HostResctrl::new(dir.path().to_path_buf())
        .with_proc(dir.path().join("proc"))
        .with_release("6.1.0-18-amd64");
    assert!(!host.read().unwrap().info.rules.pid_lists);
    host.perform(&Op::Tasks {
        group: "g".into(),
        text: "700,800".into(),
    })
    .unwrap();
    let err = host
        .perform(&Op::Schemata {
            group: "g".into(),
            text: "MB:0=abc\n".into(),
        })
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("\"Non-decimal digit in MB value abc\""),
        "{err}"
    );
    let err = host
        .perform(&Op::Schemata {
            group: "g".into(),
            text: "L3:0=5\n".into(),
        })
        .unwrap_err();
    assert!(err.to_string().contains("non-consecutive"), "{err}");
    assert_eq!(
        journal(&host),
        vec![
            w("write", "g/tasks", "700\n"),
            w("write", "g/tasks", "701\n"),
            w("write", "g/tasks", "800\n")
        ]
    );
}

#[test]
fn an_unmounted_resctrl_says_how_to_mount_it_and_writes_nothing() {
    let dir = tree(&[("README", "not resctrl\n")]);
    for precheck in [true, false] {
        let mut host = HostResctrl::new(dir.path().to_path_buf()).with_precheck(precheck);
        let err = host.perform(&Op::Mkdir { group: "p1".into() }).unwrap_err();
        assert_eq!(err.exit_code(), 1);
        assert!(
            err.to_string().contains("mount -t resctrl resctrl"),
            "{err}"
        );
        assert!(journal(&host).is_empty());
    }
    assert!(!dir.path().join("p1").exists());
}

#[test]
fn without_the_precheck_the_kernel_decides_and_its_status_is_quoted() {
    let dir = vendor_mpam();
    let mut host = HostResctrl::new(dir.path().to_path_buf()).with_precheck(false);
    // The model would refuse a mask beyond cbm_mask; the "kernel" (a plain file here) takes it.
    host.perform(&Op::Schemata {
        group: "p1".into(),
        text: "L3:1=1ffff\n".into(),
    })
    .unwrap();
    assert_eq!(
        journal(&host),
        vec![w("write", "p1/schemata", "L3:1=1ffff\n")]
    );
    std::fs::write(
        dir.path().join("info/last_cmd_status"),
        "Mask out of range\n",
    )
    .unwrap();
    let err = host.perform(&Op::Mkdir { group: "p1".into() }).unwrap_err();
    assert!(
        err.to_string()
            .contains("info/last_cmd_status: \"Mask out of range\""),
        "{err}"
    );
}

#[test]
fn symlinked_groups_are_neither_read_nor_written_through() {
    let outside = tree(&[
        ("schemata", "L3:1=ffff\n"),
        ("tasks", ""),
        ("cpus_list", "\n"),
    ]);
    let dir = vendor_mpam();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("evil")).unwrap();
    let mut host = HostResctrl::new(dir.path().to_path_buf()).with_precheck(false);
    assert!(host.read().unwrap().group("evil").is_none());
    let err = host
        .perform(&Op::Schemata {
            group: "evil".into(),
            text: "L3:1=1\n".into(),
        })
        .unwrap_err();
    assert!(err.to_string().contains("evil"), "{err}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("schemata")).unwrap(),
        "L3:1=ffff\n"
    );
    for bad in ["..", ".", "p1/..", "info", "../x"] {
        assert!(
            host.perform(&Op::Mkdir { group: bad.into() }).is_err(),
            "{bad}"
        );
    }
}
