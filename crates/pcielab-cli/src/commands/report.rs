//! `pcielab report`: one self-contained HTML page about a machine (topology diagram, PMUs) and
//! the JSON results given with `--from`, each drawn and tabled. Wiring only; the page is
//! `pcielab::report::page`, the pictures `pcielab::plot`.

use crate::machine_arg::MachineArg;
use std::path::PathBuf;

use super::output::Output;
use clap::Args as ClapArgs;
use pcielab::advise::{advise, AdviseOptions};
use pcielab::input::write_output;
use pcielab::report::Document;
use pcielab::report::{page, MachineFacts, ResultFile};
use pcielab::topology::to_json;
use pcielab::Result;

#[derive(ClapArgs)]
#[command(
    about = "One self-contained HTML page: topology, PMUs and the results given, each with a plot",
    after_help = "Examples:
  pcielab stat --machine sim:yitian710 -a -I 1000 --json -e pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/ \\
      -- fio --filename=/dev/sda --rw=read --bs=1m --size=4g --name=r > stat.json
  pcielab model --gen 2 --width 2 --json > model.json
  pcielab report --machine sim:yitian710 --from stat.json --from model.json -o report.html
  pcielab report --from old-run.json -o old.html            (results only, no machine)
  pcielab report -o host.html                               (the live host, the default machine)

--from takes the --json output of: stat, model, fit, topo, topo --p2p, sim run, lab check (the
kind is told from the file's fields). The page has no script and no URL: it opens offline and
prints one section per page. Shape of the page: docs/report.md."
)]
pub struct Args {
    #[command(flatten)]
    machine: MachineArg,
    /// A result file (the --json output of a pcielab command); repeatable
    #[arg(long = "from", value_name = "RESULT.json")]
    from: Vec<PathBuf>,
    /// Where to write the page
    #[arg(short = 'o', long = "output", value_name = "report.html")]
    output: PathBuf,
}

pub fn run(args: Args) -> Result<Output> {
    // Every input is read and checked before the machine is opened or anything is written.
    let results = args
        .from
        .iter()
        .map(|path| {
            Ok(ResultFile {
                origin: path.display().to_string(),
                document: Document::read_file(path)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    // With neither, the page is about the default machine (the live host); with only --from,
    // it is about those results alone.
    let machine = if args.machine.is_given() || args.from.is_empty() {
        Some(args.machine.open()?)
    } else {
        None
    };
    let machine = match machine {
        Some(machine) => Some(MachineFacts {
            selector: machine.selector().to_string(),
            topology: {
                let spec = machine.spec()?;
                let model = spec.platform_model()?;
                to_json(spec, model.as_ref())
            },
            pmus: machine.counters()?.pcie_pmus()?,
            advice: advise(
                &machine,
                &AdviseOptions {
                    link_samples: 1,
                    ..AdviseOptions::default()
                },
            )
            .ok(),
        }),
        None => None,
    };
    let html = page(machine.as_ref(), &results)?;
    write_output(args.output.as_ref(), html.as_bytes())?;
    note!(
        "wrote {} ({} result section(s))",
        args.output.display(),
        results.len()
    );
    Ok(Output::done())
}
