//! The catalogs' own lookups, and (drivers.rs) the catalogs against the kernel's driver sources.

mod drivers;

use super::event::{Family, Group, Unit};
use super::lookup::edit_distance;
use super::tables::DWC_EVENTS;

#[test]
fn seed_and_upstream_names_resolve_to_one_event() {
    let f = Family::DwcRootPort;
    let seed = f.find("Rx_PCIe_TLP_Data_Payload").unwrap();
    let upstream = f.find("rx_pcie_tlp_data_payload").unwrap();
    assert_eq!(seed, upstream);
    assert_eq!(seed.config, 0x21);
    assert_eq!(seed.unit, Unit::Bytes(16));
    assert_eq!(f.find("L1.1").unwrap().name, "L1_1");
    assert_eq!(f.find("l1_1").unwrap().config, 0x05);
    assert_eq!(f.find("Tx_Completion_w_Data").unwrap().config, 0x10707);
    assert_eq!(f.find("TX_COMPLETION_WITH_DATA").unwrap().config, 0x10707);
    assert_eq!(f.find("rx_memory_read").unwrap().config, 0x1070c);
    assert_eq!(f.find("Rx_Nak_DLLP").unwrap().group, Group::Lane(2));
    assert!(f.find("rx_configuration_write").is_none());
}

#[test]
fn catalog_has_every_seed_event_once() {
    // Seed counts: time-based 10 + 4, event groups 11, 6, 8, 6, 2, 14, 7, 22.
    let count = |g: Group| DWC_EVENTS.iter().filter(|e| e.group == g).count();
    assert_eq!(count(Group::TimeBased(0)), 10);
    assert_eq!(count(Group::TimeBased(1)), 4);
    let per_group = [11, 6, 8, 6, 2, 14, 7, 22];
    for (g, n) in per_group.iter().enumerate() {
        assert_eq!(count(Group::Lane(g as u8)), *n, "group {g}");
    }
    for (i, a) in DWC_EVENTS.iter().enumerate() {
        for b in &DWC_EVENTS[i + 1..] {
            assert_ne!(a.config, b.config, "{} / {}", a.name, b.name);
            assert!(!b.matches(a.name) && !b.matches(a.seed_name), "{}", a.name);
        }
    }
}

#[test]
fn widths_follow_the_seed() {
    let f = Family::DwcRootPort;
    let bits = |n: &str| f.find(n).unwrap().group.counter_bits(f);
    assert_eq!(bits("Rx_PCIe_TLP_Data_Payload"), 64);
    assert_eq!(bits("EBUF_Overflow"), 4);
    assert_eq!(bits("LCRC_Error"), 8);
    assert_eq!(bits("tx_ack_dllp"), 32);
    assert!(f.find("EBUF_SKP_Add").unwrap().group.per_lane());
    assert!(!f.find("LCRC_Error").unwrap().group.per_lane());
}

#[test]
fn suggestions_rank_by_edit_distance() {
    let s = Family::DwcRootPort.suggest("Rx_PCIe_TLP_Data_Paylod");
    assert_eq!(s[0], "Rx_PCIe_TLP_Data_Payload");
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(Family::HisiPcie.find("rx_mwr_flux").unwrap().config, 0x104);
    assert_eq!(Family::IntelIio.find("bw_in_port3").unwrap().config, 0x23ff);
}
