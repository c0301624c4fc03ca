//! `--svg` on every command with a series, checked against the JSON each plot is drawn from:
//! the SVG parses as XML, the drawn points read back (through the axes' tick labels) to the
//! JSON values within a pixel, reference lines sit at the ceilings, the topology diagram names
//! every function and marks downgrades and warnings, the P2P matrix shows every verdict, and
//! result files of the wrong kind or cut short are named in a clear error with exit 2.

use crate::svg_reading;

use serde_json::Value;
use std::path::Path;
use std::process::Output;
use svg_reading::{parse_log2_bytes, parse_number, read};

use crate::common;
use common::{ok, pcielab};

fn json(out: Output) -> Value {
    serde_json::from_str(&ok(out)).unwrap()
}

fn svg_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

const BLUE: &str = "#1F77B4";
const RED: &str = "#D62728";

/// Asserts `drawn` pixels read back to `expected` values within `pixels` pixels on each axis.
fn assert_points(
    drawn: &[(f64, f64)],
    expected: &[(f64, f64)],
    x: svg_reading::Axis,
    y: svg_reading::Axis,
    what: &str,
) {
    assert_eq!(
        drawn.len(),
        expected.len(),
        "{what}: {drawn:?} vs {expected:?}"
    );
    for (d, e) in drawn.iter().zip(expected) {
        let (vx, vy) = (x.value(d.0), y.value(d.1));
        assert!(
            (vx - e.0).abs() <= 1.5 * x.per_pixel() && (vy - e.1).abs() <= 1.5 * y.per_pixel(),
            "{what}: drawn ({vx}, {vy}) for ({}, {})",
            e.0,
            e.1
        );
    }
}

#[test]
fn model_svg_draws_the_sweep_with_ceilings_and_efficiency() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("model.svg");
    let args = [
        "model",
        "--gen",
        "3",
        "--width",
        "4",
        "--sizes",
        "64,128,256,512,1K,4K,64K,1M",
    ];
    let doc = json(pcielab(
        &[&args[..], &["--json", "--svg", out.to_str().unwrap()]].concat(),
    ));
    let svg = read(&svg_text(&out));
    for label in [
        "PCIe Gen3 x4: DMA throughput vs transfer size (MPS 256, MRRS 512)",
        "transfer size (bytes, log scale)",
        "throughput (MB/s, 10^6 B/s)",
        "efficiency (% of link-achievable)",
        "link write MB/s",
        "link read MB/s",
        "line rate 3938 MB/s",
        "link-achievable 3643 MB/s",
    ] {
        assert!(
            svg.has_text(label),
            "{label} missing from {:?}",
            svg.texts()
        );
    }
    let x = svg.bottom_axis(parse_log2_bytes);
    let y = svg.left_axis();
    let points = doc["points"].as_array().unwrap();
    for (colour, field) in [(BLUE, "write_MBps"), (RED, "read_MBps")] {
        let expected: Vec<(f64, f64)> = points
            .iter()
            .map(|p| {
                (
                    p["size"].as_f64().unwrap().log2(),
                    p[field].as_f64().unwrap(),
                )
            })
            .collect();
        let lines = svg.lines_of(colour);
        assert_eq!(lines.len(), 1, "{field}");
        assert_points(&lines[0].points, &expected, x, y, field);
    }
    // The right axis reads the same curves as % of link-achievable: its 100 sits at that rate.
    let achievable = doc["achievable_MBps"].as_f64().unwrap();
    let right = svg.right_axis();
    assert!((right.pixel(100.0) - y.pixel(achievable)).abs() <= 1.5);
    // The line-rate reference line is drawn at the line rate.
    let line_rate = doc["line_rate_MBps"].as_f64().unwrap();
    let dashes: Vec<_> = svg.lines_of("#333333");
    assert!(!dashes.is_empty());
    assert!(dashes
        .iter()
        .all(|d| (y.value(d.points[0].1) - line_rate).abs() <= 1.5 * y.per_pixel()));
    // Nothing on a byte axis is labelled with a fraction of a power of two.
    assert!(
        svg.has_text("4K") && svg.has_text("1M"),
        "{:?}",
        svg.texts()
    );

    // The same picture again from the JSON a user kept: `report --from` re-plots old results.
    let saved = dir.path().join("model.json");
    std::fs::write(&saved, doc.to_string()).unwrap();
    let html = dir.path().join("model.html");
    ok(pcielab(&[
        "report",
        "--from",
        saved.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(html).unwrap();
    let drawn = svg_text(&out);
    let data_lines: Vec<&str> = drawn
        .lines()
        .filter(|l| l.starts_with("<polyline"))
        .collect();
    assert!(data_lines.len() > 10);
    for line in data_lines {
        assert!(html.contains(line), "{line} not in the report");
    }
}

#[test]
fn model_svg_with_a_platform_adds_the_predictions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.svg");
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/../../presets/rk3588-ep.toml");
    let doc = json(pcielab(&[
        "model",
        "--gen",
        "2",
        "--width",
        "1",
        "--platform",
        platform,
        "--json",
        "--svg",
        out.to_str().unwrap(),
    ]));
    let svg = read(&svg_text(&out));
    assert!(svg.has_text("platform write MB/s") && svg.has_text("platform read MB/s"));
    assert!(svg
        .texts()
        .iter()
        .any(|t| t.ends_with("with platform prediction")));
    // The dashed prediction curves run through the document's predicted values: series 3 and 4
    // of the palette (green, orange).
    let x = svg.bottom_axis(parse_log2_bytes);
    let y = svg.left_axis();
    let points = doc["points"].as_array().unwrap();
    for (colour, field) in [
        ("#2CA02C", "predicted_write_MBps"),
        ("#FF7F0E", "predicted_read_MBps"),
    ] {
        let expected: Vec<(f64, f64)> = points
            .iter()
            .map(|p| {
                (
                    p["size"].as_f64().unwrap().log2(),
                    p[field].as_f64().unwrap(),
                )
            })
            .collect();
        assert_dashes_follow(&svg.lines_of(colour), &expected, x, y, field);
    }
}

/// Asserts that the dashes of a dashed curve lie on the polyline through `expected` (values)
/// within a pixel and a half, and cover it from its first point to its last (within one dash
/// and gap, 13 px): a dash drawn at a wrong value, or a curve cut short, fails.
fn assert_dashes_follow(
    dashes: &[&svg_reading::Polyline],
    expected: &[(f64, f64)],
    x: svg_reading::Axis,
    y: svg_reading::Axis,
    what: &str,
) {
    let path: Vec<(f64, f64)> = expected
        .iter()
        .map(|&(vx, vy)| (x.pixel(vx), y.pixel(vy)))
        .collect();
    let distance = |(px, py): (f64, f64)| {
        path.windows(2)
            .map(|w| {
                let ((ax, ay), (bx, by)) = (w[0], w[1]);
                let (dx, dy) = (bx - ax, by - ay);
                let t = (((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
                (px - ax - t * dx).hypot(py - ay - t * dy)
            })
            .fold(f64::INFINITY, f64::min)
    };
    assert!(dashes.len() > path.len(), "{what}: {} dashes", dashes.len());
    let drawn: Vec<(f64, f64)> = dashes.iter().flat_map(|d| d.points.clone()).collect();
    for &p in &drawn {
        assert!(
            distance(p) <= 1.5,
            "{what}: a dash at ({:.1}, {:.1}) reads ({:.2}, {:.2}), {:.1} px off the curve through \
             {expected:?}",
            p.0,
            p.1,
            x.value(p.0),
            y.value(p.1),
            distance(p)
        );
    }
    let (first, last) = (path[0].0, path[path.len() - 1].0);
    let min_x = drawn.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let max_x = drawn.iter().map(|p| p.0).fold(f64::NEG_INFINITY, f64::max);
    assert!(
        (min_x - first).abs() <= 13.0 && (last - max_x).abs() <= 13.0 && max_x <= last + 1.5,
        "{what}: dashes span x {min_x}..{max_x}, the curve {first}..{last}"
    );
}

const STAT_EVENTS: [&str; 6] = [
    "-e",
    "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
    "-e",
    "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/",
    "-e",
    "pcie_bdf_200/rx_memory_write/",
];

fn stat_args<'a>(svg: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["stat", "--machine", "sim:yitian710", "-a", "--svg", svg];
    args.extend(extra);
    args.extend(STAT_EVENTS);
    args.extend([
        "--",
        "fio",
        "--filename=./test.big",
        "-iodepth=64",
        "-ioengine=libaio",
        "--direct=1",
        "--rw=readwrite",
        "--bs=1m",
        "--numjobs=4",
        "--time_based=1",
        "--runtime=4",
        "--group_reporting",
        "--name=test-rw",
    ]);
    args
}

#[test]
fn stat_interval_svg_draws_each_event_over_time_with_the_link_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stat.svg");
    let out = out.to_str().unwrap();
    let doc = json(pcielab(&stat_args(out, &["-I", "500", "--json"])));
    let svg = read(&svg_text(Path::new(out)));
    let intervals = doc["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 8, "{}", intervals.len());
    assert!(svg.has_text(&format!(
        "PCIe PMU events over time ({} intervals of 500 ms)",
        intervals.len()
    )));
    for label in [
        "time (s)",
        "bandwidth (MB/s, 10^6 B/s)",
        "count per 500 ms interval",
        "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/ (MB/s)",
        "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/ (MB/s)",
        "pcie_bdf_200/rx_memory_write/ (count) (right axis)",
    ] {
        assert!(
            svg.has_text(label),
            "{label} missing from {:?}",
            svg.texts()
        );
    }
    let x = svg.bottom_axis(parse_number);
    let y = svg.left_axis();
    let right = svg.right_axis();
    for (i, colour, axis, field) in [
        (0, BLUE, y, "bandwidth_MBps"),
        (1, RED, y, "bandwidth_MBps"),
        (2, "#2CA02C", right, "count"),
    ] {
        let expected: Vec<(f64, f64)> = intervals
            .iter()
            .map(|iv| {
                let e = &iv["events"][i];
                (iv["time_s"].as_f64().unwrap(), e[field].as_f64().unwrap())
            })
            .collect();
        let lines = svg.lines_of(colour);
        assert_eq!(lines.len(), 1, "event {i}");
        assert_points(&lines[0].points, &expected, x, axis, field);
    }
    let ceiling = doc["events"][0]["link_achievable_MBps"].as_f64().unwrap();
    assert!(svg.has_text(&format!("pcie_bdf_200 link-achievable {ceiling:.0} MB/s")));
    let reference = svg.lines_of("#333333");
    assert!(!reference.is_empty());
    assert!((y.value(reference[0].points[0].1) - ceiling).abs() <= 1.5 * y.per_pixel());
}

#[test]
fn stat_svg_needs_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stat.svg");
    let o = pcielab(&stat_args(out.to_str().unwrap(), &[]));
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--interval-print"), "{err}");
    assert!(!out.exists());
}

/// A board with a downtrained, MPS-mismatched SSD behind a switch: two warnings and a
/// downgraded link.
const WARNED: &str = r#"name = "warned"
description = "one root port with a switch and a downtrained SSD"

[[function]]
bdf = "0000:00:01.0"
kind = "root_port"
vendor = 0x1ded
device_id = 0x8000
class = 0x060400
link = { max_speed = 16.0, max_width = 4, speed = 16.0, width = 4 }

[[function]]
bdf = "0000:01:00.0"
kind = "switch_upstream"
parent = "0000:00:01.0"
vendor = 0x104c
device_id = 0x8232
class = 0x060400

[[function]]
bdf = "0000:02:00.0"
kind = "switch_downstream"
parent = "0000:01:00.0"
vendor = 0x104c
device_id = 0x8233
class = 0x060400
mps = 256

[[function]]
bdf = "0000:03:00.0"
kind = "endpoint"
parent = "0000:02:00.0"
vendor = 0x144d
device_id = 0xa808
class = 0x010802
link = { max_speed = 8.0, max_width = 4, speed = 8.0, width = 1 }
mps = 128
"#;

#[test]
fn topology_svg_names_every_function_and_marks_downgrades_and_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("warned.toml");
    std::fs::write(&spec, WARNED).unwrap();
    let warned = format!("sim:{}", spec.display());
    let machines = [
        "sim:yitian710",
        "sim:rk3588-evb",
        "sim:rk3568-evb",
        "sim:qemu-seed",
        "sim:qemu-wide",
        warned.as_str(),
    ];
    let mut downgrades_seen = 0;
    let mut limited_only = 0;
    let mut warnings_seen = 0;
    for machine in machines {
        let out = dir.path().join("topo.svg");
        let doc = json(pcielab(&[
            "topo",
            "--machine",
            machine,
            "--json",
            "--svg",
            out.to_str().unwrap(),
        ]));
        let svg = read(&svg_text(&out));
        let functions = doc["functions"].as_array().unwrap();
        for f in functions {
            let bdf = f["bdf"].as_str().unwrap();
            let kind = f["kind"].as_str().unwrap();
            assert!(
                svg.labels
                    .iter()
                    .any(|l| l.text.starts_with(&format!("{bdf}  {kind}  ["))),
                "{machine}: {bdf} not named in {:?}",
                svg.texts()
            );
            for w in f["warnings"].as_array().unwrap() {
                let w = w.as_str().unwrap();
                let head: String = w.chars().take(60).collect();
                assert!(
                    svg.labels
                        .iter()
                        .any(|l| l.text.starts_with(&format!("\u{26a0} {head}"))),
                    "{machine}: warning {w} not drawn"
                );
                warnings_seen += 1;
            }
            if let Some(mbps) = f["ceiling_achievable_MBps"].as_f64() {
                let wanted = format!("achievable {mbps:.0} MB/s");
                assert!(
                    svg.labels.iter().any(|l| l.text.ends_with(&wanted)),
                    "{machine}: {bdf}: no '{wanted}'"
                );
            }
        }
        // Marked in red: exactly the links the Warnings list calls downtrained; a port only
        // limited by a slower device (lspci's "(downgraded)") is not.
        let downtrained = functions
            .iter()
            .filter(|f| {
                f["warnings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|w| w.as_str().unwrap().starts_with("downtrained link"))
            })
            .count();
        let marked = svg
            .labels
            .iter()
            .filter(|l| l.text.contains(" DOWNTRAINED,") || l.text.ends_with(" DOWNTRAINED"))
            .count();
        assert_eq!(marked, downtrained, "{machine}");
        downgrades_seen += downtrained;
        limited_only += functions
            .iter()
            .filter(|f| f["link"]["downgraded"] == true)
            .count()
            - downtrained;
    }
    // The presets and the warned board between them exercise both marks.
    assert!(downgrades_seen >= 1, "{downgrades_seen}");
    // ... and links lspci calls downgraded only because the other end is slower, left unmarked.
    assert!(limited_only >= 2, "{limited_only}");
    assert!(warnings_seen >= 2, "{warnings_seen}");
}

#[test]
fn p2p_svg_shows_every_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p2p.svg");
    let doc = json(pcielab(&[
        "topo",
        "--machine",
        "sim:qemu-wide",
        "--p2p",
        "--full",
        "--json",
        "--svg",
        out.to_str().unwrap(),
    ]));
    let svg = read(&svg_text(&out));
    let pairs = doc["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 4 * 3, "--full lists every ordered pair");
    let mark = |map: &str| match map {
        "bus_address" => "B",
        "through_host_bridge" => "H",
        "not_supported" => "x",
        _ => "?",
    };
    // Column headings stand on end above the grid, row headings are anchored at their right.
    let column_x = |bdf: &str| {
        svg.labels
            .iter()
            .find(|l| l.text == bdf && l.rotated)
            .map(|l| l.x)
            .unwrap()
    };
    let row_y = |bdf: &str| {
        svg.labels
            .iter()
            .find(|l| l.text == bdf && l.anchor == "end")
            .map(|l| l.y)
            .unwrap()
    };
    for p in pairs {
        let (provider, client) = (
            p["provider"].as_str().unwrap(),
            p["client"].as_str().unwrap(),
        );
        let text = format!("{} {}", p["distance"], mark(p["map"].as_str().unwrap()));
        let (x, y) = (column_x(client), row_y(provider));
        assert!(
            svg.labels
                .iter()
                .any(|l| l.text == text && (l.x - x).abs() <= 1.0 && (l.y - y).abs() <= 1.0),
            "{provider} -> {client}: no cell '{text}'"
        );
    }
    assert!(svg.has_text("B: bus address (through a common switch)"));
}

#[test]
fn p2p_svg_draws_one_row_per_group() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("groups.svg");
    let doc = json(pcielab(&[
        "topo",
        "--machine",
        "sim:qemu-wide",
        "--p2p",
        "--json",
        "--svg",
        out.to_str().unwrap(),
    ]));
    assert!(doc["pairs"].as_array().unwrap().is_empty());
    let groups = doc["groups"].as_array().unwrap();
    let svg = read(&svg_text(&out));
    for g in groups {
        let name = g["group"].as_str().unwrap();
        let row = svg
            .labels
            .iter()
            .filter(|l| l.anchor == "end" && l.text.starts_with(&format!("{name} ")))
            .count();
        assert_eq!(row, 1, "group {name} has one row heading");
    }
    let functions: usize = groups
        .iter()
        .map(|g| g["functions"].as_array().unwrap().len())
        .sum();
    assert_eq!(functions, 4, "every endpoint is in one group");
    assert!(svg.labels.iter().any(|l| l
        .text
        .starts_with("P2PDMA verdicts between groups of endpoints")));
}

/// Every row of a `fit --json` document drawn on its SVG: read (blue) and write (red) predicted
/// values as lines and measured values as points on the top chart, residuals as lines on the
/// chart below, each read back through that chart's axes to the row's value within a pixel.
fn assert_fit_drawn(svg: &svg_reading::Svg, doc: &Value) {
    let rows: Vec<&Value> = doc["rows"].as_array().unwrap().iter().collect();
    let of_kind = |kind: &str, field: &str| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r["workload"].as_str().unwrap().starts_with(kind))
            .map(|r| {
                let size: f64 = r["workload"]
                    .as_str()
                    .unwrap()
                    .split_whitespace()
                    .nth(1)
                    .unwrap()
                    .parse()
                    .unwrap();
                (size.log2(), r[field].as_f64().unwrap())
            })
            .collect();
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v
    };
    let x = svg.bottom_axis(parse_log2_bytes);
    let y = svg.left_axis();
    // "read" sorts first: blue; "write": red. Fitted values are lines, measured are points.
    for (kind, colour) in [("read", BLUE), ("write", RED)] {
        let fitted = svg.lines_of(colour);
        assert_points(
            &fitted[0].points,
            &of_kind(kind, "predicted_MBps"),
            x,
            y,
            kind,
        );
        let measured: Vec<(f64, f64)> = svg
            .circles
            .iter()
            .filter(|(c, _, cy)| c == colour && *cy < 480.0)
            .map(|(_, cx, cy)| (*cx, *cy))
            .collect();
        let mut measured_expected = of_kind(kind, "measured_MBps");
        measured_expected.sort_by(|a, b| a.0.total_cmp(&b.0));
        // Legend swatches are circles too: keep those on the plot, in x order.
        let mut on_plot: Vec<(f64, f64)> = measured
            .into_iter()
            .filter(|(cx, _)| *cx > x.pixel(5.0))
            .collect();
        on_plot.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert_points(&on_plot, &measured_expected, x, y, kind);
        // The residual chart below, on its own axes.
        let residual_y = svg.left_axis_below(560.0);
        let residual_x = svg.bottom_axis_below(600.0, parse_log2_bytes);
        assert_points(
            &fitted[1].points,
            &of_kind(kind, "residual_percent"),
            residual_x,
            residual_y,
            kind,
        );
    }
}

#[test]
fn fit_svg_draws_measured_points_fitted_lines_and_residuals() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fit.svg");
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/rockchip/rk3588-gen3x4-dmatest.txt"
    );
    let doc = json(pcielab(&[
        "fit",
        data,
        "--gen",
        "3",
        "--width",
        "4",
        "--json",
        "--svg",
        out.to_str().unwrap(),
    ]));
    let svg = read(&svg_text(&out));
    assert!(svg.has_text(&format!(
        "Fit: measured vs fitted ({} rows, rms residual {:.2} %)",
        doc["rows_used"],
        doc["rms_residual_percent"].as_f64().unwrap()
    )));
    assert_fit_drawn(&svg, &doc);
}

#[test]
fn sim_run_svg_is_drawn_from_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("colo.svg");
    let scenario = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/mb-throttling.toml"
    );
    let doc = json(pcielab(&[
        "sim",
        "run",
        scenario,
        "--json",
        "--svg",
        out.to_str().unwrap(),
    ]));
    let svg = read(&svg_text(&out));
    assert!(svg.has_text(doc["title"].as_str().unwrap()));
    assert!(svg.has_text(doc["x_label"].as_str().unwrap()));
    let x = svg.bottom_axis(parse_number);
    let y = svg.left_axis();
    let line = &doc["lines"][0];
    assert_eq!(line["right_axis"], false);
    assert!(svg.has_text(line["label"].as_str().unwrap()));
    let expected: Vec<(f64, f64)> = line["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    assert_points(&svg.lines_of(BLUE)[0].points, &expected, x, y, "first line");
}

/// Runs `pcielab report --from FROM -o HTML`, which must refuse with exit 2; its stderr.
fn report_refuses(from: &Path, html: &Path) -> String {
    let o = pcielab(&[
        "report",
        "--from",
        from.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    err
}

#[test]
fn wrong_kind_and_truncated_results_are_named_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let pmus = dir.path().join("pmus.json");
    std::fs::write(
        &pmus,
        ok(pcielab(&[
            "pmu",
            "list",
            "--machine",
            "sim:yitian710",
            "--json",
        ])),
    )
    .unwrap();
    let err = report_refuses(&pmus, &html);
    assert!(
        err.contains(&format!(
            "{}: not a result pcielab can draw (top-level fields: kernels, machine, pmus, schema)",
            pmus.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("pcielab stat --json, pcielab model --json"),
        "{err}"
    );

    let model = ok(pcielab(&["model", "--gen", "3", "--width", "4", "--json"]));
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &model[..model.len() / 2]).unwrap();
    let err = report_refuses(&cut, &html);
    assert!(
        err.contains(&format!(
            "{}: is cut short (truncated JSON): EOF while parsing",
            cut.display()
        )),
        "{err}"
    );

    let misshapen = dir.path().join("m.json");
    std::fs::write(
        &misshapen,
        model.replace("\"points\": [", "\"points\": 3, \"x\": ["),
    )
    .unwrap();
    let err = report_refuses(&misshapen, &html);
    assert!(err.contains("looks like `pcielab model --json` output but does not fit its shape: invalid type: integer `3`, expected a sequence"), "{err}");

    let missing = dir.path().join("none.json");
    report_refuses(&missing, &html);
    // Nothing was written by any failed run. (`report -o` with no input at all describes the
    // default machine, the live host: report.rs tests that.)
    assert!(!html.exists());
}

/// A real `pcielab lab check qemu-seed --json` (QEMU 7.2, Debian 6.1 guest kernel), drawn as a
/// function x field matrix whose every cell holds its row's status.
#[test]
fn lab_check_results_draw_as_a_status_matrix_in_the_report() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/lab-check-qemu-seed.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("lab.html");
    ok(pcielab(&[
        "report",
        "--from",
        fixture,
        "-o",
        html.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&html).unwrap();
    let start = html.find("<svg ").unwrap();
    let end = html[start..].find("</svg>").unwrap() + start + "</svg>".len();
    let svg = read(&html[start..end]);
    assert!(
        svg.has_text("lab check qemu-seed: guest agrees (0 mismatches, 3 expected differences)")
    );
    let rows = doc["rows"].as_array().unwrap();
    for r in rows {
        let (bdf, field) = (r["bdf"].as_str().unwrap(), r["field"].as_str().unwrap());
        let x = svg
            .labels
            .iter()
            .find(|l| l.text == field && l.rotated)
            .unwrap()
            .x;
        let y = svg
            .labels
            .iter()
            .find(|l| l.text == bdf && l.anchor == "end")
            .unwrap()
            .y;
        let mark = match r["status"].as_str().unwrap() {
            "match" => "=",
            "expected" => "~",
            _ => "x",
        };
        assert!(
            svg.labels
                .iter()
                .any(|l| l.text == mark && (l.x - x).abs() <= 1.0 && (l.y - y).abs() <= 1.0),
            "{bdf} {field}: no '{mark}' cell"
        );
    }
    // The table beneath lists every compared field; expected differences say why.
    assert_eq!(html.matches("<td>expected</td>").count(), 3);
    assert!(html.contains("<td>part of every q35 machine (the spec leaves it out)</td>"));
    assert_eq!(
        html.matches("<tr>").count() + html.matches("<tr class=").count(),
        rows.len() + 1
    );
}

#[test]
fn fit_platform_predictions_draw_too() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pred.svg");
    let data = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/rockchip/rk3588-gen2x1-dmatest.txt"
    );
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/../../presets/rk3588-ep.toml");
    let doc = json(pcielab(&[
        "fit",
        data,
        "--gen",
        "2",
        "--width",
        "1",
        "--addr64",
        "--platform",
        platform,
        "--json",
        "--svg",
        out.to_str().unwrap(),
    ]));
    let svg = read(&svg_text(&out));
    assert!(svg.has_text(&format!(
        "Measured vs predicted by a platform fitted elsewhere ({} rows, rms residual {:.2} %)",
        doc["rows_used"],
        doc["rms_residual_percent"].as_f64().unwrap()
    )));
    assert!(
        svg.has_text("read predicted") && svg.has_text("write measured"),
        "{:?}",
        svg.texts()
    );
    // Not only the legend: every row's predicted, measured and residual value is drawn where
    // the axes put it.
    assert_fit_drawn(&svg, &doc);
}

/// `pcielab plot` draws a kept result exactly as the command's own `--svg` did.
#[test]
fn a_kept_result_replots_to_the_same_picture() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "model",
            vec![
                "model".into(),
                "--gen".into(),
                "4".into(),
                "--width".into(),
                "8".into(),
                "--json".into(),
            ],
        ),
        (
            "stat",
            stat_args(&path("unused.svg"), &["-I", "1000", "--json"])
                .iter()
                .map(|a| a.to_string())
                .collect(),
        ),
        (
            "topo",
            vec![
                "topo".into(),
                "--machine".into(),
                "sim:rk3588-evb".into(),
                "--json".into(),
            ],
        ),
        (
            "p2p",
            vec![
                "topo".into(),
                "--machine".into(),
                "sim:qemu-wide".into(),
                "--p2p".into(),
                "--json".into(),
            ],
        ),
    ];
    for (name, mut args) in cases {
        let direct = path(&format!("{name}.svg"));
        if name == "stat" {
            // stat_args put --svg first: point it at this case's file.
            let at = args.iter().position(|a| a == "--svg").unwrap();
            args[at + 1] = direct.clone();
        } else {
            args.extend(["--svg".to_string(), direct.clone()]);
        }
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let kept = path(&format!("{name}.json"));
        std::fs::write(&kept, ok(pcielab(&argv))).unwrap();
        let replotted = path(&format!("{name}-again.svg"));
        ok(pcielab(&["plot", &kept, "-o", &replotted]));
        assert_eq!(
            std::fs::read_to_string(&direct).unwrap(),
            std::fs::read_to_string(&replotted).unwrap(),
            "{name}"
        );
    }
    // A stat result counted without -I has no series: named, exit 2, nothing written.
    let plain = path("plain.json");
    let mut args = stat_args("x", &["--json"]);
    let at = args.iter().position(|a| *a == "--svg").unwrap();
    args.drain(at..at + 2);
    std::fs::write(&plain, ok(pcielab(&args))).unwrap();
    let o = pcielab(&["plot", &plain, "-o", &path("plain.svg")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!(
            "{plain}: this stat result has no intervals to draw over time: count with -I MS"
        )),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!Path::new(&path("plain.svg")).exists());
}
