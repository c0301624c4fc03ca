//! The tuned transfer model against the implementation it replaced (`model::reference`), bit for
//! bit: every TLP count, byte count, DLLP expectation and throughput figure, for random
//! addresses, sizes, generations, widths, MPS, MRRS, RCB, TLP formats and completion policies,
//! including divisors that are not powers of two (the tuned code shifts only for powers of two).

use super::drawn_link;
use crate::model::reference;
use crate::model::transfer::{read_at, write_at, LinkParams, Overheads};
use crate::pcie::TlpFormat;
use proptest::prelude::*;

/// A legal MPS/MRRS most of the time, sometimes any size from 1 to 8 KiB.
fn size_field(legal: &'static [u32]) -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => prop::sample::select(legal.to_vec()),
        1 => 1u32..8192,
    ]
}

fn any_link() -> impl Strategy<Value = LinkParams> {
    (
        (1u8..=7, 1u8..=32),
        size_field(&LinkParams::SIZES),
        size_field(&LinkParams::SIZES),
        size_field(&LinkParams::RCBS),
        (any::<bool>(), any::<bool>(), 0u8..4),
        any::<bool>(),
    )
        .prop_map(
            |((gen, width), mps, mrrs, rcb, (addr64, ecrc, flit_ohc_dw), rcb_split)| {
                let format = TlpFormat {
                    addr64,
                    ecrc,
                    flit_ohc_dw,
                };
                drawn_link((gen, width), (mps, mrrs, rcb), format, rcb_split)
            },
        )
}

/// Sizes from empty through a few bytes to many MiB, at addresses anywhere below 2^48.
fn any_transfer() -> impl Strategy<Value = (u64, u64)> {
    (
        prop_oneof![0u64..65536, 0u64..(1 << 48)],
        prop_oneof![0u64..4096, 0u64..(1 << 32)],
    )
}

/// `Debug` prints every f64 as its shortest round-trip form, so equal text is equal bits.
fn bits<T: std::fmt::Debug>(value: &T) -> String {
    format!("{value:?}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]

    #[test]
    fn tuned_model_matches_the_reference_bit_for_bit(
        link in any_link(),
        (addr, size) in any_transfer(),
    ) {
        for overheads in [Overheads::Full, Overheads::Ideal] {
            let tuned = write_at(addr, size, &link);
            let oracle = reference::write_at(addr, size, &link);
            prop_assert_eq!(bits(&tuned), bits(&oracle));
            prop_assert_eq!(
                tuned.throughput_mbps(&link, overheads).to_bits(),
                reference::throughput_mbps(&oracle, &link, overheads).to_bits()
            );
            let tuned = read_at(addr, size, &link);
            let oracle = reference::read_at(addr, size, &link);
            prop_assert_eq!(bits(&tuned), bits(&oracle));
            prop_assert_eq!(
                tuned.throughput_mbps(&link, overheads).to_bits(),
                reference::throughput_mbps(&oracle, &link, overheads).to_bits()
            );
        }
    }
}
