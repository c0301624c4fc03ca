//! Device features a driver or the kernel left off: Extended Tags, 10-bit tags and Relaxed
//! Ordering, judged against the kernel's root-port quirks that turn them off on purpose.

use super::common::{
    busy_with_features, config_source, features_known, moves_bulk_dma, root_port_of,
};
use crate::advise::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Judged, Lever, Prediction, Severity,
};
use crate::model::transfer::achievable_mbps;
use crate::topology::Function;

/// The kernel's quirks (drivers/pci/quirks.c, Linux 6.12): root ports listed for
/// PCI_DEV_FLAGS_NO_RELAXED_ORDERING (Intel Haswell/Broadwell Xeon root ports, AMD 0x1a00-0x1a02;
/// the erratum is the hardware's, but the fixup is declared for class 0x0000, so on these bridges
/// the kernel never sets the flag nor clears RO below them) and devices whose presence makes the
/// host bridge refuse Extended Tags (3ware, ServerWorks).
const NO_RELAXED_ORDERING: [(u16, std::ops::RangeInclusive<u16>); 3] = [
    (0x8086, 0x6f01..=0x6f0e),
    (0x8086, 0x2f01..=0x2f0e),
    (0x1022, 0x1a00..=0x1a02),
];
/// Drivers that clear their device's DevCtl Relaxed Ordering enable themselves: tg3 at every
/// chip reset (Linux drivers/net/ethernet/broadcom/tg3.c, tg3_chip_reset).
const CLEARS_RELAXED_ORDERING: [&str; 1] = ["tg3"];
const NO_EXT_TAGS: [(u16, u16); 9] = [
    (0x13c1, 0x1004),
    (0x13c1, 0x1005),
    (0x1166, 0x0132),
    (0x1166, 0x0140),
    (0x1166, 0x0141),
    (0x1166, 0x0142),
    (0x1166, 0x0144),
    (0x1166, 0x0420),
    (0x1166, 0x0422),
];

pub(crate) fn ext_tag_off(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    // Tags bound the reads a bulk-DMA device keeps in flight; a port or event collector bound
    // to pcieport issues no such reads.
    for (f, x) in busy_with_features(context, &mut judged, moves_bulk_dma) {
        if x.ext_tag_supported != Some(true) {
            judged.clean();
            continue;
        }
        let Some(enabled) = x.ext_tag_enabled else {
            judged.not_judged(f.bdf, context.input.features(f));
            continue;
        };
        if enabled {
            judged.clean();
            continue;
        }
        let quirk = topo
            .functions()
            .iter()
            .find(|o| o.bdf.domain == f.bdf.domain && NO_EXT_TAGS.contains(&(o.vendor, o.device)));
        if quirk.is_some() {
            judged.clean();
            continue;
        }
        let prediction = tag_prediction(context, f, 32, 256, "8-bit (Extended) tags");
        judged.found(Finding {
            id: "ext-tag-off",
            severity: Severity::PerfLoss,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!("{} supports Extended Tags but has them disabled: at most 32 reads in flight instead of 256", f.bdf),
            evidence: vec![
                Evidence::new(config_source(context, f.bdf), "DevCap: ExtTag", "+"),
                Evidence::new(config_source(context, f.bdf), "DevCtl: ExtTag", "-"),
            ],
            fix: Fix::printed(Lever::Setpci, format!("setpci -s {} CAP_EXP+8.w=0100:0100 — printed, not performed (the kernel enables it at enumeration unless a quirk forbids it)", f.bdf)),
            intent: context.options.intent,
            prediction,
        });
    }
    judged
}

/// Read throughput with `before` and `after` tags in flight: the read latency bound
/// (model::latency) with the platform model's read round trip, or not predicted without one.
fn tag_prediction(
    context: &Context,
    f: &Function,
    before: u32,
    after: u32,
    what: &str,
) -> Prediction {
    use crate::model::latency::ReadConcurrency;
    let (Some(p), Some(link)) = (context.platform, f.link_params()) else {
        return Prediction::not_predicted(
            "the tag limit bounds reads by outstanding bytes over the read round trip, which only a platform model gives: use --platform",
        );
    };
    let round_trip_ns = p.read_latency_ns(u64::from(link.mrrs), &link);
    let bound = |tags| {
        ReadConcurrency {
            tags,
            np_header_credits: None,
            round_trip_ns,
        }
        .bound_mbps(link.mrrs)
    };
    let line = achievable_mbps(&link);
    Prediction::predicted(
        "read ceiling (tags × MRRS / round trip, at most the link)",
        bound(before).min(line),
        bound(after).min(line),
        "MB/s",
        format!(
            "model::latency::ReadConcurrency with {what} ({before} -> {after} tags), MRRS {} B and the platform model's {:.0} ns round trip",
            link.mrrs, round_trip_ns
        ),
    )
}

pub(crate) fn ten_bit_tag_off(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    for (f, x) in busy_with_features(context, &mut judged, |_| true) {
        let Some(root) = root_port_of(topo, f, &mut judged) else {
            continue;
        };
        if !features_known(root) {
            judged.not_judged(
                f.bdf,
                format!(
                    "its root port {}: {}",
                    root.bdf,
                    context.input.features(root)
                ),
            );
            continue;
        }
        let rx = root.express_detail.features;
        if x.ten_bit_tag_requester != Some(true)
            || x.ten_bit_tag_requester_enabled != Some(false)
            || rx.ten_bit_tag_completer != Some(true)
        {
            judged.clean();
            continue;
        }
        judged.found(Finding {
            id: "ten-bit-tag-off",
            severity: Severity::Info,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary: format!(
                "{} can request with 10-bit tags and its root port {} completes them, but the requester enable is off (Linux 6.12 does not set it)",
                f.bdf, root.bdf
            ),
            evidence: vec![
                Evidence::new(config_source(context, f.bdf), "DevCap2: 10BitTagReq", "+"),
                Evidence::new(config_source(context, f.bdf), "DevCtl2: 10BitTagReq", "-"),
                Evidence::new(config_source(context, root.bdf), "DevCap2: 10BitTagComp", "+"),
            ],
            fix: Fix::printed(Lever::Setpci, format!("setpci -s {} CAP_EXP+28.w=1000:1000 — printed, not performed; only with no P2P peer lacking 10BitTagComp", f.bdf)),
            intent: context.options.intent,
            prediction: tag_prediction(context, f, 256, 768, "10-bit tags")
                .conditional("if the device's reads are limited by tags in flight"),
        });
    }
    judged
}

pub(crate) fn relaxed_ordering(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let mut judged = Judged::default();
    for (f, x) in busy_with_features(context, &mut judged, moves_bulk_dma) {
        let Some(root) = root_port_of(topo, f, &mut judged) else {
            continue;
        };
        let quirked = NO_RELAXED_ORDERING
            .iter()
            .any(|(v, ids)| root.vendor == *v && ids.contains(&root.device));
        let Some(relaxed) = x.relaxed_ordering_enabled else {
            judged.not_judged(f.bdf, context.input.features(f));
            continue;
        };
        // Off below a driver that turns it off itself is that driver's choice, not a setting
        // to change: a write would be undone at its next reset.
        if !relaxed
            && f.driver
                .as_deref()
                .is_some_and(|d| CLEARS_RELAXED_ORDERING.contains(&d))
        {
            judged.clean();
            continue;
        }
        let (severity, summary, command) = match (quirked, relaxed) {
            (true, true) => (
                Severity::Risk,
                format!("Relaxed Ordering is enabled on {} below root port {} ({:04x}:{:04x}), whose upstream RO erratum Linux lists in quirk_relaxedordering_disable; that fixup is declared for class 0x0000, never a root port's 0x0604, so the kernel leaves RO on below it", f.bdf, root.bdf, root.vendor, root.device),
                format!("setpci -s {} CAP_EXP+8.w=0000:0010 — printed, not performed", f.bdf),
            ),
            (false, false) => (
                Severity::Info,
                format!("Relaxed Ordering is disabled on {} though its root port {} has no quirk against it: writes cannot pass each other in the fabric", f.bdf, root.bdf),
                format!("setpci -s {} CAP_EXP+8.w=0010:0010 — printed, not performed; the driver decides whether it sets RO on its TLPs", f.bdf),
            ),
            _ => {
                judged.clean();
                continue;
            }
        };
        judged.found(Finding {
            id: "relaxed-ordering",
            severity,
            subject: f.bdf.to_string(),
            function: Some(f.bdf.to_string()),
            summary,
            evidence: vec![Evidence::new(
                config_source(context, f.bdf),
                "DevCtl: RlxdOrd",
                if relaxed { "+" } else { "-" },
            )],
            fix: Fix {
                lever: Lever::Setpci,
                command,
                reboot: false,
                writes: Vec::new(),
                note: None,
            },
            intent: context.options.intent,
            prediction: Prediction::not_predicted("ordering is not in the link or platform model"),
        });
    }
    judged
}
