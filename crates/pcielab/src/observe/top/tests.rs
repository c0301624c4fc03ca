use super::row::{LinkState, COLUMNS};
use super::view::{Action, Key, SortKey, View};

use super::*;
use crate::error::{Error, Result};
use crate::observe::{Observer, Source};
use crate::pcie::bdf;
use std::path::Path;

fn no_files(p: &Path) -> Result<String> {
    Err(Error::bad_input(format!(
        "unexpected read of {}",
        p.display()
    )))
}

/// yitian710 with a 1 MiB sequential read on the SATA disk behind 00:02.0, sampled at 0, 1
/// and 2 simulated seconds.
fn samples() -> (Sample, Sample, Sample) {
    let job: Vec<String> = [
        "fio",
        "--filename=/dev/sda",
        "--rw=read",
        "--bs=1m",
        "--time_based",
        "--runtime=5",
        "--name=r",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let machine = "sim:yitian710".parse().unwrap();
    let mut observer = Observer::open(&machine, &job, no_files).unwrap();
    (
        observer.sample_at(0).unwrap(),
        observer.sample_at(1_000_000_000).unwrap(),
        observer.sample_at(2_000_000_000).unwrap(),
    )
}

fn frame(view: &View) -> TopFrame {
    let (a, b, c) = samples();
    TopFrame::build(
        view,
        &a,
        &b,
        &c,
        UNIX_EPOCH + std::time::Duration::from_secs(3723),
    )
}

fn bdfs(frame: &TopFrame) -> Vec<(String, usize)> {
    frame
        .rows
        .iter()
        .map(|r| (r.bdf.to_string(), r.depth))
        .collect()
}

/// Frames kept between refreshes print what a frame built afresh prints, as the traffic
/// starts and stops (rows and column widths change), the view changes under it, and a
/// paused view builds frames it does not print.
#[test]
fn kept_frames_match_frames_built_afresh() {
    let machine = "sim:yitian710".parse().unwrap();
    let job: Vec<String> = [
        "fio",
        "--filename=/dev/sda",
        "--rw=read",
        "--bs=1m",
        "--time_based",
        "--runtime=3",
        "--name=r",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut observer = Observer::open(&machine, &job, no_files).unwrap();
    let first = observer.sample_at(0).unwrap();
    let mut prev = first.clone();
    let mut latest = first.clone();
    let views = [
        View::default(),
        View {
            sort: SortKey::Rx,
            tree: false,
            ..View::default()
        },
        View {
            sort: SortKey::Link,
            ..View::default()
        },
        View {
            filter: "00:02".into(),
            ..View::default()
        },
        View {
            filter: "marvell".into(),
            tree: false,
            ..View::default()
        },
        View::default(),
    ];
    let now = UNIX_EPOCH + std::time::Duration::from_secs(3723);
    let mut frames = Frames::default();
    let mut busy_rows = 0;
    // 12 s of frames: rows change while the read runs (3 s), then none do while the header
    // still moves, and it grows a digit at 10 s (the kept text is written over in place).
    for step in 1..=24u64 {
        std::mem::swap(&mut prev, &mut latest);
        observer
            .sample_at_into(step * 500_000_000, &mut latest)
            .unwrap();
        assert_eq!(latest, observer.sample_at(step * 500_000_000).unwrap());
        let view = &views[(step as usize / 2) % views.len()];
        let afresh = TopFrame::build(view, &first, &prev, &latest, now);
        assert_eq!(frames.build(view, &first, &prev, &latest, now), &afresh);
        // Every third frame is built and not printed, as while paused.
        if step % 3 != 0 {
            assert_eq!(&*frames.text(), afresh.text(), "step {step}");
        }
        busy_rows += afresh
            .rows
            .iter()
            .filter(|r| r.rx_mbps.is_some_and(|v| v > 0.0))
            .count();
    }
    // The read ran and stopped within the frames: some showed traffic, the last none.
    assert!(busy_rows > 0);
    let last = frames.frame();
    assert!(last.rows.iter().all(|r| r.rx_mbps.unwrap_or(0.0) == 0.0));
}

#[test]
fn keys_change_the_view_and_quit() {
    let mut v = View::default();
    assert_eq!(v.sort, SortKey::Bdf);
    for want in [SortKey::Rx, SortKey::Tx, SortKey::Link, SortKey::Bdf] {
        v.handle(Key::Char('s'));
        assert_eq!(v.sort, want);
    }
    v.handle(Key::Char('<'));
    assert_eq!(v.sort, SortKey::Link);
    v.handle(Key::Char('>'));
    assert_eq!(v.sort, SortKey::Bdf);
    // A filter is typed, edited and applied; a second one is dropped with Esc.
    for k in [
        Key::Char('/'),
        Key::Char('0'),
        Key::Char('x'),
        Key::Backspace,
        Key::Char('0'),
    ] {
        assert_eq!(v.handle(k), Action::Continue);
    }
    // 'q' while typing is text, not quit.
    assert_eq!(v.handle(Key::Char('q')), Action::Continue);
    assert_eq!(v.editing.as_deref(), Some("00q"));
    v.handle(Key::Backspace);
    v.handle(Key::Enter);
    assert_eq!((v.filter.as_str(), v.editing.is_none()), ("00", true));
    v.handle(Key::Char('/'));
    v.handle(Key::Char('z'));
    v.handle(Key::Esc);
    assert_eq!(v.filter, "00");
    v.handle(Key::Esc);
    assert_eq!(v.filter, "");
    v.handle(Key::Char('t'));
    v.handle(Key::Char(' '));
    assert!(!v.tree && v.paused);
    // Help: any key closes it without acting, except q, which quits.
    v.handle(Key::Char('?'));
    assert!(v.help);
    v.handle(Key::Char('t'));
    assert!(!v.help && !v.tree);
    v.handle(Key::Char('h'));
    assert_eq!(v.handle(Key::Char('q')), Action::Quit);
    v.handle(Key::Char('/'));
    assert_eq!(v.handle(Key::Interrupt), Action::Quit);
    assert_eq!(View::default().handle(Key::Char('q')), Action::Quit);
}

#[test]
fn sorting_by_rx_puts_the_busy_port_and_its_disk_first() {
    let tree = frame(&View {
        sort: SortKey::Rx,
        ..View::default()
    });
    assert_eq!(
        bdfs(&tree)[..2],
        [
            ("0000:00:02.0".to_string(), 0),
            ("0000:04:00.0".to_string(), 1)
        ]
    );
    let port = &tree.rows[0];
    assert_eq!(port.source, Some(Source::Pmu));
    assert_eq!(tree.rows[1].source, Some(Source::Derived));
    // The SATA read runs near 528 MB/s on its Gen2 x2 link (`pcielab stat` on the same job).
    let rx = port.rx_mbps.unwrap();
    assert!((500.0..560.0).contains(&rx), "{rx}");
    assert!((port.link_percent().unwrap() - rx / 925.13 * 100.0).abs() < 0.1);
    // Flat: every function on one level, idle ones (0 MB/s) after, those without figures last.
    let flat = frame(&View {
        sort: SortKey::Rx,
        tree: false,
        ..View::default()
    });
    assert!(flat.rows.iter().all(|r| r.depth == 0));
    assert_eq!(flat.rows.len(), flat.functions);
    let mut firsts: Vec<String> = bdfs(&flat)[..2].iter().map(|r| r.0.clone()).collect();
    firsts.sort();
    assert_eq!(firsts, ["0000:00:02.0", "0000:04:00.0"]);
    let values: Vec<Option<f64>> = flat.rows.iter().map(|r| r.rx_mbps).collect();
    let known = values.iter().take_while(|v| v.is_some()).count();
    assert!(values[known..].iter().all(Option::is_none));
    assert!(values[..known].windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn a_filter_keeps_a_ports_subtree_and_a_matchs_ancestors_in_tree_mode() {
    let port = frame(&View {
        filter: "00:02".into(),
        ..View::default()
    });
    assert_eq!(
        bdfs(&port),
        [
            ("0000:00:02.0".to_string(), 0),
            ("0000:04:00.0".to_string(), 1)
        ]
    );
    let by_name = |tree| {
        bdfs(&frame(&View {
            filter: "marvell".into(),
            tree,
            ..View::default()
        }))
    };
    assert_eq!(by_name(true).len(), 2);
    assert_eq!(by_name(false), [("0000:04:00.0".to_string(), 0)]);
    // Tree order by address: every child right after its parent, one level deeper.
    let all = frame(&View::default());
    assert_eq!(all.rows.len(), all.functions);
    assert_eq!(all.rows[0].bdf, bdf("00:00.0"));
    let bridge = all
        .rows
        .iter()
        .position(|r| r.bdf == bdf("01:00.0"))
        .unwrap();
    assert_eq!(all.rows[bridge - 1].bdf, bdf("00:00.0"));
    assert_eq!(
        (
            all.rows[bridge].depth,
            all.rows[bridge + 1].bdf,
            all.rows[bridge + 1].depth
        ),
        (1, bdf("02:00.0"), 2)
    );
}

#[test]
fn link_states_and_aer_columns() {
    let f = frame(&View::default());
    let state = |at: &str| f.rows.iter().find(|r| r.bdf == bdf(at)).unwrap().clone();
    assert_eq!(state("00:03.0").link_state, LinkState::Down);
    assert_eq!(state("00:03.0").cells()[6..9], ["-", "x4@32GT/s", "DOWN"]);
    assert_eq!(state("00:02.0").link_state, LinkState::Downgraded);
    assert_eq!(state("b1:00.0").link_state, LinkState::Ok);
    assert_eq!(state("7c:00.0").link_state, LinkState::None);
    let cells = state("00:02.0").cells();
    assert_eq!(cells[6], "x2@5GT/s");
    assert_eq!(cells[7], "x4@32GT/s");
    assert_eq!(cells[8], "DOWNGRADED");
}

#[test]
fn names_from_files_cannot_drive_the_terminal() {
    let mut f = frame(&View {
        filter: "04:00".into(),
        ..View::default()
    });
    f.rows[1].name = Some("disk\u{1b}[2J".into());
    f.rows[1].devices = vec!["block/sd\na".into()];
    let text = f.text();
    assert!(!text.contains('\u{1b}'));
    assert!(text.contains("disk\\x1b[2J (block/sd\\na)"), "{text}");
}

#[test]
fn text_has_a_header_the_columns_and_one_parsable_line_per_row() {
    let f = frame(&View {
        filter: "00:02".into(),
        sort: SortKey::Rx,
        ..View::default()
    });
    let text = f.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "pcielab top - sim:yitian710 - 01:02:03 UTC - up 2.0 s - interval 1.0 s - 2 of 28 \
         functions - sort rx - tree - filter \"00:02\""
    );
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), COLUMNS);
    assert_eq!(lines.len(), 4);
    let port: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(&port[..2], ["0000:00:02.0", "rport"]);
    let rx: f64 = port[2].parse().unwrap();
    assert!((rx - f.rows[0].rx_mbps.unwrap()).abs() < 0.05);
    assert_eq!(
        &port[5..10],
        ["pmu", "x2@5GT/s", "x4@32GT/s", "DOWNGRADED", "0/0/0"]
    );
    assert!(lines[3].starts_with("  0000:04:00.0  ep "), "{}", lines[3]);
}
