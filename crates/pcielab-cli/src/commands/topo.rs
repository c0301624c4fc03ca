//! `pcielab topo`: show a machine's PCIe hierarchy as an annotated tree, JSON or Graphviz, or
//! export it as a sysfs-shaped tree that the real `lspci` reads.

use super::output::{Document, Form, JsonForm, Output, Terminal};
use crate::machine_arg::MachineArg;
use clap::Args as ClapArgs;
use pcielab::machine::read_platform_file;
use pcielab::machine::Machine;
use pcielab::model::platform::PlatformModel;
use pcielab::plot;
use pcielab::topology::p2p::{self, Cpu};
use pcielab::topology::{export_sysfs, to_dot, to_json, to_tree, write_json};
use pcielab::Result;
use std::path::PathBuf;

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab topo --machine sim:yitian710
  pcielab topo --machine sim:qemu-seed --json
  pcielab topo --machine sim:my-board.toml --dot | dot -Tsvg > board.svg
  pcielab topo --machine sim:yitian710 --sysfs-export /tmp/y && lspci -A linux-sysfs -O sysfs.path=/tmp/y -tv
  pcielab topo --machine host
  pcielab topo --machine snapshot:/tmp/snap --json
  pcielab topo --machine sim:qemu-wide --p2p --cpu amd:0x17
  pcielab topo --machine sim:yitian710 --svg yitian.svg
  pcielab topo --machine sim:qemu-wide --p2p --svg p2p.svg
  pcielab topo --machine sim:qemu-seed --p2p --full
  pcielab topo --machine sim:rk3588-ep
  pcielab topo --machine host --platform my-board.toml

Each link shows three rates: the line rate (after encoding), the link-achievable payload rate
(TLP headers, DLLPs and SKP charged) and, on endpoints where a platform model is given, the
platform's predicted streaming DMA write/read (4 MiB transfers; docs/calibration.md).
Presets: yitian710, rk3588-evb, rk3568-evb, rk3588-ep, rk3568-ep, rk3588-ep-gen2x1, rk3528-evb,
qemu-seed, qemu-wide. The spec format and the JSON fields are documented in docs/topology.md.")]
pub struct Args {
    #[command(flatten)]
    pub machine: MachineArg,
    /// Print JSON (shape in docs/topology.md) instead of the tree
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print a Graphviz digraph instead of the tree
    #[arg(long, conflicts_with = "sysfs_export")]
    pub dot: bool,
    /// Write a sysfs-shaped tree (devices/<bdf>/config, …) into DIR instead of printing;
    /// read it with `lspci -A linux-sysfs -O sysfs.path=DIR -tv` or `--machine snapshot:DIR`
    #[arg(long, value_name = "DIR", conflicts_with = "json")]
    pub sysfs_export: Option<PathBuf>,
    /// Print the kernel's P2PDMA distance and verdict (drivers/pci/p2pdma.c rules; JSON shape
    /// in docs/lab.md) between groups of endpoints that share every verdict (those below one
    /// port with the same ACS state: an SR-IOV device's virtual functions are one group)
    #[arg(long, conflicts_with_all = ["dot", "sysfs_export"])]
    pub p2p: bool,
    /// With --p2p: also every ordered pair of endpoints, one line each (up to 1,024 endpoints)
    #[arg(long, requires = "p2p")]
    pub full: bool,
    /// The CPU for --p2p: intel, amd or other, optionally with a family (amd:0x19);
    /// QEMU 7.2 TCG `-cpu max` is amd:0xf, `-cpu EPYC` amd:0x17
    #[arg(long, default_value = "intel", requires = "p2p", value_parser = Cpu::parse)]
    pub cpu: Cpu,
    /// Also draw the tree (or with --p2p the matrix of group verdicts, by root port past 256
    /// groups; with --full, of endpoint pairs) as an SVG here
    #[arg(long, value_name = "OUT.svg", conflicts_with_all = ["dot", "sysfs_export"])]
    pub svg: Option<PathBuf>,
    /// A spec or fragment with a [platform] table (e.g. from `pcielab fit --out`): endpoints show
    /// its predicted streaming DMA rates [default on sim: the spec's own [platform], if any]
    #[arg(long, value_name = "SPEC.toml", conflicts_with_all = ["sysfs_export", "p2p"])]
    pub platform: Option<String>,
}

pub fn run(args: Args) -> Result<Output> {
    let machine = args.machine.open()?;
    let spec = machine.spec()?;
    if let Some(dir) = &args.sysfs_export {
        export_sysfs(&spec.topology, dir)?;
        note!(
            "exported {} functions to {}",
            spec.topology.functions().len(),
            dir.display()
        );
        return Ok(Output::done());
    }
    let form = Form::json_if(args.json);
    if args.p2p {
        let report = p2p::Report::new(&spec.topology, args.cpu, args.full)?;
        return Ok(Output::new(P2pVerdicts(report), form).with_svg(args.svg));
    }
    let model = match &args.platform {
        Some(file) => Some(read_platform_file(file)?),
        None => spec.platform_model()?,
    };
    let tree = Tree {
        machine,
        model,
        dot: args.dot,
    };
    Ok(Output::new(tree, form).with_svg(args.svg))
}

/// The machine's tree: the annotated text (or a Graphviz digraph), its JSON streamed.
struct Tree {
    machine: Machine,
    model: Option<PlatformModel>,
    dot: bool,
}

impl JsonForm for Tree {
    fn write_json(&self, _kind: &'static str, out: &mut Terminal) -> Result<()> {
        // Streamed: a listing of many functions is never held whole as one JSON tree.
        let spec = self.machine.spec()?;
        out.stream(|mut w| write_json(spec, self.model.as_ref(), &mut w))
    }
}

impl Document for Tree {
    fn kind(&self) -> &'static str {
        "topo"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        let spec = self.machine.spec()?;
        let text = if self.dot {
            to_dot(spec)
        } else {
            to_tree(spec, self.model.as_ref())
        };
        out.text(&text)
    }

    fn svg(&self) -> Result<Option<String>> {
        let topology = to_json(self.machine.spec()?, self.model.as_ref());
        plot::svg(plot::Picture::Topology(&topology)).map(Some)
    }
}

/// `topo --p2p`: the kernel's P2PDMA verdicts between groups of endpoints.
struct P2pVerdicts(p2p::Report);

impl Document for P2pVerdicts {
    fn kind(&self) -> &'static str {
        "topo-p2p"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.0
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&p2p::to_text(&self.0))
    }

    fn svg(&self) -> Result<Option<String>> {
        plot::svg(plot::Picture::P2p(&self.0)).map(Some)
    }
}
