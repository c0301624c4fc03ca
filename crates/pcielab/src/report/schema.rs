//! The JSON Schemas of `--json` documents, generated with schemars from the very types the
//! commands serialize, each with the document's `schema` tag as a required constant. They ship
//! as `docs/json/<kind>.schema.json`; a test here keeps those files equal to what the types
//! generate, and the CLI tests validate each command's real output against them.

use schemars::{JsonSchema, Schema};
use serde_json::json;

use crate::advise::apply::ChangeReport;
use crate::advise::Advice;
use crate::lab::argv::QemuPlan;
use crate::lab::check::CheckReport;
use crate::lab::oracle::P2pReport as LabP2pReport;
use crate::lab::p2pcopy::CopyReport;
use crate::lab::session::RunReport;
use crate::machine::mmio::MmioReport;
use crate::machine::presets::PresetList;
use crate::model::fit::{FitReport, PredictionReport};
use crate::model::platform::IrqPrediction;
use crate::model::sweep::SizeSweep;
use crate::observe::cost::ObserveCost;
use crate::observe::top::TopFrame;
use crate::observe::Sample;
use crate::pmu::counters::PmuListDocument;
use crate::pmu::stat::StatDocument;
use crate::qos::apply::Report as ApplyReport;
use crate::qos::scenario::Outcome;
use crate::qos::view::{MonitorDocument, ShowView};
use crate::text::schema_tag;
use crate::topology::p2p::Report as P2pReport;
use crate::topology::render::TopologyJson;

/// Every document kind that has a schema, with it.
pub(crate) fn documents() -> Vec<(&'static str, Schema)> {
    vec![
        document::<SizeSweep>("model", "pcielab model --json"),
        document::<FitReport>("fit", "pcielab fit --json"),
        document::<PredictionReport>("fit-prediction", "pcielab fit --platform SPEC --json"),
        document::<Outcome>("sim-run", "pcielab sim run --json"),
        document::<PresetList>("presets", "pcielab presets --json"),
        document::<MonitorDocument>("qos-monitor", "pcielab qos monitor --json"),
        document::<ShowView>("qos-show", "pcielab qos show --json"),
        document::<ApplyReport>("qos-apply", "pcielab qos apply --json"),
        document::<IrqPrediction>("bench-irq", "pcielab bench irq --json"),
        document::<MmioReport>("bench-mmio", "pcielab bench mmio --json"),
        document::<CopyReport>("bench-p2p", "pcielab bench p2p --json"),
        document::<ObserveCost>("bench-observe", "pcielab bench observe --json"),
        document::<LabP2pReport<'static>>("lab-p2p", "pcielab lab p2p --json"),
        document::<QemuPlan>("lab-argv", "pcielab lab argv --json"),
        document::<RunReport>("lab-run", "pcielab lab run --json"),
        document::<CheckReport>("lab-check", "pcielab lab check --json"),
        document::<Advice>("advise", "pcielab advise --json"),
        document::<ChangeReport>("advise-apply", "pcielab advise --apply/--undo --json"),
        document::<TopologyJson>("topo", "pcielab topo --json"),
        document::<P2pReport>("topo-p2p", "pcielab topo --p2p --json"),
        document::<StatDocument>("stat", "pcielab stat --json"),
        document::<PmuListDocument>("pmu-list", "pcielab pmu list --json"),
        document::<Sample>("exporter-sample", "pcielab exporter --once --json"),
        document::<TopFrame>("top-frame", "each line of pcielab top -b --json"),
    ]
}

/// The top-level fields every document of `kind` has (its schema's `required`), `schema`
/// included; none for a kind without a schema.
pub(crate) fn required_fields(kind: &str) -> Vec<String> {
    documents()
        .into_iter()
        .find(|(k, _)| *k == kind)
        .and_then(|(_, schema)| {
            let required = schema.as_object()?.get("required")?.as_array()?.clone();
            Some(
                required
                    .into_iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect(),
            )
        })
        .unwrap_or_default()
}

/// `T`'s schema as the document `kind` that `command` prints: titled, with its tag required.
fn document<T: JsonSchema>(kind: &'static str, command: &str) -> (&'static str, Schema) {
    // What the commands write (serialization), not what could be read back.
    let mut schema = schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let object = schema.ensure_object();
    object.insert("$id".into(), json!(format!("{kind}.schema.json")));
    object.insert(
        "title".into(),
        json!(format!("{} ({command})", schema_tag(kind))),
    );
    object
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("a struct's schema has properties")
        .insert(
            "schema".into(),
            json!({ "const": schema_tag(kind), "description": "what this document is: check it before trusting the fields" }),
        );
    object
        .entry("required")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .expect("required is a list")
        .push(json!("schema"));
    (kind, schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// docs/json/ holds exactly what the types generate. After changing an output type, run
    /// `PCIELAB_WRITE_SCHEMAS=1 cargo test -p pcielab --lib report::schema` to write them anew.
    #[test]
    fn shipped_schemas_are_the_generated_ones() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/json");
        let write = std::env::var_os("PCIELAB_WRITE_SCHEMAS").is_some();
        for (kind, schema) in documents() {
            let path = dir.join(format!("{kind}.schema.json"));
            let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
            if write {
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(&path, &text).unwrap();
            }
            let shipped = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                shipped == text,
                "{} differs from what the types generate: PCIELAB_WRITE_SCHEMAS=1 cargo test -p pcielab --lib report::schema",
                path.display()
            );
        }
    }

    #[test]
    fn each_schema_requires_its_tag() {
        for (kind, schema) in documents() {
            assert_eq!(
                schema.get("properties").unwrap()["schema"]["const"],
                schema_tag(kind)
            );
            assert!(schema
                .get("required")
                .unwrap()
                .as_array()
                .unwrap()
                .contains(&json!("schema")));
        }
    }
}
