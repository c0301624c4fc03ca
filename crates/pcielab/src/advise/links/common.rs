//! What the link checks share: which functions a check judges (busy endpoints, the functions
//! of one device, the root port above), where their registers were read, and the ceiling a
//! link sets, as text and as a prediction.

use crate::advise::facts::FunctionFacts;
use crate::advise::finding::{Context, Judged, Prediction};
use crate::model::platform::PlatformModel;
use crate::model::transfer::{achievable_mbps, LinkParams};
use crate::pcie::{Bdf, Generation};
use crate::topology::check::{LinkJudge, Shortfall};
use crate::topology::health::read_function_health;
use crate::topology::{DeviceFeatures, Function, Kind, Topology};

/// Why `f`'s path to the root cannot be judged: the input stops before a root port.
pub(super) const NO_ROOT_PORT: &str = "the input holds no root port above it (one device's \
     output, `lspci -s`): capture the whole machine";

/// lspci's rate text: "8GT/s", "2.5GT/s".
pub(super) fn rate(g: Generation) -> String {
    let gts = g.gt_s();
    if gts.fract() == 0.0 {
        format!("{gts:.0}GT/s")
    } else {
        format!("{gts}GT/s")
    }
}

fn is_endpoint(f: &Function) -> bool {
    matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint)
}

/// An endpoint in use: a driver bound (host, snapshot) or a device model attached (`sim:`).
pub(super) fn busy_endpoint(f: &Function) -> bool {
    is_endpoint(f) && (f.driver.is_some() || !f.params.is_empty())
}

/// Storage, network, display and accelerator classes: the endpoints that move bulk DMA. A
/// display controller capable of one lane only is a BMC's framebuffer (Matrox G200e, ASPEED):
/// the host writes its frames, it reads and writes nothing in bulk.
pub(super) fn moves_bulk_dma(f: &Function) -> bool {
    match f.class >> 16 {
        0x01 | 0x02 | 0x12 => true,
        0x03 => f.link.and_then(|l| l.max_width) != Some(1),
        _ => false,
    }
}

/// The functions of `f`'s device: they share its link.
pub(super) fn device_functions<'a>(topo: &'a Topology, f: &Function) -> Vec<&'a Function> {
    topo.functions()
        .iter()
        .filter(|g| {
            (g.bdf.domain, g.bdf.bus, g.bdf.device) == (f.bdf.domain, f.bdf.bus, f.bdf.device)
        })
        .collect()
}

pub(super) fn facts<'a>(context: &'a Context, bdf: Bdf) -> Option<&'a FunctionFacts> {
    context.facts.functions.get(&bdf)
}

/// Where a function's register was read: its `config` file, or its entry in the spec.
pub(super) fn config_source(context: &Context, bdf: Bdf) -> String {
    facts(context, bdf).map_or_else(|| format!("spec {bdf}"), |f| f.config_source.clone())
}

/// The link model's write ceiling for `link`, or the platform model's streaming DMA write when
/// one is given, with the text naming which.
fn write_ceiling(platform: Option<&PlatformModel>, link: &LinkParams) -> (f64, &'static str) {
    match platform {
        Some(p) => (
            p.streaming_dma_mbps(link).0,
            "the platform model's streaming DMA write (model::platform, 4 MiB transfers)",
        ),
        None => (
            achievable_mbps(link),
            "the link model's achievable payload rate (model::transfer::achievable_mbps: \
             MPS-sized writes, TLP, DLLP and SKP overheads charged)",
        ),
    }
}

pub(super) fn link_text(link: &LinkParams) -> String {
    format!(
        "{} x{}, MPS {} B, MRRS {} B",
        link.gen, link.width, link.mps, link.mrrs
    )
}

/// The write ceiling `now` and `then` as a prediction of `metric`, each link described after
/// the model's name (`on` says where, when it is not the link itself).
pub(super) fn ceiling_prediction(
    context: &Context,
    metric: &str,
    now: &LinkParams,
    then: &LinkParams,
    on: &str,
) -> Prediction {
    let (before, model) = write_ceiling(context.platform, now);
    let (after, _) = write_ceiling(context.platform, then);
    Prediction::predicted(
        metric,
        before,
        after,
        "MB/s",
        format!("{model}{on}: {} vs {}", link_text(now), link_text(then)),
    )
}

/// Re-reads the link state of `bdf` on a machine with sysfs: true when any of the samples
/// reaches what both ends support, so the drop was the device saving power, not a downtrain.
pub(super) fn reaches_capability_when_sampled(context: &Context, bdf: Bdf, s: &Shortfall) -> bool {
    let Some(pci_dir) = &context.pci_dir else {
        return false;
    };
    let dir = pci_dir.join("devices").join(bdf.to_string());
    (1..context.options.link_samples).any(|_| {
        std::thread::sleep(context.options.sample_interval);
        let h = read_function_health(&dir);
        let speed_ok = match (
            h.current_gts.and_then(Generation::from_gt_s),
            s.common_speed,
        ) {
            (Some(now), Some(common)) => now >= common,
            _ => !s.slower(),
        };
        let width_ok = match (h.current_width, s.common_width) {
            (Some(now), Some(common)) => now >= u32::from(common),
            _ => !s.narrower(),
        };
        speed_ok && width_ok
    })
}

/// The links a link check judges, each as (port, upstream end); a link whose port the input
/// does not hold (an excerpt) is noted in `judged` as not judged, for every link check alike.
pub(super) fn judgeable_links<'a>(
    judge: &LinkJudge<'a>,
    judged: &mut Judged,
) -> Vec<(&'a Function, &'a Function)> {
    for f in judge.links_without_port() {
        judged.not_judged(f.bdf, NO_ROOT_PORT.into());
    }
    judge.links()
}

/// The root port above `f`; where the input holds none above an endpoint, `f` is noted as
/// not judged (an integrated endpoint completes at the root complex: no port to ask).
pub(super) fn root_port_of<'a>(
    topo: &'a Topology,
    f: &Function,
    judged: &mut Judged,
) -> Option<&'a Function> {
    let root = topo
        .path_to_root(f.bdf)
        .into_iter()
        .find(|u| u.kind == Kind::RootPort);
    if root.is_none() && f.kind == Kind::Endpoint {
        judged.not_judged(f.bdf, NO_ROOT_PORT.into());
    }
    root
}

/// The busy endpoints `wanted`; each other endpoint `wanted` whose busyness is unknown (no
/// driver lines in the input) is noted as not judged.
pub(super) fn busy_endpoints<'a>(
    context: &'a Context,
    judged: &mut Judged,
    wanted: impl Fn(&Function) -> bool,
) -> Vec<&'a Function> {
    let mut out = Vec::new();
    for f in context
        .topology
        .functions()
        .iter()
        .filter(|f| is_endpoint(f) && wanted(f))
    {
        if busy_endpoint(f) {
            out.push(f);
        } else if let Some(reason) = context.input.driver() {
            judged.not_judged(f.bdf, reason);
        }
    }
    out
}

/// Whether `f`'s DevCap/DevCtl feature bits were read (they come as one register pair).
pub(super) fn features_known(f: &Function) -> bool {
    f.express_detail.features.ext_tag_supported.is_some()
}

/// The busy endpoints `wanted` whose DevCap/DevCtl features were read, with them; each whose
/// busyness or features are unknown is noted as not judged.
pub(super) fn busy_with_features<'a>(
    context: &'a Context,
    judged: &mut Judged,
    wanted: impl Fn(&Function) -> bool,
) -> Vec<(&'a Function, DeviceFeatures)> {
    let mut out = Vec::new();
    for f in busy_endpoints(context, judged, wanted) {
        if features_known(f) {
            out.push((f, f.express_detail.features));
        } else {
            judged.not_judged(f.bdf, context.input.features(f));
        }
    }
    out
}
