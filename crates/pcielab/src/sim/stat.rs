//! One `pcielab stat` run on a simulated machine, the library side of the command: check the
//! request the way perf would (system-wide only, whole milliseconds, a sane bit-error rate),
//! parse the workload, count the events over the simulated run and return the counting outcome
//! with the workload's own summary, ready for the perf-style or JSON report. Without events it
//! still runs the workload and returns its own result (dmatest's, fio's), which is how a machine
//! without PMUs, such as the Rockchip presets, reproduces the tables those tools printed. Here the simulator
//! implements `pmu::counters::Counters`, the counters side of a `sim:` machine.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::pmu::counters::{
    dry_run_is_for_hosts, Counters, PmuListing, StatDone, StatEnd, StatRequest,
};
use crate::pmu::host::wrap_plan;
use crate::pmu::list::only_pmu;
use crate::pmu::placement::{place_in, worst_case_events_per_s};
use crate::pmu::session::{CountOptions, DEFAULT_MUX_INTERVAL_NS};
use crate::pmu::stat::{count_events, resolve_groups, LinkRates, StatOutcome};
use crate::pmu::sysfs::PciePlace;
use crate::pmu::{no_rockchip_pmu, parse_event_list, PmuDevice, ResolvedEvent};

use super::counters::SimBackend;
use super::workload::{self, Workload};
use super::{SimRun, SimulatedPcie};

/// A finished simulated `stat` run.
pub(crate) struct StatRun {
    pub(crate) workload: Workload,
    pub(crate) outcome: StatOutcome,
    pub(crate) run: SimRun,
    /// How narrow counters were read (wrap carrying, wrap risk), as on a host.
    pub(crate) notes: Vec<String>,
}

impl SimulatedPcie {
    /// Runs `request` on this machine (a copy of it, with the request's bit-error rate).
    pub(crate) fn run_stat(&self, request: &StatRequest) -> Result<StatRun> {
        if request.workload.is_empty() {
            return Err(Error::bad_input(
                "no workload: give the simulated job after `--` (e.g. -- sleep 1, -- fio ...)",
            ));
        }
        let mut groups = Vec::new();
        for e in request.events {
            groups.extend(parse_event_list(e).map_err(|err| workload_hint(err, e))?);
        }
        if !request.all_cpus && !groups.is_empty() {
            return Err(Error::bad_input(
                "PCIe PMUs are uncore PMUs that count system-wide only: add -a",
            ));
        }
        let mux_interval_ms = request
            .mux_interval_ms
            .unwrap_or(DEFAULT_MUX_INTERVAL_NS / 1_000_000);
        if mux_interval_ms == 0 || request.interval_ms == Some(0) {
            return Err(Error::bad_input(
                "--mux-interval-ms and -I take a whole number of milliseconds >= 1",
            ));
        }
        let mut machine = self.clone();
        if let Some(ber) = request.ber {
            if !(0.0..1e-3).contains(&ber) {
                return Err(Error::bad_input(format!(
                    "--ber {ber}: expected a bit-error rate from 0 to below 1e-3 (e.g. 1e-9)"
                )));
            }
            machine.config.ber = ber;
        }
        let work = workload::parse(request.workload, request.read_file)?;
        let pmus = machine.pmus();
        let resolved = resolve_groups(&pmus, &groups).map_err(|err| {
            let unbound = groups
                .iter()
                .flatten()
                .any(|spec| !pmus.iter().any(|p| p.answers_to(&spec.pmu)));
            match no_rockchip_pmu(&machine.topology) {
                Some(why) if unbound => Error::bad_input(format!("{err}: {why}")),
                _ => err,
            }
        })?;
        // The spec's own model only where it has a [platform] table: defaults predict nothing.
        let platform = request
            .platform
            .or(Some(&machine.platform).filter(|p| p.given));
        let links = pmus
            .iter()
            .map(|p| {
                p.root_port
                    .and_then(|rp| LinkRates::of_port(&machine.topology, rp, platform))
            })
            .collect();
        let (read_period, notes) = machine.wrap_reads(&pmus, &resolved);
        let options = CountOptions {
            mux_interval_ns: mux_interval_ms * 1_000_000,
            interval_ns: request.interval_ms.map(|ms| ms * 1_000_000),
            read_period_ns: read_period.map(|p| p.as_nanos() as u64),
        };
        let mut backend = SimBackend::new(&machine, work.clone());
        let outcome = count_events(&mut backend, &resolved, &options, links)?;
        let run = backend
            .run
            .take()
            .ok_or_else(|| Error::runtime("the simulation produced no run"))?;
        Ok(StatRun {
            workload: work,
            outcome,
            run,
            notes,
        })
    }

    /// How pcielab reads the narrow (event-group) counters among `events` so their wraps are
    /// carried, as on a host: twice per worst-case wrap time of the port's link (10 ms at the
    /// shortest, with a warning where that is too slow), and the notes saying so.
    fn wrap_reads(
        &self,
        pmus: &[PmuDevice],
        events: &[Vec<ResolvedEvent>],
    ) -> (Option<Duration>, Vec<String>) {
        let mut period: Option<Duration> = None;
        let mut notes = Vec::new();
        for event in events.iter().flatten() {
            let pmu = &pmus[event.device];
            let bits = event.def.group.counter_bits(pmu.family);
            if bits >= 64 {
                continue;
            }
            let placement = pmu
                .root_port
                .map(|bdf| place_in(&PciePlace::RootPort { bdf }, &self.topology));
            let rate = worst_case_events_per_s(placement.as_ref());
            let (read_every, note) = wrap_plan(&event.display, bits, rate);
            period = Some(period.map_or(read_every, |p| p.min(read_every)));
            notes.push(note);
        }
        (period, notes)
    }
}

/// A bad `-e` list that names a simulated workload program was most likely meant as the
/// workload: say to put it after `--`, as the host does for a program on PATH.
fn workload_hint(err: Error, events: &str) -> Error {
    match events
        .split(',')
        .find(|word| workload::PROGRAMS.contains(word))
    {
        Some(program) => Error::bad_input(format!(
            "{err}. '{program}' is a simulated workload: write it after `--` (pcielab stat \
             --machine sim:… -a -e EVENT -- {program} ...)"
        )),
        None => err,
    }
}

/// The simulator's PMUs are the counters of a `sim:` machine.
impl Counters for SimulatedPcie {
    fn pcie_pmus(&self) -> Result<Vec<PmuDevice>> {
        Ok(self.pmus())
    }

    fn list(&self, only: Option<&str>) -> Result<PmuListing> {
        Ok(PmuListing::Catalog(only_pmu(self.pmus(), only)?))
    }

    fn dry_run(&self, _events: &[String]) -> Result<String> {
        Err(dry_run_is_for_hosts())
    }

    fn stat(&self, request: &StatRequest) -> Result<StatEnd> {
        let done = self.run_stat(request)?;
        let mut workload_json = serde_json::to_value(&done.run.summary)
            .map_err(|e| Error::runtime(format!("JSON encoding failed: {e}")))?;
        if let Some(summary) = workload_json.as_object_mut() {
            summary.insert("notes".into(), serde_json::json!(done.notes));
        }
        Ok(StatEnd::Counted(StatDone {
            workload_report: done.run.summary.render(&done.workload),
            workload_json,
            outcome: done.outcome,
            notes: done.notes,
            exit_code: 0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn request<'a>(events: &'a [String], workload: &'a [String]) -> StatRequest<'a> {
        StatRequest {
            events,
            all_cpus: true,
            mux_interval_ms: None,
            interval_ms: None,
            ber: None,
            workload,
            read_file: &no_files,
            platform: None,
            interrupt: None,
        }
    }

    fn no_files(p: &Path) -> Result<String> {
        Err(Error::bad_input(format!(
            "unexpected read of {}",
            p.display()
        )))
    }

    fn yitian() -> SimulatedPcie {
        let spec = crate::topology::spec::preset_for_tests("yitian710");
        SimulatedPcie::new(spec.name, spec.topology, &spec.sim, &spec.platform_table).unwrap()
    }

    #[test]
    fn counts_a_simulated_read_and_refuses_what_perf_would() {
        let machine = yitian();
        let events = vec!["pcie_bdf_200/Rx_PCIe_TLP_Data_Payload/".to_string()];
        let argv: Vec<String> = ["fio", "--filename=/dev/sda", "--rw=read", "--bs=1m"]
            .iter()
            .chain(&["--size=64m", "--name=r"])
            .map(|s| s.to_string())
            .collect();
        let done = machine.run_stat(&request(&events, &argv)).unwrap();
        // 64 MiB of reads arrive as Memory Writes: at least 64 MiB / 16 B payload units.
        let units = done.outcome.reports[0].raw_count;
        assert!(units >= 64 * 1024 * 1024 / 16, "{units}");
        assert!(units < 64 * 1024 * 1024 / 16 * 1001 / 1000, "{units}");

        let mut per_task = request(&events, &argv);
        per_task.all_cpus = false;
        assert_eq!(machine.run_stat(&per_task).err().unwrap().exit_code(), 2);
        let mut noisy = request(&events, &argv);
        noisy.ber = Some(0.5);
        let err = machine.run_stat(&noisy).err().unwrap();
        assert!(err.message().contains("--ber 0.5"), "{err}");
        assert_eq!(
            Counters::dry_run(&machine, &events)
                .unwrap_err()
                .exit_code(),
            2
        );
    }
}
