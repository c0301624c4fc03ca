//! The `--json` documents pictures are drawn from, read back: which command printed a file
//! (told by the fields only that command's document has), and the fields a plot or a report
//! table needs. Model sweeps and QoS scenarios read straight into their own structs; the other
//! documents are built as JSON values, so they are read here into views that take the fields
//! docs/*.md document and ignore the rest (older and newer results both read). A file of
//! another kind, or cut short, is bad input naming the file and what it is not.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::model::sweep::SizeSweep;
use crate::qos::scenario::Outcome;

/// What printed a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Stat,
    Model,
    Fit,
    Topology,
    P2p,
    Scenario,
    LabCheck,
}

impl Kind {
    /// The command whose `--json` output this is.
    pub fn command(self) -> &'static str {
        match self {
            Kind::Stat => "pcielab stat --json",
            Kind::Model => "pcielab model --json",
            Kind::Fit => "pcielab fit --json",
            Kind::Topology => "pcielab topo --json",
            Kind::P2p => "pcielab topo --p2p --json",
            Kind::Scenario => "pcielab sim run --json",
            Kind::LabCheck => "pcielab lab check --json",
        }
    }

    const ALL: [Kind; 7] = [
        Kind::Stat,
        Kind::Model,
        Kind::Fit,
        Kind::Topology,
        Kind::P2p,
        Kind::Scenario,
        Kind::LabCheck,
    ];

    /// The top-level fields that tell this kind apart from the others.
    fn marks(self) -> &'static [&'static str] {
        match self {
            Kind::Stat => &["events", "elapsed_s"],
            Kind::Model => &["line_rate_MBps", "achievable_MBps", "points"],
            Kind::Fit => &["rows_used", "rms_residual_percent", "rows"],
            Kind::Topology => &["name", "functions"],
            Kind::P2p => &["cpu", "pairs"],
            Kind::Scenario => &["lines", "x_label", "markers"],
            Kind::LabCheck => &["spec", "mismatches", "rows", "run"],
        }
    }

    /// The kind whose fields `doc` has; `lab p2p` documents also have `cpu` and `pairs` but
    /// carry `spec` and `run`, so they are told apart by those.
    fn of(doc: &Value) -> Option<Kind> {
        let object = doc.as_object()?;
        let found: Vec<Kind> = Kind::ALL
            .into_iter()
            .filter(|k| k.marks().iter().all(|f| object.contains_key(*f)))
            .filter(|k| *k != Kind::P2p || !object.contains_key("run"))
            .collect();
        match found.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    /// Every kind's command, for messages.
    pub(crate) fn all_commands() -> String {
        Kind::ALL.map(Kind::command).join(", ")
    }
}

/// One result file, read.
#[derive(Debug, Clone)]
pub enum Document {
    Stat(StatDoc),
    Model(SizeSweep),
    Fit(FitDoc),
    Topology(TopologyDoc),
    P2p(P2pDoc),
    Scenario(Outcome),
    LabCheck(LabCheckDoc),
}

impl Document {
    /// Reads `text`, the content of `origin`: detects what printed it and reads its fields.
    pub fn parse(origin: &str, text: &str) -> Result<Document> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            let what = if e.is_eof() {
                "is cut short (truncated JSON)"
            } else {
                "is not valid JSON"
            };
            Error::bad_input(format!(
                "{origin}: {what}: {e}; expected the output of one of: {}",
                Kind::all_commands()
            ))
        })?;
        let kind = Kind::of(&value).ok_or_else(|| {
            let fields = value
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                .unwrap_or_else(|| "not a JSON object".into());
            Error::bad_input(format!(
                "{origin}: not a result pcielab can draw (top-level fields: {fields}); expected \
                 the output of one of: {}",
                Kind::all_commands()
            ))
        })?;
        Document::of_kind(origin, kind, value)
    }

    /// Reads `value` as a document of `kind`, naming the field that does not fit.
    pub fn of_kind(origin: &str, kind: Kind, value: Value) -> Result<Document> {
        Ok(match kind {
            Kind::Stat => Document::Stat(read_as(origin, kind, value)?),
            Kind::Model => Document::Model(read_as(origin, kind, value)?),
            Kind::Fit => Document::Fit(read_as(origin, kind, value)?),
            Kind::Topology => Document::Topology(read_as(origin, kind, value)?),
            Kind::P2p => Document::P2p(read_as(origin, kind, value)?),
            Kind::Scenario => Document::Scenario(read_as(origin, kind, value)?),
            Kind::LabCheck => Document::LabCheck(read_as(origin, kind, value)?),
        })
    }

    /// Reads a file, requiring it to be of `kind` (the `--svg` of one command re-plotting).
    pub fn read_file(path: &std::path::Path) -> Result<Document> {
        let text = crate::input::read_input_file(path, "result file")?;
        Document::parse(&path.display().to_string(), &text)
    }

    pub fn kind(&self) -> Kind {
        match self {
            Document::Stat(_) => Kind::Stat,
            Document::Model(_) => Kind::Model,
            Document::Fit(_) => Kind::Fit,
            Document::Topology(_) => Kind::Topology,
            Document::P2p(_) => Kind::P2p,
            Document::Scenario(_) => Kind::Scenario,
            Document::LabCheck(_) => Kind::LabCheck,
        }
    }
}

/// Reads `value`, the `--json` document of a `kind` command, as its view `T`, naming the field
/// that does not fit.
pub(crate) fn read_as<T: DeserializeOwned>(origin: &str, kind: Kind, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| {
        Error::bad_input(format!(
            "{origin}: looks like `{}` output but does not fit its shape: {e}",
            kind.command()
        ))
    })
}

/// A command's own `--json` document, read back as the view `T` its plot takes.
pub fn view_of<T: DeserializeOwned>(kind: Kind, document: &impl serde::Serialize) -> Result<T> {
    let value = serde_json::to_value(document)
        .map_err(|e| Error::runtime(format!("JSON encoding failed: {e}")))?;
    read_as(kind.command(), kind, value)
}

/// `pcielab stat --json` (docs/pmu.md).
#[derive(Debug, Clone, Deserialize)]
pub struct StatDoc {
    pub elapsed_s: f64,
    pub events: Vec<EventDoc>,
    /// One entry per `-I` interval, each with that interval's counts.
    #[serde(default)]
    pub intervals: Vec<IntervalDoc>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EventDoc {
    pub pmu: String,
    pub event: String,
    pub count: Option<u64>,
    #[serde(default)]
    pub unit: String,
    pub status: String,
    #[serde(default)]
    pub running_percent: f64,
    #[serde(rename = "bandwidth_MBps", default)]
    pub bandwidth_mbps: Option<f64>,
    #[serde(rename = "link_achievable_MBps", default)]
    pub link_achievable_mbps: Option<f64>,
    #[serde(default)]
    pub link_percent: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct IntervalDoc {
    pub time_s: f64,
    pub events: Vec<EventDoc>,
}

/// `pcielab fit --json` (docs/calibration.md): a fit, or with `--platform` the predictions of a
/// platform fitted elsewhere (no parameters, `platform_fitted_on` instead of `fitted_on`).
#[derive(Debug, Clone, Deserialize)]
pub struct FitDoc {
    #[serde(default)]
    pub fitted_on: Option<String>,
    #[serde(default)]
    pub platform_fitted_on: Option<String>,
    pub rows_used: usize,
    pub rms_residual_percent: f64,
    #[serde(default)]
    pub params: Vec<FitParamDoc>,
    pub rows: Vec<FitRowDoc>,
    /// `--platform`: links of these rows the platform was not fitted on.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// A fit: columns the model cannot reproduce together.
    #[serde(default)]
    pub conflicts: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FitParamDoc {
    pub key: String,
    pub unit: String,
    pub value: Option<f64>,
    pub uncertainty: Option<f64>,
    pub status: String,
    #[serde(default)]
    pub note: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FitRowDoc {
    pub line: usize,
    pub workload: String,
    #[serde(rename = "measured_MBps")]
    pub measured_mbps: f64,
    #[serde(rename = "predicted_MBps")]
    pub predicted_mbps: f64,
    pub residual_percent: f64,
    /// DMA rows: whether the platform was fitted on this cell.
    #[serde(default)]
    pub in_sample: Option<bool>,
}

/// `pcielab topo --json` (docs/topology.md).
#[derive(Debug, Clone, Deserialize)]
pub struct TopologyDoc {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub functions: Vec<FunctionDoc>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FunctionDoc {
    pub bdf: String,
    pub vendor: String,
    pub device: String,
    pub kind: String,
    pub name: Option<String>,
    pub parent: Option<String>,
    pub link: Option<LinkDoc>,
    pub numa_node: Option<i32>,
    pub driver: Option<String>,
    #[serde(rename = "ceiling_achievable_MBps", default)]
    pub ceiling_achievable_mbps: Option<f64>,
    #[serde(default)]
    pub ceiling_limited_by: Option<String>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LinkDoc {
    pub max_speed_gts: Option<f64>,
    pub max_width: Option<u8>,
    pub speed_gts: Option<f64>,
    pub width: Option<u8>,
    #[serde(default)]
    pub downgraded: bool,
}

/// `pcielab topo --p2p --json` (docs/lab.md): verdicts by group, and with `--full` by pair.
#[derive(Debug, Clone, Deserialize)]
pub struct P2pDoc {
    pub cpu: Value,
    pub pairs: Vec<PairDoc>,
    #[serde(default)]
    pub groups: Vec<GroupDoc>,
    #[serde(default)]
    pub group_verdicts: Vec<GroupVerdictDoc>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct GroupDoc {
    pub group: String,
    pub port: Option<String>,
    /// Absent in documents from before it was written: such a document's large hosts cannot be
    /// drawn by root port.
    #[serde(default)]
    pub top: Option<String>,
    pub functions: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct GroupVerdictDoc {
    pub meeting: Option<String>,
    pub provider_groups: Vec<String>,
    pub client_groups: Vec<String>,
    pub pairs: u64,
    pub verdict: PairDoc,
}

/// What one cell of a verdict matrix shows: a verdict, or (drawn by root port) that the pairs
/// it gathers get different ones.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GridCell<'a> {
    One(&'a PairDoc),
    Mixed,
}

/// Row/column labels of a verdict matrix, whether its rows are root ports gathering groups,
/// and each (provider, client) index pair's cell.
pub(crate) type VerdictGrid<'a> = (Vec<String>, bool, Vec<((usize, usize), GridCell<'a>)>);

impl P2pDoc {
    /// What a picture of this document shows: the endpoint pairs when it has them (`--full`),
    /// else the groups, or past `max_rows` groups the root ports they lie below (each cell the
    /// verdict all pairs between two root ports share, or mixed). Bad input when even that has
    /// more than `max_rows` rows, or the group verdicts list more cells than any host pcielab
    /// draws.
    pub(crate) fn verdict_grid(&self, max_rows: usize) -> Result<VerdictGrid<'_>> {
        let too_many = |rows: usize, what: &str| {
            Error::bad_input(format!(
                "the P2P verdict matrix would have {rows} rows ({what}), more than the {max_rows} it is drawn with; \
                 draw the groups (without --full) or read the verdicts as text or JSON"
            ))
        };
        let too_many_cells = || {
            Error::bad_input(format!(
                "the {} group verdicts name more (provider, client) cells than any host pcielab draws; \
                 expected the output of pcielab topo --p2p --json",
                self.group_verdicts.len()
            ))
        };
        if !self.pairs.is_empty() || self.groups.is_empty() {
            let mut labels: Vec<String> = self
                .pairs
                .iter()
                .flat_map(|p| [p.provider.clone(), p.client.clone()])
                .collect();
            labels.sort_unstable();
            labels.dedup();
            if labels.len() > max_rows {
                return Err(too_many(labels.len(), "endpoints"));
            }
            let at = |bdf: &str| labels.binary_search_by(|l| l.as_str().cmp(bdf)).ok();
            let cells = self
                .pairs
                .iter()
                .filter_map(|p| Some(((at(&p.provider)?, at(&p.client)?), GridCell::One(p))))
                .collect();
            return Ok((labels, false, cells));
        }
        let n = self.groups.len();
        if n > max_rows {
            return self.grid_by_top(max_rows, too_many, too_many_cells);
        }
        let members: Vec<usize> = self.groups.iter().map(|g| g.functions.len()).collect();
        let grid = crate::topology::p2p::group_cells(
            &members,
            self.group_verdicts
                .iter()
                .map(|gv| (&gv.provider_groups[..], &gv.client_groups[..], &gv.verdict)),
        )
        .ok_or_else(too_many_cells)?;
        let cells = grid
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| ((i / n, i % n), GridCell::One(v))))
            .collect();
        let labels = self
            .groups
            .iter()
            .map(|g| match g.functions.as_slice() {
                [one] => format!("{} {one}", g.group),
                [first, ..] => format!("{} {first} +{}", g.group, g.functions.len() - 1),
                [] => g.group.clone(),
            })
            .collect();
        Ok((labels, false, cells))
    }

    /// [`P2pDoc::verdict_grid`] by root port: every group verdict adds its verdict to the cells
    /// its pairs fall in (those meeting below a bridge to their root port's own cell; those
    /// meeting only at the root complex to each pair of different root ports, and to an
    /// integrated group's own cell when it has several functions).
    fn grid_by_top(
        &self,
        max_rows: usize,
        too_many: impl Fn(usize, &str) -> Error,
        too_many_cells: impl Fn() -> Error,
    ) -> Result<VerdictGrid<'_>> {
        let n = self.groups.len();
        let mut tops: Vec<&str> = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut block = Vec::with_capacity(n);
        for g in &self.groups {
            let top = g.top.as_deref().ok_or_else(|| too_many(n, "groups"))?;
            let next = tops.len();
            let at = *index.entry(top).or_insert(next);
            if at == next {
                tops.push(top);
            }
            block.push(at);
        }
        let b = tops.len();
        if b > max_rows {
            return Err(too_many(b, "root ports"));
        }
        let mut cells: Vec<Option<GridCell<'_>>> = vec![None; b * b];
        fn add<'a>(cell: &mut Option<GridCell<'a>>, v: &'a PairDoc) {
            *cell = match *cell {
                None => Some(GridCell::One(v)),
                Some(GridCell::One(w)) if (w.distance, &w.map) == (v.distance, &v.map) => {
                    Some(GridCell::One(w))
                }
                Some(_) => Some(GridCell::Mixed),
            }
        }
        // Several functions integrated in the root complex share one group and one top, yet
        // meet only there.
        let integrated_pairs: Vec<bool> = self
            .groups
            .iter()
            .map(|g| g.port.is_none() && g.functions.len() > 1)
            .collect();
        let mut visits = 0usize;
        for gv in &self.group_verdicts {
            let blocks = |names: &[String]| {
                let mut out: Vec<(usize, bool)> = names
                    .iter()
                    .filter_map(|r| crate::topology::p2p::group_run(r))
                    .filter(|&(first, _)| first < n)
                    .flat_map(|(first, last)| first..=last.min(n - 1))
                    .map(|g| (block[g], integrated_pairs[g]))
                    .collect();
                out.sort_unstable();
                out.dedup();
                out
            };
            let (providers, clients) = (blocks(&gv.provider_groups), blocks(&gv.client_groups));
            visits += providers.len() * clients.len() + gv.provider_groups.len();
            if visits > 1 << 24 {
                return Err(too_many_cells());
            }
            let v = &gv.verdict;
            if gv.meeting.is_some() {
                if let Some(&(p, _)) = providers.first() {
                    add(&mut cells[p * b + p], v);
                }
                continue;
            }
            for &(p, p_integrated) in &providers {
                for &(c, c_integrated) in &clients {
                    if p != c || (p_integrated && c_integrated) {
                        add(&mut cells[p * b + c], v);
                    }
                }
            }
        }
        let mut per_top = vec![0usize; b];
        for &at in &block {
            per_top[at] += 1;
        }
        let labels = tops
            .iter()
            .zip(&per_top)
            .map(|(top, count)| format!("{top} ({count} groups)"))
            .collect();
        let cells = cells
            .into_iter()
            .enumerate()
            .filter_map(|(i, c)| c.map(|c| ((i / b, i % b), c)))
            .collect();
        Ok((labels, true, cells))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct PairDoc {
    pub provider: String,
    pub client: String,
    pub distance: u32,
    pub map: String,
    #[serde(default)]
    pub reasons: Vec<Value>,
}

/// `pcielab lab check --json` (docs/lab.md).
#[derive(Debug, Clone, Deserialize)]
pub struct LabCheckDoc {
    pub spec: String,
    pub ok: bool,
    pub mismatches: usize,
    pub expected: usize,
    pub rows: Vec<CheckRowDoc>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CheckRowDoc {
    pub bdf: String,
    pub field: String,
    pub spec: String,
    pub guest: String,
    pub status: String,
    pub why: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_their_fields() {
        let model = r#"{"gen":3,"width":4,"mps":256,"mrrs":512,"rcb":64,"line_rate_MBps":1.0,"achievable_MBps":1.0,"points":[]}"#;
        assert_eq!(
            Document::parse("m.json", model).unwrap().kind(),
            Kind::Model
        );
        let p2p = r#"{"cpu":{"vendor":"intel","family":6},"pairs":[]}"#;
        assert_eq!(Document::parse("p.json", p2p).unwrap().kind(), Kind::P2p);
        let lab_p2p = r#"{"spec":"x","ok":true,"cpu":{},"pairs":[],"run":{}}"#;
        let e = Document::parse("lp.json", lab_p2p).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.message().starts_with("lp.json: not a result pcielab can draw (top-level fields: cpu, ok, pairs, run, spec)"), "{e}");
    }

    #[test]
    fn truncated_and_misshapen_documents_are_named() {
        let e = Document::parse("cut.json", r#"{"gen":3,"points":[{"size":"#).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message()
                .starts_with("cut.json: is cut short (truncated JSON): EOF"),
            "{e}"
        );
        let e = Document::parse(
            "bad.json",
            r#"{"line_rate_MBps":1.0,"achievable_MBps":1.0,"points":"many"}"#,
        )
        .unwrap_err();
        assert!(
            e.message().starts_with(
                "bad.json: looks like `pcielab model --json` output but does not fit its shape: "
            ),
            "{e}"
        );
        let e = Document::parse("list.json", "[1, 2]").unwrap_err();
        assert!(e.message().contains("not a JSON object"), "{e}");
    }
}
