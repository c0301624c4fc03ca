//! The picture of any result document, told by its kind: the one place that knows every
//! picture (`pcielab plot`, the report), so the pictures and their drawing layer (mod.rs) do not
//! need to know each other.

use crate::error::Result;

/// The picture of any result document: what that command's `--svg` draws. `origin` names the
/// document in errors (a `stat` result counted without `-I` has no series to draw).
pub fn svg_of(doc: &super::document::Document, origin: &str) -> Result<String> {
    use super::document::Document as D;
    match doc {
        D::Stat(d) => super::stat::svg(d, origin),
        D::Model(d) => super::model::svg(d),
        D::Fit(d) => super::fit::svg(d),
        D::Topology(d) => super::topology::svg(d),
        D::P2p(d) => super::topology::p2p_svg(d),
        D::Scenario(d) => super::scenario::svg(d),
        D::LabCheck(d) => super::lab::svg(d),
    }
}
