//! Boots a QEMU guest and follows it through its phases on the serial console: boot, guest
//! script, results, shutdown. Its timeout follows progress, not the wall clock: every console
//! line and phase is progress; while booting (a quiet kernel prints little) the guest fails only
//! after QEMU itself has used `timeout` seconds of CPU since the last line, so a boot slowed by a
//! loaded machine is not cut short; in the later phases `timeout` seconds without a line end
//! it (a hung script uses no CPU). A guest that prints forever is stopped at
//! `RUN_CAP_FACTOR` × `timeout`. It recognises a kernel panic, unpacks the
//! results the guest sends back, and always ends the QEMU process it started. Every failure names
//! the phase and carries the guest's last console lines.

use std::collections::VecDeque;
use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::argv::QemuPlan;
use super::guest::{
    decode_base64, find_tool, phase_error, MARK_EXIT, MARK_MONITOR, MARK_RESULTS_BEGIN,
    MARK_RESULTS_END, MARK_SCRIPT,
};
use crate::error::{Error, Result};
use crate::observe::cost::process_cpu_time;

/// A run ends at this many timeouts after QEMU started even while the guest keeps printing.
pub(crate) const RUN_CAP_FACTOR: u32 = 10;

/// How many console lines a failure report shows.
const TAIL_LINES: usize = 25;

/// The longest console line taken whole; a guest printing without newlines arrives in pieces.
const MAX_LINE_BYTES: usize = 64 << 10;

/// The most console text a run keeps (for `console.log`); the failure tail is kept apart.
const MAX_CONSOLE_BYTES: usize = 16 << 20;

/// The most base64 text of `/results` a guest may send back.
const MAX_RESULTS_BASE64: usize = 512 << 20;

/// Hands each line of `reader` (without its `\n` or `\r\n`, at most [`MAX_LINE_BYTES`]) to
/// `line` until the stream ends or `line` returns false.
fn console_lines(mut reader: impl BufRead, mut line: impl FnMut(String) -> bool) {
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut reader)
            .take(MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        let text = String::from_utf8_lossy(&buf)
            .trim_end_matches('\r')
            .to_string();
        if !line(text) {
            break;
        }
    }
}

/// The phases of a lab run, in order, as the progress display names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Making the run directory and checking the tools.
    Prepare,
    /// Downloading or building the guest kernel.
    FetchKernel,
    /// Building the initramfs and disk images.
    GuestImage,
    /// QEMU start to the guest's `/init`.
    Boot,
    /// The guest script running.
    GuestScript,
    /// Copying the guest's results out.
    Results,
    /// The guest powering off and QEMU exiting.
    Shutdown,
}

impl Phase {
    /// The phase as timeouts and errors name it.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prepare => "prepare",
            Phase::FetchKernel => "fetch-kernel",
            Phase::GuestImage => "guest-image",
            Phase::Boot => "boot",
            Phase::GuestScript => "guest-script",
            Phase::Results => "results",
            Phase::Shutdown => "shutdown",
        }
    }
}

/// What a finished boot produced.
#[derive(Debug)]
pub(crate) struct BootOutcome {
    /// The guest script's exit status.
    pub(crate) script_status: i32,
    /// QEMU start to the guest's exit marker.
    pub(crate) boot_to_result: Duration,
    /// QEMU start to the guest's `/init` starting the script.
    pub(crate) boot: Duration,
    pub(crate) console: Vec<String>,
}

/// Boots `plan` with `kernel` and `initrd`, waits while the guest makes progress (at most
/// `timeout` without a console line, `RUN_CAP_FACTOR` × `timeout` in all), and unpacks the guest's
/// `/results` into `results_dir`. `progress` is told each phase as the guest reaches it. With
/// `monitor` (a socket path), QEMU's human monitor listens there and each guest console line
/// `@@pcielab monitor COMMAND` is sent to it; the reply joins the console as `[monitor] …` lines.
pub(crate) fn boot(
    plan: &QemuPlan,
    kernel: &Path,
    initrd: &Path,
    monitor: Option<&Path>,
    timeout: Duration,
    results_dir: &Path,
    progress: &mut dyn FnMut(Phase),
) -> Result<BootOutcome> {
    let qemu = find_tool(&plan.argv[0], "qemu-system-x86", Phase::Boot.name())?;
    let mut command = Command::new(qemu);
    command
        .args(&plan.argv[1..])
        .args(["-serial", "stdio", "-no-reboot", "-kernel"])
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(&plan.kernel_cmdline)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(socket) = monitor {
        command
            .arg("-monitor")
            .arg(format!("unix:{},server=on,wait=off", socket.display()));
    }
    progress(Phase::Boot);
    let started = Instant::now();
    let child = command
        .spawn()
        .map_err(|e| phase_error(Phase::Boot.name(), format!("cannot start QEMU: {e}")))?;
    let mut guard = QemuGuard(child);
    let stdout = guard.0.stdout.take().expect("piped");
    let mut stderr = guard.0.stderr.take().expect("piped");
    let (lines_tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        console_lines(BufReader::new(stdout), |line| lines_tx.send(line).is_ok());
    });
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let cap = started + timeout * RUN_CAP_FACTOR;
    let mut last_progress = started;
    let mut cpu_at_progress = Duration::ZERO;
    let mut console: Vec<String> = Vec::new();
    let mut tail: VecDeque<String> = VecDeque::new();
    let mut phase = Phase::Boot;
    let mut boot_time = None;
    let mut results_b64: Option<String> = None;
    let (mut console_bytes, mut console_cut) = (0usize, false);
    let mut collecting = false;
    let mut panic_line: Option<String> = None;
    let mut panic_grace = None;
    let fail = |phase: Phase, what: String, tail: &VecDeque<String>| {
        let mut shown: Vec<&str> = tail.iter().map(String::as_str).collect();
        if shown.is_empty() {
            shown.push("(the guest printed nothing yet)");
        }
        phase_error(
            phase.name(),
            format!(
                "{what}\n--- last guest console lines ---\n{}",
                shown.join("\n")
            ),
        )
    };
    let script_status = loop {
        let now = Instant::now();
        if let Some(grace) = panic_grace {
            if now >= grace {
                let line = panic_line.clone().unwrap_or_default();
                return Err(fail(phase, format!("guest kernel panic: {line}"), &tail));
            }
        }
        let qemu_cpu_since_progress =
            process_cpu_time(guard.0.id()).map(|cpu| cpu.saturating_sub(cpu_at_progress));
        let deadline = if stalled(phase, now - last_progress, qemu_cpu_since_progress, timeout) {
            now
        } else {
            cap.min(now + POLL)
        };
        if now >= deadline {
            let what = if deadline == cap {
                format!(
                    "guest did not finish within {} s ({RUN_CAP_FACTOR} x the {} s timeout) although it kept printing; QEMU was stopped",
                    (timeout * RUN_CAP_FACTOR).as_secs_f64(),
                    timeout.as_secs_f64()
                )
            } else {
                format!(
                    "guest made no progress for {} s (timeout; no console output in phase '{}', QEMU busy or idle); QEMU was stopped",
                    timeout.as_secs_f64(),
                    phase.name()
                )
            };
            return Err(fail(phase, what, &tail));
        }
        let wait = panic_grace.unwrap_or(deadline).min(deadline).max(now) - now;
        let line = match lines.recv_timeout(wait) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = guard.0.wait().ok();
                let qemu_err = stderr_reader.join().unwrap_or_default();
                let what = match &panic_line {
                    Some(line) => format!("guest kernel panic: {line}"),
                    None => format!(
                        "QEMU exited ({}) before the guest finished{}",
                        status.map_or("unknown status".into(), |s| s.to_string()),
                        if qemu_err.trim().is_empty() {
                            String::new()
                        } else {
                            format!(": {}", qemu_err.trim())
                        }
                    ),
                };
                return Err(fail(phase, what, &tail));
            }
        };
        last_progress = Instant::now();
        cpu_at_progress = process_cpu_time(guard.0.id()).unwrap_or_default();
        if collecting {
            if line == MARK_RESULTS_END {
                collecting = false;
            } else {
                let encoded = results_b64.get_or_insert_with(String::new);
                if encoded.len() + line.len() > MAX_RESULTS_BASE64 {
                    return Err(fail(
                        phase,
                        format!(
                            "the guest's results are over {} MiB of base64; keep /results smaller",
                            MAX_RESULTS_BASE64 >> 20
                        ),
                        &tail,
                    ));
                }
                encoded.push_str(line.trim());
            }
            continue;
        }
        if console_bytes + line.len() <= MAX_CONSOLE_BYTES {
            console_bytes += line.len() + 1;
            console.push(line.clone());
        } else if !console_cut {
            console_cut = true;
            console.push(format!(
                "[pcielab: console cut here: more than {} MiB]",
                MAX_CONSOLE_BYTES >> 20
            ));
        }
        tail.push_back(line.clone());
        if tail.len() > TAIL_LINES {
            tail.pop_front();
        }
        if line.contains("Kernel panic - not syncing") && panic_line.is_none() {
            panic_line = Some(line.clone());
            // Let the trace that follows reach the console before stopping QEMU.
            panic_grace = Some(Instant::now() + Duration::from_millis(500));
        } else if line == MARK_SCRIPT {
            boot_time = Some(started.elapsed());
            phase = Phase::GuestScript;
            progress(phase);
        } else if line == MARK_RESULTS_BEGIN {
            phase = Phase::Results;
            progress(phase);
            collecting = true;
        } else if let Some(status) = line.strip_prefix(MARK_EXIT) {
            break status.trim().parse::<i32>().unwrap_or(-1);
        } else if let (Some(command), Some(socket)) = (line.strip_prefix(MARK_MONITOR), monitor) {
            let reply = monitor_command(socket, command.trim()).unwrap_or_else(|e| e.to_string());
            for reply_line in reply.lines().filter(|l| !l.trim().is_empty()) {
                console.push(format!("[monitor] {reply_line}"));
            }
        }
    };
    let boot_to_result = started.elapsed();
    progress(Phase::Shutdown);
    guard.finish(Duration::from_secs(5));

    let Some(encoded) = results_b64 else {
        return Err(fail(
            Phase::Results,
            "the guest sent no results".into(),
            &tail,
        ));
    };
    unpack_results(&encoded, results_dir)?;
    Ok(BootOutcome {
        script_status,
        boot_to_result,
        boot: boot_time.unwrap_or(boot_to_result),
        console,
    })
}

/// Sends one command to QEMU's human monitor at `socket` and returns its reply: the text after
/// the echoed command line, up to the next `(qemu) ` prompt, with terminal escapes removed.
fn monitor_command(socket: &Path, command: &str) -> Result<String> {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    const PROMPT: &[u8] = b"(qemu) ";
    let failed =
        |e: std::io::Error| Error::runtime(format!("QEMU monitor {}: {e}", socket.display()));
    let mut stream = UnixStream::connect(socket).map_err(failed)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(failed)?;
    let until_prompt = |stream: &mut UnixStream| -> Result<Vec<u8>> {
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        while !got.ends_with(PROMPT) {
            let n = stream.read(&mut chunk).map_err(failed)?;
            if n == 0 || got.len() > 1 << 20 {
                break;
            }
            got.extend_from_slice(&chunk[..n]);
        }
        Ok(got)
    };
    until_prompt(&mut stream)?;
    stream
        .write_all(format!("{command}\n").as_bytes())
        .map_err(failed)?;
    let reply = until_prompt(&mut stream)?;
    let text = strip_escapes(&String::from_utf8_lossy(&reply));
    // The monitor echoes the command as it is typed; the reply starts on the next line.
    let body = text.split_once('\n').map_or("", |(_, rest)| rest);
    Ok(body.trim_end_matches("(qemu) ").trim().to_string())
}

/// `text` without ANSI escape sequences (ESC `[` parameters, final letter).
fn strip_escapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c != '\r' {
            out.push(c);
        }
    }
    out
}

fn unpack_results(encoded: &str, results_dir: &Path) -> Result<()> {
    let archive = decode_base64(encoded)?;
    fs::create_dir_all(results_dir).map_err(|e| Error::io(results_dir, e))?;
    let tarball = results_dir.join(".results.tar.gz");
    fs::write(&tarball, archive).map_err(|e| Error::io(&tarball, e))?;
    let status = Command::new(find_tool("tar", "tar", Phase::Results.name())?)
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(results_dir)
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| phase_error(Phase::Results.name(), format!("tar: {e}")))?;
    let _ = fs::remove_file(&tarball);
    if !status.status.success() {
        return Err(phase_error(
            Phase::Results.name(),
            format!(
                "unpacking the guest's results failed: {}",
                String::from_utf8_lossy(&status.stderr).trim()
            ),
        ));
    }
    Ok(())
}

/// Whether a guest that printed nothing for `idle` has stopped making progress. While booting
/// (a quiet kernel prints little) idle time counts only as far as QEMU got CPU time to boot
/// with, so a machine too loaded to run QEMU does not fail the boot; without that figure, and
/// in every later phase (a hung guest script uses no CPU), `timeout` of silence is a stall.
fn stalled(
    phase: Phase,
    idle: Duration,
    qemu_cpu_since_progress: Option<Duration>,
    timeout: Duration,
) -> bool {
    idle >= timeout
        && match phase {
            Phase::Boot => qemu_cpu_since_progress.is_none_or(|cpu| cpu >= timeout),
            _ => true,
        }
}

/// How often a quiet guest's progress is looked at.
const POLL: Duration = Duration::from_millis(500);

struct QemuGuard(Child);

impl QemuGuard {
    /// Waits up to `grace` for QEMU to power off by itself, then kills it.
    fn finish(&mut self, grace: Duration) {
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for QemuGuard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Creates the sparse backing files the plan's drives need.
pub(crate) fn create_disks(plan: &QemuPlan) -> Result<()> {
    for disk in &plan.disks {
        let file = fs::File::create(&disk.path).map_err(|e| Error::io(&disk.path, e))?;
        file.set_len(disk.size_mib << 20)
            .map_err(|e| Error::io(&disk.path, e))?;
    }
    Ok(())
}

/// A fresh run directory under the cache: `runs/<unix-time>-<pid>`.
pub(crate) fn new_run_dir(cache: &Path) -> Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let dir = cache
        .join("runs")
        .join(format!("{stamp}-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monitor_echo_escapes_are_removed() {
        let echoed = "p\x1b[K\x1b[Dpc\x1b[K\x1b[D\x1b[Dpcie\r\nOK id: rp\r\n(qemu) ";
        assert_eq!(strip_escapes(echoed), "ppcpcie\nOK id: rp\n(qemu) ");
    }

    #[test]
    fn console_lines_are_split_at_newlines_and_cut_at_the_line_cap() {
        let long = "x".repeat(MAX_LINE_BYTES * 2 + 5);
        let text = format!("boot\r\nscript\n{long}\nend");
        let mut lines = Vec::new();
        console_lines(std::io::Cursor::new(text), |l| {
            lines.push(l);
            true
        });
        let lengths: Vec<usize> = lines.iter().map(String::len).collect();
        assert_eq!(lengths, [4, 6, MAX_LINE_BYTES, MAX_LINE_BYTES, 5, 3]);
        assert_eq!((lines[0].as_str(), lines[5].as_str()), ("boot", "end"));
        let mut first = Vec::new();
        console_lines(std::io::Cursor::new("a\nb\n"), |l| {
            first.push(l);
            false
        });
        assert_eq!(first, ["a"]);
    }

    #[test]
    fn a_boot_stalls_on_qemu_cpu_time_and_later_phases_on_silence() {
        let s = Duration::from_secs;
        // Nine guests on two cores: 60 s without a line but QEMU ran only 8 s of it.
        assert!(!stalled(Phase::Boot, s(60), Some(s(8)), s(25)));
        assert!(stalled(Phase::Boot, s(60), Some(s(25)), s(25)));
        assert!(!stalled(Phase::Boot, s(24), Some(s(24)), s(25)));
        // QEMU's CPU time unreadable: the wall clock decides.
        assert!(stalled(Phase::Boot, s(25), None, s(25)));
        // A hung guest script uses no CPU: silence alone ends it.
        assert!(stalled(Phase::GuestScript, s(25), Some(s(0)), s(25)));
        assert!(!stalled(Phase::GuestScript, s(24), None, s(25)));
    }

    #[test]
    fn cpu_time_is_read_from_proc_and_grows_with_work() {
        let pid = std::process::id();
        let before = process_cpu_time(pid).unwrap();
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let after = process_cpu_time(pid).unwrap();
        assert!(after > before, "{before:?} -> {after:?}");
        assert!(process_cpu_time(u32::MAX).is_none());
    }
}
