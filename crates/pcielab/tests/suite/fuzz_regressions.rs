//! Every input that ever crashed a fuzz target (fuzz/regressions/<target>/*), replayed on stable
//! through the same target bodies cargo-fuzz runs (fuzz/src/targets.rs): each must now return
//! without a panic. The seeds (fuzz/seeds/<target>/*) run too, so every target body is exercised
//! by plain `cargo test` even while no crash is on file for it. Crashes include allocations over
//! 1 GiB and hangs, so the replay runs with the address space capped (an oversized allocation
//! aborts the test) and each input must return well within a hang deadline.

#[path = "../../../../fuzz/src/targets.rs"]
mod targets;

use std::path::Path;

/// The files under `fuzz/<kind>/<target>/`. Regressions are optional (no crash on file for
/// the target); a missing seed corpus is a failure, since then the target body never runs here.
fn inputs(kind: &str, target: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let listing = match std::fs::read_dir(&dir) {
        Ok(listing) => listing,
        Err(e) if kind == "regressions" && e.kind() == std::io::ErrorKind::NotFound => {
            return Vec::new()
        }
        Err(e) => panic!(
            "{}: {e}: every fuzz target needs a seed corpus",
            dir.display()
        ),
    };
    let mut files: Vec<_> = listing.filter_map(|e| Some(e.ok()?.path())).collect();
    files.sort();
    assert!(
        kind == "regressions" || !files.is_empty(),
        "{}: empty seed corpus",
        dir.display()
    );
    files
}

/// Far above the 2 s a fuzz run allows, so a loaded machine does not fail it; a hang still does.
const HANG: std::time::Duration = std::time::Duration::from_secs(20);

/// This test binary runs alone in its process: cap what it may map (the fuzzers' 1 GiB of
/// allocations plus the test harness and the debug binary's own mappings).
fn cap_address_space() {
    let cap = libc::rlimit {
        rlim_cur: 4 << 30,
        rlim_max: 4 << 30,
    };
    // SAFETY: setrlimit with a valid struct; it only lowers this process's limit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &cap) }, 0);
}

#[test]
fn every_recorded_crash_and_seed_replays_without_a_panic() {
    cap_address_space();
    let mut replayed = 0;
    for (name, body) in targets::TARGETS {
        for path in inputs("regressions", name)
            .into_iter()
            .chain(inputs("seeds", name))
        {
            let data = std::fs::read(&path).unwrap();
            let started = std::time::Instant::now();
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "{name}: {} panics", path.display());
            assert!(started.elapsed() < HANG, "{name}: {} hangs", path.display());
            replayed += 1;
        }
    }
    // Every target ran at least its seeds.
    assert!(
        replayed >= targets::TARGETS.len(),
        "only {replayed} inputs found"
    );
}
