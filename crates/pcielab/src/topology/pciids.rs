//! Vendor and device names from the PCI ID database (`pci.ids`, shipped by the pciutils and
//! hwdata packages), as lspci prints them: "Intel Corporation 82G33/G31/P35/P31 Express DRAM
//! Controller", "Red Hat, Inc. QEMU PCIe Root port", and "Device 1234" for a device the database
//! does not know; and back from those names (and the subclass names) to numbers, for lspci text
//! printed without `-n`. The parser is bounded: it reads at most `MAX_DB_BYTES`, skips lines
//! over `MAX_LINE` bytes, and runs once per process for both directions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::input::read_capped;
use crate::topology::Topology;

/// Where distributions put the database (pciutils, then hwdata).
pub(crate) const DB_PATHS: [&str; 3] = [
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids",
    "/usr/share/pci.ids",
];

/// The most of the database read (the 2023 file is 1.4 MB).
const MAX_DB_BYTES: u64 = 16 << 20;

/// Lines longer than this are not database entries and are skipped.
pub(crate) const MAX_LINE: usize = 512;

/// The installed database, if any.
pub(crate) fn default_db() -> Option<PathBuf> {
    DB_PATHS.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// The vendor and device names of one database, parsed once.
#[derive(Debug, Default)]
pub(crate) struct PciIds {
    vendors: HashMap<u16, String>,
    devices: HashMap<(u16, u16), String>,
    /// Subclass names by class and subclass (`0x0600` → "Host bridge").
    subclasses: HashMap<u16, String>,
}

impl PciIds {
    /// Parses the database text: vendors and their devices, then the class section's
    /// subclass names (subsystems and programming interfaces are skipped).
    pub(crate) fn parse(db: &str) -> PciIds {
        let mut ids = PciIds::default();
        let mut vendor: Option<u16> = None;
        let mut class: Option<u8> = None;
        for line in db.lines() {
            if line.len() > MAX_LINE || line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("C ") {
                vendor = None;
                class = rest
                    .split_whitespace()
                    .next()
                    .and_then(|c| u8::from_str_radix(c, 16).ok());
                continue;
            }
            match (line.strip_prefix('\t'), class) {
                (Some(rest), _) if rest.starts_with('\t') => {} // a subsystem or prog-if
                (Some(rest), Some(base)) => {
                    if let Some((sub, name)) = rest.split_once("  ") {
                        if let Ok(sub) = u8::from_str_radix(sub, 16) {
                            let code = u16::from(base) << 8 | u16::from(sub);
                            ids.subclasses.insert(code, name.trim().to_string());
                        }
                    }
                }
                (Some(rest), None) => {
                    if let (Some(v), Some((id, name))) = (vendor, id_and_name(rest)) {
                        ids.devices.insert((v, id), name.to_string());
                    }
                }
                (None, _) => {
                    vendor = id_and_name(line).map(|(id, name)| {
                        ids.vendors.insert(id, name.to_string());
                        id
                    });
                }
            }
        }
        ids
    }

    /// lspci's name for a function: `VENDOR DEVICE`, or `VENDOR Device dddd` for a device the
    /// database does not know; `None` for an unknown vendor.
    pub(crate) fn name(&self, vendor: u16, device: u16) -> Option<String> {
        let vendor_name = self.vendors.get(&vendor)?;
        Some(match self.devices.get(&(vendor, device)) {
            Some(device) => format!("{vendor_name} {device}"),
            None => format!("{vendor_name} Device {device:04x}"),
        })
    }
}

/// The database at `db`, read and parsed once while it stays the same file (`corpus` names
/// thousands of machines' functions from it); `None` when it cannot be read. One database is
/// kept: another path, or the file changed, replaces it.
pub(crate) fn cached(db: &Path) -> Option<Arc<PciIds>> {
    use std::os::unix::fs::MetadataExt;
    type Key = (PathBuf, u64, u64, u64, i64, i64);
    static CACHE: Mutex<Option<(Key, Arc<PciIds>)>> = Mutex::new(None);
    let meta = std::fs::metadata(db).ok()?;
    let key: Key = (
        db.to_path_buf(),
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((cached_key, ids)) = cache.as_ref() {
        if *cached_key == key {
            return Some(ids.clone());
        }
    }
    let bytes = read_capped(db, MAX_DB_BYTES).ok()?;
    let ids = Arc::new(PciIds::parse(&String::from_utf8_lossy(&bytes)));
    *cache = Some((key, ids.clone()));
    Some(ids)
}

/// The numbers behind the names lspci prints without `-n`, from the database lspci named
/// them from: a description "Vendor Device-name" (or "Vendor Device 1234" for a device the
/// database lacks) and a subclass name ("Host bridge"). A name the database gives two
/// numbers (NVIDIA's 005a and 005b are both "CK804 USB Controller") names neither.
pub(crate) struct IdsByName {
    devices: BTreeMap<String, Option<(u16, u16)>>,
    vendors: BTreeMap<String, Vec<u16>>,
    classes: BTreeMap<String, Option<u16>>,
}

/// Records that `name` stands for `value`; a second, different value makes it ambiguous.
fn record<T: PartialEq>(map: &mut BTreeMap<String, Option<T>>, name: &str, value: T) {
    match map.get_mut(name) {
        Some(known) if known.as_ref() != Some(&value) => *known = None,
        Some(_) => {}
        None => {
            map.insert(name.to_string(), Some(value));
        }
    }
}

impl IdsByName {
    /// Indexes the parsed database `ids` for the `descriptions` a listing holds (devices of
    /// vendors no description starts with are skipped, so the index stays small).
    pub(crate) fn new(ids: &PciIds, descriptions: &BTreeSet<&str>) -> IdsByName {
        let mut index = IdsByName {
            devices: BTreeMap::new(),
            vendors: BTreeMap::new(),
            classes: BTreeMap::new(),
        };
        for (&code, name) in &ids.subclasses {
            record(&mut index.classes, name, code);
        }
        let named = |name: &str| descriptions.iter().any(|d| d.starts_with(name));
        for (&id, name) in ids.vendors.iter().filter(|(_, name)| named(name)) {
            index.vendors.entry(name.clone()).or_default().push(id);
        }
        for (&(vendor, device), device_name) in &ids.devices {
            let Some(vendor_name) = ids.vendors.get(&vendor).filter(|name| named(name)) else {
                continue;
            };
            let full = format!("{vendor_name} {device_name}");
            if descriptions.contains(full.as_str()) {
                record(&mut index.devices, &full, (vendor, device));
            }
        }
        index
    }

    /// The (vendor, device) a description names, when the database says which.
    pub(crate) fn device(&self, description: &str) -> Option<(u16, u16)> {
        if let Some(ids) = self.devices.get(description) {
            return *ids;
        }
        let (vendor, device) = description.rsplit_once(" Device ")?;
        let device = (device.len() == 4)
            .then(|| u16::from_str_radix(device, 16).ok())
            .flatten()?;
        match self.vendors.get(vendor)?.as_slice() {
            [id] => Some((*id, device)),
            _ => None, // two vendors of that name: not told apart by name
        }
    }

    /// The class and subclass (`0x0600`) a subclass name stands for.
    pub(crate) fn class(&self, name: &str) -> Option<u16> {
        self.classes.get(name).copied().flatten()
    }
}

/// `8086  Intel Corporation` → (0x8086, "Intel Corporation").
fn id_and_name(text: &str) -> Option<(u16, &str)> {
    let (id, name) = text.split_once("  ")?;
    if id.len() != 4 {
        return None;
    }
    Some((u16::from_str_radix(id, 16).ok()?, name.trim()))
}

/// Give every unnamed function of `topology` its database name (read from `db`, capped).
pub fn name_functions(topology: &mut Topology, db: &Path) {
    let Some(ids) = cached(db) else {
        return;
    };
    // One name per model, shared by every function of it.
    let mut names: HashMap<(u16, u16), Option<Arc<str>>> = HashMap::new();
    for f in topology.functions_mut() {
        if f.name.is_none() {
            f.name = names
                .entry((f.vendor, f.device))
                .or_insert_with(|| ids.name(f.vendor, f.device).map(Arc::from))
                .clone();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DB: &str = "# comment\n8086  Intel Corporation\n\t29c0  82G33/G31/P35/P31 Express DRAM Controller\n\t\t1af4 1100  QEMU Virtual Machine\n1b36  Red Hat, Inc.\n\t000c  QEMU PCIe Root port\n10de  NVIDIA Corporation\n\t005a  CK804 USB Controller\n\t005b  CK804 USB Controller\nC 06  Bridge\n\t00  Host bridge\n";

    #[test]
    fn names_lspci_printed_lead_back_to_their_ids() {
        let descriptions: BTreeSet<&str> = [
            "Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller",
            "Red Hat, Inc. Device 1234",
            "Acme Widget",
            "NVIDIA Corporation CK804 USB Controller",
        ]
        .into();
        let index = IdsByName::new(&PciIds::parse(DB), &descriptions);
        assert_eq!(
            index.device("Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller"),
            Some((0x8086, 0x29c0))
        );
        assert_eq!(
            index.device("Red Hat, Inc. Device 1234"),
            Some((0x1b36, 0x1234))
        );
        assert_eq!(index.device("Acme Widget"), None);
        assert_eq!(
            index.device("NVIDIA Corporation CK804 USB Controller"),
            None
        );
        assert_eq!(index.class("Host bridge"), Some(0x0600));
        assert_eq!(index.class("Bridge"), None);
    }

    #[test]
    fn names_read_like_lspci_and_unknown_devices_show_their_id() {
        let ids = PciIds::parse(DB);
        assert_eq!(
            ids.name(0x8086, 0x29c0).unwrap(),
            "Intel Corporation 82G33/G31/P35/P31 Express DRAM Controller"
        );
        assert_eq!(
            ids.name(0x1b36, 0x000c).unwrap(),
            "Red Hat, Inc. QEMU PCIe Root port"
        );
        assert_eq!(
            ids.name(0x1b36, 0x1234).unwrap(),
            "Red Hat, Inc. Device 1234"
        );
        assert_eq!(ids.name(0xabcd, 1), None);
    }

    #[test]
    fn hostile_databases_are_bounded() {
        let long = format!("8086  {}\n\t29c0  x\n", "A".repeat(10_000));
        assert_eq!(PciIds::parse(&long).name(0x8086, 0x29c0), None);
        assert_eq!(PciIds::parse("\0\t\t\n\tzzzz  q\nC 00\n").name(0, 0), None);
    }
}
