//! Link health of one PCI function read from sysfs under a chosen root directory (`/` on a live
//! host or guest, a fixture tree in tests): the kernel's AER counters (per-device correctable,
//! non-fatal and fatal totals, and a root port's totals of messages it received) and the link's
//! current speed and width against what both ends are capable of, from which a downgrade or a
//! link that is down follows. It reads only; nothing here changes a device.

use std::path::{Path, PathBuf};

use super::sysfs::read_text;
use crate::pcie::Bdf;

/// The kernel's AER counters of one function; `None` where the kernel exposes no such file
/// (no AER capability, or not a root port for the `rootport_*` totals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct AerCounts {
    pub(crate) correctable: Option<u64>,
    pub(crate) nonfatal: Option<u64>,
    pub(crate) fatal: Option<u64>,
    pub(crate) rootport_correctable: Option<u64>,
    pub(crate) rootport_nonfatal: Option<u64>,
    pub(crate) rootport_fatal: Option<u64>,
}

impl AerCounts {
    /// The increments from `earlier` to these counts (each `None` where either lacks the
    /// counter; a counter that went back, a re-created device, counts 0).
    pub(crate) fn since(&self, earlier: &AerCounts) -> AerCounts {
        let delta = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        AerCounts {
            correctable: delta(earlier.correctable, self.correctable),
            nonfatal: delta(earlier.nonfatal, self.nonfatal),
            fatal: delta(earlier.fatal, self.fatal),
            rootport_correctable: delta(earlier.rootport_correctable, self.rootport_correctable),
            rootport_nonfatal: delta(earlier.rootport_nonfatal, self.rootport_nonfatal),
            rootport_fatal: delta(earlier.rootport_fatal, self.rootport_fatal),
        }
    }
}

/// The link as the function's sysfs attributes describe it now and at best.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct LinkHealth {
    pub(crate) current_gts: Option<f64>,
    pub(crate) capable_gts: Option<f64>,
    pub(crate) current_width: Option<u32>,
    pub(crate) capable_width: Option<u32>,
    pub(crate) aer: AerCounts,
}

impl LinkHealth {
    /// The link is trained but slower or narrower than both ends could run.
    pub(crate) fn downgraded(&self) -> bool {
        if self.down() {
            return false;
        }
        let slower = matches!((self.current_gts, self.capable_gts), (Some(c), Some(m)) if c < m);
        let narrower =
            matches!((self.current_width, self.capable_width), (Some(c), Some(m)) if c < m);
        slower || narrower
    }

    /// A function that has link attributes but reports no trained width or an unknown speed.
    /// One whose capability lists no lanes (an integrated endpoint: `max_link_width` 0,
    /// `max_link_speed` Unknown) has no link to be down.
    pub(crate) fn down(&self) -> bool {
        self.capable_width.is_some_and(|w| w > 0) && matches!(self.current_width, None | Some(0))
            || self.capable_gts.is_some() && self.current_gts.is_none()
    }
}

/// The sysfs directory of `bdf` below `root` (`root`/sys/bus/pci/devices/BDF).
pub(crate) fn function_dir(root: &Path, bdf: Bdf) -> PathBuf {
    root.join("sys/bus/pci/devices").join(bdf.to_string())
}

/// Reads the link health of `bdf` below `root`; every missing or unparsable attribute is `None`.
pub fn read_link_health(root: &Path, bdf: Bdf) -> LinkHealth {
    read_function_health(&function_dir(root, bdf))
}

/// Reads the link health from one function's sysfs directory (`…/devices/BDF` of a live tree or
/// a snapshot); every missing or unparsable attribute is `None`.
pub(crate) fn read_function_health(dir: &Path) -> LinkHealth {
    let mut health = LinkHealth::unknown();
    for attribute in Attribute::ALL {
        if let Some(text) = read_text(dir, attribute.file()) {
            attribute.apply(&text, &mut health);
        }
    }
    health
}

impl LinkHealth {
    /// Nothing known: every attribute `None`.
    pub(crate) fn unknown() -> LinkHealth {
        LinkHealth {
            current_gts: None,
            capable_gts: None,
            current_width: None,
            capable_width: None,
            aer: AerCounts::default(),
        }
    }
}

/// One sysfs attribute behind a [`LinkHealth`] field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attribute {
    CurrentSpeed,
    CapableSpeed,
    CurrentWidth,
    CapableWidth,
    AerCorrectable,
    AerNonfatal,
    AerFatal,
    RootportCorrectable,
    RootportNonfatal,
    RootportFatal,
}

impl Attribute {
    pub(crate) const ALL: [Attribute; 10] = [
        Attribute::CurrentSpeed,
        Attribute::CapableSpeed,
        Attribute::CurrentWidth,
        Attribute::CapableWidth,
        Attribute::AerCorrectable,
        Attribute::AerNonfatal,
        Attribute::AerFatal,
        Attribute::RootportCorrectable,
        Attribute::RootportNonfatal,
        Attribute::RootportFatal,
    ];

    /// The attribute's file name in the function's sysfs directory.
    pub(crate) fn file(self) -> &'static str {
        match self {
            Attribute::CurrentSpeed => "current_link_speed",
            Attribute::CapableSpeed => "max_link_speed",
            Attribute::CurrentWidth => "current_link_width",
            Attribute::CapableWidth => "max_link_width",
            Attribute::AerCorrectable => "aer_dev_correctable",
            Attribute::AerNonfatal => "aer_dev_nonfatal",
            Attribute::AerFatal => "aer_dev_fatal",
            Attribute::RootportCorrectable => "aer_rootport_total_err_cor",
            Attribute::RootportNonfatal => "aer_rootport_total_err_nonfatal",
            Attribute::RootportFatal => "aer_rootport_total_err_fatal",
        }
    }

    /// LnkCap never changes while the device is there: read once, not per sample.
    pub(crate) fn is_static(self) -> bool {
        matches!(self, Attribute::CapableSpeed | Attribute::CapableWidth)
    }

    /// The trained link's state, which both ends of a link report alike.
    pub(crate) fn is_current_link(self) -> bool {
        matches!(self, Attribute::CurrentSpeed | Attribute::CurrentWidth)
    }

    /// Sets the field this attribute's `text` gives (left `None` when it does not parse).
    pub(crate) fn apply(self, text: &str, health: &mut LinkHealth) {
        let number = || text.trim().parse::<u64>().ok();
        let width = || text.trim().parse::<u32>().ok();
        match self {
            Attribute::CurrentSpeed => health.current_gts = parse_gts(text),
            Attribute::CapableSpeed => health.capable_gts = parse_gts(text),
            Attribute::CurrentWidth => health.current_width = width(),
            Attribute::CapableWidth => health.capable_width = width(),
            Attribute::AerCorrectable => health.aer.correctable = aer_total(text),
            Attribute::AerNonfatal => health.aer.nonfatal = aer_total(text),
            Attribute::AerFatal => health.aer.fatal = aer_total(text),
            Attribute::RootportCorrectable => health.aer.rootport_correctable = number(),
            Attribute::RootportNonfatal => health.aer.rootport_nonfatal = number(),
            Attribute::RootportFatal => health.aer.rootport_fatal = number(),
        }
    }
}

/// "8.0 GT/s PCIe" → 8.0; "Unknown" (link down) → None.
fn parse_gts(text: &str) -> Option<f64> {
    let value: f64 = text.split_whitespace().next()?.parse().ok()?;
    (value > 0.0).then_some(value)
}

/// The `TOTAL_ERR_*` line of an `aer_dev_*` file ("RxErr 0\n…\nTOTAL_ERR_COR 2").
fn aer_total(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let name = words.next()?;
        name.starts_with("TOTAL_ERR_")
            .then(|| words.next()?.parse().ok())?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> (tempfile::TempDir, Bdf) {
        let root = tempfile::tempdir().unwrap();
        let bdf: Bdf = "0000:00:02.0".parse().unwrap();
        let dir = function_dir(root.path(), bdf);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in files {
            std::fs::write(dir.join(name), text).unwrap();
        }
        (root, bdf)
    }

    #[test]
    fn a_root_port_with_errors_on_a_narrowed_link() {
        let (root, bdf) = fixture(&[
            ("current_link_speed", "16.0 GT/s PCIe\n"),
            ("max_link_speed", "16.0 GT/s PCIe\n"),
            ("current_link_width", "4\n"),
            ("max_link_width", "16\n"),
            (
                "aer_dev_correctable",
                "RxErr 2\nBadTLP 1\nBadDLLP 0\nTOTAL_ERR_COR 3\n",
            ),
            ("aer_dev_fatal", "Undefined 0\nTOTAL_ERR_FATAL 0\n"),
            ("aer_rootport_total_err_cor", "5\n"),
        ]);
        let health = read_link_health(root.path(), bdf);
        assert_eq!(health.aer.correctable, Some(3));
        assert_eq!(health.aer.fatal, Some(0));
        assert_eq!(health.aer.nonfatal, None);
        assert_eq!(health.aer.rootport_correctable, Some(5));
        assert!(health.downgraded());
        assert!(!health.down());
    }

    #[test]
    fn an_untrained_link_is_down_not_downgraded() {
        let (root, bdf) = fixture(&[
            ("current_link_speed", "Unknown\n"),
            ("max_link_speed", "8.0 GT/s PCIe\n"),
            ("current_link_width", "0\n"),
            ("max_link_width", "8\n"),
        ]);
        let health = read_link_health(root.path(), bdf);
        assert!(health.down());
        assert!(!health.downgraded());
    }

    #[test]
    fn an_integrated_endpoint_without_link_capability_is_not_down() {
        // What the kernel shows for a root-complex integrated endpoint (LnkCap all zero).
        let (root, bdf) = fixture(&[
            ("current_link_speed", "Unknown\n"),
            ("max_link_speed", "Unknown\n"),
            ("current_link_width", "0\n"),
            ("max_link_width", "0\n"),
        ]);
        let health = read_link_health(root.path(), bdf);
        assert!(!health.down() && !health.downgraded());
    }

    #[test]
    fn a_full_link_is_healthy() {
        let (root, bdf) = fixture(&[
            ("current_link_speed", "8.0 GT/s PCIe\n"),
            ("max_link_speed", "8.0 GT/s PCIe\n"),
            ("current_link_width", "8\n"),
            ("max_link_width", "8\n"),
        ]);
        let health = read_link_health(root.path(), bdf);
        assert!(!health.down() && !health.downgraded());
        assert_eq!(health.current_gts, Some(8.0));
    }
}
