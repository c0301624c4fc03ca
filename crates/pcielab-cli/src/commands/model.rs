//! `pcielab model`: link bandwidth and TLP counts versus transfer size for one generation and
//! width, with the platform model's predictions beside them when given one, as a table or JSON
//! (shape in docs/model.md). Also the link arguments `fit` shares. Argument wiring only; the
//! math is `pcielab::model`.

use super::number_in;
use super::output::{Document, Form, JsonForm, Output, Terminal};
use clap::Args as ClapArgs;
use pcielab::machine::read_platform_file;
use pcielab::model::platform::{PlatformModel, P};
use pcielab::model::transfer::{LinkParams, Overheads};
use pcielab::model::{parse_completion_size, parse_sizes, sweep, SizeSweep, DEFAULT_SIZES};
use pcielab::model::{LinkPower, L0S_ENTRY_NS, L1_ENTRY_NS};
use pcielab::pcie::Generation;
use pcielab::pcie::TlpFormat;
use pcielab::plot;
use pcielab::topology::Aspm;
use pcielab::{Error, Result};

/// The link a model or a fit is for.
#[derive(ClapArgs)]
pub struct LinkArgs {
    /// PCIe generation, 1-7.
    #[arg(long, value_parser = number_in(1..=7u8))]
    gen: u8,
    /// Link width in lanes: 1, 2, 4, 8, 12, 16 or 32.
    #[arg(long, value_parser = number_in(1..=32u8))]
    width: u8,
    /// Max_Payload_Size in bytes (128-4096, power of two).
    #[arg(long, default_value_t = 256, value_parser = number_in(0..=u32::MAX))]
    mps: u32,
    /// Max_Read_Request_Size in bytes (128-4096, power of two).
    #[arg(long, default_value_t = 512, value_parser = number_in(0..=u32::MAX))]
    mrrs: u32,
    /// Read Completion Boundary in bytes (64 or 128).
    #[arg(long, default_value_t = 64, value_parser = number_in(0..=u32::MAX))]
    rcb: u32,
    /// 64-bit addressing: 4 DW request headers instead of 3 DW.
    #[arg(long)]
    addr64: bool,
    /// End-to-end CRC: 4 more bytes on every TLP.
    #[arg(long)]
    ecrc: bool,
    /// How completers split read data: "mps" (fewest completions) or "rcb" (one per RCB block).
    #[arg(long, default_value = "mps")]
    completion_size: String,
}

impl LinkArgs {
    /// The validated link.
    pub fn params(&self) -> Result<LinkParams> {
        let gen = Generation::from_number(self.gen).ok_or_else(|| {
            Error::bad_input(format!(
                "--gen {} is not valid: expected 1, 2, 3, 4, 5, 6 or 7",
                self.gen
            ))
        })?;
        let link = LinkParams {
            mps: self.mps,
            mrrs: self.mrrs,
            rcb: self.rcb,
            format: TlpFormat {
                addr64: self.addr64,
                ecrc: self.ecrc,
                flit_ohc_dw: 0,
            },
            completion_size: parse_completion_size(&self.completion_size)?,
            ..LinkParams::new(gen, self.width)
        };
        link.validate()?;
        Ok(link)
    }
}

#[derive(ClapArgs)]
#[command(
    about = "Link bandwidth and TLP counts versus transfer size",
    long_about = "Models one PCIe link: line rate after encoding, the link-achievable payload rate \
(MPS-sized writes with every overhead), then for each transfer size a device DMA write (Memory \
Writes upstream) and read (Memory Reads upstream, Completions downstream) with per-TLP \
header/ECRC/framing, Ack and UpdateFC DLLPs charged to the direction they travel, and SKP ordered \
sets. MB/s is 10^6 bytes per second. Link read rates have no round-trip bound. With --platform \
SPEC.toml (a [platform] table, e.g. from `pcielab fit --out`) every size also gets the platform's \
predicted one-at-a-time DMA write and read rates.",
    after_help = "Examples:\n  pcielab model --gen 3 --width 4\n  pcielab model --gen 3 --width 4 --sizes 64,128,256,512,1K,4K,64K,1M --svg gen3x4.svg\n  pcielab model --gen 3 --width 1 --addr64 --ecrc --ideal --sizes 1M\n  pcielab model --gen 6 --width 16 --mps 512 --sizes 64,4K,1M --json\n  pcielab model --gen 4 --width 8 --completion-size rcb --sizes 256,4K\n  pcielab model --gen 2 --width 1 --platform presets/rk3588-ep.toml --sizes 64,4K,1M --json"
)]
pub struct Args {
    #[command(flatten)]
    link: LinkArgs,
    /// Leave out DLLPs and SKP ordered sets (TLP overhead only).
    #[arg(long)]
    ideal: bool,
    /// Transfer sizes, comma-separated, K/M/G suffixes are 1024-based [default: 64,128,256,512,4K,64K,1M,4M].
    #[arg(long)]
    sizes: Option<String>,
    /// A spec or fragment with a [platform] table: adds predicted_write_MBps, predicted_read_MBps.
    #[arg(long)]
    platform: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw MB/s and efficiency vs size (with the platform prediction) as an SVG here.
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<std::path::PathBuf>,
    /// A device's access latency in µs: adds each size's reads at queue depth 1 on the
    /// platform's drive as a request–response (predicted_qd1_read_iops).
    #[arg(long, value_name = "US")]
    io_latency_us: Option<f64>,
    /// With --io-latency-us: ASPM states enabled on the path: none, l0s, l1 or l0s+l1.
    #[arg(long, default_value = "none")]
    aspm: String,
    /// With --aspm: the LnkCap exit latencies in ns as L0S,L1 (the slower end's upper bounds,
    /// e.g. 512,16000).
    #[arg(long, value_name = "L0S,L1")]
    exit_latency_ns: Option<String>,
    /// With --aspm: idle ns before L0s entry (the specification's 7 µs at most).
    #[arg(long, default_value_t = L0S_ENTRY_NS)]
    l0s_entry_ns: f64,
    /// With --aspm: idle ns before L1 entry.
    #[arg(long, default_value_t = L1_ENTRY_NS)]
    l1_entry_ns: f64,
    /// With --io-latency-us: the device's interrupts are taken on another NUMA node, costing
    /// [platform] interrupts.cross_node_ns per completion.
    #[arg(long)]
    irq_far_node: bool,
}

/// The request–response options as the model's link power and interrupt cost, or bad input
/// naming the flag.
fn request_response(args: &Args, model: &PlatformModel) -> Result<Option<(f64, LinkPower, f64)>> {
    let Some(us) = args.io_latency_us else {
        if args.aspm != "none" || args.exit_latency_ns.is_some() || args.irq_far_node {
            return Err(Error::bad_input(
                "--aspm, --exit-latency-ns and --irq-far-node describe a request–response I/O: give --io-latency-us too",
            ));
        }
        return Ok(None);
    };
    if !(us.is_finite() && us >= 0.0) {
        return Err(Error::bad_input(format!(
            "--io-latency-us {us}: expected a latency of 0 µs or more"
        )));
    }
    let Some(Aspm { l0s, l1 }) = Aspm::parse(&args.aspm) else {
        return Err(Error::bad_input(format!(
            "--aspm {}: expected {} or {}",
            args.aspm,
            Aspm::SPELLINGS[..3].join(", "),
            Aspm::SPELLINGS[3]
        )));
    };
    let exits = match (&args.exit_latency_ns, l0s || l1) {
        (None, false) => (0.0, 0.0),
        (Some(text), true) => {
            let parsed: Vec<f64> = text
                .split(',')
                .filter_map(|n| n.trim().parse().ok())
                .filter(|n: &f64| n.is_finite() && *n >= 0.0)
                .collect();
            match parsed.as_slice() {
                [a, b] if text.split(',').count() == 2 => (*a, *b),
                _ => {
                    return Err(Error::bad_input(format!(
                        "--exit-latency-ns {text}: expected two latencies in ns, L0S,L1 (e.g. 512,16000)"
                    )))
                }
            }
        }
        (None, true) => {
            return Err(Error::bad_input(format!(
                "--aspm {}: give the exit latencies with --exit-latency-ns L0S,L1",
                args.aspm
            )))
        }
        (Some(_), false) => {
            return Err(Error::bad_input(
                "--exit-latency-ns needs --aspm l0s, l1 or l0s+l1",
            ))
        }
    };
    for (flag, ns) in [
        ("--l0s-entry-ns", args.l0s_entry_ns),
        ("--l1-entry-ns", args.l1_entry_ns),
    ] {
        if !(ns.is_finite() && ns >= 0.0) {
            return Err(Error::bad_input(format!(
                "{flag} {ns}: expected an idle time of 0 ns or more"
            )));
        }
    }
    let power = LinkPower {
        l0s_exit_ns: l0s.then_some(exits.0),
        l1_exit_ns: l1.then_some(exits.1),
        l0s_entry_ns: args.l0s_entry_ns,
        l1_entry_ns: args.l1_entry_ns,
    };
    let irq = if args.irq_far_node {
        model.get(P::CrossNodeIrqNs)
    } else {
        0.0
    };
    Ok(Some((us * 1e3, power, irq)))
}

pub fn run(args: Args) -> Result<Output> {
    let link = args.link.params()?;
    let sizes = match &args.sizes {
        Some(list) => parse_sizes(list)?,
        None => DEFAULT_SIZES.to_vec(),
    };
    let overheads = if args.ideal {
        Overheads::Ideal
    } else {
        Overheads::Full
    };
    let mut report = sweep(&link, &sizes, overheads)?;
    let platform = match &args.platform {
        Some(file) => Some(read_platform_file(file)?),
        None => None,
    };
    if let Some(model) = &platform {
        report.add_platform(model, &link);
    }
    let model = platform.unwrap_or_default();
    if let Some((access_ns, power, irq)) = request_response(&args, &model)? {
        report.add_request_response(&model, access_ns, &power, irq);
    }
    let modelled = Modelled {
        report,
        link,
        overheads,
    };
    Ok(Output::new(modelled, Form::json_if(args.json)).with_svg(args.svg))
}

/// The sweep with the link and overheads its table names.
struct Modelled {
    report: SizeSweep,
    link: LinkParams,
    overheads: Overheads,
}

impl Document for Modelled {
    fn kind(&self) -> &'static str {
        "model"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.report
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.report.to_text(&self.link, self.overheads))
    }

    fn svg(&self) -> Result<Option<String>> {
        plot::svg(plot::Picture::Model(&self.report)).map(Some)
    }
}
