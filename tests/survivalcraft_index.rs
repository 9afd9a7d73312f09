//! Issue 13, the `index/` tree of a Survivalcraft world: on every sample world the answers
//! equal what a brute-force walk over the decoded chunks and the mount's inventory files
//! finds; renames change every object holding the name and the stored bytes of nothing
//! else, all at once, and a bad name changes nothing; our own commits update the answer
//! without a scan; another writer's change is seen by the next question.

#[allow(dead_code)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::samples;
use common::scratch::{copy_dir, state_dir};
use common::survivalcraft::unpack;

use worldfs::survivalcraft::codec::chunk::{Cell, ChunkPos};
use worldfs::survivalcraft::codec::format::TerrainFormat;
use worldfs::survivalcraft::codec::{decode_chunk, project};
use worldfs::survivalcraft::index::{block_ids, item_id, replace_block, with_item_id};
use worldfs::survivalcraft::store::{is_scworld, is_world_folder, World};
use worldfs::survivalcraft::tree::SurvivalcraftTree;
use worldfs::survivalcraft::views::inventory::{self, ValueLayout};
use worldfs::vfs::tree::Options;
use worldfs::vfs::{Kind, Tree};

fn open(path: &Path, read_only: bool) -> SurvivalcraftTree {
    state_dir();
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

/// The names of a folder, listed in pages of at most 5 entries, each resumed after the last
/// cookie (cookies must grow).
fn ls(t: &SurvivalcraftTree, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let mut page = Vec::new();
        t.list(&p(dir), after, &mut |e| {
            page.push(e);
            page.len() < 5
        })
        .unwrap_or_else(|e| panic!("listing {dir}: {e}"));
        let Some(last) = page.last() else { break };
        assert!(last.cookie > after, "cookies grow in {dir}");
        after = last.cookie;
        out.extend(page.into_iter().map(|e| e.name));
    }
    out
}

fn text(t: &SurvivalcraftTree, path: &str) -> String {
    String::from_utf8(t.read(&p(path)).unwrap().to_vec()).unwrap()
}

/// Every Survivalcraft sample world: folders holding a world and `.scworld` files.
fn sample_worlds() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![samples::path(samples::SURVIVALCRAFT)];
    while let Some(d) = stack.pop() {
        if is_world_folder(&d) {
            out.push(d);
            continue;
        }
        for e in fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if is_scworld(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 3, "samples: {out:?}");
    out
}

fn layout(format: TerrainFormat) -> ValueLayout {
    if format == TerrainFormat::Chunks16 {
        ValueLayout::Bits16
    } else {
        ValueLayout::Bits32
    }
}

/// What `index/` shows or a walk finds: block id → chunk folders, item id → lines.
#[derive(Debug, Default, PartialEq)]
struct Answers {
    blocks: BTreeMap<String, BTreeSet<String>>,
    items: BTreeMap<String, BTreeSet<String>>,
}

/// The brute-force answers: every chunk `chunks/` lists decoded from the store, every
/// inventory file of `players/` and `containers/` parsed.
fn walk(t: &SurvivalcraftTree, world: &World) -> Answers {
    let mut a = Answers::default();
    for c in ls(t, "chunks") {
        let pos: ChunkPos = c.parse().unwrap();
        for id in block_ids(&world.read_chunk(pos).unwrap()) {
            a.blocks
                .entry(id.to_string())
                .or_default()
                .insert(c.clone());
        }
    }
    let top = ls(t, "");
    for dir in ["players", "containers"] {
        if !top.iter().any(|n| n == dir) {
            continue;
        }
        for holder in ls(t, dir) {
            let path = format!("{dir}/{holder}/inventory");
            for inv in inventory::parse(text(t, &path).as_bytes()).unwrap() {
                for s in inv.slots {
                    a.items
                        .entry(item_id(s.contents, layout(world.format())).to_string())
                        .or_default()
                        .insert(format!("{path} {} {} {}", inv.component, s.index, s.count));
                }
            }
        }
    }
    a
}

/// What `index/` shows, its links checked.
fn shown(t: &SurvivalcraftTree) -> Answers {
    let mut a = Answers::default();
    assert_eq!(ls(t, "index"), ["blocks", "items"]);
    for id in ls(t, "index/blocks") {
        let chunks: BTreeSet<String> = ls(t, &format!("index/blocks/{id}")).into_iter().collect();
        for c in &chunks {
            let link = format!("index/blocks/{id}/{c}");
            let st = t.stat(&p(&link)).unwrap();
            assert_eq!(st.kind, Kind::Symlink);
            assert!(st.volatile);
            let target = t.readlink(&p(&link)).unwrap();
            assert_eq!(target, format!("../../../chunks/{c}").into_bytes());
            assert_eq!(st.size, target.len() as u64);
        }
        a.blocks.insert(id, chunks);
    }
    for id in ls(t, "index/items") {
        let body = text(t, &format!("index/items/{id}"));
        let lines: BTreeSet<String> = body.lines().map(str::to_string).collect();
        assert_eq!(
            lines.len(),
            body.lines().count(),
            "a line repeats in items/{id}"
        );
        assert_eq!(
            t.stat(&p(&format!("index/items/{id}"))).unwrap().size,
            body.len() as u64
        );
        assert_eq!(
            t.stat(&p(&format!("index/items/{id}"))).unwrap().perm,
            0o444
        );
        a.items.insert(id, lines);
    }
    a
}

#[test]
fn every_sample_answers_what_a_walk_of_the_decoded_chunks_finds() {
    for w in sample_worlds() {
        let t = open(&w, true);
        assert!(
            !ls(&t, "").iter().any(|n| n == "index"),
            "index/ is reached by name only"
        );
        assert_eq!(t.stat(&p("index")).unwrap().kind, Kind::Dir);
        let world = World::open(&w, true).unwrap();
        let expected = walk(&t, &world);
        assert!(!expected.blocks.is_empty(), "{}", w.display());
        assert_eq!(shown(&t), expected, "{}", w.display());
        assert_eq!(t.index().scans(), 1, "one scan answers every question");
    }
}

/// A writable copy of the region sample with a Project.xml (two region files).
fn region_world() -> tempfile::TempDir {
    state_dir();
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&samples::path(samples::SC_REGION_WORLD), dir.path());
    dir
}

/// The 1.27 sample (`Chunks.dat`) unpacked into a folder.
fn chunks_dat_world() -> tempfile::TempDir {
    state_dir();
    unpack(&samples::path(samples::SC_ARDOITIA))
}

/// Every chunk's stored bytes and the world folder's files.
fn stored(path: &Path) -> (BTreeMap<ChunkPos, Vec<u8>>, BTreeMap<String, Vec<u8>>) {
    let world = World::open(path, true).unwrap();
    let chunks = world
        .chunks()
        .into_iter()
        .map(|c| (c, world.read_raw(c).unwrap()))
        .collect();
    let files = fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| f.is_file())
        .map(|f| {
            (
                f.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(&f).unwrap(),
            )
        })
        .collect();
    (chunks, files)
}

fn errno(r: worldfs::error::Result<()>) -> i32 {
    r.expect_err("refused").errno()
}

/// A block held by the most chunks, and one of the world's ids held by none.
fn common_and_unused(t: &SurvivalcraftTree) -> (String, String) {
    let ids = ls(t, "index/blocks");
    let common = ids
        .iter()
        .max_by_key(|id| (ls(t, &format!("index/blocks/{id}")).len(), id.len()))
        .unwrap()
        .clone();
    let unused = (1..255u16)
        .map(|i| i.to_string())
        .find(|i| !ids.contains(i))
        .unwrap();
    (common, unused)
}

#[test]
fn a_block_rename_changes_every_chunk_holding_it_and_nothing_else() {
    for (w, spans_regions) in [(region_world(), true), (chunks_dat_world(), false)] {
        let t = open(w.path(), false);
        let world_before = World::open(w.path(), true).unwrap();
        let (a, b) = common_and_unused(&t);
        let holders: BTreeSet<String> = ls(&t, &format!("index/blocks/{a}")).into_iter().collect();
        if spans_regions {
            let regions: BTreeSet<(i32, i32)> = holders
                .iter()
                .map(|c| {
                    let pos: ChunkPos = c.parse().unwrap();
                    (pos.cx >> 4, pos.cz >> 4)
                })
                .collect();
            assert!(regions.len() > 1, "the rename spans region files");
        }
        let (chunks_before, files_before) = stored(w.path());

        // Bad names change nothing.
        let max = world_before.format().max_id();
        for bad in ["Chest", "045", "-1", &(max + 1).to_string(), "4 5"] {
            let to = format!("index/blocks/{bad}");
            assert_eq!(
                errno(t.rename(&p(&format!("index/blocks/{a}")), &p(&to))),
                libc::EINVAL,
                "{bad}"
            );
        }
        assert_eq!(
            errno(t.rename(
                &p(&format!("index/blocks/{a}")),
                &p(&format!("index/items/{b}"))
            )),
            libc::EXDEV
        );
        assert!(
            stored(w.path()) == (chunks_before.clone(), files_before.clone()),
            "a refused rename changed the world"
        );

        t.rename(
            &p(&format!("index/blocks/{a}")),
            &p(&format!("index/blocks/{b}")),
        )
        .unwrap();
        let (chunks_after, files_after) = stored(w.path());
        assert_eq!(
            files_after.get("Project.xml"),
            files_before.get("Project.xml")
        );
        let (a_id, b_id): (u16, u16) = (a.parse().unwrap(), b.parse().unwrap());
        let world_after = World::open(w.path(), true).unwrap();
        for (pos, raw) in &chunks_before {
            if holders.contains(&pos.to_string()) {
                let old = decode_chunk(world_before.format(), raw).unwrap();
                let new = world_after.read_chunk(*pos).unwrap();
                assert!(
                    Some(new) == replace_block(&old, a_id, b_id),
                    "chunk {pos} is not the old one with {a} replaced by {b}"
                );
            } else {
                assert!(
                    &chunks_after[pos] == raw,
                    "chunk {pos} not holding {a} changed"
                );
            }
        }
        assert_eq!(chunks_after.len(), chunks_before.len());
        // The answer follows: A is gone, B is held where A was, and a fresh walk agrees.
        assert!(t.stat(&p(&format!("index/blocks/{a}"))).is_err());
        let now: BTreeSet<String> = ls(&t, &format!("index/blocks/{b}")).into_iter().collect();
        assert_eq!(now, holders);
        assert_eq!(shown(&t).blocks, walk(&t, &world_after).blocks);
        assert_eq!(
            t.index().scans(),
            1,
            "the rename's commit updated the answer"
        );
        // The chunk folders show the new block.
        let c = holders.iter().next().unwrap();
        let cubeset = text(&t, &format!("chunks/{c}/blocks.cubeset"));
        assert!(
            cubeset.contains(&format!(": {b}:")) || cubeset.contains(&format!("\"{b}:")),
            "{}",
            &cubeset[..400]
        );
        // `mv A B` onto an existing folder B asks for B/A: the same rename.
        let (c2, _) = common_and_unused(&t);
        if c2 != b {
            t.rename(
                &p(&format!("index/blocks/{b}")),
                &p(&format!("index/blocks/{c2}/{b}")),
            )
            .unwrap();
            assert!(t.stat(&p(&format!("index/blocks/{b}"))).is_err());
        }
        assert!(!w.path().join("Regions.worldfs-journal").exists());
    }
}

#[test]
fn an_item_rename_changes_every_slot_holding_it_and_nothing_else() {
    for w in [region_world(), chunks_dat_world()] {
        let t = open(w.path(), false);
        let format = World::open(w.path(), true).unwrap().format();
        let items = ls(&t, "index/items");
        assert!(!items.is_empty());
        let a = items
            .iter()
            .max_by_key(|i| text(&t, &format!("index/items/{i}")).lines().count())
            .unwrap()
            .clone();
        let b = (1..255u16)
            .map(|i| i.to_string())
            .find(|i| !items.contains(i))
            .unwrap();
        let lines_a = text(&t, &format!("index/items/{a}"));
        let (chunks_before, files_before) = stored(w.path());
        let xml_before = files_before["Project.xml"].clone();

        for bad in ["x", "00", &(format.max_id() + 1).to_string()] {
            assert_eq!(
                errno(t.rename(
                    &p(&format!("index/items/{a}")),
                    &p(&format!("index/items/{bad}"))
                )),
                libc::EINVAL
            );
        }
        assert_eq!(
            errno(t.write(&p(&format!("index/items/{a}")), b"x")),
            libc::EPERM
        );
        assert_eq!(stored(w.path()).1["Project.xml"], xml_before);

        t.rename(
            &p(&format!("index/items/{a}")),
            &p(&format!("index/items/{b}")),
        )
        .unwrap();
        let (chunks_after, files_after) = stored(w.path());
        assert!(chunks_after == chunks_before, "a chunk changed");
        for (name, bytes) in &files_before {
            if name != "Project.xml" {
                assert!(&files_after[name] == bytes, "{name} changed");
            }
        }
        // Every slot holding A holds B now, count and data kept; nothing else changed.
        let before = project::read(&xml_before).unwrap();
        let after = project::read(&files_after["Project.xml"]).unwrap();
        let l = layout(format);
        let a_id: u16 = a.parse().unwrap();
        let b_id: u16 = b.parse().unwrap();
        assert_eq!(before.holders.len(), after.holders.len());
        let mut renamed = 0;
        for (h0, h1) in before.holders.iter().zip(&after.holders) {
            let shown = h0.player_name.is_some() || h0.coordinates.is_some();
            let mut expect = h0.clone();
            for s in expect
                .inventories
                .iter_mut()
                .flat_map(|i| i.slots.iter_mut())
            {
                if shown && item_id(s.contents, l) == a_id {
                    s.contents = with_item_id(s.contents, l, b_id);
                    renamed += 1;
                }
            }
            assert_eq!(h1, &expect);
        }
        assert_eq!(renamed, lines_a.lines().count());
        // The answer follows: B's file holds A's lines.
        assert!(t.stat(&p(&format!("index/items/{a}"))).is_err());
        assert_eq!(text(&t, &format!("index/items/{b}")), lines_a);
    }
}

#[test]
fn our_own_commits_update_the_answer_and_another_writers_are_seen_by_the_next_question() {
    let w = region_world();
    let t = open(w.path(), false);
    let before = ls(&t, "index/blocks");
    assert_eq!(t.index().scans(), 1);
    let new_id = (1..1000u16)
        .find(|i| !before.contains(&i.to_string()))
        .unwrap();
    let chunk = ls(&t, "chunks")[0].clone();
    // An edit through the mount: a cell of the chunk gets the new id.
    let cubeset = text(&t, &format!("chunks/{chunk}/blocks.cubeset"));
    let edited = {
        // The definitions are sorted by (id, data): add one for the new id and use it in
        // the first cell of the grid.
        let world = World::open(w.path(), true).unwrap();
        let pos: ChunkPos = chunk.parse().unwrap();
        let mut c = world.read_chunk(pos).unwrap();
        c.set_cell(
            0,
            0,
            0,
            Cell {
                id: new_id,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        worldfs::survivalcraft::views::blocks::render(&c)
    };
    assert_ne!(cubeset.as_bytes(), edited.as_slice());
    t.write(&p(&format!("chunks/{chunk}/blocks.cubeset")), &edited)
        .unwrap();
    assert_eq!(
        ls(&t, &format!("index/blocks/{new_id}")),
        vec![chunk.clone()],
        "our own commit shows"
    );
    assert_eq!(t.index().scans(), 1, "without a scan");

    // Another program commits a chunk holding yet another id.
    let other_id = (new_id + 1..1000u16)
        .find(|i| !before.contains(&i.to_string()))
        .unwrap();
    let other_chunk = ls(&t, "chunks")[1].clone();
    {
        let mut world = World::open(w.path(), false).unwrap();
        let pos: ChunkPos = other_chunk.parse().unwrap();
        let mut c = world.read_chunk(pos).unwrap();
        c.set_cell(
            1,
            1,
            1,
            Cell {
                id: other_id,
                light: 0,
                data: 0,
            },
        )
        .unwrap();
        world.commit_chunks(&[(pos, &c)]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        ls(&t, &format!("index/blocks/{other_id}")),
        vec![other_chunk],
        "the other writer's change shows"
    );
    assert_eq!(t.index().scans(), 2, "after a scan");
    assert_eq!(
        ls(&t, &format!("index/blocks/{new_id}")),
        vec![chunk],
        "our own commit is still there"
    );
}

#[test]
fn index_files_cannot_be_written_or_removed() {
    let w = region_world();
    let t = open(w.path(), false);
    let id = ls(&t, "index/blocks")[0].clone();
    let c = ls(&t, &format!("index/blocks/{id}"))[0].clone();
    assert_eq!(
        errno(t.remove(&p(&format!("index/blocks/{id}/{c}")))),
        libc::EPERM
    );
    assert_eq!(
        errno(t.rmdir(&p(&format!("index/blocks/{id}")))),
        libc::EPERM
    );
    assert_eq!(
        t.read(&p(&format!("index/blocks/{id}/{c}")))
            .unwrap_err()
            .errno(),
        libc::ELOOP
    );
    assert!(t.stat(&p("index/nodes")).is_err());
    assert!(t.stat(&p("index/blocks/99999")).is_err());
}

/// Another program saves the world (region files replaced) just before a rename, within
/// the time worldfs takes to notice: the rename must not write the regions it read before
/// that save over it. Either the rename lands on top of the other program's save, or it
/// fails (EAGAIN) and changes nothing; the other program's chunk is never lost. Both for a
/// rename within one region file and one spanning two.
#[test]
fn a_rename_never_overwrites_what_another_program_just_saved() {
    for spanning in [false, true] {
        let w = region_world();
        let t = open(w.path(), false);
        let ids = ls(&t, "index/blocks");
        let region_of = |c: &String| {
            let pos: ChunkPos = c.parse().unwrap();
            (pos.cx >> 4, pos.cz >> 4)
        };
        let (a, holders) = ids
            .iter()
            .map(|id| (id.clone(), ls(&t, &format!("index/blocks/{id}"))))
            .find(|(_, hs)| {
                let regions: BTreeSet<_> = hs.iter().map(region_of).collect();
                (regions.len() > 1) == spanning
            })
            .unwrap();
        let unused = (1..255u16).find(|i| !ids.contains(&i.to_string())).unwrap();
        // The other program changes a cell of the first holder (to a block the rename does
        // not touch), replacing the region file as a save does.
        let other: ChunkPos = holders[0].parse().unwrap();
        let mut game = World::open(w.path(), false).unwrap();
        let mut c = game.read_chunk(other).unwrap();
        let cell = Cell {
            id: unused,
            light: 0,
            data: 0,
        };
        c.set_cell(1, 1, 1, cell).unwrap();
        game.commit_chunks(&[(other, &c)]).unwrap();
        drop(game);
        let renamed = t.rename(
            &p(&format!("index/blocks/{a}")),
            &p(&format!("index/blocks/{}", unused + 1)),
        );
        if let Err(e) = &renamed {
            assert_eq!(e.errno(), libc::EAGAIN, "{e}");
        }
        let after = World::open(w.path(), true).unwrap();
        assert_eq!(
            after.read_chunk(other).unwrap().cell(1, 1, 1),
            Some(cell),
            "the other program's save was lost (spanning: {spanning}, rename: {renamed:?})"
        );
    }
}

/// Another program replaces `Chunks.dat` (a save through a new file, a restore) just before a
/// rename: the rename must not write into the replaced file, where its change would vanish
/// while reported done. Either it lands in the file now there, or it fails with EAGAIN.
#[test]
fn a_rename_never_writes_into_a_chunk_file_replaced_underneath() {
    let w = chunks_dat_world();
    let t = open(w.path(), false);
    let (a, b) = common_and_unused(&t);
    let file = w.path().join("Chunks.dat");
    let copy = w.path().join("Chunks.dat.saving");
    fs::copy(&file, &copy).unwrap();
    // Its time kept, as `cp -p` or `rsync -a` keep it: only the inode tells.
    let mtime = fs::metadata(&file).unwrap().modified().unwrap();
    fs::File::options()
        .write(true)
        .open(&copy)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    fs::rename(&copy, &file).unwrap();
    let rename = || {
        t.rename(
            &p(&format!("index/blocks/{a}")),
            &p(&format!("index/blocks/{b}")),
        )
    };
    let mut renamed = rename();
    if renamed.is_err() {
        // Refused: once worldfs has seen the new file, the same rename goes through.
        std::thread::sleep(Duration::from_millis(
            worldfs::survivalcraft::cache::REFRESH_INTERVAL_MS + 100,
        ));
        renamed = rename().map_err(|e| {
            assert_eq!(e.errno(), libc::EAGAIN, "{e}");
            e
        });
        assert!(renamed.is_ok(), "refused again: {renamed:?}");
    }
    let on_disk = World::open(w.path(), true).unwrap();
    let holds_a = on_disk
        .chunks()
        .into_iter()
        .any(|c| block_ids(&on_disk.read_chunk(c).unwrap()).contains(&a.parse().unwrap()));
    match renamed {
        Ok(()) => assert!(
            !holds_a,
            "the rename was reported done but is not in the file"
        ),
        Err(e) => assert_eq!(e.errno(), libc::EAGAIN, "{e}"),
    }
}

/// Another program gives a chunk block A in place just before `mv index/blocks/A B`, before
/// worldfs would notice by itself (within the refresh interval): the rename sees it at its
/// commit, asks its question again and renames that chunk too, so no chunk holds A after a
/// rename reported done. Both layouts (region files, `Chunks.dat`).
#[test]
fn a_rename_also_takes_a_chunk_another_program_just_gave_the_block() {
    for w in [region_world(), chunks_dat_world()] {
        let t = open(w.path(), false);
        let chunks = ls(&t, "chunks");
        let ids = ls(&t, "index/blocks");
        // A block some chunks hold but not all, and an id no chunk holds.
        let (a, holders) = ids
            .iter()
            .map(|id| (id.clone(), ls(&t, &format!("index/blocks/{id}"))))
            .filter(|(_, hs)| hs.len() < chunks.len())
            .max_by_key(|(_, hs)| hs.len())
            .unwrap();
        let b = (1..255u16).find(|i| !ids.contains(&i.to_string())).unwrap();
        let a_id: u16 = a.parse().unwrap();
        let other: ChunkPos = chunks
            .iter()
            .find(|c| !holders.contains(c))
            .unwrap()
            .parse()
            .unwrap();
        let mut game = World::open(w.path(), false).unwrap();
        let mut c = game.read_chunk(other).unwrap();
        let cell = Cell {
            id: a_id,
            light: 0,
            data: 0,
        };
        c.set_cell(1, 1, 1, cell).unwrap();
        game.commit_chunks(&[(other, &c)]).unwrap();
        drop(game);
        t.rename(
            &p(&format!("index/blocks/{a}")),
            &p(&format!("index/blocks/{b}")),
        )
        .unwrap();
        let on_disk = World::open(w.path(), true).unwrap();
        let still: Vec<ChunkPos> = on_disk
            .chunks()
            .into_iter()
            .filter(|&c| block_ids(&on_disk.read_chunk(c).unwrap()).contains(&a_id))
            .collect();
        assert!(still.is_empty(), "chunks still holding {a}: {still:?}");
        assert_eq!(
            on_disk
                .read_chunk(other)
                .unwrap()
                .cell(1, 1, 1)
                .map(|c| c.id),
            Some(b),
            "the other program's cell was renamed"
        );
    }
}
