//! The `pcielab lab check` picture: every compared field of every function as a coloured cell
//! (match, expected difference, mismatch), functions down and fields across, so a mismatch
//! stands out in a large topology.

use plotters::style::RGBColor;

use super::check::{CheckReport, Status};
use crate::error::Result;
use crate::pcie::Bdf;
use crate::plot::{matrix_svg, Cell, Matrix};

const STATUSES: [(Status, &str, RGBColor); 3] = [
    (Status::Match, "= match", RGBColor(0x2c, 0xa0, 0x2c)),
    (
        Status::Expected,
        "~ expected difference (QEMU)",
        RGBColor(0xff, 0x7f, 0x0e),
    ),
    (Status::Mismatch, "x mismatch", RGBColor(0xd6, 0x27, 0x28)),
];

/// The check as a function × field matrix.
pub(crate) fn matrix(doc: &CheckReport) -> Matrix {
    let mut functions: Vec<Bdf> = doc.rows.iter().map(|r| r.bdf).collect();
    functions.sort_unstable();
    functions.dedup();
    let mut fields: Vec<&str> = Vec::new();
    for r in &doc.rows {
        if !fields.contains(&r.field.as_ref()) {
            fields.push(&r.field);
        }
    }
    let cells = functions
        .iter()
        .map(|bdf| {
            fields
                .iter()
                .map(|field| {
                    let row = doc
                        .rows
                        .iter()
                        .find(|r| r.bdf == *bdf && r.field == *field)?;
                    let class = STATUSES.iter().position(|s| s.0 == row.status).unwrap_or(2);
                    Some(Cell {
                        text: STATUSES[class].1[..1].to_string(),
                        class,
                    })
                })
                .collect()
        })
        .collect();
    Matrix {
        title: format!(
            "lab check {}: {} ({} mismatches, {} expected differences)",
            doc.spec,
            if doc.ok { "guest agrees" } else { "MISMATCH" },
            doc.mismatches,
            doc.expected
        ),
        row_heading: "function".into(),
        column_heading: "field".into(),
        rows: functions.iter().map(Bdf::to_string).collect(),
        columns: fields.iter().map(|s| s.to_string()).collect(),
        cells,
        classes: STATUSES
            .iter()
            .map(|(_, name, c)| (name.to_string(), *c))
            .collect(),
    }
}

/// The check as a standalone SVG document.
pub(crate) fn svg(doc: &CheckReport) -> Result<String> {
    matrix_svg(&matrix(doc))
}
