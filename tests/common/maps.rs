//! Every block of a Luanti `map.sqlite` (both schemas) and the decode → encode → decode
//! check of the map-block codec.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use worldfs::luanti::codec::block::{BlockPos, MapBlock};
use worldfs::luanti::codec::{decode_block, encode_block};
use worldfs::luanti::store::map::int_to_pos;

/// Opens a database read-only without touching its journal files.
pub fn open_ro(path: &Path) -> Connection {
    let uri = format!("file:{}?mode=ro&immutable=1", path.display());
    Connection::open_with_flags(
        uri,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `*.sqlite` under `dir` (recursively) that has a `blocks` table, sorted.
pub fn map_databases(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "sqlite") {
                let has_blocks: bool = open_ro(&path)
                    .query_row(
                        "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='blocks'",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                    .unwrap()
                    == 1;
                if has_blocks {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    out
}

/// A block's key as stored: `pos` or `(x, y, z)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Pos(i64),
    Xyz(i64, i64, i64),
}

/// The block position a row key names (`pos` decoded as the engine does).
pub fn block_pos(key: Key) -> BlockPos {
    match key {
        Key::Pos(i) => int_to_pos(i),
        Key::Xyz(x, y, z) => BlockPos {
            x: x as i16,
            y: y as i16,
            z: z as i16,
        },
    }
}

/// Every block of a map database, in key order.
pub fn read_blocks(path: &Path) -> Vec<(Key, Vec<u8>)> {
    let conn = open_ro(path);
    let xyz: bool = conn
        .prepare("SELECT name FROM pragma_table_info('blocks')")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .any(|c| c.unwrap() == "z");
    let sql = if xyz {
        "SELECT x, y, z, data FROM blocks ORDER BY x, y, z"
    } else {
        "SELECT pos, pos, pos, data FROM blocks ORDER BY pos"
    };
    let mut stmt = conn.prepare(sql).unwrap();
    let rows = stmt
        .query_map([], |r| {
            let key = if xyz {
                Key::Xyz(r.get(0)?, r.get(1)?, r.get(2)?)
            } else {
                Key::Pos(r.get(0)?)
            };
            Ok((key, r.get::<_, Vec<u8>>(3)?))
        })
        .unwrap();
    rows.map(|r| r.unwrap()).collect()
}

/// decode → encode → decode; the two decoded blocks must be equal (22 and 23 come back
/// as 25). Returns the first decoding and the encoded blob.
pub fn round_trip(blob: &[u8]) -> Result<(MapBlock, Vec<u8>), worldfs::Error> {
    let block = decode_block(blob)?;
    let encoded = encode_block(&block).expect("a decoded block must encode");
    let mut expected = block.clone();
    if expected.version < 25 && expected.version != 24 {
        expected.version = 25;
    }
    assert_eq!(encoded[0], expected.version);
    let again = decode_block(&encoded).expect("an encoded block must decode");
    assert!(
        again == expected,
        "decode(encode(block)) differs from block"
    );
    Ok((block, encoded))
}

/// Per-version block counts.
pub type VersionCounts = BTreeMap<u8, usize>;

/// Round-trips every block of a map database; panics on the first failure (naming the
/// block); returns the per-version counts and the decoded blocks.
pub fn round_trip_map(path: &Path) -> (VersionCounts, Vec<(Key, MapBlock)>) {
    let mut counts = VersionCounts::new();
    let mut blocks = Vec::new();
    for (key, blob) in read_blocks(path) {
        let (block, _) =
            round_trip(&blob).unwrap_or_else(|e| panic!("{} block {key:?}: {e}", path.display()));
        *counts.entry(block.version).or_default() += 1;
        blocks.push((key, block));
    }
    (counts, blocks)
}
