//! Redis maps against a real `redis-server` (the one `scripts/test` starts, or one of the
//! test's own): an engine world's blocks put in a hash by the test's own client read as the
//! SQLite original; edits through the tree, read back by the test's own client into a
//! `map.sqlite`, are judged by the engine (`probe.sh`); a listing larger than the window
//! stays ordered and complete; a server that is down, gone, or changed by another writer
//! during a commit; the password never shown.

#[allow(dead_code)]
mod common;

use std::path::Path;

use common::engine::{mkworld, probe, ENGINE_RUNS};
use common::redis_server::{unique_hash, Redis};
use redis::Commands;
use rusqlite::{params, Connection};
use worldfs::luanti::codec::block::BlockPos;
use worldfs::luanti::store::map::{pos_to_int, MapStore};
use worldfs::luanti::store::map_redis::WINDOW;
use worldfs::luanti::tree::LuantiTree;
use worldfs::vfs::tree::{Options, Tree};

fn p(path: &str) -> Vec<String> {
    path.split('/').map(str::to_string).collect()
}

fn open_tree(world: &Path, read_only: bool) -> LuantiTree {
    LuantiTree::open(
        world,
        &Options {
            read_only,
            cache_bytes: 4 << 20,
        },
    )
    .unwrap()
}

/// A world folder whose `world.mt` names the hash on `server`.
fn redis_world(dir: &Path, server: &Redis, hash: &str, extra: &str) -> std::path::PathBuf {
    let world = dir.join(hash);
    std::fs::create_dir_all(&world).unwrap();
    std::fs::write(
        world.join("world.mt"),
        format!(
            "gameid = minetest\nbackend = redis\nredis_address = {}\nredis_hash = {hash}\n{extra}",
            server.socket.display()
        ),
    )
    .unwrap();
    world
}

/// Every block of a map: position and bytes, sorted.
fn blocks(store: &MapStore, page: usize) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut after = 0;
    let mut last_key = 0;
    loop {
        let rows = store.list(after, page, true).unwrap();
        let Some(last) = rows.last() else { break };
        after = last.key;
        for l in rows {
            assert!(l.key > last_key, "listing keys increase");
            last_key = l.key;
            out.push((pos_to_int(l.pos), l.data.unwrap()));
        }
    }
    out
}

fn sqlite_rows(map: &Path) -> Vec<(i64, Vec<u8>)> {
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
fn an_engine_world_in_redis_reads_as_the_original_and_edits_are_seen_by_the_engine() {
    let _engine = ENGINE_RUNS.lock().unwrap_or_else(|e| e.into_inner());
    let server = Redis::shared();
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("sqlite");
    mkworld(&original, 1);
    let rows = sqlite_rows(&original.join("map.sqlite"));
    assert!(rows.len() > 100);
    let hash = unique_hash("engine");
    let mut client = server.client();
    for (pos, data) in &rows {
        let _: () = client
            .hset(&hash, pos.to_string(), data.as_slice())
            .unwrap();
    }
    let world = redis_world(dir.path(), &server, &hash, "");

    let store = MapStore::open(&world, true).unwrap();
    assert_eq!(store.count().unwrap() as usize, rows.len());
    assert!(
        blocks(&store, 7) == rows,
        "every block, in order, the same bytes"
    );
    drop(store);

    {
        let tree = open_tree(&world, false);
        let sqlite_tree = open_tree(&original, true);
        assert_eq!(
            tree.read(&p("blocks/0,0,0/block.txt")).unwrap(),
            sqlite_tree.read(&p("blocks/0,0,0/block.txt")).unwrap()
        );
        tree.write(
            &p("blocks/0,0,0/meta/2,10,1/fields/infotext"),
            b"written through worldfs on Redis",
        )
        .unwrap();
        tree.rmdir(&p("blocks/0,-1,0")).unwrap();
        tree.sync().unwrap();
    }
    let stored: Vec<(Vec<u8>, Vec<u8>)> = client.hgetall(&hash).unwrap();
    assert_eq!(stored.len(), rows.len() - 1);
    assert!(!stored.iter().any(|(k, _)| k
        == pos_to_int(BlockPos { x: 0, y: -1, z: 0 })
            .to_string()
            .as_bytes()));

    // The hash migrated back to SQLite by our own client, judged by the engine.
    let judged = dir.path().join("judged");
    std::fs::create_dir(&judged).unwrap();
    for f in ["world.mt", "env_meta.txt", "map_meta.txt"] {
        if original.join(f).exists() {
            std::fs::copy(original.join(f), judged.join(f)).unwrap();
        }
    }
    let c = Connection::open(judged.join("map.sqlite")).unwrap();
    c.execute("CREATE TABLE blocks (pos INT PRIMARY KEY, data BLOB)", [])
        .unwrap();
    for (k, v) in &stored {
        let pos: i64 = std::str::from_utf8(k).unwrap().parse().unwrap();
        c.execute("INSERT INTO blocks VALUES (?1, ?2)", params![pos, v])
            .unwrap();
    }
    drop(c);
    let seen = probe(&judged, "-16,0,-16", "15,15,15", "2,10,1");
    assert!(
        seen.contains("field infotext=\"written through worldfs on Redis\""),
        "{seen}"
    );
    let _: () = client.del(&hash).unwrap();
}

#[test]
fn a_listing_larger_than_the_window_is_ordered_and_complete() {
    let server = Redis::shared();
    let dir = tempfile::tempdir().unwrap();
    let hash = unique_hash("window");
    let mut client = server.client();
    let n = WINDOW + 1000;
    let mut want = Vec::new();
    let mut pipe = redis::pipe();
    for i in 0..n {
        let pos = BlockPos {
            x: (i % 4000) as i16 - 2000,
            y: (i / 4000) as i16 - 10,
            z: 7,
        };
        want.push(pos_to_int(pos));
        pipe.hset(&hash, pos_to_int(pos).to_string(), vec![(i % 251) as u8])
            .ignore();
    }
    // Fields the engine never loads are left out.
    pipe.hset(&hash, "007", "x").ignore();
    pipe.hset(&hash, "not a block", "x").ignore();
    let _: () = pipe.query(&mut client).unwrap();
    want.sort();
    let world = redis_world(dir.path(), &server, &hash, "");
    let store = MapStore::open(&world, true).unwrap();
    let got: Vec<i64> = blocks(&store, 512).into_iter().map(|(k, _)| k).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want);
    assert_eq!(store.out_of_range().unwrap(), 2);
    let _: () = client.del(&hash).unwrap();
}

#[test]
fn a_server_that_is_down_at_open_is_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let world = dir.path().join("w");
    std::fs::create_dir(&world).unwrap();
    std::fs::write(
        world.join("world.mt"),
        format!(
            "backend = redis\nredis_address = {}/nothing.sock\nredis_hash = h\nredis_password = hunter2secret\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let e = MapStore::open(&world, true).err().unwrap();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(e.message().contains("nothing.sock"), "{e}");
    assert!(!e.to_string().contains("hunter2secret"), "{e}");

    // A server that wants another password.
    let server = Redis::own();
    let mut client = server.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right-one")
        .query(&mut client)
        .unwrap();
    let world = redis_world(dir.path(), &server, "h", "redis_password = hunter2secret\n");
    let e = MapStore::open(&world, true).err().unwrap();
    assert!(!e.to_string().contains("hunter2secret"), "{e}");
    let world = redis_world(dir.path(), &server, "h2", "redis_password = right-one\n");
    let store = MapStore::open(&world, true).unwrap();
    assert_eq!(store.count().unwrap(), 0);
    let info = store
        .describe()
        .into_iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!info.contains("right-one"), "{info}");
    assert!(info.contains("hash h2"), "{info}");
}

#[test]
fn a_server_that_goes_away_fails_calls_with_eio_then_is_reconnected() {
    let mut server = Redis::own();
    let dir = tempfile::tempdir().unwrap();
    let world = redis_world(dir.path(), &server, "h", "");
    let store = MapStore::open(&world, false).unwrap();
    let at = BlockPos { x: 1, y: 2, z: 3 };
    store.commit(&[(at, Some(b"one".to_vec()))]).unwrap();
    assert_eq!(store.get(at).unwrap(), Some(b"one".to_vec()));
    server.stop();
    assert_eq!(store.get(at).unwrap_err().errno(), libc::EIO);
    assert_eq!(
        store
            .commit(&[(at, Some(b"two".to_vec()))])
            .unwrap_err()
            .errno(),
        libc::EIO
    );
    server.restart();
    let mut client = server.client();
    let _: () = client
        .hset("h", pos_to_int(at).to_string(), "three")
        .unwrap();
    assert_eq!(store.get(at).unwrap(), Some(b"three".to_vec()));
    store.commit(&[(at, Some(b"four".to_vec()))]).unwrap();
    let v: Vec<u8> = client.hget("h", pos_to_int(at).to_string()).unwrap();
    assert_eq!(v, b"four");
}

#[test]
fn a_commit_another_writer_interrupts_writes_nothing() {
    let server = Redis::shared();
    let dir = tempfile::tempdir().unwrap();
    let hash = unique_hash("race");
    let world = redis_world(dir.path(), &server, &hash, "");
    let store = MapStore::open(&world, false).unwrap();
    let (a, b) = (BlockPos { x: 0, y: 0, z: 0 }, BlockPos { x: 1, y: 0, z: 0 });
    store
        .commit(&[(a, Some(b"a0".to_vec())), (b, Some(b"b0".to_vec()))])
        .unwrap();
    let mut other = server.client();
    let e = store
        .commit_selected(vec![(a, Some(b"a1".to_vec())), (b, None)], |_, changes| {
            let _: () = other.hset(&hash, "-5", "theirs").unwrap();
            Ok(changes)
        })
        .unwrap_err();
    assert_eq!(e.errno(), libc::EAGAIN, "{e}");
    assert_eq!(store.get(a).unwrap(), Some(b"a0".to_vec()));
    assert_eq!(store.get(b).unwrap(), Some(b"b0".to_vec()));
    store
        .commit(&[(a, Some(b"a1".to_vec())), (b, None)])
        .unwrap();
    assert_eq!(store.get(a).unwrap(), Some(b"a1".to_vec()));
    assert_eq!(store.get(b).unwrap(), None);
    let _: () = other.del(&hash).unwrap();
}
