//! `pcielab model` end to end: the JSON shape, the Rockchip guide's §2.2 numbers through the command line,
//! and exit code 2 with the flag named for every invalid value.

use crate::common;
use common::pcielab;

fn json(args: &[&str]) -> serde_json::Value {
    let out = pcielab(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn json_has_exactly_the_documented_shape() {
    let v = json(&[
        "model", "--gen", "3", "--width", "4", "--sizes", "4K,257", "--json",
    ]);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "achievable_MBps",
            "gen",
            "line_rate_MBps",
            "mps",
            "mrrs",
            "points",
            "rcb",
            "schema",
            "width"
        ]
    );
    assert_eq!(v["schema"], "pcielab.model/v1");
    assert_eq!(v["gen"], 3);
    assert_eq!(v["width"], 4);
    assert_eq!(
        (v["mps"].as_u64(), v["mrrs"].as_u64(), v["rcb"].as_u64()),
        (Some(256), Some(512), Some(64))
    );
    assert_eq!(v["line_rate_MBps"], 3938.46);
    // 256 B of payload per 276 B TLP, less one SKP block in 376.
    assert_eq!(v["achievable_MBps"], 3643.35);
    let point = &v["points"][0];
    let mut point_keys: Vec<&str> = point
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    point_keys.sort();
    assert_eq!(
        point_keys,
        [
            "completion_tlps",
            "read_MBps",
            "read_request_tlps",
            "size",
            "write_MBps",
            "write_tlps"
        ]
    );
    assert_eq!(point["size"], 4096);
    assert_eq!(point["write_tlps"], 16);
    assert_eq!(point["read_request_tlps"], 8);
    assert_eq!(point["completion_tlps"], 16);
    // 257 bytes: the saw-tooth just above MPS.
    assert_eq!(v["points"][1]["write_tlps"], 2);
    assert!(v["points"][1]["write_MBps"].as_f64() < point["write_MBps"].as_f64());
}

#[test]
fn seed_section_2_2_through_the_command_line() {
    for (mps, want) in [("256", 887.5), ("128", 807.8)] {
        let v = json(&[
            "model", "--gen", "3", "--width", "1", "--mps", mps, "--addr64", "--ecrc", "--ideal",
            "--sizes", "1M", "--json",
        ]);
        let got = v["points"][0]["write_MBps"].as_f64().unwrap();
        assert!(((got - want) / want).abs() <= 0.001, "MPS {mps}: {got}");
    }
}

#[test]
fn table_names_the_link_and_settings() {
    let out = pcielab(&["model", "--gen", "6", "--width", "16", "--sizes", "64,1M"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Gen6 x16"), "{text}");
    assert!(text.contains("128000.00 MB/s"), "{text}");
    assert!(text.contains("kernel: 1024000 Mb/s"), "{text}");
    assert!(text.contains("1048576"), "{text}");
}

#[test]
fn invalid_values_exit_2_naming_the_flag_and_valid_set() {
    let cases: [(&[&str], &str, &str); 7] = [
        (
            &["--gen", "8", "--width", "4"],
            "--gen <GEN>",
            "'8' is not a number in 1..=7",
        ),
        (&["--gen", "3", "--width", "3"], "width 3", "12"),
        (
            &["--gen", "3", "--width", "4", "--mps", "100"],
            "mps 100",
            "4096",
        ),
        (
            &["--gen", "3", "--width", "4", "--mrrs", "8192"],
            "mrrs 8192",
            "128",
        ),
        (
            &["--gen", "3", "--width", "4", "--rcb", "32"],
            "rcb 32",
            "64 or 128",
        ),
        (
            &["--gen", "3", "--width", "4", "--sizes", "4KB"],
            "--sizes",
            "1024-based",
        ),
        (
            &["--gen", "3", "--width", "4", "--completion-size", "x"],
            "--completion-size",
            "mps or rcb",
        ),
    ];
    for (args, names, valid) in cases {
        let mut full = vec!["model"];
        full.extend_from_slice(args);
        let out = pcielab(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(names) && err.contains(valid),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn help_has_examples() {
    let out = pcielab(&["model", "--help"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Examples:") && text.contains("--addr64 --ecrc --ideal"));
}

#[test]
fn request_response_flags_refuse_what_they_cannot_mean() {
    let refused = |extra: &[&str], says: &str| {
        let out = pcielab(
            &[
                &["model", "--gen", "3", "--width", "2", "--sizes", "4K"][..],
                extra,
            ]
            .concat(),
        );
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{extra:?}: {err}");
    };
    refused(&["--aspm", "l1"], "give --io-latency-us too");
    refused(
        &["--io-latency-us", "80", "--aspm", "l1"],
        "--exit-latency-ns L0S,L1",
    );
    refused(
        &[
            "--io-latency-us",
            "80",
            "--aspm",
            "l2",
            "--exit-latency-ns",
            "1,2",
        ],
        "expected none, l0s, l1 or l0s+l1",
    );
    refused(
        &[
            "--io-latency-us",
            "80",
            "--aspm",
            "l1",
            "--exit-latency-ns",
            "16000",
        ],
        "expected two latencies",
    );
    refused(
        &["--io-latency-us", "-1"],
        "expected a latency of 0 µs or more",
    );
    // An L0s exit costs nothing when only L1 is enabled, and the L1 exit only past L1 entry.
    let iops = |extra: &[&str]| {
        json(
            &[
                &[
                    "model",
                    "--gen",
                    "3",
                    "--width",
                    "2",
                    "--sizes",
                    "4K",
                    "--json",
                    "--io-latency-us",
                    "80",
                ][..],
                extra,
            ]
            .concat(),
        )["points"][0]["predicted_qd1_read_iops"]
            .as_f64()
            .unwrap()
    };
    let off = iops(&[]);
    // 80 µs access + 2 µs drive service (500k IOPS) + 0.7 µs round trip.
    assert!((off - 1e9 / 82_700.0).abs() < 0.06, "{off}");
    let l1 = iops(&["--aspm", "l1", "--exit-latency-ns", "4000,16000"]);
    assert!((l1 - 1e9 / 98_700.0).abs() < 0.06, "{l1}");
    let late = iops(&[
        "--aspm",
        "l1",
        "--exit-latency-ns",
        "4000,16000",
        "--l1-entry-ns",
        "100000",
    ]);
    assert_eq!(late, off);
    let l0s = iops(&[
        "--aspm",
        "l0s+l1",
        "--exit-latency-ns",
        "4000,16000",
        "--l1-entry-ns",
        "100000",
    ]);
    assert!((l0s - 1e9 / 86_700.0).abs() < 0.06, "{l0s}");
}
