//! The one generator of synthetic Luanti map blocks for the tests: hand-made blocks (an
//! all-stone block, a chest, a block with every kind of view content, a blank block) and,
//! in [`arb`], the proptest strategies of blocks the codec stores and of blocks the text
//! views cover.

use worldfs::luanti::cache::new_block;
use worldfs::luanti::codec::block::{
    BlockPos, Inventory, InventoryList, ItemStack, LuaEntity, LuaEntityExtra, MapBlock, MetaVar,
    NodeMeta, NodeTimer, ObjectData, RelPos, StaticObject, NODE_COUNT,
};

/// An all-stone block of version 29, lighting complete.
pub fn stone() -> MapBlock {
    let mut b = new_block();
    b.names = vec!["default:stone".into()];
    b.lighting_complete = 0xffff;
    b
}

/// A version-25 stone block with a chest (an item, an empty slot) and a node timer.
pub fn chest_v25() -> MapBlock {
    let mut b = stone();
    b.version = 25;
    b.names = vec!["default:stone".into(), "default:chest".into()];
    b.content[0x123] = 1;
    b.metadata.push(NodeMeta {
        pos: RelPos::from_index(0x123).unwrap(),
        vars: vec![MetaVar {
            key: b"infotext".to_vec(),
            value: b"Chest".to_vec(),
            private: false,
        }],
        inventory: Inventory {
            lists: vec![InventoryList {
                name: "main".into(),
                width: 0,
                slots: vec![
                    ItemStack {
                        name: b"default:diamond".to_vec(),
                        count: 3,
                        wear: 0,
                        metadata: Vec::new(),
                    },
                    ItemStack::default(),
                ],
            }],
        },
    });
    b.timers.push(NodeTimer {
        pos: RelPos::from_index(0x123).unwrap(),
        timeout: 5000,
        elapsed: 0,
    });
    b
}

/// A small Lua entity (a sheep) inside the block at `origin`, `i` nodes/1000 along x.
pub fn lua_entity(i: i32, origin: BlockPos) -> StaticObject {
    StaticObject {
        kind: 7,
        pos: [
            i32::from(origin.x) * 160_000 + i % 150_000,
            i32::from(origin.y) * 160_000,
            i32::from(origin.z) * 160_000,
        ],
        data: ObjectData::LuaEntity(LuaEntity {
            name: "mobs:sheep".into(),
            state: Vec::new(),
            hp: 1,
            velocity: [0; 3],
            yaw: 0,
            extra: None,
        }),
    }
}

/// `count` raw objects of 120 bytes each, a few bytes apiece once compressed: 65,535 of them
/// decode past the bound of a block's memory.
pub fn heavy_objects(count: i32) -> Vec<StaticObject> {
    (0..count)
        .map(|i| StaticObject {
            kind: 3,
            pos: [i, 0, 0],
            data: ObjectData::Raw(vec![0x5a; 120]),
        })
        .collect()
}

/// A block that differs from any generated one in every field the views cover.
pub fn blank() -> MapBlock {
    MapBlock {
        version: 1,
        timestamp: 0,
        names: vec!["x".into()],
        ..new_block()
    }
}

/// A hand-made block with two names, a timer and both kinds of object.
pub fn hand_made() -> (MapBlock, BlockPos) {
    let content = (0..NODE_COUNT)
        .map(|i| u16::from((i >> 4) & 15 >= 3))
        .collect();
    let mut param2 = vec![0u8; NODE_COUNT];
    param2[5] = 3;
    let pos = BlockPos { x: -1, y: 0, z: 3 };
    let block = MapBlock {
        version: 29,
        flags: 0x0b,
        lighting_complete: 0xfffe,
        timestamp: 1234,
        names: vec!["default:stone".into(), "air".into()],
        content,
        param1: (0..NODE_COUNT).map(|i| (i % 251) as u8).collect(),
        param2,
        metadata: Vec::new(),
        objects: vec![
            StaticObject {
                kind: 7,
                pos: [-155_000, 12_345, 480_005],
                data: ObjectData::LuaEntity(LuaEntity {
                    name: "mobs:sheep".into(),
                    state: b"return {\"a\"=1}\n\x00\xff".to_vec(),
                    hp: 10,
                    velocity: [0, -250, 1],
                    yaw: 1571,
                    extra: Some(LuaEntityExtra {
                        version2: 2,
                        pitch: 0,
                        roll: -1,
                        guid: Some([0xab; 16]),
                    }),
                }),
            },
            StaticObject {
                kind: 3,
                pos: [-160_000, 0, 480_000],
                data: ObjectData::Raw(vec![1, 2, 255]),
            },
        ],
        timers: vec![NodeTimer {
            pos: RelPos { x: 1, y: 2, z: 3 },
            timeout: 10_000,
            elapsed: 5,
        }],
    };
    (block, pos)
}

/// Proptest strategies of map blocks.
pub mod arb {
    use proptest::prelude::*;

    use super::*;

    /// The fields of a Lua entity as the strategies draw them.
    type LuaFields = (String, Vec<u8>, u16, [i32; 3], i32, Option<LuaEntityExtra>);

    /// A Lua entity's object data from its drawn fields.
    fn lua_entity_data((name, state, hp, velocity, yaw, extra): LuaFields) -> ObjectData {
        ObjectData::LuaEntity(LuaEntity {
            name,
            state,
            hp,
            velocity,
            yaw,
            extra,
        })
    }

    // ---- blocks the codec stores (version 29; tests re-version them) ----

    pub fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(any::<u8>(), 0..max)
    }

    pub fn item() -> impl Strategy<Value = ItemStack> {
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

    pub fn inventory() -> impl Strategy<Value = Inventory> {
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

    pub fn metadata() -> impl Strategy<Value = Vec<NodeMeta>> {
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

    pub fn object_anywhere() -> impl Strategy<Value = StaticObject> {
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
            .prop_map(lua_entity_data);
        prop_oneof![
            (pos, entity).prop_map(|(pos, data)| StaticObject { kind: 7, pos, data }),
            (0..7u8, pos, bytes(50)).prop_map(|(kind, pos, data)| StaticObject {
                kind,
                pos,
                data: ObjectData::Raw(data),
            }),
        ]
    }

    pub fn timers() -> impl Strategy<Value = Vec<NodeTimer>> {
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
    pub fn nodes() -> impl Strategy<Value = (Vec<String>, Vec<u16>)> {
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

    pub fn stored_block() -> impl Strategy<Value = MapBlock> {
        (
            (any::<u8>(), any::<u16>(), any::<u32>()),
            nodes(),
            bytes(NODE_COUNT + 1).prop_map(|mut b| {
                b.resize(NODE_COUNT, 0);
                b
            }),
            proptest::collection::vec(any::<u8>(), NODE_COUNT),
            metadata(),
            proptest::collection::vec(object_anywhere(), 0..4),
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

    // ---- blocks the text views cover, with the position they are rendered at ----

    /// Puts `names`/`content` in canonical form: used names only, in first-use order.
    pub fn canonicalise(names: &[String], raw: &[u16]) -> (Vec<String>, Vec<u16>) {
        let mut out_names: Vec<String> = Vec::new();
        let mut map = vec![u16::MAX; names.len()];
        let content = raw
            .iter()
            .map(|&c| {
                let c = usize::from(c) % names.len();
                if map[c] == u16::MAX {
                    // Names may repeat in `names`: merge equal ones.
                    map[c] = match out_names.iter().position(|n| *n == names[c]) {
                        Some(i) => i as u16,
                        None => {
                            out_names.push(names[c].clone());
                            (out_names.len() - 1) as u16
                        }
                    };
                }
                map[c]
            })
            .collect();
        (out_names, content)
    }

    pub fn node_name() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z_]{1,10}:[a-z0-9_]{1,12}",
            1 => Just("air".to_string()),
            1 => "[^\\s\\p{Cc}][^\\p{Cc}]{0,6}[^\\s\\p{Cc}]",
        ]
    }

    /// 4096 bytes, either few distinct values in runs (realistic) or arbitrary.
    pub fn bytes4096() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            prop::collection::vec(any::<u8>(), NODE_COUNT),
            (prop::collection::vec(any::<u8>(), 1..4), any::<u64>()).prop_map(|(vals, seed)| {
                let mut s = seed | 1;
                (0..NODE_COUNT)
                    .map(|i| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        vals[(i / 64 + (s % 3) as usize) % vals.len()]
                    })
                    .collect()
            }),
        ]
    }

    pub fn rel_pos() -> impl Strategy<Value = RelPos> {
        (0u8..16, 0u8..16, 0u8..16).prop_map(|(x, y, z)| RelPos { x, y, z })
    }

    pub fn block_pos() -> impl Strategy<Value = BlockPos> {
        (-2048i16..2048, -2048i16..2048, -2048i16..2048).prop_map(|(x, y, z)| BlockPos { x, y, z })
    }

    pub fn object_near(origin: BlockPos) -> impl Strategy<Value = StaticObject> {
        let pos = prop::array::uniform3(-5_000i32..165_000).prop_map(move |rel| {
            [
                i32::from(origin.x) * 160_000 + rel[0],
                i32::from(origin.y) * 160_000 + rel[1],
                i32::from(origin.z) * 160_000 + rel[2],
            ]
        });
        let extra = prop_oneof![
            Just(None),
            (any::<i32>(), any::<i32>()).prop_map(|(pitch, roll)| Some(LuaEntityExtra {
                version2: 1,
                pitch,
                roll,
                guid: None
            })),
            (2u8..=255, any::<i32>(), any::<i32>(), any::<[u8; 16]>()).prop_map(
                |(version2, pitch, roll, guid)| Some(LuaEntityExtra {
                    version2,
                    pitch,
                    roll,
                    guid: Some(guid)
                })
            ),
        ];
        let lua = (
            node_name(),
            prop::collection::vec(any::<u8>(), 0..40),
            any::<u16>(),
            any::<[i32; 3]>(),
            any::<i32>(),
            extra,
        )
            .prop_map(lua_entity_data);
        let data = prop_oneof![
            lua.prop_map(|d| (7u8, d)),
            (any::<u8>(), prop::collection::vec(any::<u8>(), 0..30))
                .prop_map(|(k, d)| (k, ObjectData::Raw(d))),
        ];
        (pos, data).prop_map(|(pos, (kind, data))| StaticObject { kind, pos, data })
    }

    pub fn viewed_block() -> impl Strategy<Value = (MapBlock, BlockPos)> {
        let header = (
            22u8..=29,
            any::<u8>(),
            any::<u16>(),
            any::<u32>(),
            any::<bool>(),
        );
        let nodes = (
            prop::collection::vec(node_name(), 1..8),
            prop::collection::vec(0u16..8, NODE_COUNT),
            bytes4096(),
            bytes4096(),
        );
        // Timeouts are positive: decoding drops the others, as the engine does.
        let timers = prop::collection::btree_map(rel_pos(), (1..=i32::MAX, any::<i32>()), 0..6);
        (header, nodes, timers, block_pos()).prop_flat_map(
            |((version, flags, lc, ts, undefined), (names, raw, param1, param2), timers, pos)| {
                let (names, content) = canonicalise(&names, &raw);
                let block = MapBlock {
                    version,
                    flags,
                    lighting_complete: if version < 27 { 0xffff } else { lc },
                    timestamp: if undefined { u32::MAX } else { ts },
                    names,
                    content,
                    param1,
                    param2,
                    metadata: Vec::new(),
                    objects: Vec::new(),
                    timers: Vec::new(),
                };
                let mut block = block;
                block.timers = timers
                    .into_iter()
                    .map(|(pos, (timeout, elapsed))| NodeTimer {
                        pos,
                        timeout,
                        elapsed,
                    })
                    .collect();
                // Canonical order: by node index.
                block.timers.sort_by_key(|t| t.pos.index());
                prop::collection::vec(object_near(pos), 0..4).prop_map(move |objects| {
                    let mut b = block.clone();
                    b.objects = objects;
                    (b, pos)
                })
            },
        )
    }
}
