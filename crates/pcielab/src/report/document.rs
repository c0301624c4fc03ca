//! The `--json` documents pictures are drawn from, read back: which command printed a file
//! (told by the fields only that command's document has), read into the very type that wrote
//! it. Those types ignore fields they do not know and default the ones older results lack, so
//! older and newer results both read. A file of another kind, or cut short, is bad input
//! naming the file and what it is not.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::lab::check::CheckReport;
use crate::model::fit::FitDocument;
use crate::model::sweep::SizeSweep;
use crate::pmu::stat::StatDocument;
use crate::qos::scenario::Outcome;
use crate::text::schema_tag;
use crate::topology::p2p::Report as P2pReport;
use crate::topology::render::TopologyJson;

/// What printed a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
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
    pub(crate) fn command(self) -> &'static str {
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

    /// The `schema` tags this kind's command writes (`pcielab.<tag>/v1`).
    fn tags(self) -> &'static [&'static str] {
        match self {
            Kind::Stat => &["stat"],
            Kind::Model => &["model"],
            Kind::Fit => &["fit", "fit-prediction"],
            Kind::Topology => &["topo"],
            Kind::P2p => &["topo-p2p"],
            Kind::Scenario => &["sim-run"],
            Kind::LabCheck => &["lab-check"],
        }
    }

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
    /// A `stat --json` document.
    Stat(StatDocument),
    /// A `model --json` size sweep.
    Model(SizeSweep),
    /// A `fit --json` document.
    Fit(FitDocument),
    /// A `topo --json` tree.
    Topology(TopologyJson),
    /// A `p2p --json` report.
    P2p(P2pReport),
    /// A `qos scenario --json` outcome.
    Scenario(Outcome),
    /// A `lab check --json` report.
    LabCheck(CheckReport),
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
        check_tag(origin, kind, &value)?;
        Document::of_kind(origin, kind, value)
    }

    /// Reads `value` as a document of `kind`, naming the field that does not fit.
    pub(crate) fn of_kind(origin: &str, kind: Kind, value: Value) -> Result<Document> {
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

    pub(crate) fn kind(&self) -> Kind {
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

/// A tagged document (`"schema": "pcielab.<tag>/v1"`) is in the shape this pcielab writes: a
/// tag of another version or kind, or a field that shape requires (as its JSON Schema lists
/// them) missing, is bad input. Untagged documents come from before the tags and read with the
/// defaults of the fields they lack.
fn check_tag(origin: &str, kind: Kind, value: &Value) -> Result<()> {
    let Some(tag) = value.get("schema") else {
        return Ok(());
    };
    let known: Vec<String> = kind.tags().iter().map(|t| schema_tag(t)).collect();
    let Some(at) = known.iter().position(|k| Some(k.as_str()) == tag.as_str()) else {
        return Err(Error::bad_input(format!(
            "{origin}: schema {tag} is not one this pcielab reads: `{}` output is tagged \"{}\" \
             (a newer pcielab wrote it, or it was edited)",
            kind.command(),
            known.join("\" or \"")
        )));
    };
    let required = super::schema::required_fields(kind.tags()[at]);
    let missing: Vec<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|field| value.get(field).is_none())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Error::bad_input(format!(
            "{origin}: a {} document without {}: every such document `{}` writes has them",
            known[at],
            missing.join(", "),
            kind.command()
        )))
    }
}

/// Reads `value`, the `--json` document of a `kind` command, as its type `T`, naming the field
/// that does not fit.
pub(crate) fn read_as<T: DeserializeOwned>(origin: &str, kind: Kind, value: Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| {
        Error::bad_input(format!(
            "{origin}: looks like `{}` output but does not fit its shape: {e}",
            kind.command()
        ))
    })
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
    fn tagged_documents_of_unknown_versions_or_missing_parts_are_refused() {
        let p2p =
            r#"{"cpu":{"vendor":"intel","family":6},"pairs":[],"groups":[],"group_verdicts":[]"#;
        let tagged = |tag: &str| format!(r#"{p2p},"schema":"{tag}"}}"#);
        assert_eq!(
            Document::parse("p.json", &tagged("pcielab.topo-p2p/v1"))
                .unwrap()
                .kind(),
            Kind::P2p
        );
        // Untagged documents predate the tags (and the groups): they still read.
        let old = r#"{"cpu":{"vendor":"intel","family":6},"pairs":[]}"#;
        assert_eq!(Document::parse("old.json", old).unwrap().kind(), Kind::P2p);
        let e = Document::parse("v9.json", &tagged("pcielab.topo-p2p/v9")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message().starts_with(
                "v9.json: schema \"pcielab.topo-p2p/v9\" is not one this pcielab reads: \
                 `pcielab topo --p2p --json` output is tagged \"pcielab.topo-p2p/v1\""
            ),
            "{e}"
        );
        let no_groups =
            r#"{"cpu":{"vendor":"intel","family":6},"pairs":[],"schema":"pcielab.topo-p2p/v1"}"#;
        let e = Document::parse("ng.json", no_groups).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.message().starts_with(
                "ng.json: a pcielab.topo-p2p/v1 document without groups, group_verdicts"
            ),
            "{e}"
        );
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
