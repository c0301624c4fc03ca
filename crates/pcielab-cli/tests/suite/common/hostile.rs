//! Running the real binary on hostile input (shared by robust.rs and robust_io.rs, included with
//! `#[path]`): its address space capped at 1 GiB and a hang deadline, with the exit code and both
//! streams kept for the test to judge.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A hang fails the test: far above the < 2 s every case takes on an idle machine, so a loaded
/// CI machine does not fail it, while an input that never ends still does.
// Each including test file is its own crate; those that time nothing themselves leave it unused.
pub const HANG: Duration = Duration::from_secs(20);

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run_in(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pcielab"));
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; it only caps the child's address space.
    unsafe {
        cmd.pre_exec(|| {
            let cap = libc::rlimit {
                rlim_cur: 1 << 30,
                rlim_max: 1 << 30,
            };
            libc::setrlimit(libc::RLIMIT_AS, &cap);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    // Drained while it runs, so a large output cannot fill the pipe and stall the child.
    let drain = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > HANG {
            child.kill().unwrap();
            panic!("pcielab {args:?} hung for {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    Run {
        code,
        stdout,
        stderr,
    }
}

/// Run and demand exit code `code` with `needle` in stderr.
pub fn expect(dir: &Path, args: &[&str], code: i32, needle: &str) -> Run {
    let r = run_in(dir, args);
    assert_eq!(r.code, code, "pcielab {args:?}\nstderr: {}", r.stderr);
    assert!(
        r.stderr.contains(needle),
        "pcielab {args:?}: stderr lacks {needle:?}:\n{}",
        r.stderr
    );
    r
}
