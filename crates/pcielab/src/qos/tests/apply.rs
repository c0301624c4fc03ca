//! `qos apply`: a plan the kernel would refuse changes nothing; a failure injected while applying
//! (the kernel saying "Out of CLOSIDs" on the 3rd group, as a host could when another tool raced
//! us) rolls everything back to exactly the state before; `--dry-run` changes nothing.

use std::time::Duration;

use crate::qos::apply::{apply, parse_desired};
use crate::qos::backend::{MonReading, Op, QosBackend};
use crate::qos::schemata::{Errno, Rejection};
use crate::qos::Resctrl;
use crate::qos::SimulatedResctrl;
use crate::qos::MPAM_SEED;
use crate::Result;

/// A simulated machine whose kernel refuses the `fail_at`-th mkdir with ENOSPC.
struct Flaky {
    sim: SimulatedResctrl,
    mkdirs: usize,
    fail_at: usize,
}

impl QosBackend for Flaky {
    fn name(&self) -> String {
        "flaky".into()
    }
    fn read(&mut self) -> Result<Resctrl> {
        self.sim.read()
    }
    fn perform(&mut self, op: &Op) -> Result<()> {
        if let Op::Mkdir { .. } = op {
            self.mkdirs += 1;
            if self.mkdirs == self.fail_at {
                return Err(crate::qos::backend::refused(
                    op,
                    &Rejection::new(Errno::ENOSPC, "Out of CLOSIDs"),
                ));
            }
        }
        self.sim.perform(op)
    }
    fn mon_data(&mut self) -> Result<Vec<MonReading>> {
        self.sim.mon_data()
    }
    fn wait(&mut self, d: Duration) -> Result<()> {
        self.sim.wait(d)
    }
    fn save(&mut self) -> Result<()> {
        self.sim.save()
    }
}

const DESIRED: &str = "
groups:
  a_online:
    l3: \"4-14\"
    mb: \"60%\"
    tasks: [1000]
  b_batch:
    l3: {0: \"0xf\", 1: \"27%\", 2: \"f\", 3: \"f\"}
    mb: 20
    cpus: \"0-3\"
  c_scavenger:
    l3: \"1\"
    mb: 4
    tasks: [1001]
";

/// A machine with history: an existing group holding a task, CPUs and its own schemata.
fn machine() -> SimulatedResctrl {
    let mut sim = SimulatedResctrl::boot(&MPAM_SEED, false);
    let a = sim.spawn("bw_mem 64M rd").unwrap();
    let b = sim.spawn("bw_mem 64M rd").unwrap();
    assert_eq!((a, b), (1000, 1001));
    for op in [
        Op::Mkdir {
            group: "old".into(),
        },
        Op::Schemata {
            group: "old".into(),
            text: "L3:0=ff\nMB:1=50\n".into(),
        },
        Op::Tasks {
            group: "old".into(),
            text: "1001".into(),
        },
        Op::Cpus {
            group: "old".into(),
            cpus_list: "2-7".into(),
        },
    ] {
        sim.perform(&op).unwrap();
    }
    sim
}

#[test]
fn a_failure_on_the_third_group_rolls_back_to_exactly_the_state_before() {
    let sim = machine();
    let before = sim.state.resctrl.without_status();
    let desired = parse_desired(DESIRED, "partitions.yaml", &before.info).unwrap();
    let mut flaky = Flaky {
        sim,
        mkdirs: 0,
        fail_at: 3,
    };
    let err = apply(&mut flaky, &desired, false).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("\"Out of CLOSIDs\" (ENOSPC)"), "{msg}");
    assert!(msg.contains("rolled back"), "{msg}");
    // The groups, their schemata, tasks, CPUs and modes are exactly as before.
    assert_eq!(flaky.sim.state.resctrl.without_status(), before);
    // Without the fault the same file applies and verifies.
    let mut ok = Flaky {
        sim: machine(),
        mkdirs: 0,
        fail_at: 0,
    };
    let report = apply(&mut ok, &desired, false).unwrap();
    assert_eq!(report.applied, report.plan.len());
    let rs = &ok.sim.state.resctrl;
    assert_eq!(
        rs.group("a_online").unwrap().schemata.get("L3", 3),
        Some(0x7ff0)
    );
    assert_eq!(
        rs.group("a_online").unwrap().schemata.get("MB", 0),
        Some(60)
    );
    assert_eq!(
        rs.group("b_batch").unwrap().schemata.get("L3", 1),
        Some(0xf)
    );
    assert_eq!(rs.group("b_batch").unwrap().cpus.to_list(), "0-3");
    assert_eq!(rs.group("old").unwrap().cpus.to_list(), "4-7");
    assert!(rs.group("c_scavenger").unwrap().tasks.contains(&1001));
    // Applying again has nothing to do.
    assert!(apply(&mut ok, &desired, false).unwrap().plan.is_empty());
}

#[test]
fn a_plan_the_kernel_would_refuse_touches_nothing() {
    let mut sim = machine();
    // 16 PARTIDs: root + old + 12 more leave room for exactly two of the three groups.
    for i in 0..12 {
        sim.perform(&Op::Mkdir {
            group: format!("fill{i}"),
        })
        .unwrap();
    }
    let before = sim.state.resctrl.without_status();
    let desired = parse_desired(DESIRED, "partitions.yaml", &before.info).unwrap();
    let err = apply(&mut sim, &desired, false).unwrap_err();
    assert!(
        err.to_string().contains("would fail, nothing was changed"),
        "{err}"
    );
    assert!(err.to_string().contains("mkdir c_scavenger"), "{err}");
    assert!(err.to_string().contains("Out of CLOSIDs"), "{err}");
    assert_eq!(sim.state.resctrl.without_status(), before);
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let mut sim = machine();
    let before = sim.state.resctrl.clone();
    let desired = parse_desired(DESIRED, "partitions.yaml", &before.info).unwrap();
    let report = apply(&mut sim, &desired, true).unwrap();
    assert!(report.dry_run);
    assert_eq!(report.applied, 0);
    let shell: Vec<&str> = report.plan.iter().map(|p| p.shell.as_str()).collect();
    assert_eq!(shell[0], "mkdir a_online");
    assert_eq!(
        shell[1],
        "printf 'L3:0=7ff0;1=7ff0;2=7ff0;3=7ff0\\nMB:0=60;1=60;2=60;3=60\\n' > a_online/schemata"
    );
    assert_eq!(sim.state.resctrl, before);
}

#[test]
fn toml_files_work_too_and_bad_fields_are_named() {
    let info = MPAM_SEED.info(false);
    let toml = "[groups.online]\nl3 = \"60%\"\nmb = \"50%\"\n";
    let g = parse_desired(toml, "p.toml", &info).unwrap();
    assert_eq!(g[0].schemata["L3"][&2], 0x1ff);
    for (text, needle) in [
        (
            "groups:\n  x:\n    l3: \"0-15\"\n",
            "groups.x.l3.0: way range '0-15' must lie within 0-14",
        ),
        (
            "groups:\n  x:\n    l3: {7: \"f\"}\n",
            "groups.x.l3: domain '7' is not one of [0, 1, 2, 3]",
        ),
        (
            "groups:\n  x:\n    l3code: \"f\"\n",
            "this machine has no L3CODE resource",
        ),
        ("groups:\n  x:\n    colour: red\n", "unknown key 'colour'"),
        ("nothing: 1\n", "groups: missing"),
    ] {
        let err = parse_desired(text, "p.yaml", &info).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains(needle), "{err}");
    }
}
