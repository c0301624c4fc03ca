//! PMU discovery from sysfs, as perf does it: every directory under
//! `/sys/bus/event_source/devices` (under a root tests can move) with its `type`, the `format/`
//! bit layout of config/config1/config2 (split ranges such as `config:0-7,32-35` included), the
//! `events/` aliases with their terms (`lane=?` parameters), `.scale` and `.unit`, `cpumask` and
//! `perf_event_mux_interval_ms`. This module also owns where a PCIe PMU's name and files say it
//! sits: the root port of a DesignWare PMU (`dwc_rootport_<hex>` with or without the PCI domain,
//! the seed's `pcie_bdf_<hex>`), the root bus of HiSilicon (`bus` file) and Intel IIO (`dieN`)
//! PMUs, and the socket of NVIDIA Grace's `nvidia_pcie_pmu_<n>`.

use crate::linux::low_bits_mask;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::pcie::Bdf;

/// Where the kernel lists PMUs, relative to the filesystem root.
pub(crate) const EVENT_SOURCE_DIR: &str = "sys/bus/event_source/devices";

/// Which `perf_event_attr` word a format field lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ConfigWord {
    Config,
    Config1,
    Config2,
    Config3,
}

impl ConfigWord {
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn name(self) -> &'static str {
        ["config", "config1", "config2", "config3"][self.index()]
    }

    fn parse(text: &str) -> Option<ConfigWord> {
        match text {
            "config" => Some(ConfigWord::Config),
            "config1" => Some(ConfigWord::Config1),
            "config2" => Some(ConfigWord::Config2),
            "config3" => Some(ConfigWord::Config3),
            _ => None,
        }
    }
}

/// One `format/NAME` file: `config1:0-3` or `config:0-7,32-35` (low bits of the value go to the
/// first range).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatField {
    pub(crate) name: String,
    pub(crate) word: ConfigWord,
    /// Inclusive bit ranges, in the order the file lists them.
    pub(crate) ranges: Vec<(u8, u8)>,
}

impl FormatField {
    /// Parses the text of `format/<name>`.
    pub fn parse(name: &str, text: &str) -> Result<FormatField> {
        let bad = || {
            Error::bad_input(format!(
                "format/{name}: '{}' is not a field layout; expected e.g. config:0-15, \
                 config1:4 or config:0-7,32-35",
                text.trim()
            ))
        };
        let (word, bits) = text.trim().split_once(':').ok_or_else(bad)?;
        let word = ConfigWord::parse(word).ok_or_else(bad)?;
        let mut ranges = Vec::new();
        for part in bits.split(',') {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo, hi),
                None => (part, part),
            };
            let lo: u8 = lo.trim().parse().map_err(|_| bad())?;
            let hi: u8 = hi.trim().parse().map_err(|_| bad())?;
            if lo > hi || hi > 63 {
                return Err(bad());
            }
            ranges.push((lo, hi));
        }
        Ok(FormatField {
            name: name.to_string(),
            word,
            ranges,
        })
    }

    /// The layout as the `format/` file writes it: `config:0-7,32-35`.
    pub(crate) fn layout(&self) -> String {
        let ranges: Vec<String> = self
            .ranges
            .iter()
            .map(|(lo, hi)| {
                if lo == hi {
                    lo.to_string()
                } else {
                    format!("{lo}-{hi}")
                }
            })
            .collect();
        format!("{}:{}", self.word.name(), ranges.join(","))
    }

    /// The field's value in `words` (the inverse of [`FormatField::pack`]).
    pub(crate) fn unpack(&self, words: &[u64; 4]) -> u64 {
        let word = words[self.word.index()];
        let mut value = 0u64;
        let mut shift = 0u32;
        for &(lo, hi) in &self.ranges {
            let width = u32::from(hi - lo) + 1;
            let mask = low_bits_mask(width);
            value |= ((word >> lo) & mask).checked_shl(shift).unwrap_or(0);
            shift += width;
        }
        value
    }

    /// How many value bits the field holds.
    pub(crate) fn width(&self) -> u32 {
        self.ranges
            .iter()
            .map(|(lo, hi)| u32::from(hi - lo) + 1)
            .sum()
    }

    /// The largest value the field holds.
    pub(crate) fn max_value(&self) -> u64 {
        low_bits_mask(self.width())
    }

    /// Writes `value` into its bits of `words` (clearing what was there), or `None` when the
    /// value does not fit the field.
    pub(crate) fn pack(&self, value: u64, words: &mut [u64; 4]) -> Option<()> {
        if value > self.max_value() {
            return None;
        }
        let word = &mut words[self.word.index()];
        let mut rest = value;
        for &(lo, hi) in &self.ranges {
            let width = u32::from(hi - lo) + 1;
            let mask = low_bits_mask(width);
            *word = (*word & !(mask << lo)) | ((rest & mask) << lo);
            rest = rest.checked_shr(width).unwrap_or(0);
        }
        Some(())
    }
}

/// A term of an `events/` alias: a number, or `?` (the user must give it, like `lane=?`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasTerm {
    pub(crate) name: String,
    /// `None` for a `?` parameter.
    pub(crate) value: Option<u64>,
}

/// One `events/NAME` alias with its `.scale` and `.unit`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PmuEvent {
    pub(crate) name: String,
    pub(crate) terms: Vec<AliasTerm>,
    pub(crate) scale: Option<f64>,
    pub(crate) unit: Option<String>,
}

/// Parses a number as perf's lexer reads one: decimal or `0x` hex.
pub(crate) fn parse_number(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Parses the text of an `events/` file: `eventid=0x21,type=0x0` or `event=0xff,umask=0x20`;
/// a term without a value means 1, as perf reads it.
pub fn parse_alias_terms(file: &Path, text: &str) -> Result<Vec<AliasTerm>> {
    let mut terms = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        let (name, value) = match part.split_once('=') {
            Some((name, "?")) => (name, None),
            Some((name, value)) => {
                let number = parse_number(value).ok_or_else(|| {
                    Error::runtime(format!(
                        "{}: term '{part}' has no number (decimal, 0x-hex or ?)",
                        file.display()
                    ))
                })?;
                (name, Some(number))
            }
            None => (part, Some(1)),
        };
        terms.push(AliasTerm {
            name: name.trim().to_string(),
            value,
        });
    }
    Ok(terms)
}

/// The kernel driver a PCIe PMU's name identifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PcieDriver {
    /// Upstream `dwc_pcie_pmu` (`dwc_rootport_<hex>`): payload counters in bytes.
    DwcUpstream,
    /// The downstream Yitian driver of the Yitian 710 PCIe PMU guide (`pcie_bdf_<hex>`): payload
    /// in 16-byte units.
    DwcSeed,
    HisiPcie,
    IntelIio,
    NvidiaPcie,
}

impl PcieDriver {
    /// Bytes one raw count of `event` stands for, before any `.scale`: the seed's driver
    /// reports the DWC data-payload counters in 16-byte units.
    pub(crate) fn payload_unit_bytes(self, event: &str) -> Option<u32> {
        let lower = event.to_ascii_lowercase();
        match self {
            PcieDriver::DwcSeed if lower.ends_with("_tlp_data_payload") => Some(16),
            PcieDriver::DwcUpstream if lower.ends_with("_tlp_data_payload") => Some(1),
            _ => None,
        }
    }
}

/// What a PCIe PMU's name and files say about where it counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PciePlace {
    /// One root port: every kernel's `dwc_rootport_<hex>` and the guide's `pcie_bdf_<hex>`
    /// hold its domain.
    RootPort { bdf: Bdf },
    /// Root ports whose requester id (`bus << 8 | devfn`) is in `min..=max`: HiSilicon's
    /// `bdf_min` and `bdf_max`, the range its driver checks a `bdf=` filter against.
    RequesterRange { min: u16, max: u16 },
    /// Root ports on one bus (HiSilicon's `bus` on a kernel without `bdf_min`, Intel IIO
    /// `dieN`: "segment:bus").
    RootBus { domain: u16, bus: u8 },
    /// A Grace socket's root ports (`nvidia_pcie_pmu_<socket>`, `root_port=` bitmap filter).
    Socket(u32),
}

/// One PMU the kernel registered.
#[derive(Debug, Clone, PartialEq)]
pub struct SysfsPmu {
    /// The PMU's name in `/sys/bus/event_source/devices`.
    pub name: String,
    pub(crate) dir: PathBuf,
    /// The `type` perf puts in `perf_event_attr.type`.
    pub(crate) type_id: u32,
    pub(crate) formats: Vec<FormatField>,
    pub(crate) events: Vec<PmuEvent>,
    /// `cpumask` (or `cpus`): the CPUs to open on; empty when the PMU has no such file (core
    /// and software PMUs: every online CPU).
    pub(crate) cpus: Vec<u32>,
    pub(crate) mux_interval_ms: Option<u64>,
    /// The PCIe PMU driver this PMU's name identifies, when it is one.
    pub(crate) driver: Option<PcieDriver>,
    pub(crate) place: Option<PciePlace>,
}

impl SysfsPmu {
    pub(crate) fn format(&self, name: &str) -> Option<&FormatField> {
        self.formats.iter().find(|f| f.name == name)
    }

    /// The alias `name`, ASCII case-insensitively (the seed's `Rx_PCIe_TLP_Data_Payload` and
    /// upstream's `rx_pcie_tlp_data_payload` are one event).
    pub(crate) fn event(&self, name: &str) -> Option<&PmuEvent> {
        self.events.iter().find(|e| e.name == name).or_else(|| {
            self.events
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(name))
        })
    }
}

/// Parses a CPU list as the kernel prints one: `0`, `0-3,8,10-11`.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    // One CPU-list grammar in the tree, bounded at the kernel's largest NR_CPUS (a cpumask of
    // "0-4294967295" would otherwise be four billion entries).
    crate::linux::cpuset::CpuSet::parse_list(text).map(|set| set.0.into_iter().collect())
}

/// A sysfs (or procfs) attribute's text: at most one page, as the kernel fills it, so an
/// endless file in a tree given as a root is never read past that.
fn read_attribute(path: &Path) -> std::io::Result<String> {
    crate::input::read_capped(path, 4096).map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

fn read_optional(path: &Path) -> Result<Option<String>> {
    match read_attribute(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Reads one PMU directory.
pub fn read_pmu(dir: &Path) -> Result<SysfsPmu> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let type_path = dir.join("type");
    let type_text = read_attribute(&type_path).map_err(|e| Error::io(&type_path, e))?;
    let type_id = type_text.trim().parse().map_err(|_| {
        Error::runtime(format!(
            "{}: '{}' is not a PMU type number",
            type_path.display(),
            type_text.trim()
        ))
    })?;
    let mut formats = Vec::new();
    for (file, path) in list_dir(&dir.join("format"))? {
        let text = read_attribute(&path).map_err(|e| Error::io(&path, e))?;
        formats.push(
            FormatField::parse(&file, &text)
                .map_err(|e| Error::runtime(format!("{}: {}", path.display(), e.message())))?,
        );
    }
    let mut events = Vec::new();
    let event_dir = dir.join("events");
    for (file, path) in list_dir(&event_dir)? {
        if file.contains('.') {
            continue;
        }
        let text = read_attribute(&path).map_err(|e| Error::io(&path, e))?;
        let scale_path = event_dir.join(format!("{file}.scale"));
        let scale = match read_optional(&scale_path)? {
            Some(text) => Some(text.trim().parse::<f64>().map_err(|_| {
                Error::runtime(format!(
                    "{}: '{}' is not a number",
                    scale_path.display(),
                    text.trim()
                ))
            })?),
            None => None,
        };
        let unit = read_optional(&event_dir.join(format!("{file}.unit")))?
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty());
        events.push(PmuEvent {
            terms: parse_alias_terms(&path, &text)?,
            name: file,
            scale,
            unit,
        });
    }
    let cpus = match read_optional(&dir.join("cpumask"))? {
        Some(text) => Some(text),
        None => read_optional(&dir.join("cpus"))?,
    }
    .map(|text| {
        parse_cpu_list(&text).ok_or_else(|| {
            Error::runtime(format!(
                "{}/cpumask: '{}' is not a CPU list",
                dir.display(),
                text.trim()
            ))
        })
    })
    .transpose()?
    .unwrap_or_default();
    let mux_interval_ms =
        read_optional(&dir.join("perf_event_mux_interval_ms"))?.and_then(|t| t.trim().parse().ok());
    let (driver, place) = pcie_place(&name, dir)?;
    Ok(SysfsPmu {
        name,
        dir: dir.to_path_buf(),
        type_id,
        formats,
        events,
        cpus,
        mux_interval_ms,
        driver,
        place,
    })
}

/// Sorted `(file name, path)` of a directory's entries; none when it does not exist.
fn list_dir(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    out.sort();
    Ok(out)
}

/// The family and place a PMU's name (and its `bus`/`dieN` files) give.
fn pcie_place(name: &str, dir: &Path) -> Result<(Option<PcieDriver>, Option<PciePlace>)> {
    let hex = |prefix: &str| {
        name.strip_prefix(prefix)
            .and_then(|h| u64::from_str_radix(h, 16).ok())
    };
    if let Some(v) = hex("dwc_rootport_") {
        let devfn = (v & 0xff) as u8;
        let bdf = Bdf::new((v >> 16) as u16, (v >> 8) as u8, devfn >> 3, devfn & 7);
        let place = PciePlace::RootPort { bdf };
        return Ok((Some(PcieDriver::DwcUpstream), Some(place)));
    }
    if let Some(v) = hex("pcie_bdf_") {
        let bdf = Bdf::new(
            (v >> 24) as u16,
            (v >> 16) as u8,
            ((v >> 8) & 0x1f) as u8,
            (v & 7) as u8,
        );
        let place = PciePlace::RootPort { bdf };
        return Ok((Some(PcieDriver::DwcSeed), Some(place)));
    }
    if name.starts_with("hisi_pcie") && name.contains("_core") {
        let id = |file: &str| -> Result<Option<u16>> {
            Ok(read_optional(&dir.join(file))?
                .and_then(|t| parse_number(&t))
                .and_then(|v| u16::try_from(v).ok()))
        };
        let place = match (id("bdf_min")?, id("bdf_max")?) {
            (Some(min), Some(max)) => Some(PciePlace::RequesterRange { min, max }),
            _ => id("bus")?
                .and_then(|bus| u8::try_from(bus).ok())
                .map(|bus| PciePlace::RootBus { domain: 0, bus }),
        };
        return Ok((Some(PcieDriver::HisiPcie), place));
    }
    if let Some(stack) = name
        .strip_prefix("uncore_iio_free_running_")
        .or_else(|| name.strip_prefix("uncore_iio_"))
    {
        // The free-running PMU of a stack has no dieN files; its sibling uncore_iio_<n> has.
        let sibling = dir.with_file_name(format!("uncore_iio_{stack}"));
        let place = iio_root_bus(dir)?.or(iio_root_bus(&sibling)?);
        return Ok((Some(PcieDriver::IntelIio), place));
    }
    if let Some(socket) = name
        .strip_prefix("nvidia_pcie_pmu_")
        .and_then(|s| s.parse().ok())
    {
        return Ok((
            Some(PcieDriver::NvidiaPcie),
            Some(PciePlace::Socket(socket)),
        ));
    }
    Ok((None, None))
}

/// `dieN` of an IIO PMU: "segment:bus" of the stack's root bus (the first die that has one).
fn iio_root_bus(dir: &Path) -> Result<Option<PciePlace>> {
    for (file, path) in list_dir(dir)? {
        if !file.starts_with("die") {
            continue;
        }
        let text = read_attribute(&path).map_err(|e| Error::io(&path, e))?;
        if let Some((domain, bus)) = text.trim().split_once(':') {
            if let (Ok(domain), Ok(bus)) =
                (u16::from_str_radix(domain, 16), u8::from_str_radix(bus, 16))
            {
                return Ok(Some(PciePlace::RootBus { domain, bus }));
            }
        }
    }
    Ok(None)
}

/// Every PMU under `root`'s event-source directory, sorted by name.
pub(crate) fn discover(root: &Path) -> Result<Vec<SysfsPmu>> {
    let dir = root.join(EVENT_SOURCE_DIR);
    let mut pmus = Vec::new();
    for (_, path) in list_dir(&dir)? {
        // A PMU may vanish while we read it (a driver unbinding): skip it, as perf does.
        if !path.join("type").exists() {
            continue;
        }
        pmus.push(read_pmu(&path)?);
    }
    Ok(pmus)
}

/// `/proc/sys/kernel/perf_event_paranoid` under `root`, when readable.
pub(crate) fn perf_event_paranoid(root: &Path) -> Option<i32> {
    read_attribute(&root.join("proc/sys/kernel/perf_event_paranoid"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

/// The tracepoint `subsys:name`'s id from tracefs (or debugfs' tracing directory) under `root`.
/// When neither is mounted, tracefs is mounted on its kernel-made mount point first, as perf
/// does (it needs CAP_SYS_ADMIN; without it the error says how to mount it).
pub(crate) fn tracepoint_id(root: &Path, subsys: &str, name: &str) -> Result<u64> {
    let bases = ["sys/kernel/tracing", "sys/kernel/debug/tracing"];
    let mounted = || {
        bases
            .iter()
            .map(|base| root.join(base).join("events"))
            .find(|events| events.is_dir())
    };
    let Some(events) = mounted().or_else(|| {
        mount_tracefs(&root.join(bases[0]));
        mounted()
    }) else {
        return Err(Error::runtime(format!(
            "tracepoint '{subsys}:{name}': tracefs is not mounted under {} and mounting it \
             failed (as root: mount -t tracefs nodev /sys/kernel/tracing)",
            root.join(bases[0]).display()
        )));
    };
    let path = events.join(subsys).join(name).join("id");
    match read_attribute(&path) {
        Ok(text) => parse_number(&text).ok_or_else(|| {
            Error::runtime(format!(
                "{}: '{}' is not an id",
                path.display(),
                text.trim()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::bad_input(format!(
            "unknown tracepoint '{subsys}:{name}': no {} (list them with `perf list \
             tracepoint` or ls {})",
            path.display(),
            events.display()
        ))),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Mounts tracefs on `dir` when `dir` exists (the kernel creates /sys/kernel/tracing when it
/// has tracefs); a failure (no privilege, no tracefs) leaves things as they were.
fn mount_tracefs(dir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if !dir.is_dir() {
        return;
    }
    let Ok(target) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; no data.
    unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        );
    }
}

/// The CPUs online now (`/sys/devices/system/cpu/online` under `root`).
pub(crate) fn online_cpus(root: &Path) -> Result<Vec<u32>> {
    let path = root.join("sys/devices/system/cpu/online");
    let text = read_attribute(&path).map_err(|e| Error::io(&path, e))?;
    parse_cpu_list(&text)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| {
            Error::runtime(format!(
                "{}: '{}' is not a CPU list",
                path.display(),
                text.trim()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PMU tree given as a root may link an attribute to an endless device: it is refused
    /// without being opened, naming the attribute.
    #[test]
    fn an_attribute_linked_to_a_device_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let pmu = dir.path().join("evil_pmu");
        fs::create_dir_all(pmu.join("format")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", pmu.join("type")).unwrap();
        let e = read_pmu(&pmu).unwrap_err();
        assert!(
            e.to_string()
                .contains("evil_pmu/type: is a character device"),
            "{e}"
        );
        fs::remove_file(pmu.join("type")).unwrap();
        fs::write(pmu.join("type"), "42\n").unwrap();
        std::os::unix::fs::symlink("/dev/zero", pmu.join("format/event")).unwrap();
        assert!(read_pmu(&pmu).is_err());
        assert!(read_attribute(Path::new("/dev/zero")).is_err());
        let long = dir.path().join("long");
        fs::write(&long, "7".repeat(10_000)).unwrap();
        assert_eq!(read_attribute(&long).unwrap().len(), 4096);
    }

    #[test]
    fn split_format_ranges_take_low_bits_first() {
        let f = FormatField::parse("event", "config:0-7,32-35\n").unwrap();
        assert_eq!(f.width(), 12);
        let mut words = [0; 4];
        f.pack(0xabc, &mut words).unwrap();
        assert_eq!(words[0], 0xbc | (0xa << 32));
        assert_eq!(f.unpack(&words), 0xabc);
        assert!(f.pack(0x1000, &mut words).is_none());
        let one = FormatField::parse("thr_mode", "config1:4").unwrap();
        assert_eq!((one.word, one.width()), (ConfigWord::Config1, 1));
        let full = FormatField::parse("event", "config:0-63").unwrap();
        full.pack(u64::MAX, &mut words).unwrap();
        assert_eq!(words[0], u64::MAX);
        for bad in ["config:7-3", "cfg:0-3", "config:0-64", "config"] {
            assert_eq!(
                FormatField::parse("x", bad).unwrap_err().exit_code(),
                2,
                "{bad}"
            );
        }
    }

    #[test]
    fn cpu_lists_and_alias_terms() {
        assert_eq!(parse_cpu_list("0-2,8\n"), Some(vec![0, 1, 2, 8]));
        assert_eq!(parse_cpu_list("3-1"), None);
        let t = parse_alias_terms(Path::new("x"), "eventid=0x700,type=0x1,lane=?\n").unwrap();
        assert_eq!(t[0].value, Some(0x700));
        assert_eq!(
            t[2],
            AliasTerm {
                name: "lane".into(),
                value: None
            }
        );
    }

    #[test]
    fn names_and_files_give_places() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(EVENT_SOURCE_DIR);
        for name in [
            "dwc_rootport_13018",
            "dwc_rootport_3018",
            "pcie_bdf_200",
            "hisi_pcie0_core1",
            "hisi_pcie0_core2",
            "uncore_iio_2",
            "uncore_iio_free_running_2",
            "nvidia_pcie_pmu_1",
            "software",
        ] {
            fs::create_dir_all(dir.join(name)).unwrap();
            fs::write(dir.join(name).join("type"), "42\n").unwrap();
        }
        fs::write(dir.join("hisi_pcie0_core1/bus"), "0x30\n").unwrap();
        fs::write(dir.join("hisi_pcie0_core1/bdf_min"), "0x3000\n").unwrap();
        fs::write(dir.join("hisi_pcie0_core1/bdf_max"), "0x3018\n").unwrap();
        fs::write(dir.join("hisi_pcie0_core2/bus"), "0x40\n").unwrap();
        fs::write(dir.join("uncore_iio_2/die0"), "0000:b0\n").unwrap();
        fs::create_dir_all(dir.join("gone")).unwrap();
        let pmus = discover(root.path()).unwrap();
        let place = |n: &str| pmus.iter().find(|p| p.name == n).unwrap().place.clone();
        assert_eq!(
            place("dwc_rootport_13018"),
            Some(PciePlace::RootPort {
                bdf: "0001:30:03.0".parse().unwrap(),
            })
        );
        // Every kernel writes the domain: 0x3018 is domain 0's bus 0x30, device 3.
        assert_eq!(
            place("dwc_rootport_3018"),
            Some(PciePlace::RootPort {
                bdf: "0000:30:03.0".parse().unwrap(),
            })
        );
        assert_eq!(
            place("pcie_bdf_200"),
            Some(PciePlace::RootPort {
                bdf: "00:02.0".parse().unwrap(),
            })
        );
        assert_eq!(
            place("hisi_pcie0_core1"),
            Some(PciePlace::RequesterRange {
                min: 0x3000,
                max: 0x3018
            })
        );
        assert_eq!(
            place("hisi_pcie0_core2"),
            Some(PciePlace::RootBus {
                domain: 0,
                bus: 0x40
            })
        );
        assert_eq!(
            place("uncore_iio_free_running_2"),
            Some(PciePlace::RootBus {
                domain: 0,
                bus: 0xb0
            })
        );
        assert_eq!(place("nvidia_pcie_pmu_1"), Some(PciePlace::Socket(1)));
        assert_eq!(place("software"), None);
        assert!(pmus.iter().all(|p| p.name != "gone"));
    }
}
