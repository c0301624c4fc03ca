//! What a new user meets first: the manual pages (rendered by the real `man`), the bash
//! completion (loaded by the real bash), the one list of presets and the tables in the README and
//! docs that must agree with it, and a repository free of paths from somebody's build machine.

use crate::common;

use common::{ok, pcielab};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `--long` option a `--help` text names in its options list.
fn long_options(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| l.split([' ', ',', '=', '<', '[']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_string)
        .collect()
}

#[test]
fn man_renders_every_page_with_every_option_of_help() {
    let dir = tempfile::tempdir().unwrap();
    ok(pcielab(&["man", dir.path().to_str().unwrap()]));
    let pages: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for expected in [
        "pcielab.1",
        "pcielab-stat.1",
        "pcielab-qos-show.1",
        "pcielab-lab-check.1",
    ] {
        assert!(
            pages.contains(expected),
            "{expected} missing from {pages:?}"
        );
    }
    for page in &pages {
        let out = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(dir.path().join(page))
            .env("MANWIDTH", "120")
            .env_remove("MAN_KEEP_FORMATTING")
            .output()
            .expect("man (man-db; .ci/run installs it)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "man -l {page}: {:?}", out.status);
        assert!(
            out.stderr.is_empty(),
            "man -l {page} warned: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let title = page.trim_end_matches(".1");
        assert!(
            text.contains("NAME") && text.contains(title),
            "{page}:\n{text}"
        );
        // The page for a leaf command lists the options its --help lists.
        let words: Vec<&str> = title.split('-').skip(1).collect();
        if words.is_empty() {
            continue;
        }
        let mut args = words.clone();
        args.push("--help");
        let help = ok(pcielab(&args));
        for option in long_options(&help) {
            assert!(text.contains(&option), "{page} lacks {option}:\n{text}");
        }
    }
    // Without DIR, pcielab.1 goes to stdout; a DIR that does not exist is bad input.
    assert!(ok(pcielab(&["man"])).starts_with(".ie"));
    let missing = pcielab(&["man", "/nonexistent/man1"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/man1"));
}

/// What bash offers for the words typed so far (the last one being completed), through the
/// completion function `pcielab completions bash` registers, called as bash calls it on TAB.
fn bash_completes(words: &[&str]) -> Vec<String> {
    let script = ok(pcielab(&["completions", "bash"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pcielab.bash");
    std::fs::write(&file, script).unwrap();
    let line = words.join(" ");
    let driver = format!(
        "source {file}\n\
         complete -p pcielab >/dev/null || exit 3\n\
         fn=$(complete -p pcielab | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
         COMP_WORDS=({line}); COMP_CWORD={cword}; COMP_LINE='{line}'; COMP_POINT={point}\n\
         \"$fn\" pcielab '{current}' '{previous}'\n\
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file = file.display(),
        cword = words.len() - 1,
        point = line.len(),
        current = words[words.len() - 1],
        previous = words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &driver])
        .output()
        .expect("bash");
    assert!(
        out.status.success(),
        "bash completion: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_options() {
    assert_eq!(bash_completes(&["pcielab", "st"]), ["stat"]);
    assert_eq!(
        bash_completes(&["pcielab", "pr"])
            .into_iter()
            .collect::<BTreeSet<_>>(),
        BTreeSet::from(["presets".to_string()])
    );
    let top_options = bash_completes(&["pcielab", "top", "--b"]);
    assert_eq!(top_options, ["--batch"]);
}

#[test]
fn machine_completion_offers_every_preset() {
    let names: Vec<String> = presets_json()
        .iter()
        .map(|p| format!("sim:{}", p["name"].as_str().unwrap()))
        .collect();
    let offered = bash_completes(&["pcielab", "topo", "--machine", ""]);
    assert!(offered.contains(&"host".to_string()), "{offered:?}");
    for name in &names {
        assert!(offered.contains(name), "{name} not in {offered:?}");
    }
    assert_eq!(
        bash_completes(&["pcielab", "qos", "show", "--machine", "sim:mpam"]),
        ["sim:mpam-seed"]
    );
    // bash hands the script `sim:rk` whole only when ':' is no word break.
    let script = ok(pcielab(&["completions", "bash"]));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pcielab.bash");
    std::fs::write(&file, script).unwrap();
    let breaks = Command::new("bash")
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!(
            "COMP_WORDBREAKS='\"=:'; source {}; printf %s \"$COMP_WORDBREAKS\"",
            file.display()
        ))
        .output()
        .unwrap();
    let breaks = String::from_utf8(breaks.stdout).unwrap();
    assert_eq!(breaks, "\"=", "the word breaks bash keeps");
    // zsh and fish list the same values (zsh escapes the colon).
    let zsh = ok(pcielab(&["completions", "zsh"]));
    let fish = ok(pcielab(&["completions", "fish"]));
    for name in &names {
        assert!(zsh.contains(&name.replace(':', "\\:")), "zsh lacks {name}");
        assert!(fish.contains(name.as_str()), "fish lacks {name}");
    }
}

fn presets_json() -> Vec<Value> {
    let doc: Value = serde_json::from_str(&ok(pcielab(&["presets", "--json"]))).unwrap();
    assert_eq!(doc["schema"], "pcielab.presets/v1");
    doc["presets"].as_array().unwrap().clone()
}

/// The rows of the markdown table of `columns` columns whose first cell is a `sim:NAME`.
fn sim_rows(markdown: &str, columns: usize) -> Vec<Vec<String>> {
    markdown
        .lines()
        .filter(|l| l.starts_with("| `sim:"))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect::<Vec<_>>()
        })
        .filter(|cells| cells.len() == columns)
        .collect()
}

#[test]
fn readme_and_topology_doc_list_exactly_the_registered_presets() {
    let presets = presets_json();
    // Every preset opens as a machine of its kind: the registry is what --machine accepts.
    for p in &presets {
        let machine = format!("sim:{}", p["name"].as_str().unwrap());
        let probe: &[&str] = if p["kind"] == "topology" {
            &["topo", "--machine", &machine, "--json"]
        } else {
            &["qos", "show", "--machine", &machine, "--json"]
        };
        ok(pcielab(probe));
        assert!(!p["source"].as_str().unwrap().is_empty(), "{p}");
    }
    // A table row as the docs write it: `sim:NAME`, then the named fields.
    let rows = |kind: Option<&str>, fields: &[&str]| -> Vec<Vec<String>> {
        presets
            .iter()
            .filter(|p| kind.is_none_or(|k| p["kind"] == k))
            .map(|p| {
                let name = format!("`sim:{}`", p["name"].as_str().unwrap());
                std::iter::once(name)
                    .chain(fields.iter().map(|f| p[*f].as_str().unwrap().to_string()))
                    .collect()
            })
            .collect()
    };
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    assert_eq!(
        sim_rows(&readme, 3),
        rows(None, &["kind", "models"]),
        "README.md's Presets table"
    );
    let topology = std::fs::read_to_string(repo_root().join("docs/topology.md")).unwrap();
    assert_eq!(
        sim_rows(&topology, 3),
        rows(Some("topology"), &["models", "source"]),
        "docs/topology.md's preset table"
    );
}

/// Paths that only exist on somebody's build machine. `/home/user` is the simulated Yitian 710
/// machine's working directory (its fio runs there), not a path of this repository's author.
fn build_machine_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    // The build machines' work tree, spelled in two pieces so that a plain grep of the
    // repository for it finds nothing here either.
    for prefix in [concat!("/wo", "rk/"), "/root/", "/home/", "/Users/"] {
        for (at, _) in text.match_indices(prefix) {
            let preceded_by_path = text[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '_' || c == '-');
            let rest = &text[at + prefix.len()..];
            let simulated_home =
                prefix == "/home/" && (rest.starts_with("user") || rest.is_empty());
            if !preceded_by_path && !simulated_home {
                let end = rest
                    .find(|c: char| c.is_whitespace() || c == '"' || c == '`')
                    .unwrap_or(rest.len());
                found.push(format!("{prefix}{}", &rest[..end]));
            }
        }
    }
    found
}

#[test]
fn no_file_in_the_repository_names_a_build_machine_path() {
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(repo_root())
        .output()
        .expect("git");
    assert!(listed.status.success());
    let mut offenders = Vec::new();
    for file in String::from_utf8(listed.stdout).unwrap().split('\0') {
        // This file spells the patterns it looks for.
        if file.is_empty() || file.ends_with("tests/suite/install.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(repo_root().join(file)) else {
            continue; // binary
        };
        for (number, line) in text.lines().enumerate() {
            for path in build_machine_paths(line) {
                offenders.push(format!("{file}:{}: {path}", number + 1));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "build-machine paths:\n{}",
        offenders.join("\n")
    );
    // The scanner itself finds what it is for.
    assert_eq!(
        build_machine_paths(concat!("see /wo", "rk/docs/x.txt")),
        [concat!("/wo", "rk/docs/x.txt")]
    );
    assert_eq!(
        build_machine_paths("cwd = \"/home/user\""),
        Vec::<String>::new()
    );
    assert_eq!(
        build_machine_paths("/root/.cache/pcielab"),
        ["/root/.cache/pcielab"]
    );
}

#[test]
fn tests_cache_lives_under_target() {
    // .cargo/config.toml sets PCIELAB_CACHE for everything cargo runs here, so the lab tests'
    // downloads and kernel builds never land in the user's ~/.cache.
    let cache = PathBuf::from(
        std::env::var_os("PCIELAB_CACHE").expect("PCIELAB_CACHE set by .cargo/config.toml"),
    );
    let target = repo_root().join("target").canonicalize().unwrap();
    let cache_parent = cache.parent().unwrap().canonicalize().unwrap();
    assert_eq!(cache_parent, target, "{}", cache.display());
    let help = ok(pcielab(&["lab", "kernel", "--help"]));
    assert!(help.contains("PCIELAB_CACHE"), "{help}");
}

/// Places where `text` speaks of "the seed" (a source document the reader does not have) rather
/// than naming it; identifiers that merely contain the word (`qemu-seed`, `seed_name`,
/// `sim_seed.rs`, a scenario's `seed` key) are names, not references.
fn unnamed_source_references(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let part_of_name = |c: Option<char>| {
        c.is_some_and(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '`' | '\\'))
    };
    lower
        .match_indices("seed")
        .filter(|(at, _)| {
            let word_end = if lower[at + 4..].starts_with('s') {
                at + 5
            } else {
                at + 4
            };
            !part_of_name(lower[..*at].chars().next_back())
                && !part_of_name(lower[word_end..].chars().next())
        })
        .map(|(at, _)| {
            let from = (0..=at.saturating_sub(30))
                .rev()
                .find(|i| lower.is_char_boundary(*i));
            let to =
                ((at + 30).min(lower.len())..=lower.len()).find(|i| lower.is_char_boundary(*i));
            lower[from.unwrap_or(0)..to.unwrap_or(lower.len())].to_string()
        })
        .collect()
}

#[test]
fn readme_docs_and_help_name_their_sources() {
    let mut offenders = Vec::new();
    let mut files = vec![repo_root().join("README.md")];
    for entry in std::fs::read_dir(repo_root().join("docs")).unwrap() {
        let path = entry.unwrap().path();
        // Fuzzing's seeds are corpus inputs, not documents.
        if path.extension().is_some_and(|e| e == "md") && !path.ends_with("fuzzing.md") {
            files.push(path);
        }
    }
    // The JSON Schemas' descriptions are the serialized types' doc comments.
    for entry in std::fs::read_dir(repo_root().join("docs/json")).unwrap() {
        files.push(entry.unwrap().path());
    }
    for file in &files {
        for hit in unnamed_source_references(&std::fs::read_to_string(file).unwrap()) {
            offenders.push(format!("{}: …{hit}…", file.display()));
        }
    }
    let pages = tempfile::tempdir().unwrap();
    ok(pcielab(&["man", pages.path().to_str().unwrap()]));
    for entry in std::fs::read_dir(pages.path()).unwrap() {
        let path = entry.unwrap().path();
        for hit in unnamed_source_references(&std::fs::read_to_string(&path).unwrap()) {
            offenders.push(format!("--help of {}: …{hit}…", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "name the document (docs/sources.md):\n{}",
        offenders.join("\n")
    );
    assert_eq!(unnamed_source_references("the seed's §4.4").len(), 1);
    assert_eq!(unnamed_source_references("the seeds").len(), 1);
    assert!(
        unnamed_source_references("sim:qemu-seed, `seed_name`, sim_seed.rs, `seed`").is_empty()
    );
}

#[test]
fn the_command_summary_names_every_bench() {
    let help = ok(pcielab(&["--help"]));
    let bench_line = help
        .lines()
        .find(|l| l.trim_start().starts_with("bench "))
        .unwrap_or_else(|| panic!("{help}"));
    let benches = ok(pcielab(&["bench", "--help"]));
    // Each bench subcommand (p2p, mmio, irq) has a word in the one-line summary.
    for (sub, word) in [("p2p", "P2P"), ("mmio", "MMIO"), ("irq", "interrupt")] {
        assert!(benches.contains(&format!("  {sub} ")), "{benches}");
        assert!(bench_line.contains(word), "{bench_line}");
    }
}

/// The lines of the README's "Install" code block.
fn readme_install_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let section = &readme[readme
        .find("## Install")
        .expect("README has an Install section")..];
    let block = &section[section.find("```sh\n").unwrap() + "```sh\n".len()..];
    block[..block.find("```").unwrap()]
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_readme_install_lines_give_man_pages_and_tab_completion() {
    // A fresh user: `cargo install` puts the binary in ~/.cargo/bin, which is on PATH.
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_pcielab"), bin.join("pcielab")).unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    let lines = readme_install_lines();
    assert!(
        lines[0].starts_with("cargo install --locked --path crates/pcielab-cli"),
        "{lines:?}"
    );
    for line in &lines[1..] {
        let out = Command::new("bash")
            .args(["--norc", "--noprofile", "-e", "-c", line])
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // `man pcielab-stat` finds the page through man's own search path.
    let man = Command::new("man")
        .arg("pcielab-stat")
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", &path)
        .env("MANWIDTH", "100")
        .output()
        .expect("man (man-db)");
    let page = String::from_utf8_lossy(&man.stdout);
    assert!(
        man.status.success() && page.contains("pcielab-stat - Count PCIe PMU events"),
        "man pcielab-stat: {}{page}",
        String::from_utf8_lossy(&man.stderr)
    );
    // An interactive bash that loads bash-completion (as a distribution's bashrc does) completes
    // `pcielab st<TAB>` to `pcielab stat`.
    let rc = home.path().join("bashrc");
    std::fs::write(
        &rc,
        "source /usr/share/bash-completion/bash_completion\nPS1='$ '\n",
    )
    .unwrap();
    let socket = format!("pcielab-install-{}", std::process::id());
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(["-L", &socket])
            .args(args)
            .output()
            .expect("tmux (.ci/run installs it)")
    };
    let shell = format!(
        "env -i HOME={} TERM=xterm PATH={path} bash --noprofile --rcfile {} -i",
        home.path().display(),
        rc.display()
    );
    assert!(tmux(&[
        "new-session",
        "-d",
        "-s",
        "c",
        "-x",
        "120",
        "-y",
        "10",
        &shell
    ])
    .status
    .success());
    let screen = |wait_for: &str| {
        let started = std::time::Instant::now();
        loop {
            let text = String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", "c"]).stdout)
                .into_owned();
            if text.contains(wait_for) || started.elapsed() > std::time::Duration::from_secs(20) {
                return text;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    screen("$ ");
    tmux(&["send-keys", "-t", "c", "pcielab st", "Tab"]);
    let text = screen("$ pcielab stat");
    tmux(&["kill-server"]);
    assert!(
        text.contains("$ pcielab stat"),
        "after pcielab st<TAB>:\n{text}"
    );
}
