//! Every input that ever crashed a fuzz target (fuzz/regressions/<target>/*), replayed on stable
//! through the same target bodies cargo-fuzz runs (fuzz/src/targets.rs): each must now return
//! without a panic. The seeds (fuzz/seeds/<target>/*) run too, so every target body is exercised
//! by plain `cargo test` even while no crash is on file for it.

#[path = "../../../fuzz/src/targets.rs"]
mod targets;

use std::path::Path;

fn inputs(kind: &str, target: &str) -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn every_recorded_crash_and_seed_replays_without_a_panic() {
    let mut replayed = 0;
    for (name, body) in targets::TARGETS {
        for path in inputs("regressions", name)
            .into_iter()
            .chain(inputs("seeds", name))
        {
            let data = std::fs::read(&path).unwrap();
            let outcome = std::panic::catch_unwind(|| body(&data));
            assert!(outcome.is_ok(), "{name}: {} panics", path.display());
            replayed += 1;
        }
    }
    assert!(
        replayed >= targets::TARGETS.len(),
        "only {replayed} inputs found"
    );
}
