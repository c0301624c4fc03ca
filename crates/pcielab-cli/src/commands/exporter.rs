//! `pcielab exporter`: per-port and per-function PCIe traffic and link health as Prometheus
//! metrics at `/metrics` (library: `pcielab::observe` and `observe::exporter`). On `sim:` a
//! workload after `--` plays in real time while it serves.

use crate::machine_arg::MachineArg;
use clap::Args as ClapArgs;
use std::io::Write;

use super::output::{Document, Form, JsonForm, Output, Terminal};
use pcielab::advise::{advise, AdviseOptions};
use pcielab::observe::exporter::{self, MetricsRenderer, DEFAULT_LISTEN};
use pcielab::observe::Observer;
use pcielab::observe::Sample;
use pcielab::Result;

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab exporter                                        live host on 127.0.0.1:9464
  pcielab exporter --listen 127.0.0.1:9100 --once         print the metrics once and exit
  pcielab exporter --listen 0.0.0.0:9464 --allow-remote   serve the network (firewall it)
  pcielab exporter --machine sim:yitian710 -- fio --filename=/dev/sda --rw=read --bs=1m \\
      --time_based --runtime=600 --name=r                 a simulated read, played in real time
  pcielab exporter --machine snapshot:./snap --json --once

Metrics (docs/fleet.md): pcielab_rx_bytes_total / pcielab_tx_bytes_total{function,port,kind,
source} (payload; source=pmu from a PCIe PMU, derived from /sys/block and /sys/class/net counters
summed up the tree), pcielab_rx_wire_bytes_total / tx (estimated wire bytes),
pcielab_link_speed_gts / pcielab_link_width_lanes{state=current|capable}, pcielab_link_downgraded,
pcielab_link_down, pcielab_link_achievable_bytes_per_second, pcielab_aer_errors_total{severity},
pcielab_aer_rootport_errors_total{severity}, pcielab_pmu_present, pcielab_machine_info.
Only GET/HEAD /metrics is served; everything else is 404/405/4xx. Loopback only unless
--allow-remote. The address it serves goes to stderr (useful with port 0).")]
pub struct Args {
    #[command(flatten)]
    pub machine: MachineArg,
    /// IP:PORT to listen on (port 0: any free port, printed on stderr)
    #[arg(long, value_name = "IP:PORT", default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Allow a non-loopback --listen address (plain, unauthenticated HTTP)
    #[arg(long)]
    pub allow_remote: bool,
    /// Print the metrics once to stdout and exit instead of serving
    #[arg(long)]
    pub once: bool,
    /// With --once: print the sample as JSON (fields in docs/fleet.md) instead of metrics
    #[arg(long, requires = "once")]
    pub json: bool,
    /// sim: the workload to play in real time, after `--` (fio …, nettest …, dmatest …, sleep S)
    #[arg(trailing_var_arg = true, value_name = "WORKLOAD")]
    pub workload: Vec<String>,
}

pub fn run(args: Args) -> Result<Output> {
    let machine = args.machine.open()?;
    let addr = exporter::listen_address(&args.listen, args.allow_remote)?;
    let mut observer = Observer::open(&machine, &args.workload, |p| {
        pcielab::input::read_input_file(p, "fio job file")
    })?;
    for warning in observer.warnings() {
        note!("{warning}");
    }
    // Advice is read once: what it reads (config space, IRQs, governors) rarely changes.
    let options = AdviseOptions {
        link_samples: 1,
        ..AdviseOptions::default()
    };
    let mut renderer = match advise(&machine, &options) {
        Ok(advice) => MetricsRenderer::with_findings(&advice),
        Err(e) => {
            note!("pcielab exporter: no advice findings: {e}");
            MetricsRenderer::default()
        }
    };
    // The advice (evidence, fixes, predictions for every finding) was read to render three
    // labels per finding and is gone, and the machine's own copy of the topology (every
    // function's decoded registers) is not needed again: the observer keeps the read plan's.
    // Hand their pages back, so a long-running exporter does not keep tens of MB it no longer
    // uses on a machine with thousands of functions.
    let name = machine.to_string();
    drop(machine);
    // SAFETY: malloc_trim only releases free heap memory; no pointer is invalidated.
    unsafe {
        libc::malloc_trim(0);
    }
    if args.once {
        let sample = observer.sample()?;
        let mut metrics = String::new();
        renderer.render(&sample, &mut metrics);
        let once = Scrape { sample, metrics };
        return Ok(Output::new(once, Form::json_if(args.json)));
    }
    let listener = exporter::bind(addr)?;
    let bound = listener
        .local_addr()
        .map_err(|e| pcielab::Error::runtime(format!("cannot read the bound address: {e}")))?;
    note!("pcielab exporter: serving {name} at http://{bound}/metrics");
    let _ = std::io::stderr().flush();
    exporter::serve(listener, observer, renderer)?;
    Ok(Output::done())
}

/// `--once`: one sample and its metrics as a scrape would get them.
struct Scrape {
    sample: Sample,
    metrics: String,
}

impl Document for Scrape {
    fn kind(&self) -> &'static str {
        "exporter-sample"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.sample
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.metrics)
    }
}
