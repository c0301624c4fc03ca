//! One `pcielab stat` run on a simulated machine, the library side of the command: check the
//! request the way perf would (system-wide only, whole milliseconds, a sane bit-error rate),
//! open the machine, parse the workload, count the events over the simulated run and return the
//! counting outcome with the workload's own summary, ready for the perf-style or JSON report.

use std::path::Path;

use crate::error::{Error, Result};
use crate::machine::MachineSelector;
use crate::pmu::session::CountOptions;
use crate::pmu::stat::{count_events, StatOutcome};
use crate::pmu::EventSpec;

use super::workload::{self, Workload};
use super::{SimBackend, SimRun, SimulatedPcie};

/// What the user asked `stat` to do.
pub struct StatRequest<'a> {
    pub machine: &'a MachineSelector,
    /// Event groups, as parsed from the `-e` lists.
    pub groups: &'a [Vec<EventSpec>],
    /// `-a`: PCIe PMUs are uncore PMUs and count system-wide only.
    pub all_cpus: bool,
    pub mux_interval_ms: u64,
    /// `-I MS`: print counts every MS milliseconds.
    pub interval_ms: Option<u64>,
    /// Injected link bit-error rate.
    pub ber: Option<f64>,
    /// The workload's argv, after `--`.
    pub workload: &'a [String],
}

/// A finished simulated `stat` run.
pub struct StatRun {
    pub workload: Workload,
    pub outcome: StatOutcome,
    pub run: SimRun,
}

/// Runs `request` on its simulated machine; `read_file` reads fio job files.
pub fn run(request: &StatRequest, read_file: impl Fn(&Path) -> Result<String>) -> Result<StatRun> {
    if !request.all_cpus {
        return Err(Error::bad_input(
            "PCIe PMUs are uncore PMUs that count system-wide only: add -a",
        ));
    }
    if request.mux_interval_ms == 0 || request.interval_ms == Some(0) {
        return Err(Error::bad_input(
            "--mux-interval-ms and -I take a whole number of milliseconds >= 1",
        ));
    }
    // The live host counts through pmu::host (perf_event_open); reaching here with it is a
    // caller's mistake, not the user's. SimulatedPcie::open rejects every other machine.
    if let MachineSelector::Host { .. } = request.machine {
        return Err(Error::runtime(
            "sim::stat counts simulated machines; the live host counts through \
             pmu::host::run (pcielab stat --machine host)",
        ));
    }
    let mut machine = SimulatedPcie::open(request.machine)?;
    if let Some(ber) = request.ber {
        if !(0.0..1e-3).contains(&ber) {
            return Err(Error::bad_input(format!(
                "--ber {ber}: expected a bit-error rate from 0 to below 1e-3 (e.g. 1e-9)"
            )));
        }
        machine.config.ber = ber;
    }
    let work = workload::parse(request.workload, read_file)?;
    let ceilings = machine
        .pmus()
        .iter()
        .map(|p| p.root_port.and_then(|rp| machine.port_ceiling_mbps(rp)))
        .collect();
    let options = CountOptions {
        mux_interval_ns: request.mux_interval_ms * 1_000_000,
        interval_ns: request.interval_ms.map(|ms| ms * 1_000_000),
    };
    let mut backend = SimBackend::new(&machine, work.clone());
    let outcome = count_events(&mut backend, request.groups, &options, ceilings)?;
    let run = backend
        .run
        .take()
        .ok_or_else(|| Error::runtime("the simulation produced no run"))?;
    Ok(StatRun {
        workload: work,
        outcome,
        run,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::parse_event_list;

    fn request<'a>(
        machine: &'a MachineSelector,
        groups: &'a [Vec<EventSpec>],
        workload: &'a [String],
    ) -> StatRequest<'a> {
        StatRequest {
            machine,
            groups,
            all_cpus: true,
            mux_interval_ms: 4,
            interval_ms: None,
            ber: None,
            workload,
        }
    }

    fn no_files(p: &Path) -> Result<String> {
        Err(Error::bad_input(format!(
            "unexpected read of {}",
            p.display()
        )))
    }

    #[test]
    fn counts_a_simulated_read_and_refuses_what_perf_would() {
        let machine: MachineSelector = "sim:yitian710".parse().unwrap();
        let groups = parse_event_list("pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/").unwrap();
        let argv: Vec<String> = ["fio", "--filename=/dev/sda", "--rw=read", "--bs=1m"]
            .iter()
            .chain(&["--size=64m", "--name=r"])
            .map(|s| s.to_string())
            .collect();
        let done = run(&request(&machine, &groups, &argv), no_files).unwrap();
        // 64 MiB of reads arrive as Memory Writes: at least 64 MiB / 16 B payload units.
        let units = done.outcome.reports[0].raw_count;
        assert!(units >= 64 * 1024 * 1024 / 16, "{units}");
        assert!(units < 64 * 1024 * 1024 / 16 * 1001 / 1000, "{units}");

        let mut per_task = request(&machine, &groups, &argv);
        per_task.all_cpus = false;
        assert_eq!(run(&per_task, no_files).err().unwrap().exit_code(), 2);
        let host = MachineSelector::Host { root: "/".into() };
        assert_eq!(
            run(&request(&host, &groups, &argv), no_files)
                .err()
                .unwrap()
                .exit_code(),
            1
        );
        let mut noisy = request(&machine, &groups, &argv);
        noisy.ber = Some(0.5);
        let err = run(&noisy, no_files).err().unwrap();
        assert!(err.message().contains("--ber 0.5"), "{err}");
    }
}
