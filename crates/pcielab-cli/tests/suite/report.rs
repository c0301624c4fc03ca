//! `pcielab report` opened in a real browser: the page for `sim:yitian710` with a `stat -I`
//! result and a `model` sweep is loaded by headless Chromium (Debian's `chromium`, installed
//! by `.ci/run`) with its network pointed at a dead proxy. `--dump-dom` must show every section
//! and no console error; Chromium's own network log must show no request made by the page; a
//! `--screenshot` must show every function box of the topology diagram in view with its fill
//! colour at the place the SVG gives it (located on the page by a probe copy that reports the
//! SVG's bounding box); printed to PDF, every section must start a page with its plot on the
//! same page and its table's numbers (the events' counts, the model's MB/s) as the result files
//! hold them (read back with poppler's `pdftotext`). A
//! control page with a script error and an external image proves the browser checks can fail.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{ok, pcielab};

/// What one headless Chromium run left behind.
struct Browsed {
    stdout: String,
    /// Console messages Chromium logged for the page (`INFO:CONSOLE` lines).
    console: Vec<String>,
    /// URLs the page itself asked the network for (its requests carry the file:// isolation
    /// key; Chromium's own background requests do not).
    page_requests: Vec<String>,
}

/// Opens `page` in headless Chromium with `extra` arguments, no network (a dead proxy) and a
/// network log.
fn chromium(dir: &Path, page: &Path, extra: &[&str]) -> Browsed {
    let net_log = dir.join("net-log.json");
    let profile = dir.join("profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=http://127.0.0.1:9",
            "--enable-logging=stderr",
            "--v=0",
            "--net-log-capture-mode=Everything",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium (Debian package `chromium`) must be installed; .ci/run installs it");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let log: Value = serde_json::from_str(&std::fs::read_to_string(&net_log).unwrap())
        .expect("Chromium's net log is JSON");
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    let page_requests = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == start_job)
        .filter(|e| {
            e["params"]["network_isolation_key"]
                .as_str()
                .is_some_and(|k| k.starts_with("file://"))
        })
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_string))
        .collect();
    let _ = std::fs::remove_file(&net_log);
    Browsed {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        console,
        page_requests,
    }
}

/// Width, height and pixels (RGB or RGBA rows) of a PNG file.
fn png_pixels(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buffer).unwrap();
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let pixels = buffer[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    (info.width, info.height, pixels)
}

fn report_inputs(dir: &Path) -> (PathBuf, PathBuf) {
    let stat = dir.join("stat.json");
    let model = dir.join("model.json");
    std::fs::write(
        &stat,
        ok(pcielab(&[
            "stat",
            "--machine",
            "sim:yitian710",
            "-a",
            "-I",
            "1000",
            "--json",
            "-e",
            "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/",
            "-e",
            "pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/",
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
            "--runtime=5",
            "--group_reporting",
            "--name=test-rw",
        ])),
    )
    .unwrap();
    std::fs::write(
        &model,
        ok(pcielab(&[
            "model",
            "--gen",
            "3",
            "--width",
            "4",
            "--sizes",
            "64,128,256,512,1K,4K,64K,1M",
            "--json",
        ])),
    )
    .unwrap();
    (stat, model)
}

#[test]
fn the_report_opens_offline_in_chromium_with_every_section() {
    let dir = tempfile::tempdir().unwrap();
    let (stat, model) = report_inputs(dir.path());
    let page = dir.path().join("report.html");
    ok(pcielab(&[
        "report",
        "--machine",
        "sim:yitian710",
        "--from",
        stat.to_str().unwrap(),
        "--from",
        model.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]));
    let html = std::fs::read_to_string(&page).unwrap();

    // Self-contained: no URL, no script, nothing loaded from elsewhere.
    for forbidden in [
        "http:", "https:", "ftp:", "//", "<script", "<link", "src=", "url(", "@import", "<iframe",
    ] {
        assert!(!html.contains(forbidden), "the page contains {forbidden:?}");
    }
    for href in html.split("href=\"").skip(1) {
        assert!(
            href.starts_with('#'),
            "a link leaves the page: {}",
            &href[..40.min(href.len())]
        );
    }
    assert!(html.contains("@media print"));

    let browsed = chromium(dir.path(), &page, &["--dump-dom"]);
    let dom = &browsed.stdout;
    assert!(
        browsed.console.is_empty(),
        "console messages: {:?}",
        browsed.console
    );
    assert!(
        browsed.page_requests.is_empty(),
        "the page asked for {:?}",
        browsed.page_requests
    );
    for (id, heading) in [
        ("topology", "Topology of yitian710"),
        ("pmus", "PMU availability"),
        ("result-1", "PMU counts"),
        ("result-2", "Link model Gen3 x4"),
    ] {
        assert!(
            dom.contains(&format!("<section id=\"{id}\">\n<h2>{heading}</h2>")),
            "section {id} ({heading}) not in the DOM"
        );
        assert!(
            dom.contains(&format!("<a href=\"#{id}\">{heading}</a>")),
            "{id} not in contents"
        );
    }
    assert_eq!(
        dom.matches("<svg ").count(),
        3,
        "topology, stat and model plots"
    );
    // The topology section names every function, and the PMU table every PMU.
    let topology: Value = serde_json::from_str(&ok(pcielab(&[
        "topo",
        "--machine",
        "sim:yitian710",
        "--json",
    ])))
    .unwrap();
    for f in topology["functions"].as_array().unwrap() {
        assert!(dom.contains(&format!("<td>{}</td>", f["bdf"].as_str().unwrap())));
    }
    let pmus: Value = serde_json::from_str(&ok(pcielab(&[
        "pmu",
        "list",
        "--machine",
        "sim:yitian710",
        "--json",
    ])))
    .unwrap();
    for p in pmus["pmus"].as_array().unwrap() {
        assert!(dom.contains(&format!("<td>{}</td>", p["name"].as_str().unwrap())));
    }
    // The tables under the plots carry the results' numbers.
    assert!(dom.contains("<td>pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/</td>"));
    assert!(
        dom.contains("<td>3643</td>"),
        "the model's achievable rate at 4K"
    );

    let shot = dir.path().join("report.png");
    let shot_arg = format!("--screenshot={}", shot.display());
    let browsed = chromium(
        dir.path(),
        &page,
        &["--hide-scrollbars", "--window-size=1280,1800", &shot_arg],
    );
    assert!(browsed.console.is_empty(), "{:?}", browsed.console);
    assert!(
        browsed.page_requests.is_empty(),
        "{:?}",
        browsed.page_requests
    );
    let (width, height, pixels) = png_pixels(&shot);
    assert_eq!((width, height), (1280, 1800));
    // The topology diagram is drawn where the page lays it out: every function box in view
    // has its own fill colour just inside its right edge, and the page's white in the gap
    // below it, at the positions the SVG gives them.
    let boxes = topology_boxes_in_view(dir.path(), &html, (width, &pixels));
    eprintln!("{boxes} topology boxes checked in the screenshot");
    assert!(boxes >= 10, "only {boxes} function boxes in view");
    let mut colours: Vec<[u8; 3]> = pixels.clone();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        colours.len() > 50,
        "{} colours: a page of text and diagrams has more",
        colours.len()
    );

    // Printed: each section starts a page, and its heading and its plot share that page.
    let pdf = dir.path().join("report.pdf");
    let pdf_arg = format!("--print-to-pdf={}", pdf.display());
    chromium(dir.path(), &page, &["--no-pdf-header-footer", &pdf_arg]);
    let pages = pdf_pages(&pdf);
    assert!(pages.len() >= 4, "{} pages", pages.len());
    for (heading, plot_title) in [
        ("Topology of yitian710", "PCIe topology: yitian710"),
        ("PMU availability", "PCIe PMU(s); count with"),
        ("PMU counts", "PCIe PMU events over time"),
        (
            "Link model Gen3 x4",
            "PCIe Gen3 x4: DMA throughput vs transfer size",
        ),
    ] {
        let page = pages
            .iter()
            .find(|p| p.lines().any(|l| l.trim() == heading))
            .unwrap_or_else(|| panic!("no page has the heading {heading}"));
        assert!(
            page.contains(plot_title),
            "{heading}: its plot is not on its page:\n{page}"
        );
        if heading != "Topology of yitian710" {
            let first = page.lines().find(|l| !l.trim().is_empty()).unwrap().trim();
            assert_eq!(first, heading, "{heading} does not start its page");
        }
    }
    // The printed tables carry the results' own numbers on their sections' pages: each event's
    // count (thousands separated) and each model size's write and read MB/s.
    let page_of = |heading: &str| {
        pages
            .iter()
            .find(|p| p.lines().any(|l| l.trim() == heading))
            .unwrap()
    };
    let stat_doc: Value = serde_json::from_str(&std::fs::read_to_string(&stat).unwrap()).unwrap();
    let counts = page_of("PMU counts");
    for e in stat_doc["events"].as_array().unwrap() {
        let (event, count) = (e["event"].as_str().unwrap(), e["count"].as_u64().unwrap());
        assert!(
            counts.lines().any(|l| {
                let words: Vec<&str> = l.split_whitespace().collect();
                words.first() == Some(&event) && words.get(1) == Some(&thousands(count).as_str())
            }),
            "no printed row '{event} {}':\n{counts}",
            thousands(count)
        );
    }
    let model_doc: Value = serde_json::from_str(&std::fs::read_to_string(&model).unwrap()).unwrap();
    let sweep = page_of("Link model Gen3 x4");
    for p in model_doc["points"].as_array().unwrap() {
        let want = [
            p["size"].to_string(),
            format!("{:.0}", p["write_MBps"].as_f64().unwrap()),
            format!("{:.0}", p["read_MBps"].as_f64().unwrap()),
        ];
        assert!(
            sweep.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3
                    && [w[0], w[1], w[3]] == [&want[0], &want[1], &want[2]].map(|s| s.as_str())
            }),
            "no printed row {want:?}:\n{sweep}"
        );
    }
}

/// 59192072 as the report prints it: 59,192,072.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Where the page's first SVG (the topology) lies, in CSS pixels at the screenshot's window
/// size: a copy of the page with a probe script that writes the SVG's bounding box into the
/// title, read back with --dump-dom.
fn first_svg_box(dir: &Path, html: &str) -> [f64; 4] {
    let probe = dir.join("probe.html");
    std::fs::write(
        &probe,
        html.replace(
            "</body>",
            "<script>var r = document.querySelector('svg').getBoundingClientRect(); \
             document.title = 'box ' + [r.left + scrollX, r.top + scrollY, r.width, r.height]\
             .join(' ');</script></body>",
        ),
    )
    .unwrap();
    let browsed = chromium(
        dir,
        &probe,
        &["--hide-scrollbars", "--window-size=1280,1800", "--dump-dom"],
    );
    let title = browsed
        .stdout
        .split("<title>box ")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap_or_else(|| panic!("the probe wrote no box: {:?}", browsed.console));
    let numbers: Vec<f64> = title
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    [numbers[0], numbers[1], numbers[2], numbers[3]]
}

/// Checks every function box of the topology SVG that lies in the screenshot: its fill just
/// inside its right edge, white in the gap below it. Returns how many were checked.
fn topology_boxes_in_view(dir: &Path, html: &str, (width, pixels): (u32, &[[u8; 3]])) -> usize {
    let [left, top, shown_width, _] = first_svg_box(dir, html);
    let start = html.find("<svg ").unwrap();
    let end = html[start..].find("</svg>").unwrap() + start + "</svg>".len();
    let svg = roxmltree::Document::parse(&html[start..end]).unwrap();
    let number = |n: &roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let scale = shown_width / number(&svg.root_element(), "width");
    let pixel = |x: f64, y: f64| -> Option<[u8; 3]> {
        let (px, py) = ((left + x * scale).floor(), (top + y * scale).floor());
        let at = py as usize * width as usize + px as usize;
        (px >= 0.0 && px < f64::from(width) && py >= 0.0)
            .then(|| pixels.get(at).copied())
            .flatten()
    };
    let hex = |c: &str| -> [u8; 3] {
        let v = u32::from_str_radix(c.trim_start_matches('#'), 16).unwrap();
        [(v >> 16) as u8, (v >> 8) as u8, v as u8]
    };
    let near = |a: [u8; 3], b: [u8; 3]| a.iter().zip(b).all(|(x, y)| x.abs_diff(y) <= 2);
    let mut checked = 0;
    for rect in svg.descendants().filter(|n| n.has_tag_name("rect")) {
        let fill = rect.attribute("fill").unwrap_or("none");
        let (x, y, w, h) = (
            number(&rect, "x"),
            number(&rect, "y"),
            number(&rect, "width"),
            number(&rect, "height"),
        );
        // The background and the outlines (drawn as their own unfilled rects) are not boxes.
        if fill == "none" || fill == "#FFFFFF" || h > 100.0 {
            continue;
        }
        let (Some(inside), Some(below)) = (
            pixel(x + w - 6.0, y + h / 2.0),
            pixel(x + w - 6.0, y + h + 5.0),
        ) else {
            continue; // below the fold
        };
        assert!(
            near(inside, hex(fill)),
            "the box at ({x}, {y}) should show {fill} inside its right edge, the screenshot has \
             {inside:?}"
        );
        assert!(
            near(below, [255, 255, 255]),
            "below the box at ({x}, {y}) should be the page's white, the screenshot has {below:?}"
        );
        checked += 1;
    }
    checked
}

/// The text of each page of a PDF (poppler's `pdftotext`, installed by `.ci/run`).
fn pdf_pages(pdf: &Path) -> Vec<String> {
    let text = Command::new("pdftotext")
        .args(["-layout"])
        .arg(pdf)
        .arg("-")
        .output()
        .expect("pdftotext (Debian package poppler-utils) must be installed; .ci/run installs it");
    assert!(text.status.success());
    String::from_utf8_lossy(&text.stdout)
        .split('\u{c}')
        .filter(|p| !p.trim().is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_checks_catch_a_script_error_and_an_external_request() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("control.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><p>control</p><img src=\"http://example.invalid/x.png\">\
         <script>notDefinedAnywhere();</script></body></html>",
    )
    .unwrap();
    let browsed = chromium(dir.path(), &page, &["--dump-dom"]);
    assert!(browsed.stdout.contains("<p>control</p>"));
    assert!(
        browsed
            .console
            .iter()
            .any(|l| l.contains("Uncaught ReferenceError: notDefinedAnywhere")),
        "{:?}",
        browsed.console
    );
    assert_eq!(browsed.page_requests, ["http://example.invalid/x.png"]);
}

#[test]
fn with_no_machine_and_no_results_the_page_is_about_the_live_host() {
    // `--machine host` is the documented default: `report -o r.html` describes this machine,
    // every PCI function the kernel lists among its diagram's boxes.
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("r.html");
    ok(pcielab(&["report", "-o", page.to_str().unwrap()]));
    let html = std::fs::read_to_string(&page).unwrap();
    let functions: Vec<String> = std::fs::read_dir("/sys/bus/pci/devices")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!functions.is_empty(), "this machine lists no PCI function");
    for bdf in &functions {
        // The diagram names functions without the domain when it is 0000.
        let short = bdf.strip_prefix("0000:").unwrap_or(bdf);
        assert!(html.contains(short), "{bdf} missing from the host's page");
    }
    assert!(html.contains("host"), "the page names its machine");
}
