//! `advise --undo` tried as a hostile or careless user would, on copies of the server fixture
//! (fixtures/advise/server) used as the machine's root: every tampered journal, unsafe undo
//! file, wrong machine or changed file is refused with exit 2 before anything is written, and
//! the whole tree (every file's bytes, every link's target) is compared before and after.

use crate::common;

use common::{advise_apply as apply, advise_undo as undo, ok, pcielab};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A writable copy of the server fixture and its root, in a directory the caller keeps.
fn server_copy() -> (tempfile::TempDir, PathBuf) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/advise/server");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&fixture)
        .arg(&root)
        .status()
        .unwrap()
        .success());
    (dir, root)
}

/// Every entry under `dir`: a file's bytes, a link's target, a directory's mark.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let content = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                format!("-> {}", target.display()).into_bytes()
            } else if meta.is_dir() {
                pending.push(path.clone());
                b"dir".to_vec()
            } else if meta.is_file() {
                std::fs::read(&path).unwrap()
            } else {
                b"special".to_vec()
            };
            all.insert(path, content);
        }
    }
    all
}

/// A server copy with `devfreq-governor` and `cpu-governor` applied through the CLI: the
/// directory, the root, the journal written and the tree as the apply left it.
struct Applied {
    dir: tempfile::TempDir,
    root: PathBuf,
    journal: Value,
}

fn applied() -> Applied {
    let (dir, root) = server_copy();
    let undo = dir.path().join("undo.json");
    ok(apply(&root, &undo, "devfreq-governor,cpu-governor"));
    let journal = serde_json::from_str(&std::fs::read_to_string(&undo).unwrap()).unwrap();
    Applied { dir, root, journal }
}

/// Writes `journal` as a private undo file (mode 0600) at a new path in `dir`.
fn journal_file(dir: &Path, name: &str, journal: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(journal).unwrap()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Runs `out` expecting exit 2 with `why` in the message and `watched` (the root and the
/// directory outside it) byte for byte as it was.
fn refused(
    case: &str,
    out: Output,
    why: &str,
    watched: &Path,
    before: &BTreeMap<PathBuf, Vec<u8>>,
) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{case}: {stderr}");
    assert!(
        stderr.contains(why),
        "{case}: expected '{why}' in: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{case}: wrote {:?}", out.stdout);
    assert!(tree(watched) == *before, "{case}: the tree changed");
    stderr
}

/// Hand-edited journals: each entry below names something its check may not write, or writes
/// something the file does not accept. The whole undo is refused naming the entry.
#[test]
fn a_tampered_journal_is_refused_whole_before_any_write() {
    let a = applied();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("evil"), "x\n").unwrap();
    let cases: Vec<(&str, usize, &str, &str, &str)> = vec![
        // (case, entry, field, value, what the refusal says)
        (
            "another kernel file",
            2,
            "file",
            "proc/sys/kernel/core_pattern",
            "check 'cpu-governor' does not write 'proc/sys/kernel/core_pattern'",
        ),
        (
            "a device's config space",
            0,
            "file",
            "sys/bus/pci/devices/0000:06:00.0/config",
            "check 'devfreq-governor' does not write",
        ),
        (
            "a path with ..",
            2,
            "file",
            "sys/devices/system/cpu/cpu0/cpufreq/../../../../../../../etc/passwd",
            "does not write",
        ),
        (
            "an absolute path",
            0,
            "file",
            "/sys/class/devfreq/dmc/governor",
            "does not write '/sys/class/devfreq/dmc/governor'",
        ),
        (
            "a check that does not exist",
            1,
            "check",
            "write-anything",
            "'write-anything' is not a check id",
        ),
        (
            "a check that writes other files",
            1,
            "check",
            "irq-far-node",
            "check 'irq-far-node' does not write",
        ),
        (
            "a governor the CPU does not offer",
            3,
            "before",
            "|/tmp/evil.sh %p",
            "expected one of performance, powersave",
        ),
    ];
    let before = tree(a.dir.path());
    for (n, (case, entry, field, value, why)) in cases.into_iter().enumerate() {
        let mut journal = a.journal.clone();
        journal["changes"][entry][field] = Value::from(value);
        // Written outside the watched directory, so the tree compared is the root and the
        // journal the apply wrote.
        let file = journal_file(outside.path(), &format!("tampered-{n}.json"), &journal);
        let stderr = refused(case, undo(&a.root, &file, &[]), why, a.dir.path(), &before);
        assert!(
            stderr.contains(&format!("entry {}", entry + 1))
                && stderr.contains("nothing was restored"),
            "{case}: {stderr}"
        );
    }
    // 3.6 MB of CPU list for an IRQ: bounded by the machine's CPUs before it is parsed.
    let mut journal = a.journal.clone();
    journal["changes"][0] = serde_json::json!({
        "check": "irq-far-node",
        "file": "proc/irq/120/smp_affinity_list",
        "before": "0,".repeat(1_800_000),
        "written": "0-7",
    });
    let file = journal_file(outside.path(), "huge.json", &journal);
    refused(
        "a CPU list of 3.6 MB",
        undo(&a.root, &file, &[]),
        "expected a CPU list of online CPUs (0-15)",
        a.dir.path(),
        &before,
    );
    // The journal untouched works.
    ok(undo(&a.root, &a.dir.path().join("undo.json"), &[]));
}

/// Links and special files planted in the tree where a journal's file resolves: a file or a
/// directory linked outside the root, a FIFO, a link to a device.
#[test]
fn a_target_that_resolves_outside_the_root_or_is_not_a_file_is_refused() {
    let a = applied();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("governor"), "performance\n").unwrap();
    std::fs::write(
        outside.path().join("available_governors"),
        "performance simple_ondemand\n",
    )
    .unwrap();
    // Each plants in a fresh copy of the applied tree, given its root.
    type Plant = Box<dyn Fn(&Path)>;
    let dmc = |root: &Path| root.join("sys/class/devfreq/dmc");
    let cpu0 = |root: &Path| root.join("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
    let away = outside.path().to_path_buf();
    let cases: Vec<(&str, Plant, &str)> = vec![
        (
            "the file a link out of the root",
            Box::new({
                let away = away.clone();
                move |root| {
                    let governor = dmc(root).join("governor");
                    std::fs::remove_file(&governor).unwrap();
                    symlink(away.join("governor"), &governor).unwrap();
                }
            }),
            "a link leads out of the machine's root",
        ),
        (
            "its directory a link out of the root",
            Box::new(move |root| {
                std::fs::rename(dmc(root), root.join("sys/class/devfreq/dmc.moved")).unwrap();
                symlink(&away, dmc(root)).unwrap();
            }),
            "a link leads out of the machine's root",
        ),
        (
            "a link to a device",
            Box::new(move |root| {
                std::fs::remove_file(cpu0(root)).unwrap();
                symlink("/dev/null", cpu0(root)).unwrap();
            }),
            "resolves to /dev/null",
        ),
        (
            "a FIFO",
            Box::new(move |root| {
                std::fs::remove_file(cpu0(root)).unwrap();
                mkfifo(&cpu0(root));
            }),
            "is a FIFO, not a kernel attribute file",
        ),
    ];
    for (case, plant, why) in cases {
        let copy = tempfile::tempdir().unwrap();
        let root = copy.path().join("root");
        assert!(Command::new("cp")
            .arg("-a")
            .arg(&a.root)
            .arg(&root)
            .status()
            .unwrap()
            .success());
        // The genuine journal, re-rooted to this copy.
        let mut journal = a.journal.clone();
        journal["root"] = Value::from(root.canonicalize().unwrap().to_str().unwrap());
        let file = journal_file(copy.path(), "undo.json", &journal);
        plant(&root);
        let before = tree(copy.path());
        let outside_before = tree(outside.path());
        refused(case, undo(&root, &file, &[]), why, copy.path(), &before);
        assert!(
            tree(outside.path()) == outside_before,
            "{case}: outside changed"
        );
    }
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: c is a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// The undo file itself: writable by group or others, owned by another user, a FIFO, a link,
/// a device. Each refused before it is parsed.
#[test]
fn an_undo_file_anyone_else_could_have_written_is_refused() {
    let a = applied();
    let genuine = a.dir.path().join("undo.json");
    let files = tempfile::tempdir().unwrap();
    let copy = |name: &str, mode: u32| {
        let path = files.path().join(name);
        std::fs::copy(&genuine, &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let world = copy("world.json", 0o666);
    let group = copy("group.json", 0o620);
    let fifo = files.path().join("fifo.json");
    mkfifo(&fifo);
    let link = files.path().join("link.json");
    symlink(&genuine, &link).unwrap();
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let foreign = if me == 0 {
        let path = copy("nobody.json", 0o600);
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
        path
    } else {
        PathBuf::from("/etc/hostname")
    };
    let before = tree(a.dir.path());
    let foreign_owner = if me == 0 { "uid 65534" } else { "uid 0" };
    for (case, file, why) in [
        (
            "world-writable",
            world,
            "mode 0666 lets group or others write it",
        ),
        (
            "group-writable",
            group,
            "mode 0620 lets group or others write it",
        ),
        ("owned by another user", foreign, foreign_owner),
        ("a FIFO", fifo, "is a FIFO, not a regular file"),
        (
            "a symlink to the genuine journal",
            link,
            "is a symbolic link",
        ),
        (
            "/dev/null",
            PathBuf::from("/dev/null"),
            "is a character device",
        ),
    ] {
        refused(case, undo(&a.root, &file, &[]), why, a.dir.path(), &before);
    }
}

/// The machine `--undo` acts on is the one named, and must be the one the journal records.
#[test]
fn undo_acts_only_on_the_machine_named_and_recorded() {
    let a = applied();
    let genuine = a.dir.path().join("undo.json");
    let before = tree(a.dir.path());
    let genuine_s = genuine.to_str().unwrap();
    refused(
        "no --machine",
        pcielab(&[
            "advise",
            "--undo",
            genuine_s,
            "--root",
            a.root.to_str().unwrap(),
        ]),
        "name the machine to restore with --machine",
        a.dir.path(),
        &before,
    );
    // A machine without kernel files, and a snapshot whose root is not the journal's: a
    // snapshot acts only under its own root.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/advise/server");
    let snapshot = format!("snapshot:{}", fixture.join("sys/bus/pci").display());
    for machine in ["sim:yitian710", snapshot.as_str()] {
        let out = pcielab(&["advise", "--machine", machine, "--undo", genuine_s]);
        assert_eq!(out.status.code(), Some(2), "{machine}");
        assert!(tree(a.dir.path()) == before, "{machine}");
    }
    // The live / through a snapshot of it: only --machine host may change it.
    refused(
        "a snapshot of the live /",
        pcielab(&[
            "advise",
            "--machine",
            "snapshot:/sys/bus/pci",
            "--undo",
            genuine_s,
        ]),
        "changing it takes --machine host",
        a.dir.path(),
        &before,
    );
    // A journal recording another root: relative, the host's /, another tree.
    let outside = tempfile::tempdir().unwrap();
    for recorded in ["root", "/", "/tmp"] {
        let mut journal = a.journal.clone();
        journal["root"] = Value::from(recorded);
        let file = journal_file(outside.path(), "rooted.json", &journal);
        refused(
            recorded,
            undo(&a.root, &file, &[]),
            &format!("written for the machine whose root is {recorded}, not"),
            a.dir.path(),
            &before,
        );
        std::fs::remove_file(file).unwrap();
    }
}

/// Apply twice with one journal, undo twice, a file changed since the apply: refused without a
/// write; `--force` restores the changed file anyway; a clean apply then undo restores the tree
/// byte for byte.
#[test]
fn undo_restores_only_what_still_holds_the_value_written() {
    let (dir, root) = server_copy();
    let pristine = tree(&root);
    let journal = dir.path().join("undo.json");
    ok(apply(&root, &journal, "devfreq-governor,cpu-governor"));
    let after_apply = tree(dir.path());
    refused(
        "apply twice with one journal",
        apply(&root, &journal, "aspm-busy-link"),
        "already exists (a regular file); pcielab never replaces it",
        dir.path(),
        &after_apply,
    );
    // An administrator sets the DDR governor since: the undo names file, expected and found.
    let dmc = root.join("sys/class/devfreq/dmc/governor");
    std::fs::write(&dmc, "userspace\n").unwrap();
    let changed = tree(dir.path());
    refused(
        "a value changed since the apply",
        undo(&root, &journal, &[]),
        &format!(
            "{} holds 'userspace', not 'performance' that --apply wrote: it changed since the apply",
            dmc.canonicalize().unwrap().display()
        ),
        dir.path(),
        &changed,
    );
    // Put back as pcielab left it: the undo restores every byte of the fixture.
    std::fs::write(&dmc, "performance\n").unwrap();
    let text = ok(undo(&root, &journal, &[]));
    assert!(
        text.contains("restored /sys/class/devfreq/dmc/governor: performance -> simple_ondemand"),
        "{text}"
    );
    assert!(tree(&root) == pristine, "the undo left the tree different");
    refused(
        "undo twice",
        undo(&root, &journal, &[]),
        "already holds the value before (undone already?)",
        dir.path(),
        &tree(dir.path()),
    );
    // --force restores a changed file anyway.
    let second = dir.path().join("undo-2.json");
    ok(apply(&root, &second, "devfreq-governor"));
    std::fs::write(&dmc, "userspace\n").unwrap();
    ok(undo(&root, &second, &["--force"]));
    assert_eq!(std::fs::read_to_string(&dmc).unwrap(), "simple_ondemand\n");
}
