//! The platform model against the Rockchip PCIe performance guide's tables (fixtures/rockchip/,
//! copied from the guide's §4.3 and §8.2; docs/sources.md): fit on one table, then assert only
//! predictions of tables (or table cells) the fit did not see. docs/calibration.md holds every
//! cell, including the ones that miss.

use pcielab::model::fit::{compare, fit, FitReport, ParamResult, RowResult, Status};
use pcielab::model::platform::{IrqKind, PlatformModel};
use pcielab::model::transfer::LinkParams;
use pcielab::model::{parse_measurements, Measurement, Workload};
use pcielab::pcie::Generation::{self, Gen2, Gen3};

fn fixture(name: &str) -> Vec<Measurement> {
    let path = format!(
        "{}/../../fixtures/rockchip/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let base = LinkParams::new(Gen3, 4);
    parse_measurements(name, &std::fs::read_to_string(path).unwrap(), &base).unwrap()
}

/// A table whose every row names the link it was measured on (as CSV `gen`,`width` columns
/// do), for fits over several links.
fn measured_on(name: &str, on: LinkParams) -> Vec<Measurement> {
    fixture(name)
        .into_iter()
        .map(|mut m| {
            m.link = Some(on);
            m
        })
        .collect()
}

fn descriptor_of(report: &FitReport) -> &ParamResult {
    report
        .params
        .iter()
        .find(|p| p.key == "dma.descriptor_bytes")
        .unwrap()
}

fn link(gen: Generation, width: u8, mps: u32) -> LinkParams {
    LinkParams {
        mps,
        ..LinkParams::new(gen, width)
    }
}

/// 64-bit addresses: 4 DW request headers.
fn with_addr64(mut on: LinkParams) -> LinkParams {
    on.format.addr64 = true;
    on
}

fn size_of(m: &Measurement) -> u64 {
    match m.workload {
        Workload::Dma { size, .. } => size,
        Workload::Queued { bs, .. } => bs,
        Workload::Mmio { width, .. } => u64::from(width),
    }
}

fn within(rows: &[RowResult], percent: f64) {
    for r in rows {
        assert!(
            r.residual_percent.abs() <= percent,
            "{} (line {}): measured {} predicted {} ({:+.2} %, limit {percent} %)",
            r.workload,
            r.line,
            r.measured_mbps,
            r.predicted_mbps,
            r.residual_percent
        );
    }
}

#[test]
fn rk3588_gen3x4_dma_fit_predicts_the_gen2x1_table_within_ten_percent_only_at_1mb_and_above() {
    // Fitted on §4.3.2 only; §4.3.3 is the same controller trained to Gen2 x1. 64-bit
    // addresses as the rk3588-ep presets (the Rockchip guide does not say; with 32-bit ones 1 MB writes
    // come out at +10.05 %, docs/calibration.md).
    let gen3x4 = with_addr64(link(Gen3, 4, 256));
    let fitted = fit(&fixture("rk3588-gen3x4-dmatest.txt"), &gen3x4, "§4.3.2").unwrap();
    let gen2x1 = with_addr64(link(Gen2, 1, 256));
    let rows = compare(
        &fitted.model,
        &fixture("rk3588-gen2x1-dmatest.txt"),
        &gen2x1,
    );
    let (large, small): (Vec<RowResult>, Vec<RowResult>) = rows
        .into_iter()
        .partition(|r| r.workload.ends_with("1048576") || r.workload.ends_with("4194304"));
    assert_eq!(large.len(), 4);
    // The target, met at 1 MB and 4 MB (+5.1 … +8.5 %).
    within(&large, 10.0);
    // Missed from 64 KB down (+23 % at 64 KB, about +100 % at 4 KB): the per-transfer cost
    // grows about 4× on the narrow link (16.8 µs against 4.4 µs per 64 B transfer), and one
    // link's table cannot tell a fixed cost from a link-dependent one; the fit says so for
    // dma.descriptor_bytes. The model is optimistic there, never pessimistic.
    // Bounded on both sides: each miss as docs/calibration.md's table gives it, ±5 points.
    let documented = [
        ("write 64", 270.1),
        ("write 256", 255.3),
        ("write 4096", 100.8),
        ("write 65536", 22.0),
        ("read 64", 254.3),
        ("read 256", 230.5),
        ("read 4096", 99.8),
        ("read 65536", 20.7),
    ];
    assert_eq!(small.len(), documented.len());
    for (cell, percent) in documented {
        let r = small.iter().find(|r| r.workload == cell).unwrap();
        assert!(
            (r.residual_percent - percent).abs() <= 5.0,
            "{}: {:+.2} %, documented {percent:+} %",
            r.workload,
            r.residual_percent
        );
    }
    let descriptor = descriptor_of(&fitted);
    assert_eq!(descriptor.status, Status::NotDetermined);
    assert!(
        descriptor.note.contains("dma.setup_ns"),
        "{}",
        descriptor.note
    );
}

/// Fits every other size of a table and predicts the sizes left out.
fn leave_sizes_out(table: &str, on: &LinkParams) -> Vec<RowResult> {
    let all = fixture(table);
    let mut sizes: Vec<u64> = all.iter().map(size_of).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let held_out = |m: &Measurement| sizes.iter().position(|&s| s == size_of(m)).unwrap() % 2 == 1;
    let train: Vec<Measurement> = all.iter().filter(|m| !held_out(m)).cloned().collect();
    let test: Vec<Measurement> = all.iter().filter(|m| held_out(m)).cloned().collect();
    let fitted = fit(&train, on, "every other size").unwrap();
    compare(&fitted.model, &test, on)
        .into_iter()
        .filter(|r| {
            r.workload
                .split(' ')
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
                >= 256
        })
        .collect()
}

#[test]
fn leaving_sizes_out_predicts_them_within_five_percent_where_the_shape_holds() {
    // Gen2 x1 (both directions) and the Gen3 x4 reads: every held-out size ≥ 256 B within 5 %.
    within(
        &leave_sizes_out("rk3588-gen2x1-dmatest.txt", &link(Gen2, 1, 256)),
        5.0,
    );
    let gen3x4 = leave_sizes_out("rk3588-gen3x4-dmatest.txt", &link(Gen3, 4, 256));
    let (writes, reads): (Vec<RowResult>, Vec<RowResult>) = gen3x4
        .into_iter()
        .partition(|r| r.workload.starts_with("write"));
    within(&reads, 5.0);
    // Gen3 x4 writes miss the 5 % target: measured per-byte cost falls with size (0.52 ns/B
    // from 256 B to 4 KB, 0.32 ns/B past 64 KB), which setup + bytes/rate cannot follow, nor
    // a per-TLP slot (none of these sizes is just past MPS). Bounded on both sides: 256 B
    // −8.1 %, 64 KB +8.3 %, 4 MB −1.7 %.
    within(&writes, 9.0);
    let at = |size: &str| {
        writes
            .iter()
            .find(|r| r.workload == format!("write {size}"))
            .unwrap()
            .residual_percent
    };
    assert!((-9.0..=-7.0).contains(&at("256")), "{}", at("256"));
    assert!((7.0..=9.0).contains(&at("65536")), "{}", at("65536"));
}

#[test]
fn bar_model_fitted_on_32_bit_accesses_predicts_simd_128_bit() {
    let gen3x4 = link(Gen3, 4, 256);
    // §5.4.1 row 1: user-space 32-bit store 53 MB/s, load 4 MB/s.
    let fitted = fit(
        &fixture("bar-rk3588-gen3x4-32bit.csv"),
        &gen3x4,
        "§5.4.1 32-bit",
    )
    .unwrap();
    // Row 2: SIMD 128-bit, 203 and 16 MB/s.
    within(
        &compare(
            &fitted.model,
            &fixture("bar-rk3588-gen3x4-simd128.csv"),
            &gen3x4,
        ),
        10.0,
    );
    // One thread's loads cannot tell latency from loads in flight.
    let outstanding = fitted
        .params
        .iter()
        .find(|p| p.key == "mmio.loads_outstanding")
        .unwrap();
    assert_eq!(outstanding.status, Status::NotDetermined);
}

#[test]
fn nvme_fit_on_rk3528_predicts_the_other_samsung_980_gen2x1_boards() {
    let gen2x1 = link(Gen2, 1, 256);
    let fitted = fit(&fixture("nvme-rk3528-gen2x1.csv"), &gen2x1, "§8.2.5").unwrap();
    for board in ["nvme-rk3562-gen2x1.csv", "nvme-rk3576-gen2x1.csv"] {
        let rows = compare(&fitted.model, &fixture(board), &gen2x1);
        let (random_writes, rest): (Vec<RowResult>, Vec<RowResult>) = rows
            .into_iter()
            .partition(|r| r.workload == "fio write bs=4096 q32 t1");
        within(&rest, 15.0);
        // RND4K write: 76k IOPS on RK3528 against 63k on RK3562 and RK3576: the CPU cost per
        // write I/O is the SoC's own (cores, clocks, f2fs), so it does not carry over.
        assert!(
            random_writes[0].residual_percent > 15.0,
            "{:?}",
            random_writes[0]
        );
    }
}

#[test]
fn fits_are_deterministic() {
    let rows = fixture("rk3568-gen3x2-dmatest.txt");
    let on = link(Gen3, 2, 128);
    let a = fit(&rows, &on, "§4.3.1").unwrap();
    let b = fit(&rows, &on, "§4.3.1").unwrap();
    assert_eq!(a, b);
    assert_eq!(a.rows.len(), 12);
}

#[test]
fn two_links_separate_link_dependent_from_fixed_per_transfer_cost() {
    // §4.3.2 and §4.3.3 together (the same boards at Gen3 x4 and Gen2 x1): fitted on both, so
    // nothing here is a prediction; what is checked is that the fit can now determine the
    // per-transfer bytes crossing the link, which one link's table cannot.
    let mut rows = measured_on("rk3588-gen3x4-dmatest.txt", link(Gen3, 4, 256));
    rows.extend(measured_on("rk3588-gen2x1-dmatest.txt", link(Gen2, 1, 256)));
    let fitted = fit(&rows, &link(Gen3, 4, 256), "§4.3.2 + §4.3.3").unwrap();
    let descriptor = descriptor_of(&fitted);
    assert_eq!(descriptor.status, Status::Fitted, "{}", descriptor.note);
    let (value, sigma) = (descriptor.value.unwrap(), descriptor.uncertainty.unwrap());
    assert!(value > 0.0 && sigma < 0.1 * value, "{value} ± {sigma}");
    // One set of parameters describes both links' 24 cells (fitted: 6.6 KB, rms 5.4 %).
    within(&fitted.rows, 15.0);
}

#[test]
fn two_gen2x1_sizes_beside_the_gen3x4_table_predict_the_other_gen2x1_cells() {
    // One link's table cannot split the per-transfer cost into a fixed and a link-dependent
    // part; two sizes from a second link configuration can. Fitted on all of §4.3.2 and the
    // 64 B and 1 MB cells of §4.3.3 (both directions), the other eight §4.3.3 cells are
    // predictions (docs/calibration.md, "Two sizes on a second link").
    let mut rows = measured_on("rk3588-gen3x4-dmatest.txt", link(Gen3, 4, 256));
    let (seen, held_out): (Vec<Measurement>, Vec<Measurement>) =
        measured_on("rk3588-gen2x1-dmatest.txt", link(Gen2, 1, 256))
            .into_iter()
            .partition(|m| matches!(size_of(m), 64 | 1_048_576));
    assert_eq!((seen.len(), held_out.len()), (4, 8));
    rows.extend(seen);
    let fitted = fit(&rows, &link(Gen3, 4, 256), "§4.3.2 + §4.3.3 64 B, 1 MB").unwrap();
    let descriptor = descriptor_of(&fitted);
    assert_eq!(descriptor.status, Status::Fitted, "{}", descriptor.note);
    let predicted = compare(&fitted.model, &held_out, &link(Gen3, 4, 256));
    let (to_4k, larger): (Vec<RowResult>, Vec<RowResult>) = predicted
        .into_iter()
        .partition(|r| !r.workload.contains("65536") && !r.workload.contains("4194304"));
    // Measured: within +1…+6 % up to 4 KB; +14 % for 64 KB writes, whose Gen3 x4 curve bends
    // in a way no fixed cost plus rate follows (see leave-sizes-out below).
    within(&to_4k, 6.0);
    within(&larger, 15.0);
}

#[test]
fn interrupt_defaults_from_the_rk3588_rows_differ_on_the_rk3568_link_only_by_the_msi_write() {
    // §6.3 and §7.3 each give an RK3568 row beside the RK3588 one. The defaults are the RK3588
    // rows (msi_cpu_ns, elbi_cpu_ns) and §6.4 (elbi_trigger_ns), so on RK3588 they reproduce
    // those rows and the RK3568 rows (2 and 6 µs, the same whole microseconds) are no test of a
    // prediction. What the model adds is the MSI's own 4-byte posted write on the link: on the
    // RK3568's Gen3 x2 it takes twice the Gen3 x4 time. 4 B payload + 12 B header + 8 B
    // framing = 24 wire bytes at 1969.23 MB/s (x2) against 3938.46 MB/s (x4), plus the SKP
    // share (1/376 of the link).
    let model = PlatformModel::default();
    let (rk3568, rk3588) = (link(Gen3, 2, 128), link(Gen3, 4, 256));
    let msi_gap =
        model.irq_interval_ns(IrqKind::Msi, &rk3568) - model.irq_interval_ns(IrqKind::Msi, &rk3588);
    let wire_gap = (24.0 / 1969.23 - 24.0 / 3938.46) * 1000.0 * 376.0 / 375.0;
    assert!(
        (msi_gap / wire_gap - 1.0).abs() < 0.01,
        "{msi_gap} ns vs {wire_gap} ns"
    );
    // The ELBI interval has no link term: the same on both boards.
    assert_eq!(
        model.irq_interval_ns(IrqKind::Elbi, &rk3568),
        model.irq_interval_ns(IrqKind::Elbi, &rk3588)
    );
}
