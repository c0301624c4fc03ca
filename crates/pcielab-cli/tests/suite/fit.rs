//! `pcielab fit` end to end: fitting the Rockchip guide's dmatest table, writing the [platform] fragment,
//! `model --platform` reading it back, and exit 2 naming row and column for bad CSVs.

use std::process::Command;

use crate::common;
use common::pcielab;

fn fixture(name: &str) -> String {
    format!(
        "{}/../../fixtures/rockchip/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn fit_writes_a_platform_that_model_predicts_with() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rk3588.toml");
    let table = fixture("rk3588-gen3x4-dmatest.txt");
    let args = [
        "fit",
        &table,
        "--gen",
        "3",
        "--width",
        "4",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ];
    let run = pcielab(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["rows"].as_array().unwrap().len(), 12);
    let setup = report["params"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "dma.setup_ns")
        .unwrap();
    assert_eq!(setup["status"], "fitted");
    assert!(setup["uncertainty"].as_f64().unwrap() > 0.0);
    // The same input gives the same output, byte for byte.
    assert_eq!(pcielab(&args).stdout, run.stdout);

    let model = pcielab(&[
        "model",
        "--gen",
        "3",
        "--width",
        "4",
        "--sizes",
        "4M",
        "--json",
        "--platform",
        out.to_str().unwrap(),
    ]);
    assert!(
        model.status.success(),
        "{}",
        String::from_utf8_lossy(&model.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&model.stdout).unwrap();
    let point = &v["points"][0];
    // Link-only figures keep their names; the platform's sit beside them.
    assert!(point["write_MBps"].as_f64().unwrap() > 3600.0);
    let predicted = point["predicted_write_MBps"].as_f64().unwrap();
    assert!(
        (predicted / 3066.1 - 1.0).abs() < 0.05,
        "4 MB write {predicted} vs the Rockchip guide's 3066.1"
    );
    assert!(point["predicted_read_latency_ns"].as_f64().is_some());

    // The read latency's 1-sigma is printed in the text too, and is the fitted file's fixed
    // and per-byte sigmas (the latter over the first request's bytes, MRRS 512) in quadrature.
    let fitted = std::fs::read_to_string(&out).unwrap();
    let sigma_of = |key: &str| -> f64 {
        let at = fitted.find(&format!("\"{key}\" = ")).unwrap() + key.len() + 5;
        let rest = &fitted[at..];
        rest[..rest.find([',', ' ', '}']).unwrap()].parse().unwrap()
    };
    let (fixed, per_byte) = (
        sigma_of("root_complex.read_latency_ns"),
        sigma_of("root_complex.read_latency_per_byte_ns"),
    );
    let sweep = |json: bool| {
        let mut args = vec!["model", "--gen", "3", "--width", "4", "--sizes", "64,4K,4M"];
        args.extend(["--platform", out.to_str().unwrap()]);
        if json {
            args.push("--json");
        }
        let run = pcielab(&args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8(run.stdout).unwrap()
    };
    let doc: serde_json::Value = serde_json::from_str(&sweep(true)).unwrap();
    let text = sweep(false);
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("size"))
        .unwrap();
    assert!(header.ends_with("read ns ± 1 sigma"), "{text}");
    for p in doc["points"].as_array().unwrap() {
        let size = p["size"].as_u64().unwrap();
        let ns = p["predicted_read_latency_ns"].as_f64().unwrap();
        let sigma = p["predicted_read_latency_sigma_ns"].as_f64().unwrap();
        let want = fixed.hypot(per_byte * size.min(512) as f64);
        assert!(
            (sigma - want).abs() <= 0.05 + 1e-9 * want,
            "{size} B: sigma {sigma}, from the fitted sigmas {want}"
        );
        let row = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size.to_string().as_str()))
            .unwrap_or_else(|| panic!("no {size} row in {text}"));
        assert!(
            row.ends_with(&format!("  {ns:.1} ± {sigma:.1}")),
            "{size} B: {row}"
        );
    }
}

#[test]
fn bad_csvs_exit_2_naming_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("size_bytes,MBps\n64,1\n", "missing column 'direction'"),
        (
            "size_bytes,direction,MBps\n64,write,1\n128,write,x1\n",
            ":3: column 'MBps': 'x1' is not a number",
        ),
        (
            "size_bytes,direction,MBps\n-5,write,1\n",
            ":2: column 'size_bytes': -5",
        ),
        (
            "size_bytes,direction,MBps\n64,up,1\n",
            ":2: column 'direction': 'up' is not known",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.csv"));
        std::fs::write(&file, text).unwrap();
        let out = pcielab(&["fit", file.to_str().unwrap(), "--gen", "3", "--width", "4"]);
        assert_eq!(out.status.code(), Some(2), "{text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{stderr}");
    }
    let out = pcielab(&[
        "model",
        "--gen",
        "3",
        "--width",
        "4",
        "--platform",
        &fixture("rk3588-gen3x4-dmatest.txt"),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// Runs the real fio (a Debian package, in .ci/run) on a scratch file; its stdout.
fn fio(dir: &std::path::Path, extra: &[&str]) -> Vec<u8> {
    let file = dir.join("data");
    let mut args = vec![
        "--name=r".to_string(),
        format!("--filename={}", file.display()),
        "--size=1M".into(),
        "--rw=randread".into(),
        "--bs=4k".into(),
        "--ioengine=psync".into(),
        "--iodepth=4".into(),
        "--numjobs=2".into(),
        "--output-format=json".into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let out = Command::new("fio").args(&args).output().expect("run fio");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn fio_json_from_the_real_fio_fits_with_clones_summed() {
    let dir = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--group_reporting"][..]] {
        let stdout = fio(dir.path(), extra);
        // fio puts a "queue depth will be capped at 1" note ahead of the JSON (psync).
        let text = String::from_utf8(stdout.clone()).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&text[text.find("\n{").map_or(0, |i| i + 1)..]).unwrap();
        let fio_total: f64 = json["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["read"]["bw_bytes"].as_f64().unwrap())
            .sum::<f64>()
            / 1e6;
        let saved = dir.path().join("fio.json");
        std::fs::write(&saved, &stdout).unwrap();
        let run = pcielab(&[
            "fit",
            saved.to_str().unwrap(),
            "--gen",
            "3",
            "--width",
            "4",
            "--json",
        ]);
        assert!(
            run.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        let rows = report["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{extra:?}: {rows:?}");
        assert_eq!(rows[0]["workload"], "fio read bs=4096 q1 t2", "{extra:?}");
        let measured = rows[0]["measured_MBps"].as_f64().unwrap();
        assert!(
            (measured / fio_total - 1.0).abs() < 1e-9,
            "{extra:?}: {measured} vs fio's {fio_total}"
        );
    }
}

#[test]
fn platform_fitted_on_one_table_predicts_another_without_fitting() {
    // presets/rk3588-ep.toml is fitted on §4.3.2 (Gen3 x4); §4.3.3 is the same boards at Gen2 x1.
    let preset = format!(
        "{}/../../presets/rk3588-ep.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let table = fixture("rk3588-gen2x1-dmatest.txt");
    let base = ["fit", &table, "--gen", "2", "--width", "1", "--addr64"];
    let run = pcielab(&[&base[..], &["--platform", &preset, "--json"]].concat());
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(report["platform_fitted_on"]
        .as_str()
        .unwrap()
        .contains("4.3.2"));
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 12);
    for row in rows {
        let (workload, error) = (
            row["workload"].as_str().unwrap(),
            row["residual_percent"].as_f64().unwrap(),
        );
        if workload.ends_with(" 4194304") || workload.ends_with(" 1048576") {
            assert!(error.abs() <= 10.0, "{row}");
        } else {
            // The per-transfer cost the Gen3 x4 table cannot show grows on the narrow link.
            assert!(error > 20.0, "{row}");
        }
    }
    // Nothing is fitted, so there is nothing to write.
    let out = pcielab(&[&base[..], &["--platform", &preset, "--out", "x.toml"]].concat());
    assert_eq!(out.status.code(), Some(2));
}
