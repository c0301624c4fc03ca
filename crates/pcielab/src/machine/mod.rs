//! Where facts come from, pciutils-style "access methods" behind one object: the live host
//! (`host`, reading `/`), a saved sysfs tree (`snapshot:DIR`), a simulated PCIe machine
//! (`sim:PRESET` or `sim:FILE.toml`) or a simulated MPAM/RDT resctrl machine (`sim:mpam-seed`,
//! `sim:rdt-xeon8163`). This module parses the user's `--machine` selector ([`MachineSelector`])
//! and opens it once ([`Machine::open`]); the [`Machine`] then answers the three questions every
//! command asks — its PCIe topology ([`Machine::spec`]), its performance counters
//! ([`Machine::counters`]: perf_event_open on a host, the simulator's PMU models on `sim:`) and
//! its resctrl ([`Machine::qos`]: the host mount or the simulated MPAM/RDT kernel) — or says
//! clearly that this kind of machine has no such thing. pmu/, sim/ and qos/ provide the
//! backends and never open a selector; this module picks one (commands, `observe` and QoS
//! scenario files all start from a `Machine`).
//!
//! ```no_run
//! use pcielab::machine::Machine;
//! let machine: Machine = "sim:yitian710".parse()?; // or Machine::open(&selector)
//! let functions = machine.topology()?.functions().len();
//! let pmus = machine.counters()?.list(None)?;
//! # Ok::<(), pcielab::Error>(())
//! ```

pub(crate) mod derived;
mod host_mmio;
pub(crate) mod mapping;
pub(crate) mod missing;
pub(crate) mod mmio;
pub(crate) mod presets;
mod sim_mmio;
mod sim_traffic;
pub(crate) mod snapshot;
mod sysfs_traffic;
pub(crate) mod traffic;

pub use mmio::{MmioOperation, MmioOptions, MmioReport};
pub use presets::{catalog as preset_catalog, PresetList, PresetSummary, TopologyPreset, PRESETS};
pub use snapshot::save_snapshot;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{Error, Result};
use crate::model::platform::PlatformModel;
use crate::model::transfer::LinkParams;
use crate::pcie::Bdf;
use crate::pmu::bound_root_port_pmus;
use crate::pmu::counters::{CatalogPmus, Counters};
use crate::pmu::host::HostCounters;
use crate::qos::backend::{QosBackend, QosOptions};
use crate::qos::host::HostResctrl;
use crate::qos::presets::{Preset, PRESETS as RESCTRL_PRESETS};
use crate::qos::sim::SimulatedResctrl;
use crate::sim::SimulatedPcie;
use crate::topology::lspci::read_lspci_path;
use crate::topology::lspci_source::LspciFormat;
use crate::topology::readplan::ReadPlan;
use crate::topology::spec::{parse_spec, MachineSpec};
use crate::topology::sysfs::read_sysfs;
use crate::topology::{Kind, Topology};
use missing::Input;
use sim_traffic::SimTraffic;
use sysfs_traffic::SysfsTraffic;
use traffic::TrafficSampler;

/// The user's choice of machine, parsed from `--machine`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MachineSelector {
    /// The live host; `root` is `/` unless a test points it elsewhere.
    Host {
        /// The directory standing for `/`.
        root: PathBuf,
    },
    /// A sysfs tree saved by `pcielab snapshot` (or any copy of `/sys/bus/pci`).
    Snapshot {
        /// The saved `/sys/bus/pci` (or a whole saved root's).
        dir: PathBuf,
    },
    /// A built-in preset by name.
    SimPreset {
        /// The preset's name (`pcielab presets` lists them).
        name: String,
    },
    /// A spec file describing a simulated PCIe machine.
    SimFile {
        /// The spec file (TOML).
        path: PathBuf,
    },
    /// Saved or pasted lspci output (`-vvv` text or a `-xxxx` hex dump); `-` is standard input.
    Lspci {
        /// The file holding the output, or `-`.
        path: PathBuf,
    },
}

impl FromStr for MachineSelector {
    type Err = Error;

    fn from_str(s: &str) -> Result<MachineSelector> {
        if s == "host" {
            return Ok(MachineSelector::Host {
                root: PathBuf::from("/"),
            });
        }
        if let Some(dir) = s.strip_prefix("snapshot:").filter(|d| !d.is_empty()) {
            return Ok(MachineSelector::Snapshot {
                dir: PathBuf::from(dir),
            });
        }
        if let Some(target) = s.strip_prefix("sim:").filter(|t| !t.is_empty()) {
            return Ok(MachineSelector::spec(target));
        }
        if let Some(path) = s.strip_prefix("lspci:").filter(|p| !p.is_empty()) {
            return Ok(MachineSelector::Lspci {
                path: PathBuf::from(path),
            });
        }
        Err(Error::bad_input(format!(
            "invalid --machine '{s}': expected 'host', 'snapshot:DIR', 'sim:PRESET', 'sim:FILE.toml' \
             or 'lspci:FILE' (lspci -vvv or -xxxx output; lspci:- reads standard input)"
        )))
    }
}

impl fmt::Display for MachineSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MachineSelector::Host { .. } => write!(f, "host"),
            MachineSelector::Snapshot { dir } => write!(f, "snapshot:{}", dir.display()),
            MachineSelector::SimPreset { name } => write!(f, "sim:{name}"),
            MachineSelector::SimFile { path } => write!(f, "sim:{}", path.display()),
            MachineSelector::Lspci { path } => write!(f, "lspci:{}", path.display()),
        }
    }
}

impl MachineSelector {
    /// A topology spec named the way `sim:` takes it: a `.toml` file or a path is a file, any
    /// other word a built-in preset.
    pub(crate) fn spec(target: &str) -> MachineSelector {
        if target.ends_with(".toml") || target.contains('/') {
            MachineSelector::SimFile {
                path: PathBuf::from(target),
            }
        } else {
            MachineSelector::SimPreset {
                name: target.to_string(),
            }
        }
    }

    /// Reads the spec the selector names: its topology and, for `sim:`, the spec's
    /// `[sim]` and `[platform]` tables (a lab spec is read this way). Commands open a
    /// [`Machine`] instead, which also answers counters and resctrl.
    pub(crate) fn read_spec(&self) -> Result<MachineSpec> {
        match self {
            MachineSelector::SimPreset { name } => {
                let text = presets::preset(name).ok_or_else(|| {
                    Error::bad_input(format!(
                        "unknown preset 'sim:{name}': valid presets are {}, or give a spec file as sim:FILE.toml",
                        presets::names().join(", ")
                    ))
                })?;
                let origin = format!("presets/{name}.toml");
                parse_spec(&origin, text).and_then(|p| sim_table_checked(&origin, p))
            }
            MachineSelector::SimFile { path } => {
                let text = crate::input::read_input_file(path, "spec file")?;
                let origin = path.display().to_string();
                parse_spec(&origin, &text).and_then(|p| sim_table_checked(&origin, p))
            }
            MachineSelector::Host { root } => Ok(MachineSpec {
                name: "host".to_string(),
                description: format!("live sysfs under {}", root.display()),
                topology: read_named_sysfs(&root.join("sys/bus/pci"))?,
                sim: toml::Table::new(),
                platform_table: toml::Table::new(),
            }),
            MachineSelector::Snapshot { dir } => {
                let topology = read_named_sysfs(dir)?;
                // A live host may have no PCI (a container); a saved one always had some.
                if topology.functions().is_empty() {
                    return Err(Error::bad_input(format!(
                        "snapshot:{}: devices/ holds no PCI functions (entries named like 0000:00:00.0); \
                         expected a directory saved by `pcielab snapshot` or `topo --sysfs-export`",
                        dir.display()
                    )));
                }
                Ok(MachineSpec {
                    name: "snapshot".to_string(),
                    description: format!("sysfs snapshot {}", dir.display()),
                    topology,
                    sim: toml::Table::new(),
                    platform_table: toml::Table::new(),
                })
            }
            MachineSelector::Lspci { path } => {
                let read = read_lspci_path(path)?;
                let format = match read.format {
                    LspciFormat::HexDump => "lspci hex dump",
                    LspciFormat::Verbose => "lspci -v text",
                };
                let mut description = format!("{format} {}", path.display());
                for note in &read.notes {
                    description.push_str("; ");
                    description.push_str(note);
                }
                Ok(MachineSpec {
                    name: "lspci".to_string(),
                    description,
                    topology: named(read.topology),
                    sim: toml::Table::new(),
                    platform_table: toml::Table::new(),
                })
            }
        }
    }
}

/// `spec` once its `[sim]` table is valid: checked whenever a spec is opened, so `topo`
/// refuses a moved or unknown key just as a simulated run does, naming the spec's file.
fn sim_table_checked(origin: &str, spec: MachineSpec) -> Result<MachineSpec> {
    let sim: std::collections::BTreeMap<String, toml::Value> = spec
        .sim
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    crate::sim::config::SimConfig::from_table(Some(&sim))
        .map_err(|e| Error::bad_input(format!("{origin}: {}", e.message())))?;
    Ok(spec)
}

/// An opened machine: the one object a command asks for topology, counters and resctrl.
pub struct Machine {
    selector: MachineSelector,
    access: Access,
    /// The read plan of a host's or snapshot's sysfs, made on first use and shared by every
    /// observer of this machine.
    read_plan: OnceLock<Arc<Mutex<ReadPlan>>>,
}

/// How a machine's facts are reached (pciutils' access methods).
enum Access {
    /// The live host under `root`; its PCI tree is read on first use and kept.
    Host {
        root: PathBuf,
        spec: OnceLock<MachineSpec>,
    },
    /// A saved sysfs tree under `dir`, read at open.
    Snapshot { dir: PathBuf, spec: MachineSpec },
    /// Saved lspci output, read at open: a topology and nothing else.
    Lspci(MachineSpec),
    /// A simulated PCIe machine: its spec, parsed at open.
    SimPcie(MachineSpec),
    /// A simulated MPAM/RDT resctrl machine.
    SimResctrl(&'static Preset),
}

impl Machine {
    /// Opens the machine `selector` names: checks that it exists (a known preset, a readable
    /// spec or snapshot) without reading more of a live host than asked for later.
    pub fn open(selector: &MachineSelector) -> Result<Machine> {
        let access = match selector {
            MachineSelector::Host { root } => Access::Host {
                root: root.clone(),
                spec: OnceLock::new(),
            },
            MachineSelector::Snapshot { dir } => Access::Snapshot {
                dir: dir.clone(),
                spec: selector.read_spec()?,
            },
            MachineSelector::Lspci { .. } => Access::Lspci(selector.read_spec()?),
            MachineSelector::SimFile { .. } => Access::SimPcie(selector.read_spec()?),
            MachineSelector::SimPreset { name } => {
                match RESCTRL_PRESETS.iter().find(|p| p.name == name) {
                    Some(preset) => Access::SimResctrl(preset),
                    None if presets::preset(name).is_some() => {
                        Access::SimPcie(selector.read_spec()?)
                    }
                    None => {
                        return Err(Error::bad_input(format!(
                            "unknown preset 'sim:{name}': simulated PCIe platforms are {} \
                             (or a spec file, sim:FILE.toml); simulated resctrl machines are {}",
                            presets::names().join(", "),
                            Preset::selectors()
                        )))
                    }
                }
            }
        };
        Ok(Machine {
            selector: selector.clone(),
            access,
            read_plan: OnceLock::new(),
        })
    }

    /// The live host with its `/sys` and `/proc` under `root` instead of `/`: a chroot, a
    /// container's view, or a test's fixture tree.
    pub fn host_at(root: impl Into<PathBuf>) -> Machine {
        let root = root.into();
        Machine {
            selector: MachineSelector::Host { root: root.clone() },
            access: Access::Host {
                root,
                spec: OnceLock::new(),
            },
            read_plan: OnceLock::new(),
        }
    }

    /// The lspci output in the file `path`, opened from the path itself rather than a
    /// `lspci:PATH` text, so a file name that is not UTF-8 still opens.
    pub fn lspci_at(path: impl Into<PathBuf>) -> Result<Machine> {
        Machine::open(&MachineSelector::Lspci { path: path.into() })
    }

    /// The selector this machine was opened from.
    pub fn selector(&self) -> &MachineSelector {
        &self.selector
    }

    /// The machine as a spec: its topology and, on `sim:`, the spec's `[sim]` and `[platform]`
    /// tables. A simulated resctrl machine has none.
    pub fn spec(&self) -> Result<&MachineSpec> {
        match &self.access {
            Access::Host { spec, .. } => {
                if let Some(read) = spec.get() {
                    return Ok(read);
                }
                let read = self.selector.read_spec()?;
                Ok(spec.get_or_init(|| read))
            }
            Access::Snapshot { spec, .. } | Access::SimPcie(spec) | Access::Lspci(spec) => Ok(spec),
            Access::SimResctrl(preset) => Err(self.no_pcie(preset)),
        }
    }

    /// The machine's PCIe topology (see [`Machine::spec`]).
    pub fn topology(&self) -> Result<&Topology> {
        Ok(&self.spec()?.topology)
    }

    /// The directory shaped like `/sys/bus/pci` this machine is read from: a host's
    /// `<root>/sys/bus/pci` or a snapshot's directory; `None` for `sim:` machines.
    pub(crate) fn pci_dir(&self) -> Option<PathBuf> {
        match &self.access {
            Access::Host { root, .. } => Some(root.join("sys/bus/pci")),
            Access::Snapshot { dir, .. } => Some(dir.clone()),
            Access::SimPcie(_) | Access::SimResctrl(_) | Access::Lspci(_) => None,
        }
    }

    /// The filesystem root whose `/sys` and `/proc` describe this machine beyond its PCI tree
    /// (IRQs, CPUs, IOMMU groups): a host's root, or a snapshot saved as a whole tree
    /// (`snapshot:ROOT/sys/bus/pci`); `None` for other snapshots and `sim:` machines.
    pub(crate) fn system_root(&self) -> Option<PathBuf> {
        match &self.access {
            Access::Host { root, .. } => Some(root.clone()),
            Access::Snapshot { dir, .. } => dir
                .ends_with("sys/bus/pci")
                .then(|| dir.ancestors().nth(3).map(Path::to_path_buf))
                .flatten(),
            Access::SimPcie(_) | Access::SimResctrl(_) | Access::Lspci(_) => None,
        }
    }

    /// The sysfs read plan of a host or snapshot (`topology::readplan`): which link and AER
    /// attributes each sample reads, discovered once and kept here so every observer of the
    /// machine (`top`, `exporter`) shares it. `sim:` machines have no sysfs: bad input.
    pub(crate) fn read_plan(&self) -> Result<Arc<Mutex<ReadPlan>>> {
        if let Some(plan) = self.read_plan.get() {
            return Ok(Arc::clone(plan));
        }
        let pci_dir = self.pci_dir().ok_or_else(|| {
            Error::bad_input(format!(
                "machine '{}' has no sysfs to read: use host or snapshot:DIR",
                self.selector
            ))
        })?;
        let topology = self.topology()?.clone();
        let plan = ReadPlan::discover(&pci_dir, topology, read_named_sysfs);
        Ok(Arc::clone(
            self.read_plan.get_or_init(|| Arc::new(Mutex::new(plan))),
        ))
    }

    /// Samples this machine's traffic and link health for an observer: a host's PMU and
    /// device counters and a snapshot's link facts through the read plan
    /// (`sysfs_traffic.rs`), or the simulator playing `workload` (the argv after `--`; none
    /// idles) from now (`sim_traffic.rs`). `read_file` reads fio job files. A workload on a
    /// machine that does not play one, lspci output (nothing moves) and a resctrl machine are
    /// bad input.
    pub(crate) fn traffic_sampler(
        &self,
        workload: &[String],
        read_file: impl Fn(&Path) -> Result<String>,
    ) -> Result<Box<dyn TrafficSampler>> {
        let selector = &self.selector;
        let (root, live) = match &self.access {
            Access::SimPcie(_) => {
                let machine = self.simulator()?;
                let work = if workload.is_empty() {
                    crate::sim::workload::Workload::Sleep { ns: 0 }
                } else {
                    crate::sim::workload::parse(workload, read_file)?
                };
                let run = machine.run(&work)?;
                return Ok(Box::new(SimTraffic::new(machine, run)));
            }
            Access::Lspci(_) => {
                return Err(Error::bad_input(format!(
                    "machine '{selector}' is lspci output: it has no counters or link state to \
                     observe; observe 'host', 'snapshot:DIR' or a sim: machine"
                )))
            }
            Access::SimResctrl(preset) => return Err(self.no_pcie(preset)),
            Access::Host { root, .. } => (root, true),
            Access::Snapshot { dir, .. } => (dir, false),
        };
        if !workload.is_empty() {
            return Err(Error::bad_input(format!(
                "a workload after `--` plays on sim: machines only; on '{selector}' run \
                 it yourself while pcielab observes"
            )));
        }
        Ok(Box::new(SysfsTraffic::open(root, live, self.read_plan()?)?))
    }

    /// What the machine's input is, to say why a fact is missing from it and how to get it
    /// (`missing.rs`): the running kernel's sysfs, a snapshot (with or without the rest of its
    /// root), lspci output (with or without driver lines) or a spec.
    pub(crate) fn input(&self) -> Result<Input> {
        let topology = self.topology()?;
        Ok(match &self.access {
            Access::Host { .. } => Input::Host,
            Access::Snapshot { .. } => Input::Snapshot {
                whole_root: self.system_root().is_some(),
            },
            Access::Lspci(_) => Input::Lspci {
                drivers_listed: topology
                    .functions()
                    .iter()
                    .any(|f| f.evidence.line("driver").is_some()),
            },
            Access::SimPcie(_) | Access::SimResctrl(_) => Input::Spec,
        })
    }

    /// The model an endpoint's transfers are predicted with (MMIO throughput, interrupt
    /// delivery): the platform model of a simulated machine and the link of `device`, or of
    /// its first endpoint with a link when `device` is `None`. `what` names the request in
    /// errors (`bench mmio`). A machine without a simulator is bad input, as is a `device`
    /// that is no endpoint (bridges and ports have no BAR to load from and raise no device
    /// interrupts).
    pub fn endpoint_model(&self, device: Option<Bdf>, what: &str) -> Result<EndpointModel> {
        let machine = self.simulator()?;
        let device = match device {
            Some(bdf) => endpoint(&machine.topology, bdf, &machine.name, what)?,
            None => machine
                .topology
                .functions()
                .iter()
                .find(|f| f.kind == Kind::Endpoint && f.link.is_some())
                .map(|f| f.bdf)
                .ok_or_else(|| {
                    Error::bad_input(format!("{}: no endpoint with a link", machine.name))
                })?,
        };
        let link = machine.link_params(device);
        Ok(EndpointModel {
            device,
            link,
            platform: machine.platform,
        })
    }

    /// MMIO throughput for `options` on this machine: measured on a host by mapping the BAR
    /// under its root, predicted on a simulated machine by its
    /// platform model on the endpoint's link ([`Machine::endpoint_model`]); bad input on a
    /// machine with neither.
    pub fn mmio(&self, options: MmioOptions) -> Result<MmioReport> {
        match &self.access {
            Access::Host { root, .. } => host_mmio::measure(&options, root),
            _ => {
                let model = self.endpoint_model(Some(options.bdf), "bench mmio")?;
                sim_mmio::predict(&options, &model.platform, &model.link)
            }
        }
    }

    /// Whether a workload given after `--` runs inside pcielab (the simulator plays it) rather
    /// than as a child process: there Ctrl-C keeps its default meaning.
    pub fn runs_workloads_itself(&self) -> bool {
        matches!(self.access, Access::SimPcie(_))
    }

    /// Whether resctrl changes outlive the command without a `--state` file: the kernel keeps
    /// a host's; a simulated resctrl machine starts fresh each run.
    pub fn keeps_qos_changes(&self) -> bool {
        !matches!(self.access, Access::SimResctrl(_))
    }

    /// Whether its sysfs is the running kernel's (`--machine host`), the tree `--root` may
    /// stand in for.
    pub(crate) fn reads_the_running_kernel(&self) -> bool {
        matches!(self.access, Access::Host { .. })
    }

    /// The machine's performance counters: perf_event_open on a host, the simulator's PMU
    /// models on `sim:`, a snapshot's catalog PMUs (listed, not counted).
    pub fn counters(&self) -> Result<Box<dyn Counters>> {
        match &self.access {
            Access::Host { root, .. } => Ok(Box::new(HostCounters { root: root.clone() })),
            Access::Snapshot { spec, .. } | Access::Lspci(spec) => Ok(Box::new(CatalogPmus {
                machine: self.selector.to_string(),
                pmus: bound_root_port_pmus(&spec.topology),
            })),
            Access::SimPcie(_) => Ok(Box::new(self.simulator()?)),
            Access::SimResctrl(preset) => Err(self.no_pcie(preset)),
        }
    }

    /// An lspci listing holds the topology only: resctrl is bad input naming the machines
    /// that have it.
    fn topology_only(&self, what: &str) -> Error {
        Error::bad_input(format!(
            "machine '{}' is lspci output, which describes the PCIe topology only; {what} need \
             'host' (or a sim: machine to simulate them)",
            self.selector
        ))
    }

    /// The machine's resctrl: the host's mount (`<root>/sys/fs/resctrl` unless
    /// `options.resctrl_dir` says otherwise) or the simulated MPAM/RDT kernel.
    pub fn qos(&self, options: &QosOptions) -> Result<Box<dyn QosBackend>> {
        match &self.access {
            Access::Host { root, .. } => {
                let dir = options
                    .resctrl_dir
                    .clone()
                    .unwrap_or_else(|| root.join("sys/fs/resctrl"));
                Ok(Box::new(
                    HostResctrl::new(dir)
                        .with_proc(root.join("proc"))
                        .with_precheck(options.precheck),
                ))
            }
            Access::Lspci(_) => Err(self.topology_only("resctrl groups")),
            _ => Ok(Box::new(
                self.simulated_resctrl(options.state.as_deref(), options.cdp)?,
            )),
        }
    }

    /// The simulator that plays workloads on this machine and predicts them, where it has one
    /// (a simulated PCIe machine, `sim:`): for what only a simulator answers (simulated runs, predicted
    /// gains). Elsewhere bad input.
    pub fn simulator(&self) -> Result<SimulatedPcie> {
        match &self.access {
            Access::SimPcie(spec) => SimulatedPcie::new(
                spec.name.clone(),
                spec.topology.clone(),
                &spec.sim,
                &spec.platform_table,
            ),
            Access::SimResctrl(preset) => Err(self.no_pcie(preset)),
            _ => Err(Error::bad_input(format!(
                "machine '{}' is not simulated: use sim:PRESET or sim:FILE.toml",
                self.selector
            ))),
        }
    }

    /// The simulated MPAM/RDT machine, continued from `state` when that file exists; `cdp`
    /// mounts with CDP when the state is created.
    pub fn simulated_resctrl(&self, state: Option<&Path>, cdp: bool) -> Result<SimulatedResctrl> {
        match &self.access {
            Access::SimResctrl(preset) => SimulatedResctrl::open(preset, state, cdp),
            _ => Err(Error::bad_input(format!(
                "--machine {}: resctrl works on 'host' or a simulated resctrl machine ({})",
                self.selector,
                Preset::selectors()
            ))),
        }
    }

    fn no_pcie(&self, preset: &Preset) -> Error {
        Error::bad_input(format!(
            "{} is a simulated resctrl machine ({}): it has no PCIe topology or PMUs; \
             simulated PCIe platforms are {}, or sim:FILE.toml",
            self.selector,
            preset.name,
            presets::names()
                .iter()
                .map(|n| format!("sim:{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

/// An endpoint as a platform model predicts it ([`Machine::endpoint_model`]).
pub struct EndpointModel {
    /// The endpoint predicted (the one asked for, or the first with a link).
    pub device: Bdf,
    /// Its link's parameters (speed, width, MPS, MRRS).
    pub link: LinkParams,
    /// The machine's platform model (its spec's `[platform]` table, or the defaults).
    pub platform: PlatformModel,
}

/// `bdf` when it names an endpoint of `topology`, else bad input naming what it is.
fn endpoint(topology: &Topology, bdf: Bdf, machine: &str, what: &str) -> Result<Bdf> {
    let f = topology
        .get(bdf)
        .ok_or_else(|| Error::bad_input(format!("{what} {bdf}: no such function on {machine}")))?;
    if matches!(f.kind, Kind::Endpoint | Kind::RcEndpoint) {
        Ok(bdf)
    } else {
        Err(Error::bad_input(format!(
            "{what} {bdf}: is a {} on {machine}, not an endpoint: name a device (`pcielab topo` lists them)",
            f.kind.name().replace('_', " ")
        )))
    }
}

/// The machine as `--machine` names it (`host`, `snapshot:DIR`, `sim:NAME`).
impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.selector.fmt(f)
    }
}

/// `"sim:yitian710".parse::<Machine>()`: parses a `--machine` value and opens it.
/// The machine a spec names the way `sim:` takes it (a FILE.toml, a path, or a preset name),
/// read without opening a machine: the lab boots a spec, it does not observe one. The one way
/// to read a spec from a name.
pub fn read_spec(target: &str) -> Result<MachineSpec> {
    MachineSelector::spec(target).read_spec()
}

/// Reads the `[platform]` table of the spec or fragment at `path` (a `--platform` argument):
/// the file is read here, on the floor that opens machines, so `model` does no I/O.
pub fn read_platform_file(path: &str) -> Result<PlatformModel> {
    let text = crate::input::read_input_file(Path::new(path), "--platform")?;
    crate::model::platform::parse_platform(path, &text)
}

impl FromStr for Machine {
    type Err = Error;

    fn from_str(s: &str) -> Result<Machine> {
        Machine::open(&s.parse()?)
    }
}

/// A sysfs tree read again (after hotplug), named as at open.
fn read_named_sysfs(pci_dir: &Path) -> Result<Topology> {
    Ok(named(read_sysfs(pci_dir)?))
}

/// Functions read from sysfs get lspci's vendor/device names from the installed pci.ids.
fn named(mut topology: Topology) -> Topology {
    if let Some(db) = crate::topology::pciids::default_db() {
        crate::topology::pciids::name_functions(&mut topology, &db);
    }
    topology
}

#[cfg(test)]
mod tests;
