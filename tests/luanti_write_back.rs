//! Issue 11, "Fast: Write-back": closes of block files are grouped into one transaction,
//! committed when the window closes, on fsync, on unmount (`commit_all`) and before what must
//! see the store; every reader sees a close at once; another writer's later change of a
//! pending block is kept. Windows are an hour long here (so nothing commits by itself) except
//! in the one test of the window itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use worldfs::luanti::cache::new_block;
use worldfs::luanti::codec::block::{BlockPos, MapBlock};
use worldfs::luanti::codec::{decode_block, encode_block};
use worldfs::luanti::store::map::pos_to_int;
use worldfs::luanti::store::write_back::Window;
use worldfs::luanti::tree::LuantiTree;
use worldfs::vfs::inodes::ROOT;
use worldfs::vfs::tree::{Options, Tree};
use worldfs::vfs::{OpenMode, Vfs};

const BLOCKS: i16 = 20;

const HOUR: Window = Window {
    quiet: Duration::from_secs(3600),
    longest: Duration::from_secs(3600),
};

fn pos(x: i16) -> BlockPos {
    BlockPos { x, y: 0, z: 0 }
}

fn block_of(name: &str) -> MapBlock {
    let mut b = new_block();
    b.names = vec![name.to_string()];
    b
}

/// A map of [`BLOCKS`] stone blocks along x.
fn map(dir: &Path) -> PathBuf {
    let path = dir.join("map.sqlite");
    let c = Connection::open(&path).unwrap();
    c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
        .unwrap();
    for x in 0..BLOCKS {
        put(&c, pos(x), &block_of("default:stone"));
    }
    path
}

/// What another writer does: stores `block` at `p` in its own transaction.
fn put(c: &Connection, p: BlockPos, block: &MapBlock) {
    c.execute(
        "REPLACE INTO blocks VALUES (?1, ?2)",
        params![pos_to_int(p), encode_block(block).unwrap()],
    )
    .unwrap();
}

/// The block stored at `p`, as a fresh connection sees it.
fn stored(map: &Path, p: BlockPos) -> Option<MapBlock> {
    let c = Connection::open(map).unwrap();
    let blob: Option<Vec<u8>> = c
        .query_row(
            "SELECT data FROM blocks WHERE pos = ?1",
            [pos_to_int(p)],
            |r| r.get(0),
        )
        .ok();
    blob.map(|b| decode_block(&b).unwrap())
}

/// The value of field `k` of node 0,0,0 of a stored block.
fn stored_field(map: &Path, p: BlockPos, k: &str) -> Option<Vec<u8>> {
    let b = stored(map, p)?;
    let m = b.metadata.iter().find(|m| m.pos.index() == 0)?;
    m.vars
        .iter()
        .find(|v| v.key == k.as_bytes())
        .map(|v| v.value.clone())
}

fn field(x: i16, k: &str) -> Vec<String> {
    ["blocks", &format!("{x},0,0"), "meta", "0,0,0", "fields", k]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// A tree of `map` that groups its commits in `window` (none: one transaction per change),
/// with a cache so small that every block read comes from the store or the pending changes.
fn tree(map: &Path, window: Option<Window>) -> LuantiTree {
    let tree = LuantiTree::open(
        map,
        &Options {
            read_only: false,
            cache_bytes: 1,
        },
    )
    .unwrap();
    if let Some(w) = window {
        tree.write_back(w).unwrap();
    }
    tree
}

fn transactions(tree: &LuantiTree) -> u64 {
    tree.blocks().store().transactions()
}

#[test]
fn closes_within_the_window_are_one_transaction_seen_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, Some(HOUR));
    for x in 0..BLOCKS {
        tree.write(&field(x, "k"), format!("v{x}\n").as_bytes())
            .unwrap();
    }
    for x in 0..BLOCKS {
        assert_eq!(
            *tree.read(&field(x, "k")).unwrap(),
            format!("v{x}\n").into_bytes(),
            "the mount shows block {x} as written"
        );
        assert_eq!(stored_field(&map, pos(x), "k"), None, "not committed yet");
    }
    assert_eq!(transactions(&tree), 0);
    tree.sync().unwrap();
    assert_eq!(transactions(&tree), 1, "all closes in one transaction");
    for x in 0..BLOCKS {
        assert_eq!(
            stored_field(&map, pos(x), "k"),
            Some(format!("v{x}").into_bytes())
        );
    }
    tree.sync().unwrap();
    assert_eq!(transactions(&tree), 1, "nothing pending, nothing committed");
}

/// `-o sync`: one transaction per close, each in the store when its close returns.
#[test]
fn without_write_back_each_close_is_its_own_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, None);
    for x in 0..BLOCKS {
        tree.write(&field(x, "k"), b"v\n").unwrap();
        assert_eq!(stored_field(&map, pos(x), "k"), Some(b"v".to_vec()));
    }
    assert_eq!(transactions(&tree), BLOCKS as u64);
}

#[test]
fn bad_input_still_fails_the_close_and_leaves_nothing_pending() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, Some(HOUR));
    let nodes: Vec<String> = ["blocks", "0,0,0", "nodes.cubeset"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let e = tree.write(&nodes, b"not a cubeset\n").unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL, "{e}");
    tree.sync().unwrap();
    assert_eq!(transactions(&tree), 0);
    assert_eq!(stored(&map, pos(0)), Some(block_of("default:stone")));
}

#[test]
fn the_window_closes_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(
        &map,
        Some(Window {
            quiet: Duration::from_millis(20),
            longest: Duration::from_millis(200),
        }),
    );
    tree.write(&field(3, "k"), b"v\n").unwrap();
    let start = Instant::now();
    while stored_field(&map, pos(3), "k").is_none() {
        assert!(start.elapsed() < Duration::from_secs(20), "never committed");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(transactions(&tree), 1);
}

/// fsync of any file (even one not written), fsyncdir and unmount commit what is pending.
#[test]
fn fsync_and_unmount_commit_everything_pending() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = Arc::new(tree(&map, Some(HOUR)));
    let vfs = Vfs::new(tree.clone(), None);
    tree.write(&field(1, "k"), b"one\n").unwrap();
    let (blocks, _) = vfs.lookup(ROOT, "blocks", 0).unwrap();
    let (block, _) = vfs.lookup(blocks, "7,0,0", 0).unwrap();
    let (light, _) = vfs.lookup(block, "block.txt", 0).unwrap();
    let read = OpenMode {
        write: false,
        truncate: false,
        append: false,
    };
    let fh = vfs.open(light, read).unwrap();
    assert_eq!(stored_field(&map, pos(1), "k"), None);
    vfs.fsync(fh).unwrap();
    assert_eq!(stored_field(&map, pos(1), "k"), Some(b"one".to_vec()));
    vfs.release(fh).unwrap();

    tree.write(&field(2, "k"), b"two\n").unwrap();
    vfs.sync().unwrap();
    assert_eq!(stored_field(&map, pos(2), "k"), Some(b"two".to_vec()));

    tree.write(&field(4, "k"), b"four\n").unwrap();
    assert_eq!(vfs.commit_all(), 0);
    assert_eq!(stored_field(&map, pos(4), "k"), Some(b"four".to_vec()));
    assert_eq!(transactions(&tree), 3);
}

/// Blocks made and removed are pending like edits: the mount shows them at once, and a
/// listing of `blocks/` (read from the store) commits them first.
#[test]
fn created_and_deleted_blocks_show_at_once_and_listings_see_them() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, Some(HOUR));
    let path = |x: i16| vec!["blocks".to_string(), format!("{x},0,0")];
    tree.mkdir(&path(100)).unwrap();
    tree.rmdir(&path(0)).unwrap();
    assert!(tree.stat(&path(100)).is_ok());
    assert_eq!(tree.stat(&path(0)).unwrap_err().errno(), libc::ENOENT);
    assert_eq!(tree.mkdir(&path(100)).unwrap_err().errno(), libc::EEXIST);
    assert!(stored(&map, pos(100)).is_none() && stored(&map, pos(0)).is_some());
    let mut names = Vec::new();
    tree.list(&["blocks".to_string()], 0, &mut |e| {
        names.push(e.name);
        true
    })
    .unwrap();
    assert!(names.contains(&"100,0,0".to_string()));
    assert!(!names.contains(&"0,0,0".to_string()));
    assert!(stored(&map, pos(100)).is_some() && stored(&map, pos(0)).is_none());
    assert_eq!(transactions(&tree), 1);
}

/// The rule for another writer: a pending block it changed after our close keeps its
/// version (the later write, which would also have won over an immediate commit of ours);
/// our other pending blocks are committed; nothing of either is lost silently.
#[test]
fn another_writers_later_change_of_a_pending_block_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, Some(HOUR));
    tree.write(&field(1, "k"), b"ours\n").unwrap();
    tree.write(&field(2, "k"), b"ours\n").unwrap();
    let other = Connection::open(&map).unwrap();
    put(&other, pos(1), &block_of("default:water_source"));
    put(&other, pos(5), &block_of("default:sand"));
    tree.sync().unwrap();
    assert_eq!(stored(&map, pos(1)), Some(block_of("default:water_source")));
    assert_eq!(stored_field(&map, pos(2), "k"), Some(b"ours".to_vec()));
    assert_eq!(stored(&map, pos(5)), Some(block_of("default:sand")));
    // The mount shows the other writer's version once it looks again.
    std::thread::sleep(Duration::from_millis(120));
    let nodes = ["blocks", "1,0,0", "nodes.cubeset"].map(String::from);
    let shown = tree.read(&nodes).unwrap();
    assert!(
        String::from_utf8_lossy(&shown).contains("default:water_source"),
        "{}",
        String::from_utf8_lossy(&shown)
    );
}

/// A close after another writer's commit edits what that writer stored, as it would with
/// one transaction per close: seeing the other commit ends the window first.
#[test]
fn a_close_after_another_writers_commit_edits_its_version() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, Some(HOUR));
    tree.write(&field(1, "first"), b"ours\n").unwrap();
    tree.write(&field(2, "first"), b"ours\n").unwrap();
    let other = Connection::open(&map).unwrap();
    put(&other, pos(1), &block_of("default:water_source"));
    // Past the interval at which the tree looks for other writers' commits.
    std::thread::sleep(Duration::from_millis(120));
    tree.write(&field(1, "second"), b"ours\n").unwrap();
    assert_eq!(stored_field(&map, pos(2), "first"), Some(b"ours".to_vec()));
    tree.sync().unwrap();
    let b1 = stored(&map, pos(1)).unwrap();
    assert_eq!(b1.names, vec!["default:water_source".to_string()]);
    assert_eq!(stored_field(&map, pos(1), "second"), Some(b"ours".to_vec()));
    assert_eq!(stored_field(&map, pos(1), "first"), None);
}

/// A final commit that fails (the database locked by another program past the busy
/// timeout) loses the pending blocks when the daemon ends: they are reported as not
/// committed, as text no commit took is, so `worldfs unmount` says so and fails.
#[test]
fn pending_blocks_a_failed_final_commit_leaves_are_reported_not_committed() {
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = Arc::new(tree(&map, Some(HOUR)));
    let vfs = Vfs::new(tree.clone(), None);
    tree.write(&field(3, "k"), b"three\n").unwrap();
    let other = Connection::open(&map).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    assert_eq!(vfs.commit_all(), 1, "the failed commit is counted");
    let unsaved: Vec<String> = vfs
        .save_unsaved(&dir.path().join("unsaved"))
        .into_iter()
        .map(|u| u.path)
        .collect();
    assert_eq!(unsaved, vec!["blocks/3,0,0".to_string()]);
    other.execute_batch("ROLLBACK").unwrap();
}

/// A pending edit then an `rm -r`, an `mv` of its block folder, and a read through another
/// path of the same block: each sees the pending edit, and the commit stores the last of them.
#[test]
fn a_pending_edit_then_a_delete_or_a_move_of_its_block_commits_the_last() {
    let p = |s: &str| -> Vec<String> { s.split('/').map(str::to_string).collect() };
    let dir = tempfile::tempdir().unwrap();
    let map = map(dir.path());
    let tree = tree(&map, Some(HOUR));
    tree.write(&field(1, "k"), b"one\n").unwrap();
    tree.rmdir(&p("blocks/1,0,0")).unwrap();
    tree.write(&field(2, "k"), b"two\n").unwrap();
    tree.rename(&p("blocks/2,0,0"), &p("blocks/40,0,0"))
        .unwrap();
    tree.write(&field(3, "k"), b"three\n").unwrap();
    let listed = {
        let mut names = Vec::new();
        tree.list(&p("blocks/3,0,0/meta/0,0,0/fields"), 0, &mut |e| {
            names.push(e.name);
            true
        })
        .unwrap();
        names
    };
    assert_eq!(listed, vec!["k"]);
    assert!(tree.stat(&p("blocks/1,0,0")).is_err());
    assert_eq!(
        &**tree.read(&field(40, "k")).unwrap(),
        b"two\n",
        "the move took the pending edit"
    );
    tree.sync().unwrap();
    assert!(
        stored(&map, pos(1)).is_none(),
        "the deleted block came back"
    );
    assert!(stored(&map, pos(2)).is_none());
    assert_eq!(stored_field(&map, pos(40), "k"), Some(b"two".to_vec()));
    assert_eq!(stored_field(&map, pos(3), "k"), Some(b"three".to_vec()));
}
