//! The picture of any result document, told by its kind: the one place that knows every
//! picture (`pcielab plot`, the report), so the pictures and their drawing layer (mod.rs) do not
//! need to know each other.

use crate::error::Result;

/// The picture of any result document: what that command's `--svg` draws. `origin` names the
/// document in errors (a `stat` result counted without `-I` has no series to draw).
pub fn svg_of(doc: &super::document::Document, origin: &str) -> Result<String> {
    use super::document::Document as D;
    use crate::plot::{svg, Picture};
    match doc {
        D::Stat(d) => svg(Picture::Stat(d, origin)),
        D::Model(d) => svg(Picture::Model(d)),
        D::Fit(d) => svg(Picture::Fit(d)),
        D::Topology(d) => svg(Picture::Topology(d)),
        D::P2p(d) => svg(Picture::P2p(d)),
        D::Scenario(d) => svg(Picture::Scenario(d)),
        D::LabCheck(d) => crate::lab::picture::svg(d),
    }
}
