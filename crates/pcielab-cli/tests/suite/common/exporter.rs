//! Starting `pcielab exporter` for a test: on a free loopback port, killed when the test ends.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A child process killed when the test ends, pass or fail.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the exporter of `machine` on a free loopback port; returns it and the address it
/// printed.
pub fn start_exporter(machine: &str, extra: &[&str]) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pcielab"))
        .args(["exporter", "--machine", machine, "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.strip_suffix("/metrics\n"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (Running(child), addr)
}
