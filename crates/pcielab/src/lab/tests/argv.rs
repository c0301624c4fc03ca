//! QEMU argv generation from a topology built in code: devices, buses, chassis/slot, link caps,
//! expander bridge + NUMA, and the errors and limits for what QEMU cannot express.

use super::common;

use crate::lab::argv::{plan, MachineOptions};
use crate::pcie::Generation;
use crate::topology::{Kind, Topology};
use common::{bdf, func, function_at, link, switch_and_expander, RP};

/// A root port with a switch and two NVMe, and an expander bridge on node 1 with one NVMe.
fn wide() -> Topology {
    let g1 = (Generation::Gen1, 1);
    let mut functions = switch_and_expander();
    function_at(&mut functions, "00:02.0").link = link((Generation::Gen4, 8), g1);
    let rp80 = function_at(&mut functions, "80:00.0");
    rp80.link = link((Generation::Gen3, 4), g1);
    rp80.numa_node = Some(1);
    let nvme = function_at(&mut functions, "81:00.0");
    nvme.numa_node = Some(1);
    nvme.params
        .insert("cmb_size_mb".into(), toml::Value::Integer(64));
    nvme.params
        .insert("serial".into(), toml::Value::String("0003".into()));
    Topology::new(functions)
}

fn devices(argv: &[String]) -> Vec<&str> {
    argv.windows(2)
        .filter(|w| w[0] == "-device")
        .map(|w| w[1].as_str())
        .collect()
}

#[test]
fn wide_topology_becomes_q35_devices() {
    let options = MachineOptions {
        disk_dir: "/tmp/lab".into(),
        ..MachineOptions::default()
    };
    let plan = plan(&wide(), &options).unwrap();
    assert_eq!(plan.numa_nodes, 2);
    let devs = devices(&plan.argv);
    assert_eq!(
        devs,
        vec![
            "pcie-root-port,id=d0000_00_02_0,bus=pcie.0,addr=02.0,chassis=1,slot=1,x-speed=16,x-width=8",
            "pxb-pcie,id=d0000_00_04_0,bus=pcie.0,addr=04.0,bus_nr=128,numa_node=1",
            "x3130-upstream,id=d0000_01_00_0,bus=d0000_00_02_0,addr=00.0",
            "xio3130-downstream,id=d0000_02_00_0,bus=d0000_01_00_0,addr=00.0,chassis=1,slot=2",
            "xio3130-downstream,id=d0000_02_01_0,bus=d0000_01_00_0,addr=01.0,chassis=1,slot=3",
            "nvme,drive=drive_d0000_03_00_0,id=d0000_03_00_0,bus=d0000_02_00_0,addr=00.0,serial=pcielab03000",
            "nvme,drive=drive_d0000_04_00_0,id=d0000_04_00_0,bus=d0000_02_01_0,addr=00.0,serial=pcielab04000",
            "pcie-root-port,id=d0000_80_00_0,bus=d0000_00_04_0,addr=00.0,chassis=1,slot=4,x-speed=8,x-width=4",
            "nvme,drive=drive_d0000_81_00_0,id=d0000_81_00_0,bus=d0000_80_00_0,addr=00.0,serial=0003,cmb_size_mb=64",
        ]
    );
    let joined = plan.argv.join(" ");
    assert!(joined.contains("-numa node,nodeid=1,memdev=mem1 "));
    assert!(joined.contains("memory-backend-ram,id=mem0,size=256M"));
    assert!(joined.contains("-drive file=/tmp/lab/d0000_81_00_0.img,if=none"));
    assert_eq!(plan.disks.len(), 3);
    assert!(plan.limits.is_empty(), "{:?}", plan.limits);
}

#[test]
fn faster_current_links_are_limits_not_changes() {
    let mut topo = wide();
    for f in topo.functions_mut() {
        if f.bdf == bdf("00:02.0") {
            f.link = link((Generation::Gen4, 8), (Generation::Gen4, 8));
        }
        if f.bdf == bdf("03:00.0") {
            f.link = link((Generation::Gen4, 4), (Generation::Gen4, 4));
        }
    }
    let plan = plan(&topo, &MachineOptions::default()).unwrap();
    let got: Vec<(String, &str, &str)> = plan
        .limits
        .iter()
        .map(|l| (l.bdf.to_string(), l.field.as_ref(), l.qemu.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("0000:00:02.0".into(), "link.speed", "2.5 GT/s"),
            ("0000:00:02.0".into(), "link.width", "1"),
            ("0000:03:00.0".into(), "link.max_speed", "2.5 GT/s"),
            ("0000:03:00.0".into(), "link.max_width", "1"),
            ("0000:03:00.0".into(), "link.speed", "2.5 GT/s"),
            ("0000:03:00.0".into(), "link.width", "1"),
        ]
    );
    // The root port still asks for its capability: the spec is not silently changed.
    assert!(devices(&plan.argv)[0].contains("x-speed=16,x-width=8"));
}

#[test]
fn inexpressible_functions_are_all_named() {
    let mut topo = wide();
    let mut functions = topo.functions().to_vec();
    functions.push(func("00:05.0", Kind::Endpoint, (0x15b3, 0x1017), None));
    let mut gen5 = func("00:06.0", Kind::RootPort, RP, None);
    gen5.link = link((Generation::Gen5, 16), (Generation::Gen1, 1));
    functions.push(gen5);
    functions.push(func("90:00.0", Kind::RootPort, RP, None));
    topo = Topology::new(functions);
    let err = plan(&topo, &MachineOptions::default()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    let msg = err.message();
    assert!(
        msg.contains("0000:00:05.0: no QEMU device has vendor:device 15b3:1017"),
        "{msg}"
    );
    assert!(
        msg.contains("0000:00:06.0: link.max_speed Gen5 (32 GT/s)"),
        "{msg}"
    );
    assert!(
        msg.contains("0000:90:00.0: root bus 90 has no pxb-pcie"),
        "{msg}"
    );
    assert!(msg.contains("valid: 1b36:000c (pcie-root-port)"), "{msg}");
}

#[test]
fn multifunction_root_ports_and_bad_cmb_size() {
    let mut functions = wide().functions().to_vec();
    functions.push(func("00:02.1", Kind::RootPort, RP, None));
    let plan_ok = plan(
        &Topology::new(functions.clone()),
        &MachineOptions::default(),
    )
    .unwrap();
    let devs = devices(&plan_ok.argv);
    assert!(devs[0].ends_with("multifunction=on,chassis=1,slot=1,x-speed=16,x-width=8"));
    assert!(devs[1].starts_with("pcie-root-port,id=d0000_00_02_1,bus=pcie.0,addr=02.1,"));
    for f in functions.iter_mut().filter(|f| f.bdf == bdf("03:00.0")) {
        f.params
            .insert("cmb_size_mb".into(), toml::Value::String("big".into()));
    }
    let err = plan(&Topology::new(functions), &MachineOptions::default()).unwrap_err();
    assert!(err.message().contains(
        "0000:03:00.0: [function.device] cmb_size_mb = \"big\": expected an integer in 1..=65536 (MiB)"
    ));
}

#[test]
fn spec_chassis_and_slot_are_kept_and_checked() {
    let mut functions = wide().functions().to_vec();
    for f in functions.iter_mut() {
        if f.bdf == bdf("02:00.0") {
            f.params.insert("chassis".into(), toml::Value::Integer(1));
            f.params.insert("slot".into(), toml::Value::Integer(1));
        }
    }
    let planned = plan(
        &Topology::new(functions.clone()),
        &MachineOptions::default(),
    )
    .unwrap();
    let devs = devices(&planned.argv);
    // 02:00.0 keeps chassis 1 slot 1; the allocator skips it for the others.
    assert!(devs[0].contains("chassis=1,slot=2,"), "{}", devs[0]);
    assert!(devs[3].ends_with("chassis=1,slot=1"), "{}", devs[3]);
    assert!(devs[4].ends_with("chassis=1,slot=3"), "{}", devs[4]);
    for f in functions.iter_mut() {
        if f.bdf == bdf("02:01.0") {
            f.params.insert("chassis".into(), toml::Value::Integer(1));
            f.params.insert("slot".into(), toml::Value::Integer(1));
        }
        if f.bdf == bdf("80:00.0") {
            f.params.insert("slot".into(), toml::Value::Integer(4));
        }
    }
    let err = plan(&Topology::new(functions), &MachineOptions::default()).unwrap_err();
    let msg = err.message();
    assert!(
        msg.contains("0000:02:01.0: chassis 1 slot 1 is already used"),
        "{msg}"
    );
    assert!(
        msg.contains("0000:80:00.0: [function.device] needs both chassis and slot"),
        "{msg}"
    );
}

#[test]
fn vga_and_e1000_map_to_qemu_devices_and_smp_and_extra_arguments_pass_through() {
    let mut functions = vec![func("00:02.0", Kind::RootPort, RP, None)];
    functions.push(func("00:03.0", Kind::RcEndpoint, (0x1234, 0x1111), None));
    functions.push(func(
        "01:00.0",
        Kind::Endpoint,
        (0x8086, 0x100e),
        Some("00:02.0"),
    ));
    let options = MachineOptions {
        smp: 4,
        extra_args: vec!["-device".into(), "virtio-rng-pci".into()],
        ..MachineOptions::default()
    };
    let plan = plan(&Topology::new(functions), &options).unwrap();
    let devices = devices(&plan.argv);
    assert!(devices.iter().any(|d| d.starts_with("VGA,")), "{devices:?}");
    assert!(
        devices.iter().any(|d| d.starts_with("e1000,")),
        "{devices:?}"
    );
    let smp = plan.argv.iter().position(|a| a == "-smp").unwrap();
    assert_eq!(plan.argv[smp + 1], "4");
    assert_eq!(
        &plan.argv[plan.argv.len() - 2..],
        ["-device", "virtio-rng-pci"]
    );
    // The installed QEMU has both devices under these names (`-device help` lists them).
    let help = std::process::Command::new("qemu-system-x86_64")
        .args(["-device", "help"])
        .output()
        .expect("qemu-system-x86 is installed (.ci/run)");
    let text = String::from_utf8_lossy(&help.stdout);
    assert_eq!(
        crate::lab::argv::parse_qemu_version("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)"),
        Some((7, 2))
    );
    assert!(text.contains("name \"VGA\""), "{text}");
    assert!(text.contains("name \"e1000\""), "{text}");
}

/// QEMU has at most 128 NUMA nodes: a function on node 127 still plans (128 memory backends),
/// one on node 128 is a problem named in the error rather than 129 generated nodes.
#[test]
fn numa_nodes_beyond_qemu_are_named_not_generated() {
    let on_node = |node: i32| {
        let mut functions = switch_and_expander();
        function_at(&mut functions, "80:00.0").numa_node = Some(node);
        function_at(&mut functions, "81:00.0").numa_node = Some(node);
        plan(&Topology::new(functions), &MachineOptions::default())
    };
    let ok = on_node(127).unwrap();
    let nodes = ok.argv.iter().filter(|a| *a == "-numa").count();
    assert_eq!(nodes, 128);
    let err = on_node(128).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .contains("numa_node 128 needs 129 NUMA nodes; QEMU supports at most 128"),
        "{err}"
    );
}

/// A serial is a QEMU property value: a comma in it is doubled (it would start another
/// property, e.g. `romfile=`), and one that the NVMe SN field cannot hold is a named problem.
#[test]
fn nvme_serials_cannot_add_qemu_properties() {
    let with_serial = |serial: &str| {
        let mut functions = switch_and_expander();
        function_at(&mut functions, "81:00.0")
            .params
            .insert("serial".into(), toml::Value::String(serial.into()));
        plan(&Topology::new(functions), &MachineOptions::default())
    };
    let ok = with_serial("a,romfile=/etc/x").unwrap();
    let nvme = devices(&ok.argv)
        .into_iter()
        .find(|d| d.contains("serial=a,,romfile"))
        .unwrap_or_else(|| panic!("{:?}", ok.argv));
    assert!(!nvme.contains("serial=a,romfile"), "{nvme}");
    for bad in ["", "123456789012345678901", "tab\there", "é"] {
        let err = with_serial(bad).unwrap_err();
        assert!(
            err.to_string()
                .contains("expected 1 to 20 printable ASCII characters"),
            "{bad:?}: {err}"
        );
    }
}

/// Sizes in MiB become bytes (`size_mb << 20` for the disk image): bounded before that can wrap.
#[test]
fn nvme_sizes_are_bounded() {
    for (key, value, max) in [
        ("size_mb", i64::MAX, "1048576"),
        ("cmb_size_mb", 65537, "65536"),
    ] {
        let mut functions = switch_and_expander();
        function_at(&mut functions, "81:00.0")
            .params
            .insert(key.into(), toml::Value::Integer(value));
        let err = plan(&Topology::new(functions), &MachineOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains(&format!(
                "{key} = {value}: expected an integer in 1..={max} (MiB)"
            )),
            "{err}"
        );
    }
}

/// Kernel parameters join the lab's own command line; one with a space would split into two
/// words there and is refused. With two NUMA nodes and two vCPUs, each node gets one.
#[test]
fn kernel_arguments_and_vcpus_per_numa_node() {
    let options = MachineOptions {
        smp: 2,
        kernel_args: vec!["pci=pcie_bus_perf".into(), "intel_iommu=on".into()],
        ..MachineOptions::default()
    };
    let planned = plan(&wide(), &options).unwrap();
    assert_eq!(
        planned.kernel_cmdline,
        "console=ttyS0 panic=-1 loglevel=4 no_timer_check pci=pcie_bus_perf intel_iommu=on"
    );
    let numa: Vec<&str> = planned
        .argv
        .iter()
        .filter(|a| a.starts_with("node,"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        numa,
        [
            "node,nodeid=0,memdev=mem0,cpus=0",
            "node,nodeid=1,memdev=mem1,cpus=1"
        ]
    );
    for bad in ["pci=a b", ""] {
        let options = MachineOptions {
            kernel_args: vec![bad.into()],
            ..MachineOptions::default()
        };
        let err = plan(&wide(), &options).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(
            err.to_string()
                .contains(&format!("--kernel-arg '{bad}': give one kernel parameter")),
            "{err}"
        );
    }
}
