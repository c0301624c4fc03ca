//! `pcielab bench`: measurements that need real devices. `bench p2p` copies between two NVMe
//! namespaces through a device's p2pmem (peer-to-peer DMA) and through host memory; `bench mmio`
//! measures CPU loads and stores to a BAR (predicted by the platform model on `sim:`); `bench
//! irq` predicts back-to-back interrupt delivery on `sim:`. Argument wiring only.

use clap::{Args as ClapArgs, Subcommand};
use pcielab::lab::mmio::{self, MmioOptions, Operation};
use pcielab::lab::p2pcopy::{self, CopyOptions};
use pcielab::machine::{Machine, MachineSelector};
use pcielab::model::platform::IrqKind;
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
    /// CPU load/store throughput to a BAR (the Rockchip guide's §5), or its prediction on sim:
    #[command(after_help = "Examples:
  pcielab bench mmio 0000:01:00.0 --bar 2 --op store --width 16 --seconds 2
  pcielab bench mmio 0000:01:00.0 --bar 2 --op load --json      # reads back the store pattern
  pcielab bench mmio 0000:01:00.0 --bar 0 --op load --force     # a BAR a driver owns
  pcielab bench mmio 0000:01:00.0 --bar 0 --machine sim:rk3588-ep --width 4

Maps /sys/bus/pci/devices/BDF/resourceN (resourceN_wc with --wc) as root; refuses I/O-port BARs and
BARs of a function bound to a driver unless --force. Stores write a pattern from each word's offset;
loads report how many words differ from it, so --op store then --op load is a read-back check.
--op memcpy reports memcpy into the BAR and out of it. On sim: the platform model ([platform.mmio],
docs/calibration.md) predicts the rates; nothing is mapped. JSON fields: docs/calibration.md.")]
    Mmio(MmioArgs),
    /// Back-to-back interrupt delivery (the Rockchip guide's §6 ELBI, §7 MSI), predicted on sim:
    #[command(after_help = "Examples:
  pcielab bench irq --machine sim:rk3588-ep --kind msi
  pcielab bench irq --machine sim:rk3588-ep --kind elbi --json

The interval is the slower of the trigger (an MSI is a 4-byte posted write; ELBI a config write by
the root complex) and the receiving CPU's interrupt entry and handler ([platform.interrupts]).
Measuring it needs the Rockchip PCIe performance guide's endpoint-mode test drivers, which a host does not have: only sim: works.")]
    Irq(IrqArgs),
}

#[derive(ClapArgs)]
pub struct MmioArgs {
    /// The PCI function, e.g. 0000:01:00.0
    pub bdf: Bdf,
    /// Which BAR (0-5)
    #[arg(long)]
    pub bar: u8,
    /// Bytes per CPU access: 4, 8, 16 or 64
    #[arg(long, default_value_t = 4)]
    pub width: u32,
    /// store, load or memcpy
    #[arg(long, default_value = "store")]
    pub op: String,
    /// Threads, each on its own slice of the region
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// How long each pass runs
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Where the region starts in the BAR (a multiple of 4096; K/M/G suffixes)
    #[arg(long, default_value = "0", value_parser = parse_offset)]
    pub offset: u64,
    /// Bytes of the BAR used from --offset (K/M suffixes)
    #[arg(long, default_value = "64K", value_parser = parse_size)]
    pub bytes: u64,
    /// Map resourceN_wc (write-combining; prefetchable BARs)
    #[arg(long)]
    pub wc: bool,
    /// Access a BAR even though a driver owns the function
    #[arg(long)]
    pub force: bool,
    /// host (default) or sim:PRESET / sim:FILE.toml for a prediction
    #[arg(long, default_value = "host")]
    pub machine: String,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(ClapArgs)]
pub struct IrqArgs {
    /// msi or elbi
    #[arg(long, default_value = "msi")]
    pub kind: String,
    /// A simulated machine: sim:PRESET or sim:FILE.toml
    #[arg(long)]
    pub machine: String,
    /// The endpoint whose link carries the interrupt [default: the first endpoint with a link]
    #[arg(long)]
    pub device: Option<Bdf>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
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

/// Like `parse_size`, but 0 is a valid offset.
fn parse_offset(s: &str) -> std::result::Result<u64, String> {
    if s == "0" {
        Ok(0)
    } else {
        parse_size(s)
    }
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
        Bench::Mmio(args) => run_mmio(args),
        Bench::Irq(args) => run_irq(args),
    }
}

fn run_mmio(args: MmioArgs) -> Result<()> {
    let options = MmioOptions {
        bdf: args.bdf,
        bar: args.bar,
        width: args.width,
        op: Operation::parse(&args.op)?,
        threads: args.threads,
        seconds: args.seconds,
        offset: args.offset,
        bytes: args.bytes,
        write_combining: args.wc,
        force: args.force,
        root: std::path::PathBuf::from("/"),
    };
    let machine = args.machine.parse::<Machine>()?;
    let report = match machine.selector() {
        MachineSelector::Host { root } => mmio::measure(&MmioOptions {
            root: root.clone(),
            ..options
        })?,
        _ => {
            let machine = machine.simulated_pcie()?;
            endpoint(&machine.topology, args.bdf, &machine.name, "bench mmio")?;
            mmio::predict(&options, &machine.platform, &machine.link_params(args.bdf))?
        }
    };
    if args.json {
        print!("{}", json_text("bench-mmio", &report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

fn run_irq(args: IrqArgs) -> Result<()> {
    let kind = IrqKind::parse(&args.kind)?;
    let machine = args.machine.parse::<Machine>()?.simulated_pcie()?;
    let device = match args.device {
        Some(bdf) => endpoint(&machine.topology, bdf, &machine.name, "bench irq --device")?,
        None => machine
            .topology
            .functions()
            .iter()
            .find(|f| f.kind == pcielab::topology::Kind::Endpoint && f.link.is_some())
            .map(|f| f.bdf)
            .ok_or_else(|| {
                Error::bad_input(format!("{}: no endpoint with a link", machine.name))
            })?,
    };
    let prediction = machine
        .platform
        .irq_prediction(kind, &machine.link_params(device));
    if args.json {
        print!("{}", json_text("bench-irq", &prediction)?);
    } else {
        println!(
            "{} on {device}: one interrupt every {:.2} us ({:.0} per second), from [platform.interrupts] ({})",
            kind.name(),
            prediction.interval_ns / 1000.0,
            prediction.per_second,
            prediction.source
        );
    }
    Ok(())
}

/// `bdf` when it names an endpoint of `topology`: bridges and ports have no BAR to load from and
/// raise no device interrupts, so benchmarking one is bad input naming what it is.
fn endpoint(
    topology: &pcielab::topology::Topology,
    bdf: pcielab::pcie::Bdf,
    machine: &str,
    what: &str,
) -> Result<pcielab::pcie::Bdf> {
    use pcielab::topology::Kind;
    let f = topology
        .get(bdf)
        .ok_or_else(|| Error::bad_input(format!("{what} {bdf}: no such function on {machine}")))?;
    if matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint) {
        Ok(bdf)
    } else {
        Err(Error::bad_input(format!(
            "{what} {bdf}: is a {} on {machine}, not an endpoint: name a device (`pcielab topo` lists them)",
            f.kind.name().replace('_', " ")
        )))
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
        print!("{}", json_text("bench-p2p", &report)?);
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
