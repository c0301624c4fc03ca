//! Group rules on the simulated kernel: CLOSID and RMID limits with the kernel's errno and
//! message, new-group masks, tasks and CPU membership, rmdir, CDP, and monitor data that
//! includes child monitor groups.

use crate::qos::backend::{Op, QosBackend};
use crate::qos::schemata::Errno;
use crate::qos::GroupRef;
use crate::qos::SimulatedResctrl;
use crate::qos::{MPAM_SEED, RDT_XEON8163};

fn g(name: &str) -> GroupRef {
    GroupRef::parse(name).unwrap()
}

#[test]
fn closids_run_out_at_num_closids_with_enospc() {
    // The MPAM/resctrl article: 16 PARTIDs, the root holds one.
    let mut sim = SimulatedResctrl::boot(&MPAM_SEED, false);
    let rs = &mut sim.state.resctrl;
    for i in 1..16 {
        rs.mkdir(&g(&format!("p{i}"))).unwrap();
    }
    let err = rs.mkdir(&g("p16")).unwrap_err();
    assert_eq!(
        (err.errno, err.status.as_str()),
        (Errno::ENOSPC, "Out of CLOSIDs")
    );
    assert_eq!(rs.last_cmd_status, "Out of CLOSIDs");
    // Xeon: MBA has 8 CLOSes, which caps every group.
    let mut rdt = SimulatedResctrl::boot(&RDT_XEON8163, false);
    let rs = &mut rdt.state.resctrl;
    for i in 1..8 {
        rs.mkdir(&g(&format!("p{i}"))).unwrap();
    }
    assert_eq!(rs.mkdir(&g("p8")).unwrap_err().status, "Out of CLOSIDs");
    // With CDP the L3 CLOSIDs halve: 8 on MPAM.
    let mut cdp = SimulatedResctrl::boot(&MPAM_SEED, true);
    let rs = &mut cdp.state.resctrl;
    for i in 1..8 {
        rs.mkdir(&g(&format!("p{i}"))).unwrap();
    }
    assert_eq!(rs.mkdir(&g("p8")).unwrap_err().status, "Out of CLOSIDs");
    // Removing a group frees its CLOSID.
    rs.rmdir(&g("p3")).unwrap();
    rs.mkdir(&g("again")).unwrap();
    assert_eq!(rs.group("again").unwrap().closid, 3);
}

#[test]
fn mpam_has_two_monitors_per_partid_and_x86_a_global_pool() {
    let mut sim = SimulatedResctrl::boot(&MPAM_SEED, false);
    let rs = &mut sim.state.resctrl;
    rs.mkdir(&g("p1")).unwrap();
    rs.mkdir(&g("p1/m1")).unwrap();
    let err = rs.mkdir(&g("p1/m2")).unwrap_err();
    assert_eq!(
        (err.errno, err.status.as_str()),
        (Errno::ENOSPC, "Out of RMIDs")
    );
    // The failed mkdir left nothing behind.
    assert_eq!(rs.group("p1").unwrap().mon_groups.len(), 1);
    let mut rdt = SimulatedResctrl::boot(&RDT_XEON8163, false);
    let rs = &mut rdt.state.resctrl;
    rs.mkdir(&g("p1")).unwrap();
    for i in 0..174 {
        rs.mkdir(&g(&format!("p1/m{i}"))).unwrap();
    }
    // 176 RMIDs: root, p1 and 174 monitor groups.
    assert_eq!(rs.mkdir(&g("p1/m174")).unwrap_err().status, "Out of RMIDs");
}

#[test]
fn new_groups_get_shareable_and_unused_bits_or_no_space() {
    let mut info = RDT_XEON8163.info(false);
    info.caches[0].min_cbm_bits = 2;
    let mut rs = crate::qos::Resctrl::mount(info, crate::linux::CpuSet::range(0, 3), [1].into());
    rs.mkdir(&g("p1")).unwrap();
    assert_eq!(rs.group("p1").unwrap().schemata.get("L3", 0), Some(0x7ff));
    rs.write_schemata(&g("/"), "L3:0=3;1=3\n").unwrap();
    rs.write_schemata(&g("p1"), "L3:0=7fc;1=7fc\n").unwrap();
    rs.write_mode(&g("p1"), "exclusive").unwrap();
    rs.mkdir(&g("p2")).unwrap();
    // Only the root's shareable bits are left for p2.
    assert_eq!(rs.group("p2").unwrap().schemata.get("L3", 1), Some(0x3));
    rs.rmdir(&g("p2")).unwrap();
    rs.write_mode(&g("/"), "exclusive").unwrap();
    let err = rs.mkdir(&g("p2")).unwrap_err();
    assert_eq!(
        (err.errno, err.status.as_str()),
        (Errno::ENOSPC, "No space on L3:0")
    );
}

#[test]
fn tasks_and_cpus_follow_the_kernels_membership_rules() {
    let mut sim = SimulatedResctrl::boot(&MPAM_SEED, false);
    let a = sim.spawn("bw_mem 64M rd").unwrap();
    let b = sim.spawn("bw_mem 64M rd").unwrap();
    let rs = &mut sim.state.resctrl;
    rs.mkdir(&g("p1")).unwrap();
    rs.mkdir(&g("p2")).unwrap();
    rs.mkdir(&g("p1/m1")).unwrap();
    // A partial failure keeps the pids before the bad one moved.
    let err = rs
        .write_tasks(&g("p1"), &format!("{a},99999,{b}"))
        .unwrap_err();
    assert_eq!(
        err.status,
        "No task 99999\nError while processing task 99999"
    );
    assert!(rs.group("p1").unwrap().tasks.contains(&a));
    assert!(rs.group("").unwrap().tasks.contains(&b));
    assert_eq!(
        rs.write_tasks(&g("p1"), "12x").unwrap_err().status,
        "Task list parsing error pid 12x"
    );
    // A monitor group takes only tasks of its parent.
    let err = rs.write_tasks(&g("p1/m1"), &b.to_string()).unwrap_err();
    assert_eq!(
        err.status,
        format!("Can't move task to different control group\nError while processing task {b}")
    );
    rs.write_tasks(&g("p1/m1"), &a.to_string()).unwrap();
    assert!(!rs.group("p1").unwrap().tasks.contains(&a));
    assert!(rs.group("p1").unwrap().all_tasks().contains(&a));
    // CPUs move between control groups; the root cannot drop any.
    rs.write_cpus(&g("p1"), &"0-3".parse_cpus()).unwrap();
    rs.write_cpus(&g("p2"), &"2-5".parse_cpus()).unwrap();
    assert_eq!(rs.group("p1").unwrap().cpus.to_list(), "0-1");
    assert_eq!(rs.group("").unwrap().cpus.to_list(), "6-95");
    assert_eq!(
        rs.write_cpus(&g("p1/m1"), &"4".parse_cpus())
            .unwrap_err()
            .status,
        "Can only add CPUs to mongroup that belong to parent"
    );
    assert_eq!(
        rs.write_cpus(&g("p1"), &"96".parse_cpus())
            .unwrap_err()
            .status,
        "Can only assign online CPUs"
    );
    assert_eq!(
        rs.write_cpus(&g("/"), &"0-90".parse_cpus())
            .unwrap_err()
            .status,
        "Can't drop CPUs from default group"
    );
    // rmdir hands tasks and CPUs back to the root.
    rs.rmdir(&g("p1")).unwrap();
    assert!(rs.group("").unwrap().tasks.contains(&a));
    assert_eq!(rs.group("").unwrap().cpus.to_list(), "0-1,6-95");
}

trait ParseCpus {
    fn parse_cpus(&self) -> crate::linux::CpuSet;
}

impl ParseCpus for str {
    fn parse_cpus(&self) -> crate::linux::CpuSet {
        crate::linux::CpuSet::parse_list(self).unwrap()
    }
}

#[test]
fn a_control_groups_mon_data_includes_its_monitor_groups() {
    let mut sim = SimulatedResctrl::boot(&MPAM_SEED, false);
    let a = sim.spawn("numactl -N 1 -m 1 bw_mem -P 4 512M rd").unwrap();
    let b = sim.spawn("numactl -N 1 -m 1 bw_mem -P 4 512M rd").unwrap();
    for op in [
        Op::Mkdir { group: "p1".into() },
        Op::Mkdir {
            group: "p1/m1".into(),
        },
        Op::Tasks {
            group: "p1".into(),
            text: format!("{a},{b}"),
        },
        Op::Tasks {
            group: "p1/m1".into(),
            text: b.to_string(),
        },
    ] {
        sim.perform(&op).unwrap();
    }
    sim.advance(1.0, 0.5).unwrap();
    let data = sim.mon_data().unwrap();
    let get = |group: &str| {
        data.iter()
            .find(|r| r.group == group && r.domain == 1)
            .unwrap()
            .clone()
    };
    let (p1, m1) = (get("p1"), get("p1/m1"));
    assert!(m1.llc_occupancy.unwrap() > 0 && m1.mbm_total_bytes.unwrap() > 0);
    assert!(p1.llc_occupancy.unwrap() > m1.llc_occupancy.unwrap());
    // p1's own monitor id plus m1's, exactly.
    let own = sim
        .state
        .counters
        .iter()
        .find(|c| c.rmid == sim.state.resctrl.group("p1").unwrap().rmid && c.domain == 1)
        .unwrap()
        .clone();
    assert_eq!(
        p1.mbm_total_bytes.unwrap(),
        own.mbm_total_bytes + m1.mbm_total_bytes.unwrap()
    );
    assert_eq!(
        p1.llc_occupancy.unwrap(),
        own.llc_occupancy + m1.llc_occupancy.unwrap()
    );
    // MPAM provides no local-bandwidth counter.
    assert_eq!(p1.mbm_local_bytes, None);
}
