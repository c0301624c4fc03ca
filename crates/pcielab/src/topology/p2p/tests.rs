use super::groups::{group_run, group_verdicts, groups};
use super::report::{group_cells, to_text, Report};
use super::rules::{matrix, verdict, Cpu, MapType, Reason};

use crate::pcie::bdf;
use crate::pcie::Bdf;
use crate::topology::{Acs, Function, Kind, Topology};

fn func(addr: &str, kind: Kind, vendor: u16, device: u16, parent: Option<&str>) -> Function {
    let mut f = Function::new(bdf(addr), vendor, device, 0, kind);
    f.parent = parent.map(bdf);
    f
}

/// The seed's machine: q35 host bridge, an integrated NVMe, a root port with a switch and
/// two NVMe below it, plus a second root port with one NVMe.
fn seed() -> Topology {
    Topology::new(vec![
        func("00:00.0", Kind::HostBridge, 0x8086, 0x29c0, None),
        func("00:03.0", Kind::RcEndpoint, 0x1b36, 0x0010, None),
        func("00:04.0", Kind::RootPort, 0x1b36, 0x000c, None),
        func("00:05.0", Kind::RootPort, 0x1b36, 0x000c, None),
        func(
            "01:00.0",
            Kind::SwitchUpstream,
            0x104c,
            0x8232,
            Some("00:04.0"),
        ),
        func(
            "02:00.0",
            Kind::SwitchDownstream,
            0x104c,
            0x8233,
            Some("01:00.0"),
        ),
        func(
            "02:01.0",
            Kind::SwitchDownstream,
            0x104c,
            0x8233,
            Some("01:00.0"),
        ),
        func("03:00.0", Kind::Endpoint, 0x1b36, 0x0010, Some("02:00.0")),
        func("04:00.0", Kind::Endpoint, 0x1b36, 0x0010, Some("02:01.0")),
        func("05:00.0", Kind::Endpoint, 0x1b36, 0x0010, Some("00:05.0")),
    ])
}

const INTEL: Cpu = Cpu::Intel { family: 6 };

#[test]
fn same_switch_is_bus_address_at_distance_four() {
    let v = verdict(&seed(), bdf("03:00.0"), bdf("04:00.0"), INTEL).unwrap();
    assert_eq!(v.map, MapType::BusAddress);
    assert_eq!(v.distance, 4);
    assert_eq!(
        v.reasons,
        vec![Reason::CommonUpstreamBridge {
            bridge: bdf("01:00.0")
        }]
    );
    assert_eq!(v.kernel_message(), None);
}

#[test]
fn different_root_ports_are_refused_on_q35_with_intel() {
    let v = verdict(&seed(), bdf("03:00.0"), bdf("05:00.0"), INTEL).unwrap();
    assert_eq!(v.map, MapType::NotSupported);
    // provider side: 03:00.0, 02:00.0, 01:00.0, 00:04.0; client side: 05:00.0, 00:05.0
    assert_eq!(v.distance, 6);
    assert_eq!(
        v.reasons,
        vec![
            Reason::NoCommonUpstreamBridge,
            Reason::HostBridgeNotWhitelisted {
                host_bridge: Some(bdf("00:00.0")),
                vendor: Some(0x8086),
                device: Some(0x29c0)
            }
        ]
    );
    assert!(v
        .kernel_message()
        .unwrap()
        .contains("client and provider (0000:03:00.0) do not share"));
}

#[test]
fn zen_cpu_routes_through_the_host_bridge() {
    let zen = Cpu::Amd { family: 0x17 };
    let v = verdict(&seed(), bdf("00:03.0"), bdf("04:00.0"), zen).unwrap();
    assert_eq!(v.map, MapType::ThroughHostBridge);
    assert_eq!(v.distance, 5);
    assert!(v.reasons.contains(&Reason::CpuExemption { family: 0x17 }));
    let older = Cpu::Amd { family: 0x15 };
    assert_eq!(
        verdict(&seed(), bdf("00:03.0"), bdf("04:00.0"), older)
            .unwrap()
            .map,
        MapType::NotSupported
    );
}

#[test]
fn acs_redirect_on_a_downstream_port_forces_the_host_bridge() {
    let mut topo = seed();
    for f in topo.functions_mut() {
        if f.bdf == bdf("02:01.0") {
            f.acs = Some(Acs {
                capability: 0x1f,
                control: 0x0004,
            });
        }
        if f.bdf == bdf("02:00.0") {
            // Source validation only: not a redirect bit.
            f.acs = Some(Acs {
                capability: 0x1f,
                control: 0x0001,
            });
        }
    }
    let v = verdict(&topo, bdf("03:00.0"), bdf("04:00.0"), INTEL).unwrap();
    assert_eq!(v.map, MapType::NotSupported);
    assert_eq!(v.distance, 4);
    assert!(v.reasons.contains(&Reason::AcsRedirect {
        bridges: vec![bdf("02:01.0")]
    }));
}

#[test]
fn whitelisted_host_bridge_respects_same_bridge_flag() {
    let mut topo = seed();
    topo.functions_mut()[0].device = 0x3c00; // Xeon E5: only within one host bridge
    let v = verdict(&topo, bdf("03:00.0"), bdf("05:00.0"), INTEL).unwrap();
    assert_eq!(v.map, MapType::ThroughHostBridge);
    assert!(v.reasons.contains(&Reason::HostBridgeWhitelisted {
        host_bridge: bdf("00:00.0")
    }));
    // A second root bus (an expander bridge) whose first function is a root port.
    let mut functions = topo.functions().to_vec();
    functions.push(func("80:00.0", Kind::RootPort, 0x1b36, 0x000c, None));
    functions.push(func(
        "81:00.0",
        Kind::Endpoint,
        0x1b36,
        0x0010,
        Some("80:00.0"),
    ));
    let topo = Topology::new(functions);
    let v = verdict(&topo, bdf("03:00.0"), bdf("81:00.0"), INTEL).unwrap();
    assert_eq!(v.map, MapType::NotSupported);
    assert!(v.reasons.contains(&Reason::HostBridgeNotWhitelisted {
        host_bridge: Some(bdf("00:00.0")),
        vendor: Some(0x8086),
        device: Some(0x3c00)
    }));
}

#[test]
fn matrix_covers_ordered_endpoint_pairs_symmetrically() {
    let m = matrix(&seed(), INTEL).unwrap();
    assert_eq!(m.len(), 4 * 3);
    for v in &m {
        let back = m
            .iter()
            .find(|w| w.provider == v.client && w.client == v.provider)
            .unwrap();
        assert_eq!((v.distance, v.map), (back.distance, back.map));
    }
    let same_fn = verdict(&seed(), bdf("04:00.0"), bdf("04:00.0"), INTEL).unwrap();
    assert_eq!(same_fn.distance, 0);
    assert_eq!(same_fn.reasons, vec![Reason::SameFunction]);
    assert!(verdict(&seed(), bdf("09:00.0"), bdf("04:00.0"), INTEL).is_none());
}

#[test]
fn text_report_has_matrix_and_reasons() {
    let text = to_text(&Report::new(&seed(), INTEL, true).unwrap());
    let row = text.lines().find(|l| l.starts_with("03:00.0")).unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["03:00.0", "5", "x", "-", "4", "B", "6", "x"]
    );
    assert!(text.contains(
        "0000:03:00.0 -> 0000:05:00.0  distance  6  not supported        no common upstream \
         bridge; host bridge 0000:00:00.0 (8086:29c0) not whitelisted"
    ));
    // The two NVMe below one switch meet at its upstream port: one verdict line for both
    // directions, listed before the root complex's lines (different path lengths there).
    let meets = |at: &str| text.lines().position(|l| l.starts_with(at)).unwrap();
    assert!(
        text.contains(
            "0000:01:00.0   g2..g3 -> g2..g3: 2 pairs, distance  4  bus address          \
             common upstream bridge 0000:01:00.0  (as 0000:03:00.0 -> 0000:04:00.0)"
        ),
        "{text}"
    );
    assert!(meets("0000:01:00.0") < meets("root complex"));
    assert!(
        text.contains("root complex   g4 -> g2..g3: 2 pairs, distance  6  not supported"),
        "{text}"
    );
}

/// The seed's host widened to SR-IOV size: behind root port 00:05.0 a device with `vfs`
/// virtual functions, one of which has ACS redirect set and one whose ACS is unreadable.
fn with_virtual_functions(vfs: u16) -> Topology {
    let mut functions = seed().functions().to_vec();
    for i in 1..=vfs {
        let mut vf = func(
            &format!("{:02x}:{:02x}.{:x}", 5 + i / 256, (i % 256) / 8, i % 8),
            Kind::Endpoint,
            0x1b36,
            0x0010,
            Some("00:05.0"),
        );
        if i == 3 {
            vf.acs = Some(Acs {
                capability: 0x7f,
                control: 0x0004,
            });
        }
        vf.acs_unreadable = i == 5;
        functions.push(vf);
    }
    Topology::new(functions)
}

/// The seed's host with a fan-out below it: `switches` root ports (00:1c.x), each above a
/// switch whose `ports` downstream ports each have one endpoint, every endpoint its own group.
fn with_fan_out(switches: u8, ports: u8) -> Topology {
    let mut functions = seed().functions().to_vec();
    for s in 0..switches {
        let bus = 0x40 + s * 0x10;
        let root_port = format!("00:1c.{s:x}");
        let upstream = format!("{bus:02x}:00.0");
        functions.push(func(&root_port, Kind::RootPort, 0x8086, 0x7ab8, None));
        functions.push(func(
            &upstream,
            Kind::SwitchUpstream,
            0x10b5,
            0x8747,
            Some(&root_port),
        ));
        for port in 0..ports {
            let downstream = format!("{:02x}:{port:02x}.0", bus + 1);
            functions.push(func(
                &downstream,
                Kind::SwitchDownstream,
                0x10b5,
                0x8747,
                Some(&upstream),
            ));
            functions.push(func(
                &format!("{:02x}:00.0", bus + 2 + port),
                Kind::Endpoint,
                0x1b36,
                0x0010,
                Some(&downstream),
            ));
        }
    }
    Topology::new(functions)
}

/// A fan-out with ACS redirect on one downstream port and unreadable ACS on another, three
/// integrated endpoints (one group of several tops), and a second root bus whose first
/// function is a root port with a two-function device; `host` and `expander` are the
/// device ids of the two root buses' host bridges (Intel), for the whitelist's cases.
fn mixed(host: u16, expander: u16) -> Topology {
    let mut functions = with_fan_out(2, 3).functions().to_vec();
    for f in &mut functions {
        if f.bdf == bdf("41:01.0") {
            f.acs = Some(Acs {
                capability: 0x7f,
                control: 0x0008,
            });
        }
        f.acs_unreadable = f.bdf == bdf("51:02.0");
        if f.bdf == bdf("00:00.0") {
            f.device = host;
        }
    }
    for addr in ["00:03.1", "00:03.2"] {
        functions.push(func(addr, Kind::RcEndpoint, 0x1b36, 0x0010, None));
    }
    functions.push(func("80:00.0", Kind::RootPort, 0x8086, expander, None));
    for addr in ["81:00.0", "81:00.1"] {
        functions.push(func(addr, Kind::Endpoint, 0x1b36, 0x0010, Some("80:00.0")));
    }
    Topology::new(functions)
}

#[test]
fn group_verdicts_agree_with_every_pairwise_verdict() {
    let hosts = || {
        [
            seed(),
            with_virtual_functions(40),
            with_fan_out(3, 4),
            // Not whitelisted; whitelisted only within one host bridge; whitelisted.
            mixed(0x29c0, 0x000c),
            mixed(0x3c00, 0x3c00),
            mixed(0x2030, 0x2031),
            mixed(0x2030, 0x3c01),
        ]
    };
    for cpu in [INTEL, Cpu::Amd { family: 0x19 }] {
        for topology in hosts() {
            let groups = groups(&topology);
            let by_group = group_verdicts(&topology, &groups, cpu);
            let group_of = |bdf: Bdf| {
                groups
                    .iter()
                    .position(|g| g.functions.contains(&bdf))
                    .unwrap()
            };
            let lists = |names: &[String], g: usize| {
                names.iter().any(|n| {
                    let (first, last) = group_run(n).unwrap();
                    (first..=last).contains(&g)
                })
            };
            let mut stood_for = vec![0u64; by_group.len()];
            for pair in matrix(&topology, cpu).unwrap() {
                let (p, c) = (group_of(pair.provider), group_of(pair.client));
                let at = by_group
                    .iter()
                    .position(|gv| lists(&gv.provider_groups, p) && lists(&gv.client_groups, c))
                    .unwrap_or_else(|| panic!("no group verdict for {pair:?}"));
                let stands_for = &by_group[at];
                stood_for[at] += 1;
                let meeting = pair.reasons.iter().find_map(|r| match r {
                    Reason::CommonUpstreamBridge { bridge } => Some(*bridge),
                    _ => None,
                });
                assert_eq!(
                    (
                        stands_for.meeting,
                        stands_for.verdict.distance,
                        stands_for.verdict.map
                    ),
                    (meeting, pair.distance, pair.map),
                    "{} -> {}",
                    pair.provider,
                    pair.client
                );
            }
            // The matrix of groups (text and SVG) reads the same verdicts: a cell where
            // pairs fall has their verdict, every other cell is empty.
            let members: Vec<usize> = groups.iter().map(|g| g.functions.len()).collect();
            let cells = group_cells(
                &members,
                by_group
                    .iter()
                    .map(|gv| (&gv.provider_groups[..], &gv.client_groups[..], &gv.verdict)),
            )
            .unwrap();
            let mut pairs_in = vec![None; cells.len()];
            for pair in matrix(&topology, cpu).unwrap() {
                let at = group_of(pair.provider) * groups.len() + group_of(pair.client);
                pairs_in[at] = Some((pair.distance, pair.map));
            }
            assert_eq!(
                cells
                    .iter()
                    .map(|v| v.map(|v| (v.distance, v.map)))
                    .collect::<Vec<_>>(),
                pairs_in
            );
            // Each says how many pairs it stands for, and none stands for none.
            assert_eq!(
                stood_for,
                by_group.iter().map(|gv| gv.pairs).collect::<Vec<_>>()
            );
        }
    }
    // The fan-out's 12 endpoints are 12 groups of one beside the seed's.
    assert_eq!(
        groups(&with_fan_out(3, 4)).len(),
        groups(&seed()).len() + 12
    );
    let wide = with_virtual_functions(40);
    let groups = groups(&wide);
    // 03:00.0, 04:00.0 (one switch port each), 00:03.0 (integrated), and behind 00:05.0:
    // the plain functions, the one with ACS redirect, the one with unreadable ACS.
    assert_eq!(groups.len(), 6, "{groups:?}");
    assert_eq!(
        groups.iter().map(|g| g.functions.len()).max(),
        Some(1 + 40 - 2)
    );
}

/// 16 switches of 64 ports, an endpoint on each (1,024 groups of one, each switch in its
/// own domain): one verdict per switch and one for the root complex, never one per pair of
/// groups, and their pair counts cover every ordered pair once.
#[test]
fn a_fan_out_has_a_verdict_per_switch_not_per_pair_of_groups() {
    let mut functions = Vec::new();
    for s in 0..16u16 {
        let rp = Bdf::new(s, 0, 1, 0);
        let up = Bdf::new(s, 1, 0, 0);
        functions.push(Function::new(rp, 0x8086, 0x352a, 0, Kind::RootPort));
        let mut f = Function::new(up, 0x1000, 0xc030, 0, Kind::SwitchUpstream);
        f.parent = Some(rp);
        functions.push(f);
        for port in 0..64u8 {
            let down = Bdf::new(s, 2, port / 8, port % 8);
            let mut d = Function::new(down, 0x1000, 0xc030, 0, Kind::SwitchDownstream);
            d.parent = Some(up);
            functions.push(d);
            let mut e = Function::new(
                Bdf::new(s, 3 + port, 0, 0),
                0x144d,
                0xa824,
                0,
                Kind::Endpoint,
            );
            e.parent = Some(down);
            functions.push(e);
        }
    }
    let topology = Topology::new(functions);
    let groups = groups(&topology);
    assert_eq!(groups.len(), 1024);
    let verdicts = group_verdicts(&topology, &groups, INTEL);
    assert_eq!(verdicts.len(), 16 + 1, "{:?}", &verdicts[..3]);
    assert_eq!(verdicts.iter().map(|v| v.pairs).sum::<u64>(), 1024 * 1023);
    let per_switch = &verdicts[0];
    assert_eq!(per_switch.meeting, Some(Bdf::new(0, 1, 0, 0)));
    assert_eq!(per_switch.provider_groups, ["g1..g64"]);
    assert_eq!(
        (per_switch.pairs, per_switch.verdict.distance),
        (64 * 63, 4)
    );
    assert_eq!(per_switch.verdict.map, MapType::BusAddress);
    let apart = verdicts.last().unwrap();
    assert_eq!(apart.meeting, None);
    assert_eq!(apart.client_groups, ["g1..g1024"]);
    assert_eq!(
        (apart.verdict.distance, apart.verdict.map),
        (8, MapType::NotSupported)
    );
}

#[test]
fn too_many_pairs_for_the_full_table_is_bad_input_naming_full() {
    let e = matrix(&with_virtual_functions(1100), INTEL).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.message().starts_with("--full: 1104 endpoints"), "{e}");
    let report = Report::new(&with_virtual_functions(1100), INTEL, false).unwrap();
    assert_eq!(report.groups.len(), 6);
}

#[test]
fn cpu_strings_parse() {
    assert_eq!(Cpu::parse("amd").unwrap(), Cpu::Amd { family: 0x17 });
    assert_eq!(Cpu::parse("AMD:0x19").unwrap(), Cpu::Amd { family: 0x19 });
    assert_eq!(Cpu::parse("intel:6").unwrap(), Cpu::Intel { family: 6 });
    assert_eq!(Cpu::parse("other").unwrap(), Cpu::Other);
    assert_eq!(Cpu::Amd { family: 0x19 }.to_string(), "amd:0x19");
    let err = Cpu::parse("arm:3").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.message().contains("arm:3"));
}
