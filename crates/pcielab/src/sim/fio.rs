//! fio's own workload syntax, parsed once for every user (the simulator runs it, the QEMU lab
//! validates the same job file before shipping it to a guest): command-line options in both
//! `-opt` and `--opt` forms, with `=` or a separate value (`-iodepth 32`), bare flags
//! (`-thread`, `--group_reporting`), `--name` starting a job, and INI job files (`[global]`,
//! sections, `stonewall`). Options outside the supported set are an error naming each of them.
//! Also renders results the way fio prints them (per-job and "Run status group" lines).

use serde::Serialize;
use std::path::Path;

use crate::error::{Error, Result};

/// fio's `rw=` access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
// The variants are fio's own `rw=` words (`randrw` is `RandRw`); clippy flags the name only
// since the enum stopped being public.
#[allow(clippy::enum_variant_names)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Rw {
    Read,
    Write,
    RandRead,
    RandWrite,
    /// `readwrite` / `rw`: sequential mixed, `rwmixread` percent reads.
    ReadWrite,
    RandRw,
}

impl Rw {
    fn parse(value: &str) -> Option<Rw> {
        Some(match value {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            "readwrite" | "rw" => Rw::ReadWrite,
            "randrw" => Rw::RandRw,
            _ => return None,
        })
    }

    /// fio's short name in the job header (`rw=rw` for readwrite).
    pub(crate) fn fio_name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
            Rw::ReadWrite => "rw",
            Rw::RandRw => "randrw",
        }
    }

    /// Percent of I/Os that are reads given `rwmixread`.
    pub(crate) fn read_percent(self, rwmixread: u8) -> u8 {
        match self {
            Rw::Read | Rw::RandRead => 100,
            Rw::Write | Rw::RandWrite => 0,
            Rw::ReadWrite | Rw::RandRw => rwmixread,
        }
    }
}

/// The most jobs fio runs at once, `numjobs` clones included (its REAL_MAX_JOBS).
pub(crate) const MAX_JOBS: u32 = 4096;

/// One fio job (each of `numjobs` clones runs it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Job {
    pub(crate) name: String,
    pub(crate) filename: Option<String>,
    pub(crate) rw: Rw,
    pub(crate) rwmixread: u8,
    /// Block size in bytes.
    pub(crate) bs: u64,
    /// Bytes each clone transfers (`size=`); `None`: the file or device size.
    pub(crate) size: Option<u64>,
    pub(crate) numjobs: u32,
    pub(crate) iodepth: u32,
    pub(crate) ioengine: String,
    pub(crate) direct: bool,
    pub(crate) time_based: bool,
    pub(crate) runtime_ns: Option<u64>,
    pub(crate) group_reporting: bool,
    pub(crate) thread: bool,
    /// Wait for every earlier job before starting: begins a new reporting group.
    pub(crate) stonewall: bool,
}

impl Job {
    fn defaults(name: &str) -> Job {
        Job {
            name: name.to_string(),
            filename: None,
            rw: Rw::Read,
            rwmixread: 50,
            bs: 4096,
            size: None,
            numjobs: 1,
            iodepth: 1,
            ioengine: "psync".into(),
            direct: false,
            time_based: false,
            runtime_ns: None,
            group_reporting: false,
            thread: false,
            stonewall: false,
        }
    }

    /// I/Os a clone keeps in flight: the iodepth for asynchronous engines with O_DIRECT; a
    /// synchronous engine (or buffered libaio, which the kernel completes at submit) has one.
    pub(crate) fn effective_depth(&self) -> u32 {
        let asynchronous = matches!(self.ioengine.as_str(), "libaio" | "io_uring" | "posixaio");
        if asynchronous && self.direct {
            self.iodepth
        } else {
            1
        }
    }
}

/// A parsed fio invocation: jobs in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSet {
    pub(crate) jobs: Vec<Job>,
}

impl JobSet {
    /// `jobs` when their clones (`numjobs` each) are at most [`MAX_JOBS`], as fio allows.
    fn bounded(jobs: Vec<Job>, origin: &str) -> Result<JobSet> {
        let clones: u64 = jobs.iter().map(|j| u64::from(j.numjobs)).sum();
        if clones > u64::from(MAX_JOBS) {
            return Err(Error::bad_input(format!(
                "fio: {origin}: {} jobs with {clones} clones in all (numjobs summed); fio runs at most {MAX_JOBS}",
                jobs.len()
            )));
        }
        Ok(JobSet { jobs })
    }

    /// Reporting groups: a job with `stonewall` starts a new group after all earlier ones.
    pub(crate) fn groups(&self) -> Vec<Vec<&Job>> {
        let mut groups: Vec<Vec<&Job>> = Vec::new();
        for job in &self.jobs {
            match groups.last_mut() {
                Some(group) if !job.stonewall => group.push(job),
                _ => groups.push(vec![job]),
            }
        }
        groups
    }
}

/// Whether an option is a flag (value optional) or takes a value.
#[derive(Clone, Copy, PartialEq)]
enum Arity {
    Flag,
    Value,
}

/// The supported options with their aliases and arity.
const OPTIONS: &[(&str, &[&str], Arity)] = &[
    ("name", &[], Arity::Value),
    ("filename", &[], Arity::Value),
    ("rw", &["readwrite"], Arity::Value),
    ("rwmixread", &[], Arity::Value),
    ("rwmixwrite", &[], Arity::Value),
    ("bs", &["blocksize"], Arity::Value),
    ("size", &[], Arity::Value),
    ("numjobs", &[], Arity::Value),
    ("iodepth", &[], Arity::Value),
    ("ioengine", &[], Arity::Value),
    ("direct", &[], Arity::Flag),
    ("time_based", &[], Arity::Flag),
    ("runtime", &["timeout"], Arity::Value),
    ("group_reporting", &[], Arity::Flag),
    ("thread", &[], Arity::Flag),
    ("stonewall", &["wait_for_previous"], Arity::Flag),
];

const ENGINES: &[&str] = &["libaio", "io_uring", "posixaio", "psync", "sync", "pvsync"];

fn canonical(key: &str) -> Option<(&'static str, Arity)> {
    OPTIONS
        .iter()
        .find(|(name, aliases, _)| *name == key || aliases.contains(&key))
        .map(|(name, _, arity)| (*name, *arity))
}

fn supported_list() -> String {
    OPTIONS
        .iter()
        .map(|(n, _, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A time with fio's suffixes (default seconds): us, ms, s, m, h.
pub(crate) fn parse_time_ns(value: &str) -> Option<u64> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (digits, suffix) = v.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match suffix {
        "" | "s" => 1_000_000_000,
        "us" => 1_000,
        "ms" => 1_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

fn parse_bool(value: Option<&str>) -> Option<bool> {
    match value {
        None | Some("1") | Some("true") => Some(true),
        Some("0") | Some("false") => Some(false),
        _ => None,
    }
}

/// Applies one recognised option to `job`; `origin` names where it came from for messages.
fn apply(job: &mut Job, key: &str, value: Option<&str>, origin: &str) -> Result<()> {
    let bad = |valid: &str| {
        Error::bad_input(format!(
            "fio: {origin}: invalid value '{}' for option '{key}': expected {valid}",
            value.unwrap_or("")
        ))
    };
    let text = value.unwrap_or("");
    let number = |max: u64| -> Result<u64> {
        text.parse::<u64>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| bad(&format!("an integer 1..{max}")))
    };
    match key {
        "name" => job.name = text.to_string(),
        "filename" => {
            // fio separates several files with ':' and reads '\:' as a literal colon. Unescaped
            // colons are accepted in /dev/disk/by-path names, whose meaning is unambiguous.
            let unescaped = text.replace("\\:", "");
            if text.is_empty() || unescaped.contains(':') && !text.starts_with("/dev/disk/") {
                return Err(bad(
                    "one path (several ':'-separated files are not supported; write a literal colon as '\\:')",
                ));
            }
            job.filename = Some(text.replace("\\:", ":"))
        }
        "rw" => {
            job.rw = Rw::parse(text)
                .ok_or_else(|| bad("read, write, randread, randwrite, readwrite, rw or randrw"))?
        }
        "rwmixread" => {
            job.rwmixread = text
                .parse()
                .ok()
                .filter(|p| *p <= 100)
                .ok_or_else(|| bad("a percentage 0..100"))?
        }
        "rwmixwrite" => {
            let w: u8 = text
                .parse()
                .ok()
                .filter(|p| *p <= 100)
                .ok_or_else(|| bad("a percentage 0..100"))?;
            job.rwmixread = 100 - w;
        }
        "bs" => {
            job.bs = crate::units::parse_size(text)
                .filter(|b| *b >= 512 && b % 512 == 0)
                .ok_or_else(|| bad("a size that is a multiple of 512 bytes, e.g. 4k or 1m"))?
        }
        "size" => {
            job.size = Some(
                crate::units::parse_size(text)
                    .filter(|s| *s > 0)
                    .ok_or_else(|| bad("a size such as 2g or 10G"))?,
            )
        }
        "numjobs" => job.numjobs = number(MAX_JOBS.into())? as u32,
        "iodepth" => job.iodepth = number(65536)? as u32,
        "ioengine" => {
            if !ENGINES.contains(&text) {
                return Err(bad(&ENGINES.join(", ")));
            }
            job.ioengine = text.to_string()
        }
        "direct" => job.direct = parse_bool(value).ok_or_else(|| bad("0 or 1"))?,
        "time_based" => job.time_based = parse_bool(value).ok_or_else(|| bad("0 or 1"))?,
        "runtime" => {
            job.runtime_ns = Some(
                parse_time_ns(text)
                    .filter(|t| *t > 0 && *t as f64 <= crate::input::MAX_DURATION_S * 1e9)
                    .ok_or_else(|| bad("a time such as 20, 180s or 500ms, at most one week"))?,
            )
        }
        "group_reporting" => {
            job.group_reporting = parse_bool(value).ok_or_else(|| bad("0 or 1"))?
        }
        "thread" => job.thread = parse_bool(value).ok_or_else(|| bad("0 or 1"))?,
        "stonewall" => job.stonewall = parse_bool(value).ok_or_else(|| bad("0 or 1"))?,
        _ => unreachable!("apply() is only called with canonical option names"),
    }
    Ok(())
}

/// Options collected for one section before they are applied over the globals.
#[derive(Default)]
struct Section {
    name: Option<String>,
    options: Vec<(&'static str, Option<String>)>,
}

fn build(
    globals: &[(&'static str, Option<String>)],
    sections: Vec<Section>,
    unsupported: Vec<String>,
    origin: &str,
) -> Result<JobSet> {
    if !unsupported.is_empty() {
        return Err(Error::bad_input(format!(
            "fio: {origin}: unsupported option{} {} (the simulator understands: {})",
            if unsupported.len() > 1 { "s" } else { "" },
            unsupported
                .iter()
                .map(|u| format!("'{u}'"))
                .collect::<Vec<_>>()
                .join(", "),
            supported_list()
        )));
    }
    if sections.is_empty() {
        return Err(Error::bad_input(format!(
            "fio: {origin}: no jobs defined: give --name=JOB or a job file with a [job] section"
        )));
    }
    let mut jobs = Vec::new();
    for section in sections {
        let mut job = Job::defaults(section.name.as_deref().unwrap_or("job"));
        for (key, value) in globals.iter().chain(section.options.iter()) {
            apply(&mut job, key, value.as_deref(), origin)?;
        }
        if job.filename.is_none() {
            return Err(Error::bad_input(format!(
                "fio: {origin}: job '{}' has no filename= (the simulator needs the device or file to use)",
                job.name
            )));
        }
        jobs.push(job);
    }
    JobSet::bounded(jobs, origin)
}

/// Parses fio's command line (the arguments after `fio`). Positional arguments are job files,
/// read with `read_file`.
pub(crate) fn parse_command_line<S: AsRef<str>>(
    args: &[S],
    read_file: impl Fn(&Path) -> Result<String>,
) -> Result<JobSet> {
    let mut globals: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut unsupported = Vec::new();
    let mut files: Vec<JobSet> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_ref();
        i += 1;
        let Some(option) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            let text = read_file(Path::new(arg))?;
            files.push(parse_job_file(&text, arg)?);
            continue;
        };
        let (key, mut value) = match option.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (option, None),
        };
        let Some((key, arity)) = canonical(key) else {
            unsupported.push(key.to_string());
            continue;
        };
        if value.is_none() && arity == Arity::Value {
            let next = args.get(i).map(|a| a.as_ref().to_string());
            value =
                Some(next.ok_or_else(|| {
                    Error::bad_input(format!("fio: option '{arg}' needs a value"))
                })?);
            i += 1;
        }
        if key == "name" {
            sections.push(Section {
                name: value,
                options: Vec::new(),
            });
        } else {
            match sections.last_mut() {
                Some(section) => section.options.push((key, value)),
                None => globals.push((key, value)),
            }
        }
    }
    if !files.is_empty() {
        if !sections.is_empty() || !unsupported.is_empty() {
            return Err(Error::bad_input(
                "fio: give either job files or --name jobs on the command line, not both",
            ));
        }
        let mut jobs = Vec::new();
        for mut set in files {
            for job in &mut set.jobs {
                for (key, value) in &globals {
                    apply(job, key, value.as_deref(), "command line")?;
                }
            }
            jobs.extend(set.jobs);
        }
        return JobSet::bounded(jobs, "command line");
    }
    build(&globals, sections, unsupported, "command line")
}

/// Parses an INI job file; `origin` (its path) prefixes messages, with the line number.
pub(crate) fn parse_job_file(text: &str, origin: &str) -> Result<JobSet> {
    let mut globals: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut sections: Vec<Section> = Vec::new();
    let mut in_global = false;
    let mut unsupported = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with(';') || line.starts_with('#') {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let name = header.strip_suffix(']').ok_or_else(|| {
                Error::bad_input(format!(
                    "fio: {origin}:{}: malformed section header '{line}'",
                    number + 1
                ))
            })?;
            in_global = name == "global";
            if !in_global {
                sections.push(Section {
                    name: Some(name.to_string()),
                    options: Vec::new(),
                });
            }
            continue;
        }
        let (key, value) = match line.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim().to_string())),
            None => (line, None),
        };
        let Some((key, arity)) = canonical(key) else {
            unsupported.push(format!("{key}' (line {}", number + 1));
            continue;
        };
        if arity == Arity::Value && value.is_none() {
            return Err(Error::bad_input(format!(
                "fio: {origin}:{}: option '{key}' needs a value",
                number + 1
            )));
        }
        match sections.last_mut() {
            Some(section) if !in_global => section.options.push((key, value)),
            None if !in_global => {
                return Err(Error::bad_input(format!(
                    "fio: {origin}:{}: option '{key}' before any [section]",
                    number + 1
                )))
            }
            _ => globals.push((key, value)),
        }
    }
    build(&globals, sections, unsupported, origin)
}

/// One direction's results in a reporting group, as fio's JSON names them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DirectionStats {
    /// Bytes moved.
    pub io_bytes: u64,
    /// Bytes per second over the group's run time.
    pub bw_bytes: u64,
    /// I/Os per second.
    pub iops: f64,
    /// How long the direction ran (ms).
    pub runtime_ms: u64,
    /// Completed I/Os.
    pub total_ios: u64,
    /// Mean completion latency (submission to completion), microseconds.
    pub lat_avg_us: f64,
}

impl DirectionStats {
    pub(crate) fn new(
        io_bytes: u64,
        total_ios: u64,
        runtime_ns: u64,
        lat_avg_us: f64,
    ) -> DirectionStats {
        let seconds = runtime_ns as f64 / 1e9;
        DirectionStats {
            io_bytes,
            bw_bytes: if seconds > 0.0 {
                (io_bytes as f64 / seconds) as u64
            } else {
                0
            },
            iops: if seconds > 0.0 {
                total_ios as f64 / seconds
            } else {
                0.0
            },
            runtime_ms: runtime_ns / 1_000_000,
            total_ios,
            lat_avg_us,
        }
    }
}

/// A reporting group's results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupStats {
    pub(crate) groupid: usize,
    /// The first job's name.
    pub name: String,
    /// Clones that ran in the group.
    pub(crate) jobs: u32,
    /// The reads, if the job read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<DirectionStats>,
    /// The writes, if the job wrote.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write: Option<DirectionStats>,
}

/// fio's `num2str`: at most four integer digits, three significant digits below that, in
/// powers of `base` with the matching unit names.
pub(crate) fn num2str(value: f64, base: f64, units: &[&str]) -> String {
    let mut v = value;
    let mut unit = 0;
    while v >= 9999.5 && unit + 1 < units.len() {
        v /= base;
        unit += 1;
    }
    let text = if v >= 99.95 || unit == 0 {
        format!("{v:.0}")
    } else if v >= 9.995 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    format!("{text}{}", units[unit])
}

fn bin_bytes(v: f64) -> String {
    num2str(v, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB"])
}

fn dec_bytes(v: f64) -> String {
    num2str(v, 1000.0, &["B", "kB", "MB", "GB", "TB"])
}

/// fio's human summary for one reporting group and its jobs.
pub(crate) fn render_group(jobs: &[&Job], stats: &GroupStats) -> String {
    let first = jobs[0];
    let mut out = format!(
        "{}: (g={}): rw={}, bs=(R) {bs}-{bs}, (W) {bs}-{bs}, (T) {bs}-{bs}, ioengine={}, iodepth={}\n",
        first.name,
        stats.groupid,
        first.rw.fio_name(),
        first.ioengine,
        first.iodepth,
        bs = bin_bytes(first.bs as f64),
    );
    out.push_str(&format!(
        "{}: (groupid={}, jobs={}): err= 0\n",
        first.name, stats.groupid, stats.jobs
    ));
    let dirs = [
        ("read", "READ", stats.read),
        ("write", "WRITE", stats.write),
    ];
    for (label, _, dir) in &dirs {
        if let Some(d) = dir {
            let bw = d.bw_bytes as f64;
            // fio divides integers here, so IOPS truncate where bandwidth rounds.
            let iops = if d.iops < 10_000.0 {
                format!("{}", d.iops.floor())
            } else {
                num2str(d.iops, 1000.0, &["", "k", "M"])
            };
            out.push_str(&format!(
                "  {label:>5}: IOPS={iops}, BW={}/s ({}/s)({}/{}msec)\n",
                bin_bytes(bw),
                dec_bytes(bw),
                bin_bytes(d.io_bytes as f64),
                d.runtime_ms
            ));
            let (unit, value) = if d.lat_avg_us >= 10_000.0 {
                ("msec", d.lat_avg_us / 1e3)
            } else {
                ("usec", d.lat_avg_us)
            };
            out.push_str(&format!("     lat ({unit}): avg={value:.2}\n"));
        }
    }
    out.push_str(&format!(
        "\nRun status group {} (all jobs):\n",
        stats.groupid
    ));
    for (_, upper, dir) in &dirs {
        if let Some(d) = dir {
            let bw = d.bw_bytes as f64;
            out.push_str(&format!(
                "  {upper:>5}: bw={b}/s ({m}/s), {b}/s-{b}/s ({m}/s-{m}/s), io={} ({}), run={r}-{r}msec\n",
                bin_bytes(d.io_bytes as f64),
                dec_bytes(d.io_bytes as f64),
                b = bin_bytes(bw),
                m = dec_bytes(bw),
                r = d.runtime_ms
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(p: &Path) -> Result<String> {
        Err(Error::runtime(format!("{}: no such file", p.display())))
    }

    fn cmd(line: &str) -> Result<JobSet> {
        let args: Vec<&str> = line.split_whitespace().collect();
        parse_command_line(&args, no_files)
    }

    #[test]
    fn seed_command_line_parses() {
        let set = cmd("--filename=./test.big -iodepth=64 -ioengine=libaio --direct=1 --rw=readwrite \
                       --bs=1m --numjobs=4 --time_based=1 --runtime=20 --group_reporting --name=test-rw")
        .unwrap();
        // Options before --name are global and apply to the job.
        assert_eq!(set.jobs.len(), 1);
        let j = &set.jobs[0];
        assert_eq!(j.name, "test-rw");
        assert_eq!(j.filename.as_deref(), Some("./test.big"));
        assert_eq!(j.rw, Rw::ReadWrite);
        assert_eq!(j.bs, 1 << 20);
        assert_eq!((j.numjobs, j.iodepth, j.effective_depth()), (4, 64, 64));
        assert!(j.direct && j.time_based && j.group_reporting);
        assert_eq!(j.runtime_ns, Some(20_000_000_000));
        assert_eq!(j.size, None);
    }

    #[test]
    fn rockchip_form_with_separate_value_and_thread() {
        let set = cmd("-filename=/mnt/test -direct=1 -iodepth 32 -thread -rw=randread -ioengine=libaio \
                       -bs=4K -size=4G -numjobs=1 -runtime=180 -group_reporting -name=read_rand_4k_q32_t1")
        .unwrap();
        let j = &set.jobs[0];
        assert_eq!(j.iodepth, 32);
        assert!(j.thread);
        assert_eq!(j.bs, 4096);
        assert_eq!(j.size, Some(4 << 30));
        assert_eq!(j.rw.read_percent(j.rwmixread), 100);
        assert!(!j.time_based);
    }

    #[test]
    fn unsupported_options_are_named() {
        let e = cmd("--filename=x --verify=crc32c --bs=4k --zonemode=zbd --name=a").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message().contains("'verify'") && e.message().contains("'zonemode'"),
            "{e}"
        );
        let e = cmd("--filename=x --rw=trim --name=a").unwrap_err();
        assert!(
            e.message().contains("rw") && e.message().contains("trim"),
            "{e}"
        );
        let e = cmd("--filename=x --bs=1000 --name=a").unwrap_err();
        assert!(e.message().contains("1000"), "{e}");
        assert!(cmd("--filename=x")
            .unwrap_err()
            .message()
            .contains("no jobs"));
        assert!(cmd("--name=a").unwrap_err().message().contains("filename"));
        assert!(cmd("--filename=x --name")
            .unwrap_err()
            .message()
            .contains("needs a value"));
    }

    #[test]
    fn job_file_with_global_sections_and_stonewall() {
        let text = "; crystalmark-like\n[global]\nfilename=/dev/nvme0n1\ndirect=1\nioengine=libaio\n\
                    iodepth=32\nsize=1g\n\n[seq-read]\nrw=read\nbs=1m\n\n[seq-write]\nstonewall\nrw=write\nbs=1m\n\
                    [rand-read]\nrw=randread\nbs=4k\n";
        let set = parse_job_file(text, "cm.fio").unwrap();
        assert_eq!(set.jobs.len(), 3);
        assert_eq!(set.jobs[1].name, "seq-write");
        assert!(set.jobs[1].stonewall);
        assert_eq!(set.jobs[2].iodepth, 32);
        let groups = set.groups();
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[1].len(), 2);
        let e = parse_job_file("[a]\nfilename=x\nfoo=1\n", "j.fio").unwrap_err();
        assert!(
            e.message().contains("foo") && e.message().contains("line 3"),
            "{e}"
        );
        let e = parse_job_file("filename=x\n[a]\n", "j.fio").unwrap_err();
        assert!(e.message().contains("j.fio:1"), "{e}");
    }

    #[test]
    fn escaped_colons_in_filenames() {
        let set = parse_job_file(
            "[r]\nfilename=/dev/disk/by-path/pci-0000\\:03\\:00.0-nvme-1\nrw=read\n",
            "j.fio",
        )
        .unwrap();
        let name = set.jobs[0].filename.as_deref();
        assert_eq!(name, Some("/dev/disk/by-path/pci-0000:03:00.0-nvme-1"));
        assert!(parse_job_file("[r]\nfilename=/a:/b\n", "j.fio").is_err());
        let literal = parse_job_file("[r]\nfilename=/a\\:b\n", "j.fio").unwrap();
        assert_eq!(literal.jobs[0].filename.as_deref(), Some("/a:b"));
    }

    #[test]
    fn job_files_on_the_command_line() {
        let read = |p: &Path| -> Result<String> {
            assert_eq!(p, Path::new("seq.fio"));
            Ok("[only]\nfilename=/dev/sda\nrw=write\n".into())
        };
        let set = parse_command_line(&["--bs=1m", "seq.fio"], read).unwrap();
        assert_eq!(set.jobs[0].bs, 1 << 20);
        assert_eq!(set.jobs[0].rw, Rw::Write);
    }

    #[test]
    fn sizes_times_and_fio_numbers() {
        assert_eq!(parse_time_ns("500ms"), Some(500_000_000));
        assert_eq!(parse_time_ns("3m"), Some(180_000_000_000));
        assert_eq!(bin_bytes(8192.0 * 1048576.0), "8192MiB");
        assert_eq!(bin_bytes(10395.0 * 1048576.0), "10.2GiB");
        assert_eq!(bin_bytes(103411.0 * 1048576.0), "101GiB");
        assert_eq!(dec_bytes(542e6), "542MB");
        assert_eq!(dec_bytes(10_899_947_520.0), "10.9GB");
    }

    #[test]
    fn summary_looks_like_fio() {
        let set = cmd("--filename=x --rw=read --bs=1m --numjobs=4 --name=test-read").unwrap();
        let stats = GroupStats {
            groupid: 0,
            name: "test-read".into(),
            jobs: 4,
            read: Some(DirectionStats::new(
                8192 << 20,
                8192,
                15_854_000_000,
                486_520.0,
            )),
            write: None,
        };
        let text = render_group(&set.groups()[0], &stats);
        assert!(
            text.contains("read: IOPS=516, BW=517MiB/s (542MB/s)(8192MiB/15854msec)"),
            "{text}"
        );
        assert!(text.contains("     lat (msec): avg=486.52\n"), "{text}");
        assert!(text.contains("READ: bw=517MiB/s (542MB/s), 517MiB/s-517MiB/s (542MB/s-542MB/s), io=8192MiB (8590MB), run=15854-15854msec"), "{text}");
    }
}
