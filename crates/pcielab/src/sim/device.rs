//! Simulated devices with physical parameters from a function's `[function.device]` table: an
//! AHCI controller with a SATA SSD behind it, an NVMe SSD, an endpoint DMA engine and a NIC.
//! Each block device says what one I/O costs it (service time from link rate, framing and media
//! bandwidth), how many I/Os it takes in flight, its access latency, and the TLPs one I/O puts
//! on the PCIe link — data plus per-command protocol traffic (AHCI command header, FIS and PRD
//! table fetches, FIS writes; NVMe SQE/PRP-list fetches, CQE posts, doorbells; MSI writes).

use crate::error::Result;
use crate::model::platform::{PlatformModel, P};
use crate::model::transfer::LinkParams;
use crate::sim::config::Table;
use crate::sim::tlp::{self, Run};
use crate::topology::Function;

/// An AHCI HBA with one SATA SSD behind it (the seed's 88SE9235 and its disk).
#[derive(Debug, Clone, PartialEq)]
pub struct Ahci {
    /// SATA line rate, Gb/s (6.0 for SATA 6 Gb/s); 8b/10b coded.
    pub(crate) sata_gbps: f64,
    /// Native Command Queuing depth of the disk.
    pub(crate) ncq_depth: u32,
    /// Link-layer handshake per FIS: X_RDY/R_RDY before it, R_IP/R_OK after it, ns.
    pub(crate) fis_turnaround_ns: f64,
    /// The SSD's internal read bandwidth from NAND, MB/s.
    pub(crate) media_read_mbps: f64,
    /// The SSD's sustained NAND program bandwidth, MB/s.
    pub(crate) program_mbps: f64,
    pub(crate) read_latency_us: f64,
    pub(crate) write_latency_us: f64,
    /// Largest scatter-gather segment the block layer hands the driver (one PRD entry each).
    pub(crate) prd_segment_bytes: u64,
    pub(crate) capacity_bytes: Option<u64>,
}

/// An NVMe SSD.
#[derive(Debug, Clone, PartialEq)]
pub struct Nvme {
    pub(crate) read_mbps: f64,
    pub(crate) write_mbps: f64,
    pub(crate) read_iops: f64,
    pub(crate) write_iops: f64,
    pub(crate) read_latency_us: f64,
    pub(crate) write_latency_us: f64,
    /// Commands the controller works on at once (I/O queue depth × queues it serves).
    pub(crate) queue_depth: u32,
    pub(crate) capacity_bytes: Option<u64>,
}

/// One port of a network adapter (one PCI function per port, as ConnectX-5 has).
#[derive(Debug, Clone, PartialEq)]
pub struct Nic {
    /// Ethernet line rate, Gb/s, each direction.
    pub(crate) line_gbps: f64,
    /// Bytes of the completion entry the NIC writes per frame (mlx5 CQE: 64).
    pub(crate) completion_bytes: u64,
    /// Bytes of a descriptor the NIC fetches per frame.
    pub(crate) descriptor_bytes: u64,
    /// Frames per interrupt (interrupt moderation) and per doorbell.
    pub(crate) frames_per_interrupt: u64,
    /// Descriptors per ring: frames in flight.
    pub(crate) ring_entries: u64,
}

/// A simulated device behind a function, with what times its I/O.
#[derive(Debug, Clone, PartialEq)]
pub enum Device {
    /// A SATA controller.
    Ahci(Ahci),
    /// An NVMe drive.
    Nvme(Nvme),
    /// An endpoint's DMA engine (the Rockchip "standard EP + dmatest" setup). Its timing is the
    /// machine's platform model (`[platform.dma]`, `[platform.root_complex]`): one source for
    /// `pcielab model --platform`, `fit` and the simulator.
    Dma,
    /// A network card.
    Nic(Nic),
}

const AHCI_KEYS: &[&str] = &[
    "model",
    "sata_gbps",
    "ncq_depth",
    "fis_turnaround_ns",
    "media_read_mbps",
    "program_mbps",
    "read_latency_us",
    "write_latency_us",
    "prd_segment_bytes",
    "capacity_gb",
];
const NVME_KEYS: &[&str] = &[
    "model",
    "read_mbps",
    "write_mbps",
    "read_iops",
    "write_iops",
    "read_latency_us",
    "write_latency_us",
    "queue_depth",
    "capacity_gb",
];
const DMA_KEYS: &[&str] = &["model"];
const NIC_KEYS: &[&str] = &[
    "model",
    "line_gbps",
    "completion_bytes",
    "descriptor_bytes",
    "frames_per_interrupt",
    "ring_entries",
];

impl Device {
    /// The device a function's `[function.device]` table describes by its `model`, or `None`
    /// for models the simulator does not simulate (the QEMU lab reads the same table, e.g.
    /// `model = "pcie-root-port"`).
    /// NVMe bandwidth and IOPS default to the platform model's `[platform.drive]`, so a spec
    /// states them once for both the simulator and `pcielab model --platform`.
    pub(crate) fn from_function(f: &Function, platform: &PlatformModel) -> Result<Option<Device>> {
        if f.params.is_empty() {
            return Ok(None);
        }
        let t = Table::new(format!("[function.device] of {}", f.bdf), &f.params);
        let capacity = |t: &Table| -> Result<Option<u64>> {
            Ok(t.map
                .get("capacity_gb")
                .map(|_| t.number("capacity_gb", 0.0, false))
                .transpose()?
                .map(|gb| (gb * 1e9) as u64))
        };
        let device = match t.string("model")? {
            Some("ahci") => {
                t.no_near_misses(AHCI_KEYS)?;
                // Maxima are the fields' own: 32 NCQ tags, a PRD entry's 22-bit byte count.
                Device::Ahci(Ahci {
                    sata_gbps: t.number("sata_gbps", 6.0, false)?,
                    ncq_depth: t.integer("ncq_depth", 32, 32)? as u32,
                    fis_turnaround_ns: t.number("fis_turnaround_ns", 1000.0, true)?,
                    media_read_mbps: t.number("media_read_mbps", 1500.0, false)?,
                    program_mbps: t.number("program_mbps", 450.0, false)?,
                    read_latency_us: t.number("read_latency_us", 90.0, true)?,
                    write_latency_us: t.number("write_latency_us", 40.0, true)?,
                    prd_segment_bytes: t.integer("prd_segment_bytes", 65536, 4 << 20)?,
                    capacity_bytes: capacity(&t)?,
                })
            }
            Some("nvme") => {
                t.no_near_misses(NVME_KEYS)?;
                // An NVMe queue holds at most 65536 entries (16-bit MQES).
                Device::Nvme(Nvme {
                    read_mbps: t.number("read_mbps", platform.get(P::DriveReadMbps), false)?,
                    write_mbps: t.number("write_mbps", platform.get(P::DriveWriteMbps), false)?,
                    read_iops: t.number("read_iops", platform.get(P::DriveReadIops), false)?,
                    write_iops: t.number("write_iops", platform.get(P::DriveWriteIops), false)?,
                    read_latency_us: t.number("read_latency_us", 80.0, true)?,
                    write_latency_us: t.number("write_latency_us", 20.0, true)?,
                    queue_depth: t.integer("queue_depth", 1024, 65536)? as u32,
                    capacity_bytes: capacity(&t)?,
                })
            }
            Some("dma") => {
                t.no_moved_keys(&[
                    ("setup_ns", "[platform.dma] setup_ns"),
                    (
                        "engine_mbps",
                        "[platform.root_complex] posted_write_MBps and completion_MBps",
                    ),
                    ("max_read_requests", "[platform.dma] max_read_requests"),
                ])?;
                t.no_near_misses(DMA_KEYS)?;
                Device::Dma
            }
            Some("nic") => {
                t.no_near_misses(NIC_KEYS)?;
                Device::Nic(Nic {
                    line_gbps: t.number("line_gbps", 25.0, false)?,
                    completion_bytes: t.integer("completion_bytes", 64, 4096)?,
                    descriptor_bytes: t.integer("descriptor_bytes", 16, 4096)?,
                    frames_per_interrupt: t.integer("frames_per_interrupt", 64, 65536)?,
                    ring_entries: t.integer("ring_entries", 1024, 65536)?,
                })
            }
            _ => return Ok(None),
        };
        Ok(Some(device))
    }

    /// A block device's view for fio, or `None` for devices fio cannot target.
    pub(crate) fn block(&self) -> Option<&dyn BlockDevice> {
        match self {
            Device::Ahci(a) => Some(a),
            Device::Nvme(n) => Some(n),
            _ => None,
        }
    }
}

/// Ethernet adds preamble and start delimiter (8 B) and the inter-frame gap (12 B) per frame.
const ETHERNET_FRAMING: u64 = 20;

impl Nic {
    /// Time the wire needs for `frames` frames of `frame` bytes, ns.
    pub(crate) fn batch_ns(&self, frames: u64, frame: u64) -> f64 {
        (frames * (frame + ETHERNET_FRAMING) * 8) as f64 / self.line_gbps
    }

    /// The TLPs of one interrupt's worth of frames. Receive: the NIC fetches the refilled
    /// descriptors, writes each frame and its completion entry to memory, raises one MSI-X; the
    /// driver rings the refill doorbell. Transmit: the driver rings the doorbell, the NIC fetches
    /// descriptors, reads each frame, writes each completion entry, raises one MSI-X.
    pub(crate) fn batch_tlps(
        &self,
        receive: bool,
        frames: u64,
        frame: u64,
        f: &LinkParams,
    ) -> Vec<Run> {
        let mut runs = Vec::new();
        if !receive {
            runs.extend(tlp::mmio_write(DWORD, f));
        }
        runs.extend(tlp::dma_read(frames * self.descriptor_bytes, f));
        for _ in 0..frames {
            if receive {
                runs.extend(tlp::dma_write(frame, f));
            } else {
                runs.extend(tlp::dma_read(frame, f));
            }
            runs.extend(tlp::dma_write(self.completion_bytes, f));
        }
        runs.extend(tlp::dma_write(DWORD, f)); // MSI-X
        if receive {
            runs.extend(tlp::mmio_write(DWORD, f));
        }
        runs
    }
}

/// What the simulator needs from a device fio can target.
pub(crate) trait BlockDevice {
    /// Time one I/O of `bs` bytes occupies the device's bottleneck, ns.
    fn service_ns(&self, read: bool, bs: u64) -> f64;
    /// Media access latency before data moves, ns.
    fn latency_ns(&self, read: bool) -> f64;
    /// I/Os the device works on at once.
    fn queue_depth(&self) -> u32;
    /// The TLPs one I/O puts on the device's PCIe link, in protocol order.
    fn io_tlps(&self, read: bool, bs: u64, link: &LinkParams) -> Vec<Run>;
    fn capacity_bytes(&self) -> Option<u64>;
}

/// SATA framing: every FIS is SOF + its dwords + CRC + EOF on the wire, plus the handshake.
const SATA_FRAMING_DWORDS: f64 = 3.0;
/// Data FIS payload limit (2048 dwords).
const SATA_DATA_FIS_BYTES: u64 = 8192;
/// SATA inserts two ALIGN primitives per 256 dwords transmitted.
const SATA_ALIGN_FACTOR: f64 = 258.0 / 256.0;
/// Dwords of the FISes of one NCQ command: H2D Register (5), DMA Setup (7), Set Device Bits (2),
/// and a data FIS's own type dword (1); DMA Activate (1) precedes each data FIS of a write.
const H2D_REGISTER_DW: f64 = 5.0;
const DMA_SETUP_DW: f64 = 7.0;
const SET_DEVICE_BITS_DW: f64 = 2.0;
const DATA_FIS_HEADER_DW: f64 = 1.0;
const DMA_ACTIVATE_DW: f64 = 1.0;
/// AHCI memory structures: a command header is 32 bytes, a PRD entry 16.
const AHCI_COMMAND_HEADER: u64 = 32;
const AHCI_PRD_ENTRY: u64 = 16;
/// Register/status writes and MMIO accesses are one dword.
const DWORD: u64 = 4;
/// NVMe: 64-byte submission entries, 16-byte completion entries, 8-byte PRP entries.
const NVME_SQE: u64 = 64;
const NVME_CQE: u64 = 16;
const NVME_PRP_ENTRY: u64 = 8;
const PAGE: u64 = 4096;

impl Ahci {
    /// Time to send one FIS of `dwords` (its own dwords, without framing).
    fn fis_ns(&self, dwords: f64) -> f64 {
        let dword_ns = 32.0 / (self.sata_gbps * 0.8); // 8b/10b: 80 % of the line rate is data
        (dwords + SATA_FRAMING_DWORDS) * dword_ns * SATA_ALIGN_FACTOR + self.fis_turnaround_ns
    }

    /// Time the SATA link needs for one NCQ command moving `bs` bytes.
    pub(crate) fn link_ns(&self, read: bool, bs: u64) -> f64 {
        let full = bs / SATA_DATA_FIS_BYTES;
        let rest = bs % SATA_DATA_FIS_BYTES;
        let mut data =
            full as f64 * self.fis_ns(DATA_FIS_HEADER_DW + (SATA_DATA_FIS_BYTES / DWORD) as f64);
        if rest > 0 {
            data += self.fis_ns(DATA_FIS_HEADER_DW + rest.div_ceil(DWORD) as f64);
        }
        let data_fises = (full + u64::from(rest > 0)) as f64;
        let activates = if read {
            0.0
        } else {
            data_fises * self.fis_ns(DMA_ACTIVATE_DW)
        };
        self.fis_ns(H2D_REGISTER_DW)
            + self.fis_ns(DMA_SETUP_DW)
            + self.fis_ns(SET_DEVICE_BITS_DW)
            + data
            + activates
    }
}

/// The per-command latency for the direction, from the microseconds a device spec gives.
fn latency_ns(read: bool, read_us: f64, write_us: f64) -> f64 {
    1000.0 * if read { read_us } else { write_us }
}

fn mb_per_s_to_ns(bytes: u64, mbps: f64) -> f64 {
    bytes as f64 / (mbps * 1e6) * 1e9
}

impl BlockDevice for Ahci {
    /// The disk serves one command's data at a time: reads are bound by the SATA link or the
    /// NAND read rate, writes by the link or the NAND program rate, whichever is slower.
    fn service_ns(&self, read: bool, bs: u64) -> f64 {
        let media = mb_per_s_to_ns(
            bs,
            if read {
                self.media_read_mbps
            } else {
                self.program_mbps
            },
        );
        self.link_ns(read, bs).max(media)
    }

    fn latency_ns(&self, read: bool) -> f64 {
        latency_ns(read, self.read_latency_us, self.write_latency_us)
    }

    fn queue_depth(&self) -> u32 {
        self.ncq_depth
    }

    fn io_tlps(&self, read: bool, bs: u64, f: &LinkParams) -> Vec<Run> {
        let prd_entries = bs.div_ceil(self.prd_segment_bytes).max(1);
        let mut runs = Vec::new();
        // Issue: the driver sets the tag in PxSACT and PxCI.
        runs.extend(tlp::mmio_write(DWORD, f));
        runs.extend(tlp::mmio_write(DWORD, f));
        // The HBA fetches the command header, the command FIS and the PRD table.
        runs.extend(tlp::dma_read(AHCI_COMMAND_HEADER, f));
        runs.extend(tlp::dma_read(H2D_REGISTER_DW as u64 * DWORD, f));
        runs.extend(tlp::dma_read(prd_entries * AHCI_PRD_ENTRY, f));
        // Data: a disk read is DMA-written to memory, a disk write DMA-read from it.
        if read {
            runs.extend(tlp::dma_write(bs, f));
        } else {
            runs.extend(tlp::dma_read(bs, f));
        }
        // Received-FIS area: DMA Setup and Set Device Bits FIS; then the MSI.
        runs.extend(tlp::dma_write(DMA_SETUP_DW as u64 * DWORD, f));
        runs.extend(tlp::dma_write(SET_DEVICE_BITS_DW as u64 * DWORD, f));
        runs.extend(tlp::dma_write(DWORD, f));
        // Interrupt handler: read IS and PxIS, clear both, read PxSACT.
        runs.extend(tlp::mmio_read(DWORD, f));
        runs.extend(tlp::mmio_read(DWORD, f));
        runs.extend(tlp::mmio_write(DWORD, f));
        runs.extend(tlp::mmio_write(DWORD, f));
        runs.extend(tlp::mmio_read(DWORD, f));
        runs
    }

    fn capacity_bytes(&self) -> Option<u64> {
        self.capacity_bytes
    }
}

impl BlockDevice for Nvme {
    /// Bound by the drive's bandwidth or its IOPS for that direction.
    fn service_ns(&self, read: bool, bs: u64) -> f64 {
        let (mbps, iops) = if read {
            (self.read_mbps, self.read_iops)
        } else {
            (self.write_mbps, self.write_iops)
        };
        crate::model::io::drive_service_ns(bs, mbps, iops)
    }

    fn latency_ns(&self, read: bool) -> f64 {
        latency_ns(read, self.read_latency_us, self.write_latency_us)
    }

    fn queue_depth(&self) -> u32 {
        self.queue_depth
    }

    fn io_tlps(&self, read: bool, bs: u64, f: &LinkParams) -> Vec<Run> {
        let mut runs = Vec::new();
        runs.extend(tlp::mmio_write(DWORD, f)); // SQ tail doorbell
        runs.extend(tlp::dma_read(NVME_SQE, f));
        // PRP1 and PRP2 cover two pages; beyond that PRP2 points at a list of the rest.
        let pages = bs.div_ceil(PAGE);
        if pages > 2 {
            runs.extend(tlp::dma_read((pages - 1) * NVME_PRP_ENTRY, f));
        }
        if read {
            runs.extend(tlp::dma_write(bs, f));
        } else {
            runs.extend(tlp::dma_read(bs, f));
        }
        runs.extend(tlp::dma_write(NVME_CQE, f));
        runs.extend(tlp::dma_write(DWORD, f)); // MSI-X
        runs.extend(tlp::mmio_write(DWORD, f)); // CQ head doorbell
        runs
    }

    fn capacity_bytes(&self) -> Option<u64> {
        self.capacity_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::tlp::tests::gen2 as format;
    use crate::sim::tlp::{Bundle, Dir, Kind};
    use std::collections::BTreeMap;

    fn seed_disk() -> Ahci {
        Ahci {
            sata_gbps: 6.0,
            ncq_depth: 32,
            fis_turnaround_ns: 1000.0,
            media_read_mbps: 1500.0,
            program_mbps: 230.0,
            read_latency_us: 90.0,
            write_latency_us: 40.0,
            prd_segment_bytes: 65536,
            capacity_bytes: None,
        }
    }

    #[test]
    fn sata_link_bounds_reads_and_program_rate_bounds_writes() {
        let d = seed_disk();
        let read_mb_s = (1u64 << 20) as f64 / d.service_ns(true, 1 << 20) * 1e3;
        // 600 MB/s of dwords, less ALIGNs, framing and handshakes: about 553 MB/s.
        assert!((550.0..556.0).contains(&read_mb_s), "{read_mb_s}");
        let write_mb_s = (1u64 << 20) as f64 / d.service_ns(false, 1 << 20) * 1e3;
        assert!((write_mb_s - 230.0).abs() < 0.01, "{write_mb_s}");
    }

    #[test]
    fn one_ahci_read_carries_data_plus_protocol() {
        let d = seed_disk();
        let b = Bundle::new(d.io_tlps(true, 1 << 20, &format()), format());
        let up = Dir::Up as usize;
        // Data in 8192 MWr of 128 B, plus DMA Setup (28), SDB (8), MSI (4) and three 4-byte
        // register read completions: 1 MiB + 52 bytes, or 65,536 + 7 sixteen-byte units.
        assert_eq!(b.total.payload_bytes[up], (1 << 20) + 28 + 8 + 4 + 12);
        assert_eq!(b.total.payload_units[up], 65_536 + 2 + 1 + 1 + 3);
        assert_eq!(b.total.count(Dir::Up, Kind::MemWrite), 8192 + 3);
        // Down: doorbells and handler writes (4 MWr), header/CFIS/PRD completions.
        assert_eq!(b.total.count(Dir::Down, Kind::MemWrite), 4);
        assert_eq!(
            b.total.payload_bytes[Dir::Down as usize],
            16 + 32 + 20 + 16 * 16
        );
    }

    #[test]
    fn device_tables_are_validated() {
        let mut f = Function::new(
            "04:00.0".parse().unwrap(),
            0x1b4b,
            0x9235,
            0x010601,
            crate::topology::Kind::Endpoint,
        );
        assert_eq!(
            Device::from_function(&f, &PlatformModel::default()).unwrap(),
            None
        );
        let params: BTreeMap<String, toml::Value> =
            toml::from_str("model = \"ahci\"\nprogram_mbps = 230\nserial = \"x\"\n").unwrap();
        f.params = params;
        match Device::from_function(&f, &PlatformModel::default()).unwrap() {
            Some(Device::Ahci(a)) => assert_eq!(a.program_mbps, 230.0),
            other => panic!("{other:?}"),
        }
        f.params = toml::from_str("model = \"ahci\"\nprogram_mbs = 230\n").unwrap();
        let e = Device::from_function(&f, &PlatformModel::default()).unwrap_err();
        assert!(
            e.message().contains("program_mbs") && e.message().contains("0000:04:00.0"),
            "{e}"
        );
        // Engine timing moved to the platform model: an old spec fails saying where it went.
        f.params = toml::from_str("model = \"dma\"\nsetup_ns = 4300\n").unwrap();
        let e = Device::from_function(&f, &PlatformModel::default()).unwrap_err();
        assert!(e.message().contains("[platform.dma] setup_ns"), "{e}");
        f.params = toml::from_str("model = \"pcie-root-port\"\nchassis = 1\n").unwrap();
        assert_eq!(
            Device::from_function(&f, &PlatformModel::default()).unwrap(),
            None
        );
    }
}
