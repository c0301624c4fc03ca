//! The report floor: the JSON Schemas of every `--json` document ([`schema`]), which sees every
//! area's document types, and the one HTML page of `pcielab report` ([`page`]). The text helpers
//! every floor shares (rounding, thousands, terminal-safe text, `--json` tagging) are
//! [`crate::text`].

pub(crate) mod any;
pub(crate) mod document;
pub(crate) mod html;
pub(crate) mod schema;

pub use any::svg_of;
pub use document::Document;
pub use html::{page, MachineFacts, ResultFile};
