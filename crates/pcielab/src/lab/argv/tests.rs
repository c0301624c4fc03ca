use super::limits::{Limit, QEMU_CURRENT_LINK};

use super::*;
use crate::pcie::bdf;

fn plan_of(argv: &[&str]) -> QemuPlan {
    QemuPlan {
        argv: argv.iter().map(|w| w.to_string()).collect(),
        disks: Vec::new(),
        limits: Vec::new(),
        numa_nodes: 1,
        kernel_cmdline: String::new(),
    }
}

#[test]
fn vcpus_are_split_over_numa_nodes_when_each_can_have_one() {
    assert_eq!(node_cpus(0, 2, 1), Some((0, 0)));
    assert_eq!(node_cpus(1, 2, 1), None);
    assert_eq!(node_cpus(0, 2, 2), Some((0, 0)));
    assert_eq!(node_cpus(1, 2, 2), Some((1, 1)));
    assert_eq!(node_cpus(0, 3, 8), Some((0, 1)));
    assert_eq!(node_cpus(2, 3, 8), Some((4, 7)));
    assert_eq!(node_cpus(0, 1, 4), Some((0, 3)));
}

#[test]
fn shell_command_puts_options_on_lines_and_quotes_only_what_needs_it() {
    let plan = plan_of(&[
        "qemu-system-x86_64",
        "-machine",
        "q35,accel=tcg",
        "-append",
        "console=ttyS0 it's",
        "-nographic",
    ]);
    assert_eq!(
        plan.shell_command(),
        "qemu-system-x86_64 \\\n  -machine q35,accel=tcg \\\n  -append 'console=ttyS0 it'\\''s' \\\n  -nographic"
    );
    assert_eq!(plan_of(&[]).shell_command(), "");
}

#[test]
fn q35_builtins_are_the_fixed_addresses_only() {
    for addr in ["00:00.0", "00:1f.0", "00:1f.2", "00:1f.3"] {
        assert!(is_q35_builtin(bdf(addr)), "{addr}");
    }
    for addr in ["00:1f.1", "00:02.0", "01:00.0"] {
        assert!(!is_q35_builtin(bdf(addr)), "{addr}");
    }
}

#[test]
fn limit_line_names_function_field_and_reason() {
    let limit = Limit {
        bdf: bdf("00:02.0"),
        field: "link.speed".into(),
        spec: "16 GT/s".into(),
        qemu: "2.5 GT/s".into(),
        why: QEMU_CURRENT_LINK.into(),
    };
    assert_eq!(
        limit.to_string(),
        format!("0000:00:02.0 link.speed: spec 16 GT/s, QEMU shows 2.5 GT/s ({QEMU_CURRENT_LINK})")
    );
}
