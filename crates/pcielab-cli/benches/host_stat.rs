//! Overhead of `pcielab stat --machine host` against `perf stat` on the same events and
//! workload, run alternately so both see the same machine state. Prints the median wall time
//! and CPU time (user + system of the tool and its workload, from getrusage of children) of
//! each, and their ratios (goal: <= 1.0 for both). Needs perf and permission to count
//! system-wide (root in CI).

use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 21;
const EVENTS: &[&str] = &[
    "-e",
    "msr/tsc/",
    "-e",
    "cpu-clock",
    "-e",
    "context-switches",
    "-e",
    "syscalls:sys_enter_getpid",
];

fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn measure(program: &str, args: &[&str]) -> (Duration, Duration) {
    let cpu = children_cpu();
    let start = Instant::now();
    let out = Command::new(program)
        .args(args)
        .output()
        .expect("run the tool");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, children_cpu() - cpu)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let pcielab = env!("CARGO_BIN_EXE_pcielab");
    for workload in [&["true"][..], &["sleep", "0.2"][..]] {
        let mut ours_args = vec!["stat", "-a", "-x,"];
        ours_args.extend(EVENTS);
        ours_args.push("--");
        ours_args.extend(workload);
        let mut perf_args = vec!["stat", "-a", "-x,"];
        perf_args.extend(EVENTS);
        perf_args.push("--");
        perf_args.extend(workload);
        let (mut ours, mut perf) = ((vec![], vec![]), (vec![], vec![]));
        for _ in 0..ROUNDS {
            let (w, c) = measure(pcielab, &ours_args);
            ours.0.push(w);
            ours.1.push(c);
            let (w, c) = measure("perf", &perf_args);
            perf.0.push(w);
            perf.1.push(c);
        }
        let (ow, oc, pw, pc) = (
            median(ours.0),
            median(ours.1),
            median(perf.0),
            median(perf.1),
        );
        println!(
            "host stat, workload `{}`, {ROUNDS} alternate rounds: pcielab wall {:.2} ms cpu {:.2} ms | perf wall {:.2} ms cpu {:.2} ms | ratio wall {:.2} cpu {:.2}",
            workload.join(" "),
            ow.as_secs_f64() * 1e3,
            oc.as_secs_f64() * 1e3,
            pw.as_secs_f64() * 1e3,
            pc.as_secs_f64() * 1e3,
            ow.as_secs_f64() / pw.as_secs_f64(),
            oc.as_secs_f64() / pc.as_secs_f64().max(1e-9),
        );
    }
}
