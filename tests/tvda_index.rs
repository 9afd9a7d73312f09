//! Issue 13, the `index/` tree of a Terrarum TVDA disk: on every TVDA sample disk (and on
//! disks with many chunks, actors and inventories made here) the answers equal what a
//! brute-force walk over the mount's chunk and inventory files finds; renames change every
//! entry holding the name and the stored bytes of nothing else, in one commit, and a bad
//! name changes nothing; our own commits update the answer without a scan; another
//! writer's change is seen by the next question.

#[allow(dead_code)]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::samples;
use common::scratch::state_dir;

use worldfs::names;
use worldfs::tvda::codec::chunk::{
    chunk_entry_id, decode_chunk, encode_chunk, parse_chunk_entry_id, Layer, Tile, CHUNK_TILES,
};
use worldfs::tvda::codec::compress::Codec;
use worldfs::tvda::codec::tvda::{Content, Header};
use worldfs::tvda::store::tvda::{Change, Disk};
use worldfs::tvda::tree::TvdaTree;
use worldfs::tvda::views::chunk::{parse_chunk, World};
use worldfs::tvda::views::inventory::{item_pairs, parse_inventory, rename_item};
use worldfs::vfs::tree::Options;
use worldfs::vfs::{Kind, Tree};

fn open(path: &Path, read_only: bool) -> TvdaTree {
    state_dir();
    TvdaTree::open(
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
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

/// The names of a folder, listed in pages of at most 3 entries, each resumed after the last
/// cookie (cookies must grow).
fn ls(t: &TvdaTree, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let mut page = Vec::new();
        t.list(&p(dir), after, &mut |e| {
            page.push(e);
            page.len() < 3
        })
        .unwrap_or_else(|e| panic!("listing {dir}: {e}"));
        let Some(last) = page.last() else { break };
        assert!(last.cookie > after, "cookies grow in {dir}");
        after = last.cookie;
        out.extend(page.into_iter().map(|e| e.name));
    }
    out
}

fn text(t: &TvdaTree, path: &str) -> String {
    String::from_utf8(t.read(&p(path)).unwrap().to_vec()).unwrap()
}

const NOW: u64 = 1_700_000_000;

/// Tiles of chunk `seed`: a few tile numbers, one of them unnamed in the map (77), in
/// stripes that differ per chunk, with the layer's meta.
fn tiles(layer: Layer, seed: usize) -> Vec<Tile> {
    let numbers = [0u16, 1, 2, 3, 77, 65535];
    (0..CHUNK_TILES)
        .map(|i| Tile {
            number: numbers[(i / 900 + seed) % (2 + seed % 5)],
            meta: match layer {
                Layer::Terrain | Layer::Wall => 0,
                Layer::Ores => (i % 200) as u16,
                Layer::Fluid => 0x3C00,
            },
        })
        .collect()
}

/// A world disk of 4 × 3 chunks with chunks in every layer and codec, two actors with
/// inventories (one wrapped in `arrayList`) and one without.
fn world_disk(path: &Path) {
    let json = br#"{"genver":83886082,"width":360,"height":270,"tileNumberToNameMap":{"0":"basegame:0","1":"basegame:1","2":"basegame:2","3":"ores@basegame:1","4":"basegame:4","65535":"basegame:-2"},"comp":4,"actors":[268435456,268435457,268435458]}"#;
    let mut entries = vec![(-1, Content::File(json.to_vec()))];
    for (li, layer) in Layer::ALL.into_iter().enumerate() {
        for no in 0..12u32 {
            if (no as usize + li) % 3 == 0 {
                continue;
            }
            let codec = [Codec::Gzip, Codec::Zstd, Codec::Snappy][no as usize % 3];
            entries.push((
                chunk_entry_id(layer.index(), no).unwrap(),
                Content::File(encode_chunk(layer, codec, &tiles(layer, no as usize + li)).unwrap()),
            ));
        }
    }
    entries.push((
        0x1000_0000,
        Content::File(br#"{"genver":1,"class":"Chest","inventory":{"itemList":[{"itm":"basegame:1","qty":50},{"itm":"item@basegame:7","qty":2}],"quickSlot":[]}}"#.to_vec()),
    ));
    entries.push((
        0x1000_0001,
        Content::File(br#"{"genver":1,"class":"Chest","inventory":{"itemList":{"arrayList":[{"itm":"basegame:1","qty":3},{"itm":"wall@basegame:2","qty":9}]}}}"#.to_vec()),
    ));
    entries.push((
        0x1000_0002,
        Content::File(br#"{"genver":1,"class":"Torch"}"#.to_vec()),
    ));
    entries.push((-4, Content::File(b"basegame 0.5.2".to_vec())));
    Disk::create(path, Header::new("W", 2).unwrap(), &entries, NOW).unwrap();
}

/// A player disk with an inventory.
fn player_disk(path: &Path) {
    let json = br#"{"genver":83886082,"class":"net.torvald.terrarum.modulebasegame.gameactors.IngamePlayer","inventory":{"itemList":[{"itm":"basegame:1","qty":10},{"itm":"item@basegame:4","qty":1,"extra":"kept"}],"itemEquipped":[null,"item@basegame:4"],"quickSlot":[null,"basegame:1"]}}"#;
    Disk::create(
        path,
        Header::new("Alice", 1).unwrap(),
        &[
            (-1, Content::File(json.to_vec())),
            (-4, Content::File(b"basegame 0.5.2".to_vec())),
        ],
        NOW,
    )
    .unwrap();
}

/// Every TVDA sample disk (TEVD disks are file systems, not games: they have no index/).
fn sample_disks() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(samples::path(samples::TVDA))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|f| fs::read(f).is_ok_and(|b| b.len() > 46 && &b[..4] == b"TEVd" && b[46] == 254))
        .collect();
    out.sort();
    assert_eq!(out.len(), samples::TVDA_DISKS.len(), "{out:?}");
    out
}

/// What `index/` shows or a walk finds: tile name → link names, item → lines.
#[derive(Debug, Default, PartialEq)]
struct Answers {
    tiles: BTreeMap<String, BTreeSet<String>>,
    items: BTreeMap<String, BTreeSet<String>>,
}

/// The brute-force answers: every chunk file of `chunks/` parsed, every inventory (the
/// `inventory` file, each actor's JSON) read.
fn walk(t: &TvdaTree, path: &Path) -> Answers {
    let mut a = Answers::default();
    let top = ls(t, "");
    if top.iter().any(|n| n == "chunks") {
        let world = World::from_json(&Disk::open(path, false).unwrap().read(-1).unwrap()).unwrap();
        for layer in Layer::ALL {
            for file in ls(t, &format!("chunks/{}", layer.name())) {
                let body = t
                    .read(&p(&format!("chunks/{}/{file}", layer.name())))
                    .unwrap();
                for tile in parse_chunk(&body, layer, &world.names).unwrap() {
                    a.tiles
                        .entry(names::escape(world.names.name(tile.number).as_bytes()))
                        .or_default()
                        .insert(format!("{},{file}", layer.name()));
                }
            }
        }
    }
    if top.iter().any(|n| n == "inventory") {
        for (i, (item, qty)) in parse_inventory(text(t, "inventory").as_bytes())
            .unwrap()
            .into_iter()
            .enumerate()
        {
            a.items
                .entry(names::escape(item.as_bytes()))
                .or_default()
                .insert(format!("inventory itemList {} {qty}", i + 1));
        }
    }
    for actor in ls(t, "actors") {
        let json = t.read(&p(&format!("actors/{actor}"))).unwrap();
        for (i, (item, qty)) in item_pairs(&json)
            .unwrap()
            .unwrap_or_default()
            .into_iter()
            .enumerate()
        {
            a.items
                .entry(names::escape(item.as_bytes()))
                .or_default()
                .insert(format!("actors/{actor} itemList {} {qty}", i + 1));
        }
    }
    a
}

/// What `index/` shows, its links checked.
fn shown(t: &TvdaTree) -> Answers {
    let mut a = Answers::default();
    let folders = ls(t, "index");
    for name in if folders.iter().any(|f| f == "tiles") {
        ls(t, "index/tiles")
    } else {
        vec![]
    } {
        let links: BTreeSet<String> = ls(t, &format!("index/tiles/{name}")).into_iter().collect();
        for l in &links {
            let path = format!("index/tiles/{name}/{l}");
            let st = t.stat(&p(&path)).unwrap();
            assert_eq!(st.kind, Kind::Symlink);
            assert!(st.volatile);
            let target = String::from_utf8(t.readlink(&p(&path)).unwrap()).unwrap();
            let (layer, file) = l.split_once(',').unwrap();
            assert_eq!(target, format!("../../../chunks/{layer}/{file}"));
            assert_eq!(st.size, target.len() as u64);
        }
        a.tiles.insert(name, links);
    }
    for item in ls(t, "index/items") {
        let body = text(t, &format!("index/items/{item}"));
        assert_eq!(
            t.stat(&p(&format!("index/items/{item}"))).unwrap().size,
            body.len() as u64
        );
        assert_eq!(
            t.stat(&p(&format!("index/items/{item}"))).unwrap().perm,
            0o444
        );
        a.items
            .insert(item, body.lines().map(str::to_string).collect());
    }
    a
}

#[test]
fn every_disk_answers_what_a_walk_of_its_files_finds() {
    let dir = tempfile::tempdir().unwrap();
    let (world, player) = (dir.path().join("world"), dir.path().join("player"));
    world_disk(&world);
    player_disk(&player);
    let mut disks = sample_disks();
    disks.extend([world.clone(), player.clone()]);
    for d in disks {
        let t = open(&d, true);
        assert!(
            !ls(&t, "").iter().any(|n| n == "index"),
            "index/ is reached by name only"
        );
        let has_chunks = ls(&t, "").iter().any(|n| n == "chunks");
        let folders = ls(&t, "index");
        assert_eq!(
            folders.iter().any(|f| f == "tiles"),
            has_chunks,
            "{}",
            d.display()
        );
        let expected = walk(&t, &d);
        assert_eq!(shown(&t), expected, "{}", d.display());
        if has_chunks {
            assert!(!expected.tiles.is_empty());
        }
        if d == world || d == player {
            assert!(!expected.items.is_empty());
        }
    }
    // The made world holds an unnamed tile (77) and several layers per tile name.
    let t = open(&world, true);
    assert!(ls(&t, "index/tiles").contains(&"77".to_string()));
    assert!(ls(&t, "index/tiles/basegame:1")
        .iter()
        .any(|l| l.starts_with("wall,")));
}

/// Every entry's stored bytes.
fn entries(path: &Path) -> BTreeMap<i64, Vec<u8>> {
    let disk = Disk::open(path, false).unwrap();
    disk.entries()
        .filter(|e| e.id != 0)
        .map(|e| (e.id, disk.read(e.id).unwrap()))
        .collect()
}

fn errno(r: worldfs::error::Result<()>) -> i32 {
    r.expect_err("refused").errno()
}

#[test]
fn a_tile_rename_changes_every_chunk_holding_it_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world");
    world_disk(&path);
    let t = open(&path, false);
    let holders: BTreeSet<String> = ls(&t, "index/tiles/basegame:2").into_iter().collect();
    assert!(holders.len() > 3);
    let before = entries(&path);
    let file_before = fs::read(&path).unwrap();

    // A name of the map or a tile number (as in a chunk file), else EINVAL.
    for bad in ["basegame:nope", "05", "%2F"] {
        assert_eq!(
            errno(t.rename(
                &p("index/tiles/basegame:2"),
                &p(&format!("index/tiles/{bad}"))
            )),
            libc::EINVAL,
            "{bad}"
        );
    }
    assert_eq!(
        errno(t.rename(&p("index/tiles/basegame:2"), &p("index/items/basegame:4"))),
        libc::EXDEV
    );
    assert_eq!(
        errno(t.write(&p("index/items/basegame:1"), b"x")),
        libc::EPERM
    );
    assert_eq!(
        fs::read(&path).unwrap(),
        file_before,
        "a refused rename wrote"
    );

    // Onto a name the map holds but no chunk uses.
    t.rename(&p("index/tiles/basegame:2"), &p("index/tiles/basegame:4"))
        .unwrap();
    let after = entries(&path);
    assert_eq!(before.len(), after.len());
    for (id, stored) in &before {
        match parse_chunk_entry_id(*id) {
            Some((li, _)) => {
                let layer = Layer::from_index(li).unwrap();
                let (codec, old) = decode_chunk(layer, stored).unwrap();
                let (new_codec, new) = decode_chunk(layer, &after[id]).unwrap();
                let expect: Vec<Tile> = old
                    .iter()
                    .map(|t| Tile {
                        number: if t.number == 2 { 4 } else { t.number },
                        ..*t
                    })
                    .collect();
                assert!(new == expect, "chunk entry {id:#x}");
                if old == new {
                    assert!(
                        &after[id] == stored,
                        "chunk entry {id:#x} without the tile changed"
                    );
                } else {
                    assert_eq!(codec, new_codec, "the codec is kept");
                }
            }
            None => assert!(&after[id] == stored, "entry {id} changed"),
        }
    }
    assert!(t.stat(&p("index/tiles/basegame:2")).is_err());
    let now: BTreeSet<String> = ls(&t, "index/tiles/basegame:4").into_iter().collect();
    assert_eq!(now, holders);
    assert_eq!(shown(&t), walk(&t, &path));
    assert_eq!(t.index().scans(), 2, "tiles and items scanned once each");

    // `mv A B` onto an existing folder B asks for B/A: the same rename, merging.
    let ones: BTreeSet<String> = ls(&t, "index/tiles/basegame:1").into_iter().collect();
    t.rename(
        &p("index/tiles/basegame:4"),
        &p("index/tiles/basegame:1/basegame:4"),
    )
    .unwrap();
    let merged: BTreeSet<String> = ls(&t, "index/tiles/basegame:1").into_iter().collect();
    assert_eq!(merged, ones.union(&now).cloned().collect());
    assert_eq!(shown(&t), walk(&t, &path));
}

#[test]
fn an_item_rename_changes_every_inventory_holding_it_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    for (path, make) in [
        (dir.path().join("world"), world_disk as fn(&Path)),
        (dir.path().join("player"), player_disk),
    ] {
        make(&path);
        let t = open(&path, false);
        let before = entries(&path);
        let file_before = fs::read(&path).unwrap();
        for bad in ["a%20b", "%23x", "%", "a%0Ab"] {
            assert_eq!(
                errno(t.rename(
                    &p("index/items/basegame:1"),
                    &p(&format!("index/items/{bad}"))
                )),
                libc::EINVAL,
                "{bad}"
            );
        }
        assert_eq!(
            fs::read(&path).unwrap(),
            file_before,
            "a refused rename wrote"
        );
        let lines = text(&t, "index/items/basegame:1").lines().count();
        assert!(lines >= 1);
        t.rename(&p("index/items/basegame:1"), &p("index/items/mod:x"))
            .unwrap();
        let after = entries(&path);
        let mut renamed = 0;
        for (id, stored) in &before {
            match rename_item(stored, "basegame:1", "mod:x") {
                Ok(Some(expect)) if *id == -1 || *id >= 0x1000_0000 => {
                    assert_eq!(after[id], expect, "entry {id}");
                    renamed += 1;
                }
                _ => assert!(&after[id] == stored, "entry {id} changed"),
            }
        }
        assert_eq!(renamed, lines);
        assert!(t.stat(&p("index/items/basegame:1")).is_err());
        assert_eq!(shown(&t), walk(&t, &path));
    }
    // Onto an item an inventory holds: the quantities add up, the references follow.
    let path = dir.path().join("player2");
    player_disk(&path);
    let t = open(&path, false);
    t.rename(
        &p("index/items/item@basegame:4"),
        &p("index/items/basegame:1"),
    )
    .unwrap();
    assert_eq!(text(&t, "inventory").lines().last(), Some("basegame:1 11"));
    assert_eq!(
        text(&t, "index/items/basegame:1"),
        "inventory itemList 1 11\n"
    );
    let json: serde_json::Value = serde_json::from_str(&text(&t, "savegameinfo.json")).unwrap();
    assert_eq!(
        json["inventory"]["itemEquipped"],
        serde_json::json!([null, "basegame:1"])
    );
}

#[test]
fn our_own_commits_update_the_answer_and_another_writers_are_seen_by_the_next_question() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world");
    world_disk(&path);
    let t = open(&path, false);
    assert!(!ls(&t, "index/tiles").contains(&"basegame:4".to_string()));
    assert_eq!(t.index().scans(), 1);
    // An edit through the mount puts tile basegame:4 in a chunk.
    let file = ls(&t, "chunks/terrain")[0].clone();
    let body = text(&t, &format!("chunks/terrain/{file}"));
    let edited = body.replacen("basegame:0", "basegame:4", 1);
    assert_ne!(body, edited);
    t.write(&p(&format!("chunks/terrain/{file}")), edited.as_bytes())
        .unwrap();
    assert_eq!(
        ls(&t, "index/tiles/basegame:4"),
        vec![format!("terrain,{file}")],
        "our own commit shows"
    );
    // So does an inventory edit (the actor's JSON), without a scan of items.
    let items_before = ls(&t, "index/items");
    assert_eq!(t.index().scans(), 2);
    let actor = text(&t, "actors/268435456.json").replace("item@basegame:7", "item@basegame:8");
    t.write(&p("actors/268435456.json"), actor.as_bytes())
        .unwrap();
    let items_after = ls(&t, "index/items");
    assert!(items_after.contains(&"item@basegame:8".to_string()));
    assert!(!items_after.contains(&"item@basegame:7".to_string()));
    assert_ne!(items_before, items_after);
    assert_eq!(t.index().scans(), 2, "our own commits need no scan");

    // Another program appends a chunk holding tile basegame:-2 only.
    {
        let mut other = Disk::open(&path, true).unwrap();
        let id = chunk_entry_id(0, 0).unwrap();
        let tiles = vec![
            Tile {
                number: 65535,
                meta: 0
            };
            CHUNK_TILES
        ];
        other
            .commit(
                &[Change::Put {
                    id,
                    data: encode_chunk(Layer::Terrain, Codec::Zstd, &tiles).unwrap(),
                }],
                NOW + 5,
            )
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(ls(&t, "index/tiles/basegame:-2").contains(&"terrain,0,0.cubeset".to_string()));
    assert!(t.index().scans() > 2, "the next question scanned again");
    assert_eq!(shown(&t), walk(&t, &path));
}

/// Another program gives a chunk tile A just before `mv index/tiles/A B`, before worldfs
/// would notice by itself (within the refresh interval): the rename sees it when it locks
/// the disk, asks its question again and renames that chunk too, so no chunk holds A after
/// a rename reported done.
#[test]
fn a_rename_also_takes_a_chunk_another_program_just_gave_the_tile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("world");
    world_disk(&path);
    let t = open(&path, false);
    let id = chunk_entry_id(0, 0).unwrap();
    assert!(!ls(&t, "index/tiles/basegame:-2").contains(&"terrain,0,0.cubeset".to_string()));
    {
        let mut other = Disk::open(&path, true).unwrap();
        let tiles = vec![
            Tile {
                number: 65535,
                meta: 0
            };
            CHUNK_TILES
        ];
        other
            .commit(
                &[Change::Put {
                    id,
                    data: encode_chunk(Layer::Terrain, Codec::Zstd, &tiles).unwrap(),
                }],
                NOW + 5,
            )
            .unwrap();
    }
    t.rename(&p("index/tiles/basegame:-2"), &p("index/tiles/basegame:4"))
        .unwrap();
    let still: Vec<i64> = entries(&path)
        .into_iter()
        .filter(|(e, _)| parse_chunk_entry_id(*e).is_some())
        .filter(|(e, data)| {
            let (li, _) = parse_chunk_entry_id(*e).unwrap();
            decode_chunk(Layer::from_index(li).unwrap(), data)
                .unwrap()
                .1
                .iter()
                .any(|t| t.number == 65535)
        })
        .map(|(e, _)| e)
        .collect();
    assert!(
        still.is_empty(),
        "chunk entries still holding the tile: {still:?}"
    );
}
