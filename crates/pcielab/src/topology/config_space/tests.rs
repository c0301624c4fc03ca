use super::*;
use crate::pcie::bdf;
use crate::pcie::Generation::*;

fn root_port() -> Function {
    let mut f = Function::new(bdf("00:02.0"), 0x1ded, 0x8000, 0x060400, Kind::RootPort);
    f.revision = 1;
    f.buses = Some((4, 6));
    f.link = Some(Link::trained((Gen5, 4), (Gen2, 2)));
    f.mps_supported = Some(512);
    f.mps = Some(256);
    f.mrrs = Some(1024);
    f.aspm_supported = Aspm {
        l0s: true,
        l1: true,
    };
    f.aspm_enabled = Aspm {
        l0s: false,
        l1: true,
    };
    f.acs = Some(Acs {
        capability: 0x1f,
        control: 0x1d,
    });
    f.aer = true;
    f
}

#[test]
fn encoded_registers_sit_where_the_spec_puts_them() {
    let b = encode(&root_port());
    assert_eq!(b.len(), EXTENDED_SIZE);
    assert_eq!(&b[0..4], &[0xed, 0x1d, 0x00, 0x80]);
    assert_eq!(b[HEADER_TYPE], 1);
    assert_eq!((b[0x18], b[0x19], b[0x1a]), (0, 4, 6));
    assert_eq!(b[CAP_PTR], 0x40);
    // PCIe capabilities register: version 2, type 4 (root port).
    assert_eq!(u16_at(&b, 0x42), 0x0042);
    // LnkCap: speed 5, width 4 at bits 9:4, ASPM L0s+L1 at 11:10, port number 2.
    assert_eq!(u32_at(&b, 0x4c), 0x0200_0c45);
    // LnkSta: speed 2, width 2.
    assert_eq!(u16_at(&b, 0x52), 0x0022);
    // DevCtl: MPS 256 (code 1 at bits 7:5), MRRS 1024 (code 3 at 14:12).
    assert_eq!(u16_at(&b, 0x48), 0x3020);
    // LnkCap2 supported speeds 2.5 through 32 GT/s.
    assert_eq!(u32_at(&b, 0x6c), 0x3e);
    // AER at 0x100 chains to ACS at 0x148.
    assert_eq!(u32_at(&b, 0x100), 0x1482_0001);
    assert_eq!(u32_at(&b, 0x148), 0x0001_000d);
}

#[test]
fn decode_inverts_encode() {
    let f = root_port();
    let d = decode(&encode(&f)).unwrap();
    assert!(d.capabilities_read);
    assert_eq!(
        (d.vendor, d.device, d.class, d.revision),
        (0x1ded, 0x8000, 0x060400, 1)
    );
    assert_eq!(d.buses, Some((4, 6)));
    let e = d.express.unwrap();
    assert_eq!(
        kind_of(Some(e.port_type), d.class, d.header_type),
        Kind::RootPort
    );
    assert_eq!(e.link, f.link);
    assert_eq!((e.mps_supported, e.mps, e.mrrs), (512, 256, 1024));
    assert_eq!(
        (e.aspm_supported, e.aspm_enabled),
        (f.aspm_supported, f.aspm_enabled)
    );
    assert_eq!(d.acs, f.acs);
    assert!(d.aer);
}

#[test]
fn truncated_and_conventional_spaces() {
    let full = encode(&root_port());
    let short = decode(&full[..UNPRIVILEGED_SIZE]).unwrap();
    assert!(!short.capabilities_read);
    assert_eq!(short.express, None);
    assert_eq!(short.buses, Some((4, 6)));
    assert!(decode(&full[..32]).is_none());

    let mut vga = Function::new(bdf("02:00.0"), 0x1a03, 0x2000, 0x030000, Kind::Endpoint);
    vga.subsystem_vendor = 0x1a03;
    let b = encode(&vga);
    assert_eq!(b.len(), LEGACY_SIZE);
    let d = decode(&b).unwrap();
    assert!(d.capabilities_read && d.express.is_none());
    assert_eq!(d.subsystem_vendor, 0x1a03);
    assert_eq!(kind_of(None, d.class, d.header_type), Kind::Endpoint);
}

#[test]
fn link_down_and_unknown_links_survive() {
    let mut f = root_port();
    f.link = Some(Link {
        max_speed: None,
        max_width: None,
        speed: Some(Gen1),
        width: Some(0),
    });
    let e = decode(&encode(&f)).unwrap().express.unwrap();
    assert_eq!(e.link, f.link);
    f.kind = Kind::RcEndpoint;
    f.link = None;
    let e = decode(&encode(&f)).unwrap().express.unwrap();
    assert_eq!(e.port_type, port_type::RC_ENDPOINT);
    assert_eq!(e.link, None);
}

mod detail {
    use super::super::*;
    use crate::pcie::bdf;
    use crate::pcie::Generation::*;

    fn nvme() -> Function {
        let mut f = Function::new(bdf("01:00.0"), 0x144d, 0xa808, 0x010802, Kind::Endpoint);
        f.link = Some(Link::trained((Gen4, 4), (Gen3, 4)));
        f.aspm_supported = Aspm {
            l0s: true,
            l1: true,
        };
        f.aer = true;
        f.aer_masks = Some(AerMasks {
            uncorrectable_mask: 1 << 16,
            uncorrectable_severity: 0x0006_2030,
            correctable_mask: 1 << 13,
        });
        f.aer_status = Some(AerStatus {
            uncorrectable: 1 << 14,
            correctable: (1 << 0) | (1 << 6),
        });
        f.express_detail = ExpressDetail {
            features: DeviceFeatures {
                ext_tag_supported: Some(true),
                ext_tag_enabled: Some(false),
                relaxed_ordering_enabled: Some(true),
                ten_bit_tag_completer: Some(true),
                ten_bit_tag_requester: Some(true),
                ten_bit_tag_requester_enabled: Some(false),
            },
            errors_detected: Some(0b0101),
            l0s_acceptable: Some(AspmLatency::l0s(6)),
            l1_acceptable: Some(AspmLatency::l1(7)),
            l0s_exit: Some(AspmLatency::l0s(3)),
            l1_exit: Some(AspmLatency::l1(5)),
            dl_active_reporting: Some(false),
            dl_active: Some(false),
            supported_speeds: Some(0b1111),
            crosslink: Some(true),
            target_speed: Some(Gen3),
            status2: Some(LinkStatus2 {
                equalization_complete: true,
                equalization_phase1: true,
                equalization_phase2: false,
                equalization_phase3: true,
                equalization_request: false,
                crosslink_resolution: Some(1),
            }),
        };
        f
    }

    #[test]
    fn detail_registers_sit_where_the_spec_puts_them_and_read_back() {
        let f = nvme();
        let b = encode(&f);
        // DevCap: acceptable L0s code 6 at bits 8:6, L1 code 7 at 11:9, RBE (bit 15).
        assert_eq!(u32_at(&b, 0x44) & 0xfc0, (6 << 6) | (7 << 9));
        // DevCap: Extended Tag supported (bit 5); DevCtl: Relaxed Ordering (bit 4) on,
        // Extended Tag (bit 8) off, over MPS 128 and MRRS 512 (code 2 at 14:12); DevSta:
        // correctable and fatal errors detected (bits 0 and 2).
        assert_eq!(u32_at(&b, 0x44) & (1 << 5), 1 << 5);
        assert_eq!(u16_at(&b, 0x48), (2 << 12) | (1 << 4));
        assert_eq!(u16_at(&b, 0x4a), 0b0101);
        // DevCap2: 10-bit tag completer and requester (bits 16, 17); DevCtl2: requester
        // enable (bit 12) clear.
        assert_eq!(u32_at(&b, 0x64), 0x3 << 16);
        assert_eq!(u16_at(&b, 0x68), 0);
        // AER: uncorrectable status at +4 (CmpltTO, bit 14), correctable at +0x10.
        assert_eq!(u32_at(&b, 0x104), 1 << 14);
        assert_eq!(u32_at(&b, 0x110), 0x41);
        // LnkCap: L0s exit code 3 at 14:12, L1 exit code 5 at 17:15, DLLA (bit 20) clear.
        assert_eq!(u32_at(&b, 0x4c) & 0x1f_f000, (3 << 12) | (5 << 15));
        // LnkCap2: speeds 2.5-16 GT/s at bits 4:1, crosslink bit 8; LnkCtl2 target 3.
        assert_eq!(u32_at(&b, 0x6c), 0x11e);
        assert_eq!(u16_at(&b, 0x70), 3);
        // LnkSta2: equalization complete, phases 1 and 3, crosslink resolved upstream.
        assert_eq!(u16_at(&b, 0x72), 0x0116);
        // AER masks at +8, +0xc, +0x14 of the capability at 0x100.
        assert_eq!(u32_at(&b, 0x108), 1 << 16);
        assert_eq!(u32_at(&b, 0x10c), 0x0006_2030);
        assert_eq!(u32_at(&b, 0x114), 1 << 13);
        let d = decode(&b).unwrap();
        assert_eq!(d.aer_masks, f.aer_masks);
        assert_eq!(d.aer_status, f.aer_status);
        let e = d.express.unwrap();
        assert_eq!(e.version, 2);
        let mut back = Function::new(f.bdf, 0, 0, 0, Kind::Endpoint);
        back.take_express_detail(&e);
        assert_eq!(back.express_detail, f.express_detail);
        assert_eq!(
            back.express_detail.speeds(),
            Some(vec![Gen1, Gen2, Gen3, Gen4])
        );
    }

    #[test]
    fn what_lspci_would_not_print_stays_unknown() {
        let mut f = nvme();
        // Without ASPM support a state has no exit latency to read.
        f.aspm_supported = Aspm {
            l0s: false,
            l1: true,
        };
        // A second function of the endpoint: its LnkCap2/LnkCtl2 are not function 0's.
        f.bdf = bdf("01:00.1");
        let e = decode(&encode(&f)).unwrap().express.unwrap();
        let mut back = Function::new(f.bdf, 0, 0, 0, Kind::Endpoint);
        back.take_express_detail(&e);
        let d = back.express_detail;
        assert_eq!((d.l0s_exit, d.l1_exit), (None, Some(AspmLatency::l1(5))));
        assert_eq!(
            (d.supported_speeds, d.crosslink, d.target_speed),
            (None, None, None)
        );
        assert!(d.status2.is_some());
        // A root port accepts no latency (DevCap's fields are an endpoint's), and an LnkCtl2
        // target hardwired to 0 reads as 2.5 GT/s.
        let mut b = encode(&f);
        b[0x42] = 0x42;
        b[0x70] = 0;
        let e = decode(&b).unwrap().express.unwrap();
        assert_eq!(
            (e.detail.l0s_acceptable, e.detail.l1_acceptable),
            (None, None)
        );
        assert_eq!(e.detail.target_speed, Some(Gen1));
        // Version 1 of the capability has no version-2 registers.
        b[0x42] = 0x41;
        let e = decode(&b).unwrap().express.unwrap();
        assert_eq!((e.detail.supported_speeds, e.detail.status2), (None, None));
        assert_eq!(
            (
                e.detail.features.ten_bit_tag_completer,
                e.detail.features.ten_bit_tag_requester_enabled
            ),
            (None, None)
        );
        assert_eq!(e.detail.features.ext_tag_supported, Some(true));
        assert_eq!(e.detail.dl_active, Some(false));
    }
}

mod round_trip {
    use super::super::*;
    use proptest::prelude::*;

    const KINDS: [Kind; 7] = [
        Kind::HostBridge,
        Kind::RootPort,
        Kind::SwitchUpstream,
        Kind::SwitchDownstream,
        Kind::Endpoint,
        Kind::RcEndpoint,
        Kind::PciBridge,
    ];
    const WIDTHS: [u8; 7] = [1, 2, 4, 8, 12, 16, 32];
    const SIZES: [u16; 6] = [128, 256, 512, 1024, 2048, 4096];

    fn generation() -> impl Strategy<Value = Option<Generation>> {
        prop::option::of((1u8..=7).prop_map(|n| Generation::from_number(n).unwrap()))
    }

    fn aspm() -> impl Strategy<Value = Aspm> {
        (any::<bool>(), any::<bool>()).prop_map(|(l0s, l1)| Aspm { l0s, l1 })
    }

    prop_compose! {
        fn function()(
            kind in prop::sample::select(KINDS.to_vec()),
            ids in (any::<u16>(), any::<u16>(), 0u32..0x100_0000, any::<u8>()),
            subsystem in (any::<u16>(), any::<u16>()),
            bus in 0u8..0xf0, dev in 0u8..32, func in 0u8..8,
            buses in (any::<u8>(), any::<u8>()),
            has_link in any::<bool>(),
            max in (generation(), prop::sample::select(WIDTHS.to_vec())),
            sta in (generation(), prop::sample::select(vec![0u8, 1, 2, 4, 8, 16, 32])),
            sizes in (prop::sample::select(SIZES.to_vec()), prop::sample::select(SIZES.to_vec()), prop::sample::select(SIZES.to_vec())),
            aspm in (aspm(), aspm()),
            acs in prop::option::of((any::<u16>(), any::<u16>())),
            aer in any::<bool>(),
        ) -> Function {
            // Without the PCI Express capability only the class tells the kind (spec readers
            // enforce this), so such functions get a class that says it.
            let class = match kind {
                Kind::HostBridge => 0x06_0000 | (ids.2 & 0xff),
                Kind::PciBridge if !has_link => 0x06_0400 | (ids.2 & 0xff),
                Kind::Endpoint if !has_link && matches!(ids.2 >> 8, 0x0600 | 0x0604 | 0x0609) => 0x01_0802,
                _ => ids.2,
            };
            let mut f = Function::new(Bdf::new(0, bus, dev, func), ids.0, ids.1, class, kind);
            f.revision = ids.3;
            f.subsystem_vendor = subsystem.0;
            f.subsystem_device = subsystem.1;
            if kind.is_bridge() {
                f.buses = Some(buses);
            }
            let ports = matches!(kind, Kind::RootPort | Kind::SwitchUpstream | Kind::SwitchDownstream);
            let linked = ports || (has_link && matches!(kind, Kind::Endpoint | Kind::PciBridge));
            if linked {
                // Unknown speeds pair with unknown (0) widths, as LnkCap/LnkSta encode them.
                f.link = Some(Link {
                    max_speed: max.0,
                    max_width: max.0.map(|_| max.1),
                    speed: sta.0,
                    width: sta.0.map(|_| sta.1),
                });
                f.aspm_supported = aspm.0;
                f.aspm_enabled = aspm.1;
            }
            if has_express(kind, f.link.as_ref()) {
                f.mps_supported = Some(sizes.0);
                f.mps = Some(sizes.1);
                f.mrrs = Some(sizes.2);
                // Only the bits lspci prints are kept (ACS_SHOWN_BITS).
                f.acs = acs.map(|(capability, control)| Acs {
                    capability: capability & ACS_SHOWN_BITS,
                    control: control & ACS_SHOWN_BITS,
                });
                f.aer = aer;
            }
            f
        }
    }

    use crate::pcie::Bdf;

    proptest! {
        #[test]
        fn decode_of_encode_is_identity(f in function()) {
            let bytes = encode(&f);
            let d = decode(&bytes).unwrap();
            prop_assert!(d.capabilities_read);
            prop_assert_eq!((d.vendor, d.device, d.class, d.revision), (f.vendor, f.device, f.class, f.revision));
            prop_assert_eq!((d.subsystem_vendor, d.subsystem_device), (f.subsystem_vendor, f.subsystem_device));
            prop_assert_eq!(d.buses, f.buses);
            prop_assert_eq!(kind_of(d.express.map(|e| e.port_type), d.class, d.header_type), f.kind);
            match d.express {
                None => prop_assert!(!has_express(f.kind, f.link.as_ref())),
                Some(e) => {
                    prop_assert_eq!(e.link, f.link);
                    prop_assert_eq!(Some(e.mps_supported), f.mps_supported);
                    prop_assert_eq!(Some(e.mps), f.mps);
                    prop_assert_eq!(Some(e.mrrs), f.mrrs);
                    prop_assert_eq!(e.aspm_supported, f.aspm_supported);
                    prop_assert_eq!(e.aspm_enabled, f.aspm_enabled);
                }
            }
            prop_assert_eq!(d.acs, f.acs);
            prop_assert_eq!(d.aer, f.aer);
        }
    }
}
