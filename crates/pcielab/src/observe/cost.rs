//! What watching a big host costs, measured the way an operator would (`pcielab bench
//! observe`): a generated server ([`crate::topology::generate::server`]) exported as sysfs and
//! read as `snapshot:` — the path `--machine host` reads — by a `pcielab exporter` process,
//! scraped alternately with Debian's `prometheus-node-exporter` on the same machine; CPU per
//! scrape from the on-CPU nanoseconds of each process's threads (`/proc/PID/task/*/schedstat`,
//! where `/proc/PID/stat` counts 10 ms ticks) over the scrapes, resident memory from
//! `/proc/PID/status`; and `pcielab top -b -d 0.1` against procps `top -b -d 0.1`, CPU per
//! refresh from the same schedstat nanoseconds, read while the child waits after its first
//! frame and again 20 frames later (its stdout piped and its frames counted by their header
//! lines), so neither start-up (for `top` on a big host, seconds of reading the sysfs tree) nor
//! exit enters the figure (`pcielab top` reads link health at most about once a second, so
//! about one refresh in ten at `-d 0.1`). Every figure is the median of the rounds with their minimum and
//! maximum; a round that measured no CPU is refused, not printed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Error, Result};

/// What `bench observe` asks for.
pub struct ObserveRequest {
    /// Functions in the generated server.
    pub functions: usize,
    /// Scrapes of each exporter per round.
    pub scrapes: u32,
    /// Rounds; the figures are their median and range.
    pub rounds: u32,
    /// The node exporter to compare with; `None`: Debian's, or the upstream one, where present.
    pub node_exporter: Option<PathBuf>,
    /// Where to write the export and keep it; `None`: a temporary directory, removed after.
    pub keep: Option<PathBuf>,
    /// The pcielab binary whose exporter and top are measured.
    pub pcielab: PathBuf,
}

/// `bench observe`: generates the server, exports it as sysfs and [`measure`]s exporter and
/// top on it beside the other tools found.
pub fn run(request: &ObserveRequest) -> Result<ObserveCost> {
    let node_exporter = match &request.node_exporter {
        Some(path) if !path.is_file() => {
            return Err(Error::bad_input(format!(
                "--node-exporter {}: no such file",
                path.display()
            )))
        }
        Some(path) => Some(path.clone()),
        None => find_program(&[
            "/usr/bin/prometheus-node-exporter",
            "/usr/local/bin/node_exporter",
        ]),
    };
    let topology = crate::topology::generate::server(request.functions)?;
    let export = request.keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pcielab-bench-observe-{}", std::process::id()))
    });
    crate::topology::export::export_sysfs(&topology, &export)?;
    let procps_top = find_program(&["/usr/bin/top", "/bin/top"]);
    let result = measure(&ObserveBench {
        pcielab: &request.pcielab,
        export: &export,
        functions: request.functions,
        scrapes: request.scrapes,
        rounds: request.rounds,
        node_exporter: node_exporter.as_deref(),
        procps_top: procps_top.as_deref(),
    });
    if request.keep.is_none() {
        let _ = std::fs::remove_dir_all(&export);
    }
    result
}

impl ObserveCost {
    /// A table of each figure for pcielab, the other tool and their ratio, under a line saying
    /// what was measured.
    pub fn to_text(&self) -> String {
        let opt =
            |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        let spread = |s: &Spread| format!("{:.2} ({:.2}-{:.2})", s.median, s.min, s.max);
        let opt_spread = |s: Option<&Spread>| s.map_or("-".to_string(), spread);
        let mut text = format!(
            "{} functions, {} series, {} KiB per scrape; median (min-max) of {} rounds of {} scrapes \
             and {TOP_REFRESHES} top refreshes\n",
            self.functions,
            self.pcielab_series,
            self.pcielab_body_bytes / 1024,
            self.rounds,
            self.scrapes_per_round
        );
        let rows = [
            (
                "figure",
                "pcielab".to_string(),
                "other tool".to_string(),
                "ratio".to_string(),
            ),
            (
                "CPU ms per scrape",
                spread(&self.pcielab_ms_per_scrape),
                opt_spread(self.node_exporter_ms_per_scrape.as_ref()),
                opt(self.scrape_ratio, 2),
            ),
            (
                "RSS MiB after the scrapes",
                format!("{:.1}", self.pcielab_rss_mib),
                opt(self.node_exporter_rss_mib, 1),
                "-".into(),
            ),
            (
                "peak RSS MiB",
                format!("{:.1}", self.pcielab_peak_rss_mib),
                "-".into(),
                "-".into(),
            ),
            (
                "top CPU ms per refresh",
                spread(&self.top_ms_per_refresh),
                opt_spread(self.procps_top_ms_per_refresh.as_ref()),
                opt(self.top_ratio, 2),
            ),
        ];
        for (figure, ours, theirs, ratio) in rows {
            text += &format!("{figure:<26} {ours:>20} {theirs:>20} {ratio:>6}\n");
        }
        text += "(other tool: prometheus-node-exporter for scrapes, procps top -b for refreshes)\n";
        text
    }
}

/// One figure over the rounds: the median and the spread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

impl Spread {
    /// The spread of `rounds`; `None` for no rounds.
    pub(crate) fn of(rounds: &[f64]) -> Option<Spread> {
        let min = rounds.iter().copied().reduce(f64::min)?;
        let max = rounds.iter().copied().reduce(f64::max)?;
        Some(Spread {
            median: median(rounds.to_vec()),
            min,
            max,
        })
    }
}

/// What one `bench observe` run measured: CPU figures as the median and spread of the rounds,
/// ratios of the medians.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ObserveCost {
    pub(crate) functions: usize,
    pub(crate) scrapes_per_round: u32,
    pub(crate) rounds: u32,
    /// Bytes of one pcielab scrape's body and its series count.
    pub(crate) pcielab_body_bytes: usize,
    pub(crate) pcielab_series: usize,
    pub(crate) pcielab_ms_per_scrape: Spread,
    /// `None` when no node exporter was found or given.
    pub(crate) node_exporter_ms_per_scrape: Option<Spread>,
    pub(crate) scrape_ratio: Option<f64>,
    pub(crate) pcielab_rss_mib: f64,
    pub(crate) pcielab_peak_rss_mib: f64,
    pub(crate) node_exporter_rss_mib: Option<f64>,
    pub(crate) top_ms_per_refresh: Spread,
    pub(crate) procps_top_ms_per_refresh: Option<Spread>,
    pub(crate) top_ratio: Option<f64>,
}

/// How to run the comparison.
pub(crate) struct ObserveBench<'a> {
    /// The `pcielab` binary to run (normally the running one).
    pub(crate) pcielab: &'a Path,
    /// A sysfs export to observe (`snapshot:` of it).
    pub(crate) export: &'a Path,
    pub(crate) functions: usize,
    pub(crate) scrapes: u32,
    pub(crate) rounds: u32,
    /// `prometheus-node-exporter`, when present.
    pub(crate) node_exporter: Option<&'a Path>,
    /// procps `top`, when present.
    pub(crate) procps_top: Option<&'a Path>,
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU time (user + system, all threads) process `pid` has used: fields 14 and 15 of
/// `/proc/PID/stat`, in clock ticks; `None` when the process is gone or the file unreadable.
pub(crate) fn process_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// Nanoseconds process `pid`'s live threads have run on a CPU: the first field of each
/// `/proc/PID/task/TID/schedstat` (the scheduler's own clock, not ticks).
fn cpu_ns(pid: u32) -> Result<u64> {
    let tasks = format!("/proc/{pid}/task");
    let unreadable = |why: String| Error::runtime(format!("cannot read {tasks}: {why}"));
    let mut total = 0;
    for entry in std::fs::read_dir(&tasks).map_err(|e| unreadable(e.to_string()))? {
        let path = entry
            .map_err(|e| unreadable(e.to_string()))?
            .path()
            .join("schedstat");
        // A thread that ended since the listing has nothing left to add.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        total += text
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .ok_or_else(|| unreadable(format!("{}: '{}'", path.display(), text.trim())))?;
    }
    Ok(total)
}

/// A `/proc/PID/status` memory line (`VmRSS`, `VmHWM`) in MiB.
pub(crate) fn process_memory_mib(pid: u32, field: &str) -> Result<f64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    text.lines()
        .find_map(|l| {
            let rest = l.strip_prefix(field)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse::<f64>().ok()
        })
        .map(|kib| kib / 1024.0)
        .ok_or_else(|| Error::runtime(format!("{path}: no {field} line")))
}

/// One `GET /metrics`; the body.
pub(crate) fn scrape(addr: SocketAddr) -> Result<String> {
    let fail = |why: String| Error::runtime(format!("scraping http://{addr}/metrics: {why}"));
    let mut stream = TcpStream::connect(addr).map_err(|e| fail(e.to_string()))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| fail(e.to_string()))?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| fail(e.to_string()))?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| fail("no end of the response head".into()))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(fail(head.lines().next().unwrap_or_default().to_string()));
    }
    Ok(body.to_string())
}

/// A free loopback port (bound, then released for the child to take).
fn free_port() -> Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Error::runtime(format!("no free loopback port: {e}")))?;
    listener
        .local_addr()
        .map_err(|e| Error::runtime(e.to_string()))
}

fn spawn(program: &Path, args: &[String]) -> Result<Running> {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running)
        .map_err(|e| Error::runtime(format!("cannot run {}: {e}", program.display())))
}

/// Scrapes `addr` until it answers (a server that is still starting), for up to 30 s.
fn wait_until_serving(addr: SocketAddr, child: &mut Running) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if scrape(addr).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.0.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(Error::runtime(format!(
                "the server for {addr} exited ({status}): {}",
                err.trim()
            )));
        }
        if Instant::now() > until {
            return Err(Error::runtime(format!(
                "nothing answered at {addr} in 30 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// The spread of `rounds` of a CPU figure, refused when a round is not positive: a figure at or
/// below zero means the work was below what the clock resolves or drowned in noise, and
/// printing it (as the tick-based figures once printed -0.55 ms) would mislead. `remedy` says
/// what to try instead.
fn positive_spread(what: &str, rounds: &[f64], remedy: &str) -> Result<Spread> {
    // NaN (no figure at all) is refused with the rest.
    if let Some(bad) = rounds
        .iter()
        .find(|&&v| v.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater))
    {
        return Err(Error::runtime(format!(
            "{what}: a round measured {bad:.3} ms, no CPU above its baseline; the figure would \
             be noise, not a cost. {remedy}"
        )));
    }
    Spread::of(rounds).ok_or_else(|| Error::runtime(format!("{what}: no rounds")))
}

/// Refreshes each `top` run is timed over, from the end of its first frame.
const TOP_REFRESHES: u32 = 20;
/// Frames a run prints beyond those, so that readings refused on the way (see
/// [`refresh_cpu_ms`]) can be taken again at a later frame.
const SPARE_FRAMES: u32 = 5;
/// Seconds between `top` frames (both tools' shortest practical delay).
const TOP_DELAY: &str = "0.1";
/// How long the child's output stays quiet before the child is taken to be asleep until its
/// next frame: well under the 100 ms between frames, well over the writing of one.
const QUIET: Duration = Duration::from_millis(40);
/// How long a run may print nothing (start-up included) before it is given up.
const SILENT_LIMIT: Duration = Duration::from_secs(120);

/// What a batch `top`'s output shows, as [`FrameLines`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    /// A frame's header line (every frame starts with one).
    Header,
    /// A visible character outside a header's first bytes.
    Visible,
}

/// A batch `top`'s output, fed chunk by chunk: a frame is counted at each line starting with
/// `header`, and every other visible character is reported too.
struct FrameLines<'a> {
    header: &'a [u8],
    /// The current line's first bytes while they may still be a header (a line may straddle
    /// reads).
    head: Vec<u8>,
    /// The current line's start is still being matched with the header.
    matching: bool,
    /// Header lines seen.
    frames: u32,
}

impl<'a> FrameLines<'a> {
    fn new(header: &'a str) -> FrameLines<'a> {
        FrameLines {
            header: header.as_bytes(),
            head: Vec::new(),
            matching: true,
            frames: 0,
        }
    }

    /// No header is half-way through: bytes that follow cannot complete one begun before.
    fn between_headers(&self) -> bool {
        self.head.is_empty()
    }

    /// Calls `seen` with each header and visible character in `bytes`.
    fn feed(&mut self, bytes: &[u8], mut seen: impl FnMut(Shown)) {
        for &b in bytes {
            if b == b'\n' {
                if self.head.iter().any(|c| !c.is_ascii_whitespace()) {
                    seen(Shown::Visible);
                }
                self.head.clear();
                self.matching = true;
            } else if self.matching {
                self.head.push(b);
                if self.head == self.header {
                    self.frames += 1;
                    seen(Shown::Header);
                } else if self.header.starts_with(&self.head) {
                    continue;
                } else if self.head.iter().any(|c| !c.is_ascii_whitespace()) {
                    seen(Shown::Visible);
                }
                self.head.clear();
                self.matching = false;
            } else if !b.is_ascii_whitespace() {
                seen(Shown::Visible);
            }
        }
    }
}

/// CPU milliseconds per refresh of one batch `top` run (`args` without `-n`), start-up and
/// exit left out: the child's stdout is piped and its frames counted by their `header` line;
/// the on-CPU nanoseconds of its threads ([`cpu_ns`]) are read once its first frame is out and
/// it waits for the next, and again `refreshes` frames later. A reading is taken when the
/// pipe has been quiet for [`QUIET`], and kept only when nothing visible comes before the next
/// frame's header (procps ends a frame's last line only when it starts the next; anything else
/// means the child was held up mid-frame, and the reading is taken again at the next frame).
fn refresh_cpu_ms(program: &Path, args: &[String], header: &str, refreshes: u32) -> Result<f64> {
    let mut argv = args.to_vec();
    argv.extend(["-n".to_string(), (1 + refreshes + SPARE_FRAMES).to_string()]);
    let name = program.display();
    let mut child = Command::new(program)
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map(Running)
        .map_err(|e| Error::runtime(format!("cannot run {name}: {e}")))?;
    let pid = child.0.id();
    let mut stdout = child
        .0
        .stdout
        .take()
        .ok_or_else(|| Error::runtime(format!("{name}: no standard output to read")))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stdout);
    let failed = |why: String| Error::runtime(format!("{name} {}: {why}", argv.join(" ")));
    let mut lines = FrameLines::new(header);
    // Readings as (frames printed, CPU ns): one awaiting the next line, the kept first one.
    let mut pending: Option<(u32, u64)> = None;
    let mut first: Option<(u32, u64)> = None;
    let mut silent = Duration::ZERO;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        if !crate::input::readable_within(fd, QUIET).map_err(|e| failed(e.to_string()))? {
            let wanted = first.map_or(1, |(frames, _)| frames + refreshes);
            if pending.is_none() && lines.frames >= wanted && lines.between_headers() {
                pending = Some((lines.frames, cpu_ns(pid)?));
            }
            silent += QUIET;
            if silent > SILENT_LIMIT {
                return Err(failed(format!(
                    "printed nothing for {} s",
                    SILENT_LIMIT.as_secs()
                )));
            }
            continue;
        }
        silent = Duration::ZERO;
        let n = match stdout.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed(e.to_string())),
        };
        if n == 0 {
            let status = child.0.wait().map_err(|e| failed(e.to_string()))?;
            return Err(failed(format!(
                "ended ({status}) after {} frames, before {refreshes} refreshes could be \
                 timed between two frames (a reading is refused when the child is held up \
                 mid-frame: a busy machine)",
                lines.frames
            )));
        }
        let mut kept = None;
        lines.feed(&chunk[..n], |shown| match (shown, pending.take()) {
            (Shown::Header, Some(reading)) => kept = Some(reading),
            // Printed after the reading: it was taken mid-frame.
            (Shown::Visible, Some(_)) | (_, None) => {}
        });
        let Some((frames, ns)) = kept else {
            continue;
        };
        match first {
            None => first = Some((frames, ns)),
            Some((first_frames, first_ns)) => {
                let refreshes = f64::from(frames - first_frames);
                return Ok(ns.saturating_sub(first_ns) as f64 / 1e6 / refreshes);
            }
        }
    }
}

/// CPU per refresh of a batch `top` (argv without `-n`) whose frames start with `header`, in
/// each of `rounds`; see [`refresh_cpu_ms`].
fn top_ms_per_refresh(
    program: &Path,
    args: &[String],
    header: &str,
    rounds: u32,
) -> Result<Spread> {
    let per = (0..rounds)
        .map(|_| refresh_cpu_ms(program, args, header, TOP_REFRESHES))
        .collect::<Result<Vec<f64>>>()?;
    positive_spread(
        &format!("{} CPU per refresh", program.display()),
        &per,
        "Run it on a quieter machine",
    )
}

/// Runs the comparison; see the module documentation.
pub(crate) fn measure(bench: &ObserveBench) -> Result<ObserveCost> {
    let machine = format!("snapshot:{}", bench.export.display());
    let pcielab_addr = free_port()?;
    let mut pcielab = spawn(
        bench.pcielab,
        &[
            "exporter".into(),
            "--machine".into(),
            machine.clone(),
            "--listen".into(),
            pcielab_addr.to_string(),
        ],
    )?;
    wait_until_serving(pcielab_addr, &mut pcielab)?;
    let mut node = match bench.node_exporter {
        Some(program) => {
            let addr = free_port()?;
            let mut child = spawn(
                program,
                &[
                    format!("--web.listen-address={addr}"),
                    "--log.level=error".into(),
                ],
            )?;
            wait_until_serving(addr, &mut child)?;
            Some((child, addr))
        }
        None => None,
    };
    let body = scrape(pcielab_addr)?;
    let series = body
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    let pcielab_pid = pcielab.0.id();
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..bench.rounds {
        let (mut a, mut b) = (0i64, 0i64);
        for _ in 0..bench.scrapes {
            let before = cpu_ns(pcielab_pid)?;
            scrape(pcielab_addr)?;
            a += cpu_ns(pcielab_pid)? as i64 - before as i64;
            if let Some((child, addr)) = &node {
                let before = cpu_ns(child.0.id())?;
                scrape(*addr)?;
                b += cpu_ns(child.0.id())? as i64 - before as i64;
            }
        }
        ours.push(a as f64 / 1e6 / f64::from(bench.scrapes));
        theirs.push(b as f64 / 1e6 / f64::from(bench.scrapes));
    }
    let more_scrapes = "Run more scrapes per round (--scrapes), or on a quieter machine";
    let pcielab_ms = positive_spread("pcielab exporter CPU per scrape", &ours, more_scrapes)?;
    let node_ms = match node {
        Some(_) => Some(positive_spread(
            "node exporter CPU per scrape",
            &theirs,
            more_scrapes,
        )?),
        None => None,
    };
    let pcielab_rss = process_memory_mib(pcielab_pid, "VmRSS")?;
    let pcielab_peak = process_memory_mib(pcielab_pid, "VmHWM")?;
    let node_rss = match &node {
        Some((child, _)) => Some(process_memory_mib(child.0.id(), "VmRSS")?),
        None => None,
    };
    drop(pcielab);
    node.take();
    let top_args: Vec<String> = ["top", "-b", "-d", TOP_DELAY, "--machine", &machine]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let top_ms = top_ms_per_refresh(bench.pcielab, &top_args, "pcielab top - ", bench.rounds)?;
    let procps_ms = match bench.procps_top {
        Some(top) => Some(top_ms_per_refresh(
            top,
            &["-b".into(), "-d".into(), TOP_DELAY.into()],
            "top - ",
            bench.rounds,
        )?),
        None => None,
    };
    Ok(ObserveCost {
        functions: bench.functions,
        scrapes_per_round: bench.scrapes,
        rounds: bench.rounds,
        pcielab_body_bytes: body.len(),
        pcielab_series: series,
        pcielab_ms_per_scrape: pcielab_ms,
        node_exporter_ms_per_scrape: node_ms,
        scrape_ratio: node_ms.map(|n| pcielab_ms.median / n.median),
        pcielab_rss_mib: pcielab_rss,
        pcielab_peak_rss_mib: pcielab_peak,
        node_exporter_rss_mib: node_rss,
        top_ms_per_refresh: top_ms,
        procps_top_ms_per_refresh: procps_ms,
        top_ratio: procps_ms.map(|p| top_ms.median / p.median),
    })
}

/// The first of `candidates` that is a file.
pub(crate) fn find_program(candidates: &[&str]) -> Option<PathBuf> {
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_cpu_and_memory_read_like_getrusage() {
        let pid = std::process::id();
        // Burn 200 ms of this thread's CPU time (wall time on a loaded machine says nothing).
        let thread_ns = || {
            let mut t: libc::timespec = unsafe { std::mem::zeroed() };
            // SAFETY: clock_gettime fills the struct it is given.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        };
        let mut x = 0u64;
        while thread_ns() < 200_000_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let burnt = thread_ns();
        let ns = cpu_ns(pid).unwrap();
        // SAFETY: getrusage fills the struct it is given.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        let rusage_ns = (usage.ru_utime.tv_sec as u64 + usage.ru_stime.tv_sec as u64)
            * 1_000_000_000
            + (usage.ru_utime.tv_usec as u64 + usage.ru_stime.tv_usec as u64) * 1000;
        // The live threads' schedstat holds this thread's time, and no more than the whole
        // process's rusage (which also counts threads that ended).
        assert!(ns >= burnt, "{ns} < {burnt}");
        assert!(ns <= rusage_ns + 20_000_000, "{ns} vs {rusage_ns}");
        let rss = process_memory_mib(pid, "VmRSS").unwrap();
        assert!(rss > 1.0 && rss <= process_memory_mib(pid, "VmHWM").unwrap());
        assert!(process_cpu_time(u32::MAX).is_none());
        assert!(cpu_ns(u32::MAX).is_err());
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        let spread = positive_spread("x", &[3.0, 1.0, 2.0], "").unwrap();
        assert_eq!((spread.median, spread.min, spread.max), (2.0, 1.0, 3.0));
        let err =
            positive_spread("top CPU per refresh", &[0.4, -0.55, 0.3], "Try again").unwrap_err();
        assert!(err.message().contains("-0.550 ms"), "{err}");
        assert!(err.message().ends_with("Try again"), "{err}");
        assert!(positive_spread("x", &[0.0], "").is_err());
    }

    #[test]
    fn frame_lines_count_headers_split_across_reads() {
        let text = b"top - 1\nrow top - x\n\n  \ntop - 2\n  PID\n top\ntop -";
        // Every split of the text into two reads gives the same headers and visible text.
        for cut in 0..text.len() {
            let mut lines = FrameLines::new("top - ");
            let mut seen = Vec::new();
            lines.feed(&text[..cut], |s| seen.push(s));
            lines.feed(&text[cut..], |s| seen.push(s));
            seen.dedup();
            use Shown::{Header, Visible};
            assert_eq!(seen, [Header, Visible, Header, Visible], "cut at {cut}");
            assert_eq!(lines.frames, 2);
            // "top -" could still become a header.
            assert!(!lines.between_headers());
            lines.feed(b"\n", |_| {});
            assert!(lines.between_headers());
        }
    }

    /// A stand-in for a batch top: `sh -c SCRIPT sh START WORK -n FRAMES` burns START loop
    /// turns, then prints FRAMES frames 0.1 s apart, burning WORK turns before each.
    fn fake_top(start: u32, work: u32) -> f64 {
        let script = "burn() { i=0; while [ $i -lt $1 ]; do i=$((i+1)); done; }
            burn $1; f=0
            while [ $f -lt $4 ]; do
              burn $2; printf 'fake top - %s\nrow 1\nrow 2\n' $f; f=$((f+1)); sleep 0.1
            done";
        let args = ["-c", script, "sh", &start.to_string(), &work.to_string()].map(String::from);
        refresh_cpu_ms(Path::new("/bin/sh"), &args, "fake top - ", 3).unwrap()
    }

    #[test]
    fn a_refresh_is_timed_between_frames_without_the_start_up() {
        // CPU time, not wall time: a loaded machine slows the loops but does not change it.
        let one = fake_top(0, 5_000);
        let three = fake_top(0, 15_000);
        // A start-up of 20 refreshes' work would add more than 6 refreshes to each of 3.
        let started = fake_top(100_000, 5_000);
        assert!(one > 0.0, "{one}");
        assert!(
            (2.0..4.5).contains(&(three / one)),
            "{one} ms, then {three} ms"
        );
        assert!(
            (0.5..2.0).contains(&(started / one)),
            "{one} ms, with a start-up {started} ms"
        );
        // A run that ends before its frames are timed is an error, not a figure.
        let short = ["-c", "printf 'fake top - 1\\n'"].map(String::from);
        assert!(refresh_cpu_ms(Path::new("/bin/sh"), &short, "fake top - ", 3).is_err());
    }
}
