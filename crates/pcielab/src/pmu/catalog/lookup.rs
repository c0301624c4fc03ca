//! Reading the tables: a family's events and the files its driver writes for a kernel
//! release, an event found by any of its names, and the nearest names to a misspelt one.

use super::event::{EventDef, Family, Group, Unit};
use super::tables::{DWC_EVENTS, HISI_EVENTS, IIO_EVENTS, IIO_SKYLAKE_EVENTS, NVIDIA_PCIE_EVENTS};
use crate::pmu::kernel::{dwc_name_in, KernelVersion};

/// The files one PMU directory holds as its driver writes them, for one kernel release.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverFiles {
    /// `format/NAME` and its text (`config:0-15`).
    pub formats: Vec<(&'static str, &'static str)>,
    /// `events/NAME` and its text (`eventid=0x21,type=0x0`), and `.scale`/`.unit` files.
    pub events: Vec<(String, String)>,
    /// Other attribute files the driver creates besides `type`, `cpumask` and
    /// `perf_event_mux_interval_ms`, with example contents (`identifier`, `bdf_min`, …).
    pub attributes: Vec<(&'static str, &'static str)>,
}

impl Family {
    pub(crate) fn events(self) -> &'static [EventDef] {
        match self {
            Family::DwcRootPort => DWC_EVENTS,
            Family::HisiPcie => HISI_EVENTS,
            Family::IntelIio => IIO_EVENTS,
            Family::IntelIioSkylake => IIO_SKYLAKE_EVENTS,
            Family::NvidiaPcie => NVIDIA_PCIE_EVENTS,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Family::DwcRootPort => "dwc_rootport",
            Family::HisiPcie => "hisi_pcie",
            Family::IntelIio => "intel_iio",
            Family::IntelIioSkylake => "intel_iio_skylake",
            Family::NvidiaPcie => "nvidia_pcie",
        }
    }

    /// The `format/` files of the family's driver.
    pub(crate) fn formats(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Family::DwcRootPort => &[
                ("eventid", "config:0-15"),
                ("type", "config:16-19"),
                ("lane", "config:20-27"),
            ],
            Family::HisiPcie => &[
                ("event", "config:0-16"),
                ("thr_len", "config1:0-3"),
                ("thr_mode", "config1:4"),
                ("trig_len", "config1:5-8"),
                ("trig_mode", "config1:9"),
                ("len_mode", "config1:10-11"),
                ("port", "config2:0-15"),
                ("bdf", "config2:16-31"),
            ],
            Family::IntelIio | Family::IntelIioSkylake => {
                &[("event", "config:0-7"), ("umask", "config:8-15")]
            }
            Family::NvidiaPcie => &[("event", "config:0-32"), ("root_port", "config1:0-9")],
        }
    }

    /// The `.scale` the IIO driver writes for a byte counter (MiB per count), as written in
    /// its source.
    fn scale_text(self, unit: Unit) -> Option<&'static str> {
        match (self, unit) {
            (Family::IntelIio, Unit::Bytes(32)) => Some("3.0517578125e-5"),
            (Family::IntelIioSkylake, Unit::Bytes(4)) => Some("3.814697266e-6"),
            _ => None,
        }
    }

    /// The events `kernel`'s driver exposes, each under the name that kernel gives it. The DWC
    /// driver exposes time-based groups 0-1 and event groups 6-7 only.
    pub fn kernel_events(self, kernel: KernelVersion) -> Vec<(String, &'static EventDef)> {
        self.events()
            .iter()
            .filter(|e| {
                self != Family::DwcRootPort
                    || matches!(e.group, Group::TimeBased(_) | Group::Lane(6 | 7))
            })
            .map(|e| {
                let name = match self {
                    Family::DwcRootPort => dwc_name_in(kernel, e.config, e.name),
                    _ => e.name.to_string(),
                };
                (name, e)
            })
            .collect()
    }

    /// The directory `kernel`'s driver creates for one PMU of this family.
    pub fn driver_files(self, kernel: KernelVersion) -> DriverFiles {
        let mut events = Vec::new();
        for (name, def) in self.kernel_events(kernel) {
            events.push((name.clone(), def.encoding(self)));
            if let Some(scale) = self.scale_text(def.unit) {
                events.push((format!("{name}.scale"), scale.to_string()));
                events.push((format!("{name}.unit"), "MiB".to_string()));
            }
        }
        let attributes: &[(&str, &str)] = match self {
            // The 6.12 driver prints bus, bdf_min and bdf_max with "%#04x" and the version
            // register with "%#x".
            Family::HisiPcie => &[
                ("bus", "0x30"),
                ("bdf_min", "0x3000"),
                ("bdf_max", "0x3018"),
                ("identifier", "0x30"),
            ],
            // arm_cspmu prints PMIIDR with "%x": product 0x103, implementer NVIDIA (0x36b).
            Family::NvidiaPcie => &[("identifier", "1030036b"), ("associated_cpus", "0-71")],
            _ => &[],
        };
        DriverFiles {
            formats: self.formats().to_vec(),
            events,
            attributes: attributes.to_vec(),
        }
    }

    /// The event `query` names, by either of its names, case-insensitively.
    pub(crate) fn find(self, query: &str) -> Option<&'static EventDef> {
        self.events().iter().find(|e| e.matches(query))
    }

    /// Up to three event names closest to `query`, for "did you mean" messages.
    pub(crate) fn suggest(self, query: &str) -> Vec<&'static str> {
        nearest(
            query,
            self.events()
                .iter()
                .flat_map(|e| [e.seed_name, e.name].into_iter()),
        )
    }
}

/// Levenshtein distance over ASCII-lowercased bytes.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<u8> = a.bytes().map(|c| c.to_ascii_lowercase()).collect();
    let b: Vec<u8> = b.bytes().map(|c| c.to_ascii_lowercase()).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// The (at most three) candidates closest to `query`, best first, distinct ignoring case.
pub(crate) fn nearest<'a>(query: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut scored: Vec<(usize, &'a str)> =
        candidates.map(|c| (edit_distance(query, c), c)).collect();
    scored.sort_by_key(|&(d, c)| (d, c.to_ascii_lowercase()));
    let mut out: Vec<&'a str> = Vec::new();
    for (_, c) in scored {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(c)) {
            out.push(c);
        }
        if out.len() == 3 {
            break;
        }
    }
    out
}
