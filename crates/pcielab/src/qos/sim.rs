//! The simulated resctrl machine: the kernel model ([`Resctrl`]) of a preset, its simulated
//! processes, monitor counters and clock, and the partitioning model (`Engine`) that makes the
//! counters move. Its state (groups, tasks, processes, counters, clock) is saved as JSON in a
//! state file so that one `pcielab qos …` invocation sees what the previous one did; cache
//! contents are not saved, so each invocation that runs the model first brings a cold cache to
//! steady state with zero-length steps (no bytes counted, clock unchanged).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::backend::{MonReading, Op, QosBackend};
use super::engine::{Engine, EngineConfig, Step};
use super::presets::Preset;
use super::resctrl::{GroupRef, Resctrl};
use super::schemata;
use super::workload::{self, Workload};
use crate::error::{Error, Result};
use crate::linux::cpuset::CpuSet;

/// The most model steps one run of the simulated machine takes (each costs cache accesses).
pub(crate) const MAX_STEPS: usize = 100_000;

/// The longest model step a wait (`qos monitor -I`) takes.
const WAIT_STEP_S: f64 = 0.5;
/// A monitor id's counters in one domain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MonCounter {
    /// The monitor id.
    pub rmid: u32,
    /// The L3 or memory domain.
    pub domain: u32,
    /// Bytes of L3 it occupies.
    pub llc_occupancy: u64,
    /// Memory bandwidth bytes counted, all nodes.
    pub mbm_total_bytes: u64,
    pub(crate) mbm_local_bytes: u64,
}

/// Everything a state file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimState {
    /// Preset name.
    pub(crate) machine: String,
    /// The simulated mount.
    pub resctrl: Resctrl,
    /// pid → command line of each simulated process.
    pub(crate) processes: BTreeMap<u32, String>,
    pub(crate) next_pid: u32,
    pub(crate) clock_s: f64,
    /// The monitor counters (RMIDs) and what they have counted.
    pub counters: Vec<MonCounter>,
}

impl SimState {
    /// Read a state file's text (`origin` names it) for `preset`, checked before use.
    pub fn parse(text: &str, origin: &str, preset: &Preset) -> Result<SimState> {
        let saved: SimState = serde_json::from_str(text).map_err(|e| {
            Error::bad_input(format!("{origin}: not a pcielab sim state file: {e}"))
        })?;
        if saved.machine != preset.name {
            return Err(Error::bad_input(format!(
                "{origin}: state of sim:{}, not of sim:{}",
                saved.machine, preset.name
            )));
        }
        saved
            .check(preset)
            .map_err(|why| Error::bad_input(format!("state file {origin}: {why}")))?;
        Ok(saved)
    }

    /// A state file is input: check that it describes a machine the preset could be in (its
    /// `info/` is the preset's, the root group comes first, names, ids, pids, CPUs and schemata
    /// are ones the kernel model could have produced) before anything indexes into it.
    fn check(&self, preset: &Preset) -> std::result::Result<(), String> {
        let rs = &self.resctrl;
        if rs.info != preset.info(false) && rs.info != preset.info(true) {
            return Err(format!(
                "resctrl.info is not what sim:{} shows",
                preset.name
            ));
        }
        let root = rs
            .groups
            .first()
            .ok_or("resctrl.groups is empty: the root group must come first")?;
        if !root.name.is_empty() || root.closid != 0 {
            return Err("resctrl.groups[0] must be the root group (name \"\", closid 0)".into());
        }
        let closids = rs.info.closids_supported();
        let rmids = rs.info.mon.as_ref().map_or(1, |m| m.num_rmids.max(1));
        let online = CpuSet::range(0, preset.nr_cpus() - 1);
        let mut names = std::collections::BTreeSet::new();
        for (i, g) in rs.groups.iter().enumerate() {
            let at = format!("resctrl.groups[{i}]");
            if i > 0 && GroupRef::parse(&g.name) != Some(GroupRef::ctrl(&g.name)) {
                return Err(format!(
                    "{at}.name '{}' is not a group name resctrl accepts",
                    crate::text::printable(&g.name)
                ));
            }
            if !names.insert(&g.name) {
                return Err(format!("{at}.name '{}' appears twice", g.name));
            }
            if g.closid >= closids || g.rmid >= rmids {
                return Err(format!(
                    "{at}: closid {} / rmid {} out of range: expected below {closids} / {rmids}",
                    g.closid, g.rmid
                ));
            }
            schemata::parse_write(&g.schemata.format(), &rs.info, &|_, _, _| None)
                .map_err(|rej| format!("{at}.schemata: {rej}"))?;
            let mut mon_names = std::collections::BTreeSet::new();
            for m in &g.mon_groups {
                if crate::input::path_component("monitor group", &m.name).is_err()
                    || !mon_names.insert(&m.name)
                    || m.rmid >= rmids
                {
                    return Err(format!("{at}.mon_groups: '{}' (rmid {}) is not a valid, unique monitor group below rmid {rmids}", crate::text::printable(&m.name), m.rmid));
                }
            }
            let cpus = g.mon_groups.iter().flat_map(|m| &m.cpus.0).chain(&g.cpus.0);
            let tasks = g.mon_groups.iter().flat_map(|m| &m.tasks).chain(&g.tasks);
            if let Some(cpu) = cpus.into_iter().find(|c| !online.0.contains(c)) {
                return Err(format!(
                    "{at}: CPU {cpu} is not one of sim:{}'s CPUs {}",
                    preset.name,
                    online.to_list()
                ));
            }
            if let Some(pid) = tasks
                .into_iter()
                .find(|p| **p != 1 && !self.processes.contains_key(p))
            {
                return Err(format!("{at}: task {pid} is not a simulated process"));
            }
        }
        let last = self.processes.keys().next_back().copied().unwrap_or(1);
        if !(self.next_pid > last && self.next_pid <= MAX_PID) {
            return Err(format!(
                "next_pid {} must lie above every pid ({last}) and at most {MAX_PID}",
                self.next_pid
            ));
        }
        if !(self.clock_s.is_finite() && self.clock_s >= 0.0) {
            return Err(format!("clock_s {} is not a time", self.clock_s));
        }
        let domains = rs.info.mon.as_ref().map_or(0, |_| preset.nodes as usize);
        if self.counters.len() > rmids as usize * domains.max(1) {
            return Err(format!(
                "{} counters for {rmids} monitor ids",
                self.counters.len()
            ));
        }
        Ok(())
    }
}

/// The kernel's default pid_max ceiling (PID_MAX_LIMIT on 64-bit): simulated pids stay below it.
pub(crate) const MAX_PID: u32 = 4_194_304;

/// Zero-length steps run before counting when the model starts cold.
const WARMUP_STEPS: usize = 12;

/// A simulated resctrl machine (MPAM/RDT): its processes, groups and cache/bandwidth engine; the PCIe traffic side is `sim::SimulatedPcie`.
pub struct SimulatedResctrl {
    pub(crate) preset: &'static Preset,
    /// Everything the simulated machine holds (saved in `--state`).
    pub state: SimState,
    path: Option<PathBuf>,
    engine: Option<Engine>,
    config: EngineConfig,
}

impl SimulatedResctrl {
    /// A freshly booted machine: resctrl mounted (with CDP if asked), only `init` (pid 1) running.
    pub fn boot(preset: &'static Preset, cdp: bool) -> SimulatedResctrl {
        let resctrl = Resctrl::mount(
            preset.info(cdp),
            CpuSet::range(0, preset.nr_cpus() - 1),
            [1].into(),
        );
        SimulatedResctrl {
            preset,
            state: SimState {
                machine: preset.name.to_string(),
                resctrl,
                processes: BTreeMap::new(),
                next_pid: 1000,
                clock_s: 0.0,
                counters: Vec::new(),
            },
            path: None,
            engine: None,
            config: EngineConfig::default(),
        }
    }

    /// The `preset` machine, continued from `state` when that file exists (and saved there by
    /// [`QosBackend::save`]). Only a path with nothing at it starts a fresh machine: a dangling
    /// or looping link, or a path that cannot be looked at, is bad input like any unreadable
    /// state file.
    pub(crate) fn open(
        preset: &'static Preset,
        state: Option<&Path>,
        cdp: bool,
    ) -> Result<SimulatedResctrl> {
        let nothing_there = |p: &Path| matches!(p.symlink_metadata(), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        let mut sim = match state.filter(|p| !nothing_there(p)) {
            Some(path) => {
                let text = crate::input::read_input_file(path, "state file")?;
                let saved = SimState::parse(&text, &path.display().to_string(), preset)?;
                let mut sim = SimulatedResctrl::boot(preset, cdp);
                sim.state = saved;
                sim
            }
            None => SimulatedResctrl::boot(preset, cdp),
        };
        sim.path = state.map(Path::to_path_buf);
        Ok(sim)
    }

    pub(crate) fn with_config(mut self, config: EngineConfig) -> SimulatedResctrl {
        self.config = config;
        self.engine = None;
        self
    }

    /// Start a simulated process (a command as in the seed); it joins the root group.
    pub fn spawn(&mut self, command: &str) -> Result<u32> {
        workload::parse(command, self.preset)?;
        let pid = self.state.next_pid;
        if pid >= MAX_PID {
            return Err(Error::runtime(format!(
                "out of simulated pids: every pid below {MAX_PID} has been used on this machine"
            )));
        }
        self.state.next_pid += 1;
        self.state.processes.insert(pid, command.to_string());
        self.state.resctrl.groups[0].tasks.insert(pid);
        self.engine = None;
        Ok(pid)
    }

    /// End a simulated process; it leaves whatever group held it.
    pub fn kill(&mut self, pid: u32) -> Result<()> {
        if self.state.processes.remove(&pid).is_none() {
            return Err(Error::bad_input(format!("no simulated process {pid}")));
        }
        for g in self.state.resctrl.groups.iter_mut() {
            g.tasks.remove(&pid);
            for m in g.mon_groups.iter_mut() {
                m.tasks.remove(&pid);
            }
        }
        self.engine = None;
        Ok(())
    }

    fn workloads(&self) -> Result<Vec<(u32, Workload)>> {
        self.state
            .processes
            .iter()
            .map(|(pid, cmd)| Ok((*pid, workload::parse(cmd, self.preset)?)))
            .collect()
    }

    /// Run the model for `seconds` in steps of `step_s` (at most `MAX_STEPS`); returns every step.
    pub(crate) fn advance(&mut self, seconds: f64, step_s: f64) -> Result<Vec<Step>> {
        let mut engine = match self.engine.take() {
            Some(engine) => engine,
            None => {
                let mut engine = Engine::new(self.preset, self.config);
                engine.set_processes(&self.workloads()?);
                for _ in 0..WARMUP_STEPS {
                    engine.step(&self.state.resctrl, 0.0);
                }
                engine
            }
        };
        let steps = (seconds / step_s).round().max(1.0);
        if !(seconds.is_finite() && step_s > 0.0 && steps <= MAX_STEPS as f64) {
            return Err(Error::bad_input(format!(
                "simulating {seconds} s in steps of {step_s} s: expected finite times and at most {MAX_STEPS} steps"
            )));
        }
        let steps = steps as usize;
        let dt = seconds / steps as f64;
        let mut out = Vec::with_capacity(steps);
        for _ in 0..steps {
            let step = engine.step(&self.state.resctrl, dt);
            self.account(&step);
            out.push(step);
        }
        self.engine = Some(engine);
        Ok(out)
    }

    fn counter(&mut self, rmid: u32, domain: u32) -> &mut MonCounter {
        let i = match self
            .state
            .counters
            .iter()
            .position(|c| c.rmid == rmid && c.domain == domain)
        {
            Some(i) => i,
            None => {
                self.state.counters.push(MonCounter {
                    rmid,
                    domain,
                    ..MonCounter::default()
                });
                self.state.counters.len() - 1
            }
        };
        &mut self.state.counters[i]
    }

    fn account(&mut self, step: &Step) {
        self.state.clock_s += step.dt_s;
        for c in self.state.counters.iter_mut() {
            c.llc_occupancy = 0;
        }
        for (&(rmid, dom), &bytes) in &step.occupancy {
            self.counter(rmid, dom).llc_occupancy = bytes;
        }
        let scale = self.preset.mbm_scale;
        let local = self.preset.mbm_local;
        for (&(rmid, dom), &(total, loc)) in &step.traffic {
            let c = self.counter(rmid, dom);
            c.mbm_total_bytes += (total * scale) as u64;
            if local {
                c.mbm_local_bytes += (loc * scale) as u64;
            }
        }
    }

    /// Sum of counters over a set of monitor ids in one domain.
    fn sum(&self, rmids: &[u32], domain: u32) -> MonCounter {
        let mut out = MonCounter {
            domain,
            ..MonCounter::default()
        };
        for c in self
            .state
            .counters
            .iter()
            .filter(|c| c.domain == domain && rmids.contains(&c.rmid))
        {
            out.llc_occupancy += c.llc_occupancy;
            out.mbm_total_bytes += c.mbm_total_bytes;
            out.mbm_local_bytes += c.mbm_local_bytes;
        }
        out
    }
}

impl QosBackend for SimulatedResctrl {
    fn name(&self) -> String {
        format!("sim:{}", self.preset.name)
    }

    fn read(&mut self) -> Result<Resctrl> {
        Ok(self.state.resctrl.clone())
    }

    fn perform(&mut self, op: &Op) -> Result<()> {
        op.apply_to(&mut self.state.resctrl)
    }

    fn mon_data(&mut self) -> Result<Vec<MonReading>> {
        let rs = &self.state.resctrl;
        let local = self.preset.mbm_local;
        let mut out = Vec::new();
        for g in &rs.groups {
            let mut groups: Vec<(String, Vec<u32>)> = vec![(
                if g.name.is_empty() {
                    "/".into()
                } else {
                    g.name.clone()
                },
                std::iter::once(g.rmid)
                    .chain(g.mon_groups.iter().map(|m| m.rmid))
                    .collect(),
            )];
            for m in &g.mon_groups {
                let name = if g.name.is_empty() {
                    format!("mon_groups/{}", m.name)
                } else {
                    format!("{}/{}", g.name, m.name)
                };
                groups.push((name, vec![m.rmid]));
            }
            for (name, rmids) in groups {
                for d in 0..self.preset.nodes {
                    let c = self.sum(&rmids, d);
                    out.push(MonReading {
                        group: name.clone(),
                        domain: d,
                        llc_occupancy: Some(c.llc_occupancy),
                        mbm_total_bytes: Some(c.mbm_total_bytes),
                        mbm_local_bytes: local.then_some(c.mbm_local_bytes),
                    });
                }
            }
        }
        Ok(out)
    }

    fn wait(&mut self, interval: Duration) -> Result<()> {
        let seconds = interval.as_secs_f64();
        self.advance(seconds, seconds.min(WAIT_STEP_S))?;
        Ok(())
    }

    fn check_waits(&self, interval: Duration, count: u32) -> Result<()> {
        let seconds = interval.as_secs_f64();
        let per_wait = (seconds / seconds.min(WAIT_STEP_S)).round().max(1.0) as u64;
        let steps = per_wait * u64::from(count);
        if steps > MAX_STEPS as u64 {
            return Err(Error::bad_input(format!(
                "{count} intervals of {} ms are {steps} model steps of at most {WAIT_STEP_S} s; a simulated machine runs at most {MAX_STEPS}: lower --count or -I",
                interval.as_millis()
            )));
        }
        Ok(())
    }

    fn record_refusal(&mut self, last_cmd_status: &str) -> Result<()> {
        self.state.resctrl.last_cmd_status = last_cmd_status.to_string();
        self.save()
    }

    fn save(&mut self) -> Result<()> {
        if let Some(path) = &self.path {
            let text = serde_json::to_string_pretty(&self.state)
                .map_err(|e| Error::runtime(format!("serialising sim state: {e}")))?;
            crate::input::write_output(path, text.as_bytes())?;
        }
        Ok(())
    }
}
