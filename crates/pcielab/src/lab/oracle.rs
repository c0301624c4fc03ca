//! The P2PDMA oracle: for every ordered pair of NVMe controllers with a CMB, the guest copies
//! from the first to the second through the first one's p2pmem (`pcielab bench p2p`), and the
//! outcome is compared with [`crate::topology::p2p`]'s prediction from the spec: a predicted bus
//! address or host-bridge path must copy and verify, a predicted refusal must fail with
//! EREMOTEIO and the kernel's own message in dmesg. The CPU is read from the guest's cpuinfo,
//! since QEMU's `-cpu` model (and the accelerator) decide what the kernel sees.

use serde::Serialize;
use std::fs;
use std::path::Path;

use super::argv::{device_id, QEMU_NVME_IDS};
use super::runner::Phase;
use super::session::{self, RunOptions, RunReport};
use crate::error::{Error, Result};
use crate::pcie::Bdf;
use crate::topology::p2p::{self, Cpu, MapType, Verdict};
use crate::topology::Topology;

/// errno the block layer returns for a refused peer-to-peer transfer (BLK_STS_TARGET).
pub(crate) const EREMOTEIO: i32 = 121;

/// NVMe controllers of the spec that have a CMB (and so p2pmem under a P2PDMA kernel).
pub(crate) fn providers(spec: &Topology) -> Vec<Bdf> {
    spec.functions()
        .iter()
        .filter(|f| (f.vendor, f.device) == QEMU_NVME_IDS && f.params.contains_key("cmb_size_mb"))
        .map(|f| f.bdf)
        .collect()
}

/// Every ordered pair of distinct controllers: (source and p2pmem provider, destination).
pub(crate) fn pairs(spec: &Topology) -> Vec<(Bdf, Bdf)> {
    let nvme = providers(spec);
    let mut out = Vec::new();
    for &a in &nvme {
        for &b in &nvme {
            if a != b {
                out.push((a, b));
            }
        }
    }
    out
}

fn result_name(src: Bdf, dst: Bdf) -> String {
    format!("p2p-{}-{}.json", device_id(src), device_id(dst))
}

/// The guest script: one `pcielab bench p2p` per pair, JSON into `/results`.
pub(crate) fn script(spec: &Topology, size: u64) -> String {
    let mut script = String::from("ls -d /sys/bus/pci/devices/*/p2pmem > p2pmem-devices.txt\n");
    for (src, dst) in pairs(spec) {
        script.push_str(&format!(
            "pcielab bench p2p {src} {dst} --via-p2pmem {src} --size {size} --chunk 65536 \
             --check --json > {} 2>> bench-errors.txt\n",
            result_name(src, dst)
        ));
    }
    script.push_str("true\n");
    script
}

/// The CPU as the guest kernel sees it, from `/proc/cpuinfo`.
pub(crate) fn cpu_from_cpuinfo(cpuinfo: &str) -> Cpu {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == name).then(|| value.trim().to_string())
        })
    };
    let family = field("cpu family")
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    match field("vendor_id").as_deref() {
        Some("AuthenticAMD") => Cpu::Amd { family },
        Some("GenuineIntel") => Cpu::Intel { family },
        _ => Cpu::Other,
    }
}

/// What happened for one pair, next to what the model predicted.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct PairOutcome {
    pub(crate) predicted: Verdict,
    /// The p2p copy went through and, with --check, the data matched.
    pub(crate) copied: bool,
    pub(crate) errno: Option<i32>,
    pub(crate) failed_step: Option<String>,
    /// The kernel's refusal message for this pair, as dmesg shows it.
    pub(crate) kernel_message: Option<String>,
    #[serde(rename = "p2p_MBps")]
    pub(crate) p2p_mbps: Option<f64>,
    #[serde(rename = "host_memory_MBps")]
    pub(crate) host_memory_mbps: Option<f64>,
    pub(crate) agrees: bool,
}

impl PairOutcome {
    /// What the guest saw, in a few words: the copy rate, the failing step and errno, or a
    /// data mismatch.
    pub(crate) fn observed(&self) -> String {
        match (self.copied, self.p2p_mbps, self.errno) {
            (true, Some(rate), _) => format!("copied {rate:.1} MB/s"),
            (_, _, Some(errno)) => format!(
                "failed ({}, errno {errno}){}",
                self.failed_step.as_deref().unwrap_or("?"),
                if self.kernel_message.is_some() {
                    ", kernel refused"
                } else {
                    ""
                }
            ),
            _ => "data mismatch".to_string(),
        }
    }
}

/// A `lab p2p` run: what each pair did in the guest.
pub struct P2pRun {
    /// The spec or preset the guest was built from, as named.
    pub(crate) spec: String,
    pub(crate) cpu: Cpu,
    pub(crate) outcomes: Vec<PairOutcome>,
    /// The guest run the outcomes were read from.
    pub run: RunReport,
}

impl P2pRun {
    /// The verdict.
    pub fn report(&self) -> P2pReport<'_> {
        P2pReport::new(&self.spec, self.cpu, &self.outcomes, &self.run)
    }
}

/// `lab p2p`: boots a guest with the topology of the spec `spec` names, copies `size` bytes
/// between every ordered pair of NVMe with a CMB through the source's p2pmem, and compares each
/// outcome with the model's verdict for the guest's CPU. `options` is the run without its
/// script (the copies are the script); `progress` hears of each phase.
pub fn boot_and_try(
    spec: &str,
    size: u64,
    mut options: RunOptions,
    progress: &mut dyn FnMut(Phase),
) -> Result<P2pRun> {
    let topology = super::load_spec(spec)?.topology;
    if pairs(&topology).is_empty() {
        return Err(Error::bad_input(format!(
            "{spec}: no two NVMe controllers with a CMB ([function.device] cmb_size_mb) to try"
        )));
    }
    options.script = Some(script(&topology, size));
    let run = session::run(&topology, &options, progress)?;
    let (cpu, outcomes) = evaluate(&topology, &run.results_dir)?;
    Ok(P2pRun {
        spec: spec.to_string(),
        cpu,
        outcomes,
        run,
    })
}

/// The `lab p2p` verdict (its `--json` document): each pair's prediction and outcome, and the run.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct P2pReport<'a> {
    pub(crate) spec: &'a str,
    pub(crate) cpu: Cpu,
    /// Whether every pair's copy agreed with the kernel's P2PDMA verdict.
    pub ok: bool,
    pub(crate) pairs: &'a [PairOutcome],
    pub(crate) run: &'a RunReport,
}

impl<'a> P2pReport<'a> {
    pub(crate) fn new(
        spec: &'a str,
        cpu: Cpu,
        pairs: &'a [PairOutcome],
        run: &'a RunReport,
    ) -> Self {
        P2pReport {
            spec,
            cpu,
            ok: pairs.iter().all(|o| o.agrees),
            pairs,
            run,
        }
    }

    /// Pairs where the guest kernel and the model disagree.
    pub fn disagreements(&self) -> usize {
        self.pairs.iter().filter(|o| !o.agrees).count()
    }

    /// The guest CPU line, then one line per pair: prediction, observation, agreement.
    pub fn to_text(&self) -> String {
        let mut text = format!(
            "guest CPU {}; boot to result {:.1} s\n",
            self.cpu, self.run.boot_to_result_s
        );
        for o in self.pairs {
            text.push_str(&format!(
                "{} -> {}  predicted {:<19} (distance {})  observed {:<40} {}\n",
                o.predicted.provider,
                o.predicted.client,
                o.predicted.map.describe(),
                o.predicted.distance,
                o.observed(),
                if o.agrees { "agree" } else { "DISAGREE" }
            ));
        }
        text
    }
}

/// Reads the guest's results and judges every pair.
pub(crate) fn evaluate(spec: &Topology, results: &Path) -> Result<(Cpu, Vec<PairOutcome>)> {
    let read = |name: &str| {
        let path = results.join(name);
        fs::read_to_string(&path).map_err(|e| {
            Error::runtime(format!(
                "lab phase 'results': {}: {e}; see {}",
                path.display(),
                results.join("script.log").display()
            ))
        })
    };
    let cpu = cpu_from_cpuinfo(&read("cpuinfo.txt")?);
    let dmesg = read("dmesg.txt")?;
    let mut outcomes = Vec::new();
    for (src, dst) in pairs(spec) {
        let predicted = p2p::verdict(spec, src, dst, cpu).expect("pairs come from the spec");
        let text = read(&result_name(src, dst))?;
        let report: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            let said = fs::read_to_string(results.join("bench-errors.txt")).unwrap_or_default();
            Error::runtime(format!(
                "lab phase 'results': bench output for {src} -> {dst} is not JSON ({e}); the \
                 guest said: {}",
                said.lines().next().unwrap_or("nothing")
            ))
        })?;
        let p2p = &report["p2p"];
        let copied = p2p["ok"] == true && report["check"] == "match";
        let errno = p2p["errno"].as_i64().map(|e| e as i32);
        let refusal = format!(
            "{dst}: cannot be used for peer-to-peer DMA as the client and provider ({src})"
        );
        let kernel_message = dmesg
            .lines()
            .find(|l| l.contains(&refusal))
            .map(|l| l.trim().to_string());
        let agrees = match predicted.map {
            MapType::BusAddress | MapType::ThroughHostBridge => copied,
            MapType::NotSupported => {
                !copied && errno == Some(EREMOTEIO) && kernel_message.is_some()
            }
            // The lab reads its guest as root: nothing is unreadable there.
            MapType::Unknown => false,
        };
        outcomes.push(PairOutcome {
            predicted,
            copied,
            errno,
            failed_step: p2p["failed_step"].as_str().map(str::to_string),
            kernel_message,
            p2p_mbps: p2p["mb_s"].as_f64(),
            host_memory_mbps: report["host_memory"]["mb_s"].as_f64(),
            agrees,
        });
    }
    Ok((cpu, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_gives_vendor_and_family() {
        let epyc = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 1\n";
        assert_eq!(cpu_from_cpuinfo(epyc), Cpu::Amd { family: 0x17 });
        let intel = "vendor_id\t: GenuineIntel\ncpu family\t: 6\n";
        assert_eq!(cpu_from_cpuinfo(intel), Cpu::Intel { family: 6 });
        assert_eq!(cpu_from_cpuinfo("vendor_id : HygonGenuine\n"), Cpu::Other);
    }

    fn outcome(map: MapType, copied: bool, errno: Option<i32>, agrees: bool) -> PairOutcome {
        PairOutcome {
            predicted: Verdict {
                provider: crate::pcie::bdf("03:00.0"),
                client: crate::pcie::bdf("04:00.0"),
                distance: 4,
                map,
                reasons: Vec::new(),
            },
            copied,
            errno,
            failed_step: errno.map(|_| "read".to_string()),
            kernel_message: errno.map(|_| "refused".to_string()),
            p2p_mbps: copied.then_some(812.34),
            host_memory_mbps: None,
            agrees,
        }
    }

    #[test]
    fn report_lines_show_prediction_observation_and_agreement() {
        let pairs = vec![
            outcome(MapType::BusAddress, true, None, true),
            outcome(MapType::NotSupported, false, Some(EREMOTEIO), true),
            outcome(MapType::ThroughHostBridge, false, None, false),
        ];
        assert_eq!(pairs[0].observed(), "copied 812.3 MB/s");
        assert_eq!(
            pairs[1].observed(),
            "failed (read, errno 121), kernel refused"
        );
        assert_eq!(pairs[2].observed(), "data mismatch");
        let run = RunReport {
            results_dir: "/tmp/r".into(),
            run_dir: None,
            kernel: "/tmp/bzImage".into(),
            script_status: 0,
            oom_kill: None,
            memory_mib: 1024,
            boot_s: 3.0,
            boot_to_result_s: 41.06,
            total_s: 50.0,
            limits: Vec::new(),
            qemu_argv: Vec::new(),
        };
        let report = P2pReport::new("qemu-seed", Cpu::Amd { family: 0x17 }, &pairs, &run);
        assert!(!report.ok);
        assert_eq!(report.disagreements(), 1);
        let text = report.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].ends_with("; boot to result 41.1 s"),
            "{}",
            lines[0]
        );
        assert!(lines[1].starts_with("0000:03:00.0 -> 0000:04:00.0  predicted bus address"));
        assert!(lines[1].ends_with(" agree"), "{}", lines[1]);
        assert!(lines[3].ends_with(" DISAGREE"), "{}", lines[3]);
        assert!(P2pReport::new("s", Cpu::Other, &pairs[..2], &run).ok);
    }
}
