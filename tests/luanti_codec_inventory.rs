//! The inventory text format against the engine's own unit-test strings, and round-trip
//! properties of inventories and itemstrings.

#[allow(dead_code)]
mod common;

use common::samples;
use proptest::prelude::*;
use worldfs::luanti::codec::block::{Inventory, InventoryList, ItemStack};
use worldfs::luanti::codec::inventory::{
    parse_inventory, parse_itemstring, serialize_inventory, serialize_itemstring,
};

#[test]
fn engine_output_is_reproduced() {
    let out = samples::read(samples::INVENTORY_OUT);
    let inv = parse_inventory(&out).unwrap();
    assert_eq!(inv.lists.len(), 2);
    assert_eq!(serialize_inventory(&inv), out);
}

#[test]
fn engine_test_input_renamed_gives_engine_output() {
    // test_inventory.cpp: deserialize _in, rename list "0" to "main", set width 5,
    // serialize → _out.
    let mut inv = parse_inventory(&samples::read(samples::INVENTORY_IN)).unwrap();
    assert_eq!(inv.lists[0].name, "0");
    assert_eq!(inv.lists[0].width, 3);
    assert_eq!(inv.lists[1].width, 0);
    inv.lists[0].name = "main".to_string();
    inv.lists[0].width = 5;
    assert_eq!(
        serialize_inventory(&inv),
        samples::read(samples::INVENTORY_OUT)
    );
}

#[test]
fn incremental_form_is_rejected() {
    let e = parse_inventory(&samples::read(samples::INVENTORY_INC)).unwrap_err();
    assert!(e.message().starts_with("line 1, column 1:"), "{e}");
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..max),
        "[a-z_:0-9]{1,20}".prop_map(String::into_bytes),
        "\\PC{0,12}".prop_map(String::into_bytes),
    ]
}

fn item() -> impl Strategy<Value = ItemStack> {
    prop_oneof![
        Just(ItemStack::default()),
        (bytes(16), 1..=u16::MAX, any::<u16>(), bytes(24)).prop_filter_map(
            "non-empty name",
            |(name, count, wear, metadata)| {
                (!name.is_empty()).then_some(ItemStack {
                    name,
                    count,
                    wear,
                    metadata,
                })
            }
        ),
    ]
}

fn inventory() -> impl Strategy<Value = Inventory> {
    proptest::collection::vec(
        (
            "[a-z0-9_:]{0,10}",
            any::<u32>(),
            proptest::collection::vec(item(), 0..12),
        ),
        0..4,
    )
    .prop_map(|lists| {
        let mut out: Vec<InventoryList> = Vec::new();
        for (name, width, slots) in lists {
            if out.iter().all(|l| l.name != name) {
                out.push(InventoryList { name, width, slots });
            }
        }
        Inventory { lists: out }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn itemstrings_round_trip(item in item()) {
        let text = serialize_itemstring(&item);
        prop_assert!(!text.contains(&b'\n'));
        prop_assert_eq!(parse_itemstring(&text).unwrap(), item);
    }

    #[test]
    fn inventories_round_trip(inv in inventory()) {
        let text = serialize_inventory(&inv);
        let parsed = parse_inventory(&text).unwrap();
        prop_assert_eq!(&parsed, &inv);
        prop_assert_eq!(serialize_inventory(&parsed), text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_inventory(&text);
        let _ = parse_itemstring(&text);
    }
}
