//! The picture of any result document, told by its kind: the one place that knows every
//! picture (`pcielab plot`, the report), so the pictures and their drawing layer (mod.rs) do not
//! need to know each other.

use crate::error::Result;

/// The picture of any result document: what that command's `--svg` draws. `origin` names the
/// document in errors (a `stat` result counted without `-I` has no series to draw).
pub fn svg_of(doc: &super::document::Document, origin: &str) -> Result<String> {
    use super::document::Document as D;
    use crate::plot;
    match doc {
        D::Stat(d) => plot::stat::svg(d, origin),
        D::Model(d) => plot::model::svg(d),
        D::Fit(d) => plot::fit::svg(d),
        D::Topology(d) => plot::topology::svg(d),
        D::P2p(d) => plot::topology::p2p_svg(d),
        D::Scenario(d) => plot::scenario::svg(d),
        D::LabCheck(d) => crate::lab::picture::svg(d),
    }
}
