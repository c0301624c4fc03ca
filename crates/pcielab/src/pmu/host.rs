//! One `pcielab stat` run on a live host, the library side of the command: discover the PMUs
//! (sysfs), encode the `-e` lists (perf's grammar), print the attrs for `--dry-run`, place each
//! PCIe PMU at its root ports in the live topology (lanes, link ceiling for MB/s and % of
//! link), plan reads that carry narrow counters' wraps, open and count around the workload
//! (perf_event_open), and return the outcome ready for the perf-style or JSON report.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::linux::find_program;
use crate::model::platform::PlatformModel;
use crate::pcie::Bdf;
use crate::pmu::counters::{Counters, PmuListing, StatDone, StatEnd, StatRequest};
use crate::pmu::event::{EventAttr, EventContext};
use crate::pmu::hostlist::{host_listing, host_pcie_devices};
use crate::pmu::kernel::KernelVersion;
use crate::pmu::perf::{open_counters, run_workload, HeldWorkload, ReadPlan};
use crate::pmu::placement::{place_in, worst_case_events_per_s};
use crate::pmu::rules::{driver_kernel, group_refusals, silent_events, Refusal};
use crate::pmu::session::Reading;
use crate::pmu::stat::{EventLabel, LinkRates, StatOutcome};
use crate::pmu::sysfs::{discover, online_cpus, SysfsPmu};
use crate::pmu::PmuDevice;
use crate::topology::Topology;

/// What the user asked `stat --machine host` to do.
pub(crate) struct HostStatRequest<'a> {
    /// The filesystem root (`/` on a real host).
    pub(crate) root: &'a Path,
    pub(crate) all_cpus: bool,
    pub(crate) interval_ms: Option<u64>,
    /// The workload's argv, after `--`.
    pub(crate) workload: &'a [String],
    /// A platform model whose streaming DMA prediction is printed beside payload rates.
    pub(crate) platform: Option<&'a PlatformModel>,
    /// The caller's SIGINT flag ([`StatRequest::interrupt`](crate::pmu::counters::StatRequest)).
    pub(crate) interrupt: Option<&'a AtomicBool>,
}

/// The events of a request, encoded against the host's PMUs.
pub(crate) struct EncodedEvents {
    pub(crate) pmus: Vec<SysfsPmu>,
    pub(crate) groups: Vec<Vec<EventAttr>>,
    /// What the kernel's drivers would refuse at open (`stat` refuses them first).
    pub(crate) refusals: Vec<Refusal>,
    /// Which kernel's PMU rules were assumed, and from what.
    pub(crate) kernel_note: String,
    /// Events that open but can count nothing, one warning each.
    pub(crate) warnings: Vec<String>,
}

/// Discovers the PMUs under `root`, encodes every `-e` argument and checks each group against
/// the rules of the kernel its PMU driver comes from.
pub(crate) fn encode_events(root: &Path, events: &[String]) -> Result<EncodedEvents> {
    if events.is_empty() {
        // perf's default events are CPU ones; pcielab counts only what it is asked to.
        return Err(Error::bad_input(
            "no events: give -e PMU/EVENT/ (`pcielab pmu list` names them); only a sim: \
             machine runs without -e, printing its simulated workload's own result",
        ));
    }
    let pmus = discover(root)?;
    let context = EventContext { pmus: &pmus, root };
    let mut groups = Vec::new();
    for text in events {
        groups.extend(context.encode_list(text)?);
    }
    let (running, mut kernel_note) = match KernelVersion::of_host(root) {
        Ok(v) => (v, format!("PMU rules of kernel {v} (uname -r)")),
        Err(e) => (
            KernelVersion::NEWEST,
            format!(
                "PMU rules of kernel {} (the newest modelled: {})",
                KernelVersion::NEWEST,
                e.message()
            ),
        ),
    };
    let used: BTreeSet<&str> = groups.iter().flatten().map(|a| a.pmu.as_str()).collect();
    for pmu in pmus.iter().filter(|p| used.contains(p.name.as_str())) {
        let follows = driver_kernel(pmu, running);
        if follows != running {
            kernel_note.push_str(&format!(
                "; {}'s event files are kernel {follows}'s: its rules apply to it",
                pmu.name
            ));
        }
    }
    let refusals = groups
        .iter()
        .flat_map(|g| group_refusals(g, &pmus, running))
        .collect();
    let warnings = groups
        .iter()
        .flat_map(|g| silent_events(g, &pmus))
        .collect();
    Ok(EncodedEvents {
        pmus,
        groups,
        refusals,
        kernel_note,
        warnings,
    })
}

/// The shortest read period pcielab keeps up (reading more often would cost more than perf).
const MIN_READ_PERIOD_S: f64 = 0.010;

/// How often to read a `bits`-wide counter counting at most `rate` per second (twice per wrap,
/// never more often than every 10 ms), and what to tell the user: that the wraps are carried,
/// or, when even 10 ms is too slow for the worst case, a warning with the risk.
pub(crate) fn wrap_plan(event: &str, bits: u32, rate: f64) -> (Duration, String) {
    let wrap_s = 2f64.powi(bits as i32) / rate.max(1.0);
    let period_s = (wrap_s / 2.0).max(MIN_READ_PERIOD_S);
    let note = if wrap_s / 2.0 >= MIN_READ_PERIOD_S {
        format!(
            "{event}: {bits}-bit counter the driver does not extend; reading it every {:.0} ms \
             to carry its wraps (worst case {rate:.2e} events/s on this link: a wrap every \
             {wrap_s:.2} s)",
            period_s * 1e3
        )
    } else {
        format!(
            "warning: {event}: {bits}-bit counter the driver does not extend; read every {:.0} \
             ms, its wraps are carried only while it counts fewer than {:.0} events/s; at this \
             link's worst case ({rate:.2e}/s) it could wrap {:.2e} times between reads, so a \
             busy counter's total can be short by a multiple of {}",
            period_s * 1e3,
            2f64.powi(bits as i32) / period_s,
            rate * period_s / 2f64.powi(bits as i32),
            1u64 << bits
        )
    };
    (Duration::from_secs_f64(period_s), note)
}

/// The perf-style `--dry-run` listing: one line per event with the attr fields.
pub(crate) fn dry_run(encoded: &EncodedEvents) -> String {
    let mut out = String::new();
    for (g, group) in encoded.groups.iter().enumerate() {
        for (i, attr) in group.iter().enumerate() {
            let role = match (group.len(), i) {
                (1, _) => String::new(),
                (_, 0) => format!(" group={g} leader"),
                _ => format!(" group={g}"),
            };
            out.push_str(&crate::pmu::event::dry_run_line(attr));
            out.push_str(&role);
            out.push('\n');
        }
    }
    out.push_str(&format!("# {}\n", encoded.kernel_note));
    for refusal in &encoded.refusals {
        out.push_str(&format!("# refused: {}\n", refusal.message()));
    }
    for warning in &encoded.warnings {
        out.push_str(&format!("# {warning}\n"));
    }
    out
}

/// A finished host run.
pub(crate) struct HostStat {
    pub(crate) outcome: StatOutcome,
    pub(crate) exit_code: i32,
    pub(crate) interrupted: bool,
    /// Lines to tell the user before the report (wrap carrying, placement gaps).
    pub(crate) notes: Vec<String>,
}

/// Why a workload cannot run: `None` when its program exists.
pub(crate) fn missing_workload(workload: &[String]) -> Option<String> {
    let program = workload.first()?;
    find_program(program).is_none().then(|| {
        format!("workload '{program}' not found (not a file, and not in PATH); exit status 127")
    })
}

/// Runs `request` on the live host, counting `encoded` (from `encode_events`).
pub(crate) fn run(request: &HostStatRequest, encoded: &EncodedEvents) -> Result<HostStat> {
    if !request.all_cpus {
        // An uncore PMU names the CPUs it counts on (cpumask): it has no per-task mode.
        let uncore: Vec<&str> = encoded
            .groups
            .iter()
            .flatten()
            .filter(|a| !a.cpus.is_empty())
            .map(|a| a.text.as_str())
            .collect();
        if !uncore.is_empty() {
            return Err(Error::bad_input(format!(
                "{} {} on an uncore PMU, which counts system-wide only (PCIe PMUs are \
                 uncore): add -a to count it on all CPUs while the workload runs; without \
                 -a, pcielab counts only the workload's own events (cpu-clock, \
                 task-clock, page-faults, tracepoints, CPU PMU events), as perf stat does",
                uncore.join(", "),
                if uncore.len() == 1 { "is" } else { "are" }
            )));
        }
    }
    if request.interval_ms == Some(0) {
        return Err(Error::bad_input(
            "-I takes a whole number of milliseconds >= 1",
        ));
    }
    if request.workload.is_empty() {
        return Err(Error::bad_input(
            "no workload: give the command to count after `--` (e.g. -- sleep 1)",
        ));
    }
    if !encoded.refusals.is_empty() {
        let lines: Vec<String> = encoded.refusals.iter().map(Refusal::message).collect();
        return Err(Error::bad_input(format!(
            "{} ({})",
            lines.join("\n"),
            encoded.kernel_note
        )));
    }
    // The PCI tree is read only when a PCIe PMU needs placing (it costs more than counting).
    let placed = |name: &str| {
        encoded
            .pmus
            .iter()
            .any(|p| p.name == name && p.place.is_some())
    };
    let topology = encoded
        .groups
        .iter()
        .flatten()
        .any(|a| placed(&a.pmu))
        .then(|| crate::topology::sysfs::read_sysfs(&request.root.join("sys/bus/pci")).ok())
        .flatten();
    let mut notes = Vec::new();
    if encoded
        .groups
        .iter()
        .flatten()
        .any(|a| a.dwc_group.is_some())
    {
        notes.push(encoded.kernel_note.clone());
    }
    let mut wrap_period: Option<Duration> = None;
    let labels: Vec<EventLabel> = encoded
        .groups
        .iter()
        .flatten()
        .map(|attr| {
            let pmu = encoded.pmus.iter().find(|p| p.name == attr.pmu);
            let placement = pmu
                .and_then(|p| p.place.as_ref())
                .zip(topology.as_ref())
                .map(|(place, topo)| place_in(place, topo));
            if let Some(bits) = attr.counter_bits {
                let rate = worst_case_events_per_s(placement.as_ref());
                let (period, note) = wrap_plan(&attr.text, bits, rate);
                wrap_period = Some(wrap_period.map_or(period, |p| p.min(period)));
                notes.push(note);
            }
            // Rates only for a PMU of one root port (not a socket's or a root bus's).
            let link = placement
                .as_ref()
                .filter(|p| p.ceiling_mbps.is_some())
                .and_then(|p| p.root_ports.first())
                .zip(topology.as_ref())
                .and_then(|(rp, topo)| LinkRates::of_port(topo, *rp, request.platform));
            host_label(attr, link)
        })
        .collect();
    let plan = ReadPlan {
        interval: request.interval_ms.map(Duration::from_millis),
        wrap_period,
    };
    let run = if request.all_cpus {
        let online = online_cpus(request.root)?;
        let counters = open_counters(request.root, &encoded.groups, &online, None)?;
        run_workload(counters, request.workload, None, &plan, request.interrupt)?
    } else {
        let held = HeldWorkload::fork(request.workload)?;
        let counters = open_counters(request.root, &encoded.groups, &[], Some(held.pid()))?;
        let flat: Vec<&EventAttr> = encoded.groups.iter().flatten().collect();
        for &i in &counters.user_only {
            notes.push(format!(
                "{}: counting the workload's user space only (perf's :u): \
                 perf_event_paranoid bars this user from kernel counts",
                flat[i].text
            ));
        }
        run_workload(
            counters,
            request.workload,
            Some(held),
            &plan,
            request.interrupt,
        )?
    };
    let labels: Vec<EventLabel> = labels
        .into_iter()
        .zip(run.not_supported)
        .map(|(label, why)| EventLabel {
            not_supported: why,
            ..label
        })
        .collect();
    let mut outcome = StatOutcome::new(labels, run.counts);
    if !request.all_cpus {
        // perf names the command it counted in place of 'system wide'.
        outcome.counted = request.workload.join(" ");
    }
    Ok(HostStat {
        outcome,
        exit_code: run.exit_code,
        interrupted: run.interrupted,
        notes,
    })
}

/// The live host's counters: the PMUs under `<root>/sys/bus/event_source/devices`, counted
/// through perf_event_open.
pub(crate) struct HostCounters {
    /// The filesystem root (`/` on a real host).
    pub(crate) root: PathBuf,
}

impl Counters for HostCounters {
    fn pcie_pmus(&self) -> Result<Vec<PmuDevice>> {
        host_pcie_devices(&self.root)
    }

    fn list(&self, only: Option<&str>) -> Result<PmuListing> {
        Ok(PmuListing::Host(host_listing(&self.root, only)?))
    }

    fn dry_run(&self, events: &[String]) -> Result<String> {
        let encoded = encode_events(&self.root, events)?;
        let listing = dry_run(&encoded);
        if encoded.refusals.is_empty() {
            return Ok(listing);
        }
        // A run of these events would be refused, so the dry run is too (exit 2, as a real
        // run's), still showing every attr and each refusal's reason.
        Err(Error::bad_input(format!(
            "--dry-run: the kernel would refuse {} of these events at open:\n{}",
            encoded.refusals.len(),
            listing.trim_end()
        )))
    }

    fn stat(&self, request: &StatRequest) -> Result<StatEnd> {
        if request.ber.is_some() {
            return Err(Error::bad_input(
                "--ber injects link bit errors into a simulated machine: a host's errors are \
                 its own (count them with the PMU's error events)",
            ));
        }
        if let Some(ms) = request.mux_interval_ms {
            return Err(Error::bad_input(format!(
                "--mux-interval-ms {ms}: a host rotates time-shared events at each PMU's own \
                 perf_event_mux_interval_ms (as root: echo {ms} > \
                 /sys/bus/event_source/devices/PMU/perf_event_mux_interval_ms)"
            )));
        }
        let encoded = encode_events(&self.root, request.events)?;
        if let Some(why) = missing_workload(request.workload) {
            return Ok(StatEnd::WorkloadNotFound(why));
        }
        let host_request = HostStatRequest {
            root: &self.root,
            all_cpus: request.all_cpus,
            interval_ms: request.interval_ms,
            workload: request.workload,
            platform: request.platform,
            interrupt: request.interrupt,
        };
        let done = run(&host_request, &encoded)?;
        Ok(StatEnd::Counted(StatDone {
            workload_json: serde_json::json!({
                "argv": request.workload,
                "exit_code": done.exit_code,
                "interrupted": done.interrupted,
                "notes": done.notes,
            }),
            outcome: done.outcome,
            workload_report: String::new(),
            notes: done.notes,
            exit_code: done.exit_code,
        }))
    }
}

/// The two data-payload events a root-port PMU counts, Rx (toward the root complex) first.
pub(crate) const PAYLOAD_EVENTS: [&str; 2] =
    ["Rx_PCIe_TLP_Data_Payload", "Tx_PCIe_TLP_Data_Payload"];

/// One root port's payload counters within [`PayloadCounters`].
pub(crate) struct PortPayload {
    pub(crate) root_port: Bdf,
    /// The PMU counting it (`dwc_rootport_13018`, `pcie_bdf_200`).
    pub(crate) pmu: String,
    /// Bytes one raw count stands for, Rx and Tx (1 upstream DWC, 16 on the seed's driver).
    pub(crate) bytes_per_count: [u64; 2],
    /// Indices of its Rx and Tx events in [`PayloadCounters::read`]'s readings.
    events: [usize; 2],
}

/// The Rx/Tx data-payload counters of the live host's root-port PMUs, counting from open:
/// what `observe` reads on `--machine host`.
pub(crate) struct PayloadCounters {
    counters: crate::pmu::perf::OpenCounters,
    pub(crate) ports: Vec<PortPayload>,
}

/// Opens and enables, system-wide on each PMU's cpumask CPU, the Rx and Tx data-payload
/// events of every PCIe PMU under `root` that its driver's catalog gives payload events and
/// that sits at exactly one root port of `topology`. Each event is its own group: a DesignWare
/// port has one time-based counter for both, so the kernel rotates them on it (perf
/// multiplexing) and each reading's enabled/running times say how long it counted. Returns the
/// counters and a note per PMU left out (events missing, the kernel refusing them); a refused
/// permission or any other failure to open is an error.
pub(crate) fn open_payload_counters(
    root: &Path,
    pmus: &[SysfsPmu],
    topology: &Topology,
) -> Result<(PayloadCounters, Vec<String>)> {
    let context = EventContext { pmus, root };
    let mut notes = Vec::new();
    let mut groups: Vec<Vec<EventAttr>> = Vec::new();
    let mut ports = Vec::new();
    for pmu in pmus {
        let Some(place) = &pmu.place else { continue };
        let Some(driver) = pmu.driver else { continue };
        if PAYLOAD_EVENTS
            .iter()
            .any(|e| driver.payload_unit_bytes(e).is_none())
        {
            continue;
        }
        let [root_port] = place_in(place, topology).root_ports[..] else {
            continue;
        };
        let encoded: Result<Vec<EventAttr>> = PAYLOAD_EVENTS
            .iter()
            .map(|e| context.encode(&format!("{}/{e}/", pmu.name)))
            .collect();
        let attrs = match encoded {
            Ok(attrs) => attrs,
            Err(e) => {
                notes.push(format!("{}: no payload counters ({e})", pmu.name));
                continue;
            }
        };
        let unit = |a: &EventAttr| u64::from(a.payload_bytes.unwrap_or(1));
        ports.push(PortPayload {
            root_port,
            pmu: pmu.name.clone(),
            bytes_per_count: [unit(&attrs[0]), unit(&attrs[1])],
            events: [groups.len(), groups.len() + 1],
        });
        groups.extend(attrs.into_iter().map(|a| vec![a]));
    }
    // PCIe PMUs name their CPUs (cpumask): the online list is needed only for one without.
    let online = if groups.iter().all(|g| !g[0].cpus.is_empty()) {
        Vec::new()
    } else {
        online_cpus(root)?
    };
    let counters = open_counters(root, &groups, &online, None)?;
    let refused = counters.not_supported();
    ports.retain(
        |p| match p.events.iter().find_map(|&i| refused[i].as_ref()) {
            Some(why) => {
                notes.push(format!("{}: payload counters not supported: {why}", p.pmu));
                false
            }
            None => true,
        },
    );
    counters.enable()?;
    Ok((PayloadCounters { counters, ports }, notes))
}

impl PayloadCounters {
    /// Each port's cumulative Rx and Tx readings (raw counts, with enabled/running times).
    pub(crate) fn read(&mut self) -> Result<Vec<(&PortPayload, [Reading; 2])>> {
        let readings = self.counters.read()?;
        Ok(self
            .ports
            .iter()
            .map(|p| (p, p.events.map(|i| readings[i])))
            .collect())
    }
}

fn host_label(attr: &EventAttr, link: Option<LinkRates>) -> EventLabel {
    let bytes_per_count = attr.payload_bytes.map(f64::from);
    EventLabel {
        pmu: attr.pmu.clone(),
        display: attr.text.clone(),
        unit: if attr.unit.is_empty() && bytes_per_count == Some(1.0) {
            "bytes".into()
        } else {
            attr.unit.clone()
        },
        scale: attr.scale,
        bytes_per_count,
        link: link.filter(|_| bytes_per_count.is_some()),
        not_supported: None,
        not_counted_reason: "the kernel never scheduled it on a counter (all counters busy, or \
                             the group needs more counters than the PMU has)"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pcie::Generation;
    use crate::pmu::sysfs::PciePlace;
    use crate::topology::{Function, Kind, Link};

    #[test]
    fn groups_the_dwc_driver_refuses_are_refused_per_kernel() {
        use crate::pmu::sysfs::{discover, EVENT_SOURCE_DIR};
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(EVENT_SOURCE_DIR).join("dwc_rootport_10");
        std::fs::create_dir_all(dir.join("format")).unwrap();
        std::fs::write(dir.join("type"), "12\n").unwrap();
        for (name, layout) in [
            ("eventid", "config:0-15"),
            ("type", "config:16-19"),
            ("lane", "config:20-27"),
        ] {
            std::fs::write(dir.join("format").join(name), layout).unwrap();
        }
        let pmus = discover(root.path()).unwrap();
        let context = EventContext {
            pmus: &pmus,
            root: root.path(),
        };
        let refusals = |text: &str, kernel| {
            let groups = context.encode_list(text).unwrap();
            group_refusals(&groups[0], &pmus, KernelVersion::parse(kernel).unwrap())
        };
        let two_time = "{dwc_rootport_10/eventid=0x20/,dwc_rootport_10/eventid=0x21/}";
        let old = refusals(two_time, "6.12");
        assert_eq!(old.len(), 1);
        assert_eq!(old[0].errno, "EINVAL");
        assert!(old[0].reason.contains("6.8-6.17"), "{}", old[0].reason);
        let new = refusals(two_time, "6.18");
        assert_eq!(new.len(), 2);
        assert_eq!(new[0].errno, "ENOSPC");
        let time_and_lane =
            "{dwc_rootport_10/eventid=0x21/,dwc_rootport_10/eventid=0x600,type=1,lane=0/}";
        assert_eq!(refusals(time_and_lane, "6.17")[0].errno, "EINVAL");
        assert!(refusals(time_and_lane, "6.18").is_empty());
        let same_lane_event = "{dwc_rootport_10/eventid=0x600,type=1,lane=0/,\
                               dwc_rootport_10/eventid=0x600,type=1,lane=1/}";
        assert_eq!(refusals(same_lane_event, "6.18").len(), 2);
        let seed_group = "dwc_rootport_10/eventid=0x400,type=1,lane=0/";
        assert!(refusals(seed_group, "6.17").is_empty());
        assert_eq!(refusals(seed_group, "6.18")[0].errno, "EINVAL");
        // A software leader may lead DWC events on every kernel.
        assert!(refusals("{cpu-clock,dwc_rootport_10/eventid=0x21/}", "6.12").is_empty());
    }

    #[test]
    fn places_are_the_root_ports_the_drivers_name() {
        let mut rp = Function::new(
            "0001:30:03.0".parse().unwrap(),
            0x1ded,
            0x8000,
            0x060400,
            Kind::RootPort,
        );
        rp.link = Some(Link {
            max_speed: Some(Generation::Gen4),
            max_width: Some(8),
            speed: Some(Generation::Gen4),
            width: Some(8),
        });
        rp.numa_node = Some(1);
        let topo = Topology::new(vec![rp]);
        let place = PciePlace::RootPort {
            bdf: "0001:30:03.0".parse().unwrap(),
        };
        let p = place_in(&place, &topo);
        assert_eq!(p.root_ports, vec!["0001:30:03.0".parse().unwrap()]);
        assert_eq!(p.lanes, Some(8));
        // Domain 0's 30:03.0 is another port: no PMU of domain 0 lands in domain 1.
        let domain0 = place_in(
            &PciePlace::RootPort {
                bdf: "0000:30:03.0".parse().unwrap(),
            },
            &topo,
        );
        assert_eq!(domain0.lanes, None);
        let socket = place_in(&PciePlace::Socket(1), &topo);
        assert_eq!(socket.root_ports.len(), 1);
        let range = |min, max| place_in(&PciePlace::RequesterRange { min, max }, &topo);
        assert_eq!(range(0x3000, 0x3018).root_ports.len(), 1);
        assert!(range(0x3000, 0x3017).root_ports.is_empty());
        let bus = place_in(
            &PciePlace::RootBus {
                domain: 0,
                bus: 0x30,
            },
            &topo,
        );
        assert!(bus.root_ports.is_empty());
        // Gen4 x8 raw: 16 GT/s × 8 lanes / 8 bits ≈ 15.75 GB/s of 128b/130b symbols; one
        // 8-byte DLLP each: ~2e9 events/s, a 32-bit counter wraps in ~2.2 s.
        let rate = worst_case_events_per_s(Some(&p));
        assert!((1.9e9..2.1e9).contains(&rate), "{rate}");
        let (period, note) = wrap_plan("x", 32, rate);
        assert!((1.0..1.2).contains(&period.as_secs_f64()), "{period:?}");
        assert!(note.contains("to carry its wraps"), "{note}");
        // The seed's 4-bit per-lane error counters cannot be carried at line rate: warn.
        let (period, note) = wrap_plan("pcie_bdf_200/EBUF_SKP_Add,lane=0/", 4, rate);
        assert_eq!(period, Duration::from_millis(10));
        assert!(
            note.starts_with("warning:") && note.contains("fewer than 1600 events/s"),
            "{note}"
        );
    }
}
