//! Workloads the simulator runs, from the argv after `--`: `fio …` (fio's own syntax, see
//! [`crate::sim::fio`]), `dmatest …` (an endpoint DMA engine moving transfers of each size in
//! each direction, one at a time, as the Rockchip "standard EP + dmatest" test does) and
//! `sleep SECONDS` (an idle window, for link-state residency). Also their results: fio groups
//! and the DMA-vs-size table, as text and as JSON.

use serde::Serialize;
use std::path::Path;

use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::sim::fio::{self, GroupStats, JobSet};

pub(crate) use crate::model::platform::DmaDirection;

/// The `dmatest` sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DmaTest {
    /// The endpoint whose engine runs; `None`: the platform's only DMA engine.
    pub(crate) device: Option<Bdf>,
    pub(crate) sizes: Vec<u64>,
    pub(crate) directions: Vec<DmaDirection>,
    /// Transfers per size and direction.
    pub(crate) transfers: u64,
}

/// The `nettest` load: every chosen NIC port receives and/or transmits frames at line rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetTest {
    /// The NIC functions to load; empty: every NIC of the machine.
    pub(crate) devices: Vec<Bdf>,
    pub(crate) receive: bool,
    pub(crate) transmit: bool,
    pub(crate) seconds: f64,
    /// Ethernet frame size in bytes (header and FCS included).
    pub(crate) frame: u64,
}

/// A parsed workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// fio jobs (a job file or a command line).
    Fio(JobSet),
    /// A dmatest run.
    DmaTest(DmaTest),
    /// A network test run.
    NetTest(NetTest),
    /// Nothing runs for a while (`sleep SECONDS`).
    Sleep {
        /// How long (ns).
        ns: u64,
    },
}

const USAGE: &str = "the simulated workload is 'fio OPTIONS…|JOBFILE', \
'dmatest [--device BDF] [--sizes 64,256,4K,64K,1M,4M] [--dir write,read] [--transfers N]', \
'nettest [--device BDF]… [--dir rx|tx|both] [--seconds S] [--frame BYTES]' or 'sleep SECONDS'";

/// The programs a simulated machine runs.
pub(crate) const PROGRAMS: [&str; 4] = ["fio", "dmatest", "nettest", "sleep"];

/// Parses the workload argv; `read_file` reads fio job files.
pub fn parse(argv: &[String], read_file: impl Fn(&Path) -> Result<String>) -> Result<Workload> {
    let Some((program, args)) = argv.split_first() else {
        return Err(Error::bad_input(format!("no workload given: {USAGE}")));
    };
    match program.as_str() {
        "fio" => Ok(Workload::Fio(fio::parse_command_line(args, read_file)?)),
        "dmatest" => parse_dmatest(args).map(Workload::DmaTest),
        "nettest" => parse_nettest(args).map(Workload::NetTest),
        "sleep" => {
            let seconds: f64 = args
                .first()
                .and_then(|s| s.parse().ok())
                .filter(|_| args.len() == 1)
                .ok_or_else(|| {
                    Error::bad_input(format!(
                        "sleep: expected one positive number of seconds, got {args:?}"
                    ))
                })?;
            let seconds = crate::input::duration_s("sleep", seconds, true)?;
            Ok(Workload::Sleep {
                ns: (seconds * 1e9) as u64,
            })
        }
        other => Err(Error::bad_input(format!(
            "workload '{other}' cannot run on a simulated machine: {USAGE}"
        ))),
    }
}

/// `--key value` / `--key=value` pairs, in order.
fn options(tool: &str, args: &[String]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let (key, value) = match args[i].split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => {
                i += 1;
                let v = args.get(i).cloned().ok_or_else(|| {
                    Error::bad_input(format!("{tool}: option '{}' needs a value", args[i - 1]))
                })?;
                (args[i - 1].clone(), v)
            }
        };
        out.push((key, value));
        i += 1;
    }
    Ok(out)
}

fn parse_nettest(args: &[String]) -> Result<NetTest> {
    let mut test = NetTest {
        devices: Vec::new(),
        receive: true,
        transmit: true,
        seconds: 1.0,
        frame: 1518,
    };
    for (key, value) in options("nettest", args)? {
        let bad = |valid: &str| {
            Error::bad_input(format!(
                "nettest: invalid {key} '{value}': expected {valid}"
            ))
        };
        match key.as_str() {
            "--device" => test.devices.push(value.parse()?),
            "--dir" => {
                (test.receive, test.transmit) = match value.as_str() {
                    "rx" => (true, false),
                    "tx" => (false, true),
                    "both" => (true, true),
                    _ => return Err(bad("rx, tx or both")),
                }
            }
            "--seconds" => {
                let seconds: f64 = value
                    .parse()
                    .map_err(|_| bad("a positive number of seconds"))?;
                test.seconds = crate::input::duration_s("nettest --seconds", seconds, true)?;
            }
            "--frame" => {
                test.frame = value
                    .parse()
                    .ok()
                    .filter(|f| (64..=9018).contains(f))
                    .ok_or_else(|| bad("an Ethernet frame size from 64 to 9018 bytes"))?
            }
            _ => {
                return Err(Error::bad_input(format!(
                    "nettest: unknown option '{key}': valid options are --device, --dir, --seconds, --frame"
                )))
            }
        }
    }
    Ok(test)
}

fn parse_dmatest(args: &[String]) -> Result<DmaTest> {
    let mut test = DmaTest {
        device: None,
        sizes: [64, 256, 4 << 10, 64 << 10, 1 << 20, 4 << 20].to_vec(),
        directions: vec![DmaDirection::Write, DmaDirection::Read],
        transfers: 1000,
    };
    let mut i = 0;
    while i < args.len() {
        let (key, inline) = match args[i].split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (args[i].clone(), None),
        };
        let value = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i).cloned().ok_or_else(|| {
                    Error::bad_input(format!("dmatest: option '{key}' needs a value"))
                })?
            }
        };
        i += 1;
        let bad = |valid: &str| {
            Error::bad_input(format!(
                "dmatest: invalid {key} '{value}': expected {valid}"
            ))
        };
        match key.as_str() {
            "--device" => test.device = Some(value.parse()?),
            "--sizes" => {
                test.sizes = value
                    .split(',')
                    .map(|s| crate::units::parse_size(s).filter(|n| *n > 0))
                    .collect::<Option<Vec<u64>>>()
                    .ok_or_else(|| bad("sizes such as 64,256,4K,1M"))?;
                for &size in &test.sizes {
                    crate::model::transfer::transfer_size("dmatest --sizes", size)?;
                }
            }
            "--dir" => {
                test.directions = value
                    .split(',')
                    .map(|d| match d {
                        "write" => Some(DmaDirection::Write),
                        "read" => Some(DmaDirection::Read),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad("write, read or write,read"))?
            }
            "--transfers" => {
                // Linux's dmatest takes its iteration count as an unsigned int.
                test.transfers = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=u64::from(u32::MAX)).contains(n))
                    .ok_or_else(|| bad("a whole number from 1 to 4294967295 (dmatest's iterations)"))?
            }
            _ => {
                return Err(Error::bad_input(format!(
                    "dmatest: unknown option '{key}': valid options are --device, --sizes, --dir, --transfers"
                )))
            }
        }
    }
    Ok(test)
}

/// One row of the DMA-vs-size table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DmaRow {
    /// Which way the DMA went.
    pub direction: DmaDirection,
    /// Bytes per transfer.
    pub size: u64,
    pub(crate) transfers: u64,
    /// Throughput in MB/s (10^6 bytes per second).
    #[serde(rename = "MBps")]
    pub mbps: f64,
    pub(crate) runtime_ns: u64,
}

/// One NIC port and direction of a `nettest`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct NetRow {
    pub(crate) device: Bdf,
    /// `rx` (frames into host memory) or `tx`.
    pub direction: &'static str,
    /// Frames sent or received.
    pub frames: u64,
    /// Bytes in those frames.
    pub bytes: u64,
    pub(crate) seconds: f64,
    /// Frame bytes per second × 8 / 10^9.
    pub gbps: f64,
}

/// What a workload reports about itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Summary {
    /// What fio reports.
    Fio {
        /// One entry per fio group, as fio's `--output-format=json` gives it.
        groups: Vec<GroupStats>,
    },
    /// What dmatest reports.
    DmaTest {
        /// The device whose DMA engine ran.
        device: Bdf,
        /// One row per direction and size.
        rows: Vec<DmaRow>,
    },
    /// What the network test reports.
    NetTest {
        /// One row per direction.
        rows: Vec<NetRow>,
    },
    /// A sleep.
    Sleep {
        /// How long it slept.
        seconds: f64,
    },
}

impl Summary {
    /// The workload's own output, as the real tool would print it.
    pub(crate) fn render(&self, workload: &Workload) -> String {
        match (self, workload) {
            (Summary::Fio { groups }, Workload::Fio(set)) => set
                .groups()
                .iter()
                .zip(groups)
                .map(|(jobs, stats)| fio::render_group(jobs, stats))
                .collect::<Vec<_>>()
                .join("\n"),
            (Summary::DmaTest { device, rows }, _) => {
                let mut out = format!("dmatest on {device}: one transfer at a time\n");
                out.push_str(&format!(
                    "{:>10} {:>12} {:>12}\n",
                    "size", "write MB/s", "read MB/s"
                ));
                let mut sizes: Vec<u64> = Vec::new();
                for r in rows {
                    if !sizes.contains(&r.size) {
                        sizes.push(r.size);
                    }
                }
                for size in sizes {
                    let cell = |d: DmaDirection| {
                        rows.iter()
                            .find(|r| r.size == size && r.direction == d)
                            .map_or("-".to_string(), |r| format!("{:.1}", r.mbps))
                    };
                    out.push_str(&format!(
                        "{:>10} {:>12} {:>12}\n",
                        human_size(size),
                        cell(DmaDirection::Write),
                        cell(DmaDirection::Read)
                    ));
                }
                out
            }
            (Summary::NetTest { rows }, _) => {
                let mut out = format!(
                    "{:<14} {:>3} {:>14} {:>16} {:>9}\n",
                    "device", "dir", "frames", "bytes", "Gb/s"
                );
                for r in rows {
                    out.push_str(&format!(
                        "{:<14} {:>3} {:>14} {:>16} {:>9.3}\n",
                        r.device.to_string(),
                        r.direction,
                        r.frames,
                        r.bytes,
                        r.gbps
                    ));
                }
                out
            }
            (Summary::Sleep { .. }, _) | (Summary::Fio { .. }, _) => String::new(),
        }
    }
}

fn human_size(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}KB", n >> 10),
        n => format!("{n}B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn no_files(p: &Path) -> Result<String> {
        Err(Error::runtime(format!("{}: none", p.display())))
    }

    #[test]
    fn workloads_parse() {
        match parse(
            &argv("dmatest --sizes 64,4K,1M --dir=read --transfers 10"),
            no_files,
        )
        .unwrap()
        {
            Workload::DmaTest(t) => {
                assert_eq!(t.sizes, vec![64, 4096, 1 << 20]);
                assert_eq!(t.directions, vec![DmaDirection::Read]);
                assert_eq!(t.transfers, 10);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse(&argv("sleep 0.5"), no_files).unwrap(),
            Workload::Sleep { ns: 500_000_000 }
        );
        match parse(
            &argv("nettest --device b1:00.0 --dir rx --seconds 0.5 --frame=9018"),
            no_files,
        )
        .unwrap()
        {
            Workload::NetTest(t) => {
                assert_eq!(t.devices.len(), 1);
                assert!(t.receive && !t.transmit);
                assert_eq!((t.seconds, t.frame), (0.5, 9018));
            }
            other => panic!("{other:?}"),
        }
        for bad in [
            "nettest --frame 20",
            "nettest --dir",
            "",
            "ls -l",
            "sleep",
            "sleep -1",
            "dmatest --dir up",
            "dmatest --speed 3",
        ] {
            let e = parse(&argv(bad), no_files).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
        }
    }
}
