//! `pcielab stat`: perf-stat-compatible counting of PCIe PMU events while a workload runs. On
//! `sim:` machines the workload is simulated (`fio …`, `dmatest …`, `nettest …`, `sleep S`); on
//! the live host (`--machine host`) it is a real command counted through perf_event_open.

use super::number_in;
use crate::machine_arg::MachineArg;
use clap::Args as ClapArgs;
use signal_hook::consts::SIGINT;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::output::{Document, Form, JsonForm, Output, Terminal};
use pcielab::machine::read_platform_file;
use pcielab::machine::Machine;
use pcielab::plot;
use pcielab::pmu::StatDocument;
use pcielab::pmu::{StatDone, StatEnd, StatRequest};
use pcielab::{Error, Result};

#[derive(ClapArgs)]
#[command(
    after_help = "Output: the counters go to stderr and the workload's own output to stdout, as with
perf stat, so `> out.txt` keeps only the workload's; `2> counts.txt` or --json (one object on
stdout) captures the counters.

Examples:
  pcielab stat -a -e dwc_rootport_10/rx_pcie_tlp_data_payload/ -- fio --rw=read ...   (live host)
  pcielab stat -a -e '{msr/tsc/,cpu-clock}' -e syscalls:sys_enter_getpid -I 1000 -- sleep 5
  pcielab stat -e cpu-clock -e syscalls:sys_enter_read -- dd if=/dev/zero of=/dev/null count=1000
                                              (no -a: the command's own events, as perf stat)
  pcielab stat -a -e hisi_pcie0_core0/rx_mwr_flux,port=0x1/ --dry-run
  pcielab stat --machine sim:yitian710 -a -e pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/ \\
      -e pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/ -- fio --filename=./test.big -iodepth=64 \\
      -ioengine=libaio --direct=1 --rw=readwrite --bs=1m --numjobs=4 --time_based=1 \\
      --runtime=20 --group_reporting --name=test-rw
  pcielab stat --machine sim:yitian710 -a -I 1000 \\
      -e '{pcie_bdf_200/rx_memory_write/,pcie_bdf_200/tx_ack_dllp/}' \\
      -- fio --filename=/dev/sda --rw=read --bs=1m --size=1g --name=r
  pcielab stat --machine sim:yitian710 -a -I 500 --svg sata.svg \\
      -e pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/ -e pcie_bdf_200/Tx_PCIe_TLP_Data_Payload/ \\
      -- fio --filename=/dev/sda --rw=readwrite --bs=1m --size=2g --name=rw
  pcielab stat --machine sim:yitian710 -a -e dwc_rootport_10/L1/ -- sleep 1
  pcielab stat --machine sim:yitian710 -a -e pcie_bdf_b00000/Rx_PCIe_TLP_Data_Payload/ -- \\
      nettest --dir rx --seconds 2
  pcielab stat --machine sim:rk3588-ep -a -- dmatest --sizes 4M --dir write   (no PMU: see below)
  pcielab stat -a -e dwc_rootport_10/rx_pcie_tlp_data_payload/ --platform my-board.toml -- sleep 10
  pcielab stat --machine sim:rk3588-evb -a --json -- \\
      fio -filename=/mnt/test -direct=1 -iodepth 32 -thread -rw=read -ioengine=libaio -bs=1024K \\
      -size=10G -numjobs=1 -runtime=180 -group_reporting -name=read_seq_1024k_q32_t1

Events are PMU/EVENT/ (the Yitian 710 PMU guide's or upstream names, any case), PMU/EVENT,lane=N/ for per-lane
events, or PMU/eventid=0x21,type=0x0/; -e a,b gives two events, -e '{a,b}' a group that counts
all-or-nothing. Events that need the same counter are time-shared every mux interval and
scaled (perf's (NN.NN%)). JSON fields are in docs/pmu.md.

On a host every PMU under /sys/bus/event_source/devices works as with perf (format terms,
PMU/config=0x..,config1=0x../, cpu-clock, context-switches, SUBSYS:TRACEPOINT); --dry-run
prints each event's perf_event_attr (type, config, config1, config2) without opening it; the
workload's exit status is pcielab's (127 when it does not exist); Ctrl-C stops the workload
and still prints the counts. Permissions: root, CAP_PERFMON, or kernel.perf_event_paranoid
<= 0 (docs/pmu.md, \"On a real server\"). Simulated workloads are in docs/sim.md.

No kernel binds a PMU to Rockchip (1d87) root ports, so the Rockchip presets (rk3588-ep,
rk3588-evb, ...) have none: without -e, stat runs the simulated dmatest or fio and prints its
result as the tool does (the Rockchip guide's tables); `pcielab top` shows those ports' traffic
derived from disk and NIC counters, and `pcielab model --platform` the predicted DMA rates."
)]
pub struct Args {
    #[command(flatten)]
    pub machine: MachineArg,
    /// Count system-wide, on all CPUs (required for PCIe PMUs, which are uncore PMUs; on a
    /// host without -a, only the workload's own events are counted, as perf stat counts them)
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Event(s) to count: PMU/EVENT/ (repeatable; commas and {groups} as in perf). Required on
    /// a host; a sim: machine without -e runs the workload and prints only its own result
    #[arg(short = 'e', long = "event", value_name = "EVENT")]
    pub events: Vec<String>,
    /// Print counts every MS milliseconds
    #[arg(short = 'I', long = "interval-print", value_name = "MS", value_parser = number_in(1..=3_600_000u64))]
    pub interval_ms: Option<u64>,
    /// CSV output with this field separator (perf stat -x)
    #[arg(short = 'x', long = "field-separator", value_name = "SEP", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub separator: Option<String>,
    /// Print one JSON object (shape in docs/pmu.md) instead of perf's report
    #[arg(long, conflicts_with = "separator")]
    pub json: bool,
    /// sim: rotation period of time-shared events [default: 4] (a host uses each PMU's
    /// perf_event_mux_interval_ms)
    #[arg(long, value_name = "MS", value_parser = number_in(1..=60_000u64))]
    pub mux_interval_ms: Option<u64>,
    /// sim: inject link bit errors at this rate (LCRC errors, Naks, replays), e.g. 1e-9
    #[arg(long, value_name = "RATE")]
    pub ber: Option<f64>,
    /// Host: print each event's perf_event_attr fields and exit without opening anything
    #[arg(long)]
    pub dry_run: bool,
    /// Also print each payload event's bytes, share of the link's achievable rate, line rate
    /// and platform DMA prediction (the JSON document always has them)
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// A spec or fragment with a [platform] table (e.g. from `pcielab fit --out`): its predicted
    /// streaming DMA rates are printed beside payload events [default on sim: the spec's own]
    #[arg(long, value_name = "SPEC.toml")]
    pub platform: Option<String>,
    /// Also draw each event per interval over time as an SVG here (needs -I)
    #[arg(long, value_name = "OUT.svg", requires = "interval_ms")]
    pub svg: Option<std::path::PathBuf>,
    /// The workload, best after `--` (everything from its first word on is the workload's)
    #[arg(trailing_var_arg = true, value_name = "WORKLOAD")]
    pub workload: Vec<String>,
}

/// As `perf stat`: Ctrl-C reaches a real workload from the terminal and ends it, and pcielab
/// stays to print what was counted; a second Ctrl-C (a workload that ignores the first) ends
/// pcielab with status 130. A simulated workload runs inside pcielab, so there Ctrl-C keeps its
/// default meaning.
fn catch_ctrl_c(machine: &Machine) -> Result<Option<Arc<AtomicBool>>> {
    if machine.runs_workloads_itself() {
        return Ok(None);
    }
    let interrupted = Arc::new(AtomicBool::new(false));
    let register = |e: std::io::Error| Error::runtime(format!("cannot catch Ctrl-C (SIGINT): {e}"));
    // Registered first, so it sees the flag before the first Ctrl-C raises it.
    signal_hook::flag::register_conditional_shutdown(
        SIGINT,
        128 + SIGINT,
        Arc::clone(&interrupted),
    )
    .map_err(register)?;
    signal_hook::flag::register(SIGINT, Arc::clone(&interrupted)).map_err(register)?;
    Ok(Some(interrupted))
}

pub fn run(args: Args) -> Result<Output> {
    let machine = args.machine.open()?;
    let counters = machine.counters()?;
    if args.dry_run {
        return Ok(Output::text(counters.dry_run(&args.events)?));
    }
    let read_file = |p: &Path| pcielab::input::read_input_file(p, "fio job file");
    let platform = args
        .platform
        .as_deref()
        .map(read_platform_file)
        .transpose()?;
    let interrupt = catch_ctrl_c(&machine)?;
    let request = StatRequest {
        events: &args.events,
        all_cpus: args.all_cpus,
        mux_interval_ms: args.mux_interval_ms,
        interval_ms: args.interval_ms,
        ber: args.ber,
        workload: &args.workload,
        read_file: &read_file,
        platform: platform.as_ref(),
        interrupt: interrupt.as_deref(),
    };
    let mut done = match counters.stat(&request)? {
        StatEnd::Counted(done) => done,
        StatEnd::WorkloadNotFound(why) => {
            note!("pcielab: {why}");
            return Ok(Output::status(127));
        }
    };
    let document = done
        .outcome
        .document(std::mem::take(&mut done.workload_json));
    let counted = Counted {
        done,
        document,
        separator: args.separator,
        verbose: args.verbose,
    };
    Ok(Output::new(counted, Form::json_if(args.json)).with_svg(args.svg))
}

/// What a run counted, printed as perf stat prints it: the workload's report on stdout, the
/// counts on stderr.
struct Counted {
    done: StatDone,
    document: StatDocument,
    /// `-x SEP`: the counts as CSV.
    separator: Option<String>,
    verbose: bool,
}

impl Document for Counted {
    fn kind(&self) -> &'static str {
        "stat"
    }

    fn json(&self) -> &dyn JsonForm {
        &self.document
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.done.workload_report)?;
        for note in &self.done.notes {
            out.note(&format!("pcielab: {note}"));
        }
        let outcome = &self.done.outcome;
        out.report(&match &self.separator {
            Some(sep) => outcome.render_csv(sep),
            None => outcome.render_text(self.verbose),
        });
        Ok(())
    }

    fn svg(&self) -> Result<Option<String>> {
        plot::svg(plot::Picture::Stat(&self.document, "this run")).map(Some)
    }

    fn end(&self) -> Result<i32> {
        Ok(self.done.exit_code)
    }
}
