//! Hostile Survivalcraft stores ("Nothing lost"): worlds made with worldfs's own encoders,
//! then damaged the way an attacker or a broken disk would (decompression bombs, sizes and
//! offsets past the end, counts and coordinates out of range, bad magics, links in the world
//! folder). Each is opened read-only and read-write with a small cache and read whole
//! through the tree: nothing panics, only the bad objects give errors, every good chunk
//! reads, and the store stays byte-identical.

#[allow(dead_code)]
mod common;

use common::hostile::read_whole;
use common::samples;
use common::scratch::state_dir;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use worldfs::survivalcraft::codec::chunk::ChunkPos;
use worldfs::survivalcraft::tree::SurvivalcraftTree;
use worldfs::vfs::tree::Options;
use worldfs::vfs::Tree;

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
        let (files, errors) = read_whole(&tree, true);
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
    let good = common::hostile::chunks32h_world(dir.path());
    let path = dir.path().join("Chunks32h.dat");
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    fs::write(&victim, b"secret").unwrap();
    common::hostile::plant_links(dir.path(), &victim);
    survive(dir.path(), &good, &common::hostile::CHUNKS32H_BAD);
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
    let good = common::hostile::region_world(dir.path());
    let regions = dir.path().join("Regions");
    let file = regions.join("Region 0,0.dat");
    survive(dir.path(), &good, &common::hostile::REGIONS_BAD);
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

#[test]
fn store_files_that_are_links_are_refused() {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    fs::create_dir(&world).unwrap();
    common::hostile::chunks32h_world(&world);
    let moved = dir.path().join("elsewhere.dat");
    fs::rename(world.join("Chunks32h.dat"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, world.join("Chunks32h.dat")).unwrap();
    let before = fs::read(&moved).unwrap();
    for read_only in [true, false] {
        let e = SurvivalcraftTree::open(
            &world,
            &Options {
                read_only,
                cache_bytes: 1 << 20,
            },
        )
        .err()
        .unwrap();
        assert_eq!(e.errno(), libc::ELOOP, "{e}");
    }
    assert_eq!(fs::read(&moved).unwrap(), before);
}

#[test]
fn a_regions_folder_that_is_a_link_is_refused() {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("world");
    let samples = samples::path(samples::SC_REGION_WORLD);
    fs::create_dir(&world).unwrap();
    fs::copy(samples.join("Project.xml"), world.join("Project.xml")).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    for e in fs::read_dir(samples.join("Regions")).unwrap() {
        let e = e.unwrap();
        fs::copy(e.path(), elsewhere.join(e.file_name())).unwrap();
    }
    std::os::unix::fs::symlink(&elsewhere, world.join("Regions")).unwrap();
    for read_only in [true, false] {
        let e = SurvivalcraftTree::open(
            &world,
            &Options {
                read_only,
                cache_bytes: 1 << 20,
            },
        )
        .err()
        .unwrap();
        assert_eq!(e.errno(), libc::ELOOP, "{e}");
    }
}
