//! The one drawing entry point: a result document in, its SVG out, whichever command made it.

use crate::error::Result;
use crate::model::fit::FitDocument;
use crate::model::SizeSweep;
use crate::pmu::StatDocument;
use crate::qos::scenario::Outcome;
use crate::topology::p2p::Report as P2pReport;
use crate::topology::render::TopologyJson;

/// A result document to draw: borrowed from the command that made it, or read back from the
/// `--json` it printed (`report::Document`).
#[derive(Debug, Clone, Copy)]
pub enum Picture<'a> {
    /// `stat -I`'s counts over time; the `&str` names the run in errors (a count without `-I`
    /// has no series to draw).
    Stat(&'a StatDocument, &'a str),
    /// `model`'s bandwidth against transfer size.
    Model(&'a SizeSweep),
    /// `fit`'s measured and predicted rows.
    Fit(&'a FitDocument),
    /// `topo`'s tree.
    Topology(&'a TopologyJson),
    /// `topo --p2p`'s verdict matrix.
    P2p(&'a P2pReport),
    /// A `sim run` scenario's lines.
    Scenario(&'a Outcome),
}

/// The SVG of `picture`: what the command's `--svg` writes.
pub fn svg(picture: Picture<'_>) -> Result<String> {
    match picture {
        Picture::Stat(doc, origin) => super::stat::svg(doc, origin),
        Picture::Model(sweep) => super::model::svg(sweep),
        Picture::Fit(doc) => super::fit::svg(doc),
        Picture::Topology(doc) => super::topology::svg(doc),
        Picture::P2p(report) => super::topology::p2p_svg(report),
        Picture::Scenario(outcome) => super::scenario::svg(outcome),
    }
}
