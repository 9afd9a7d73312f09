//! `worldfs info`, `check` and `compact` on TVDA and TEVD disks: the samples check out,
//! broken entries are reported with their ID and reason, compaction drops dead bytes and
//! refuses a locked (mounted) disk.

#[allow(dead_code)]
mod common;

use common::samples::{self, TEVD_V3, TVDA_DIRTY};

use std::path::Path;
use std::process::ExitCode;

use worldfs::storekit::lock::StoreLock;
use worldfs::tvda::codec::chunk::{chunk_entry_id, encode_chunk, Layer, Tile, CHUNK_TILES};
use worldfs::tvda::codec::compress::{compress, Codec};
use worldfs::tvda::codec::tvda::{Content, Header};
use worldfs::tvda::inspect::{check, info};
use worldfs::tvda::store::compact::compact;
use worldfs::tvda::store::tvda::{Change, Disk};

fn run(
    f: fn(&Path, &mut dyn std::io::Write) -> worldfs::error::Result<ExitCode>,
    p: &Path,
) -> (ExitCode, String) {
    let mut out = Vec::new();
    let code = f(p, &mut out).unwrap();
    (code, String::from_utf8(out).unwrap())
}

#[test]
fn every_sample_checks_out() {
    let mut seen = 0;
    for entry in std::fs::read_dir(samples::path(samples::TVDA)).unwrap() {
        let path = entry.unwrap().path();
        if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("tvda" | "tevd")
        ) {
            continue;
        }
        seen += 1;
        let (code, out) = run(check, &path);
        assert_eq!(code, ExitCode::SUCCESS, "{}: {out}", path.display());
        assert!(out.contains(" 0 broken; entry CRCs valid"), "{out}");
        let (code, out) = run(info, &path);
        assert_eq!(code, ExitCode::SUCCESS);
        assert!(out.starts_with("format: "), "{out}");
    }
    assert_eq!(seen, 6);
}

#[test]
fn broken_entries_are_reported_with_id_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w");
    let json = br#"{"genver":1,"width":180,"height":90,"tileNumberToNameMap":{"0":"basegame:0"},"comp":3}"#;
    let tiles = vec![Tile { number: 0, meta: 0 }; CHUNK_TILES];
    let good = encode_chunk(Layer::Terrain, Codec::Zstd, &tiles).unwrap();
    let short = compress(Codec::Zstd, &[0; 200]).unwrap();
    let entries = [
        (-1, Content::File(json.to_vec())),
        (chunk_entry_id(0, 0).unwrap(), Content::File(good.clone())),
        (
            chunk_entry_id(1, 0).unwrap(),
            Content::File(good[..good.len() / 2].to_vec()),
        ),
        (chunk_entry_id(0, 1).unwrap(), Content::File(short)),
        (chunk_entry_id(0, 7).unwrap(), Content::File(good.clone())),
        (0x1000_0000, Content::File(b"{not json".to_vec())),
    ];
    let mut disk = Disk::create(&path, Header::new("W", 2).unwrap(), &entries, 1).unwrap();
    let (code, out) = run(check, &path);
    assert_eq!(code, ExitCode::FAILURE, "{out}");
    for id in [
        chunk_entry_id(1, 0).unwrap(),
        chunk_entry_id(0, 1).unwrap(),
        chunk_entry_id(0, 7).unwrap(),
        0x1000_0000,
    ] {
        assert!(out.contains(&format!("broken entry {id}: ")), "{id}: {out}");
    }
    assert!(out.contains("outside the world's chunk grid"), "{out}");
    assert!(out.contains("7 entries checked, 4 broken"), "{out}");
    // A payload byte flipped on disk: the CRC no longer matches.
    disk.commit(&[Change::Remove { id: 0x1000_0000 }], 2)
        .unwrap();
    let offset = disk.entry(chunk_entry_id(0, 0).unwrap()).unwrap().offset + 50;
    drop(disk);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offset as usize] ^= 0xFF;
    std::fs::write(&path, bytes).unwrap();
    let (_, out) = run(check, &path);
    assert!(
        out.contains(&format!(
            "broken entry {}: entry CRC does not match",
            chunk_entry_id(0, 0).unwrap()
        )),
        "{out}"
    );
    assert!(out.contains("entry CRCs INVALID"), "{out}");
    let (_, out) = run(info, &path);
    assert!(out.contains("entry CRCs: 1 invalid"), "{out}");
    assert!(out.contains("dead bytes: "), "{out}");
}

#[test]
fn compact_drops_dead_bytes_and_refuses_mounted_disks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    std::fs::copy(samples::path(TVDA_DIRTY), &path).unwrap();
    let lock = StoreLock::mount(&path, true).unwrap();
    let mut out = Vec::new();
    let e = compact(&path, &mut out).unwrap_err();
    assert_eq!(e.errno(), libc::EBUSY, "{e}");
    drop(lock);
    let (code, out) = run(compact, &path);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(
        out.contains("520 -> 402 bytes (110 dead bytes dropped)"),
        "{out}"
    );
    let disk = Disk::open(&path, false).unwrap();
    let report = disk.check().unwrap();
    assert!(report.disk_crc_ok && !report.root_listing_stale && report.dead_bytes == 0);
    assert_eq!(disk.read(-1).unwrap(), br#"{"genver":2}"#);
    drop(disk);
    let before = std::fs::read(&path).unwrap();
    let (_, out) = run(compact, &path);
    assert!(out.contains("already compact"), "{out}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let tevd = samples::path(TEVD_V3);
    assert_eq!(
        compact(&tevd, &mut Vec::new()).unwrap_err().errno(),
        libc::EOPNOTSUPP
    );
}
