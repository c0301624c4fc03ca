//! Simulated processes: the seed's commands parsed as written (`numactl -C 10 -m 0 ./lat_mem_rd
//! -N 1 -P 1 145M 512`) into a memory access pattern, a thread count, CPU and memory binding and
//! the memory-level parallelism each thread sustains. Four programs are known: lmbench `bw_mem`
//! (streaming reads over a private buffer per process), lmbench `lat_mem_rd` (a dependent
//! pointer chase over a size with a stride), `stress-ng --cache` (sequential sweeps over a shared
//! buffer the size of the LLC, each worker moving to the next CPU after every sweep), and
//! `online-service` (pcielab's stand-in for SPECjbb: random accesses over a shared working set
//! between bursts of compute, reporting operations/s).

use super::presets::Preset;
use crate::error::{Error, Result};
use crate::input::{in_range, parse_in_range};
use crate::linux::cpuset::CpuSet;

/// The access pattern of one program.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// Sequential lines over a private buffer of `bytes` per thread (`bw_mem … rd`).
    Stream {
        /// Buffer bytes per thread.
        bytes: u64,
    },
    /// Every `stride`-th byte of `bytes`, one dependent load at a time (`lat_mem_rd`).
    Chase {
        /// Buffer bytes.
        bytes: u64,
        /// Bytes between loads.
        stride: u64,
    },
    /// Sequential sweeps over `bytes` shared by all threads, each thread starting at its own
    /// offset (`stress-ng --cache`): stress-ng's stress-cache.c walks its shared buffer with
    /// `k += 33` and `i += size/4 + 1` bytes per iteration, so every line of the buffer is touched
    /// once per sweep and reused only a whole buffer later (the `k` walk makes about nine in ten
    /// of the new lines: one per 64/33 iterations against the four `i` pointers' one per 16).
    Thrash {
        /// Shared buffer bytes.
        bytes: u64,
    },
    /// Operations of `accesses_per_op` random lines over a shared `bytes` working set plus
    /// `compute_ns` of work that touches no memory (`online-service`).
    Service {
        /// Shared working-set bytes.
        bytes: u64,
        /// Random lines each operation touches.
        accesses_per_op: f64,
        /// Work per operation that touches no memory (ns).
        compute_ns: f64,
    },
}

/// A program as launched: what it runs, on how many threads, where.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub(crate) command: String,
    pub(crate) pattern: Pattern,
    pub(crate) threads: u32,
    /// CPUs threads are placed on, round-robin.
    pub(crate) cpus: Vec<u32>,
    /// Threads are spread evenly over `cpus` instead of filling them from the first: for
    /// programs that keep moving between the allowed CPUs, where the time average is what the
    /// caches see.
    pub(crate) spread: bool,
    /// Memory node (`numactl -m`); `None` is first touch: the node of the thread's CPU.
    pub(crate) mem_node: Option<u32>,
    /// Misses one thread keeps in flight.
    pub(crate) mlp: f64,
}

impl Workload {
    /// The thread → CPU placement.
    pub(crate) fn cpu_of_thread(&self, thread: u32) -> u32 {
        let n = self.cpus.len();
        let index = if self.spread && (self.threads as usize) < n {
            thread as usize * n / self.threads as usize
        } else {
            thread as usize % n
        };
        self.cpus[index]
    }
}

/// The most threads one simulated program may start.
pub(crate) const MAX_THREADS: u32 = 65_536;

/// The largest buffer or working set a simulated program may use (1 TiB).
pub(crate) const MAX_FOOTPRINT: u64 = 1 << 40;

fn bad(command: &str, what: impl std::fmt::Display) -> Error {
    Error::bad_input(format!(
        "simulated command '{command}': {what} (known programs: numactl [-C CPUS|-N NODES] [-m NODE] \
         then bw_mem [-P N] SIZE rd, lat_mem_rd [-P N] SIZE STRIDE, stress-ng --cache N \
         [--aggressive], online-service [--threads N] [--working-set SIZE] [--accesses-per-op K] \
         [--compute-ns NS])"
    ))
}

fn nodes_cpus(preset: &Preset, list: &str, command: &str) -> Result<Vec<u32>> {
    let nodes =
        CpuSet::parse_list(list).ok_or_else(|| bad(command, format!("bad node list '{list}'")))?;
    let mut cpus = Vec::new();
    for n in nodes.0 {
        if n >= preset.nodes {
            return Err(bad(
                command,
                format!("node {n} does not exist (0-{})", preset.nodes - 1),
            ));
        }
        cpus.extend(preset.cpus_of_node(n).0);
    }
    Ok(cpus)
}

/// Parse a command line on machine `preset`.
pub fn parse(command: &str, preset: &Preset) -> Result<Workload> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let mut i = 0;
    let mut cpus: Vec<u32> = (0..preset.nr_cpus()).collect();
    let mut mem_node = None;
    let value = |i: usize, flag: &str| -> Result<&str> {
        words
            .get(i + 1)
            .copied()
            .ok_or_else(|| bad(command, format!("{flag} needs a value")))
    };
    if words.first() == Some(&"numactl") {
        i = 1;
        while i < words.len() && words[i].starts_with('-') {
            let (flag, inline) = match words[i].split_once('=') {
                Some((f, v)) => (f, Some(v)),
                None => (words[i], None),
            };
            let arg = match inline {
                Some(v) => v,
                None => {
                    i += 1;
                    value(i - 1, flag)?
                }
            };
            match flag {
                "-C" | "--physcpubind" => {
                    let set = CpuSet::parse_list(arg)
                        .filter(|s| !s.is_empty())
                        .ok_or_else(|| bad(command, format!("bad CPU list '{arg}'")))?;
                    if let Some(c) = set.0.iter().find(|c| **c >= preset.nr_cpus()) {
                        return Err(bad(
                            command,
                            format!("CPU {c} does not exist (0-{})", preset.nr_cpus() - 1),
                        ));
                    }
                    cpus = set.0.into_iter().collect();
                }
                "-N" | "--cpunodebind" => cpus = nodes_cpus(preset, arg, command)?,
                "-m" | "--membind" => {
                    let node: u32 = arg
                        .parse()
                        .map_err(|_| bad(command, format!("bad memory node '{arg}'")))?;
                    if node >= preset.nodes {
                        return Err(bad(
                            command,
                            format!("node {node} does not exist (0-{})", preset.nodes - 1),
                        ));
                    }
                    mem_node = Some(node);
                }
                other => return Err(bad(command, format!("unknown numactl option '{other}'"))),
            }
            i += 1;
        }
    }
    let program = words
        .get(i)
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .ok_or_else(|| bad(command, "no program"))?;
    let args = &words[i + 1..];
    let mut threads = 1u32;
    let mut positional = Vec::new();
    let mut flags: Vec<(&str, Option<&str>)> = Vec::new();
    let mut j = 0;
    while j < args.len() {
        let a = args[j];
        let takes_value = matches!(
            a,
            "-P" | "-N"
                | "-W"
                | "--cache"
                | "--threads"
                | "--working-set"
                | "--accesses-per-op"
                | "--compute-ns"
                | "--timeout"
                | "--cache-level"
        );
        if takes_value {
            let v = args
                .get(j + 1)
                .copied()
                .ok_or_else(|| bad(command, format!("{a} needs a value")))?;
            flags.push((a, Some(v)));
            j += 2;
        } else if a.starts_with('-') {
            flags.push((a, None));
            j += 1;
        } else {
            positional.push(a);
            j += 1;
        }
    }
    let flag = |name: &str| flags.iter().find(|(f, _)| *f == name).and_then(|(_, v)| *v);
    let count = |name: &str| -> Result<Option<u32>> {
        flag(name)
            .map(|v| {
                parse_in_range(
                    &format!("simulated command '{command}': {name}"),
                    v,
                    1..=MAX_THREADS,
                )
            })
            .transpose()
    };
    let number = |name: &str| -> Result<Option<f64>> {
        flag(name)
            .map(|v| {
                v.parse::<f64>()
                    .map_err(|_| bad(command, format!("{name} '{v}' is not a number")))
            })
            .transpose()
    };
    let size_arg = |text: &str| {
        crate::units::parse_size(text)
            .filter(|v| *v <= MAX_FOOTPRINT)
            .ok_or_else(|| bad(command, format!("bad size '{text}'")))
    };
    if let Some(p) = count("-P")? {
        threads = p;
    }
    let pattern = match program {
        "bw_mem" => {
            let [size, op] = positional[..] else {
                return Err(bad(command, "bw_mem takes SIZE and an operation"));
            };
            if op != "rd" {
                return Err(bad(
                    command,
                    format!("bw_mem operation '{op}' is not simulated (only rd)"),
                ));
            }
            Pattern::Stream {
                bytes: size_arg(size)?,
            }
        }
        "lat_mem_rd" => {
            let (size, stride) = match positional[..] {
                [size] => (size, "128"),
                [size, stride] => (size, stride),
                _ => return Err(bad(command, "lat_mem_rd takes SIZE [STRIDE]")),
            };
            let stride = size_arg(stride)?.max(1);
            Pattern::Chase {
                bytes: size_arg(size)?,
                stride,
            }
        }
        "stress-ng" => {
            threads = count("--cache")?
                .ok_or_else(|| bad(command, "only the --cache stressor is simulated"))?;
            Pattern::Thrash {
                bytes: preset.l3_bytes,
            }
        }
        "online-service" => {
            if let Some(t) = count("--threads")? {
                threads = t;
            }
            Pattern::Service {
                bytes: match flag("--working-set") {
                    Some(s) => size_arg(s)?,
                    None => 12 << 20,
                },
                accesses_per_op: in_range(
                    &format!("simulated command '{command}': --accesses-per-op"),
                    number("--accesses-per-op")?.unwrap_or(200.0),
                    1.0..=1e6,
                )?,
                compute_ns: in_range(
                    &format!("simulated command '{command}': --compute-ns"),
                    number("--compute-ns")?.unwrap_or(20_000.0),
                    0.0..=1e9,
                )?,
            }
        }
        other => return Err(bad(command, format!("unknown program '{other}'"))),
    };
    if threads == 0 {
        return Err(bad(command, "thread count must be at least 1"));
    }
    // stress-ng's cache workers call sched_setaffinity for the next allowed CPU after every
    // sweep of the buffer (stress-cache.c; `--cache-no-affinity` keeps them where they are), so
    // over a model step each worker has visited every allowed CPU, i.e. every L3 domain they span.
    let spread = program == "stress-ng" && !flags.iter().any(|(f, _)| *f == "--cache-no-affinity");
    let mlp = match pattern {
        Pattern::Stream { .. } => preset.core_outstanding,
        Pattern::Chase { .. } => 1.0,
        Pattern::Thrash { .. } => preset.core_outstanding / 2.0,
        Pattern::Service { .. } => 2.0,
    };
    Ok(Workload {
        command: command.to_string(),
        pattern,
        threads,
        cpus,
        spread,
        mem_node,
        mlp,
    })
}

/// The line addresses one thread generates, with set sampling: a footprint of `bytes` becomes
/// `bytes / sample` bytes, matching a cache built with `1 / sample` of the sets.
#[derive(Debug, Clone)]
pub struct AccessStream {
    base: u64,
    lines: u64,
    step: u64,
    pos: u64,
    random: bool,
    rng: u64,
}

impl AccessStream {
    /// `owner` (a process index below 4096) and `thread` (below 256) keep address spaces apart
    /// (private buffers get distinct bases); each space holds 2^28 lines (16 GiB), within the
    /// cache model's 48-bit line addresses.
    pub fn new(pattern: &Pattern, owner: u32, thread: u32, sample: u64) -> AccessStream {
        let (bytes, step, private, random) = match *pattern {
            Pattern::Stream { bytes } => (bytes, 1, true, false),
            Pattern::Chase { bytes, stride } => (bytes, (stride / 64).max(1), false, false),
            Pattern::Thrash { bytes } => (bytes, 1, false, false),
            Pattern::Service { bytes, .. } => (bytes, 1, false, true),
        };
        let lines = (bytes / 64 / step / sample.max(1)).clamp(1, (1 << 28) / step);
        let buffer = if private { thread as u64 & 0xff } else { 0 };
        let space = ((owner as u64 & 0xfff) << 36) | (buffer << 28);
        let rng = 0x9e37_79b9_7f4a_7c15 ^ ((owner as u64) << 16 | thread as u64);
        // stress-ng starts each cache worker at a random byte of the shared buffer
        // (`i = stress_mwc64modn(size)`), so concurrent sweeps are spread over it.
        let pos = match pattern {
            Pattern::Thrash { .. } => (rng.wrapping_mul(0xd6e8_feb8_6659_fd93) >> 32) % lines,
            _ => 0,
        };
        AccessStream {
            base: space,
            lines,
            step,
            pos,
            random,
            rng,
        }
    }

    /// The next cache line the stream touches.
    #[inline]
    pub fn next_line(&mut self) -> u64 {
        let index = if self.random {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            ((self.rng >> 32) * self.lines) >> 32
        } else {
            let i = self.pos;
            self.pos = if self.pos + 1 == self.lines {
                0
            } else {
                self.pos + 1
            };
            i
        };
        self.base + index * self.step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qos::presets::MPAM_SEED;

    #[test]
    fn seed_commands_parse_as_written() {
        let w = parse(
            "numactl -C 10 -m 0 ./lat_mem_rd -N 1 -P 1 145M 512",
            &MPAM_SEED,
        )
        .unwrap();
        assert_eq!(
            w.pattern,
            Pattern::Chase {
                bytes: 145 << 20,
                stride: 512
            }
        );
        assert_eq!(
            (w.threads, w.cpus.clone(), w.mem_node),
            (1, vec![10], Some(0))
        );
        let w = parse(
            "numactl -N 2 -m 2 ./bw_mem -P 16 -N 300 128M rd",
            &MPAM_SEED,
        )
        .unwrap();
        assert_eq!(w.threads, 16);
        assert_eq!((w.cpus[0], w.cpus.len()), (48, 24));
        let w = parse(
            "numactl -N 2 -m 2 stress-ng --cache 10 --aggressive",
            &MPAM_SEED,
        )
        .unwrap();
        assert_eq!(
            (w.threads, w.pattern.clone()),
            (10, Pattern::Thrash { bytes: 15 << 20 })
        );
        let w = parse("numactl -C 0-95 bw_mem -P 96 -N 10 124M rd", &MPAM_SEED).unwrap();
        assert_eq!((w.cpu_of_thread(95), w.mem_node), (95, None));
        for bad in [
            "bw_mem 1M wr",
            "numactl -C 200 bw_mem 1M rd",
            "fio x",
            "numactl -m 9 bw_mem 1M rd",
        ] {
            assert_eq!(parse(bad, &MPAM_SEED).unwrap_err().exit_code(), 2, "{bad}");
        }
    }

    #[test]
    fn stress_ng_workers_spread_over_every_allowed_cpu_unless_told_to_stay() {
        // stress-cache.c moves each worker to the next allowed CPU after every sweep: over a
        // step, 10 workers on all 96 CPUs are in every node, not on CPUs 0-9 of node 0.
        let w = parse("stress-ng --cache 10 --aggressive", &MPAM_SEED).unwrap();
        let nodes: Vec<u32> = (0..10)
            .map(|t| MPAM_SEED.node_of_cpu(w.cpu_of_thread(t)))
            .collect();
        assert_eq!(nodes, vec![0, 0, 0, 1, 1, 2, 2, 2, 3, 3]);
        let w = parse("numactl -N 2 stress-ng --cache 10", &MPAM_SEED).unwrap();
        assert!((0..10).all(|t| MPAM_SEED.node_of_cpu(w.cpu_of_thread(t)) == 2));
        let w = parse("stress-ng --cache 10 --cache-no-affinity", &MPAM_SEED).unwrap();
        assert_eq!(
            (0..10).map(|t| w.cpu_of_thread(t)).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        // Other programs keep filling CPUs from the first.
        let w = parse("bw_mem -P 10 1M rd", &MPAM_SEED).unwrap();
        assert_eq!(w.cpu_of_thread(9), 9);
    }

    #[test]
    fn stress_ng_sweeps_its_buffer_in_order_from_its_own_offset() {
        let pattern = Pattern::Thrash { bytes: 1 << 20 };
        let lines = (1u64 << 20) / 64;
        let starts: Vec<u64> = (0..4)
            .map(|t| {
                let mut s = AccessStream::new(&pattern, 3, t, 1);
                let first = s.next_line() - (3 << 36);
                // Every line of the buffer once, in order, before any line again.
                for k in 1..lines {
                    assert_eq!(s.next_line() - (3 << 36), (first + k) % lines);
                }
                assert_eq!(s.next_line() - (3 << 36), first);
                first
            })
            .collect();
        let mut distinct = starts.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "workers start apart: {starts:?}");
    }

    #[test]
    fn threads_share_a_buffer_but_not_a_sequence() {
        let pattern = Pattern::Thrash { bytes: 1 << 20 };
        let mut a = AccessStream::new(&pattern, 3, 0, 1);
        let mut b = AccessStream::new(&pattern, 3, 1, 1);
        let (xa, xb): (Vec<u64>, Vec<u64>) =
            (0..64).map(|_| (a.next_line(), b.next_line())).unzip();
        assert_ne!(xa, xb);
        let space = 3u64 << 36;
        assert!(xa
            .iter()
            .chain(&xb)
            .all(|l| (space..space + (1 << 14)).contains(l)));
    }

    #[test]
    fn chase_visits_every_stride_then_wraps() {
        let mut s = AccessStream::new(
            &Pattern::Chase {
                bytes: 4096,
                stride: 512,
            },
            1,
            0,
            1,
        );
        let lines: Vec<u64> = (0..9).map(|_| s.next_line() - (1 << 36)).collect();
        assert_eq!(lines, vec![0, 8, 16, 24, 32, 40, 48, 56, 0]);
    }
}
