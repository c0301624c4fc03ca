//! Saving the live host's `/sys/bus/pci` as plain files: per device the readable attribute files
//! (not `resourceN`/`rom` BAR maps, not write-only triggers), `driver` recreated as a symlink, and
//! the device-path nesting kept so parents survive. sysfs links are never followed recursively
//! (they loop). The result reads back with `--machine snapshot:DIR` and with the real
//! `lspci -A linux-sysfs -O sysfs.path=DIR`.

use std::fs;
use std::path::{Component, Path};

use crate::error::{Error, Result};
use crate::input::{read_capped, ConfinedDir};
use crate::pcie::Bdf;
use crate::topology::export::{link_driver, write_sysfs_tree};

/// Attribute files worth keeping: what lspci and the sysfs reader read, plus the kernel's own
/// view of links and resources.
const KEPT_FILES: [&str; 26] = [
    "config",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "class",
    "revision",
    "irq",
    "resource",
    "numa_node",
    "local_cpus",
    "local_cpulist",
    "current_link_speed",
    "current_link_width",
    "max_link_speed",
    "max_link_width",
    "secondary_bus_number",
    "subordinate_bus_number",
    "label",
    "index",
    "acpi_index",
    "enable",
    "modalias",
    "msi_bus",
    "power_state",
    "ari_enabled",
];

/// Copies `<root>/sys/bus/pci` into `dir`; returns the number of functions saved. Writes stay
/// inside `dir` and never follow a symlink found there.
pub fn save_snapshot(root: &Path, dir: &Path) -> Result<usize> {
    let devices = root.join("sys/bus/pci/devices");
    let entries = fs::read_dir(&devices).map_err(|e| {
        Error::bad_input(format!(
            "--root {}: cannot read {}: {e}; expected the root of a Linux filesystem with sysfs",
            root.display(),
            devices.display()
        ))
    })?;
    // Read every name first: a root without PCI functions saves nothing and says so.
    let mut functions: Vec<(String, std::path::PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&devices, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<Bdf>().is_ok() {
            functions.push((name, entry.path()));
        }
    }
    if functions.is_empty() {
        return Err(Error::bad_input(format!(
            "--root {}: {} holds no PCI functions; nothing to save",
            root.display(),
            devices.display()
        )));
    }
    write_sysfs_tree(dir, "save the snapshot", |out| {
        for (name, src) in &functions {
            let rel = tree_path(src, name);
            out.create_dir_all(&rel)?;
            copy_device(src, out, &rel)?;
            out.symlink(&format!("../{rel}"), &format!("devices/{name}"))?;
        }
        Ok(functions.len())
    })
}

/// `tree/pciDDDD:BB/…/<bdf>`: the entry's device path from its `pci` host-bridge directory on;
/// an entry that is no symlink (a copy) keeps just its name under `tree/`.
fn tree_path(entry: &Path, name: &str) -> String {
    let Ok(target) = fs::read_link(entry) else {
        return format!("tree/{name}");
    };
    let parts: Vec<&str> = target
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect();
    let start = parts
        .iter()
        .rposition(|p| p.starts_with("pci") && p.contains(':'))
        .unwrap_or(parts.len().saturating_sub(1));
    std::iter::once("tree")
        .chain(parts[start..].iter().copied())
        .collect::<Vec<_>>()
        .join("/")
}

/// The most of one attribute copied: sysfs attributes are at most a page, `config` at most the
/// 4 KiB extended configuration space.
const ATTRIBUTE_BYTES: u64 = 4096;

fn copy_device(src: &Path, out: &ConfinedDir, rel: &str) -> Result<()> {
    let here = out.open(rel)?;
    for name in KEPT_FILES {
        // Unreadable or absent attributes (a device without a link, a non-root reader) are
        // simply not part of the snapshot, as they are not part of what the reader saw.
        if let Ok(bytes) = read_capped(&src.join(name), ATTRIBUTE_BYTES) {
            here.create_file(name, &bytes)?;
        }
    }
    if let Some(driver) = fs::read_link(src.join("driver"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    {
        link_driver(out, rel, &driver)?;
    }
    Ok(())
}
