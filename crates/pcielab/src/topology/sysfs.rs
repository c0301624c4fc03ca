//! The sysfs reader: builds a topology from a directory shaped like `/sys/bus/pci` (the live one,
//! a snapshot, or an export). Each `devices/<bdf>` entry gives identity and capabilities from its
//! `config` file; parents come from the device path the entry links to
//! (`…/pci0000:00/0000:00:02.0/0000:04:00.0`), or from bridge bus numbers in a plain copy. When `config` is cut short (an unprivileged read
//! returns 64 bytes) link facts come from the `*_link_speed`/`*_link_width` attributes and the
//! kind is inferred from the class and the parent's kind.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::input::{file_kind, read_capped};
use crate::pcie::{Bdf, Generation};
use crate::topology::config_space::{decode, kind_of, Decoded};
use crate::topology::{FactSource, Function, Kind, Link, Topology};

/// Reads the PCI functions under `pci_dir` (a directory holding `devices/`).
pub fn read_sysfs(pci_dir: &Path) -> Result<Topology> {
    let devices = pci_dir.join("devices");
    let entries = fs::read_dir(&devices).map_err(|e| {
        Error::bad_input(format!(
            "{}: {e}; expected a directory shaped like /sys/bus/pci (with devices/<bdf> entries), e.g. one saved by `pcielab snapshot`",
            devices.display()
        ))
    })?;
    let mut found: Vec<(Bdf, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&devices, e))?;
        if let Ok(bdf) = entry.file_name().to_string_lossy().parse::<Bdf>() {
            let path = entry.path();
            // A dangling or looping link fails every read below it; name it here instead.
            if let Err(e) = fs::metadata(&path) {
                let why = if e.raw_os_error() == Some(libc::ELOOP) {
                    "is a symlink loop".to_string()
                } else {
                    match fs::read_link(&path) {
                        Ok(target) if e.kind() == std::io::ErrorKind::NotFound => {
                            format!("is a dangling symlink to {}", target.display())
                        }
                        _ => e.to_string(),
                    }
                };
                return Err(Error::bad_input(format!(
                    "{}: {why}; each devices/<bdf> entry must be (a link to) the function's directory",
                    path.display()
                )));
            }
            found.push((bdf, path));
        }
    }

    // Parents sit on lower bus numbers than their children, so address order reads parents first.
    found.sort();
    let mut functions: Vec<Function> = Vec::with_capacity(found.len());
    let mut inferred: HashSet<Bdf> = HashSet::new();
    for (bdf, path) in found {
        let (f, kind_inferred) = read_function(bdf, &path, &functions)?;
        if kind_inferred {
            inferred.insert(bdf);
        }
        functions.push(f);
    }
    demote_bridges_without_ports(&mut functions, &inferred);
    Ok(Topology::new(functions))
}

/// Without the PCI Express capability a bridge below a port could be a switch's upstream port or
/// a PCIe-to-PCI bridge; only a switch has bridges (its downstream ports) below it.
fn demote_bridges_without_ports(functions: &mut [Function], inferred: &HashSet<Bdf>) {
    let with_bridge_children: HashSet<Bdf> = functions
        .iter()
        .filter(|f| f.kind.is_bridge())
        .filter_map(|f| f.parent)
        .collect();
    for f in functions.iter_mut() {
        if f.kind == Kind::SwitchUpstream
            && inferred.contains(&f.bdf)
            && !with_bridge_children.contains(&f.bdf)
        {
            f.kind = Kind::PciBridge;
        }
    }
}

/// The most of a sysfs attribute read: the kernel fills at most one page.
const ATTRIBUTE_BYTES: u64 = 4096;

/// Where the extended configuration space (and the ACS capability) starts.
const EXTENDED_CONFIG_START: usize = 0x100;

/// The most of `config` read, as lspci does: the whole extended configuration space.
const CONFIG_BYTES: u64 = 4096;

pub(crate) fn read_text(dir: &Path, name: &str) -> Option<String> {
    let bytes = read_capped(&dir.join(name), ATTRIBUTE_BYTES).ok()?;
    Some(String::from_utf8_lossy(&bytes).trim().to_string())
}

fn read_hex(dir: &Path, name: &str) -> Option<u32> {
    let text = read_text(dir, name)?;
    u32::from_str_radix(text.trim_start_matches("0x"), 16).ok()
}

/// A 16-bit attribute (vendor, device ids): a larger value is not one.
fn read_hex16(dir: &Path, name: &str) -> Option<u16> {
    read_hex(dir, name).and_then(|v| u16::try_from(v).ok())
}

/// The bridge above a device. From the device path its sysfs entry links into when it is a link;
/// for a plain copy (`cp -r`, no links) from bus numbers, as lspci does: the bridge whose
/// secondary bus is the device's bus. A parent must be a function read before this one (parents
/// sit on lower buses): a link naming the function itself or a later one is not believed, so
/// the function still shows (as lspci shows it) and no parent cycle can form.
fn parent_of(entry: &Path, bdf: Bdf, earlier: &[Function]) -> Option<Bdf> {
    let linked = fs::read_link(entry)
        .ok()
        .and_then(|target| target.parent()?.file_name()?.to_str()?.parse::<Bdf>().ok())
        .filter(|p| *p != bdf && earlier.iter().any(|f| f.bdf == *p));
    linked.or_else(|| {
        earlier
            .iter()
            .find(|f| f.bdf.domain == bdf.domain && f.buses.is_some_and(|(sec, _)| sec == bdf.bus))
            .map(|f| f.bdf)
    })
}

/// A `*_link_speed` attribute: "8.0 GT/s PCIe" → Gen3; "Unknown" → None.
fn speed_attr(dir: &Path, name: &str) -> Option<Generation> {
    let text = read_text(dir, name)?;
    let rate: f64 = text.split_whitespace().next()?.parse().ok()?;
    Generation::from_gt_s(rate)
}

/// The link as the kernel's attributes report it, when `config` is too short to decode it.
fn link_from_attributes(dir: &Path) -> Option<Link> {
    let max_width: u8 = read_text(dir, "max_link_width")?.parse().ok()?;
    let speed = speed_attr(dir, "current_link_speed");
    let width: Option<u8> = read_text(dir, "current_link_width").and_then(|w| w.parse().ok());
    Some(Link {
        max_speed: speed_attr(dir, "max_link_speed"),
        max_width: Some(max_width).filter(|&w| w != 0),
        speed,
        width: width.filter(|&w| speed.is_some() || w != 0),
    })
}

/// The identity header from `config`, or from the attribute files when `config` is unreadable.
fn header(bdf: Bdf, dir: &Path, config: &[u8]) -> Result<Decoded> {
    if let Some(d) = decode(config) {
        return Ok(d);
    }
    let missing = || {
        Error::runtime(format!(
            "{}: neither config nor vendor/device/class attributes are readable for {bdf}",
            dir.display()
        ))
    };
    Ok(Decoded {
        vendor: read_hex16(dir, "vendor").ok_or_else(missing)?,
        device: read_hex16(dir, "device").ok_or_else(missing)?,
        class: read_hex(dir, "class").ok_or_else(missing)?,
        revision: read_hex(dir, "revision")
            .and_then(|r| u8::try_from(r).ok())
            .unwrap_or(0),
        header_type: 0,
        subsystem_vendor: read_hex16(dir, "subsystem_vendor").unwrap_or(0),
        subsystem_device: read_hex16(dir, "subsystem_device").unwrap_or(0),
        buses: None,
        express: None,
        acs: None,
        aer: false,
        aer_masks: None,
        aer_status: None,
        capabilities_read: false,
        express_at: None,
        acs_at: None,
        aer_at: None,
    })
}

/// Infers the kind when the PCI Express capability could not be read: bridges by their place
/// below the parent, functions on a root bus with link attributes as integrated endpoints.
fn inferred_kind(d: &Decoded, express: bool, parent: Option<&Function>) -> Kind {
    let generic = kind_of(None, d.class, d.header_type);
    match (generic, express, parent.map(|p| p.kind)) {
        (Kind::PciBridge, true, None) => Kind::RootPort,
        (Kind::PciBridge, true, Some(Kind::RootPort | Kind::SwitchDownstream)) => {
            Kind::SwitchUpstream
        }
        (Kind::PciBridge, true, Some(Kind::SwitchUpstream)) => Kind::SwitchDownstream,
        (Kind::Endpoint, true, None) => Kind::RcEndpoint,
        (kind, _, _) => kind,
    }
}

/// A function's directory holds files, directories and links, in the kernel's sysfs and in a
/// saved copy alike. A FIFO, socket or device node there (a planted or damaged snapshot) would
/// be skipped by every attribute read (`read_capped` opens only regular files), losing facts
/// without a word: it is refused here by name instead. One directory listing per function; the
/// entry types come from the listing itself.
fn refuse_special_files(dir: &Path) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let kind = entry.file_type().map_err(|e| Error::io(entry.path(), e))?;
        if !(kind.is_file() || kind.is_dir() || kind.is_symlink()) {
            return Err(Error::bad_input(format!(
                "{}: is {}; a PCI function's directory (sysfs, or a snapshot of it) holds only \
                 files, directories and links",
                entry.path().display(),
                file_kind(kind)
            )));
        }
    }
    Ok(())
}

/// Reads one function; the flag says its kind was inferred rather than read from the capability.
fn read_function(bdf: Bdf, dir: &Path, earlier: &[Function]) -> Result<(Function, bool)> {
    refuse_special_files(dir)?;
    let config = read_capped(&dir.join("config"), CONFIG_BYTES).unwrap_or_default();
    let d = header(bdf, dir, &config)?;
    let parent = parent_of(dir, bdf, earlier);
    // `earlier` is in address order (see `read_sysfs`).
    let parent_fn = parent.and_then(|p| {
        earlier
            .binary_search_by_key(&p, |f| f.bdf)
            .ok()
            .map(|i| &earlier[i])
    });
    let mut f = Function::new(bdf, d.vendor, d.device, d.class, Kind::Endpoint);
    f.revision = d.revision;
    f.subsystem_vendor = d.subsystem_vendor;
    f.subsystem_device = d.subsystem_device;
    f.parent = parent;
    f.buses = d.buses;
    f.numa_node = read_text(dir, "numa_node")
        .and_then(|n| n.parse().ok())
        .filter(|n: &i32| (0..crate::topology::MAX_NUMA_NODES).contains(n));
    f.driver_source = FactSource::Sysfs;
    f.driver = fs::read_link(dir.join("driver")).ok().and_then(|t| {
        t.file_name()
            .map(|n| crate::text::printable(&n.to_string_lossy()).into())
    });
    f.name = read_text(dir, "label")
        .filter(|l| !l.is_empty())
        .map(|l| crate::text::printable(&l).into());
    let inferred = !d.capabilities_read;
    // ACS lives in the extended space (from 0x100); a PCI Express function read shorter than
    // that may have it, and nothing says whether it does.
    f.acs_unreadable =
        config.len() <= EXTENDED_CONFIG_START && (d.express.is_some() || !d.capabilities_read);
    if d.capabilities_read {
        f.take_capabilities(&d);
    } else {
        let link = link_from_attributes(dir);
        f.kind = inferred_kind(&d, link.is_some(), parent_fn);
        f.link = link.filter(|_| f.kind != Kind::RcEndpoint);
    }
    Ok((f, inferred))
}
