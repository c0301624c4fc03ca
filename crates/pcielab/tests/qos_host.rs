//! The host backend against `fixtures/resctrl` (a directory shaped like /sys/fs/resctrl on the
//! seed's MPAM machine): every read path, and writes on a copy: a request the kernel would refuse
//! never reaches the files, an accepted one lands as the kernel would receive it.

use std::path::{Path, PathBuf};

use pcielab::qos::backend::{Op, QosBackend};
use pcielab::qos::host::HostResctrl;

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
    // The seed's readings of p1 on nodes 0-3.
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
    assert!(err.to_string().contains("no resctrl mounted here"), "{err}");
}
