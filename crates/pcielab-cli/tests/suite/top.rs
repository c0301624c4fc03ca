//! `pcielab top` as a person uses it: the full-screen view runs in a real terminal (tmux, which
//! `.ci/run` installs) while a simulated fio read plays, keys go in through `tmux send-keys` and
//! the screens come back through `tmux capture-pane`; the `-b` text is checked line by line
//! against `pcielab topo --json` (the functions and links) and `pcielab stat --json` on the same
//! job (the port's rate, a consistency check between two pcielab commands); on `--machine host`
//! the rate top shows for a real disk's function is held to an outside count, the kernel's
//! sectors read in /proc/diskstats around reads driven past the page cache; bad options exit 2
//! naming the valid range; q, Ctrl-C and SIGTERM leave the terminal restored.

use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_pcielab");

use crate::common::disk;

/// A 1 MiB sequential read on yitian710's SATA disk (behind root port 0000:00:02.0), long
/// enough to outlast every test.
const FIO_READ: [&str; 7] = [
    "fio",
    "--filename=/dev/sda",
    "--rw=read",
    "--bs=1m",
    "--time_based",
    "--runtime=120",
    "--name=r",
];

const COLUMNS: [&str; 11] = [
    "BDF",
    "KIND",
    "RX_MB/s",
    "TX_MB/s",
    "%LINK",
    "SRC",
    "LINK",
    "CAPABLE",
    "STATE",
    "AER_C/NF/F",
    "NAME",
];

fn pcielab(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run pcielab")
}

fn stdout_of(out: Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `pcielab stat` measures for the same job on root port 00:02.0: Rx MB/s and the link's
/// achievable MB/s.
fn stat_rx_and_achievable() -> (f64, f64) {
    let mut args = vec![
        "stat",
        "--machine",
        "sim:yitian710",
        "--json",
        "-a",
        "-e",
        "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
        "--",
    ];
    args.extend(FIO_READ);
    let v: Value = serde_json::from_str(&stdout_of(pcielab(&args))).unwrap();
    let event = &v["events"][0];
    (
        event["bandwidth_MBps"].as_f64().unwrap(),
        event["link_achievable_MBps"].as_f64().unwrap(),
    )
}

fn cell_number(cell: &str) -> Option<f64> {
    (cell != "-").then(|| {
        cell.parse()
            .unwrap_or_else(|_| panic!("'{cell}' is not a number"))
    })
}

/// Function BDF -> ("xW@SGT/s" now, at best) from `pcielab topo --json`.
fn topo_links() -> BTreeMap<String, (String, String)> {
    let v: Value = serde_json::from_str(&stdout_of(pcielab(&[
        "topo",
        "--machine",
        "sim:yitian710",
        "--json",
    ])))
    .unwrap();
    let link = |w: &Value, s: &Value| match (w.as_u64(), s.as_f64()) {
        (None, None) => "-".to_string(),
        (Some(0), _) => "-".to_string(), // an empty slot: no trained link
        (w, s) => format!(
            "x{}@{}GT/s",
            w.map_or("?".into(), |w| w.to_string()),
            s.map_or("?".into(), |s| s.to_string())
        ),
    };
    v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let l = &f["link"];
            (
                f["bdf"].as_str().unwrap().to_string(),
                (
                    link(&l["width"], &l["speed_gts"]),
                    link(&l["max_width"], &l["max_speed_gts"]),
                ),
            )
        })
        .collect()
}

#[test]
fn batch_frames_check_line_by_line_against_topo_and_stat() {
    let mut args = vec![
        "top",
        "--machine",
        "sim:yitian710",
        "-b",
        "-n",
        "2",
        "-d",
        "0.5",
        "--",
    ];
    args.extend(FIO_READ);
    let text = stdout_of(pcielab(&args));
    let links = topo_links();
    let (stat_rx, achievable) = stat_rx_and_achievable();
    let frames: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(frames.len(), 2, "{text}");
    for (i, frame) in frames.iter().enumerate() {
        let lines: Vec<&str> = frame.lines().collect();
        // pcielab top - sim:yitian710 - HH:MM:SS UTC - up T s - interval 0.5 s - 28 of 28 ...
        let header: Vec<&str> = lines[0].split(" - ").collect();
        assert_eq!(
            header[..2],
            ["pcielab top", "sim:yitian710"],
            "{}",
            lines[0]
        );
        let clock = header[2].strip_suffix(" UTC").unwrap();
        assert!(clock.len() == 8 && clock.split(':').all(|p| p.parse::<u8>().is_ok()));
        let up: f64 = header[3]
            .strip_prefix("up ")
            .and_then(|s| s.strip_suffix(" s"))
            .unwrap()
            .parse()
            .unwrap();
        let want_up = 0.5 * (i + 1) as f64;
        assert!((up - want_up).abs() < 0.15, "frame {i}: up {up}");
        assert_eq!(header[4], "interval 0.5 s");
        assert_eq!(
            header[5],
            format!("{} of {} functions", links.len(), links.len())
        );
        assert_eq!(header[6..], ["sort bdf", "tree"]);
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), COLUMNS);
        let rows = &lines[2..];
        assert_eq!(rows.len(), links.len());
        let mut seen = Vec::new();
        for row in rows {
            let cells: Vec<&str> = row.split_whitespace().collect();
            let bdf = cells[0].to_string();
            let (now, best) = &links[&bdf];
            assert_eq!((cells[6], cells[7]), (now.as_str(), best.as_str()), "{row}");
            let rx = cell_number(cells[2]);
            let tx = cell_number(cells[3]);
            let percent = cell_number(cells[4]);
            assert_eq!(rx.is_some(), cells[5] != "-", "{row}");
            assert_eq!(tx.is_some(), rx.is_some(), "{row}");
            if bdf == "0000:00:02.0" {
                assert!(!row.starts_with(' '));
                assert_eq!(&cells[1..2], ["rport"]);
                assert_eq!(
                    &cells[5..10],
                    ["pmu", "x2@5GT/s", "x4@32GT/s", "DOWNGRADED", "0/0/0"]
                );
                let rx = rx.unwrap();
                assert!(
                    (rx / stat_rx - 1.0).abs() < 0.02,
                    "top {rx} vs stat {stat_rx}"
                );
                let want = rx / achievable * 100.0;
                assert!((percent.unwrap() - want).abs() < 0.15, "{row}");
            }
            if bdf == "0000:04:00.0" {
                // Under its port, indented one level; its bytes are derived from the disk.
                assert!(row.starts_with("  0000:04:00.0"), "{row}");
                assert_eq!(cells[5], "derived");
                assert!((rx.unwrap() / stat_rx - 1.0).abs() < 0.02, "{row}");
            }
            if bdf == "0000:00:03.0" {
                assert_eq!(cells[8], "DOWN");
            }
            seen.push(bdf);
        }
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(sorted, links.keys().cloned().collect::<Vec<_>>());
    }
}

#[test]
fn batch_json_lines_carry_the_rows() {
    let mut args = vec![
        "top",
        "--machine",
        "sim:yitian710",
        "-b",
        "-n",
        "1",
        "-d",
        "0.3",
        "--json",
        "--filter",
        "00:02",
        "--flat",
        "--sort",
        "rx",
        "--",
    ];
    args.extend(FIO_READ);
    let text = stdout_of(pcielab(&args));
    assert_eq!(text.lines().count(), 1);
    let v: Value = serde_json::from_str(&text).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let bdfs: Vec<&str> = rows.iter().map(|r| r["bdf"].as_str().unwrap()).collect();
    let mut sorted = bdfs.clone();
    sorted.sort();
    assert_eq!(sorted, ["0000:00:02.0", "0000:04:00.0"]);
    assert_eq!(v["tree"], false);
    assert_eq!(v["sort"], "rx");
    let port = rows.iter().find(|r| r["bdf"] == "0000:00:02.0").unwrap();
    assert_eq!(port["source"], "pmu");
    assert_eq!(port["link_state"], "downgraded");
    let (stat_rx, _) = stat_rx_and_achievable();
    let rx = port["rx_mbps"].as_f64().unwrap();
    assert!((rx / stat_rx - 1.0).abs() < 0.02, "{rx} vs {stat_rx}");
}

#[test]
fn host_rates_add_up_to_the_bytes_the_kernel_counted_for_the_disk() {
    let disk = disk::pci_disk();
    let file = disk::file_on_disk(&disk.scratch, 64);
    let before = disk::bytes_read(&disk.name);
    let child = Command::new(BIN)
        .args([
            "top",
            "--machine",
            "host",
            "-b",
            "-n",
            "2",
            "-d",
            "1.5",
            "--json",
        ])
        .args(["--flat", "--filter", &disk.bdf])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Well inside top's first interval: the whole read falls between its first and last sample.
    std::thread::sleep(Duration::from_millis(500));
    let copied = disk::read_direct(&file);
    let text = stdout_of(child.wait_with_output().unwrap());
    let after = disk::bytes_read(&disk.name);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(copied, 64 << 20, "dd read the whole file");
    // Each frame's rate times its own interval is the bytes read in it; the two intervals are
    // back to back.
    let mut shown = 0.0;
    for line in text.lines() {
        let frame: Value = serde_json::from_str(line).unwrap();
        let row = frame["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["bdf"] == disk.bdf.as_str())
            .unwrap_or_else(|| panic!("no {} in {line}", disk.bdf));
        assert_eq!(row["source"], "derived", "{row}");
        let devices = row["devices"].as_array().unwrap();
        assert!(
            devices.iter().any(|d| d == &format!("block/{}", disk.name)),
            "{row}"
        );
        shown += row["rx_mbps"].as_f64().unwrap() * 1e6 * frame["interval_s"].as_f64().unwrap();
    }
    let kernel = (after - before) as f64;
    eprintln!(
        "{} ({}): top {shown:.0} B in its two intervals; the kernel {kernel:.0} B in the \
         enclosing window; dd {copied} B",
        disk.bdf, disk.name
    );
    // What top saw lies between what dd alone read (inside its window) and what the kernel
    // counted over the wider window around the whole run; 0.5 % for the rounding of MB/s.
    assert!(
        shown >= copied as f64 * 0.995 && shown <= kernel * 1.005,
        "top showed {shown:.0} B read; dd read {copied} B in its window and the kernel counted \
         {kernel:.0} B around it"
    );
}

#[test]
fn bad_options_exit_2_with_the_range() {
    for delay in ["0", "-1", "nan", "1e9", "inf", "x"] {
        let out = pcielab(&["top", "-b", "-n", "1", "-d", delay]);
        assert_eq!(out.status.code(), Some(2), "-d {delay}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("0.1..=3600"), "-d {delay}: {err}");
        assert!(out.stdout.is_empty());
    }
    let out = pcielab(&["top", "-b", "-n", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // No terminal (the test's pipes) and no -b.
    let out = pcielab(&["top", "--machine", "sim:yitian710"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-b/--batch"), "{err}");
    let out = pcielab(&["top", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let out = pcielab(&["top", "-b", "--sort", "name"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bdf, rx, tx or link"));
    // A workload is played on sim: only.
    let out = pcielab(&[
        "top",
        "-b",
        "-n",
        "1",
        "--machine",
        "host",
        "--",
        "sleep",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// A private tmux server (its own socket) with one window running a command; killed when
/// dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `name` tells apart the tests of one process, which run in parallel.
    fn start(name: &str, command: &str, width: u16, height: u16) -> Tmux {
        let tmux = Tmux {
            socket: format!("pcielab-top-{name}-{}", std::process::id()),
        };
        let status = tmux
            .cmd(&[
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                command,
            ])
            .status()
            .expect("tmux must be installed; .ci/run installs it");
        assert!(status.success());
        tmux
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"]).args(args);
        c
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "top"];
        args.extend(keys);
        assert!(self.cmd(&args).status().unwrap().success());
    }

    fn text(&self, text: &str) {
        assert!(self
            .cmd(&["send-keys", "-t", "top", "-l", text])
            .status()
            .unwrap()
            .success());
    }

    fn screen(&self) -> Vec<String> {
        let out = self
            .cmd(&["capture-pane", "-p", "-t", "top"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The first screen `ok` accepts within 20 s.
    fn wait_for(&self, what: &str, ok: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "waited 20 s for {what}; the screen:\n{}",
                screen.join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
    }
}

/// The table's rows on a screen: between the column names and the key line.
fn table_rows(screen: &[String]) -> Vec<Vec<String>> {
    let start = screen.iter().position(|l| l.starts_with("BDF ")).unwrap() + 1;
    screen[start..]
        .iter()
        .take_while(|l| !l.starts_with("q quit") && !l.starts_with("filter:"))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn the_full_screen_view_in_tmux_sorts_filters_toggles_helps_pauses_and_quits() {
    let (stat_rx, _) = stat_rx_and_achievable();
    let command = format!(
        "{BIN} top --machine sim:yitian710 -d 0.5 -- {}; echo \"top exited $?\"; stty -a; sleep 60",
        FIO_READ.join(" ")
    );
    let tmux = Tmux::start("keys", &command, 180, 45);
    let header = |s: &[String], text: &str| {
        s[0].starts_with("pcielab top - sim:yitian710") && s[0].contains(text)
    };
    // The first interval's rates are in.
    tmux.wait_for("a frame with rates", |s| {
        header(s, "")
            && table_rows(s)
                .iter()
                .any(|r| r[0] == "0000:00:02.0" && r[2] != "-")
    });

    tmux.keys(&["s"]);
    let screen = tmux.wait_for("sort rx, the busy port first", |s| {
        let rows = table_rows(s);
        header(s, "sort rx") && rows.len() == 28 && rows[0][0] == "0000:00:02.0"
    });
    let rows = table_rows(&screen);
    assert_eq!(rows[0][0], "0000:00:02.0", "{}", screen.join("\n"));
    assert_eq!(rows[1][0], "0000:04:00.0");
    let rx: f64 = rows[0][2].parse().unwrap();
    assert!(
        (rx / stat_rx - 1.0).abs() < 0.02,
        "top {rx} vs stat {stat_rx}"
    );

    tmux.keys(&["/"]);
    tmux.text("00:02");
    tmux.wait_for("the filter prompt", |s| {
        s.iter().any(|l| l.starts_with("filter: 00:02_"))
    });
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the filter applied", |s| {
        header(s, "filter \"00:02\"") && table_rows(s).len() == 2
    });
    let bdfs: Vec<String> = table_rows(&screen)
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(
        bdfs,
        ["0000:00:02.0", "0000:04:00.0"],
        "{}",
        screen.join("\n")
    );
    assert!(screen.iter().any(|l| l.starts_with("  0000:04:00.0")));

    tmux.keys(&["t"]);
    let screen = tmux.wait_for("flat", |s| {
        header(s, "- flat") && s.iter().any(|l| l.starts_with("0000:04:00.0"))
    });
    assert!(
        screen.iter().any(|l| l.starts_with("0000:04:00.0")),
        "{}",
        screen.join("\n")
    );

    tmux.keys(&["Escape"]);
    // (Conditions on the rows as well as the header: tmux may show a redraw half done.)
    tmux.wait_for("the filter cleared", |s| {
        header(s, "28 of 28 functions") && table_rows(s).len() == 28
    });

    tmux.keys(&["h"]);
    tmux.wait_for("help", |s| s.iter().any(|l| l.contains("tree / flat")));
    tmux.keys(&["x"]);
    tmux.wait_for("help closed", |s| {
        !s.iter().any(|l| l.contains("tree / flat"))
    });

    tmux.keys(&["Space"]);
    let screen = tmux.wait_for("paused", |s| s[0].trim_end().ends_with("PAUSED"));
    // Paused: the header's clock stands still over a few intervals.
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(tmux.screen()[0], screen[0]);
    tmux.keys(&["Space"]);
    tmux.wait_for("resumed", |s| header(s, "") && !s[0].contains("PAUSED"));

    // A smaller terminal: the view redraws to it, key line on the last row.
    assert!(tmux
        .cmd(&["resize-window", "-t", "top", "-x", "120", "-y", "20"])
        .status()
        .unwrap()
        .success());
    let screen = tmux.wait_for("the resize", |s| {
        s.len() == 20 && s[19].starts_with("q quit")
    });
    assert_eq!(table_rows(&screen).len(), 17);

    tmux.keys(&["q"]);
    exited_with_the_terminal_restored(&tmux, 0);
}

/// After `top exited STATUS` and `stty -a` have printed: the exit status, out of the alternate
/// screen, and the terminal back in cooked mode with echo.
fn exited_with_the_terminal_restored(tmux: &Tmux, status: i32) {
    // Until stty has printed its modes, which come after the exit status.
    let screen = tmux.wait_for("exit", |s| s.iter().any(|l| l.contains("icanon")));
    let all = screen.join("\n");
    assert!(all.contains(&format!("top exited {status}")), "{all}");
    assert!(!all.contains("pcielab top - "), "{all}");
    let modes: Vec<&str> = all.split_whitespace().collect();
    assert!(
        modes.contains(&"icanon") && modes.contains(&"echo"),
        "{all}"
    );
}

#[test]
fn ctrl_c_quits_the_full_screen_view_with_status_0() {
    let command = format!("{BIN} top --machine sim:yitian710; echo \"top exited $?\"; sleep 60");
    let tmux = Tmux::start("ctrl-c", &command, 160, 40);
    tmux.wait_for("the view", |s| {
        s[0].starts_with("pcielab top - sim:yitian710")
    });
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("exit", |s| s.iter().any(|l| l.contains("top exited")));
    assert!(
        screen.iter().any(|l| l == "top exited 0"),
        "{}",
        screen.join("\n")
    );
}

#[test]
fn sigterm_restores_the_terminal_and_ends_with_the_signals_status() {
    let command =
        format!("{BIN} top --machine sim:yitian710; echo \"top exited $?\"; stty -a; sleep 60");
    let tmux = Tmux::start("sigterm", &command, 160, 40);
    tmux.wait_for("the view", |s| {
        s[0].starts_with("pcielab top - sim:yitian710")
    });
    // The pane runs `sh -c COMMAND`; top is the shell's one child.
    let out = tmux
        .cmd(&["display-message", "-p", "-t", "top", "#{pane_pid}"])
        .output()
        .unwrap();
    let shell = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let top: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: signals the process this test started.
    assert_eq!(unsafe { libc::kill(top, libc::SIGTERM) }, 0);
    exited_with_the_terminal_restored(&tmux, 143);
}

/// The QEMU seed machine's sysfs exported as `dir`/`name` (8 functions), for `--machine
/// snapshot:`.
fn qemu_seed_snapshot(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let snap = dir.join(name);
    stdout_of(pcielab(&[
        "topo",
        "--machine",
        "sim:qemu-seed",
        "--sysfs-export",
        snap.to_str().unwrap(),
    ]));
    snap
}

#[test]
fn a_snapshot_shows_links_without_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let snap = qemu_seed_snapshot(dir.path(), "snap");
    let machine = format!("snapshot:{}", snap.display());
    let text = stdout_of(pcielab(&[
        "top",
        "--machine",
        &machine,
        "-b",
        "-n",
        "1",
        "-d",
        "0.1",
        "--flat",
    ]));
    let rows: BTreeMap<String, Vec<String>> = text
        .lines()
        .skip(2)
        .map(|l| {
            let cells: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            (cells[0].clone(), cells)
        })
        .collect();
    assert_eq!(rows.len(), 8, "{text}");
    // A snapshot has no counters: no source, no rates.
    assert!(
        rows.values().all(|r| r[2..6] == ["-", "-", "-", "-"]),
        "{text}"
    );
    // QEMU's root port trained x1 at 2.5 GT/s of its x32 at 16 GT/s; the integrated NVMe has no
    // link at all (not a link that is down).
    assert_eq!(
        rows["0000:00:04.0"][6..9],
        ["x1@2.5GT/s", "x32@16GT/s", "DOWNGRADED"]
    );
    assert_eq!(rows["0000:00:03.0"][6..9], ["-", "-", "-"]);
}

/// `-b` frames are written as the library built them, without a second scan for control
/// characters: a slot label and a snapshot directory name holding escape sequences must
/// still reach standard output escaped, in the first frame and in the kept frames after it.
#[test]
fn names_with_escape_sequences_are_shown_not_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    let snap = qemu_seed_snapshot(dir.path(), "snap\u{1b}[31m");
    std::fs::write(
        snap.join("devices/0000:00:04.0/label"),
        "slot\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}1m\n",
    )
    .unwrap();
    let machine = format!("snapshot:{}", snap.display());
    let out = pcielab(&["top", "--machine", &machine, "-b", "-n", "3", "-d", "0.1"]);
    let text = stdout_of(out);
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "a raw control character reached the terminal: {text:?}"
    );
    let frames: Vec<&str> = text.split("\n\n").collect();
    assert_eq!(frames.len(), 3, "{text}");
    for frame in frames {
        assert!(frame.contains("snap\\x1b[31m"), "{frame}");
        assert!(
            frame.contains("slot\\x1b[2J\\x1b]0;owned\\x07\\x9b1m"),
            "{frame}"
        );
    }
}
