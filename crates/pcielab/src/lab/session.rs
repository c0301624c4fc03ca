//! One lab run end to end: plan the machine, fetch the kernel, build the guest image, create the
//! disks, boot, collect results, clean up. This is what `pcielab lab run` and `lab check` call;
//! the pieces live in [`super::argv`], [`super::guest`], [`super::kernel`] and [`super::runner`].

use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::argv::{plan, Limit, MachineOptions, QemuPlan};
use super::guest::{self, GuestFile, ImageSpec};
use super::kernel;
use super::runner::{self, Phase};
use crate::error::{Error, Result};
use crate::sim::fio::parse_job_file;
use crate::topology::Topology;

/// Which guest kernel boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelChoice {
    /// Debian's cloud kernel, fetched with apt-get (no P2PDMA).
    Debian,
    /// The P2PDMA kernel built by `pcielab lab kernel`.
    P2pdma,
    /// Any bzImage.
    File(PathBuf),
}

impl std::str::FromStr for KernelChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<KernelChoice> {
        Ok(match s {
            "debian" => KernelChoice::Debian,
            "p2pdma" => KernelChoice::P2pdma,
            path if path.contains('/') => KernelChoice::File(PathBuf::from(path)),
            _ => {
                return Err(Error::bad_input(format!(
                    "invalid --kernel '{s}': expected 'debian', 'p2pdma' or a path to a bzImage"
                )))
            }
        })
    }
}

/// Everything a run needs besides the topology.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The QEMU machine: memory, CPUs, accelerator.
    pub machine: MachineOptions,
    /// Which guest kernel boots.
    pub kernel: KernelChoice,
    /// The guest script (sh); `None` runs the default (sysfs snapshot + `pcielab topo --json`).
    pub script: Option<String>,
    /// Extra files for the guest.
    pub files: Vec<GuestFile>,
    /// Put this pcielab binary into the guest (the default script needs it).
    pub pcielab: Option<PathBuf>,
    /// Put fio into the guest.
    pub with_fio: bool,
    /// Further programs for the guest's `/bin` (e.g. `lspci`, `setpci`): a path, or a name
    /// looked up on PATH; each is copied with the libraries `ldd` lists.
    pub tools: Vec<PathBuf>,
    /// Let the guest script drive QEMU's monitor by printing `@@pcielab monitor COMMAND` lines
    /// (e.g. `pcie_aer_inject_error` to inject a PCIe error). Off unless asked: the monitor can
    /// change or stop the machine.
    pub monitor_hook: bool,
    /// How long the whole run may take before QEMU is stopped.
    pub timeout: Duration,
    /// Keep the run directory (disks, initramfs, console log) after the run.
    pub keep: bool,
    /// Where the guest's results land; default `<cache>/results/<run>`.
    pub results_dir: Option<PathBuf>,
    /// The lab cache (kernels, guest packages, images): `$XDG_CACHE_HOME/pcielab` or
    /// `~/.cache/pcielab` unless the caller picks another.
    pub cache: PathBuf,
}

/// What `lab run` reports.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunReport {
    /// Where the guest's results were copied.
    pub results_dir: PathBuf,
    /// Kept run directory (with `--keep`), else null.
    pub(crate) run_dir: Option<PathBuf>,
    pub(crate) kernel: PathBuf,
    /// The guest script's exit status.
    pub script_status: i32,
    /// The guest kernel's OOM-killer line when it killed a process of the script, else null.
    pub(crate) oom_kill: Option<String>,
    /// Guest memory in MiB (`--memory`).
    pub(crate) memory_mib: u32,
    /// Seconds from QEMU start to the guest's `/init`.
    pub boot_s: f64,
    /// Seconds from QEMU start to the guest's last result.
    pub boot_to_result_s: f64,
    /// Seconds for the whole run, fetching and image building included.
    pub(crate) total_s: f64,
    /// Where the guest differs from the spec because QEMU cannot express it.
    pub limits: Vec<Limit>,
    pub(crate) qemu_argv: Vec<String>,
}

impl RunOptions {
    /// Adds an fio job file to the run: checked with the simulator's parser (so one job file
    /// runs on `sim:` and in the lab), copied into the guest, run after the script with its JSON
    /// output in `fio.json`.
    pub fn add_fio_job(&mut self, job: &Path) -> Result<()> {
        let text = crate::input::read_input_file(job, "lab phase 'prepare': --fio")?;
        parse_job_file(&text, &job.display().to_string())
            .map_err(|e| Error::bad_input(format!("lab phase 'prepare': {}", e.message())))?;
        self.files.push(GuestFile {
            host: job.to_path_buf(),
            guest: "/pcielab/job.fio".into(),
        });
        self.with_fio = true;
        self.script
            .get_or_insert_with(|| DEFAULT_SCRIPT.to_string())
            .push_str("\nfio --output-format=json --output=/results/fio.json /pcielab/job.fio\n");
        Ok(())
    }
}

/// A `--tool` for the guest: a path as given, or a bare name found on PATH.
fn guest_tool(tool: &Path) -> Result<PathBuf> {
    if tool.components().count() > 1 {
        return if tool.is_file() {
            Ok(tool.to_path_buf())
        } else {
            Err(Error::bad_input(format!(
                "lab phase 'guest-image': --tool {}: no such file",
                tool.display()
            )))
        };
    }
    let name = tool.to_string_lossy();
    guest::on_path(&name).ok_or_else(|| {
        Error::bad_input(format!(
            "lab phase 'guest-image': --tool {name}: not found on PATH (give its path, or \
                 install the package that has it)"
        ))
    })
}

/// The guest kernel's report of an OOM kill ("Out of memory: Killed process 212 (fio) …").
pub(crate) fn oom_kill_line(dmesg: &str) -> Option<&str> {
    dmesg
        .lines()
        .find(|l| {
            l.contains("Out of memory: Killed process")
                || l.contains("Memory cgroup out of memory: Killed process")
        })
        .map(str::trim)
}

impl RunReport {
    /// Why the guest script failed, when it did: its status, and for a command the guest
    /// kernel's OOM killer ended, the guest memory and the option that raises it.
    pub fn script_failure(&self) -> Option<String> {
        if self.script_status == 0 {
            return None;
        }
        let log = self.results_dir.join("script.log");
        Some(match &self.oom_kill {
            Some(line) => format!(
                "lab phase 'guest-script': the guest script exited with status {}: the guest \
                 kernel's OOM killer ended a command ({line}); the guest has {} MiB of memory: \
                 raise it with --memory MIB (e.g. --memory {}); see {}",
                self.script_status,
                self.memory_mib,
                self.memory_mib.saturating_mul(2),
                log.display()
            ),
            None => format!(
                "lab phase 'guest-script': the guest script exited with status {}; see {}",
                self.script_status,
                log.display()
            ),
        })
    }

    /// Where the results are, which kernel booted, the script's status and the timings.
    pub fn to_text(&self) -> String {
        let mut text = format!("results:        {}\n", self.results_dir.display());
        if let Some(dir) = &self.run_dir {
            text.push_str(&format!("run directory:  {}\n", dir.display()));
        }
        text.push_str(&format!("kernel:         {}\n", self.kernel.display()));
        text.push_str(&format!("script status:  {}\n", self.script_status));
        text.push_str(&format!(
            "time:           boot {:.1} s, boot to result {:.1} s, total {:.1} s\n",
            self.boot_s, self.boot_to_result_s, self.total_s
        ));
        text
    }
}

/// The default guest script: a copy of the guest's /sys/bus/pci and its topology as JSON.
/// Also lists each device's p2pmem size (P2PDMA kernels only).
pub const DEFAULT_SCRIPT: &str = r#"pcielab snapshot /results/sysfs
pcielab topo --machine host --json > /results/topo.json
for d in /sys/bus/pci/devices/*; do
  [ -r "$d/p2pmem/size" ] && echo "${d##*/} $(cat "$d/p2pmem/size")"
done > /results/p2pmem.txt
true
"#;

/// Runs one guest for `topology`. `progress` sees each phase as it starts.
pub fn run(
    topology: &Topology,
    options: &RunOptions,
    progress: &mut dyn FnMut(Phase),
) -> Result<RunReport> {
    let started = Instant::now();
    progress(Phase::Prepare);
    let run_dir = runner::new_run_dir(&options.cache)?;
    let outcome = run_in(topology, options, &run_dir, started, progress);
    if !options.keep {
        let _ = fs::remove_dir_all(&run_dir);
    }
    let mut report = outcome?;
    if options.keep {
        report.run_dir = Some(run_dir);
    }
    Ok(report)
}

fn run_in(
    topology: &Topology,
    options: &RunOptions,
    run_dir: &Path,
    started: Instant,
    progress: &mut dyn FnMut(Phase),
) -> Result<RunReport> {
    let machine = MachineOptions {
        disk_dir: run_dir.to_path_buf(),
        ..options.machine.clone()
    };
    let qemu_plan: QemuPlan = plan(topology, &machine)?;
    guest::find_tool(&qemu_plan.argv[0], "qemu-system-x86", Phase::Prepare.name())?;

    progress(Phase::FetchKernel);
    let kernel = match &options.kernel {
        KernelChoice::Debian => guest::debian_kernel(&options.cache)?,
        KernelChoice::P2pdma => kernel::built_kernel(&options.cache).ok_or_else(|| {
            guest::phase_error(
                Phase::FetchKernel.name(),
                format!(
                    "no P2PDMA kernel in {}: build it first with `pcielab lab kernel`",
                    kernel::kernel_dir(&options.cache).display()
                ),
            )
        })?,
        KernelChoice::File(path) if path.is_file() => path.clone(),
        KernelChoice::File(path) => {
            return Err(Error::bad_input(format!(
                "--kernel {}: no such file",
                path.display()
            )))
        }
    };

    progress(Phase::GuestImage);
    let mut binaries = Vec::new();
    if let Some(pcielab) = &options.pcielab {
        binaries.push(pcielab.clone());
    }
    if options.with_fio {
        binaries.push(guest::find_tool("fio", "fio", Phase::GuestImage.name())?);
    }
    for tool in &options.tools {
        binaries.push(guest_tool(tool)?);
    }
    let image = ImageSpec {
        binaries,
        files: options.files.clone(),
        script: options
            .script
            .clone()
            .unwrap_or_else(|| DEFAULT_SCRIPT.to_string()),
    };
    let initrd = guest::build_initramfs(run_dir, &image)?;
    runner::create_disks(&qemu_plan)?;

    let results_dir = match &options.results_dir {
        Some(dir) => dir.clone(),
        None => options
            .cache
            .join("results")
            .join(run_dir.file_name().expect("run dirs have a name")),
    };
    let monitor = options.monitor_hook.then(|| run_dir.join("monitor.sock"));
    let outcome = runner::boot(
        &qemu_plan,
        &kernel,
        &initrd,
        monitor.as_deref(),
        options.timeout,
        &results_dir,
        progress,
    )?;
    if options.keep {
        let log = run_dir.join("console.log");
        fs::write(&log, outcome.console.join("\n")).map_err(|e| Error::io(&log, e))?;
    }
    let oom_kill = crate::input::read_capped(&results_dir.join("dmesg.txt"), 1 << 20)
        .ok()
        .and_then(|d| oom_kill_line(&String::from_utf8_lossy(&d)).map(str::to_string));
    Ok(RunReport {
        results_dir,
        run_dir: None,
        kernel,
        script_status: outcome.script_status,
        oom_kill,
        memory_mib: machine.memory_mib,
        boot_s: outcome.boot.as_secs_f64(),
        boot_to_result_s: outcome.boot_to_result.as_secs_f64(),
        total_s: started.elapsed().as_secs_f64(),
        limits: qemu_plan.limits,
        qemu_argv: qemu_plan.argv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options() -> RunOptions {
        RunOptions {
            machine: MachineOptions::default(),
            kernel: KernelChoice::Debian,
            script: None,
            files: Vec::new(),
            pcielab: None,
            with_fio: false,
            tools: Vec::new(),
            monitor_hook: false,
            timeout: Duration::from_secs(60),
            keep: false,
            results_dir: None,
            cache: "/tmp/cache".into(),
        }
    }

    #[test]
    fn tools_are_paths_or_names_on_path_and_a_missing_one_is_named() {
        let sh = guest_tool(Path::new("sh")).unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert_eq!(guest_tool(&sh).unwrap(), sh);
        let missing = guest_tool(Path::new("/nonexistent/lspci")).unwrap_err();
        assert_eq!(missing.exit_code(), 2);
        assert!(missing
            .to_string()
            .contains("--tool /nonexistent/lspci: no such file"));
        let unknown = guest_tool(Path::new("no-such-program-here")).unwrap_err();
        assert!(unknown
            .to_string()
            .contains("--tool no-such-program-here: not found on PATH"));
    }

    #[test]
    fn fio_job_is_checked_copied_and_run_after_the_script() {
        let dir = tempfile::tempdir().unwrap();
        let job = dir.path().join("seq.fio");
        fs::write(
            &job,
            "[seq]\nfilename=/dev/nvme0n1\nrw=read\nbs=1m\nsize=4m\n",
        )
        .unwrap();
        let mut with_script = RunOptions {
            script: Some("echo hi\n".into()),
            ..options()
        };
        with_script.add_fio_job(&job).unwrap();
        assert!(with_script.with_fio);
        assert_eq!(with_script.files.len(), 1);
        assert_eq!(with_script.files[0].host, job);
        assert_eq!(
            with_script.script.as_deref(),
            Some(
                "echo hi\n\nfio --output-format=json --output=/results/fio.json /pcielab/job.fio\n"
            )
        );
        let mut default_script = options();
        default_script.add_fio_job(&job).unwrap();
        assert!(default_script
            .script
            .unwrap()
            .starts_with("pcielab snapshot /results/sysfs\n"));

        fs::write(&job, "[seq]\nrw=sideways\n").unwrap();
        let e = options().add_fio_job(&job).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("lab phase 'prepare': "), "{e}");
        let missing = options()
            .add_fio_job(&dir.path().join("none.fio"))
            .unwrap_err();
        assert!(missing.to_string().contains("--fio "), "{missing}");
    }

    #[test]
    fn an_oom_killed_command_names_the_guest_memory_and_the_option() {
        let dmesg = "[   12.5] fio invoked oom-killer: gfp_mask=0x140cca\n\
                     [   12.6] Out of memory: Killed process 212 (fio) total-vm:1100000kB, anon-rss:950000kB\n";
        let line = oom_kill_line(dmesg).unwrap();
        assert!(line.contains("Killed process 212 (fio)"), "{line}");
        assert_eq!(oom_kill_line("[ 1.0] all fine\n"), None);
        let report = RunReport {
            results_dir: PathBuf::from("/r"),
            run_dir: None,
            kernel: PathBuf::from("/k"),
            script_status: 137,
            oom_kill: Some(line.to_string()),
            memory_mib: 1024,
            boot_s: 1.0,
            boot_to_result_s: 2.0,
            total_s: 3.0,
            limits: Vec::new(),
            qemu_argv: Vec::new(),
        };
        let msg = report.script_failure().unwrap();
        assert!(
            msg.contains("1024 MiB") && msg.contains("--memory") && msg.contains("(fio)"),
            "{msg}"
        );
    }

    #[test]
    fn report_text_lists_results_kernel_status_and_times() {
        let report = RunReport {
            results_dir: "/tmp/r".into(),
            run_dir: Some("/tmp/run".into()),
            kernel: "/tmp/bzImage".into(),
            script_status: 3,
            oom_kill: None,
            memory_mib: 1024,
            boot_s: 2.04,
            boot_to_result_s: 10.0,
            total_s: 15.55,
            limits: Vec::new(),
            qemu_argv: Vec::new(),
        };
        assert_eq!(
            report.to_text(),
            "results:        /tmp/r\nrun directory:  /tmp/run\nkernel:         /tmp/bzImage\n\
             script status:  3\ntime:           boot 2.0 s, boot to result 10.0 s, total 15.6 s\n"
        );
    }
}
