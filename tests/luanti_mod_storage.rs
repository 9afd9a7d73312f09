//! Mod storage: mod_storage.sqlite and the files backend, on the real sample and on a world
//! the real engine (minetest-server 5.6.1) generates; the engine migrates what worldfs wrote
//! between the two backends and the entries stay the same.

use std::collections::BTreeMap;
#[allow(dead_code)]
mod common;

use worldfs::luanti::store::mod_storage::ModStorage;
use worldfs::luanti::store::mod_storage::ModStorageBackend;
use worldfs::luanti::store::mod_storage_files::FilesModStorage;
use worldfs::luanti::store::mod_storage_sqlite::SqliteModStorage;
use worldfs::luanti::store::world_mt::WorldMt;

use common::engine::{migrate, mkworld_with};
use common::samples;

type Dump = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn dump(store: &ModStorage) -> Dump {
    let mut out = Dump::new();
    for modname in store.list_mods().unwrap() {
        for key in store.list_keys(&modname).unwrap() {
            let value = store.read(&modname, &key).unwrap();
            out.insert((modname.clone(), key), value);
        }
    }
    out
}

#[test]
fn sample_database_entries_read_write_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mod_storage.sqlite");
    std::fs::copy(samples::path(samples::MTDB_MOD_STORAGE), &db).unwrap();
    let mut store = ModStorage::new(SqliteModStorage::open(&db, false).unwrap());
    assert_eq!(store.list_mods().unwrap(), ["i3"]);
    assert_eq!(
        store.list_keys("i3").unwrap(),
        [b"data".to_vec(), b"pdata".to_vec()]
    );
    let value = store.read("i3", b"data").unwrap();
    assert_eq!(
        value,
        b"return {[\"singleplayer\"] = {[\"waypoints\"] = {}}}"
    );

    let before = std::fs::read(&db).unwrap();
    let e = store.create("i3", b"data", b"x").unwrap_err();
    assert_eq!(e.errno(), libc::EEXIST);
    assert_eq!(
        store.read("nomod", b"data").unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(
        store.delete("i3", b"nokey").unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "a failed call changed the database"
    );

    store.write("i3", b"data", b"changed\n").unwrap();
    store
        .create("newmod", b"\xff/key", b"\x00\x01binary")
        .unwrap();
    assert_eq!(store.read("i3", b"data").unwrap(), b"changed\n");
    assert_eq!(
        store.read("newmod", b"\xff/key").unwrap(),
        b"\x00\x01binary"
    );
    assert_eq!(store.list_mods().unwrap(), ["i3", "newmod"]);
    store.delete("i3", b"pdata").unwrap();
    assert_eq!(store.list_keys("i3").unwrap(), [b"data".to_vec()]);
    let rows: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM entries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 2);
}

#[test]
fn keys_stored_as_text_are_found_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("mod_storage.sqlite");
    let mut store = SqliteModStorage::open_or_create(&db).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "INSERT INTO entries VALUES ('m', 'textkey', 'textvalue')",
            [],
        )
        .unwrap();
    assert_eq!(store.read("m", b"textkey").unwrap(), b"textvalue");
    store.write("m", b"textkey", b"new").unwrap();
    assert_eq!(store.list_keys("m").unwrap(), [b"textkey".to_vec()]);
    assert_eq!(store.read("m", b"textkey").unwrap(), b"new");
    store.delete("m", b"textkey").unwrap();
    assert!(store.list_mods().unwrap().is_empty());
}

#[test]
fn engine_migrates_what_both_backends_stored() {
    let dir = tempfile::tempdir().unwrap();
    let world = mkworld_with(dir.path(), "w", "sqlite3", "sqlite3");
    let mt = WorldMt::read(&world).unwrap();
    let mut store = ModStorage::open(&world, &mt, false).unwrap();
    assert_eq!(store.backend(), "sqlite3");
    assert_eq!(
        store.read("mkworld", b"greeting").unwrap(),
        b"hello storage"
    );
    store
        .write("mkworld", b"greeting", b"edited\nin two lines")
        .unwrap();
    store
        .create("mkworld", b"quote\"key", b"tab\there")
        .unwrap();
    store.create("othermod", b"k", b"").unwrap();
    let expected = dump(&store);
    assert_eq!(expected.len(), 3);
    drop(store);

    // sqlite3 → files by the engine: its JSON files hold exactly our entries.
    migrate(&world, "mod-storage", "files");
    let mt = WorldMt::read(&world).unwrap();
    let mut store = ModStorage::open(&world, &mt, false).unwrap();
    assert_eq!(store.backend(), "files");
    assert_eq!(dump(&store), expected);

    // Edits through the files backend, then files → sqlite3 by the engine.
    store.write("othermod", b"k", "v\u{e9}".as_bytes()).unwrap();
    store.delete("mkworld", b"quote\"key").unwrap();
    let e = store.write("othermod", b"bin", b"\xff").unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    store.create("third", b"n", b"1").unwrap();
    let expected = dump(&store);
    assert_eq!(expected.len(), 3);
    drop(store);
    // The engine merges into an existing database: remove the one left from before.
    std::fs::remove_file(world.join("mod_storage.sqlite")).unwrap();
    migrate(&world, "mod-storage", "sqlite3");
    let store =
        ModStorage::new(SqliteModStorage::open(&world.join("mod_storage.sqlite"), true).unwrap());
    assert_eq!(dump(&store), expected);
}

#[test]
fn files_backend_reads_scalars_like_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("m"),
        br#"{"n":12,"b":true,"z":null,"s":"x"}"#,
    )
    .unwrap();
    std::fs::write(dir.path().join(".m.worldfs-tmp"), b"junk").unwrap();
    let store = FilesModStorage::new(dir.path());
    assert_eq!(store.list_mods().unwrap(), ["m"]);
    assert_eq!(store.read("m", b"n").unwrap(), b"12");
    assert_eq!(store.read("m", b"b").unwrap(), b"true");
    assert_eq!(store.read("m", b"z").unwrap(), b"");
    assert_eq!(store.read("m", b"s").unwrap(), b"x");
    assert!(store.read("../m", b"s").is_err());
}
