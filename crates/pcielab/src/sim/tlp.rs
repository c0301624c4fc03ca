//! The simulator's TLP accounting: how a DMA or MMIO transfer splits into TLPs at a link
//! (Memory Writes of at most MPS, Memory Reads of at most MRRS answered by Completions with
//! data of at most the completion size), their wire bytes (header, framing, LCRC, optional
//! ECRC, FLIT packing from Gen6), and tallies of TLPs by type and direction with data payload
//! in bytes and in the DWC counter's 16-byte units. A per-I/O [`Bundle`] is an ordered list of
//! runs; any prefix of it can be tallied, so all counters derive from one emitted-TLP count.
//! (Minimal splitter owned by the simulator until the model's transfer accounting lands.)

use crate::pcie::Generation;

/// Which way a TLP crosses the root port's link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Device to root complex: the root port *receives* it (Rx).
    Up = 0,
    /// Root complex to device: the root port *transmits* it (Tx).
    Down = 1,
}

/// The TLP types the simulated traffic uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    MemWrite = 0,
    MemRead = 1,
    /// Completion with data.
    CplD = 2,
    /// Completion without data.
    Cpl = 3,
}

const KINDS: usize = 4;

/// `count` TLPs of one type, direction and payload size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub dir: Dir,
    pub kind: Kind,
    pub count: u64,
    pub payload: u32,
}

/// How TLPs are sized and framed on one link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFormat {
    pub generation: Generation,
    /// Max payload size, bytes.
    pub mps: u32,
    /// Max read request size, bytes.
    pub mrrs: u32,
    /// Largest completion the completer returns, bytes (the root complex completes in
    /// MPS-sized pieces for aligned requests).
    pub completion: u32,
    /// Memory requests carry 64-bit addresses (4 DW header) rather than 32-bit (3 DW).
    pub addr64: bool,
    pub ecrc: bool,
}

impl LinkFormat {
    pub fn header_bytes(&self, kind: Kind) -> u32 {
        let header = match kind {
            Kind::MemWrite | Kind::MemRead if self.addr64 => 16,
            _ => 12,
        };
        header + if self.ecrc { 4 } else { 0 }
    }

    /// Bytes on the wire for one TLP, excluding line encoding. Gen1-5: 8 B of framing, sequence
    /// number and LCRC per TLP. Gen6+: no per-TLP framing, but only 236 of every 256 flit bytes
    /// carry TLPs.
    pub fn wire_bytes(&self, kind: Kind, payload: u32) -> f64 {
        let tlp = f64::from(self.header_bytes(kind) + payload);
        if self.generation.is_flit() {
            tlp * 256.0 / 236.0
        } else {
            tlp + 8.0
        }
    }
}

fn split(dir: Dir, kind: Kind, bytes: u64, max: u32) -> Vec<Run> {
    let max = u64::from(max.max(1));
    let mut runs = Vec::new();
    if bytes / max > 0 {
        runs.push(Run {
            dir,
            kind,
            count: bytes / max,
            payload: max as u32,
        });
    }
    if bytes % max > 0 {
        runs.push(Run {
            dir,
            kind,
            count: 1,
            payload: (bytes % max) as u32,
        });
    }
    runs
}

/// TLPs for writing `bytes` to the other side: `to` is the direction the data travels.
pub fn write(to: Dir, bytes: u64, format: &LinkFormat) -> Vec<Run> {
    split(to, Kind::MemWrite, bytes, format.mps)
}

/// TLPs for reading `bytes` from the other side: requests travel `requests`, completions back.
/// Each request of at most MRRS is answered by completions of at most the completion size.
pub fn read(requests: Dir, bytes: u64, format: &LinkFormat) -> Vec<Run> {
    let back = match requests {
        Dir::Up => Dir::Down,
        Dir::Down => Dir::Up,
    };
    let mut runs = Vec::new();
    let mrrs = u64::from(format.mrrs.max(1));
    let full = bytes / mrrs;
    let rest = bytes % mrrs;
    if full > 0 {
        runs.push(Run {
            dir: requests,
            kind: Kind::MemRead,
            count: full,
            payload: 0,
        });
        for piece in split(back, Kind::CplD, mrrs, format.completion) {
            runs.push(Run {
                count: piece.count * full,
                ..piece
            });
        }
    }
    if rest > 0 {
        runs.push(Run {
            dir: requests,
            kind: Kind::MemRead,
            count: 1,
            payload: 0,
        });
        runs.extend(split(back, Kind::CplD, rest, format.completion));
    }
    runs
}

/// TLP counts, payload and wire bytes by direction: what the root port's counters are made of.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Tally {
    pub tlps: [[u64; KINDS]; 2],
    pub payload_bytes: [u64; 2],
    /// Payload as the DWC throughput counter counts it: each TLP's payload in 16-byte units,
    /// rounded up (the counter advances per 4-DWORD beat of the data path).
    pub payload_units: [u64; 2],
    pub wire_bytes: [f64; 2],
}

impl Tally {
    pub fn count(&self, dir: Dir, kind: Kind) -> u64 {
        self.tlps[dir as usize][kind as usize]
    }

    pub fn tlps_in(&self, dir: Dir) -> u64 {
        self.tlps[dir as usize].iter().sum()
    }

    fn add_run(&mut self, run: &Run, n: u64, format: &LinkFormat) {
        let d = run.dir as usize;
        self.tlps[d][run.kind as usize] += n;
        self.payload_bytes[d] += n * u64::from(run.payload);
        self.payload_units[d] += n * u64::from(run.payload.div_ceil(16));
        self.wire_bytes[d] += n as f64 * format.wire_bytes(run.kind, run.payload);
    }

    /// `self + other × n`.
    pub fn add_scaled(&mut self, other: &Tally, n: u64) {
        for d in 0..2 {
            for k in 0..KINDS {
                self.tlps[d][k] += other.tlps[d][k] * n;
            }
            self.payload_bytes[d] += other.payload_bytes[d] * n;
            self.payload_units[d] += other.payload_units[d] * n;
            self.wire_bytes[d] += other.wire_bytes[d] * n as f64;
        }
    }
}

/// The TLPs of one I/O in protocol order, as seen at the root port's link.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub runs: Vec<Run>,
    pub format: LinkFormat,
    /// Tally of the whole bundle.
    pub total: Tally,
    pub tlps: u64,
}

impl Bundle {
    pub fn new(runs: Vec<Run>, format: LinkFormat) -> Bundle {
        let mut total = Tally::default();
        for run in &runs {
            total.add_run(run, run.count, &format);
        }
        let tlps = runs.iter().map(|r| r.count).sum();
        Bundle {
            runs,
            format,
            total,
            tlps,
        }
    }

    /// The tally of the first `n` TLPs of the bundle.
    pub fn prefix(&self, mut n: u64) -> Tally {
        let mut tally = Tally::default();
        for run in &self.runs {
            if n == 0 {
                break;
            }
            let take = n.min(run.count);
            tally.add_run(run, take, &self.format);
            n -= take;
        }
        tally
    }

    /// The tally after `emitted` TLPs of a stream of back-to-back copies of this bundle.
    pub fn after(&self, emitted: u64) -> Tally {
        if self.tlps == 0 {
            return Tally::default();
        }
        let mut tally = self.prefix(emitted % self.tlps);
        tally.add_scaled(&self.total, emitted / self.tlps);
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen2() -> LinkFormat {
        LinkFormat {
            generation: Generation::Gen2,
            mps: 128,
            mrrs: 512,
            completion: 128,
            addr64: true,
            ecrc: false,
        }
    }

    #[test]
    fn writes_split_at_mps_and_reads_at_mrrs_and_completion_size() {
        let f = gen2();
        let w = Bundle::new(write(Dir::Up, 1000, &f), f);
        assert_eq!(w.total.count(Dir::Up, Kind::MemWrite), 8); // 7 × 128 + 104
        assert_eq!(w.total.payload_bytes[Dir::Up as usize], 1000);
        assert_eq!(w.total.payload_units[Dir::Up as usize], 7 * 8 + 7);
        let r = Bundle::new(read(Dir::Up, 1100, &f), f);
        assert_eq!(r.total.count(Dir::Up, Kind::MemRead), 3); // 512 + 512 + 76
        assert_eq!(r.total.count(Dir::Down, Kind::CplD), 4 + 4 + 1);
        assert_eq!(r.total.payload_bytes[Dir::Down as usize], 1100);
        assert_eq!(r.total.payload_bytes[Dir::Up as usize], 0);
        // 16-byte header + 8 framing per MRd, 12 + 8 + payload per CplD.
        assert_eq!(r.total.wire_bytes[0], 3.0 * 24.0);
        assert_eq!(r.total.wire_bytes[1], 9.0 * 20.0 + 1100.0);
    }

    #[test]
    fn prefixes_of_a_stream_are_consistent() {
        let f = gen2();
        let mut runs = write(Dir::Up, 300, &f);
        runs.extend(read(Dir::Up, 64, &f));
        let b = Bundle::new(runs, f);
        assert_eq!(b.tlps, 3 + 1 + 1);
        let after = b.after(2 * b.tlps + 2);
        assert_eq!(after.count(Dir::Up, Kind::MemWrite), 2 * 3 + 2);
        assert_eq!(after.payload_bytes[0], 2 * 300 + 256);
        assert_eq!(after.count(Dir::Down, Kind::CplD), 2);
    }

    #[test]
    fn flit_mode_has_no_per_tlp_framing() {
        let mut f = gen2();
        f.generation = Generation::Gen6;
        assert!((f.wire_bytes(Kind::MemWrite, 220) - 256.0).abs() < 1e-9);
    }
}
