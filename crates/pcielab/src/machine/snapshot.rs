//! Saving the live host's `/sys/bus/pci` as plain files: per device the readable attribute files
//! (not `resourceN`/`rom` BAR maps, not write-only triggers), `driver` recreated as a symlink, and
//! the device-path nesting kept so parents survive. sysfs links are never followed recursively
//! (they loop). The result reads back with `--machine snapshot:DIR` and with the real
//! `lspci -A linux-sysfs -O sysfs.path=DIR`.

use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::export::{link_driver, symlink};

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

/// Copies `<root>/sys/bus/pci` into `dir`; returns the number of functions saved.
pub fn save_snapshot(root: &Path, dir: &Path) -> Result<usize> {
    let devices = root.join("sys/bus/pci/devices");
    let entries = fs::read_dir(&devices).map_err(|e| Error::io(&devices, e))?;
    let out_devices = dir.join("devices");
    if out_devices.exists() {
        return Err(Error::bad_input(format!(
            "{} already exists; save the snapshot into an empty or new directory",
            out_devices.display()
        )));
    }
    fs::create_dir_all(&out_devices).map_err(|e| Error::io(&out_devices, e))?;
    let mut saved = 0;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&devices, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<Bdf>().is_err() {
            continue;
        }
        let src = entry.path();
        let rel = tree_path(&src, &name);
        let dst = dir.join(&rel);
        fs::create_dir_all(&dst).map_err(|e| Error::io(&dst, e))?;
        copy_device(&src, dir, &rel)?;
        symlink(&Path::new("..").join(&rel), &out_devices.join(&name))?;
        saved += 1;
    }
    Ok(saved)
}

/// `tree/pciDDDD:BB/…/<bdf>`: the entry's device path from its `pci` host-bridge directory on;
/// an entry that is no symlink (a copy) keeps just its name under `tree/`.
fn tree_path(entry: &Path, name: &str) -> PathBuf {
    let mut rel = PathBuf::from("tree");
    let Ok(target) = fs::read_link(entry) else {
        rel.push(name);
        return rel;
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
    for p in &parts[start..] {
        rel.push(p);
    }
    rel
}

fn copy_device(src: &Path, dir: &Path, rel: &Path) -> Result<()> {
    let dst = dir.join(rel);
    for name in KEPT_FILES {
        let from = src.join(name);
        // Unreadable or absent attributes (a device without a link, a non-root reader) are
        // simply not part of the snapshot, as they are not part of what the reader saw.
        if let Ok(bytes) = fs::read(&from) {
            let to = dst.join(name);
            fs::write(&to, bytes).map_err(|e| Error::io(&to, e))?;
        }
    }
    if let Some(driver) = fs::read_link(src.join("driver"))
        .ok()
        .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
    {
        link_driver(dir, rel, &driver)?;
    }
    Ok(())
}
