//! The TVDA and TEVD trees through the `Tree` contract (no kernel): every sample lists and
//! reads as the spec says, reading leaves each file byte-identical, edits commit one entry
//! and re-read the same, bad input changes nothing.

#[allow(dead_code)]
mod common;

use common::samples::{self, TEVD_V2, TEVD_V3, TEVD_V3_OLD, TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD};
use common::scratch::state_dir;

use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use worldfs::tvda::codec::chunk::{chunk_entry_id, encode_chunk, Layer, Tile, CHUNK_TILES};
use worldfs::tvda::codec::compress::{compress, Codec};
use worldfs::tvda::codec::tvda::{Content, Header};
use worldfs::tvda::store::tvda::Disk;
use worldfs::tvda::tree::tevd::TevdTree;
use worldfs::tvda::tree::TvdaTree;
use worldfs::vfs::tree::Options;
use worldfs::vfs::{Kind, NewFile, Tree};

/// One state folder (mtime records) for every test of this process.
struct Copy {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn copy_of(src: &Path) -> Copy {
    let dir = tempfile::tempdir().unwrap();
    state_dir();
    let path = dir.path().join("disk");
    std::fs::copy(src, &path).unwrap();
    Copy { _dir: dir, path }
}

fn open(path: &Path) -> TvdaTree {
    TvdaTree::open(
        path,
        &Options {
            read_only: false,
            cache_bytes: 1 << 20,
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

fn names(tree: &dyn Tree, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    tree.list(&p(dir), 0, &mut |e| {
        out.push(e.name);
        true
    })
    .unwrap();
    out
}

fn text(tree: &dyn Tree, path: &str) -> String {
    String::from_utf8(tree.read(&p(path)).unwrap().to_vec()).unwrap()
}

/// Lists and reads every file below `dir`, checking sizes against content.
fn walk(tree: &dyn Tree, dir: &str, files: &mut Vec<String>) {
    for name in names(tree, dir) {
        let path = format!("{dir}/{name}");
        let stat = tree.stat(&p(&path)).unwrap();
        match stat.kind {
            Kind::Dir => walk(tree, &path, files),
            Kind::Symlink => panic!("{path}: TVDA trees show no links"),
            Kind::File => {
                assert_eq!(
                    tree.read(&p(&path)).unwrap().len() as u64,
                    stat.size,
                    "{path}"
                );
                files.push(path);
            }
        }
    }
}

#[test]
fn samples_show_the_spec_tree_and_stay_identical() {
    for (name, want) in [
        (
            TVDA_CLEAN,
            vec![
                "/entries/-1",
                "/entries/-4",
                "/header.txt",
                "/loadOrder.txt",
                "/savegameinfo.json",
            ],
        ),
        (
            TVDA_DIRTY,
            vec!["/entries/-1", "/header.txt", "/savegameinfo.json"],
        ),
        (
            TVDA_WORLD,
            vec![
                "/chunks/fluid/0,0.cubeset",
                "/chunks/ores/0,0.cubeset",
                "/chunks/terrain/0,0.cubeset",
                "/chunks/terrain/1,1.cubeset",
                "/chunks/wall/0,0.cubeset",
                "/entries/-1",
                "/entries/-4",
                "/entries/4294967296",
                "/entries/4294967299",
                "/entries/4311744512",
                "/entries/4328521728",
                "/entries/4345298944",
                "/header.txt",
                "/loadOrder.txt",
                "/savegameinfo.json",
            ],
        ),
    ] {
        let c = copy_of(&samples::path(name));
        let before = std::fs::read(&c.path).unwrap();
        let tree = open(&c.path);
        let mut files = Vec::new();
        walk(&tree, "", &mut files);
        files.sort();
        assert_eq!(files, want, "{name}");
        let info = text(&tree, "savegameinfo.json");
        assert!(info.starts_with("{\n  \"genver\": "), "{info}");
        // Saving every file unchanged commits nothing.
        for f in &files {
            let data = tree.read(&p(f)).unwrap();
            tree.write(&p(f), &data).unwrap();
        }
        drop(tree);
        assert_eq!(std::fs::read(&c.path).unwrap(), before, "{name}");
    }
}

#[test]
fn dirty_sample_last_wins_and_discarded_is_absent() {
    let c = copy_of(&samples::path(TVDA_DIRTY));
    let tree = open(&c.path);
    assert!(text(&tree, "savegameinfo.json").contains("\"genver\": 2"));
    assert!(tree.stat(&p("loadOrder.txt")).is_err());
    assert!(tree.stat(&p("entries/-4")).is_err());
    assert_eq!(
        tree.stat(&p("entries/-1")).unwrap().mtime,
        UNIX_EPOCH + Duration::from_secs(1_700_000_060)
    );
    assert!(
        tree.stat(&p("chunks")).is_err(),
        "player disks have no chunks"
    );
}

#[test]
fn edits_commit_one_entry_and_bad_input_changes_nothing() {
    let c = copy_of(&samples::path(TVDA_WORLD));
    let tree = open(&c.path);
    let json = text(&tree, "savegameinfo.json");
    let chunk = text(&tree, "chunks/terrain/0,0.cubeset");
    let before = std::fs::read(&c.path).unwrap();
    // Invalid JSON, a world JSON without its tile map, an unknown tile name, a truncated
    // chunk: each fails and leaves the disk as it was.
    for (path, bad) in [
        ("savegameinfo.json", "{\"genver\": 1,".to_string()),
        ("savegameinfo.json", "{\"genver\": 1}".to_string()),
        (
            "chunks/terrain/0,0.cubeset",
            chunk.replacen(": basegame:0:", ": basegame:nope:", 1),
        ),
        (
            "chunks/terrain/0,0.cubeset",
            chunk[..chunk.len() / 2].to_string(),
        ),
    ] {
        let e = tree.write(&p(path), bad.as_bytes()).unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL, "{path}: {e}");
        assert_eq!(std::fs::read(&c.path).unwrap(), before, "{path}");
    }
    // A real edit appends one entry.
    let edited = json.replacen("\"genver\": ", "\"genver\": 9", 1);
    tree.write(&p("savegameinfo.json"), edited.as_bytes())
        .unwrap();
    let after = std::fs::read(&c.path).unwrap();
    assert!(after.len() > before.len());
    assert_eq!(text(&tree, "savegameinfo.json"), edited);
    let a = tree.stat(&p("savegameinfo.json")).unwrap().mtime;
    assert!(a > UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    // A chunk edit keeps the chunk's codec and shows the new tile.
    let new_chunk = chunk.replacen(": basegame:0:", ": basegame:1:", 1);
    assert_ne!(new_chunk, chunk);
    tree.write(&p("chunks/terrain/0,0.cubeset"), new_chunk.as_bytes())
        .unwrap();
    drop(tree);
    let disk = Disk::open(&c.path, false).unwrap();
    let report = disk.check().unwrap();
    assert!(
        report.bad_entry_crcs.is_empty() && report.disk_crc_ok,
        "{report:?}"
    );
    let stored = disk.read(chunk_entry_id(0, 0).unwrap()).unwrap();
    assert_eq!(Codec::detect(&stored), Some(Codec::Zstd));
    let tree = open(&c.path);
    assert_eq!(text(&tree, "chunks/terrain/0,0.cubeset"), new_chunk);
    assert_eq!(text(&tree, "savegameinfo.json"), edited);
}

fn fixture_world(path: &Path) {
    let json = br#"{"genver":1,"width":180,"height":90,"tileNumberToNameMap":{"0":"basegame:0","1":"basegame:1"},"comp":4}"#;
    let tiles = vec![Tile { number: 1, meta: 0 }; CHUNK_TILES];
    Disk::create(
        path,
        Header::new("W", 2).unwrap(),
        &[
            (-1, Content::File(json.to_vec())),
            (
                chunk_entry_id(1, 1).unwrap(),
                Content::File(encode_chunk(Layer::Wall, Codec::Gzip, &tiles).unwrap()),
            ),
            (
                0x1000_0001,
                Content::File(br#"{"genver":1,"class":"A"}"#.to_vec()),
            ),
            (-2, Content::File(compress(Codec::Gzip, b"TGA").unwrap())),
        ],
        1_700_000_000,
    )
    .unwrap();
}

#[test]
fn objects_are_created_removed_and_renamed() {
    let dir = tempfile::tempdir().unwrap();
    state_dir();
    let path = dir.path().join("w");
    fixture_world(&path);
    let tree = open(&path);
    assert_eq!(names(&tree, "chunks/wall"), ["1,0.cubeset"]);
    assert_eq!(text(&tree, "thumbnail.tga"), "TGA");
    assert_eq!(
        tree.classify(&p("chunks/terrain"), "0,0.cubeset").unwrap(),
        NewFile::Object
    );
    assert_eq!(
        tree.classify(&p("chunks/terrain"), "5,0.cubeset").unwrap(),
        NewFile::Scratch,
        "outside the world"
    );
    assert_eq!(
        tree.classify(&p("entries"), "4913").unwrap(),
        NewFile::Scratch
    );
    assert_eq!(
        tree.classify(&p(""), "loadOrder.txt").unwrap(),
        NewFile::Object
    );
    // A new chunk from a copied text uses the world's codec (Snappy, comp 4).
    let wall = tree.read(&p("chunks/wall/1,0.cubeset")).unwrap();
    tree.write(&p("chunks/terrain/0,0.cubeset"), &wall).unwrap();
    assert_eq!(names(&tree, "chunks/terrain"), ["0,0.cubeset"]);
    let stored = tree
        .read(&p(&format!("entries/{}", chunk_entry_id(0, 0).unwrap())))
        .unwrap();
    assert_eq!(Codec::detect(&stored), Some(Codec::Snappy));
    // The image is stored gzip-compressed again.
    tree.write(&p("thumbnail.tga"), b"TGA2").unwrap();
    assert_eq!(text(&tree, "thumbnail.tga"), "TGA2");
    assert_eq!(tree.read(&p("entries/-2")).unwrap()[..2], [0x1F, 0x8B]);
    // Actors: rename to another ID, remove.
    tree.rename(&p("actors/268435457.json"), &p("actors/268435458.json"))
        .unwrap();
    assert_eq!(names(&tree, "actors"), ["268435458.json"]);
    assert_eq!(
        tree.rename(&p("actors/268435458.json"), &p("entries/5"))
            .unwrap_err()
            .errno(),
        libc::EXDEV
    );
    tree.remove(&p("actors/268435458.json")).unwrap();
    assert!(names(&tree, "actors").is_empty());
    tree.rmdir(&p("actors")).unwrap();
    assert_eq!(tree.mkdir(&p("x")).unwrap_err().errno(), libc::EPERM);
    // Raw entries.
    tree.write(&p("entries/77"), b"raw").unwrap();
    assert_eq!(text(&tree, "entries/77"), "raw");
    let t = UNIX_EPOCH + Duration::from_secs(1_234_567_890);
    tree.set_mtime(&p("entries/77"), t).unwrap();
    assert_eq!(tree.stat(&p("entries/77")).unwrap().mtime, t);
    drop(tree);
    let disk = Disk::open(&path, false).unwrap();
    let report = disk.check().unwrap();
    assert!(
        report.bad_entry_crcs.is_empty() && report.disk_crc_ok,
        "{report:?}"
    );
    let tree = open(&path);
    assert_eq!(
        tree.stat(&p("entries/77")).unwrap().mtime,
        t,
        "recorded across remounts"
    );
}

#[test]
fn player_inventory_edits_the_item_list() {
    let dir = tempfile::tempdir().unwrap();
    state_dir();
    let path = dir.path().join("p");
    let json = br#"{"genver":1,"inventory":{"itemList":[{"itm":"basegame:1","qty":10}]}}"#;
    Disk::create(
        &path,
        Header::new("Bob", 1).unwrap(),
        &[(-1, Content::File(json.to_vec()))],
        1_700_000_000,
    )
    .unwrap();
    let tree = open(&path);
    assert!(names(&tree, "").contains(&"inventory".to_string()));
    let inv = text(&tree, "inventory");
    assert!(inv.contains("basegame:1 10\n"), "{inv}");
    tree.write(&p("inventory"), b"basegame:2 5\nbasegame:1 3\n")
        .unwrap();
    let info = text(&tree, "savegameinfo.json");
    assert!(info.contains("\"basegame:2\""), "{info}");
    assert!(tree.write(&p("inventory"), b"basegame:2 lots\n").is_err());
    assert_eq!(
        text(&tree, "inventory")
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>(),
        ["basegame:1 3", "basegame:2 5"]
    );
}

/// Every file of `tree` and its content.
fn files_of(tree: &dyn Tree) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    walk(tree, "", &mut files);
    files.sort();
    files
        .into_iter()
        .map(|f| {
            let data = tree.read(&p(&f)).unwrap().to_vec();
            (f, data)
        })
        .collect()
}

#[test]
fn header_txt_shows_the_header_and_commits_only_a_change() {
    let c = copy_of(&samples::path(TVDA_WORLD));
    let before = std::fs::read(&c.path).unwrap();
    let tree = open(&c.path);
    let header = text(&tree, "header.txt");
    assert!(header.contains("\nkind = world"), "{header}");
    assert!(names(&tree, "").contains(&"header.txt".to_string()));
    assert_eq!(tree.classify(&[], "header.txt").unwrap(), NewFile::Object);
    let files = files_of(&tree);
    // The same text, a bad one, a kind change, a removal: nothing is written.
    tree.write(&p("header.txt"), header.as_bytes()).unwrap();
    let bad = header.replace("origin = 0", "origin = x");
    let err = tree.write(&p("header.txt"), bad.as_bytes()).unwrap_err();
    assert!(
        err.message().contains("line 5, column 10"),
        "{}",
        err.message()
    );
    let player = header.replace("kind = world", "kind = player");
    let err = tree.check(&p("header.txt"), player.as_bytes()).unwrap_err();
    assert!(err.message().contains("cannot change"), "{}", err.message());
    assert!(tree.write(&p("header.txt"), player.as_bytes()).is_err());
    assert_eq!(
        tree.remove(&p("header.txt")).unwrap_err().errno(),
        libc::EPERM
    );
    assert_eq!(std::fs::read(&c.path).unwrap(), before);
    // A new name and origin are committed; every entry stays as it was.
    let renamed = header
        .lines()
        .map(|l| match l.split_once(" = ") {
            Some(("name", _)) => "name = \"Zoë's world\"".to_string(),
            Some(("origin", _)) => "origin = 16".to_string(),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    tree.write(&p("header.txt"), renamed.as_bytes()).unwrap();
    let shown = text(&tree, "header.txt");
    assert!(shown.contains("name = \"Zoë's world\""), "{shown}");
    drop(tree);
    let disk = Disk::open(&c.path, false).unwrap();
    assert_eq!(disk.header().name(), "Zoë's world");
    assert_eq!(disk.header().origin(), 16);
    let report = disk.check().unwrap();
    assert!(report.disk_crc_ok && report.bad_entry_crcs.is_empty());
    drop(disk);
    let tree = open(&c.path);
    let after: Vec<_> = files_of(&tree)
        .into_iter()
        .filter(|(f, _)| f != "/header.txt")
        .collect();
    let want: Vec<_> = files
        .into_iter()
        .filter(|(f, _)| f != "/header.txt")
        .collect();
    assert_eq!(after, want);
}

/// Writes `files` into `tree` in the order given, as a restore would; the failures.
fn restore(tree: &dyn Tree, files: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut failed = Vec::new();
    for (f, data) in files {
        if let Err(e) = tree.write(&p(f), data) {
            failed.push(format!("{f}: {}", e.message()));
        }
    }
    failed
}

#[test]
fn a_header_text_becomes_a_new_disk_and_a_restore_is_exact() {
    for name in [TVDA_CLEAN, TVDA_DIRTY, TVDA_WORLD] {
        let c = copy_of(&samples::path(name));
        let backup = files_of(&open(&c.path));
        let header = &backup.iter().find(|(f, _)| f == "/header.txt").unwrap().1;
        // Root files first (rsync's order), and every file in sorted path order, where
        // chunks come before the world JSON they need: refused with the reason, and a
        // second pass completes the restore.
        let mut root_first = backup.clone();
        root_first.sort_by_key(|(f, _)| (f.matches('/').count(), f.clone()));
        for (order, files) in [("root first", &root_first), ("sorted", &backup)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("new");
            std::fs::write(&path, header).unwrap();
            let read_only = TvdaTree::open(
                &path,
                &Options {
                    read_only: true,
                    cache_bytes: 1 << 20,
                },
            );
            assert!(read_only.is_err());
            assert_eq!(
                &std::fs::read(&path).unwrap(),
                header,
                "read-only open wrote"
            );
            let tree = open(&path);
            assert_eq!(&*tree.read(&p("header.txt")).unwrap(), header);
            let failed = restore(&tree, files);
            if order == "root first" {
                assert_eq!(failed, Vec::<String>::new(), "{name}");
            } else {
                assert!(
                    failed
                        .iter()
                        .all(|f| f.starts_with("/chunks/") && f.contains("no world yet")),
                    "{name}: {failed:?}"
                );
                assert_eq!(restore(&tree, files), Vec::<String>::new(), "{name}");
            }
            assert!(
                files_of(&tree) == backup,
                "{name}, {order}: restore differs"
            );
            drop(tree);
            let report = Disk::open(&path, false).unwrap().check().unwrap();
            assert!(report.disk_crc_ok && report.bad_entry_crcs.is_empty());
            assert!(
                files_of(&open(&path)) == backup,
                "{name}, {order}: after reopening"
            );
        }
    }
}

#[test]
fn an_inventory_written_before_the_player_json_makes_it() {
    let dir = tempfile::tempdir().unwrap();
    state_dir();
    let path = dir.path().join("p");
    std::fs::write(&path, "name = \"Bob\"\nkind = player\n").unwrap();
    let tree = open(&path);
    assert!(tree.read(&p("inventory")).is_err());
    tree.write(&p("inventory"), b"basegame:1 3\n").unwrap();
    assert!(text(&tree, "inventory").contains("basegame:1 3\n"));
    let info = text(&tree, "savegameinfo.json");
    assert!(info.contains("\"itm\": \"basegame:1\""), "{info}");
}

#[test]
fn only_a_header_text_makes_a_new_disk() {
    let dir = tempfile::tempdir().unwrap();
    state_dir();
    let opened = |path: &Path| {
        TvdaTree::open(
            path,
            &Options {
                read_only: false,
                cache_bytes: 1 << 20,
            },
        )
        .map(drop)
    };
    assert!(opened(&dir.path().join("missing")).is_err());
    assert!(!dir.path().join("missing").exists());
    for (name, content) in [
        ("empty", &b""[..]),
        ("bad", b"name = \"x\"\nkind = elf\n"),
        ("text", b"just some notes\n"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let err = opened(&path).unwrap_err();
        if name == "bad" {
            assert!(
                err.message().contains("line 2, column 8"),
                "{}",
                err.message()
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), content, "{name} was changed");
    }
}

#[test]
fn tevd_samples_mount_as_their_folders() {
    for name in [TEVD_V3, TEVD_V2, TEVD_V3_OLD] {
        let c = copy_of(&samples::path(name));
        let before = std::fs::read(&c.path).unwrap();
        let tree = TevdTree::open(&c.path, false).unwrap();
        let mut files = Vec::new();
        walk(&tree, "", &mut files);
        assert!(!files.is_empty(), "{name}");
        for f in &files {
            let data = tree.read(&p(f)).unwrap();
            tree.write(&p(f), &data).unwrap();
        }
        assert_eq!(std::fs::read(&c.path).unwrap(), before, "{name}");
        tree.mkdir(&p("new")).unwrap();
        tree.write(&p("new/a.txt"), b"hello").unwrap();
        tree.rename(&p("new/a.txt"), &p("b.txt")).unwrap();
        assert_eq!(text(&tree, "b.txt"), "hello");
        tree.rmdir(&p("new")).unwrap();
        tree.remove(&p(&files[0])).unwrap();
        drop(tree);
        let tree = TevdTree::open(&c.path, true).unwrap();
        assert_eq!(text(&tree, "b.txt"), "hello");
        assert!(tree.stat(&p("new")).is_err());
        assert!(tree.stat(&p(&files[0])).is_err());
        assert_eq!(
            tree.write(&p("b.txt"), b"x").unwrap_err().errno(),
            libc::EROFS
        );
    }
}
