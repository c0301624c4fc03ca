//! The simulator's view of TLPs at a root port: per-I/O `Bundle`s of TLP runs (type,
//! direction, count, payload per TLP) in protocol order, built from the model's per-transfer
//! accounting ([`crate::model::transfer`]: TLP counts under MPS/MRRS/RCB, header and framing
//! bytes, expected Ack/UpdateFC DLLPs), and [`Tally`]s of any prefix of a stream of bundles, so
//! every counter (payload in bytes and in 16-byte units, TLPs by type, DLLPs, wire bytes) is
//! derived from one emitted-TLP count.

use crate::model::transfer::{self, CompletionSize, LinkParams, Traffic};
use crate::pcie::flit::wire_bytes_for_tlp_bytes;
use crate::pcie::tlp::{overhead_bytes, TlpKind};

/// Which way a TLP crosses the root port's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// Device to root complex: the root port *receives* it (Rx).
    Up = 0,
    /// Root complex to device: the root port *transmits* it (Tx).
    Down = 1,
}

/// The TLP types simulated traffic is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    MemWrite = 0,
    MemRead = 1,
    /// Completion with data.
    CplD = 2,
}

const KINDS: usize = 3;

impl Kind {
    fn model(self) -> TlpKind {
        match self {
            Kind::MemWrite => TlpKind::MemWrite,
            Kind::MemRead => TlpKind::MemRead,
            Kind::CplD => TlpKind::CompletionData,
        }
    }
}

/// `count` TLPs of one type and direction with `payload` bytes each, and the DLLPs their
/// receiver returns for the whole run (expected values, from the model).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Run {
    pub(crate) dir: Dir,
    pub(crate) kind: Kind,
    pub(crate) count: u64,
    pub(crate) payload: u32,
    pub(crate) acks: f64,
    pub(crate) update_fcs: f64,
}

impl Run {
    /// The payload of one of its TLPs in the DWC throughput counter's 16-byte units.
    pub(crate) fn payload_units(&self) -> u64 {
        u64::from(self.payload.div_ceil(16))
    }
}

/// `tlps` TLPs carrying `bytes` in pieces of at most `max` (whole pieces first, as an aligned
/// transfer splits), with the run's DLLPs shared in proportion.
fn spread(dir: Dir, kind: Kind, tlps: u64, bytes: u64, max: u32, dllps: (f64, f64)) -> Vec<Run> {
    if tlps == 0 {
        return Vec::new();
    }
    let max = u64::from(max.max(1));
    let (full, rest) = if bytes.div_ceil(max) == tlps || bytes == 0 {
        ((bytes / max).min(tlps), bytes % max)
    } else {
        // A split the model made finer (RCB-sized completions): spread the bytes evenly.
        (0, 0)
    };
    let mut pieces: Vec<(u64, u64)> = Vec::new();
    if bytes == 0 {
        pieces.push((tlps, 0));
    } else if full + u64::from(rest > 0) == tlps {
        pieces.push((full, max));
        pieces.push((u64::from(rest > 0), rest));
    } else {
        let base = bytes / tlps;
        let extra = bytes % tlps;
        pieces.push((extra, base + 1));
        pieces.push((tlps - extra, base));
    }
    pieces
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(count, payload)| {
            let share = count as f64 / tlps as f64;
            Run {
                dir,
                kind,
                count,
                payload: payload as u32,
                acks: dllps.0 * share,
                update_fcs: dllps.1 * share,
            }
        })
        .collect()
}

/// Runs of a model transfer in which the device is the requester: requests and write data go
/// up, completions come down (`flip` swaps them for CPU-initiated MMIO).
fn runs_of(t: &Traffic, link: &LinkParams, flip: bool) -> Vec<Run> {
    let (up, down) = if flip {
        (Dir::Down, Dir::Up)
    } else {
        (Dir::Up, Dir::Down)
    };
    let (requests, completions) = if flip {
        (&t.downstream, &t.upstream)
    } else {
        (&t.upstream, &t.downstream)
    };
    let completion_max = match link.completion_size {
        CompletionSize::Mps => link.mps,
        CompletionSize::Rcb => link.rcb,
    };
    let mut runs = Vec::new();
    if t.mem_writes > 0 {
        let dllps = (completions.acks, completions.update_fcs);
        runs.extend(spread(
            up,
            Kind::MemWrite,
            t.mem_writes,
            t.payload_bytes,
            link.mps,
            dllps,
        ));
    }
    if t.mem_reads > 0 {
        let dllps = (completions.acks, completions.update_fcs);
        runs.extend(spread(up, Kind::MemRead, t.mem_reads, 0, link.mrrs, dllps));
        let back = (requests.acks, requests.update_fcs);
        runs.extend(spread(
            down,
            Kind::CplD,
            t.completions,
            t.payload_bytes,
            completion_max,
            back,
        ));
    }
    runs
}

/// The device writes `bytes` to host memory (Memory Writes up).
pub(crate) fn dma_write(bytes: u64, link: &LinkParams) -> Vec<Run> {
    runs_of(&transfer::write(bytes, link), link, false)
}

/// The device reads `bytes` of host memory (Memory Reads up, Completions down).
pub(crate) fn dma_read(bytes: u64, link: &LinkParams) -> Vec<Run> {
    runs_of(&transfer::read(bytes, link), link, false)
}

/// The CPU writes `bytes` to device registers (Memory Writes down).
pub(crate) fn mmio_write(bytes: u64, link: &LinkParams) -> Vec<Run> {
    runs_of(&transfer::write(bytes, link), link, true)
}

/// The CPU reads `bytes` of device registers (Memory Read down, Completion up).
pub(crate) fn mmio_read(bytes: u64, link: &LinkParams) -> Vec<Run> {
    runs_of(&transfer::read(bytes, link), link, true)
}

/// Bytes one TLP occupies on the wire: payload, header, digest and framing (FLIT mode: its
/// share of the flits).
pub(crate) fn tlp_wire_bytes(kind: Kind, payload: u32, link: &LinkParams) -> f64 {
    let bytes = f64::from(payload + overhead_bytes(kind.model(), link.format, link.gen));
    if link.gen.is_flit() {
        wire_bytes_for_tlp_bytes(bytes)
    } else {
        bytes
    }
}

/// TLP counts, payload, wire bytes and DLLPs by direction: what the root port's counters are
/// made of.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Tally {
    pub(crate) tlps: [[u64; KINDS]; 2],
    /// Payload bytes each way (index 0 up, 1 down).
    pub payload_bytes: [u64; 2],
    /// Payload as the DWC throughput counter counts it: each TLP's payload in 16-byte units,
    /// rounded up (the counter advances per 4-DWORD beat of the data path).
    pub(crate) payload_units: [u64; 2],
    /// TLP bytes on the wire (DLLPs not included).
    pub wire_bytes: [f64; 2],
    /// Expected Ack and UpdateFC DLLPs *sent* in each direction.
    pub(crate) acks: [f64; 2],
    pub(crate) update_fcs: [f64; 2],
}

impl Tally {
    #[cfg(test)]
    pub(crate) fn count(&self, dir: Dir, kind: Kind) -> u64 {
        self.tlps[dir as usize][kind as usize]
    }

    fn add_run(&mut self, run: &Run, n: u64, link: &LinkParams) {
        let d = run.dir as usize;
        self.tlps[d][run.kind as usize] += n;
        self.payload_bytes[d] += n * u64::from(run.payload);
        self.payload_units[d] += n * run.payload_units();
        self.wire_bytes[d] += n as f64 * tlp_wire_bytes(run.kind, run.payload, link);
        let share = n as f64 / run.count as f64;
        self.acks[1 - d] += run.acks * share;
        self.update_fcs[1 - d] += run.update_fcs * share;
    }

    /// `self += other × n`.
    pub(crate) fn add_scaled(&mut self, other: &Tally, n: u64) {
        for d in 0..2 {
            for k in 0..KINDS {
                self.tlps[d][k] += other.tlps[d][k] * n;
            }
            self.payload_bytes[d] += other.payload_bytes[d] * n;
            self.payload_units[d] += other.payload_units[d] * n;
            self.wire_bytes[d] += other.wire_bytes[d] * n as f64;
            self.acks[d] += other.acks[d] * n as f64;
            self.update_fcs[d] += other.update_fcs[d] * n as f64;
        }
    }
}

/// The TLPs of one I/O in protocol order, as seen at the root port's link.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bundle {
    pub(crate) runs: Vec<Run>,
    pub(crate) link: LinkParams,
    /// Tally of the whole bundle.
    pub(crate) total: Tally,
    pub(crate) tlps: u64,
}

impl Bundle {
    pub(crate) fn new(runs: Vec<Run>, link: LinkParams) -> Bundle {
        let mut total = Tally::default();
        for run in &runs {
            total.add_run(run, run.count, &link);
        }
        let tlps = runs.iter().map(|r| r.count).sum();
        Bundle {
            runs,
            link,
            total,
            tlps,
        }
    }

    /// The tally of the first `n` TLPs of the bundle.
    pub(crate) fn prefix(&self, mut n: u64) -> Tally {
        let mut tally = Tally::default();
        for run in &self.runs {
            if n == 0 {
                break;
            }
            let take = n.min(run.count);
            tally.add_run(run, take, &self.link);
            n -= take;
        }
        tally
    }

    /// `Σ per_tlp(run)` over the first `emitted` TLPs of a stream of back-to-back copies of
    /// this bundle: one integer field of [`Bundle::after`] (a TLP count, payload bytes or
    /// units) without the floating-point fields, for counters read at every mux tick.
    pub(crate) fn after_sum(&self, emitted: u64, per_tlp: impl Fn(&Run) -> u64) -> u64 {
        if self.tlps == 0 {
            return 0;
        }
        // One pass: the whole bundle's sum and the partial copy's.
        let mut left = emitted % self.tlps;
        let (mut whole, mut partial) = (0, 0);
        for run in &self.runs {
            let each = per_tlp(run);
            whole += run.count * each;
            let take = left.min(run.count);
            partial += take * each;
            left -= take;
        }
        emitted / self.tlps * whole + partial
    }

    /// The tally after `emitted` TLPs of a stream of back-to-back copies of this bundle.
    pub(crate) fn after(&self, emitted: u64) -> Tally {
        if self.tlps == 0 {
            return Tally::default();
        }
        let mut tally = self.prefix(emitted % self.tlps);
        tally.add_scaled(&self.total, emitted / self.tlps);
        tally
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::pcie::tlp::TlpFormat;
    use crate::pcie::Generation;

    /// A Gen2 x2 link with 128-byte MPS, 512-byte MRRS and 64-bit addresses; device tests use it too.
    pub(crate) fn gen2() -> LinkParams {
        LinkParams {
            mps: 128,
            mrrs: 512,
            format: TlpFormat {
                addr64: true,
                ..TlpFormat::default()
            },
            ..LinkParams::new(Generation::Gen2, 2)
        }
    }

    #[test]
    fn transfers_follow_the_model_split() {
        let l = gen2();
        let w = Bundle::new(dma_write(1000, &l), l);
        assert_eq!(w.total.count(Dir::Up, Kind::MemWrite), 8); // 7 × 128 + 104
        assert_eq!(w.total.payload_bytes[Dir::Up as usize], 1000);
        assert_eq!(w.total.payload_units[Dir::Up as usize], 7 * 8 + 7);
        let model = transfer::write(1000, &l);
        assert!((w.total.acks[Dir::Down as usize] - model.downstream.acks).abs() < 1e-12);
        let r = Bundle::new(dma_read(1100, &l), l);
        assert_eq!(r.total.count(Dir::Up, Kind::MemRead), 3); // 512 + 512 + 76
        assert_eq!(r.total.count(Dir::Down, Kind::CplD), 4 + 4 + 1);
        assert_eq!(r.total.payload_bytes[Dir::Down as usize], 1100);
        // 16-byte header + 8 framing per MRd, 12 + 8 + payload per CplD.
        assert_eq!(r.total.wire_bytes[0], 3.0 * 24.0);
        assert_eq!(r.total.wire_bytes[1], 9.0 * 20.0 + 1100.0);
        let m = Bundle::new(mmio_read(4, &l), l);
        assert_eq!(m.total.count(Dir::Down, Kind::MemRead), 1);
        assert_eq!(m.total.payload_bytes[Dir::Up as usize], 4);
    }

    #[test]
    fn prefixes_of_a_stream_are_consistent() {
        let l = gen2();
        let mut runs = dma_write(300, &l);
        runs.extend(dma_read(64, &l));
        let b = Bundle::new(runs, l);
        assert_eq!(b.tlps, 3 + 1 + 1);
        let after = b.after(2 * b.tlps + 2);
        assert_eq!(after.count(Dir::Up, Kind::MemWrite), 2 * 3 + 2);
        assert_eq!(after.payload_bytes[0], 2 * 300 + 256);
        assert_eq!(after.count(Dir::Down, Kind::CplD), 2);
    }

    #[test]
    fn rcb_completions_spread_the_payload() {
        let l = LinkParams {
            completion_size: CompletionSize::Rcb,
            ..gen2()
        };
        let b = Bundle::new(dma_read(200, &l), l);
        assert_eq!(b.total.count(Dir::Down, Kind::CplD), 4);
        assert_eq!(b.total.payload_bytes[Dir::Down as usize], 200);
    }
}
