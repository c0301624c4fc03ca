//! `pcielab bench`: measurements that need real devices. `bench p2p` copies between two NVMe
//! namespaces through a device's p2pmem (peer-to-peer DMA) and through host memory; `bench mmio`
//! measures CPU loads and stores to a BAR (predicted by the platform model on `sim:`); `bench
//! irq` predicts back-to-back interrupt delivery on `sim:`. Argument wiring only.

use crate::machine_arg::MachineArg;
use clap::{Args as ClapArgs, Subcommand};

use super::number_in;
use super::output::{Document, Form, JsonForm, Output, Terminal};
use pcielab::input::positive_size_arg;
use pcielab::lab::{p2p_copy, resolve_namespace, CopyOptions, CopyReport};
use pcielab::machine::{MmioOperation, MmioOptions, MmioReport};
use pcielab::model::platform::{IrqKind, IrqPrediction};
use pcielab::observe::cost;
use pcielab::pcie::Bdf;
use pcielab::{Error, Result};
use std::path::PathBuf;

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
    /// What watching a big host costs: exporter and top on a generated server's sysfs, side by
    /// side with prometheus-node-exporter and procps top
    #[command(after_help = "Examples:
  pcielab bench observe                                 4096 functions, 5 rounds of 20 scrapes
  pcielab bench observe --functions 8192 --json
  pcielab bench observe --keep ./server-4096            keep the export (then: pcielab topo
                                                        --machine snapshot:./server-4096)

Generates a server (2 domains, 16 Gen5 root ports, switches, 96 NVMe drives, 32 dual-port NICs,
the rest SR-IOV VFs), exports it as sysfs and starts `pcielab exporter --machine snapshot:DIR`
(the sysfs path a host reads) and prometheus-node-exporter on loopback ports, scraped alternately.
CPU per scrape comes from the on-CPU nanoseconds of each process's threads
(/proc/PID/task/*/schedstat) over a round's scrapes, memory from /proc/PID/status (VmRSS, VmHWM).
top's CPU per refresh: `top -b -d 0.1` runs with its output piped, its frames counted by their
header lines, and the same schedstat nanoseconds read while it waits after its first frame and
again 20 frames later, so start-up (seconds on a big host) and exit never enter; the same for
`pcielab top` and procps top. pcielab top reads link health at most about once a second, so
about one in ten of these refreshes reads it (docs/performance.md also gives the cost at the
default -d 1, where every refresh does). Figures are the median of the rounds with their range (min-max); a
round that measured no CPU is refused rather than printed. The ratios are pcielab's median over
the other tool's. JSON fields: docs/performance.md.")]
    Observe(ObserveArgs),
}

#[derive(ClapArgs)]
pub struct ObserveArgs {
    /// Functions in the generated server (FIXED to MAX: 322 to 16578)
    #[arg(long, default_value_t = 4096)]
    pub functions: usize,
    /// Scrapes of each exporter per round
    #[arg(long, default_value_t = 20, value_parser = number_in(1..=10_000u32))]
    pub scrapes: u32,
    /// Rounds (the figures are their median and range)
    #[arg(long, default_value_t = 5, value_parser = number_in(1..=100u32))]
    pub rounds: u32,
    /// The node exporter to compare with [default: /usr/bin/prometheus-node-exporter, or
    /// /usr/local/bin/node_exporter, when present]
    #[arg(long, value_name = "PATH")]
    pub node_exporter: Option<PathBuf>,
    /// Write the export into DIR (new or empty) and keep it
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
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
    #[arg(long, default_value = "64K", value_parser = positive_size_arg)]
    pub bytes: u64,
    /// Map resourceN_wc (write-combining; prefetchable BARs)
    #[arg(long)]
    pub wc: bool,
    /// Access a BAR even though a driver owns the function
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub machine: MachineArg,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}

#[derive(ClapArgs)]
pub struct IrqArgs {
    /// msi or elbi
    #[arg(long, default_value = "msi")]
    pub kind: String,
    #[command(flatten)]
    pub machine: MachineArg,
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
    #[arg(long, default_value = "4M", value_parser = positive_size_arg)]
    pub size: u64,
    /// Bytes per O_DIRECT request (multiple of 4096)
    #[arg(long, default_value = "64K", value_parser = positive_size_arg)]
    pub chunk: u64,
    /// Write a pattern to SRC first and verify DST after the p2p copy
    #[arg(long)]
    pub check: bool,
    /// Print JSON (shape in docs/lab.md)
    #[arg(long)]
    pub json: bool,
}

/// Like [`positive_size_arg`], but 0 is a valid offset.
fn parse_offset(s: &str) -> std::result::Result<u64, String> {
    if s == "0" {
        Ok(0)
    } else {
        positive_size_arg(s)
    }
}

pub fn run(args: Args) -> Result<Output> {
    match args.bench {
        Bench::P2p(p2p) => run_p2p(p2p),
        Bench::Mmio(args) => run_mmio(args),
        Bench::Irq(args) => run_irq(args),
        Bench::Observe(args) => run_observe(args),
    }
}

fn run_mmio(args: MmioArgs) -> Result<Output> {
    let options = MmioOptions {
        bdf: args.bdf,
        bar: args.bar,
        width: args.width,
        op: MmioOperation::parse(&args.op)?,
        threads: args.threads,
        seconds: args.seconds,
        offset: args.offset,
        bytes: args.bytes,
        write_combining: args.wc,
        force: args.force,
    };
    let report = args.machine.open()?.mmio(options)?;
    Ok(Output::new(report, Form::json_if(args.json)))
}

/// `bench mmio`: the rates measured (or predicted).
impl Document for MmioReport {
    fn kind(&self) -> &'static str {
        "bench-mmio"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.to_text())
    }
}

fn run_irq(args: IrqArgs) -> Result<Output> {
    let kind = IrqKind::parse(&args.kind)?;
    let model = args
        .machine
        .open_required("bench irq predicts on a simulated machine (sim:PRESET or sim:FILE.toml)")?
        .endpoint_model(args.device, "bench irq --device")?;
    let prediction = model.platform.irq_prediction(kind, &model.link);
    let predicted = IrqPredicted {
        kind,
        device: model.device,
        prediction,
    };
    Ok(Output::new(predicted, Form::json_if(args.json)))
}

/// `bench irq`: the predicted interrupt interval for one kind on one device.
struct IrqPredicted {
    kind: IrqKind,
    device: Bdf,
    prediction: IrqPrediction,
}

impl Document for IrqPredicted {
    fn kind(&self) -> &'static str {
        "bench-irq"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.prediction
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&format!(
            "{} on {}: one interrupt every {:.2} us ({:.0} per second), from [platform.interrupts] ({})\n",
            self.kind.name(),
            self.device,
            self.prediction.interval_ns / 1000.0,
            self.prediction.per_second,
            self.prediction.source
        ))
    }
}

fn run_p2p(args: P2pArgs) -> Result<Output> {
    let root = std::path::PathBuf::from("/");
    let options = CopyOptions {
        src: resolve_namespace(&root, &args.src)?,
        dst: resolve_namespace(&root, &args.dst)?,
        p2pmem: args.via_p2pmem,
        size: args.size,
        chunk: args.chunk,
        check: args.check,
        root,
    };
    let report = p2p_copy(&options)?;
    Ok(Output::new(report, Form::json_if(args.json)))
}

/// `bench p2p`: the copies and their rates; a failed copy or a data mismatch fails the command.
impl Document for CopyReport {
    fn kind(&self) -> &'static str {
        "bench-p2p"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.to_text())
    }

    fn end(&self) -> Result<i32> {
        if !self.p2p.ok {
            return Err(Error::runtime(format!(
                "the p2p copy failed at the {} step: {}",
                self.p2p.failed_step.unwrap_or("?"),
                self.p2p.error.as_deref().unwrap_or("?")
            )));
        }
        if self.check == Some("mismatch") {
            return Err(Error::runtime("the data check found a mismatch"));
        }
        Ok(0)
    }
}

fn run_observe(args: ObserveArgs) -> Result<Output> {
    let pcielab = std::env::current_exe()
        .map_err(|e| Error::runtime(format!("cannot find the running pcielab binary: {e}")))?;
    let result = cost::run(&cost::ObserveRequest {
        functions: args.functions,
        scrapes: args.scrapes,
        rounds: args.rounds,
        node_exporter: args.node_exporter,
        keep: args.keep,
        pcielab,
    })?;
    Ok(Output::new(result, Form::json_if(args.json)))
}

/// `bench observe`: what watching the generated server cost, beside the other tools.
impl Document for cost::ObserveCost {
    fn kind(&self) -> &'static str {
        "bench-observe"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.to_text())
    }
}
