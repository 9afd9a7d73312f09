//! Hostile stores made with worldfs's own encoders, shared by the hostile-corpus tests and
//! the mount tests (through `examples/hostile_fixture.rs`).

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use worldfs::survivalcraft::codec::chunk::{Cell, Chunk, ChunkPos};
use worldfs::survivalcraft::codec::format::TerrainFormat;
use worldfs::survivalcraft::codec::{fixed, region};
use worldfs::survivalcraft::store::World;
use worldfs::tvda::codec::chunk::{chunk_entry_id, encode_chunk, Layer, Tile, CHUNK_TILES};
use worldfs::tvda::codec::compress::{compress, Codec};
use worldfs::tvda::codec::tvda::{encode_entry, Content, Header};
use worldfs::tvda::store::tvda::Disk;
use worldfs::vfs::{Kind, Tree};

/// Paths below a TVDA mount that must fail to show on the hostile disk.
pub const TVDA_BAD: [&str; 6] = [
    "chunks/wall/0,0.cubeset",
    "chunks/terrain/1,0.cubeset",
    "thumbnail.tga",
    "actors/268435457.json",
    "actors/268435458.json",
    "actors/268435459.json",
];

/// Writes the hostile world disk at `path`: decompression bombs (a zstd chunk, a gzip
/// thumbnail), a JSON of a million tiny values, JSON nested 100 000 deep, an actor that is
/// not JSON, chunks outside the world and of no known codec, a directory and a symlink
/// entry, and a torn last entry claiming a huge size.
pub fn tvda_disk(path: &Path) {
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
    let mut torn = encode_entry(7, 0, 1, 1, &Content::File(vec![1; 64])).unwrap();
    torn[36..42].copy_from_slice(&[0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    let mut data = fs::read(path).unwrap();
    data.extend_from_slice(&torn);
    fs::write(path, data).unwrap();
}

fn project(dir: &Path, version: &str) {
    fs::write(
        dir.join("Project.xml"),
        format!("<Project Guid=\"9e9a67f8-79df-4d05-8cfa-61bd8095661e\" Name=\"GameProject\" Version=\"{version}\">\n  <Subsystems />\n  <Entities />\n</Project>\n"),
    )
    .unwrap();
}

fn chunk(format: TerrainFormat, seed: u32) -> Chunk {
    let mut c = Chunk::empty(format);
    for x in 0..16 {
        for z in 0..16 {
            c.set_cell(x, 10 + (seed as usize % 20), z, Cell::from_value32(2))
                .unwrap();
        }
    }
    c
}

/// Links in the world folder `dir` to a file outside it (`victim`): a world file, and one
/// planted at a temporary name worldfs could use.
pub fn plant_links(dir: &Path, victim: &Path) {
    std::os::unix::fs::symlink(victim, dir.join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(victim, dir.join(".worldfs-Project.xml.tmp")).unwrap();
    fs::write(dir.join("readme.txt"), b"hello\n").unwrap();
}

/// Chunk folders below a Survivalcraft mount that must fail on the hostile Chunks32h world.
pub const CHUNKS32H_BAD: [&str; 3] = ["chunks/5,5", "chunks/7,7", "chunks/8,8"];

/// A Chunks32h world in `dir` with good chunks (returned), a record with a bad magic and
/// directory entries with out-of-range coordinates and slots past the end of the file.
pub fn chunks32h_world(dir: &Path) -> Vec<ChunkPos> {
    project(dir, "2.2");
    let f = TerrainFormat::Chunks32h;
    let good = vec![
        ChunkPos::new(0, 0),
        ChunkPos::new(1, 0),
        ChunkPos::new(-3, 7),
    ];
    {
        let mut w = World::open(dir, false).unwrap();
        let chunks: Vec<Chunk> = (0..good.len()).map(|i| chunk(f, i as u32)).collect();
        let refs: Vec<(ChunkPos, &Chunk)> = good.iter().copied().zip(chunks.iter()).collect();
        w.commit_chunks(&refs).unwrap();
        w.commit_chunks(&[(ChunkPos::new(5, 5), &chunk(f, 9))])
            .unwrap();
    }
    let path = dir.join("Chunks32h.dat");
    let mut data = fs::read(&path).unwrap();
    let rec3 = fixed::slot_offset(f, 3) as usize;
    data[rec3] ^= 0xFF;
    let extra = [
        (i32::MAX, i32::MIN, 3),
        (1 << 30, -(1 << 30), 1),
        (7, 7, 60_000),
        (8, 8, i32::MAX),
    ];
    for (i, (cx, cz, w)) in extra.iter().enumerate() {
        let at = 12 * (4 + i);
        data[at..at + 4].copy_from_slice(&cx.to_le_bytes());
        data[at + 4..at + 8].copy_from_slice(&cz.to_le_bytes());
        data[at + 8..at + 12].copy_from_slice(&w.to_le_bytes());
    }
    fs::write(&path, &data).unwrap();
    good
}

/// Chunk folders below a Survivalcraft mount that must fail on the hostile region world.
pub const REGIONS_BAD: [&str; 4] = ["chunks/5,0", "chunks/6,0", "chunks/7,0", "chunks/8,0"];

/// A region world in `dir` with good chunks (returned); region 0,0 gets a deflate bomb, a
/// size past the limit, an offset past the end and a record without its magic; a file that
/// is no region, and regions named at and past the edge of the coordinates.
pub fn region_world(dir: &Path) -> Vec<ChunkPos> {
    project(dir, "2.3");
    let f = TerrainFormat::Regions;
    let good = vec![
        ChunkPos::new(0, 0),
        ChunkPos::new(2, 3),
        ChunkPos::new(17, 0),
    ];
    {
        let mut w = World::open(dir, false).unwrap();
        let chunks: Vec<Chunk> = (0..good.len()).map(|i| chunk(f, i as u32)).collect();
        let refs: Vec<(ChunkPos, &Chunk)> = good.iter().copied().zip(chunks.iter()).collect();
        w.commit_chunks(&refs).unwrap();
    }
    let regions = dir.join("Regions");
    let file = regions.join("Region 0,0.dat");
    let mut data = fs::read(&file).unwrap();
    let mut bomb = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(&vec![0u8; 64 << 20]).unwrap();
    let bomb = bomb.finish().unwrap();
    let set_slot = |data: &mut Vec<u8>, slot: usize, offset: i32, size: i32| {
        let at = 4 + slot * 8;
        data[at..at + 4].copy_from_slice(&offset.to_le_bytes());
        data[at + 4..at + 8].copy_from_slice(&size.to_le_bytes());
    };
    let bomb_at = data.len() as i32;
    data.extend_from_slice(b"CHK1");
    data.extend_from_slice(&bomb);
    let slot = |cx| region::locate(ChunkPos::new(cx, 0)).1;
    set_slot(&mut data, slot(5), bomb_at, bomb.len() as i32);
    set_slot(&mut data, slot(6), bomb_at, i32::MAX);
    set_slot(&mut data, slot(7), i32::MAX - 10, 100);
    set_slot(&mut data, slot(8), 4 + 256 * 8, 100);
    fs::write(&file, &data).unwrap();
    fs::write(regions.join("Region 5,5.dat"), b"garbage, not a region").unwrap();
    for edge in [
        "Region 134217727,0.dat",
        "Region 2147483647,-2147483648.dat",
    ] {
        fs::copy(regions.join("Region 1,0.dat"), regions.join(edge)).unwrap();
    }
    good
}

/// Reads the whole tree: every folder listed, every file read (its size as stat said).
/// Returns the number of files and the paths that failed, with why. `links`: the tree may
/// show links (each must stat as long as its target); else a link fails the test.
pub fn read_whole(tree: &dyn Tree, links: bool) -> (usize, BTreeMap<String, String>) {
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
                Kind::Symlink if !links => panic!("{}: no links in these worlds", path.join("/")),
                // A planted link shows as one; its target is never read.
                Kind::Symlink => {
                    let target = tree.readlink(&path).unwrap();
                    assert_eq!(e.stat.size, target.len() as u64, "{}", path.join("/"));
                }
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
