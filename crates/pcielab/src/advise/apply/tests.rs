//! Apply and undo on a copy of the server fixture (fixtures/advise/server): every file a change
//! touches is compared before and after, including when the kernel refuses a write half-way.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::advise::facts::read_system;
use crate::advise::{advise, AdviseOptions};
use crate::machine::Machine;

/// A private copy of the server fixture (symlinks kept), as a host root.
fn server_copy() -> (tempfile::TempDir, PathBuf) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/advise/server");
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&fixture)
        .arg(dir.path().join("root"))
        .status()
        .unwrap();
    assert!(status.success());
    let root = dir.path().join("root");
    (dir, root)
}

fn advice_of(root: &Path) -> Advice {
    let machine = Machine::host_at(root.to_path_buf());
    advise(
        &machine,
        &AdviseOptions {
            link_samples: 1,
            ..AdviseOptions::default()
        },
    )
    .unwrap()
}

fn options(root: &Path) -> ApplyOptions {
    ApplyOptions {
        root: root.to_path_buf(),
        dry_run: false,
        force: false,
        privileged: true,
        settle: std::time::Duration::ZERO,
    }
}

fn undo_options(root: &Path) -> UndoOptions {
    UndoOptions {
        root: root.to_path_buf(),
        privileged: true,
        force: false,
    }
}

/// Makes `path` refuse every write from this thread, as a kernel attribute that rejects a value
/// does: read-only bits, and CAP_DAC_OVERRIDE dropped from this thread's effective capabilities
/// (capabilities are per thread) so that root is refused too.
fn refuse_writes(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444)).unwrap();
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    const CAP_DAC_OVERRIDE: u32 = 1;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: capget/capset read and write the header and two data words given, for this thread.
    unsafe {
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
            0
        );
        data[0].effective &= !(1 << CAP_DAC_OVERRIDE);
        assert_eq!(
            libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()),
            0
        );
    }
    assert!(
        std::fs::OpenOptions::new().write(true).open(path).is_err(),
        "{} still writable",
        path.display()
    );
}

/// The bytes of every file the findings' writes name.
fn snapshot(root: &Path, findings: &[&Finding]) -> BTreeMap<String, Vec<u8>> {
    findings
        .iter()
        .flat_map(|f| &f.fix.writes)
        .map(|w| (w.file.clone(), std::fs::read(root.join(&w.file)).unwrap()))
        .collect()
}

#[test]
fn apply_writes_the_undo_file_first_and_undo_restores_every_byte() {
    let (_dir, root) = server_copy();
    let advice = advice_of(&root);
    let wanted = [
        "aspm-busy-link".to_string(),
        "cpu-governor".into(),
        "devfreq-governor".into(),
    ];
    let chosen = select(&advice, &wanted).unwrap();
    let before = snapshot(&root, &chosen);
    assert_eq!(before.len(), 6, "{before:?}"); // l1_aspm, 4 governors, dmc
    let undo_file = root.join("../undo.json");
    let changes = apply(
        &chosen,
        Some(&read_system(&root)),
        &undo_file,
        &options(&root),
    )
    .unwrap();
    assert_eq!(changes.len(), 6);
    let after = snapshot(&root, &chosen);
    assert_eq!(
        after["sys/bus/pci/devices/0000:06:00.0/link/l1_aspm"],
        b"0\n"
    );
    assert_eq!(
        after["sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"],
        b"performance\n"
    );
    assert_eq!(after["sys/class/devfreq/dmc/governor"], b"performance\n");
    // The findings read from these files are gone. (aspm-busy-link reads LnkCtl from
    // `config`, which a kernel rewrites when l1_aspm is written and this tree cannot.)
    let again = advice_of(&root);
    for id in ["cpu-governor", "devfreq-governor"] {
        assert!(
            again.findings.iter().all(|f| f.id != id),
            "{id} still found"
        );
    }
    let restored = undo(&undo_file, &undo_options(&root)).unwrap();
    assert_eq!(restored.len(), 6);
    assert_eq!(snapshot(&root, &chosen), before);
}

#[test]
fn a_write_the_kernel_refuses_half_way_restores_what_was_changed() {
    let (_dir, root) = server_copy();
    let advice = advice_of(&root);
    let chosen = select(
        &advice,
        &["aspm-busy-link".to_string(), "cpu-governor".into()],
    )
    .unwrap();
    let before = snapshot(&root, &chosen);
    // cpu3's governor refuses the write: l1_aspm and cpu0-2 are written before it.
    refuse_writes(&root.join("sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"));
    let undo_file = root.join("../undo.json");
    let err = apply(
        &chosen,
        Some(&read_system(&root)),
        &undo_file,
        &options(&root),
    )
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.exit_code(), 1, "{text}");
    assert!(
        text.contains("cpu3/cpufreq/scaling_governor") && text.contains("refused"),
        "{text}"
    );
    assert!(text.contains("restored the 4 file(s) changed"), "{text}");
    assert_eq!(
        snapshot(&root, &chosen),
        before,
        "every touched file as it was"
    );
    // The journal was created before the first change and records every change.
    let journal: UndoJournal =
        serde_json::from_str(&std::fs::read_to_string(&undo_file).unwrap()).unwrap();
    assert_eq!(journal.changes.len(), 5);
    assert_eq!(journal.changes[0].check, "aspm-busy-link");
    assert_eq!(journal.changes[0].before, "1");
    assert_eq!(journal.changes[0].written, "0");
}

#[test]
fn an_undo_the_kernel_refuses_half_way_restores_what_it_had_written() {
    let (_dir, root) = server_copy();
    let advice = advice_of(&root);
    let chosen = select(&advice, &["cpu-governor".to_string()]).unwrap();
    let before = snapshot(&root, &chosen);
    let undo_file = root.join("../undo.json");
    apply(&chosen, None, &undo_file, &options(&root)).unwrap();
    let applied = snapshot(&root, &chosen);
    assert_ne!(applied, before);
    // Undone last first: cpu3, cpu2, then cpu1 refuses; cpu3 and cpu2 get "performance" back.
    refuse_writes(&root.join("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor"));
    let err = undo(&undo_file, &undo_options(&root)).unwrap_err();
    assert_eq!(err.exit_code(), 1, "{err}");
    assert!(
        err.to_string().contains("restored the 2 file(s) changed"),
        "{err}"
    );
    assert_eq!(snapshot(&root, &chosen), applied);
}

#[test]
fn an_unreadable_target_or_a_missing_privilege_changes_nothing() {
    let (_dir, root) = server_copy();
    let dmc = root.join("sys/class/devfreq/dmc/governor");
    let advice = advice_of(&root);
    let chosen = select(
        &advice,
        &["devfreq-governor".to_string(), "cpu-governor".into()],
    )
    .unwrap();
    let before = snapshot(&root, &chosen);
    let undo_file = root.join("../undo.json");
    let unprivileged = ApplyOptions {
        privileged: false,
        ..options(&root)
    };
    let err = apply(&chosen, None, &undo_file, &unprivileged).unwrap_err();
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains("needs root"), "{err}");
    assert!(!undo_file.exists());
    // A directory where the governor file should be: found before anything is written.
    std::fs::remove_file(&dmc).unwrap();
    std::fs::create_dir(&dmc).unwrap();
    let err = apply(&chosen, None, &undo_file, &options(&root)).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(
        err.to_string()
            .contains("dmc/governor is a directory, not a kernel attribute file"),
        "{err}"
    );
    std::fs::remove_dir(&dmc).unwrap();
    std::fs::write(&dmc, b"simple_ondemand\n").unwrap();
    assert_eq!(snapshot(&root, &chosen), before);
    // Dry run: the writes, with the values now in place, and no file touched.
    let dry = ApplyOptions {
        dry_run: true,
        ..options(&root)
    };
    let shown = apply(&chosen, None, &undo_file, &dry).unwrap();
    assert_eq!(shown[0].previous, "simple_ondemand");
    assert_eq!(shown[0].value, "performance");
    assert_eq!(snapshot(&root, &chosen), before);
    assert!(!undo_file.exists());
}

#[test]
fn irqbalance_blocks_irq_moves_unless_forced_and_printed_fixes_cannot_be_applied() {
    let (_dir, root) = server_copy();
    let advice = advice_of(&root);
    let chosen = select(&advice, &["irq-far-node@0000:06:00.0".to_string()]).unwrap();
    let undo_file = root.join("../undo.json");
    let system = read_system(&root);
    assert!(system.irqbalance_running);
    let err = apply(&chosen, Some(&system), &undo_file, &options(&root)).unwrap_err();
    assert!(err.to_string().contains("irqbalance"), "{err}");
    let forced = ApplyOptions {
        force: true,
        ..options(&root)
    };
    apply(&chosen, Some(&system), &undo_file, &forced).unwrap();
    let now = std::fs::read_to_string(root.join("proc/irq/120/smp_affinity_list")).unwrap();
    assert_eq!(now, "0-7\n");
    let err = select(&advice, &["mps-below-path".to_string()]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("no runtime fix"), "{err}");
}

#[test]
fn a_link_that_counts_errors_after_an_aspm_change_rolls_the_change_back() {
    let (_dir, root) = server_copy();
    let advice = advice_of(&root);
    let chosen = select(&advice, &["aspm-busy-link".to_string()]).unwrap();
    let before = snapshot(&root, &chosen);
    let aer = root.join("sys/bus/pci/devices/0000:06:00.0/aer_dev_correctable");
    let counted = std::fs::read_to_string(&aer).unwrap();
    // The "kernel" counts two replays on the link while the change settles.
    let bump = {
        let aer = aer.clone();
        let worse = counted.replace("TOTAL_ERR_COR 0", "TOTAL_ERR_COR 2");
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            std::fs::write(aer, worse).unwrap();
        })
    };
    let settling = ApplyOptions {
        settle: std::time::Duration::from_millis(400),
        ..options(&root)
    };
    let err = apply(&chosen, None, &root.join("../undo.json"), &settling).unwrap_err();
    bump.join().unwrap();
    let text = err.to_string();
    assert!(
        text.contains("0000:06:00.0 counted 2 more correctable AER error(s) (0 -> 2)"),
        "{text}"
    );
    assert!(text.contains("restored the 1 file(s) changed"), "{text}");
    assert_eq!(snapshot(&root, &chosen), before);
    // Without new errors the same change stays (recorded in a new journal: the first one is
    // never replaced).
    std::fs::write(&aer, &counted).unwrap();
    apply(&chosen, None, &root.join("../undo-2.json"), &settling).unwrap();
    assert_eq!(
        std::fs::read(root.join("sys/bus/pci/devices/0000:06:00.0/link/l1_aspm")).unwrap(),
        b"0\n"
    );
}
