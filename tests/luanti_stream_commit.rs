//! Issue 13, streamed commits (`MapStore::commit_stream`, what a rename of `index/` commits
//! through) on every map backend: blobs put into the open transaction are committed together
//! when it succeeds, none of them when it fails midway (or when another writer interferes,
//! on Redis), reads inside it see the store as it was, and a block of a `readonly_backend`
//! cannot be put.

#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};

use common::postgres::database;
use common::redis_server::Redis;
use redis::Commands;
use worldfs::error::Error;
use worldfs::luanti::codec::block::BlockPos;
use worldfs::luanti::store::map::{pos_to_int, MapStore, Stream};

fn pos(x: i16, y: i16, z: i16) -> BlockPos {
    BlockPos { x, y, z }
}

fn sqlite_map(dir: &Path, schema: &str) -> PathBuf {
    let path = dir.join("map.sqlite");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(schema)
        .unwrap();
    path
}

fn world(dir: &Path, mt: &str) -> PathBuf {
    std::fs::write(dir.join("world.mt"), format!("gameid = minetest\n{mt}")).unwrap();
    dir.to_path_buf()
}

/// `(a, b)`: the two blocks every check starts from.
const A: BlockPos = BlockPos { x: 0, y: 0, z: 0 };
const B: BlockPos = BlockPos { x: -3, y: 7, z: 1 };
const C: BlockPos = BlockPos { x: 5, y: -2, z: 9 };

fn get(store: &MapStore, at: BlockPos) -> Option<Vec<u8>> {
    store.get(at).unwrap()
}

/// The checks every backend passes (`name` says which in failures).
fn streams(name: &str, source: &Path) {
    let store = MapStore::open(source, false).unwrap();
    store
        .commit(&[(A, Some(b"a0".to_vec())), (B, Some(b"b0".to_vec()))])
        .unwrap();

    // Puts are committed together; reads inside see the store as it was.
    store
        .commit_stream(Box::new(|s: &mut dyn Stream| {
            assert_eq!(s.get(A)?, Some(b"a0".to_vec()), "{name}");
            s.put(A, b"a1")?;
            assert_eq!(
                s.get(A)?,
                Some(b"a0".to_vec()),
                "{name}: a put is not seen yet"
            );
            assert_eq!(s.get(C)?, None, "{name}");
            s.put(C, b"c1")
        }))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(get(&store, A), Some(b"a1".to_vec()), "{name}");
    assert_eq!(get(&store, B), Some(b"b0".to_vec()), "{name}");
    assert_eq!(get(&store, C), Some(b"c1".to_vec()), "{name}");

    // A failure midway changes nothing, whatever was put before it.
    let many: Vec<BlockPos> = (0..3000).map(|i| pos(i % 100, i / 100, -7)).collect();
    let e = store
        .commit_stream(Box::new(|s: &mut dyn Stream| {
            s.put(A, b"a2")?;
            s.put(B, b"b2")?;
            for p in &many {
                s.put(*p, &[7u8; 1000])?;
            }
            Err(Error::invalid("injected failure"))
        }))
        .unwrap_err();
    assert_eq!(e.message(), "injected failure", "{name}");
    assert_eq!(get(&store, A), Some(b"a1".to_vec()), "{name}");
    assert_eq!(get(&store, B), Some(b"b0".to_vec()), "{name}");
    assert!(many.iter().all(|p| get(&store, *p).is_none()), "{name}");

    // The next stream works (nothing of the failed one is left), many blobs included.
    store
        .commit_stream(Box::new(|s: &mut dyn Stream| {
            s.put(B, b"b3")?;
            for (i, p) in many.iter().enumerate() {
                s.put(*p, &vec![i as u8; 1000 + i])?;
            }
            Ok(())
        }))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(get(&store, B), Some(b"b3".to_vec()), "{name}");
    for (i, p) in many.iter().enumerate() {
        assert_eq!(get(&store, *p), Some(vec![i as u8; 1000 + i]), "{name}");
    }
    drop(store);

    let ro = MapStore::open(source, true).unwrap();
    let e = ro
        .commit_stream(Box::new(|s: &mut dyn Stream| s.put(A, b"a4")))
        .unwrap_err();
    assert_eq!(e.errno(), libc::EROFS, "{name}");
}

#[test]
fn sqlite_maps_of_both_schemas_stream() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_map(
        dir.path(),
        "CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)",
    );
    streams("sqlite pos", &path);
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_map(
        dir.path(),
        "CREATE TABLE blocks (x INTEGER, y INTEGER, z INTEGER, data BLOB NOT NULL, \
         PRIMARY KEY (x, z, y))",
    );
    streams("sqlite x,y,z", &path);
}

/// SQLite: the failure may also come at the commit, when the streamed blocks are copied into
/// `blocks` (here a trigger refuses one): nothing changes.
#[test]
fn a_sqlite_stream_that_fails_at_its_copy_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_map(
        dir.path(),
        "CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)",
    );
    let store = MapStore::open(&path, false).unwrap();
    store.commit(&[(A, Some(b"a0".to_vec()))]).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "CREATE TRIGGER refuse BEFORE INSERT ON blocks WHEN NEW.pos = {} \
             BEGIN SELECT RAISE(ABORT, 'refused'); END",
            pos_to_int(C)
        ))
        .unwrap();
    let e = store
        .commit_stream(Box::new(|s: &mut dyn Stream| {
            s.put(A, b"a1")?;
            s.put(C, b"c1")
        }))
        .unwrap_err();
    assert!(e.message().contains("refused"), "{e}");
    assert_eq!(get(&store, A), Some(b"a0".to_vec()));
    assert_eq!(get(&store, C), None);
}

#[test]
fn leveldb_maps_stream() {
    let dir = tempfile::tempdir().unwrap();
    streams("leveldb", &world(dir.path(), "backend = leveldb\n"));
}

#[test]
fn postgresql_maps_stream() {
    let dir = tempfile::tempdir().unwrap();
    let mt = format!("backend = postgresql\npgsql_connection = {}\n", database());
    streams("postgresql", &world(dir.path(), &mt));
}

fn redis_world(dir: &Path, server: &Redis, hash: &str) -> PathBuf {
    let mt = format!(
        "backend = redis\nredis_address = {}\nredis_hash = {hash}\n",
        server.socket.display()
    );
    world(dir, &mt)
}

fn unique_hash(what: &str) -> String {
    format!(
        "stream-{what}-{}-{:?}",
        std::process::id(),
        std::time::Instant::now()
    )
}

#[test]
fn redis_maps_stream() {
    let server = Redis::shared();
    let dir = tempfile::tempdir().unwrap();
    let hash = unique_hash("checks");
    streams("redis", &redis_world(dir.path(), &server, &hash));
    let _: () = server.client().del(&hash).unwrap();
}

/// Redis: another writer that changes the hash while blobs are queued makes `EXEC` write
/// nothing; the commit fails with `EAGAIN`.
#[test]
fn a_redis_stream_another_writer_interrupts_writes_nothing() {
    let server = Redis::shared();
    let dir = tempfile::tempdir().unwrap();
    let hash = unique_hash("race");
    let store = MapStore::open(&redis_world(dir.path(), &server, &hash), false).unwrap();
    store.commit(&[(A, Some(b"a0".to_vec()))]).unwrap();
    let mut other = server.client();
    let e = store
        .commit_stream(Box::new(|s: &mut dyn Stream| {
            s.put(A, b"a1")?;
            let _: () = other.hset(&hash, "-5", "theirs").unwrap();
            s.put(C, b"c1")
        }))
        .unwrap_err();
    assert_eq!(e.errno(), libc::EAGAIN, "{e}");
    assert_eq!(get(&store, A), Some(b"a0".to_vec()));
    assert_eq!(get(&store, C), None);
    let _: () = other.del(&hash).unwrap();
}

/// `readonly_backend`: reads inside a stream see the read-only map under the main one, and
/// a block read from it cannot be put (nothing changes).
#[test]
fn a_stream_cannot_put_a_block_of_the_readonly_map() {
    let dir = tempfile::tempdir().unwrap();
    let w = world(
        dir.path(),
        "backend = sqlite3\nreadonly_backend = sqlite3\n",
    );
    std::fs::create_dir(w.join("readonly")).unwrap();
    let seed = sqlite_map(
        &w.join("readonly"),
        "CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)",
    );
    MapStore::open(&seed, false)
        .unwrap()
        .commit(&[(B, Some(b"seed".to_vec()))])
        .unwrap();
    sqlite_map(&w, "CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)");
    let store = MapStore::open(&w, false).unwrap();
    store.commit(&[(A, Some(b"a0".to_vec()))]).unwrap();
    let e = store
        .commit_stream(Box::new(|s: &mut dyn Stream| {
            assert_eq!(s.get(B)?, Some(b"seed".to_vec()));
            s.put(A, b"a1")?;
            s.put(B, b"b1")
        }))
        .unwrap_err();
    assert_eq!(e.errno(), libc::EROFS, "{e}");
    assert_eq!(get(&store, A), Some(b"a0".to_vec()));
    assert_eq!(get(&store, B), Some(b"seed".to_vec()));
    store
        .commit_stream(Box::new(|s: &mut dyn Stream| s.put(A, b"a1")))
        .unwrap();
    assert_eq!(get(&store, A), Some(b"a1".to_vec()));
}
