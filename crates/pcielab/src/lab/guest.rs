//! The guest's parts and its initramfs: the cache directory, the Debian cloud kernel
//! (`apt-get download` + `dpkg -x`, no /boot install), host binaries copied in with every library
//! `ldd` lists (busybox-static, fio, pcielab itself), and the `/init` script that runs the user's
//! guest script and sends `/results` back over the serial console between markers.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// Marker lines the guest prints on its console; the runner keys its phases on them.
pub(crate) const MARK_SCRIPT: &str = "@@pcielab phase guest-script";
pub(crate) const MARK_RESULTS_BEGIN: &str = "@@pcielab results-begin";
pub(crate) const MARK_RESULTS_END: &str = "@@pcielab results-end";
pub(crate) const MARK_EXIT: &str = "@@pcielab exit ";
/// A guest script line `@@pcielab monitor COMMAND` asks the runner to send COMMAND to QEMU's
/// human monitor (only with `RunOptions::monitor_hook`); the reply goes to the console log.
pub(crate) const MARK_MONITOR: &str = "@@pcielab monitor ";

/// The Debian meta-package whose dependency names the current cloud kernel.
const KERNEL_META_PACKAGE: &str = "linux-image-cloud-amd64";

/// `$PCIELAB_CACHE`, else `$XDG_CACHE_HOME/pcielab`, else `~/.cache/pcielab`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PCIELAB_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("pcielab");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("pcielab")
}

/// The error for a failure in one phase of a lab run.
pub(crate) fn phase_error(phase: &str, msg: impl std::fmt::Display) -> Error {
    Error::runtime(format!("lab phase '{phase}': {msg}"))
}

/// Finds `program` on PATH; the error names the Debian package that provides it.
pub(crate) fn find_tool(program: &str, package: &str, phase: &str) -> Result<PathBuf> {
    on_path(program).ok_or_else(|| {
        phase_error(
            phase,
            format!(
                "'{program}' not found on PATH: install the Debian package {package} \
                     (apt-get install --no-install-recommends {package})"
            ),
        )
    })
}

/// `program` in the first PATH directory that has it.
pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Runs a command, returning stdout; a failure names the phase, the command and its stderr.
pub(crate) fn run_tool(command: &mut Command, phase: &str) -> Result<String> {
    let shown = format!("{command:?}");
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| phase_error(phase, format!("cannot run {shown}: {e}")))?;
    if !output.status.success() {
        return Err(phase_error(
            phase,
            format!(
                "{shown} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The Debian cloud kernel image, fetched into `cache/debian-kernel/<package>/` on first use.
/// A kernel fetched earlier is used as is (asking apt costs seconds per boot); delete
/// `<cache>/debian-kernel` to fetch the current one again.
pub(crate) fn debian_kernel(cache: &Path) -> Result<PathBuf> {
    const PHASE: &str = "fetch-kernel";
    let fetched = cache.join("debian-kernel");
    if let Some(kernel) = fs::read_dir(&fetched).ok().and_then(|entries| {
        entries
            .filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .find_map(|e| find_vmlinuz(&e.path()))
    }) {
        return Ok(kernel);
    }
    let depends = run_tool(
        Command::new(find_tool("apt-cache", "apt", PHASE)?).args(["depends", KERNEL_META_PACKAGE]),
        PHASE,
    )?;
    let package = depends
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .find(|p| p.starts_with("linux-image-"))
        .ok_or_else(|| {
            phase_error(
                PHASE,
                format!(
                    "apt-cache knows no {KERNEL_META_PACKAGE}: run apt-get update on a \
                     Debian 12 machine"
                ),
            )
        })?
        .to_string();
    let unpacked = cache.join("debian-kernel").join(&package);
    if let Some(kernel) = find_vmlinuz(&unpacked) {
        return Ok(kernel);
    }
    // Download and unpack into a private directory, then rename, so concurrent runs never see
    // a half-unpacked kernel.
    let staging = cache
        .join("debian-kernel")
        .join(format!(".{package}.{}", std::process::id()));
    fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    run_tool(
        Command::new(find_tool("apt-get", "apt", PHASE)?)
            .args(["download", "-q", &package])
            .current_dir(&staging),
        PHASE,
    )?;
    let deb = fs::read_dir(&staging)
        .map_err(|e| Error::io(&staging, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or_else(|| phase_error(PHASE, format!("apt-get download {package} left no .deb")))?;
    let root = staging.join("root");
    run_tool(
        Command::new(find_tool("dpkg", "dpkg", PHASE)?)
            .arg("-x")
            .arg(&deb)
            .arg(&root),
        PHASE,
    )?;
    let _ = fs::remove_file(&deb);
    if let Err(e) = fs::rename(&staging, &unpacked) {
        let _ = fs::remove_dir_all(&staging);
        if find_vmlinuz(&unpacked).is_none() {
            return Err(Error::io(&unpacked, e));
        }
    }
    find_vmlinuz(&unpacked).ok_or_else(|| {
        phase_error(
            PHASE,
            format!("{package} has no boot/vmlinuz-*: {}", unpacked.display()),
        )
    })
}

fn find_vmlinuz(unpacked: &Path) -> Option<PathBuf> {
    fs::read_dir(unpacked.join("root").join("boot"))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
}

/// A file to put into the guest: host path → absolute guest path.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestFile {
    pub(crate) host: PathBuf,
    pub(crate) guest: String,
}

/// What goes into the initramfs besides busybox and `/init`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ImageSpec {
    /// Dynamically linked binaries, copied with their `ldd` libraries (guest path = `/bin/NAME`).
    pub(crate) binaries: Vec<PathBuf>,
    /// Plain files (job files, data).
    pub(crate) files: Vec<GuestFile>,
    /// The guest script (sh), run from `/results` as the working directory.
    pub(crate) script: String,
}

/// Builds the initramfs (newc cpio via the `cpio` tool) in `run_dir`; returns its path.
pub(crate) fn build_initramfs(run_dir: &Path, spec: &ImageSpec) -> Result<PathBuf> {
    const PHASE: &str = "guest-image";
    let root = run_dir.join("root");
    let busybox = find_tool("busybox", "busybox-static", PHASE)?;
    for dir in ["bin", "proc", "sys", "dev", "tmp", "results", "pcielab"] {
        fs::create_dir_all(root.join(dir)).map_err(|e| Error::io(root.join(dir), e))?;
    }
    copy_file(&busybox, &root.join("bin/busybox"))?;
    for binary in &spec.binaries {
        copy_with_libraries(binary, &root)?;
    }
    for file in &spec.files {
        copy_file(&file.host, &guest_path(&root, &file.guest))?;
    }
    write_file(&root.join("pcielab/script.sh"), &spec.script, false)?;
    write_file(&root.join("init"), INIT_SCRIPT, true)?;

    let mut entries = Vec::new();
    collect_entries(&root, &root, &mut entries)?;
    entries.sort();
    let image = run_dir.join("initramfs.cpio");
    let out = fs::File::create(&image).map_err(|e| Error::io(&image, e))?;
    let mut child = Command::new(find_tool("cpio", "cpio", PHASE)?)
        .args(["--quiet", "-o", "-H", "newc", "-R", "0:0"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| phase_error(PHASE, format!("cannot run cpio: {e}")))?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        let list = entries.join("\n") + "\n";
        stdin
            .write_all(list.as_bytes())
            .map_err(|e| phase_error(PHASE, format!("writing the cpio file list: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| phase_error(PHASE, format!("cpio: {e}")))?;
    if !output.status.success() {
        return Err(phase_error(
            PHASE,
            format!(
                "cpio failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        ));
    }
    Ok(image)
}

/// The guest's `/init`: mounts, names NVMe namespaces by path like udev does, runs the script,
/// then prints `/results` (tar, gzip, base64) between markers and powers off.
const INIT_SCRIPT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/disk/by-path
# NVMe controllers find their namespaces asynchronously: wait (at most 30 s) for each bound one.
tries=0
while [ $tries -lt 300 ]; do
  waiting=0
  for c in /sys/bus/pci/devices/*; do
    [ "$(cat "$c/class")" = 0x010802 ] && [ -e "$c/driver" ] || continue
    ls -d "$c"/nvme/nvme*/nvme*n* >/dev/null 2>&1 || waiting=1
  done
  [ $waiting = 0 ] && break
  sleep 0.1
  tries=$((tries + 1))
done
for ns in /sys/block/nvme*n*; do
  [ -e "$ns" ] || continue
  name=${ns##*/}
  pci=$(basename "$(readlink -f "$ns/device/device")")
  ln -s "../../$name" "/dev/disk/by-path/pci-$pci-nvme-$(cat "$ns/nsid" 2>/dev/null || echo 1)"
done
echo "@@pcielab phase guest-script"
cd /results
# The script's output goes to script.log and to the console, so a failure report shows its end.
{ sh /pcielab/script.sh; echo $? > /tmp/script.status; } 2>&1 | tee /results/script.log
rc=$(cat /tmp/script.status)
dmesg > /results/dmesg.txt
cat /proc/cpuinfo > /results/cpuinfo.txt
# Kernel messages must not interleave with the encoded results.
dmesg -n 1
echo "@@pcielab results-begin"
tar -c -C /results . | gzip -c | base64
echo "@@pcielab results-end"
echo "@@pcielab exit $rc"
poweroff -f
"#;

fn guest_path(root: &Path, guest: &str) -> PathBuf {
    root.join(guest.trim_start_matches('/'))
}

fn copy_file(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| phase_error("guest-image", format!("copy {}: {e}", from.display())))
}

fn write_file(path: &Path, text: &str, executable: bool) -> Result<()> {
    fs::write(path, text).map_err(|e| Error::io(path, e))?;
    if executable {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(0o755))
            .map_err(|e| Error::io(path, e))?;
    }
    Ok(())
}

/// Copies a binary to `/bin/NAME` and every library `ldd` lists to the same path in the guest.
/// Debug binaries are stripped on the way: the guest unpacks every byte at boot.
fn copy_with_libraries(binary: &Path, root: &Path) -> Result<()> {
    const PHASE: &str = "guest-image";
    let name = binary
        .file_name()
        .ok_or_else(|| phase_error(PHASE, format!("not a file: {}", binary.display())))?;
    let target = root.join("bin").join(name);
    copy_file(binary, &target)?;
    if let Ok(strip) = find_tool("strip", "binutils", PHASE) {
        // Best effort: an unstripped binary still works, only boots slower.
        let _ = Command::new(strip)
            .arg("--strip-debug")
            .arg(&target)
            .stderr(Stdio::null())
            .status();
    }
    let listing = run_tool(
        Command::new(find_tool("ldd", "libc-bin", PHASE)?).arg(binary),
        PHASE,
    )
    .unwrap_or_default(); // a static binary makes ldd exit 1: it simply has no libraries
    for library in ldd_paths(&listing) {
        let dest = guest_path(root, &library);
        if !dest.exists() {
            copy_file(Path::new(&library), &dest)?;
        }
    }
    Ok(())
}

/// Absolute library paths in `ldd` output (`libx.so => /lib/…/libx.so (0x…)` and the loader).
pub(crate) fn ldd_paths(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=>") {
                Some((_, right)) => right.trim(),
                None => line,
            };
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_string())
        })
        .collect()
}

fn collect_entries(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let rel = path.strip_prefix(root).expect("below root");
        out.push(format!("./{}", rel.display()));
        if path.is_dir() && !path.is_symlink() {
            collect_entries(root, &path, out)?;
        }
    }
    Ok(())
}

/// Decodes standard base64 (ignoring whitespace), as busybox `base64` writes it.
pub(crate) fn decode_base64(text: &str) -> Result<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let symbols: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(symbols.len() * 3 / 4);
    for chunk in symbols.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = value(c).ok_or_else(|| {
                Error::runtime(format!(
                    "guest results: invalid base64 character {:?}",
                    c as char
                ))
            })?;
            acc |= v << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        match chunk.len() {
            4 => out.extend_from_slice(&bytes[1..4]),
            3 => out.extend_from_slice(&bytes[1..3]),
            2 => out.push(bytes[1]),
            _ => return Err(Error::runtime("guest results: truncated base64")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_yields_absolute_paths() {
        let listing = "\tlinux-vdso.so.1 (0x00007ffd)\n\
             \tlibaio.so.1 => /lib/x86_64-linux-gnu/libaio.so.1 (0x00007f)\n\
             \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\
             \t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            ldd_paths(listing),
            vec![
                "/lib/x86_64-linux-gnu/libaio.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
        );
    }

    #[test]
    fn base64_decodes_wrapped_and_padded_text() {
        assert_eq!(decode_base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(decode_base64("aGVs\nbG8h").unwrap(), b"hello!");
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        assert!(decode_base64("aGk*").is_err());
    }
}
