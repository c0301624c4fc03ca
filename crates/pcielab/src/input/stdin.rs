//! Standard input read as a bounded input file: refused when it is a directory or a device
//! (other than a terminal, where a listing is pasted), read up to a size cap, and given up when
//! no byte arrives for an idle timeout, so a pipe whose writer never closes it (`sleep 40 |
//! pcielab …`) ends with a message instead of a hang.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::error::{Error, Result};

/// The environment variable that sets the idle timeout, in seconds.
pub(crate) const STDIN_IDLE_ENV: &str = "PCIELAB_STDIN_IDLE_S";

/// How long standard input may stay silent (no byte, not closed) before the read gives up.
pub(crate) const DEFAULT_STDIN_IDLE: Duration = Duration::from_secs(30);

/// All of standard input, `what` naming it in messages, refusing more than `max_bytes` and an
/// input silent for `idle`.
pub(crate) fn read_stdin(what: &str, max_bytes: u64, idle: Duration) -> Result<Vec<u8>> {
    let stdin = std::io::stdin();
    let fd = stdin.as_raw_fd();
    refuse_special(what, fd)?;
    let limits = format!(
        "pcielab reads at most {} MiB from standard input and waits at most {} s for each \
         byte (set {STDIN_IDLE_ENV} to change the wait)",
        max_bytes >> 20,
        idle.as_secs()
    );
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut input = stdin.lock();
    loop {
        if !readable_within(fd, idle).map_err(|e| Error::runtime(format!("{what}: {e}")))? {
            return Err(Error::bad_input(format!(
                "{what}: no byte arrived for {} s and the input was not closed; {limits}",
                idle.as_secs()
            )));
        }
        let n = match input.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::runtime(format!("{what}: {e}"))),
        };
        if (bytes.len() + n) as u64 > max_bytes {
            return Err(Error::bad_input(format!(
                "{what}: more than {} MiB; {limits}",
                max_bytes >> 20
            )));
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
}

/// A directory or a device other than a terminal is no input (`< /`, `< /dev/sda`).
fn refuse_special(what: &str, fd: i32) -> Result<()> {
    // SAFETY: fstat writes into a zeroed stat of the right type for a valid descriptor.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut stat) } != 0 {
        return Err(Error::runtime(format!(
            "{what}: {}",
            std::io::Error::last_os_error()
        )));
    }
    let kind = stat.st_mode & libc::S_IFMT;
    // SAFETY: isatty only inspects the descriptor.
    let terminal = unsafe { libc::isatty(fd) } == 1;
    let refused = match kind {
        libc::S_IFDIR => Some("a directory"),
        libc::S_IFBLK => Some("a block device"),
        libc::S_IFCHR if !terminal => Some("a character device"),
        libc::S_IFSOCK | libc::S_IFREG | libc::S_IFIFO | libc::S_IFCHR => None,
        _ => Some("a special file"),
    };
    match refused {
        Some(kind) => Err(Error::bad_input(format!(
            "{what} is {kind}; give the output as a file, a pipe or a paste into the terminal"
        ))),
        None => Ok(()),
    }
}

/// Whether `fd` has a byte (or its end) to read within `idle`.
pub(crate) fn readable_within(fd: i32, idle: Duration) -> std::io::Result<bool> {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let timeout = i32::try_from(idle.as_millis()).unwrap_or(i32::MAX);
    loop {
        // SAFETY: one valid pollfd, counted as 1.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout) };
        if ready >= 0 {
            return Ok(ready > 0);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
