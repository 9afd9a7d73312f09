//! `readonly_backend`: an engine world whose blocks are in the seed database
//! `readonly/map.sqlite`, the main map holding a few of them. worldfs shows what the engine
//! loads (the main map's block, else the seed's, also where the main row is empty), lists
//! both, refuses changes of blocks only the seed holds, and an edit of a main-map block is
//! seen by the engine (`probe.sh`).

#[allow(dead_code)]
mod common;

use std::path::Path;

use common::engine::{mkworld, probe, ENGINE_RUNS};
use rusqlite::{params, Connection};
use worldfs::luanti::codec::block::BlockPos;
use worldfs::luanti::store::map::{pos_to_int, MapStore};
use worldfs::luanti::store::write_back::WINDOW;
use worldfs::luanti::tree::LuantiTree;
use worldfs::vfs::tree::{Options, Tree};

fn p(path: &str) -> Vec<String> {
    path.split('/').map(str::to_string).collect()
}

fn blocks(store: &MapStore, page: usize) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let rows = store.list(after, page, true).unwrap();
        let Some(last) = rows.last() else { break };
        after = last.key;
        out.extend(
            rows.into_iter()
                .map(|l| (pos_to_int(l.pos), l.data.unwrap())),
        );
    }
    out
}

fn rows(map: &Path) -> Vec<(i64, Vec<u8>)> {
    let c = Connection::open(map).unwrap();
    let mut stmt = c
        .prepare("SELECT pos, data FROM blocks ORDER BY pos")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    rows
}

#[test]
fn the_seed_shows_where_the_engine_reads_it_and_stays_unchanged() {
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("w");
    mkworld(&world, 1);
    let all = rows(&world.join("map.sqlite"));
    std::fs::create_dir(world.join("readonly")).unwrap();
    std::fs::rename(world.join("map.sqlite"), world.join("readonly/map.sqlite")).unwrap();
    let seed_before = std::fs::read(world.join("readonly/map.sqlite")).unwrap();
    let home = pos_to_int(BlockPos { x: 0, y: 0, z: 0 });
    let below = pos_to_int(BlockPos { x: 0, y: -1, z: 0 });
    {
        let c = Connection::open(world.join("map.sqlite")).unwrap();
        c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
            .unwrap();
        let data = &all.iter().find(|(k, _)| *k == home).unwrap().1;
        c.execute("INSERT INTO blocks VALUES (?1, ?2)", params![home, data])
            .unwrap();
        // An empty main row: the engine reads the seed's block then.
        c.execute("INSERT INTO blocks VALUES (?1, X'')", params![below])
            .unwrap();
    }
    let mut mt = std::fs::read_to_string(world.join("world.mt")).unwrap();
    mt.push_str("readonly_backend = sqlite3\n");
    std::fs::write(world.join("world.mt"), mt).unwrap();

    let store = MapStore::open(&world, true).unwrap();
    for page in [5, 512] {
        assert!(blocks(&store, page) == all, "pages of {page}");
    }
    drop(store);

    let before = probe(&world, "-16,0,-16", "15,15,15", "2,10,1");
    {
        let tree = open_rw(&world);
        tree.write(
            &p("blocks/0,0,0/meta/2,10,1/fields/infotext"),
            b"main map edit",
        )
        .unwrap();
        tree.sync().unwrap();
        // Blocks only the seed holds are shown without write permission, in a stat and in
        // a listing; the main map's are writable.
        let perm = |path: &str| tree.stat(&p(path)).unwrap().perm;
        assert_eq!(perm("blocks/1,0,0"), 0o555);
        assert_eq!(perm("blocks/1,0,0/nodes.cubeset"), 0o444);
        assert_eq!(perm("blocks/1,0,0/meta"), 0o555);
        assert_eq!(
            perm("blocks/0,-1,0"),
            0o555,
            "an empty main row shows the seed"
        );
        assert_eq!(perm("blocks/0,0,0"), 0o755);
        assert_eq!(perm("blocks/0,0,0/nodes.cubeset"), 0o644);
        let mut listed = std::collections::BTreeMap::new();
        tree.list(&p("blocks"), 0, &mut |e| {
            listed.insert(e.name.clone(), e.stat.perm);
            true
        })
        .unwrap();
        assert_eq!(listed.get("1,0,0"), Some(&0o555));
        assert_eq!(listed.get("0,-1,0"), Some(&0o555));
        assert_eq!(listed.get("0,0,0"), Some(&0o755));
        let mut inside = Vec::new();
        tree.list(&p("blocks/1,0,0"), 0, &mut |e| {
            inside.push(e.stat.perm);
            true
        })
        .unwrap();
        assert!(inside.iter().all(|m| m & 0o222 == 0), "{inside:?}");
        let e = tree.rmdir(&p("blocks/1,0,0")).unwrap_err();
        assert_eq!(e.errno(), libc::EROFS, "{e}");
        assert!(e.message().contains("readonly_backend"), "{e}");
        let e = tree
            .write(&p("blocks/0,-1,0/block.txt"), b"garbage")
            .unwrap_err();
        assert!(e.errno() == libc::EROFS || e.errno() == libc::EINVAL, "{e}");
    }
    {
        // With commits held back (a mount's write-back), a seed block's change is refused
        // at once, whoever asks (root, or a mount whose kernel does not check modes): held
        // back, it would fail every later commit of the main map's blocks.
        let tree = open_rw(&world);
        tree.write_back(WINDOW).unwrap();
        for path in [
            "blocks/1,0,0/nodes.cubeset",
            "blocks/1,0,0/.nodes.cubeset.Xa3k2P",
        ] {
            let e = tree.writable_at(&p(path)).unwrap_err();
            assert_eq!(e.errno(), libc::EROFS, "{path}: {e}");
            assert!(e.message().contains("readonly_backend"), "{e}");
        }
        tree.writable_at(&p("blocks/0,0,0/nodes.cubeset")).unwrap();
        // Removing a seed block's field is refused at the unlink, not when it commits.
        let e = tree
            .check_remove(&p("blocks/1,0,0/meta/0,0,0/fields/infotext"))
            .unwrap_err();
        assert_eq!(e.errno(), libc::EROFS, "{e}");
        let own =
            String::from_utf8(tree.read(&p("blocks/1,0,0/block.txt")).unwrap().to_vec()).unwrap();
        let edited: String = own
            .lines()
            .map(|l| match l.starts_with("timestamp =") {
                true => "timestamp = 123456\n".to_string(),
                false => format!("{l}\n"),
            })
            .collect();
        assert_ne!(own, edited, "the test's edit");
        let e = tree
            .write(&p("blocks/1,0,0/block.txt"), edited.as_bytes())
            .unwrap_err();
        assert_eq!(e.errno(), libc::EROFS, "{e}");
        tree.write(
            &p("blocks/0,0,0/meta/2,10,1/fields/infotext"),
            b"main map edit again",
        )
        .unwrap();
        tree.sync().unwrap();
    }
    assert_eq!(
        std::fs::read(world.join("readonly/map.sqlite")).unwrap(),
        seed_before,
        "the seed is never written"
    );
    let after = probe(&world, "-16,0,-16", "15,15,15", "2,10,1");
    assert!(
        after.contains("field infotext=\"main map edit again\""),
        "{after}"
    );
    let counts = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("count "))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&before), counts(&after));
}

/// The world's tree, read-write.
fn open_rw(world: &Path) -> LuantiTree {
    LuantiTree::open(
        world,
        &Options {
            read_only: false,
            cache_bytes: 4 << 20,
        },
    )
    .unwrap()
}
