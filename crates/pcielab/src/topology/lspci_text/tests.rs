use super::*;
use crate::pcie::bdf;
use crate::pcie::Generation::*;
use crate::topology::lspci::read_lspci;
use crate::topology::{ExpressDetail, Kind};

/// As `lspci -vvnn` prints an empty hotplug slot's root port and a NIC below another port
/// whose link is narrower than the NIC can do (from real server listings).
const SERVER: &str = "\
00:01.0 PCI bridge [0604]: Intel Corporation Xeon E5/Core i7 IIO PCI Express Root Port 1a [8086:3c02] (rev 07) (prog-if 00 [Normal decode])
\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx+
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [90] Express (v2) Root Port (Slot+), MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0
\t\tDevCtl:\tCorrErr- NonFatalErr- FatalErr- UnsupReq-
\t\t\tRlxdOrd- ExtTag- PhantFunc- AuxPwr- NoSnoop-
\t\t\tMaxPayload 256 bytes, MaxReadReq 128 bytes
\t\tLnkCap:\tPort #1, Speed 8GT/s, Width x8, ASPM L1, Exit Latency L1 <16us
\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk-
\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x0 (downgraded)
\t\t\tTrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-
\tCapabilities: [110 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\tCapabilities: [148 v1] Advanced Error Reporting
\tKernel driver in use: pcieport

00:02.0 PCI bridge [0604]: Intel Corporation Xeon E5/Core i7 IIO PCI Express Root Port 2a [8086:3c04] (rev 07) (prog-if 00 [Normal decode])
\tBus: primary=00, secondary=02, subordinate=02, sec-latency=0
\tCapabilities: [90] Express (v2) Root Port (Slot+), MSI 00
\t\tLnkCap:\tPort #2, Speed 8GT/s, Width x4, ASPM L0s L1, Exit Latency L0s <512ns, L1 <16us
\t\tLnkCtl:\tASPM L1 Enabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 8GT/s, Width x4
\tNUMA node: 1

02:00.0 Ethernet controller [0200]: Intel Corporation 82599ES 10-Gigabit SFI/SFP+ Network Connection [8086:10fb] (rev 01)
\tSubsystem: Intel Corporation Ethernet Server Adapter X520-2 [8086:0003]
\tCapabilities: [a0] Express (v2) Endpoint, MSI 00
\t\tDevCap:\tMaxPayload 512 bytes, PhantFunc 0, Latency L0s <512ns, L1 <64us
\t\t\tMaxPayload 256 bytes, MaxReadReq 512 bytes
\t\tLnkCap:\tPort #0, Speed 5GT/s, Width x8, ASPM L0s, Exit Latency L0s <1us
\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+
\t\tLnkSta:\tSpeed 5GT/s (ok), Width x4 (downgraded)
\tKernel driver in use: ixgbe
";

#[test]
fn verbose_text_gives_ids_links_acs_and_the_tree() {
    let read = read_lspci("server.txt", SERVER).unwrap();
    assert_eq!(read.format, LspciFormat::Verbose);
    let topo = read.topology;
    let slot = topo.get(bdf("00:01.0")).unwrap();
    assert_eq!(
        (slot.vendor, slot.device, slot.class, slot.revision),
        (0x8086, 0x3c02, 0x060400, 7)
    );
    assert_eq!(slot.kind, Kind::RootPort);
    assert_eq!(slot.buses, Some((1, 1)));
    assert_eq!(slot.link, Some(Link::trained((Gen3, 8), (Gen1, 0))));
    assert_eq!(
        (slot.mps_supported, slot.mps, slot.mrrs),
        (Some(256), Some(256), Some(128))
    );
    assert_eq!(
        slot.aspm_supported,
        Aspm {
            l0s: false,
            l1: true
        }
    );
    assert!(!slot.aspm_enabled.any());
    assert_eq!(
        slot.acs,
        Some(Acs {
            capability: 0x1f,
            control: 0x1d
        })
    );
    assert!(slot.aer);
    assert_eq!(slot.driver.as_deref(), Some("pcieport"));
    assert_eq!(slot.evidence.line("lnksta").unwrap().0, 11);
    // AER is listed without its registers (an excerpt): its masks and status are unknown.
    assert_eq!(
        slot.evidence.unknown().collect::<Vec<_>>(),
        vec!["aer_masks", "aer_status"]
    );
    assert_eq!((slot.aer_masks, slot.aer_status), (None, None));
    let d = slot.express_detail;
    assert_eq!((d.l0s_exit, d.l1_exit), (None, Some(AspmLatency::l1(4))));
    assert_eq!(d.dl_active, Some(false));
    // No LLActRep line in the excerpt: whether DLActive- means anything is unknown.
    assert_eq!(d.dl_active_reporting, None);
    assert!(!d.data_link_down());
    assert_eq!(
        (d.supported_speeds, d.target_speed, d.status2),
        (None, None, None)
    );

    let port = topo.get(bdf("00:02.0")).unwrap();
    assert_eq!(
        port.aspm_enabled,
        Aspm {
            l0s: false,
            l1: true
        }
    );
    assert_eq!(port.numa_node, Some(1));
    // No extended capability listed: ACS and AER are unknown, not absent.
    assert!(port.acs_unreadable);
    assert!(port.evidence.is_unknown("acs"));

    let nic = topo.get(bdf("02:00.0")).unwrap();
    assert_eq!(nic.parent, Some(bdf("00:02.0")));
    assert_eq!(
        (nic.subsystem_vendor, nic.subsystem_device),
        (0x8086, 0x0003)
    );
    assert_eq!(nic.link, Some(Link::trained((Gen2, 8), (Gen2, 4))));
    let d = nic.express_detail;
    assert_eq!(
        (d.l0s_acceptable, d.l1_acceptable),
        (Some(AspmLatency::l0s(3)), Some(AspmLatency::l1(6)))
    );
    assert_eq!((d.l0s_exit, d.l1_exit), (Some(AspmLatency::l0s(4)), None));
    // A port has no acceptable latencies (DevCap prints them for endpoints only).
    assert_eq!(slot.express_detail.l0s_acceptable, None);
    assert_eq!((nic.mps, nic.mrrs), (Some(256), Some(512)));
    assert_eq!(
        nic.evidence.line("lnksta").unwrap().1,
        "\t\tLnkSta:\tSpeed 5GT/s (ok), Width x4 (downgraded)"
    );
}

#[test]
fn a_paste_whose_tabs_became_spaces_reads_the_same() {
    let spaced = SERVER.replace('\t', "    ");
    let strip = |mut topo: Topology| {
        topo.functions_mut()
            .iter_mut()
            .for_each(|f| f.evidence = Default::default());
        topo
    };
    let tabs = strip(read_lspci("tabs.txt", SERVER).unwrap().topology);
    let spaces = strip(read_lspci("spaces.txt", &spaced).unwrap().topology);
    assert_eq!(tabs, spaces);
}

#[test]
fn the_traps_raise_no_downtrained_warning() {
    // The empty slot (x0, DLActive-) and the x8 NIC in an x4 slot are not downtrained.
    let topo = read_lspci("server.txt", SERVER).unwrap().topology;
    let warned = crate::topology::check::warnings(&topo);
    assert!(
        !warned
            .values()
            .flatten()
            .any(|w| w.starts_with(crate::topology::check::DOWNTRAINED)),
        "{warned:?}"
    );
    // A real downtrain (an x4 slot and an x4 NIC trained at x1) is still found.
    let narrow = SERVER
        .replace("Width x8, ASPM L0s,", "Width x4, ASPM L0s,")
        .replace("Width x4 (downgraded)", "Width x1 (downgraded)");
    let topo = read_lspci("narrow.txt", &narrow).unwrap().topology;
    let warned = crate::topology::check::warnings(&topo);
    assert!(warned[&bdf("02:00.0")][0].starts_with("downtrained link 0000:00:02.0 -> 0000:02:00.0"));
}

#[test]
fn plain_and_unprivileged_listings_leave_gaps_unknown() {
    // Names no PCI ID database holds: read by name, nothing resolves.
    let plain = "00:1c.0 Frobnicating bridge: Frobozz Magic PCIe Company Device 9d10 (rev f1) (prog-if 00 [Normal decode])
\tBus: primary=00, secondary=02, subordinate=02, sec-latency=0
\tCapabilities: <access denied>
\tKernel driver in use: pcieport

02:00.0 Network controller: Frobozz Magic PCIe Company Wireless 8265 / 8275 (rev 78)
\tCapabilities: <access denied>
";
    let read = read_lspci("user.txt", plain).unwrap();
    assert!(
        read.notes
            .iter()
            .any(|n| n.contains("00:1c.0") && n.contains("lspci -vvv -nn")),
        "{:?}",
        read.notes
    );
    let topo = read.topology;
    let port = topo.get(bdf("00:1c.0")).unwrap();
    assert_eq!(port.class, 0, "a class named in words only is unknown");
    assert_eq!(port.kind, Kind::PciBridge);
    assert_eq!((port.vendor, port.device), (0, 0));
    assert_eq!(
        port.name.as_deref(),
        Some("Frobozz Magic PCIe Company Device 9d10")
    );
    assert_eq!(port.revision, 0xf1);
    assert!(port.acs_unreadable);
    for fact in ["class", "vendor", "device", "capabilities"] {
        assert!(port.evidence.is_unknown(fact), "{fact}");
    }
    let wifi = topo.get(bdf("02:00.0")).unwrap();
    assert_eq!(wifi.parent, Some(bdf("00:1c.0")));
    assert_eq!(wifi.link, None);
    // Text that is not lspci's is refused, naming the line.
    let err = read_lspci("notes.txt", "00:1c.0 PCI bridge: x\nsee above\n").unwrap_err();
    assert!(
        err.message()
            .starts_with("notes.txt:2: 'see above' is not lspci output"),
        "{err}"
    );
}

#[test]
fn old_lspci_words_and_unknown_port_types_keep_the_link() {
    // pciutils before 3.2 (CentOS 6) named a PCIe-to-PCI bridge "PCI/PCI-X Bridge".
    let old = "01:00.0 PCI bridge [0604]: Intel Corporation 80332 [8086:0330] (rev 06)
\tBus: primary=01, secondary=02, subordinate=02, sec-latency=64
\tCapabilities: [44] Express (v1) PCI/PCI-X Bridge, MSI 00
\t\tLnkCap:\tPort #0, Speed 2.5GT/s, Width x8, ASPM L0s, Latency L0 unlimited, L1 unlimited
\t\tLnkSta:\tSpeed 2.5GT/s, Width x8, TrErr- Train- SlotClk- DLActive- BWMgmt- ABWMgmt-
";
    let f = read_lspci("old.txt", old).unwrap().topology.functions()[0].clone();
    assert_eq!(f.kind, Kind::PciBridge);
    // Old lspci printed both latencies whatever the support, `L0` for L0s, and the LnkSta
    // flags on the register's own line.
    let d = f.express_detail;
    assert_eq!((d.l0s_exit, d.l1_exit), (Some(AspmLatency::l0s(7)), None));
    assert_eq!(d.dl_active, Some(false));
    assert_eq!(f.link, Some(Link::trained((Gen1, 8), (Gen1, 8))));
    let unknown = old.replace("PCI/PCI-X Bridge", "Unknown type 12");
    let f = read_lspci("odd.txt", &unknown)
        .unwrap()
        .topology
        .functions()[0]
        .clone();
    assert_eq!(f.kind, Kind::PciBridge, "the class and header say bridge");
    assert_eq!(f.link, Some(Link::trained((Gen1, 8), (Gen1, 8))));
}

#[test]
fn version_2_link_registers_and_aer_masks_read_from_their_lines() {
    let text = "00:1c.0 PCI bridge [0604]: Intel [8086:a33c]
\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0
\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00
\t\tLnkCap:\tPort #5, Speed 16GT/s, Width x4, ASPM not supported
\t\t\tClockPM- Surprise- LLActRep+ BwNot+ ASPMOptComp+
\t\tLnkSta:\tSpeed 16GT/s (ok), Width x4 (ok)
\t\t\tTrErr- Train- SlotClk+ DLActive+ BWMgmt- ABWMgmt-
\t\tLnkCap2: Supported Link Speeds: 2.5-16GT/s, Crosslink+ Retimer- 2Retimers- DRS-
\t\tLnkCtl2: Target Link Speed: 8GT/s, EnterCompliance- SpeedDis-
\t\tLnkSta2: Current De-emphasis Level: -6dB, EqualizationComplete+ EqualizationPhase1+
\t\t\t EqualizationPhase2- EqualizationPhase3+ LinkEqualizationRequest-
\t\t\t Retimer- 2Retimers- CrosslinkRes: Downstream Port
\tCapabilities: [100 v1] Advanced Error Reporting
\t\tUESta:\tDLP+ SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt- RxOF- MalfTLP- ECRC- UnsupReq- ACSViol-
\t\tUEMsk:\tDLP- SDES- TLP- FCP- CmpltTO- CmpltAbrt- UnxCmplt+ RxOF- MalfTLP- ECRC- UnsupReq+ ACSViol-
\t\tUESvrt:\tDLP+ SDES+ TLP- FCP+ CmpltTO- CmpltAbrt- UnxCmplt- RxOF+ MalfTLP+ ECRC- UnsupReq- ACSViol-
\t\tCESta:\tRxErr+ BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr-
\t\tCEMsk:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+
";
    let f = read_lspci("v2.txt", text).unwrap().topology.functions()[0].clone();
    let d = f.express_detail;
    assert_eq!(
        (d.dl_active_reporting, d.dl_active),
        (Some(true), Some(true))
    );
    assert_eq!(
        (d.supported_speeds, d.crosslink),
        (Some(0b1111), Some(true))
    );
    assert_eq!(d.target_speed, Some(Gen3));
    assert_eq!(
        d.status2,
        Some(LinkStatus2 {
            equalization_complete: true,
            equalization_phase1: true,
            equalization_phase2: false,
            equalization_phase3: true,
            equalization_request: false,
            crosslink_resolution: Some(2),
        })
    );
    // The status registers (UESta, CESta) are not masks: only UEMsk/UESvrt/CEMsk count.
    assert_eq!(
        f.aer_masks,
        Some(AerMasks {
            uncorrectable_mask: (1 << 16) | (1 << 20),
            uncorrectable_severity: (1 << 4) | (1 << 5) | (1 << 13) | (1 << 17) | (1 << 18),
            correctable_mask: 1 << 13,
        })
    );
    assert_eq!(f.evidence.line("aer_masks").unwrap().0, 15);
    assert_eq!(f.evidence.line("dl_active").unwrap().0, 7);
    // The status registers are read as what they are: DLP logged, RxErr logged.
    assert_eq!(
        f.aer_status,
        Some(AerStatus {
            uncorrectable: 1 << 4,
            correctable: 1,
        })
    );
    assert_eq!(f.evidence.line("aer_status").unwrap().0, 14);
    // Older lspci printed LnkSta2's de-emphasis level only: equalization stays unknown.
    let old: String = text
        .lines()
        .take(10)
        .map(|l| {
            let l = l.split(", Equalization").next().unwrap();
            format!("{l}\n")
        })
        .collect();
    let f = read_lspci("old.txt", &old).unwrap().topology.functions()[0].clone();
    assert_eq!(f.express_detail.status2, None);
}

/// As lspci 3.9 prints an NVMe drive's device registers (`-vvv`): each register's flags
/// continue below its label, and `ExtTag`/`10BitTagReq` are named in two registers each.
const DEVICE_REGISTERS: &str = "\
01:00.0 Non-Volatile memory controller [0108]: Samsung [144d:a808] (prog-if 02 [NVM Express])
\tCapabilities: [70] Express (v2) Endpoint, MSI 00
\t\tDevCap:\tMaxPayload 256 bytes, PhantFunc 0, Latency L0s unlimited, L1 unlimited
\t\t\tExtTag+ AttnBtn- AttnInd- PwrInd- RBE+ FLReset+ SlotPowerLimit 0W
\t\tDevCtl:\tCorrErr+ NonFatalErr+ FatalErr+ UnsupReq+
\t\t\tRlxdOrd+ ExtTag- PhantFunc- AuxPwr- NoSnoop+ FLReset-
\t\t\tMaxPayload 256 bytes, MaxReadReq 512 bytes
\t\tDevSta:\tCorrErr+ NonFatalErr- FatalErr- UnsupReq+ AuxPwr- TransPend-
\t\tDevCap2: Completion Timeout: Range ABCD, TimeoutDis+ NROPrPrP- LTR+
\t\t\t 10BitTagComp+ 10BitTagReq- OBFF Not Supported, ExtFmt- EETLPPrefix-
\t\tDevCtl2: Completion Timeout: 50us to 50ms, TimeoutDis- LTR- 10BitTagReq+ OBFF Disabled,
\t\t\t AtomicOpsCtl: ReqEn-
\tKernel modules: nvme
";

/// The one function `text` describes.
fn only_function(text: &str) -> Function {
    read_lspci("t.txt", text).unwrap().topology.functions()[0].clone()
}

/// (ExtTag supported, ExtTag enabled, RlxdOrd) and (10BitTagComp, 10BitTagReq, its enable).
type Features = (Option<bool>, Option<bool>, Option<bool>);
fn features(d: &ExpressDetail) -> (Features, Features) {
    let f = d.features;
    (
        (
            f.ext_tag_supported,
            f.ext_tag_enabled,
            f.relaxed_ordering_enabled,
        ),
        (
            f.ten_bit_tag_completer,
            f.ten_bit_tag_requester,
            f.ten_bit_tag_requester_enabled,
        ),
    )
}

#[test]
fn device_flags_belong_to_the_register_above_them() {
    let f = only_function(DEVICE_REGISTERS);
    let d = f.express_detail;
    // DevCap's ExtTag+ is support, DevCtl's ExtTag- the enable; DevCap2's 10BitTagReq- is
    // the capability, DevCtl2's 10BitTagReq+ the enable (the DevCtl line's own CorrErr+ …
    // are reporting enables, not detected errors).
    let some = |a, b, c| (Some(a), Some(b), Some(c));
    assert_eq!(
        features(&d),
        (some(true, false, true), some(true, false, true))
    );
    assert_eq!(d.errors_detected, Some(0b1001));
    assert_eq!(f.evidence.line("devsta").unwrap().0, 8);
    // Each flag's own line, for advice to quote (DevCtl's last line holds MaxPayload).
    assert_eq!(f.evidence.line("devcap.exttag").unwrap().0, 4);
    assert_eq!(f.evidence.line("devctl.rlxdord").unwrap().0, 6);
    assert_eq!(f.evidence.line("devctl.exttag").unwrap().0, 6);
    assert_eq!(f.evidence.line("devctl2").unwrap().0, 11);
    // `Kernel modules:` without a driver line: -k was given and nothing is bound.
    assert_eq!(
        (f.driver_source, f.driver),
        (FactSource::LspciKernelLines, None)
    );
    // Without the continuation lines (lspci -vv cut short, or older lspci without the
    // 10-bit tag flags) the features stay unknown rather than read as clear.
    let short: String = DEVICE_REGISTERS
        .lines()
        .filter(|l| !l.starts_with("\t\t\t") && !l.contains("Kernel"))
        .map(|l| format!("{l}\n"))
        .collect();
    let f = only_function(&short);
    assert_eq!(
        features(&f.express_detail),
        ((None, None, None), (None, None, Some(true)))
    );
    assert_eq!(f.driver_source, FactSource::Unknown);
}

#[test]
fn sizes_no_lspci_prints_are_refused_naming_the_line() {
    let devctl = "MaxPayload 256 bytes, MaxReadReq 128 bytes";
    for (bad, shown) in [
        (
            "MaxPayload 0 bytes, MaxReadReq 128 bytes",
            "8: MaxPayload '0' bytes",
        ),
        (
            "MaxPayload 256 bytes, MaxReadReq 65535 bytes",
            "8: MaxReadReq '65535' bytes",
        ),
        (
            "MaxPayload 300 bytes, MaxReadReq 128 bytes",
            "8: MaxPayload '300' bytes",
        ),
        (
            "MaxPayload 8192 bytes, MaxReadReq 128 bytes",
            "8: MaxPayload '8192' bytes",
        ),
        (
            "MaxPayload 99999999 bytes, MaxReadReq 128 bytes",
            "8: MaxPayload '99999999'",
        ),
    ] {
        let err = read_lspci("sizes.txt", &SERVER.replacen(devctl, bad, 1)).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.message().starts_with(&format!("sizes.txt:{shown}")),
            "{err}"
        );
        assert!(
            err.message()
                .contains("expected 128, 256, 512, 1024, 2048 or 4096"),
            "{err}"
        );
    }
    let devcap = SERVER.replacen(
        "MaxPayload 256 bytes, PhantFunc",
        "MaxPayload 0 bytes, PhantFunc",
        1,
    );
    let err = read_lspci("sizes.txt", &devcap).unwrap_err();
    assert!(
        err.message().starts_with("sizes.txt:5: MaxPayload '0'"),
        "{err}"
    );
}

#[test]
fn ids_in_every_spelling() {
    assert_eq!(class_code("PCI bridge [0604]"), Some(0x0604));
    assert_eq!(class_code("Class 0604"), Some(0x0604));
    assert_eq!(class_code("0604"), Some(0x0604));
    assert_eq!(class_code("PCI bridge"), None);
    assert_eq!(
        id_pair("Intel Corporation 82599ES [8086:10fb]"),
        Some((0x8086, 0x10fb))
    );
    assert_eq!(id_pair("Device 8086:3408"), Some((0x8086, 0x3408)));
    assert_eq!(id_pair("8086:3408"), Some((0x8086, 0x3408)));
    assert_eq!(id_pair("Intel Corporation Device 9d10"), None);
}
