//! `pcielab pmu list`: the PCIe PMU devices a machine has, the root port each counts, and every
//! event of its catalog (names, encoding, group, unit).

use super::output::{Document, Form, JsonForm, Output, Terminal};
use crate::machine_arg::MachineArg;
use clap::{Args as ClapArgs, Subcommand};
use pcielab::pmu::PmuListing;
use pcielab::Result;

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    command: PmuCommand,
}

#[derive(Subcommand)]
enum PmuCommand {
    /// List PMU devices, their root ports and their events
    #[command(after_help = "Examples:
  pcielab pmu list --machine sim:yitian710
  pcielab pmu list --machine sim:yitian710 --json | jq '.pmus[0].events | length'
  pcielab pmu list            # the live host's /sys/bus/event_source/devices
  pcielab pmu list --pmu dwc_rootport_10     # one PMU: formats, events, scale/unit

On a host the PMUs are those the kernel registered: PCIe PMUs (dwc_rootport_*, pcie_bdf_*,
hisi_pcie*, uncore_iio_free_running_*, nvidia_pcie_pmu_*) with their root ports and lanes, the
other PMUs by name; with none it says which driver and kernel would provide one, and the
current perf_event_paranoid. On sim: and snapshot: machines, one DesignWare PMU per DWC root port
(Alibaba, Qualcomm, Ampere, Rockchip), named both pcie_bdf_<hex> and dwc_rootport_<hex>.
The JSON shape is documented in docs/pmu.md.")]
    List(ListArgs),
}

#[derive(ClapArgs)]
struct ListArgs {
    #[command(flatten)]
    machine: MachineArg,
    /// Print JSON (shape in docs/pmu.md)
    #[arg(long)]
    json: bool,
    /// Only this PMU (any of its names), with all its events
    #[arg(long, value_name = "NAME")]
    pmu: Option<String>,
}

pub fn run(args: Args) -> Result<Output> {
    match args.command {
        PmuCommand::List(list) => run_list(list),
    }
}

fn run_list(args: ListArgs) -> Result<Output> {
    let machine = args.machine.open()?;
    let listing = machine.counters()?.list(args.pmu.as_deref())?;
    let list = PmuList {
        listing,
        named: machine.to_string(),
        one_pmu: args.pmu.is_some(),
    };
    Ok(Output::new(list, Form::json_if(args.json)))
}

/// A machine's PMUs, as `pmu list` shows them.
struct PmuList {
    listing: PmuListing,
    /// How the machine is named in the listing.
    named: String,
    /// One PMU was asked for: its formats and events are listed.
    one_pmu: bool,
}

impl JsonForm for PmuList {
    fn write_json(&self, kind: &'static str, out: &mut Terminal) -> Result<()> {
        self.listing.document(&self.named).write_json(kind, out)
    }
}

impl Document for PmuList {
    fn kind(&self) -> &'static str {
        "pmu-list"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.listing.render(&self.named, self.one_pmu))
    }
}
