//! Topology → QEMU 7.2 command line for a q35 machine: root ports (chassis/slot allocation,
//! `x-speed`/`x-width` from the link capability), x3130/xio3130 switches, NVMe with serial and
//! CMB, `pxb-pcie` host bridges with their NUMA nodes, NICs. What QEMU cannot express at all
//! (a vendor id, a Gen5 root port, a device it does not emulate) is an error listing every such
//! function; what QEMU expresses differently from the spec (every current link trains at
//! 2.5 GT/s x1) is returned as a [`Limit`], so callers report it instead of hiding it.

use serde::Serialize;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::pcie::{Bdf, Generation};
use crate::topology::{Function, Kind, Topology};

mod limits;
#[cfg(test)]
mod tests;

pub use limits::Limit;
use limits::{
    current_link_limits, downstream_cap_limits, endpoint_link_limits, fixed_cap_limits, numa_limit,
    QEMU_FIXED_ENDPOINT,
};
pub(crate) use limits::{show_opt, show_speed};

/// Machine-wide choices that are not part of the topology.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineOptions {
    /// `tcg` or `kvm`.
    pub accel: String,
    /// QEMU `-cpu` model: `max`, `EPYC`, …
    pub cpu: String,
    /// Guest memory in MiB, split evenly over the NUMA nodes.
    pub memory_mib: u32,
    /// Where NVMe backing files live.
    pub disk_dir: PathBuf,
    /// Virtual CPUs (`-smp`). With several NUMA nodes and at least as many vCPUs as nodes,
    /// they are split into equal runs, one per node (the last node takes the remainder);
    /// fewer vCPUs than nodes all sit on node 0.
    pub smp: u32,
    /// Further QEMU arguments, appended as given after everything pcielab builds.
    pub extra_args: Vec<String>,
    /// Further guest kernel parameters (`pci=pcie_bus_perf`, `intel_iommu=on`), appended to
    /// the lab's own command line.
    pub kernel_args: Vec<String>,
}

impl Default for MachineOptions {
    fn default() -> Self {
        MachineOptions {
            accel: "tcg".into(),
            cpu: "max".into(),
            memory_mib: 512,
            disk_dir: PathBuf::from("."),
            smp: 1,
            extra_args: Vec::new(),
            kernel_args: Vec::new(),
        }
    }
}

/// A backing file QEMU needs before it starts.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Disk {
    pub(crate) path: PathBuf,
    pub(crate) size_mib: u64,
}

/// The QEMU invocation for a topology.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct QemuPlan {
    /// Program and arguments; the runner appends kernel, initrd and console options.
    pub argv: Vec<String>,
    /// The disk images the argv names, to create before QEMU starts.
    pub disks: Vec<Disk>,
    /// Where the guest will differ from the spec, because QEMU cannot express it.
    pub limits: Vec<Limit>,
    /// NUMA nodes the machine has (1 when the topology names none beyond node 0).
    pub numa_nodes: u32,
    /// The guest kernel's command line (`-append`): the lab's own parameters, then
    /// [`MachineOptions::kernel_args`].
    pub kernel_cmdline: String,
}

impl QemuPlan {
    /// The command line to paste into a POSIX shell: each option on its own continued line,
    /// words quoted only where the shell would split or expand them.
    pub fn shell_command(&self) -> String {
        let Some((program, args)) = self.argv.split_first() else {
            return String::new();
        };
        let mut line = shell_word(program);
        for word in args {
            line.push_str(if word.starts_with('-') {
                " \\\n  "
            } else {
                " "
            });
            line.push_str(&shell_word(word));
        }
        line
    }
}

/// Quotes a word for a POSIX shell when it needs it.
fn shell_word(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=.,:/+@%".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The largest NVMe disk image a spec may ask for (a sparse file): 1 TiB.
pub(crate) const MAX_DISK_MIB: u64 = 1 << 20;

/// The largest NVMe controller memory buffer a spec may ask for: 64 GiB.
pub(crate) const MAX_CMB_MIB: u64 = 1 << 16;

/// The most NUMA nodes a QEMU machine has (MAX_NODES in QEMU's numa.h).
pub(crate) const QEMU_MAX_NUMA_NODES: u32 = 128;

/// The QEMU release whose behaviour the limits below (and the lab tests' expected values) were
/// read from: Debian 12's qemu-system-x86 7.2.
pub const QEMU_VERSION: (u32, u32) = (7, 2);

/// The (major, minor) version `qemu --version` reports ("QEMU emulator version 7.2.22 (…)").
#[cfg(test)]
pub(crate) fn installed_qemu_version(qemu: &Path) -> Option<(u32, u32)> {
    let out = std::process::Command::new(qemu)
        .arg("--version")
        .output()
        .ok()?;
    parse_qemu_version(&String::from_utf8_lossy(&out.stdout))
}

/// The version in `qemu --version` text.
pub fn parse_qemu_version(text: &str) -> Option<(u32, u32)> {
    let rest = text.split("version ").nth(1)?;
    let mut parts = rest.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// What QEMU device a spec function becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emulated {
    /// Part of q35 itself: no option needed.
    Builtin,
    RootPort,
    SwitchUpstream,
    SwitchDownstream,
    ExpanderBridge,
    Nvme,
    Nic(&'static str),
    /// A device with no backend to attach (`-device NAME` alone), e.g. the `VGA` display.
    Plain(&'static str),
}

/// QEMU's NVMe controller (`-device nvme`).
pub(crate) const QEMU_NVME_IDS: (u16, u16) = (0x1b36, 0x0010);

/// (vendor, device, kind, what QEMU emulates with those ids). Q35's own functions are listed
/// with their fixed addresses in [`Q35_BUILTINS`].
const EMULATED: [(u16, u16, Emulated, &str); 8] = [
    (0x1b36, 0x000c, Emulated::RootPort, "pcie-root-port"),
    (0x104c, 0x8232, Emulated::SwitchUpstream, "x3130-upstream"),
    (
        0x104c,
        0x8233,
        Emulated::SwitchDownstream,
        "xio3130-downstream",
    ),
    (0x1b36, 0x000b, Emulated::ExpanderBridge, "pxb-pcie"),
    (QEMU_NVME_IDS.0, QEMU_NVME_IDS.1, Emulated::Nvme, "nvme"),
    (0x8086, 0x10d3, Emulated::Nic("e1000e"), "e1000e"),
    (0x8086, 0x100e, Emulated::Nic("e1000"), "e1000"),
    (0x1234, 0x1111, Emulated::Plain("VGA"), "VGA"),
];

/// q35's fixed functions: host bridge, ICH9 LPC, SATA (AHCI) and SMBus.
const Q35_BUILTINS: [(&str, u16, u16); 4] = [
    ("00:00.0", 0x8086, 0x29c0),
    ("00:1f.0", 0x8086, 0x2918),
    ("00:1f.2", 0x8086, 0x2922),
    ("00:1f.3", 0x8086, 0x2930),
];

/// Whether `bdf` is one of q35's fixed functions, present in every guest whether a spec lists
/// it or not.
pub(crate) fn is_q35_builtin(bdf: Bdf) -> bool {
    Q35_BUILTINS
        .iter()
        .any(|(addr, ..)| addr.parse::<Bdf>().ok() == Some(bdf))
}

/// The emulated devices QEMU offers, for error messages.
pub(crate) fn supported_devices() -> String {
    EMULATED
        .iter()
        .map(|(v, d, _, name)| format!("{v:04x}:{d:04x} ({name})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Builds the QEMU command line for `topology`. Errors (bad input) list every function QEMU
/// cannot express, each with the reason and what would be valid.
pub fn plan(topology: &Topology, options: &MachineOptions) -> Result<QemuPlan> {
    let mut problems = Vec::new();
    let mut emulated = BTreeMap::new();
    for f in topology.functions() {
        match classify(f) {
            Ok(e) => {
                emulated.insert(f.bdf, e);
            }
            Err(why) => problems.push(format!("{}: {why}", f.bdf)),
        }
    }
    // Expander bridges: each hosts one extra root bus, named by `bus_nr` (its secondary bus).
    let mut expander_of_bus: BTreeMap<u8, Bdf> = BTreeMap::new();
    for (&bdf, _) in emulated
        .iter()
        .filter(|(_, e)| **e == Emulated::ExpanderBridge)
    {
        let f = topology.get(bdf).expect("classified from the topology");
        match expander_bus(f) {
            Some(bus) => {
                expander_of_bus.insert(bus, bdf);
            }
            None => problems.push(format!(
                "{bdf}: a pxb-pcie host bridge needs the root bus it hosts: set \
                 [function.device] bus_nr = N (1..=254)"
            )),
        }
    }

    let numa_nodes = topology
        .functions()
        .iter()
        .filter_map(|f| f.numa_node)
        .filter(|n| *n >= 0)
        .max()
        .map_or(1, |n| n as u32 + 1);

    let mut argv: Vec<String> = [
        "qemu-system-x86_64",
        "-machine",
        "q35",
        "-accel",
        &options.accel,
        "-cpu",
        &options.cpu,
        "-m",
        &format!("{}M", options.memory_mib),
        "-smp",
        &options.smp.to_string(),
        "-nodefaults",
        "-display",
        "none",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if numa_nodes > QEMU_MAX_NUMA_NODES {
        problems.push(format!(
            "numa_node {} needs {numa_nodes} NUMA nodes; QEMU supports at most {QEMU_MAX_NUMA_NODES}",
            numa_nodes - 1
        ));
    } else if numa_nodes > 1 {
        let per_node = options.memory_mib / numa_nodes;
        for node in 0..numa_nodes {
            argv.push("-object".into());
            argv.push(format!("memory-backend-ram,id=mem{node},size={per_node}M"));
            argv.push("-numa".into());
            // One vCPU boots fastest under TCG; the other nodes are then memory-only, which is
            // enough for a host bridge's _PXM to name them. With a vCPU per node or more, each
            // node gets its own, so a device's node has CPUs to take its interrupts.
            let cpus = match node_cpus(node, numa_nodes, options.smp) {
                Some((first, last)) if first == last => format!(",cpus={first}"),
                Some((first, last)) => format!(",cpus={first}-{last}"),
                None => String::new(),
            };
            argv.push(format!("node,nodeid={node},memdev=mem{node}{cpus}"));
        }
    }

    let mut disks = Vec::new();
    let mut limits = Vec::new();
    let mut slots = SlotAllocator::new(topology, &emulated, &mut problems);
    for f in topology.functions() {
        let Some(&kind) = emulated.get(&f.bdf) else {
            continue;
        };
        let bus = match parent_bus(topology, f, kind, &emulated, &expander_of_bus) {
            Ok(bus) => bus,
            Err(why) => {
                problems.push(format!("{}: {why}", f.bdf));
                continue;
            }
        };
        let on_expander = expander_numa(topology, f, &expander_of_bus);
        limits.extend(numa_limit(f, on_expander));
        let mut props = vec![format!("id={}", device_id(f.bdf))];
        if let Some(bus) = &bus {
            props.push(format!("bus={bus}"));
            props.push(format!("addr={:02x}.{:x}", f.bdf.device, f.bdf.function));
            if f.bdf.function == 0 && has_other_functions(topology, f.bdf) {
                props.push("multifunction=on".into());
            }
        }
        match kind {
            Emulated::Builtin => continue,
            Emulated::RootPort => {
                let (chassis, slot) = slots.for_port(f);
                match root_port_caps(f) {
                    Ok((speed, width)) => props.push(format!(
                        "chassis={chassis},slot={slot},x-speed={speed},x-width={width}"
                    )),
                    Err(why) => problems.push(format!("{}: {why}", f.bdf)),
                }
                limits.extend(current_link_limits(topology, f));
                argv.push("-device".into());
                argv.push(format!("pcie-root-port,{}", props.join(",")));
            }
            Emulated::SwitchUpstream => {
                limits.extend(fixed_cap_limits(f, QEMU_FIXED_ENDPOINT));
                limits.extend(current_link_limits(topology, f));
                argv.push("-device".into());
                argv.push(format!("x3130-upstream,{}", props.join(",")));
            }
            Emulated::SwitchDownstream => {
                let (chassis, slot) = slots.for_port(f);
                props.push(format!("chassis={chassis},slot={slot}"));
                limits.extend(downstream_cap_limits(f));
                limits.extend(current_link_limits(topology, f));
                argv.push("-device".into());
                argv.push(format!("xio3130-downstream,{}", props.join(",")));
            }
            Emulated::ExpanderBridge => {
                let bus_nr = expander_bus(f).unwrap_or(0);
                props.push(format!("bus_nr={bus_nr}"));
                let node = f.numa_node.filter(|n| *n >= 0);
                if let Some(node) = node.or_else(|| first_numa_below(topology, bus_nr)) {
                    props.push(format!("numa_node={node}"));
                }
                argv.push("-device".into());
                argv.push(format!("pxb-pcie,{}", props.join(",")));
            }
            Emulated::Nvme => {
                limits.extend(endpoint_link_limits(f));
                let drive = format!("drive_{}", device_id(f.bdf));
                let path = options.disk_dir.join(format!("{}.img", device_id(f.bdf)));
                let size_mib = match param_mib(f, "size_mb", MAX_DISK_MIB) {
                    Ok(size) => size.unwrap_or(64),
                    Err(why) => {
                        problems.push(why);
                        64
                    }
                };
                disks.push(Disk {
                    path: path.clone(),
                    size_mib,
                });
                argv.push("-drive".into());
                argv.push(format!(
                    "file={},if=none,id={drive},format=raw",
                    qemu_escape(&path)
                ));
                props.insert(0, format!("drive={drive}"));
                match nvme_serial(f) {
                    Ok(serial) => props.push(format!("serial={}", serial.replace(',', ",,"))),
                    Err(why) => problems.push(why),
                }
                match param_mib(f, "cmb_size_mb", MAX_CMB_MIB) {
                    Ok(Some(mb)) => props.push(format!("cmb_size_mb={mb}")),
                    Ok(None) => {}
                    Err(why) => problems.push(why),
                }
                argv.push("-device".into());
                argv.push(format!("nvme,{}", props.join(",")));
            }
            Emulated::Nic(model) => {
                limits.extend(endpoint_link_limits(f));
                let netdev = format!("net_{}", device_id(f.bdf));
                argv.push("-netdev".into());
                argv.push(format!("user,id={netdev}"));
                props.insert(0, format!("netdev={netdev}"));
                argv.push("-device".into());
                argv.push(format!("{model},{}", props.join(",")));
            }
            Emulated::Plain(model) => {
                limits.extend(endpoint_link_limits(f));
                argv.push("-device".into());
                argv.push(format!("{model},{}", props.join(",")));
            }
        }
    }
    argv.extend(options.extra_args.iter().cloned());
    if !problems.is_empty() {
        return Err(Error::bad_input(format!(
            "QEMU cannot express this topology:\n  {}",
            problems.join("\n  ")
        )));
    }
    if let Some(bad) = options
        .kernel_args
        .iter()
        .find(|a| a.is_empty() || a.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(Error::bad_input(format!(
            "--kernel-arg '{bad}': give one kernel parameter without spaces per option, e.g. \
             --kernel-arg pci=pcie_bus_perf"
        )));
    }
    let kernel_cmdline = std::iter::once(LAB_KERNEL_CMDLINE)
        .chain(options.kernel_args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(QemuPlan {
        argv,
        disks,
        limits,
        numa_nodes,
        kernel_cmdline,
    })
}

/// The lab's own kernel parameters. loglevel=4: errors and warnings reach the console, so a
/// failed boot shows why; the guest silences the console before sending results.
/// no_timer_check: under TCG on a loaded host the IO-APIC timer check can miss ticks and panic
/// ("IO-APIC + timer doesn't work!"); it proves nothing about PCIe.
pub(crate) const LAB_KERNEL_CMDLINE: &str = "console=ttyS0 panic=-1 loglevel=4 no_timer_check";

/// The first and last vCPU of `node` (None: the node has none).
fn node_cpus(node: u32, nodes: u32, smp: u32) -> Option<(u32, u32)> {
    if smp < nodes {
        return (node == 0).then_some((0, smp - 1));
    }
    let per_node = smp / nodes;
    let first = node * per_node;
    let last = if node + 1 == nodes {
        smp - 1
    } else {
        first + per_node - 1
    };
    Some((first, last))
}

/// PCIe slot identities of root and downstream ports: QEMU refuses two ports with one
/// (chassis, slot) pair. The spec's `[function.device] chassis`/`slot` are kept; other ports get
/// chassis 1 and the next free slot.
struct SlotAllocator {
    taken: std::collections::BTreeSet<(u8, u16)>,
    next_slot: u16,
}

impl SlotAllocator {
    fn new(
        topology: &Topology,
        emulated: &BTreeMap<Bdf, Emulated>,
        problems: &mut Vec<String>,
    ) -> SlotAllocator {
        let mut taken = std::collections::BTreeSet::new();
        for f in topology.functions() {
            if !matches!(
                emulated.get(&f.bdf),
                Some(Emulated::RootPort | Emulated::SwitchDownstream)
            ) {
                continue;
            }
            match spec_slot(f) {
                Ok(Some(pair)) if !taken.insert(pair) => problems.push(format!(
                    "{}: chassis {} slot {} is already used by another port",
                    f.bdf, pair.0, pair.1
                )),
                Ok(_) => {}
                Err(why) => problems.push(format!("{}: {why}", f.bdf)),
            }
        }
        SlotAllocator {
            taken,
            next_slot: 1,
        }
    }

    fn for_port(&mut self, f: &Function) -> (u8, u16) {
        if let Ok(Some(pair)) = spec_slot(f) {
            return pair;
        }
        while self.taken.contains(&(1, self.next_slot)) {
            self.next_slot += 1;
        }
        self.taken.insert((1, self.next_slot));
        (1, self.next_slot)
    }
}

/// The spec's chassis/slot for a port: both or neither.
fn spec_slot(f: &Function) -> std::result::Result<Option<(u8, u16)>, String> {
    let get = |key: &str| f.params.get(key).map(|v| v.as_integer());
    match (get("chassis"), get("slot")) {
        (None, None) => Ok(None),
        (Some(Some(c)), Some(Some(s))) => match (u8::try_from(c), u16::try_from(s)) {
            (Ok(c), Ok(s)) if s < 8192 => Ok(Some((c, s))),
            _ => Err(format!(
                "[function.device] chassis = {c}, slot = {s}: expected chassis 0..=255 and \
                 slot 0..=8191"
            )),
        },
        _ => Err("[function.device] needs both chassis and slot (integers), or neither".into()),
    }
}

/// A QEMU device id from an address: `d0000_03_00_0`.
pub(crate) fn device_id(bdf: Bdf) -> String {
    format!(
        "d{:04x}_{:02x}_{:02x}_{:x}",
        bdf.domain, bdf.bus, bdf.device, bdf.function
    )
}

fn classify(f: &Function) -> std::result::Result<Emulated, String> {
    if let Some((addr, ..)) = Q35_BUILTINS
        .iter()
        .find(|(_, v, d)| *v == f.vendor && *d == f.device)
    {
        let at: Bdf = addr.parse().expect("valid");
        return if f.bdf == at {
            Ok(Emulated::Builtin)
        } else {
            Err(format!(
                "{:04x}:{:04x} is part of q35 and only exists at {at}",
                f.vendor, f.device
            ))
        };
    }
    if let Some(model) = f.params.get("model").and_then(|m| m.as_str()) {
        let found = EMULATED.iter().find(|(.., name)| *name == model);
        return match found {
            Some((v, d, e, _)) if (*v, *d) == (f.vendor, f.device) => Ok(*e),
            Some((v, d, ..)) => Err(format!(
                "model '{model}' has vendor:device {v:04x}:{d:04x} in QEMU, the spec says \
                 {:04x}:{:04x}; QEMU cannot change a device's ids",
                f.vendor, f.device
            )),
            None => Err(format!(
                "model '{model}' is not a device the lab can emulate; valid: {}",
                supported_devices()
            )),
        };
    }
    EMULATED
        .iter()
        .find(|(v, d, ..)| (*v, *d) == (f.vendor, f.device))
        .map(|(_, _, e, _)| *e)
        .ok_or_else(|| {
            format!(
                "no QEMU device has vendor:device {:04x}:{:04x} ({}); QEMU cannot set a \
                 function's ids; valid: {}",
                f.vendor,
                f.device,
                f.kind.name(),
                supported_devices()
            )
        })
        .and_then(|e| {
            let expected = match e {
                Emulated::RootPort => Kind::RootPort,
                Emulated::SwitchUpstream => Kind::SwitchUpstream,
                Emulated::SwitchDownstream => Kind::SwitchDownstream,
                Emulated::ExpanderBridge => Kind::HostBridge,
                _ if f.parent.is_none() => Kind::RcEndpoint,
                _ => Kind::Endpoint,
            };
            let endpoint_alias = matches!(
                (expected, f.kind),
                (Kind::RcEndpoint, Kind::Endpoint) | (Kind::Endpoint, Kind::RcEndpoint)
            );
            if f.kind == expected || (endpoint_alias && f.parent.is_none()) {
                Ok(e)
            } else {
                Err(format!(
                    "{:04x}:{:04x} is a {} in QEMU, the spec says {}",
                    f.vendor,
                    f.device,
                    expected.name(),
                    f.kind.name()
                ))
            }
        })
}

/// The QEMU bus a function plugs into (`None` for q35 built-ins), checking that QEMU allows
/// this parent/child pair.
fn parent_bus(
    topology: &Topology,
    f: &Function,
    kind: Emulated,
    emulated: &BTreeMap<Bdf, Emulated>,
    expander_of_bus: &BTreeMap<u8, Bdf>,
) -> std::result::Result<Option<String>, String> {
    if kind == Emulated::Builtin {
        return Ok(None);
    }
    if f.bdf.domain != 0 {
        return Err("q35 has one PCI segment: the domain must be 0000".into());
    }
    let Some(parent) = f.parent else {
        if f.bdf.bus == 0 {
            return match kind {
                Emulated::SwitchUpstream | Emulated::SwitchDownstream => {
                    Err("a switch port must sit below a root or downstream port".into())
                }
                _ => Ok(Some("pcie.0".into())),
            };
        }
        let Some(pxb) = expander_of_bus.get(&f.bdf.bus) else {
            return Err(format!(
                "root bus {:02x} has no pxb-pcie host bridge with bus_nr = {}",
                f.bdf.bus, f.bdf.bus
            ));
        };
        return match kind {
            Emulated::RootPort => Ok(Some(device_id(*pxb))),
            _ => Err(format!(
                "only root ports can sit on a pxb-pcie root bus, not a {}",
                f.kind.name()
            )),
        };
    };
    let parent_kind = emulated.get(&parent).copied();
    let fits = match (parent_kind, kind) {
        (Some(Emulated::SwitchUpstream), Emulated::SwitchDownstream) => true,
        (Some(Emulated::SwitchUpstream), _) | (_, Emulated::SwitchDownstream) => false,
        (Some(Emulated::RootPort | Emulated::SwitchDownstream), k) => {
            !matches!(k, Emulated::RootPort | Emulated::ExpanderBridge)
        }
        _ => false,
    };
    if !fits {
        return Err(format!(
            "QEMU cannot put a {} below {parent} ({})",
            f.kind.name(),
            topology
                .get(parent)
                .map_or("missing from the spec", |p| p.kind.name())
        ));
    }
    if parent_kind != Some(Emulated::SwitchUpstream) && f.bdf.device != 0 {
        return Err(format!(
            "below a port only device 00 exists (no ARI): {} is device {:02x}",
            f.bdf, f.bdf.device
        ));
    }
    Ok(Some(device_id(parent)))
}

fn expander_bus(f: &Function) -> Option<u8> {
    let from_param = f
        .params
        .get("bus_nr")
        .and_then(|v| v.as_integer())
        .and_then(|n| u8::try_from(n).ok());
    from_param
        .or(f.buses.map(|(secondary, _)| secondary))
        .filter(|b| (1..=254).contains(b))
}

/// The NUMA node the guest will report for `f`: its expander bridge's node, if it sits below one.
fn expander_numa(
    topology: &Topology,
    f: &Function,
    expander_of_bus: &BTreeMap<u8, Bdf>,
) -> Option<i32> {
    let top = *topology.path_to_root(f.bdf).last()?;
    let pxb = topology.get(*expander_of_bus.get(&top.bdf.bus)?)?;
    pxb.numa_node
        .filter(|n| *n >= 0)
        .or_else(|| first_numa_below(topology, top.bdf.bus))
}

fn first_numa_below(topology: &Topology, root_bus: u8) -> Option<i32> {
    topology
        .functions()
        .iter()
        .filter(|f| topology.path_to_root(f.bdf).last().map(|t| t.bdf.bus) == Some(root_bus))
        .find_map(|f| f.numa_node.filter(|n| *n >= 0))
}

fn has_other_functions(topology: &Topology, bdf: Bdf) -> bool {
    topology.functions().iter().any(|g| {
        g.bdf.domain == bdf.domain
            && g.bdf.bus == bdf.bus
            && g.bdf.device == bdf.device
            && g.bdf.function != 0
    })
}

/// `x-speed`/`x-width` values for a root port's link capability (QEMU's defaults when unset).
fn root_port_caps(f: &Function) -> std::result::Result<(&'static str, u8), String> {
    let link = f.link.unwrap_or_default();
    let speed = match link.max_speed.unwrap_or(Generation::Gen4) {
        Generation::Gen1 => "2_5",
        Generation::Gen2 => "5",
        Generation::Gen3 => "8",
        Generation::Gen4 => "16",
        g => {
            return Err(format!(
                "link.max_speed {g} ({} GT/s): QEMU 7.2 root ports go up to 16 GT/s (Gen4)",
                g.gt_s()
            ))
        }
    };
    let width = link.max_width.unwrap_or(32);
    if ![1, 2, 4, 8, 12, 16, 32].contains(&width) {
        return Err(format!(
            "link.max_width {width}: QEMU root ports take 1, 2, 4, 8, 12, 16 or 32"
        ));
    }
    Ok((speed, width))
}

/// A size in MiB from the function's `[device]` table, in 1..=`max`.
fn param_mib(f: &Function, key: &str, max: u64) -> std::result::Result<Option<u64>, String> {
    match f.params.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| (1..=max).contains(n))
            .map(Some)
            .ok_or_else(|| {
                format!(
                    "{}: [function.device] {key} = {v}: expected an integer in 1..={max} (MiB)",
                    f.bdf
                )
            }),
    }
}

/// The NVMe serial: the spec's `serial` (the SN field: at most 20 printable ASCII characters),
/// else one derived from the address.
fn nvme_serial(f: &Function) -> std::result::Result<String, String> {
    let Some(serial) = f.params.get("serial") else {
        return Ok(format!(
            "pcielab{:02x}{:02x}{:x}",
            f.bdf.bus, f.bdf.device, f.bdf.function
        ));
    };
    match serial.as_str() {
        Some(s) if (1..=20).contains(&s.len()) && s.bytes().all(|b| (0x20..0x7f).contains(&b)) => {
            Ok(s.to_string())
        }
        _ => Err(format!(
            "{}: [device] serial = {serial}: expected 1 to 20 printable ASCII characters (the NVMe serial number field)",
            f.bdf
        )),
    }
}

/// QEMU's option syntax doubles commas inside values.
fn qemu_escape(path: &Path) -> String {
    path.display().to_string().replace(',', ",,")
}
