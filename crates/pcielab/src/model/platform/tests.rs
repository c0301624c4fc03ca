use super::costs::{DmaDirection, FittedCell, IrqKind, MmioOp, PlatformModel};
use super::params::P;
use super::table::parse_platform;

use crate::model::transfer::{write, LinkParams, Overheads};
use crate::pcie::Generation;

#[test]
fn toml_round_trips_and_bad_values_name_the_key() {
    let mut m = PlatformModel::default();
    m.set(P::DmaSetupNs, 4374.5);
    m.set(P::DmaMaxReadRequests, 2.0);
    m.fitted = vec!["dma.setup_ns".into()];
    m.fitted_on = "a table".into();
    // Read back from a file, the model is one a spec gives.
    m.given = true;
    let back = parse_platform("p.toml", &m.to_toml()).unwrap();
    assert_eq!(back, m);
    assert!(back.is_fitted(P::DmaSetupNs));
    let e = parse_platform("p.toml", "[platform.dma]\nsetup_ns = -1\n").unwrap_err();
    assert!(
        e.message()
            .contains("p.toml: [platform] dma.setup_ns = -1 is out of range"),
        "{e}"
    );
    let e = parse_platform("p.toml", "[platform.dma]\nsetup = 1\n").unwrap_err();
    assert!(
        e.message().contains("has no key 'setup'") && e.message().contains("setup_ns"),
        "{e}"
    );
    let e = parse_platform("p.toml", "[platform.dma]\nmax_read_requests = 2.5\n").unwrap_err();
    assert!(e.message().contains("a whole number"), "{e}");
    assert!(parse_platform("p.toml", "[sim]\n")
        .unwrap_err()
        .message()
        .contains("no [platform]"));
}

#[test]
fn mmio_stores_pay_an_issue_interval_and_loads_a_round_trip() {
    let m = PlatformModel::default();
    let link = LinkParams::new(Generation::Gen3, 4);
    // 4 B per 75 ns issue interval; 16 B per interval: width scales stores.
    let s4 = m.mmio_mbps(MmioOp::Store, 4, 1, false, &link);
    assert!((s4 - 4.0 / 75.0 * 1000.0).abs() < 1e-9, "{s4}");
    assert!((m.mmio_mbps(MmioOp::Store, 16, 1, false, &link) / s4 - 4.0).abs() < 1e-9);
    // Threads share the one outbound path.
    assert_eq!(m.mmio_mbps(MmioOp::Store, 4, 4, false, &link), s4);
    // Write-combining merges 4-byte stores into 64-byte writes.
    assert!((m.mmio_mbps(MmioOp::Store, 4, 1, true, &link) / s4 - 16.0).abs() < 1e-9);
    // Loads: one in flight, latency plus the request's and completion's link time.
    let l4 = m.mmio_mbps(MmioOp::Load, 4, 1, false, &link);
    assert!(
        l4 < 4.0 / 950.0 * 1000.0 && l4 > 4.0 / 1000.0 * 1000.0,
        "{l4}"
    );
    // One load per thread, but the root complex's one slot: more threads do not help (§5.4.2)
    // until it has more.
    assert_eq!(m.mmio_mbps(MmioOp::Load, 4, 4, false, &link), l4);
    let mut wide = m.clone();
    wide.set(P::MmioLoadsOutstanding, 2.0);
    let l4x2 = wide.mmio_mbps(MmioOp::Load, 4, 4, false, &link);
    assert!((l4x2 / l4 - 2.0).abs() < 1e-9, "{l4x2}");
    assert_eq!(wide.mmio_mbps(MmioOp::Load, 4, 1, false, &link), l4);
}

#[test]
fn a_per_tlp_slot_makes_one_byte_past_mps_or_mrrs_cost_a_whole_slot() {
    let link = LinkParams::new(Generation::Gen3, 8);
    // A 256 B Memory Write is 276 wire bytes: 35 ns at Gen3 x8 (7877 MB/s), under 100.
    let full_tlp = write(256, &link).link_time_ns(&link, Overheads::Full);
    assert!(full_tlp > 30.0 && full_tlp < 40.0, "{full_tlp}");
    let mut m = PlatformModel::default();
    let time = |m: &PlatformModel, d, s| m.dma_transfer_ns(d, s, &link);
    // Without a slot one more byte costs about a byte's wire time plus a TLP's overhead.
    let step = time(&m, DmaDirection::Write, 257) - time(&m, DmaDirection::Write, 256);
    assert!(step < 5.0, "{step}");
    m.set(P::DmaWriteTlpNs, 100.0);
    m.set(P::DmaReadTlpNs, 400.0);
    let step = time(&m, DmaDirection::Write, 257) - time(&m, DmaDirection::Write, 256);
    assert!((step - 100.0).abs() < 0.5, "{step}");
    // Whole TLPs: 4 slots for 1 KB, whatever the bytes inside them.
    let kb = time(&m, DmaDirection::Write, 1024) - time(&m, DmaDirection::Write, 64);
    assert!((kb - 300.0).abs() < 0.5, "{kb}");
    // Reads: one byte past MRRS is one more request and its slot (the stream bound rules
    // with eight requests in flight and no latency).
    m.set(P::ReadLatencyNs, 0.0);
    m.set(P::ReadLatencyPerByteNs, 0.0);
    let step = time(&m, DmaDirection::Read, 2049) - time(&m, DmaDirection::Read, 2048);
    assert!((step - 400.0).abs() < 1.0, "{step}");
}

#[test]
fn in_sample_cells_and_another_link_are_told_apart() {
    let mut m = PlatformModel::default();
    let gen3x4 = LinkParams::new(Generation::Gen3, 4);
    let gen2x1 = LinkParams::new(Generation::Gen2, 1);
    assert_eq!(
        m.link_warning(&gen2x1),
        None,
        "no cells: nothing to compare"
    );
    m.fitted_cells = vec![FittedCell {
        direction: DmaDirection::Write,
        size: 64,
        gen: 3,
        width: 4,
    }];
    assert!(m.in_sample(DmaDirection::Write, 64, &gen3x4));
    assert!(!m.in_sample(DmaDirection::Read, 64, &gen3x4));
    assert!(!m.in_sample(DmaDirection::Write, 64, &gen2x1));
    assert_eq!(m.link_warning(&gen3x4), None);
    let w = m.link_warning(&gen2x1).unwrap();
    assert!(
        w.starts_with("platform fitted on Gen3 x4 only, applied to Gen2 x1"),
        "{w}"
    );
    let back = parse_platform("p.toml", &m.to_toml()).unwrap();
    assert_eq!(back.fitted_cells, m.fitted_cells);
    let e = parse_platform(
        "p.toml",
        "[platform]\nfitted_cells = [\"write 64 Gen3 x4\"]\n",
    )
    .unwrap_err();
    assert!(e.message().contains("\"write 64 B Gen3 x4\""), "{e}");
}

#[test]
fn interrupts_follow_the_slower_of_trigger_and_handler() {
    let m = PlatformModel::default();
    let link = LinkParams::new(Generation::Gen3, 4);
    // ELBI: the endpoint's 6 µs handler, not the 2 µs register write, sets the pace (§6.3).
    assert_eq!(m.irq_interval_ns(IrqKind::Elbi, &link), 6000.0);
    // MSI: the 2 µs CPU cost plus a 4-byte posted write's few nanoseconds on the link.
    let msi = m.irq_interval_ns(IrqKind::Msi, &link);
    assert!(msi > 2000.0 && msi < 2010.0, "{msi}");
}
