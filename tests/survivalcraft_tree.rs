//! The Survivalcraft tree on copies of the real sample worlds, through the `Tree` trait
//! (no kernel): listings, exact sizes, edits committed and seen after reopening, untouched
//! objects' bytes kept, bad input refused without a trace, read-only packed worlds, stable
//! mtimes, and changes made underneath by another writer.

#[allow(dead_code)]
mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::samples;
use common::scratch::{copy_dir, state_dir};
use common::survivalcraft::unpack;

use worldfs::survivalcraft::codec::chunk::{Cell, ChunkPos};
use worldfs::survivalcraft::store::World;
use worldfs::survivalcraft::tree::SurvivalcraftTree;
use worldfs::vfs::tree::Options;
use worldfs::vfs::{Entry, Kind, NewFile, Tree};

/// Keeps mtime records of these tests out of the user's state directory.
/// A writable copy of the 2.3+ region sample with a Project.xml.
fn region_world() -> tempfile::TempDir {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&samples::path(samples::SC_REGION_WORLD), dir.path());
    dir
}

/// The 1.27 sample unpacked into a folder.
fn chunks_dat_world() -> tempfile::TempDir {
    state_dir();
    unpack(&samples::path(samples::SC_ARDOITIA))
}

fn open(path: &Path, read_only: bool) -> SurvivalcraftTree {
    SurvivalcraftTree::open(
        path,
        &Options {
            read_only,
            cache_bytes: 8 << 20,
        },
    )
    .unwrap()
}

fn p(s: &str) -> Vec<String> {
    s.split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// Lists `dir` in pages of `page` entries, resuming from the last cookie each time.
fn list_paged(t: &SurvivalcraftTree, dir: &str, page: usize) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    loop {
        let after = out.last().map_or(0, |e| e.cookie);
        let mut got = Vec::new();
        t.list(&p(dir), after, &mut |e| {
            got.push(e);
            got.len() < page
        })
        .unwrap();
        if got.is_empty() {
            return out;
        }
        out.extend(got);
    }
}

/// Every file of a folder with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path(), fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn text(t: &SurvivalcraftTree, path: &str) -> String {
    String::from_utf8(t.read(&p(path)).unwrap().to_vec()).unwrap()
}

#[test]
fn listings_stream_every_chunk_with_stable_cookies_and_exact_sizes() {
    let w = region_world();
    let t = open(w.path(), false);
    let root: Vec<String> = list_paged(&t, "", 2).into_iter().map(|e| e.name).collect();
    assert_eq!(root, ["Project.xml", "chunks", "containers", "players"]);

    let expected: BTreeSet<String> = World::open(w.path(), true)
        .unwrap()
        .chunks()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(expected.len(), 27);
    let paged = list_paged(&t, "chunks", 5);
    let whole = list_paged(&t, "chunks", usize::MAX);
    assert_eq!(paged, whole, "paging changes nothing");
    assert!(paged.windows(2).all(|w| w[0].cookie < w[1].cookie));
    let names: BTreeSet<String> = paged.iter().map(|e| e.name.clone()).collect();
    assert_eq!(names, expected);

    for name in &names {
        let files: Vec<String> = list_paged(&t, &format!("chunks/{name}"), 1)
            .into_iter()
            .map(|e| {
                let path = format!("chunks/{name}/{}", e.name);
                assert_eq!(e.stat.size, t.read(&p(&path)).unwrap().len() as u64);
                assert_eq!(e.stat, t.stat(&p(&path)).unwrap());
                e.name
            })
            .collect();
        assert_eq!(files, ["blocks.cubeset", "surface.txt"], "no light.txt");
    }
    assert!(t.stat(&p("chunks/99,99")).is_err());
    assert!(t.stat(&p("chunks/011,-6")).is_err(), "one name per chunk");
    assert!(t.stat(&p("chunks/11,-6/light.txt")).is_err());
    let inv = t.stat(&p("players/Geoffrey/inventory")).unwrap();
    assert_eq!(inv.kind, Kind::File);
    assert_eq!(
        inv.size,
        t.read(&p("players/Geoffrey/inventory")).unwrap().len() as u64
    );
}

#[test]
fn edits_commit_only_what_changed_and_survive_reopening() {
    let w = region_world();
    let pos = ChunkPos::new(11, -6);
    let raw_before: Vec<(ChunkPos, Vec<u8>)> = {
        let world = World::open(w.path(), true).unwrap();
        world
            .chunks()
            .into_iter()
            .map(|c| (c, world.read_raw(c).unwrap()))
            .collect()
    };
    let files_before = snapshot(w.path());
    let t = open(w.path(), false);

    // Writing back what is shown stores nothing.
    for path in [
        "chunks/11,-6/blocks.cubeset",
        "chunks/11,-6/surface.txt",
        "players/Geoffrey/inventory",
        "Project.xml",
    ] {
        let same = t.read(&p(path)).unwrap();
        t.write(&p(path), &same).unwrap();
    }
    assert_eq!(
        snapshot(w.path()),
        files_before,
        "unchanged writes store nothing"
    );

    let mtime_other = t.stat(&p("chunks/12,-4/blocks.cubeset")).unwrap().mtime;
    let blocks = text(&t, "chunks/11,-6/blocks.cubeset");
    let edited = blocks.replacen("\"D: 204: 10\"", "\"D: 204: 11\"", 1);
    assert_ne!(edited, blocks);
    t.write(&p("chunks/11,-6/blocks.cubeset"), edited.as_bytes())
        .unwrap();
    let inv = text(&t, "players/Geoffrey/inventory").replacen("1 162 1 ", "1 162 3 ", 1);
    t.write(&p("players/Geoffrey/inventory"), inv.as_bytes())
        .unwrap();
    let edited_mtime = t.stat(&p("chunks/11,-6/blocks.cubeset")).unwrap().mtime;
    assert!(edited_mtime > UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    drop(t);

    let t = open(w.path(), false);
    assert_eq!(text(&t, "chunks/11,-6/blocks.cubeset"), edited);
    assert_eq!(text(&t, "players/Geoffrey/inventory"), inv);
    assert!(text(&t, "Project.xml").contains("Name=\"Count\" Type=\"int\" Value=\"3\""));
    assert_eq!(
        t.stat(&p("chunks/11,-6/blocks.cubeset")).unwrap().mtime,
        edited_mtime,
        "a commit time survives reopening"
    );
    assert_eq!(
        t.stat(&p("chunks/12,-4/blocks.cubeset")).unwrap().mtime,
        mtime_other,
        "untouched chunks keep their mtime"
    );
    let world = World::open(w.path(), true).unwrap();
    for (c, raw) in &raw_before {
        if *c != pos {
            assert_eq!(
                &world.read_raw(*c).unwrap(),
                raw,
                "chunk {c} kept its bytes"
            );
        }
    }
    let cell = world.read_chunk(pos).unwrap();
    assert!(cell.cells().contains(&Cell {
        id: 204,
        light: 0,
        data: 11
    }));
}

#[test]
fn bad_input_is_refused_and_stores_nothing() {
    let w = region_world();
    let before = snapshot(w.path());
    let t = open(w.path(), false);
    let blocks = text(&t, "chunks/11,-6/blocks.cubeset");
    let bad = [
        (
            "chunks/11,-6/blocks.cubeset",
            blocks.replacen("\"b: 1: 0\"", "\"b: 1024: 0\"", 1),
        ),
        (
            "chunks/11,-6/blocks.cubeset",
            blocks[..blocks.len() / 2].to_string(),
        ),
        ("chunks/11,-6/surface.txt", "0 0 72 11 13\n".to_string()),
        (
            "players/Geoffrey/inventory",
            "[Inventory]\n1 162x 1\n".to_string(),
        ),
        (
            "players/Geoffrey/inventory",
            "[NoSuchInventory]\n1 162 1\n".to_string(),
        ),
        ("Project.xml", "<Project Version=\"2.3\">".to_string()),
    ];
    for (path, content) in bad {
        let e = t.write(&p(path), content.as_bytes()).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{path}: {e}");
    }
    assert_eq!(snapshot(w.path()), before);
}

#[test]
fn packed_worlds_are_read_only_and_say_how_to_unpack() {
    state_dir();
    let e = SurvivalcraftTree::open(
        &samples::path(samples::SC_ARDOITIA),
        &Options {
            read_only: false,
            cache_bytes: 1 << 20,
        },
    )
    .err()
    .unwrap();
    assert_eq!(e.errno(), libc::EROFS);
    assert!(e.to_string().contains("unzip"), "{e}");
    let t = std::sync::Arc::new(open(&samples::path(samples::SC_ARDOITIA), true));
    assert!(t.read_only());
    assert_eq!(list_paged(&t, "chunks", 50).len(), 132);
    assert!(!text(&t, "chunks/223,418/light.txt").is_empty());
    // Writes go through the core, which refuses them with the tree's reason.
    let vfs = worldfs::vfs::Vfs::new(t.clone(), None);
    let ino = ["chunks", "223,418", "light.txt"]
        .iter()
        .fold(worldfs::vfs::inodes::ROOT, |dir, name| {
            vfs.lookup(dir, name, 1).unwrap().0
        });
    let trunc = worldfs::vfs::OpenMode {
        write: true,
        truncate: true,
        append: false,
    };
    let e = vfs.open(ino, trunc).unwrap_err();
    assert_eq!(e.errno(), libc::EROFS);
    assert!(e.to_string().contains("unzip"), "{e}");
    assert!(text(&t, "containers/3967,65,6695/inventory").contains("[Chest]"));
}

#[test]
fn chunks_dat_worlds_show_light_and_accept_new_chunks() {
    let w = chunks_dat_world();
    let t = open(w.path(), false);
    let names: Vec<String> = list_paged(&t, "chunks/223,418", 10)
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["blocks.cubeset", "light.txt", "surface.txt"]);
    let root: Vec<String> = list_paged(&t, "", 10).into_iter().map(|e| e.name).collect();
    assert!(root.contains(&"Project.bak".to_string()), "{root:?}");
    assert!(!root.iter().any(|n| n.starts_with("Chunks")), "{root:?}");

    assert_eq!(
        t.classify(&p("chunks/223,418"), "blocks.cubeset").unwrap(),
        NewFile::Object
    );
    assert_eq!(
        t.classify(&p("chunks/223,418"), ".blocks.cubeset.swp")
            .unwrap(),
        NewFile::Scratch
    );
    assert_eq!(t.classify(&p(""), "notes.txt").unwrap(), NewFile::Object);
    assert_eq!(t.classify(&p(""), "sedAb12Cd").unwrap(), NewFile::Scratch);

    let cubeset = t.read(&p("chunks/223,418/blocks.cubeset")).unwrap();
    t.mkdir(&p("chunks/300,300")).unwrap();
    assert!(t.mkdir(&p("chunks/300,300")).is_err(), "exists");
    t.write(&p("chunks/300,300/blocks.cubeset"), &cubeset)
        .unwrap();
    assert!(t.rmdir(&p("chunks/300,300")).is_err());
    drop(t);
    let t = open(w.path(), false);
    assert_eq!(
        t.read(&p("chunks/300,300/blocks.cubeset")).unwrap(),
        cubeset
    );
    assert_eq!(list_paged(&t, "chunks", 1000).len(), 133);
}

#[test]
fn changes_made_underneath_are_seen() {
    let w = region_world();
    let t = open(w.path(), true);
    let pos = ChunkPos::new(12, -4);
    let before = text(&t, "chunks/12,-4/blocks.cubeset");
    {
        let mut world = World::open(w.path(), false).unwrap();
        let mut chunk = world.read_chunk(pos).unwrap();
        chunk
            .set_cell(
                3,
                200,
                3,
                Cell {
                    id: 3,
                    light: 0,
                    data: 0,
                },
            )
            .unwrap();
        world.commit_chunks(&[(pos, &chunk)]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(600));
    let after = text(&t, "chunks/12,-4/blocks.cubeset");
    assert_ne!(before, after, "the other writer's change shows");
    assert!(t.stat(&p("chunks/12,-4/blocks.cubeset")).unwrap().mtime > SystemTime::UNIX_EPOCH);
}

#[test]
fn the_world_folders_own_folders_are_shown_and_written_the_terrain_stays_hidden() {
    let w = region_world();
    fs::create_dir_all(w.path().join("Mods/hello")).unwrap();
    fs::write(w.path().join("Mods/hello/a.txt"), b"a\n").unwrap();
    let t = open(w.path(), false);
    let top: Vec<String> = list_paged(&t, "", 100)
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert!(top.contains(&"Mods".to_string()), "{top:?}");
    assert!(!top.contains(&"Regions".to_string()), "{top:?}");
    assert_eq!(t.stat(&p("Mods/hello")).unwrap().kind, Kind::Dir);
    assert_eq!(&**t.read(&p("Mods/hello/a.txt")).unwrap(), b"a\n");
    assert!(t.stat(&p("Regions")).is_err());
    t.mkdir(&p("Mods/hello/sub")).unwrap();
    t.write(&p("Mods/hello/sub/b.txt"), b"b\n").unwrap();
    assert_eq!(
        fs::read(w.path().join("Mods/hello/sub/b.txt")).unwrap(),
        b"b\n"
    );
    t.set_perm(&p("Mods/hello/sub/b.txt"), 0o600).unwrap();
    assert_eq!(t.stat(&p("Mods/hello/sub/b.txt")).unwrap().perm, 0o600);
    t.remove(&p("Mods/hello/sub/b.txt")).unwrap();
    t.rmdir(&p("Mods/hello/sub")).unwrap();
    assert!(!w.path().join("Mods/hello/sub").exists());
}
