//! What partitioning does to running programs: the time-stepped model behind the simulated
//! machine. Each step it (1) finds every thread's allocation the way the kernel's context switch
//! would (task's group, else the CPU's group; L3 mask of its cache domain, MB value of its memory
//! node), (2) solves each memory node's load: a thread keeps `mlp` misses in flight, so it issues
//! `mlp / latency` accesses per second, memory latency grows with utilisation as
//! `idle · (1 + k·u/(1−u))`, each group's miss traffic on a node is capped at MB % of the node's
//! reference bandwidth (MBW_MAX / MBA), and the node's utilisation is the fixed point of
//! traffic = u · peak; (3) drives the threads' address streams through the way-partitioned L3 of
//! their domain in proportion to those rates, which gives next step's hit ratios and the
//! occupancy each monitor id holds. Time inside a step only scales byte counts: the cache sees a
//! fixed number of accesses per step (`turnover` × its lines), enough to reach the steady state
//! real hardware reaches within milliseconds.

use std::collections::BTreeMap;

use super::cache::L3Cache;
use super::presets::Preset;
use super::resctrl::Resctrl;
use super::workload::{AccessStream, Pattern, Workload};

/// Knobs of the simulation itself (not of the machine).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct EngineConfig {
    /// Simulate 1 in `sample` cache sets (footprints shrink by the same factor).
    pub(crate) sample: u32,
    /// Accesses per step and domain, in multiples of the simulated cache's lines.
    pub(crate) turnover: f64,
}

impl Default for EngineConfig {
    fn default() -> EngineConfig {
        EngineConfig {
            sample: 16,
            turnover: 2.0,
        }
    }
}

#[derive(Debug, Clone)]
struct Thread {
    pid: u32,
    cpu: u32,
    node: u32,
    mem_node: u32,
    mlp: f64,
    /// (accesses per operation, compute ns per operation) for services.
    service: Option<(f64, f64)>,
    stream: AccessStream,
    hit_ratio: Option<f64>,
}

/// One thread's outcome over a step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ThreadStep {
    pub(crate) pid: u32,
    pub(crate) cpu: u32,
    pub(crate) rmid: u32,
    /// L3 accesses per second.
    pub(crate) rate: f64,
    pub(crate) hit_ratio: f64,
    /// Average time one access takes as the program sees it (throttling included).
    pub(crate) latency_ns: f64,
    /// Operations per second (services only).
    pub(crate) ops_per_s: f64,
}

/// One step's outcome.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Step {
    pub(crate) dt_s: f64,
    pub(crate) threads: Vec<ThreadStep>,
    /// (rmid, L3 domain) → bytes allocated now.
    pub(crate) occupancy: BTreeMap<(u32, u32), u64>,
    /// (rmid, L3 domain) → bytes really read from memory during the step, and of those the
    /// bytes from the domain's own node.
    pub(crate) traffic: BTreeMap<(u32, u32), (f64, f64)>,
    /// Memory node → utilisation.
    pub(crate) utilisation: Vec<f64>,
}

impl Step {
    /// Bytes per second a process read (what `bw_mem` prints, hits included).
    pub(crate) fn read_bandwidth(&self, pid: u32) -> f64 {
        self.threads
            .iter()
            .filter(|t| t.pid == pid)
            .map(|t| t.rate * 64.0)
            .sum()
    }
}

/// The model of one machine's caches and memory.
pub(crate) struct Engine {
    preset: &'static Preset,
    config: EngineConfig,
    caches: Vec<L3Cache>,
    threads: Vec<Thread>,
}

impl Engine {
    pub(crate) fn new(preset: &'static Preset, config: EngineConfig) -> Engine {
        let lines = preset.l3_bytes / 64 / config.sample.max(1) as u64;
        let sets = (lines / preset.l3_ways as u64).max(1) as usize;
        Engine {
            preset,
            config,
            caches: (0..preset.nodes)
                .map(|_| L3Cache::new(sets, preset.l3_ways as usize, 64))
                .collect(),
            threads: Vec::new(),
        }
    }

    /// Replace the set of running processes (cache contents stay).
    pub(crate) fn set_processes(&mut self, processes: &[(u32, Workload)]) {
        let sample = self.config.sample as u64;
        let preset = self.preset;
        self.threads = processes
            .iter()
            .enumerate()
            .flat_map(|(index, (pid, w))| {
                (0..w.threads).map(move |t| {
                    let cpu = w.cpu_of_thread(t);
                    let node = preset.node_of_cpu(cpu);
                    Thread {
                        pid: *pid,
                        cpu,
                        node,
                        mem_node: w.mem_node.unwrap_or(node),
                        mlp: w.mlp,
                        service: match w.pattern {
                            Pattern::Service {
                                accesses_per_op,
                                compute_ns,
                                ..
                            } => Some((accesses_per_op, compute_ns)),
                            _ => None,
                        },
                        stream: AccessStream::new(&w.pattern, index as u32, t, sample),
                        hit_ratio: None,
                    }
                })
            })
            .collect();
    }

    fn memory_latency(&self, utilisation: f64) -> f64 {
        let u = utilisation.min(0.999);
        self.preset.mem_idle_ns * (1.0 + self.preset.mem_queue_k * u / (1.0 - u))
    }

    /// Accesses per second a thread issues with memory latency `mem_ns`, and its per-access time.
    fn demand(&self, t: &Thread, mem_ns: f64) -> f64 {
        let h = t.hit_ratio.unwrap_or(0.0);
        let access_ns = h * self.preset.l3_hit_ns + (1.0 - h) * mem_ns;
        match t.service {
            Some((per_op, compute_ns)) => per_op / (compute_ns + per_op * access_ns / t.mlp) * 1e9,
            None => t.mlp / access_ns * 1e9,
        }
    }

    /// Advance by `dt_s` seconds under the allocation in `rs`.
    pub(crate) fn step(&mut self, rs: &Resctrl, dt_s: f64) -> Step {
        let l3_name = if rs.info.cdp() { "L3DATA" } else { "L3" };
        let full = self.preset.cbm_mask();
        // (group index, rmid, L3 mask, MB percent) per thread.
        let alloc: Vec<(usize, u32, u64, f64)> = self
            .threads
            .iter()
            .map(|t| {
                let (gi, rmid) = rs.effective_ids(t.pid, t.cpu);
                let s = &rs.groups[gi].schemata;
                let mask = s.get(l3_name, t.node).unwrap_or(full);
                let mb = s.get("MB", t.mem_node).unwrap_or(100) as f64;
                (gi, rmid, mask, mb)
            })
            .collect();

        let mut rates = vec![0.0; self.threads.len()];
        let mut utilisation = vec![0.0; self.preset.nodes as usize];
        let mut mem_ns = vec![self.preset.mem_idle_ns; self.preset.nodes as usize];
        for node in 0..self.preset.nodes {
            let members: Vec<usize> = (0..self.threads.len())
                .filter(|&i| self.threads[i].mem_node == node)
                .collect();
            if members.is_empty() {
                continue;
            }
            let peak = self.preset.node_peak_gbps * 1e9;
            let traffic_at = |u: f64, rates: &mut Vec<f64>| -> f64 {
                let mem_ns = self.memory_latency(u);
                let mut per_group: BTreeMap<usize, f64> = BTreeMap::new();
                for &i in &members {
                    rates[i] = self.demand(&self.threads[i], mem_ns);
                    let miss = 1.0 - self.threads[i].hit_ratio.unwrap_or(0.0);
                    *per_group.entry(alloc[i].0).or_default() += rates[i] * miss * 64.0;
                }
                let mut total = 0.0;
                for &i in &members {
                    let demand = per_group[&alloc[i].0];
                    let cap = alloc[i].3 / 100.0 * self.preset.mb_reference_gbps * 1e9;
                    if demand > cap {
                        rates[i] *= cap / demand;
                    }
                    total += rates[i] * (1.0 - self.threads[i].hit_ratio.unwrap_or(0.0)) * 64.0;
                }
                total
            };
            let (mut lo, mut hi) = (0.0f64, 0.999f64);
            for _ in 0..40 {
                let mid = 0.5 * (lo + hi);
                if traffic_at(mid, &mut rates) > mid * peak {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            traffic_at(hi, &mut rates);
            utilisation[node as usize] = hi;
            mem_ns[node as usize] = self.memory_latency(hi);
        }

        // Drive the caches: each domain sees its threads' streams interleaved by rate.
        let mut hits = vec![0u64; self.threads.len()];
        let mut accesses = vec![0u64; self.threads.len()];
        for node in 0..self.preset.nodes {
            let members: Vec<usize> = (0..self.threads.len())
                .filter(|&i| self.threads[i].node == node)
                .collect();
            let total_rate: f64 = members.iter().map(|&i| rates[i]).sum();
            if members.is_empty() || total_rate <= 0.0 {
                continue;
            }
            let cache = &mut self.caches[node as usize];
            let budget = cache.lines() as f64 * self.config.turnover;
            const ROUNDS: usize = 16;
            let quota: Vec<f64> = members
                .iter()
                .map(|&i| budget * rates[i] / total_rate / ROUNDS as f64)
                .collect();
            let mut carry = vec![0.0f64; members.len()];
            for _ in 0..ROUNDS {
                for (k, &i) in members.iter().enumerate() {
                    carry[k] += quota[k];
                    let n = carry[k] as u64;
                    carry[k] -= n as f64;
                    let (mask, rmid) = (alloc[i].2, alloc[i].1 as u16);
                    let t = &mut self.threads[i];
                    hits[i] += cache.access_run(n as usize, || (t.stream.next_line(), mask, rmid));
                    accesses[i] += n;
                }
            }
        }

        let mut step = Step {
            dt_s,
            utilisation,
            ..Step::default()
        };
        for (i, t) in self.threads.iter_mut().enumerate() {
            let h = t.hit_ratio.unwrap_or(0.0);
            let miss_bytes = rates[i] * (1.0 - h) * 64.0 * dt_s;
            let local = if t.mem_node == t.node {
                miss_bytes
            } else {
                0.0
            };
            let entry = step.traffic.entry((alloc[i].1, t.node)).or_default();
            entry.0 += miss_bytes;
            entry.1 += local;
            let latency_ns = match t.service {
                Some(_) => self.preset.l3_hit_ns * h + (1.0 - h) * mem_ns[t.mem_node as usize],
                None if rates[i] > 0.0 => t.mlp / rates[i] * 1e9,
                None => f64::INFINITY,
            };
            let ops_per_s = t.service.map_or(0.0, |(per_op, _)| rates[i] / per_op);
            step.threads.push(ThreadStep {
                pid: t.pid,
                cpu: t.cpu,
                rmid: alloc[i].1,
                rate: rates[i],
                hit_ratio: h,
                latency_ns,
                ops_per_s,
            });
            if accesses[i] > 0 {
                let measured = hits[i] as f64 / accesses[i] as f64;
                t.hit_ratio = Some(match t.hit_ratio {
                    Some(old) => 0.5 * old + 0.5 * measured,
                    None => measured,
                });
            }
        }
        let sample = self.config.sample as u64;
        for (node, cache) in self.caches.iter().enumerate() {
            for (rmid, lines) in cache.occupancy_by_monitor() {
                step.occupancy
                    .insert((rmid, node as u32), lines * 64 * sample);
            }
        }
        step
    }
}
