//! A server-shaped topology of a chosen size, for benchmarks and tests that need a big host
//! (`pcielab bench observe`, the read plan's tests): two PCI domains (one per socket, NUMA node =
//! domain), each with a host bridge and eight Gen5 x16 root ports. On each domain four root
//! ports lead to a Gen5 switch with twelve Gen4 x4 downstream ports, each holding an NVMe drive
//! (96 drives), and four lead to a switch with four Gen5 x16 downstream ports, each holding a
//! dual-port NIC (32 NICs). The NICs' two physical functions share the rest of the requested
//! function count as SR-IOV virtual functions on their bus (up to 254 per NIC), as a host with
//! VFs enabled shows them. Nothing is named, so readers name functions from pci.ids, as they do
//! on a real host. [`crate::topology::export::export_sysfs`] turns it into a sysfs tree.

use crate::error::{Error, Result};
use crate::pcie::Generation::{Gen4, Gen5};
use crate::pcie::{Bdf, Generation};
use crate::topology::{Function, Kind, Link, Topology};

const DOMAINS: u16 = 2;
const ROOT_PORTS_PER_DOMAIN: u8 = 8;
/// Of each domain's root ports, the first this many lead to NVMe switches, the rest to NICs.
const NVME_ROOT_PORTS: u8 = 4;
const NVME_PER_SWITCH: u8 = 12;
const NICS_PER_SWITCH: u8 = 4;
/// A NIC's physical functions (one per network port).
const NIC_PFS: u8 = 2;
/// Functions one bus holds (32 devices × 8 functions): a NIC's PFs and VFs share its bus.
const FUNCTIONS_PER_BUS: usize = 256;

// Vendor and device ids of real parts, so pci.ids names them as lspci would.
const HOST_BRIDGE: (u16, u16, u32) = (0x8086, 0x09a2, 0x060000);
const ROOT_PORT: (u16, u16, u32) = (0x8086, 0x352a, 0x060400);
const SWITCH: (u16, u16, u32) = (0x1000, 0xc030, 0x060400);
const NVME: (u16, u16, u32) = (0x144d, 0xa824, 0x010802);
const NIC_PF: (u16, u16, u32) = (0x15b3, 0x101d, 0x020000);
const NIC_VF: (u16, u16, u32) = (0x15b3, 0x101e, 0x020000);

/// Functions the shape has before any VF: per domain a host bridge, the root ports, and per
/// switch its upstream port, downstream ports and devices.
pub(crate) const FIXED_FUNCTIONS: usize = DOMAINS as usize
    * (1 + ROOT_PORTS_PER_DOMAIN as usize
        + NVME_ROOT_PORTS as usize * (1 + 2 * NVME_PER_SWITCH as usize)
        + (ROOT_PORTS_PER_DOMAIN - NVME_ROOT_PORTS) as usize
            * (1 + NICS_PER_SWITCH as usize * (1 + NIC_PFS as usize)));

/// NICs in the whole shape.
const NICS: usize = DOMAINS as usize
    * (ROOT_PORTS_PER_DOMAIN - NVME_ROOT_PORTS) as usize
    * NICS_PER_SWITCH as usize;

/// The most functions the shape holds: every NIC's bus full of VFs.
pub(crate) const MAX_FUNCTIONS: usize =
    FIXED_FUNCTIONS + NICS * (FUNCTIONS_PER_BUS - NIC_PFS as usize);

/// A server with exactly `functions` PCI functions (from `FIXED_FUNCTIONS` to
/// `MAX_FUNCTIONS`); outside that range is bad input naming it.
pub fn server(functions: usize) -> Result<Topology> {
    if !(FIXED_FUNCTIONS..=MAX_FUNCTIONS).contains(&functions) {
        return Err(Error::bad_input(format!(
            "--functions {functions}: the server shape holds {FIXED_FUNCTIONS} to \
             {MAX_FUNCTIONS} functions (2 domains, 16 root ports, 96 NVMe drives, 32 NICs and \
             their SR-IOV VFs)"
        )));
    }
    let mut out = Vec::with_capacity(functions);
    let mut vfs_left = functions - FIXED_FUNCTIONS;
    let mut nics_left = NICS;
    for domain in 0..DOMAINS {
        let mut builder = Builder {
            domain,
            next_bus: 1,
            out: &mut out,
        };
        builder.push(
            Bdf::new(domain, 0, 0, 0),
            None,
            HOST_BRIDGE,
            Kind::HostBridge,
            None,
        );
        for port in 0..ROOT_PORTS_PER_DOMAIN {
            let rp = Bdf::new(domain, 0, port + 1, 0);
            if port < NVME_ROOT_PORTS {
                builder.switch(rp, NVME_PER_SWITCH, Gen4, 4, |b, dsp, bus| {
                    b.push(
                        Bdf::new(domain, bus, 0, 0),
                        Some(dsp),
                        NVME,
                        Kind::Endpoint,
                        Some(((Gen4, 4), "nvme")),
                    );
                });
            } else {
                builder.switch(rp, NICS_PER_SWITCH, Gen5, 16, |b, dsp, bus| {
                    // Spread the VFs evenly: this NIC takes its share of what is left.
                    let vfs = vfs_left.div_ceil(nics_left);
                    vfs_left -= vfs;
                    nics_left -= 1;
                    // PFs are functions 0 and 1; the VFs follow them on the same bus.
                    for i in 0..NIC_PFS as usize + vfs {
                        let (id, driver) = if i < NIC_PFS as usize {
                            (NIC_PF, "mlx5_core")
                        } else {
                            (NIC_VF, "vfio-pci")
                        };
                        b.push(
                            Bdf::new(domain, bus, (i / 8) as u8, (i % 8) as u8),
                            Some(dsp),
                            id,
                            Kind::Endpoint,
                            Some(((Gen5, 16), driver)),
                        );
                    }
                });
            }
        }
    }
    Ok(Topology::new(out))
}

/// Places one domain's functions, handing out bus numbers depth first as firmware does.
struct Builder<'a> {
    domain: u16,
    next_bus: u8,
    out: &'a mut Vec<Function>,
}

impl Builder<'_> {
    fn push(
        &mut self,
        bdf: Bdf,
        parent: Option<Bdf>,
        (vendor, device, class): (u16, u16, u32),
        kind: Kind,
        link_and_driver: Option<((Generation, u8), &str)>,
    ) -> usize {
        let mut f = Function::new(bdf, vendor, device, class, kind);
        f.driver_source = super::FactSource::Spec;
        f.parent = parent;
        f.numa_node = Some(i32::from(self.domain));
        f.aer = kind != Kind::HostBridge;
        if let Some((gen_width, driver)) = link_and_driver {
            f.link = Some(Link::trained(gen_width, gen_width));
            f.driver = Some(driver.into());
        }
        if kind != Kind::HostBridge {
            f.mps_supported = Some(512);
            f.mps = Some(256);
            f.mrrs = Some(512);
        }
        self.out.push(f);
        self.out.len() - 1
    }

    fn bridge(
        &mut self,
        bdf: Bdf,
        parent: Option<Bdf>,
        id: (u16, u16, u32),
        kind: Kind,
        link: (Generation, u8),
    ) -> usize {
        let i = self.push(bdf, parent, id, kind, None);
        self.out[i].link = Some(Link::trained(link, link));
        i
    }

    /// A root port `rp` with a switch below it: `ports` downstream ports of `gen` x`width`,
    /// each with what `device` puts on its secondary bus.
    fn switch(
        &mut self,
        rp: Bdf,
        ports: u8,
        gen: Generation,
        width: u8,
        mut device: impl FnMut(&mut Self, Bdf, u8),
    ) {
        let rp_index = self.bridge(rp, None, ROOT_PORT, Kind::RootPort, (Gen5, 16));
        let up_bus = self.take_bus();
        let up = Bdf::new(self.domain, up_bus, 0, 0);
        let up_index = self.bridge(up, Some(rp), SWITCH, Kind::SwitchUpstream, (Gen5, 16));
        let down_bus = self.take_bus();
        for port in 0..ports {
            let dsp = Bdf::new(self.domain, down_bus, port, 0);
            let dsp_index =
                self.bridge(dsp, Some(up), SWITCH, Kind::SwitchDownstream, (gen, width));
            let bus = self.take_bus();
            device(self, dsp, bus);
            self.out[dsp_index].buses = Some((bus, bus));
        }
        let last = self.next_bus - 1;
        self.out[up_index].buses = Some((down_bus, last));
        self.out[rp_index].buses = Some((up_bus, last));
    }

    fn take_bus(&mut self) -> u8 {
        let bus = self.next_bus;
        self.next_bus += 1;
        bus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_has_the_counts_it_promises() {
        for n in [FIXED_FUNCTIONS, 4096, 8192, MAX_FUNCTIONS] {
            let topo = server(n).unwrap();
            let f = topo.functions();
            assert_eq!(f.len(), n);
            let count = |kind| f.iter().filter(|x| x.kind == kind).count();
            assert_eq!(count(Kind::RootPort), 16);
            assert_eq!(count(Kind::HostBridge), 2);
            assert_eq!(f.iter().filter(|x| x.device == NVME.1).count(), 96);
            assert_eq!(f.iter().filter(|x| x.device == NIC_PF.1).count(), 64);
            // Every function's parent exists and sits on a lower bus; addresses are unique.
            for x in f {
                if let Some(p) = x.parent {
                    let parent = topo.get(p).unwrap();
                    let (sec, sub) = parent.buses.unwrap();
                    assert!((sec..=sub).contains(&x.bdf.bus), "{} below {}", x.bdf, p);
                }
            }
            let mut bdfs: Vec<Bdf> = f.iter().map(|x| x.bdf).collect();
            bdfs.dedup();
            assert_eq!(bdfs.len(), n);
        }
        for bad in [FIXED_FUNCTIONS - 1, MAX_FUNCTIONS + 1] {
            assert_eq!(server(bad).unwrap_err().exit_code(), 2);
        }
    }
}
