use pcielab::model::fit::{fit, predict};
use pcielab::model::measurements::parse_measurements;
use pcielab::model::transfer::LinkParams;
use pcielab::pcie::Generation::Gen3;
#[test]
fn scratch() {
    let link = LinkParams::new(Gen3, 4);
    let path = format!(
        "{}/../../fixtures/rockchip/rk3588-gen3x4-dmatest.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let rows = parse_measurements(&path, &std::fs::read_to_string(&path).unwrap(), &link).unwrap();
    let t = std::time::Instant::now();
    let r = fit(&rows, &link, "x").unwrap();
    let cost: f64 = rows
        .iter()
        .map(|m| {
            (predict(&r.model, &m.workload, &link).0 / m.mbps)
                .ln()
                .powi(2)
        })
        .sum();
    eprintln!("cost {cost:.6e} in {:?}\n{}", t.elapsed(), r.to_text());
}
