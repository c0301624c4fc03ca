//! Health checks over a topology: links that trained below what both ends support, MPS that
//! differs across a link, and ASPM enabled on a link that carries traffic. Each finding is
//! attached to the downstream function of the link it concerns, so writers can show it in place.
//!
//! A link joins a port that has one below it (a root port or a switch's downstream port) to the
//! device on its secondary bus; both ends' link registers describe that one link. A switch's
//! upstream port and its downstream ports share an internal bus, not a link: a downstream
//! port's LnkSta describes the link *below* it, so comparing it with the upstream port would
//! judge the same link twice under a wrong name.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::pcie::{Bdf, Generation};
use crate::topology::{Function, Kind, Link, Topology};

/// Warnings per function (only functions with findings appear), in address order.
pub fn warnings(topo: &Topology) -> BTreeMap<Bdf, Vec<String>> {
    let busy = busy_functions(topo);
    let judge = LinkJudge::new(topo);
    let mut out: BTreeMap<Bdf, Vec<String>> = BTreeMap::new();
    for (port, f) in judge.links() {
        if let Some(judged) = judge.judge(port, f).filter(|j| j.worth_saying()) {
            out.entry(f.bdf).or_default().push(judged.describe());
        }
    }
    for f in topo.functions() {
        let parent = f.parent.and_then(|p| topo.get(p));
        // A port whose data link layer reports down has no trained link below it: what the
        // device's LnkSta still reads (a surprise-removed card, a slot powering up) is no link.
        let link_above =
            parent.filter(|p| p.kind.has_link_below() && !p.express_detail.data_link_down());
        let mut found = Vec::new();
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
            out.entry(f.bdf).or_default().extend(found);
        }
    }
    out
}

/// The link between `parent` and `f` trained below the best both ends support.
/// How a downtrained link's warning starts: pictures mark exactly the links this warns about.
pub(crate) const DOWNTRAINED: &str = "downtrained link";

/// A link trained below the best both of its ends support: what it runs at and what it could.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shortfall {
    pub(crate) speed: Generation,
    pub(crate) width: u8,
    /// The lesser of the two ends' LnkCap (`None` where neither end says).
    pub(crate) common_speed: Option<Generation>,
    pub(crate) common_width: Option<u8>,
}

impl Shortfall {
    /// The speed falls short of what both ends support.
    pub(crate) fn slower(&self) -> bool {
        self.common_speed.is_some_and(|c| self.speed < c)
    }

    /// The width falls short of what both ends support.
    pub(crate) fn narrower(&self) -> bool {
        self.common_width.is_some_and(|c| self.width < c)
    }
}

/// The link between `parent` and `f` trained at `speed` x`width` now (a live reading), judged
/// at `f` against min(parent, child) LnkCap: `None` when it runs at the best both ends can do,
/// or is down (width 0), or unknown.
fn shortfall_at(
    parent: &Function,
    f: &Function,
    speed: Generation,
    width: u8,
) -> Option<Shortfall> {
    let mine = f.link?;
    if width == 0 {
        return None;
    }
    let (my_speed, my_width) = supported(mine);
    let (their_speed, their_width) = supported(parent.link.unwrap_or_default());
    let found = Shortfall {
        speed,
        width,
        common_speed: min_known(my_speed, their_speed),
        common_width: min_known(my_width, their_width),
    };
    (found.slower() || found.narrower()).then_some(found)
}

/// What one link is doing: the one judgement `topo`, `advise`, `report` and the exporter say,
/// each in the words of [`JudgedLink::describe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkJudgement {
    /// Trained at the best both ends support.
    Full,
    /// Trained at the best the port supports, below what the device supports: the slot (or
    /// the port behind it) limits the link, nothing is broken.
    SlotLimited {
        speed: Generation,
        width: u8,
        device_speed: Option<Generation>,
        device_width: Option<u8>,
    },
    /// Slower, never narrower, than both ends support on a device of a class that lowers its
    /// link speed when idle (GPUs, NICs, accelerators): ASPM-style power management, a
    /// downtrain only if it stays there under load.
    PowerManagedIdle(Shortfall),
    /// Slower or narrower than both ends support, with no idle explanation.
    Downtrained(Shortfall),
    /// No trained link: the port reports DL_Active clear, or the device's LnkSta reads width 0.
    Failed,
}

/// A link, named by its two ends (the port and the lowest function of the device below it),
/// and its judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JudgedLink {
    pub(crate) port: Bdf,
    pub(crate) device: Bdf,
    pub(crate) judgement: LinkJudgement,
}

impl JudgedLink {
    /// The judgement's name: full, slot-limited, power-managed-idle, downtrained, failed (the
    /// exporter's `state` label).
    pub(crate) fn name(&self) -> &'static str {
        match self.judgement {
            LinkJudgement::Full => "full",
            LinkJudgement::SlotLimited { .. } => "slot-limited",
            LinkJudgement::PowerManagedIdle(_) => "power-managed-idle",
            LinkJudgement::Downtrained(_) => "downtrained",
            LinkJudgement::Failed => "failed",
        }
    }

    /// Whether `topo` lists it among the warnings: a link that runs below what both ends
    /// support, or failed (a full or slot-limited link runs at all its slot offers).
    pub(crate) fn worth_saying(&self) -> bool {
        !matches!(
            self.judgement,
            LinkJudgement::Full | LinkJudgement::SlotLimited { .. }
        )
    }

    /// The judgement in the words every command uses.
    pub(crate) fn describe(&self) -> String {
        let (port, device) = (self.port, self.device);
        let best = |s: &Shortfall| {
            format!(
                "{} x{}",
                s.common_speed.map_or("?".into(), |g| g.to_string()),
                s.common_width.map_or("?".into(), |w| w.to_string())
            )
        };
        match self.judgement {
            LinkJudgement::Full => format!("link {port} -> {device} runs at the best both ends support"),
            LinkJudgement::SlotLimited {
                speed,
                width,
                device_speed,
                device_width,
            } => format!(
                "{SLOT_LIMITED} {port} -> {device}: running {speed} x{width}, the most the port supports; \
                 the device supports {} x{} (a faster slot would raise the ceiling; nothing is broken)",
                device_speed.map_or("?".into(), |g| g.to_string()),
                device_width.map_or("?".into(), |w| w.to_string())
            ),
            LinkJudgement::PowerManagedIdle(s) => format!(
                "{POWER_MANAGED_IDLE} {port} -> {device}: running {} x{} below the {} both ends support, speed only, \
                 on a device that lowers its link speed when idle (GPU, NIC, accelerator); a downtrain only if it stays there under load",
                s.speed,
                s.width,
                best(&s)
            ),
            LinkJudgement::Downtrained(s) => format!(
                "{DOWNTRAINED} {port} -> {device}: running {} x{} but both ends support {}; check the slot, riser or signal integrity",
                s.speed,
                s.width,
                best(&s)
            ),
            LinkJudgement::Failed => format!(
                "{FAILED} between {port} and {device}: the port reports DL_Active clear (DLActive-) \
                 or the device's LnkSta no width, though the device is listed below it (a link that failed \
                 or a card removed after enumeration, or an emulator that does not set the bit); \
                 its speed and width are not judged"
            ),
        }
    }
}

/// How the other judgements' sentences start.
pub(crate) const SLOT_LIMITED: &str = "slot-limited link";
pub(crate) const POWER_MANAGED_IDLE: &str = "power-managed idle link";
pub(crate) const FAILED: &str = "data link down (failed link)";

/// Classes whose devices lower link speed when idle (network, display, accelerators).
fn lowers_speed_when_idle(f: &Function) -> bool {
    matches!(f.class >> 16, 0x02 | 0x03 | 0x12)
}

/// Judges the links of one topology, each once.
pub(crate) struct LinkJudge<'a> {
    topo: &'a Topology,
    /// Every function with the endpoints at or below it, found on the first slow link.
    below: std::cell::OnceCell<HashMap<Bdf, Vec<Bdf>>>,
}

impl<'a> LinkJudge<'a> {
    pub(crate) fn new(topo: &'a Topology) -> LinkJudge<'a> {
        LinkJudge {
            topo,
            below: std::cell::OnceCell::new(),
        }
    }

    /// Every link once: a port with a link below it and the lowest function of each device on
    /// its secondary bus (the functions of a multi-function device share one link).
    pub(crate) fn links(&self) -> Vec<(&'a Function, &'a Function)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for f in self.topo.functions() {
            let Some(port) = f
                .parent
                .and_then(|p| self.topo.get(p))
                .filter(|p| p.kind.has_link_below())
            else {
                continue;
            };
            if seen.insert((f.bdf.domain, f.bdf.bus, f.bdf.device)) {
                out.push((port, f));
            }
        }
        out
    }

    /// The upstream ends of links whose port the input does not hold (an excerpt, `lspci -s`):
    /// one function per device, for checks to list as not judged rather than pass over.
    pub(crate) fn links_without_port(&self) -> Vec<&'a Function> {
        let mut seen = HashSet::new();
        self.topo
            .functions()
            .iter()
            .filter(|f| f.link.is_some() && !f.kind.has_link_below() && f.kind != Kind::HostBridge)
            .filter(|f| {
                f.parent
                    .and_then(|p| self.topo.get(p))
                    .is_none_or(|p| !p.kind.has_link_below())
            })
            .filter(|f| seen.insert((f.bdf.domain, f.bdf.bus, f.bdf.device)))
            .collect()
    }

    /// The endpoints at or below `bdf`.
    pub(crate) fn endpoints_below(&self, bdf: Bdf) -> &[Bdf] {
        let below = self.below.get_or_init(|| {
            let mut below: HashMap<Bdf, Vec<Bdf>> = HashMap::new();
            for e in self
                .topo
                .functions()
                .iter()
                .filter(|f| matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint))
            {
                for up in self.topo.path_to_root(e.bdf) {
                    below.entry(up.bdf).or_default().push(e.bdf);
                }
            }
            below
        });
        below.get(&bdf).map_or(&[][..], Vec::as_slice)
    }

    /// The link between `port` and `f`, judged at `f`; `None` when the input does not say
    /// enough to judge it (no trained speed and width, or neither end's LnkCap).
    pub(crate) fn judge(&self, port: &Function, f: &Function) -> Option<JudgedLink> {
        let now = f.link.map_or((None, None), |l| (l.speed, l.width));
        self.judge_trained(port, f, now)
    }

    /// [`LinkJudge::judge`] of the link as it trained now (`speed`, `width`: a live reading,
    /// where the function's registers were read earlier).
    pub(crate) fn judge_trained(
        &self,
        port: &Function,
        f: &Function,
        (speed, width): (Option<Generation>, Option<u8>),
    ) -> Option<JudgedLink> {
        let judged = |judgement| JudgedLink {
            port: port.bdf,
            device: f.bdf,
            judgement,
        };
        if port.express_detail.data_link_down() {
            return Some(judged(LinkJudgement::Failed));
        }
        let mine = f.link?;
        let (Some(speed), Some(width)) = (speed, width) else {
            return None;
        };
        if width == 0 {
            return Some(judged(LinkJudgement::Failed));
        }
        let theirs = port.link.unwrap_or_default();
        if mine.max_speed.or(theirs.max_speed).is_none()
            && mine.max_width.or(theirs.max_width).is_none()
        {
            return None;
        }
        let (port_speed, port_width) = supported(theirs);
        if let Some(s) = shortfall_at(port, f, speed, width) {
            let same_device = |g: &&Function| {
                (g.bdf.domain, g.bdf.bus, g.bdf.device) == (f.bdf.domain, f.bdf.bus, f.bdf.device)
            };
            let idles = s.slower()
                && !s.narrower()
                && (self
                    .endpoints_below(f.bdf)
                    .iter()
                    .any(|b| self.topo.get(*b).is_some_and(lowers_speed_when_idle))
                    || self
                        .topo
                        .functions()
                        .iter()
                        .filter(same_device)
                        .any(lowers_speed_when_idle));
            return Some(judged(if idles {
                LinkJudgement::PowerManagedIdle(s)
            } else {
                LinkJudgement::Downtrained(s)
            }));
        }
        if beyond_port(mine.max_speed, port_speed) || beyond_port(mine.max_width, port_width) {
            return Some(judged(LinkJudgement::SlotLimited {
                speed,
                width,
                device_speed: mine.max_speed,
                device_width: mine.max_width,
            }));
        }
        Some(judged(LinkJudgement::Full))
    }
}

/// What one end of a link supports: its LnkCap, raised to what its LnkSta runs where a
/// firmware-set LnkCap reads below it (lspci marks such a speed `(strange)`), since no end
/// runs beyond what it supports.
fn supported(link: Link) -> (Option<Generation>, Option<u8>) {
    (
        raised_to(link.max_speed, link.speed),
        raised_to(link.max_width, link.width),
    )
}

/// A capability `cap`, raised to `now` where both are known; unknown stays unknown.
fn raised_to<T: Ord>(cap: Option<T>, now: Option<T>) -> Option<T> {
    match (cap, now) {
        (Some(c), Some(n)) => Some(c.max(n)),
        (c, _) => c,
    }
}

/// The device end supports more than the port end (both known).
fn beyond_port<T: Ord>(device: Option<T>, port: Option<T>) -> bool {
    matches!((device, port), (Some(d), Some(p)) if d > p)
}

fn min_known<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Functions with a busy endpoint at or below them: an endpoint that has a driver bound or a
/// device model attached, and every ancestor of one.
pub(crate) fn busy_functions(topo: &Topology) -> HashSet<Bdf> {
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

    /// An excerpt that keeps a device but not its port: the link is listed for checks to name
    /// as not judged, once per device, and a link whose port is present is not.
    #[test]
    fn a_link_whose_port_is_missing_is_listed_once_per_device() {
        let (rp, ep) = pair();
        let mut audio = ep.clone();
        audio.bdf = bdf("04:00.1");
        let judge_whole = Topology::new(vec![rp, ep.clone(), audio.clone()]);
        assert!(LinkJudge::new(&judge_whole).links_without_port().is_empty());
        let excerpt = Topology::new(vec![ep.clone(), audio]);
        let judge = LinkJudge::new(&excerpt);
        let listed: Vec<Bdf> = judge.links_without_port().iter().map(|f| f.bdf).collect();
        assert_eq!(listed, vec![ep.bdf]);
        assert!(judge.links().is_empty());
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

    /// The Dell PowerEdge T140's BCM5720: its port's LnkCap reads Gen1 x8 while the port
    /// runs Gen2, so the port supports Gen2; the x2 device at Gen2 x1 is short of Gen2 x2,
    /// not of the "Gen1 x2" the LnkCap alone gives (the same bandwidth as what it runs).
    #[test]
    fn a_port_running_beyond_its_lnkcap_supports_what_it_runs() {
        let (mut rp, mut ep) = pair();
        rp.link = Some(Link::trained((Gen1, 8), (Gen2, 1)));
        ep.link = Some(Link::trained((Gen2, 2), (Gen2, 1)));
        let w = warnings(&Topology::new(vec![rp.clone(), ep.clone()]));
        assert!(
            w[&ep.bdf][0].contains("running Gen2 x1 but both ends support Gen2 x2"),
            "{w:?}"
        );
        // A PERC at Gen3 x8 under a port whose LnkCap reads Gen1 x8 but runs Gen3 x8 (the
        // R230's and SR250's): full, not slot-limited at Gen1.
        rp.link = Some(Link::trained((Gen1, 8), (Gen3, 8)));
        ep.link = Some(Link::trained((Gen3, 8), (Gen3, 8)));
        let topo = Topology::new(vec![rp, ep]);
        let judge = LinkJudge::new(&topo);
        let (port, device) = judge.links()[0];
        assert_eq!(judge.judge(port, device).map(|j| j.name()), Some("full"));
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

    /// Each judgement from the registers that make it: a GPU at Gen1 x16 under a Gen4 x16
    /// port idles (speed only, a class that slows idle links), the same drop on an NVMe drive
    /// is a downtrain, a Gen4 drive at Gen3 under a Gen3 port is slot-limited, width 0 and a
    /// port reading DLActive- with LLActRep+ are failed links; a live reading at full speed
    /// turns the idle GPU's link full.
    #[test]
    fn each_link_is_judged_once_by_what_its_registers_say() {
        let judged = |port_link: Link, class: u32, dev_link: Link, dl_down: bool| {
            let mut rp = Function::new(bdf("00:01.0"), 0x8086, 0x347a, 0x060400, Kind::RootPort);
            rp.link = Some(port_link);
            if dl_down {
                rp.express_detail.dl_active_reporting = Some(true);
                rp.express_detail.dl_active = Some(false);
            }
            let mut dev = Function::new(bdf("01:00.0"), 0x10de, 0x2204, class, Kind::Endpoint);
            dev.parent = Some(rp.bdf);
            dev.link = Some(dev_link);
            let mut second = dev.clone();
            second.bdf = bdf("01:00.1");
            let topo = Topology::new(vec![rp, dev, second]);
            let judge = LinkJudge::new(&topo);
            let links = judge.links();
            assert_eq!(
                links.len(),
                1,
                "one link for the two functions of one device"
            );
            let (port, device) = links[0];
            let live = judge.judge_trained(port, device, (Some(Gen4), Some(16)));
            (
                judge.judge(port, device).map(|j| j.name()),
                live.map(|j| j.name()),
            )
        };
        let gen4x16 = Link::trained((Gen4, 16), (Gen4, 16));
        let gen1 = Link::trained((Gen4, 16), (Gen1, 16));
        assert_eq!(
            judged(gen4x16, 0x030000, gen1, false),
            (Some("power-managed-idle"), Some("full"))
        );
        assert_eq!(
            judged(gen4x16, 0x010802, gen1, false).0,
            Some("downtrained")
        );
        let gen3_slot = Link::trained((Gen3, 16), (Gen3, 16));
        let gen4_card_at_gen3 = Link::trained((Gen4, 16), (Gen3, 16));
        assert_eq!(
            judged(gen3_slot, 0x010802, gen4_card_at_gen3, false).0,
            Some("slot-limited")
        );
        let untrained = Link::trained((Gen4, 16), (Gen1, 0));
        assert_eq!(
            judged(gen4x16, 0x010802, untrained, false).0,
            Some("failed")
        );
        assert_eq!(judged(gen4x16, 0x010802, gen4x16, true).0, Some("failed"));
        assert_eq!(judged(gen4x16, 0x010802, gen4x16, false).0, Some("full"));
        // Neither end's LnkCap known: not judged.
        let bare = Link {
            speed: Some(Gen3),
            width: Some(4),
            ..Link::default()
        };
        assert_eq!(judged(Link::default(), 0x010802, bare, false).0, None);
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
