//! `pcielab bench`: measurements that need real devices. `bench p2p` copies between two NVMe
//! namespaces through a device's p2pmem (peer-to-peer DMA) and through host memory.

use clap::{Args as ClapArgs, Subcommand};
use pcielab::lab::p2pcopy::{self, CopyOptions};
use pcielab::pcie::Bdf;
use pcielab::report::json_text;
use pcielab::{Error, Result};

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub bench: Bench,
}

#[derive(Subcommand)]
pub enum Bench {
    /// Copy SRC to DST through p2pmem of a PCI device (P2PDMA) and through host memory.
    #[command(after_help = "Examples (inside a guest with a P2PDMA kernel, as root):
  pcielab bench p2p 0000:03:00.0 0000:04:00.0 --via-p2pmem 0000:03:00.0 --check
  pcielab bench p2p /dev/nvme0n1 /dev/nvme1n1 --via-p2pmem 0000:03:00.0 --size 16M --json

SRC and DST are block devices or NVMe controller addresses (their first namespace). The data on
DST is overwritten. A transfer the kernel refuses fails with EREMOTEIO (\"Remote I/O error\"):
that is reported with the failing step, and the command exits 1. JSON fields: docs/lab.md.")]
    P2p(P2pArgs),
}

#[derive(ClapArgs)]
pub struct P2pArgs {
    /// Source: block device or NVMe controller address
    pub src: String,
    /// Destination: block device or NVMe controller address (overwritten)
    pub dst: String,
    /// The PCI device whose p2pmem (e.g. an NVMe CMB) is the buffer
    #[arg(long)]
    pub via_p2pmem: Bdf,
    /// Bytes to copy (K/M/G suffixes, powers of two)
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    pub size: u64,
    /// Bytes per O_DIRECT request (multiple of 4096)
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    pub chunk: u64,
    /// Write a pattern to SRC first and verify DST after the p2p copy
    #[arg(long)]
    pub check: bool,
    /// Print JSON (shape in docs/lab.md)
    #[arg(long)]
    pub json: bool,
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let (digits, shift) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("'{s}' is not a size: expected e.g. 4096, 64K, 4M, 1G"))
}

pub fn run(args: Args) -> Result<()> {
    match args.bench {
        Bench::P2p(p2p) => run_p2p(p2p),
    }
}

fn run_p2p(args: P2pArgs) -> Result<()> {
    let root = std::path::PathBuf::from("/");
    let options = CopyOptions {
        src: p2pcopy::resolve_namespace(&root, &args.src)?,
        dst: p2pcopy::resolve_namespace(&root, &args.dst)?,
        p2pmem: args.via_p2pmem,
        size: args.size,
        chunk: args.chunk,
        check: args.check,
        root,
    };
    let report = p2pcopy::run(&options)?;
    if args.json {
        print!("{}", json_text(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    if !report.p2p.ok {
        return Err(Error::runtime(format!(
            "the p2p copy failed at the {} step: {}",
            report.p2p.failed_step.unwrap_or("?"),
            report.p2p.error.as_deref().unwrap_or("?")
        )));
    }
    if report.check == Some("mismatch") {
        return Err(Error::runtime("the data check found a mismatch"));
    }
    Ok(())
}
