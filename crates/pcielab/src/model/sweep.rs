//! Link bandwidth versus transfer size: the report behind `pcielab model`. For each size it runs
//! one aligned device write and one aligned device read through [`super::transfer`] and records
//! link-limited throughput and TLP counts. Also parses the `--sizes` list (K/M/G = 1024-based).
//! The JSON shape is documented in docs/model.md.

use serde::Serialize;

use super::transfer::{read, write, CompletionSize, LinkParams, Overheads};
use crate::error::{Error, Result};
use crate::pcie::link::{kernel_link_mbit, raw_mbps};
use crate::report::round_to;

/// Sizes `pcielab model` sweeps when none are given: the seed's DMA test sizes and a few between.
pub const DEFAULT_SIZES: [u64; 8] = [64, 128, 256, 512, 4096, 65536, 1 << 20, 4 << 20];

/// One transfer size's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizePoint {
    pub size: u64,
    #[serde(rename = "write_MBps")]
    pub write_mbps: f64,
    #[serde(rename = "read_MBps")]
    pub read_mbps: f64,
    pub write_tlps: u64,
    pub read_request_tlps: u64,
    pub completion_tlps: u64,
}

/// The whole sweep for one link; serialises to the documented `pcielab model --json` shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeSweep {
    pub gen: u8,
    pub width: u8,
    pub mps: u32,
    pub mrrs: u32,
    pub rcb: u32,
    #[serde(rename = "raw_MBps")]
    pub raw_mbps: f64,
    pub points: Vec<SizePoint>,
}

impl SizeSweep {
    /// The link and its settings in two lines, then one aligned row per size: rates with their
    /// share of the raw bandwidth, and TLP counts.
    pub fn to_text(&self, link: &LinkParams, overheads: Overheads) -> String {
        let mut text = format!(
            "{} x{} ({} GT/s, {}): {:.2} MB/s per direction after encoding (kernel: {} Mb/s)\n",
            link.gen,
            link.width,
            link.gen.gt_s(),
            link.gen.encoding().name(),
            self.raw_mbps,
            kernel_link_mbit(link.gen, link.width)
        );
        text.push_str(&format!(
            "MPS {} MRRS {} RCB {}, completions {}; {} addresses, {}; {}\n",
            link.mps,
            link.mrrs,
            link.rcb,
            match link.completion_size {
                CompletionSize::Mps => "up to MPS",
                CompletionSize::Rcb => "one per RCB block",
            },
            if link.format.addr64 {
                "64-bit"
            } else {
                "32-bit"
            },
            if link.format.ecrc { "ECRC" } else { "no ECRC" },
            match overheads {
                Overheads::Full => "DLLP and SKP overhead included",
                Overheads::Ideal => "ideal: no DLLPs or SKP",
            }
        ));
        text.push_str(&format!(
            "{:>10}  {:>11} {:>6}  {:>11} {:>6}  {:>8} {:>8} {:>8}\n",
            "size", "write MB/s", "eff%", "read MB/s", "eff%", "MWr", "MRd", "CplD"
        ));
        let percent = |mbps: f64| mbps / self.raw_mbps * 100.0;
        for p in &self.points {
            text.push_str(&format!(
                "{:>10}  {:>11.2} {:>6.1}  {:>11.2} {:>6.1}  {:>8} {:>8} {:>8}\n",
                p.size,
                p.write_mbps,
                percent(p.write_mbps),
                p.read_mbps,
                percent(p.read_mbps),
                p.write_tlps,
                p.read_request_tlps,
                p.completion_tlps
            ));
        }
        text
    }
}

/// Rates are reported to 0.01 MB/s: finer digits claim more precision than the model has.
const MBPS_DECIMALS: i32 = 2;

/// Sweeps `sizes` on `link` (validated first). Reads are link-limited: see
/// [`super::latency`] for the round-trip bound.
pub fn sweep(link: &LinkParams, sizes: &[u64], overheads: Overheads) -> Result<SizeSweep> {
    link.validate()?;
    let points = sizes
        .iter()
        .map(|&size| {
            let w = write(size, link);
            let r = read(size, link);
            SizePoint {
                size,
                write_mbps: round_to(w.throughput_mbps(link, overheads), MBPS_DECIMALS),
                read_mbps: round_to(r.throughput_mbps(link, overheads), MBPS_DECIMALS),
                write_tlps: w.mem_writes,
                read_request_tlps: r.mem_reads,
                completion_tlps: r.completions,
            }
        })
        .collect();
    Ok(SizeSweep {
        gen: link.gen.number(),
        width: link.width,
        mps: link.mps,
        mrrs: link.mrrs,
        rcb: link.rcb,
        raw_mbps: round_to(raw_mbps(link.gen, link.width), MBPS_DECIMALS),
        points,
    })
}

/// Parses `64,256,4K,1M`: positive byte counts, optional K/M/G suffix (1024-based, either case).
pub fn parse_sizes(list: &str) -> Result<Vec<u64>> {
    let bad = |item: &str| {
        Error::bad_input(format!(
            "--sizes: '{item}' is not a size: expected positive integers with an optional \
             K, M or G suffix (1024-based), comma-separated, e.g. 64,256,4K,1M"
        ))
    };
    list.split(',')
        .map(|item| {
            let item = item.trim();
            let (digits, unit) = match item.char_indices().last() {
                Some((i, 'k' | 'K')) => (&item[..i], 1u64 << 10),
                Some((i, 'm' | 'M')) => (&item[..i], 1 << 20),
                Some((i, 'g' | 'G')) => (&item[..i], 1 << 30),
                _ => (item, 1),
            };
            digits
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .and_then(|n| n.checked_mul(unit))
                .ok_or_else(|| bad(item))
        })
        .collect()
}

/// Parses the completion-size policy name used on the command line and in docs.
pub fn parse_completion_size(name: &str) -> Result<CompletionSize> {
    match name {
        "mps" => Ok(CompletionSize::Mps),
        "rcb" => Ok(CompletionSize::Rcb),
        _ => Err(Error::bad_input(format!(
            "--completion-size '{name}' is not valid: expected mps or rcb"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Generation;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(
            parse_sizes("64,256,4K,1M,2g").unwrap(),
            vec![64, 256, 4096, 1 << 20, 2 << 30]
        );
        for bad in ["", "0", "4KB", "-1", "1T", "K", "64,,128"] {
            let e = parse_sizes(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad}");
            assert!(e.message().starts_with("--sizes"), "{bad}: {e}");
        }
    }

    #[test]
    fn text_names_the_settings_and_gives_one_row_per_size() {
        let link = LinkParams::new(Generation::Gen3, 4);
        let s = sweep(&link, &[64, 4096], Overheads::Ideal).unwrap();
        let text = s.to_text(&link, Overheads::Ideal);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0].contains(": 3938.46 MB/s per direction after encoding"));
        assert!(
            lines[1].ends_with("; ideal: no DLLPs or SKP"),
            "{}",
            lines[1]
        );
        let row: Vec<&str> = lines[4].split_whitespace().collect();
        let p = &s.points[1];
        assert_eq!(row[0], "4096");
        assert_eq!(row[1], format!("{:.2}", p.write_mbps));
        assert_eq!(row[2], format!("{:.1}", p.write_mbps / 3938.46 * 100.0));
        assert_eq!(row[5], p.write_tlps.to_string());
        assert_eq!(lines[3].len(), lines[4].len(), "rows are aligned");
    }

    #[test]
    fn sweep_reports_counts_and_rounded_rates() {
        let link = LinkParams::new(Generation::Gen3, 4);
        let s = sweep(&link, &[4096, 257], Overheads::Full).unwrap();
        assert_eq!(s.raw_mbps, 3938.46);
        let p = &s.points[0];
        assert_eq!(
            (p.write_tlps, p.read_request_tlps, p.completion_tlps),
            (16, 8, 16)
        );
        assert!(p.write_mbps > 3400.0 && p.write_mbps < 3938.46);
        assert_eq!(s.points[1].write_tlps, 2);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["points"][0]["write_MBps"], p.write_mbps);
        assert_eq!(json["raw_MBps"], 3938.46);
    }

    #[test]
    fn sweep_rejects_invalid_links() {
        let link = LinkParams {
            mps: 100,
            ..LinkParams::new(Generation::Gen3, 4)
        };
        assert!(sweep(&link, &[64], Overheads::Full).is_err());
    }
}
