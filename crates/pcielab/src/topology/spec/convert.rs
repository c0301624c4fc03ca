//! One `[[function]]` table turned into a [`Function`]: each value checked against what is
//! valid (speeds, widths, payload sizes, ASPM, ACS), and what the PCI Express capability implies
//! filled in, every problem bad input naming `file:line` and the field.

use super::raw::{Locator, RawFunction, RawLink, VALID_SIZES, VALID_WIDTHS};
use crate::error::{Error, Result};
use crate::pcie::features::{AspmLatency, L0S_EXIT_NS, L1_EXIT_NS};
use crate::pcie::{Bdf, Generation};
use crate::topology::config_space::{has_express, kind_of};
use crate::topology::{Acs, Aspm, FactSource, Function, Kind, Link};
use std::collections::BTreeMap;
use toml::Spanned;

/// Converts one `[[function]]`, returning it and the offset of its `parent` value.
pub(super) fn convert_function(
    loc: &Locator,
    entry: &Spanned<RawFunction>,
) -> Result<(Function, Option<usize>)> {
    let raw = entry.get_ref();
    let bdf: Bdf = raw
        .bdf
        .get_ref()
        .parse()
        .map_err(|e: Error| loc.err(raw.bdf.span().start, format_args!("bdf: {e}")))?;
    let ctx = |what: String| format!("function {bdf}: {what}");
    if *raw.class.get_ref() > 0xff_ffff {
        return Err(loc.err(
            raw.class.span().start,
            ctx(format!(
                "class = {:#x} is wider than 24 bits; valid: base class, subclass, prog-if as 0xBBSSPP",
                raw.class.get_ref()
            )),
        ));
    }
    let mut f = Function::new(
        bdf,
        raw.vendor,
        raw.device_id,
        *raw.class.get_ref(),
        raw.kind,
    );
    f.revision = raw.revision;
    f.subsystem_vendor = raw.subsystem_vendor;
    f.subsystem_device = raw.subsystem_device;
    if let Some(name) = &raw.name {
        if name.get_ref().chars().any(char::is_control) || name.get_ref().len() > 256 {
            return Err(loc.err(
                name.span().start,
                ctx(format!(
                    "name = {:?}: expected up to 256 printable characters (no escapes, tabs or newlines)",
                    name.get_ref()
                )),
            ));
        }
    }
    f.name = raw.name.as_ref().map(|n| n.get_ref().as_str().into());
    f.aer = raw.aer;
    if let Some(node) = &raw.numa_node {
        if !(-1..crate::topology::MAX_NUMA_NODES).contains(node.get_ref()) {
            return Err(loc.err(
                node.span().start,
                ctx(format!(
                    "numa_node = {}: expected -1 (none) or a node in 0..={}",
                    node.get_ref(),
                    crate::topology::MAX_NUMA_NODES - 1
                )),
            ));
        }
    }
    f.numa_node = raw
        .numa_node
        .as_ref()
        .map(|n| *n.get_ref())
        .filter(|&n| n >= 0);
    if let Some(driver) = &raw.driver {
        crate::input::path_component("driver", driver.get_ref())
            .map_err(|e| loc.err(driver.span().start, ctx(e.message().to_string())))?;
    }
    f.driver = raw.driver.as_ref().map(|d| d.get_ref().as_str().into());
    f.driver_source = FactSource::Spec;
    f.params = raw
        .params
        .clone()
        .map(|t| t.into_iter().collect::<BTreeMap<_, _>>())
        .unwrap_or_default();
    let parent_at = match &raw.parent {
        Some(p) => {
            f.parent = Some(
                p.get_ref()
                    .parse()
                    .map_err(|e: Error| loc.err(p.span().start, ctx(format!("parent: {e}"))))?,
            );
            Some(p.span().start)
        }
        None => None,
    };
    if let Some(link) = &raw.link {
        f.link = Some(convert_link(loc, &ctx, link)?);
    }
    let size = |field: &str, v: &Option<Spanned<u16>>| -> Result<Option<u16>> {
        match v {
            None => Ok(None),
            Some(s) if VALID_SIZES.contains(s.get_ref()) => Ok(Some(*s.get_ref())),
            Some(s) => Err(loc.err(
                s.span().start,
                ctx(format!(
                    "{field} = {} is not a size DevCap/DevCtl can encode; valid: {}",
                    s.get_ref(),
                    list(&VALID_SIZES)
                )),
            )),
        }
    };
    f.mps = size("mps", &raw.mps)?;
    f.mps_supported = size("mps_supported", &raw.mps_supported)?;
    f.mrrs = size("mrrs", &raw.mrrs)?;
    if let (Some(mps), Some(sup), Some(at)) = (f.mps, f.mps_supported, &raw.mps) {
        if mps > sup {
            return Err(loc.err(
                at.span().start,
                ctx(format!(
                    "mps = {mps} exceeds mps_supported = {sup}; a function cannot be programmed above its capability"
                )),
            ));
        }
    }
    let aspm = |field: &str, v: &Option<Spanned<String>>| -> Result<Option<Aspm>> {
        v.as_ref()
            .map(|s| {
                Aspm::parse(s.get_ref()).ok_or_else(|| {
                    loc.err(
                        s.span().start,
                        ctx(format!(
                            "{field} = \"{}\" is not an ASPM state; valid: {}",
                            s.get_ref(),
                            Aspm::spellings_quoted()
                        )),
                    )
                })
            })
            .transpose()
    };
    let enabled = aspm("aspm", &raw.aspm)?.unwrap_or_default();
    let supported = aspm("aspm_supported", &raw.aspm_supported)?.unwrap_or(enabled);
    if (enabled.l0s && !supported.l0s) || (enabled.l1 && !supported.l1) {
        let at = raw.aspm.as_ref().map_or(0, |s| s.span().start);
        return Err(loc.err(
            at,
            ctx(format!(
                "aspm = \"{}\" enables a state aspm_supported = \"{}\" lacks",
                enabled.name(),
                supported.name()
            )),
        ));
    }
    f.aspm_enabled = enabled;
    f.aspm_supported = supported;
    if let Some(exit) = &raw.exit_latency {
        // A spec names the bound of a LnkCap range, which becomes that range's code.
        let code = |field: &str, l1: bool, v: Option<u32>| -> Result<Option<AspmLatency>> {
            let Some(ns) = v else { return Ok(None) };
            AspmLatency::from_ns(l1, ns).map(Some).ok_or_else(|| {
                let table = if l1 { &L1_EXIT_NS } else { &L0S_EXIT_NS };
                let valid: Vec<String> = table.iter().flatten().map(u32::to_string).collect();
                loc.err(
                    exit.span().start,
                    ctx(format!(
                        "exit_latency.{field} = {ns} is not a LnkCap exit latency bound; valid (ns): {}",
                        valid.join(", ")
                    )),
                )
            })
        };
        let raw_exit = exit.get_ref();
        f.express_detail.l0s_exit = code("l0s_ns", false, raw_exit.l0s_ns)?;
        f.express_detail.l1_exit = code("l1_ns", true, raw_exit.l1_ns)?;
    }
    f.acs = raw.acs.as_ref().map(|a| Acs {
        capability: a.capability,
        control: a.control,
    });
    complete_express(loc, entry.span().start, raw, &mut f)?;
    Ok((f, parent_at))
}

/// Applies what the PCI Express capability implies: ports always have a link, integrated
/// endpoints and host bridges never do; DevCap/DevCtl always exist with it (Linux's defaults
/// 128 B MPS and 512 B MRRS where the spec is silent), and nothing of it exists without it.
fn complete_express(loc: &Locator, at: usize, raw: &RawFunction, f: &mut Function) -> Result<()> {
    let bdf = f.bdf;
    let kind = f.kind.name();
    if f.link.is_some() && matches!(f.kind, Kind::RcEndpoint | Kind::HostBridge) {
        return Err(loc.err(
            at,
            format_args!(
                "function {bdf}: link: kind {kind} has no link (its link registers are reserved); remove `link`, or use kind = \"endpoint\" under a port"
            ),
        ));
    }
    if f.link.is_none()
        && matches!(
            f.kind,
            Kind::RootPort | Kind::SwitchUpstream | Kind::SwitchDownstream
        )
    {
        f.link = Some(Link::default());
    }
    if !has_express(f.kind, f.link.as_ref()) {
        let read_back = kind_of(None, f.class, u8::from(f.kind.is_bridge()));
        if read_back != f.kind {
            return Err(loc.err(
                raw.class.span().start,
                format_args!(
                    "function {bdf}: class = {:#08x} does not fit kind {kind}: without a PCI Express capability (no `link`) the class alone tells the kind, and this one reads as {}; use class 0x0600xx for host_bridge, 0x0604xx for pci_bridge, another class for endpoint, or add `link`",
                    f.class,
                    read_back.name()
                ),
            ));
        }
        let express_only = [
            ("mps", raw.mps.is_some()),
            ("mps_supported", raw.mps_supported.is_some()),
            ("mrrs", raw.mrrs.is_some()),
            ("aspm", raw.aspm.is_some()),
            ("aspm_supported", raw.aspm_supported.is_some()),
            ("exit_latency", raw.exit_latency.is_some()),
            ("acs", raw.acs.is_some()),
            ("aer", raw.aer),
        ];
        if let Some((field, _)) = express_only.iter().find(|(_, set)| *set) {
            return Err(loc.err(
                at,
                format_args!(
                    "function {bdf}: {field} needs a PCI Express capability, which this {kind} lacks without `link` (it is conventional PCI); add `link = {{...}}` or remove {field}"
                ),
            ));
        }
        return Ok(());
    }
    if f.link.is_none() && (f.aspm_enabled.any() || f.aspm_supported.any()) {
        return Err(loc.err(
            at,
            format_args!("function {bdf}: aspm: kind {kind} has no link, so no ASPM; remove aspm"),
        ));
    }
    f.mps = Some(f.mps.unwrap_or(128));
    f.mps_supported = Some(f.mps_supported.unwrap_or(f.mps.unwrap_or(128)));
    f.mrrs = Some(f.mrrs.unwrap_or(512));
    Ok(())
}

fn convert_link(loc: &Locator, ctx: &dyn Fn(String) -> String, raw: &RawLink) -> Result<Link> {
    let speed = |field: &str, v: &Option<Spanned<f64>>| -> Result<Option<Generation>> {
        v.as_ref()
            .map(|s| {
                Generation::from_gt_s(*s.get_ref()).ok_or_else(|| {
                    let rates: Vec<String> = Generation::ALL
                        .iter()
                        .map(|g| g.gt_s().to_string())
                        .collect();
                    loc.err(
                        s.span().start,
                        ctx(format!(
                            "link.{field} = {} GT/s is no PCIe generation's rate; valid: {}",
                            s.get_ref(),
                            rates.join(", ")
                        )),
                    )
                })
            })
            .transpose()
    };
    let width = |field: &str, v: &Option<Spanned<u8>>, allow_down: bool| -> Result<Option<u8>> {
        match v {
            None => Ok(None),
            Some(s) if VALID_WIDTHS.contains(s.get_ref()) => Ok(Some(*s.get_ref())),
            Some(s) if allow_down && *s.get_ref() == 0 => Ok(Some(0)),
            Some(s) => Err(loc.err(
                s.span().start,
                ctx(format!(
                    "link.{field} = {} is not a PCIe link width; valid: {}{}",
                    s.get_ref(),
                    list(&VALID_WIDTHS),
                    if allow_down { " (or 0: link down)" } else { "" }
                )),
            )),
        }
    };
    let pairs = [
        (
            "max_speed",
            "max_width",
            raw.max_speed.as_ref().map(|s| s.span().start),
            raw.max_width.as_ref().map(|s| s.span().start),
        ),
        (
            "speed",
            "width",
            raw.speed.as_ref().map(|s| s.span().start),
            raw.width.as_ref().map(|s| s.span().start),
        ),
    ];
    for (a, b, speed_at, width_at) in pairs {
        if let (Some(pos), None) | (None, Some(pos)) = (speed_at, width_at) {
            return Err(loc.err(
                pos,
                ctx(format!(
                    "link: give link.{a} and link.{b} together (LnkCap/LnkSta hold both), or neither when unknown"
                )),
            ));
        }
    }
    let link = Link {
        max_speed: speed("max_speed", &raw.max_speed)?,
        max_width: width("max_width", &raw.max_width, false)?,
        speed: speed("speed", &raw.speed)?,
        width: width("width", &raw.width, true)?,
    };
    if let (Some(s), Some(m), Some(at)) = (link.speed, link.max_speed, &raw.speed) {
        if s > m {
            return Err(loc.err(
                at.span().start,
                ctx(format!(
                    "link.speed = {} GT/s exceeds link.max_speed = {} GT/s; a link cannot train above its capability",
                    s.gt_s(),
                    m.gt_s()
                )),
            ));
        }
    }
    if let (Some(w), Some(m), Some(at)) = (link.width, link.max_width, &raw.width) {
        if w > m {
            return Err(loc.err(
                at.span().start,
                ctx(format!(
                    "link.width = {w} exceeds link.max_width = {m}; a link cannot train wider than its capability"
                )),
            ));
        }
    }
    Ok(link)
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
