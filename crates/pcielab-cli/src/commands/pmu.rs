//! `pcielab pmu list`: the PCIe PMU devices a machine has, the root port each counts, and every
//! event of its catalog (names, encoding, group, unit).

use clap::{Args as ClapArgs, Subcommand};
use pcielab::machine::MachineSelector;
use pcielab::pmu::catalog::nearest;
use pcielab::pmu::hostlist::host_listing;
use pcielab::pmu::list::{list_json, machine_pmus, render_list};
use pcielab::pmu::PmuDevice;
use pcielab::report::json_text;
use pcielab::{Error, Result};

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
    /// Where facts come from: host, snapshot:DIR, sim:PRESET or sim:FILE.toml
    #[arg(long, default_value = "host")]
    machine: String,
    /// Print JSON (shape in docs/pmu.md)
    #[arg(long)]
    json: bool,
    /// Only this PMU (any of its names), with all its events
    #[arg(long, value_name = "NAME")]
    pmu: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        PmuCommand::List(list) => run_list(list),
    }
}

fn run_list(args: ListArgs) -> Result<()> {
    let selector: MachineSelector = args.machine.parse()?;
    if let MachineSelector::Host { root } = &selector {
        let listing = host_listing(root, args.pmu.as_deref())?;
        match args.json {
            true => print!("{}", json_text(&listing.to_json())?),
            false => print!("{}", listing.render(args.pmu.is_some())),
        }
        return Ok(());
    }
    let mut pmus = machine_pmus(&selector)?;
    if let Some(name) = &args.pmu {
        pmus = only_pmu(pmus, name)?;
    }
    if args.json {
        print!("{}", json_text(&list_json(&selector, &pmus))?);
    } else {
        print!("{}", render_list(&selector, &pmus));
    }
    Ok(())
}

fn only_pmu(pmus: Vec<PmuDevice>, name: &str) -> Result<Vec<PmuDevice>> {
    let names = || {
        pmus.iter()
            .flat_map(|p| std::iter::once(&p.name).chain(&p.aliases))
    };
    if !names().any(|n| n == name) {
        let near = nearest(name, names().map(String::as_str));
        return Err(Error::bad_input(format!(
            "--pmu {name}: this machine has no such PMU; nearest: {}",
            near.join(", ")
        )));
    }
    Ok(pmus
        .into_iter()
        .filter(|p| p.name == name || p.aliases.iter().any(|a| a == name))
        .collect())
}
