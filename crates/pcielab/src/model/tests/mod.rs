//! The transfer model against what must hold whatever the link (bounds, monotonicity, the
//! completion split), against the step-by-step oracle it replaced, and against the published
//! tables of effective bandwidth.

mod properties;
mod reference;
mod seed_tables;

use crate::model::transfer::{CompletionSize, LinkParams};
use crate::pcie::{Generation, TlpFormat};

/// The link a strategy drew: generation 1-7, its width, MPS/MRRS/RCB, TLP format and whether
/// completions split at RCB (else at MPS).
fn drawn_link(
    (gen, width): (u8, u8),
    (mps, mrrs, rcb): (u32, u32, u32),
    format: TlpFormat,
    rcb_split: bool,
) -> LinkParams {
    LinkParams {
        mps,
        mrrs,
        rcb,
        format,
        completion_size: if rcb_split {
            CompletionSize::Rcb
        } else {
            CompletionSize::Mps
        },
        ..LinkParams::new(Generation::from_number(gen).unwrap(), width)
    }
}
