//! `pcielab pmu list`: the PCIe PMU devices a machine has, the root port each counts, and every
//! event of its catalog (names, encoding, group, unit).

use clap::{Args as ClapArgs, Subcommand};
use pcielab::machine::MachineSelector;
use pcielab::pmu::{host_pmus, root_port_pmus, PmuDevice};
use pcielab::sim::SimMachine;
use pcielab::{Error, Result};
use serde_json::json;

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

On a host the PMUs are those the kernel registered (dwc_rootport_*, pcie_bdf_*, hisi_pcie*,
uncore_iio_free_running_*); on sim: and snapshot: machines, one DesignWare PMU per DWC root port
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
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        PmuCommand::List(list) => run_list(list),
    }
}

fn devices(selector: &MachineSelector) -> Result<Vec<PmuDevice>> {
    match selector {
        MachineSelector::Host { root } => host_pmus(root),
        MachineSelector::Snapshot { .. } => Ok(root_port_pmus(&selector.open()?.topology)),
        _ => Ok(SimMachine::open(selector)?.pmus()),
    }
}

fn run_list(args: ListArgs) -> Result<()> {
    let selector: MachineSelector = args.machine.parse()?;
    let pmus = devices(&selector)?;
    if args.json {
        let doc = json!({
            "machine": selector.to_string(),
            "pmus": pmus.iter().map(|p| json!({
                "name": p.name,
                "aliases": p.aliases,
                "family": p.family,
                "root_port": p.root_port.map(|b| b.to_string()),
                "lanes": p.lanes,
                "events": p.family.events().iter().map(|e| json!({
                    "name": e.name,
                    "seed_name": e.seed_name,
                    "encoding": e.encoding(p.family),
                    "config": e.config,
                    "group": e.group.label(),
                    "unit": e.unit.label(),
                    "counter_bits": e.group.counter_bits(p.family),
                    "per_lane": e.group.per_lane(),
                    "description": e.description,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::runtime(format!("JSON encoding failed: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    if pmus.is_empty() {
        println!("{selector}: no PCIe PMUs");
        return Ok(());
    }
    for p in &pmus {
        let aliases = if p.aliases.is_empty() {
            String::new()
        } else {
            format!(" (also {})", p.aliases.join(", "))
        };
        let port = p
            .root_port
            .map_or(String::new(), |b| format!(", root port {b}"));
        println!(
            "{}{aliases}: {}{port}, {} lanes",
            p.name,
            p.family.name(),
            p.lanes
        );
        println!(
            "  {:<30} {:<28} {:<32} {:<20} UNIT",
            "EVENT", "UPSTREAM NAME", "ENCODING", "GROUP"
        );
        for e in p.family.events() {
            println!(
                "  {:<30} {:<28} {:<32} {:<20} {}",
                e.seed_name,
                e.name,
                e.encoding(p.family),
                e.group.label(),
                e.unit.label()
            );
        }
        println!();
    }
    Ok(())
}
