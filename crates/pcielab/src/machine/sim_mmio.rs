//! MMIO predicted on a simulated machine (`Machine::mmio` on `sim:`): the platform model's
//! `[platform.mmio]` costs on the endpoint's link, reported in the shape a measurement has.

use super::mmio::{MmioOperation, MmioOptions, MmioReport, MmioResult};
use crate::error::Result;
use crate::model::platform::{MmioOp, PlatformModel};
use crate::model::transfer::LinkParams;

/// What the platform model predicts for the same request on `link` (a `sim:` machine).
pub(crate) fn predict(
    options: &MmioOptions,
    model: &PlatformModel,
    link: &LinkParams,
) -> Result<MmioReport> {
    options.validate()?;
    let ops: Vec<MmioOp> = match options.op {
        MmioOperation::Store => vec![MmioOp::Store],
        MmioOperation::Load => vec![MmioOp::Load],
        MmioOperation::Memcpy => vec![MmioOp::Store, MmioOp::Load],
    };
    let results = ops
        .into_iter()
        .map(|op| {
            let mbps = model.mmio_mbps(
                op,
                options.width,
                options.threads,
                options.write_combining,
                link,
            );
            let bytes = (mbps * 1e6 * options.seconds) as u64;
            let accesses = bytes / u64::from(options.width);
            MmioResult {
                op: match (options.op, op) {
                    (MmioOperation::Memcpy, MmioOp::Store) => "memcpy_toio",
                    (MmioOperation::Memcpy, MmioOp::Load) => "memcpy_fromio",
                    (_, MmioOp::Store) => "store",
                    (_, MmioOp::Load) => "load",
                },
                bytes,
                accesses,
                seconds: options.seconds,
                mbps: crate::text::round_to(mbps, 2),
                ns_per_access: crate::text::round_to(f64::from(options.width) / mbps * 1000.0, 1),
                verified_words: None,
                mismatched_words: None,
            }
        })
        .collect();
    Ok(MmioReport {
        bdf: options.bdf.to_string(),
        bar: options.bar,
        offset: options.offset,
        bytes: options.bytes,
        bar_bytes: 0,
        prefetchable: false,
        write_combining: options.write_combining,
        width: options.width,
        threads: options.threads,
        source: "predicted by the platform model ([platform.mmio])",
        results,
    })
}
