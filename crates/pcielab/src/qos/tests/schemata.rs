//! The schemata rules, one table row per kernel rule with the exact `last_cmd_status` text, on
//! both simulated machines (MPAM: sparse masks, MB 2 % steps; RDT: contiguous masks, 10 % steps).

use crate::linux::CpuSet;
use crate::qos::schemata::{Errno, Schemata};
use crate::qos::{GroupRef, Resctrl};
use crate::qos::{Preset, MPAM_SEED, RDT_XEON8163};

fn mount(preset: &Preset, cdp: bool) -> Resctrl {
    let mut rs = Resctrl::mount(
        preset.info(cdp),
        CpuSet::range(0, preset.nr_cpus() - 1),
        [100, 101, 102].into(),
    );
    rs.mkdir(&GroupRef::ctrl("p1")).unwrap();
    rs
}

/// (machine, cdp, write, kernel message, errno)
const REJECTED: &[(&str, bool, &str, &str, Errno)] = &[
    ("rdt", false, "L3:0=0\n", "Mask out of range", Errno::EINVAL),
    (
        "rdt",
        false,
        "L3:0=fff\n",
        "Mask out of range",
        Errno::EINVAL,
    ),
    (
        "mpam",
        false,
        "L3:0=8000\n",
        "Mask out of range",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3:0=5\n",
        "The mask 5 has non-consecutive 1-bits",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3:1=0x701\n",
        "The mask 701 has non-consecutive 1-bits",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3:0=7g\n",
        "Non-hex character in the mask 7g",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3:0=\n",
        "Non-hex character in the mask ",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3:0=f;0=3\n",
        "Duplicate domain 0",
        Errno::EINVAL,
    ),
    (
        "mpam",
        false,
        "L3:2=f\nL3:2=3\n",
        "Duplicate domain 2",
        Errno::EINVAL,
    ),
    (
        "mpam",
        false,
        "MB:1=50;1=40\n",
        "Duplicate domain 1",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L2:0=f\n",
        "Unknown or unsupported resource name 'L2'",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3CODE:0=f\n",
        "Unknown or unsupported resource name 'L3CODE'",
        Errno::EINVAL,
    ),
    (
        "mpam",
        true,
        "L3:0=f\n",
        "Unknown or unsupported resource name 'L3'",
        Errno::EINVAL,
    ),
    ("rdt", false, "L3 0=f\n", "Missing ':'", Errno::EINVAL),
    (
        "rdt",
        false,
        "L3:0=f\n\nMB:0=50\n",
        "Missing ':'",
        Errno::EINVAL,
    ),
    ("rdt", false, "L3:\n", "Missing 'L3' value", Errno::EINVAL),
    (
        "rdt",
        false,
        "L3:0f\n",
        "Missing '=' or non-numeric domain",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "L3:x=f\n",
        "Missing '=' or non-numeric domain",
        Errno::EINVAL,
    ),
    (
        "mpam",
        false,
        "MB:0=1\n",
        "MB value 1 out of range [2,100]",
        Errno::EINVAL,
    ),
    (
        "mpam",
        false,
        "MB:0=101\n",
        "MB value 101 out of range [2,100]",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "MB:0=5\n",
        "MB value 5 out of range [10,100]",
        Errno::EINVAL,
    ),
    (
        "rdt",
        false,
        "MB:0=5x\n",
        "Non-decimal digit in MB value 5x",
        Errno::EINVAL,
    ),
    (
        "mpam",
        false,
        "MB:0=-4\n",
        "Non-decimal digit in MB value -4",
        Errno::EINVAL,
    ),
];

fn preset(name: &str) -> &'static Preset {
    if name == "rdt" {
        &RDT_XEON8163
    } else {
        &MPAM_SEED
    }
}

#[test]
fn each_rule_rejects_with_the_kernels_message_and_changes_nothing() {
    for &(machine, cdp, write, message, errno) in REJECTED {
        let mut rs = mount(preset(machine), cdp);
        let before = rs.without_status();
        let err = rs
            .write_schemata(&GroupRef::ctrl("p1"), write)
            .expect_err(write);
        assert_eq!(err.status, message, "{machine} {write:?}");
        assert_eq!(err.errno, errno, "{machine} {write:?}");
        assert_eq!(rs.last_cmd_status, message, "{machine} {write:?}");
        assert_eq!(
            rs.without_status(),
            before,
            "{machine} {write:?} changed state"
        );
    }
}

/// (machine, cdp, write, resource, domain, value read back)
const ACCEPTED: &[(&str, bool, &str, &str, u32, u64)] = &[
    ("mpam", false, "L3:0=1;1=1;2=1;3=1\n", "L3", 3, 0x1),
    ("mpam", false, "L3:2=7ff1\n", "L3", 2, 0x7ff1),
    ("rdt", false, "L3:0=0x7f0\n", "L3", 0, 0x7f0),
    ("rdt", false, "L3:1=007\n", "L3", 1, 0x7),
    ("rdt", false, " L3:0=3;1=3;\n", "L3", 1, 0x3),
    ("mpam", false, "MB:0=10;1=10;2=10;3=10\n", "MB", 2, 10),
    ("mpam", false, "MB:0=3\n", "MB", 0, 4),
    ("mpam", false, "MB:1=2\n", "MB", 1, 2),
    ("rdt", false, "MB:0=15\n", "MB", 0, 20),
    ("rdt", false, "MB:1=91\n", "MB", 1, 100),
    ("mpam", true, "L3CODE:0=f\nL3DATA:0=f0\n", "L3DATA", 0, 0xf0),
    ("mpam", true, "L3CODE:1=3\n", "L3CODE", 1, 0x3),
];

#[test]
fn accepted_writes_read_back_rounded() {
    for &(machine, cdp, write, resource, domain, value) in ACCEPTED {
        let mut rs = mount(preset(machine), cdp);
        rs.write_schemata(&GroupRef::ctrl("p1"), write)
            .unwrap_or_else(|e| panic!("{machine} {write:?}: {e}"));
        assert_eq!(rs.last_cmd_status, "ok");
        let got = rs.group("p1").unwrap().schemata.get(resource, domain);
        assert_eq!(got, Some(value), "{machine} {write:?}");
    }
}

#[test]
fn partial_write_changes_only_named_domains_and_a_bad_line_applies_nothing() {
    let mut rs = mount(&MPAM_SEED, false);
    let p1 = GroupRef::ctrl("p1");
    rs.write_schemata(&p1, "L3:1=ff\n").unwrap();
    let s = &rs.group("p1").unwrap().schemata;
    assert_eq!(s.get("L3", 0), Some(0x7fff));
    assert_eq!(s.get("L3", 1), Some(0xff));
    assert_eq!(s.get("MB", 1), Some(100));
    // The first line is valid, the second is not: neither is applied.
    let err = rs.write_schemata(&p1, "L3:0=3\nMB:0=0\n").unwrap_err();
    assert_eq!(err.status, "MB value 0 out of range [2,100]");
    assert_eq!(rs.group("p1").unwrap().schemata.get("L3", 0), Some(0x7fff));
}

#[test]
fn a_write_must_end_with_a_newline_and_unknown_domains_leave_no_message() {
    let mut rs = mount(&RDT_XEON8163, false);
    let err = rs
        .write_schemata(&GroupRef::ctrl("p1"), "L3:0=3")
        .unwrap_err();
    assert_eq!((err.errno, err.status.as_str()), (Errno::EINVAL, ""));
    let err = rs
        .write_schemata(&GroupRef::ctrl("p1"), "L3:7=3\n")
        .unwrap_err();
    assert_eq!((err.errno, err.status.as_str()), (Errno::EINVAL, ""));
    assert!(err.detail.unwrap().contains("domains are 0,1"));
    assert_eq!(rs.last_cmd_status, "ok");
}

#[test]
fn min_cbm_bits_is_enforced_on_the_first_run_of_ones() {
    let mut info = RDT_XEON8163.info(false);
    info.caches[0].min_cbm_bits = 2;
    let mut rs = Resctrl::mount(info, CpuSet::range(0, 3), [1].into());
    rs.mkdir(&GroupRef::ctrl("p1")).unwrap();
    let err = rs
        .write_schemata(&GroupRef::ctrl("p1"), "L3:0=4\n")
        .unwrap_err();
    assert_eq!(err.status, "Need at least 2 bits in the mask");
    rs.write_schemata(&GroupRef::ctrl("p1"), "L3:0=c\n")
        .unwrap();
}

#[test]
fn exclusive_groups_refuse_overlap_both_ways() {
    let mut rs = mount(&RDT_XEON8163, false);
    let (root, p1, p2) = (GroupRef::root(), GroupRef::ctrl("p1"), GroupRef::ctrl("p2"));
    rs.mkdir(&p2).unwrap();
    // Everyone starts with the full mask: p1 cannot become exclusive yet.
    assert_eq!(
        rs.write_mode(&p1, "exclusive").unwrap_err().status,
        "Schemata overlaps"
    );
    rs.write_schemata(&root, "L3:0=7f0;1=7f0\n").unwrap();
    rs.write_schemata(&p2, "L3:0=7f0;1=7f0\n").unwrap();
    rs.write_schemata(&p1, "L3:0=f;1=f\n").unwrap();
    rs.write_mode(&p1, "exclusive").unwrap();
    assert_eq!(rs.bit_usage("L3").unwrap(), "0=SSSSSSSEEEE;1=SSSSSSSEEEE");
    assert_eq!(
        rs.write_schemata(&p2, "L3:0=1f\n").unwrap_err().status,
        "Overlaps with exclusive group"
    );
    assert_eq!(
        rs.write_schemata(&p1, "L3:1=1f\n").unwrap_err().status,
        "Overlaps with other group"
    );
    assert_eq!(
        rs.write_mode(&p1, "pseudo-lock").unwrap_err().status,
        "Unknown or unsupported mode"
    );
}

#[test]
fn mpam_hardware_shareable_bits_make_exclusive_impossible() {
    let mut rs = mount(&MPAM_SEED, false);
    rs.write_schemata(&GroupRef::root(), "L3:0=7ff0;1=7ff0;2=7ff0;3=7ff0\n")
        .unwrap();
    rs.write_schemata(&GroupRef::ctrl("p1"), "L3:0=f;1=f;2=f;3=f\n")
        .unwrap();
    assert_eq!(
        rs.write_mode(&GroupRef::ctrl("p1"), "exclusive")
            .unwrap_err()
            .status,
        "Schemata overlaps"
    );
}

#[test]
fn format_and_parse_round_trip_padded_and_unpadded() {
    let mut rs = mount(&MPAM_SEED, false);
    rs.write_schemata(
        &GroupRef::ctrl("p1"),
        "L3:0=1;1=30;2=7ff0;3=7fff\nMB:0=10;1=50;2=100;3=2\n",
    )
    .unwrap();
    let s = rs.group("p1").unwrap().schemata.clone();
    let text = s.format();
    assert_eq!(text, "L3:0=1;1=30;2=7ff0;3=7fff\nMB:0=10;1=50;2=100;3=2\n");
    assert_eq!(Schemata::parse_read(&text).unwrap(), s);
    let padded = "    L3:0=0001;1=0030;2=7ff0;3=7fff\n    MB:0= 10;1= 50;2=100;3=  2\n";
    assert_eq!(Schemata::parse_read(padded).unwrap(), s);
    let cdp = mount(&MPAM_SEED, true);
    assert_eq!(
        cdp.group("p1").unwrap().schemata.format(),
        "L3CODE:0=7fff;1=7fff;2=7fff;3=7fff\nL3DATA:0=7fff;1=7fff;2=7fff;3=7fff\n    MB:0=100;1=100;2=100;3=100\n"
    );
}

proptest::proptest! {
    /// Any accepted write reads back through format → parse_read unchanged, padded or not.
    #[test]
    fn accepted_writes_round_trip(masks in proptest::collection::vec(1u64..0x8000, 4), mbs in proptest::collection::vec(2u64..=100, 4)) {
        let mut rs = mount(&MPAM_SEED, false);
        let l3: Vec<String> = masks.iter().enumerate().map(|(d, m)| format!("{d}={m:x}")).collect();
        let mb: Vec<String> = mbs.iter().enumerate().map(|(d, v)| format!("{d}={v}")).collect();
        rs.write_schemata(&GroupRef::ctrl("p1"), &format!("L3:{}\nMB:{}\n", l3.join(";"), mb.join(";"))).unwrap();
        let s = rs.group("p1").unwrap().schemata.clone();
        for (d, v) in mbs.iter().enumerate() {
            proptest::prop_assert_eq!(s.get("MB", d as u32), Some(v.div_ceil(2) * 2));
        }
        proptest::prop_assert_eq!(Schemata::parse_read(&s.format()).unwrap(), s.clone());
        let padded = s.format().replace("=", "=000");
        proptest::prop_assert_eq!(Schemata::parse_read(&padded).unwrap(), s);
    }
}
