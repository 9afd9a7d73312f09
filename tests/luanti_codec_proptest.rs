//! Round-trip properties of the map-block codec: any block valid per the model's
//! invariants encodes at every writable version and decodes back equal.

#[allow(dead_code)]
mod common;

use common::mapblock::arb::stored_block;
use proptest::prelude::*;
use worldfs::luanti::codec::block::{MapBlock, NODE_COUNT};
use worldfs::luanti::codec::{decode_block, decompress_only, encode_block};

/// `block` made storable at `version`: no private variables before 28, no
/// lighting_complete before 27.
fn at_version(block: &MapBlock, version: u8) -> MapBlock {
    let mut b = block.clone();
    b.version = version;
    if version < 27 {
        b.lighting_complete = 0xFFFF;
    }
    if version < 28 {
        for m in &mut b.metadata {
            for v in &mut m.vars {
                v.private = false;
            }
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn blocks_round_trip_at_every_version(block in stored_block()) {
        for version in 24..=29u8 {
            let b = at_version(&block, version);
            let encoded = encode_block(&b).unwrap();
            prop_assert_eq!(encoded[0], version);
            prop_assert!(decompress_only(&encoded).unwrap() >= NODE_COUNT * 4);
            let back = decode_block(&encoded).unwrap();
            prop_assert!(back == b, "version {} differs", version);
        }
        for version in [22u8, 23] {
            let b = at_version(&block, version);
            let back = decode_block(&encode_block(&b).unwrap()).unwrap();
            prop_assert!(back == at_version(&b, 25), "version {} is written as 25", version);
        }
    }

    #[test]
    fn unstorable_fields_are_rejected(block in stored_block()) {
        let mut b = at_version(&block, 25);
        b.lighting_complete = 0;
        let e = encode_block(&b).unwrap_err();
        prop_assert_eq!(e.errno(), libc::EINVAL);
    }
}
