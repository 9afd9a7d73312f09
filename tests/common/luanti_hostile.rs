//! The hostile store corpus for Luanti (issue "Nothing lost"): a world whose `map.sqlite`
//! holds, beside a few good blocks, every kind of bad row — zlib and zstd bombs, blocks
//! claiming or holding 65,535 objects, metadata and inventory slot bombs, huge name-id
//! mappings, data of the wrong SQL type, out-of-range positions, truncated blobs, wrong
//! versions, a row too long to read — and a second, bare `map.sqlite` of the `x, y, z`
//! schema with its own bad rows. Made with the project's encoders (the valid parts) and by
//! hand (the broken ones). Used by `tests/luanti_hostile.rs` and, through
//! `examples/luanti_hostile.rs`, by `mount-tests/10-luanti-hostile.sh`.

use std::io::Write;
use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{params, Connection};
use worldfs::luanti::codec::block::{
    BlockPos, Inventory, MapBlock, MetaVar, NodeMeta, RelPos, NODE_COUNT,
};
use worldfs::luanti::codec::encode_block;

use super::mapblock::{chest_v25, heavy_objects, lua_entity, stone};
use worldfs::luanti::store::map::pos_to_int;

/// What reading a row's block through the tree must give.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Every file of the block reads.
    Reads,
    /// The block is listed; its files fail with `EIO` or `EOPNOTSUPP`, the message holding
    /// this text.
    Fails(&'static str),
    /// The row is not listed (no block can have its position).
    Hidden,
}

/// One row of the corpus.
pub struct Case {
    pub label: &'static str,
    /// Where the block lists (none for hidden rows).
    pub pos: Option<BlockPos>,
    pub expect: Expect,
}

fn at(x: i16) -> BlockPos {
    BlockPos { x, y: 0, z: 0 }
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 19).unwrap()
}

/// A version-29 blob around a hand-made payload.
fn v29(raw: &[u8]) -> Vec<u8> {
    let mut out = vec![29];
    out.extend_from_slice(&zstd(raw));
    out
}

/// A version-29 payload: flags, lighting, timestamp, the name-id mapping `names` (every node
/// is id 0), the node arrays, then `meta`, `objects` and `timers` as given.
fn raw29(names: &[u8], meta: &[u8], objects: &[u8], timers: &[u8]) -> Vec<u8> {
    let mut raw = vec![0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    raw.extend_from_slice(names);
    raw.extend_from_slice(&[2, 2]);
    raw.extend_from_slice(&vec![0; NODE_COUNT * 4]);
    raw.extend_from_slice(meta);
    raw.extend_from_slice(objects);
    raw.extend_from_slice(timers);
    raw
}

/// A name-id mapping of `names`, ids 0, 1, …
fn name_ids(names: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(names.len() as u16).to_be_bytes());
    for (i, n) in names.iter().enumerate() {
        out.extend_from_slice(&(i as u16).to_be_bytes());
        out.extend_from_slice(&(n.len() as u16).to_be_bytes());
        out.extend_from_slice(n);
    }
    out
}

const NO_OBJECTS: &[u8] = &[0, 0, 0];
const NO_TIMERS: &[u8] = &[10, 0, 0];

/// The rows of the `pos` world: (case, pos value, data value).
fn pos_rows() -> Vec<(Case, Value, Value)> {
    let mut rows = Vec::new();
    let mut next = 0i16;
    let mut add = |label: &'static str, expect: Expect, data: Value| {
        let pos = at(next);
        next += 1;
        rows.push((
            Case {
                label,
                pos: Some(pos),
                expect,
            },
            Value::Integer(pos_to_int(pos)),
            data,
        ));
    };
    let blob = |b: &MapBlock| Value::Blob(encode_block(b).unwrap());
    let good = encode_block(&stone()).unwrap();

    add("a good block", Expect::Reads, Value::Blob(good.clone()));
    add(
        "a good version-25 block with a chest and a timer",
        Expect::Reads,
        blob(&chest_v25()),
    );
    let mut crowded = stone();
    let origin = at(2);
    crowded.objects = (0..30_000).map(|i| lua_entity(i, origin)).collect();
    add(
        "30,000 small objects (a few KiB on disk)",
        Expect::Reads,
        blob(&crowded),
    );
    let origin = at(3);
    crowded.objects = (0..65_535).map(|i| lua_entity(i, origin)).collect();
    add(
        "65,535 small objects (decodes past the bound)",
        Expect::Fails("at most 12 MiB are allowed per block"),
        blob(&crowded),
    );
    let mut heavy = stone();
    heavy.objects = heavy_objects(65_535);
    add(
        "65,535 objects of 120 bytes (decodes past the bound)",
        Expect::Fails("at most 12 MiB are allowed per block"),
        blob(&heavy),
    );
    add(
        "a zstd bomb (64 MiB of zeros)",
        Expect::Fails("decompresses to more than"),
        Value::Blob(v29(&vec![0; 64 << 20])),
    );
    let mut zlib_bomb = vec![25, 0, 2, 2];
    zlib_bomb.extend_from_slice(&zlib(&vec![0; 64 << 20]));
    add(
        "a zlib bomb (64 MiB of zeros)",
        Expect::Fails("decompresses to more than"),
        Value::Blob(zlib_bomb),
    );
    let air = name_ids(&[b"air".to_vec()]);
    add(
        "65,535 objects claimed, none stored",
        Expect::Fails("65535 objects cannot fit"),
        Value::Blob(v29(&raw29(&air, &[0], &[0, 0xff, 0xff], NO_TIMERS))),
    );
    add(
        "65,535 metadata entries claimed, none stored",
        Expect::Fails("node metadata"),
        Value::Blob(v29(&raw29(&air, &[2, 0xff, 0xff], NO_OBJECTS, NO_TIMERS))),
    );
    add(
        "65,535 node timers claimed, none stored",
        Expect::Fails("65535 timers cannot fit"),
        Value::Blob(v29(&raw29(&air, &[0], NO_OBJECTS, &[10, 0xff, 0xff]))),
    );
    // Sixteen inventories of 65,535 slots each, declared in a few bytes each.
    let mut slots = vec![2, 0, 16];
    for i in 0..16u16 {
        slots.extend_from_slice(&i.to_be_bytes());
        slots.extend_from_slice(&0u32.to_be_bytes());
        slots.extend_from_slice(b"List main 65535\nEndInventoryList\nEndInventory\n");
    }
    add(
        "an inventory slot bomb (16 x 65,535 slots)",
        Expect::Fails("at most"),
        Value::Blob(v29(&raw29(&air, &slots, NO_OBJECTS, NO_TIMERS))),
    );
    // 4,096 metadata entries with a 2,000-byte value each: big, but a real block could be.
    let mut full = stone();
    full.metadata = (0..NODE_COUNT as u16)
        .map(|i| NodeMeta {
            pos: RelPos::from_index(i).unwrap(),
            vars: vec![MetaVar {
                key: b"formspec".to_vec(),
                value: vec![b'f'; 2000],
                private: false,
            }],
            inventory: Inventory::default(),
        })
        .collect();
    add("4,096 nodes with metadata", Expect::Reads, blob(&full));
    let many: Vec<Vec<u8>> = (0..65_535)
        .map(|i| format!("mod:node_{i:05}_{}", "x".repeat(130)).into_bytes())
        .collect();
    add(
        "a name-id mapping of 65,535 long names",
        Expect::Reads,
        Value::Blob(v29(&raw29(&name_ids(&many), &[0], NO_OBJECTS, NO_TIMERS))),
    );
    add(
        "65,535 names claimed, none stored",
        Expect::Fails("65535 entries cannot fit"),
        Value::Blob(v29(&raw29(&[0, 0xff, 0xff], &[0], NO_OBJECTS, NO_TIMERS))),
    );
    add(
        "data stored as TEXT",
        Expect::Fails("newer than 29"),
        Value::Text("hello, world".into()),
    );
    add(
        "data stored as an INTEGER",
        Expect::Fails("newer than 29"),
        Value::Integer(123_456_789),
    );
    add(
        "data stored as NULL",
        Expect::Fails("empty blob"),
        Value::Null,
    );
    add(
        "an empty blob",
        Expect::Fails("empty blob"),
        Value::Blob(Vec::new()),
    );
    add(
        "a good block cut in half",
        Expect::Fails("map block"),
        Value::Blob(good[..good.len() / 2].to_vec()),
    );
    add(
        "a version byte alone",
        Expect::Fails("map block"),
        Value::Blob(vec![29]),
    );
    for (label, version, message) in [
        ("version 0", 0u8, "not supported"),
        ("version 21", 21, "not supported"),
        ("version 30", 30, "newer than 29"),
        ("version 255", 255, "newer than 29"),
    ] {
        let mut b = good.clone();
        b[0] = version;
        add(label, Expect::Fails(message), Value::Blob(b));
    }
    let mut network = good.clone();
    network.push(2);
    add(
        "the network form",
        Expect::Fails("network form"),
        Value::Blob(network),
    );
    add(
        "a row too long to read (9 MiB)",
        Expect::Fails("are read"),
        Value::Blob(vec![0; 9 << 20]),
    );
    for (label, pos) in [
        ("pos 2^60", Value::Integer(1 << 60)),
        ("pos -2^60", Value::Integer(-(1 << 60))),
        ("pos 2^35", Value::Integer(1 << 35)),
        ("pos as TEXT", Value::Text("north".into())),
        ("pos 1.5", Value::Real(1.5)),
        ("pos NULL", Value::Null),
    ] {
        rows.push((
            Case {
                label,
                pos: None,
                expect: Expect::Hidden,
            },
            pos,
            Value::Blob(good.clone()),
        ));
    }
    rows
}

/// Writes the world with the `pos` schema into `dir` (`world.mt`, `map.sqlite`) and returns
/// its cases.
pub fn write_pos_world(dir: &Path) -> Vec<Case> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("world.mt"),
        "gameid = minetest\nbackend = sqlite3\nplayer_backend = sqlite3\nauth_backend = sqlite3\nmod_storage_backend = sqlite3\n",
    )
    .unwrap();
    let mut conn = Connection::open(dir.join("map.sqlite")).unwrap();
    conn.execute(
        "CREATE TABLE `blocks` (`pos` INT PRIMARY KEY, `data` BLOB)",
        [],
    )
    .unwrap();
    let tx = conn.transaction().unwrap();
    let mut cases = Vec::new();
    for (case, pos, data) in pos_rows() {
        tx.execute("INSERT INTO blocks VALUES (?1, ?2)", params![pos, data])
            .unwrap();
        cases.push(case);
    }
    tx.commit().unwrap();
    cases
}

/// Writes a bare `map.sqlite` of the `x, y, z` schema at `path` and returns its cases.
pub fn write_xyz_map(path: &Path) -> Vec<Case> {
    let mut conn = Connection::open(path).unwrap();
    conn.execute(
        "CREATE TABLE blocks (x INTEGER, y INTEGER, z INTEGER, data BLOB NOT NULL, PRIMARY KEY (x, z, y))",
        [],
    )
    .unwrap();
    let good = encode_block(&stone()).unwrap();
    let tx = conn.transaction().unwrap();
    let mut cases = Vec::new();
    let rows: Vec<(&'static str, [Value; 3], Value, Expect)> = vec![
        (
            "a good block",
            [0, 0, 0].map(Value::Integer),
            Value::Blob(good.clone()),
            Expect::Reads,
        ),
        (
            "data stored as TEXT",
            [1, 0, 0].map(Value::Integer),
            Value::Text("not a block".into()),
            Expect::Fails("newer than 29"),
        ),
        (
            "data stored as an INTEGER",
            [2, 0, 0].map(Value::Integer),
            Value::Integer(7),
            Expect::Fails("newer than 29"),
        ),
        (
            "x out of range",
            [
                Value::Integer(1 << 40),
                Value::Integer(0),
                Value::Integer(0),
            ],
            Value::Blob(good.clone()),
            Expect::Hidden,
        ),
        (
            "z out of range",
            [Value::Integer(0), Value::Integer(0), Value::Integer(40_000)],
            Value::Blob(good.clone()),
            Expect::Hidden,
        ),
        (
            "y as TEXT",
            [
                Value::Integer(0),
                Value::Text("up".into()),
                Value::Integer(0),
            ],
            Value::Blob(good.clone()),
            Expect::Hidden,
        ),
    ];
    for (label, [x, y, z], data, expect) in rows {
        let pos = match (&x, &y, &z, &expect) {
            (Value::Integer(x), Value::Integer(y), Value::Integer(z), e)
                if *e != Expect::Hidden =>
            {
                Some(BlockPos {
                    x: *x as i16,
                    y: *y as i16,
                    z: *z as i16,
                })
            }
            _ => None,
        };
        tx.execute(
            "INSERT INTO blocks VALUES (?1, ?2, ?3, ?4)",
            params![x, y, z, data],
        )
        .unwrap();
        cases.push(Case { label, pos, expect });
    }
    tx.commit().unwrap();
    cases
}
