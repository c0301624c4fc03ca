//! Timed experiments on a simulated machine, described in TOML (`scenarios/*.toml`): groups with
//! schemata templates, seed-style commands placed in groups, what to measure, and either a sweep
//! over values substituted for `{v}` (one fresh machine per value) or a timeline with schemata
//! changes at given times. Every change goes through the kernel model, so a scenario that asks
//! for something the kernel would refuse fails with the kernel's message.

use super::sim::MAX_STEPS;
use crate::input::{duration_s, in_range, read_input_file, readable_f64};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::backend::{MonReading, Op, QosBackend};
use super::engine::{EngineConfig, Step};
use super::presets::Preset;
use super::sim::SimulatedResctrl;
use crate::error::{Error, Result};

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub(crate) name: String,
    pub(crate) title: String,
    /// `sim:PRESET`.
    pub(crate) machine: String,
    /// The seed's section and commands this reproduces.
    #[serde(default)]
    pub seed: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    #[serde(default)]
    pub(crate) y2_label: Option<String>,
    /// How a point's x is derived: `ways` (bits set in the value, read as a hex mask), `value`
    /// (the value as a number) or `time` (seconds; timelines).
    pub(crate) x: XFrom,
    /// Sweeps: seconds measured per value (after the model's warm-up).
    #[serde(default = "default_measure")]
    pub(crate) measure_s: f64,
    /// Timelines: total length.
    #[serde(default)]
    pub(crate) duration_s: f64,
    #[serde(default = "default_step")]
    pub(crate) step_s: f64,
    #[serde(default)]
    pub(crate) sample: Option<u32>,
    #[serde(default)]
    pub(crate) turnover: Option<f64>,
    pub(crate) series: Vec<Series>,
}

fn default_measure() -> f64 {
    2.0
}

fn default_step() -> f64 {
    0.5
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum XFrom {
    Ways,
    Value,
    Time,
}

/// One curve family: a setup run once per value.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Series {
    #[serde(default)]
    pub(crate) values: Vec<String>,
    #[serde(default)]
    pub(crate) groups: Vec<GroupSetup>,
    pub(crate) jobs: Vec<JobSetup>,
    pub(crate) metrics: Vec<Metric>,
    #[serde(default)]
    pub(crate) events: Vec<Event>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GroupSetup {
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) schemata: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JobSetup {
    pub(crate) name: String,
    pub(crate) command: String,
    #[serde(default)]
    pub(crate) group: Option<String>,
}

/// A schemata change during a timeline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Event {
    pub(crate) at_s: f64,
    pub(crate) group: String,
    pub(crate) schemata: String,
}

/// What to plot.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Metric {
    pub(crate) label: String,
    pub(crate) kind: MetricKind,
    #[serde(default)]
    pub(crate) group: Option<String>,
    #[serde(default)]
    pub(crate) job: Option<String>,
    /// Domains summed (default: all).
    #[serde(default)]
    pub(crate) domains: Option<Vec<u32>>,
    /// Plot against the right-hand axis.
    #[serde(default)]
    pub(crate) right_axis: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum MetricKind {
    /// A group's `llc_occupancy` (KiB), control group including its monitor groups.
    Occupancy,
    /// The capacity a group's masks allow (KiB): ways × way size.
    IdealOccupancy,
    /// A group's `mbm_total_bytes` rate (MB/s): what the monitor says.
    Mbm,
    /// A job's read bandwidth (MB/s): what the benchmark itself prints.
    Bandwidth,
    /// A job's mean time per access (ns): what `lat_mem_rd` prints.
    Latency,
    /// A job's operations per second (services).
    Throughput,
}

/// One plotted line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Line {
    pub(crate) label: String,
    pub(crate) kind: MetricKind,
    pub(crate) right_axis: bool,
    /// (x, y) in x order.
    pub points: Vec<(f64, f64)>,
}

impl Line {
    /// y at x (exact match).
    pub(crate) fn at(&self, x: f64) -> Option<f64> {
        self.points.iter().find(|p| p.0 == x).map(|p| p.1)
    }
}

/// A finished run.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Outcome {
    pub(crate) name: String,
    pub(crate) title: String,
    pub(crate) machine: String,
    pub(crate) x_label: String,
    pub(crate) y_label: String,
    pub(crate) y2_label: Option<String>,
    /// One line per workload (or group) over the scenario's steps.
    pub lines: Vec<Line>,
    /// Timelines: (time, what changed) for each event.
    pub(crate) markers: Vec<(f64, String)>,
    /// Host wall-clock seconds the simulation took.
    pub wall_s: f64,
}

impl Outcome {
    /// The line labelled `label`, if any.
    #[cfg(test)]
    pub(crate) fn line(&self, label: &str) -> Option<&Line> {
        self.lines.iter().find(|l| l.label == label)
    }

    /// Every x any line has a point at, in order, once: the rows of a table of the outcome.
    pub(crate) fn xs(&self) -> Vec<f64> {
        let mut xs: Vec<f64> = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.0))
            .collect();
        xs.sort_by(|a, b| a.total_cmp(b));
        xs.dedup();
        xs
    }

    /// An aligned text table: one row per x, one column per line, each headed by its label and
    /// the unit of the axis it is drawn on (a right-axis throughput is not in the left axis' KiB).
    pub fn table(&self) -> String {
        let mut header = vec![self.x_label.clone()];
        header.extend(self.lines.iter().map(|l| {
            let axis = if l.right_axis {
                self.y2_label.as_deref().unwrap_or(&self.y_label)
            } else {
                &self.y_label
            };
            match axis_unit(axis) {
                Some(unit) if !l.label.ends_with(')') => format!("{} ({unit})", l.label),
                _ => l.label.clone(),
            }
        }));
        let mut rows = vec![header];
        for x in self.xs() {
            let mut row = vec![format_num(x)];
            row.extend(
                self.lines
                    .iter()
                    .map(|l| l.at(x).map_or("-".into(), format_num)),
            );
            rows.push(row);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = format!("{} ({}; y: {})\n", self.title, self.machine, self.y_label);
        for row in rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, v)| format!("{:>w$}", v, w = widths[c]))
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out
    }
}

/// The unit an axis label ends with in parentheses: `KiB` of "L3 occupancy (KiB)".
fn axis_unit(label: &str) -> Option<&str> {
    let inner = label.strip_suffix(')')?;
    Some(&inner[inner.rfind('(')? + 1..])
}

fn format_num(v: f64) -> String {
    // Whole numbers and large values without decimals; small fractions with two.
    if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

impl Scenario {
    /// Parse a scenario file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scenario> {
        let s: Scenario = toml::from_str(text)
            .map_err(|e| Error::bad_input(format!("{origin}: {}", e.to_string().trim())))?;
        s.check(origin)?;
        Ok(s)
    }

    /// The scenario file at `path` (TOML), checked; bad input names the field.
    pub fn load(path: &std::path::Path) -> Result<Scenario> {
        let text = read_input_file(path, "scenario")?;
        Scenario::parse(&text, &path.display().to_string())
    }

    /// The scenario's machine: a simulated resctrl machine (`sim:mpam-seed`), the only kind an
    /// experiment with simulated workloads can run on.
    fn preset(&self) -> Result<&'static Preset> {
        match self.machine.strip_prefix("sim:") {
            Some(name) => Preset::by_name(name),
            None => Err(Error::bad_input(format!(
                "'{}' is not a simulated resctrl machine: scenarios run simulated workloads, on {}",
                self.machine,
                Preset::selectors()
            ))),
        }
    }

    fn check(&self, origin: &str) -> Result<()> {
        self.preset()
            .map_err(|e| Error::bad_input(format!("{origin}: machine: {e}")))?;
        if self.series.is_empty() {
            return Err(Error::bad_input(format!("{origin}: no [[series]]")));
        }
        let field = |name: &str| format!("{origin}: {name}");
        duration_s(&field("measure_s"), self.measure_s, true)?;
        duration_s(&field("step_s"), self.step_s, true)?;
        duration_s(&field("duration_s"), self.duration_s, false)?;
        if self.x == XFrom::Time && self.duration_s <= 0.0 {
            return Err(Error::bad_input(format!(
                "{origin}: x = \"time\" needs duration_s > 0"
            )));
        }
        for (name, span) in [
            ("measure_s", self.measure_s),
            ("duration_s", self.duration_s),
        ] {
            if span / self.step_s > MAX_STEPS as f64 {
                return Err(Error::bad_input(format!(
                    "{origin}: {name} / step_s = {span} / {} is more than {MAX_STEPS} model steps: raise step_s",
                    readable_f64(self.step_s)
                )));
            }
        }
        if let Some(sample) = self.sample {
            in_range(&field("sample"), sample, 1..=4096)?;
        }
        if let Some(turnover) = self.turnover {
            if !(turnover.is_finite() && (0.01..=100.0).contains(&turnover)) {
                return Err(Error::bad_input(format!(
                    "{origin}: turnover: {turnover} is out of range: expected 0.01..=100"
                )));
            }
        }
        for (i, s) in self.series.iter().enumerate() {
            if self.x != XFrom::Time && s.values.is_empty() {
                return Err(Error::bad_input(format!(
                    "{origin}: series {}: values is empty",
                    i + 1
                )));
            }
            for m in &s.metrics {
                let needs_group = matches!(
                    m.kind,
                    MetricKind::Occupancy | MetricKind::IdealOccupancy | MetricKind::Mbm
                );
                let ok = if needs_group {
                    m.group
                        .as_ref()
                        .is_some_and(|g| s.groups.iter().any(|x| &x.name == g))
                } else {
                    m.job
                        .as_ref()
                        .is_some_and(|j| s.jobs.iter().any(|x| &x.name == j))
                };
                if !ok {
                    return Err(Error::bad_input(format!(
                        "{origin}: metric '{}': {:?} needs {} naming one of this series' {}",
                        m.label,
                        m.kind,
                        if needs_group { "group" } else { "job" },
                        if needs_group { "groups" } else { "jobs" }
                    )));
                }
            }
        }
        // Every series value is a run of its own; together they are one run's worth of steps.
        let per_run = if self.x == XFrom::Time {
            self.duration_s
        } else {
            self.measure_s
        } / self.step_s;
        let runs: usize = self.series.iter().map(|s| s.values.len().max(1)).sum();
        let total = runs as f64 * per_run.round().max(1.0);
        if total > MAX_STEPS as f64 {
            return Err(Error::bad_input(format!(
                "{origin}: {runs} series values of {} model steps each are {total} steps; at most {MAX_STEPS} in all: fewer values or a larger step_s",
                per_run.round().max(1.0)
            )));
        }
        Ok(())
    }

    fn config(&self) -> EngineConfig {
        let d = EngineConfig::default();
        EngineConfig {
            sample: self.sample.unwrap_or(d.sample),
            turnover: self.turnover.unwrap_or(d.turnover),
        }
    }

    /// Run every series and value.
    pub fn run(&self) -> Result<Outcome> {
        let started = Instant::now();
        let preset = self.preset()?;
        let mut lines: Vec<Line> = Vec::new();
        for series in &self.series {
            let values: Vec<String> = if self.x == XFrom::Time && series.values.is_empty() {
                vec![String::new()]
            } else {
                series.values.clone()
            };
            let first_line = lines.len();
            for m in &series.metrics {
                lines.push(Line {
                    label: m.label.clone(),
                    kind: m.kind,
                    right_axis: m.right_axis,
                    points: Vec::new(),
                });
            }
            for value in &values {
                let mut sim =
                    SimulatedResctrl::open(preset, None, false)?.with_config(self.config());
                let pids = self.setup(&mut sim, series, value)?;
                if self.x == XFrom::Time {
                    self.timeline(&mut sim, series, value, &pids, &mut lines[first_line..])?;
                } else {
                    let x = match self.x {
                        XFrom::Ways => u64::from_str_radix(value.trim_start_matches("0x"), 16)
                            .map(|m| m.count_ones() as f64)
                            .map_err(|_| {
                                Error::bad_input(format!(
                                    "{}: value '{value}' is not a hex mask",
                                    self.name
                                ))
                            })?,
                        _ => value.parse::<f64>().map_err(|_| {
                            Error::bad_input(format!(
                                "{}: value '{value}' is not a number",
                                self.name
                            ))
                        })?,
                    };
                    let before = sim.mon_data()?;
                    let steps = sim.advance(self.measure_s, self.step_s)?;
                    let after = sim.mon_data()?;
                    for (k, m) in series.metrics.iter().enumerate() {
                        let y = measure(&sim, m, &pids, &steps, &before, &after, self.measure_s)?;
                        lines[first_line + k].points.push((x, y));
                    }
                }
            }
        }
        Ok(Outcome {
            name: self.name.clone(),
            title: self.title.clone(),
            machine: self.machine.clone(),
            x_label: self.x_label.clone(),
            y_label: self.y_label.clone(),
            y2_label: self.y2_label.clone(),
            lines,
            markers: self
                .series
                .iter()
                .flat_map(|s| s.events.iter())
                .map(|e| (e.at_s, format!("{}: {}", e.group, e.schemata)))
                .collect(),
            wall_s: started.elapsed().as_secs_f64(),
        })
    }

    fn setup(
        &self,
        sim: &mut SimulatedResctrl,
        series: &Series,
        value: &str,
    ) -> Result<Vec<(String, u32)>> {
        for g in &series.groups {
            sim.perform(&Op::Mkdir {
                group: g.name.clone(),
            })?;
            if let Some(s) = &g.schemata {
                sim.perform(&Op::Schemata {
                    group: g.name.clone(),
                    text: format!("{}\n", s.replace("{v}", value)),
                })?;
            }
        }
        let mut pids = Vec::new();
        for j in &series.jobs {
            let pid = sim.spawn(&j.command.replace("{v}", value))?;
            if let Some(g) = &j.group {
                sim.perform(&Op::Tasks {
                    group: g.clone(),
                    text: pid.to_string(),
                })?;
            }
            pids.push((j.name.clone(), pid));
        }
        Ok(pids)
    }

    fn timeline(
        &self,
        sim: &mut SimulatedResctrl,
        series: &Series,
        value: &str,
        pids: &[(String, u32)],
        lines: &mut [Line],
    ) -> Result<()> {
        let steps = (self.duration_s / self.step_s).round() as usize;
        let mut events: Vec<&Event> = series.events.iter().collect();
        events.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        let mut next_event = 0;
        for i in 0..steps {
            let t = i as f64 * self.step_s;
            while next_event < events.len() && events[next_event].at_s <= t {
                let e = events[next_event];
                sim.perform(&Op::Schemata {
                    group: e.group.clone(),
                    text: format!("{}\n", e.schemata.replace("{v}", value)),
                })?;
                next_event += 1;
            }
            let before = sim.mon_data()?;
            let step = sim.advance(self.step_s, self.step_s)?;
            let after = sim.mon_data()?;
            for (k, m) in series.metrics.iter().enumerate() {
                let y = measure(sim, m, pids, &step, &before, &after, self.step_s)?;
                lines[k].points.push((t + self.step_s, y));
            }
        }
        Ok(())
    }
}

fn in_domains(m: &Metric, d: u32) -> bool {
    m.domains.as_ref().is_none_or(|ds| ds.contains(&d))
}

fn measure(
    sim: &SimulatedResctrl,
    m: &Metric,
    pids: &[(String, u32)],
    steps: &[Step],
    before: &[MonReading],
    after: &[MonReading],
    seconds: f64,
) -> Result<f64> {
    let group = m.group.as_deref().unwrap_or_default();
    let pid = pids
        .iter()
        .find(|(name, _)| Some(name.as_str()) == m.job.as_deref())
        .map(|(_, p)| *p);
    let mean =
        |f: &dyn Fn(&Step) -> f64| steps.iter().map(f).sum::<f64>() / steps.len().max(1) as f64;
    Ok(match m.kind {
        MetricKind::Occupancy => {
            after
                .iter()
                .filter(|r| r.group == group && in_domains(m, r.domain))
                .filter_map(|r| r.llc_occupancy)
                .sum::<u64>() as f64
                / 1024.0
        }
        MetricKind::Mbm => {
            let total = |rs: &[MonReading]| -> u64 {
                rs.iter()
                    .filter(|r| r.group == group && in_domains(m, r.domain))
                    .filter_map(|r| r.mbm_total_bytes)
                    .sum()
            };
            (total(after) - total(before)) as f64 / seconds / 1e6
        }
        MetricKind::IdealOccupancy => {
            let rs = &sim.state.resctrl;
            let l3 = if rs.info.cdp() { "L3DATA" } else { "L3" };
            let g = rs.group(group).ok_or_else(|| {
                Error::bad_input(format!("metric '{}': no group {group}", m.label))
            })?;
            let way_kib = sim.preset.l3_bytes as f64 / sim.preset.l3_ways as f64 / 1024.0;
            (0..sim.preset.nodes)
                .filter(|d| in_domains(m, *d))
                .map(|d| g.schemata.get(l3, d).unwrap_or(0).count_ones() as f64 * way_kib)
                .sum()
        }
        MetricKind::Bandwidth => mean(&|s| s.read_bandwidth(pid.unwrap_or(0))) / 1e6,
        MetricKind::Latency => mean(&|s| {
            let ts: Vec<f64> = s
                .threads
                .iter()
                .filter(|t| Some(t.pid) == pid)
                .map(|t| t.latency_ns)
                .collect();
            ts.iter().sum::<f64>() / ts.len().max(1) as f64
        }),
        MetricKind::Throughput => mean(&|s| {
            s.threads
                .iter()
                .filter(|t| Some(t.pid) == pid)
                .map(|t| t.ops_per_s)
                .sum()
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_columns_carry_their_axis_unit() {
        let line = |label: &str, right_axis| Line {
            label: label.into(),
            kind: MetricKind::Throughput,
            right_axis,
            points: vec![(5.0, 1.0)],
        };
        let outcome = Outcome {
            name: "c".into(),
            title: "t".into(),
            machine: "sim:mpam-seed".into(),
            x_label: "time (s)".into(),
            y_label: "L3 occupancy, all domains (KiB)".into(),
            y2_label: Some("online throughput (operations/s)".into()),
            lines: vec![
                line("online occupancy", false),
                line("online throughput", true),
            ],
            markers: Vec::new(),
            wall_s: 0.0,
        };
        let header = outcome.table().lines().nth(1).unwrap().to_string();
        assert!(header.contains("online occupancy (KiB)"), "{header}");
        assert!(
            header.contains("online throughput (operations/s)"),
            "{header}"
        );
        assert_eq!(axis_unit("bandwidth (MB/s)"), Some("MB/s"));
        assert_eq!(axis_unit("online operations/s"), None);
    }
}
