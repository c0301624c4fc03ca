//! The p2pmem copy on regular files: the "p2pmem" buffer is a shared mapping of a file standing
//! in for `p2pmem/allocate`, so the whole read/write/verify path runs without a P2PDMA kernel.

use crate::input::target_tmp;
use crate::lab::p2pcopy::{resolve_namespace, run, CopyOptions};
use std::fs;

#[test]
fn copy_through_a_shared_mapping_verifies_and_reports_rates() {
    let dir = tempfile::tempdir_in(target_tmp()).unwrap();
    let root = dir.path();
    let allocate = root.join("sys/bus/pci/devices/0000:03:00.0/p2pmem/allocate");
    fs::create_dir_all(allocate.parent().unwrap()).unwrap();
    fs::write(&allocate, vec![0u8; 65536]).unwrap();
    let (src, dst) = (root.join("src.img"), root.join("dst.img"));
    fs::write(&src, vec![0u8; 1 << 20]).unwrap();
    fs::write(&dst, vec![0xffu8; 1 << 20]).unwrap();
    let options = CopyOptions {
        src: src.clone(),
        dst: dst.clone(),
        p2pmem: "03:00.0".parse().unwrap(),
        size: 1 << 20,
        chunk: 65536,
        check: true,
        root: root.to_path_buf(),
    };
    let report = run(&options).unwrap();
    assert!(report.p2p.ok, "{:?}", report.p2p);
    assert_eq!(report.p2p.bytes, 1 << 20);
    assert!(report.p2p.mb_s.unwrap() > 0.0);
    assert_eq!(report.check, Some("match"));
    assert!(report.host_memory.ok);
    // The destination now holds the source's pattern, not its old 0xff fill.
    assert_eq!(fs::read(&src).unwrap(), fs::read(&dst).unwrap());
    assert!(fs::read(&dst).unwrap().iter().any(|&b| b != 0xff));

    // A device without p2pmem is named with the likely cause.
    let err = run(&CopyOptions {
        p2pmem: "04:00.0".parse().unwrap(),
        ..options
    })
    .unwrap_err();
    assert!(
        err.message().contains("0000:04:00.0/p2pmem/allocate"),
        "{err}"
    );
    assert!(err.message().contains("CONFIG_PCI_P2PDMA"), "{err}");

    // Addresses resolve to a namespace through sysfs; paths pass through.
    assert_eq!(
        resolve_namespace(root, "/dev/nvme0n1").unwrap(),
        std::path::PathBuf::from("/dev/nvme0n1")
    );
    let err = resolve_namespace(root, "03:00.0").unwrap_err();
    assert_eq!(
        err.exit_code(),
        1,
        "no sys/block in this root: an I/O error"
    );
}
