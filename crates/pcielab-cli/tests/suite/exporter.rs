//! `pcielab exporter` against real clients: a real Prometheus (Debian's `prometheus`, installed by
//! .ci/run) scraping a simulated fio read played in real time, `promtool check metrics`, 100
//! concurrent scrapes with bounded RSS and threads, malformed and oversized requests, a port in
//! use and a non-loopback address; every query of the Grafana dashboard (dashboards/pcielab.json)
//! run by that Prometheus; the alerting rules (dashboards/pcielab-alerts.yml) under `promtool test
//! rules` on exporters' real output; and on `--machine host`, a disk's derived bytes held to the kernel's
//! own count in /proc/diskstats around reads driven past the page cache.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::disk;
use crate::common::exporter as launch;
use common::{ok, pcielab};
use launch::{start_exporter, Running};

const BIN: &str = env!("CARGO_BIN_EXE_pcielab");

/// A fio read of the yitian710's SATA disk behind root port 00:02.0, long enough for every test.
const FIO_READ: [&str; 8] = [
    "fio",
    "--filename=/dev/sda",
    "--rw=read",
    "--bs=1m",
    "--time_based",
    "--runtime=600",
    "--name=r",
    "--numjobs=1",
];

/// Sends `request` as is and returns the status code and body.
fn exchange(addr: &str, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    // The server may answer (and close) before an oversized request is fully written.
    let _ = stream.write_all(request);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

fn get(addr: &str, path: &str) -> (u16, String) {
    exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// A field of /proc/PID/status (VmRSS in kB, Threads).
fn proc_status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What `pcielab stat` reports for the same simulated job: fio's own read bandwidth.
fn simulated_read_bytes_per_s() -> f64 {
    let out = Command::new(BIN)
        .args(["stat", "--machine", "sim:yitian710", "-a", "--json"])
        .args(["-e", "pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/", "--"])
        .args(FIO_READ)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["workload"]["groups"][0]["read"]["bw_bytes"]
        .as_f64()
        .unwrap()
}

/// Prometheus's answer to an instant query: the value of its one series.
fn prometheus_query(port: u16, query: &str) -> Option<f64> {
    let encoded: String = query
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let addr = format!("127.0.0.1:{port}");
    let (status, body) = get(&addr, &format!("/api/v1/query?query={encoded}"));
    if status != 200 {
        return None; // not ready yet
    }
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    let result = doc["data"]["result"].as_array()?;
    assert!(result.len() <= 1, "several series: {body}");
    result.first()?["value"][1].as_str()?.parse().ok()
}

/// The first PromQL block after the paragraph starting `lead` in docs/fleet.md.
fn fleet_query(lead: &str) -> String {
    let doc = include_str!("../../../../docs/fleet.md");
    let after = &doc[doc
        .find(lead)
        .unwrap_or_else(|| panic!("{lead:?} not in docs/fleet.md"))..];
    let block = &after[after.find("```promql\n").unwrap() + "```promql\n".len()..];
    block[..block.find("```").unwrap()].trim().to_string()
}

/// A GET of Prometheus' API as HTTP/1.0, so that a large answer comes whole, not chunked.
fn prometheus_get(port: u16, path: &str) -> (u16, String) {
    let addr = format!("127.0.0.1:{port}");
    exchange(
        &addr,
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes(),
    )
}

/// Every series an instant query returns (a query Prometheus rejects fails the test).
fn prometheus_series(port: u16, query: &str) -> Vec<serde_json::Value> {
    let encoded: String = query.bytes().map(|b| format!("%{b:02X}")).collect();
    let (status, body) = prometheus_get(port, &format!("/api/v1/query?query={encoded}"));
    assert_eq!(status, 200, "{query}: {body}");
    let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
    doc["data"]["result"].as_array().unwrap().clone()
}

/// The `function` labels of every series an instant query returns, sorted.
fn prometheus_functions(port: u16, query: &str) -> Vec<String> {
    let mut functions: Vec<String> = prometheus_series(port, query)
        .iter()
        .map(|r| r["metric"]["function"].as_str().unwrap().to_string())
        .collect();
    functions.sort();
    functions.dedup();
    functions
}

/// A real Prometheus scraping `target` every second, on a free loopback port (returned), its
/// data in a directory that lives as long as the returned guard.
fn start_prometheus(target: &str) -> (Running, u16, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: pcielab\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let port = free_port();
    let prometheus = Running(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package) must be installed: .ci/run installs it"),
    );
    (prometheus, port, dir)
}

/// Blocks until Prometheus on `port` holds at least `scrapes` scrapes of the last 15 s.
fn wait_for_scrapes(port: u16, scrapes: f64) {
    let started = Instant::now();
    while !(TcpStream::connect(("127.0.0.1", port)).is_ok()
        && prometheus_query(port, "count_over_time(pcielab_machine_info[15s])")
            .is_some_and(|n| n >= scrapes))
    {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "Prometheus had not scraped {scrapes} times in 120 s"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A Grafana query with the dashboard's variables as a user would set them: this exporter's
/// instance, root port 00:02.0 (the busy one), and windows this young Prometheus can fill.
fn with_grafana_variables(query: &str, instance: &str) -> String {
    query
        .replace("$instance", instance)
        .replace("$port", "0000:00:02.0")
        .replace("$__rate_interval", "10s")
        .replace("$__range", "15s")
}

#[test]
fn every_dashboard_query_returns_series_from_a_real_prometheus() {
    let dashboard: serde_json::Value =
        serde_json::from_str(include_str!("../../../../dashboards/pcielab.json")).unwrap();
    let (_exporter, addr) = start_exporter("sim:yitian710", &[&["--"][..], &FIO_READ[..]].concat());
    let (_prometheus, port, _data) = start_prometheus(&addr);
    wait_for_scrapes(port, 12.0);

    // Variables: Grafana's label_values(SELECTOR, LABEL) is Prometheus' label values API.
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        let definition = variable["definition"].as_str().unwrap();
        let inner = definition
            .strip_prefix("label_values(")
            .and_then(|d| d.strip_suffix(')'))
            .unwrap_or_else(|| panic!("not label_values(): {definition}"));
        let (selector, label) = inner.rsplit_once(", ").unwrap();
        let selector = with_grafana_variables(selector, &addr);
        let encoded: String = selector.bytes().map(|b| format!("%{b:02X}")).collect();
        let (status, body) = prometheus_get(
            port,
            &format!("/api/v1/label/{label}/values?match[]={encoded}"),
        );
        assert_eq!(status, 200, "{definition}: {body}");
        let values: serde_json::Value = serde_json::from_str(&body).unwrap();
        let values: Vec<&str> = values["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let expected = if label == "instance" {
            addr.as_str()
        } else {
            "0000:00:02.0"
        };
        assert!(values.contains(&expected), "{definition}: {values:?}");
    }

    // Panels: every target of every panel returns at least one series.
    let mut queries = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = with_grafana_variables(target["expr"].as_str().unwrap(), &addr);
            let series = prometheus_series(port, &expr);
            assert!(
                !series.is_empty(),
                "panel {:?}: {expr} returned nothing",
                panel["title"]
            );
            queries += 1;
        }
    }
    assert!(queries >= 12, "{queries} queries");
    // The fleet top-N ranks the one busy port first; the sim's ports are PMU-counted.
    let top = prometheus_series(
        port,
        &with_grafana_variables(
            "topk(1, rate(pcielab_rx_bytes_total{kind=\"root_port\"}[$__rate_interval]))",
            &addr,
        ),
    );
    assert_eq!(top[0]["metric"]["function"], "0000:00:02.0");
    // The annotation is a valid query (empty while no AER error is logged).
    for annotation in dashboard["annotations"]["list"].as_array().unwrap() {
        prometheus_series(
            port,
            &with_grafana_variables(annotation["expr"].as_str().unwrap(), &addr),
        );
    }
}

#[test]
fn prometheus_reads_the_simulated_rate_within_two_percent() {
    let expected = simulated_read_bytes_per_s();
    let (_exporter, addr) = start_exporter("sim:yitian710", &[&["--"][..], &FIO_READ[..]].concat());

    // promtool accepts what we serve.
    let (status, metrics) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    common::promtool_accepts(&metrics);

    let (_prometheus, port, _data) = start_prometheus(&addr);
    let query =
        "rate(pcielab_rx_bytes_total{port=\"0000:00:02.0\",function=\"0000:00:02.0\"}[10s])";
    // Wait until Prometheus has a full 10 s window of 1 s scrapes, then read the rate a few
    // times: every reading must agree.
    let started = Instant::now();
    let mut readings = Vec::new();
    while readings.len() < 3 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "Prometheus gave no rate in 120 s (readings {readings:?})"
        );
        std::thread::sleep(Duration::from_secs(1));
        let window_full = !readings.is_empty()
            || TcpStream::connect(("127.0.0.1", port)).is_ok()
                && prometheus_query(port, "count_over_time(pcielab_machine_info[15s])")
                    .is_some_and(|n| n >= 10.0);
        if window_full {
            if let Some(rate) = prometheus_query(port, query) {
                readings.push(rate);
                std::thread::sleep(Duration::from_secs(2));
            }
        }
    }
    for rate in &readings {
        let error = (rate / expected - 1.0).abs();
        eprintln!(
            "Prometheus rate {rate:.0} B/s, simulated {expected:.0} B/s: {:.3} % apart",
            error * 100.0
        );
        assert!(
            error < 0.02,
            "Prometheus rate {rate:.0} B/s vs simulated {expected:.0} B/s ({:.2} %)",
            error * 100.0
        );
    }
    // docs/fleet.md's queries: % of link of the busier direction, and "any link downgraded or
    // erroring" (the preset's ports trained below what both ends can do; empty slots left out).
    let percent = prometheus_query(
        port,
        // The docs rate over a minute; this Prometheus has seen only the last ~15 s.
        &fleet_query("% of what the link can carry")
            .replace("[1m]", "[10s]")
            .replace(
                "kind=\"root_port\"",
                "kind=\"root_port\",function=\"0000:00:02.0\"",
            ),
    )
    .unwrap();
    // Gen2 x2, MPS 256: 1000 MB/s x 256/276 less SKP ordered sets.
    let achievable = 1e9 * 256.0 / 276.0 * 1538.0 / 1542.0;
    assert!(
        (percent - expected / achievable * 100.0).abs() < 2.0,
        "{percent} %"
    );
    let flagged = prometheus_functions(port, &fleet_query("Any link downgraded or erroring"));
    assert_eq!(
        flagged,
        [
            "0000:00:00.0",
            "0000:00:01.0",
            "0000:00:02.0",
            "0000:b0:00.0"
        ]
    );
    // The disk below the port is seen from its own (derived) counters at the same rate.
    let disk = prometheus_query(
        port,
        "rate(pcielab_rx_bytes_total{function=\"0000:04:00.0\",source=\"derived\"}[10s])",
    )
    .unwrap();
    assert!((disk / expected - 1.0).abs() < 0.02, "{disk} vs {expected}");
}

#[test]
fn a_hundred_concurrent_scrapes_are_all_answered_with_bounded_memory() {
    let (exporter, addr) = start_exporter("sim:yitian710", &[&["--"][..], &FIO_READ[..]].concat());
    let pid = exporter.0.id();
    let round = || {
        let handles: Vec<_> = (0..100)
            .map(|_| {
                let addr = addr.clone();
                std::thread::spawn(move || get(&addr, "/metrics"))
            })
            .collect();
        for h in handles {
            let (status, body) = h.join().unwrap();
            assert_eq!(status, 200);
            assert!(body.contains("pcielab_rx_bytes_total{function=\"0000:00:02.0\""));
        }
    };
    round();
    let rss_after_first = proc_status(pid, "VmRSS");
    for _ in 0..4 {
        round();
        // One accepting thread and the fixed pool of workers, however many clients.
        assert!(proc_status(pid, "Threads") <= 5);
    }
    let rss = proc_status(pid, "VmRSS");
    assert!(rss < 64 * 1024, "RSS {rss} kB");
    assert!(
        rss <= rss_after_first + 4 * 1024,
        "RSS grew from {rss_after_first} kB to {rss} kB over 400 scrapes"
    );
}

#[test]
fn malformed_and_oversized_requests_get_4xx_and_serving_goes_on() {
    let (_exporter, addr) = start_exporter("sim:yitian710", &[]);
    let mut oversized = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    oversized.extend(std::iter::repeat_n(b'x', 64 * 1024));
    oversized.extend(b"\r\n\r\n");
    let cases: [(&[u8], u16); 7] = [
        (b"BLAH\r\n\r\n", 400),
        (b"GET /metrics HTTP/9.9\r\n\r\n", 400),
        (b"\x00\x01\x02\xff\r\n\r\n", 400),
        (
            b"POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
            405,
        ),
        (b"GET /admin HTTP/1.1\r\n\r\n", 404),
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n", 400), // cut off before the blank line
        (&oversized, 431),
    ];
    for (request, want) in cases {
        // Half-closing after the request lets the server see its end.
        let mut stream = TcpStream::connect(&addr).unwrap();
        let _ = stream.write_all(request);
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let status: u16 = response.split(' ').nth(1).unwrap().parse().unwrap();
        assert_eq!(
            status,
            want,
            "{:?}",
            String::from_utf8_lossy(&request[..20.min(request.len())])
        );
        // Still serving.
        assert_eq!(get(&addr, "/metrics").0, 200);
    }
    // Clients that connect and say nothing hold at most their worker, not the server.
    let idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let t = Instant::now();
    assert_eq!(get(&addr, "/metrics").0, 200);
    assert!(t.elapsed() < Duration::from_secs(4));
    drop(idle);
}

#[test]
fn a_port_in_use_and_a_remote_address_are_clear_errors() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(["exporter", "--machine", "sim:yitian710"])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--listen", &addr]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&addr) && err.contains("already in use"),
        "{err}"
    );

    let out = run(&["--listen", "0.0.0.0:9464"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a loopback address") && err.contains("--allow-remote"),
        "{err}"
    );

    let out = run(&["--listen", "localhost:9464"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected IP:PORT"));

    let out = run(&[
        "--once",
        "--",
        "fio",
        "--filename=/dev/sda",
        "--rw=sideways",
        "--name=r",
    ]);
    assert_eq!(out.status.code(), Some(2));

    let out = Command::new(BIN)
        .args([
            "exporter",
            "--machine",
            "host",
            "--once",
            "--",
            "sleep",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sim: machines only"));
}

#[test]
fn scrapes_are_answered_while_200_clients_trickle_their_heads() {
    let (_exporter, addr) = start_exporter("sim:yitian710", &[]);
    // A slowloris: 200 connections each sending its head one byte at a time.
    let head = b"GET /metrics HTTP/1.1\r\nHost: slow\r\n\r\n";
    let mut tricklers: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickling = {
        let stop = std::sync::Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut sent = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && sent < head.len() - 1 {
                for t in &mut tricklers {
                    // A shed connection fails the write; the attacker does not care.
                    let _ = t.write_all(&head[sent..=sent]);
                }
                sent += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            tricklers
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let scrapes: Vec<_> = (0..10)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || get(&addr, "/metrics").0)
        })
        .collect();
    let statuses: Vec<u16> = scrapes.into_iter().map(|s| s.join().unwrap()).collect();
    assert_eq!(statuses, vec![200; 10], "scrapes during the attack");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the scrapes took {:?}",
        started.elapsed()
    );
    // Every trickling head is cut off by the deadline from accept (3 s), not left open: each
    // connection has been answered 408 or closed well before the attack would have ended.
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut cut_with_408 = 0;
    for mut t in trickling.join().unwrap() {
        t.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut answer = Vec::new();
        match t.read_to_end(&mut answer) {
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("a trickling connection is still open after the head deadline")
            }
            _ => {}
        }
        if answer.starts_with(b"HTTP/1.1 408") {
            cut_with_408 += 1;
        }
    }
    assert!(cut_with_408 > 0, "no trickling head was answered 408");
}

/// The value of `family{function="BDF",...}` in a metrics body.
fn series_value(body: &str, family: &str, function: &str) -> u64 {
    let label = format!("function=\"{function}\"");
    body.lines()
        .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(&label))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {family} of {function} in:\n{body}"))
}

#[test]
fn host_disk_bytes_are_what_the_kernel_counted_around_each_scrape() {
    let disk = disk::pci_disk();
    let file = disk::file_on_disk(&disk.scratch, 32);
    let (_exporter, addr) = start_exporter("host", &[]);
    // Each scrape samples the counters while it is answered: its value must lie between the
    // kernel's count just before the request and just after the answer.
    let scrape = || {
        let before = disk::bytes_read(&disk.name);
        let (status, body) = get(&addr, "/metrics");
        let after = disk::bytes_read(&disk.name);
        assert_eq!(status, 200);
        assert!(
            body.contains(&format!(
                "pcielab_rx_bytes_total{{function=\"{}\"",
                disk.bdf
            )) && body.contains("source=\"derived\""),
            "{body}"
        );
        let served = series_value(&body, "pcielab_rx_bytes_total", &disk.bdf);
        assert!(
            before <= served && served <= after,
            "{} ({}): exporter {served} B read, the kernel {before}..{after}",
            disk.bdf,
            disk.name
        );
        served
    };
    let first = scrape();
    let copied = disk::read_direct(&file);
    let second = scrape();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(copied, 32 << 20, "dd read the whole file");
    eprintln!(
        "{} ({}): {} B between scrapes, dd read {copied} B past the page cache",
        disk.bdf,
        disk.name,
        second - first
    );
    assert!(
        second - first >= copied,
        "{} B between scrapes, but dd read {copied} B from the disk",
        second - first
    );
}

/// Saves `preset` as a sysfs tree (`topo --sysfs-export`) that `--machine snapshot:DIR` reads.
fn export_snapshot(preset: &str, dir: &Path) {
    let machine = format!("sim:{preset}");
    ok(pcielab(&[
        "topo",
        "--machine",
        &machine,
        "--sysfs-export",
        dir.to_str().unwrap(),
    ]));
}

/// Writes the kernel's AER counter files (drivers/pci/pcie/aer.c: one `NAME count` line per
/// error bit, then the total) for an endpoint at `endpoint` below the root port at `port`.
fn write_aer_counts(port: &Path, endpoint: &Path, cor: u64, nonfatal: u64) {
    let files = [
        (
            endpoint.join("aer_dev_correctable"),
            format!("RxErr {cor}\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR {cor}\n"),
        ),
        (
            endpoint.join("aer_dev_nonfatal"),
            format!("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO {nonfatal}\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nTOTAL_ERR_NONFATAL {nonfatal}\n"),
        ),
        (
            endpoint.join("aer_dev_fatal"),
            "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nTOTAL_ERR_FATAL 0\n".to_string(),
        ),
        (port.join("aer_rootport_total_err_cor"), format!("{cor}\n")),
        (port.join("aer_rootport_total_err_nonfatal"), format!("{nonfatal}\n")),
        (port.join("aer_rootport_total_err_fatal"), "0\n".to_string()),
    ];
    for (path, text) in files {
        std::fs::write(&path, text).unwrap();
    }
}

/// The series of one `exporter --once` scrape of `machine`, each as promtool's `input_series`
/// names it (with the `instance` and `job` labels Prometheus adds) and its value.
fn scrape_series(machine: &str, instance: &str) -> Vec<(String, String)> {
    let text = ok(pcielab(&["exporter", "--machine", machine, "--once"]));
    let target = format!("instance=\"{instance}\",job=\"pcielab\"");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let series = match series.strip_suffix('}') {
                Some(labelled) => format!("{labelled},{target}}}"),
                None => format!("{series}{{{target}}}"),
            };
            (series, value.to_string())
        })
        .collect()
}

/// promtool's `input_series`: each series' value at every minute, `before` for minutes 0-10 and
/// `after` from minute 11 to 25 (`_` where a scrape lacks the series).
fn input_series(before: &[(String, String)], after: &[(String, String)]) -> String {
    let before: std::collections::BTreeMap<_, _> = before.iter().cloned().collect();
    let after: std::collections::BTreeMap<_, _> = after.iter().cloned().collect();
    let names: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    let mut yaml = String::new();
    for name in names {
        let at = |scrape: &std::collections::BTreeMap<String, String>, n| {
            vec![scrape.get(name).map_or("_", String::as_str); n].join(" ")
        };
        yaml += &format!(
            "      - series: '{name}'\n        values: '{} {}'\n",
            at(&before, 11),
            at(&after, 15)
        );
    }
    yaml
}

/// dashboards/pcielab-alerts.yml run by `promtool test rules` on what real exporters served: the
/// RK3588 endpoint trained to Gen2 x1 (a Gen3 x4 link on both ends; advise calls it
/// link-downtrained, perf-loss) whose AER counters rise at minute 11, beside the one trained to
/// Gen3 x4 whose counters hold old errors that never rise. Each rule must fire for the functions
/// the machines were built with, and only for them, at the times its `for` and window allow.
#[test]
fn the_alerting_rules_fire_on_what_real_exporters_serve() {
    let dir = tempfile::tempdir().unwrap();
    let (slow, healthy) = (dir.path().join("gen2x1"), dir.path().join("gen3x4"));
    export_snapshot("rk3588-ep-gen2x1", &slow);
    export_snapshot("rk3588-ep", &healthy);
    let port = |root: &Path| root.join("tree/pci0000:00/0000:00:00.0");
    let endpoint = |root: &Path| port(root).join("0000:01:00.0");
    let machine = |root: &Path| format!("snapshot:{}", root.display());

    write_aer_counts(&port(&healthy), &endpoint(&healthy), 3, 0);
    write_aer_counts(&port(&slow), &endpoint(&slow), 0, 0);
    let mut before = scrape_series(&machine(&slow), "gen2x1");
    before.extend(scrape_series(&machine(&healthy), "gen3x4"));
    write_aer_counts(&port(&slow), &endpoint(&slow), 7, 2);
    let mut after = scrape_series(&machine(&slow), "gen2x1");
    after.extend(scrape_series(&machine(&healthy), "gen3x4"));

    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards/pcielab-alerts.yml");
    let downgraded = |function: &str, kind: &str| {
        format!(
            "          - exp_labels: {{severity: warning, function: '{function}', port: '0000:00:00.0', kind: {kind}, state: downtrained, instance: gen2x1, job: pcielab}}\n            exp_annotations:\n              summary: 'PCIe link of {function} on gen2x1 trained below what both ends can run'\n              description: 'Compare `pcielab topo` (current vs capable speed and width) and `pcielab advise --only link-downtrained`.'\n"
        )
    };
    let aer = |severity: &str, function: &str, kind: &str| {
        let (rule_severity, summary, description) = if severity == "correctable" {
            ("warning", "new correctable AER errors in the last 10 minutes", "The link layer retried them, at a cost in bandwidth; rising counts often come before a downgraded link.")
        } else {
            ("critical", "new nonfatal AER errors in the last 10 minutes", "The kernel's aer_dev_* (errors the function logged) or aer_rootport_total_err_* (messages a root port received) counters rose; dmesg has the error records.")
        };
        format!(
            "          - exp_labels: {{severity: {rule_severity}, aer_severity: {severity}, function: '{function}', port: '0000:00:00.0', kind: {kind}, instance: gen2x1, job: pcielab}}\n            exp_annotations:\n              summary: '{function} on gen2x1: {summary}'\n              description: \"{description}\"\n"
        )
    };
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n\
         # Pending, not firing, until the link has been down-trained for 5 minutes.\n\
         \x20     - {{eval_time: 3m, alertname: PcieLinkDowngraded, exp_alerts: []}}\n\
         \x20     - eval_time: 10m\n        alertname: PcieLinkDowngraded\n        exp_alerts:\n{ep}\
         \x20     - eval_time: 10m\n        alertname: PcieAdvisePerfLoss\n        exp_alerts:\n\
         \x20         - exp_labels: {{severity: warning, check: link-downtrained, function: '0000:01:00.0', instance: gen2x1, job: pcielab}}\n\
         \x20           exp_annotations:\n\
         \x20             summary: 'pcielab advise: link-downtrained costs performance at 0000:01:00.0 on gen2x1'\n\
         \x20             description: '`pcielab advise --only link-downtrained` on that machine shows the evidence, the fix and the predicted gain.'\n\
         # Old errors that do not rise alert nowhere.\n\
         \x20     - {{eval_time: 10m, alertname: PcieAerCorrectableErrors, exp_alerts: []}}\n\
         \x20     - {{eval_time: 10m, alertname: PcieAerUncorrectableErrors, exp_alerts: []}}\n\
         \x20     - eval_time: 15m\n        alertname: PcieAerCorrectableErrors\n        exp_alerts:\n{cor_ep}{cor_rp}\
         \x20     - eval_time: 15m\n        alertname: PcieAerUncorrectableErrors\n        exp_alerts:\n{nf_ep}{nf_rp}\
         # Ten minutes after the last rise the window holds no increase.\n\
         \x20     - {{eval_time: 25m, alertname: PcieAerUncorrectableErrors, exp_alerts: []}}\n",
        rules = rules.display(),
        series = input_series(&before, &after),
        ep = downgraded("0000:01:00.0", "endpoint"),
        cor_ep = aer("correctable", "0000:01:00.0", "endpoint"),
        cor_rp = aer("correctable", "0000:00:00.0", "root_port"),
        nf_ep = aer("nonfatal", "0000:01:00.0", "endpoint"),
        nf_rp = aer("nonfatal", "0000:00:00.0", "root_port"),
    );
    let file = dir.path().join("alerts.test.yml");
    std::fs::write(&file, &test).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("promtool (Debian package prometheus) must be installed: .ci/run installs it");
    assert!(
        out.status.success(),
        "promtool test rules:\n{}{}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
