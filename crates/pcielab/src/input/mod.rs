//! Bounds on what users hand pcielab, applied where the input enters: numbers checked against a
//! range that the message states, durations that must be finite and capped, file reads capped at
//! what the format needs (a missing or unreadable input file is bad input, exit 2), path parts
//! that must be one plain component, and writes that stay under the directory the user named
//! without following symlinks planted inside it, YAML with bounded depth ([`yaml`]), and standard
//! input with a size cap and an idle timeout.

use std::fmt::Display;
use std::fs::File;
use std::io::Read;
use std::ops::RangeInclusive;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::{Error, Result};

mod file_kind;
mod output;
mod stdin;

pub(crate) use file_kind::file_kind;
pub(crate) mod yaml;

// A size on the command line (`64K`), as a clap value parser; `units` reads every size.
pub use crate::units::positive_size_arg;
pub(crate) use output::write_new_file;
pub use output::{output_dir, output_target, write_output, write_stdout, OutputTarget};
pub(crate) use stdin::read_stdin;
pub(crate) use stdin::readable_within;
pub(crate) use stdin::{DEFAULT_STDIN_IDLE, STDIN_IDLE_ENV};

/// The largest text file pcielab reads as input (specs, plans, scenarios, job files, state).
pub(crate) const MAX_INPUT_FILE: u64 = 4 << 20;

/// The longest duration any command runs or simulates, in seconds (one week).
pub(crate) const MAX_DURATION_S: f64 = 7.0 * 24.0 * 3600.0;

/// `value` when it lies in `range`; otherwise bad input naming `what`, the value and the range.
pub(crate) fn in_range<T: PartialOrd + Display + Copy>(
    what: &str,
    value: T,
    range: RangeInclusive<T>,
) -> Result<T> {
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(Error::bad_input(format!(
            "{what}: {value} is out of range: expected {}..={}",
            range.start(),
            range.end()
        )))
    }
}

/// The idle timeout: [`STDIN_IDLE_ENV`] when set (whole seconds, 1 to 86400), else
/// [`DEFAULT_STDIN_IDLE`]. A value outside that range is bad input naming the variable.
pub(crate) fn stdin_idle_timeout() -> Result<std::time::Duration> {
    let Some(value) = std::env::var_os(STDIN_IDLE_ENV) else {
        return Ok(DEFAULT_STDIN_IDLE);
    };
    let text = value.to_string_lossy();
    let seconds: u64 = parse_in_range(STDIN_IDLE_ENV, text.trim(), 1..=86_400)?;
    Ok(std::time::Duration::from_secs(seconds))
}

/// Parse `text` as a number in `range`. The message for anything else (a negative number, one
/// too large for the type, not a number) states the valid range.
pub fn parse_in_range<T>(what: &str, text: &str, range: RangeInclusive<T>) -> Result<T>
where
    T: FromStr + PartialOrd + Display + Copy,
{
    let out_of_range = || {
        Error::bad_input(format!(
            "{what}: '{}' is not a number in {}..={}",
            cut_for_message(text),
            range.start(),
            range.end()
        ))
    };
    let value: T = text.trim().parse().map_err(|_| out_of_range())?;
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(out_of_range())
    }
}

/// The most of a user's text a message quotes back: enough to recognise it, not a screenful.
const MAX_QUOTED_CHARS: usize = 40;

/// `text` as a message quotes it: cut to [`MAX_QUOTED_CHARS`] with its length said, so a
/// 300-digit number does not fill the terminal.
pub(crate) fn cut_for_message(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_QUOTED_CHARS {
        text.to_string()
    } else {
        let head: String = text.chars().take(MAX_QUOTED_CHARS).collect();
        format!("{head}… ({count} characters)")
    }
}

/// A duration in seconds that is finite, not negative (or, with `positive`, above zero) and at
/// most `MAX_DURATION_S`.
pub(crate) fn duration_s(what: &str, value: f64, positive: bool) -> Result<f64> {
    let low_ok = if positive { value > 0.0 } else { value >= 0.0 };
    if value.is_finite() && low_ok && value <= MAX_DURATION_S {
        Ok(value)
    } else {
        Err(Error::bad_input(format!(
            "{what}: {} s is not a duration pcielab runs: expected a finite number of seconds {} 0 and at most {MAX_DURATION_S} (one week)",
            readable_f64(value),
            if positive { ">" } else { ">=" }
        )))
    }
}

/// `value` as a user would write it back: scientific notation when plain digits would run to
/// hundreds of characters (1e300, 1e-300), the plain number otherwise.
pub(crate) fn readable_f64(value: f64) -> String {
    if value != 0.0 && value.is_finite() && !(1e-6..1e15).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// A user's 64-bit number as u32 without truncation.
#[cfg(test)]
pub(crate) fn to_u32(what: &str, value: u64) -> Result<u32> {
    u32::try_from(value).map_err(|_| {
        Error::bad_input(format!(
            "{what}: {value} is out of range: expected 0..={}",
            u32::MAX
        ))
    })
}

/// Read at most `cap` bytes of `path` (a config space, a sysfs attribute, an input file). Only a
/// regular file (or a link to one) is read: a FIFO, socket or device found where a file should be
/// is refused before it is opened, so a planted FIFO cannot hang the reader and a device node is
/// never opened; the cap bounds a file that grows while it is read.
pub(crate) fn read_capped(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let file = open_regular(path)?;
    // Room for the file as it is now (and one byte to see its end), not twice it as growing
    // by doubling would keep.
    let size = file.metadata()?.len().min(cap);
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0).saturating_add(1));
    file.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `path` opened for reading when it is a regular file; otherwise an error saying what it is.
/// Checked before opening (opening a FIFO waits for a writer; opening some devices acts) and
/// again on the open file, in case it was swapped in between.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<File> {
    not_regular(&std::fs::metadata(path)?)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    not_regular(&file.metadata()?)?;
    Ok(file)
}

fn not_regular(meta: &std::fs::Metadata) -> std::io::Result<()> {
    if meta.is_file() {
        return Ok(());
    }
    let what = file_kind(meta.file_type());
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("is {what}, not a regular file; pcielab reads input only from regular files"),
    ))
}

/// Read a text file the user named as input (`what`: "plan", "scenario", …). Missing, unreadable,
/// a directory, larger than `MAX_INPUT_FILE` or not UTF-8 are all bad input (exit 2).
pub fn read_input_file(path: &Path, what: &str) -> Result<String> {
    let bad = |why: String| Error::bad_input(format!("{what} {}: {why}", path.display()));
    let bytes = read_capped(path, MAX_INPUT_FILE + 1).map_err(|e| bad(e.to_string()))?;
    input_text(bytes, bad)
}

/// The text of an input file read with a cap of `MAX_INPUT_FILE + 1` bytes: refused when it
/// reached the cap or is not UTF-8.
fn input_text(bytes: Vec<u8>, bad: impl Fn(String) -> Error) -> Result<String> {
    if bytes.len() as u64 > MAX_INPUT_FILE {
        return Err(bad(format!(
            "larger than {} MiB, the most pcielab reads as input",
            MAX_INPUT_FILE >> 20
        )));
    }
    String::from_utf8(bytes).map_err(|_| bad("not UTF-8 text".into()))
}

/// Read a file that decides what pcielab writes as root (the undo journal of `advise`), under
/// the rule OpenSSH's StrictModes applies to `authorized_keys`: a regular file (not a symlink,
/// FIFO or device), owned by the user running pcielab, writable by no one else (no group or
/// other write bit). Then as [`read_input_file`]: capped, UTF-8. Every refusal is bad input
/// naming the file and the rule it breaks. The checks are made on the opened file, so it cannot
/// be swapped between check and read.
pub(crate) fn read_private_file(path: &Path, what: &str) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let bad = |why: String| Error::bad_input(format!("{what} {}: {why}", path.display()));
    let link = std::fs::symlink_metadata(path).map_err(|e| bad(e.to_string()))?;
    if link.file_type().is_symlink() {
        return Err(bad(
            "is a symbolic link; name the file itself (pcielab does not follow a link to a file it acts on as root)".into(),
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| bad(e.to_string()))?;
    let meta = file.metadata().map_err(|e| bad(e.to_string()))?;
    if !meta.is_file() {
        return Err(bad(format!(
            "is {}, not a regular file",
            file_kind(meta.file_type())
        )));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    if meta.uid() != user {
        return Err(bad(format!(
            "is owned by uid {}, not by the user running pcielab (uid {user}); only a file you own is trusted",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(bad(format!(
            "mode {:04o} lets group or others write it; only a file no one else can write is trusted (chmod go-w)",
            meta.mode() & 0o7777
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    input_text(bytes, bad)
}

/// `value` when it is usable as one path component: not empty, not `.` or `..`, no `/` or NUL,
/// at most 255 bytes. Otherwise bad input naming `what`.
pub(crate) fn path_component<'a>(what: &str, value: &'a str) -> Result<&'a str> {
    let why = if value.is_empty() {
        Some("is empty")
    } else if value == "." || value == ".." {
        Some("is '.' or '..'")
    } else if value.contains('/') {
        Some("contains '/'")
    } else if value.contains('\0') {
        Some("contains a NUL byte")
    } else if value.len() > 255 {
        Some("is longer than 255 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(Error::bad_input(format!(
            "{what} '{}' {why}: expected one plain file name",
            crate::text::printable(value)
        ))),
        None => Ok(value),
    }
}

/// A directory tree under `root` that writes cannot leave: every part of a relative path is
/// checked with [`path_component`], and every directory on the way is opened with `O_NOFOLLOW`,
/// so a symlink planted inside the tree fails the write instead of redirecting it.
#[derive(Debug, Clone)]
pub(crate) struct ConfinedDir {
    root: PathBuf,
}

impl ConfinedDir {
    pub(crate) fn new(root: impl Into<PathBuf>) -> ConfinedDir {
        ConfinedDir { root: root.into() }
    }

    fn parts<'a>(&self, rel: &'a str) -> Result<Vec<&'a str>> {
        rel.split('/')
            .map(|p| path_component(&format!("path '{rel}' under {}", self.root.display()), p))
            .collect()
    }

    /// Open the directory `parts` names under the root, refusing symlinks at every step.
    fn open_dir(&self, parts: &[&str], create: bool) -> Result<File> {
        let mut dir = open_nofollow_dir(&self.root)?;
        let mut at = self.root.clone();
        for part in parts {
            at.push(part);
            if create {
                let c = cstring(part)?;
                // SAFETY: dir is an open directory descriptor and c a NUL-terminated name.
                let rc = unsafe {
                    libc::mkdirat(std::os::fd::AsRawFd::as_raw_fd(&dir), c.as_ptr(), 0o755)
                };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(Error::io(&at, e));
                    }
                }
            }
            dir = openat(
                &dir,
                part,
                libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_RDONLY,
                0,
            )
            .map_err(|e| refused_link(&at, e))?;
        }
        Ok(dir)
    }

    /// Create the directory `rel` (and its parents) under the root.
    pub(crate) fn create_dir_all(&self, rel: &str) -> Result<()> {
        let parts = self.parts(rel)?;
        self.open_dir(&parts, true).map(drop)
    }

    /// Create directory `rel` under the root, failing like mkdir(2) when it exists.
    pub(crate) fn create_dir(&self, rel: &str) -> std::io::Result<()> {
        let (parent, name) = self.split(rel).map_err(to_io)?;
        let dir = self.open_dir(&parent, false).map_err(to_io)?;
        let c = cstring(name).map_err(to_io)?;
        // SAFETY: as in open_dir.
        let rc = unsafe { libc::mkdirat(std::os::fd::AsRawFd::as_raw_fd(&dir), c.as_ptr(), 0o755) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Remove directory `rel` under the root, like rmdir(2).
    pub(crate) fn remove_dir(&self, rel: &str) -> std::io::Result<()> {
        let (parent, name) = self.split(rel).map_err(to_io)?;
        let dir = self.open_dir(&parent, false).map_err(to_io)?;
        let c = cstring(name).map_err(to_io)?;
        // SAFETY: as in open_dir.
        let rc = unsafe {
            libc::unlinkat(
                std::os::fd::AsRawFd::as_raw_fd(&dir),
                c.as_ptr(),
                libc::AT_REMOVEDIR,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Write `bytes` to file `rel` under the root in one write(2) (as `echo … >` does: opened
    /// with O_TRUNC), creating it when `create`, never through a symlink.
    pub(crate) fn write(&self, rel: &str, bytes: &[u8], create: bool) -> std::io::Result<()> {
        let (parent, name) = self.split(rel).map_err(to_io)?;
        let dir = self.open_dir(&parent, false).map_err(to_io)?;
        write_at(&dir, name, bytes, create)
    }

    /// The directory `rel` under the root, opened once (refusing symlinks on the way) so that
    /// many files can be written into it without walking the path again for each.
    pub(crate) fn open(&self, rel: &str) -> Result<OpenedDir> {
        let parts = self.parts(rel)?;
        Ok(OpenedDir {
            dir: self.open_dir(&parts, false)?,
            path: self.root.join(rel),
        })
    }

    /// Make `rel` under the root a symlink to `target` (which is stored, not followed).
    pub(crate) fn symlink(&self, target: &str, rel: &str) -> Result<()> {
        let (parent, name) = self.split(rel)?;
        let dir = self.open_dir(&parent, false)?;
        let (t, c) = (cstring(target)?, cstring(name)?);
        // SAFETY: dir is an open directory; both strings are NUL-terminated.
        let rc = unsafe {
            libc::symlinkat(
                t.as_ptr(),
                std::os::fd::AsRawFd::as_raw_fd(&dir),
                c.as_ptr(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::io(
                self.root.join(rel),
                std::io::Error::last_os_error(),
            ))
        }
    }

    fn split<'a>(&self, rel: &'a str) -> Result<(Vec<&'a str>, &'a str)> {
        let mut parts = self.parts(rel)?;
        let name = parts.pop().expect("split yields at least one part");
        Ok((parts, name))
    }
}

/// A directory of a [`ConfinedDir`] held open: files are created in it by name, never through a
/// symlink.
pub(crate) struct OpenedDir {
    dir: File,
    path: PathBuf,
}

impl OpenedDir {
    /// Writes the new file `name` (one plain component) here, as a pcielab error naming the path.
    pub(crate) fn create_file(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let at = self.path.join(name);
        path_component(&format!("file name under {}", self.path.display()), name)?;
        write_at(&self.dir, name, bytes, true).map_err(|e| Error::io(&at, e))
    }
}

/// Writes `bytes` to `name` in `dir` in one write(2) (as `echo … >` does: opened with O_TRUNC),
/// creating it when `create`, never through a symlink.
fn write_at(dir: &File, name: &str, bytes: &[u8], create: bool) -> std::io::Result<()> {
    let flags =
        libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_TRUNC | if create { libc::O_CREAT } else { 0 };
    let mut file = openat(dir, name, flags, 0o644)?;
    // One write: resctrl parses each write on its own.
    let written = std::io::Write::write(&mut file, bytes)?;
    if written != bytes.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::WriteZero,
            format!("short write: {written} of {} bytes", bytes.len()),
        ));
    }
    Ok(())
}

fn to_io(e: Error) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.message().to_string())
}

fn refused_link(at: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
        Error::bad_input(format!(
            "{}: is a symlink or not a directory; pcielab does not follow links inside the tree it writes",
            at.display()
        ))
    } else {
        Error::io(at, e)
    }
}

fn cstring(part: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(part).map_err(|_| {
        Error::bad_input(format!(
            "'{}' contains a NUL byte",
            crate::text::printable(part)
        ))
    })
}

fn open_nofollow_dir(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

fn openat(dir: &File, name: &str, flags: i32, mode: libc::mode_t) -> std::io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    let c = cstring(name).map_err(to_io)?;
    // SAFETY: dir is an open directory, c is NUL-terminated; on success we own the new fd.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        // SAFETY: fd was just returned by openat and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }
}

/// The build's `target/tmp` (what integration tests get as `CARGO_TARGET_TMPDIR`), made if
/// missing: for unit tests whose files must outlive a run (extracted sources) or need a real
/// filesystem (a shared mapping, which a tmpfs /tmp may not allow). A unit-test binary is
/// `target/<profile>/deps/NAME`.
#[cfg(test)]
pub(crate) fn target_tmp() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.ancestors().nth(3).unwrap().join("tmp");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_named_in_messages() {
        assert_eq!(in_range("--gen", 3u8, 1..=7).unwrap(), 3);
        let e = parse_in_range::<u8>("--gen", "99999999999999999999", 1..=7).unwrap_err();
        assert!(e.to_string().contains("1..=7"), "{e}");
        let e = parse_in_range::<u64>("-I", "-1", 1..=3_600_000).unwrap_err();
        assert!(
            e.to_string()
                .contains("'-1' is not a number in 1..=3600000"),
            "{e}"
        );
        assert_eq!(to_u32("tasks", 4294967297).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn durations_are_finite_and_capped() {
        for bad in [f64::INFINITY, f64::NAN, 1e300, -5.0] {
            assert!(duration_s("measure_s", bad, false).is_err(), "{bad}");
        }
        assert!(duration_s("step_s", 0.0, true).is_err());
        assert_eq!(duration_s("measure_s", 2.5, true).unwrap(), 2.5);
        let huge = duration_s("measure_s", 1e300, true)
            .unwrap_err()
            .to_string();
        assert!(huge.contains("measure_s: 1e300 s is not"), "{huge}");
        let tiny = duration_s("step_s", -1e-300, true).unwrap_err().to_string();
        assert!(tiny.contains("step_s: -1e-300 s is not"), "{tiny}");
        let plain = duration_s("sleep", 1e6, true).unwrap_err().to_string();
        assert!(plain.contains("sleep: 1000000 s is not"), "{plain}");
    }

    #[test]
    fn only_regular_files_are_read_and_streams_never_hang() {
        let e = read_capped(Path::new("/dev/zero"), 4096).unwrap_err();
        assert!(e.to_string().contains("is a character device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = read_input_file(dir.path(), "plan").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("is a directory"), "{e}");
        let e = read_input_file(&dir.path().join("missing"), "plan").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        // A FIFO nobody writes: opening it for reading would wait forever.
        let fifo = dir.path().join("label");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (sent, got) = std::sync::mpsc::channel();
        std::thread::spawn(move || sent.send(read_input_file(&fifo, "plan")));
        let e = got
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO returned")
            .unwrap_err();
        assert!(e.to_string().contains("label: is a FIFO"), "{e}");
        let linked = dir.path().join("linked");
        std::fs::write(dir.path().join("real"), "text").unwrap();
        std::os::unix::fs::symlink("real", &linked).unwrap();
        assert_eq!(read_input_file(&linked, "plan").unwrap(), "text");
        let grown = dir.path().join("big");
        std::fs::write(&grown, vec![b'a'; 10_000]).unwrap();
        assert_eq!(read_capped(&grown, 4096).unwrap().len(), 4096);
    }

    #[test]
    fn components_reject_traversal() {
        for bad in ["", ".", "..", "a/b", "../../x", "/abs", "a\0b"] {
            assert!(path_component("driver", bad).is_err(), "{bad:?}");
        }
        assert_eq!(path_component("driver", "nvme").unwrap(), "nvme");
    }

    #[test]
    fn confined_writes_refuse_planted_symlinks() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("g")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), dir.path().join("f")).unwrap();
        let tree = ConfinedDir::new(dir.path());
        assert!(tree.write("g/schemata", b"x", true).is_err());
        assert!(tree.write("f", b"x", true).is_err());
        assert!(tree.write("../escape", b"x", true).is_err());
        assert!(tree.create_dir_all("g/sub").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        tree.create_dir_all("a/b").unwrap();
        tree.write("a/b/c", b"hello", true).unwrap();
        assert_eq!(std::fs::read(dir.path().join("a/b/c")).unwrap(), b"hello");
        let opened = tree.open("a/b").unwrap();
        opened.create_file("d", b"held").unwrap();
        assert_eq!(std::fs::read(dir.path().join("a/b/d")).unwrap(), b"held");
        assert!(opened.create_file("../up", b"x").is_err());
        assert!(tree.open("g").is_err());
        std::os::unix::fs::symlink(outside.path().join("e"), dir.path().join("a/b/e")).unwrap();
        assert!(opened.create_file("e", b"x").is_err());
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        tree.create_dir("a/d").unwrap();
        assert!(tree.create_dir("a/d").is_err());
        tree.remove_dir("a/d").unwrap();
    }
}
