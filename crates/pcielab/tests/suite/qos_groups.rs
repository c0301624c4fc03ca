//! The simulated kernel's state file carries a machine between invocations, opened as a user
//! opens it (`--machine sim:mpam-seed --state FILE`); the group rules themselves are
//! `qos::tests::groups`.

use pcielab::machine::{Machine, MachineSelector};
use pcielab::qos::{Op, QosBackend};

#[test]
fn state_file_carries_the_machine_between_invocations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.json");
    let sel: MachineSelector = "sim:mpam-seed".parse().unwrap();
    let mut sim = Machine::open(&sel)
        .and_then(|m| m.simulated_resctrl(Some(&path), false))
        .unwrap();
    sim.perform(&Op::Mkdir { group: "p1".into() }).unwrap();
    sim.perform(&Op::Schemata {
        group: "p1".into(),
        text: "MB:0=7\n".into(),
    })
    .unwrap();
    sim.save().unwrap();
    let mut again = Machine::open(&sel)
        .and_then(|m| m.simulated_resctrl(Some(&path), false))
        .unwrap();
    assert_eq!(
        again
            .read()
            .unwrap()
            .group("p1")
            .unwrap()
            .schemata
            .get("MB", 0),
        Some(8)
    );
    let other: MachineSelector = "sim:rdt-xeon8163".parse().unwrap();
    let err = Machine::open(&other)
        .and_then(|m| m.simulated_resctrl(Some(&path), false))
        .err()
        .unwrap();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("state of sim:mpam-seed"), "{err}");
}
