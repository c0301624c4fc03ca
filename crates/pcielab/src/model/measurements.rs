//! Measurements to fit the platform model on, read from three layouts: a CSV
//! (`size_bytes,direction,MBps[,latency_ns][,iodepth][,jobs][,gen,width]`), fio's JSON output
//! (`--output-format=json`), and the Rockchip seed's dmatest table (a size header row, then a
//! write row and a read row of `12.2MB/s` cells). Every row keeps the line it came from, so fit
//! residuals and parse errors name it. Bad input names the file, line, column and value.

use serde::Deserialize;

use super::platform::{DmaDirection, MmioOp};
use super::transfer::{LinkParams, MAX_TRANSFER_BYTES};
use crate::error::{Error, Result};
use crate::input::readable_f64;
use crate::pcie::Generation;

/// What was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Workload {
    /// One device DMA transfer at a time (dmatest): `direction` from the device's side.
    Dma {
        /// Which way the device moved data.
        direction: DmaDirection,
        /// Bytes per transfer.
        size: u64,
    },
    /// `threads` CPU threads accessing a BAR with accesses of `width` bytes.
    Mmio {
        /// Stores or loads.
        op: MmioOp,
        /// Bytes per CPU access.
        width: u32,
        /// CPU threads accessing at once.
        threads: u32,
    },
    /// fio-style queued I/O of `bs` bytes; `device` is the device's DMA direction (a disk read
    /// is a device write).
    Queued {
        /// The device's DMA direction.
        device: DmaDirection,
        /// Bytes per I/O.
        bs: u64,
        /// I/Os each job keeps in flight.
        iodepth: u32,
        /// Jobs running at once.
        jobs: u32,
    },
}

impl Workload {
    /// A short label for reports: `write 4096`, `load 4`, `fio read bs=4096 q32 t1`.
    pub(crate) fn label(&self) -> String {
        match self {
            Workload::Dma { direction, size } => format!("{} {size}", direction_name(*direction)),
            Workload::Mmio { op, width, threads } => format!(
                "{} {width}{}",
                match op {
                    MmioOp::Store => "store",
                    MmioOp::Load => "load",
                },
                if *threads > 1 {
                    format!(" t{threads}")
                } else {
                    String::new()
                }
            ),
            Workload::Queued {
                device,
                bs,
                iodepth,
                jobs,
            } => format!(
                "fio {} bs={bs} q{iodepth} t{jobs}",
                match device {
                    DmaDirection::Write => "read",
                    DmaDirection::Read => "write",
                }
            ),
        }
    }
}

fn direction_name(d: DmaDirection) -> &'static str {
    match d {
        DmaDirection::Write => "write",
        DmaDirection::Read => "read",
    }
}

/// One measured figure and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// What was run.
    pub workload: Workload,
    /// Payload MB/s (10^6 bytes per second).
    pub mbps: f64,
    /// Issue-to-completion time of one transfer, where measured.
    pub latency_ns: Option<f64>,
    /// 1-based line in the source (0 for fio JSON jobs, which have no useful line).
    pub line: usize,
    /// The link this row was measured on, where the row says (CSV `gen` and `width` columns);
    /// `None`: the link given to the fit. Rows on different links let a fit separate per-transfer
    /// costs that scale with the link from fixed ones.
    pub link: Option<LinkParams>,
}

/// The CSV directions and what they mean.
const DIRECTIONS: &str = "write (device DMA writes host memory), read (device DMA reads it), \
store / load (CPU MMIO to a BAR; size_bytes = access width; optional jobs column = threads, \
default 1), fio_read / fio_write (queued I/O; \
optional iodepth and jobs columns, default 32 and 1)";

/// Reads measurements from `text`, choosing the layout by content: JSON (fio), a CSV whose
/// header names `size_bytes`, or the seed's dmatest table.
pub fn parse_measurements(file: &str, text: &str, base: &LinkParams) -> Result<Vec<Measurement>> {
    let trimmed = text.trim_start();
    let rows = if let Some(json) = fio_json_text(trimmed) {
        parse_fio_json(file, json)?
    } else if trimmed
        .lines()
        .next()
        .is_some_and(|l| l.to_ascii_lowercase().contains("size_bytes"))
    {
        parse_csv(file, text, base)?
    } else {
        parse_dmatest_table(file, text)?
    };
    if rows.is_empty() {
        return Err(Error::bad_input(format!("{file}: no measurements in it")));
    }
    if rows.len() > MAX_MEASUREMENTS {
        return Err(Error::bad_input(format!(
            "{file}: {} measurements; at most {MAX_MEASUREMENTS} (fitting runs the model for every row at every step)",
            rows.len()
        )));
    }
    Ok(rows)
}

/// The most measurement rows one file may give: far more than a sweep has, few enough that a
/// fit over all of them ends in seconds.
pub(crate) const MAX_MEASUREMENTS: usize = 10_000;

/// The JSON document in fio's output: fio prints `note:` and `fio:` lines (e.g. "queue depth
/// will be capped at 1") on stdout ahead of it, so those are skipped.
fn fio_json_text(text: &str) -> Option<&str> {
    let mut rest = text;
    while !rest.starts_with('{') {
        if !(rest.starts_with("note:") || rest.starts_with("fio:")) {
            return None;
        }
        rest = rest.split_once('\n')?.1.trim_start();
    }
    Some(rest)
}

/// The CSV layout: a header naming the columns (any order), one measurement per line.
/// `base` gives the settings (MPS, MRRS, …) of rows that name their own generation and width.
pub(crate) fn parse_csv(file: &str, text: &str, base: &LinkParams) -> Result<Vec<Measurement>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(Error::bad_input(format!(
            "{file}: empty: expected a header line"
        )));
    };
    // Spreadsheets save CSV with a byte-order mark before the first column's name.
    let header = header.strip_prefix('\u{feff}').unwrap_or(header);
    let columns: Vec<String> = header.split(',').map(|c| c.trim().to_string()).collect();
    for (i, c) in columns.iter().enumerate() {
        if columns[..i]
            .iter()
            .any(|earlier| earlier.eq_ignore_ascii_case(c))
        {
            return Err(Error::bad_input(format!(
                "{file}:1: column '{c}' appears twice in the header: name each column once"
            )));
        }
    }
    let find = |name: &str| columns.iter().position(|c| c.eq_ignore_ascii_case(name));
    let required = |name: &str| {
        find(name).ok_or_else(|| {
            Error::bad_input(format!(
                "{file}:1: missing column '{name}': the header must name size_bytes, direction \
                 and MBps (optional latency_ns, iodepth, jobs, gen + width); found {}",
                columns.join(",")
            ))
        })
    };
    let (size_col, dir_col, mbps_col) = (
        required("size_bytes")?,
        required("direction")?,
        required("MBps")?,
    );
    let (latency_col, depth_col, jobs_col) = (find("latency_ns"), find("iodepth"), find("jobs"));
    let (gen_col, width_col) = (find("gen"), find("width"));
    let mut rows = Vec::new();
    for (index, line) in lines {
        let n = index + 1;
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let cell = |col: usize, name: &str| {
            cells
                .get(col)
                .copied()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    Error::bad_input(format!("{file}:{n}: column '{name}' is empty or missing"))
                })
        };
        let number = |col: usize, name: &str| -> Result<f64> {
            let text = cell(col, name)?;
            text.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| {
                    Error::bad_input(format!(
                        "{file}:{n}: column '{name}': '{text}' is not a number"
                    ))
                })
        };
        let size = number(size_col, "size_bytes")?;
        if size <= 0.0 || size.fract() != 0.0 {
            return Err(Error::bad_input(format!(
                "{file}:{n}: column 'size_bytes': {} is not a positive whole number of bytes",
                readable_f64(size)
            )));
        }
        if size > MAX_TRANSFER_BYTES as f64 {
            return Err(Error::bad_input(format!(
                "{file}:{n}: column 'size_bytes': {} is larger than the {MAX_TRANSFER_BYTES} bytes (1 TiB) one transfer can be",
                readable_f64(size)
            )));
        }
        let mbps = physical_rate(number(mbps_col, "MBps")?)
            .map_err(|why| Error::bad_input(format!("{file}:{n}: column 'MBps': {why}")))?;
        let latency_ns = match latency_col.filter(|&c| cells.get(c).is_some_and(|v| !v.is_empty()))
        {
            Some(c) => {
                let v = number(c, "latency_ns")?;
                if v <= 0.0 {
                    return Err(Error::bad_input(format!(
                        "{file}:{n}: column 'latency_ns': {v} must be positive"
                    )));
                }
                Some(v)
            }
            None => None,
        };
        let count = |col: Option<usize>, name: &str, default: u32| -> Result<u32> {
            match col.filter(|&c| cells.get(c).is_some_and(|v| !v.is_empty())) {
                None => Ok(default),
                Some(c) => {
                    let text = cell(c, name)?;
                    text.parse::<u32>().ok().filter(|&v| v > 0).ok_or_else(|| {
                        Error::bad_input(format!(
                            "{file}:{n}: column '{name}': '{text}' is not a positive whole number"
                        ))
                    })
                }
            }
        };
        let size = size as u64;
        let direction = cell(dir_col, "direction")?;
        let workload = match direction.to_ascii_lowercase().as_str() {
            "write" => Workload::Dma {
                direction: DmaDirection::Write,
                size,
            },
            "read" => Workload::Dma {
                direction: DmaDirection::Read,
                size,
            },
            op @ ("store" | "load") => Workload::Mmio {
                op: if op == "store" {
                    MmioOp::Store
                } else {
                    MmioOp::Load
                },
                width: u32::try_from(size).ok().filter(|w| [4, 8, 16, 32, 64].contains(w)).ok_or_else(|| {
                    Error::bad_input(format!(
                        "{file}:{n}: column 'size_bytes': {size} is not an MMIO access width (4, 8, 16, 32 or 64)"
                    ))
                })?,
                threads: count(jobs_col, "jobs", 1)?,
            },
            io @ ("fio_read" | "fio_write") => Workload::Queued {
                device: if io == "fio_read" {
                    DmaDirection::Write
                } else {
                    DmaDirection::Read
                },
                bs: size,
                iodepth: count(depth_col, "iodepth", 32)?,
                jobs: count(jobs_col, "jobs", 1)?,
            },
            _ => {
                return Err(Error::bad_input(format!(
                    "{file}:{n}: column 'direction': '{direction}' is not known: expected {DIRECTIONS}"
                )))
            }
        };
        let link = match (gen_col, width_col) {
            (None, None) => None,
            (Some(g), Some(w)) => {
                let gen_text = cell(g, "gen")?;
                let gen = gen_text
                    .parse::<u8>()
                    .ok()
                    .and_then(Generation::from_number)
                    .ok_or_else(|| {
                        Error::bad_input(format!(
                            "{file}:{n}: column 'gen': '{gen_text}' is not a PCIe generation (1-7)"
                        ))
                    })?;
                let width = count(Some(w), "width", 1)?;
                let row_link = LinkParams {
                    gen,
                    width: u8::try_from(width).unwrap_or(0),
                    ..*base
                };
                row_link
                    .validate()
                    .map_err(|e| Error::bad_input(format!("{file}:{n}: column 'width': {e}")))?;
                Some(row_link)
            }
            _ => {
                return Err(Error::bad_input(format!(
                    "{file}:1: columns 'gen' and 'width' come together (the link a row was measured on)"
                )))
            }
        };
        rows.push(Measurement {
            workload,
            mbps,
            latency_ns,
            line: n,
            link,
        });
    }
    Ok(rows)
}

/// The slowest rate a row may report: 1 KB/s, below what any transfer-rate tool prints.
pub(crate) const MIN_MEASURED_MBPS: f64 = 1e-3;
/// The fastest: 1 TB/s, above the payload rate of any PCIe link the specification defines in one
/// direction (Gen7 x32, about 242 GB/s) and of any memory a CPU copies at.
pub(crate) const MAX_MEASURED_MBPS: f64 = 1e6;

/// `mbps` when it is a rate some real measurement could report; otherwise why not, with the
/// bounds.
fn physical_rate(mbps: f64) -> std::result::Result<f64, String> {
    if (MIN_MEASURED_MBPS..=MAX_MEASURED_MBPS).contains(&mbps) {
        Ok(mbps)
    } else {
        Err(format!(
            "{} MB/s is not a measured rate: expected {MIN_MEASURED_MBPS} (1 KB/s) to {} MB/s (1 TB/s, beyond any PCIe link)",
            readable_f64(mbps),
            readable_f64(MAX_MEASURED_MBPS)
        ))
    }
}

/// A dmatest size cell: `64B`, `4K`, `64KB`, `1MB` (1024-based).
fn table_size(cell: &str) -> Option<u64> {
    let upper = cell.trim().to_ascii_uppercase();
    let digits = upper.trim_end_matches('B');
    let (number, unit) = match digits.chars().last()? {
        'K' => (&digits[..digits.len() - 1], 1 << 10),
        'M' => (&digits[..digits.len() - 1], 1 << 20),
        'G' => (&digits[..digits.len() - 1], 1 << 30),
        _ => (digits, 1),
    };
    number
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .and_then(|n| n.checked_mul(unit))
        .filter(|&n| n <= MAX_TRANSFER_BYTES)
}

/// A dmatest rate cell: `12.2MB/s` (any case) or a bare number.
fn table_rate(cell: &str) -> Option<f64> {
    let lower = cell.trim().to_ascii_lowercase();
    lower
        .trim_end_matches("mb/s")
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| physical_rate(*v).is_ok())
}

/// The seed's dmatest layout (tab or run-of-spaces separated): a header whose cells after the
/// first are sizes, then rows labelled 写/write and 读/read with one rate per size.
pub(crate) fn parse_dmatest_table(file: &str, text: &str) -> Result<Vec<Measurement>> {
    let split = |line: &str| -> Vec<String> {
        if line.contains('\t') {
            line.split('\t').map(|c| c.trim().to_string()).collect()
        } else {
            line.split_whitespace().map(str::to_string).collect()
        }
    };
    let mut sizes: Option<Vec<u64>> = None;
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let n = index + 1;
        let cells = split(line);
        if cells.len() < 2 {
            continue;
        }
        let tail = &cells[1..];
        let parsed: Vec<Option<u64>> = tail.iter().map(|c| table_size(c)).collect();
        if parsed.iter().all(Option::is_some) {
            sizes = Some(parsed.into_iter().flatten().collect());
            continue;
        }
        let label = cells[0].to_ascii_lowercase();
        let direction = if label.starts_with('写') || label.starts_with("write") {
            DmaDirection::Write
        } else if label.starts_with('读') || label.starts_with("read") {
            DmaDirection::Read
        } else {
            continue;
        };
        let Some(sizes) = &sizes else {
            return Err(Error::bad_input(format!(
                "{file}:{n}: a {} row before any size header (e.g. 'DMA size\t64B\t256B\t4K')",
                direction_name(direction)
            )));
        };
        if tail.len() != sizes.len() {
            return Err(Error::bad_input(format!(
                "{file}:{n}: {} cells for {} sizes in the header",
                tail.len(),
                sizes.len()
            )));
        }
        for (column, (cell, &size)) in tail.iter().zip(sizes).enumerate() {
            let mbps = table_rate(cell).ok_or_else(|| {
                Error::bad_input(format!(
                    "{file}:{n}: column {} ({size} B): '{cell}' is not a rate like 12.2MB/s",
                    column + 2
                ))
            })?;
            rows.push(Measurement {
                workload: Workload::Dma { direction, size },
                mbps,
                latency_ns: None,
                line: n,
                link: None,
            });
        }
    }
    if sizes.is_none() {
        return Err(Error::bad_input(format!(
            "{file}: not a CSV with a size_bytes header, fio JSON or a dmatest table (a size \
             header row such as 'DMA size\t64B\t4K\t1MB' then write/read rows)"
        )));
    }
    Ok(rows)
}

#[derive(Deserialize)]
struct FioOutput {
    #[serde(default, rename = "global options")]
    global: std::collections::BTreeMap<String, serde_json::Value>,
    jobs: Vec<FioJob>,
}

#[derive(Deserialize)]
struct FioJob {
    jobname: String,
    #[serde(default, rename = "job options")]
    options: std::collections::BTreeMap<String, serde_json::Value>,
    read: FioDirection,
    write: FioDirection,
}

#[derive(Deserialize)]
struct FioDirection {
    #[serde(default)]
    bw_bytes: f64,
}

/// fio's I/O engines that submit one I/O at a time whatever `iodepth` says.
const SYNC_ENGINES: [&str; 5] = ["sync", "psync", "vsync", "pvsync", "pvsync2"];

/// fio's `--output-format=json`: one measurement per job and direction that moved data; block
/// size, queue depth and job count from the job's options (or the global ones). Without
/// `group_reporting` fio reports each of a job's `numjobs` clones on its own (same name and
/// options, each with its own bandwidth): their bandwidths are summed into one measurement, as
/// `group_reporting` would give. Synchronous engines have a queue depth of 1 (fio caps it).
pub(crate) fn parse_fio_json(file: &str, text: &str) -> Result<Vec<Measurement>> {
    let out: FioOutput = serde_json::from_str(text)
        .map_err(|e| Error::bad_input(format!("{file}: not fio JSON output: {e}")))?;
    let mut rows: Vec<Measurement> = Vec::new();
    let mut clone_of: Vec<(&str, &std::collections::BTreeMap<String, serde_json::Value>)> =
        Vec::new();
    for job in &out.jobs {
        let option = |key: &str| -> Option<String> {
            job.options
                .get(key)
                .or_else(|| out.global.get(key))
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
        };
        let bs_text = option("bs")
            .or_else(|| option("blocksize"))
            .unwrap_or("4k".into());
        let bs = crate::units::parse_size(&bs_text).ok_or_else(|| {
            Error::bad_input(format!(
                "{file}: job '{}': bs '{bs_text}' is not a size",
                job.jobname
            ))
        })?;
        let number = |key: &str, default: u32| -> Result<u32> {
            match option(key) {
                None => Ok(default),
                Some(v) => v.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                    Error::bad_input(format!(
                        "{file}: job '{}': {key} '{v}' is not a positive whole number",
                        job.jobname
                    ))
                }),
            }
        };
        let synchronous = option("ioengine").is_some_and(|e| SYNC_ENGINES.contains(&e.as_str()));
        let iodepth = if synchronous {
            1
        } else {
            number("iodepth", 1)?
        };
        let jobs = number("numjobs", 1)?;
        for (device, dir) in [
            (DmaDirection::Write, &job.read),
            (DmaDirection::Read, &job.write),
        ] {
            if dir.bw_bytes > 0.0 {
                let key = (job.jobname.as_str(), &job.options);
                let earlier = clone_of.iter().zip(&mut rows).find(|(k, row)| {
                    **k == key
                        && matches!(row.workload, Workload::Queued { device: d, .. } if d == device)
                });
                if let Some((_, row)) = earlier {
                    row.mbps += dir.bw_bytes / 1e6;
                    continue;
                }
                clone_of.push(key);
                rows.push(Measurement {
                    workload: Workload::Queued {
                        device,
                        bs,
                        iodepth,
                        jobs,
                    },
                    mbps: dir.bw_bytes / 1e6,
                    latency_ns: None,
                    line: 0,
                    link: None,
                });
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> LinkParams {
        LinkParams::new(Generation::Gen3, 4)
    }

    #[test]
    fn a_file_of_more_rows_than_a_fit_takes_is_bad_input() {
        let row = "64,write,14.7\n";
        let text = format!(
            "size_bytes,direction,MBps\n{}",
            row.repeat(MAX_MEASUREMENTS + 1)
        );
        let e = parse_measurements("m.csv", &text, &base()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains("m.csv: 10001 measurements; at most 10000"),
            "{e}"
        );
        let text = format!(
            "size_bytes,direction,MBps\n{}",
            row.repeat(MAX_MEASUREMENTS)
        );
        assert_eq!(
            parse_measurements("m.csv", &text, &base()).unwrap().len(),
            MAX_MEASUREMENTS
        );
    }

    #[test]
    fn rows_may_name_their_own_link() {
        let text = "size_bytes,direction,MBps,gen,width\n64,write,14.7,3,4\n64,write,3.8,2,1\n";
        let rows = parse_measurements("m.csv", text, &base()).unwrap();
        assert_eq!(
            rows[1].link.map(|l| (l.gen, l.width)),
            Some((Generation::Gen2, 1))
        );
        let e = parse_measurements(
            "m.csv",
            "size_bytes,direction,MBps,gen,width\n64,write,1,3,3\n",
            &base(),
        )
        .unwrap_err();
        assert!(e.message().starts_with("m.csv:2: column 'width'"), "{e}");
        let e = parse_measurements(
            "m.csv",
            "size_bytes,direction,MBps,gen\n64,write,1,3\n",
            &base(),
        )
        .unwrap_err();
        assert!(
            e.message().contains("'gen' and 'width' come together"),
            "{e}"
        );
    }

    #[test]
    fn csv_rows_keep_their_lines_and_kinds() {
        let text = "size_bytes,direction,MBps,latency_ns\n64,write,14.7,\n4096,read,568.7,7200\n4,store,53\n4096,fio_read,794\n";
        let rows = parse_measurements("m.csv", text, &base()).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[1].latency_ns, Some(7200.0));
        assert_eq!(rows[1].line, 3);
        assert_eq!(
            rows[3].workload,
            Workload::Queued {
                device: DmaDirection::Write,
                bs: 4096,
                iodepth: 32,
                jobs: 1
            }
        );
    }

    #[test]
    fn bad_csvs_name_line_and_column() {
        let cases = [
            (
                "size_bytes,MBps\n64,1\n",
                "m.csv:1: missing column 'direction'",
            ),
            (
                "size_bytes,direction,MBps\n64,write,fast\n",
                "m.csv:2: column 'MBps': 'fast' is not a number",
            ),
            (
                "size_bytes,direction,MBps\n-64,write,1\n",
                "m.csv:2: column 'size_bytes': -64 is not a positive",
            ),
            (
                "size_bytes,direction,MBps\n64,write,1\n64,sideways,1\n",
                "m.csv:3: column 'direction': 'sideways' is not known",
            ),
            (
                "size_bytes,direction,MBps\n64,write\n",
                "m.csv:2: column 'MBps' is empty or missing",
            ),
        ];
        for (text, want) in cases {
            let e = parse_measurements("m.csv", text, &base()).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.message().starts_with(want), "{}", e.message());
        }
    }

    #[test]
    fn seed_dmatest_table_reads_as_printed() {
        // Rockchip seed §4.3.1, as the document lays it out.
        let text = "DMA 大 小\t64B\t256B\t4K\t64KB\t1MB\t4MB\n写\t12.2MB/s\t51.7MB/s\t529.1MB/s\t941.6MB/s\t1418.2MB/s\t1454.3MB/s\n读\t6.0MB/s\t44.3MB/s\t442.3MB/s\t680.5MB/s\t938.9MB/s\t1080.2MB/s\n";
        let rows = parse_measurements("t.txt", text, &base()).unwrap();
        assert_eq!(rows.len(), 12);
        assert_eq!(
            rows[4].workload,
            Workload::Dma {
                direction: DmaDirection::Write,
                size: 1 << 20
            }
        );
        assert_eq!(rows[4].mbps, 1418.2);
        assert_eq!(rows[11].mbps, 1080.2);
        let e = parse_measurements("t.txt", "DMA\t64B\t4K\n写\t1MB/s\n", &base()).unwrap_err();
        assert!(
            e.message().contains("t.txt:2: 1 cells for 2 sizes"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn fio_clones_sum_and_its_notes_are_skipped() {
        // fio 3.33, numjobs=2 without group_reporting, psync: a note on stdout first, then
        // each clone with its own bandwidth and the job's options.
        let clone = r#"{"jobname":"r","groupid":0,"job options":{"rw":"randread","bs":"4k",
          "iodepth":"4","ioengine":"psync","numjobs":"2"},"read":{"bw_bytes":50000000},
          "write":{"bw_bytes":0}}"#;
        let text = format!(
            "note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will \
             be capped at 1\n{{\"fio version\":\"fio-3.33\",\"jobs\":[{clone},{clone}]}}"
        );
        let rows = parse_measurements("f.json", &text, &base()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].mbps, 100.0);
        assert_eq!(
            rows[0].workload,
            Workload::Queued {
                device: DmaDirection::Write,
                bs: 4096,
                iodepth: 1,
                jobs: 2
            }
        );
    }

    #[test]
    fn fio_json_jobs_become_queued_io() {
        let text = r#"{"fio version":"fio-3.33","global options":{"iodepth":"32"},
          "jobs":[{"jobname":"r","job options":{"rw":"randread","bs":"4K"},
                   "read":{"bw_bytes":794000000},"write":{"bw_bytes":0}}]}"#;
        let rows = parse_measurements("f.json", text, &base()).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].mbps, 794.0);
        assert_eq!(
            rows[0].workload,
            Workload::Queued {
                device: DmaDirection::Write,
                bs: 4096,
                iodepth: 32,
                jobs: 1
            }
        );
    }
}
