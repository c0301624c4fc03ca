//! Health checks over a topology: links that trained below what both ends support, MPS that
//! differs across a link, and ASPM enabled on a link that carries traffic. Each finding is
//! attached to the downstream function of the link it concerns, so writers can show it in place.
//!
//! A link joins a port that has one below it (a root port or a switch's downstream port) to the
//! device on its secondary bus; both ends' link registers describe that one link. A switch's
//! upstream port and its downstream ports share an internal bus, not a link: a downstream
//! port's LnkSta describes the link *below* it, so comparing it with the upstream port would
//! judge the same link twice under a wrong name.

use std::collections::{BTreeMap, HashSet};

use crate::pcie::{Bdf, Generation};
use crate::topology::{Function, Kind, Topology};

/// Warnings per function (only functions with findings appear), in address order.
pub fn warnings(topo: &Topology) -> BTreeMap<Bdf, Vec<String>> {
    let busy = busy_functions(topo);
    let mut out: BTreeMap<Bdf, Vec<String>> = BTreeMap::new();
    for f in topo.functions() {
        let parent = f.parent.and_then(|p| topo.get(p));
        // A port whose data link layer reports down has no trained link below it: what the
        // device's LnkSta still reads (a surprise-removed card, a slot powering up) is no link.
        let link_above =
            parent.filter(|p| p.kind.has_link_below() && !p.express_detail.data_link_down());
        let mut found = Vec::new();
        if let Some(w) = link_above.and_then(|p| downtrained(p, f)) {
            found.push(w);
        }
        // Said once per link, at the function every device below a port has (00.0).
        let down_above = parent.filter(|p| {
            p.kind.has_link_below()
                && p.express_detail.data_link_down()
                && (f.bdf.device, f.bdf.function) == (0, 0)
        });
        if let Some(p) = down_above {
            found.push(format!(
                "data link down between {} and {}: the port reports DL_Active clear (DLActive-) \
                 though the device is listed below it (a link that failed or a card removed after \
                 enumeration, or an emulator that does not set the bit); the link is not judged",
                p.bdf, f.bdf
            ));
        }
        if let Some(p) = parent {
            if let (Some(mine), Some(theirs)) = (f.mps, p.mps) {
                if mine != theirs {
                    found.push(format!(
                        "MPS mismatch: {} B here, {} B at {} upstream; TLPs above the smaller size are malformed on this link",
                        mine, theirs, p.bdf
                    ));
                }
            }
        }
        // A link is judged at its downstream end (a port's LnkCtl governs the same link).
        if link_above.is_some() && f.link.is_some() && busy.contains(&f.bdf) {
            let up_aspm = parent.is_some_and(|p| p.aspm_enabled.any());
            if f.aspm_enabled.any() || up_aspm {
                found.push(format!(
                    "ASPM enabled on a busy link (an endpoint below has a driver or device model): exit latency adds to every transfer; enabled at {}",
                    [(f.aspm_enabled.any(), f.bdf), (up_aspm, f.parent.unwrap_or(f.bdf))]
                        .iter()
                        .filter(|(on, _)| *on)
                        .map(|(_, b)| b.to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ));
            }
        }
        if !found.is_empty() {
            out.insert(f.bdf, found);
        }
    }
    out
}

/// The link between `parent` and `f` trained below the best both ends support.
/// How a downtrained link's warning starts: pictures mark exactly the links this warns about.
pub const DOWNTRAINED: &str = "downtrained link";

/// A link trained below the best both of its ends support: what it runs at and what it could.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortfall {
    pub speed: Generation,
    pub width: u8,
    /// The lesser of the two ends' LnkCap (`None` where neither end says).
    pub common_speed: Option<Generation>,
    pub common_width: Option<u8>,
}

impl Shortfall {
    /// The speed falls short of what both ends support.
    pub fn slower(&self) -> bool {
        self.common_speed.is_some_and(|c| self.speed < c)
    }

    /// The width falls short of what both ends support.
    pub fn narrower(&self) -> bool {
        self.common_width.is_some_and(|c| self.width < c)
    }
}

/// The link between `parent` and `f`, judged at `f` against min(parent, child) LnkCap: `None`
/// when it runs at the best both ends can do, or is down (no width, width 0, or the port's
/// DL_Active clear where it reports it), or unknown.
pub fn shortfall(parent: &Function, f: &Function) -> Option<Shortfall> {
    if parent.express_detail.data_link_down() {
        return None;
    }
    let mine = f.link?;
    let (Some(speed), Some(width)) = (mine.speed, mine.width) else {
        return None;
    };
    if width == 0 {
        return None;
    }
    let theirs = parent.link.unwrap_or_default();
    let found = Shortfall {
        speed,
        width,
        common_speed: min_known(mine.max_speed, theirs.max_speed),
        common_width: min_known(mine.max_width, theirs.max_width),
    };
    (found.slower() || found.narrower()).then_some(found)
}

fn downtrained(parent: &Function, f: &Function) -> Option<String> {
    let s = shortfall(parent, f)?;
    Some(format!(
        "{DOWNTRAINED} {} -> {}: running {} x{} but both ends support {} x{}; check the slot, riser or signal integrity",
        parent.bdf,
        f.bdf,
        s.speed,
        s.width,
        s.common_speed.map_or("?".into(), |g| g.to_string()),
        s.common_width.map_or("?".into(), |w| w.to_string())
    ))
}

fn min_known<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Functions with a busy endpoint at or below them: an endpoint that has a driver bound or a
/// device model attached, and every ancestor of one.
pub fn busy_functions(topo: &Topology) -> HashSet<Bdf> {
    let mut busy = HashSet::new();
    for f in topo.functions() {
        let is_busy_endpoint = matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint)
            && (f.driver.is_some() || !f.params.is_empty());
        if is_busy_endpoint {
            for up in topo.path_to_root(f.bdf) {
                if !busy.insert(up.bdf) {
                    break;
                }
            }
        }
    }
    busy
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::pcie::Generation::*;
    use crate::topology::{Aspm, Link};

    fn pair() -> (Function, Function) {
        let mut rp = Function::new(bdf("00:02.0"), 0x1ded, 0x8000, 0x060400, Kind::RootPort);
        rp.link = Some(Link::trained((Gen5, 4), (Gen3, 2)));
        let mut ep = Function::new(bdf("04:00.0"), 0x144d, 0xa808, 0x010802, Kind::Endpoint);
        ep.parent = Some(rp.bdf);
        ep.link = Some(Link::trained((Gen3, 4), (Gen3, 2)));
        (rp, ep)
    }

    #[test]
    fn downtrained_compares_against_both_ends() {
        let (rp, mut ep) = pair();
        let w = warnings(&Topology::new(vec![rp.clone(), ep.clone()]));
        let msgs = &w[&ep.bdf];
        assert_eq!(msgs.len(), 1);
        assert!(msgs[0].contains("running Gen3 x2 but both ends support Gen3 x4"));
        // Gen3 x2 against an x2-capable endpoint is the best both ends can do: no warning.
        ep.link.as_mut().unwrap().max_width = Some(2);
        assert!(warnings(&Topology::new(vec![rp, ep])).is_empty());
    }

    #[test]
    fn mps_mismatch_and_aspm_on_busy_link() {
        let (mut rp, mut ep) = pair();
        ep.link.as_mut().unwrap().max_width = Some(2);
        rp.mps = Some(256);
        ep.mps = Some(128);
        rp.aspm_enabled = Aspm {
            l0s: false,
            l1: true,
        };
        let idle = warnings(&Topology::new(vec![rp.clone(), ep.clone()]));
        assert_eq!(idle[&ep.bdf].len(), 1, "{idle:?}");
        assert!(idle[&ep.bdf][0].contains("128 B here, 256 B at 0000:00:02.0"));
        ep.driver = Some("nvme".into());
        let busy = warnings(&Topology::new(vec![rp, ep.clone()]));
        assert_eq!(busy[&ep.bdf].len(), 2);
        assert!(!busy.contains_key(&"00:02.0".parse().unwrap()), "{busy:?}");
        assert!(busy[&ep.bdf][1].ends_with("enabled at 0000:00:02.0"));
    }

    /// As sysfs shows a degraded SSD behind a switch: the downstream port's LnkSta (the link
    /// below it) and the SSD's both read Gen3 x1, the upstream port's its own link at full
    /// width. One link is degraded, so one warning, naming that link by both its ends.
    #[test]
    fn a_degraded_endpoint_behind_a_switch_is_one_warning_on_the_real_link() {
        let mut rp = Function::new(bdf("00:01.0"), 0x1ded, 0x8000, 0x060400, Kind::RootPort);
        rp.link = Some(Link::trained((Gen4, 16), (Gen4, 16)));
        let mut up = Function::new(
            bdf("01:00.0"),
            0x10b5,
            0x8796,
            0x060400,
            Kind::SwitchUpstream,
        );
        up.parent = Some(rp.bdf);
        up.link = Some(Link::trained((Gen4, 16), (Gen4, 16)));
        let mut down = Function::new(
            bdf("02:00.0"),
            0x10b5,
            0x8796,
            0x060400,
            Kind::SwitchDownstream,
        );
        down.parent = Some(up.bdf);
        down.link = Some(Link::trained((Gen4, 4), (Gen3, 1)));
        let mut ssd = Function::new(bdf("03:00.0"), 0x144d, 0xa80a, 0x010802, Kind::Endpoint);
        ssd.parent = Some(down.bdf);
        ssd.link = Some(Link::trained((Gen4, 4), (Gen3, 1)));
        ssd.driver = Some("nvme".into());
        let w = warnings(&Topology::new(vec![rp, up, down, ssd]));
        let all: Vec<&String> = w.values().flatten().collect();
        assert_eq!(all.len(), 1, "{w:?}");
        assert!(all[0].starts_with(
            "downtrained link 0000:02:00.0 -> 0000:03:00.0: running Gen3 x1 but both ends support Gen4 x4"
        ), "{all:?}");
        assert_eq!(w.keys().collect::<Vec<_>>(), vec![&bdf("03:00.0")]);
    }
}
