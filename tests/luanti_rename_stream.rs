//! Issue 13, renames of `index/` over many blocks: the rename holds a bounded number of
//! blobs whatever the number of blocks it changes (each re-encoded block is streamed into the
//! open transaction, not kept until the commit), and a rename that fails midway changes
//! nothing.
//!
//! Memory is measured with a counting allocator (this binary's global allocator): the most
//! bytes the process held at once during the rename, beyond what it held before. Tests of
//! this binary run one at a time, so another test's allocations are not counted.

#[allow(dead_code)]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::maps::{block_pos, read_blocks};
use common::scratch;
use worldfs::luanti::cache::{new_block, EDIT_JOB, EDIT_JOBS_PER_WORKER};
use worldfs::luanti::codec::block::{BlockPos, MapBlock};
use worldfs::luanti::codec::{decode_block, encode_block};
use worldfs::luanti::store::map::MapStore;
use worldfs::luanti::tree::LuantiTree;
use worldfs::vfs::tree::{Options, Tree};

/// The system allocator, counting the bytes held now and the most held since a reset.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let grown = new_size - layout.size();
                let now = HELD.fetch_add(grown, Ordering::Relaxed) + grown;
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                HELD.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time (the counts are the whole process's).
static ONE: Mutex<()> = Mutex::new(());

fn p(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn open(map: &Path) -> LuantiTree {
    scratch::state_dir();
    LuantiTree::open(
        map,
        &Options {
            read_only: false,
            cache_bytes: 32 << 20,
        },
    )
    .expect("the map opens")
}

/// A block mostly of `name`, with light and param2 that do not compress: its blob is
/// about 8 KiB, as a block full of varied nodes is.
fn noisy_block(seed: u64, name: &str) -> MapBlock {
    let mut b = new_block();
    b.names = vec![name.to_string(), "test:other".to_string()];
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..b.content.len() {
        let r = next();
        b.content[i] = u16::from(i % 5 == 0);
        b.param1[i] = r as u8;
        b.param2[i] = (r >> 8) as u8;
    }
    b
}

/// A new map.sqlite holding `blocks` at x = 0, 1, …; its path.
fn map_of(dir: &Path, blocks: impl Iterator<Item = MapBlock>) -> PathBuf {
    let path = dir.join("map.sqlite");
    rusqlite::Connection::open(&path)
        .and_then(|c| c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", []))
        .expect("a map database");
    let changes: Vec<_> = blocks
        .enumerate()
        .map(|(i, b)| {
            let at = BlockPos {
                x: (i % 2000) as i16,
                y: (i / 2000) as i16,
                z: 0,
            };
            (at, Some(encode_block(&b).expect("encodes")))
        })
        .collect();
    MapStore::open(&path, false)
        .expect("writer")
        .commit(&changes)
        .expect("commit");
    path
}

fn all_blobs(map: &Path) -> BTreeMap<BlockPos, Vec<u8>> {
    read_blocks(map)
        .into_iter()
        .map(|(key, blob)| (block_pos(key), blob))
        .collect()
}

/// A rename changes every block of a map many times larger than what the rename may hold
/// (its jobs in flight, each blob read and re-encoded): the most the process held at once
/// during the rename stays within that bound. (All changed blobs used to be held until
/// the one commit.)
#[test]
fn a_rename_over_many_blocks_holds_a_bounded_number_of_blobs() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let blob = encode_block(&noisy_block(1, "test:a")).unwrap().len();
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .max(2);
    // Jobs in flight, each read and re-encoded, plus room for the decoded blocks.
    let bound = workers * EDIT_JOBS_PER_WORKER * EDIT_JOB * blob * 2 + (4 << 20);
    let count = (bound * 4 / blob).max(3000);
    let dir = tempfile::tempdir().unwrap();
    let map = map_of(
        dir.path(),
        (0..count as u64).map(|i| noisy_block(i, "test:a")),
    );
    let tree = open(&map);
    tree.list(&p(&["index", "nodes", "test:a"]), 0, &mut |_| true)
        .expect("the question");

    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    tree.rename(
        &p(&["index", "nodes", "test:a"]),
        &p(&["index", "nodes", "test:b"]),
    )
    .expect("the rename");
    let most = PEAK.load(Ordering::Relaxed) - before;
    assert!(
        most <= bound,
        "the rename of {count} blocks ({} MiB of blobs) held {} MiB at once; at most {} MiB \
         are allowed",
        (count * blob) >> 20,
        most >> 20,
        bound >> 20
    );
    drop(tree);
    let blobs = all_blobs(&map);
    assert_eq!(blobs.len(), count);
    for (at, b) in blobs {
        let mut names = decode_block(&b).expect("decodes").names;
        names.sort();
        assert_eq!(names, ["test:b", "test:other"], "block {at:?}");
    }
}

/// A block whose re-encoded form would be too large (its node names then pass the 12 MiB a
/// block may decompress to) fails the rename when the workers reach it, after the blocks
/// before it were streamed into the transaction: nothing changes, the answer is still
/// true, and the next rename goes through.
#[test]
fn a_rename_that_fails_midway_changes_nothing() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    // 193 names of 65,004 bytes: 12.55 MB decompressed, under the 12 MiB bound; renaming
    // its test:a to a name of 65,535 bytes takes it over.
    let mut huge = new_block();
    huge.names = vec!["test:a".to_string()];
    for i in 0..193u16 {
        huge.names
            .push(format!("test:{i:05}{}", "n".repeat(64_993)));
        huge.content[usize::from(i) + 1] = i + 1;
    }
    let count = 3000;
    let mut blocks: Vec<MapBlock> = (0..count).map(|i| noisy_block(i, "test:a")).collect();
    blocks.push(huge);
    blocks.extend((0..100).map(|i| noisy_block(i, "test:a")));
    let dir = tempfile::tempdir().unwrap();
    let map = map_of(dir.path(), blocks.into_iter());
    let before = all_blobs(&map);
    let tree = open(&map);
    let listed = |tree: &LuantiTree, name: &str| {
        let mut n = 0;
        match tree.list(&p(&["index", "nodes", name]), 0, &mut |_| {
            n += 1;
            true
        }) {
            Ok(()) => n,
            Err(_) => 0,
        }
    };
    assert_eq!(listed(&tree, "test:a"), count as usize + 101);
    let scans = tree.index().scans();

    let long = format!("test:{}", "b".repeat(65_530));
    let e = tree
        .rename(
            &p(&["index", "nodes", "test:a"]),
            &p(&["index", "nodes", &long]),
        )
        .unwrap_err();
    assert!(e.message().contains("decompress"), "{e}");
    assert_eq!(all_blobs(&map), before, "the failed rename changed the map");
    assert_eq!(listed(&tree, "test:a"), count as usize + 101);
    assert_eq!(
        tree.index().scans(),
        scans,
        "the answer was kept: nothing changed"
    );

    tree.rename(
        &p(&["index", "nodes", "test:a"]),
        &p(&["index", "nodes", "test:c"]),
    )
    .expect("the next rename");
    assert_eq!(listed(&tree, "test:a"), 0);
    assert_eq!(listed(&tree, "test:c"), count as usize + 101);
    assert_eq!(
        tree.index().scans(),
        scans,
        "the answer followed the rename"
    );
    drop(tree);
    for (at, b) in all_blobs(&map) {
        let names = decode_block(&b).expect("decodes").names;
        assert!(names.iter().any(|n| n == "test:c"), "block {at:?}");
        assert!(names.iter().all(|n| n != "test:a"), "block {at:?}");
    }
}
