//! Issue 13, the `index/` tree of a Luanti world: every answer equals what a brute-force walk
//! over the decoded blocks finds (on every sample map and on engine-made worlds), a block
//! that does not decode is listed in `broken/`, our own commits update the answer without a
//! scan, and another writer's commit between two questions is seen by the second.

#[allow(dead_code)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use common::engine::{mkworld, ENGINE_RUNS};
use common::maps::{block_pos, map_databases, read_blocks};
use common::{samples, scratch};
use worldfs::luanti::codec::block::{BlockPos, MapBlock, RelPos};
use worldfs::luanti::codec::{decode_block, encode_block};
use worldfs::luanti::index::used_names;
use worldfs::luanti::store::map::MapStore;
use worldfs::luanti::tree::{block_name, LuantiTree};
use worldfs::names;
use worldfs::vfs::tree::{Kind, Options, Tree};

fn p(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn open(source: &Path, read_only: bool) -> LuantiTree {
    scratch::state_dir();
    LuantiTree::open(
        source,
        &Options {
            read_only,
            cache_bytes: 64 << 20,
        },
    )
    .expect("the world opens")
}

/// The names of a folder, listed as the core lists it: in pages of at most 7 entries, each
/// resumed after the last cookie.
fn ls(tree: &LuantiTree, dir: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let mut page = Vec::new();
        tree.list(&p(dir), after, &mut |e| {
            page.push(e);
            page.len() < 7
        })
        .unwrap_or_else(|e| panic!("listing {dir:?}: {e}"));
        let Some(last) = page.last() else { break };
        assert!(last.cookie > after, "cookies grow");
        after = last.cookie;
        out.extend(page.into_iter().map(|e| e.name));
    }
    out
}

fn link(tree: &LuantiTree, path: &[&str]) -> String {
    assert_eq!(tree.stat(&p(path)).expect("stat").kind, Kind::Symlink);
    String::from_utf8(tree.readlink(&p(path)).expect("readlink")).expect("utf-8")
}

/// What a brute-force walk over the decoded blocks the tree lists finds.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    nodes: BTreeMap<String, BTreeSet<String>>,
    items: BTreeMap<String, BTreeSet<String>>,
    fields: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    broken: BTreeSet<String>,
}

fn rel_name(r: RelPos) -> String {
    format!("{},{},{}", r.x, r.y, r.z)
}

fn add_block(e: &mut Expected, pos: BlockPos, block: &MapBlock) {
    let b = block_name(pos);
    for n in used_names(block) {
        e.nodes
            .entry(names::escape(n.as_bytes()))
            .or_default()
            .insert(b.clone());
    }
    for m in &block.metadata {
        for l in &m.inventory.lists {
            for (i, s) in l.slots.iter().enumerate() {
                if !s.name.is_empty() {
                    e.items
                        .entry(names::escape(&s.name))
                        .or_default()
                        .insert(format!(
                            "blocks/{b}/meta/{}/inventory {} {} {}",
                            rel_name(m.pos),
                            l.name,
                            i + 1,
                            s.count
                        ));
                }
            }
        }
        for v in m.vars.iter().filter(|v| !v.private) {
            e.fields
                .entry(names::escape(&v.key))
                .or_default()
                .entry(names::escape(&v.value))
                .or_default()
                .insert(format!("{b},{}", rel_name(m.pos)));
        }
    }
}

/// The brute-force answers for the blocks of `map` that the tree lists in `blocks/`.
fn brute_force(tree: &LuantiTree, map: &Path) -> Expected {
    let listed: BTreeSet<String> = ls(tree, &["blocks"]).into_iter().collect();
    let mut e = Expected::default();
    for (key, blob) in read_blocks(map) {
        let pos = block_pos(key);
        if !listed.contains(&block_name(pos)) {
            continue;
        }
        match decode_block(&blob) {
            Ok(block) => add_block(&mut e, pos, &block),
            Err(_) => {
                e.broken.insert(block_name(pos));
            }
        }
    }
    e
}

/// What the tree's `index/` shows, read back into the same shape (links checked).
fn shown(tree: &LuantiTree) -> Expected {
    let mut e = Expected::default();
    for n in ls(tree, &["index", "nodes"]) {
        let blocks: BTreeSet<String> = ls(tree, &["index", "nodes", &n]).into_iter().collect();
        for b in &blocks {
            assert_eq!(
                link(tree, &["index", "nodes", &n, b]),
                format!("../../../blocks/{b}")
            );
        }
        e.nodes.insert(n, blocks);
    }
    for item in ls(tree, &["index", "items"]) {
        let text = tree.read(&p(&["index", "items", &item])).expect("read");
        let size = tree
            .stat(&p(&["index", "items", &item]))
            .expect("stat")
            .size;
        assert_eq!(size, text.len() as u64);
        let lines: BTreeSet<String> = String::from_utf8(text.to_vec())
            .expect("utf-8")
            .lines()
            .filter(|l| l.starts_with("blocks/"))
            .map(String::from)
            .collect();
        if !lines.is_empty() {
            e.items.insert(item, lines);
        }
    }
    for key in ls(tree, &["index", "fields"]) {
        for value in ls(tree, &["index", "fields", &key]) {
            let nodes: BTreeSet<String> = ls(tree, &["index", "fields", &key, &value])
                .into_iter()
                .collect();
            for n in &nodes {
                let target = link(tree, &["index", "fields", &key, &value, n]);
                let parts: Vec<&str> = n.split(',').collect();
                assert_eq!(
                    target,
                    format!(
                        "../../../../blocks/{}/meta/{}",
                        parts[..3].join(","),
                        parts[3..].join(",")
                    )
                );
            }
            e.fields
                .entry(key.clone())
                .or_default()
                .insert(value, nodes);
        }
    }
    for b in ls(tree, &["index", "broken"]) {
        assert_eq!(
            link(tree, &["index", "broken", &b]),
            format!("../../blocks/{b}")
        );
        e.broken.insert(b);
    }
    e
}

#[test]
fn every_sample_map_answers_what_a_brute_force_walk_finds() {
    let maps = map_databases(&samples::root().join("luanti"));
    assert!(!maps.is_empty(), "no sample maps");
    for map in maps {
        let tree = open(&map, true);
        let expected = brute_force(&tree, &map);
        assert!(!expected.nodes.is_empty(), "{}: no nodes", map.display());
        let got = shown(&tree);
        assert_eq!(got.nodes, expected.nodes, "{}: nodes", map.display());
        assert_eq!(got.items, expected.items, "{}: items", map.display());
        assert_eq!(got.fields, expected.fields, "{}: fields", map.display());
        assert_eq!(got.broken, expected.broken, "{}: broken", map.display());
        println!(
            "{}: {} node names, {} items, {} field keys, {} broken",
            map.display(),
            got.nodes.len(),
            got.items.len(),
            got.fields.len(),
            got.broken.len()
        );
    }
}

/// A budget too small to keep the blocks of every node name (a large world): the answers
/// are the same (the blocks of each name are kept when it is asked about), and a rename
/// goes through and is followed.
#[test]
fn a_budget_smaller_than_the_answer_gives_the_same_answers() {
    let (_dir, world) = engine_world();
    let map = world.join("map.sqlite");
    scratch::state_dir();
    let tree = LuantiTree::open(
        &world,
        &Options {
            read_only: false,
            cache_bytes: 16 << 10,
        },
    )
    .expect("the world opens");
    let expected = brute_force(&tree, &map);
    assert_eq!(shown(&tree), expected);
    let kept = tree
        .index()
        .answer(worldfs::luanti::index::Kind::Nodes, None)
        .expect("the answer");
    let nodes = kept.nodes.as_ref().expect("nodes");
    assert!(
        nodes.values().any(Option::is_none),
        "the blocks of some name are not kept"
    );
    drop(kept);
    let names = ls(&tree, &["index", "nodes"]);
    assert!(names.iter().any(|n| n == "default:chest"));
    rename(
        &tree,
        &["index", "nodes", "default:chest"],
        &["index", "nodes", "test:box"],
    )
    .expect("rename");
    let scans = tree.index().scans();
    assert!(ls(&tree, &["index", "nodes"])
        .iter()
        .all(|n| n != "default:chest"));
    assert_eq!(
        ls(&tree, &["index", "nodes", "test:box"]),
        ls_chests(&expected),
        "the renamed blocks"
    );
    assert_eq!(
        tree.index().scans(),
        scans,
        "the rename was followed without a scan"
    );
    assert_eq!(shown(&tree), brute_force(&tree, &map));
}

/// The folders of `index/` are stat-ed without a scan (a path to `index/nodes/NAME/` is
/// looked up folder by folder: a scan for `nodes/` that kept no name's blocks on a large
/// world made the listing of NAME scan again), and their time changes with the map: after
/// another writer's commit, after ours, and after a scan.
#[test]
fn index_folders_are_stat_ed_without_a_scan_and_their_time_follows_the_map() {
    let (_dir, world) = engine_world();
    let map = world.join("map.sqlite");
    let tree = open(&world, false);
    let mtime = |path: &[&str]| tree.stat(&p(path)).expect("stat").mtime;
    let folders: [&[&str]; 4] = [
        &["index", "nodes"],
        &["index", "fields"],
        &["index", "broken"],
        &["index"],
    ];
    let before: Vec<_> = folders.iter().map(|f| mtime(f)).collect();
    assert_eq!(
        tree.index().scans(),
        0,
        "stat-ing index/ folders scanned the map"
    );
    assert_eq!(folders.iter().map(|f| mtime(f)).collect::<Vec<_>>(), before);

    let chests = ls(&tree, &["index", "nodes", "default:chest"]);
    assert_eq!(tree.index().scans(), 1, "one scan for the first ls");
    let scanned = mtime(&["index", "nodes"]);
    assert_ne!(scanned, before[0], "the scan changed the answer's time");
    assert_eq!(mtime(&["index", "nodes", "default:chest"]), scanned);

    let pos = block_name_pos(&chests[0]);
    let mut block = decode_block(&all_blobs(&map)[&pos]).expect("decodes");
    block.names = vec!["default:mese".into()];
    block.content = vec![0; block.content.len()];
    block.metadata.clear();
    overwrite(&map, pos, Some(encode_block(&block).expect("encodes")));
    let other = mtime(&["index", "nodes"]);
    assert_ne!(other, scanned, "another writer's commit changed the time");
    assert_eq!(tree.index().scans(), 1, "without a scan");

    tree.blocks()
        .modify(block_name_pos(&chests[chests.len() - 1]), |b| {
            b.names = vec!["default:goldblock".into()];
            b.content = vec![0; b.content.len()];
            b.metadata.clear();
            Ok(())
        })
        .expect("our commit");
    assert_ne!(
        mtime(&["index", "nodes"]),
        other,
        "our commit changed the time"
    );
}

/// The blocks the expected answer says hold a chest, in listing order.
fn ls_chests(e: &Expected) -> Vec<String> {
    let mut v: Vec<String> = e.nodes["default:chest"].iter().cloned().collect();
    v.sort_by_key(|b| worldfs::luanti::index::pack(block_name_pos(b)));
    v
}

/// A radius-1 engine world in a temporary folder.
fn engine_world() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let world = dir.path().join("world");
    {
        let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
        mkworld(&world, 1);
    }
    (dir, world)
}

/// Replaces the stored bytes of one block behind the tree's back (another writer).
fn overwrite(map: &Path, pos: BlockPos, blob: Option<Vec<u8>>) {
    MapStore::open(map, false)
        .expect("another writer")
        .commit(&[(pos, blob)])
        .expect("the other writer commits");
}

#[test]
fn an_engine_world_answers_what_a_brute_force_walk_finds_players_included() {
    let (_dir, world) = engine_world();
    let map = world.join("map.sqlite");
    let tree = open(&world, false);
    let expected = brute_force(&tree, &map);
    assert!(
        expected.nodes.contains_key("default:chest"),
        "{:?}",
        expected.nodes.keys()
    );
    assert!(expected.fields.contains_key("infotext"));
    let got = shown(&tree);
    assert_eq!(got, expected);
    // The players' slots are lines too.
    let players = ls(&tree, &["players"]);
    assert!(!players.is_empty());
    let mut player_lines = 0;
    for item in ls(&tree, &["index", "items"]) {
        let text = tree.read(&p(&["index", "items", &item])).expect("read");
        for line in String::from_utf8_lossy(&text).lines() {
            if let Some(rest) = line.strip_prefix("players/") {
                let player = rest.split(' ').next().unwrap_or_default();
                let inv = tree.read(&p(&["players", player])).expect("player file");
                let name = names::unescape(&item).expect("item name");
                assert!(
                    inv.windows(name.len()).any(|w| w == name),
                    "{player} holds {item}"
                );
                player_lines += 1;
            }
        }
    }
    assert!(player_lines > 0, "no player inventory line");
}

#[test]
fn our_commits_update_the_answer_and_another_writers_are_seen_by_the_next_question() {
    let (_dir, world) = engine_world();
    let map = world.join("map.sqlite");
    let tree = open(&world, false);
    let chests = ls(&tree, &["index", "nodes", "default:chest"]);
    assert!(!chests.is_empty());
    let scans = tree.index().scans();

    // Our own commit: a block made all gold.
    let target = ls(&tree, &["blocks"])
        .into_iter()
        .find(|b| !chests.contains(b))
        .expect("a block without a chest");
    let target_pos = worldfs::luanti::tree::parse_block_name(&target).expect("a block name");
    tree.blocks()
        .modify(target_pos, |b| {
            b.names = vec!["default:goldblock".into()];
            b.content = vec![0; b.content.len()];
            b.metadata.clear();
            Ok(())
        })
        .expect("our commit");
    assert_eq!(
        ls(&tree, &["index", "nodes", "default:goldblock"]),
        vec![target.clone()]
    );
    assert_eq!(tree.index().scans(), scans, "our commit needed no scan");
    assert_eq!(shown(&tree), brute_force(&tree, &map));

    // Another writer: the chest block becomes all mese, and one block stops decoding.
    let chest_pos = worldfs::luanti::tree::parse_block_name(&chests[0]).expect("a block name");
    let mut block = decode_block(
        &MapStore::open(&map, true)
            .expect("reader")
            .get(chest_pos)
            .expect("get")
            .expect("stored"),
    )
    .expect("decodes");
    block.names = vec!["default:mese".into()];
    block.content = vec![0; block.content.len()];
    block.metadata.clear();
    overwrite(
        &map,
        chest_pos,
        Some(encode_block(&block).expect("encodes")),
    );
    let corrupt = worldfs::luanti::tree::parse_block_name(&target).expect("name");
    overwrite(&map, corrupt, Some(vec![29, 1, 2, 3]));
    std::thread::sleep(Duration::from_millis(60));
    assert!(ls(&tree, &["index", "nodes", "default:mese"]).contains(&chests[0]));
    let still = tree.stat(&p(&["index", "nodes", "default:chest", &chests[0]]));
    assert_eq!(still.err().map(|e| e.errno()), Some(libc::ENOENT));
    assert_eq!(ls(&tree, &["index", "broken"]), vec![target.clone()]);
    assert!(
        tree.index().scans() > scans,
        "the other writer's commit made a scan"
    );
    assert_eq!(shown(&tree), brute_force(&tree, &map));
}

/// Issue 13: a block that does not decode stays listed in `blocks/`, its folder shows
/// `error.txt` with the reason instead of the views, `rm -r` (unlink of its files, then
/// rmdir) deletes it, and the engine loads the world afterwards.
#[test]
fn a_block_that_does_not_decode_shows_its_error_and_rm_r_deletes_it() {
    broken_block_shows_its_error_and_rm_r_deletes_it(
        vec![29, 0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3],
        &["zstd", "frame"],
    );
}

/// A row longer than the read bound (another program wrote it; the mount refuses to write
/// one) is a broken block like any other: listed in `index/broken/` with the true reason,
/// its `error.txt` says it, and `rm -r` deletes it.
#[test]
fn a_block_too_large_to_read_is_broken_with_its_reason_and_rm_r_deletes_it() {
    broken_block_shows_its_error_and_rm_r_deletes_it(
        vec![29; worldfs::luanti::codec::MAX_STORED + 1],
        &["at most 8388608 bytes are read"],
    );
}

/// Stores `blob` at block 0,0,0 of an engine world behind the tree's back; the tree shows it
/// broken, its `error.txt` holding one of `reason_has`, and `rm -r` deletes it.
fn broken_block_shows_its_error_and_rm_r_deletes_it(blob: Vec<u8>, reason_has: &[&str]) {
    let (_dir, world) = engine_world();
    let map = world.join("map.sqlite");
    let victim = BlockPos { x: 0, y: 0, z: 0 };
    let name = block_name(victim);
    overwrite(&map, victim, Some(blob));
    // `worldfs check` gives the same reason.
    let mut report = Vec::new();
    worldfs::luanti::inspect::check(&world, &mut report).expect("check runs");
    let report = String::from_utf8(report).expect("utf-8");
    assert!(
        report.contains(&format!("broken block {name}: ")),
        "{report}"
    );
    assert!(reason_has.iter().any(|r| report.contains(r)), "{report}");
    {
        let tree = open(&world, false);
        tree.write_back(worldfs::luanti::store::write_back::WINDOW)
            .expect("write-back, as a mount does");
        assert!(ls(&tree, &["blocks"]).contains(&name));
        assert_eq!(ls(&tree, &["index", "broken"]), vec![name.clone()]);
        assert_eq!(ls(&tree, &["blocks", &name]), vec!["error.txt".to_string()]);
        let reason = tree
            .read(&p(&["blocks", &name, "error.txt"]))
            .expect("error.txt");
        let reason = String::from_utf8(reason.to_vec()).expect("utf-8");
        assert!(reason_has.iter().any(|r| reason.contains(r)), "{reason}");
        assert_eq!(
            tree.stat(&p(&["blocks", &name, "error.txt"]))
                .expect("stat")
                .size,
            reason.len() as u64
        );
        let follow = link(&tree, &["index", "broken", &name]);
        assert_eq!(follow, format!("../../blocks/{name}"));
        let folder = tree.stat(&p(&["index", "broken"])).expect("stat");
        assert!(folder.volatile, "index/ depends on the whole map");
        // rm -r: every listed file is unlinked, then the folder.
        for f in ls(&tree, &["blocks", &name]) {
            tree.remove(&p(&["blocks", &name, &f])).expect("unlink");
        }
        tree.rmdir(&p(&["blocks", &name])).expect("rmdir");
        assert!(!ls(&tree, &["blocks"]).contains(&name));
        assert!(ls(&tree, &["index", "broken"]).is_empty());
        // The kernel opens folders itself and keeps their listings until their mtime
        // changes: a folder whose answer changed shows a new one.
        let after = tree.stat(&p(&["index", "broken"])).expect("stat");
        assert_ne!(after.mtime, folder.mtime, "index/broken changed");
        assert!(after.volatile);
    }
    assert!(MapStore::open(&map, true)
        .expect("reader")
        .get(victim)
        .expect("get")
        .is_none());
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let out = common::engine::probe(&world, "0,0,0", "15,15,15", "0,0,0");
    assert!(!out.contains("PROBE FAILED"), "{out}");
}

/// Issue 13: a folder named `index` in the world folder is hidden while mounted (the view
/// wins, as for `blocks/`), and stays untouched on disk.
#[test]
fn the_index_view_wins_over_a_world_folder_named_index_and_is_never_listed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let world = scratch::copy_into(
        &samples::root().join("luanti").join(
            std::fs::read_dir(samples::root().join("luanti"))
                .expect("samples")
                .filter_map(|e| e.ok())
                .find(|e| e.path().join("map.sqlite").is_file())
                .expect("a sample world folder")
                .file_name(),
        ),
        dir.path(),
    );
    std::fs::create_dir(world.join("index")).expect("mkdir");
    std::fs::write(world.join("index/mine.txt"), b"mine\n").expect("write");
    let tree = open(&world, false);
    // index/ is reached by name, never listed: a backup of the mount does not walk it (nor
    // the world's own folder of that name, which the view hides).
    assert!(!ls(&tree, &[]).iter().any(|n| n == "index"));
    assert_eq!(tree.stat(&p(&["index"])).expect("index/").kind, Kind::Dir);
    assert_eq!(
        ls(&tree, &["index"]),
        ["broken", "fields", "items", "nodes", "objects"]
    );
    assert!(tree.stat(&p(&["index", "mine.txt"])).is_err());
    assert_eq!(
        std::fs::read(world.join("index/mine.txt")).expect("kept"),
        b"mine\n"
    );
}

/// Every stored block's bytes, by position.
fn all_blobs(map: &Path) -> BTreeMap<BlockPos, Vec<u8>> {
    read_blocks(map)
        .into_iter()
        .map(|(key, blob)| (block_pos(key), blob))
        .collect()
}

fn rename(tree: &LuantiTree, from: &[&str], to: &[&str]) -> worldfs::error::Result<()> {
    tree.rename(&p(from), &p(to))
}

/// Issue 13: `mv index/nodes/A index/nodes/B` replaces A by B in every block holding it
/// (param2 and light kept, merged where the block already holds B), in one commit; other
/// blocks keep their bytes; the engine sees B everywhere A was; a bad name changes nothing.
#[test]
fn renaming_a_node_replaces_it_everywhere_and_the_engine_sees_it() {
    let (_dir, world) = engine_world();
    let map = world.join("map.sqlite");
    let tree = open(&world, false);
    tree.write_back(worldfs::luanti::store::write_back::WINDOW)
        .expect("write-back, as a mount does");
    let a = "default:chest";
    let chests = ls(&tree, &["index", "nodes", a]);
    assert!(!chests.is_empty());
    let before = all_blobs(&map);
    // B: another node a chest block holds, so the ids merge.
    let first = decode_block(&before[&block_name_pos(&chests[0])]).expect("decodes");
    let b = used_names(&first)
        .into_iter()
        .find(|n| n != a && n != "air")
        .expect("another node beside the chest");

    // Bad names change nothing.
    for bad in ["", "two words", "default:chest:x", ":lead", "a/b"] {
        let err = rename(&tree, &["index", "nodes", a], &["index", "nodes", bad]);
        assert_eq!(err.err().map(|e| e.errno()), Some(libc::EINVAL), "{bad:?}");
    }
    assert_eq!(all_blobs(&map), before, "a bad name changed the map");

    rename(&tree, &["index", "nodes", a], &["index", "nodes", &b]).expect("rename");
    let after = all_blobs(&map);
    assert_eq!(after.len(), before.len());
    let mut want_counts: BTreeMap<String, usize> = BTreeMap::new();
    for (pos, old) in &before {
        let new = &after[pos];
        let was = decode_block(old).expect("decodes");
        if !used_names(&was).contains(&a.to_string()) {
            assert_eq!(new, old, "block {pos:?} without {a} kept its bytes");
        } else {
            let now = decode_block(new).expect("decodes");
            assert_eq!(now.param2, was.param2);
            assert_eq!(now.param1, was.param1);
            assert_eq!(now.metadata, was.metadata);
            for i in 0..was.content.len() {
                let old_name = &was.names[usize::from(was.content[i])];
                let new_name = &now.names[usize::from(now.content[i])];
                let want = if old_name == a { &b } else { old_name };
                assert_eq!(new_name, want, "node {i} of {pos:?}");
            }
            let unique: BTreeSet<&String> = now.names.iter().collect();
            assert_eq!(unique.len(), now.names.len(), "ids merged");
        }
        if (-2..=1).contains(&pos.x) && (-2..=1).contains(&pos.y) && (-2..=1).contains(&pos.z) {
            let now = decode_block(new).expect("decodes");
            for &c in &now.content {
                *want_counts
                    .entry(now.names[usize::from(c)].clone())
                    .or_default() += 1;
            }
        }
    }
    assert!(ls(&tree, &["index", "nodes"]).iter().all(|n| n != a));
    assert_eq!(shown(&tree), brute_force(&tree, &map));
    drop(tree);

    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let out = common::engine::probe(&world, "-32,-32,-32", "31,31,31", "0,0,0");
    let got: BTreeMap<String, usize> = out
        .lines()
        .filter_map(|l| l.strip_prefix("count "))
        .filter_map(|l| {
            let (name, n) = l.rsplit_once(' ')?;
            Some((name.to_string(), n.parse().ok()?))
        })
        .collect();
    assert!(want_counts.contains_key(&b), "the probed area holds {b}");
    assert!(!got.contains_key(a), "the engine still sees {a}: {out}");
    assert_eq!(got.get(&b), want_counts.get(&b), "{out}");
}

fn block_name_pos(name: &str) -> BlockPos {
    worldfs::luanti::tree::parse_block_name(name).expect("a block name")
}

fn lines_of(tree: &LuantiTree, item: &str) -> BTreeSet<String> {
    match tree.read(&p(&["index", "items", item])) {
        Ok(text) => String::from_utf8_lossy(&text)
            .lines()
            .map(String::from)
            .collect(),
        Err(_) => BTreeSet::new(),
    }
}

/// Issue 13: `mv index/items/A index/items/B` replaces A by B in every node inventory and
/// every player inventory, counts kept (the slots of A are now slots of B).
#[test]
fn renaming_an_item_replaces_it_in_node_and_player_inventories() {
    let (_dir, world) = engine_world();
    let tree = open(&world, false);
    // An item in a node inventory and one in a player's.
    let items = ls(&tree, &["index", "items"]);
    let in_player = items
        .iter()
        .find(|i| lines_of(&tree, i).iter().any(|l| l.starts_with("players/")))
        .expect("an item a player holds")
        .clone();
    let in_node = items
        .iter()
        .find(|i| lines_of(&tree, i).iter().any(|l| l.starts_with("blocks/")))
        .expect("an item a node inventory holds")
        .clone();
    // Item files are answers: read-only, writing one fails with EPERM and changes nothing.
    let item = p(&["index", "items", &in_node]);
    assert_eq!(tree.stat(&item).expect("stat").perm, 0o444);
    let err = tree.write(&item, b"x\n").err().map(|e| e.errno());
    assert_eq!(err, Some(libc::EPERM));
    let b = "test:renamed";
    for a in [&in_player, &in_node] {
        let mut want = lines_of(&tree, a);
        want.extend(lines_of(&tree, b));
        rename(&tree, &["index", "items", a], &["index", "items", b]).expect("rename");
        assert!(lines_of(&tree, a).is_empty(), "{a} is gone");
        assert_eq!(lines_of(&tree, b), want);
    }
    let err = rename(
        &tree,
        &["index", "items", b],
        &["index", "items", "no good"],
    );
    assert_eq!(err.err().map(|e| e.errno()), Some(libc::EINVAL));
    // The players' files name the new item.
    let player = lines_of(&tree, b)
        .into_iter()
        .find_map(|l| {
            l.strip_prefix("players/")
                .map(|r| r.split(' ').next().unwrap_or_default().to_string())
        })
        .expect("a player line");
    let text = tree.read(&p(&["players", &player])).expect("player file");
    assert!(String::from_utf8_lossy(&text).contains(b));
    // Reopened: what was committed.
    drop(tree);
    let tree = open(&world, false);
    assert!(lines_of(&tree, &in_player).is_empty());
    assert!(!lines_of(&tree, b).is_empty());
}
