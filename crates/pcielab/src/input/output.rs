//! The one policy for every file pcielab writes (`-o`, `--svg`, `fit --out`, state files), so
//! that no writer replaces something it should not:
//!
//! - `-`, and a path that names this process's standard output (`/dev/stdout`), go to stdout;
//! - a regular file, or a path that does not exist yet, is written whole into a new file beside
//!   it and renamed over it, so a failed write leaves the old file (or nothing) behind;
//! - a character device (`/dev/null`, a terminal) or a FIFO is opened and written in place, as
//!   any Unix tool does; it is never replaced by a regular file;
//! - a symlink is followed once: its target must lie in the link's own directory (a link planted
//!   to point elsewhere is refused, never followed out), and the target is what gets written;
//!   the link itself stays;
//! - a read-only file, a directory, a block device or a socket is refused (bad input, exit 2).

use std::fs::{File, Metadata};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::error::{Error, Result};

/// Where [`write_output`] puts the bytes for a path, decided before anything is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputTarget {
    /// This process's standard output.
    Stdout,
    /// A character device or FIFO, opened and written in place.
    Stream(PathBuf),
    /// A regular file (new or replaced whole); `mode` is the permission bits to keep.
    File {
        /// The file.
        path: PathBuf,
        /// Permission bits the replaced file had, given to the new one.
        mode: Option<u32>,
    },
}

/// Writes `bytes` to `path` under the policy above. Refusals are bad input naming the path and
/// why; failing I/O (a full disk, `/dev/full`) is a runtime error naming it.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    match output_target(path)? {
        OutputTarget::Stdout => write_stdout(bytes),
        OutputTarget::Stream(at) => write_stream(&at, bytes),
        OutputTarget::File { path: at, mode } => replace_whole(&at, bytes, mode),
    }
}

/// Writes `bytes` to standard output. A failed write (a full disk, `/dev/full`, a closed pipe
/// when SIGPIPE is ignored) is a runtime error, never a panic as `print!` would make it.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io("standard output", e))
}

/// Writes `bytes` into `path` as a new file with permission bits `mode`, for a record that must
/// never replace another (the undo journal of `advise --apply`): anything already at `path` (a
/// file, a link, even a dangling one, `/dev/null`, a FIFO) is refused as bad input; the file is
/// created exclusively and never through a link, and removed again if the write fails, so no
/// half-written file is left.
pub(crate) fn write_new_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        return Err(Error::bad_input(format!(
            "{} already exists ({}); pcielab never replaces it: name a new file",
            path.display(),
            super::file_kind::file_kind(meta.file_type())
        )));
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
        .mode(mode)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Error::bad_input(format!(
                "{} already exists; pcielab never replaces it: name a new file",
                path.display()
            )),
            _ => Error::io(path, e),
        })?;
    let written = file
        .set_permissions(std::fs::Permissions::from_mode(mode))
        .and_then(|()| file.write_all(bytes))
        .and_then(|()| file.sync_all());
    written.map_err(|e| {
        let _ = std::fs::remove_file(path);
        Error::io(path, e)
    })
}

/// How `path` would be written, or why it is refused.
pub fn output_target(path: &Path) -> Result<OutputTarget> {
    if path.as_os_str() == "-" || names_stdout(path) {
        return Ok(OutputTarget::Stdout);
    }
    let refuse = |why: &str| {
        Error::bad_input(format!(
            "output {}: {why}; name a regular file, a new path, a device such as /dev/null, a FIFO or '-'",
            path.display()
        ))
    };
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = directory_of(path);
            if !parent.is_dir() {
                return Err(refuse(&format!(
                    "its directory {} does not exist",
                    parent.display()
                )));
            }
            return Ok(OutputTarget::File {
                path: path.to_path_buf(),
                mode: None,
            });
        }
        Err(e) => return Err(Error::io(path, e)),
    };
    if meta.file_type().is_symlink() {
        return through_link(path);
    }
    existing_target(path, &meta).map_err(|why| refuse(&why))
}

/// The target of an existing non-link `path`, or why it cannot be an output.
fn existing_target(path: &Path, meta: &Metadata) -> std::result::Result<OutputTarget, String> {
    let kind = meta.file_type();
    if kind.is_char_device() || kind.is_fifo() {
        Ok(OutputTarget::Stream(path.to_path_buf()))
    } else if kind.is_file() {
        let mode = meta.permissions().mode();
        // No write bit at all: read-only by intent, even for root, who could replace it.
        if mode & 0o222 == 0 || !writable(path) {
            Err("is a read-only file; pcielab does not replace it".into())
        } else {
            Ok(OutputTarget::File {
                path: path.to_path_buf(),
                mode: Some(mode & 0o7777),
            })
        }
    } else if kind.is_dir() {
        Err("is a directory".into())
    } else if kind.is_block_device() {
        Err("is a block device; pcielab never writes one".into())
    } else {
        Err(format!("is {}", super::file_kind::file_kind(kind)))
    }
}

/// A symlink output: followed once; the target must be in the link's directory (or be a device
/// or FIFO, written in place wherever it lives).
fn through_link(link: &Path) -> Result<OutputTarget> {
    let refuse = |why: String| {
        Error::bad_input(format!(
            "output {} is a symlink {why}; pcielab follows an output link only to a file in the same directory",
            link.display()
        ))
    };
    let target = std::fs::read_link(link).map_err(|e| Error::io(link, e))?;
    let resolved = directory_of(link).join(&target);
    if let Ok(meta) = std::fs::metadata(link) {
        let kind = meta.file_type();
        if kind.is_char_device() || kind.is_fifo() {
            return Ok(OutputTarget::Stream(link.to_path_buf()));
        }
    }
    match std::fs::symlink_metadata(&resolved) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(refuse(format!("to {}, itself a symlink", target.display())))
        }
        Ok(_) | Err(_) => {}
    }
    let link_dir = canonical_dir(&directory_of(link))?;
    let target_dir = canonical_dir(&directory_of(&resolved)).map_err(|_| {
        refuse(format!(
            "to {}, whose directory does not exist",
            target.display()
        ))
    })?;
    if link_dir != target_dir {
        return Err(refuse(format!(
            "to {}, outside {}",
            target.display(),
            link_dir.display()
        )));
    }
    match std::fs::symlink_metadata(&resolved) {
        Ok(meta) => existing_target(&resolved, &meta)
            .map_err(|why| refuse(format!("to {}, which {why}", target.display()))),
        Err(_) => Ok(OutputTarget::File {
            path: resolved,
            mode: None,
        }),
    }
}

/// Checks `dir`, the directory a tree is written into (`snapshot`, `--sysfs-export`), under the
/// same policy: a new path (created with its parents) or a writable directory; a symlink is
/// followed once, only to a directory beside it; a directory without write bits, a file, a
/// device, a FIFO or a socket is refused (bad input, exit 2). Returns the directory to write.
pub fn output_dir(dir: &Path) -> Result<PathBuf> {
    let refuse = |why: String| {
        Error::bad_input(format!(
            "output directory {}: {why}; name a new or empty directory",
            dir.display()
        ))
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dir.to_path_buf()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let (at, meta) = if meta.file_type().is_symlink() {
        let target = std::fs::read_link(dir).map_err(|e| Error::io(dir, e))?;
        let resolved = directory_of(dir).join(&target);
        let meta = std::fs::symlink_metadata(&resolved).map_err(|_| {
            refuse(format!(
                "is a symlink to {}, which does not exist",
                target.display()
            ))
        })?;
        let beside = canonical_dir(&directory_of(dir))?;
        if meta.file_type().is_symlink() || canonical_dir(&directory_of(&resolved))? != beside {
            return Err(refuse(format!(
                "is a symlink to {}, outside {} (pcielab follows an output link only to a \
                 directory beside it)",
                target.display(),
                beside.display()
            )));
        }
        (resolved, meta)
    } else {
        (dir.to_path_buf(), meta)
    };
    let kind = meta.file_type();
    if !kind.is_dir() {
        return Err(refuse(format!(
            "is {}, not a directory",
            super::file_kind::file_kind(kind)
        )));
    }
    // No write bit at all: read-only by intent, even for root, as for a file.
    if meta.permissions().mode() & 0o222 == 0 || !writable(&at) {
        return Err(refuse("is a read-only directory".into()));
    }
    Ok(at)
}

/// `/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1` (or a link to one of them, as `/dev/stdout`
/// is): this process's standard output, however the shell set it up (terminal, pipe, file).
fn names_stdout(path: &Path) -> bool {
    let is_fd1 = |p: &Path| {
        matches!(
            p.to_str(),
            Some("/dev/stdout" | "/dev/fd/1" | "/proc/self/fd/1")
        )
    };
    is_fd1(path)
        || std::fs::read_link(path)
            .map(|t| is_fd1(&directory_of(path).join(t)))
            .unwrap_or(false)
}

/// The directory a path's last component lives in (`.` for a bare name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn canonical_dir(dir: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))
}

fn writable(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: c is a NUL-terminated path; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// A device or FIFO written in place. Opened without blocking so a FIFO nobody reads is an error
/// at once rather than a hang; then written with ordinary blocking writes.
fn write_stream(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ENXIO) {
                Error::runtime(format!(
                    "{}: a FIFO with no process reading it",
                    path.display()
                ))
            } else {
                Error::io(path, e)
            }
        })?;
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    if meta.file_type().is_file() {
        // Swapped for a regular file since it was checked: not written through a stale decision.
        return Err(Error::runtime(format!(
            "{}: changed from a device to a regular file while being opened",
            path.display()
        )));
    }
    set_blocking(&file).map_err(|e| Error::io(path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.flush())
        .map_err(|e| Error::io(path, e))
}

fn set_blocking(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fd is open for the life of `file`; F_GETFL/F_SETFL only change its status flags.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Distinguishes the temporary files of several writes from one process.
static TEMPORARY_SERIAL: AtomicU32 = AtomicU32::new(0);

/// `path` written whole: a new file beside it (created exclusively, never through a link), then
/// renamed over it, keeping an existing file's permission bits.
fn replace_whole(path: &Path, bytes: &[u8], mode: Option<u32>) -> Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::bad_input(format!("output {}: names no file", path.display())))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(name);
    temporary_name.push(format!(
        ".pcielab-{}-{}",
        std::process::id(),
        TEMPORARY_SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary = directory_of(path).join(temporary_name);
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(mode.unwrap_or(0o644))
            .open(&temporary)?;
        if let Some(mode) = mode {
            file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        file.write_all(bytes)?;
        file.flush()?;
        std::fs::rename(&temporary, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        Error::io(path, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".pcielab-"))
            .collect()
    }

    #[test]
    fn regular_and_new_files_are_replaced_whole_keeping_their_mode() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.svg");
        write_output(&new, b"one").unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"one");
        std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o600)).unwrap();
        write_output(&new, b"two").unwrap();
        assert_eq!(std::fs::read(&new).unwrap(), b"two");
        let mode = std::fs::metadata(&new).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(leftovers(dir.path()).is_empty());
        let missing_dir = dir.path().join("nowhere/out.svg");
        assert_eq!(write_output(&missing_dir, b"x").unwrap_err().exit_code(), 2);
    }

    #[test]
    fn devices_are_written_in_place_and_never_replaced() {
        use std::os::unix::fs::MetadataExt;
        let before = std::fs::metadata("/dev/null").unwrap();
        write_output(Path::new("/dev/null"), b"discarded").unwrap();
        let e = write_output(Path::new("/dev/full"), b"no room").unwrap_err();
        assert_eq!(e.exit_code(), 1, "{e}");
        assert!(e.to_string().contains("/dev/full"), "{e}");
        for node in ["/dev/null", "/dev/full"] {
            let after = std::fs::metadata(node).unwrap();
            assert!(
                after.file_type().is_char_device(),
                "{node} is still a device"
            );
        }
        assert_eq!(
            std::fs::metadata("/dev/null").unwrap().rdev(),
            before.rdev()
        );
        assert_eq!(
            output_target(Path::new("/dev/stdout")).unwrap(),
            OutputTarget::Stdout
        );
        assert_eq!(output_target(Path::new("-")).unwrap(), OutputTarget::Stdout);
    }

    #[test]
    fn fifos_are_written_in_place_and_one_without_reader_fails_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        mkfifo(&fifo);
        let started = std::time::Instant::now();
        let e = write_output(&fifo, b"x").unwrap_err();
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(e.to_string().contains("no process reading"), "{e}");
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        // The reader opens the FIFO when it runs; retry until it has.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while write_output(&fifo, b"through the pipe").is_err() {
            assert!(std::time::Instant::now() < deadline, "reader never opened");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(reader.join().unwrap(), b"through the pipe");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
    }

    #[test]
    fn links_are_followed_once_and_only_within_their_directory() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let escaping = dir.path().join("out.svg");
        symlink(&victim, &escaping).unwrap();
        let e = write_output(&escaping, b"x").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("outside"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let relative_escape = dir.path().join("up.svg");
        symlink("../x", &relative_escape).unwrap();
        assert_eq!(
            write_output(&relative_escape, b"x")
                .unwrap_err()
                .exit_code(),
            2
        );

        let inside = dir.path().join("real.svg");
        let link = dir.path().join("latest.svg");
        symlink("real.svg", &link).unwrap();
        write_output(&link, b"via link").unwrap();
        assert_eq!(std::fs::read(&inside).unwrap(), b"via link");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let chain = dir.path().join("chain.svg");
        symlink("latest.svg", &chain).unwrap();
        assert_eq!(write_output(&chain, b"x").unwrap_err().exit_code(), 2);

        let to_device = dir.path().join("null");
        symlink("/dev/null", &to_device).unwrap();
        write_output(&to_device, b"x").unwrap();
        assert!(std::fs::symlink_metadata(&to_device)
            .unwrap()
            .file_type()
            .is_symlink());
    }

    #[test]
    fn read_only_files_directories_and_block_devices_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept.html");
        std::fs::write(&kept, b"original").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = write_output(&kept, b"x").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("read-only"), "{e}");
        assert_eq!(std::fs::read(&kept).unwrap(), b"original");
        let e = write_output(dir.path(), b"x").unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        if let Some(block) = std::fs::read_dir("/dev").ok().and_then(|entries| {
            entries
                .flatten()
                .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()))
        }) {
            let e = write_output(&block.path(), b"x").unwrap_err();
            assert!(e.to_string().contains("block device"), "{e}");
        }
        assert!(leftovers(dir.path()).is_empty());
    }
}
