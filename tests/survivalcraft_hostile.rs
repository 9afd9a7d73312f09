//! Hostile Survivalcraft stores ("Nothing lost"): worlds made with worldfs's own encoders,
//! then damaged the way an attacker or a broken disk would (decompression bombs, sizes and
//! offsets past the end, counts and coordinates out of range, bad magics, links in the world
//! folder). Each is opened read-only and read-write with a small cache and read whole
//! through the tree: nothing panics, only the bad objects give errors, every good chunk
//! reads, and the store stays byte-identical.

mod survivalcraft_common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use worldfs::survivalcraft::chunk::{Cell, Chunk, ChunkPos};
use worldfs::survivalcraft::codec::{fixed, region};
use worldfs::survivalcraft::format::TerrainFormat;
use worldfs::survivalcraft::store::World;
use worldfs::survivalcraft::tree::{Options, SurvivalcraftTree};
use worldfs::vfs::{Kind, Tree};

fn state_dir() {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let d = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    std::env::set_var("WORLDFS_STATE_DIR", d.path());
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

/// Every file of a folder tree and its bytes (a link: its target), but worldfs's own
/// temporary names, which it may clean up.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_name().to_string_lossy().starts_with(".worldfs-") {
                continue;
            }
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(e.path());
            } else if t.is_symlink() {
                out.insert(
                    e.path(),
                    fs::read_link(e.path())
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else {
                out.insert(e.path(), fs::read(e.path()).unwrap());
            }
        }
    }
    out
}

/// Reads the whole tree: every folder listed, every file read. Returns the paths that
/// failed, with why.
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

fn open(dir: &Path, read_only: bool) -> SurvivalcraftTree {
    SurvivalcraftTree::open(
        dir,
        &Options {
            read_only,
            cache_bytes: 1 << 20,
        },
    )
    .unwrap()
}

/// Opens `dir` both ways, reads it whole, and checks what failed and that nothing changed.
fn survive(dir: &Path, good: &[ChunkPos], bad: &[&str]) {
    let before = snapshot(dir);
    for read_only in [true, false] {
        let tree = open(dir, read_only);
        let (files, errors) = read_whole(&tree);
        assert!(files > 0);
        for (path, why) in &errors {
            assert!(
                bad.iter().any(|b| path.contains(b)),
                "read_only {read_only}: unexpected error at {path}: {why}"
            );
        }
        for pos in good {
            let path = vec![
                "chunks".to_string(),
                pos.to_string(),
                "blocks.cubeset".into(),
            ];
            tree.read(&path)
                .unwrap_or_else(|e| panic!("good chunk {pos}: {e}"));
        }
        drop(tree);
        let after = snapshot(dir);
        let changed: Vec<&PathBuf> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        assert!(
            changed.is_empty(),
            "read_only {read_only}: changed {changed:?}"
        );
    }
}

#[test]
fn a_hostile_chunks32h_world_is_read_without_harm() {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), "2.2");
    let f = TerrainFormat::Chunks32h;
    let good = [
        ChunkPos::new(0, 0),
        ChunkPos::new(1, 0),
        ChunkPos::new(-3, 7),
    ];
    {
        let mut w = World::open(dir.path(), false).unwrap();
        let chunks: Vec<Chunk> = (0..good.len()).map(|i| chunk(f, i as u32)).collect();
        let refs: Vec<(ChunkPos, &Chunk)> = good.iter().copied().zip(chunks.iter()).collect();
        w.commit_chunks(&refs).unwrap();
        w.commit_chunks(&[(ChunkPos::new(5, 5), &chunk(f, 9))])
            .unwrap();
    }
    let path = dir.path().join("Chunks32h.dat");
    let mut data = fs::read(&path).unwrap();
    let size = f.record_bytes();
    // Slot 3 (chunk 5,5): a bad record magic.
    let rec3 = fixed::slot_offset(f, 3) as usize;
    data[rec3] ^= 0xFF;
    // Directory entries 4..: out-of-range coordinates, slots past the end of the file.
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
    assert_eq!(data.len(), fixed::slot_offset(f, 4) as usize);
    let _ = size;
    fs::write(&path, &data).unwrap();
    // A link in the world folder to a file outside it, and one planted at a temporary name.
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"secret").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("notes.txt")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join(".worldfs-Project.xml.tmp")).unwrap();
    fs::write(dir.path().join("readme.txt"), b"hello\n").unwrap();
    survive(
        dir.path(),
        &good,
        &["chunks/5,5", "chunks/7,7", "chunks/8,8"],
    );
    let tree = open(dir.path(), true);
    let e = tree.read(&["notes.txt".to_string()]).unwrap_err();
    assert_eq!(e.errno(), libc::ELOOP, "{e}");
    assert_eq!(fs::read(&victim).unwrap(), b"secret");
    // The directory lists chunk 7,7 in slot 8, past the end: a new chunk, which goes to
    // slot 8, would then be read as chunk 7,7 too, and an edit of 7,7 would overwrite it.
    let mut data = fs::read(&path).unwrap();
    data[12 * 6 + 8..12 * 6 + 12].copy_from_slice(&8i32.to_le_bytes());
    fs::write(&path, &data).unwrap();
    let tree = open(dir.path(), false);
    let e = tree.mkdir(&["chunks".into(), "9,9".into()]).unwrap_err();
    assert!(e.message().contains("directory is damaged"), "{e}");
    assert_eq!(fs::read(&path).unwrap(), data);
}

#[test]
fn a_hostile_region_world_is_read_without_harm() {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    project(dir.path(), "2.3");
    let f = TerrainFormat::Regions;
    let good = [
        ChunkPos::new(0, 0),
        ChunkPos::new(2, 3),
        ChunkPos::new(17, 0),
    ];
    {
        let mut w = World::open(dir.path(), false).unwrap();
        let chunks: Vec<Chunk> = (0..good.len()).map(|i| chunk(f, i as u32)).collect();
        let refs: Vec<(ChunkPos, &Chunk)> = good.iter().copied().zip(chunks.iter()).collect();
        w.commit_chunks(&refs).unwrap();
    }
    let regions = dir.path().join("Regions");
    // Region 0,0 gets hostile slots: a deflate bomb, a size past the limit, an offset past
    // the end of the file, a record without its CHK1 magic.
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
    let bomb_at = data.len();
    data.extend_from_slice(b"CHK1");
    data.extend_from_slice(&bomb);
    set_slot(
        &mut data,
        region::locate(ChunkPos::new(5, 0)).1,
        bomb_at as i32,
        bomb.len() as i32,
    );
    set_slot(
        &mut data,
        region::locate(ChunkPos::new(6, 0)).1,
        bomb_at as i32,
        i32::MAX,
    );
    set_slot(
        &mut data,
        region::locate(ChunkPos::new(7, 0)).1,
        i32::MAX - 10,
        100,
    );
    set_slot(
        &mut data,
        region::locate(ChunkPos::new(8, 0)).1,
        4 + 256 * 8,
        100,
    );
    fs::write(&file, &data).unwrap();
    // A region that is not one, and regions at the edge of the coordinates.
    fs::write(regions.join("Region 5,5.dat"), b"garbage, not a region").unwrap();
    fs::copy(
        regions.join("Region 1,0.dat"),
        regions.join("Region 134217727,0.dat"),
    )
    .unwrap();
    fs::copy(
        regions.join("Region 1,0.dat"),
        regions.join("Region 2147483647,-2147483648.dat"),
    )
    .unwrap();
    survive(
        dir.path(),
        &good,
        &["chunks/5,0", "chunks/6,0", "chunks/7,0", "chunks/8,0"],
    );
    // A commit to a chunk of a damaged region never rewrites the region.
    let tree = open(dir.path(), false);
    let before = fs::read(&file).unwrap();
    let cubeset = tree
        .read(&["chunks".into(), "0,0".into(), "blocks.cubeset".into()])
        .unwrap();
    let _ = tree.write(
        &["chunks".into(), "5,0".into(), "blocks.cubeset".into()],
        &cubeset,
    );
    assert_eq!(fs::read(&file).unwrap(), before);
    let garbage = regions.join("Region 5,5.dat");
    let e = tree.mkdir(&["chunks".into(), "80,80".into()]);
    assert!(
        e.is_err(),
        "a chunk in a region that does not parse is not created"
    );
    assert_eq!(fs::read(&garbage).unwrap(), b"garbage, not a region");
}
