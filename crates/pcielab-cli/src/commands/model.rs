//! `pcielab model`: link bandwidth and TLP counts versus transfer size for one generation and
//! width, as a table or JSON (shape in docs/model.md). Argument wiring only; the math is
//! `pcielab::model`.

use super::number_in;
use clap::Args as ClapArgs;
use pcielab::model::sweep::{parse_completion_size, parse_sizes, sweep, DEFAULT_SIZES};
use pcielab::model::transfer::{LinkParams, Overheads};
use pcielab::pcie::tlp::TlpFormat;
use pcielab::pcie::Generation;
use pcielab::report::json_text;
use pcielab::{Error, Result};

#[derive(ClapArgs)]
#[command(
    about = "Link bandwidth and TLP counts versus transfer size",
    long_about = "Models one PCIe link: raw rate after line encoding, then for each transfer size a \
device DMA write (Memory Writes upstream) and read (Memory Reads upstream, Completions downstream) \
with per-TLP header/ECRC/framing, Ack and UpdateFC DLLPs charged to the direction they travel, and \
SKP ordered sets. MB/s is 10^6 bytes per second. Read rates are link-limited (no round-trip bound).",
    after_help = "Examples:\n  pcielab model --gen 3 --width 4\n  pcielab model --gen 3 --width 1 --addr64 --ecrc --ideal --sizes 1M\n  pcielab model --gen 6 --width 16 --mps 512 --sizes 64,4K,1M --json\n  pcielab model --gen 4 --width 8 --completion-size rcb --sizes 256,4K"
)]
pub struct Args {
    /// PCIe generation, 1-7.
    #[arg(long, value_parser = number_in(1..=7u8))]
    gen: u8,
    /// Link width in lanes: 1, 2, 4, 8, 12, 16 or 32.
    #[arg(long, value_parser = number_in(1..=32u8))]
    width: u8,
    /// Max_Payload_Size in bytes (128-4096, power of two).
    #[arg(long, default_value_t = 256, value_parser = number_in(128..=4096u32))]
    mps: u32,
    /// Max_Read_Request_Size in bytes (128-4096, power of two).
    #[arg(long, default_value_t = 512, value_parser = number_in(128..=4096u32))]
    mrrs: u32,
    /// Read Completion Boundary in bytes (64 or 128).
    #[arg(long, default_value_t = 64, value_parser = number_in(64..=128u32))]
    rcb: u32,
    /// 64-bit addressing: 4 DW request headers instead of 3 DW.
    #[arg(long)]
    addr64: bool,
    /// End-to-end CRC: 4 more bytes on every TLP.
    #[arg(long)]
    ecrc: bool,
    /// Leave out DLLPs and SKP ordered sets (TLP overhead only).
    #[arg(long)]
    ideal: bool,
    /// How completers split read data: "mps" (fewest completions) or "rcb" (one per RCB block).
    #[arg(long, default_value = "mps")]
    completion_size: String,
    /// Transfer sizes, comma-separated, K/M/G suffixes are 1024-based [default: 64,128,256,512,4K,64K,1M,4M].
    #[arg(long)]
    sizes: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let gen = Generation::from_number(args.gen).ok_or_else(|| {
        Error::bad_input(format!(
            "--gen {} is not valid: expected 1, 2, 3, 4, 5, 6 or 7",
            args.gen
        ))
    })?;
    let link = LinkParams {
        mps: args.mps,
        mrrs: args.mrrs,
        rcb: args.rcb,
        format: TlpFormat {
            addr64: args.addr64,
            ecrc: args.ecrc,
            flit_ohc_dw: 0,
        },
        completion_size: parse_completion_size(&args.completion_size)?,
        ..LinkParams::new(gen, args.width)
    };
    let sizes = match &args.sizes {
        Some(list) => parse_sizes(list)?,
        None => DEFAULT_SIZES.to_vec(),
    };
    let overheads = if args.ideal {
        Overheads::Ideal
    } else {
        Overheads::Full
    };
    let report = sweep(&link, &sizes, overheads)?;
    if args.json {
        print!("{}", json_text(&report)?);
    } else {
        print!("{}", report.to_text(&link, overheads));
    }
    Ok(())
}
