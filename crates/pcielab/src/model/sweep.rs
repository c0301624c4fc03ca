//! Link bandwidth versus transfer size: the report behind `pcielab model`. For each size it runs
//! one aligned device write and one aligned device read through [`super::transfer`] and records
//! link-limited throughput and TLP counts, and, given a platform model
//! ([`super::platform`]), the platform's predicted DMA rates beside them. Also parses the
//! `--sizes` list (K/M/G = 1024-based).
//! The JSON shape is documented in docs/model.md.

use serde::{Deserialize, Serialize};

use super::platform::{DmaDirection, PlatformModel};
use super::transfer::{achievable_mbps, read, write, CompletionSize, LinkParams, Overheads};
use crate::error::{Error, Result};
use crate::pcie::link::{kernel_link_mbit, raw_mbps};
use crate::text::round_to;

/// Sizes `pcielab model` sweeps when none are given: the seed's DMA test sizes and a few between.
pub const DEFAULT_SIZES: [u64; 8] = [64, 128, 256, 512, 4096, 65536, 1 << 20, 4 << 20];

/// One transfer size's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct SizePoint {
    pub(crate) size: u64,
    #[serde(rename = "write_MBps")]
    pub(crate) write_mbps: f64,
    #[serde(rename = "read_MBps")]
    pub(crate) read_mbps: f64,
    pub(crate) write_tlps: u64,
    pub(crate) read_request_tlps: u64,
    pub(crate) completion_tlps: u64,
    /// Platform prediction of one-at-a-time device DMA writes (`--platform` only).
    #[serde(
        rename = "predicted_write_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) predicted_write_mbps: Option<f64>,
    /// Platform prediction of one-at-a-time device DMA reads (`--platform` only).
    #[serde(
        rename = "predicted_read_MBps",
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) predicted_read_mbps: Option<f64>,
    /// Issue-to-last-completion time of one read of this size, where the platform's read
    /// latency was fitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_read_latency_ns: Option<f64>,
    /// One standard deviation of `predicted_read_latency_ns` from the fit's uncertainties.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_read_latency_sigma_ns: Option<f64>,
    /// `--platform` only: whether the fit saw this size's writes on this link (the value then
    /// reproduces a measurement; it predicts nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_write_in_sample: Option<bool>,
    /// The same for reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_read_in_sample: Option<bool>,
    /// `--io-latency-us` only: reads of this size at queue depth 1 on the platform's drive as a
    /// request–response (`model::io`), with the ASPM exits and interrupt placement given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) predicted_qd1_read_iops: Option<f64>,
}

/// The whole sweep for one link; serialises to the documented `pcielab model --json` shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizeSweep {
    pub(crate) gen: u8,
    pub(crate) width: u8,
    pub(crate) mps: u32,
    pub(crate) mrrs: u32,
    pub(crate) rcb: u32,
    /// Line rate: MB/s per direction after line encoding only.
    #[serde(rename = "line_rate_MBps")]
    pub(crate) line_rate_mbps: f64,
    /// Link-achievable payload MB/s: MPS-sized writes with every overhead
    /// ([`super::transfer::achievable_mbps`]); the "% of link" reference.
    #[serde(rename = "achievable_MBps")]
    pub(crate) achievable_mbps: f64,
    pub(crate) points: Vec<SizePoint>,
    /// What the platform model was fitted on (`--platform` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) platform_fitted_on: Option<String>,
    /// `--platform` only: set when no measurement the platform was fitted on ran on this link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) platform_warning: Option<String>,
}

impl SizeSweep {
    /// The link and its settings in two lines, then one aligned row per size: rates with their
    /// share of the raw bandwidth, and TLP counts.
    pub fn to_text(&self, link: &LinkParams, overheads: Overheads) -> String {
        let mut text = format!(
            "{} x{} ({} GT/s, {}): line rate {:.2} MB/s per direction after encoding (kernel: {} Mb/s); \
             link-achievable payload {:.2} MB/s\n",
            link.gen,
            link.width,
            link.gen.gt_s(),
            link.gen.encoding().name(),
            self.line_rate_mbps,
            kernel_link_mbit(link.gen, link.width),
            self.achievable_mbps
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
        if let Some(on) = &self.platform_fitted_on {
            text.push_str(&format!(
                "platform: fitted on {on}; \"in\" after a value: the fit saw that size on this \
                 link (in-sample, it reproduces a measurement); unmarked: predicted\n"
            ));
        }
        if let Some(warning) = &self.platform_warning {
            text.push_str(&format!("warning: {warning}\n"));
        }
        text.push_str(&format!(
            "{:>10}  {:>11} {:>6}  {:>11} {:>6}  {:>8} {:>8} {:>8}",
            "size", "write MB/s", "%ach", "read MB/s", "%ach", "MWr", "MRd", "CplD"
        ));
        if self.platform_fitted_on.is_some() {
            text.push_str(&format!(
                "  {:>14} {:>14}",
                "platform write", "platform read"
            ));
        }
        let latency = self
            .points
            .iter()
            .any(|p| p.predicted_read_latency_ns.is_some());
        if latency {
            text.push_str(&format!("  {:>22}", "read ns ± 1 sigma"));
        }
        let qd1 = self
            .points
            .iter()
            .any(|p| p.predicted_qd1_read_iops.is_some());
        if qd1 {
            text.push_str(&format!("  {:>14}", "QD1 read IOPS"));
        }
        text.push('\n');
        let percent = |mbps: f64| mbps / self.achievable_mbps * 100.0;
        for p in &self.points {
            text.push_str(&format!(
                "{:>10}  {:>11.2} {:>6.1}  {:>11.2} {:>6.1}  {:>8} {:>8} {:>8}",
                p.size,
                p.write_mbps,
                percent(p.write_mbps),
                p.read_mbps,
                percent(p.read_mbps),
                p.write_tlps,
                p.read_request_tlps,
                p.completion_tlps
            ));
            if let (Some(w), Some(r)) = (p.predicted_write_mbps, p.predicted_read_mbps) {
                let mark = |in_sample: Option<bool>| {
                    if in_sample == Some(true) {
                        " in"
                    } else {
                        "   "
                    }
                };
                text.push_str(&format!(
                    "  {w:>11.2}{} {r:>11.2}{}",
                    mark(p.predicted_write_in_sample),
                    mark(p.predicted_read_in_sample)
                ));
            }
            if latency {
                text.push_str(&format!("  {:>22}", latency_text(p)));
            }
            if let Some(iops) = p.predicted_qd1_read_iops.filter(|_| qd1) {
                text.push_str(&format!("  {iops:>14.1}"));
            }
            text.push('\n');
        }
        text
    }
}

/// A fitted read latency with its 1-sigma uncertainty where the fit gave one (`8123.4 ± 56.7`):
/// without the spread a reader cannot tell a latency the data pinned from one it barely bound.
pub(crate) fn latency_text(p: &SizePoint) -> String {
    match (
        p.predicted_read_latency_ns,
        p.predicted_read_latency_sigma_ns,
    ) {
        (Some(ns), Some(sigma)) => format!("{ns:.1} ± {sigma:.1}"),
        (Some(ns), None) => format!("{ns:.1}"),
        (None, _) => "-".to_string(),
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
                predicted_write_mbps: None,
                predicted_read_mbps: None,
                predicted_read_latency_ns: None,
                predicted_read_latency_sigma_ns: None,
                predicted_write_in_sample: None,
                predicted_read_in_sample: None,
                predicted_qd1_read_iops: None,
            }
        })
        .collect();
    Ok(SizeSweep {
        gen: link.gen.number(),
        width: link.width,
        mps: link.mps,
        mrrs: link.mrrs,
        rcb: link.rcb,
        line_rate_mbps: round_to(raw_mbps(link.gen, link.width), MBPS_DECIMALS),
        achievable_mbps: round_to(achievable_mbps(link), MBPS_DECIMALS),
        points,
        platform_fitted_on: None,
        platform_warning: None,
    })
}

impl SizeSweep {
    /// Adds the platform model's predictions to every point, beside the link-only figures.
    /// The read latency is only given where the model's read latency was fitted.
    pub fn add_platform(&mut self, model: &PlatformModel, link: &LinkParams) {
        let latency_fitted = model.is_fitted(super::platform::P::ReadLatencyNs);
        for p in &mut self.points {
            p.predicted_write_mbps = Some(round_to(
                model.dma_mbps(DmaDirection::Write, p.size, link),
                MBPS_DECIMALS,
            ));
            p.predicted_read_mbps = Some(round_to(
                model.dma_mbps(DmaDirection::Read, p.size, link),
                MBPS_DECIMALS,
            ));
            p.predicted_read_latency_ns =
                latency_fitted.then(|| round_to(model.read_latency_ns(p.size, link), 1));
            p.predicted_read_latency_sigma_ns = p
                .predicted_read_latency_ns
                .and(model.read_latency_sigma_ns(p.size, link))
                .map(|s| round_to(s, 1));
            p.predicted_write_in_sample = Some(model.in_sample(DmaDirection::Write, p.size, link));
            p.predicted_read_in_sample = Some(model.in_sample(DmaDirection::Read, p.size, link));
        }
        self.platform_fitted_on = Some(model.fitted_on.clone());
        self.platform_warning = model.link_warning(link);
    }
}

impl SizeSweep {
    /// Adds, per size, reads at queue depth 1 on `model`'s drive after `access_ns` of device
    /// latency, with the ASPM exits of `power` and `interrupt_ns` per completion
    /// ([`super::io::RequestResponse`], the function the simulator times fio with).
    pub fn add_request_response(
        &mut self,
        model: &PlatformModel,
        access_ns: f64,
        power: &super::io::LinkPower,
        interrupt_ns: f64,
    ) {
        for p in &mut self.points {
            let io = model.drive_request(true, p.size, access_ns, 1.0);
            p.predicted_qd1_read_iops = Some(round_to(io.iops(power, interrupt_ns), 1));
        }
    }
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
            // Digits alone or with a K/M/G suffix: other spellings fio accepts would read
            // oddly in a list of TLP-scale sizes.
            if item.ends_with(['b', 'B', 't', 'T']) {
                return Err(bad(item));
            }
            let size = crate::units::parse_size(item)
                .filter(|&n| n > 0)
                .ok_or_else(|| bad(item))?;
            crate::model::transfer::transfer_size("--sizes", size)
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
        assert!(lines[0].contains(": line rate 3938.46 MB/s per direction after encoding"));
        assert!(
            lines[0].ends_with("link-achievable payload 3643.35 MB/s"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with("; ideal: no DLLPs or SKP"),
            "{}",
            lines[1]
        );
        let row: Vec<&str> = lines[4].split_whitespace().collect();
        let p = &s.points[1];
        assert_eq!(row[0], "4096");
        assert_eq!(row[1], format!("{:.2}", p.write_mbps));
        assert_eq!(
            row[2],
            format!("{:.1}", p.write_mbps / s.achievable_mbps * 100.0)
        );
        assert_eq!(row[5], p.write_tlps.to_string());
        assert_eq!(lines[3].len(), lines[4].len(), "rows are aligned");
    }

    #[test]
    fn a_fitted_read_latency_is_printed_with_its_sigma() {
        let link = LinkParams::new(Generation::Gen3, 4);
        let mut s = sweep(&link, &[64, 4096], Overheads::Full).unwrap();
        s.platform_fitted_on = Some("a table".into());
        for (p, (w, r, ns, sigma)) in s
            .points
            .iter_mut()
            .zip([(10.0, 20.0, 812.3, Some(45.6)), (30.0, 40.0, 9000.0, None)])
        {
            p.predicted_write_mbps = Some(w);
            p.predicted_read_mbps = Some(r);
            p.predicted_read_latency_ns = Some(ns);
            p.predicted_read_latency_sigma_ns = sigma;
        }
        let text = s.to_text(&link, Overheads::Full);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[3].ends_with("read ns ± 1 sigma"), "{}", lines[3]);
        assert!(lines[4].ends_with("  812.3 ± 45.6"), "{}", lines[4]);
        // No sigma from the fit: the value alone, never a made-up spread.
        assert!(lines[5].ends_with("  9000.0"), "{}", lines[5]);
        assert_eq!(lines[3].chars().count(), lines[4].chars().count(), "{text}");
    }

    #[test]
    fn sweep_reports_counts_and_rounded_rates() {
        let link = LinkParams::new(Generation::Gen3, 4);
        let s = sweep(&link, &[4096, 257], Overheads::Full).unwrap();
        assert_eq!(s.line_rate_mbps, 3938.46);
        let p = &s.points[0];
        assert_eq!(
            (p.write_tlps, p.read_request_tlps, p.completion_tlps),
            (16, 8, 16)
        );
        assert!(p.write_mbps > 3400.0 && p.write_mbps < 3938.46);
        assert_eq!(s.points[1].write_tlps, 2);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["points"][0]["write_MBps"], p.write_mbps);
        assert_eq!(json["line_rate_MBps"], 3938.46);
        assert!(json["points"][0].get("predicted_write_MBps").is_none());
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
