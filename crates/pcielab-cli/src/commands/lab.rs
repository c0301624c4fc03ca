//! `pcielab lab`: a QEMU machine with a real Linux guest built from a topology spec or preset —
//! print its QEMU command line, boot it and run a script, check the guest's view against the
//! spec, or build the P2PDMA guest kernel.

use super::number_in;
use clap::{Args as ClapArgs, Subcommand};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::output::{Document, Form, JsonForm, Output, Terminal};
use pcielab::lab::session::{self, KernelChoice, RunOptions, RunReport, DEFAULT_SCRIPT};
use pcielab::lab::Phase;
use pcielab::lab::{
    boot_and_check, boot_and_try, build_kernel, cache_dir, load_spec, CheckReport, MachineOptions,
    P2pRun, QemuPlan,
};
use pcielab::{Error, Result};

#[derive(ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Subcommand)]
pub enum LabCommand {
    /// Print the QEMU command line for a spec or preset
    #[command(after_help = "Examples:
  pcielab lab argv qemu-seed
  pcielab lab argv my-board.toml --cpu EPYC --json

What QEMU 7.2 cannot express at all (a vendor id, a Gen5 root port) is an error (exit 2) naming
each function; what it shows differently (every current link is 2.5 GT/s x1) is listed on stderr.")]
    Argv(ArgvArgs),
    /// Boot a guest with the topology, run a script in it, bring the results back
    #[command(after_help = "Examples:
  pcielab lab run qemu-wide
  pcielab lab run qemu-seed --script probe.sh --keep
  pcielab lab run qemu-seed --fio nvme.fio --timeout 300
  pcielab lab run qemu-seed --kernel p2pdma --accel kvm --cpu host

The default script saves the guest's /sys/bus/pci (sysfs/) and `pcielab topo --json`
(topo.json). Every run also returns dmesg.txt, cpuinfo.txt and script.log. Guest parts are cached
in $PCIELAB_CACHE, $XDG_CACHE_HOME/pcielab or ~/.cache/pcielab.")]
    Run(RunArgs),
    /// Boot a guest and compare its PCI hierarchy with the spec (exit 1 on mismatch)
    #[command(after_help = "Examples:
  pcielab lab check qemu-seed
  pcielab lab check qemu-wide --kernel p2pdma --json

Differences QEMU 7.2 cannot avoid are shown as `expected`, with the reason.")]
    Check(CheckArgs),
    /// Try P2PDMA between every pair of NVMe in a guest and compare with the model's verdicts
    #[command(after_help = "Examples:
  pcielab lab kernel && pcielab lab p2p qemu-seed
  pcielab lab p2p qemu-wide --cpu EPYC --json

For each ordered pair of NVMe with a CMB, the guest copies SRC -> DST through SRC's p2pmem
(`pcielab bench p2p --check`). A predicted bus-address or host-bridge path must copy and verify;
a predicted refusal must fail with EREMOTEIO and the kernel's message. Exit 1 on disagreement.
The CPU the prediction uses is read from the guest (QEMU 7.2 TCG's `max` is AMD family 0xf, `EPYC`
is AMD family 0x17, which the kernel exempts from the host-bridge whitelist).")]
    P2p(P2pArgs),
    /// Build the P2PDMA guest kernel from Debian's linux-source-6.12 into the cache
    #[command(after_help = "Examples:
  pcielab lab kernel
  pcielab lab kernel --jobs 2

Needs the Debian packages linux-source-6.12, make, gcc, flex, bison, bc and libelf-dev.
Takes a few minutes; a second call returns at once. The cache is $PCIELAB_CACHE,
$XDG_CACHE_HOME/pcielab or ~/.cache/pcielab (target/pcielab-cache under cargo in this
repository, set by .cargo/config.toml).")]
    Kernel(KernelArgs),
}

#[derive(ClapArgs)]
pub struct QemuArgs {
    /// Spec file (FILE.toml) or preset name (qemu-seed, qemu-wide)
    pub spec: String,
    /// QEMU accelerator: tcg, or kvm on a machine with working KVM
    #[arg(long, default_value = "tcg", value_parser = ["tcg", "kvm"])]
    pub accel: String,
    /// QEMU CPU model (max, EPYC, host with kvm, ...)
    #[arg(long, default_value = "max")]
    pub cpu: String,
    /// Guest memory in MiB (128 to 1048576)
    #[arg(long, default_value_t = 1024, value_parser = number_in(128..=1_048_576u32))]
    pub memory: u32,
    /// Virtual CPUs (1 to 64); with NUMA nodes and at least one vCPU per node, split over the nodes
    #[arg(long, default_value_t = 1, value_parser = number_in(1..=64u32))]
    pub smp: u32,
    /// A guest kernel parameter, appended to the lab's command line (repeatable; e.g.
    /// `--kernel-arg pci=pcie_bus_perf --kernel-arg pcie_aspm.policy=powersave`)
    #[arg(long = "kernel-arg", value_name = "PARAM")]
    pub kernel_args: Vec<String>,
    /// Extra QEMU arguments after `--`, appended to the command line as given
    /// (e.g. `-- -device virtio-rng-pci`)
    #[arg(last = true, value_name = "QEMU_ARG")]
    pub qemu_args: Vec<String>,
}

#[derive(ClapArgs)]
pub struct ArgvArgs {
    #[command(flatten)]
    pub machine: QemuArgs,
    /// Print JSON: argv, disks, limits, numa_nodes (docs/lab.md)
    #[arg(long)]
    pub json: bool,
}

#[derive(ClapArgs)]
pub struct BootArgs {
    #[command(flatten)]
    pub machine: QemuArgs,
    /// Guest kernel: debian (cloud kernel), p2pdma (built by `lab kernel`) or a bzImage path
    #[arg(long, default_value = "debian")]
    pub kernel: KernelChoice,
    /// Seconds until a guest counts as hung
    #[arg(long, default_value_t = 120, value_parser = number_in(1..=86_400u64))]
    pub timeout: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What happens to a run's files and how its verdict is printed.
#[derive(ClapArgs)]
pub struct OutputArgs {
    /// Keep the run directory (disks, initramfs, console.log)
    #[arg(long)]
    pub keep: bool,
    /// Where the guest's results go (default: <cache>/results/<run>)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print JSON (docs/lab.md)
    #[arg(long)]
    pub json: bool,
}

#[derive(ClapArgs)]
pub struct RunArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// Guest script (sh) to run instead of the default snapshot; cwd is /results
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// fio job file to run in the guest after the script; JSON output lands in fio.json
    #[arg(long)]
    pub fio: Option<PathBuf>,
    /// Let the script drive QEMU's monitor: a line `@@pcielab monitor COMMAND` it prints is sent
    /// to QEMU (e.g. `pcie_aer_inject_error d0000_00_04_0 COMP_TIME`); replies go to the console
    #[arg(long)]
    pub monitor_hook: bool,
    /// A program to copy into the guest's /bin with its libraries (repeatable; a path, or a
    /// name on PATH, e.g. `--tool lspci --tool setpci`)
    #[arg(long = "tool", value_name = "PROGRAM")]
    pub tools: Vec<PathBuf>,
}

#[derive(ClapArgs)]
pub struct CheckArgs {
    #[command(flatten)]
    pub boot: BootArgs,
}

#[derive(ClapArgs)]
pub struct P2pArgs {
    #[command(flatten)]
    pub machine: QemuArgs,
    /// Guest kernel; it needs CONFIG_PCI_P2PDMA (p2pdma: built by `lab kernel`)
    #[arg(long, default_value = "p2pdma")]
    pub kernel: KernelChoice,
    /// Bytes copied per pair
    #[arg(long, default_value_t = 262144, value_parser = number_in(1..=(1u64 << 30)))]
    pub size: u64,
    /// Seconds until a guest counts as hung
    #[arg(long, default_value_t = 180, value_parser = number_in(1..=86_400u64))]
    pub timeout: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(ClapArgs)]
pub struct KernelArgs {
    /// Parallel compile jobs, 1 to 1024 (default: available CPUs)
    #[arg(long, value_parser = number_in(1..=1024usize))]
    pub jobs: Option<usize>,
}

pub fn run(args: Args) -> Result<Output> {
    match args.command {
        LabCommand::Argv(a) => run_argv(a),
        LabCommand::Run(a) => run_run(a),
        LabCommand::Check(a) => run_check(a),
        LabCommand::P2p(a) => run_p2p(a),
        LabCommand::Kernel(a) => run_kernel(a),
    }
}

fn machine_options(m: &QemuArgs) -> MachineOptions {
    MachineOptions {
        accel: m.accel.clone(),
        cpu: m.cpu.clone(),
        memory_mib: m.memory,
        smp: m.smp,
        extra_args: m.qemu_args.clone(),
        kernel_args: m.kernel_args.clone(),
        ..MachineOptions::default()
    }
}

/// What QEMU shows differently from the spec, on stderr before a text result.
fn print_limits(limits: &[pcielab::lab::Limit], out: &mut Terminal) {
    for limit in limits {
        out.note(&format!("note: {limit}"));
    }
}

fn run_argv(args: ArgvArgs) -> Result<Output> {
    let spec = load_spec(&args.machine.spec)?;
    let plan = pcielab::lab::plan(&spec.topology, &machine_options(&args.machine))?;
    Ok(Output::new(plan, Form::json_if(args.json)))
}

/// `lab argv`: the QEMU command line.
impl Document for QemuPlan {
    fn kind(&self) -> &'static str {
        "lab-argv"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        print_limits(&self.limits, out);
        out.text(&format!("{}\n", self.shell_command()))
    }
}

/// Each phase of a guest's run on stderr with the seconds since the start; none with `--json`.
fn progress_printer(quiet: bool) -> impl FnMut(Phase) {
    let started = Instant::now();
    move |phase| {
        if !quiet {
            note!(
                "[{:6.1}s] {}",
                started.elapsed().as_secs_f64(),
                phase.name()
            );
        }
    }
}

fn run_options(
    machine: &QemuArgs,
    kernel: &KernelChoice,
    timeout: u64,
    output: &OutputArgs,
    script: Option<String>,
) -> Result<RunOptions> {
    if timeout == 0 {
        return Err(Error::bad_input(
            "--timeout 0: give the seconds a guest may run, e.g. 120",
        ));
    }
    let pcielab = std::env::current_exe()
        .map_err(|e| Error::runtime(format!("cannot find the pcielab binary: {e}")))?;
    Ok(RunOptions {
        machine: machine_options(machine),
        kernel: kernel.clone(),
        script,
        files: Vec::new(),
        pcielab: Some(pcielab),
        with_fio: false,
        tools: Vec::new(),
        monitor_hook: false,
        timeout: Duration::from_secs(timeout),
        keep: output.keep,
        results_dir: output.out.clone(),
        cache: cache_dir(),
    })
}

fn boot_options(boot: &BootArgs, script: Option<String>) -> Result<RunOptions> {
    run_options(
        &boot.machine,
        &boot.kernel,
        boot.timeout,
        &boot.output,
        script,
    )
}

fn run_run(args: RunArgs) -> Result<Output> {
    let spec = load_spec(&args.boot.machine.spec)?;
    let script = match &args.script {
        Some(path) => pcielab::input::read_input_file(path, "--script")?,
        None => DEFAULT_SCRIPT.to_string(),
    };
    let mut options = boot_options(&args.boot, Some(script))?;
    options.monitor_hook = args.monitor_hook;
    options.tools = args.tools.clone();
    if let Some(job) = &args.fio {
        options.add_fio_job(job)?;
    }
    let json = args.boot.output.json;
    let report = session::run(&spec.topology, &options, &mut progress_printer(json))?;
    Ok(Output::new(report, Form::json_if(json)))
}

/// `lab run`: what the guest's script brought back; a script that failed fails the command.
impl Document for RunReport {
    fn kind(&self) -> &'static str {
        "lab-run"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        print_limits(&self.limits, out);
        out.text(&self.to_text())
    }

    fn end(&self) -> Result<i32> {
        match self.script_failure() {
            Some(why) => Err(Error::runtime(why)),
            None => Ok(0),
        }
    }
}

fn run_check(args: CheckArgs) -> Result<Output> {
    let options = boot_options(&args.boot, None)?;
    let json = args.boot.output.json;
    let verdict = boot_and_check(
        &args.boot.machine.spec,
        &options,
        &mut progress_printer(json),
    )?;
    Ok(Output::new(verdict, Form::json_if(json)))
}

/// `lab check`: the guest's view against the spec; a mismatch fails the command.
impl Document for CheckReport {
    fn kind(&self) -> &'static str {
        "lab-check"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.to_text())
    }

    fn end(&self) -> Result<i32> {
        if !self.ok {
            return Err(Error::runtime(format!(
                "the guest differs from {} in {} field(s)",
                self.spec, self.mismatches
            )));
        }
        Ok(0)
    }
}

fn run_p2p(args: P2pArgs) -> Result<Output> {
    let options = run_options(
        &args.machine,
        &args.kernel,
        args.timeout,
        &args.output,
        None,
    )?;
    let json = args.output.json;
    let tried = boot_and_try(
        &args.machine.spec,
        args.size,
        options,
        &mut progress_printer(json),
    )?;
    Ok(Output::new(P2pVerdict(tried), Form::json_if(json)))
}

/// `lab p2p`: each pair's outcome against the model; a disagreement fails the command.
struct P2pVerdict(P2pRun);

impl JsonForm for P2pVerdict {
    fn write_json(&self, kind: &'static str, out: &mut Terminal) -> Result<()> {
        self.0.report().write_json(kind, out)
    }
}

impl Document for P2pVerdict {
    fn kind(&self) -> &'static str {
        "lab-p2p"
    }

    fn json(&self) -> &dyn JsonForm {
        self
    }

    fn write_text(&self, out: &mut Terminal) -> Result<()> {
        out.text(&self.0.report().to_text())
    }

    fn end(&self) -> Result<i32> {
        let verdict = self.0.report();
        if !verdict.ok {
            return Err(Error::runtime(format!(
                "the guest kernel disagreed with the P2PDMA model on {} pair(s); results in {}",
                verdict.disagreements(),
                self.0.run.results_dir.display()
            )));
        }
        Ok(0)
    }
}

fn run_kernel(args: KernelArgs) -> Result<Output> {
    let jobs = args.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let started = Instant::now();
    let image = build_kernel(&cache_dir(), jobs, &mut |step| {
        note!("[{:6.1}s] {step}", started.elapsed().as_secs_f64())
    })?;
    Ok(Output::text(format!("{}\n", image.display())))
}
