//! A hostile TVDA disk ("Nothing lost"): made with worldfs's own encoders, holding
//! decompression bombs (a zstd chunk, a gzip thumbnail), a JSON bomb of tiny values, JSON
//! nested past any parser's depth, chunks outside the world and of no known codec, an
//! actor that is not JSON and a torn entry claiming a huge size at the end. Opened read-only
//! and read-write with a small cache and read whole through the tree: nothing panics, only
//! the bad objects give errors, the good ones read, and the disk stays byte-identical.

mod tvda_common;

use std::collections::BTreeMap;
use std::path::Path;

use worldfs::tvda::chunk::{chunk_entry_id, encode_chunk, Layer, Tile, CHUNK_TILES};
use worldfs::tvda::compress::{compress, Codec};
use worldfs::tvda::container::{encode_entry, Content, Header};
use worldfs::tvda::store::Disk;
use worldfs::tvda::tree::{Options, TvdaTree};
use worldfs::vfs::{Kind, Tree};

fn read_whole(tree: &dyn Tree) -> (usize, BTreeMap<String, String>) {
    let mut errors = BTreeMap::new();
    let mut files = 0;
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    while let Some(dir) = todo.pop() {
        let mut entries = Vec::new();
        if let Err(e) = tree.list(&dir, 0, &mut |e| {
            entries.push(e);
            true
        }) {
            errors.insert(dir.join("/"), e.to_string());
            continue;
        }
        for e in entries {
            let mut path = dir.clone();
            path.push(e.name);
            match e.stat.kind {
                Kind::Dir => todo.push(path),
                Kind::File => {
                    files += 1;
                    let read = tree.stat(&path).and_then(|s| {
                        let data = tree.read(&path)?;
                        assert_eq!(s.size, data.len() as u64, "{}", path.join("/"));
                        Ok(())
                    });
                    if let Err(e) = read {
                        errors.insert(path.join("/"), e.to_string());
                    }
                }
            }
        }
    }
    (files, errors)
}

/// Builds the hostile world disk at `path`; returns the entry IDs that must fail to show.
fn hostile_disk(path: &Path) {
    let json = br#"{"genver":1,"width":180,"height":90,"tileNumberToNameMap":{"0":"basegame:0","1":"basegame:1"},"comp":4}"#;
    let tiles = vec![Tile { number: 1, meta: 0 }; CHUNK_TILES];
    let good_chunk = encode_chunk(Layer::Terrain, Codec::Zstd, &tiles).unwrap();
    let zstd_bomb = compress(Codec::Zstd, &vec![0u8; 64 << 20]).unwrap();
    let gzip_bomb = compress(Codec::Gzip, &vec![0u8; 64 << 20]).unwrap();
    let mut many_values = b"{\"genver\":1,\"a\":[".to_vec();
    many_values.extend(std::iter::repeat(b"0,".as_slice()).take(1 << 20).flatten());
    many_values.extend_from_slice(b"0]}");
    let deep = [vec![b'['; 100_000], vec![b']'; 100_000]].concat();
    let entries = [
        (-1, Content::File(json.to_vec())),
        (
            chunk_entry_id(0, 0).unwrap(),
            Content::File(good_chunk.clone()),
        ),
        (chunk_entry_id(1, 0).unwrap(), Content::File(zstd_bomb)),
        (
            chunk_entry_id(0, 1).unwrap(),
            Content::File(b"no codec at all".to_vec()),
        ),
        (chunk_entry_id(2, 5000).unwrap(), Content::File(good_chunk)),
        (-2, Content::File(gzip_bomb)),
        (0x1000_0001, Content::File(br#"{"genver":"#.to_vec())),
        (0x1000_0002, Content::File(deep)),
        (0x1000_0003, Content::File(many_values)),
        (
            0x1000_0004,
            Content::File(br#"{"genver":1,"ok":true}"#.to_vec()),
        ),
        (5, Content::Directory(vec![1, 2, 3])),
        (6, Content::Symlink(-1)),
    ];
    Disk::create(path, Header::new("Hostile", 2).unwrap(), &entries, 1).unwrap();
    // A torn last entry claiming a huge size.
    let mut torn = encode_entry(7, 0, 1, 1, &Content::File(vec![1; 64])).unwrap();
    torn[36..42].copy_from_slice(&[0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    let mut data = std::fs::read(path).unwrap();
    data.extend_from_slice(&torn);
    std::fs::write(path, data).unwrap();
}

#[test]
fn a_hostile_disk_is_read_without_harm() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("WORLDFS_STATE_DIR", dir.path());
    let path = dir.path().join("disk");
    hostile_disk(&path);
    let before = std::fs::read(&path).unwrap();
    for read_only in [true, false] {
        let tree = TvdaTree::open(
            &path,
            &Options {
                read_only,
                cache_bytes: 1 << 20,
            },
        )
        .unwrap();
        let (files, errors) = read_whole(&tree);
        assert!(files >= 8, "{files}");
        let bad = [
            "chunks/wall/0,0.cubeset",
            "chunks/terrain/1,0.cubeset",
            "thumbnail.tga",
            "actors/268435457.json",
            "actors/268435458.json",
            "actors/268435459.json",
        ];
        let unexpected: Vec<_> = errors
            .iter()
            .filter(|(p, _)| !bad.contains(&p.as_str()))
            .collect();
        assert!(
            unexpected.is_empty(),
            "read_only {read_only}: {unexpected:?}"
        );
        // A bad object is left out of its folder's listing (with a warning in the log) or
        // fails when read; by name it always fails.
        let p = |s: &str| s.split('/').map(String::from).collect::<Vec<_>>();
        for b in bad {
            assert!(tree.read(&p(b)).is_err(), "{b} should fail");
        }
        assert!(tree.read(&p("chunks/terrain/0,0.cubeset")).is_ok());
        assert!(tree.read(&p("actors/268435460.json")).is_ok());
        let e = tree.read(&p("actors/268435459.json")).unwrap_err();
        assert_eq!(e.errno(), libc::EFBIG, "{e}");
        let e = tree.read(&p("thumbnail.tga")).unwrap_err();
        assert!(e.message().contains("decompresses to more than"), "{e}");
        drop(tree);
        assert!(
            std::fs::read(&path).unwrap() == before,
            "read_only {read_only}: the disk changed"
        );
    }
}
