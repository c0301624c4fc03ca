//! The MPAM/resctrl article's findings, checked on the shipped scenarios (`scenarios/*.toml`) against the
//! simulated machines' parameters: nothing here is a recorded output, every bound is derived
//! from a preset or from another measured curve.

use std::path::Path;

use crate::qos::scenario::{Line, Outcome, Scenario};
use crate::qos::{MPAM_SEED, RDT_XEON8163};

fn run(name: &str) -> Outcome {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../scenarios/{name}.toml"));
    Scenario::load(&path).unwrap().run().unwrap()
}

fn ys(line: &Line) -> Vec<f64> {
    line.points.iter().map(|p| p.1).collect()
}

#[test]
fn occupancy_never_falls_as_ways_grow_and_fills_what_the_mask_allows() {
    let o = run("l3-occupancy-vs-ways");
    let occ = o.line("monitored (mon_L3_00 llc_occupancy)").unwrap();
    let ideal = o.line("ideal (ways x way size)").unwrap();
    let way_kib = MPAM_SEED.l3_bytes as f64 / MPAM_SEED.l3_ways as f64 / 1024.0;
    for w in ys(occ).windows(2) {
        assert!(w[1] >= w[0], "occupancy fell: {occ:?}");
    }
    for (x, y) in &occ.points {
        assert_eq!(ideal.at(*x), Some(x * way_kib));
        // A 10 GiB stream fills its ways, and cannot exceed them.
        assert!(
            *y <= x * way_kib && *y >= 0.95 * x * way_kib,
            "{x} ways: {y} KiB"
        );
    }
}

#[test]
fn latency_falls_with_ways_once_the_chase_stops_fitting() {
    let o = run("latency-vs-ways");
    let lat = ys(&o.lines[0]);
    // 145 MiB at a 512-byte stride touches 18 MiB of lines: more than the whole 15 MiB L3.
    let footprint = (145u64 << 20) / 512 * 64;
    assert!(footprint > MPAM_SEED.l3_bytes);
    for w in lat.windows(2) {
        assert!(w[1] <= w[0] + 0.5, "latency rose with more ways: {lat:?}");
    }
    let (one, all) = (lat[0], lat[lat.len() - 1]);
    assert!(
        one >= 0.95 * MPAM_SEED.mem_idle_ns,
        "1 way should be almost all misses: {one}"
    );
    assert!(all >= MPAM_SEED.l3_hit_ns, "cannot beat an L3 hit: {all}");
    // No replacement policy keeps more than l3/footprint of a cyclic chase resident.
    let best_hit_share = MPAM_SEED.l3_bytes as f64 / footprint as f64;
    let best =
        MPAM_SEED.l3_hit_ns * best_hit_share + MPAM_SEED.mem_idle_ns * (1.0 - best_hit_share);
    assert!(all >= 0.98 * best, "{all} beats the best possible {best}");
    assert!(all < 0.75 * one, "{all} vs {one}");
}

#[test]
fn overlapping_aggressors_cost_the_victim_more_than_disjoint_ones() {
    let o = run("interference");
    let (low, top) = (&o.lines[0], &o.lines[1]);
    let victim_kib = 11.0 * MPAM_SEED.l3_bytes as f64 / 15.0 / 1024.0;
    for (x, y_low) in &low.points {
        let y_top = top.at(*x).unwrap();
        assert!(
            y_top < 0.99 * y_low,
            "{x} ways: overlapping {y_top} vs disjoint {y_low}"
        );
        if *x <= 4.0 {
            // Disjoint masks (p2 within ways 0-3) leave p1's 11 ways to p1.
            assert!(*y_low >= 0.97 * victim_kib, "{x} ways: {y_low}");
        }
    }
    // More overlap, less left for the victim.
    let top_ys = ys(top);
    assert!(top_ys[10] < top_ys[0], "{top_ys:?}");
    let low_ys = ys(low);
    assert!(low_ys[11] < low_ys[3], "{low_ys:?}");
}

#[test]
fn one_core_saturates_at_its_miss_limit_and_mbwu_keeps_its_input_bias() {
    // Nothing here is a prediction of the MPAM/resctrl article: core_outstanding was chosen so one core
    // saturates near 20 % MB, the node peak so a node saturates near 80 %, and the 0.70 monitor
    // bias is an input (docs/qos.md marks them fitted). Checked: the knee follows from
    // outstanding misses / latency, the throttle rules below it, the bias applies everywhere.
    let o = run("mb-throttling");
    let cpu = o.line("1 CPU measured").unwrap();
    let full = cpu.at(100.0).unwrap();
    let reference = MPAM_SEED.mb_reference_gbps * 1e3;
    // What one core can pull: outstanding misses x 64 B / latency.
    let per_core = MPAM_SEED.core_outstanding * 64.0 / MPAM_SEED.mem_idle_ns * 1e3;
    assert!(
        full <= per_core && full > 0.85 * per_core,
        "{full} vs {per_core}"
    );
    let knee = (full / reference * 100.0).ceil();
    // The fitted knee stays where it was fitted (a guard on the preset, not evidence).
    assert!(
        (15.0..=25.0).contains(&knee),
        "one core saturates at {knee} %"
    );
    for (mb, y) in &cpu.points {
        if *mb >= knee + 4.0 {
            assert!((y - full).abs() < 0.01 * full, "MB {mb}: {y} vs {full}");
        }
        if *mb <= knee - 8.0 {
            // Below the knee the throttle is what limits: MB % of the reference bandwidth.
            assert!(
                (y - mb / 100.0 * reference).abs() < 0.02 * reference,
                "MB {mb}: {y}"
            );
        }
    }
    let node = o.line("1 node measured").unwrap();
    let node_full = node.at(100.0).unwrap();
    assert!(node_full <= MPAM_SEED.node_peak_gbps * 1e3);
    assert!(node_full > 0.9 * MPAM_SEED.node_peak_gbps * 1e3);
    assert!(node.at(40.0).unwrap() < 0.6 * node_full);
    assert!((node.at(88.0).unwrap() - node_full).abs() < 0.01 * node_full);
    for series in ["1 CPU", "1 node", "all nodes"] {
        let measured = o.line(&format!("{series} measured")).unwrap();
        let monitored = o.line(&format!("{series} monitored")).unwrap();
        for (x, m) in &measured.points {
            let ratio = monitored.at(*x).unwrap() / m;
            assert!(
                (0.67..=0.73).contains(&ratio),
                "{series} MB {x}: monitor/measured {ratio}"
            );
        }
    }
}

#[test]
fn xeon_bandwidth_monitor_is_within_eight_percent() {
    let o = run("mb-throttling-rdt");
    let (measured, monitored) = (&o.lines[0], &o.lines[1]);
    for (x, m) in &measured.points {
        let ratio = monitored.at(*x).unwrap() / m;
        assert!((0.92..=1.08).contains(&ratio), "MB {x}: {ratio}");
    }
    let full = measured.at(100.0).unwrap();
    assert!(full <= RDT_XEON8163.node_peak_gbps * 1e3);
    assert!(measured.at(10.0).unwrap() < 0.2 * full);
}

/// Mean of a line over `from < t <= to`.
fn mean(o: &Outcome, label: &str, from: f64, to: f64) -> f64 {
    let pts: Vec<f64> = o
        .line(label)
        .unwrap()
        .points
        .iter()
        .filter(|p| p.0 > from && p.0 <= to)
        .map(|p| p.1)
        .collect();
    pts.iter().sum::<f64>() / pts.len() as f64
}

/// The online group's occupancy after isolation over its occupancy while sharing.
fn online_rise(o: &Outcome) -> f64 {
    mean(o, "online occupancy", 300.0, 400.0) / mean(o, "online occupancy", 50.0, 200.0)
}

#[test]
fn isolating_the_online_service_raises_its_occupancy_about_as_the_article_saw() {
    let o = run("colocation");
    // The article: the online service's L3 occupancy rose by about 35 % once isolated. With its
    // one stated aggressor (stress-ng --cache 10), stress-ng's own sweep and CPU hopping, and a
    // working set beyond the L3, the simulator gives +41 %: held to within a factor 1.5 of +35 %.
    let rise = online_rise(&o);
    assert!(
        (1.0 + 0.35 / 1.5..=1.0 + 0.35 * 1.5).contains(&rise),
        "online occupancy rose {rise:.2}x"
    );
    let eleven_ways = 4.0 * 11.0 * MPAM_SEED.l3_bytes as f64 / 15.0 / 1024.0;
    let isolated = mean(&o, "online occupancy", 300.0, 400.0);
    // A working set far beyond the L3 fills every way it may, and no more.
    assert!(
        isolated <= 1.02 * eleven_ways && isolated >= 0.98 * eleven_ways,
        "online {isolated} KiB"
    );
    // Offline is held to its 4 ways per domain.
    let offline = mean(&o, "offline occupancy", 300.0, 400.0);
    let four_ways = 4.0 * 4.0 * MPAM_SEED.l3_bytes as f64 / 15.0 / 1024.0;
    assert!(offline <= 1.02 * four_ways, "offline {offline} KiB");
    // The stand-in's limit (docs/qos.md): uniform reuse over 2 GiB gains under 1 % of hits from
    // 11 ways, so its throughput does not move, where the article saw SPECjbb's improve.
    let (before, after) = (
        mean(&o, "online throughput", 50.0, 200.0),
        mean(&o, "online throughput", 300.0, 400.0),
    );
    assert!(
        (after / before - 1.0).abs() < 0.03,
        "online throughput {before} -> {after}"
    );
}

#[test]
fn the_colocation_rise_is_decided_by_the_aggressor_worker_count_the_article_leaves_out() {
    // docs/qos.md: the same experiment with one stress-ng worker per CPU (96, the scenario's
    // earlier assumption) triples the rise; the article does not say how many it ran.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/colocation.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("stress-ng --cache 10 --aggressive"));
    let o = Scenario::parse(
        &text.replace("stress-ng --cache 10", "stress-ng --cache 96"),
        "colocation with 96 workers",
    )
    .unwrap()
    .run()
    .unwrap();
    let rise = online_rise(&o);
    assert!((2.6..=3.4).contains(&rise), "96 workers: {rise:.2}x");
}
