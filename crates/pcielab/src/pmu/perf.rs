//! Counting on a live host through `perf_event_open`, the way `perf stat` does it. With `-a`
//! each encoded event is opened system-wide on its PMU's `cpumask` CPUs (every online CPU for
//! core, software and tracepoint events, summed as perf sums them) and enabled around a real
//! workload (spawned after enabling, waited for, then disabled); without, on the workload alone:
//! it is forked and held before `exec` while its counters are opened on it (following its
//! threads and children, enabled by its `exec`), as `perf stat -- cmd` counts a command. Groups
//! share a leader and read with `GROUP | ID`, every read carries `TOTAL_TIME_ENABLED |
//! TOTAL_TIME_RUNNING`; Ctrl-C reaches the workload and the counts still come back; counters
//! are read every `-I` interval and, for narrow counters the driver does not extend, often
//! enough to carry their wrap.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use perf_event_open_sys as sys;
use sys::bindings::{
    perf_event_attr, PERF_ATTR_SIZE_VER7, PERF_ATTR_SIZE_VER8, PERF_FLAG_FD_CLOEXEC,
    PERF_FORMAT_GROUP, PERF_FORMAT_ID, PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING, PERF_IOC_FLAG_GROUP,
};

use crate::error::{Error, Result};
use crate::linux::low_bits_mask;
use crate::pmu::event::EventAttr;
use crate::pmu::session::{Counts, Reading};
use crate::pmu::sysfs::perf_event_paranoid;

/// Turning a whole group on or off at its leader.
#[derive(Debug, Clone, Copy)]
enum Switch {
    Enable,
    Disable,
}

/// What a group's counters follow: every task on one CPU, or one task (and the threads and
/// children it starts) on whatever CPU it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Cpu(u32),
    Task(libc::pid_t),
}

impl Target {
    /// `(pid, cpu)` as perf_event_open takes them.
    fn pid_cpu(self) -> (libc::pid_t, libc::c_int) {
        match self {
            Target::Cpu(cpu) => (-1, cpu as libc::c_int),
            Target::Task(pid) => (pid, -1),
        }
    }

    fn describe(self) -> String {
        match self {
            Target::Cpu(cpu) => format!("CPU {cpu}"),
            Target::Task(pid) => format!("the workload (pid {pid})"),
        }
    }
}

fn perf_event_open(
    attr: &perf_event_attr,
    target: Target,
    group_fd: i32,
) -> std::io::Result<OwnedFd> {
    let mut attr = *attr;
    let (pid, cpu) = target.pid_cpu();
    // SAFETY: `attr` is a valid perf_event_attr of the size it declares; the kernel only reads it.
    let fd = unsafe {
        sys::perf_event_open(
            &mut attr,
            pid,
            cpu,
            group_fd,
            libc::c_ulong::from(PERF_FLAG_FD_CLOEXEC),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn switch(fd: &OwnedFd, to: Switch) -> Result<()> {
    // SAFETY: a perf event fd and one of its argument-less ioctls, applied to its group.
    let done = unsafe {
        match to {
            Switch::Enable => sys::ioctls::ENABLE(fd.as_raw_fd(), PERF_IOC_FLAG_GROUP),
            Switch::Disable => sys::ioctls::DISABLE(fd.as_raw_fd(), PERF_IOC_FLAG_GROUP),
        }
    };
    if done < 0 {
        return Err(Error::runtime(format!(
            "perf event ioctl {to:?} failed: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn read_words(fd: &OwnedFd, words: &mut [u64]) -> Result<()> {
    let bytes = std::mem::size_of_val(words);
    // SAFETY: reading at most `bytes` into the buffer `words` owns.
    let n = unsafe { libc::read(fd.as_raw_fd(), words.as_mut_ptr().cast(), bytes) };
    if n < 0 || n as usize != bytes {
        return Err(Error::runtime(format!(
            "reading a perf counter returned {n} of {bytes} bytes: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// perf's own message for a refused open: what perf_event_paranoid allows and the capability
/// that lifts it.
pub(crate) fn permission_message(root: &Path, event: &str, err: &std::io::Error) -> String {
    let paranoid = perf_event_paranoid(root).map_or("unknown".to_string(), |p| p.to_string());
    format!(
        "opening '{event}' failed: {err}. Access to performance monitoring is limited: \
         /proc/sys/kernel/perf_event_paranoid is {paranoid} (system-wide counting needs <= 0, \
         or -1 for tracepoints/raw events), and this process lacks CAP_PERFMON (or \
         CAP_SYS_ADMIN). Run as root, grant CAP_PERFMON (setcap cap_perfmon+ep on the binary), \
         or lower it: sysctl kernel.perf_event_paranoid=0"
    )
}

/// Carries a narrow counter's wraps: each read adds the change modulo `2^bits`, which is right
/// as long as the counter wrapped at most once between reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrapCarry {
    bits: u32,
    last_raw: u64,
    total: u64,
}

impl WrapCarry {
    pub(crate) fn new(bits: u32) -> WrapCarry {
        WrapCarry {
            bits,
            last_raw: 0,
            total: 0,
        }
    }

    /// Folds in a new raw reading and returns the carried total.
    pub(crate) fn update(&mut self, raw: u64) -> u64 {
        self.total += raw.wrapping_sub(self.last_raw) & low_bits_mask(self.bits);
        self.last_raw = raw;
        self.total
    }
}

/// One group opened on one CPU.
struct GroupOnCpu {
    leader: OwnedFd,
    /// Held open for the run: closing a member would take it out of the group.
    _members: Vec<OwnedFd>,
}

/// One event group opened on all its CPUs, or the reason it could not be.
struct OpenGroup {
    /// Index of the group's first event in the flattened event list.
    first: usize,
    len: usize,
    cpus: Vec<GroupOnCpu>,
    carries: Vec<Vec<Option<WrapCarry>>>,
    not_supported: Option<String>,
}

/// Counters opened for a list of groups.
pub(crate) struct OpenCounters {
    groups: Vec<OpenGroup>,
    events: usize,
    /// Events (flattened) counting the workload's user space only: the kernel refused them
    /// with kernel time included, as perf_event_paranoid 2 does for a user (perf's `:u`).
    pub(crate) user_only: Vec<usize>,
}

/// What one `stat` run on the host returns.
pub(crate) struct HostRun {
    pub(crate) counts: Counts,
    /// Per event (flattened): why it could not be opened (perf's `<not supported>`).
    pub(crate) not_supported: Vec<Option<String>>,
    /// The workload's exit status as a shell reports it (128 + signal when killed).
    pub(crate) exit_code: i32,
    /// Whether Ctrl-C ended the run.
    pub(crate) interrupted: bool,
}

fn attr_for(event: &EventAttr, leader: bool, grouped: bool, task: bool) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: event.type_id,
        // config3 arrived with the VER8 layout; an older kernel refuses a size it does not know.
        size: if event.config[3] != 0 {
            PERF_ATTR_SIZE_VER8
        } else {
            PERF_ATTR_SIZE_VER7
        },
        config: event.config[0],
        config3: event.config[3],
        read_format: u64::from(PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING),
        ..perf_event_attr::default()
    };
    attr.__bindgen_anon_3.config1 = event.config[1];
    attr.__bindgen_anon_4.config2 = event.config[2];
    attr.set_inherit(1);
    if grouped {
        attr.read_format |= u64::from(PERF_FORMAT_GROUP | PERF_FORMAT_ID);
    }
    if leader {
        attr.set_disabled(1);
        // A task's counters start at its exec, so pcielab's fork and wait are not counted.
        attr.set_enable_on_exec(u64::from(task));
    }
    attr
}

/// Opens every group on `task` when given (the held workload), else on its CPUs (`online`
/// for events without a cpumask). Events the kernel does not support come back as
/// `<not supported>` with the reason; a refused permission, a PMU that vanished since
/// discovery, or any other failure is an error naming the event.
pub(crate) fn open_counters(
    root: &Path,
    groups: &[Vec<EventAttr>],
    online: &[u32],
    task: Option<libc::pid_t>,
) -> Result<OpenCounters> {
    let mut opened = Vec::new();
    let mut user_only = Vec::new();
    let mut first = 0;
    for group in groups {
        let leader = &group[0];
        let cpus = if leader.cpus.is_empty() {
            online
        } else {
            &leader.cpus
        };
        let targets: Vec<Target> = match task {
            Some(pid) => vec![Target::Task(pid)],
            None => cpus.iter().map(|&cpu| Target::Cpu(cpu)).collect(),
        };
        let grouped = group.len() > 1;
        let mut open = OpenGroup {
            first,
            len: group.len(),
            cpus: Vec::new(),
            carries: group
                .iter()
                .map(|e| {
                    targets
                        .iter()
                        .map(|_| e.counter_bits.map(WrapCarry::new))
                        .collect()
                })
                .collect(),
            not_supported: None,
        };
        'cpus: for &target in &targets {
            let mut fds: Vec<OwnedFd> = Vec::new();
            for (i, event) in group.iter().enumerate() {
                let mut attr = attr_for(event, i == 0, grouped, task.is_some());
                let group_fd = fds.first().map_or(-1, |f| f.as_raw_fd());
                let mut result = perf_event_open(&attr, target, group_fd);
                let refused = |r: &std::io::Result<OwnedFd>| {
                    let code = r.as_ref().err().and_then(std::io::Error::raw_os_error);
                    matches!(code, Some(libc::EACCES | libc::EPERM))
                };
                if task.is_some() && refused(&result) {
                    // As perf stat falls back when perf_event_paranoid bars a user from
                    // kernel counts: the command's user-space part alone.
                    attr.set_exclude_kernel(1);
                    attr.set_exclude_hv(1);
                    result = perf_event_open(&attr, target, group_fd);
                    if result.is_ok() {
                        user_only.push(first + i);
                    }
                }
                match result {
                    Ok(fd) => fds.push(fd),
                    Err(err) => {
                        open.not_supported = Some(open_failure(root, event, target, &err)?);
                        open.cpus.clear();
                        break 'cpus;
                    }
                }
            }
            let leader = fds.remove(0);
            open.cpus.push(GroupOnCpu {
                leader,
                _members: fds,
            });
        }
        first += group.len();
        opened.push(open);
    }
    Ok(OpenCounters {
        groups: opened,
        events: first,
        user_only,
    })
}

/// Decides whether a failed open is perf's `<not supported>` (returned) or an error.
fn open_failure(
    root: &Path,
    event: &EventAttr,
    target: Target,
    err: &std::io::Error,
) -> Result<String> {
    let on = target.describe();
    let code = err.raw_os_error().unwrap_or(0);
    if code == libc::EACCES || code == libc::EPERM {
        return Err(Error::runtime(permission_message(root, &event.text, err)));
    }
    if let Some(dir) = &event.pmu_dir {
        if !dir.join("type").exists() {
            return Err(Error::runtime(format!(
                "opening '{}' failed: the PMU {} is gone ({} no longer exists: its driver was \
                 unbound or the device removed after discovery); run `pcielab pmu list --machine \
                 host` to see the PMUs there are now",
                event.text,
                event.pmu,
                dir.display()
            )));
        }
    }
    let why = match code {
        libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL => format!(
            "the kernel refused type {} config {:#x} on {on} ({err}): the PMU does not \
             support this event or these terms",
            event.type_id, event.config[0]
        ),
        libc::ENOSPC | libc::EBUSY => format!(
            "no free counter on {on} ({err}): another user holds it, or the group needs \
             more counters than the PMU has"
        ),
        libc::ENODEV => format!("{on} is offline or the PMU has no counter there ({err})"),
        _ => {
            return Err(Error::runtime(format!(
                "opening '{}' on {on} failed: {err}",
                event.text
            )))
        }
    };
    Ok(why)
}

impl OpenCounters {
    fn for_each_leader(&self, to: Switch) -> Result<()> {
        for group in &self.groups {
            for on_cpu in &group.cpus {
                switch(&on_cpu.leader, to)?;
            }
        }
        Ok(())
    }

    /// Starts every opened group counting (they open disabled).
    pub(crate) fn enable(&self) -> Result<()> {
        self.for_each_leader(Switch::Enable)
    }

    /// Reads every event, summed over its CPUs, wraps carried.
    pub(crate) fn read(&mut self) -> Result<Vec<Reading>> {
        let mut out = vec![Reading::default(); self.events];
        for group in &mut self.groups {
            for (c, on_cpu) in group.cpus.iter().enumerate() {
                let values = read_group(on_cpu, group.len)?;
                for (i, (value, enabled, running)) in values.into_iter().enumerate() {
                    let value = match &mut group.carries[i][c] {
                        Some(carry) => carry.update(value),
                        None => value,
                    };
                    let r = &mut out[group.first + i];
                    r.value += value;
                    r.enabled_ns += enabled;
                    r.running_ns += running;
                }
            }
        }
        Ok(out)
    }

    /// Per event (flattened): why it could not be opened (perf's `<not supported>`).
    pub(crate) fn not_supported(&self) -> Vec<Option<String>> {
        let mut out = vec![None; self.events];
        for group in &self.groups {
            for slot in &mut out[group.first..group.first + group.len] {
                slot.clone_from(&group.not_supported);
            }
        }
        out
    }
}

/// `(value, enabled, running)` of each event of a group on one CPU.
fn read_group(on_cpu: &GroupOnCpu, len: usize) -> Result<Vec<(u64, u64, u64)>> {
    if len == 1 {
        let mut words = [0u64; 3];
        read_words(&on_cpu.leader, &mut words)?;
        return Ok(vec![(words[0], words[1], words[2])]);
    }
    // GROUP | ID: nr, enabled, running, then (value, id) per event in group order.
    let mut words = vec![0u64; 3 + 2 * len];
    read_words(&on_cpu.leader, &mut words)?;
    Ok((0..len)
        .map(|i| (words[3 + 2 * i], words[1], words[2]))
        .collect())
}

/// A workload forked and held before its `exec` until its counters are open on it, as
/// `perf stat -- cmd` holds the command, so it is counted from its first instruction and not
/// before (pcielab's own fork and wait stay uncounted: the counters are enabled by the exec).
pub(crate) struct HeldWorkload {
    pid: libc::pid_t,
    /// A byte written here lets the child exec; closed unwritten, the child exits 127.
    go: Option<OwnedFd>,
}

impl HeldWorkload {
    /// Forks `argv` (its program found as a shell finds it) and holds it before `exec`.
    pub(crate) fn fork(argv: &[String]) -> Result<HeldWorkload> {
        let program = argv.first().ok_or_else(|| {
            Error::bad_input("no workload: give one after `--` (e.g. -- sleep 1)")
        })?;
        let path = crate::linux::find_program(program).ok_or_else(|| {
            Error::runtime(format!(
                "workload '{program}' not found (not a file, and not in PATH)"
            ))
        })?;
        let c_string = |bytes: &[u8]| {
            CString::new(bytes).map_err(|_| {
                Error::bad_input(format!(
                    "workload argument '{}' holds a NUL byte, which no program can receive",
                    String::from_utf8_lossy(bytes)
                ))
            })
        };
        let c_path = c_string(path.as_os_str().as_bytes())?;
        let c_args = argv
            .iter()
            .map(|a| c_string(a.as_bytes()))
            .collect::<Result<Vec<CString>>>()?;
        let mut c_argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
        c_argv.push(std::ptr::null());
        let mut ends = [0; 2];
        // SAFETY: pipe2 fills the two-element array it is given.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(Error::runtime(format!(
                "cannot make a pipe to hold the workload: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: pipe2 returned two new descriptors that nothing else owns.
        let (wait_end, go) =
            unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
        // SAFETY: between fork and exec the child only calls async-signal-safe functions
        // (close, read, sigprocmask, signal, execv, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::runtime(format!(
                "cannot fork the workload: {}",
                std::io::Error::last_os_error()
            )));
        }
        if pid == 0 {
            // SAFETY: see the fork above; the child never returns from this block.
            unsafe {
                libc::close(go.as_raw_fd());
                let mut byte = 0u8;
                loop {
                    let n = libc::read(wait_end.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                    if n == 1 {
                        // As std's Command does: the program gets an empty signal mask and
                        // SIGPIPE's default action (Rust ignores it in pcielab itself).
                        let mut empty: libc::sigset_t = std::mem::zeroed();
                        libc::sigemptyset(&mut empty);
                        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
                        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
                        libc::execv(c_path.as_ptr(), c_argv.as_ptr());
                        break;
                    }
                    if n == 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                libc::_exit(127);
            }
        }
        drop(wait_end);
        Ok(HeldWorkload { pid, go: Some(go) })
    }

    pub(crate) fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Lets the workload exec; returns its pid, for [`wait_pid`].
    fn release(mut self) -> Result<libc::pid_t> {
        let go = self.go.take().expect("a held workload is released once");
        // SAFETY: writing one byte from a local to the pipe's write end.
        let n = unsafe { libc::write(go.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
        if n != 1 {
            return Err(Error::runtime(format!(
                "cannot release the held workload: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(self.pid)
    }
}

impl Drop for HeldWorkload {
    /// Never released (its counters failed to open): the child exits 127 unexecuted, and is
    /// reaped so no zombie is left.
    fn drop(&mut self) {
        if self.go.take().is_some() {
            let _ = wait_pid(self.pid);
        }
    }
}

/// Waits for child `pid` to end.
fn wait_pid(pid: libc::pid_t) -> std::io::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let mut status = 0;
    loop {
        // SAFETY: waiting on our own child with a local status word.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(std::process::ExitStatus::from_raw(status));
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// How often to read so that no narrow counter wraps twice between reads.
pub(crate) struct ReadPlan {
    pub(crate) interval: Option<Duration>,
    /// Read at least this often to carry narrow counters' wraps.
    pub(crate) wrap_period: Option<Duration>,
}

/// Runs `argv` to its end (or Ctrl-C) with `counters` counting, reads every interval and at
/// the end, and returns the counts with the workload's exit status. System-wide counters are
/// enabled before the workload is spawned; counters opened on `held` (the workload itself,
/// forked before they were opened) are enabled by its exec. `interrupt` is the caller's SIGINT
/// flag: the library installs no signal handler of its own (a process's signals belong to its
/// program), it only reports whether the flag was raised while the workload ran.
pub(crate) fn run_workload(
    mut counters: OpenCounters,
    argv: &[String],
    held: Option<HeldWorkload>,
    plan: &ReadPlan,
    interrupt: Option<&AtomicBool>,
) -> Result<HostRun> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| Error::bad_input("no workload: give one after `--` (e.g. -- sleep 1)"))?;
    if let Some(flag) = interrupt {
        flag.store(false, Ordering::SeqCst);
    }
    let start = Instant::now();
    let (sender, receiver) = mpsc::channel();
    let counting_a_task = held.is_some();
    let waiter = match held {
        Some(held) => {
            let pid = held.release()?;
            std::thread::spawn(move || {
                let status = wait_pid(pid);
                let _ = sender.send(());
                status
            })
        }
        None => {
            counters.for_each_leader(Switch::Enable)?;
            let mut child = match Command::new(program).args(args).spawn() {
                Ok(child) => child,
                Err(e) => {
                    counters.for_each_leader(Switch::Disable)?;
                    return Err(Error::runtime(format!(
                        "workload '{program}' failed to start: {e}"
                    )));
                }
            };
            std::thread::spawn(move || {
                let status = child.wait();
                let _ = sender.send(());
                status
            })
        }
    };
    let mut counts = Counts::default();
    let tick = match (plan.interval, plan.wrap_period) {
        (Some(i), Some(w)) => Some(i.min(w)),
        (i, w) => i.or(w),
    };
    let mut next_print = plan.interval.map(|i| start + i);
    loop {
        let done = match tick {
            None => {
                // Nothing to read before the end: block until the workload exits.
                let _ = receiver.recv();
                true
            }
            Some(tick) => {
                let now = Instant::now();
                let deadline = next_print.map_or(now + tick, |p| p.min(now + tick));
                let wait = deadline.saturating_duration_since(now);
                !matches!(
                    receiver.recv_timeout(wait),
                    Err(mpsc::RecvTimeoutError::Timeout)
                )
            }
        };
        if done {
            break;
        }
        let readings = counters.read()?;
        if let (Some(print), Some(interval)) = (next_print, plan.interval) {
            if Instant::now() >= print {
                counts
                    .intervals
                    .push((start.elapsed().as_nanos() as u64, readings));
                next_print = Some(print + interval);
            }
        }
    }
    if !counting_a_task {
        // A task's counters stopped with it.
        counters.for_each_leader(Switch::Disable)?;
    }
    counts.elapsed_ns = start.elapsed().as_nanos() as u64;
    let status = waiter
        .join()
        .map_err(|_| Error::runtime("the workload waiter thread panicked"))?
        .map_err(|e| Error::runtime(format!("waiting for workload '{program}': {e}")))?;
    counts.totals = counters.read()?;
    if plan.interval.is_some() {
        counts
            .intervals
            .push((counts.elapsed_ns, counts.totals.clone()));
    }
    use std::os::unix::process::ExitStatusExt;
    let exit_code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    Ok(HostRun {
        not_supported: counters.not_supported(),
        counts,
        exit_code,
        interrupted: interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes the kernel reads, at the offsets of include/uapi/linux/perf_event.h: type 0,
    /// size 4, config 8, read_format 32, the flag bits at 40 (disabled bit 0, inherit bit 1),
    /// config1 56, config2 64, config3 128.
    #[test]
    fn attrs_put_each_field_where_the_kernel_reads_it() {
        let event = EventAttr {
            text: "dwc_rootport_10/eventid=0x21/".into(),
            pmu: "dwc_rootport_10".into(),
            type_id: 11,
            config: [0x21, 0x3, 0x5, 0x7],
            scale: 1.0,
            unit: String::new(),
            cpus: Vec::new(),
            pmu_dir: None,
            payload_bytes: None,
            counter_bits: None,
            dwc_group: None,
        };
        let attr = attr_for(&event, true, true, false);
        // SAFETY: viewing a plain-old-data struct as the bytes the syscall passes.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                (&attr as *const perf_event_attr).cast::<u8>(),
                std::mem::size_of::<perf_event_attr>(),
            )
        };
        let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        let half = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((half(0), half(4)), (11, 136));
        assert_eq!(word(8), 0x21);
        assert_eq!(
            word(32),
            0b1111,
            "TOTAL_TIME_ENABLED | RUNNING | ID | GROUP"
        );
        assert_eq!(word(40), 0b11, "disabled | inherit");
        assert_eq!((word(56), word(64), word(128)), (0x3, 0x5, 0x7));
        let member = attr_for(
            &EventAttr {
                config: [1, 0, 0, 0],
                ..event.clone()
            },
            false,
            false,
            false,
        );
        assert_eq!(member.size, 128);
        assert_eq!(member.read_format, 0b11);
        assert_eq!((member.disabled(), member.inherit()), (0, 1));
        // Counting a task: its leader waits for the exec (enable_on_exec, bit 12 of the flags
        // in include/uapi/linux/perf_event.h), the members follow the leader.
        let leader = attr_for(&event, true, true, true);
        // SAFETY: as above.
        let flags = unsafe {
            *(&leader as *const perf_event_attr)
                .cast::<u8>()
                .add(40)
                .cast::<u64>()
        };
        assert_eq!(
            flags, 0b1_0000_0000_0011,
            "disabled | inherit | enable_on_exec"
        );
        assert_eq!(attr_for(&event, false, true, true).enable_on_exec(), 0);
    }

    #[test]
    fn wraps_are_carried_between_reads() {
        let mut c = WrapCarry::new(32);
        assert_eq!(c.update(4_000_000_000), 4_000_000_000);
        // Wrapped once: 4.0e9 -> 2^32 + 100.
        assert_eq!(c.update(100), (1u64 << 32) + 100);
        assert_eq!(c.update(100), (1u64 << 32) + 100);
        // A driver that already extends (64-bit monotonic values) gives the same totals.
        let mut wide = WrapCarry::new(32);
        wide.update(4_000_000_000);
        assert_eq!(wide.update((1u64 << 32) + 100), (1u64 << 32) + 100);
    }

    #[test]
    fn a_pmu_removed_after_discovery_is_a_runtime_error_naming_it() {
        use crate::pmu::event::EventContext;
        use crate::pmu::sysfs::{discover, EVENT_SOURCE_DIR};
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(EVENT_SOURCE_DIR).join("dwc_rootport_10");
        std::fs::create_dir_all(dir.join("format")).unwrap();
        std::fs::write(dir.join("type"), "4000000\n").unwrap();
        std::fs::write(dir.join("cpumask"), "0\n").unwrap();
        std::fs::write(dir.join("format/eventid"), "config:0-15\n").unwrap();
        let pmus = discover(root.path()).unwrap();
        let context = EventContext {
            pmus: &pmus,
            root: root.path(),
        };
        let groups = context
            .encode_list("dwc_rootport_10/eventid=0x21/")
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let err = open_counters(root.path(), &groups, &[0], None)
            .err()
            .unwrap();
        assert_eq!(err.exit_code(), 1);
        assert!(err.message().contains("dwc_rootport_10 is gone"), "{err}");
    }
}
