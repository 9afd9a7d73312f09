//! Round-trip properties of the map-block codec: any block valid per the model's
//! invariants encodes at every writable version and decodes back equal.

use proptest::prelude::*;
use worldfs::luanti::codec::block::{
    Inventory, InventoryList, ItemStack, LuaEntity, LuaEntityExtra, MapBlock, MetaVar, NodeMeta,
    NodeTimer, ObjectData, RelPos, StaticObject, NODE_COUNT,
};
use worldfs::luanti::codec::{decode_block, decompress_only, encode_block};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn item() -> impl Strategy<Value = ItemStack> {
    prop_oneof![
        Just(ItemStack::default()),
        ("[a-z:_]{1,12}", 1..=u16::MAX, any::<u16>(), bytes(12)).prop_map(
            |(name, count, wear, metadata)| ItemStack {
                name: name.into_bytes(),
                count,
                wear,
                metadata,
            }
        ),
    ]
}

fn inventory() -> impl Strategy<Value = Inventory> {
    proptest::collection::btree_map(
        "[a-z]{1,6}",
        (any::<u32>(), proptest::collection::vec(item(), 0..6)),
        0..3,
    )
    .prop_map(|lists| Inventory {
        lists: lists
            .into_iter()
            .map(|(name, (width, slots))| InventoryList { name, width, slots })
            .collect(),
    })
}

fn metadata() -> impl Strategy<Value = Vec<NodeMeta>> {
    proptest::collection::btree_map(
        0..NODE_COUNT as u16,
        (
            proptest::collection::btree_map(bytes(10), (bytes(30), any::<bool>()), 0..4),
            inventory(),
        ),
        0..4,
    )
    .prop_map(|entries| {
        entries
            .into_iter()
            .map(|(index, (vars, inventory))| NodeMeta {
                pos: RelPos::from_index(index).unwrap(),
                vars: vars
                    .into_iter()
                    .map(|(key, (value, private))| MetaVar {
                        key,
                        value,
                        private,
                    })
                    .collect(),
                inventory,
            })
            .filter(|m| !m.vars.is_empty() || !m.inventory.lists.is_empty())
            .collect()
    })
}

fn object() -> impl Strategy<Value = StaticObject> {
    let pos = proptest::array::uniform3(any::<i32>());
    let extra = proptest::option::of((1..=3u8, any::<i32>(), any::<i32>(), any::<[u8; 16]>()))
        .prop_map(|x| {
            x.map(|(version2, pitch, roll, guid)| LuaEntityExtra {
                version2,
                pitch,
                roll,
                guid: (version2 >= 2).then_some(guid),
            })
        });
    let entity = (
        "[a-z_:]{0,16}",
        bytes(40),
        any::<u16>(),
        proptest::array::uniform3(any::<i32>()),
        any::<i32>(),
        extra,
    )
        .prop_map(|(name, state, hp, velocity, yaw, extra)| {
            ObjectData::LuaEntity(LuaEntity {
                name,
                state,
                hp,
                velocity,
                yaw,
                extra,
            })
        });
    prop_oneof![
        (pos, entity).prop_map(|(pos, data)| StaticObject { kind: 7, pos, data }),
        (0..7u8, pos, bytes(50)).prop_map(|(kind, pos, data)| StaticObject {
            kind,
            pos,
            data: ObjectData::Raw(data),
        }),
    ]
}

fn timers() -> impl Strategy<Value = Vec<NodeTimer>> {
    proptest::collection::btree_map(0..NODE_COUNT as u16, (1..=i32::MAX, any::<i32>()), 0..5)
        .prop_map(|t| {
            t.into_iter()
                .map(|(index, (timeout, elapsed))| NodeTimer {
                    pos: RelPos::from_index(index).unwrap(),
                    timeout,
                    elapsed,
                })
                .collect()
        })
}

/// Node content as runs over a palette, then made canonical (names in first-use order).
fn nodes() -> impl Strategy<Value = (Vec<String>, Vec<u16>)> {
    (
        proptest::collection::vec("[a-z]{1,8}:[a-z_]{1,10}|\\PC{1,6}", 1..8),
        proptest::collection::vec((0..8usize, 1..600usize), 1..40),
    )
        .prop_map(|(palette, runs)| {
            let mut raw = Vec::with_capacity(NODE_COUNT);
            'fill: loop {
                for &(p, len) in &runs {
                    for _ in 0..len {
                        if raw.len() == NODE_COUNT {
                            break 'fill;
                        }
                        raw.push(&palette[p % palette.len()]);
                    }
                }
            }
            let mut names: Vec<String> = Vec::new();
            let content = raw
                .into_iter()
                .map(|name| match names.iter().position(|n| n == name) {
                    Some(i) => i as u16,
                    None => {
                        names.push(name.clone());
                        (names.len() - 1) as u16
                    }
                })
                .collect();
            (names, content)
        })
}

fn block() -> impl Strategy<Value = MapBlock> {
    (
        (any::<u8>(), any::<u16>(), any::<u32>()),
        nodes(),
        bytes(NODE_COUNT + 1).prop_map(|mut b| {
            b.resize(NODE_COUNT, 0);
            b
        }),
        proptest::collection::vec(any::<u8>(), NODE_COUNT),
        metadata(),
        proptest::collection::vec(object(), 0..4),
        timers(),
    )
        .prop_map(
            |(
                (flags, lighting_complete, timestamp),
                (names, content),
                param1,
                param2,
                metadata,
                objects,
                timers,
            )| {
                MapBlock {
                    version: 29,
                    flags,
                    lighting_complete,
                    timestamp,
                    names,
                    content,
                    param1,
                    param2,
                    metadata,
                    objects,
                    timers,
                }
            },
        )
}

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
    fn blocks_round_trip_at_every_version(block in block()) {
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
    fn unstorable_fields_are_rejected(block in block()) {
        let mut b = at_version(&block, 25);
        b.lighting_complete = 0;
        let e = encode_block(&b).unwrap_err();
        prop_assert_eq!(e.errno(), libc::EINVAL);
    }
}
