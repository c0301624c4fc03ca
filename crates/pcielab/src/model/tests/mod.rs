//! The transfer model against what must hold whatever the link (bounds, monotonicity, the
//! completion split), against the step-by-step oracle it replaced, and against the published
//! tables of effective bandwidth.

mod properties;
mod reference;
mod seed_tables;
