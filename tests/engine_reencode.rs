//! Engine acceptance: a world whose every block was decoded and re-encoded by worldfs —
//! at versions 24, 25, 27, 28 and 29 in rotation — looks exactly the same to the real
//! engine (minetest-server, via probe.sh) as the world it wrote itself. The block holding
//! the chest, sign and furnace (metadata, inventories, a node timer) is written at each
//! version in turn.

#[allow(dead_code)]
mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::engine::{mkworld, probe, ENGINE_RUNS};
use rusqlite::{params, Connection};
use worldfs::luanti::codec::{decode_block, encode_block};

// The blocks mkworld emerged fully: probing beyond them would make the engine generate
// the surrounding mapchunks during the probe, which places trees nondeterministically.
const P1: &str = "-32,-32,-32";
const P2: &str = "31,31,31";
const POINTS: &str = "1,10,1;2,10,1;3,10,1";
const VERSIONS: [u8; 5] = [24, 25, 27, 28, 29];

/// Copies the world files of `original` to `copy` and re-encodes every block of the copy:
/// blocks with metadata at `meta_version`, the others rotating through [`VERSIONS`].
fn reencoded_copy(original: &Path, copy: &Path, meta_version: u8) -> BTreeMap<u8, usize> {
    std::fs::create_dir(copy).unwrap();
    for entry in std::fs::read_dir(original).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
    }
    let mut conn = Connection::open(copy.join("map.sqlite")).unwrap();
    let rows: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT pos, data FROM blocks ORDER BY pos")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut per_version: BTreeMap<u8, usize> = BTreeMap::new();
    let tx = conn.transaction().unwrap();
    for (i, (pos, data)) in rows.iter().enumerate() {
        let mut block = decode_block(data).unwrap();
        let wanted = if block.metadata.is_empty() {
            VERSIONS[i % VERSIONS.len()]
        } else {
            meta_version
        };
        let has_private = block
            .metadata
            .iter()
            .flat_map(|m| &m.vars)
            .any(|v| v.private);
        let version = if wanted < 27 && block.lighting_complete != 0xFFFF {
            29
        } else if wanted < 28 && has_private {
            28
        } else {
            wanted
        };
        if !block.metadata.is_empty() {
            assert_eq!(
                version, meta_version,
                "the metadata block keeps its version"
            );
        }
        block.version = version;
        let encoded = encode_block(&block).unwrap();
        assert_eq!(encoded[0], version);
        *per_version.entry(version).or_default() += 1;
        tx.execute(
            "UPDATE blocks SET data = ?1 WHERE pos = ?2",
            params![encoded, pos],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    per_version
}

#[test]
fn engine_reads_reencoded_world_identically() {
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let original = tmp.path().join("original");
    mkworld(&original, 2);
    let seen_original = probe(&original, P1, P2, POINTS);
    println!("{seen_original}");
    assert!(seen_original.contains("inv main[1]=default:diamond 42"));
    assert!(seen_original.contains("field text=\"hello from mkworld"));
    assert!(seen_original.contains("  timer "));

    for meta_version in VERSIONS {
        let copy = tmp.path().join(format!("reencoded-{meta_version}"));
        let per_version = reencoded_copy(&original, &copy, meta_version);
        println!("metadata block at {meta_version}: blocks per version {per_version:?}");
        for v in VERSIONS {
            assert!(
                per_version.get(&v).copied().unwrap_or(0) > 0,
                "no block at {v}"
            );
        }
        let seen = probe(&copy, P1, P2, POINTS);
        assert_eq!(
            seen, seen_original,
            "the engine sees a different world (metadata block at version {meta_version})"
        );
    }
}
