//! The PCIe hierarchy as data: every function with its identity, its place in the tree and what its
//! link and device control registers say. Readers (sysfs directory, spec TOML) build a
//! [`Topology`]; writers (tree text, JSON, DOT, sysfs export) and the model, simulator and lab
//! consume it. This module owns the data model and tree navigation only.

pub(crate) mod check;
pub(crate) mod config_space;
pub(crate) mod export;
pub mod generate;
pub(crate) mod health;
pub(crate) mod lspci;
pub(crate) mod lspci_dump;
pub(crate) mod lspci_source;
pub(crate) mod lspci_text;
pub mod p2p;
pub(crate) mod pciids;
pub(crate) mod readplan;
pub(crate) mod render;
pub(crate) mod spec;
pub(crate) mod sysfs;

pub use check::warnings;
pub use export::export_sysfs;
pub use health::{read_link_health, LinkHealth};
pub use lspci::read_lspci;
pub use pciids::name_functions;
pub use render::{to_dot, to_json, to_tree, write_json, TopologyJson};
pub use spec::{parse_spec, MachineSpec};
pub use sysfs::read_sysfs;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::model::path::{path_ceiling, PathCeiling};
use crate::model::transfer::LinkParams;
pub(crate) use crate::pcie::features::AspmLatency;
pub use crate::pcie::link::Link;
use crate::pcie::Bdf;
pub use lspci_source::LspciRead;

/// What role a function plays in the hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The root complex's host bridge.
    HostBridge,
    /// A root port.
    RootPort,
    /// A switch's upstream port.
    SwitchUpstream,
    /// A switch's downstream port.
    SwitchDownstream,
    /// An endpoint behind a port.
    Endpoint,
    /// An endpoint integrated into the root complex.
    RcEndpoint,
    /// A PCI(-X) or PCIe-to-PCI bridge.
    PciBridge,
}

impl Kind {
    /// Kinds that have a secondary bus and may have children.
    pub(crate) fn is_bridge(self) -> bool {
        matches!(
            self,
            Kind::RootPort | Kind::SwitchUpstream | Kind::SwitchDownstream | Kind::PciBridge
        )
    }

    /// Ports whose link registers describe the link to the device below them (a switch's
    /// upstream port shares an internal bus with its downstream ports, not a link).
    pub(crate) fn has_link_below(self) -> bool {
        matches!(self, Kind::RootPort | Kind::SwitchDownstream)
    }

    /// The kind as `--json` and specs spell it (`root_port`, `endpoint`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Kind::HostBridge => "host_bridge",
            Kind::RootPort => "root_port",
            Kind::SwitchUpstream => "switch_upstream",
            Kind::SwitchDownstream => "switch_downstream",
            Kind::Endpoint => "endpoint",
            Kind::RcEndpoint => "rc_endpoint",
            Kind::PciBridge => "pci_bridge",
        }
    }
}

/// ASPM states as a pair of flags (LnkCap support or LnkCtl enable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Aspm {
    /// L0s is on (or supported).
    pub l0s: bool,
    /// L1 is on (or supported).
    pub l1: bool,
}

impl Aspm {
    /// The one spelling of ASPM states shared by specs and the command line, in order.
    pub const SPELLINGS: [&'static str; 4] = ["none", "l0s", "l1", "l0s+l1"];

    /// Whether either state is on (or supported).
    pub(crate) fn any(self) -> bool {
        self.l0s || self.l1
    }

    /// Reads one of [`Aspm::SPELLINGS`]; `None` for anything else.
    pub fn parse(s: &str) -> Option<Aspm> {
        let at = Aspm::SPELLINGS.iter().position(|w| *w == s)?;
        Some(Aspm {
            l0s: at & 1 != 0,
            l1: at & 2 != 0,
        })
    }

    /// The spelling [`Aspm::parse`] reads back to `self`.
    pub(crate) fn name(self) -> &'static str {
        Aspm::SPELLINGS[usize::from(self.l0s) | (usize::from(self.l1) << 1)]
    }

    /// The valid spellings as an error message lists them: `"none", "l0s", "l1", "l0s+l1"`.
    pub(crate) fn spellings_quoted() -> String {
        Aspm::SPELLINGS.map(|w| format!("\"{w}\"")).join(", ")
    }
}

/// Access Control Services capability and control bits (ACS extended capability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Acs {
    pub(crate) capability: u16,
    pub(crate) control: u16,
}

/// LnkSta2 as lspci prints it: the equalization progress and the crosslink resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LinkStatus2 {
    pub(crate) equalization_complete: bool,
    pub(crate) equalization_phase1: bool,
    pub(crate) equalization_phase2: bool,
    pub(crate) equalization_phase3: bool,
    pub(crate) equalization_request: bool,
    /// Crosslink resolution (bits 9:8): 0 unsupported, 1 upstream port, 2 downstream port,
    /// 3 not completed; `None` in text from older lspci, which does not print it.
    pub(crate) crosslink_resolution: Option<u8>,
}

/// The device features of the PCI Express capability, each `None` where the input does not say
/// (JSON `device_features`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
pub(crate) struct DeviceFeatures {
    /// DevCap bit 5 (lspci `ExtTag` on DevCap's second line): 8-bit tags supported.
    pub(crate) ext_tag_supported: Option<bool>,
    /// DevCtl bit 8 (`ExtTag` after `RlxdOrd`): 8-bit tags enabled.
    pub(crate) ext_tag_enabled: Option<bool>,
    /// DevCtl bit 4 (`RlxdOrd`): the function may set Relaxed Ordering on its requests.
    pub(crate) relaxed_ordering_enabled: Option<bool>,
    /// DevCap2 bits 16 and 17 (`10BitTagComp`, `10BitTagReq`) and DevCtl2 bit 12
    /// (`10BitTagReq`): version 2 of the capability only, and printed by lspci 3.7 and later.
    pub(crate) ten_bit_tag_completer: Option<bool>,
    pub(crate) ten_bit_tag_requester: Option<bool>,
    pub(crate) ten_bit_tag_requester_enabled: Option<bool>,
}

/// What the PCI Express capability says beyond speed, width, MPS and ASPM states: the ASPM
/// latencies, data-link-layer activity, the version-2 link registers, the DevCap/DevCtl and
/// DevCap2/DevCtl2 features and DevSta's error bits. Each is `None` where the input does not say:
/// every reader of config bytes (sysfs `config`, a snapshot, an lspci hex dump) fills all the
/// bytes hold through [`config_space::decode`]; the lspci text reader fills what the text prints;
/// a spec fills the latencies it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ExpressDetail {
    /// DevCap: the L0s and L1 exit latencies an endpoint accepts (reserved for other types).
    pub(crate) l0s_acceptable: Option<AspmLatency>,
    pub(crate) l1_acceptable: Option<AspmLatency>,
    /// LnkCap: the exit latency of each ASPM state the port supports.
    pub(crate) l0s_exit: Option<AspmLatency>,
    pub(crate) l1_exit: Option<AspmLatency>,
    /// LnkCap bit 20 (lspci's `LLActRep`): the port reports DL_Active in LnkSta.
    pub(crate) dl_active_reporting: Option<bool>,
    /// LnkSta bit 13 (`DLActive`); meaningful only where `dl_active_reporting` is true.
    pub(crate) dl_active: Option<bool>,
    /// LnkCap2's supported link speeds vector: bit n-1 set for Gen n. `None` where LnkCap2
    /// reads 0 (reserved before PCIe 3.0) or lspci does not print it (functions other than
    /// 0 of a multi-function endpoint).
    pub(crate) supported_speeds: Option<u8>,
    /// LnkCap2 bit 8: crosslink supported.
    pub(crate) crosslink: Option<bool>,
    /// LnkCtl2's target link speed (0 reads as 2.5 GT/s, as lspci prints it).
    pub(crate) target_speed: Option<crate::pcie::Generation>,
    pub(crate) status2: Option<LinkStatus2>,
    /// DevCap/DevCtl and DevCap2/DevCtl2 features.
    pub(crate) features: DeviceFeatures,
    /// DevSta bits 3:0 (`CorrErr`, `NonFatalErr`, `FatalErr`, `UnsupReq`): the errors the
    /// function detected since they were last cleared, reported or not.
    pub(crate) errors_detected: Option<u8>,
}

impl ExpressDetail {
    /// The generations of `supported_speeds`, slowest first.
    pub(crate) fn speeds(&self) -> Option<Vec<crate::pcie::Generation>> {
        let vector = self.supported_speeds?;
        Some(
            crate::pcie::Generation::ALL
                .iter()
                .copied()
                .filter(|g| vector & (1 << (g.number() - 1)) != 0)
                .collect(),
        )
    }

    /// The port says its data link layer is down: it reports DL_Active and the bit is clear,
    /// so no link is trained below it whatever the LnkSta speed and width read.
    pub(crate) fn data_link_down(&self) -> bool {
        self.dl_active_reporting == Some(true) && self.dl_active == Some(false)
    }
}

/// The AER registers that say what is reported and how: the uncorrectable error mask and
/// severity and the correctable error mask, each limited to the bits lspci 3.9 prints
/// ([`AER_UNCORRECTABLE_SHOWN`], [`AER_CORRECTABLE_SHOWN`]) so dumps and text agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AerMasks {
    pub(crate) uncorrectable_mask: u32,
    pub(crate) uncorrectable_severity: u32,
    pub(crate) correctable_mask: u32,
}

/// The AER status registers (`UESta:`, `CESta:`): the errors logged since they were last
/// cleared, limited to the bits lspci prints like [`AerMasks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct AerStatus {
    pub(crate) uncorrectable: u32,
    pub(crate) correctable: u32,
}

/// DevSta's error bits as lspci names them, by bit.
pub(crate) const DEVICE_ERROR_FLAGS: [(&str, u8); 4] = [
    ("CorrErr", 0),
    ("NonFatalErr", 1),
    ("FatalErr", 2),
    ("UnsupReq", 3),
];

/// Where the facts beyond config space (the bound driver, and with it whether a device is in
/// use) came from, so a check can tell "no driver" from "the input does not say".
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FactSource {
    /// The function's sysfs directory (`driver` link, `numa_node`): a live host or a snapshot.
    Sysfs,
    /// A spec's `driver` and `numa_node` fields (`sim:`).
    Spec,
    /// lspci's `Kernel driver in use:` lines (`lspci -k`): a function without one has none.
    LspciKernelLines,
    /// Not in the input: lspci output captured without `-k` (a plain `-xxxx` dump, `-vvv`).
    #[default]
    Unknown,
}

/// The uncorrectable error bits lspci 3.9 prints (`UEMsk:`/`UESvrt:`), by name and bit.
pub(crate) const AER_UNCORRECTABLE_FLAGS: [(&str, u8); 12] = [
    ("DLP", 4),
    ("SDES", 5),
    ("TLP", 12),
    ("FCP", 13),
    ("CmpltTO", 14),
    ("CmpltAbrt", 15),
    ("UnxCmplt", 16),
    ("RxOF", 17),
    ("MalfTLP", 18),
    ("ECRC", 19),
    ("UnsupReq", 20),
    ("ACSViol", 21),
];
/// The correctable error bits lspci 3.9 prints (`CEMsk:`).
pub(crate) const AER_CORRECTABLE_FLAGS: [(&str, u8); 6] = [
    ("RxErr", 0),
    ("BadTLP", 6),
    ("BadDLLP", 7),
    ("Rollover", 8),
    ("Timeout", 12),
    ("AdvNonFatalErr", 13),
];

const fn flag_bits<const N: usize>(flags: [(&str, u8); N]) -> u32 {
    let mut bits = 0;
    let mut i = 0;
    while i < N {
        bits |= 1 << flags[i].1;
        i += 1;
    }
    bits
}

pub(crate) const AER_UNCORRECTABLE_SHOWN: u32 = flag_bits(AER_UNCORRECTABLE_FLAGS);
pub(crate) const AER_CORRECTABLE_SHOWN: u32 = flag_bits(AER_CORRECTABLE_FLAGS);

/// The text of an lspci input, kept once for the evidence of every function read from it: the
/// text after any byte-order mark, and where each of its lines starts (as `str::lines` splits
/// them), so that a function's evidence holds line numbers instead of copies of the lines.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SourceText {
    text: String,
    line_starts: Vec<u32>,
}

impl SourceText {
    /// Indexes `text`, which must be under 4 GiB (lspci input is capped far below that).
    pub(crate) fn new(text: String) -> SourceText {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(at, b)| b == b'\n' && at + 1 < text.len())
                .map(|(at, _)| u32::try_from(at + 1).unwrap_or(u32::MAX)),
        );
        if text.is_empty() {
            line_starts.clear();
        }
        SourceText { text, line_starts }
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Line `number` (1-based) without its line ending, as readers quote it.
    pub(crate) fn line(&self, number: usize) -> Option<&str> {
        let start = *self.line_starts.get(number.checked_sub(1)?)? as usize;
        let end = self
            .line_starts
            .get(number)
            .map_or(self.text.len(), |&next| next as usize);
        let line = self.text.get(start..end)?;
        Some(
            line.strip_suffix('\n')
                .unwrap_or(line)
                .trim_end_matches('\r'),
        )
    }
}

/// Where a function's facts came from, for readers of text someone pasted (lspci output): the
/// line behind each fact, by fact name (`lnksta`, `devctl`, …), and the facts the input did not
/// give (which stay unknown rather than guessed). Empty for the other readers. The lines are
/// numbers into the input's [`SourceText`], shared by all its functions, so a listing of many
/// functions costs a few bytes per fact rather than a copy of every line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Evidence {
    source: Option<std::sync::Arc<SourceText>>,
    /// Each fact seen with its 1-based line, and each fact left unknown with line 0, in the
    /// order the reader recorded them.
    facts: Vec<(&'static str, u32)>,
}

impl Evidence {
    /// Evidence quoting lines of `source`, with room for the one fact every function has (its
    /// address line): a listing of bare address lines then holds no room it does not use.
    pub(crate) fn over(source: std::sync::Arc<SourceText>) -> Evidence {
        Evidence {
            source: Some(source),
            facts: Vec::with_capacity(1),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    /// Records that `fact` was read from line `line` (1-based) of the source.
    pub(crate) fn saw(&mut self, fact: &'static str, line: usize) {
        debug_assert!(self.source.is_some(), "evidence without its source text");
        let line = u32::try_from(line).unwrap_or(u32::MAX);
        match self.facts.iter_mut().find(|(f, n)| *f == fact && *n != 0) {
            Some(seen) => seen.1 = line,
            None => self.facts.push((fact, line)),
        }
    }

    /// Records that the input did not say `fact`.
    pub(crate) fn missing(&mut self, fact: &'static str) {
        if !self.is_unknown(fact) {
            self.facts.push((fact, 0));
        }
    }

    /// Takes back [`Evidence::missing`]: the fact was found after all.
    pub(crate) fn found(&mut self, fact: &str) {
        self.facts.retain(|&(f, n)| f != fact || n != 0);
    }

    pub(crate) fn is_unknown(&self, fact: &str) -> bool {
        self.facts.iter().any(|&(f, n)| f == fact && n == 0)
    }

    /// The facts left unknown, in the order they were recorded.
    pub(crate) fn unknown(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.facts.iter().filter(|(_, n)| *n == 0).map(|(f, _)| *f)
    }

    /// The line number and text `fact` was read from.
    pub(crate) fn line(&self, fact: &str) -> Option<(usize, &str)> {
        let &(_, n) = self.facts.iter().find(|&&(f, n)| f == fact && n != 0)?;
        Some((n as usize, self.text_of(n)))
    }

    /// Every fact read, by name, with its line number and text.
    pub(crate) fn lines(&self) -> impl Iterator<Item = (&'static str, usize, &str)> + '_ {
        self.facts
            .iter()
            .filter(|(_, n)| *n != 0)
            .map(|&(f, n)| (f, n as usize, self.text_of(n)))
    }

    fn text_of(&self, line: u32) -> &str {
        self.source
            .as_deref()
            .and_then(|s| s.line(line as usize))
            .unwrap_or_default()
    }

    /// Gives back the room kept for more facts, once a reader has recorded them all.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.facts.shrink_to_fit();
    }
}

/// One copy of each name a reader gives many functions (a model's name, a driver's).
#[derive(Debug, Default)]
pub(crate) struct SharedNames(std::collections::HashSet<std::sync::Arc<str>>);

impl SharedNames {
    /// `name`, or the copy of it already kept.
    pub(crate) fn share(
        &mut self,
        name: Option<std::sync::Arc<str>>,
    ) -> Option<std::sync::Arc<str>> {
        let name = name?;
        if let Some(kept) = self.0.get(&name) {
            return Some(kept.clone());
        }
        self.0.insert(name.clone());
        Some(name)
    }
}

/// NUMA node numbers lie below this: Linux's largest MAX_NUMNODES (CONFIG_NODES_SHIFT at most 10).
pub(crate) const MAX_NUMA_NODES: i32 = 1 << 10;

/// One PCI function.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Where the function is.
    pub bdf: Bdf,
    /// PCI vendor ID.
    pub vendor: u16,
    /// PCI device ID.
    pub device: u16,
    /// 24-bit class code: base class, subclass, programming interface.
    pub class: u32,
    pub(crate) revision: u8,
    pub(crate) subsystem_vendor: u16,
    pub(crate) subsystem_device: u16,
    /// What the function is in the tree.
    pub kind: Kind,
    /// The bridge this function sits below; `None` for functions on a root bus.
    pub parent: Option<Bdf>,
    /// Secondary and subordinate bus numbers of a bridge.
    pub(crate) buses: Option<(u8, u8)>,
    /// `None` for functions without a PCI Express capability (conventional PCI).
    pub link: Option<Link>,
    /// Max payload size in bytes: supported (DevCap) and programmed (DevCtl).
    pub(crate) mps_supported: Option<u16>,
    /// Max_Payload_Size set (DevCtl), in bytes.
    pub mps: Option<u16>,
    /// Max read request size in bytes (DevCtl).
    pub mrrs: Option<u16>,
    pub(crate) aspm_supported: Aspm,
    pub(crate) aspm_enabled: Aspm,
    pub(crate) acs: Option<Acs>,
    /// The ACS capability could not be looked for: the extended configuration space was not
    /// readable (an unprivileged sysfs read returns 64 bytes). `acs` is then unknown, not absent.
    pub(crate) acs_unreadable: bool,
    /// The function has the Advanced Error Reporting extended capability.
    pub aer: bool,
    /// Its masks and severities, where the input shows them.
    pub(crate) aer_masks: Option<AerMasks>,
    /// Its status registers, where the input shows them.
    pub(crate) aer_status: Option<AerStatus>,
    /// ASPM latencies, DL_Active, the version-2 link registers and the device features.
    pub(crate) express_detail: ExpressDetail,
    /// Below `MAX_NUMA_NODES` when set.
    pub numa_node: Option<i32>,
    /// Shared: a listing names the same few drivers for thousands of functions.
    pub driver: Option<std::sync::Arc<str>>,
    /// Where `driver` came from; `Unknown` means `driver: None` says nothing.
    pub(crate) driver_source: FactSource,
    /// A human name (spec `name`, or a known vendor/device string) for tree output; shared
    /// between the functions of one model, as a listing names thousands alike.
    pub(crate) name: Option<std::sync::Arc<str>>,
    /// Free-form device parameters from a spec (`[function.device]`), read by the simulator
    /// and the lab; empty for functions read from sysfs.
    pub params: BTreeMap<String, toml::Value>,
    /// The input lines behind the facts and the facts left unknown (lspci readers only).
    pub(crate) evidence: Evidence,
}

impl Function {
    /// The link above this function as it is trained now, with its programmed MPS and MRRS
    /// (the spec's reset defaults, 128 and 512, where the function does not say). `None` when
    /// the function reports no trained link.
    pub(crate) fn link_params(&self) -> Option<LinkParams> {
        let link = self.link?;
        let (gen, width) = (link.speed?, link.width?);
        if width == 0 {
            return None;
        }
        Some(LinkParams {
            mps: self.mps.map_or(128, u32::from),
            mrrs: self.mrrs.map_or(512, u32::from),
            ..LinkParams::new(gen, width)
        })
    }

    /// A function with identity and kind only; everything else unknown.
    pub fn new(bdf: Bdf, vendor: u16, device: u16, class: u32, kind: Kind) -> Function {
        Function {
            bdf,
            vendor,
            device,
            class,
            revision: 0,
            subsystem_vendor: 0,
            subsystem_device: 0,
            kind,
            parent: None,
            buses: None,
            link: None,
            mps_supported: None,
            mps: None,
            mrrs: None,
            aspm_supported: Aspm::default(),
            aspm_enabled: Aspm::default(),
            acs: None,
            acs_unreadable: false,
            aer: false,
            aer_masks: None,
            aer_status: None,
            express_detail: ExpressDetail::default(),
            numa_node: None,
            driver: None,
            driver_source: FactSource::Unknown,
            name: None,
            params: BTreeMap::new(),
            evidence: Evidence::default(),
        }
    }
}

/// A whole PCI hierarchy, functions kept sorted by address.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Topology {
    functions: Vec<Function>,
}

impl Topology {
    /// Builds a topology; functions are sorted by BDF. Callers validate structure first
    /// (readers report their own, better-located errors).
    pub fn new(mut functions: Vec<Function>) -> Topology {
        // Readers mostly list in address order already; sorting a large list would allocate
        // room for half of it.
        if !functions.is_sorted_by_key(|f| f.bdf) {
            functions.sort_by_key(|f| f.bdf);
        }
        Topology { functions }
    }

    /// Every function, in BDF order.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// Every function, to change in place (the tree's shape stays).
    pub(crate) fn functions_mut(&mut self) -> &mut [Function] {
        &mut self.functions
    }

    pub(crate) fn get(&self, bdf: Bdf) -> Option<&Function> {
        self.functions
            .binary_search_by_key(&bdf, |f| f.bdf)
            .ok()
            .map(|i| &self.functions[i])
    }

    /// Direct children of `bdf` (functions whose parent it is), in address order.
    pub(crate) fn children(&self, bdf: Bdf) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(move |f| f.parent == Some(bdf))
    }

    /// Functions on root buses (no parent bridge), in address order.
    #[cfg(test)]
    pub(crate) fn roots(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| f.parent.is_none())
    }

    /// The chain from `bdf` up to its root-bus ancestor, starting with `bdf` itself.
    pub(crate) fn path_to_root(&self, bdf: Bdf) -> Vec<&Function> {
        let mut path = Vec::new();
        let mut cursor = self.get(bdf);
        while let Some(f) = cursor {
            if path.len() > self.functions.len() {
                break; // a parent cycle; readers reject these, never loop forever
            }
            path.push(f);
            cursor = f.parent.and_then(|p| self.get(p));
        }
        path
    }

    /// The ASPM exits `bdf`'s path costs (`model::io::LinkPower`), from the spec's exit
    /// latencies: on each link, a state enabled at either end costs the slower end's exit, and
    /// a state whose exit either end leaves unknown costs nothing; over the path, the longest
    /// exit, each L1 exit growing by 1 µs per link above it (the kernel's
    /// `pcie_aspm_check_latency`). `l0s_entry_ns`/`l1_entry_ns` are the idle timers.
    pub(crate) fn path_link_power(
        &self,
        bdf: Bdf,
        l0s_entry_ns: f64,
        l1_entry_ns: f64,
    ) -> crate::model::io::LinkPower {
        use crate::model::io::{LinkPower, L1_SWITCH_EXIT_NS};
        let mut power = LinkPower {
            l0s_entry_ns,
            l1_entry_ns,
            ..LinkPower::OFF
        };
        let mut hops_above = 0.0;
        for f in self.path_to_root(bdf) {
            let Some(port) = f
                .parent
                .and_then(|p| self.get(p))
                .filter(|p| p.kind.has_link_below() && f.link.is_some())
            else {
                continue;
            };
            let ends = [port, f];
            let exit = |on: fn(&Function) -> bool,
                        ns: fn(&ExpressDetail) -> Option<AspmLatency>| {
                if !ends.iter().any(|e| on(e)) {
                    return None;
                }
                let both: Option<Vec<u32>> =
                    ends.iter().map(|e| ns(&e.express_detail)?.ns()).collect();
                both.and_then(|v| v.into_iter().max()).map(f64::from)
            };
            let l0s = exit(|e| e.aspm_enabled.l0s, |x| x.l0s_exit);
            let l1 = exit(|e| e.aspm_enabled.l1, |x| x.l1_exit)
                .map(|l1| l1 + hops_above * L1_SWITCH_EXIT_NS);
            let longer = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            power.l0s_exit_ns = longer(power.l0s_exit_ns, l0s);
            power.l1_exit_ns = longer(power.l1_exit_ns, l1);
            hops_above += 1.0;
        }
        power
    }

    /// The bandwidth ceiling of `bdf`'s path to its root complex, with the limiting link, as
    /// the kernel's `pcie_bandwidth_available()` finds it. `None` when no link on the path
    /// reports a trained speed and width (the LnkSta of a port whose DL_Active is clear where
    /// it reports it is not a trained link; the kernel does not look).
    pub fn path_ceiling(&self, bdf: Bdf) -> Option<PathCeiling> {
        // A port whose data link layer reports down has no trained link, whatever its LnkSta
        // reads. A device listed below it keeps its own LnkSta: lspci read its config space
        // through that link (QEMU 7.2's emulated ports read DLActive- under working devices).
        path_ceiling(
            self.path_to_root(bdf)
                .into_iter()
                .filter(|f| !f.express_detail.data_link_down())
                .filter_map(|f| f.link.map(|l| (f.bdf, l, f.link_params()))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::bdf;
    use crate::pcie::Generation;

    #[test]
    fn navigation_follows_parents() {
        let rp = Function::new(bdf("00:02.0"), 0x1ded, 0x8000, 0x060400, Kind::RootPort);
        let mut sata = Function::new(bdf("04:00.0"), 0x1b4b, 0x9235, 0x010601, Kind::Endpoint);
        sata.parent = Some(rp.bdf);
        let topo = Topology::new(vec![sata, rp]);
        assert_eq!(topo.functions()[0].bdf, bdf("00:02.0"));
        let path: Vec<Bdf> = topo
            .path_to_root(bdf("04:00.0"))
            .iter()
            .map(|f| f.bdf)
            .collect();
        assert_eq!(path, vec![bdf("04:00.0"), bdf("00:02.0")]);
        assert_eq!(topo.children(bdf("00:02.0")).count(), 1);
        assert_eq!(topo.roots().count(), 1);
    }

    #[test]
    fn a_path_costs_its_longest_exit_and_nothing_it_does_not_know() {
        use crate::model::io::LinkPower;
        let f = |b: &str, kind: Kind, parent: Option<&str>, l1_ns: Option<u32>, l1_on: bool| {
            let mut f = Function::new(bdf(b), 0x8086, 0x1, 0x060400, kind);
            f.parent = parent.map(bdf);
            f.link = Some(Link::trained((Generation::Gen3, 4), (Generation::Gen3, 4)));
            f.aspm_enabled.l1 = l1_on;
            f.express_detail.l1_exit = l1_ns.and_then(|ns| AspmLatency::from_ns(true, ns));
            f
        };
        let topo = |ep_exit: Option<u32>, ep_on: bool| {
            Topology::new(vec![
                f("00:01.0", Kind::RootPort, None, Some(8000), true),
                f(
                    "01:00.0",
                    Kind::SwitchUpstream,
                    Some("00:01.0"),
                    Some(4000),
                    true,
                ),
                f(
                    "02:00.0",
                    Kind::SwitchDownstream,
                    Some("01:00.0"),
                    Some(2000),
                    ep_on,
                ),
                f("03:00.0", Kind::Endpoint, Some("02:00.0"), ep_exit, ep_on),
            ])
        };
        let power = |t: &Topology| t.path_link_power(bdf("03:00.0"), 7000.0, 32000.0);
        // The endpoint's own link: 16 µs; the switch's upstream link: 8 µs, + 1 µs for the
        // switch it exits through after the link below.
        assert_eq!(power(&topo(Some(16000), true)).l1_exit_ns, Some(16000.0));
        assert_eq!(power(&topo(Some(1000), true)).l1_exit_ns, Some(9000.0));
        // The endpoint's link is off: only the uplink costs; an unknown exit costs nothing.
        assert_eq!(power(&topo(Some(16000), false)).l1_exit_ns, Some(9000.0));
        assert_eq!(power(&topo(None, true)).l1_exit_ns, Some(9000.0));
        assert_eq!(power(&topo(None, true)).l0s_exit_ns, None);
        let mut off = topo(Some(16000), false);
        for u in off.functions_mut() {
            u.aspm_enabled.l1 = false;
        }
        assert_eq!(power(&off), LinkPower::OFF);
    }

    #[test]
    fn aspm_spellings_read_back_and_nothing_else_reads() {
        for word in Aspm::SPELLINGS {
            assert_eq!(Aspm::parse(word).unwrap().name(), word);
        }
        let both = Aspm::parse("l0s+l1").unwrap();
        assert!(both.l0s && both.l1);
        assert_eq!(
            Aspm::parse("l1"),
            Some(Aspm {
                l0s: false,
                l1: true
            })
        );
        assert_eq!(Aspm::parse("L1"), None);
        assert_eq!(Aspm::parse("l1+l0s"), None);
    }

    #[test]
    fn downgraded_compares_speed_and_width() {
        let mut link = Link::trained((Generation::Gen5, 4), (Generation::Gen5, 4));
        assert!(!link.is_downgraded());
        link.width = Some(2);
        assert!(link.is_downgraded());
        link.width = Some(4);
        link.speed = Some(Generation::Gen2);
        assert!(link.is_downgraded());
    }

    #[test]
    fn params_from_a_function_use_its_trained_link_and_settings() {
        use Generation::{Gen3, Gen4};
        let mut nvme = Function::new(bdf("01:00.0"), 0x144d, 0xa808, 0x010802, Kind::Endpoint);
        assert_eq!(nvme.link_params(), None);
        nvme.link = Some(Link::trained((Gen4, 4), (Gen3, 2)));
        let l = nvme.link_params().unwrap();
        assert_eq!((l.gen, l.width, l.mps, l.mrrs), (Gen3, 2, 128, 512));
        nvme.mps = Some(256);
        nvme.mrrs = Some(4096);
        let l = nvme.link_params().unwrap();
        assert_eq!((l.mps, l.mrrs), (256, 4096));
    }

    #[test]
    fn path_ceiling_walks_to_the_root_and_names_the_slowest_link() {
        let mut rp = Function::new(bdf("00:02.0"), 0x1ded, 0x8000, 0x060400, Kind::RootPort);
        rp.link = Some(Link::trained((Generation::Gen5, 4), (Generation::Gen2, 2)));
        let mut sata = Function::new(bdf("04:00.0"), 0x1b4b, 0x9235, 0x010601, Kind::Endpoint);
        sata.parent = Some(rp.bdf);
        sata.link = Some(Link::trained((Generation::Gen2, 2), (Generation::Gen2, 2)));
        let topo = Topology::new(vec![rp, sata]);
        let c = topo.path_ceiling(bdf("04:00.0")).unwrap();
        assert_eq!(c.limiting.to_string(), "0000:04:00.0");
        assert!((c.mbps - 1000.0).abs() < 1e-9);
        assert_eq!(c.kernel_mbit, 8000);
    }
}
