//! The seed's tables (Rockchip PCIe performance guide §2.1 raw bandwidth and §2.2 TLP loss) and
//! the kernel's integer link speeds, reproduced from the model as data-driven checks.

use crate::model::transfer::{write, LinkParams, Overheads};
use crate::pcie::link::{kernel_link_mbit, raw_mbps};
use crate::pcie::Generation;
use crate::pcie::TlpFormat;

fn within_0_1_percent(got: f64, want: f64) -> bool {
    ((got - want) / want).abs() <= 0.001
}

const WIDTHS: [u8; 4] = [1, 2, 4, 8];

#[test]
fn section_2_1_raw_bandwidth_all_16_cells() {
    let table: [(u8, [f64; 4]); 4] = [
        (1, [250.0, 500.0, 1000.0, 2000.0]),
        (2, [500.0, 1000.0, 2000.0, 4000.0]),
        (3, [984.6, 1969.0, 3938.0, 7877.0]),
        (4, [1969.0, 3938.0, 7877.0, 15754.0]),
    ];
    for (gen, row) in table {
        let gen = Generation::from_number(gen).unwrap();
        for (width, want) in WIDTHS.into_iter().zip(row) {
            let got = raw_mbps(gen, width);
            assert!(
                within_0_1_percent(got, want),
                "{gen} x{width}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn section_2_2_tlp_loss_gen3_with_28_byte_overhead() {
    let rows: [(u32, [f64; 4]); 2] = [
        (256, [887.5, 1775.0, 3550.0, 7100.2]),
        (128, [807.8, 1616.0, 3232.0, 6464.0]),
    ];
    for (mps, row) in rows {
        for (width, want) in WIDTHS.into_iter().zip(row) {
            let link = LinkParams {
                mps,
                format: TlpFormat {
                    addr64: true,
                    ecrc: true,
                    flit_ohc_dw: 0,
                },
                ..LinkParams::new(Generation::Gen3, width)
            };
            let got = write(1 << 20, &link).throughput_mbps(&link, Overheads::Ideal);
            assert!(
                within_0_1_percent(got, want),
                "MPS {mps} x{width}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn kernel_integer_link_speeds() {
    for (gen, width, want) in [
        (Generation::Gen3, 16, 126_016),
        (Generation::Gen5, 16, 504_112),
        (Generation::Gen6, 16, 1_024_000),
    ] {
        assert_eq!(kernel_link_mbit(gen, width), want, "{gen} x{width}");
    }
}
