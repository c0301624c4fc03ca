//! Link health: a link trained below what both its ends can do (or not at all), and the AER
//! correctable errors a link counts.

use super::common::{
    ceiling_prediction, config_source, facts, judgeable_links, rate,
    reaches_capability_when_sampled,
};
use crate::advise::finding::{
    CheckOutcome, Context, Evidence, Finding, Fix, Judged, Lever, Prediction, Severity,
};
use crate::model::transfer::LinkParams;
use crate::topology::check::{JudgedLink, LinkJudge, LinkJudgement, Shortfall};
use crate::topology::Function;

pub(crate) fn downtrained(context: &Context) -> CheckOutcome {
    let topo = context.topology;
    let judge = LinkJudge::new(topo);
    let mut judged = Judged::default();
    for (port, f) in judgeable_links(&judge, &mut judged) {
        let subject = format!("link {} -> {}", port.bdf, f.bdf);
        let Some(link) = judge.judge(port, f) else {
            judged.not_judged(subject, context.input.express(f));
            continue;
        };
        let finding = match link.judgement {
            // A slot-limited link runs at all its slot offers: hardware placement, nothing
            // to change on this machine, so judged clean (topo and the exporter say it).
            LinkJudgement::Full | LinkJudgement::SlotLimited { .. } => None,
            LinkJudgement::Failed => Some(failed_link(context, &link, subject)),
            LinkJudgement::PowerManagedIdle(s) | LinkJudgement::Downtrained(s) => {
                if reaches_capability_when_sampled(context, f.bdf, &s) {
                    None
                } else {
                    Some(below_capability(
                        context, &judge, port, f, &link, &s, subject,
                    ))
                }
            }
        };
        match finding {
            Some(finding) => judged.found(finding),
            None => judged.clean(),
        }
    }
    judged
}

/// Both ends' LnkCap as evidence ("Speed 16GT/s, Width x16").
fn link_cap_evidence(context: &Context, ends: [&Function; 2]) -> Vec<Evidence> {
    ends.iter()
        .map(|u| {
            Evidence::new(
                config_source(context, u.bdf),
                "LnkCap",
                u.link.map_or("?".to_string(), |l| {
                    format!(
                        "Speed {}, Width x{}",
                        l.max_speed.map_or("?".into(), rate),
                        l.max_width.map_or("?".into(), |w| w.to_string())
                    )
                }),
            )
        })
        .collect()
}

/// A link whose data link layer reads down: no rate to predict, a card or slot to look at.
/// Info, not a risk: the device's own registers were read through that link, and emulated
/// ports (QEMU 7.2) read DLActive- under working devices, so the bit alone proves no failure.
fn failed_link(context: &Context, link: &JudgedLink, subject: String) -> Finding {
    Finding {
        id: "link-downtrained",
        severity: Severity::Info,
        subject,
        function: Some(link.device.to_string()),
        summary: link.describe(),
        evidence: vec![Evidence::new(
            config_source(context, link.port),
            "LnkSta: DLActive",
            "-",
        )],
        fix: Fix::printed(
            Lever::Firmware,
            format!(
                "reseat the card of {} and check its power; `echo 1 > /sys/bus/pci/devices/{}/remove; echo 1 > /sys/bus/pci/rescan` re-enumerates it",
                link.device, link.device
            ),
        ),
        intent: context.options.intent,
        prediction: Prediction::not_predicted("a link that is down carries nothing to predict"),
    }
}

/// A link trained below what both ends support: downtrained, or a power-managed idle link
/// whose gain is conditional on it staying low under load.
fn below_capability(
    context: &Context,
    judge: &LinkJudge,
    port: &Function,
    f: &Function,
    link: &JudgedLink,
    s: &Shortfall,
    subject: String,
) -> Finding {
    let topo = context.topology;
    let idle = matches!(link.judgement, LinkJudgement::PowerManagedIdle(_));
    let mut summary = link.describe();
    let limited: Vec<String> = judge
        .endpoints_below(f.bdf)
        .iter()
        .filter(|e| {
            topo.path_ceiling(**e)
                .is_some_and(|c| c.limiting == f.bdf || c.limiting == port.bdf)
        })
        .map(|e| e.to_string())
        .collect();
    if !limited.is_empty() {
        summary.push_str(&format!(
            "; available bandwidth of {} limited by this link at {}",
            limited.join(", "),
            f.bdf
        ));
    }
    if idle {
        summary.push_str(&format!(
            "; read {} time(s), never at full speed",
            context.options.link_samples.max(1)
        ));
    }
    let mut evidence = vec![Evidence::new(
        config_source(context, f.bdf),
        "LnkSta",
        format!(
            "Speed {}{}, Width x{}{}",
            rate(s.speed),
            if s.slower() { " (downgraded)" } else { "" },
            s.width,
            if s.narrower() { " (downgraded)" } else { "" }
        ),
    )];
    evidence.extend(link_cap_evidence(context, [f, port]));
    let prediction = match f.link_params() {
        Some(now) => {
            let best = LinkParams {
                gen: s.common_speed.unwrap_or(s.speed),
                width: s.common_width.unwrap_or(s.width),
                ..now
            };
            let p = ceiling_prediction(context, "write ceiling of this link", &now, &best, "");
            if idle {
                p.conditional("if it ran at load at this speed (a downtrain) and retrained")
            } else {
                p
            }
        }
        None => Prediction::not_predicted("the link reports no trained speed and width"),
    };
    Finding {
        id: "link-downtrained",
        severity: if idle { Severity::Info } else { Severity::PerfLoss },
        subject,
        function: Some(f.bdf.to_string()),
        summary,
        evidence,
        fix: Fix::printed(Lever::Firmware, format!(
                "reseat the card or riser of {}, check the slot's bifurcation and speed settings in firmware; \
                 `echo 1 > /sys/bus/pci/devices/{}/remove; echo 1 > /sys/bus/pci/rescan` retrains it once",
                f.bdf, f.bdf
            )).noting(if idle {
                "re-run under load first: an idle device lowers its link speed on purpose"
            } else {
                "a link that trains low again after a retrain has a signal-integrity or slot problem"
            }),
        intent: context.options.intent,
        prediction,
    }
}

pub(crate) fn aer_correctable(context: &Context) -> CheckOutcome {
    let mut judged = Judged::default();
    for f in context.topology.functions() {
        let Some(x) = facts(context, f.bdf) else {
            continue;
        };
        let Some(count) = x.aer_correctable else {
            judged.not_judged(f.bdf, context.input.aer_count(f));
            continue;
        };
        if count == 0 {
            judged.clean();
            continue;
        }
        let bdf = f.bdf;
        let file = x
            .dir
            .as_ref()
            .map_or("aer_dev_correctable".to_string(), |d| {
                d.join("aer_dev_correctable").display().to_string()
            });
        judged.found(Finding {
            id: "aer-correctable",
            severity: Severity::Risk,
            subject: bdf.to_string(),
            function: Some(bdf.to_string()),
            summary: format!("{count} correctable error(s) counted on {bdf}: the link replays TLPs (lost bandwidth) and a rising count precedes link failures"),
            evidence: vec![Evidence::new(file, "TOTAL_ERR_COR", count.to_string())],
            fix: Fix::printed(Lever::Firmware, format!("watch the count under load (pcielab top), reseat {bdf} or its riser; check equalization settings in firmware")),
            intent: context.options.intent,
            prediction: Prediction::not_predicted("replay rate is not known from a total count"),
        });
    }
    judged
}
